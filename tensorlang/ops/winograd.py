"""Winograd convolution F(4x4, 3x3) on blocked NCHW[x]c activations (Lavin & Gray, "Fast
Algorithms for Convolutional Neural Networks", 2015).

A 3x3 stride-1 convolution computes each 4x4 output tile from a 6x6 input tile with 36
independent products over the input channels instead of 144: the input tile d becomes
V = B^T d B, the 3x3 kernel g becomes U = G g G^T (once, at build time: ``winograd_weight``),
the 36 products M = sum_c V U are small matrix products (output channels x tiles x input
channels, the bulk of the work), and the output tile is Y = A^T M A. The direct blocked conv
runs at a core's FMA peak on VGG-/ResNet-style 3x3 layers, so the only way past it is fewer
multiplications: 36/144 = 1/4 of them, plus the transforms (a few percent).

Stages (each a part of ``conv2d_winograd_nchwc``, scheduled by schedule_conv2d_winograd):
    rows     T[n, cb, ty, tx, a, j, ci]  = sum_i B^T[a, i] x[.., 4 ty + i, 4 tx + j, ci]
    input    V[a, b, n, ty, tx, cb, ci]  = sum_j T[.., a, j, ci] B^T[b, j]
    product  M[a, b, n, ty, tx, ob, oi]  = sum_c V[a, b, .., c] U[a, b, ob, c, oi]
    cols     Z[a, n, ty, tx, q, ob, oi]  = sum_b M[a, b, ..] A^T[q, b]
    tile     Y4[n, ob, ty, p, tx, q, oi] = sum_a A^T[p, a] Z[a, .., q, ..]
    output   Y[n, ob, h, w, oi]          = Y4[n, ob, h / 4, h % 4, w / 4, w % 4, oi]
The transform matrices are constants written into the expressions (a select over the unrolled
row index folds to one sparse sum per row), so no multiplication by 0 or 1 is emitted.
Output rows and columns past OH / OW (when 4 does not divide them) are computed on zero padding
and never stored.
"""


from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import te
from ..ir.expr import const
from ..te.tensor import Tensor
from ._base import OUT_ELEMWISE_FUSABLE, check_tensor, dims_of, int_tuple, op_compute, static_shape
from .transform import pad as _pad

TILE = 4  # output tile side m of F(m x m, 3 x 3)
ALPHA = TILE + 2  # input tile side m + r - 1

_F = Fraction
# interpolation points 0, 1, -1, 2, -2 and infinity
B_T = ((4, 0, -5, 0, 1, 0),
       (0, -4, -4, 1, 1, 0),
       (0, 4, -4, -1, 1, 0),
       (0, -2, -1, 2, 1, 0),
       (0, 2, -1, -2, 1, 0),
       (0, 4, 0, -5, 0, 1))
G = ((_F(1, 4), 0, 0),
     (_F(-1, 6), _F(-1, 6), _F(-1, 6)),
     (_F(-1, 6), _F(1, 6), _F(-1, 6)),
     (_F(1, 24), _F(1, 12), _F(1, 6)),
     (_F(1, 24), _F(-1, 12), _F(1, 6)),
     (0, 0, 1))
A_T = ((1, 1, 1, 1, 1, 0),
       (0, 1, -1, 2, -2, 0),
       (0, 1, 1, 4, 4, 0),
       (0, 1, -1, 8, -8, 1))


