"""tl.extern: an operator whose body is one call into a registered function (TVM's te.extern),
with its inputs and outputs as tensors in the dataflow:

    C = tl.extern((n, m), [A, B],
                  lambda ins, outs: tl.call_packed("tl.cblas.matmul", ins[0], ins[1], outs[0]),
                  name="C", dtype="float32")
    D = tl.compute((n, m), lambda i, j: C[i, j] + bias[j])

The call reads its inputs wholly and writes its outputs wholly: that is how the legality
analysis models it (one statement, with no loops), and why its stage takes no loop primitives
(schedule its producers and consumers; they may not be inlined into it nor computed inside it).
Functions are registered with tl.register_func (runtime/packed.py).

The body may instead call a C function directly (TVM's tir.call_extern), with no Python and no
GIL at the call:

    lib = tl.load_library("./libmine.so")
    C = tl.extern((n,), [A], lambda ins, outs: tl.call_extern("int32", "my_fill", ins[0],
                                                              outs[0], 2.5), name="C")

declared in C as ``int32_t my_fill(const float *A, const int64_t *A_shape, float *C,
const int64_t *C_shape, double x)``: each tensor as its data and its shape, each scalar as its
C type (a Python int as int64_t, a float as double), 0 returned on success and any other code
raised as a KernelError naming the function and the code. tl.call_extern also calls a C
function per element inside a tl.compute (``lambda i: tl.call_extern("float32", "f", A[i])``
for ``float f(float)``), in any loop, parallel and vectorized ones included. A name registered
with ``tl.register_func(name, library=..., symbol=...)`` calls its C function the same way
through tl.call_packed. runtime/extern_c.py has the conventions and how symbols are found.

The library's own kernels with data-dependent control flow (TopK's radix sort, ops/sort_kernel.py)
give the body as loop IR instead (TVM's extern with an ir_builder body): fcompute returns an
``IRBody(name, build)`` and lowering calls ``build(in_buffers, out_buffers)`` for the statement
(loops, ifs on loaded values, its own allocations), compiled into the kernel like any other: no
library to find when a saved kernel is loaded."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import dtype as dt
from ..ir.expr import Expr, const, convert
from ..ir.packed import ExternCall, PackedCall
from .tag import scoped_tag
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
    def call(self) -> PackedCall | ExternCall | IRBody:
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


class IRBody:
    """The body of a tl.extern given as loop IR (TVM's extern with an ir_builder body): code
    with data-dependent control flow (a sort, a selection) that no compute can state.
    ``build(ins, outs)`` returns the statement filling the outputs' buffers from the inputs'
    (one S.Buffer per tensor, indexed per dimension), called when the kernel is lowered; it
    must read only the inputs and write only the outputs and its own allocations. `name`
    names it in messages."""

    def __init__(self, name: str, build: Callable):
        if not isinstance(name, str) or not name:
            raise TypeError(f"IRBody: name must be a non-empty str, got {name!r}")
        if not callable(build):
            raise TypeError(f"IRBody {name}: build must be callable: build(ins, outs)")
        self.name = name
        self.build = build

    def __repr__(self) -> str:
        return f"IRBody({self.name!r})"


class ExternStatusCall:
    """tl.call_extern with tensor arguments: the body of a tl.extern (which decides which of
    its tensors are inputs and which outputs). Not an expression: in a tl.compute, a C function
    takes elements (A[i]), never whole tensors."""

    def __init__(self, dtype: str, symbol: str, args: tuple, library: str | None = None):
        self.dtype = dtype
        self.symbol = symbol
        self.args = args
        self.library = library

    name = property(lambda self: self.symbol)

    def as_expr(self):
        tensors = ", ".join(a.name for a in self.args if isinstance(a, Tensor))
        raise TypeError(f"call_extern({self.symbol!r}) passes whole tensors ({tensors}): that "
                        "is the body of a tl.extern (tl.extern(shape, inputs, lambda ins, outs: "
                        "tl.call_extern('int32', ...))); inside a tl.compute pass elements "
                        "(A[i])")

    def __repr__(self) -> str:
        return f"call_extern({self.dtype!r}, {self.symbol!r}, ...)"


def call_extern(dtype, symbol: str, *args):
    """A direct call of the C function `symbol` (TVM's tir.call_extern): no Python at the call.

    Inside a tl.compute: ``tl.call_extern("float32", "f", A[i], 2.0)`` is an expression of
    `dtype`, the result of ``float f(float, double)`` called per element. As the body of a
    tl.extern, with the extern's tensors among the arguments: ``int32_t f(...)`` with each
    tensor passed as ``T *data, const int64_t *shape``, returning 0 or an error code (a
    KernelError naming the function and the code). Scalars pass as their dtype's C type (a
    Python int as int64_t, a float as double); the dtypes C functions take and return:
    int32, int64, uint32, uint64, float32, float64. The symbol is looked up when the kernel is
    built: in the libraries opened with tl.load_library, then in the process."""
    from ..runtime import extern_c

    ret = dt.canonical(dtype)
    if ret not in extern_c.C_TYPES:
        raise TypeError(f"call_extern({symbol!r}): a C function returns one of "
                        f"{', '.join(extern_c.C_TYPES)} here, got {ret}")
    extern_c.check_symbol(symbol)
    values = []
    for k, a in enumerate(args):
        if isinstance(a, Tensor):
            values.append(a)
            continue
        values.append(_c_scalar(a, f"call_extern({symbol!r}): argument {k}"))
    if any(isinstance(a, Tensor) for a in values):
        return ExternStatusCall(ret, symbol, tuple(values))
    kinds = ("value",) * len(values)
    return ExternCall(ret, symbol, tuple(values), kinds, tuple(v.dtype for v in values))


def call_pure_extern(dtype, symbol: str, *args):
    """TVM's tir.call_pure_extern: a C function of scalars with no side effects, called per
    element inside a tl.compute (``lambda i: tl.call_pure_extern("float32", "expf", A[i])``).
    That is what tl.call_extern does there: the call is already treated as pure (no Python,
    allowed in parallel and vectorized loops). A pure function writes nothing, so it cannot be
    the body of a tl.extern: tensors as arguments are refused, naming tl.call_extern."""
    tensors = [a.name for a in args if isinstance(a, Tensor)]
    if tensors:
        raise TypeError(f"call_pure_extern({symbol!r}) passes whole tensors "
                        f"({', '.join(tensors)}): a pure function writes no output; as the body "
                        "of a tl.extern use tl.call_extern('int32', ...), and inside a "
                        "tl.compute pass elements (A[i])")
    return call_extern(dtype, symbol, *args)


def _c_scalar(a, what: str) -> Expr:
    """A scalar argument of a C call as an expression of one of the C types."""
    from ..runtime import extern_c

    if isinstance(a, bool):
        a = int(a)
    if isinstance(a, int):
        return const(a, "int64")
    if isinstance(a, float):
        return const(a, "float64")
    if not isinstance(a, Expr):
        raise TypeError(f"{what} must be a tensor (of a tl.extern), an expression, an int or a "
                        f"float, got {type(a).__name__}")
    if a.dtype not in extern_c.C_TYPES:
        raise TypeError(f"{what} has dtype {a.dtype}, which no C type here matches (the C "
                        f"functions take {', '.join(extern_c.C_TYPES)}): cast it, e.g. "
                        "x.astype('int32')")
    return a


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
    op = ExternOp(name, tuple(inputs), shapes, dtypes, scoped_tag(tag, f"extern {name}"), attrs)
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


def _checked_call(call, op: ExternOp) -> PackedCall | ExternCall | IRBody:
    if isinstance(call, IRBody):  # loop IR: it writes what it builds
        return call
    if isinstance(call, ExternCall):  # a value call: no tensor passed, so no output either
        call = ExternStatusCall(call.dtype, call.symbol, call.args, call.library)
    if not isinstance(call, (PackedCall, ExternStatusCall)):
        raise TypeError(f"extern {op.name}: fcompute must return a tl.call_packed(...) or a "
                        f"tl.call_extern(...), got {type(call).__name__}")
    what = f"{'call_packed' if isinstance(call, PackedCall) else 'call_extern'}({call.name!r})"
    ins, outs = set(map(id, op.input_tensors)), set(map(id, op.outputs))
    for a in call.args:
        if isinstance(a, Tensor) and id(a) not in ins | outs:
            raise ValueError(f"extern {op.name}: {what} passes tensor {a.name}, which is "
                             "neither one of the extern's inputs nor one of its outputs "
                             "(declare it in `inputs`)")
    passed = {id(a) for a in call.args if isinstance(a, Tensor)}
    for t in op.outputs:
        if id(t) not in passed:
            raise ValueError(f"extern {op.name}: output {t.name} is never passed to {what}, "
                             "so nothing would write it")
    written = tuple(isinstance(a, Tensor) and id(a) in outs for a in call.args)
    if isinstance(call, PackedCall):
        return PackedCall(call.name, call.args, written)
    return status_call(call.symbol, call.args, written, call.library, op.name, call.dtype)


def status_call(symbol: str, args: tuple, written: tuple, library: str | None, stage: str,
                dtype: str = "int32") -> ExternCall:
    """The ExternCall of a tl.extern's body: tensors passed as buffers (kinds "input" or
    "output"), an int32 status returned."""
    from ..runtime import extern_c

    if dtype != "int32":
        raise TypeError(f"extern {stage}: call_extern({symbol!r}) is the body of a tl.extern, "
                        f"so it returns an int32 status (0: success), not {dtype}")
    values, kinds = [], []
    for k, (a, w) in enumerate(zip(args, written)):
        if isinstance(a, Tensor):
            if a.dtype not in extern_c.BUFFER_DTYPES:
                raise TypeError(f"extern {stage}: tensor {a.name} of dtype {a.dtype} cannot "
                                f"be passed to C function {symbol!r} "
                                f"({', '.join(extern_c.BUFFER_DTYPES)})")
            kinds.append("output" if w else "input")
        else:
            a = _c_scalar(a, f"extern {stage}: C function {symbol!r}'s argument {k}")
            kinds.append("value")
        values.append(a)
    return ExternCall("int32", symbol, tuple(values), tuple(kinds),
                      tuple(a.dtype for a in values), library)


def as_c_call(call, stage: str):
    """The direct C call a tl.extern's body makes: `call` itself for a call_extern, the C
    function a call_packed's name is registered as, else None (a Python function)."""
    if isinstance(call, ExternCall):
        return call
    from ..runtime import packed

    fn = packed.get_global_func(call.name, allow_missing=True)
    if fn is None or fn.c_symbol is None:
        return None
    return packed_as_c_call(call, fn.c_symbol, fn.c_library, stage)


def packed_as_c_call(call: PackedCall, symbol: str, library: str | None,
                     stage: str) -> ExternCall:
    """A call_packed of a name registered as a C function (tl.register_func(name, library=,
    symbol=)): the direct call, its scalars passed as the packed convention passes them (an
    integer as int64_t, a float as double)."""
    args = tuple(a if isinstance(a, Tensor) else
                 a.astype("float64" if dt.is_float(a.dtype) else "int64") for a in call.args)
    return status_call(symbol, args, call.written, library, stage)


__all__ = ["ExternOp", "ExternStatusCall", "IRBody", "call_extern", "call_packed", "extern"]
