"""Math functions emitted into an ``llvmlite.ir`` module, scalar or vector, with numpy semantics.

Entry point: :func:`emit_math` (``builder, name, args -> value``); :data:`SUPPORTED` lists the names.

How each element type is handled:

* ``float`` (f32), scalar or ``<N x float>``: exact operations (sqrt, abs, floor, ceil, round, trunc,
  fmin, fmax) are single LLVM intrinsics; rsqrt is ``1/sqrt`` (two correctly rounded steps, exactly
  what ``1 / np.sqrt(x)`` computes); exp, exp2, log, log2, tanh, sigmoid, erf and pow are polynomial
  approximations written out here in IR, branch-free (every lane computes every path and ``select``
  picks), so LLVM can vectorize, unroll and schedule them inside the caller's loop.
* ``double`` (f64): the transcendental functions call the C library per element (``exp``, ``log``,
  ``erf`` ...; vectors are split with extractelement/insertelement). Correctness first: libm is
  within 1-2 ulp and a vector f64 polynomial library is not needed yet. sigmoid uses the same
  overflow-free formula as for f32 with libm exp.
* ``half`` (f16): widened to f32 with ``fpext``, computed as f32, narrowed back with ``fptrunc``.

Every non-trivial function is emitted once per (name, type) as an ``internal`` ``alwaysinline``
helper (``tensorlang.math.exp.v16f32``) and called. The always-inliner runs in every LLVM pipeline
(O0 too), so after optimization the code is inline in the loop exactly as if it had been emitted at
the call site, while the IR stays readable and a kernel that uses ``exp`` in five places carries
one copy of its few dozen instructions before inlining. If no pass pipeline runs at all, the internal
function is still a correct, defined callee.

Floating-point flags: no fast-math flags are used. ``nnan``/``ninf`` would break inf/NaN propagation,
``reassoc``/``arcp`` would destroy the error analysis, and every place where fusing helps is written
as an explicit ``llvm.fma``; ``contract`` would only additionally let LLVM fuse the deliberately
separate roundings of the range reductions.

Accuracy of the f32 code, max error in ulps against float64 references over wide random ranges,
random bit patterns and the special values (``tests/tensorlang/test_intrinsics.py``): exp 0.97,
exp2 0.93, log 0.82, log2 1.0, tanh 1.5, sigmoid 2.2, erf 0.96, pow 0.50 (computed through f64,
see ``_Emitter.pow_f32``). The special values (inf, NaN, +-0, negative arguments, overflow,
underflow into denormals) give what numpy gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

__all__ = ["SUPPORTED", "emit_math", "get_intrinsic"]

_UNARY = frozenset(
    {
        "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
        "abs", "floor", "ceil", "round", "trunc", "nearbyint", "sin", "cos", "atan", "log10",
        "tan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "log1p",
    }
)
_BINARY = frozenset({"pow", "fmin", "fmax", "atan2", "hypot", "copysign"})
_TERNARY = frozenset({"fma"})

#: Every name :func:`emit_math` accepts.
SUPPORTED = _UNARY | _BINARY | _TERNARY

# Names that are one LLVM intrinsic with numpy's exact semantics: llvm.roundeven is np.round's
# round-half-to-even, llvm.minnum/maxnum return the non-NaN operand like np.fmin/np.fmax.
_DIRECT = {
    "sqrt": "sqrt",
    "abs": "fabs",
    "floor": "floor",
    "ceil": "ceil",
    "round": "roundeven",
    "trunc": "trunc",
    "fmin": "minnum",
    "fmax": "maxnum",
    # the default rounding mode, half to even: np.rint
    "nearbyint": "nearbyint",
    "fma": "fma",
    "copysign": "copysign",
}

# Functions without a polynomial of our own: f32 calls the f64 C function and rounds once, so the
# result is the correctly rounded one but for rare double-rounding ties (within 1 ulp).
_VIA_F64 = frozenset({"sin", "cos", "atan", "log10", "tan", "asin", "acos", "sinh", "cosh",
                      "asinh", "acosh", "atanh", "log1p", "atan2", "hypot"})

_F32 = ir.FloatType()
_F64 = ir.DoubleType()
_I32 = ir.IntType(32)

_INF = float("inf")
_NAN = float("nan")


def _h(text: str) -> float:
    return float.fromhex(text)


# ---------------------------------------------------------------------------------------------
# Polynomial coefficients. Each set is a weighted minimax fit (Lawson's iteratively reweighted
# least squares on 4000 Chebyshev-distributed points, reference values from mpmath at 40 digits,
# weight chosen so the error measured is the relative error of the final function value), then
# rounded to the working precision. Lowest degree first. Fit error is quoted relative to 2^-24
# (half an ulp of a value in [1, 2)).
# ---------------------------------------------------------------------------------------------

# e^r = 1 + r + r^2 * P(r) for |r| <= ln2/2; fit error 0.05 * 2^-24.
_EXP_P = tuple(
    map(_h, ["0x1.fffffcp-2", "0x1.555492p-3", "0x1.5558f2p-5", "0x1.1239d4p-7", "0x1.6a244cp-10"])
)
# 2^r = 1 + r * Q(r) for |r| <= 1/2; fit error 0.03 * 2^-24.
_EXP2_Q = tuple(
    map(
        _h,
        [
            "0x1.62e430p-1", "0x1.ebfbdcp-3", "0x1.c6aee8p-5",
            "0x1.3b2d4cp-7", "0x1.5f3e54p-10", "0x1.41fbbcp-13",
        ],
    )
)
# log(1 + f) = f - f^2/2 + f^3 * P(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]; fit error 0.1 * 2^-24.
_LOG_P = tuple(
    map(
        _h,
        [
            "0x1.555554p-2", "-0x1.000226p-2", "0x1.99a008p-3", "-0x1.547244p-3",
            "0x1.22da1ep-3", "-0x1.0d8542p-3", "0x1.055b68p-3", "-0x1.38b576p-4",
        ],
    )
)
# tanh(a) = a + a^3 * P(a^2) for 0 <= a < 1; fit error 0.08 * 2^-24.
_TANH_P = tuple(
    map(
        _h,
        [
            "-0x1.55553cp-2", "0x1.110be2p-3", "-0x1.b96222p-5", "0x1.600992p-6",
            "-0x1.0460c6p-7", "0x1.2da4fcp-9", "-0x1.77dd3cp-12",
        ],
    )
)
# erf(a) = a + a * P(a^2) for 0 <= a < 1 (P(0) = 2/sqrt(pi) - 1, so the final fma adds a small
# correction to a instead of rounding a product near 1.13); fit error 0.02 * 2^-24.
_ERF_SMALL_P = tuple(
    map(
        _h,
        [
            "0x1.06eba8p-3", "-0x1.81273ep-2", "0x1.ce2cf8p-4", "-0x1.b7f90ep-6",
            "0x1.5405bap-8", "-0x1.a3f734p-11", "0x1.496ab0p-14",
        ],
    )
)
# log(erfc(a)) = P(a - 1) for 1 <= a <= 4; absolute fit error 1.2e-8 (= relative error of erfc).
# erf(4) = 1 - 1.5e-8 already rounds to 1.0f, so clamping a to 4 saturates correctly.
_ERF_LOGERFC_P = tuple(
    map(
        _h,
        [
            "-0x1.d97fc0p+0", "-0x1.51c9aep+1", "-0x1.afabd4p-1", "-0x1.54870ap-5",
            "0x1.49ee3cp-7", "-0x1.0c7420p-9", "0x1.4d5aacp-12", "-0x1.10a02ap-15",
            "0x1.ad7294p-20",
        ],
    )
)
# Double-precision helpers for pow_f32 (kept as doubles). log(1 + f) = 2s + s^3 * P(s^2) with
# s = f / (2 + f), |s| <= 0.1716; relative fit error below 2^-41.
_POW_LOG_P = tuple(
    map(
        _h,
        [
            "0x1.55555555ac7e1p-1", "0x1.999997cd2f83fp-2", "0x1.24939d4c4dd6fp-2",
            "0x1.c64fd9bb44920p-3", "0x1.8f15c434a1798p-3",
        ],
    )
)
# 2^r = 1 + r * Q(r) for |r| <= 1/2; relative fit error 2^-34.
_POW_EXP2_Q = tuple(
    map(
        _h,
        [
            "0x1.62e42ff0e1925p-1", "0x1.ebfbe0778733ep-3", "0x1.c6b08ac06b428p-5",
            "0x1.3b29f39d42da4p-7", "0x1.5d8a85ff49f30p-10", "0x1.445c840af5ce0p-13",
            "0x1.fde5fd5f24200p-17",
        ],
    )
)

# ln2 split for Cody-Waite reduction in exp: the high part has 16 significant bits, so n * hi is
# exact in f32 for |n| <= 150 and x - n*hi is exact (Sterbenz-like cancellation); lo = f32(ln2 - hi).
_LN2_HI16 = _h("0x1.62e4p-1")
_LN2_LO16 = _h("0x1.7f7d1cp-20")
# ln2 and log2(e) split as f32(c) + f32(c - f32(c)) for the final reconstructions in log/log2
# (used inside fma, where the product with the high part is exact anyway).
_LN2_HI = _h("0x1.62e430p-1")
_LN2_LO = _h("-0x1.05c610p-29")
_LOG2E_HI = _h("0x1.715476p+0")
_LOG2E_LO = _h("0x1.4ae0c0p-26")
_LOG2E_F64 = _h("0x1.71547652b82fep+0")

# Bit pattern of f32(sqrt(1/2)) / f64(sqrt(1/2)): subtracting it from a positive float's bits puts
# the exponent of x / sqrt(1/2) in the high bits and leaves a mantissa m in [sqrt(1/2), sqrt(2)).
_SQRT_HALF_BITS_F32 = 0x3F3504F3
_SQRT_HALF_BITS_F64 = 0x3FE6A09E667F3BCD

# libm names of the f64 transcendental functions (unary unless listed in _BINARY).
_LIBM_F64 = {
    "exp": "exp",
    "exp2": "exp2",
    "log": "log",
    "log2": "log2",
    "tanh": "tanh",
    "erf": "erf",
    "pow": "pow",
    "sin": "sin",
    "cos": "cos",
    "atan": "atan",
    "log10": "log10",
    "tan": "tan",
    "asin": "asin",
    "acos": "acos",
    "sinh": "sinh",
    "cosh": "cosh",
    "asinh": "asinh",
    "acosh": "acosh",
    "atanh": "atanh",
    "log1p": "log1p",
    "atan2": "atan2",
    "hypot": "hypot",
}


# ---------------------------------------------------------------------------------------------
# Types and declarations
# ---------------------------------------------------------------------------------------------


def _split(ty: ir.Type) -> tuple[ir.Type, int | None]:
    """(element type, lane count or None for scalars)."""
    if isinstance(ty, ir.VectorType):
        return ty.element, ty.count
    return ty, None


def _like(ty: ir.Type, elem: ir.Type) -> ir.Type:
    """``elem`` with the same vector shape as ``ty``."""
    _, lanes = _split(ty)
    return elem if lanes is None else ir.VectorType(elem, lanes)


def _mangle(ty: ir.Type) -> str:
    """LLVM's overload suffix: f32, f64, f16, i32, v16f32 ..."""
    elem, lanes = _split(ty)
    if isinstance(elem, ir.FloatType):
        base = "f32"
    elif isinstance(elem, ir.DoubleType):
        base = "f64"
    elif isinstance(elem, ir.HalfType):
        base = "f16"
    elif isinstance(elem, ir.IntType):
        base = f"i{elem.width}"
    else:
        raise TypeError(f"no intrinsic suffix for type {ty}")
    return base if lanes is None else f"v{lanes}{base}"


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    """Function ``name`` of type ``fnty`` in ``module``, declared once and reused afterwards."""
    existing = module.globals.get(name)
    if existing is None:
        return ir.Function(module, fnty, name=name)
    if not isinstance(existing, ir.Function) or existing.function_type != fnty:
        raise TypeError(f"{name!r} already exists in the module with a different type")
    return existing


