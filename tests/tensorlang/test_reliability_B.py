"""Issue 15, part B: arithmetic semantics and codegen (masked loads the x86 backend legalizes
correctly, integer division that never traps, bool and float16 arithmetic as numpy does it,
kernel names, allocation failures)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tensorlang.runtime import KernelError

import tensorlang as tl
from tensorlang.codegen.llvm_ir import emit_llvm_ir
from tensorlang.codegen.target import Target

# ------------------------------------------------------------------ masked loads (select + load)


def _two_guarded_reads(n: int, dtype: str):
    """Y[r, j] = (C[r] ? X[r, j] : -1) + (C[r] && j < n - 1 ? X[r, j + n] : -1), vectorized
    over j: two masked loads whose masks share a run-time condition, the second with a last
    lane that is a constant false (AVX2 read that lane unmasked at n = register lanes + 1)."""
    neg = -1.0 if dtype.startswith("float") else -1
    x = tl.placeholder((6, 2 * n), dtype, name="X")
    c = tl.placeholder((6,), "bool", name="C")
    y = tl.compute((6, n), lambda r, j: tl.if_then_else(c[r], x[r, j], neg)
                   + tl.if_then_else(tl.all(c[r], j < n - 1), x[r, j + n], neg), name="Y")
    s = tl.create_schedule(y)
    s[y].vectorize(y.op.axis[1])
    return s, [x, c, y]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
def test_guarded_vector_reads_match_numpy_at_every_width(dtype):
    xs = np.arange(1, 6 * 2 * 20 + 1)
    cond = np.arange(6) % 2 == 1
    for n in (3, 5, 7, 9, 12, 16, 17):
        s, args = _two_guarded_reads(n, dtype)
        f = tl.build(s, args, name="guarded")
        x = xs[: 6 * 2 * n].reshape(6, 2 * n).astype(dtype)
        y = np.zeros((6, n), dtype)
        f(x, cond, y)
        keep = np.arange(n) < n - 1
        want = (np.where(cond[:, None], x[:, :n], -1)
                + np.where(cond[:, None] & keep, x[:, n:], -1)).astype(dtype)
        np.testing.assert_array_equal(y, want, err_msg=f"{dtype} x {n} lanes")


def _masked_load_widths(cpu: str) -> set:
    s, args = _two_guarded_reads(9, "float32")
    text = emit_llvm_ir(tl.lower(s, args, name="guarded"), Target.from_string(f"llvm -mcpu={cpu}"))
    return {int(w) for w in re.findall(r"llvm\.masked\.load\.v(\d+)f32", text)}


def test_avx2_masked_loads_have_power_of_two_widths_within_a_register():
    widths = _masked_load_widths("znver3")
    assert widths == {8}, widths  # 9 lanes: 8 + 1 padded to 8, never <9 x float>


def test_avx512_masked_loads_stay_one_k_masked_load():
    assert _masked_load_widths("skylake-avx512") == {9}


# ------------------------------------------------------------------ integer division


def test_integer_division_by_a_constant_zero_is_refused():
    a = tl.placeholder((16,), "float32", name="A")
    ia = tl.placeholder((16,), "int32", name="IA")
    with pytest.raises(ValueError, match="division by zero in i // 0"):
        tl.compute((16,), lambda i: a[i // 0], name="B")
    with pytest.raises(ValueError, match="division by zero in i % 0"):
        tl.compute((16,), lambda i: a[i % 0], name="B")
    with pytest.raises(ValueError, match="division by zero"):
        tl.compute((16,), lambda i: ia[i] // 0, name="B")


def test_a_constant_zero_divisor_left_after_simplification_is_refused_at_build():
    from tensorlang.ir import expr as E

    a = tl.placeholder((16,), "int32", name="A")
    b = tl.compute((16,), lambda i: E.FloorDiv(a[i], E.const(0, "int32")), name="B")
    with pytest.raises(tl.LoweringError, match="division by zero"):
        tl.build(tl.create_schedule(b), [a, b], name="div0")


_DIVISION_SCRIPT = """
import warnings
import numpy as np
import tensorlang as tl
warnings.simplefilter("ignore")  # numpy warns about its own x // 0
for dtype in ("int8", "int32", "int64", "uint8", "uint32"):
    info = np.iinfo(dtype)
    if info.min < 0:
        a = np.array([7, -7, 0, info.min, info.max, 5, -5, 3, info.min, 1, 2, -9, 4, 0, 6, -1])
        b = np.array([0, 0, 0, -1, -1, 2, 2, -3, 3, -2, 1, 1, 0, 7, -7, -1])
    else:
        a = np.array([7, 0, info.max, 5, 3, 9, 1, 2] * 2)
        b = np.array([0, 0, 1, 2, 3, 0, 4, 5] * 2)
    a, b = a.astype(dtype), b.astype(dtype)
    for vector in (False, True):
        A = tl.placeholder((16,), dtype, name="A")
        B = tl.placeholder((16,), dtype, name="B")
        Q = tl.compute((16,), lambda i: A[i] // B[i], name="Q")
        R = tl.compute((16,), lambda i: A[i] % B[i], name="R")
        s = tl.create_schedule([Q, R])
        if vector:
            s[Q].vectorize(Q.op.axis[0])
            s[R].vectorize(R.op.axis[0])
        f = tl.build(s, [A, B, Q, R], name="divmod")
        q, r = np.zeros(16, dtype), np.zeros(16, dtype)
        f(a, b, q, r)
        np.testing.assert_array_equal(q, a // b, err_msg=f"{dtype} //, vector={vector}")
        np.testing.assert_array_equal(r, a % b, err_msg=f"{dtype} %, vector={vector}")
print("OK")
"""


def test_run_time_zero_and_minus_one_divisors_give_numpy_results_without_a_signal():
    """x // 0 == x % 0 == 0 and INT_MIN // -1 == INT_MIN, as numpy (x86's idiv traps on both:
    the case runs in a subprocess so a SIGFPE fails the test instead of killing the suite)."""
    done = subprocess.run([sys.executable, "-c", _DIVISION_SCRIPT], check=False,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip().endswith("OK")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("vector", [False, True])
def test_float_remainder_has_the_divisors_sign_as_numpy(dtype, vector):
    a = tl.placeholder((16,), dtype, name="A")
    b = tl.placeholder((16,), dtype, name="B")
    r = tl.compute((16,), lambda i: a[i] % b[i], name="R")
    s = tl.create_schedule(r)
    if vector:
        s[r].vectorize(r.op.axis[0])
    f = tl.build(s, [a, b, r], name="float_rem")
    x = np.array([-5, 5, -5, 5, 7.5, -7.5, 0, 1, np.inf, -3, 3, -3, 3, 2, 2, 2], dtype)
    y = np.array([2.5, 2.5, -2.5, -2.5, 2, 2, 3, 0, 2, np.inf, np.inf, -np.inf, -np.inf,
                  np.nan, -0.5, 0.5], dtype)
    got = np.zeros(16, dtype)
    f(x, y, got)
    with np.errstate(all="ignore"):
        want = x % y
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ------------------------------------------------------------------ bool arithmetic

_RNG = np.random.default_rng(15)
_M = _RNG.random((4, 16)) < 0.5
_N = _RNG.random((4, 16)) < 0.5


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("op", ["m + n", "m + m + n", "m * n", "(m + True) * n", "m * n + n * m"])
def test_bool_plus_is_or_and_times_is_and_as_numpy(op, vector):
    m = tl.placeholder((4, 16), "bool", name="M")
    n = tl.placeholder((4, 16), "bool", name="N")
    c = tl.compute((4, 16), lambda i, j: eval(op, {"m": m[i, j], "n": n[i, j]}), name="C")
    s = tl.create_schedule(c)
    if vector:
        s[c].vectorize(c.op.axis[1])
    f = tl.build(s, [m, n, c], name="bools")
    got = np.zeros((4, 16), bool)
    f(_M, _N, got)
    np.testing.assert_array_equal(got, eval(op, {"m": _M, "n": _N}))


@pytest.mark.parametrize("split", [None, 8])
def test_sum_over_bool_is_any_in_bool(split):
    """tl.sum keeps its input's dtype: over bool it is np.add.reduce(x, dtype=bool), i.e. any
    (cast to an integer first for a count)."""
    m = tl.placeholder((4, 16), "bool", name="M")
    k = tl.reduce_axis((0, 16), name="k")
    c = tl.compute((4,), lambda i: tl.sum(m[i, k], axis=k), name="C")
    s = tl.create_schedule(c)
    if split:
        _, ki = s[c].split(k, factor=split)
        s[c].unroll(ki)
    f = tl.build(s, [m, c], name="any")
    x = _M.copy()
    x[2] = False
    got = np.zeros(4, bool)
    f(x, got)
    assert c.dtype == "bool"
    np.testing.assert_array_equal(got, np.add.reduce(x, axis=1, dtype=bool))


def test_bool_minus_is_refused_as_in_numpy():
    m = tl.placeholder((4,), "bool", name="M")
    with pytest.raises(TypeError, match="'-' is not defined on bool"):
        tl.compute((4,), lambda i: m[i] - m[i], name="C")
    with pytest.raises(TypeError, match="'-' is not defined on bool"):
        tl.compute((4,), lambda i: -m[i], name="C")
    with pytest.raises(TypeError, match="'-' is not defined on bool"):
        tl.compute((4,), lambda i: True - m[i], name="C")


# ------------------------------------------------------------------ float16 accumulation


def _half_sum(schedule: str):
    a = tl.placeholder((4, 4096), "float16", name="A")
    k = tl.reduce_axis((0, 4096), name="k")
    c = tl.compute((4,), lambda i: tl.sum(a[i, k], axis=k), name="C")
    if schedule == "default":
        s = tl.ops.default_schedule([c])
    else:
        s = tl.create_schedule(c)
        if schedule == "split":
            _, ki = s[c].split(k, factor=16)
            s[c].unroll(ki)
    return tl.build(s, [a, c], name="half_sum")


@pytest.mark.parametrize("schedule", ["naive", "split", "default"])
def test_float16_sums_accumulate_in_float32(schedule):
    f = _half_sum(schedule)
    ones = np.ones((4, 4096), np.float16)
    got = np.zeros(4, np.float16)
    f(ones, got)
    np.testing.assert_array_equal(got, np.full(4, 4096, np.float16))
    x = np.random.default_rng(16).uniform(-1, 1, (4, 4096)).astype(np.float16)
    f(x, got)
    want = x.astype(np.float32).sum(axis=1)
    one_ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float32)
    assert np.all(np.abs(got.astype(np.float32) - want) <= one_ulp), (got, want)


def test_float16_output_accumulator_is_a_float32_temporary_in_the_ir():
    a = tl.placeholder((4, 64), "float16", name="A")
    k = tl.reduce_axis((0, 64), name="k")
    c = tl.compute((4,), lambda i: tl.sum(a[i, k], axis=k), name="C")
    text = str(tl.lower(tl.create_schedule(c), [a, c]))
    assert "allocate C.acc: float32[1]" in text, text


# ------------------------------------------------------------------ kernel names


def _tiny():
    a = tl.placeholder((16,), "float32", name="A")
    b = tl.compute((16,), lambda i: a[i] % 3.0, name="B")
    s = tl.create_schedule(b)
    s[b].parallel(b.op.axis[0])
    return s, [a, b]


@pytest.mark.parametrize("name,rule", [
    ("x" * 5000, "5000 characters long, more than the 200"),
    ("__tl_parallel_launch", "reserved prefix"),
    ("tl_parallel_launch", "reserved prefix"),
    ("fmodf", "C library function"),
    ("free", "C library function"),
    ("two words", "must be an identifier of ASCII letters"),
    ("k\u00e9rnel", "must be an identifier of ASCII letters"),
])
def test_kernel_names_that_cannot_be_symbols_are_refused(name, rule):
    s, args = _tiny()
    with pytest.raises(ValueError, match=re.escape(rule)):
        tl.build(s, args, name=name)
    with pytest.raises(ValueError, match=re.escape(rule)):
        tl.lower(s, args, name=name)


def test_the_longest_allowed_name_builds_and_runs():
    s, args = _tiny()
    f = tl.build(s, args, name="k" * 200)
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    f(x, y)
    np.testing.assert_array_equal(y, x % 3)


def test_a_runtime_symbol_as_kernel_name_is_an_error_not_a_crash():
    script = textwrap.dedent("""
        import tensorlang as tl
        a = tl.placeholder((16,), "float32", name="A")
        b = tl.compute((16,), lambda i: a[i] * 2.0, name="B")
        s = tl.create_schedule(b)
        s[b].parallel(b.op.axis[0])
        for name in ("__tl_parallel_launch", "fmodf", "aligned_alloc"):
            try:
                tl.build(s, [a, b], name=name)
            except ValueError as e:
                print("refused", name)
    """)
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[:3] == [
        "refused __tl_parallel_launch", "refused fmodf", "refused aligned_alloc"]


# ------------------------------------------------------------------ allocation failures


def _cube_intermediate(n):
    a = tl.placeholder((n,), "float32", name="A")
    t = tl.compute((n, n, n), lambda i, j, l: a[i] * a[j] + a[l], name="T")
    k = tl.reduce_axis((0, n), name="k")
    c = tl.compute((n,), lambda i: tl.sum(t[i, k, k], axis=k), name="C")
    return tl.create_schedule(c), [a, c]


def test_an_intermediate_that_can_never_fit_is_refused_at_lower_time():
    s, args = _cube_intermediate(1 << 17)  # 2^51 elements, 2^53 bytes
    with pytest.raises(tl.LoweringError, match=r"buffer 'T' .* needs 9007199254740992 bytes, "
                                               r"more than the 2\^48"):
        tl.lower(s, args)


@pytest.mark.parametrize("n", [1 << 17, 1 << 22])  # 2^53 bytes; 2^68 bytes overflows 64 bits
def test_a_symbolic_intermediate_too_big_to_allocate_names_the_buffer(n):
    s, args = _cube_intermediate(tl.var("n"))
    f = tl.build(s, args, name="cube")
    x = np.ones(n, np.float32)
    with pytest.raises(KernelError, match=r"could not allocate 4 \* n \* n \* n bytes for "
                                             r"buffer 'T' \(float32\[n, n, n\]"):
        f(x, np.zeros(n, np.float32))
    small = np.ones(4, np.float32)
    out = np.zeros(4, np.float32)
    f(small, out)  # the same kernel still runs where the buffer fits
    np.testing.assert_array_equal(out, np.full(4, 8, np.float32))
