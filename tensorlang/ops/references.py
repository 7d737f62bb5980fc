"""numpy references of the library ops (float64 where the op computes in float32, then cast),
used by the definitions' examples: the differential test of every op."""

from __future__ import annotations

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(a):
    return _erf(a.astype(np.float64)).astype(a.dtype)


def gelu(a, approximate="none"):
    x = a.astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    else:
        y = 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    return y.astype(a.dtype)


def sigmoid(a):
    return (1 / (1 + np.exp(-a.astype(np.float64)))).astype(a.dtype)


def mish(a):
    """x * tanh(softplus(x)) in float64 (logaddexp: no overflow for large x)."""
    x = a.astype(np.float64)
    with np.errstate(invalid="ignore"):  # -inf * tanh(0): NaN, as onnxruntime
        return (x * np.tanh(np.logaddexp(0.0, x))).astype(a.dtype)


def shrink(a, lambd=0.5, bias=0.0):
    """ONNX Shrink; for integers the bounds are exact and bias is truncated (ops.shrink)."""
    if np.issubdtype(a.dtype, np.floating):
        lo, hi, b = -lambd, lambd, bias
    else:
        lo, hi, b = math.ceil(-lambd), math.floor(lambd), int(bias)
    return np.where(a < lo, a + b, np.where(a > hi, a - b, 0)).astype(a.dtype)


def pad_nchw(x, pt, pl, pb, pr, value=0.0):
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def conv2d_nchw(x, w, stride=1, padding=0, groups=1):
    """Direct convolution, OIHW weights, symmetric padding."""
    xp = pad_nchw(x.astype(np.float64), padding, padding, padding, padding)
    n, _, h, wd = xp.shape
    oc, cpg, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, oc, oh, ow))
    ocpg = oc // groups
    for o in range(oc):
        g = o // ocpg
        for i in range(kh):
            for j in range(kw):
                win = xp[:, g * cpg:(g + 1) * cpg, i:i + stride * (oh - 1) + 1:stride,
                         j:j + stride * (ow - 1) + 1:stride]
                y[:, o] += np.einsum("nchw,c->nhw", win, w[o, :, i, j])
    return y.astype(x.dtype)


def to_nchwc(x, block):
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def from_nchwc(x):
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def oihw_to_blocked(w, ib, ob):
    """OIHW -> [O/ob, I/ib, KH, KW, ib, ob] (kernel_layout_transform)."""
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(o // ob, ob, i // ib, ib, kh, kw)
                                .transpose(0, 2, 4, 5, 3, 1))


