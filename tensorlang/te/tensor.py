"""Tensors and the operations that produce them (placeholders and computes), plus the two
expression nodes that only exist before lowering: TensorRead and Reduce."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..ir import dtype as dt
from ..ir.expr import Const, Expr, Var, binary_operands, const, convert
from ..ir.functor import Visitor, collect_vars, expr_depth, fit_recursion, substitute
from ..ir.stmt import IterVar, Range
from .tag import scoped_tag


def _to_extent(x, what: str) -> Expr:
    if isinstance(x, IterVar):
        x = x.var
    if isinstance(x, float):
        x = _whole_float(x, what)
    if isinstance(x, bool) or not isinstance(x, (int, Expr)):
        if hasattr(x, "__index__"):
            x = int(x)
        else:
            raise TypeError(f"{what} must be an int or a tl.var, got {type(x).__name__} {x!r}")
    if isinstance(x, int):
        if x <= 0:
            raise ValueError(f"{what} must be positive, got {x}")
        return const(x)
    if not dt.is_int(x.dtype):
        raise TypeError(f"{what} must be an integer expression, got {x.dtype}"
                        f"{float_var_hint(x)}")
    return x if x.dtype == dt.INDEX_DTYPE else x.astype(dt.INDEX_DTYPE)


def float_var_hint(e) -> str:
    """Why an expression with a float tl.var cannot be a shape, extent or index: the var named
    ('' when it has none)."""
    names = sorted({v.name for v in collect_vars(e) if dt.is_float(v.dtype)})
    if not names:
        return ""
    return (f" ({', '.join(names)}: a float tl.var is a scalar parameter for compute bodies; "
            "it cannot be a shape, a loop extent, an index or a split factor)")


def _whole_float(x: float, what: str) -> int:
    # TVM's te.compute turns float extents into ints, so that opt_gemm's `N / bn` (a float
    # under Python 3) works; a fractional extent is a bug in the script, not something to round
    if not x.is_integer():
        raise TypeError(f"{what} must be a whole number, got float {x!r}: an extent counts "
                        f"elements (use // for integer division)")
    return int(x)


def to_index(x, what: str = "index") -> Expr:
    if isinstance(x, IterVar):
        return x.var
    e = convert(x, dt.INDEX_DTYPE)
    if not (dt.is_int(e.dtype) or dt.is_bool(e.dtype)):
        raise TypeError(f"{what} must be an integer expression, got {e.dtype}: {e!r}"
                        f"{float_var_hint(e)}")
    return e if e.dtype == dt.INDEX_DTYPE else e.astype(dt.INDEX_DTYPE)


class Operation:
    """Base of placeholder and compute operations. Compared and hashed by identity."""

    name: str
    tag: str = ""

    def output(self, i: int = 0) -> Tensor:
        return self.outputs[i]

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name = name
        self.axis: tuple = ()
        self.reduce_axis: tuple = ()
        self.outputs = (Tensor(self, 0, shape, dtype, name),)
        self.input_tensors: tuple = ()
        self.attrs: dict = {}

    def __repr__(self) -> str:
        return f"placeholder({self.name})"


class ComputeOp(Operation):
    """out[axis] = body (one body per output); reduction bodies are a top-level Reduce."""

    def __init__(self, name: str, axis: tuple, reduce_axis: tuple, body: tuple, tag: str = "",
                 attrs: dict | None = None, output_names: Sequence[str] | None = None,
                 axis_copies: dict | None = None, expr_depth: int | None = None):
        self.name = name
        # checked before anything walks the body recursively (read_tensors below)
        self.expr_depth = expr_depth if expr_depth is not None else \
            _checked_depth(tuple(body), f"compute {name}")
        # {a reduce axis the user declared that an upstream compute also reduces over: this
        # compute's own copy of it} (see own_reduce_axes); the stage resolves the declared
        # axis to the copy, so `s[C].split(k)` works with the shared k
        self.axis_copies = dict(axis_copies or {})
        self.axis = tuple(axis)
        self.reduce_axis = tuple(reduce_axis)
        self.body = tuple(body)
        self.tag = tag
        self.attrs = dict(attrs or {})
        shape = tuple(iv.dom.extent for iv in self.axis)
        names = output_names or [name if len(body) == 1 else f"{name}.v{i}"
                                 for i in range(len(body))]
        self.outputs = tuple(Tensor(self, i, shape, b.dtype, names[i])
                             for i, b in enumerate(self.body))
        self.input_tensors = tuple(read_tensors(self.body))

    def __repr__(self) -> str:
        return f"compute({self.name})"


def read_tensors(exprs) -> list[Tensor]:
    """Tensors read by expressions, in order of first appearance."""
    seen: dict[int, Tensor] = {}

    class _Reads(Visitor):
        def visit_TensorRead(self, r):
            seen.setdefault(id(r.tensor), r.tensor)
            for i in r.indices:
                self.visit(i)

    v = _Reads()
    for e in exprs:
        v.visit(e)
    return list(seen.values())


class Tensor:
    """The output of an operation; `T[i, j]` reads it inside another compute."""

    __slots__ = ("dtype", "name", "op", "shape", "value_index")

    def __init__(self, op: Operation, value_index: int, shape: tuple, dtype: str, name: str):
        self.op = op
        self.value_index = value_index
        self.shape = tuple(shape)
        self.dtype = dtype
        self.name = name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getattr__(self, name: str):
        # only for a missing attribute: TVM's Buffer fields, which an extern's fcompute reads
        # there (ins[0].data), say what to pass instead (tvm_names.py)
        from ..tvm_names import TENSOR_NAMES, missing

        raise missing("'Tensor' object", name, TENSOR_NAMES)

    def __call__(self, *indices) -> TensorRead:
        """`A(i, j)` is `A[i, j]` (TVM's call syntax), all indices at once."""
        if len(indices) != len(self.shape):
            raise ValueError(f"tensor {self.name} has {len(self.shape)} dimensions, "
                             f"indexed with {len(indices)}")
        return self[indices]

    def __getitem__(self, indices) -> TensorRead | TensorSlice:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) > len(self.shape):
            raise ValueError(f"tensor {self.name} has {len(self.shape)} dimensions, "
                             f"indexed with {len(indices)}")
        if len(indices) < len(self.shape):
            return TensorSlice(self, indices)  # TVM's A[i][j]: the rest comes next
        return TensorRead(self, tuple(to_index(i, f"index of {self.name}") for i in indices))

    def __repr__(self) -> str:
        shape = ", ".join(repr(s) for s in self.shape)
        return f"Tensor({self.name}, [{shape}], {self.dtype})"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other


