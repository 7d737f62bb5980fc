"""Tests for tensorlang.codegen.intrinsics: JIT small loop kernels and compare with numpy.

Each kernel variant (element type, lane count) is one llvmlite module holding one loop kernel per
function, ``void f_<name>(T* x, [T* y,] T* out, i64 n)``: a main loop over ``lanes``-wide vectors
and a scalar tail loop, both calling ``emit_math``. Results are checked against float64 (for f64:
80-bit long double where numpy has it) references in ulps of the result type, against numpy's own
results exactly for the exact operations, and for identical NaN positions.

``python tests/tensorlang/test_intrinsics.py`` prints the max-ulp table and the exp/tanh
throughput against numpy; ``pytest -m slow`` runs the throughput measurement as a test.
"""

from __future__ import annotations

import ctypes
import functools
import math
import sys
import time
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

try:
    from tensorlang.codegen.intrinsics import SUPPORTED, emit_math, get_intrinsic
except ImportError:  # run from a checkout without installation
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tensorlang.codegen.intrinsics import SUPPORTED, emit_math, get_intrinsic

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()

BINARY = ("pow", "fmin", "fmax")
EXACT = ("sqrt", "rsqrt", "abs", "floor", "ceil", "round", "trunc", "fmin", "fmax")
APPROX = ("exp", "exp2", "log", "log2", "tanh", "sigmoid", "erf", "pow")
NAMES = APPROX + EXACT

IR_ELEM = {"f16": ir.HalfType(), "f32": ir.FloatType(), "f64": ir.DoubleType()}
NP_DTYPE = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
# (element, lanes): lanes == 1 is the scalar kernel.
VARIANTS = [("f32", 16), ("f32", 4), ("f32", 1), ("f64", 8), ("f64", 1), ("f16", 16), ("f16", 1)]

# Max error in ulps of the result type, against the exact value. f32 polynomials: the design
# target is 2-4 ulp; f64 is libm (<= 1 ulp) plus the reference's own error; f16 is one rounding of
# an f32 result that is already a few f32 ulps off, so it can land one f16 ulp away.
MAX_ULP = {
    "f32": {"exp": 1.5, "exp2": 1.5, "log": 1.5, "log2": 1.5, "tanh": 2.0, "sigmoid": 3.0,
            "erf": 1.5, "pow": 1.0},
    "f64": {**dict.fromkeys(APPROX, 1.5), "tanh": 2.5, "sigmoid": 2.5},
    "f16": dict.fromkeys(APPROX, 1.0),
}


# ------------------------------------------------------------------------------------------------
# Kernel construction and JIT
# ------------------------------------------------------------------------------------------------


def _loop(builder, fn, start, stop, step, body):
    """for (i = start; i < stop; i += step) body(i); returns with builder after the loop."""
    pre = builder.block
    head = fn.append_basic_block()
    loop = fn.append_basic_block()
    done = fn.append_basic_block()
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(ir.IntType(64))
    i.add_incoming(start, pre)
    builder.cbranch(builder.icmp_signed("<", i, stop), loop, done)
    builder.position_at_end(loop)
    body(i)
    nxt = builder.add(i, ir.Constant(ir.IntType(64), step))
    i.add_incoming(nxt, builder.block)
    builder.branch(head)
    builder.position_at_end(done)


def _add_kernel(module, name, elem, lanes):
    i64 = ir.IntType(64)
    arity = 2 if name in BINARY else 1
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * (arity + 1) + [i64]),
                     name=f"f_{name}")
    *ins, out, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    nvec = b.mul(b.sdiv(n, ir.Constant(i64, lanes)), ir.Constant(i64, lanes))

    def body(ty):
        def emit(i):
            vals = [b.load(b.gep(p, [i], source_etype=elem), typ=ty, align=2) for p in ins]
            b.store(emit_math(b, name, vals), b.gep(out, [i], source_etype=elem), align=2)
        return emit

    vty = elem if lanes == 1 else ir.VectorType(elem, lanes)
    _loop(b, fn, ir.Constant(i64, 0), nvec, lanes, body(vty))
    if lanes > 1:
        _loop(b, fn, nvec, n, 1, body(elem))  # scalar tail
    b.ret_void()