def get_intrinsic(module: ir.Module, base: str, ty: ir.Type, nargs: int = 1) -> ir.Function:
    """Declare (or reuse) ``llvm.<base>.<suffix of ty>`` taking ``nargs`` operands of type ``ty``.

    Written by hand because ``Module.declare_intrinsic`` builds wrong signatures for vector
    overloads. Only for intrinsics whose operands and result all have the overloaded type
    (sqrt, fabs, floor, fma, minnum, copysign, roundeven ...).
    """
    return _declare(module, f"llvm.{base}.{_mangle(ty)}", ir.FunctionType(ty, [ty] * nargs))


def _arity(name: str) -> int:
    return 3 if name in _TERNARY else 2 if name in _BINARY else 1


def _check_args(name: str, args: Sequence[ir.Value]) -> ir.Type:
    if name not in SUPPORTED:
        raise ValueError(f"unsupported math function {name!r}; supported: {sorted(SUPPORTED)}")
    want = _arity(name)
    if len(args) != want:
        raise TypeError(f"{name} takes {want} argument(s), got {len(args)}")
    ty = args[0].type
    for a in args[1:]:
        if a.type != ty:
            raise TypeError(f"{name}: all arguments must have the same type, got {ty} and {a.type}")
    elem, _ = _split(ty)
    if not isinstance(elem, (ir.HalfType, ir.FloatType, ir.DoubleType)):
        raise TypeError(f"{name}: expected half/float/double or a vector of them, got {ty}")
    return ty


