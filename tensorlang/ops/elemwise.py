"""Elementwise unary operators, binary operators with numpy broadcasting, where, cast."""
# ruff: noqa: TRY004, PLR0124 - bad attributes raise ValueError (the library contract); x != x
# is the IR test for NaN, not a Python self-comparison


from __future__ import annotations

import math

from .. import te
from ..ir import dtype as dt
from ..ir.expr import Not, const
from ..te.tensor import Tensor
from ._base import (
    BROADCAST,
    ELEMWISE,
    broadcast_index,
    broadcast_shapes,
    check_tensor,
    dim_equal,
    op_compute,
    result_dtype,
)

# ----------------------------------------------------------------------------- unary


def _unary(op: str, x: Tensor, f, out_dtype: str | None = None, **attrs) -> Tensor:
    check_tensor(op, "x", x)
    return op_compute(op, x.shape, lambda *i: f(x[i]) if out_dtype is None
                      else te.cast(f(x[i]), out_dtype), "elemwise", **attrs)


def _need_float(op: str, x: Tensor) -> None:
    check_tensor(op, "x", x)
    if not dt.is_float(x.dtype):
        raise ValueError(f"{op}: x must be a float tensor, got {x.dtype}")


def relu(x: Tensor) -> Tensor:
    # a float Max propagates a NaN operand (codegen: llvm.maximum), as numpy and onnxruntime do
    return _unary("relu", x, lambda v: te.max(const(0, x.dtype), v))


def leaky_relu(x: Tensor, alpha: float = 0.01) -> Tensor:
    _need_float("leaky_relu", x)
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not math.isfinite(alpha):
        raise ValueError(f"leaky_relu: alpha must be a finite number, got {alpha!r}")
    a = const(float(alpha), x.dtype)
    return _unary("leaky_relu", x, lambda v: te.select(v >= 0, v, v * a), alpha=float(alpha))


def clip(x: Tensor, a_min=None, a_max=None) -> Tensor:
    """numpy.clip / ONNX Clip: None leaves that side open; a_min > a_max gives a_max (numpy)."""
    check_tensor("clip", "x", x)
    for name, v in (("a_min", a_min), ("a_max", a_max)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ValueError(f"clip: {name} must be a number or None, got {v!r}")

    def f(v):
        # bounds first: a NaN v passes through (as relu)
        if a_min is not None:
            v = te.max(const(a_min, x.dtype), v)
        if a_max is not None:
            v = te.min(const(a_max, x.dtype), v)
        return v

    return _unary("clip", x, f, a_min=a_min, a_max=a_max)


def sigmoid(x: Tensor) -> Tensor:
    _need_float("sigmoid", x)
    return _unary("sigmoid", x, te.sigmoid)


def tanh(x: Tensor) -> Tensor:
    _need_float("tanh", x)
    return _unary("tanh", x, te.tanh)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """0.5 x (1 + erf(x / sqrt 2)) ("none") or its tanh approximation ("tanh"), as in ONNX Gelu."""
    _need_float("gelu", x)
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    d = x.dtype
    half, one = const(0.5, d), const(1.0, d)
    if approximate == "none":
        return _unary("gelu", x, lambda v: half * v * (one + te.erf(v * const(
            1.0 / math.sqrt(2.0), d))), approximate=approximate)
    c, k = const(_SQRT_2_OVER_PI, d), const(0.044715, d)
    return _unary("gelu", x, lambda v: half * v * (one + te.tanh(c * (v + k * v * v * v))),
                  approximate=approximate)


def hard_swish(x: Tensor) -> Tensor:
    """x * clip(x / 6 + 0.5, 0, 1) (ONNX HardSwish)."""
    _need_float("hard_swish", x)
    d = x.dtype
    return _unary("hard_swish", x, lambda v: v * te.min(te.max(
        v * const(1.0 / 6.0, d) + const(0.5, d), const(0.0, d)), const(1.0, d)))


def exp(x: Tensor) -> Tensor:
    _need_float("exp", x)
    return _unary("exp", x, te.exp)


def log(x: Tensor) -> Tensor:
    _need_float("log", x)
    return _unary("log", x, te.log)


def sqrt(x: Tensor) -> Tensor:
    _need_float("sqrt", x)
    return _unary("sqrt", x, te.sqrt)


def erf(x: Tensor) -> Tensor:
    _need_float("erf", x)
    return _unary("erf", x, te.erf)


def sin(x: Tensor) -> Tensor:
    _need_float("sin", x)
    return _unary("sin", x, te.sin)


def cos(x: Tensor) -> Tensor:
    _need_float("cos", x)
    return _unary("cos", x, te.cos)


def _float_math(name: str, f):
    """A float-only unary op computing the math function ``f`` (numpy's; f32 and f16 through
    the f64 C library, rounded once)."""

    def op(x: Tensor) -> Tensor:
        _need_float(name, x)
        return _unary(name, x, f)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name} of a float tensor (numpy semantics: NaN outside the domain)."
    return op