def pack_conv_weight(w, ob):
    """OIHW -> [O/ob, I, KH, KW, ob]."""
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(o // ob, ob, i, kh, kw).transpose(0, 2, 3, 4, 1))


def pack_matmul_weight(b, bn=16):
    """[K, N] -> [ceil(N/bn), K, bn], zero-padded."""
    k, n = b.shape
    nb = -(-n // bn)
    out = np.zeros((k, nb * bn), b.dtype)
    out[:, :n] = b
    return np.ascontiguousarray(out.reshape(k, nb, bn).transpose(1, 0, 2))


def pool2d(x, k, stride, pad, kind):
    """max / avg (padding excluded from the count) pooling of NCHW."""
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = pad_nchw(x.astype(np.float64), pad, pad, pad, pad, fill)
    ones = pad_nchw(np.ones((1, 1, h, w)), pad, pad, pad, pad, 0.0)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    out = np.empty((n, c, oh, ow))
    for y in range(oh):
        for z in range(ow):
            win = xp[:, :, y * stride:y * stride + k, z * stride:z * stride + k]
            if kind == "max":
                out[:, :, y, z] = win.max(axis=(2, 3))
            else:
                cnt = ones[0, 0, y * stride:y * stride + k, z * stride:z * stride + k].sum()
                out[:, :, y, z] = win.sum(axis=(2, 3)) / cnt
    return out.astype(x.dtype)


def softmax(x, axis=-1, log=False):
    v = x.astype(np.float64)
    m = v.max(axis=axis, keepdims=True)
    e = np.exp(v - m)
    s = e.sum(axis=axis, keepdims=True)
    return (v - m - np.log(s) if log else e / s).astype(x.dtype)


def layer_norm(x, gamma=None, beta=None, eps=1e-5):
    v = x.astype(np.float64)
    mu = v.mean(axis=-1, keepdims=True)
    var = ((v - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (v - mu) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y.astype(x.dtype)


def batch_norm(x, g, b, m, v, eps=1e-5):
    shp = (1, -1, 1, 1)
    y = (x.astype(np.float64) - m.reshape(shp)) / np.sqrt(v.reshape(shp) + eps) * g.reshape(shp)
    return (y + b.reshape(shp)).astype(x.dtype)


def lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    v = x.astype(np.float64)
    c = x.shape[1]
    sq = np.zeros_like(v)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    for ch in range(c):
        sq[:, ch] = (v[:, max(0, ch - lo):min(c, ch + hi + 1)] ** 2).sum(axis=1)
    return (v / (bias + alpha / size * sq) ** beta).astype(x.dtype)


def layout_nchw_to_blocked(x, block):
    return to_nchwc(x, block)


def conv_transpose(x, w, strides, pads, output_padding=None, dilations=None, groups=1):
    """ONNX ConvTranspose by its definition: each input pixel scatters x * w over the output
    (float64), then the pads are cropped. x [N, C, *S], w [C, OC/groups, *K]."""
    nsp = x.ndim - 2
    dil = dilations or [1] * nsp
    outp = output_padding or [0] * nsp
    c, ocg, *ks = w.shape
    cg = c // groups
    full = [s * (n - 1) + op + (k - 1) * d + 1
            for n, k, s, d, op in zip(x.shape[2:], ks, strides, dil, outp)]
    y = np.zeros((x.shape[0], groups * ocg, *full))
    for i in np.ndindex(*x.shape[2:]):
        for k in np.ndindex(*ks):
            pos = tuple(ii * s + kk * d for ii, kk, s, d in zip(i, k, strides, dil))
            for g in range(groups):
                xs = x[(slice(None), slice(g * cg, (g + 1) * cg), *i)].astype(np.float64)
                ws = w[(slice(g * cg, (g + 1) * cg), slice(None), *k)]
                y[(slice(None), slice(g * ocg, (g + 1) * ocg), *pos)] += xs @ ws
    crop = tuple(slice(p, f - q) for p, q, f in zip(pads[:nsp], pads[nsp:], full))
    return y[(slice(None), slice(None), *crop)].astype(x.dtype)


def conv_transpose_interleave(y):
    """The phases of y [1, 12 = 6 phases (2 x 3) * 2 channels, 3, 3] at their pixels for the
    geometry of catalog.py's example: axis 2 stride 2 shift 1, axis 3 stride 3 shift 0."""
    out = np.zeros((1, 2, 5, 7), y.dtype)
    for o in range(2):
        for a in range(5):
            for b in range(7):
                ph = ((a + 1) % 2) * 3 + b % 3
                out[0, o, a, b] = y[0, ph * 2 + o, (a + 1) // 2, b // 3]
    return out


def gather_elements(data, indices, axis=0):
    """ONNX GatherElements by its definition: each output element's own coordinates, its
    ``axis`` one replaced by its index (negative indices count from the end)."""
    where = list(np.indices(indices.shape, sparse=True))
    where[axis] = np.where(indices < 0, indices + data.shape[axis], indices)
    return data[tuple(where)]


def gather_nd(data, indices, batch_dims=0):
    """ONNX GatherND by its definition (loops over the index tuples)."""
    b = batch_dims
    k = indices.shape[-1]
    lead = indices.shape[:-1]
    out = np.empty(lead + data.shape[b + k:], data.dtype)
    for i in np.ndindex(*lead):
        tup = tuple(int(v) for v in indices[i])
        out[i] = data[i[:b] + tup]
    return out


def scatter_nd(data, indices, updates, reduction="none"):
    """ONNX ScatterND by its definition: the updates applied in order."""
    out = data.copy()
    combine = {"none": lambda a, u: u, "add": np.add, "mul": np.multiply,
               "max": np.maximum, "min": np.minimum}[reduction]
    for i in np.ndindex(*indices.shape[:-1]):
        tup = tuple(int(v) for v in indices[i])
        out[tup] = combine(out[tup], updates[i])
    return out


def space_to_depth(x, b, mode="DCR"):
    """ONNX SpaceToDepth as its spec writes it (reshape, transpose, reshape)."""
    n, c, h, w = x.shape
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(*perm)
    return np.ascontiguousarray(t.reshape(n, c * b * b, h // b, w // b))


def group_norm(x, num_groups, gamma=None, beta=None, epsilon=1e-5):
    """GroupNormalization in float64: per sample and group of channels, (x - mean) /
    sqrt(var + eps), then * gamma[c] + beta[c]."""
    n, c = x.shape[:2]
    g = x.reshape(n, num_groups, -1).astype(np.float64)
    y = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + epsilon)
    y = y.reshape(x.shape)
    shp = (1, c) + (1,) * (x.ndim - 2)
    if gamma is not None:
        y = y * gamma.reshape(shp)
    if beta is not None:
        y = y + beta.reshape(shp)
    return y.astype(x.dtype)


def scatter_nd_planned(data, plan, updates, reduction="none"):
    """scatter_nd_planned by its definition: each cell combines its listed updates in order."""
    k = plan.ndim - 1
    out = data.copy()
    combine = {"none": lambda a, u: u, "add": np.add, "mul": np.multiply,
               "max": np.maximum, "min": np.minimum}[reduction]
    for cell in np.ndindex(*plan.shape[:k]):
        for u in plan[cell]:
            if u >= 0:
                out[cell] = combine(out[cell], updates[u])
    return out


def scatter_nd_boxed(data, updates, starts, steps, reduction="none"):
    """scatter_nd_boxed by its definition: the updates combined into the strided box."""
    out = data.copy()
    box = tuple(slice(lo, lo + st * (g - 1) + 1, st)
                for lo, st, g in zip(starts, steps, updates.shape))
    combine = {"none": lambda a, u: u, "add": np.add, "mul": np.multiply,
               "max": np.maximum, "min": np.minimum}[reduction]
    out[box] = combine(out[box], updates)
    return out


def power(a, b):
    """numpy.power for a float base. An integer base (ONNX Pow: int32, int64) keeps its dtype
    and takes any numeric exponent, computed as onnxruntime computes it: C's pow in float64,
    truncated toward zero (so a negative exponent gives 0 unless the base is 1 or -1), and the
    dtype's minimum for a result outside its range or NaN (what x86's conversion gives: 0 ** -1
    and 3 ** 40 in int32 are -2**31, as onnxruntime returns them)."""
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.integer):
        return np.power(a, b).astype(a.dtype)
    with np.errstate(all="ignore"):  # libm raises the FP flags of 0 ** -1: numpy would warn
        r = _c_pow(a.astype(np.float64), np.asarray(b).astype(np.float64))
    info = np.iinfo(a.dtype)
    inside = (r >= info.min) & (r < float(info.max) + 1.0)  # max + 1: a power of two, exact
    return np.where(inside, r, info.min).astype(a.dtype)


def _c_pow_scalar(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except (OverflowError, ValueError):  # out of range or NaN (0 ** -1, (-8) ** 0.5): same end
        return math.nan


# C's pow, as the kernels and onnxruntime call it: numpy's float64 power is its own and rounds
# some results beyond 2**53 differently ((-17) ** 13)
_c_pow = np.vectorize(_c_pow_scalar, otypes=[np.float64])


def grid_sample(x, grid, mode="linear", padding_mode="zeros", align_corners=False):
    """ONNX GridSample of NCHW data in numpy (vision_misc.grid_sample's arithmetic), in x's
    float type."""
    n, _, h, w = x.shape
    cd = x.dtype.type

    def bounds(dim):
        return (0.0, dim - 1.0) if align_corners else (-0.5, dim - 0.5)

    def reflect(v, lo, hi):
        if hi == lo:
            return np.full_like(v, lo)
        below, above = v < lo, v > hi
        dist = np.where(below, lo - v, v - hi)
        k = np.floor(dist / (hi - lo))
        r = dist - k * (hi - lo)
        mirrored = np.where(below == (k % 2 == 0), lo + r, hi - r)
        return np.where(below | above, mirrored, v).astype(v.dtype)

    def coordinate(g, dim):
        g = g.astype(cd)
        v = (g + 1) * cd((dim - 1) / 2) if align_corners else ((g + 1) * cd(dim) - 1) * cd(0.5)
        v = np.rint(v) if mode == "nearest" else v
        lo, hi = bounds(dim)
        if padding_mode == "border" and mode != "cubic":  # (cubic: each tap clamped)
            return np.where((v < lo) | (v > hi), np.clip(v, 0, dim - 1), v).astype(cd)
        return reflect(v, lo, hi) if padding_mode == "reflection" else v

    def pixel(iy, ix):
        idx = [np.trunc(reflect(v, *bounds(dim))) if padding_mode == "reflection" else v
               for v, dim in ((iy, h), (ix, w))]
        inside = (idx[0] >= 0) & (idx[0] <= h - 1) & (idx[1] >= 0) & (idx[1] <= w - 1)
        iy_, ix_ = (np.clip(v, 0, dim - 1).astype(np.int64) for v, dim in zip(idx, (h, w)))
        vals = np.moveaxis(x[np.arange(n)[:, None, None], :, iy_, ix_], -1, 1)
        return np.where(inside[:, None], vals, 0) if padding_mode == "zeros" else vals

    vy, vx = coordinate(grid[..., 1], h), coordinate(grid[..., 0], w)
    if mode == "nearest":
        return pixel(vy, vx).astype(x.dtype)
    y0, x0 = np.floor(vy), np.floor(vx)
    taps = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
    wy, wx = _grid_weights(vy - y0, mode), _grid_weights(vx - x0, mode)
    out = 0
    for a, oy in enumerate(taps):
        for b, ox in enumerate(taps):
            out = out + (wy[a] * wx[b])[:, None] * pixel(y0 + oy, x0 + ox)
    return out.astype(x.dtype)


def _grid_weights(t, mode):
    if mode == "linear":
        return [1 - t, t]
    a = -0.75

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]