def _target_machine():
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )


class Compiled:
    """A JIT-compiled module of kernels; keeps the engine alive."""

    def __init__(self, module: ir.Module):
        self.ir_text = str(module)
        mod = llvm.parse_assembly(self.ir_text)
        mod.verify()
        tm = _target_machine()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
        pb.getModulePassManager().run(mod, pb)
        mod.verify()
        self.optimized_ir = str(mod)
        # MCJIT owns its target machine: give it a fresh one.
        self.engine = llvm.create_mcjit_compiler(mod, _target_machine())
        self.engine.finalize_object()

    def kernel(self, name: str, dtype):
        arity = 2 if name in BINARY else 1
        addr = self.engine.get_function_address(f"f_{name}")
        assert addr, name
        cfn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (arity + 1)), ctypes.c_int64)(addr)

        def call(*arrays):
            arrays = [np.ascontiguousarray(a, dtype=dtype) for a in arrays]
            out = np.empty_like(arrays[0])
            cfn(*[a.ctypes.data for a in arrays], out.ctypes.data, out.size)
            return out

        return call


@functools.cache
def compiled_variant(elem_name: str, lanes: int) -> Compiled:
    module = ir.Module(name=f"math_{elem_name}_{lanes}")
    module.triple = llvm.get_process_triple()
    for name in NAMES:
        _add_kernel(module, name, IR_ELEM[elem_name], lanes)
    return Compiled(module)


def run(name, elem_name, lanes, *arrays):
    return compiled_variant(elem_name, lanes).kernel(name, NP_DTYPE[elem_name])(*arrays)


# ------------------------------------------------------------------------------------------------
# Inputs and references
# ------------------------------------------------------------------------------------------------


def specials(dtype):
    fi = np.finfo(dtype)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
            float(fi.tiny), -float(fi.tiny), float(fi.smallest_subnormal),
            -float(fi.smallest_subnormal), float(fi.max), -float(fi.max), 1e-30, -1e-30,
            float(fi.eps), 1.0 - float(fi.epsneg), 1.0 + float(fi.eps), 1.5, 2.5, -2.5, 0.49999997]
    return np.array(vals, dtype=np.float64).astype(dtype)


def random_bits(rng, dtype, n):
    """Uniformly random bit patterns: every exponent, denormals, inf and NaN payloads."""
    itype = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}[dtype]
    return rng.integers(0, np.iinfo(itype).max, size=n, dtype=itype, endpoint=True).view(dtype)


