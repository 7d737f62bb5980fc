"""Differential tests of whole operators: every kernel, under every schedule that applies to it,
must match numpy and the kernel of the unscheduled (default) schedule.

Each case declares its computes from scratch (cases never share tensors, so schedules do not
leak), gives the numpy reference, and the schedules that make sense for it. Sizes are small and
deliberately not multiples of the split factors, so that tail guards are exercised."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from tl_testing import assert_close, build_run, rand

import tensorlang as tl

# ----------------------------------------------------------------------------- generic schedules


def _spatial(s, T):
    # s[T].op, not T.op: cache_write / rfactor give the stage a new op with new axes
    return list(s[T].op.axis)


def sched_default(s, t):
    pass


def sched_split_reorder(s, t):
    """Split every spatial axis of the output by 3 and run the inner parts outermost."""
    T = t.out
    st = s[T]
    outer, inner = [], []
    for ax in _spatial(s, T):
        o, i = st.split(ax, factor=3)
        outer.append(o)
        inner.append(i)
    st.reorder(*inner, *outer, *st.op.reduce_axis)


def sched_tile_vec_par(s, t):
    """Tile the two innermost spatial axes (4 x 8), reduce loops between the tiles, vectorize the
    innermost loop and parallelize the outermost."""
    T = t.out
    st = s[T]
    ax = _spatial(s, T)
    if len(ax) >= 2:
        xo, yo, xi, yi = st.tile(ax[-2], ax[-1], 4, 8)
        order = ax[:-2] + [xo, yo] + list(st.op.reduce_axis) + [xi, yi]
    else:
        xo, yi = st.split(ax[0], factor=8)
        order = [xo] + list(st.op.reduce_axis) + [yi]
    st.reorder(*order)
    st.vectorize(yi)
    st.parallel(order[0])


def sched_cache_write(s, t):
    """Compute the output into a local cache, computed at the output's outermost loop."""
    T = t.out
    CL = s.cache_write(T, "local")
    ax = _spatial(s, T)
    o, _i = s[T].split(ax[0], factor=2)
    s[CL].compute_at(s[T], o)


def sched_inline_all(s, t):
    """compute_inline every injective intermediate stage listed in t.inlinable."""
    for x in t.inlinable:
        s[x].compute_inline()


def sched_compute_at_all(s, t):
    """compute_at the intermediate stages as the case lists them: (stage, host, host axis index),
    consumers before their producers (a producer can only move inside a loop whose body holds all
    of its readers)."""
    for x, host, d in t.attach:
        s[x].compute_at(s[host], s[host].op.axis[d])


def sched_rfactor(s, t):
    """Split the first reduce axis by 4, rfactor the inner part, parallelize the result stage."""
    T = t.out
    k = T.op.reduce_axis[0]
    _ko, ki = s[T].split(k, factor=4)
    TF = s.rfactor(T, ki)
    s[TF].parallel(s[TF].op.axis[0])


def sched_reduce_outer(s, t):
    """Reorder the reduce axes outermost (the accumulator init must move before the nest)."""
    T = t.out
    s[T].reorder(*T.op.reduce_axis, *T.op.axis)


# ----------------------------------------------------------------------------- cases
# Each case returns a namespace: ins (placeholders), out (the output), arrays (inputs),
# ref (numpy result), intermediates, inlinable, dtype; plus the names of extra schedules.

def case_elemwise_bcast():
    A = tl.placeholder((7, 13), name="A")
    b = tl.placeholder((13,), name="b")
    T = tl.compute((7, 13), lambda i, j: A[i, j] * b[j] + 1.5, name="T")
    C = tl.compute((7, 13), lambda i, j: tl.exp(T[i, j] * 0.25) - b[j] / 2, name="C")
    a, bb = rand((7, 13)), rand((13,), seed=1)
    ref = np.exp((a * bb + 1.5) * 0.25) - bb / 2
    return SimpleNamespace(ins=[A, b], out=C, arrays=[a, bb], ref=ref, intermediates=[T],
                           inlinable=[T], attach=[(T, C, 0)])


def case_matmul():
    M, N, K = 10, 21, 19
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = rand((M, K)), rand((K, N), seed=1)
    return SimpleNamespace(ins=[A, B], out=C, arrays=[a, b], ref=a @ b, intermediates=[],
                           inlinable=[])


