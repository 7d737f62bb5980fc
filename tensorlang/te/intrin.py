"""Reducers, math intrinsics and expression helpers of the tensor expression language."""

from __future__ import annotations

from ..ir import dtype as dt
from ..ir.expr import (
    Call,
    Cast,
    Const,
    Expr,
    Max,
    Min,
    Select,
    binary_operands,
    bits_call,
    const,
    convert,
)
from .tensor import CommReducer


def comm_reducer(fcombine, fidentity, name: str = "reduce",
                 commutative: bool = True) -> CommReducer:
    """A user reducer, e.g. argmax over (index, value) pairs, the first maximum winning:

        def first_max(i0, v0, i1, v1):
            pick0 = (v0 > v1) | ((v0 == v1) & (i0 < i1))
            return tl.select(pick0, i0, i1), tl.select(pick0, v0, v1)

        argmax = tl.comm_reducer(first_max, lambda ti, tv: (tl.max_value(ti), tl.min_value(tv)),
                                 name="argmax")

    TVM's form is accepted too: fcombine(x, y) on tuples, `x[0]` the index and `x[1]` the
    value (a reducer of n values whose fcombine takes two arguments gets two tuples).

    fcombine must be associative and commutative: schedules may combine the values of the
    reduce axes in any order (reorder, rfactor, parallel or vectorized reduce loops). An argmax
    that keeps `i0` on a tie (`v0 >= v1`) is not: its answer would depend on the schedule. Break
    ties (as above), or declare `commutative=False`: the values are then combined in the order
    of the reduce axes, and schedules that change that order are refused (ScheduleError)."""
    return CommReducer(fcombine, fidentity, name, commutative)


def min_value(dtype) -> Const:
    d = dt.canonical(dtype)
    return const(dt.limits(d)[0], d)


def max_value(dtype) -> Const:
    d = dt.canonical(dtype)
    return const(dt.limits(d)[1], d)


_sum = CommReducer(lambda a, b: a + b, lambda t: const(0, t), "sum")
_max = CommReducer(lambda a, b: Max(*binary_operands(a, b)), lambda t: min_value(t), "max")
_min = CommReducer(lambda a, b: Min(*binary_operands(a, b)), lambda t: max_value(t), "min")
_prod = CommReducer(lambda a, b: a * b, lambda t: const(1, t), "prod")


def sum(expr, axis, where=None, init=None):
    """Sum reduction over reduce axes."""
    return _sum(expr, axis=axis, where=where, init=init)


def prod(expr, axis, where=None, init=None):
    return _prod(expr, axis=axis, where=where, init=init)


def max(expr, b=None, axis=None, where=None, init=None):
    """tl.max(x, axis=k) reduces; tl.max(a, b) is the elementwise maximum."""
    if axis is None and b is not None and not _is_axis(b):
        return Max(*binary_operands(expr, b))
    return _max(expr, axis=axis if axis is not None else b, where=where, init=init)


def min(expr, b=None, axis=None, where=None, init=None):
    """tl.min(x, axis=k) reduces; tl.min(a, b) is the elementwise minimum."""
    if axis is None and b is not None and not _is_axis(b):
        return Min(*binary_operands(expr, b))
    return _min(expr, axis=axis if axis is not None else b, where=where, init=init)


def _is_axis(x) -> bool:
    from ..ir.stmt import IterVar

    return isinstance(x, IterVar) or (isinstance(x, (list, tuple)) and x
                                      and isinstance(x[0], IterVar))


# ----------------------------------------------------------------------------- math

_FLOAT_ONLY = ("exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
               "sin", "cos", "atan", "tan", "asin", "acos", "sinh", "cosh", "asinh", "acosh",
               "atanh", "log1p")
_ROUNDING = ("floor", "ceil", "round", "trunc", "nearbyint")


def _unary(name: str):
    def fn(x) -> Expr:
        e = convert(x)
        if name in _FLOAT_ONLY and not dt.is_float(e.dtype):
            raise TypeError(f"tl.{name} needs a float argument, got {e.dtype}; cast it first "
                            f"(e.g. x.astype('float32'))")
        if name in _ROUNDING and not dt.is_float(e.dtype):
            return e
        if dt.is_bool(e.dtype):
            raise TypeError(f"tl.{name} is not defined for bool")
        return Call(e.dtype, name, (e,))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (numpy semantics)."
    return fn


exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log2 = _unary("log2")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
abs = _unary("abs")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")
trunc = _unary("trunc")
nearbyint = _unary("nearbyint")
log10 = _unary("log10")
sin = _unary("sin")
cos = _unary("cos")
atan = _unary("atan")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
sinh = _unary("sinh")
cosh = _unary("cosh")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
log1p = _unary("log1p")


