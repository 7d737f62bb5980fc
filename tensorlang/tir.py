"""``tvm.tir`` (``tl.tir``): the expression helpers TVM scripts call through ``tvm.tir`` inside a
``te.compute`` body. Each is tensorlang's own (``tl.select``, ``tl.const``, ...) under TVM's name;
``tir.Select(c, t, f)`` and ``tir.if_then_else(c, t, f)`` are the same expression here (both
lower to a select; neither side has effects to guard). TensorIR itself (``tir.Schedule``,
``PrimFunc`` building, ``decl_buffer``, ``ir_builder``, ``T.*``) is not here: naming it says what
to use instead."""

from __future__ import annotations

from .ir.expr import const
from .te import (
    abs,
    acos,
    acosh,
    all,
    any,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    call_extern,
    call_intrin,
    call_packed,
    call_pure_extern,
    call_pure_intrin,
    ceil,
    comm_reducer,
    copysign,
    cos,
    cosh,
    div,
    erf,
    exp,
    exp2,
    floor,
    floordiv,
    floormod,
    fma,
    fmod,
    hypot,
    if_then_else,
    indexdiv,
    indexmod,
    isfinite,
    isinf,
    isnan,
    log,
    log1p,
    log2,
    log10,
    max,
    max_value,
    min,
    min_value,
    nearbyint,
    popcount,
    pow,
    power,
    round,
    rsqrt,
    select,
    shift_left,
    shift_right,
    sigmoid,
    sin,
    sinh,
    sqrt,
    sum,
    tan,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)
from .te.intrin import cast
from .te.tensor import size_var, var

__all__ = [
    "Cast", "FloatImm", "IntImm", "Max", "Min", "Select", "SizeVar", "Var", "abs", "acos",
    "acosh", "all", "any", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_not",
    "bitwise_or", "bitwise_xor", "call_extern", "call_intrin", "call_packed", "call_pure_extern",
    "call_pure_intrin", "ceil", "ceildiv", "comm_reducer", "const", "copysign", "cos", "cosh", "div", "erf",
    "exp", "exp2", "floor", "floordiv", "floormod", "fma", "fmod", "hypot", "if_then_else", "indexdiv",
    "indexmod", "isfinite", "isinf", "isnan", "likely", "log", "log1p", "log2", "log10", "max", "max_value", "min",
    "min_value", "nearbyint", "popcount", "pow", "power", "round", "rsqrt", "shift_left",
    "shift_right", "sigmoid", "sin", "sinh", "sqrt", "sum", "tan", "tanh", "trunc", "truncdiv",
    "truncmod",
]

Select = select


def Max(a, b):
    """``tvm.tir.Max(a, b)``: the elementwise maximum, ``tl.max(a, b)``."""
    return max(a, b)


def Min(a, b):
    """``tvm.tir.Min(a, b)``: the elementwise minimum, ``tl.min(a, b)``."""
    return min(a, b)


def likely(cond):
    """``tvm.tir.likely(cond)``: TVM's hint that a condition is usually true (for loop
    partitioning); the condition itself here, where the lowering finds tails on its own."""
    return cond


def ceildiv(a, b):
    """``tvm.tir.ceildiv(a, b)``: a / b rounded towards plus infinity, for integers
    (``-((-a) // b)``); TVM's float ceildiv is ``tl.ceil(a / b)``."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return -floordiv(-a, b)


def SizeVar(name, dtype="int64"):
    """``tvm.tir.SizeVar(name, dtype)``: ``tl.size_var`` (a symbolic extent)."""
    return size_var(name, dtype)


def Cast(dtype, value):
    """``tvm.tir.Cast(dtype, value)``: ``tl.cast(value, dtype)`` (note the argument order)."""
    return cast(value, dtype)


def FloatImm(dtype, value):
    """``tvm.tir.FloatImm(dtype, value)``: ``tl.const(value, dtype)`` of a float dtype."""
    if not str(dtype).startswith("float"):
        raise TypeError(f"FloatImm: dtype must be a float type, got {dtype!r}")
    return const(float(value), dtype)


def IntImm(dtype, value):
    """``tvm.tir.IntImm(dtype, value)``: ``tl.const(value, dtype)`` of an integer dtype."""
    if not str(dtype).startswith(("int", "uint")):
        raise TypeError(f"IntImm: dtype must be an integer type, got {dtype!r}")
    if int(value) != value:
        raise TypeError(f"IntImm: value must be an integer, got {value!r}")
    return const(int(value), dtype)


def Var(name, dtype="int64"):
    """``tvm.tir.Var(name, dtype)``: ``tl.var`` (an integer scalar: a size or a factor; a
    float16/32/64 one: a scalar kernel parameter for compute bodies)."""
    return var(name, dtype)


_TENSORIR = ("TensorIR is not in tensorlang: kernels are scheduled with tl.create_schedule "
             "(te schedules) and tl.lower(s, args) prints the loop IR")
_NOT_HERE = {
    "Schedule": f"tvm.tir.Schedule: {_TENSORIR}",
    "PrimFunc": f"tvm.tir.PrimFunc: {_TENSORIR}; tl.lower(s, args, name=) returns the kernel",
    "decl_buffer": "tvm.tir.decl_buffer (a tensor intrinsic's buffer binds): the intrinsics here "
                   "are tl.decl_tensor_intrin(op, impl), impl(ins, outs) returning our loop IR "
                   "(docs/tvm_compat.md, tensorize row); no binds or strides are declared",
    "ir_builder": "tvm.tir.ir_builder is not supported: a tensor intrinsic's body is built by "
                  "tl.decl_tensor_intrin's impl(ins, outs) (docs/tvm_compat.md), and an extern "
                  "op's body is tl.call_packed / tl.call_extern",
    "call_llvm_intrin": "tvm.tir.call_llvm_intrin is not supported: the math functions (tl.exp, "
                        "tl.sqrt, tl.fma, ...) lower to LLVM's intrinsics; a C function is "
                        "called per element with tl.call_pure_extern(dtype, 'symbol', x)",
    "transform": "tvm.tir.transform: the lowering passes are a fixed, ordered list "
                 "(tensorlang.lower.PASSES); options are keyword arguments of tl.lower/tl.build",
}
_NOT_HERE["call_llvm_pure_intrin"] = _NOT_HERE["call_llvm_intrin"]
for _name in ("Buffer", "BufferLoad", "BufferStore", "For", "SeqStmt", "Evaluate", "Block",
              "BlockRealize", "stmt_functor"):
    _NOT_HERE[_name] = f"tvm.tir.{_name} (TensorIR's statements): {_TENSORIR}"


def __getattr__(name: str):
    text = f"module 'tensorlang.tir' has no attribute {name!r}"
    if name.startswith("_"):
        raise AttributeError(text)
    hint = _NOT_HERE.get(name, "tensorlang.tir holds tvm.tir's expression helpers only "
                                "(Select, const, if_then_else, exp, call_pure_extern, ...)")
    raise AttributeError(f"{text}: {hint}")
