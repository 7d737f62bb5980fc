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
    same = all(len(t.shape) == len(shape) and all(dim_equal(x, y) for x, y in zip(t.shape, shape))
               for t in (a, b) if isinstance(t, Tensor))
    return op_compute(op, shape, lambda *i: f(_read(a, i, d), _read(b, i, d)),
                      ELEMWISE if same else BROADCAST, name=name)


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
    return _binary("power", a, b, te.pow, need_float=True)


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
    """ONNX Mod. fmod=False: the remainder takes the divisor's sign (Python's %, integers
    only, as ONNX requires); fmod=True: the dividend's sign (C fmod), integers or floats.
    An integer zero divisor gives 0 (numpy), never a trap."""
    if not isinstance(fmod, bool):
        raise ValueError(f"mod: fmod must be a bool, got {fmod!r}")
    _, d = _operands("mod", a, b)
    if dt.is_bool(d):
        raise ValueError("mod: operands must be numbers, got bool")
    if not fmod and dt.is_float(d):
        raise ValueError(f"mod: fmod=False (the divisor's sign) is defined for integers; "
                         f"{d} operands need fmod=True")
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
    "add",
    "cast",
    "ceil",
    "clip",
    "cos",
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
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "maximum",
    "minimum",
    "mod",
    "multiply",
    "neg",
    "negative",
    "not_equal",
    "power",
    "relu",
    "sigmoid",
    "sin",
    "sqrt",
    "subtract",
    "tanh",
    "where",
]