def inputs(name, dtype, seed=0):
    """A list of argument arrays (1 or 2) for ``name`` with n not a multiple of 16."""
    rng = np.random.default_rng(seed)
    n = 20_011 if dtype == np.float16 else 200_003
    fi = np.finfo(dtype)
    top = math.log(float(fi.max))
    bot = math.log(float(fi.smallest_subnormal))

    def mix(*parts):
        with np.errstate(over="ignore", invalid="ignore"):
            x = np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])
            return x.astype(dtype)

    def uni(lo, hi, k=n):
        return rng.uniform(lo, hi, k)

    def loguni(lo, hi, k=n):
        return np.exp(rng.uniform(lo, hi, k)) * rng.choice([-1.0, 1.0], k)

    s = specials(dtype)
    with np.errstate(invalid="ignore"):  # casting signalling-NaN payloads
        rb = random_bits(rng, dtype, n // 4).astype(np.float64)
    if name in ("exp", "sigmoid"):
        return [mix(uni(bot - 2, top + 2), uni(-3, 3), s, rb, [top, top * 1.0001, bot, bot * 0.999])]
    if name == "exp2":
        lim = bot / math.log(2)
        return [mix(uni(lim - 2, top / math.log(2) + 2), uni(-2, 2), s, rb)]
    if name in ("log", "log2", "sqrt", "rsqrt"):
        return [mix(np.abs(loguni(bot, top)), 1 + uni(-0.3, 0.42), loguni(-3, 3), s, rb)]
    if name == "tanh":
        return [mix(uni(-12, 12), loguni(bot, 2), uni(-1.2, 1.2), s, rb)]
    if name == "erf":
        return [mix(uni(-5, 5), loguni(bot, 1.5), uni(-1.2, 1.2), s, rb)]
    if name in ("floor", "ceil", "round", "trunc", "abs"):
        halves = np.round(uni(-1e6, 1e6)) + 0.5
        return [mix(uni(-1e8, 1e8), uni(-10, 10), halves, loguni(bot, top), s, rb)]
    if name in ("fmin", "fmax"):
        x = mix(uni(-10, 10), s, rb)
        y = mix(uni(-10, 10), s[::-1], random_bits(rng, dtype, len(rb)))
        x[rng.random(len(x)) < 0.05] = np.nan
        return [x, y]
    assert name == "pow"
    pos_lim = min(top, 30.0)
    x1 = np.abs(loguni(-pos_lim, pos_lim))
    y1 = uni(-12, 12)
    x2 = 1 + uni(-0.01, 0.01)  # near 1 with large exponents: stresses log2 accuracy
    y2 = uni(-8000, 8000)
    x3 = -np.abs(loguni(-4, 4))  # negative base: integer exponents real, others NaN
    y3 = np.where(rng.random(n) < 0.7, np.round(uni(-20, 20)), uni(-20, 20))
    sx, sy = np.meshgrid(s.astype(np.float64), s.astype(np.float64))  # every special pair
    xs = mix(x1, x2, x3, sx.ravel(), rb)
    ys = mix(y1, y2, y3, sy.ravel(), random_bits(rng, dtype, len(rb)))
    return [xs, ys]


def _np_erf(x):
    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(np.float64)


def reference(name, args, dtype):
    """Exact-ish reference in float64 (f32/f16 inputs) or long double (f64 inputs)."""
    hi = np.longdouble if dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        a = [x.astype(hi) for x in args]
        x = a[0]
        if name == "erf":
            return _np_erf(args[0]) if dtype == np.float64 else _np_erf(x)
        if name == "sigmoid":
            e = np.exp(-np.abs(x))
            return np.where(x >= 0, 1 / (1 + e), e / (1 + e))
        fn = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "tanh": np.tanh,
              "pow": np.power}[name]
        return fn(*a)


def numpy_exact(name, args):
    """What numpy computes in the input dtype for the exactly rounded operations."""
    x = args[0]
    with np.errstate(all="ignore"):
        if name == "rsqrt":
            if x.dtype == np.float16:
                # f16 is computed in f32 and rounded once, not rounded after sqrt and again
                # after the division as 1/np.sqrt(x) on float16 arrays does.
                return (np.float32(1) / np.sqrt(x.astype(np.float32))).astype(np.float16)
            return x.dtype.type(1) / np.sqrt(x)
        fn = {"sqrt": np.sqrt, "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
              "round": np.round, "trunc": np.trunc, "fmin": np.fmin, "fmax": np.fmax}[name]
        return fn(*args)


def ulp_error(got, ref, dtype):
    """|got - ref| in ulps of ``dtype`` at the exact reference ``ref``.

    Where the correctly rounded reference is not finite (overflow, NaN), or ``got`` is not finite,
    the error is 0 if ``got`` equals the rounded reference (NaN == NaN) and inf otherwise.
    """
    fi = np.finfo(dtype)
    with np.errstate(all="ignore"):
        ref_r = ref.astype(dtype)
        special = ~np.isfinite(ref_r) | ~np.isfinite(got)
        same = (got == ref_r) | (np.isnan(got) & np.isnan(ref_r))
        r = np.abs(ref.astype(np.longdouble))
        exp = np.floor(np.log2(np.where(r > 0, r, 1)))
        exp = np.maximum(exp, np.log2(float(fi.tiny)))
        ulp = np.exp2(exp - fi.nmant)
        err = np.abs(got.astype(np.longdouble) - ref.astype(np.longdouble)) / ulp
    err = np.where(special, np.where(same, 0.0, np.inf), err)
    return err.astype(np.float64)


