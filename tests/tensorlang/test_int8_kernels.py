"""The int8 kernels of ops/quant_kernels.py against numpy's int32/int64 references: dense
(uint8/int8 activations, zero points, sizes that are not multiples of the blocks), on the
host's VNNI and on the fallbacks a target string forces; the int8 arithmetic they rest on."""

import re
import warnings

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.ops import quant_kernels as qk

TARGETS = ["llvm", "llvm -mattr=-avx512vnni", "llvm -mattr=-avx512vnni,-avx512bw"]


def _rand(rng, dtype, shape):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, shape, dtype=dtype)
    x.flat[: min(x.size, 7)] = info.max  # extremes: int16 pair sums overflow on these
    return x


def _dense(m, n, k, a_dtype, a_zero, w_zero, target="llvm", seed=0):
    rng = np.random.default_rng(seed)
    a = _rand(rng, a_dtype, (m, k))
    w = _rand(rng, np.int8, (n, k))
    w[-1, :] = -128
    wp, colsum = qk.pack_dense_weight(w)
    A = tl.placeholder((m, k), np.dtype(a_dtype).name, name="A")
    W = tl.placeholder(wp.shape, "int8", name="W")
    CS = tl.placeholder((n,), "int32", name="CS")
    Y = qk.dense_int8(A, W, n, a_zero, w_zero, CS)
    s = tl.create_schedule(Y)
    qk.schedule_dense_int8(s, Y)
    uses_colsum = a_zero != 0 or a_dtype == np.int8
    args, arrays = ([A, W, CS, Y], [a, wp, colsum]) if uses_colsum else ([A, W, Y], [a, wp])
    f = tl.build(s, args, target=target)
    y = np.empty((m, n), np.int32)
    f(*arrays, y)
    ref = (a.astype(np.int64) - a_zero) @ (w.astype(np.int64) - w_zero).T
    np.testing.assert_array_equal(y, ref.astype(np.int32))
    return f


@pytest.mark.parametrize("target", TARGETS)
def test_dense_u8s8_targets(target):
    from tensorlang.codegen.target import Target

    f = _dense(12, 48, 64, np.uint8, 0, 0, target)
    asm = f.get_source("asm")
    assert ("vpdpbusd" in asm) == Target.from_string(target).has_feature("avx512vnni")
    if "-avx512vnni" in target and "-avx512bw" not in target:
        assert "vpmaddwd" in asm


@pytest.mark.parametrize("m,n,k,a_dtype,a_zero,w_zero", [
    (5, 40, 13, np.uint8, 3, -2),     # K % 4 != 0, N % 16 != 0, both zero points
    (3, 16, 4, np.int8, 0, 0),        # int8 activations: shifted into uint8
    (7, 33, 30, np.int8, -5, 7),
    pytest.param(1, 17, 255, np.uint8, 255, -128, marks=pytest.mark.slow),
    pytest.param(16, 64, 128, np.uint8, 128, 0, marks=pytest.mark.slow),
])
def test_dense_zero_points_and_shapes(m, n, k, a_dtype, a_zero, w_zero):
    _dense(m, n, k, a_dtype, a_zero, w_zero)


def test_dense_int8_fallback_with_zero_points():
    _dense(5, 40, 13, np.int8, 3, -2, target="llvm -mattr=-avx512vnni")


def _dense_integer(m, w, target):
    from tensorlang.ops import quant as Q

    n, k = w.shape
    wp, colsum = qk.pack_dense_weight(w)
    A = tl.placeholder((m, k), "int8", name="A")
    W = tl.placeholder(wp.shape, "int8", name="W")
    CS = tl.placeholder((n,), "int32", name="CS")
    Y = Q.dense_integer(A, W, CS, n)
    s = tl.create_schedule(Y)
    Q.schedule_dense_integer(s, Y)
    text = str(tl.lower(s, [A, W, CS, Y]))
    # 4 rows x 3 column blocks of accumulators, whatever the row count
    assert "allocate dense_integer.acc: int32[4, 3, 16]" in text
    assert not re.search(r"allocate dense_integer\.acc: int32\[[123],", text)
    return tl.build(s, [A, W, CS, Y], target=target), wp, colsum