tan = _float_math("tan", te.tan)
asin = _float_math("asin", te.asin)
acos = _float_math("acos", te.acos)
atan = _float_math("atan", te.atan)
sinh = _float_math("sinh", te.sinh)
cosh = _float_math("cosh", te.cosh)
asinh = _float_math("asinh", te.asinh)
acosh = _float_math("acosh", te.acosh)
atanh = _float_math("atanh", te.atanh)


def round(x: Tensor) -> Tensor:
    """Round half to even (numpy.round, ONNX Round: 2.5 -> 2, -0.5 -> -0)."""
    _need_float("round", x)
    return _unary("round", x, te.round)


def sign(x: Tensor) -> Tensor:
    """numpy.sign: -1, 0 or 1 in x's dtype; NaN stays NaN, -0.0 gives 0.0."""
    check_tensor("sign", "x", x)
    if dt.is_bool(x.dtype):
        raise ValueError("sign: x must be numeric, got bool")
    d = x.dtype
    zero, one = const(0, d), const(1, d)
    if dt.is_unsigned(d):
        return _unary("sign", x, lambda v: te.select(v > zero, one, zero))
    # v != v is NaN's test: it is kept (numpy, onnxruntime); both zeros give +0
    rest = (lambda v: te.select(v != v, v, zero)) if dt.is_float(d) else (lambda v: zero)
    return _unary("sign", x, lambda v: te.select(v > zero, one, te.select(
        v < zero, const(-1, d), rest(v))))


def thresholded_relu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """x where x > alpha, else 0 (ONNX ThresholdedRelu; NaN gives 0)."""
    _need_float("thresholded_relu", x)
    _finite("thresholded_relu", "alpha", alpha)
    a, zero = const(float(alpha), x.dtype), const(0.0, x.dtype)
    return _unary("thresholded_relu", x, lambda v: te.select(v > a, v, zero),
                  alpha=float(alpha))


def shrink(x: Tensor, lambd: float = 0.5, bias: float = 0.0) -> Tensor:
    """ONNX Shrink: x + bias where x < -lambd, x - bias where x > lambd, else 0 (NaN too).
    Integer x: the bounds compare exactly (x < -lambd is x < ceil(-lambd)) and bias is
    truncated to the integer type (as onnxruntime's static_cast)."""
    check_tensor("shrink", "x", x)
    if dt.is_bool(x.dtype):
        raise ValueError("shrink: x must be numeric, got bool")
    for name, v in (("lambd", lambd), ("bias", bias)):
        _finite("shrink", name, v)
    d = x.dtype
    if dt.is_float(d):
        lo, hi, b = const(-float(lambd), d), const(float(lambd), d), const(float(bias), d)
    else:
        lim_lo, lim_hi = dt.limits(d)
        # integer thresholds, clamped to the type: x < t <=> x < ceil(t); x > t <=> x > floor(t)
        lo = const(int(min(max(math.ceil(-lambd), lim_lo), lim_hi)), d)
        hi = const(int(min(max(math.floor(lambd), lim_lo), lim_hi)), d)
        b = const(int(bias), d) if lim_lo <= int(bias) <= lim_hi else None
        if b is None:
            raise ValueError(f"shrink: bias {bias!r} does not fit {d}")
    zero = const(0, d)
    return _unary("shrink", x, lambda v: te.select(v < lo, v + b, te.select(
        v > hi, v - b, zero)), lambd=float(lambd), bias=float(bias))


def mish(x: Tensor) -> Tensor:
    """x * tanh(softplus(x)) (ONNX Mish), as x * n / (n + 2) with n = e^x (e^x + 2): exact to
    rounding for negative x, where log(1 + e^x) would lose e^x's digits; x itself from x > 20
    on (tanh(softplus(20)) is 1 in float32, and n would overflow)."""
    _need_float("mish", x)
    d = x.dtype
    two, big = const(2.0, d), const(20.0, d)

    def f(v):
        e = te.exp(te.min(v, big))
        n = e * (e + two)
        return te.select(v > big, v, v * (n / (n + two)))

    return _unary("mish", x, f)