def measure(name, elem_name, lanes, seed=0):
    dtype = NP_DTYPE[elem_name]
    args = inputs(name, dtype, seed)
    got = run(name, elem_name, lanes, *args)
    return args, got, ulp_error(got, reference(name, args, dtype), dtype)


# ------------------------------------------------------------------------------------------------
# Accuracy tests
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("elem_name,lanes", VARIANTS)
@pytest.mark.parametrize("name", APPROX)
def test_approx_functions_within_ulp_bound(name, elem_name, lanes):
    dtype = NP_DTYPE[elem_name]
    args, got, err = measure(name, elem_name, lanes)
    bound = MAX_ULP[elem_name][name]
    ref = reference(name, args, dtype)
    with np.errstate(all="ignore"):
        ref_r = ref.astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref_r), err_msg=f"{name}: NaN positions")
    bad = np.flatnonzero(err > bound)
    if bad.size:
        k = bad[np.argmax(err[bad])]
        detail = f"args={[a[k] for a in args]} got={got[k]!r} ref={ref[k]!r} ulp={err[k]}"
        pytest.fail(f"{name} {elem_name}x{lanes}: {bad.size} values over {bound} ulp; worst {detail}")
    fi = np.finfo(dtype)
    np.testing.assert_allclose(got, ref_r, rtol=(bound + 0.5) * float(fi.eps),
                               atol=(bound + 0.5) * float(fi.smallest_subnormal), equal_nan=True)


@pytest.mark.parametrize("elem_name,lanes", VARIANTS)
@pytest.mark.parametrize("name", EXACT)
def test_exact_functions_match_numpy(name, elem_name, lanes):
    dtype = NP_DTYPE[elem_name]
    args = inputs(name, dtype)
    got = run(name, elem_name, lanes, *args)
    want = numpy_exact(name, args)
    # assert_array_equal treats NaN == NaN and -0 == +0 (which fmin/fmax may return either of).
    np.testing.assert_array_equal(got, want, err_msg=name)
    if name not in ("fmin", "fmax"):
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{name} sign")