_OVERLOADS = {"add": ("+", "add"), "sub": ("-", "subtract"), "mul": ("*", "multiply"),
              "truediv": ("/", "divide")}


def _whole_tensor_arithmetic(symbol: str, op: str):
    def refuse(self, other):
        raise TypeError(f"{self.name} {symbol} ... on whole tensors (TVM's topi operator "
                        f"overloads) is not supported: tl.ops.{op}(a, b) (broadcasting), or "
                        f"te.compute({self.name}.shape, lambda *i: {self.name}(*i) {symbol} ...)")

    return refuse


for _name, (_symbol, _op) in _OVERLOADS.items():
    setattr(Tensor, f"__{_name}__", _whole_tensor_arithmetic(_symbol, _op))
    setattr(Tensor, f"__r{_name}__", _whole_tensor_arithmetic(_symbol, _op))


class TensorSlice:
    """`A[i]` of a tensor with more dimensions: `A[i][j]` reads A[i, j] (TVM's chained
    indexing). A slice is not a value: used as one, it says how many indices are missing."""

    __slots__ = ("indices", "tensor")

    def __init__(self, tensor: Tensor, indices: tuple):
        self.tensor = tensor
        self.indices = indices

    def __getitem__(self, more) -> TensorRead | TensorSlice:
        return self.tensor[self.indices + (more if isinstance(more, tuple) else (more,))]

    def as_expr(self):
        raise ValueError(f"tensor {self.tensor.name} has {len(self.tensor.shape)} dimensions, "
                         f"indexed with {len(self.indices)}")

    def _as_value(self, *_):
        return self.as_expr()


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
            "lshift", "rshift"):
    setattr(TensorSlice, f"__{_op}__", TensorSlice._as_value)
    setattr(TensorSlice, f"__r{_op}__", TensorSlice._as_value)