def winograd_weight(w: np.ndarray, ib: int, ob: int) -> np.ndarray:
    """OIHW 3x3 weights -> U [6, 6, O/ob, I/ib, ib, ob] (U = G g G^T per channel pair, in float64,
    stored as float32): the weight layout conv2d_winograd_nchwc reads."""
    w = np.asarray(w)
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise ValueError(f"winograd_weight: w must be OIHW with a 3x3 kernel, got shape "
                         f"{w.shape}")
    o, i = w.shape[:2]
    if o % ob or i % ib:
        raise ValueError(f"winograd_weight: blocks ib={ib}, ob={ob} must divide I={i}, O={o}")
    g = np.array(G, dtype=np.float64)
    u = np.einsum("ak,oikl,bl->abio", g, w.astype(np.float64), g)  # [6, 6, I, O]
    u = u.reshape(ALPHA, ALPHA, i // ib, ib, o // ob, ob).transpose(0, 1, 4, 2, 3, 5)
    return np.ascontiguousarray(u.astype(w.dtype if w.dtype != np.float64 else np.float32))


def _combine(coeffs, terms):
    """sum_k coeffs[k] * terms[k] without the zero terms and the unit multiplications."""
    acc = None
    for c, t in zip(coeffs, terms):
        if c == 0:
            continue
        if abs(c) == 1:
            v = t
        else:
            v = t * const(float(abs(c)), t.dtype)
        if acc is None:
            acc = v if c > 0 else -v
        else:
            acc = acc + v if c > 0 else acc - v
    return acc


def _by_row(row, matrix, terms):
    """matrix[row] . terms for a loop index ``row`` (unrolled by the schedule, so the select
    folds to the one row's sparse sum)."""
    out = _combine(matrix[-1], terms)
    for r in range(len(matrix) - 2, -1, -1):
        out = te.select(row == r, _combine(matrix[r], terms), out)
    return out


def _check(op, x, u):
    check_tensor(op, "x", x)
    check_tensor(op, "u", u)
    if x.ndim != 5 or u.ndim != 6:
        raise ValueError(f"{op}: x must be 5-D NCHW[x]c and u 6-D [6, 6, OC/ob, C/ib, ib, ob], "
                         f"got {x.ndim}-D and {u.ndim}-D")
    n, cbn, h, w, cb = dims_of(op, "x", x, constant=(1, 2, 3, 4),
                               why="channels and spatial extents")
    a1, a2, obn, ucbn, ucb, ob = static_shape(op, "u", u)
    if (a1, a2) != (ALPHA, ALPHA):
        raise ValueError(f"{op}: u must hold {ALPHA}x{ALPHA} transformed kernels (F(4x4, 3x3)), "
                         f"got {a1}x{a2}")
    if (ucbn, ucb) != (cbn, cb):
        raise ValueError(f"{op}: u's input channel blocks {(ucbn, ucb)} do not match x's "
                         f"{(cbn, cb)}")
    if x.dtype != "float32" or u.dtype != "float32":
        raise ValueError(f"{op}: x and u must be float32, got {x.dtype} and {u.dtype}")
    return n, cbn, h, w, cb, obn, ob


def conv2d_winograd_nchwc(x: Tensor, u: Tensor, padding=1) -> Tensor:
    """3x3 stride-1 convolution of x [N, C/ib, H, W, ib] with weights transformed by
    ``winograd_weight`` (u [6, 6, OC/ob, C/ib, ib, ob]) -> [N, OC/ob, OH, OW, ob], the same
    result as conv2d_nchwc with the kernel layout_transform'ed weights (up to rounding)."""
    op = "conv2d_winograd_nchwc"
    n, cbn, h, w, cb, obn, ob = _check(op, x, u)
    pt, pl, pb, pr = int_tuple(op, "padding", padding, 4, 0)
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: a {h}x{w} input padded by {(pt, pl, pb, pr)} has no 3x3 window")
    th, tw = -(-oh // TILE), -(-ow // TILE)
    xp = _pad(x, [(0, 0), (0, 0), (pt, th * TILE + 2 - h - pt), (pl, tw * TILE + 2 - w - pl),
                  (0, 0)])
    rows = op_compute("winograd_rows", (n, cbn, th, tw, ALPHA, ALPHA, cb),
                      lambda b, c, ty, tx, a, j, ci: _by_row(a, B_T, [
                          xp[b, c, ty * TILE + i, tx * TILE + j, ci] for i in range(ALPHA)]),
                      "injective")
    v = op_compute("winograd_input", (ALPHA, ALPHA, n, th, tw, cbn, cb),
                   lambda a, bb, b, ty, tx, c, ci: _by_row(bb, B_T, [
                       rows[b, c, ty, tx, a, j, ci] for j in range(ALPHA)]), "injective")
    rco = te.reduce_axis((0, cbn), name="rco")
    rci = te.reduce_axis((0, cb), name="rci")
    m = op_compute("winograd_product", (ALPHA, ALPHA, n, th, tw, obn, ob),
                   lambda a, bb, b, ty, tx, o, oi: te.sum(
                       v[a, bb, b, ty, tx, rco, rci] * u[a, bb, o, rco, rci, oi],
                       axis=[rco, rci]), "reduce")
    z = op_compute("winograd_cols", (ALPHA, n, th, tw, TILE, obn, ob),
                   lambda a, b, ty, tx, q, o, oi: _by_row(q, A_T, [
                       m[a, bb, b, ty, tx, o, oi] for bb in range(ALPHA)]), "injective")
    y4 = op_compute("winograd_tile", (n, obn, th, TILE, tw, TILE, ob),
                    lambda b, o, ty, p, tx, q, oi: _by_row(p, A_T, [
                        z[a, b, ty, tx, q, o, oi] for a in range(ALPHA)]), "injective")
    return op_compute(op, (n, obn, oh, ow, ob),
                      lambda b, o, y, xx, oi: y4[b, o, y // TILE, y % TILE, xx // TILE,
                                                 xx % TILE, oi],
                      OUT_ELEMWISE_FUSABLE, padding=[pt, pl, pb, pr])


# Where the transformed tiles (V and M, each 36/16 of the activations) outgrow the caches the
# transforms become memory-bound: 1 thread, default schedules, ms Winograd / direct (load 5):
# 256->256 56x56 17.2 / 51.2, 512->512 28x28 16.7 / 48.5, 128->256 56x56 15.2 / 33.5,
# 64->64 56x56 2.0 / 5.2, 256->256 14x14 1.7 / 5.8, 512->512 7x7 2.6 / 4.3, but
# 128->128 112x112 56.1 / 66.1 (V + M 29 MB) and 64->64 224x224 72.5 / 49.4 (58 MB).
MAX_TILE_BYTES = 16 << 20  # V + M
MIN_OUTPUT_EXTENT = 7  # 2 x 2 tiles of 4 (8 x 8 computed): 31% of the products unused
# A small conv (a few MFLOP) gains microseconds at most, and keeps the direct conv's tuning
# template (the Winograd kernel has no tuned knobs): ResNet's smallest 3x3 is 116 M MACs
MIN_MACS = 10_000_000
# F(4x4, 3x3) rounds ~10-20x more than the direct conv per layer (one conv vs float64: 64->64
# 56x56 4.6e-6 vs 2.4e-7; the float32 channel sums of V x U, large next to the output they
# cancel to), and a network amplifies an early layer's rounding through every layer after it:
# torchvision's FCN-ResNet50 with random weights (~170x) went from 7.1e-5 vs float64 (direct;
# onnxruntime 7.4e-5) to 3.0e-4 with every eligible conv as Winograd, 1.07e-4 with those of at
# least 128 input channels, 8.0e-5 with at least 256 (its layer3's first 3x3). The narrow
# early layers keep the direct conv until the products sum more accurately.
MIN_CHANNELS = 256


# The products read the transformed weights U once per call: 36 x c x oc floats, 4x the direct
# conv's weights, whatever the output's size. The direct conv does 18 x c x oc FLOPs per output
# pixel at the FMA peak. So below 144 / 18 = 8 x (peak FLOP/s / memory bytes/s) output pixels the
# products wait on memory for U and the direct conv is faster. It is a property of the machine:
# 1 thread, ms Winograd / direct, Intel Xeon (Emerald Rapids, 160 GFLOP/s / 23.4 GB/s = 6.8):
# 512->512 7x7 1.725 / 1.235 (49 pixels < 55), 256->256 14x14 0.736 / 1.169 (196 pixels);
# 2 threads 0.844 / 0.622 and 0.370 / 0.594.
WEIGHT_BOUND_PIXELS_PER_FLOP_PER_BYTE = 144 / 18


def winograd_pays(out_hw, flops_per_byte: float) -> bool:
    """Whether the products of a conv with an out_hw output are not bound by reading the
    transformed weights, on a machine doing ``flops_per_byte`` FLOPs per byte it reads from
    memory (``graph.kernel_cost.machine_roofline``: its FLOP/s over its bytes/s)."""
    oh, ow = (int(v) for v in out_hw)
    return oh * ow >= WEIGHT_BOUND_PIXELS_PER_FLOP_PER_BYTE * flops_per_byte


def winograd_eligible(c: int, oc: int, kernel, stride, dilation, groups: int, out_hw) -> bool:
    """Whether a conv of c -> oc channels with an out_hw output runs faster as Winograd: 3x3,
    stride 1, no dilation, no groups, an output of at least 7 x 7, MIN_MACS of work,
    MIN_CHANNELS input channels and transformed tiles of at most MAX_TILE_BYTES."""
    oh, ow = (int(v) for v in out_hw)
    tiles = -(-oh // TILE) * -(-ow // TILE)
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and min(oh, ow) >= MIN_OUTPUT_EXTENT
            and c * oc * 9 * oh * ow >= MIN_MACS and c >= MIN_CHANNELS
            and ALPHA * ALPHA * tiles * (c + oc) * 4 <= MAX_TILE_BYTES)


__all__ = ["conv2d_winograd_nchwc", "winograd_eligible", "winograd_pays", "winograd_weight"]