def _finite(op: str, name: str, v) -> None:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise ValueError(f"{op}: {name} must be a finite number, got {v!r}")


def abs(x: Tensor) -> Tensor:
    check_tensor("abs", "x", x)
    if dt.is_bool(x.dtype):
        raise ValueError("abs: x must be numeric, got bool")
    if dt.is_unsigned(x.dtype):
        return _unary("abs", x, lambda v: v)
    return _unary("abs", x, te.abs)


def negative(x: Tensor) -> Tensor:
    check_tensor("negative", "x", x)
    if dt.is_bool(x.dtype):
        raise ValueError("negative: x must be numeric, got bool")
    return _unary("negative", x, lambda v: -v)


neg = negative


def floor(x: Tensor) -> Tensor:
    return _unary("floor", check_tensor("floor", "x", x), te.floor)


def ceil(x: Tensor) -> Tensor:
    return _unary("ceil", check_tensor("ceil", "x", x), te.ceil)


def logical_not(x: Tensor) -> Tensor:
    """numpy.logical_not: bool result, nonzero is true."""
    check_tensor("logical_not", "x", x)
    if dt.is_bool(x.dtype):
        return _unary("logical_not", x, lambda v: Not(v))
    return _unary("logical_not", x, lambda v: v == const(0, x.dtype))


def cast(x: Tensor, dtype) -> Tensor:
    check_tensor("cast", "x", x)
    try:
        d = dt.canonical(dtype)
    except (TypeError, ValueError) as e:
        raise ValueError(f"cast: dtype {dtype!r} is not supported: {e}") from None

    def f(v):
        if dt.is_bool(d) and not dt.is_bool(v.dtype):
            return v != const(0, v.dtype)  # numpy: nonzero -> True (a plain cast would truncate)
        return te.cast(v, d)

    return _unary("cast", x, f, dtype=d)


# ----------------------------------------------------------------------------- binary


def _operands(op: str, a, b):
    """Tensors and Python scalars -> (list of tensors, output shape, compute dtype)."""
    ts = [v for v in (a, b) if isinstance(v, Tensor)]
    if not ts:
        raise ValueError(f"{op}: at least one operand must be a tensor")
    for name, v in (("a", a), ("b", b)):
        if not isinstance(v, (Tensor, bool, int, float)):
            raise ValueError(f"{op}: {name} must be a tensor or a Python number, got "
                             f"{type(v).__name__}")
    shape = broadcast_shapes(op, *[t.shape for t in ts])
    d = result_dtype(op, *ts)
    return shape, d


def _read(v, idx, d):
    if isinstance(v, Tensor):
        e = v[broadcast_index(v, idx)]
        return te.cast(e, d) if e.dtype != d else e
    return const(v, d)  # a Python scalar adopts the tensor's dtype (numpy's weak scalars)


def _binary(op: str, a, b, f, out_bool: bool = False, need_float: bool = False,
            name: str | None = None) -> Tensor:
    shape, d = _operands(op, a, b)
    if need_float and not dt.is_float(d):
        raise ValueError(f"{op}: operands must be float tensors, got {d}")
    if (isinstance(a, float) or isinstance(b, float)) and not dt.is_float(d):
        raise ValueError(f"{op}: a float scalar with an integer tensor ({d}); cast the "
                         "tensor first")
    return op_compute(op, shape, lambda *i: f(_read(a, i, d), _read(b, i, d)),
                      _kind(shape, [t for t in (a, b) if isinstance(t, Tensor)]), name=name)


def add(a, b) -> Tensor:
    return _binary("add", a, b, lambda x, y: x + y)


def subtract(a, b) -> Tensor:
    return _binary("subtract", a, b, lambda x, y: x - y)


def multiply(a, b) -> Tensor:
    return _binary("multiply", a, b, lambda x, y: x * y)


