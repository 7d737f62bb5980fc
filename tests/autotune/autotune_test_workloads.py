"""Workloads written without templates or library ops (plain tl.compute), for the template-free
tuning tests and benchmarks/autoschedule.py (which runs them at larger sizes). Each is
registered with @autotune.workload and has a numpy reference in REFERENCES (inputs -> outputs).
The builder processes import this module by name."""

from __future__ import annotations

import numpy as np

import tensorlang as tl
from tensorlang import autotune

REFERENCES: dict = {}


def _ref(name):
    def deco(f):
        REFERENCES[name] = f
        return f
    return deco


def _pad(x, p: int, name: str):
    """x (..., H, W) zero-padded by p on the last two axes."""
    *lead, h, w = (int(d.value) for d in x.shape)

    def body(*idx):
        i, j = idx[-2], idx[-1]
        inside = tl.all(i >= p, i < h + p, j >= p, j < w + p)
        return tl.if_then_else(inside, x[(*idx[:-2], i - p, j - p)], 0.0)

    return tl.compute((*lead, h + 2 * p, w + 2 * p), lambda *idx: body(*idx), name=name)


@autotune.workload
def plain_matmul(M: int, N: int, K: int):
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


@_ref("plain_matmul")
def _matmul_ref(a, b):
    return a @ b


@autotune.workload
def bmm_nt_bias_relu(Bt: int, M: int, N: int, K: int):
    """relu(A[b] @ B[b]^T + bias): B stored transposed, the bias and activation fused."""
    A = tl.placeholder((Bt, M, K), name="A")
    B = tl.placeholder((Bt, N, K), name="B")
    bias = tl.placeholder((N,), name="bias")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((Bt, M, N), lambda b, i, j: tl.sum(A[b, i, k] * B[b, j, k], axis=k),
                   name="C")
    D = tl.compute((Bt, M, N), lambda b, i, j: tl.max(C[b, i, j] + bias[j], 0.0), name="D")
    return [A, B, bias, D]


@_ref("bmm_nt_bias_relu")
def _bmm_ref(a, b, bias):
    return np.maximum(a @ b.transpose(0, 2, 1) + bias, 0.0)


@autotune.workload
def plain_conv2d(N: int, C: int, H: int, W: int, OC: int, KS: int, stride: int = 1, pad: int = 1):
    X = tl.placeholder((N, C, H, W), name="X")
    Wt = tl.placeholder((OC, C, KS, KS), name="W")
    P = _pad(X, pad, "P")
    oh = (H + 2 * pad - KS) // stride + 1
    ow = (W + 2 * pad - KS) // stride + 1
    c = tl.reduce_axis((0, C), name="c")
    kh = tl.reduce_axis((0, KS), name="kh")
    kw = tl.reduce_axis((0, KS), name="kw")
    Y = tl.compute((N, OC, oh, ow), lambda n, o, y, x: tl.sum(
        P[n, c, y * stride + kh, x * stride + kw] * Wt[o, c, kh, kw], axis=[c, kh, kw]),
        name="Y")
    return [X, Wt, Y]


def _conv_np(x, w, stride, pad, groups=1):
    n, _, h, wd = x.shape
    oc, cg, ks, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - ks) // stride + 1
    ow = (wd + 2 * pad - ks) // stride + 1
    out = np.zeros((n, oc, oh, ow), dtype=np.float64)
    per = oc // groups
    for o in range(oc):
        g = o // per
        for kh in range(ks):
            for kw in range(ks):
                patch = xp[:, g * cg:(g + 1) * cg, kh:kh + stride * oh:stride,
                           kw:kw + stride * ow:stride]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, kh, kw])
    return out.astype(x.dtype)


@_ref("plain_conv2d")
def _conv2d_ref(x, w, *, stride=1, pad=1):
    return _conv_np(x, w, stride, pad)


