"""Shared helpers of the operator library: declaring a library compute, attribute checks that
raise ValueError naming the operator and the argument, numpy broadcasting and axis normalisation.

Every library compute carries `tag` = the operator's (or internal stage's) name,
`attrs["pattern"]` = its pattern kind and `attrs["definition"]` = the definition declaring it
(definition.py, catalog.py); the default schedules and the graph layer's fusion read those."""

from __future__ import annotations

from ..ir import dtype as dt
from ..ir.expr import Expr, Var, as_int, const
from ..te.intrin import cast as _cast
from ..te.tensor import Tensor, compute
from .definition import DefinitionError, OpDefinition, lookup_tag
from .patterns import (  # noqa: F401 - the kinds, re-exported for the op modules
    BROADCAST,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OUT_ELEMWISE_FUSABLE,
    PATTERNS,
    REDUCE,
    Pattern,
    as_pattern,
)


def pattern_of(t) -> str | None:
    """The pattern kind of a tensor or operation produced by the library (None otherwise)."""
    op = t.op if isinstance(t, Tensor) else t
    return getattr(op, "attrs", {}).get("pattern")


def op_compute(op_name: str, shape, fcompute, pattern: str, name: str | None = None, **attrs):
    """tl.compute with the library's tag, pattern and definition attributes. `op_name` must be
    declared (an op or a part in catalog.py), with this pattern kind: a broadcast op's instance
    may be elemwise (its operands all have the output's shape)."""
    d = lookup_tag(op_name)
    kind = as_pattern(pattern)
    if kind != d.pattern and not (d.pattern == BROADCAST and kind == ELEMWISE):
        what = "operator" if isinstance(d, OpDefinition) else f"part of {d.owner}"
        raise DefinitionError(f"{op_name} ({what}) is declared {d.pattern}, its compute says "
                             f"{kind}")
    return compute(tuple(shape), fcompute, name=name or op_name, tag=op_name,
                   attrs=dict(attrs, pattern=kind, definition=d))


# ----------------------------------------------------------------------------- attribute checks