def divide(a, b) -> Tensor:
    """True division for floats; for integers, floor division (numpy's `//`; a zero divisor is
    undefined, as in C)."""
    return _binary("divide", a, b, lambda x, y: x / y if dt.is_float(x.dtype) else x // y)


def power(a, b) -> Tensor:
    """numpy.power on floats. An integer base tensor keeps its dtype and takes any numeric
    exponent (ONNX Pow), with onnxruntime's results: see :func:`_integer_power`."""
    if isinstance(a, Tensor) and not dt.is_float(a.dtype) and not dt.is_bool(a.dtype):
        return _integer_power(a, b)
    return _binary("power", a, b, te.pow, need_float=True)


def _integer_power(a: Tensor, b) -> Tensor:
    """a ** b as onnxruntime computes it (references.power): pow in float64, exact for every
    result a float64 holds (libm's pow is exact there), truncated toward zero; a result out of
    a's range, or NaN, gives a's minimum, as x86's conversion does in onnxruntime (a bare
    fptosi would be poison). Exponentiation by squaring would differ from onnxruntime on int64
    results beyond 2**53, which it rounds as float64 does."""
    if isinstance(b, bool) or not isinstance(b, (Tensor, int, float)) or (
            isinstance(b, Tensor) and dt.is_bool(b.dtype)):
        what = b.dtype if isinstance(b, Tensor) else type(b).__name__
        raise ValueError(f"power: the exponent of an integer base must be a numeric tensor or "
                         f"number, got {what}")
    ts = [a, b] if isinstance(b, Tensor) else [a]
    shape = broadcast_shapes("power", *[t.shape for t in ts])
    lo, hi = dt.limits(a.dtype)

    def f(*i):
        r = te.pow(_read(a, i, "float64"), _read(b, i, "float64"))
        inside = te.all(r >= const(float(lo), "float64"), r < const(float(hi) + 1.0, "float64"))
        return te.select(inside, te.cast(r, a.dtype), const(lo, a.dtype))

    return op_compute("power", shape, f, _kind(shape, ts))


def _kind(shape, tensors) -> str:
    """ELEMWISE when every tensor operand has the output's shape, else BROADCAST."""
    same = all(len(t.shape) == len(shape) and all(dim_equal(x, y) for x, y in zip(t.shape, shape))
               for t in tensors)
    return ELEMWISE if same else BROADCAST


def maximum(a, b) -> Tensor:
    """numpy.maximum (a NaN operand gives NaN: the IR's Max propagates it)."""
    return _binary("maximum", a, b, te.max)


def minimum(a, b) -> Tensor:
    """numpy.minimum (a NaN operand gives NaN)."""
    return _binary("minimum", a, b, te.min)


def equal(a, b) -> Tensor:
    return _binary("equal", a, b, lambda x, y: x == y)


def not_equal(a, b) -> Tensor:
    return _binary("not_equal", a, b, lambda x, y: x != y)


def less(a, b) -> Tensor:
    return _binary("less", a, b, lambda x, y: x < y)


def less_equal(a, b) -> Tensor:
    return _binary("less_equal", a, b, lambda x, y: x <= y)


def greater(a, b) -> Tensor:
    return _binary("greater", a, b, lambda x, y: x > y)


def greater_equal(a, b) -> Tensor:
    return _binary("greater_equal", a, b, lambda x, y: x >= y)


def _as_bool(x):
    return x if dt.is_bool(x.dtype) else x != const(0, x.dtype)


def logical_and(a, b) -> Tensor:
    return _binary("logical_and", a, b, lambda x, y: _as_bool(x) & _as_bool(y))


def logical_or(a, b) -> Tensor:
    return _binary("logical_or", a, b, lambda x, y: _as_bool(x) | _as_bool(y))


def _bitwise(op: str, a, b, f) -> Tensor:
    _, d = _operands(op, a, b)
    if not dt.is_int(d):
        raise ValueError(f"{op}: operands must be integer tensors, got {d}")
    return _binary(op, a, b, f)


def bitwise_and(a, b) -> Tensor:
    return _bitwise("bitwise_and", a, b, te.bitwise_and)


def bitwise_or(a, b) -> Tensor:
    return _bitwise("bitwise_or", a, b, te.bitwise_or)


def bitwise_xor(a, b) -> Tensor:
    return _bitwise("bitwise_xor", a, b, te.bitwise_xor)


def left_shift(a, b) -> Tensor:
    """numpy.left_shift of integer tensors: bits shifted past the top are discarded, and a
    count outside [0, bits) gives 0 (ONNX BitShift; LLVM's shl would give poison)."""
    return _bitwise("left_shift", a, b, te.shift_left)


def right_shift(a, b) -> Tensor:
    """numpy.right_shift: logical for unsigned, arithmetic (the sign copied in) for signed
    integers; a count outside [0, bits) gives what the sign alone gives (0 or -1)."""
    return _bitwise("right_shift", a, b, te.shift_right)


def bitwise_not(x: Tensor) -> Tensor:
    """numpy.invert of an integer tensor (every bit flipped)."""
    check_tensor("bitwise_not", "x", x)
    if not dt.is_int(x.dtype):
        raise ValueError(f"bitwise_not: x must be an integer tensor, got {x.dtype}")
    return _unary("bitwise_not", x, te.bitwise_not)


def where(cond: Tensor, x, y) -> Tensor:
    """numpy.where(cond, x, y) with broadcasting over all three."""
    check_tensor("where", "cond", cond)
    if not dt.is_bool(cond.dtype):
        raise ValueError(f"where: cond must be a bool tensor, got {cond.dtype}")
    ts = [v for v in (x, y) if isinstance(v, Tensor)]
    for name, v in (("x", x), ("y", y)):
        if not isinstance(v, (Tensor, bool, int, float)):
            raise ValueError(f"where: {name} must be a tensor or a Python number")
    shape = broadcast_shapes("where", cond.shape, *[t.shape for t in ts])
    d = result_dtype("where", *ts) if ts else (
        "float32" if any(isinstance(v, float) for v in (x, y)) else "int64")
    same = all(len(t.shape) == len(shape) and all(dim_equal(p, q) for p, q in zip(t.shape, shape))
               for t in [cond] + ts)
    return op_compute("where", shape, lambda *i: te.select(cond[broadcast_index(cond, i)],
                                                          _read(x, i, d), _read(y, i, d)),
                      ELEMWISE if same else BROADCAST)



# ----------------------------------------------------------------------------- float classes
# (ONNX IsNaN / IsInf; run-time NaN and inf survive codegen: it sets no nnan/ninf flags)


def isnan(x: Tensor) -> Tensor:
    """numpy.isnan / ONNX IsNaN: bool, true where x is NaN (never for integers)."""
    check_tensor("isnan", "x", x)
    return _unary("isnan", x, lambda v: v != v)  # false for integers (LLVM folds it)


def isinf(x: Tensor, detect_negative: bool = True, detect_positive: bool = True) -> Tensor:
    """ONNX IsInf: true where x is -inf (detect_negative) or +inf (detect_positive)."""
    check_tensor("isinf", "x", x)
    for arg, v in (("detect_negative", detect_negative), ("detect_positive", detect_positive)):
        if not isinstance(v, bool):
            raise ValueError(f"isinf: {arg} must be a bool, got {v!r}")
    if not dt.is_float(x.dtype) or not (detect_negative or detect_positive):
        return _unary("isinf", x, _never, detect_negative=detect_negative,
                      detect_positive=detect_positive)
    inf = const(float("inf"), x.dtype)

    def f(v):
        if detect_negative and detect_positive:
            return te.abs(v) == inf
        return v == inf if detect_positive else v == -inf

    return _unary("isinf", x, f, detect_negative=detect_negative,
                  detect_positive=detect_positive)


# ----------------------------------------------------------------------------- remainder


def _never(v):
    """False, written as a test of v: a kernel's argument must be read (LLVM folds it)."""
    return (v != v) & (v == v)


def mod(a, b, fmod: bool = False) -> Tensor:
    """ONNX Mod. fmod=False: the remainder takes the divisor's sign (Python's % and numpy's,
    for floats too, as ONNX defines it from opset 28 on); fmod=True: the dividend's sign (C
    fmod). An integer zero divisor gives 0 (numpy), never a trap."""
    if not isinstance(fmod, bool):
        raise ValueError(f"mod: fmod must be a bool, got {fmod!r}")
    _, d = _operands("mod", a, b)
    if dt.is_bool(d):
        raise ValueError("mod: operands must be numbers, got bool")
    return _binary("mod", a, b, _c_fmod if fmod else (lambda x, y: x % y), name="mod")


def _c_fmod(x, y):
    if dt.is_float(x.dtype):
        # |x| mod |y| is frem of non-negative operands (exact); the sign is then x's. Adding
        # or subtracting y to fix a floored remainder would round small results away
        zero = const(0, x.dtype)
        r = te.abs(x) % te.abs(y)
        return te.select(x < zero, -r, r)
    r = x % y  # floored: the divisor's sign; the truncated one differs by y when signs differ
    zero = const(0, x.dtype)
    fix = (r != zero) & ((r < zero) != (x < zero))
    return te.select(fix, r - y, r)


__all__ = [
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "cast",
    "ceil",
    "clip",
    "cos",
    "cosh",
    "divide",
    "equal",
    "erf",
    "exp",
    "floor",
    "gelu",
    "greater",
    "greater_equal",
    "hard_swish",
    "isinf",
    "isnan",
    "leaky_relu",
    "left_shift",
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "maximum",
    "minimum",
    "mish",
    "mod",
    "multiply",
    "neg",
    "negative",
    "not_equal",
    "power",
    "relu",
    "right_shift",
    "round",
    "shrink",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "subtract",
    "tan",
    "tanh",
    "thresholded_relu",
    "where",
]