@pytest.mark.parametrize("target", TARGETS[:2])
def test_dense_integer_over_symbolic_rows_in_row_tiles(target):
    """The graph's int8 product (ops/quant.py's dense_integer) over a symbolic row count (a
    dynamic batch) takes the static kernel's 4-row register tiles, the partial last tile
    copied per rows left by loop partitioning; it took tiles of one row (each column tile's
    weights streamed once per row: 2.3-3.6x the static kernel's time at 64-1500 rows). One
    build against numpy at every count of rows left in the last tile, 0 to 3, and a
    lone partial tile."""
    rng = np.random.default_rng(3)
    w = _rand(rng, np.int8, (40, 40))
    f, wp, colsum = _dense_integer(tl.var("m"), w, target)
    for m in (1, 2, 3, 4, 5, 6, 7, 8, 13):
        a = _rand(rng, np.int8, (m, 40))
        y = np.zeros((m, 40), np.int32)
        f(a, wp, colsum, y)
        ref = a.astype(np.int64) @ w.astype(np.int64).T
        np.testing.assert_array_equal(y, ref.astype(np.int32), err_msg=f"m={m}")


@pytest.mark.parametrize("m", [6, 7, 13])
def test_dense_integer_over_rows_the_tile_does_not_divide(m):
    """A static row count that 4 does not divide keeps 4-row tiles (the last one partial,
    its rows constants once partitioned); it took the largest divisor, 2 for 6 and one row
    for a prime count (197 rows, a ViT's tokens: 3.6x the time)."""
    rng = np.random.default_rng(m)
    w = _rand(rng, np.int8, (40, 40))
    f, wp, colsum = _dense_integer(m, w, "llvm")
    a = _rand(rng, np.int8, (m, 40))
    y = np.zeros((m, 40), np.int32)
    f(a, wp, colsum, y)
    np.testing.assert_array_equal(y, (a.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32))


def test_dense_refusals():
    A = tl.placeholder((4, 8), "uint8", name="A")
    W = tl.placeholder((1, 2, 16, 4), "int8", name="W")
    with pytest.raises(TypeError, match="dense_int8: a must be uint8 or int8, got float32"):
        qk.dense_int8(tl.placeholder((4, 8), "float32", name="F"), W, 16)
    with pytest.raises(ValueError, match="w_packed .* is not pack_dense_weight's layout for n=40"):
        qk.dense_int8(A, W, 40)
    with pytest.raises(ValueError, match="a_zero 300 is outside uint8's range"):
        qk.dense_int8(A, W, 16, a_zero=300)
    with pytest.raises(ValueError, match="needs w_colsum"):
        qk.dense_int8(A, W, 16, a_zero=3)
    with pytest.raises(ValueError, match="pack_dense_weight: w must be a 2-D int8 array"):
        qk.pack_dense_weight(np.zeros((3, 4), np.uint8))