def case_batch_matmul():
    Bt, M, N, K = 3, 6, 10, 7
    A = tl.placeholder((Bt, M, K), name="A")
    B = tl.placeholder((Bt, K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((Bt, M, N), lambda b, i, j: tl.sum(A[b, i, k] * B[b, k, j], axis=k),
                   name="C")
    a, b = rand((Bt, M, K)), rand((Bt, K, N), seed=1)
    return SimpleNamespace(ins=[A, B], out=C, arrays=[a, b], ref=np.matmul(a, b),
                           intermediates=[], inlinable=[])


def _np_pad(x, p, value=0.0):
    return np.pad(x, [(0, 0), (0, 0), (p, p), (p, p)], constant_values=value)


def case_conv2d():
    N, CI, H, W, CO, KS, P = 1, 3, 9, 10, 5, 3, 1
    X = tl.placeholder((N, CI, H, W), name="X")
    Wt = tl.placeholder((CO, CI, KS, KS), name="W")
    Xp = tl.compute((N, CI, H + 2 * P, W + 2 * P),
                    lambda n, c, h, w: tl.if_then_else(
                        tl.all(h >= P, h < H + P, w >= P, w < W + P),
                        X[n, c, h - P, w - P], 0.0), name="Xpad")
    rc = tl.reduce_axis((0, CI), name="rc")
    ry = tl.reduce_axis((0, KS), name="ry")
    rx = tl.reduce_axis((0, KS), name="rx")
    OH, OW = H + 2 * P - KS + 1, W + 2 * P - KS + 1
    Y = tl.compute((N, CO, OH, OW), lambda n, f, y, x: tl.sum(
        Xp[n, rc, y + ry, x + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    x, w = rand((N, CI, H, W)), rand((CO, CI, KS, KS), seed=1)
    xp = _np_pad(x, P)
    ref = np.zeros((N, CO, OH, OW), np.float64)
    for ky in range(KS):
        for kx in range(KS):
            patch = xp[:, :, ky:ky + OH, kx:kx + OW]
            ref += np.einsum("nchw,fc->nfhw", patch, w[:, :, ky, kx])
    return SimpleNamespace(ins=[X, Wt], out=Y, arrays=[x, w], ref=ref, intermediates=[Xp],
                           inlinable=[Xp], attach=[(Xp, Y, 2)])


def case_depthwise_conv():
    N, C, H, W, KS, P = 1, 4, 8, 9, 3, 1
    X = tl.placeholder((N, C, H, W), name="X")
    Wt = tl.placeholder((C, KS, KS), name="W")
    Xp = tl.compute((N, C, H + 2 * P, W + 2 * P),
                    lambda n, c, h, w: tl.if_then_else(
                        tl.all(h >= P, h < H + P, w >= P, w < W + P),
                        X[n, c, h - P, w - P], 0.0), name="Xpad")
    ry = tl.reduce_axis((0, KS), name="ry")
    rx = tl.reduce_axis((0, KS), name="rx")
    Y = tl.compute((N, C, H, W), lambda n, c, y, x: tl.sum(
        Xp[n, c, y + ry, x + rx] * Wt[c, ry, rx], axis=[ry, rx]), name="Y")
    x, w = rand((N, C, H, W)), rand((C, KS, KS), seed=1)
    xp = _np_pad(x, P)
    ref = np.zeros((N, C, H, W))
    for ky in range(KS):
        for kx in range(KS):
            ref += xp[:, :, ky:ky + H, kx:kx + W] * w[None, :, ky, kx, None, None]
    return SimpleNamespace(ins=[X, Wt], out=Y, arrays=[x, w], ref=ref, intermediates=[Xp],
                           inlinable=[Xp], attach=[(Xp, Y, 2)])


def case_max_pool():
    N, C, H, W = 2, 3, 8, 10
    X = tl.placeholder((N, C, H, W), name="X")
    ry = tl.reduce_axis((0, 2), name="ry")
    rx = tl.reduce_axis((0, 2), name="rx")
    Y = tl.compute((N, C, H // 2, W // 2), lambda n, c, y, x: tl.max(
        X[n, c, y * 2 + ry, x * 2 + rx], axis=[ry, rx]), name="Y")
    x = rand((N, C, H, W))
    ref = x.reshape(N, C, H // 2, 2, W // 2, 2).max(axis=(3, 5))
    return SimpleNamespace(ins=[X], out=Y, arrays=[x], ref=ref, intermediates=[], inlinable=[])


def case_avg_pool():
    """3x3 average pooling, stride 1, zero padding 1 counted in the divisor (count_include_pad)."""
    N, C, H, W = 1, 3, 7, 9
    X = tl.placeholder((N, C, H, W), name="X")
    Xp = tl.compute((N, C, H + 2, W + 2), lambda n, c, h, w: tl.if_then_else(
        tl.all(h >= 1, h < H + 1, w >= 1, w < W + 1), X[n, c, h - 1, w - 1], 0.0),
        name="Xpad")
    ry = tl.reduce_axis((0, 3), name="ry")
    rx = tl.reduce_axis((0, 3), name="rx")
    S = tl.compute((N, C, H, W), lambda n, c, y, x: tl.sum(Xp[n, c, y + ry, x + rx],
                                                           axis=[ry, rx]), name="S")
    Y = tl.compute((N, C, H, W), lambda n, c, y, x: S[n, c, y, x] / 9.0, name="Y")
    x = rand((N, C, H, W))
    xp = _np_pad(x, 1)
    ref = sum(xp[:, :, a:a + H, b:b + W] for a in range(3) for b in range(3)) / 9.0
    return SimpleNamespace(ins=[X], out=Y, arrays=[x], ref=ref, intermediates=[Xp, S],
                           inlinable=[Xp], attach=[(S, Y, 1), (Xp, S, 2)])


def case_softmax():
    M, N = 5, 19
    X = tl.placeholder((M, N), name="X")
    k1 = tl.reduce_axis((0, N), name="k1")
    mx = tl.compute((M,), lambda i: tl.max(X[i, k1], axis=k1), name="mx")
    E = tl.compute((M, N), lambda i, j: tl.exp(X[i, j] - mx[i]), name="E")
    k2 = tl.reduce_axis((0, N), name="k2")
    sm = tl.compute((M,), lambda i: tl.sum(E[i, k2], axis=k2), name="sm")
    Y = tl.compute((M, N), lambda i, j: E[i, j] / sm[i], name="Y")
    x = rand((M, N), lo=-4, hi=4)
    e = np.exp(x - x.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    return SimpleNamespace(ins=[X], out=Y, arrays=[x], ref=ref, intermediates=[mx, E, sm],
                           inlinable=[E], attach=[(sm, Y, 0), (E, Y, 0), (mx, E, 0)])


def case_layer_norm():
    M, N, eps = 6, 17, 1e-5
    X = tl.placeholder((M, N), name="X")
    g = tl.placeholder((N,), name="g")
    b = tl.placeholder((N,), name="b")
    k1 = tl.reduce_axis((0, N), name="k1")
    mean = tl.compute((M,), lambda i: tl.sum(X[i, k1] / N, axis=k1), name="mean")
    D = tl.compute((M, N), lambda i, j: X[i, j] - mean[i], name="D")
    k2 = tl.reduce_axis((0, N), name="k2")
    var = tl.compute((M,), lambda i: tl.sum(D[i, k2] * D[i, k2] / N, axis=k2), name="var")
    Y = tl.compute((M, N), lambda i, j: D[i, j] * tl.rsqrt(var[i] + eps) * g[j] + b[j],
                   name="Y")
    x, gg, bb = rand((M, N)), rand((N,), seed=1), rand((N,), seed=2)
    mu = x.mean(1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + eps) * gg + bb
    return SimpleNamespace(ins=[X, g, b], out=Y, arrays=[x, gg, bb], ref=ref,
                           intermediates=[mean, D, var], inlinable=[D],
                           attach=[(var, Y, 0), (D, Y, 0), (mean, D, 0)])


def case_transpose():
    A = tl.placeholder((5, 7, 3), name="A")
    T = tl.compute((3, 5, 7), lambda c, a, b: A[a, b, c], name="T")
    a = rand((5, 7, 3))
    return SimpleNamespace(ins=[A], out=T, arrays=[a], ref=a.transpose(2, 0, 1),
                           intermediates=[], inlinable=[])


def case_pad():
    A = tl.placeholder((5, 6), name="A")
    P = tl.compute((9, 11), lambda i, j: tl.if_then_else(
        tl.all(i >= 2, i < 7, j >= 1, j < 7), A[i - 2, j - 1], tl.const(-3.0, "float32")),
        name="P")
    a = rand((5, 6))
    return SimpleNamespace(ins=[A], out=P, arrays=[a],
                           ref=np.pad(a, [(2, 2), (1, 4)], constant_values=-3.0),
                           intermediates=[], inlinable=[])


# schedules applicable to every case
COMMON = ["default", "split_reorder", "tile_vec_par", "cache_write"]
CASES = {
    "elemwise_bcast": (case_elemwise_bcast, COMMON + ["inline", "compute_at"]),
    "matmul": (case_matmul, COMMON + ["rfactor", "reduce_outer"]),
    "batch_matmul": (case_batch_matmul, COMMON + ["rfactor", "reduce_outer"]),
    "conv2d": (case_conv2d, COMMON + ["inline", "compute_at", "rfactor", "reduce_outer"]),
    "depthwise_conv": (case_depthwise_conv, COMMON + ["inline", "compute_at"]),
    "max_pool": (case_max_pool, COMMON + ["rfactor", "reduce_outer"]),
    "avg_pool": (case_avg_pool, COMMON + ["inline", "compute_at"]),
    "softmax": (case_softmax, COMMON + ["inline", "compute_at"]),
    "layer_norm": (case_layer_norm, COMMON + ["inline", "compute_at"]),
    "transpose": (case_transpose, COMMON),
    "pad": (case_pad, COMMON),
}
SCHEDULES = {
    "default": sched_default,
    "split_reorder": sched_split_reorder,
    "tile_vec_par": sched_tile_vec_par,
    "cache_write": sched_cache_write,
    "inline": sched_inline_all,
    "compute_at": sched_compute_at_all,
    "rfactor": sched_rfactor,
    "reduce_outer": sched_reduce_outer,
}

_default_results: dict = {}


def _default_result(case_name):
    """The output of the unscheduled kernel (built once per case)."""
    if case_name not in _default_results:
        t = CASES[case_name][0]()
        s = tl.create_schedule(t.out)
        (out,) = build_run(s, t.ins, [t.out], t.arrays, name=f"{case_name}_default")
        _default_results[case_name] = out
    return _default_results[case_name]


@pytest.mark.parametrize("case_name,sched_name",
                         [(c, sn) for c, (_, scheds) in CASES.items() for sn in scheds])
def test_operator_under_schedule(case_name, sched_name):
    t = CASES[case_name][0]()
    s = tl.create_schedule(t.out)
    SCHEDULES[sched_name](s, t)
    (out,) = build_run(s, t.ins, [t.out], t.arrays, name=f"{case_name}_{sched_name}")
    assert_close(out, t.ref)
    np.testing.assert_allclose(out, _default_result(case_name), rtol=2e-5, atol=2e-5)


def test_softmax_rows_compute_at_inline_and_vectorized():
    """The classic fused softmax: max and sum computed per row inside the output's row loop, the
    exponentials inlined, the row vectorized."""
    t = case_softmax()
    mx, E, sm = t.intermediates
    Y = t.out
    s = tl.create_schedule(Y)
    s[E].compute_inline()
    i, j = Y.op.axis
    # sm first: mx is read (through the inlined E) by sm and Y, so both must be inside Y's i
    s[sm].compute_at(s[Y], i)
    s[mx].compute_at(s[Y], i)
    _jo, ji = s[Y].split(j, factor=8)
    s[Y].vectorize(ji)
    s[Y].parallel(i)
    (out,) = build_run(s, t.ins, [Y], t.arrays, name="softmax_fused")
    assert_close(out, t.ref)
    np.testing.assert_allclose(out.sum(1), 1.0, rtol=1e-5)


def test_conv2d_pad_computed_at_output_row_with_cache_write():
    t = case_conv2d()
    (Xp,) = t.intermediates
    Y = t.out
    s = tl.create_schedule(Y)
    YL = s.cache_write(Y, "local")
    _n, _f, y, _x = s[Y].op.axis
    s[YL].compute_at(s[Y], y)
    s[Xp].compute_at(s[YL], s[YL].op.reduce_axis[0])
    (out,) = build_run(s, t.ins, [Y], t.arrays, name="conv_pad_at")
    assert_close(out, t.ref)


def test_matmul_full_schedule_from_design():
    """The schedule of DESIGN.md §2 (tile, split k, reorder, vectorize, unroll, parallel,
    cache_write computed at the tile), with sizes not divisible by the tiles."""
    M, N, K = 37, 70, 29
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, _ii, ji = s[C].tile(i, j, 8, 32)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(ck, factor=4)
    cjo, cji = s[CC].split(cj, factor=16)
    s[CC].reorder(ko, ci, ki, cjo, cji)
    s[CC].vectorize(cji)
    s[CC].unroll(ki)
    s[C].vectorize(ji)
    s[C].parallel(io)
    a, b = rand((M, K)), rand((K, N), seed=1)
    (out,) = build_run(s, [A, B], [C], [a, b], name="mm_design")
    assert_close(out, a @ b)