@pytest.mark.parametrize("lanes", [16, 1])
def test_edge_cases_f32(lanes):
    def f(name, *vals):
        arrs = [np.array(v, dtype=np.float32) for v in vals]
        return run(name, "f32", lanes, *arrs)

    inf, nan = np.inf, np.nan
    np.testing.assert_array_equal(f("exp", [0, -0.0, inf, -inf, 89, -104, 88.7]),
                                  np.float32([1, 1, inf, 0, inf, 0, math.exp(np.float32(88.7))]))
    assert np.isnan(f("exp", [nan]))[0] and np.isnan(f("exp2", [nan]))[0]
    np.testing.assert_array_equal(f("exp2", [0, 1, 10, -149, -150, -151, 128, 127]),
                                  # 2^-150 is a tie between 0 and 2^-149 and rounds to even.
                                  np.float32([1, 2, 1024, 2.0**-149, 0, 0, inf, 2.0**127]))
    for lg in ("log", "log2"):
        out = f(lg, [0, -0.0, -1, inf, -inf, nan, 1])
        np.testing.assert_array_equal(out, [-inf, -inf, nan, inf, nan, nan, 0])
    np.testing.assert_array_equal(f("log2", [2.0**k for k in range(-149, 128, 7)]),
                                  np.arange(-149, 128, 7, dtype=np.float32))
    np.testing.assert_array_equal(f("tanh", [0, -0.0, inf, -inf, 20, -20, 1e-40]),
                                  np.array([0, -0.0, 1, -1, 1, -1, 1e-40], dtype=np.float32))
    assert np.signbit(f("tanh", [-0.0])[0]) and np.signbit(f("erf", [-0.0])[0])
    np.testing.assert_array_equal(f("erf", [0, inf, -inf, 4, -4, 10, 1e-40]),
                                  np.float32([0, 1, -1, 1, -1, 1, math.erf(np.float32(1e-40))]))
    sig = f("sigmoid", [0, -0.0, inf, -inf, 100, -100, -88, nan])
    want = [0.5, 0.5, 1, 0, 1, math.exp(-100), math.exp(-88) / (1 + math.exp(-88)), nan]
    np.testing.assert_allclose(sig, np.array(want, np.float32), rtol=3e-7, atol=2e-45)
    for name in ("tanh", "sigmoid", "erf", "sqrt", "rsqrt"):
        assert np.isnan(f(name, [nan]))[0], name
    np.testing.assert_array_equal(f("rsqrt", [0, -0.0, inf, 4, -1]), [inf, -inf, 0, 0.5, nan])
    np.testing.assert_array_equal(f("round", [0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997]),
                                  [0, 2, 2, -0.0, -2, 0])
    np.testing.assert_array_equal(f("fmin", [nan, 1, nan], [2, nan, nan]), [2, 1, nan])
    np.testing.assert_array_equal(f("fmax", [nan, 1, nan], [2, nan, nan]), [2, 1, nan])


def test_pow_special_cases_like_numpy():
    vals = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf,
            np.nan, 1e-45, 1e30, -1e30, 16777216.0, 16777217.0]
    x, y = (a.ravel().astype(np.float32) for a in np.meshgrid(vals, vals))
    got = run("pow", "f32", 16, x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1.2e-7, atol=0)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))
    np.testing.assert_array_equal(run("pow", "f32", 1, np.float32([-2, -2, 0, 9]),
                                      np.float32([3, 0.5, 0, 0.5])), [-8, np.nan, 1, 3])


def test_f32_results_close_to_numpy_float32():
    """Besides the exact reference: within a couple of ulps of numpy's own float32 results."""
    fns = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "tanh": np.tanh,
           "pow": np.power}
    for name, fn in fns.items():
        args = inputs(name, np.float32, seed=1)
        got = run(name, "f32", 16, *args)
        with np.errstate(all="ignore"):
            want = fn(*args)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        ok = ~np.isnan(want)
        np.testing.assert_array_max_ulp(got[ok], want[ok], maxulp=4, dtype=np.float32)


def test_half_matches_numpy_half():
    x = inputs("exp", np.float16)[0]
    got = run("exp", "f16", 16, x)
    with np.errstate(all="ignore"):
        want = np.exp(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_max_ulp(got[ok], want[ok], maxulp=1, dtype=np.float16)


# ------------------------------------------------------------------------------------------------
# IR-level tests
# ------------------------------------------------------------------------------------------------


def _fresh_builder(ty, nargs=1):
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * nargs), name="g")
    return module, fn, ir.IRBuilder(fn.append_basic_block())


# one LLVM intrinsic or the f64 C library: checked against numpy through kernels, f32 and
# f16 (widened), scalar and vector, in test_tvm_spellings.py
LIBM_AND_DIRECT = ("sin", "cos", "atan", "log10", "nearbyint", "fma", "tan", "asin", "acos",
                   "sinh", "cosh", "asinh", "acosh", "atanh", "log1p", "atan2", "hypot",
                   "copysign")


def test_supported_names():
    assert SUPPORTED == frozenset(NAMES + LIBM_AND_DIRECT)