for _op in ("lt", "le", "gt", "ge", "neg", "invert"):
    setattr(TensorSlice, f"__{_op}__", TensorSlice._as_value)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TensorRead(Expr):
    tensor: Tensor
    indices: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.tensor.dtype

    def text(self, p) -> str:
        return f"{p.name(self.tensor, self.tensor.name)}[{p.exprs(self.indices)}]"


class CommReducer:
    """A reducer: combine(lhs, rhs) and the identity, both tuples of expressions. fcombine
    takes the values as 2 * n arguments, or (TVM's form) as two tuples `fcombine(x, y)`.

    Called like `tl.sum`: `reducer(expr_or_tuple, axis=k, where=cond)`.

    The contract: combine is associative and, unless declared `commutative=False`, commutative
    (ties included: an argmax must break them, e.g. by the lower index). Schedules rely on it:
    a reorder of the reduce loops, rfactor and a parallel or vectorized reduce loop all change
    the order in which values are combined. A reducer declared not commutative keeps the order
    of its reduce axes: those schedules are refused for it."""

    def __init__(self, fcombine: Callable, fidentity: Callable, name: str = "reduce",
                 commutative: bool = True):
        if not isinstance(commutative, bool):
            raise TypeError(f"reducer {name}: commutative must be a bool, got "
                            f"{type(commutative).__name__}")
        self.fcombine = fcombine
        self.fidentity = fidentity
        self.name = name
        self.commutative = commutative

    def combine(self, lhs: tuple, rhs: tuple) -> tuple:
        if len(lhs) == 1:
            out = self.fcombine(lhs[0], rhs[0])
        elif self._takes_tuples(len(lhs)):
            out = self.fcombine(tuple(lhs), tuple(rhs))  # TVM's form: fcombine(x, y)
        else:
            out = self.fcombine(*lhs, *rhs)
        out = out if isinstance(out, (tuple, list)) else (out,)
        if len(out) != len(lhs):
            raise ValueError(f"reducer {self.name}: fcombine returned {len(out)} values for a "
                             f"reduction of {len(lhs)}")
        return tuple(convert(o) for o in out)

    def _takes_tuples(self, n_values: int) -> bool:
        """Whether fcombine reduces n values as two tuples, fcombine(x, y) with x = (x0, x1, ..)
        (TVM's form), rather than as 2 * n arguments, fcombine(x0, x1, .., y0, y1, ..)."""
        try:
            params = list(inspect.signature(self.fcombine).parameters.values())
        except (TypeError, ValueError):  # a builtin without a signature: the flat form
            return False
        if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
            return False
        positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                      inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        required = sum(p.default is inspect.Parameter.empty for p in positional)
        if required <= 2 * n_values <= len(positional):
            return False
        if required <= 2 <= len(positional):
            return True
        raise TypeError(f"reducer {self.name}: fcombine takes {len(positional)} positional "
                        f"arguments; a reduction of {n_values} values calls it as "
                        f"fcombine(x, y) with x and y tuples of {n_values} (TVM's form) or as "
                        f"fcombine({', '.join(f'x{i}' for i in range(n_values))}, "
                        f"{', '.join(f'y{i}' for i in range(n_values))})")

    def identity(self, dtypes: tuple) -> tuple:
        out = self.fidentity(*dtypes)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)  # TVM scripts give both
        return tuple(convert(o, d) if not isinstance(o, Expr) else o
                     for o, d in zip(out, dtypes))

    def __call__(self, source, *args, **kwargs):
        if args and "axis" not in kwargs and not _are_reduce_axes(args[0]):
            # TVM's other use: mysum(a, b, c) combines the values themselves (an axis= that
            # is not a reduce axis is a mistake, refused below)
            if kwargs:
                raise TypeError(f"{self.name}: combining values takes no keyword arguments, "
                                f"got {sorted(kwargs)}")
            return self._combine_values([source, *args])
        return self._reduce(source, *args, **kwargs)

    def _reduce(self, source, axis, where=None, init=None):
        if init is not None:  # was accepted and ignored: a result without its initial value
            raise NotImplementedError(
                f"{self.name}(..., init=...): TVM's initial value of a reduction is not "
                "supported; reduce in one compute and combine the initial value in the next "
                "(R = te.compute(shape, lambda i: te.sum(A[i, k], axis=k)); "
                "C = te.compute(shape, lambda i: init[i] + R[i]))")
        multi = isinstance(source, tuple)
        srcs = tuple(convert(s) for s in (source if multi else (source,)))
        if len(srcs) > 1:
            self._takes_tuples(len(srcs))  # a combiner of the wrong arity: refused here
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        for a in axes:
            if not isinstance(a, IterVar) or a.kind != "reduce":
                raise TypeError(f"{self.name}: axis must be reduce axes from tl.reduce_axis, "
                                f"got {a!r}")
        cond = None if where is None else convert(where)
        if cond is not None and not dt.is_bool(cond.dtype):
            raise TypeError(f"{self.name}: where= must be a boolean expression")
        outs = tuple(Reduce(self, srcs, axes, cond, i) for i in range(len(srcs)))
        return outs if multi else outs[0]

    def _combine_values(self, values: list):
        """fcombine folded over the values, left to right (a reduction with no axis)."""
        multi = isinstance(values[0], tuple)
        as_tuple = [tuple(convert(x) for x in (v if multi else (v,))) for v in values]
        acc = as_tuple[0]
        for v in as_tuple[1:]:
            if len(v) != len(acc):
                raise ValueError(f"{self.name}: combining values of {len(acc)} and {len(v)} "
                                 "elements")
            acc = self.combine(acc, v)
        return acc if multi else acc[0]

    def __repr__(self) -> str:
        return f"CommReducer({self.name})"


