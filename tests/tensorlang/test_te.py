"""The tensor expression language against numpy: arithmetic, every math intrinsic, comparisons,
logical ops and select, casts between all dtypes, reductions over each axis and a user reducer
(argmax); each kernel scalar (default schedule) and vectorized (split + vectorize, with a tail)."""

from __future__ import annotations

import numpy as np
import pytest
from tl_testing import assert_close, build_run, rand

import tensorlang as tl

N = 37  # not a multiple of the vector width: the vectorized kernels have a scalar tail


def _unary_kernel(fn, dtype, vectorize, n=N):
    A = tl.placeholder((n,), dtype=dtype, name="A")
    B = tl.compute((n,), lambda i: fn(A[i]), name="B")
    s = tl.create_schedule(B)
    if vectorize:
        _, ii = s[B].split(B.op.axis[0], factor=16)
        s[B].vectorize(ii)
    return s, A, B


def _binary_kernel(fn, da, db, vectorize, n=N):
    A = tl.placeholder((n,), dtype=da, name="A")
    B = tl.placeholder((n,), dtype=db, name="B")
    C = tl.compute((n,), lambda i: fn(A[i], B[i]), name="C")
    s = tl.create_schedule(C)
    if vectorize:
        _, ii = s[C].split(C.op.axis[0], factor=8)
        s[C].vectorize(ii)
    return s, A, B, C


# (name, tl function, numpy function, input range)
UNARY = [
    ("exp", tl.exp, np.exp, (-10, 10)),
    ("exp2", tl.exp2, np.exp2, (-10, 10)),
    ("log", tl.log, np.log, (0.01, 100)),
    ("log2", tl.log2, np.log2, (0.01, 100)),
    ("sqrt", tl.sqrt, np.sqrt, (0, 100)),
    ("rsqrt", tl.rsqrt, lambda x: 1 / np.sqrt(x), (0.01, 100)),
    ("tanh", tl.tanh, np.tanh, (-6, 6)),
    ("sigmoid", tl.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-20, 20)),
    ("erf", tl.erf, None, (-4, 4)),
    ("abs", tl.abs, np.abs, (-5, 5)),
    ("floor", tl.floor, np.floor, (-5, 5)),
    ("ceil", tl.ceil, np.ceil, (-5, 5)),
    ("round", tl.round, np.round, (-5, 5)),
]