@autotune.workload
def grouped_conv2d(N: int, C: int, H: int, W: int, OC: int, groups: int, KS: int = 3):
    cg = C // groups
    per = OC // groups
    X = tl.placeholder((N, C, H, W), name="X")
    Wt = tl.placeholder((OC, cg, KS, KS), name="W")
    P = _pad(X, KS // 2, "P")
    c = tl.reduce_axis((0, cg), name="c")
    kh = tl.reduce_axis((0, KS), name="kh")
    kw = tl.reduce_axis((0, KS), name="kw")
    Y = tl.compute((N, OC, H, W), lambda n, o, y, x: tl.sum(
        P[n, o // per * cg + c, y + kh, x + kw] * Wt[o, c, kh, kw], axis=[c, kh, kw]),
        name="Y")
    return [X, Wt, Y]


@autotune.workload
def dw_conv2d(N: int, C: int, H: int, W: int, KS: int = 5):
    X = tl.placeholder((N, C, H, W), name="X")
    Wt = tl.placeholder((C, KS, KS), name="W")
    P = _pad(X, KS // 2, "P")
    kh = tl.reduce_axis((0, KS), name="kh")
    kw = tl.reduce_axis((0, KS), name="kw")
    Y = tl.compute((N, C, H, W), lambda n, c, y, x: tl.sum(
        P[n, c, y + kh, x + kw] * Wt[c, kh, kw], axis=[kh, kw]), name="Y")
    return [X, Wt, Y]


@autotune.workload
def conv3d(N: int, C: int, D: int, H: int, W: int, OC: int, KS: int = 3):
    """Valid (unpadded) 3-D convolution."""
    X = tl.placeholder((N, C, D, H, W), name="X")
    Wt = tl.placeholder((OC, C, KS, KS, KS), name="W")
    c = tl.reduce_axis((0, C), name="c")
    kd = tl.reduce_axis((0, KS), name="kd")
    kh = tl.reduce_axis((0, KS), name="kh")
    kw = tl.reduce_axis((0, KS), name="kw")
    od, oh, ow = D - KS + 1, H - KS + 1, W - KS + 1
    Y = tl.compute((N, OC, od, oh, ow), lambda n, o, z, y, x: tl.sum(
        X[n, c, z + kd, y + kh, x + kw] * Wt[o, c, kd, kh, kw], axis=[c, kd, kh, kw]),
        name="Y")
    return [X, Wt, Y]


@autotune.workload
def attention(Bh: int, S: int, Dh: int):
    """softmax(Q K^T / sqrt(Dh)) V per head."""
    Q = tl.placeholder((Bh, S, Dh), name="Q")
    K = tl.placeholder((Bh, S, Dh), name="K")
    V = tl.placeholder((Bh, S, Dh), name="V")
    d = tl.reduce_axis((0, Dh), name="d")
    scale = float(1.0 / np.sqrt(Dh))
    Sc = tl.compute((Bh, S, S), lambda b, i, j: tl.sum(Q[b, i, d] * K[b, j, d], axis=d) ,
                    name="S")
    j1 = tl.reduce_axis((0, S), name="j1")
    Mx = tl.compute((Bh, S), lambda b, i: tl.max(Sc[b, i, j1], axis=j1), name="Mx")
    E = tl.compute((Bh, S, S), lambda b, i, j: tl.exp((Sc[b, i, j] - Mx[b, i]) * scale),
                   name="E")
    j2 = tl.reduce_axis((0, S), name="j2")
    Sm = tl.compute((Bh, S), lambda b, i: tl.sum(E[b, i, j2], axis=j2), name="Sm")
    Pr = tl.compute((Bh, S, S), lambda b, i, j: E[b, i, j] / Sm[b, i], name="Pr")
    j3 = tl.reduce_axis((0, S), name="j3")
    O = tl.compute((Bh, S, Dh), lambda b, i, e: tl.sum(Pr[b, i, j3] * V[b, j3, e], axis=j3),
                   name="O")
    return [Q, K, V, O]


@_ref("attention")
def _attention_ref(q, k, v):
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@autotune.workload
def layer_norm(R: int, C: int):
    X = tl.placeholder((R, C), name="X")
    g = tl.placeholder((C,), name="gamma")
    b = tl.placeholder((C,), name="beta")
    k1 = tl.reduce_axis((0, C), name="k1")
    total = tl.compute((R,), lambda i: tl.sum(X[i, k1], axis=k1), name="total")
    mean = tl.compute((R,), lambda i: total[i] * (1.0 / C), name="mean")
    k2 = tl.reduce_axis((0, C), name="k2")
    sq = tl.compute((R,), lambda i: tl.sum((X[i, k2] - mean[i]) * (X[i, k2] - mean[i]),
                                           axis=k2), name="sq")
    Y = tl.compute((R, C), lambda i, j: (X[i, j] - mean[i]) *
                   tl.rsqrt(sq[i] * (1.0 / C) + 1e-5) * g[j] + b[j], name="Y")
    return [X, g, b, Y]


@_ref("layer_norm")
def _layer_norm_ref(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


@autotune.workload
def softmax_rows(R: int, C: int):
    """Softmax along rows: a row max, exp, a row sum, a divide."""
    X = tl.placeholder((R, C), name="X")
    k1 = tl.reduce_axis((0, C), name="k1")
    Mx = tl.compute((R,), lambda i: tl.max(X[i, k1], axis=k1), name="Mx")
    E = tl.compute((R, C), lambda i, j: tl.exp(X[i, j] - Mx[i]), name="E")
    k2 = tl.reduce_axis((0, C), name="k2")
    Sm = tl.compute((R,), lambda i: tl.sum(E[i, k2], axis=k2), name="Sm")
    return [X, tl.compute((R, C), lambda i, j: E[i, j] / Sm[i], name="Y")]


@_ref("softmax_rows")
def _softmax_rows_ref(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@autotune.workload
def row_sum(R: int, C: int):
    X = tl.placeholder((R, C), name="X")
    k = tl.reduce_axis((0, C), name="k")
    return [X, tl.compute((R,), lambda i: tl.sum(X[i, k], axis=k), name="Y")]


@_ref("row_sum")
def _row_sum_ref(x):
    return x.sum(-1)


@autotune.workload
def stencil_chain(N: int, steps: int = 3):
    """`steps` three-point averages in a row (each output 2 shorter than its input)."""
    X = tl.placeholder((N,), name="X")
    cur = X
    for s in range(steps):
        cur = _average3(cur, f"T{s}")
    return [X, cur]


def _average3(p, name: str):
    n = int(p.shape[0].value) - 2
    return tl.compute((n,), lambda i: (p[i] + p[i + 1] + p[i + 2]) * (1.0 / 3.0), name=name)


@_ref("stencil_chain")
def _stencil_ref(x, steps=3):
    for _ in range(steps):
        x = (x[:-2] + x[1:-1] + x[2:]) / 3.0
    return x


@autotune.workload
def transpose(R: int, C: int):
    X = tl.placeholder((R, C), name="X")
    return [X, tl.compute((C, R), lambda i, j: X[j, i], name="Y")]


@_ref("transpose")
def _transpose_ref(x):
    return x.T.copy()


def reference(name: str, args: tuple, inputs: list) -> np.ndarray:
    """The numpy result of workload `name` at `args` on `inputs` (float64 inside)."""
    xs = [np.asarray(x, dtype=np.float64) for x in inputs]
    if name == "plain_conv2d":
        stride = args[6] if len(args) > 6 else 1
        pad = args[7] if len(args) > 7 else 1
        return _conv_np(*xs, stride, pad)
    if name == "grouped_conv2d":
        return _conv_np(*xs, 1, (args[6] if len(args) > 6 else 3) // 2, groups=args[5])
    if name == "dw_conv2d":
        x, w = xs
        return _conv_np(x, w[:, None], 1, w.shape[-1] // 2, groups=x.shape[1])
    if name == "conv3d":
        return _conv3d_np(*xs)
    if name == "stencil_chain":
        return _stencil_ref(xs[0], args[1] if len(args) > 1 else 3)
    return REFERENCES[name](*xs)


def _conv3d_np(x, w):
    n, _, d, h, wd = x.shape
    oc, _, ks, _, _ = w.shape
    od, oh, ow = d - ks + 1, h - ks + 1, wd - ks + 1
    out = np.zeros((n, oc, od, oh, ow))
    for a in range(ks):
        for b in range(ks):
            for e in range(ks):
                patch = x[:, :, a:a + od, b:b + oh, e:e + ow]
                out += np.einsum("ncdhw,oc->nodhw", patch, w[:, :, a, b, e])
    return out


def _first_nonzero(a, b):
    return tl.if_then_else(a != 0.0, a, b)


# keeps the first nonzero value in the order of its reduce axes: not commutative, so a fill
# that reorders those axes (tiling two of them, rfactor) changes the result and is refused
first_nonzero = tl.comm_reducer(_first_nonzero, lambda dtype: tl.const(0.0, dtype),
                                name="first_nonzero", commutative=False)


@autotune.workload
def first_nonzero_2d(R: int, H: int, W: int):
    X = tl.placeholder((R, H, W), name="X")
    kh = tl.reduce_axis((0, H), name="kh")
    kw = tl.reduce_axis((0, W), name="kw")
    return [X, tl.compute((R,), lambda r: first_nonzero(X[r, kh, kw], axis=[kh, kw]),
                          name="Y")]


@_ref("first_nonzero_2d")
def _first_nonzero_ref(x):
    flat = x.reshape(x.shape[0], -1)
    nz = flat != 0
    idx = nz.argmax(-1)
    return np.where(nz.any(-1), flat[np.arange(len(flat)), idx], 0.0)