def _are_reduce_axes(axis) -> bool:
    """Whether a reducer's second positional argument names axes (reduce ones, or misused
    spatial ones, which the call then refuses) rather than a value to combine."""
    if isinstance(axis, (list, tuple)):
        return not axis or isinstance(axis[0], IterVar)
    return isinstance(axis, IterVar)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Reduce(Expr):
    combiner: CommReducer
    source: tuple
    axis: tuple
    condition: Expr | None
    value_index: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.source[self.value_index].dtype

    def text(self, p) -> str:
        axes = ", ".join(p.name(a.var, a.var.name) for a in self.axis)
        src = p.exprs(self.source)
        where = f", where={p.expr(self.condition)}" if self.condition is not None else ""
        return f"{self.combiner.name}({src}, axis=[{axes}]{where})"


# ----------------------------------------------------------------------------- constructors

_name_counter: dict[str, int] = {}


def placeholder(shape, dtype="float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape (ints or tl.var) and dtype."""
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    if not isinstance(name, str):
        raise TypeError(f"placeholder name must be a str, got {type(name).__name__}")
    shape = tuple(_to_extent(s, f"placeholder {name} shape[{d}]") for d, s in enumerate(shape))
    return PlaceholderOp(name, shape, dt.canonical(dtype)).output(0)


def reduce_axis(dom, name: str = "k") -> IterVar:
    """A reduction axis over [lo, hi) given as (lo, hi), or over [0, n) given as n."""
    if isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise ValueError(f"reduce_axis {name}: dom must be (lo, hi), got {dom!r}")
        lo, hi = dom
    else:
        lo, hi = 0, dom
    lo_e = to_index(lo, f"reduce_axis {name} lower bound")
    hi_e = to_index(hi, f"reduce_axis {name} upper bound")
    ext = hi_e - lo_e if not (isinstance(lo_e, Const) and lo_e.value == 0) else hi_e
    if isinstance(ext, Expr):
        from ..ir.simplify import simplify

        ext = simplify(ext)
    if isinstance(ext, Const) and ext.value <= 0:
        raise ValueError(f"reduce_axis {name}: empty range [{lo}, {hi})")
    return IterVar(Var(name), Range(lo_e, ext), "reduce")


def var(name: str = "n", dtype="int64") -> Var:
    """A symbolic scalar: an integer one is a shape extent or split factor given at call time
    (int64 whatever integer dtype is asked for: indices are int64); a float16/32/64 one is a
    scalar kernel parameter (TVM's ``te.var("bias", dtype="float32")``) that compute bodies
    may use but shapes, extents and split factors may not. List it in tl.build's arguments
    and pass a Python or numpy number in its place at the call."""
    if not isinstance(name, str):
        raise TypeError(f"tl.var: name must be a str, got {type(name).__name__}")
    d = dt.canonical(dtype)
    if dt.is_int(d):
        return Var(name, dt.INDEX_DTYPE)
    if dt.is_float(d) and dt.lanes(d) == 1 and d in _SCALAR_FLOATS:
        return Var(name, d)
    raise TypeError(f"tl.var {name}: dtype must be an integer type or one of "
                    f"{', '.join(_SCALAR_FLOATS)}, got {d}")


_SCALAR_FLOATS = ("float16", "float32", "float64")


def size_var(name: str = "n", dtype="int64") -> Var:
    """TVM's size_var (a symbolic extent): an integer tl.var, which is what shapes use here
    too."""
    d = dt.canonical(dtype)
    if not dt.is_int(d):
        raise TypeError(f"tl.size_var {name}: dtype must be an integer type (a size), got {d}; "
                        f"a float scalar parameter is tl.var({name!r}, dtype={d!r})")
    return var(name, dtype)


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: dict | None = None):
    """Declare out[i, j, ...] = fcompute(i, j, ...). Returns a Tensor, or a tuple of Tensors when
    fcompute returns a tuple (multiple outputs, e.g. an argmax reducer)."""
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    if not callable(fcompute):
        raise TypeError(f"compute {name}: fcompute must be callable")
    shape = tuple(_to_extent(s, f"compute {name} shape[{d}]") for d, s in enumerate(shape))
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    named = [p.name for p in params if p.kind != inspect.Parameter.VAR_POSITIONAL]
    if len(named) < len(params) and len(named) <= len(shape):
        # f(i, j, *rest): the named leading axes, the rest as i<d>
        arg_names = named + [f"i{d}" for d in range(len(named), len(shape))]
    else:
        arg_names = named
        if len(arg_names) != len(shape):
            raise ValueError(f"compute {name}: fcompute takes {len(arg_names)} index arguments "
                             f"but the shape has {len(shape)} dimensions")
    axis = tuple(IterVar(Var(n), Range(const(0), s), "spatial")
                 for n, s in zip(arg_names, shape))
    body = fcompute(*[iv.var for iv in axis])
    bodies = tuple(body) if isinstance(body, (tuple, list)) else (body,)
    bodies = tuple(convert(b) for b in bodies)
    depth = _checked_depth(bodies, f"compute {name}")
    reduce_axes: tuple = ()
    for b in bodies:
        if _contains_nested_reduce(b):
            raise ValueError(f"compute {name}: a reduction (tl.sum/max/min/...) must be the whole "
                             "body of a compute, not part of a larger expression; declare it "
                             "as its own compute and read it from the next one")
    reds = [b for b in bodies if isinstance(b, Reduce)]
    if reds:
        if len(reds) != len(bodies):
            raise ValueError(f"compute {name}: either all outputs are reductions or none")
        first = reds[0]
        for r in reds[1:]:
            if r.combiner is not first.combiner or r.axis != first.axis:
                raise ValueError(f"compute {name}: outputs must share one reducer and its axes")
        reduce_axes = first.axis
    bodies, reduce_axes, copies = own_reduce_axes(bodies, reduce_axes)
    return_tuple = isinstance(body, (tuple, list))
    tag = scoped_tag(tag, f"compute {name}")
    op = ComputeOp(name, axis, reduce_axes, bodies, tag=tag, attrs=attrs, axis_copies=copies,
                   expr_depth=depth)
    return op.outputs if return_tuple else op.output(0)