def test_declarations_are_reused_and_vector_signatures_correct():
    vt = ir.VectorType(ir.FloatType(), 16)
    module, fn, b = _fresh_builder(vt)
    v = fn.args[0]
    for _ in range(3):
        v = emit_math(b, "exp", [v])
        v = emit_math(b, "sqrt", [v])
    b.ret(v)
    text = str(module)
    assert text.count('define internal <16 x float> @"tensorlang.math.exp.v16f32"') == 1
    assert text.count('declare <16 x float> @"llvm.sqrt.v16f32"(<16 x float>') == 1
    assert 'declare <16 x float> @"llvm.fma.v16f32"(<16 x float>' in text
    assert "alwaysinline" in text
    assert get_intrinsic(module, "sqrt", vt) is module.globals["llvm.sqrt.v16f32"]
    llvm.parse_assembly(text).verify()


def test_f32_vector_code_is_inline_after_optimization():
    """After O3 the f32 kernels contain no calls at all (helpers inlined, no libm)."""
    opt = compiled_variant("f32", 16).optimized_ir
    calls = [ln for ln in opt.splitlines() if " call " in ln and "@llvm." not in ln]
    assert calls == []
    assert "<16 x float>" in opt


def test_no_value_changing_fast_math_flags():
    module, fn, b = _fresh_builder(ir.VectorType(ir.FloatType(), 8), 2)
    b.ret(emit_math(b, "pow", [emit_math(b, "tanh", [fn.args[0]]), fn.args[1]]))
    text = str(module)
    for flag in ("nnan", "ninf", "nsz", "arcp", "afn", "reassoc", " fast "):
        assert flag not in text


def test_rejects_bad_arguments():
    _, fn, b = _fresh_builder(ir.FloatType(), 2)
    x, y = fn.args
    with pytest.raises(ValueError, match="unsupported math function 'cbrt'"):
        emit_math(b, "cbrt", [x])
    with pytest.raises(TypeError, match="fma takes 3 argument"):
        emit_math(b, "fma", [x, y])
    with pytest.raises(TypeError):
        emit_math(b, "exp", [x, y])
    with pytest.raises(TypeError):
        emit_math(b, "pow", [x])
    _, gfn, gb = _fresh_builder(ir.IntType(32))
    with pytest.raises(TypeError):
        emit_math(gb, "abs", [gfn.args[0]])
    _, dfn, db = _fresh_builder(ir.DoubleType())
    with pytest.raises(TypeError):
        emit_math(db, "fmin", [dfn.args[0], x])


# ------------------------------------------------------------------------------------------------
# Throughput (report only)
# ------------------------------------------------------------------------------------------------


def _best_time(fn, reps=5):
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def throughput(n=16 * 1024 * 1024):
    rng = np.random.default_rng(0)
    rows = []
    for name, lo, hi, np_fn in (("exp", -80.0, 80.0, np.exp), ("tanh", -10.0, 10.0, np.tanh)):
        x = rng.uniform(lo, hi, n).astype(np.float32)
        out = np.empty_like(x)
        kern = compiled_variant("f32", 16).engine.get_function_address(f"f_{name}")
        cfn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(kern)
        ours = _best_time(lambda: cfn(x.ctypes.data, out.ctypes.data, n))  # noqa: B023
        theirs = _best_time(lambda: np_fn(x, out=out))  # noqa: B023
        rows.append((name, n / ours / 1e9, n / theirs / 1e9))
    return rows


@pytest.mark.slow
def test_report_throughput():
    for name, ours, theirs in throughput():
        print(f"{name}: tensorlang {ours:.2f} Gelem/s, numpy {theirs:.2f} Gelem/s")


def main():
    print(f"{'function':10s}" + "".join(f"{e}x{n:<7d}" for e, n in VARIANTS))
    for name in APPROX:
        row = [measure(name, e, n)[2] for e, n in VARIANTS]
        print(f"{name:10s}" + "".join(f"{np.max(r):<11.3f}" for r in row))
    for name, ours, theirs in throughput():
        print(f"{name} 16M f32: tensorlang {ours:.2f} Gelem/s, numpy {theirs:.2f} Gelem/s "
              f"({ours / theirs:.2f}x)")


if __name__ == "__main__":
    main()