# TVM op names (tir.X) that call_intrin maps to the math functions above: the intrinsics a
# TVM script names by string are these functions here, lowered the same way
_INTRIN_NAMES = _FLOAT_ONLY + _ROUNDING + ("abs", "fabs", "pow", "fma", "fmod", "isnan",
                                           "popcount", "atan2", "hypot", "copysign", "isinf",
                                           "isfinite")


def call_intrin(dtype, op_name: str, *args) -> Expr:
    """TVM's tir.call_intrin(dtype, "tir.exp", x): the math function of that name (tl.exp),
    whose result must have `dtype`. TVM's way to add an intrinsic (an op name registered with
    tvm.ir.register_op_attr and lowered by register_intrin_lowering) has no counterpart here:
    an unknown name is refused, naming tl.call_pure_extern, which calls a C function."""
    if not isinstance(op_name, str):
        raise TypeError(f"call_intrin: the op name must be a str such as 'tir.exp', got "
                        f"{type(op_name).__name__}")
    name = op_name.removeprefix("tir.")
    if name not in _INTRIN_NAMES:
        raise ValueError(f"call_intrin({dtype!r}, {op_name!r}): no intrinsic of that name here "
                         f"(known: {', '.join(_INTRIN_NAMES)}); registering new ones "
                         "(tvm.ir.register_op_attr / register_intrin_lowering) is not "
                         "supported: call a C function per element with "
                         f"tl.call_pure_extern({dtype!r}, 'symbol', x) instead")
    out = globals()["abs" if name == "fabs" else name](*args)
    want = dt.canonical(dtype)
    if out.dtype != want:
        raise TypeError(f"call_intrin({dtype!r}, {op_name!r}): the result is {out.dtype}, not "
                        f"{want}; cast the arguments (x.astype({want!r}))")
    return out


call_pure_intrin = call_intrin  # every intrinsic here is pure


def pow(a, b) -> Expr:
    x, y = binary_operands(a, b)
    if not dt.is_float(x.dtype):
        raise TypeError(f"tl.pow needs float operands, got {x.dtype}")
    return Call(x.dtype, "pow", (x, y))


power = pow  # TVM's te.power / tir.power


def _float_binary(name: str):
    def fn(a, b) -> Expr:
        x, y = binary_operands(a, b)
        if not dt.is_float(x.dtype):
            raise TypeError(f"tl.{name} needs float operands, got {x.dtype}; cast them first "
                            f"(x.astype('float32'))")
        return Call(x.dtype, name, (x, y))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} of two floats (numpy's / C's semantics)."
    return fn


atan2 = _float_binary("atan2")  # the angle of (b, a): np.arctan2(a, b)
hypot = _float_binary("hypot")  # sqrt(a * a + b * b) without overflow
copysign = _float_binary("copysign")  # |a| with the sign of b


def fma(a, b, c) -> Expr:
    """a * b + c, rounded once for floats (llvm.fma)."""
    x, y = binary_operands(a, b)
    x, z = binary_operands(x, c)
    x, y = binary_operands(x, y)
    if not dt.is_float(x.dtype):
        return x * y + z
    return Call(x.dtype, "fma", (x, y, z))


def fmod(a, b) -> Expr:
    """The remainder with the sign of the dividend (C's fmod, np.fmod); truncmod for
    integers."""
    x, y = binary_operands(a, b)
    if not dt.is_float(x.dtype):
        return truncmod(x, y)
    return Call(x.dtype, "fmod", (x, y))


def isnan(x) -> Expr:
    e = convert(x)
    if not dt.is_float(e.dtype):
        return const(False)  # an integer is never NaN (as TVM)
    return Call(dt.with_lanes("bool", dt.lanes(e.dtype)), "isnan", (e,))


def isinf(x) -> Expr:
    """Whether x is +inf or -inf (TVM's tir.isinf); never for an integer."""
    e = convert(x)
    if not dt.is_float(e.dtype):
        return const(False)
    return abs(e) == const(float("inf"), dt.element(e.dtype))


def isfinite(x) -> Expr:
    """Whether x is neither NaN nor infinite (TVM's tir.isfinite); always for an integer."""
    e = convert(x)
    if not dt.is_float(e.dtype):
        return const(True)
    return ~(isnan(e) | isinf(e))


def popcount(x) -> Expr:
    """The number of set bits of an integer."""
    e = convert(x)
    if not dt.is_int(e.dtype):
        raise TypeError(f"tl.popcount needs an integer argument, got {e.dtype}")
    return Call(e.dtype, "popcount", (e,))


def floordiv(a, b) -> Expr:
    """a // b rounding towards minus infinity (TVM's floordiv; indexdiv)."""
    x, y = binary_operands(a, b)
    return x // y