def _checked_depth(bodies: tuple, what: str) -> int:
    depth = expr_depth(bodies)
    fit_recursion(depth, what)
    return depth


def own_reduce_axes(bodies: tuple, reduce_axes: tuple):
    """(bodies, reduce_axes, copies): a reduce axis that a compute upstream of these bodies
    also reduces over (one `k` declared for a producer and its consumer) is replaced by a copy
    of its own. Loop variables are then unique per stage by construction: a producer computed
    inside the consumer's k loop gets a k loop of its own variable, not one that shadows the
    consumer's (a wrong result, and a crash once the outer one is unrolled)."""
    if not reduce_axes:
        return bodies, reduce_axes, {}
    upstream = _upstream_reduce_axes(bodies)
    copies = {iv: IterVar(Var(iv.name, iv.var.dtype), iv.dom, iv.kind)
              for iv in reduce_axes if iv in upstream}
    if not copies:
        return bodies, reduce_axes, {}
    vmap = {old.var: new.var for old, new in copies.items()}
    own = tuple(copies.get(iv, iv) for iv in reduce_axes)
    new_bodies = tuple(b.replace(source=tuple(substitute(x, vmap) for x in b.source),
                                 condition=substitute(b.condition, vmap), axis=own)
                       for b in bodies)
    return new_bodies, own, copies


