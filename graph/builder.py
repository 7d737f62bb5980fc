"""``graph.Builder``: write graphs by hand, with types inferred as each node is added.

    b = graph.Builder("mlp")
    x = b.input("x", (1, 784))
    w = b.const(np.random.rand(784, 10).astype("float32"), name="w")
    y = b.softmax(b.dense(x, w), axes=[1])
    g = b.build(y)

Every op of :mod:`tensorlang.graph.op_registry` is a method (``b.conv``, ``b.add``, ...), or use
``b.op("conv", [x, w], strides=[2, 2])``. With ``fold=True`` (what the ONNX importer uses), a
node whose inputs are all constants is evaluated with numpy at once and becomes a constant: this
is how static Shape -> Gather -> Concat -> Reshape chains disappear.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import op_registry as R
from . import symbolic as S
from .ir import Graph, GraphError, Node, Value
from .symbolic import fold_symbolic


def _jsonable(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    from .symbolic import dim_text, is_symbolic

    if is_symbolic(v):  # a symbolic dimension (a reshape's target): its text
        return dim_text(v)
    raise GraphError(f"attribute value {v!r} ({type(v).__name__}) is not a number, string or "
                     "list of them")


def normalize_attrs(op: str, in_types: Sequence[R.Type], attrs: dict[str, Any]) -> dict:
    """Fill defaults so that equal computations have equal attributes (workload keys)."""
    a = {k: _jsonable(v) for k, v in attrs.items()}
    if op in ("conv", "max_pool", "avg_pool"):
        nsp = len(in_types[0][0]) - 2
        if nsp < 1:
            raise GraphError(f"{op} needs an input of rank >= 3, got {list(in_types[0][0])}")
        if op == "conv":
            a.setdefault("groups", 1)
        else:
            if "kernel" not in a:
                raise GraphError(f"{op} needs a 'kernel' attribute")
            a["kernel"] = list(a["kernel"])
            a.setdefault("ceil_mode", 0)
            if op == "avg_pool":
                a.setdefault("count_include_pad", 0)
        for key, default in (("strides", 1), ("dilations", 1)):
            v = a.get(key, default)
            a[key] = [v] * nsp if isinstance(v, int) else list(v)
        p = a.get("pads", 0)
        a["pads"] = [p] * (2 * nsp) if isinstance(p, int) else list(p)
        if len(a["pads"]) == nsp:
            a["pads"] = a["pads"] * 2
    if op in ("softmax",) and "axes" not in a:
        a["axes"] = [len(in_types[0][0]) - 1]
    if op == "softmax":
        nd = len(in_types[0][0])
        a["axes"] = sorted(R.norm_axis(x, nd) for x in a["axes"])
        a.setdefault("log", 0)
    if op == "layer_norm":
        a.setdefault("axis", -1)
        a.setdefault("epsilon", 1e-5)
        a["axis"] = R.norm_axis(a["axis"], len(in_types[0][0]))
    if op in ("batch_norm", "instance_norm"):
        a.setdefault("epsilon", 1e-5)
    if op in R.REDUCE_REFS:
        nd = len(in_types[0][0])
        a["axes"] = sorted({R.norm_axis(x, nd) for x in a.get("axes", range(nd))})
        a.setdefault("keepdims", 1)
    if op in ("argmax", "argmin"):
        a.setdefault("axis", 0)
        a["axis"] = R.norm_axis(a["axis"], len(in_types[0][0]))
        a.setdefault("keepdims", 1)
        a.setdefault("select_last_index", 0)
    if op in ("concat", "gather"):
        a.setdefault("axis", 0)
        a["axis"] = R.norm_axis(a["axis"], len(in_types[0][0]))
    if op == "transpose" and "perm" not in a:
        a["perm"] = list(range(len(in_types[0][0])))[::-1]
    if op == "gelu":
        a.setdefault("approximate", "none")
    if op == "cast":
        a["dtype"] = np.dtype(a["dtype"]).name
    return a


class Builder:
    """Builds a :class:`Graph` node by node (see the module docstring)."""

    def __init__(self, name: str = "graph", fold: bool = False) -> None:
        self.name = name
        self.fold = fold
        self._inputs: list[Value] = []
        self._nodes: list[Node] = []
        self._names: set[str] = set()
        self._counter = 0

    def _fresh(self, base: str) -> str:
        base = base or "v"
        name = base
        while name in self._names:
            self._counter += 1
            name = f"{base}_{self._counter}"
        self._names.add(name)
        return name

    def input(self, name: str, shape: Sequence[int], dtype: Any = "float32",
              layout: str = "") -> Value:
        if name in self._names:
            raise GraphError(f"the name {name!r} is already used")
        self._names.add(name)
        v = Value(name, shape, dtype, layout)
        self._inputs.append(v)
        return v

    def const(self, data: Any, name: str = "const", dtype: Any = None) -> Value:
        if isinstance(data, np.ndarray) and data.dtype == object:  # a symbolic shape tensor
            return Value(self._fresh(name), data.shape, dtype or "int64", data=data)
        arr = np.asarray(data, dtype=dtype)
        if arr.dtype == np.float64 and dtype is None and not isinstance(data, np.ndarray):
            arr = arr.astype(np.float32)  # Python floats: the graph's default float type
        return Value(self._fresh(name), arr.shape, arr.dtype, data=arr)

    def op(self, op: str, inputs: Sequence[Value], name: str | None = None,
           outputs: Sequence[str] | None = None, **attrs: Any) -> Value | tuple[Value, ...]:
        """Add ``op(inputs, **attrs)``; returns its output value (a tuple when several)."""
        inputs = list(inputs)
        for v in inputs:
            if not isinstance(v, Value):
                raise TypeError(f"{op}: inputs must be graph values, got {type(v).__name__}")
            if v.data is None and v.producer is None and any(_is_zero(d) for d in v.shape):
                # an empty part of symbolic shape (onnx Split): no node may read it
                raise GraphError(f"{op} node {name or op!r} reads {v.name!r}, an empty tensor "
                                 f"(shape {list(v.shape)}); empty tensors are not supported")
        if any(v.is_symbolic_constant for v in inputs) and not (
                self.fold and all(v.is_constant for v in inputs)):
            # a shape tensor of symbolic dimensions used as data: computed at run time
            inputs = self._run_time_shapes(inputs, op, name)
        in_types = [(v.shape, v.dtype) for v in inputs]
        node_name = self._fresh(name or op)
        attrs = normalize_attrs(op, in_types, attrs)
        out_types = R.infer_types(op, in_types, attrs, node_name)
        layout = inputs[0].layout if inputs and len(out_types[0][0]) == len(inputs[0].shape) \
            else ""
        symbolic = any(v.is_symbolic_constant for v in inputs)
        # an output of symbolic shape (a constant broadcast to the input's size) is computed
        # at run time: a constant's size is fixed
        sized = all(not S.variables(shape) for shape, _ in out_types)
        if self.fold and inputs and all(v.is_constant for v in inputs) and sized and \
                R.get_op(op).ref is not None:
            try:
                arrays = (R.evaluate(op, [v.data for v in inputs], attrs) if not symbolic else
                          fold_symbolic(op, [v.data for v in inputs], attrs, node_name))
            except GraphError:
                if not symbolic:
                    raise
                # what depends on the sizes (a float cast, a comparison): computed at run time
                return self.op(op, self._run_time_shapes(inputs, op, name), name, outputs,
                               **attrs)
            outs = []
            for i, (arr, (shape, dtype)) in enumerate(zip(arrays, out_types)):
                if arr.shape != shape:
                    raise GraphError(f"{op} node {node_name!r}: folded shape {arr.shape} differs "
                                     f"from the inferred {shape}")
                base = outputs[i] if outputs else node_name
                arr = arr if arr.dtype == object else arr.astype(dtype)
                outs.append(Value(self._fresh(base), shape, dtype, data=arr))
            return outs[0] if len(outs) == 1 else tuple(outs)
        empty = [list(shape) for shape, _ in out_types if any(_is_zero(d) for d in shape)]
        if empty:  # a kernel of no elements: the code generators assume loops of >= 1 trip
            raise GraphError(f"{op} node {node_name!r} computes an empty tensor (shape "
                             f"{empty[0]}) at run time; empty tensors are not supported")
        outs = []
        for i, (shape, dtype) in enumerate(out_types):
            base = outputs[i] if outputs and i < len(outputs) else (
                node_name if len(out_types) == 1 else f"{node_name}:{i}")
            outs.append(Value(self._fresh(base), shape, dtype, layout))
        node = Node(node_name, op, inputs, outs, attrs)
        for v in outs:
            v.producer = node
        self._nodes.append(node)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _run_time_shapes(self, inputs: list[Value], op: str, name: str | None) -> list[Value]:
        return [self._shape_values(v, op, name) if v.is_symbolic_constant else v
                for v in inputs]

    def _shape_values(self, v: Value, op: str, name: str | None) -> Value:
        """Symbolic constant ``v`` (a shape tensor holding expressions of shape variables)
        as a value computed at run time, from the sizes of the graph inputs whose dimensions
        are its variables."""
        from .symbolic import dim, dim_text, is_symbolic, variables

        flat = [dim(d) for d in v.data.reshape(-1)]
        carriers: list[Value] = []
        var_dims = []  # [variable, carrier, axis]
        for var in sorted(variables(flat)):
            # an axis that is the variable alone, else one linear in it alone (an input of
            # h_over16 + 16 or 32 * h_div32 rows, from_onnx's solved equations)
            found = next(((inp, axis) for inp in self._inputs
                          for axis, d in enumerate(inp.shape)
                          if is_symbolic(d) and dim_text(d) == var), None) or next(
                ((inp, axis) for inp in self._inputs for axis, d in enumerate(inp.shape)
                 if is_symbolic(d) and variables([d]) == {var} and _linear(d, var)), None)
            if found is None:
                raise GraphError(f"{op} node {name or op!r} reads a value computed from "
                                 f"symbolic dimension {var}, which no graph input has as a "
                                 "dimension of its own: give the inputs' sizes "
                                 "(from_onnx(model, shapes=...))")
            if not any(c is found[0] for c in carriers):
                carriers.append(found[0])
            entry = [var, next(i for i, c in enumerate(carriers) if c is found[0]), found[1]]
            axis_dim = found[0].shape[found[1]]
            var_dims.append(entry if dim_text(axis_dim) == var else [*entry, dim_text(axis_dim)])
        return self.op("shape_values", carriers, name=f"{v.name}_values",
                       values=[dim_text(d) for d in flat], shape=list(v.shape),
                       dtype=str(v.dtype), var_dims=var_dims)

    def __getattr__(self, op: str):
        if op.startswith("_") or op not in R.OPS:
            raise AttributeError(f"Builder has no method or graph operator {op!r}")

        def add(*inputs: Value, name: str | None = None, **attrs: Any):
            return self.op(op, inputs, name=name, **attrs)

        add.__name__ = op
        return add

    def build(self, outputs: Value | Sequence[Value], name: str | None = None) -> Graph:
        outs = [outputs] if isinstance(outputs, Value) else list(outputs)
        return Graph(self._nodes, self._inputs, outs, name=name or self.name)


def _linear(d, var: str) -> bool:
    """True when dimension ``d`` of the one variable ``var`` is a * var + b (a != 0)."""
    from .symbolic import evaluate

    a, b = (evaluate(d, {var: k}) for k in (1, 0))
    return a != b and all(evaluate(d, {var: k}) == b + (a - b) * k for k in (2, 3, 7))


def _is_zero(d) -> bool:
    return isinstance(d, int) and d == 0
