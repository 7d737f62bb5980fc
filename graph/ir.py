"""The graph IR: typed values, nodes, constants, a topologically ordered graph.

A :class:`Graph` is a list of :class:`Node` in execution (topological) order. Every edge is a
:class:`Value` with a shape (ints, or expressions of shape variables: graph/symbolic.py), a dtype and a layout string ("NCHW", "NC", ... or "" when the
layout carries no meaning). Constants are values that hold a numpy array; graph inputs are values
without a producer and without data. Passes treat graphs as immutable: they build new graphs with
:class:`~tensorlang.graph.Builder` or :meth:`Graph.replace`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tensorlang.errors import TensorlangError


class GraphError(TensorlangError):
    """A malformed graph: cycles, undefined values, inconsistent shapes, bad attributes."""


def _canonical_dtype(dtype: Any) -> str:
    try:
        return np.dtype(dtype).name
    except TypeError:
        raise GraphError(f"unknown dtype {dtype!r}") from None


def freeze(data: np.ndarray) -> np.ndarray:
    """Hand an array that nobody else holds (fresh from numpy) over to the graph: marks it
    read-only and returns it, so that a constant made from it takes it as is, without a copy."""
    data.flags.writeable = False
    return data


def _never_written(data: np.ndarray) -> bool:
    """True when numpy cannot write ``data``'s memory: it and every array it views are
    read-only, down to an owning array or a read-only buffer (the bytes an ONNX initializer is
    read from, a read-only memory map)."""
    a: Any = data
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        if a.base is None:
            return True
        a = a.base
    try:
        return memoryview(a).readonly
    except TypeError:
        return False


def _dim(d: Any) -> Any:
    """A dimension that is not a plain int: an int-like, or a shape expression of tl.var
    (canonical form: graph/symbolic.py)."""
    from .symbolic import dim

    return dim(d)


def _symbolic_data(name: str, data: np.ndarray, want: np.dtype,
                   shape: tuple) -> np.ndarray:
    """A shape tensor whose elements are symbolic dimensions (ONNX's Shape of a value with
    shape variables, and what is computed from it at import): an object array of ints and
    expressions, declared as an integer tensor. The importer folds it into the attributes of
    the ops that read shapes (Reshape's target); a kernel never reads it (Builder.op refuses)."""
    from .symbolic import dim

    if want.kind not in "iu":
        raise GraphError(f"constant {name!r}: symbolic dimensions in a {want.name} tensor")
    if data.shape != shape:
        raise GraphError(f"constant {name!r}: data shape {data.shape} != {shape}")
    out = np.empty(data.shape, dtype=object)
    out.reshape(-1)[:] = [dim(d) for d in data.reshape(-1)]
    out.flags.writeable = False
    return out


def _constant_data(name: str, data: Any, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """A constant's array: read-only, C-contiguous, of exactly ``dtype`` (native byte order).

    An array that is already all of that and that nothing can write (see ``_never_written``:
    ONNX weights, arrays handed over with ``freeze``, views of other constants) is taken as
    is: a big model's weights are never copied. Any other array -- a user's writable array
    above all, which they may change after building the graph -- is copied."""
    want = np.dtype(dtype)
    if isinstance(data, np.ndarray) and data.dtype == object:
        return _symbolic_data(name, data, want, shape)
    shared = (isinstance(data, np.ndarray) and data.dtype == want
              and data.flags.c_contiguous and _never_written(data))
    if not shared:
        # np.array, not ascontiguousarray: the latter turns rank-0 data into shape (1,)
        data = np.array(data, dtype=want, order="C")
        data.flags.writeable = False
    if data.shape != shape:
        raise GraphError(f"constant {name!r}: data shape {data.shape} != {shape}")
    return data


class Value:
    """One tensor edge of the graph. ``data`` is set for constants: a read-only numpy array,
    which may be shared with other constants and the model it was imported from (never write
    it, not even after making it writable again: derive a new array)."""

    __slots__ = ("data", "dtype", "layout", "name", "producer", "shape")

    def __init__(
        self,
        name: str,
        shape: Sequence[int],
        dtype: Any,
        layout: str = "",
        data: np.ndarray | None = None,
        producer: Node | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise GraphError(f"a value needs a non-empty name, got {name!r}")
        shape = tuple(d if type(d) is int else _dim(d) for d in shape)
        if any(isinstance(d, int) and d < 0 for d in shape):
            raise GraphError(f"value {name!r}: negative dimension in shape {shape}")
        self.name = name
        self.shape = shape
        self.dtype = _canonical_dtype(dtype)
        self.layout = layout
        if data is not None:
            data = _constant_data(name, data, self.dtype, shape)
        self.data = data
        self.producer = producer

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def is_symbolic_constant(self) -> bool:
        """A constant shape tensor holding symbolic dimensions (see ``_symbolic_data``)."""
        return self.data is not None and self.data.dtype == object

    @property
    def is_static(self) -> bool:
        return all(type(d) is int for d in self.shape)

    @property
    def size(self) -> Any:
        """The number of elements: an int, or an expression of the shape variables."""
        if self.is_static:
            return math.prod(self.shape)  # a Python int: no int64 wraparound
        from .symbolic import num_elements

        return num_elements(self.shape)

    @property
    def nbytes(self) -> Any:
        if self.is_static:
            return self.size * np.dtype(self.dtype).itemsize
        from .symbolic import dim

        return dim(self.size * np.dtype(self.dtype).itemsize)

    def type_str(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        lay = f" {self.layout}" if self.layout else ""
        return f"{self.dtype}[{dims}]{lay}"

    def __repr__(self) -> str:
        kind = "const " if self.is_constant else ""
        return f"<Value {kind}%{self.name}: {self.type_str()}>"


class Node:
    """One operator application: ``outputs = op(inputs, **attrs)``.

    ``op`` is a graph operator name (see :mod:`tensorlang.graph.op_registry`); ``attrs`` holds
    JSON-able values only (ints, floats, strings, lists of them) so that a node can be hashed
    into a workload key and written into an artifact plan."""

    __slots__ = ("attrs", "inputs", "name", "op", "outputs")

    def __init__(
        self,
        name: str,
        op: str,
        inputs: Sequence[Value],
        outputs: Sequence[Value],
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.op = op
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.attrs = dict(attrs or {})

    def attrs_text(self) -> str:
        if not self.attrs:
            return ""
        if self.op == "fused" and "body" in self.attrs:
            from .fused_group import group_of  # (it imports this module)

            # a fused group prints as its member ops in order (the full body is in the JSON)
            group = group_of(self)
            return f"{{ops={'+'.join(group.ops)}, pattern={group.pattern}}}"
        parts = [f"{k}={_fmt_attr(v)}" for k, v in sorted(self.attrs.items())]
        return "{" + ", ".join(parts) + "}"

    def __repr__(self) -> str:
        return f"<Node {self.name}: {self.op}>"


def _fmt_attr(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_attr(x) for x in v) + "]"
    return json.dumps(v) if isinstance(v, str) else str(v)


class Graph:
    """A topologically ordered dataflow graph.

    ``inputs``: the runtime inputs (values without producer or data); ``outputs``: the values the
    model returns; ``nodes``: in an order where every node comes after the producers of its
    inputs (checked at construction); constants are reached through node inputs."""

    def __init__(
        self,
        nodes: Sequence[Node],
        inputs: Sequence[Value],
        outputs: Sequence[Value],
        name: str = "graph",
    ) -> None:
        self.name = name
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.nodes = tuple(nodes)
        self._check()

    # -- validation -----------------------------------------------------------------------

    def _check(self) -> None:
        defined: set[int] = set()
        names: dict[str, Value] = {}

        def define(v: Value, where: str) -> None:
            other = names.get(v.name)
            if other is not None and other is not v:
                raise GraphError(f"two different values are named {v.name!r} ({where})")
            names[v.name] = v
            defined.add(id(v))

        for v in self.inputs:
            if v.is_constant:
                raise GraphError(f"graph input {v.name!r} is a constant; pass it as a node input")
            define(v, "graph input")
        node_names: set[str] = set()
        for n in self.nodes:
            if n.name in node_names:
                raise GraphError(f"two nodes are named {n.name!r}")
            node_names.add(n.name)
            for v in n.inputs:
                if v.is_constant and id(v) not in defined:
                    define(v, f"constant read by {n.name}")
                elif id(v) not in defined:
                    raise GraphError(
                        f"node {n.name!r} ({n.op}) reads {v.name!r} before it is defined "
                        "(the node list is not in topological order, or the value is not an "
                        "input of the graph)"
                    )
            for v in n.outputs:
                if id(v) in defined:
                    raise GraphError(f"value {v.name!r} is defined twice (by {n.name!r})")
                define(v, f"output of {n.name}")
        for v in self.outputs:
            if id(v) not in defined and not v.is_constant:
                raise GraphError(f"graph output {v.name!r} is not computed by any node")

    # -- queries --------------------------------------------------------------------------

    @property
    def constants(self) -> list[Value]:
        """Every constant the graph reads, once, in first-use order."""
        seen: dict[int, Value] = {}
        for n in self.nodes:
            for v in n.inputs:
                if v.is_constant:
                    seen.setdefault(id(v), v)
        for v in self.outputs:
            if v.is_constant:
                seen.setdefault(id(v), v)
        return list(seen.values())

    def values(self) -> list[Value]:
        """All values: inputs, constants, node outputs."""
        out: dict[int, Value] = {id(v): v for v in self.inputs}
        for c in self.constants:
            out.setdefault(id(c), c)
        for n in self.nodes:
            for v in n.outputs:
                out.setdefault(id(v), v)
        return list(out.values())

    def value(self, name: str) -> Value:
        for v in self.values():
            if v.name == name:
                return v
        raise KeyError(f"graph {self.name!r} has no value named {name!r}")

    def consumers(self) -> dict[int, list[Node]]:
        """id(value) -> the nodes reading it, in order."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                out.setdefault(id(v), []).append(n)
        return out

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return dict(sorted(counts.items()))

    # -- text -----------------------------------------------------------------------------

    def __str__(self) -> str:
        lines = []
        ins = ", ".join(f"%{v.name}: {v.type_str()}" for v in self.inputs)
        lines.append(f"graph {self.name}({ins}) {{")
        for c in self.constants:
            lines.append(f"  const %{c.name}: {c.type_str()}{_const_preview(c.data)}")
        for n in self.nodes:
            outs = ", ".join(f"%{v.name}: {v.type_str()}" for v in n.outputs)
            args = ", ".join(f"%{v.name}" for v in n.inputs)
            attrs = n.attrs_text()
            lines.append(f"  {outs} = {n.op}({args}){' ' + attrs if attrs else ''}  # {n.name}")
        lines.append(f"  return {', '.join('%' + v.name for v in self.outputs)}")
        lines.append("}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.nodes)} nodes, {len(self.inputs)} inputs>"

    def to_dot(self) -> str:
        """Graphviz text: ops as boxes, graph inputs/outputs as ellipses, constants as notes;
        edges labelled with the value's type."""

        def q(s: str) -> str:
            return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

        lines = [f"digraph {q(self.name)} {{", "  rankdir=TB;", "  node [fontsize=10];"]
        src: dict[int, str] = {}
        for v in self.inputs:
            nid = f"in_{len(src)}"
            src[id(v)] = nid
            lines.append(f"  {nid} [shape=ellipse, label={q(v.name + chr(10) + v.type_str())}];")
        for c in self.constants:
            nid = f"const_{len(src)}"
            src[id(c)] = nid
            lines.append(
                f"  {nid} [shape=note, style=filled, fillcolor=gray90, "
                f"label={q(c.name + chr(10) + c.type_str())}];"
            )
        for i, n in enumerate(self.nodes):
            nid = f"n{i}"
            lines.append(f"  {nid} [shape=box, label={q(n.op + chr(10) + n.name)}];")
            for v in n.inputs:
                lines.append(f"  {src[id(v)]} -> {nid} [label={q(v.type_str())}];")
            for v in n.outputs:
                src[id(v)] = nid
        for j, v in enumerate(self.outputs):
            nid = f"out_{j}"
            lines.append(f"  {nid} [shape=ellipse, style=bold, label={q(v.name)}];")
            lines.append(f"  {src[id(v)]} -> {nid} [label={q(v.type_str())}];")
        lines.append("}")
        return "\n".join(lines)


def _const_preview(data: np.ndarray) -> str:
    if data.size <= 8:
        return f" = {np.array2string(data.reshape(-1), separator=', ', precision=4)}"
    return ""


def topo_sort(nodes: Iterable[Node], inputs: Iterable[Value]) -> list[Node]:
    """Order ``nodes`` so that every node follows its producers (stable: ties keep the given
    order). Raises GraphError on a cycle or a read of an undefined value."""
    nodes = list(nodes)
    ready: set[int] = {id(v) for v in inputs}
    producer_of: dict[int, Node] = {id(v): n for n in nodes for v in n.outputs}
    order: list[Node] = []
    placed: set[int] = set()
    state: dict[int, int] = {}  # 1: on the stack, 2: done

    def visit(n: Node) -> None:
        stack = [(n, iter(n.inputs))]
        state[id(n)] = 1
        while stack:
            cur, it = stack[-1]
            advanced = False
            for v in it:
                if v.is_constant or id(v) in ready:
                    continue
                p = producer_of.get(id(v))
                if p is None:
                    raise GraphError(f"node {cur.name!r} reads {v.name!r}, which nothing defines")
                st = state.get(id(p))
                if st == 1:
                    raise GraphError(f"the graph has a cycle through node {p.name!r}")
                if st is None:
                    state[id(p)] = 1
                    stack.append((p, iter(p.inputs)))
                    advanced = True
                    break
            if not advanced:
                stack.pop()
                state[id(cur)] = 2
                if id(cur) not in placed:
                    placed.add(id(cur))
                    order.append(cur)
                    for v in cur.outputs:
                        ready.add(id(v))

    for n in nodes:
        if id(n) not in placed:
            visit(n)
    return order