def check_tensor(op: str, arg: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {arg} must be a tensor, got {type(x).__name__}")
    return x


def check_int(op: str, arg: str, v, minimum: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if hasattr(v, "__index__") and not isinstance(v, bool):
            v = int(v)
        else:
            raise ValueError(f"{op}: {arg} must be an int, got {type(v).__name__} {v!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{op}: {arg} must be >= {minimum}, got {v}")
    return v


def int_tuple(op: str, arg: str, v, n: int, minimum: int | None = None) -> tuple:
    """An int or a sequence of n ints -> a tuple of n ints, each >= minimum."""
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"{op}: {arg} must have {n} entries, got {len(v)} ({v!r})")
        return tuple(check_int(op, arg, x, minimum) for x in v)
    return (check_int(op, arg, v, minimum),) * n


def static_shape(op: str, arg: str, t: Tensor) -> tuple:
    """The tensor's shape as ints; symbolic extents are refused where an op needs constants."""
    out = []
    for d, e in enumerate(t.shape):
        v = as_int(e)
        if v is None:
            raise ValueError(f"{op}: {arg} needs a constant shape, dimension {d} is {e!r}")
        out.append(v)
    return tuple(out)


def dims_of(op: str, arg: str, t: Tensor, constant=(), why: str = "") -> tuple:
    """The tensor's shape with symbolic extents kept: an int per constant extent, the
    expression per symbolic one (a tl.var such as the batch or the sequence length). The axes
    in `constant` (negative ones count from the end) must be constants: the op needs them to
    size a loop, a tile or a weight; `why` says which, in the error."""
    ndim = len(t.shape)
    fixed = {a % ndim for a in constant if -ndim <= a < ndim}
    out = []
    for d, e in enumerate(t.shape):
        v = as_int(e)
        if v is None and d in fixed:
            because = f" ({why})" if why else ""
            raise ValueError(f"{op}: dimension {d} of {arg} must be a constant{because}, "
                             f"got the symbolic extent {e!r}")
        out.append(e if v is None else v)
    return tuple(out)


def is_symbolic(e) -> bool:
    return as_int(e) is None


def normalize_axis(op: str, arg: str, axis, ndim: int) -> int:
    a = check_int(op, arg, axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"{op}: {arg}={axis} is out of range for a tensor of rank {ndim}")
    return a % ndim


def scan_axis(op: str, x: Tensor, axis, symbolic: bool = False) -> tuple[int, Expr | int]:
    """(axis, its extent) for an op that walks a numeric tensor's axis in order (cumsum, topk):
    x checked, bool refused, the axis normalized and its extent a constant (or, ``symbolic``,
    the size expression where the op can run over any length)."""
    check_tensor(op, "x", x)
    if dt.is_bool(x.dtype):
        raise ValueError(f"{op}: x must be numeric, got bool")
    ax = normalize_axis(op, "axis", axis, x.ndim)
    n = as_int(x.shape[ax])
    if n is None and symbolic:
        return ax, x.shape[ax]
    if n is None:
        raise ValueError(f"{op}: the axis needs a constant extent, got {x.shape[ax]!r}")
    return ax, n


def normalize_axes(op: str, arg: str, axis, ndim: int) -> tuple:
    """None -> all axes; int or sequence -> sorted unique non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    out = [normalize_axis(op, arg, a, ndim) for a in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: {arg}={axis!r} repeats an axis")
    return tuple(sorted(out))


def dim_equal(a, b) -> bool:
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return ia == ib
    if ia is not None or ib is not None:
        return False
    if a is b or (isinstance(a, Var) and isinstance(b, Var) and a.name == b.name):
        return True
    # expressions of the shape variables (batch * seq): equal when their simplified forms
    # print the same (variables are matched by name, as above)
    from ..ir.simplify import simplify

    return str(simplify(a)) == str(simplify(b))


def is_one(e) -> bool:
    return as_int(e) == 1


def broadcast_shapes(op: str, *shapes) -> tuple:
    """numpy broadcasting of shapes (ints or symbolic extents); ValueError when incompatible."""
    nd = max(len(s) for s in shapes)
    out = []
    for d in range(nd):
        dims = [s[d - nd + len(s)] for s in shapes if d - nd + len(s) >= 0]
        pick = None
        for e in dims:
            if is_one(e):
                continue
            if pick is None:
                pick = e
            elif not dim_equal(pick, e):
                shp = " and ".join(str(tuple(repr(x) if isinstance(x, Expr) and as_int(x) is None
                                            else as_int(x) for x in s)) for s in shapes)
                raise ValueError(f"{op}: shapes {shp} cannot be broadcast together "
                                 f"(dimension {d} of the result)")
        out.append(pick if pick is not None else dims[0])
    return tuple(out)


def broadcast_index(t: Tensor, out_idx: tuple) -> tuple:
    """Indices into `t` for the output index `out_idx` under numpy broadcasting (a dimension of
    extent 1 is read at 0, leading missing dimensions are dropped)."""
    off = len(out_idx) - t.ndim
    return tuple(0 if is_one(t.shape[d]) else out_idx[off + d] for d in range(t.ndim))


def result_dtype(op: str, *tensors) -> str:
    """numpy's promotion of the operands' dtypes."""
    import numpy as np

    dts = [t.dtype for t in tensors]
    try:
        return dt.canonical(np.result_type(*dts).name)
    except TypeError as e:  # pragma: no cover - every canonical dtype promotes
        raise ValueError(f"{op}: cannot promote dtypes {dts}: {e}") from None


def reciprocal_count(extents, dtype: str):
    """1 / the product of the extents as a `dtype` expression: a constant, or for symbolic
    extents (a sequence) the division of the cast count, once per kernel call (it is invariant
    in every loop)."""
    n, sym = 1, None
    for e in extents:
        v = as_int(e)
        if v is None:
            sym = e if sym is None else sym * e
        else:
            n *= v
    if sym is None:
        return const(1.0 / n, dtype)
    return const(1.0 / n, dtype) / _cast(sym, dtype)


def prod_of(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def shape_ints(shape) -> tuple:
    return tuple(as_int(s) for s in shape)