def _upstream_reduce_axes(bodies: tuple) -> set:
    """The reduce axes of every compute the bodies read, directly or not."""
    axes: set = set()
    seen: set = set()
    todo = [t.op for t in read_tensors(bodies)]
    while todo:
        op = todo.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        axes.update(op.reduce_axis)
        todo.extend(t.op for t in op.input_tensors)
    return axes


def _contains_nested_reduce(e) -> bool:
    found = []

    class _Find(Visitor):
        def visit_Reduce(self, r):
            found.append(r)

    inner = e.source + ((e.condition,) if e.condition is not None else ()) \
        if isinstance(e, Reduce) else (e,)
    v = _Find()
    for x in inner:
        v.visit(x)
    return bool(found)


def substitute_read(e, tensor_map):
    """Helper used by schedule rewrites: swap which tensor a TensorRead reads."""
    from ..ir.functor import Mutator

    class _Swap(Mutator):
        def visit_TensorRead(self, r):
            idx = tuple(self.visit(i) for i in r.indices)
            t = tensor_map.get(r.tensor, r.tensor)
            if t is r.tensor and all(a is b for a, b in zip(idx, r.indices)):
                return r
            return TensorRead(t, idx)

    return _Swap().visit(e)


__all__ = [
    "CommReducer",
    "ComputeOp",
    "Operation",
    "PlaceholderOp",
    "Reduce",
    "Tensor",
    "TensorRead",
    "binary_operands",
    "compute",
    "placeholder",
    "reduce_axis",
    "size_var",
    "substitute",
    "var",
]