def floormod(a, b) -> Expr:
    """a % b with the sign of the divisor (TVM's floormod; indexmod)."""
    x, y = binary_operands(a, b)
    return x % y


indexdiv = floordiv
indexmod = floormod


def truncdiv(a, b) -> Expr:
    """Integer division rounding towards zero (C's `/`); trunc(a / b) for floats."""
    x, y = binary_operands(a, b)
    if dt.is_float(x.dtype):
        return trunc(x / y)
    q = x // y
    # floor and trunc differ when the division is inexact and the signs differ
    inexact_negative = (x % y != 0) & ((x < 0) != (y < 0))
    return Select(inexact_negative, q + 1, q)


def truncmod(a, b) -> Expr:
    """The remainder of truncdiv: the sign of the dividend (C's `%`)."""
    x, y = binary_operands(a, b)
    if dt.is_float(x.dtype):
        return fmod(x, y)
    r = x % y  # the sign of y; 0 for y == 0, as x % 0 is here
    return Select((r != 0) & ((x < 0) != (y < 0)), r - y, r)


def div(a, b) -> Expr:
    """TVM's tir.div, C's `/`: true division of floats, truncdiv of integers."""
    x, y = binary_operands(a, b)
    return x / y if dt.is_float(x.dtype) else truncdiv(x, y)


def bitwise_and(a, b) -> Expr:
    return bits_call("bitwise_and", a, b)


def bitwise_or(a, b) -> Expr:
    return bits_call("bitwise_or", a, b)


def bitwise_xor(a, b) -> Expr:
    return bits_call("bitwise_xor", a, b)


def bitwise_not(a) -> Expr:
    return ~convert(a)


def shift_left(a, b) -> Expr:
    return bits_call("shift_left", a, b)


def shift_right(a, b) -> Expr:
    """Arithmetic for signed integers, logical for unsigned ones (numpy's >>)."""
    return bits_call("shift_right", a, b)


def fmin(a, b) -> Expr:
    x, y = binary_operands(a, b)
    return Call(x.dtype, "fmin", (x, y)) if dt.is_float(x.dtype) else Min(x, y)


def fmax(a, b) -> Expr:
    x, y = binary_operands(a, b)
    return Call(x.dtype, "fmax", (x, y)) if dt.is_float(x.dtype) else Max(x, y)


def if_then_else(cond, then_value, else_value) -> Expr:
    c = convert(cond)
    if not dt.is_bool(c.dtype):
        raise TypeError(f"if_then_else condition must be boolean, got {c.dtype}")
    t, f = binary_operands(then_value, else_value)
    return Select(c, t, f)


select = if_then_else


def cast(x, dtype) -> Expr:
    e = convert(x)
    d = dt.canonical(dtype)
    if e.dtype == d:
        return e
    if isinstance(e, Const) and not dt.is_float(d) and dt.is_float(e.dtype):
        return Cast(d, e)
    return const(e.value, d) if isinstance(e, Const) and _exact(e.value, d) else Cast(d, e)


def _exact(value, d: str) -> bool:
    if dt.is_float(d) or dt.is_bool(d):
        return True
    lo, hi = dt.limits(d)
    return float(value).is_integer() and lo <= value <= hi


def all(*conds) -> Expr:
    """Logical and of all conditions."""
    if not conds:
        return const(True)
    out = convert(conds[0])
    for c in conds[1:]:
        out = out & convert(c)
    return out


def any(*conds) -> Expr:
    if not conds:
        return const(False)
    out = convert(conds[0])
    for c in conds[1:]:
        out = out | convert(c)
    return out


def _pow_operator(self, o):
    return pow(self, o)


def _rpow_operator(self, o):
    return pow(o, self)


Expr.__pow__ = _pow_operator  # type: ignore[attr-defined]
Expr.__rpow__ = _rpow_operator  # type: ignore[attr-defined]

__all__ = [
    "abs",
    "acos",
    "acosh",
    "all",
    "any",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "call_intrin",
    "call_pure_intrin",
    "cast",
    "ceil",
    "comm_reducer",
    "copysign",
    "cos",
    "cosh",
    "div",
    "erf",
    "exp",
    "exp2",
    "floor",
    "floordiv",
    "floormod",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "hypot",
    "if_then_else",
    "indexdiv",
    "indexmod",
    "isfinite",
    "isinf",
    "isnan",
    "log",
    "log1p",
    "log2",
    "log10",
    "max",
    "max_value",
    "min",
    "min_value",
    "nearbyint",
    "popcount",
    "pow",
    "power",
    "prod",
    "round",
    "rsqrt",
    "select",
    "shift_left",
    "shift_right",
    "sigmoid",
    "sin",
    "sinh",
    "sqrt",
    "sum",
    "tan",
    "tanh",
    "trunc",
    "truncdiv",
    "truncmod",
]