# ---------------------------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------------------------


class _Emitter:
    """Small typed wrapper over an IRBuilder: constants are splatted to the working type."""

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type, scalef: bool = False):
        self.b = builder
        self.ty = ty
        self.scalef = scalef  # the target has AVX-512F's vscalefps (see exp_f32)
        self.elem, self.lanes = _split(ty)
        self.bits = 64 if isinstance(self.elem, ir.DoubleType) else 32
        self.ity = _like(ty, ir.IntType(self.bits))

    # -- constants and plumbing -------------------------------------------------------------

    def _splat(self, ty: ir.Type, value) -> ir.Constant:
        elem, lanes = _split(ty)
        if lanes is None:
            return ir.Constant(elem, value)
        return ir.Constant(ty, [value] * lanes)

    def c(self, value: float, ty: ir.Type | None = None) -> ir.Constant:
        return self._splat(ty or self.ty, value)

    def ic(self, value: int) -> ir.Constant:
        return self._splat(self.ity, value)

    def _f(self, v):
        return self.c(v) if isinstance(v, (int, float)) else v

    def intr(self, base: str, *args: ir.Value) -> ir.Value:
        ty = args[0].type
        return self.b.call(get_intrinsic(self.b.module, base, ty, len(args)), list(args))

    # -- arithmetic (plain IEEE operations, no fast-math flags) --------------------------------

    def add(self, a, b):
        return self.b.fadd(self._f(a), self._f(b))

    def sub(self, a, b):
        return self.b.fsub(self._f(a), self._f(b))

    def mul(self, a, b):
        return self.b.fmul(self._f(a), self._f(b))

    def div(self, a, b):
        return self.b.fdiv(self._f(a), self._f(b))

    def fma(self, a, b, c):
        return self.intr("fma", self._f(a), self._f(b), self._f(c))

    def poly(self, x, coeffs: Sequence[float]):
        """Horner's rule with fma, coefficients lowest degree first."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, k)
        return acc

    def lt(self, a, b):
        return self.b.fcmp_ordered("<", self._f(a), self._f(b))

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", self._f(a), self._f(b))

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", self._f(a), self._f(b))

    def ugt(self, a, b):
        """a > b or either is NaN."""
        return self.b.fcmp_unordered(">", self._f(a), self._f(b))

    def ult(self, a, b):
        """a < b or either is NaN."""
        return self.b.fcmp_unordered("<", self._f(a), self._f(b))

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def sel(self, cond, a, b):
        return self.b.select(cond, self._f(a), self._f(b))

    def fabs(self, a):
        return self.intr("fabs", a)

    def copysign(self, mag, sign):
        return self.intr("copysign", mag, sign)

    def _ldexp_int(self, p, n, bias: int, mant_bits: int):
        """p * 2^n for integer n in the exponent range of normal numbers (a single power)."""
        b = self.b
        e = b.shl(b.add(n, self.ic(bias)), self.ic(mant_bits))
        return self.mul(p, b.bitcast(e, self.ty))

    # -- f32 kernels ---------------------------------------------------------------------------

    def _scale_f32(self, p, n_float):
        """p * 2^n for integral n in [-151, 129], p in [0.7, 1.42]. Two factors because 2^n alone
        would leave the normal range; p * 2^n1 is exact (normal result), so the only rounding is
        the final multiply and denormal results are correctly rounded."""
        b = self.b
        n = b.fptosi(n_float, self.ity)
        n1 = b.ashr(n, self.ic(1))
        n2 = b.sub(n, n1)
        return self._ldexp_int(self._ldexp_int(p, n1, 127, 23), n2, 127, 23)

    def _exp_core_f32(self, x, wide_range: bool):
        """e^x for x that is not NaN and already clamped: to [-104, 89] when ``wide_range``,
        else to [-87, 0] where a single power of two scales the result."""
        n = self.intr("roundeven", self.mul(x, _LOG2E_HI))
        # Cody-Waite: x - n*ln2 in two exact-ish steps, |r| <= ln2/2 (+ rounding of n).
        r = self.fma(n, -_LN2_HI16, x)
        r = self.fma(n, -_LN2_LO16, r)
        # e^r = 1 + (r + r^2 P(r)); adding the 1 last keeps the small part's bits.
        q = self.fma(self.mul(r, r), self.poly(r, _EXP_P), r)
        p = self.add(q, 1.0)
        if wide_range:
            return self._scale_f32(p, n)
        return self._ldexp_int(p, self.b.fptosi(n, self.ity), 127, 23)

    def exp_f32(self, x):
        if self.scalef and self.lanes == 16:
            return self._exp_f32_scalef(x)
        # Clamp to where the result is already inf (e^89) or 0 (e^-104 < 2^-150). The unordered
        # compare also sends NaN to the clamp value: fptosi(NaN) would be poison. NaN is put back
        # at the end.
        xc = self.sel(self.ugt(x, 89.0), 89.0, x)
        xc = self.sel(self.lt(xc, -104.0), -104.0, xc)
        return self.sel(self.isnan(x), x, self._exp_core_f32(xc, wide_range=True))

    def _exp_f32_scalef(self, x):
        """exp_f32 with AVX-512's vscalefps for the final p * 2^n: one instruction instead of
        the two-step integer exponent build (9 instructions: convert, shifts, adds, multiplies)
        and it takes n as a float, so no fptosi needs NaN kept away from it. Same n, r and p as
        _exp_core_f32 and one correctly rounded scaling (denormal results included), so the
        results are the same bits (NaN payloads aside). A softmax spends about half its time
        in exp."""
        # ordered compares: NaN fails both and flows through to the result as NaN
        xc = self.sel(self.gt(x, 89.0), 89.0, x)
        xc = self.sel(self.lt(xc, -104.0), -104.0, xc)
        n = self.intr("roundeven", self.mul(xc, _LOG2E_HI))
        r = self.fma(n, -_LN2_HI16, xc)
        r = self.fma(n, -_LN2_LO16, r)
        q = self.fma(self.mul(r, r), self.poly(r, _EXP_P), r)
        p = self.add(q, 1.0)
        # declared by hand (declare_intrinsic gets vector intrinsic signatures wrong):
        # (a, b, passthrough, mask, rounding) -> a * 2^floor(b), rounding 4 = current mode
        name = "llvm.x86.avx512.mask.scalef.ps.512"
        i16, i32 = ir.IntType(16), ir.IntType(32)
        fnty = ir.FunctionType(self.ty, [self.ty, self.ty, self.ty, i16, i32])
        fn = self.b.module.globals.get(name) or ir.Function(self.b.module, fnty, name=name)
        return self.b.call(fn, [p, n, p, ir.Constant(i16, -1), ir.Constant(i32, 4)])

    def exp2_f32(self, x):
        # 2^129 = inf and 2^-151 rounds to 0; NaN is handled as in exp_f32.
        xc = self.sel(self.ugt(x, 129.0), 129.0, x)
        xc = self.sel(self.lt(xc, -151.0), -151.0, xc)
        n = self.intr("roundeven", xc)
        r = self.sub(xc, n)  # exact
        p = self.fma(r, self.poly(r, _EXP2_Q), 1.0)
        return self.sel(self.isnan(x), x, self._scale_f32(p, n))

    def _log_core_f32(self, x):
        """x = 2^e * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)); returns (e, f, y) where
        log(1 + f) = f + y and y = -f^2/2 + f^3 P(f) is the small correction. Garbage (but no
        poison) for x <= 0, inf and NaN: the callers patch those lanes."""
        b = self.b
        # Denormals: scale into the normal range first so the exponent field is meaningful.
        sub = self.lt(x, _h("0x1p-126"))
        xs = self.sel(sub, self.mul(x, _h("0x1p23")), x)
        t = b.sub(b.bitcast(xs, self.ity), self.ic(_SQRT_HALF_BITS_F32))
        ei = b.sub(b.ashr(t, self.ic(23)), b.select(sub, self.ic(23), self.ic(0)))
        m = b.bitcast(b.add(b.and_(t, self.ic(0x7FFFFF)), self.ic(_SQRT_HALF_BITS_F32)), self.ty)
        f = self.sub(m, 1.0)  # exact (Sterbenz)
        z = self.mul(f, f)
        y = self.mul(self.mul(f, z), self.poly(f, _LOG_P))
        y = self.fma(z, -0.5, y)
        return b.sitofp(ei, self.ty), f, y

    def _log_special(self, x, r):
        r = self.sel(self.eq(x, _INF), _INF, r)
        r = self.sel(self.eq(x, 0.0), -_INF, r)  # also -0, like numpy
        return self.sel(self.ult(x, 0.0), _NAN, r)  # x < 0 or NaN

    def log_f32(self, x):
        e, f, y = self._log_core_f32(x)
        # Sum from small to large: e*ln2_lo + y, then f, then e*ln2_hi (exact product in fma).
        r = self.fma(e, _LN2_LO, y)
        r = self.add(f, r)
        r = self.fma(e, _LN2_HI, r)
        return self._log_special(x, r)

    def log2_f32(self, x):
        e, f, y = self._log_core_f32(x)
        # log2(1+f) = (f + y) * log2(e) with log2(e) in two parts so the dominant f*log2e term is
        # not limited by f32(log2(e))'s rounding; e is added last (exact when f = 0).
        t = self.fma(y, _LOG2E_HI, self.mul(f, _LOG2E_LO))
        t = self.fma(f, _LOG2E_HI, t)
        return self._log_special(x, self.add(t, e))

    def tanh_f32(self, x):
        a = self.fabs(x)
        z = self.mul(a, a)
        small = self.fma(self.mul(a, z), self.poly(z, _TANH_P), a)
        # a >= 1: tanh = (1 - e)/(1 + e) with e = exp(-2a) in (0, 0.14]: no overflow, and for
        # a >= 10 (clamped; NaN too, via the unordered compare) e < 2^-28 gives exactly 1.
        ac = self.sel(self.ugt(a, 10.0), 10.0, a)
        e = self._exp_core_f32(self.mul(ac, -2.0), wide_range=False)
        big = self.div(self.sub(1.0, e), self.add(1.0, e))
        # NaN takes the polynomial path, which propagates it.
        return self.copysign(self.sel(self.ult(a, 1.0), small, big), x)

    def sigmoid_f32(self, x):
        # e = exp(-|x|) is in (0, 1], so nothing overflows: sigmoid(|x|) = 1/(1+e) and
        # sigmoid(-|x|) = e/(1+e); one division serves both. This keeps full relative accuracy
        # down into the denormals, where the naive 1/(1+exp(-x)) would give 0 or inf/inf.
        e = self.exp_f32(self.b.fneg(self.fabs(x)))
        num = self.sel(self.lt(x, 0.0), e, 1.0)
        return self.div(num, self.add(1.0, e))

    def erf_f32(self, x):
        a = self.fabs(x)
        small = self.fma(a, self.poly(self.mul(a, a), _ERF_SMALL_P), a)
        # erf = 1 - erfc, erfc = exp(P(a - 1)) for 1 <= a <= 4; beyond 4 erf is 1.0f, so clamping
        # saturates exactly. NaN is clamped too (unordered compare) and takes the small path.
        ac = self.sel(self.ugt(a, 4.0), 4.0, a)
        # lg is in [-17.4, -1.8] for the lanes that use it; for a < 1 the polynomial is
        # extrapolated to [-1, 0), where it stays in [-1.9, 0.01], so the integer exponent in exp
        # is still in range (no poison from fptosi) before the select discards those lanes.
        lg = self.poly(self.sub(ac, 1.0), _ERF_LOGERFC_P)
        big = self.sub(1.0, self._exp_core_f32(lg, wide_range=False))
        return self.copysign(self.sel(self.ult(a, 1.0), small, big), x)

    def pow_f32(self, x, y):
        """x^y with C99/numpy powf semantics, computed as 2^(y * log2|x|) in f64.

        f32's own log2/exp2 would not do: an error d in t = y*log2|x| becomes a relative error
        ln2*d in the result, and |t| reaches 150, so log2|x| is needed to ~2^-33 relative. In f64
        every f32 input (denormals included) is a normal number, the products are exact enough,
        and a single fptrunc rounds the result (also into the f32 denormal range). The sign and
        the special cases are fixed up afterwards with selects in f32.
        """
        b = self.b
        dty = _like(self.ty, _F64)
        d = _Emitter(b, dty)
        ax = d.fabs(b.fpext(x, dty))
        yd = b.fpext(y, dty)

        # log2|x|: |x| = 2^e * m, m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s), s = f/(2+f).
        t = b.sub(b.bitcast(ax, d.ity), d.ic(_SQRT_HALF_BITS_F64))
        e = b.sitofp(b.ashr(t, d.ic(52)), dty)
        mbits = b.add(b.and_(t, d.ic((1 << 52) - 1)), d.ic(_SQRT_HALF_BITS_F64))
        f = d.sub(b.bitcast(mbits, dty), 1.0)
        s = d.div(f, d.add(f, 2.0))
        u = d.mul(s, s)
        ln_m = d.fma(d.mul(s, u), d.poly(u, _POW_LOG_P), d.add(s, s))
        lg = d.fma(ln_m, _LOG2E_F64, e)
        lg = d.sel(d.eq(ax, 0.0), -_INF, lg)
        lg = d.sel(d.eq(ax, _INF), _INF, lg)
        lg = d.sel(d.isnan(ax), ax, lg)

        # 2^(y*lg); |t| > 200 is far outside f32 range either way; NaN goes to the clamp for the
        # integer conversion and is restored after.
        tt = d.mul(yd, lg)
        tc = d.sel(d.ugt(tt, 200.0), 200.0, tt)
        tc = d.sel(d.lt(tc, -200.0), -200.0, tc)
        n = d.intr("roundeven", tc)
        r = d.sub(tc, n)
        p = d.fma(r, d.poly(r, _POW_EXP2_Q), 1.0)
        pd = d._ldexp_int(p, b.fptosi(n, d.ity), 1023, 52)
        pd = d.sel(d.isnan(tt), tt, pd)
        res = b.fptrunc(pd, self.ty)

        # y is an integer iff trunc(y) == y (true for +-inf, whose handling matches |x|^y);
        # odd iff additionally y/2 is not an integer (false for all |y| >= 2^24).
        ty_ = self.intr("trunc", y)
        y_int = self.eq(ty_, y)
        half = self.mul(y, 0.5)
        y_odd = b.and_(y_int, b.fcmp_ordered("!=", self.intr("trunc", half), half))
        # The sign bit of x (including -0 and -inf) carries over for odd integer exponents.
        x_neg = b.icmp_signed("<", b.bitcast(x, self.ity), self.ic(0))
        res = self.sel(b.and_(x_neg, y_odd), b.fneg(res), res)
        # Negative finite base with a finite non-integer exponent: NaN.
        neg_finite = b.and_(self.lt(x, 0.0), self.gt(x, -_INF))
        y_frac = b.fcmp_unordered("!=", ty_, y)
        res = self.sel(b.and_(neg_finite, y_frac), _NAN, res)
        # pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN; pow(-1, +-inf) = 1.
        one = b.or_(self.eq(y, 0.0), self.eq(x, 1.0))
        one = b.or_(one, b.and_(self.eq(x, -1.0), self.eq(self.fabs(y), _INF)))
        return self.sel(one, 1.0, res)

    # -- f64 via libm ----------------------------------------------------------------------------

    def libm(self, fname: str, *args):
        """Call the double-precision C function ``fname`` per element."""
        b = self.b
        fn = _declare(b.module, fname, ir.FunctionType(_F64, [_F64] * len(args)))
        if self.lanes is None:
            return b.call(fn, list(args))
        out = ir.Constant(self.ty, ir.Undefined)
        for i in range(self.lanes):
            idx = ir.Constant(_I32, i)
            val = b.call(fn, [b.extract_element(a, idx) for a in args])
            out = b.insert_element(out, val, idx)
        return out

    def via_f64(self, fname: str, *args):
        """The f64 C function on f32 arguments (widening is exact), rounded back once."""
        wide = _like(self.ty, _F64)
        res = _Emitter(self.b, wide).libm(fname, *[self.b.fpext(a, wide) for a in args])
        return self.b.fptrunc(res, self.ty)

    def sigmoid_f64(self, x):
        # Same overflow-free formulation as sigmoid_f32, with libm's exp.
        e = self.libm("exp", self.b.fneg(self.fabs(x)))
        num = self.sel(self.lt(x, 0.0), e, 1.0)
        return self.div(num, self.add(1.0, e))


_F32_BODIES: dict[str, Callable[..., ir.Value]] = {
    "exp": _Emitter.exp_f32,
    "exp2": _Emitter.exp2_f32,
    "log": _Emitter.log_f32,
    "log2": _Emitter.log2_f32,
    "tanh": _Emitter.tanh_f32,
    "sigmoid": _Emitter.sigmoid_f32,
    "erf": _Emitter.erf_f32,
    "pow": _Emitter.pow_f32,
}


def _f32_body(name: str) -> Callable[..., ir.Value]:
    if name in _VIA_F64:
        fname = _LIBM_F64[name]
        return lambda em, *args: em.via_f64(fname, *args)
    return _F32_BODIES[name]


def _f64_body(name: str) -> Callable[..., ir.Value]:
    if name == "sigmoid":
        return _Emitter.sigmoid_f64
    fname = _LIBM_F64[name]
    return lambda em, *args: em.libm(fname, *args)


def _helper(module: ir.Module, name: str, ty: ir.Type, scalef: bool = False) -> ir.Function:
    """The internal always-inline function computing ``name`` on ``ty``, created on first use."""
    nargs = _arity(name)
    fnty = ir.FunctionType(ty, [ty] * nargs)
    fname = f"tensorlang.math.{name}.{_mangle(ty)}" + (".scalef" if scalef else "")
    existing = module.globals.get(fname)
    if existing is not None:
        return _declare(module, fname, fnty)  # type check only
    fn = ir.Function(module, fnty, name=fname)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    elem, _ = _split(ty)
    body = _f32_body(name) if isinstance(elem, ir.FloatType) else _f64_body(name)
    builder.ret(body(_Emitter(builder, ty, scalef), *fn.args))
    return fn


def emit_math(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value],
              scalef: bool = False) -> ir.Value:
    """Emit ``name(*args)`` at ``builder``'s position and return the result value.

    ``args`` are one value (two for pow, fmin, fmax) of type half, float or double, or an
    ``ir.VectorType`` of one of those; all arguments have the same type, which is also the result
    type. Semantics follow numpy: ``round`` rounds half to even, ``fmin``/``fmax`` return the
    non-NaN operand, ``abs`` is fabs, ``rsqrt`` is ``1/sqrt(x)``, ``sigmoid`` is
    ``1/(1+exp(-x))`` without overflow, ``erf`` like ``math.erf``, ``pow`` like ``np.power`` on
    floats (C99 powf special cases, NaN for a negative base with a non-integer exponent).

    scalef: the target has AVX-512F; exp on 16 floats then scales with vscalefps (same bits).

    Raises ValueError for an unknown name and TypeError for wrong argument count or types.
    """
    ty = _check_args(name, args)
    elem, _ = _split(ty)
    if isinstance(elem, ir.HalfType):
        # No f16 arithmetic on most CPUs: widen (exact), compute in f32, round once.
        wide = _like(ty, _F32)
        res = emit_math(builder, name, [builder.fpext(a, wide) for a in args], scalef)
        return builder.fptrunc(res, ty)
    if name in _DIRECT:
        fn = get_intrinsic(builder.module, _DIRECT[name], ty, len(args))
        return builder.call(fn, list(args))
    if name == "rsqrt":
        root = builder.call(get_intrinsic(builder.module, "sqrt", ty), [args[0]])
        return builder.fdiv(_Emitter(builder, ty).c(1.0), root)
    # only exp has a vscalefps form: other helpers keep one name per type
    use = scalef and name == "exp" and _split(ty) == (_F32, 16)
    return builder.call(_helper(builder.module, name, ty, use), list(args))
