"""tl.extern: an operator whose body is one call into a registered function (TVM's te.extern),
with its inputs and outputs as tensors in the dataflow:

    C = tl.extern((n, m), [A, B],
                  lambda ins, outs: tl.call_packed("tl.cblas.matmul", ins[0], ins[1], outs[0]),
                  name="C", dtype="float32")
    D = tl.compute((n, m), lambda i, j: C[i, j] + bias[j])

The call reads its inputs wholly and writes its outputs wholly: that is how the legality
analysis models it (one statement, with no loops), and why its stage takes no loop primitives
(schedule its producers and consumers; they may not be inlined into it nor computed inside it).
Functions are registered with tl.register_func (runtime/packed.py)."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import dtype as dt
from ..ir.expr import Expr, convert
from ..ir.packed import PackedCall
from .tensor import Operation, Tensor, _to_extent


class ExternOp(Operation):
    """outs = call(ins): no axes, one body, the PackedCall."""

    def __init__(self, name: str, inputs: tuple, shapes: list, dtypes: list, tag: str = "",
                 attrs: dict | None = None):
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.axis: tuple = ()
        self.reduce_axis: tuple = ()
        self.axis_copies: dict = {}
        self.expr_depth = 1
        self.input_tensors = tuple(inputs)
        self.outputs = tuple(Tensor(self, i, s, d, name if len(shapes) == 1 else f"{name}.v{i}")
                             for i, (s, d) in enumerate(zip(shapes, dtypes)))
        self.body: tuple = ()

    @property
    def call(self) -> PackedCall:
        return self.body[0]

    def __repr__(self) -> str:
        return f"extern({self.name})"


def call_packed(name: str, *args) -> PackedCall:
    """A call of the function registered under `name` (tl.register_func) with tensors (the
    extern's inputs and outputs: passed as numpy arrays) and scalars (ints or floats)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"call_packed: the function name must be a non-empty str, got {name!r}")
    out = []
    for k, a in enumerate(args):
        if isinstance(a, Tensor):
            out.append(a)
            continue
        if isinstance(a, bool):  # TVM passes transa=False and the like: an int flag
            a = int(a)
        if not isinstance(a, (int, float, Expr)):
            raise TypeError(f"call_packed({name!r}): argument {k} must be a tensor (one of the "
                            f"extern's ins/outs), an int or a float, got {type(a).__name__}")
        e = convert(a)
        if dt.lanes(e.dtype) != 1 or not (dt.is_int(e.dtype) or dt.is_float(e.dtype)):
            raise TypeError(f"call_packed({name!r}): scalar argument {k} must be an integer "
                            f"or float scalar, got {e.dtype}")
        out.append(e)
    return PackedCall(name, tuple(out), ())


def extern(shape, inputs, fcompute: Callable, name: str = "extern", dtype=None, tag: str = "",
           attrs: dict | None = None):
    """Declare outputs of `shape` (one shape, or a list of shapes for several outputs) computed
    by `fcompute(ins, outs)`, which returns the call (tl.call_packed) that fills `outs` from
    `ins`. dtype: one for all outputs or one per output (default: the first input's, else
    float32). Returns a Tensor, or a list of Tensors for several outputs (as TVM does)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"extern: name must be an identifier, got {name!r}")
    if not callable(fcompute):
        raise TypeError(f"extern {name}: fcompute must be callable: fcompute(ins, outs)")
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    for k, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"extern {name}: input {k} must be a tensor, got "
                            f"{type(t).__name__}")
    shapes = _shapes(shape, name)
    dtypes = _dtypes(dtype, len(shapes), inputs, name)
    op = ExternOp(name, tuple(inputs), shapes, dtypes, tag, attrs)
    call = fcompute(list(op.input_tensors), list(op.outputs))
    op.body = (_checked_call(call, op),)
    return op.outputs[0] if len(shapes) == 1 else list(op.outputs)


def _shapes(shape, name: str) -> list:
    many = isinstance(shape, (list, tuple)) and shape and \
        all(isinstance(s, (list, tuple)) for s in shape)
    raw = list(shape) if many else [shape]
    out = []
    for n, s in enumerate(raw):
        s = tuple(s) if isinstance(s, (list, tuple)) else (s,)
        out.append(tuple(_to_extent(d, f"extern {name} output {n} shape[{i}]")
                         for i, d in enumerate(s)))
    return out


def _dtypes(dtype, n: int, inputs: list, name: str) -> list:
    if dtype is None:
        return [inputs[0].dtype if inputs else "float32"] * n
    given = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * n
    if len(given) != n:
        raise ValueError(f"extern {name}: {n} outputs but {len(given)} dtypes")
    return [dt.canonical(d) for d in given]


def _checked_call(call, op: ExternOp) -> PackedCall:
    if not isinstance(call, PackedCall):
        raise TypeError(f"extern {op.name}: fcompute must return a tl.call_packed(...), got "
                        f"{type(call).__name__}")
    ins, outs = set(map(id, op.input_tensors)), set(map(id, op.outputs))
    for a in call.args:
        if isinstance(a, Tensor) and id(a) not in ins | outs:
            raise ValueError(f"extern {op.name}: call_packed({call.name!r}) passes tensor "
                             f"{a.name}, which is neither one of the extern's inputs nor one of "
                             "its outputs (declare it in `inputs`)")
    passed = {id(a) for a in call.args if isinstance(a, Tensor)}
    for t in op.outputs:
        if id(t) not in passed:
            raise ValueError(f"extern {op.name}: output {t.name} is never passed to "
                             f"call_packed({call.name!r}), so nothing would write it")
    written = tuple(isinstance(a, Tensor) and id(a) in outs for a in call.args)
    return PackedCall(call.name, call.args, written)


__all__ = ["ExternOp", "call_packed", "extern"]