@pytest.mark.parametrize("fn,dtypes", [
    (lambda a, b: a + b, ("int8", "int8")),
    (lambda a, b: a - b, ("uint8", "uint8")),
    (lambda a, b: a * b, ("uint8", "int8")),      # numpy's promotion: int16
    (lambda a, b: a.astype("int32") * b.astype("int32"), ("uint8", "int8")),
    (lambda a, b: (a.astype("int32") - b).astype("int8"), ("int32", "int32")),
    (lambda a, b: (a // b).astype("int8"), ("int8", "int8")),
])
def test_int8_arithmetic_vectorized(fn, dtypes):
    n = 64
    rng = np.random.default_rng(1)
    P = [tl.placeholder((n,), d, name=f"p{i}") for i, d in enumerate(dtypes)]
    R = tl.compute((n,), lambda i: fn(*[p[i] for p in P]), name="R")
    s = tl.create_schedule(R)
    _, inner = s[R].split(R.op.axis[0], 16)
    s[R].vectorize(inner)
    f = tl.build(s, [*P, R])
    arrays = [_rand(rng, np.dtype(d), (n,)) for d in dtypes]
    r = np.empty(n, R.dtype)
    f(*arrays, r)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _np_ref(fn, arrays)
    assert r.dtype == ref.dtype
    np.testing.assert_array_equal(r, ref)


def _np_ref(fn, arrays):
    """fn on numpy arrays: astype is numpy's, // by 0 gives 0 as the kernels do."""
    class _N:
        def __init__(self, v):
            self.v = v

        def astype(self, d):
            return _N(self.v.astype(d))

        def __add__(self, o):
            return _N(self.v + _v(o))

        def __sub__(self, o):
            return _N(self.v - _v(o))

        def __mul__(self, o):
            return _N(self.v * _v(o))

        def __floordiv__(self, o):
            d = _v(o)
            return _N(np.where(d == 0, 0, self.v // np.where(d == 0, 1, d)).astype(self.v.dtype))

    def _v(o):
        return o.v if isinstance(o, _N) else o

    return fn(*[_N(a) for a in arrays]).v


# ----------------------------------------------------------------------------- convolutions


def _to_nchw16c(x, cb=16):
    n, c, h, w = x.shape
    cp = -(-c // cb) * cb
    xp = np.zeros((n, cp, h, w), x.dtype)
    xp[:, :c] = x
    return np.ascontiguousarray(xp.reshape(n, cp // cb, cb, h, w).transpose(0, 1, 3, 4, 2))


def _from_nchw16c(y, c):
    n, cb, h, w, _ = y.shape
    return y.transpose(0, 1, 4, 2, 3).reshape(n, cb * 16, h, w)[:, :c]


def _conv_ref(x, w, stride, pad, x_zero, depthwise=False):
    """int64 convolution of (x - x_zero) padded with zeros (= x padded with its zero point)."""
    n, _c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64) - x_zero, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    oh = (h + pad[0] + pad[2] - kh) // stride + 1
    ow = (wd + pad[1] + pad[3] - kw) // stride + 1
    out = np.zeros((n, oc, oh, ow), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
            tap = w[:, :, ky, kx].astype(np.int64)
            out += patch * tap[None, :, 0, None, None] if depthwise else \
                np.einsum("nchw,oc->nohw", patch, tap)
    return out


def _run_conv(kind, n, c, h, wd, oc, k, stride, pad, x_dtype, x_zero, target="llvm", cb=16):
    rng = np.random.default_rng(2)
    x = _rand(rng, x_dtype, (n, c, h, wd))
    depthwise = kind == "depthwise"
    w = _rand(rng, np.int8, (c, 1, k, k) if depthwise else (oc, c, k, k))
    w.flat[-5:] = -128
    wp, sums = qk.pack_depthwise_weight(w) if depthwise else qk.pack_conv_weight(w, cb)
    sums_p = np.zeros(-(-w.shape[0] // 16) * 16, np.int32)
    sums_p[: w.shape[0]] = sums
    xb = _to_nchw16c(x, cb)
    X = tl.placeholder(xb.shape, np.dtype(x_dtype).name, name="X")
    W = tl.placeholder(wp.shape, "int8", name="W")
    S = tl.placeholder(sums_p.shape, "int32", name="S")
    make = qk.depthwise_conv2d_int8_nchwc if depthwise else qk.conv2d_int8_nchwc
    Y = make(X, W, stride, pad, x_zero, S)
    s = tl.create_schedule(Y)
    (qk.schedule_depthwise_int8 if depthwise else qk.schedule_conv2d_int8)(s, Y)
    uses_sums = x_zero != 0 or x_dtype == np.int8
    args, arrays = ([X, W, S, Y], [xb, wp, sums_p]) if uses_sums else ([X, W, Y], [xb, wp])
    f = tl.build(s, args, target=target)
    y = np.empty(tuple(int(d.value) for d in Y.shape), np.int32)
    f(*arrays, y)
    ref = _conv_ref(x, w, stride, pad, x_zero, depthwise)
    np.testing.assert_array_equal(_from_nchw16c(y, w.shape[0]), ref.astype(np.int32))
    return f


@pytest.mark.parametrize("n,c,h,wd,oc,k,stride,pad,x_dtype,x_zero", [
    (1, 16, 8, 8, 32, 3, 1, (1, 1, 1, 1), np.uint8, 0),
    (1, 20, 9, 7, 24, 3, 2, (1, 1, 1, 1), np.int8, -3),      # channel tails, stride 2, int8
    pytest.param(2, 32, 6, 6, 16, 1, 1, (0, 0, 0, 0), np.uint8, 5,  # 1x1, batch 2
                 marks=pytest.mark.slow),
    pytest.param(1, 3, 11, 10, 8, 5, 2, (2, 1, 0, 2), np.uint8, 255,  # 3 channels, asym. pads
                 marks=pytest.mark.slow),
])
def test_conv2d_int8(n, c, h, wd, oc, k, stride, pad, x_dtype, x_zero):
    _run_conv("conv", n, c, h, wd, oc, k, stride, pad, x_dtype, x_zero)


@pytest.mark.parametrize("cb", [4, pytest.param(8, marks=pytest.mark.slow)])
def test_conv2d_int8_small_input_blocks(cb):
    """Few input channels (an image's 3) in blocks of 4 or 8: the output stays NCHW16c."""
    _run_conv("conv", 1, 3 if cb == 4 else 10, 13, 12, 20, 7, 2, (3, 3, 3, 3), np.uint8, 9,
              cb=cb)


def test_conv2d_int8_fallback():
    f = _run_conv("conv", 1, 20, 9, 7, 24, 3, 2, (1, 1, 1, 1), np.int8, -3,
                  target="llvm -mattr=-avx512vnni")
    assert "vpdpbusd" not in f.get_source("asm")


@pytest.mark.parametrize("n,c,h,wd,k,stride,pad,x_dtype,x_zero", [
    (1, 16, 8, 8, 3, 1, (1, 1, 1, 1), np.uint8, 0),
    (1, 20, 9, 7, 3, 2, (1, 1, 1, 1), np.int8, -3),
    pytest.param(2, 32, 7, 6, 5, 1, (2, 2, 2, 2), np.uint8, 9, marks=pytest.mark.slow),
])
def test_depthwise_int8(n, c, h, wd, k, stride, pad, x_dtype, x_zero):
    _run_conv("depthwise", n, c, h, wd, c, k, stride, pad, x_dtype, x_zero)


def test_conv_refusals():
    X = tl.placeholder((1, 1, 8, 8, 16), "uint8", name="X")
    W = tl.placeholder((2, 1, 3, 3, 4, 16, 4), "int8", name="W")
    with pytest.raises(ValueError, match="needs w_sums of shape \\(32,\\)"):
        qk.conv2d_int8_nchwc(X, W, 1, 1, x_zero=4)
    with pytest.raises(ValueError, match=r"are not NCHW\[cb\]c"):
        qk.conv2d_int8_nchwc(X, tl.placeholder((2, 2, 3, 3, 4, 16, 4), "int8", name="V"))
    with pytest.raises(ValueError, match="does not fit the padded input"):
        qk.conv2d_int8_nchwc(X, tl.placeholder((2, 1, 9, 9, 4, 16, 4), "int8", name="V"))
    with pytest.raises(ValueError, match="pack_conv_weight: w must be a 4-D int8 array"):
        qk.pack_conv_weight(np.zeros((4, 4, 3), np.int8))
    with pytest.raises(ValueError, match=r"pack_depthwise_weight: w must be an int8 array \[C, 1"):
        qk.pack_depthwise_weight(np.zeros((4, 2, 3, 3), np.int8))


# ----------------------------------------------------------------------------- fused tails


def _requantize(y, scale, zero, residual=None):
    """A requantization tail as a graph fuses it: (y [+ residual]) * scale, rounded, relu'd,
    plus the zero point, saturated to uint8."""
    def f(*i):
        v = y[i] if residual is None else y[i] + residual[i]
        q = tl.round(v.astype("float32") * scale) + zero
        return tl.max(tl.min(q, tl.const(255.0, "float32")), tl.const(0.0, "float32")) \
            .astype("uint8")

    return tl.compute(y.shape, f, name="requant")


def _requantize_ref(acc, scale, zero):
    return np.clip(np.round(acc.astype(np.float32) * np.float32(scale)) + zero, 0, 255) \
        .astype(np.uint8)


def test_dense_with_fused_requantize():
    m, n, k = 8, 40, 36
    rng = np.random.default_rng(3)
    a = _rand(rng, np.uint8, (m, k))
    w = _rand(rng, np.int8, (n, k))
    wp, colsum = qk.pack_dense_weight(w)
    A = tl.placeholder((m, k), "uint8", name="A")
    W = tl.placeholder(wp.shape, "int8", name="W")
    CS = tl.placeholder((n,), "int32", name="CS")
    Y = qk.dense_int8(A, W, n, 11, 0, CS)
    Q = _requantize(Y, 0.0005, 100)
    s = tl.create_schedule(Q)
    qk.schedule_dense_int8(s, Y, out=Q)
    f = tl.build(s, [A, W, CS, Q])
    q = np.empty((m, n), np.uint8)
    f(a, wp, colsum, q)
    acc = (a.astype(np.int64) - 11) @ w.astype(np.int64).T
    np.testing.assert_array_equal(q, _requantize_ref(acc, 0.0005, 100))
    assert "allocate dense_int8.acc" in str(tl.lower(s, [A, W, CS, Q]))  # a tile, not [M, N]


@pytest.mark.parametrize("depthwise,x_zero", [
    pytest.param(False, 0, marks=pytest.mark.slow), (False, 7), (True, 0),
    pytest.param(True, 7, marks=pytest.mark.slow)])
def test_conv_with_fused_requantize_and_residual(depthwise, x_zero):
    rng = np.random.default_rng(4)
    c, h, oc = 32, 9, 32
    x = _rand(rng, np.uint8, (1, c, h, h))
    w = _rand(rng, np.int8, (c, 1, 3, 3) if depthwise else (oc, c, 3, 3))
    wp, sums = qk.pack_depthwise_weight(w) if depthwise else qk.pack_conv_weight(w)
    xb = _to_nchw16c(x)
    X = tl.placeholder(xb.shape, "uint8", name="X")
    W = tl.placeholder(wp.shape, "int8", name="W")
    S = tl.placeholder((oc,), "int32", name="S")
    make = qk.depthwise_conv2d_int8_nchwc if depthwise else qk.conv2d_int8_nchwc
    Y = make(X, W, 1, 1, x_zero, S)
    R = tl.placeholder(tuple(int(d.value) for d in Y.shape), "int32", name="R")
    Q = _requantize(Y, 0.001, 128, residual=R)
    s = tl.create_schedule(Q)
    (qk.schedule_depthwise_int8 if depthwise else qk.schedule_conv2d_int8)(s, Y, out=Q)
    args = [X, W, S, R, Q] if x_zero else [X, W, R, Q]
    f = tl.build(s, args)
    r = rng.integers(-50000, 50000, tuple(int(d.value) for d in Y.shape), dtype=np.int32)
    q = np.empty(r.shape, np.uint8)
    f(*([xb, wp, sums, r, q] if x_zero else [xb, wp, r, q]))
    acc = _conv_ref(x, w, 1, (1, 1, 1, 1), x_zero, depthwise)
    acc_b = _to_nchw16c(acc.astype(np.int64)) + r
    np.testing.assert_array_equal(q, _requantize_ref(acc_b, 0.001, 128))


def test_fused_tail_refused_when_not_elementwise():
    A = tl.placeholder((4, 8), "uint8", name="A")
    W = tl.placeholder((1, 2, 16, 4), "int8", name="W")
    Y = qk.dense_int8(A, W, 16)
    k = tl.reduce_axis((0, 16), name="k")
    T = tl.compute((4,), lambda i: tl.sum(Y[i, k], axis=k), name="T")
    s = tl.create_schedule(T)
    with pytest.raises(ValueError, match="out must be an elementwise tail of y's shape"):
        qk.schedule_dense_int8(s, Y, out=T)