def _erf(x):
    import math

    return np.vectorize(math.erf)(x.astype(np.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("name,fn,ref,rng", UNARY, ids=[u[0] for u in UNARY])
def test_unary_intrinsic(name, fn, ref, rng, dtype, vectorize):
    s, A, B = _unary_kernel(fn, dtype, vectorize)
    a = rand((N,), dtype, *rng)
    if name == "round":  # exact halves: numpy rounds half to even, check that too
        a[:4] = np.array([0.5, 1.5, -2.5, 2.5], dtype)
    (out,) = build_run(s, [A], [B], [a], name=f"u_{name}")
    want = (ref or _erf)(a.astype(np.float64))
    # transcendental polynomials are accurate to a few ulps; relative tolerance in ulps of dtype
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(out, want, rtol=8 * eps, atol=8 * eps)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("name,fn,ref", [("pow", tl.pow, np.power), ("fmin", tl.fmin, np.fmin),
                                         ("fmax", tl.fmax, np.fmax)])
def test_binary_intrinsic(name, fn, ref, dtype, vectorize):
    s, A, B, C = _binary_kernel(fn, dtype, dtype, vectorize)
    a, b = rand((N,), dtype, 0.1, 4), rand((N,), dtype, -3, 3, seed=1)
    (out,) = build_run(s, [A, B], [C], [a, b], name=f"b_{name}")
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(out, ref(a.astype(np.float64), b), rtol=16 * eps, atol=16 * eps)


def test_pow_operator_and_fmin_nan():
    """`x ** y` is tl.pow; fmin/fmax return the other operand when one is NaN (numpy fmin)."""
    A = tl.placeholder((4,), name="A")
    B = tl.placeholder((4,), name="B")
    P = tl.compute((4,), lambda i: A[i] ** 2.0, name="P")
    F = tl.compute((4,), lambda i: tl.fmin(A[i], B[i]), name="F")
    s = tl.create_schedule([P, F])
    a = np.array([1.5, -2.0, 3.0, np.nan], "float32")
    b = np.array([np.nan, 1.0, 2.0, 5.0], "float32")
    p, f = build_run(s, [A, B], [P, F], [a, b], name="pow_nan")
    np.testing.assert_allclose(p[:3], a[:3] ** 2, rtol=1e-6)
    np.testing.assert_array_equal(f, np.fmin(a, b))


ARITH = [
    ("add", lambda x, y: x + y, lambda x, y: x + y),
    ("sub", lambda x, y: x - y, lambda x, y: x - y),
    ("mul", lambda x, y: x * y, lambda x, y: x * y),
    ("max", lambda x, y: tl.max(x, y), np.maximum),
    ("min", lambda x, y: tl.min(x, y), np.minimum),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int16", "int32", "int64",
                                   "uint8"])
@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("name,fn,ref", ARITH, ids=[a[0] for a in ARITH])
def test_arithmetic(name, fn, ref, dtype, vectorize):
    s, A, B, C = _binary_kernel(fn, dtype, dtype, vectorize)
    lo, hi = (0, 15) if dtype == "uint8" else (-10, 10)
    a, b = rand((N,), dtype, lo, hi), rand((N,), dtype, lo, hi, seed=1)
    if name == "sub" and dtype == "uint8":
        a, b = np.maximum(a, b), np.minimum(a, b)
    (out,) = build_run(s, [A, B], [C], [a, b], name=f"a_{name}")
    assert out.dtype == np.dtype(dtype)
    assert_close(out, ref(a, b))


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "int8"])
@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
def test_division_and_modulo(dtype, vectorize):
    """Float `/` is true division; integer `//` and `%` floor towards minus infinity (numpy)."""
    if dtype == "float32":
        def fn(x, y):
            return x / y

        ref = np.divide
    else:
        def fn(x, y):
            return x // y * 100 + x % y

        def ref(x, y):
            return (x // y).astype(np.int64) * 100 + x % y
    s, A, B, C = _binary_kernel(fn, dtype, dtype, vectorize)
    a = rand((N,), dtype, -50, 50)
    b = rand((N,), dtype, 1, 9, seed=1) * np.where(np.arange(N) % 2 == 0, 1, -1).astype(dtype)
    (out,) = build_run(s, [A, B], [C], [a, b], name="divmod")
    if dtype == "float32":
        assert_close(out, ref(a, b))
    else:
        np.testing.assert_array_equal(out, ref(a, b).astype(dtype))


def test_broadcast_and_scalar_constants():
    A = tl.placeholder((4, 5, 6), name="A")
    r = tl.placeholder((6,), name="r")
    c = tl.placeholder((4, 1, 1), name="c")
    B = tl.compute((4, 5, 6), lambda i, j, k: (A[i, j, k] + r[k]) * c[i, 0, 0] - 3 + 2 * A[i, j, k],
                   name="B")
    a, rr, cc = rand((4, 5, 6)), rand((6,), seed=1), rand((4, 1, 1), seed=2)
    (out,) = build_run(tl.create_schedule(B), [A, r, c], [B], [a, rr, cc], name="bcast")
    assert_close(out, (a + rr) * cc - 3 + 2 * a)


CMP = [
    ("lt", lambda x, y: x < y, np.less), ("le", lambda x, y: x <= y, np.less_equal),
    ("gt", lambda x, y: x > y, np.greater), ("ge", lambda x, y: x >= y, np.greater_equal),
    ("eq", lambda x, y: x == y, np.equal), ("ne", lambda x, y: x != y, np.not_equal),
]


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("name,fn,ref", CMP, ids=[c[0] for c in CMP])
def test_comparison_to_bool(name, fn, ref, dtype, vectorize):
    s, A, B, C = _binary_kernel(fn, dtype, dtype, vectorize)
    assert C.dtype == "bool"
    a, b = rand((N,), dtype, 0, 4), rand((N,), dtype, 0, 4, seed=1)
    if dtype == "float32":
        a, b = np.round(a), np.round(b)  # make equal elements likely
    (out,) = build_run(s, [A, B], [C], [a, b], name=f"c_{name}")
    np.testing.assert_array_equal(out, ref(a, b))


@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
def test_logical_ops_and_select(vectorize):
    A = tl.placeholder((N,), name="A")
    M = tl.placeholder((N,), dtype="bool", name="M")
    C = tl.compute((N,), lambda i: tl.select(
        ((A[i] > 0) & ~M[i]) | tl.all(A[i] < -1, M[i]) | tl.any(A[i] == 0.5),
        A[i] * 2, tl.if_then_else(M[i], -A[i], 7.0)), name="C")
    s = tl.create_schedule(C)
    if vectorize:
        _, ii = s[C].split(C.op.axis[0], factor=16)
        s[C].vectorize(ii)
    a, m = rand((N,)), rand((N,), "bool", seed=1)
    (out,) = build_run(s, [A, M], [C], [a, m], name="logic")
    cond = ((a > 0) & ~m) | ((a < -1) & m) | (a == 0.5)
    assert_close(out, np.where(cond, a * 2, np.where(m, -a, 7.0)))


DTYPES = ["float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


def _cast_inputs(src):
    if src == "bool":
        return rand((N,), "bool")
    if src.startswith("float"):
        # values in range of every destination type (int8 and uint8 included), with fractions
        # to check truncation towards zero
        sign = np.where(np.arange(N) % 3 == 0, -1, 1)
        return (rand((N,), src, 0, 120) * sign).astype(src)
    return rand((N,), src, 0, 120)


@pytest.mark.parametrize("dst", DTYPES)
@pytest.mark.parametrize("src", DTYPES)
def test_cast(src, dst):
    x = _cast_inputs(src)
    if dst == "uint8" and np.dtype(src).kind in "fi":
        x = np.abs(x).astype(src)  # negative -> uint8 is undefined for floats in C and LLVM
    A = tl.placeholder((N,), dtype=src, name="A")
    B = tl.compute((N,), lambda i: A[i].astype(dst), name="B")
    s = tl.create_schedule(B)
    _, ii = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(ii)
    (out,) = build_run(s, [A], [B], [x], name="cast")
    want = x != 0 if dst == "bool" else x.astype(dst)
    np.testing.assert_array_equal(out, want)


def test_tl_cast_function_and_const():
    A = tl.placeholder((5,), dtype="int32", name="A")
    B = tl.compute((5,), lambda i: tl.cast(A[i], "float64") / tl.const(2, "float64"), name="B")
    (out,) = build_run(tl.create_schedule(B), [A], [B], [np.arange(5, dtype="int32")],
                       name="castf")
    assert B.dtype == "float64"
    np.testing.assert_array_equal(out, np.arange(5) / 2)


@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
def test_float16_storage(vectorize):
    """float16 is a storage type: loads widen to float32, the math runs in float32, stores round
    back to float16."""
    A = tl.placeholder((N,), dtype="float16", name="A")
    B = tl.placeholder((N,), dtype="float16", name="B")
    C = tl.compute((N,), lambda i: A[i] * B[i] + tl.exp(A[i]), name="C")
    D = tl.compute((N,), lambda i: A[i].astype("float32") * 2, name="D")
    s = tl.create_schedule([C, D])
    if vectorize:
        _, ii = s[C].split(C.op.axis[0], factor=16)
        s[C].vectorize(ii)
    a, b = rand((N,), "float16", -2, 2), rand((N,), "float16", -2, 2, seed=1)
    c, d = build_run(s, [A, B], [C, D], [a, b], name="half")
    assert c.dtype == np.float16 and d.dtype == np.float32
    want = (a.astype(np.float32) * b.astype(np.float32) + np.exp(a.astype(np.float32)))
    np.testing.assert_allclose(c.astype(np.float32), want.astype(np.float16).astype(np.float32),
                               rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(d, a.astype(np.float32) * 2)


REDUCERS = [
    ("sum", tl.sum, np.sum),
    ("max", tl.max, np.max),
    ("min", tl.min, np.min),
    ("prod", tl.prod, np.prod),
]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("name,red,ref", REDUCERS, ids=[r[0] for r in REDUCERS])
def test_reduction_over_each_axis(name, red, ref, axis, dtype):
    shape = (3, 4, 5)
    A = tl.placeholder(shape, dtype=dtype, name="A")
    k = tl.reduce_axis((0, shape[axis]), name="k")
    out_shape = tuple(d for i, d in enumerate(shape) if i != axis)

    def body(*idx):
        full = list(idx)
        full.insert(axis, k)
        return red(A[tuple(full)], axis=k)

    R = tl.compute(out_shape, body, name="R")
    a = rand(shape, dtype, 1 if name == "prod" else -9, 2 if name == "prod" else 9)
    (out,) = build_run(tl.create_schedule(R), [A], [R], [a], name=f"r_{name}")
    assert_close(out, ref(a, axis=axis).astype(dtype))


def test_reduction_over_all_axes_and_where():
    A = tl.placeholder((6, 7), name="A")
    i = tl.reduce_axis((0, 6), name="i")
    j = tl.reduce_axis((0, 7), name="j")
    T = tl.compute((1,), lambda z: tl.sum(A[i, j], axis=[i, j], where=i <= j), name="T")
    a = rand((6, 7))
    (out,) = build_run(tl.create_schedule(T), [A], [T], [a], name="r_where")
    assert_close(out, [np.triu(a).sum()])


def test_reduce_axis_with_offset():
    A = tl.placeholder((10,), name="A")
    k = tl.reduce_axis((3, 8), name="k")
    T = tl.compute((1,), lambda z: tl.sum(A[k], axis=k), name="T")
    a = rand((10,))
    (out,) = build_run(tl.create_schedule(T), [A], [T], [a], name="r_off")
    assert_close(out, [a[3:8].sum()])


def _argmax():
    return tl.comm_reducer(
        lambda i0, v0, i1, v1: (tl.select(v0 >= v1, i0, i1), tl.max(v0, v1)),
        lambda ti, tv: (tl.const(-1, ti), tl.min_value(tv)), name="argmax")


@pytest.mark.parametrize("sched", ["default", "split", "reduce_outer"])
def test_argmax_comm_reducer(sched):
    M, K = 5, 11
    argmax = _argmax()
    A = tl.placeholder((M, K), name="A")
    r = tl.reduce_axis((0, K), name="r")
    Idx, Val = tl.compute((M,), lambda i: argmax((r.var.astype("int32"), A[i, r]), axis=r),
                          name="am")
    s = tl.create_schedule([Idx, Val])
    if sched == "split":
        _ro, _ri = s[Idx].split(r, factor=4)
    elif sched == "reduce_outer":
        s[Idx].reorder(r, Idx.op.axis[0])
    a = rand((M, K))
    idx, val = build_run(s, [A], [Idx, Val], [a], name=f"argmax_{sched}")
    np.testing.assert_array_equal(idx, a.argmax(1))
    np.testing.assert_array_equal(val, a.max(1))


def test_multiple_outputs_of_one_compute_and_of_two_computes():
    A = tl.placeholder((8,), name="A")
    P, Q = tl.compute((8,), lambda i: (A[i] + 1, A[i] * 2), name="pq")
    R = tl.compute((8,), lambda i: P[i] - Q[i], name="R")
    s = tl.create_schedule([P, Q, R])
    a = rand((8,))
    p, q, r = build_run(s, [A], [P, Q, R], [a], name="multi")
    assert_close(p, a + 1)
    assert_close(q, a * 2)
    assert_close(r, (a + 1) - a * 2)


def test_declarations():
    n = tl.var("n")
    A = tl.placeholder((n, 4), dtype="float64", name="A")
    assert A.ndim == 2 and A.dtype == "float64" and A.shape[0] is n
    k = tl.reduce_axis((0, 4), name="k")
    B = tl.compute((n,), lambda i: tl.sum(A[i, k], axis=k), name="B")
    assert B.op.reduce_axis == (k,) and len(B.op.axis) == 1
    assert B.op.axis[0].var.name == "i"
    assert B.op.input_tensors == (A,)
    assert (A[0, 1] < 2).dtype == "bool"
    assert (A[0, 1] * 2).dtype == "float64"
    assert tl.const(3, "int8").dtype == "int8"
