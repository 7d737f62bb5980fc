"""The computes the differential schedule fuzzer (schedule_fuzz.py) schedules at random.

Each case is a function returning a Case: the kernel's input placeholders and output tensors, a
numpy reference (float64 where the kernel computes in float32) and a generator of inputs. Sizes
are small and odd (5, 7, 13, 17, 33) so that splits leave tails; the stencil is declared over
tl.var extents, bound at run time by the arrays' shapes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import tensorlang as tl

F32 = "float32"


@dataclass
class Case:
    inputs: list  # placeholders, in argument order
    outputs: list  # output tensors, in argument order (after the inputs)
    ref: Callable  # numpy arrays (the inputs) -> list of expected outputs
    gen: Callable  # np.random.Generator -> list of input arrays
    # (rtol, atol) of the comparison; integer outputs are compared exactly
    tol: tuple = (2e-4, 2e-4)
    notes: list = field(default_factory=list)


def _u(rng, shape, lo=-2.0, hi=2.0, dtype=F32):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _f64(*arrays):
    return [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]


# ----------------------------------------------------------------------------- linear algebra


def matmul_chain() -> Case:
    """D = (A @ B) @ E where both matmuls reduce over the same reduce axis object k."""
    m, kk, n = 7, 13, 5
    A = tl.placeholder((m, kk), name="A")
    B = tl.placeholder((kk, kk), name="B")
    E = tl.placeholder((kk, n), name="E")
    k = tl.reduce_axis((0, kk), name="k")
    C = tl.compute((m, kk), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = tl.compute((m, n), lambda i, j: tl.sum(C[i, k] * E[k, j], axis=k), name="D")

    def ref(a, b, e):
        a, b, e = _f64(a, b, e)
        return [a @ b @ e]

    return Case([A, B, E], [D], ref, lambda r: [_u(r, (m, kk)), _u(r, (kk, kk)), _u(r, (kk, n))])


def matmul_bias_relu() -> Case:
    m, kk, n = 17, 7, 13
    A = tl.placeholder((m, kk), name="A")
    B = tl.placeholder((kk, n), name="B")
    bias = tl.placeholder((n,), name="bias")
    k = tl.reduce_axis((0, kk), name="k")
    C = tl.compute((m, n), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    Y = tl.compute((m, n), lambda i, j: tl.max(C[i, j] + bias[j], 0.0), name="Y")

    def ref(a, b, c):
        a, b, c = _f64(a, b, c)
        return [np.maximum(a @ b + c, 0)]

    return Case([A, B, bias], [Y], ref,
                lambda r: [_u(r, (m, kk)), _u(r, (kk, n)), _u(r, (n,))])


def batch_matmul() -> Case:
    b_, m, kk, n = 3, 5, 7, 13
    A = tl.placeholder((b_, m, kk), name="A")
    B = tl.placeholder((b_, kk, n), name="B")
    k = tl.reduce_axis((0, kk), name="k")
    C = tl.compute((b_, m, n), lambda b, i, j: tl.sum(A[b, i, k] * B[b, k, j], axis=k),
                   name="C")

    def ref(a, b):
        a, b = _f64(a, b)
        return [np.matmul(a, b)]

    return Case([A, B], [C], ref, lambda r: [_u(r, (b_, m, kk)), _u(r, (b_, kk, n))])


def int_matmul() -> Case:
    """int32 matmul of small values, then a shift and a modulo by a constant: exact."""
    m, kk, n = 5, 17, 7
    A = tl.placeholder((m, kk), dtype="int32", name="A")
    B = tl.placeholder((kk, n), dtype="int32", name="B")
    k = tl.reduce_axis((0, kk), name="k")
    C = tl.compute((m, n), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    Y = tl.compute((m, n), lambda i, j: C[i, j] * 3 + C[i, j] % 7, name="Y")

    def ref(a, b):
        c = a.astype(np.int64) @ b.astype(np.int64)
        # numpy's % is floored, C's is truncated: the kernel follows numpy's semantics
        return [(c * 3 + c % 7).astype(np.int32)]

    def gen(r):
        return [r.integers(-9, 10, (m, kk)).astype(np.int32),
                r.integers(-9, 10, (kk, n)).astype(np.int32)]

    return Case([A, B], [Y], ref, gen, tol=(0, 0))


# ----------------------------------------------------------------------------- convolutions


def conv2d_padded_strided() -> Case:
    """NCHW conv: 2 -> 3 channels, 3x3 kernel, padding 1, stride 2, on 9x7 images."""
    ci, co, h, w, pad, stride = 2, 3, 9, 7, 1, 2
    oh, ow = (h + 2 * pad - 3) // stride + 1, (w + 2 * pad - 3) // stride + 1
    X = tl.placeholder((ci, h, w), name="X")
    W = tl.placeholder((co, ci, 3, 3), name="W")
    Xp = tl.compute((ci, h + 2 * pad, w + 2 * pad), lambda c, y, x: tl.if_then_else(
        tl.all(y >= pad, y < h + pad, x >= pad, x < w + pad), X[c, y - pad, x - pad],
        tl.const(0.0, F32)), name="Xp")
    rc = tl.reduce_axis((0, ci), name="rc")
    ry = tl.reduce_axis((0, 3), name="ry")
    rx = tl.reduce_axis((0, 3), name="rx")
    Y = tl.compute((co, oh, ow), lambda f, y, x: tl.sum(
        Xp[rc, y * stride + ry, x * stride + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="Y")

    def ref(x, wt):
        x, wt = _f64(x, wt)
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
        out = np.zeros((co, oh, ow))
        for dy in range(3):
            for dx in range(3):
                win = xp[:, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
                out += np.einsum("fc,cyx->fyx", wt[:, :, dy, dx], win)
        return [out]

    return Case([X, W], [Y], ref, lambda r: [_u(r, (ci, h, w)), _u(r, (co, ci, 3, 3))])


def depthwise_conv() -> Case:
    """Depthwise 3x3 conv, no padding, 3 channels of 7x13, then a bias."""
    c_, h, w = 3, 7, 13
    X = tl.placeholder((c_, h, w), name="X")
    K = tl.placeholder((c_, 3, 3), name="K")
    bias = tl.placeholder((c_,), name="bias")
    ry = tl.reduce_axis((0, 3), name="ry")
    rx = tl.reduce_axis((0, 3), name="rx")
    D = tl.compute((c_, h - 2, w - 2), lambda c, y, x: tl.sum(
        X[c, y + ry, x + rx] * K[c, ry, rx], axis=[ry, rx]), name="D")
    Y = tl.compute((c_, h - 2, w - 2), lambda c, y, x: D[c, y, x] + bias[c], name="Y")

    def ref(x, k, b):
        x, k, b = _f64(x, k, b)
        out = sum(x[:, dy:dy + h - 2, dx:dx + w - 2] * k[:, dy, dx][:, None, None]
                  for dy in range(3) for dx in range(3))
        return [out + b[:, None, None]]

    return Case([X, K, bias], [Y], ref,
                lambda r: [_u(r, (c_, h, w)), _u(r, (c_, 3, 3)), _u(r, (c_,))])


def max_pool() -> Case:
    """3x3 max pooling, stride 2, of a 13x19 image after an elementwise producer (9 output
    columns: a 9-lane vector loop when vectorized whole)."""
    h, w = 13, 19
    oh, ow = (h - 3) // 2 + 1, (w - 3) // 2 + 1
    X = tl.placeholder((h, w), name="X")
    P = tl.compute((h, w), lambda y, x: X[y, x] * 2 - 1, name="P")
    ry = tl.reduce_axis((0, 3), name="ry")
    rx = tl.reduce_axis((0, 3), name="rx")
    Y = tl.compute((oh, ow), lambda y, x: tl.max(P[y * 2 + ry, x * 2 + rx], axis=[ry, rx]),
                   name="Y")

    def ref(x):
        p = x.astype(np.float64) * 2 - 1
        wins = [p[dy:dy + 2 * oh:2, dx:dx + 2 * ow:2] for dy in range(3) for dx in range(3)]
        return [np.max(wins, axis=0)]

    return Case([X], [Y], ref, lambda r: [_u(r, (h, w))], tol=(1e-6, 1e-6))


def avg_pool_min() -> Case:
    """2x2 average pooling (stride 2) and 2x2 min pooling (stride 1) of one 3-channel image."""
    c_, h, w = 3, 7, 13
    X = tl.placeholder((c_, h, w), name="X")
    ry = tl.reduce_axis((0, 2), name="ry")
    rx = tl.reduce_axis((0, 2), name="rx")
    S = tl.compute((c_, h // 2, w // 2), lambda c, y, x: tl.sum(
        X[c, y * 2 + ry, x * 2 + rx], axis=[ry, rx]), name="S")
    A = tl.compute((c_, h // 2, w // 2), lambda c, y, x: S[c, y, x] * 0.25, name="Avg")
    qy = tl.reduce_axis((0, 2), name="qy")
    qx = tl.reduce_axis((0, 2), name="qx")
    M = tl.compute((c_, h - 1, w - 1), lambda c, y, x: tl.min(X[c, y + qy, x + qx],
                                                              axis=[qy, qx]), name="Mn")

    def ref(x):
        x = x.astype(np.float64)
        hh, ww = h // 2 * 2, w // 2 * 2
        avg = x[:, :hh, :ww].reshape(c_, h // 2, 2, w // 2, 2).mean(axis=(2, 4))
        mn = np.minimum(np.minimum(x[:, :-1, :-1], x[:, 1:, :-1]),
                        np.minimum(x[:, :-1, 1:], x[:, 1:, 1:]))
        return [avg, mn]

    return Case([X], [A, M], ref, lambda r: [_u(r, (c_, h, w))])


# ----------------------------------------------------------------------------- normalizations


def softmax() -> Case:
    """The 4-stage softmax: row max, exp(x - max), row sum, divide."""
    m, n = 7, 33
    X = tl.placeholder((m, n), name="X")
    k1 = tl.reduce_axis((0, n), name="k1")
    mx = tl.compute((m,), lambda i: tl.max(X[i, k1], axis=k1), name="mx")
    E = tl.compute((m, n), lambda i, j: tl.exp(X[i, j] - mx[i]), name="E")
    k2 = tl.reduce_axis((0, n), name="k2")
    sm = tl.compute((m,), lambda i: tl.sum(E[i, k2], axis=k2), name="sm")
    Y = tl.compute((m, n), lambda i, j: E[i, j] / sm[i], name="Y")

    def ref(x):
        x = x.astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        return [e / e.sum(1, keepdims=True)]

    return Case([X], [Y], ref, lambda r: [_u(r, (m, n), -6, 6)], tol=(1e-4, 1e-6))


def layer_norm() -> Case:
    m, n = 5, 17
    X = tl.placeholder((m, n), name="X")
    g = tl.placeholder((n,), name="gamma")
    b = tl.placeholder((n,), name="beta")
    k1 = tl.reduce_axis((0, n), name="k1")
    total = tl.compute((m,), lambda i: tl.sum(X[i, k1], axis=k1), name="total")
    k2 = tl.reduce_axis((0, n), name="k2")
    sq = tl.compute((m,), lambda i: tl.sum((X[i, k2] - total[i] / n) * (X[i, k2] - total[i] / n),
                                           axis=k2), name="sq")
    Y = tl.compute((m, n), lambda i, j: (X[i, j] - total[i] / n) * tl.rsqrt(sq[i] / n + 1e-5)
                   * g[j] + b[j], name="Y")

    def ref(x, gg, bb):
        x, gg, bb = _f64(x, gg, bb)
        mu = x.mean(1, keepdims=True)
        v = ((x - mu) ** 2).mean(1, keepdims=True)
        return [(x - mu) / np.sqrt(v + 1e-5) * gg + bb]

    return Case([X, g, b], [Y], ref, lambda r: [_u(r, (m, n)), _u(r, (n,)), _u(r, (n,))],
                tol=(1e-3, 1e-4))


def softmax_symbolic() -> Case:
    """The 4-stage softmax over m x n, both symbolic (16 x 33 among the sizes drawn)."""
    m, n = tl.var("m"), tl.var("n")
    X = tl.placeholder((m, n), name="X")
    k1 = tl.reduce_axis((0, n), name="k1")
    mx = tl.compute((m,), lambda i: tl.max(X[i, k1], axis=k1), name="mx")
    E = tl.compute((m, n), lambda i, j: tl.exp(X[i, j] - mx[i]), name="E")
    k2 = tl.reduce_axis((0, n), name="k2")
    sm = tl.compute((m,), lambda i: tl.sum(E[i, k2], axis=k2), name="sm")
    Y = tl.compute((m, n), lambda i, j: E[i, j] / sm[i], name="Y")

    def ref(x):
        x = x.astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        return [e / e.sum(1, keepdims=True)]

    def gen(r):
        m_, n_ = (int(v) for v in r.choice([1, 5, 16, 33], size=2))
        return [_u(r, (m_, n_), -6, 6)]

    return Case([X], [Y], ref, gen, tol=(1e-4, 1e-6))


def matmul_symbolic() -> Case:
    """C = A @ B + 1 with M, N, K symbolic: every split leaves a symbolic tail."""
    M, N, K = tl.var("M"), tl.var("N"), tl.var("K")
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    Y = tl.compute((M, N), lambda i, j: C[i, j] + 1, name="Y")

    def ref(a, b):
        return [a.astype(np.float64) @ b.astype(np.float64) + 1]

    def gen(r):
        m_, n_, k_ = (int(v) for v in r.choice([1, 5, 7, 13, 17, 33], size=3))
        return [_u(r, (m_, k_)), _u(r, (k_, n_))]

    return Case([A, B], [Y], ref, gen)


# ----------------------------------------------------------------------------- stencils, scans


def stencil_symbolic() -> Case:
    """A 5-point stencil with a zero boundary over a producer, on n x m with n, m symbolic (the
    kernel's argument shapes must be plain tl.var symbols, so the boundary is a guard)."""
    n, m = tl.var("n"), tl.var("m")
    A = tl.placeholder((n, m), name="A")
    P = tl.compute((n, m), lambda i, j: A[i, j] * 0.5 + 1, name="P")

    def at(i, j, ok):
        return tl.if_then_else(ok, P[i, j], tl.const(0.0, F32))

    S = tl.compute((n, m), lambda i, j: P[i, j] * 4 - at(i - 1, j, i >= 1)
                   - at(i + 1, j, i < n - 1) - at(i, j - 1, j >= 1) - at(i, j + 1, j < m - 1),
                   name="S")
    Y = tl.compute((n, m), lambda i, j: tl.abs(S[i, j]), name="Y")

    def ref(a):
        p = np.pad(a.astype(np.float64) * 0.5 + 1, 1)
        s = 4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        return [np.abs(s)]

    def gen(r):
        n_, m_ = (int(x) for x in r.choice([1, 2, 5, 7, 13, 17, 33], size=2))
        return [_u(r, (n_, m_))]

    return Case([A], [Y], ref, gen)


def stencil_1d_chain() -> Case:
    """Two chained 3-point stencils of symbolic length n (each shrinks the range by 2); the
    output keeps the input where the stencils do not reach."""
    n = tl.var("n")
    X = tl.placeholder((n,), name="X")
    S1 = tl.compute((n - 2,), lambda i: X[i] + X[i + 1] * 2 + X[i + 2], name="S1")
    S2 = tl.compute((n - 4,), lambda i: S1[i] * S1[i + 1] - S1[i + 2], name="S2")
    Y = tl.compute((n,), lambda i: tl.if_then_else(i < n - 4, S2[i], X[i]), name="Y")

    def ref(x):
        x = x.astype(np.float64)
        s1 = x[:-2] + 2 * x[1:-1] + x[2:]
        s2 = s1[:-2] * s1[1:-1] - s1[2:]
        return [np.concatenate([s2, x[len(s2):]])]

    def gen(r):
        return [_u(r, (int(r.choice([4, 5, 7, 13, 33])),))]

    return Case([X], [Y], ref, gen)


def prefix_sum() -> Case:
    """Row-wise inclusive prefix sums as triangular reductions (where=), then a scale."""
    m, n = 5, 17
    X = tl.placeholder((m, n), name="X")
    k = tl.reduce_axis((0, n), name="k")
    S = tl.compute((m, n), lambda i, j: tl.sum(X[i, k], axis=k, where=k <= j), name="S")
    Y = tl.compute((m, n), lambda i, j: S[i, j] * 0.5, name="Y")

    def ref(x):
        return [np.cumsum(x.astype(np.float64), axis=1) * 0.5]

    return Case([X], [Y], ref, lambda r: [_u(r, (m, n))])


# ----------------------------------------------------------------------------- data movement


def gather_rows() -> Case:
    """G[i, j] = P[Ix[i], j]: a data-dependent row gather from a computed table."""
    rows, n, m = 13, 7, 5
    T = tl.placeholder((rows, n), name="T")
    Ix = tl.placeholder((m,), dtype="int32", name="Ix")
    P = tl.compute((rows, n), lambda r, j: T[r, j] * 3 + 1, name="P")
    G = tl.compute((m, n), lambda i, j: P[Ix[i], j], name="G")
    Y = tl.compute((m, n), lambda i, j: G[i, j] + G[i, n - 1 - j], name="Y")

    def ref(t, ix):
        g = (t.astype(np.float64) * 3 + 1)[ix]
        return [g + g[:, ::-1]]

    return Case([T, Ix], [Y], ref,
                lambda r: [_u(r, (rows, n)), r.integers(0, rows, (m,)).astype(np.int32)])


def transpose_chain() -> Case:
    """A 3-D permutation between two elementwise stages."""
    a, b, c = 3, 5, 7
    X = tl.placeholder((a, b, c), name="X")
    P = tl.compute((a, b, c), lambda i, j, k: X[i, j, k] * X[i, j, k], name="P")
    T = tl.compute((c, a, b), lambda k, i, j: P[i, j, k], name="T")
    Y = tl.compute((c, a, b), lambda k, i, j: T[k, i, j] - X[i, j, k], name="Y")

    def ref(x):
        x = x.astype(np.float64)
        return [np.transpose(x * x - x, (2, 0, 1))]

    return Case([X], [Y], ref, lambda r: [_u(r, (a, b, c))])


def elementwise_chain() -> Case:
    """Five elementwise stages with math intrinsics and a broadcast."""
    m, n = 13, 33
    X = tl.placeholder((m, n), name="X")
    v = tl.placeholder((n,), name="v")
    E1 = tl.compute((m, n), lambda i, j: X[i, j] * v[j], name="E1")
    E2 = tl.compute((m, n), lambda i, j: tl.sigmoid(E1[i, j]), name="E2")
    E3 = tl.compute((m, n), lambda i, j: tl.sqrt(tl.abs(E1[i, j]) + 1) + E2[i, j], name="E3")
    E4 = tl.compute((m, n), lambda i, j: tl.if_then_else(E3[i, j] > 1.5, E3[i, j],
                                                          -E3[i, j]), name="E4")
    Y = tl.compute((m, n), lambda i, j: tl.tanh(E4[i, j]) * 2, name="Y")

    def ref(x, vv):
        e1 = x.astype(np.float64) * vv.astype(np.float64)
        e3 = np.sqrt(np.abs(e1) + 1) + 1 / (1 + np.exp(-e1))
        e4 = np.where(e3 > 1.5, e3, -e3)
        return [np.tanh(e4) * 2]

    return Case([X, v], [Y], ref, lambda r: [_u(r, (m, n)), _u(r, (n,))], tol=(1e-5, 1e-5))


# ----------------------------------------------------------------------------- reductions


def argmax_rows() -> Case:
    """A comm_reducer argmax (index, value) per row; values from a small set so rows have ties
    (numpy's argmax returns the first maximum: so must the kernel, whatever the loop order)."""
    m, n = 7, 13
    argmax = tl.comm_reducer(
        lambda i0, v0, i1, v1: (
            tl.if_then_else(tl.any(v0 > v1, tl.all(v0 == v1, i0 < i1)), i0, i1),
            tl.max(v0, v1)),
        lambda ti, tv: (tl.const(-1, ti), tl.min_value(tv)), name="argmax")
    X = tl.placeholder((m, n), name="X")
    k = tl.reduce_axis((0, n), name="k")
    Idx, Val = tl.compute((m,), lambda i: argmax((k.var.astype("int32"), X[i, k]), axis=k),
                          name="am")

    def ref(x):
        return [x.argmax(1).astype(np.int32), x.max(1).astype(np.float64)]

    return Case([X], [Idx, Val], ref,
                lambda r: [r.integers(-3, 4, (m, n)).astype(np.float32)], tol=(0, 0))


def row_col_minmax() -> Case:
    """A row max, a column min and their combination (two reductions reading one producer)."""
    m, n = 13, 7
    X = tl.placeholder((m, n), name="X")
    P = tl.compute((m, n), lambda i, j: X[i, j] * 2 + 1, name="P")
    k = tl.reduce_axis((0, n), name="k")
    R = tl.compute((m,), lambda i: tl.max(P[i, k], axis=k), name="R")
    q = tl.reduce_axis((0, m), name="q")
    C = tl.compute((n,), lambda j: tl.min(P[q, j], axis=q), name="C")
    Y = tl.compute((m, n), lambda i, j: R[i] - C[j] + P[i, j], name="Y")

    def ref(x):
        p = x.astype(np.float64) * 2 + 1
        return [p.max(1)[:, None] - p.min(0)[None, :] + p]

    return Case([X], [Y], ref, lambda r: [_u(r, (m, n))], tol=(1e-6, 1e-6))


def float16_rowsum() -> Case:
    """float16 inputs, float16 elementwise stage and a float16 sum over 33 elements."""
    m, n = 5, 33
    X = tl.placeholder((m, n), dtype="float16", name="X")
    P = tl.compute((m, n), lambda i, j: X[i, j] * X[i, j], name="P")
    k = tl.reduce_axis((0, n), name="k")
    R = tl.compute((m,), lambda i: tl.sum(P[i, k], axis=k), name="R")

    def ref(x):
        p = (x * x).astype(np.float64)  # each product is rounded to float16, as in the kernel
        return [p.sum(1)]

    # a float16 sum of 33 terms below 1: a few float16 ulps of the sum (~11 bits) of slack
    return Case([X], [R], ref, lambda r: [_u(r, (m, n), -1, 1, "float16")], tol=(4e-3, 4e-3))


def int_reductions() -> Case:
    """int16 input widened to int32: column sums, a row max and a where= count."""
    m, n = 7, 17
    X = tl.placeholder((m, n), dtype="int16", name="X")
    W = tl.compute((m, n), lambda i, j: X[i, j].astype("int32") * 5 - 3, name="W")
    q = tl.reduce_axis((0, m), name="q")
    CS = tl.compute((n,), lambda j: tl.sum(W[q, j], axis=q), name="CS")
    k = tl.reduce_axis((0, n), name="k")
    CNT = tl.compute((m,), lambda i: tl.sum(tl.const(1, "int32"), axis=k, where=W[i, k] > 0),
                     name="CNT")

    def ref(x):
        w = x.astype(np.int64) * 5 - 3
        return [w.sum(0).astype(np.int32), (w > 0).sum(1).astype(np.int32)]

    return Case([X], [CS, CNT], ref,
                lambda r: [r.integers(-300, 300, (m, n)).astype(np.int16)], tol=(0, 0))


CASES: dict[str, Callable[[], Case]] = {f.__name__: f for f in (
    matmul_chain, matmul_bias_relu, batch_matmul, int_matmul, conv2d_padded_strided,
    depthwise_conv, max_pool, avg_pool_min, softmax, softmax_symbolic, matmul_symbolic,
    layer_norm, stencil_symbolic,
    stencil_1d_chain, prefix_sum, gather_rows, transpose_chain, elementwise_chain, argmax_rows,
    row_col_minmax, float16_rowsum, int_reductions)}
