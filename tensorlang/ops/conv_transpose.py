"""Transposed convolution (ONNX ConvTranspose) as an ordinary convolution, so that it runs on
the library's fast conv kernels: the sub-pixel decomposition.

Output pixel Y (before cropping by pads_begin: Y' = Y + pad) receives x[i] * w[k] for every
i * stride + k * dilation = Y'. Split Y' = q * stride + r: for each phase r the taps that
reach it are the k with (k * dilation) % stride == r, at input index q - (k * dilation) //
stride. So each phase is a stride-1 correlation of x with a small kernel of T = A + 1 taps
(A = ((K - 1) * dilation) // stride), and all stride^n phases together are ONE convolution
whose output channels are (group, phase, channel) with the phase kernels as weights
(``conv_transpose_weight``); ``conv_transpose_interleave`` then writes each phase's pixels to
their places (a pixel shuffle with the crop). Nothing multiplies a zero of an upsampled input
(the zero-insertion formulation does stride^n times the work); a tap that no phase has is a
zero weight only where K * dilation is not a multiple of the stride.

``transpose_geometry`` gives, per spatial axis, the convolution's padding (negative: crop the
input) and the interleave's offsets; the graph layer imports ConvTranspose as weight transform
(folded at build time for constant weights) -> conv (the graph's conv, with its layout and
weight-packing passes) -> interleave."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import te
from ..ir.expr import const
from ..te.tensor import Tensor
from ._base import (
    INJECTIVE,
    check_int,
    check_tensor,
    int_tuple,
    op_compute,
    prod_of,
    static_shape,
)


@dataclass(frozen=True)
class AxisGeometry:
    """One spatial axis of a transposed convolution done as a convolution.

    stride; taps: the phase kernels' length T; conv_pad: (before, after) padding of the input
    for the stride-1 convolution (negative: that many input pixels cropped); conv_len: its
    output length; shift: Y + shift = q' * stride + r is where output pixel Y reads phase r at
    the convolution's index q'; out_len: the transposed convolution's output length."""

    stride: int
    taps: int
    conv_pad: tuple[int, int]
    conv_len: int
    shift: int
    out_len: int


def transpose_geometry(in_len: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                       out_len: int) -> AxisGeometry:
    reach = ((kernel - 1) * dilation) // stride  # A: the farthest input a phase reads back
    q0 = pad_begin // stride  # the phase row of the first output pixel (floor)
    q1 = (pad_begin + out_len - 1) // stride
    conv_len = q1 - q0 + 1
    lo = reach - q0
    hi = conv_len - 1 + (reach + 1) - in_len - lo
    return AxisGeometry(stride, reach + 1, (lo, hi), conv_len, pad_begin - stride * q0,
                        out_len)


def output_length(in_len, kernel, stride, dilation, pad_begin, pad_end, output_padding) -> int:
    """ONNX's output length: stride * (in - 1) + output_padding + (K - 1) * dilation + 1 -
    pads."""
    return stride * (in_len - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_begin - \
        pad_end


def _phase_tap(r, t, kernel: int, stride: int, dilation: int, taps: int):
    """(kernel index, valid) of phase r's tap t: the k with k * dilation = stride * (taps - 1
    - t) + r (expressions or ints)."""
    num = (taps - 1 - t) * stride + r
    return num // dilation, (num % dilation == 0) if dilation > 1 else None


def conv_transpose_weight(w: Tensor, strides, dilations, groups: int = 1) -> Tensor:
    """ONNX ConvTranspose weights [C, OC/groups, K...] -> the phase kernels of the equivalent
    convolution, [groups * prod(strides) * OC/groups, C/groups, T...] (OIHW-like, output
    channels ordered (group, phase, channel))."""
    op = "conv_transpose_weight"
    check_tensor(op, "w", w)
    ws = static_shape(op, "w", w)
    nsp = len(ws) - 2
    st = int_tuple(op, "strides", strides, nsp, 1)
    dil = int_tuple(op, "dilations", dilations, nsp, 1)
    g = check_int(op, "groups", groups, 1)
    c, ocg, ks = ws[0], ws[1], ws[2:]
    if c % g:
        raise ValueError(f"{op}: the weight's {c} input channels are not divisible by "
                         f"groups={g}")
    cg = c // g
    taps = [((k - 1) * d) // s + 1 for k, s, d in zip(ks, st, dil)]
    phases = prod_of(st)
    shape = (g * phases * ocg, cg) + tuple(taps)

    def f(o, ci, *t):
        og = o % ocg
        ph = (o // ocg) % phases
        gi = o // (ocg * phases)
        idx, ok = [gi * cg + ci, og], []
        for d in reversed(range(nsp)):  # the phase index is row-major over the axes
            r = ph % st[d]
            ph = ph // st[d]
            k, exact = _phase_tap(r, t[d], ks[d], st[d], dil[d], taps[d])
            idx.insert(2, te.min(k, const(ks[d] - 1, k.dtype)))
            ok.append(k < ks[d])
            if exact is not None:
                ok.append(exact)
        return te.select(te.all(*ok), w[tuple(idx)], const(0, w.dtype))

    return op_compute(op, shape, f, INJECTIVE, strides=list(st), dilations=list(dil), groups=g)


def conv_transpose_weight_numpy(w: np.ndarray, strides, dilations, groups: int = 1):
    """conv_transpose_weight on a numpy array (constant folding)."""
    c, ocg, *ks = w.shape
    nsp = len(ks)
    taps = [((k - 1) * d) // s + 1 for k, s, d in zip(ks, strides, dilations)]
    cg = c // groups
    out = np.zeros((groups, *strides, ocg, cg, *taps), dtype=w.dtype)
    wg = w.reshape(groups, cg, ocg, *ks)
    for r in np.ndindex(*strides):
        for t in np.ndindex(*taps):
            kk = []
            for d in range(nsp):
                num = (taps[d] - 1 - t[d]) * strides[d] + r[d]
                if num % dilations[d] or num // dilations[d] >= ks[d]:
                    break
                kk.append(num // dilations[d])
            else:
                tap = wg[(slice(None), slice(None), slice(None), *kk)]  # [g, cg, ocg]
                out[(slice(None), *r, slice(None), slice(None), *t)] = tap.transpose(0, 2, 1)
    return out.reshape(groups * prod_of(strides) * ocg, cg, *taps)


def conv_transpose_interleave(y: Tensor, geometry, groups: int = 1,
                              op: str = "conv_transpose_interleave") -> Tensor:
    """The phases of the equivalent convolution's output [N, groups * P * OCg, conv_len...]
    written to their pixels: [N, groups * OCg, out_len...] (a pixel shuffle with the crop).
    geometry: one AxisGeometry per spatial axis; op: the tag (conv2d_transpose_nchw's output
    is this compute)."""
    check_tensor(op, "y", y)
    ys = static_shape(op, "y", y)
    geo = tuple(geometry)
    nsp = len(ys) - 2
    g = check_int(op, "groups", groups, 1)
    phases = prod_of([a.stride for a in geo])
    if len(geo) != nsp or ys[1] % (g * phases):
        raise ValueError(f"{op}: y {ys} does not hold {g} groups of {phases} phases over "
                         f"{len(geo)} spatial axes")
    ocg = ys[1] // (g * phases)
    shape = (ys[0], g * ocg) + tuple(a.out_len for a in geo)

    def f(n, oc, *sp):
        ph, pos = 0, []
        for d, a in enumerate(geo):
            yp = sp[d] + a.shift
            ph = ph * a.stride + yp % a.stride if d else yp % a.stride
            pos.append(yp // a.stride)
        ch = ((oc // ocg) * phases + ph) * ocg + oc % ocg
        return y[(n, ch, *pos)]

    return op_compute(op, shape, f, INJECTIVE, groups=g)


def conv2d_transpose_nchw(x: Tensor, w: Tensor, stride=1, padding=0, output_padding=0,
                          dilation=1, groups: int = 1) -> Tensor:
    """ONNX ConvTranspose of NCHW data: x [N, C, H, W], w [C, OC/groups, KH, KW] -> [N, OC,
    OH, OW] with OH = stride * (H - 1) + output_padding + (KH - 1) * dilation + 1 - pads.
    padding: int, (ph, pw) or (top, left, bottom, right). Computed as one convolution over
    the phase kernels (conv2d_nchw, the library's fast conv) and an interleave."""
    from .nn import conv2d_nchw
    from .transform import strided_slice

    op = "conv2d_transpose_nchw"
    check_tensor(op, "x", x)
    check_tensor(op, "w", w)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"{op}: x and w must be 4-D, got {x.ndim}-D and {w.ndim}-D")
    _, c, h, wd = static_shape(op, "x", x)
    wc, _, kh, kw = static_shape(op, "w", w)
    if wc != c:
        raise ValueError(f"{op}: w has {wc} input channels, x has {c}")
    st = int_tuple(op, "stride", stride, 2, 1)
    dil = int_tuple(op, "dilation", dilation, 2, 1)
    op_ = int_tuple(op, "output_padding", output_padding, 2, 0)
    p = padding if isinstance(padding, (list, tuple)) else (padding,) * 2
    p = tuple(p) * 2 if len(p) == 2 else tuple(p)
    if len(p) != 4:
        raise ValueError(f"{op}: padding must be an int, (ph, pw) or 4 values, got {padding!r}")
    geo = []
    for d, (n_in, k) in enumerate(((h, kh), (wd, kw))):
        out = output_length(n_in, k, st[d], dil[d], p[d], p[d + 2], op_[d])
        if out < 1:
            raise ValueError(f"{op}: the output would be empty along axis {d + 2}")
        geo.append(transpose_geometry(n_in, k, st[d], dil[d], p[d], out))
    crop = [(max(0, -a.conv_pad[0]), max(0, -a.conv_pad[1])) for a in geo]
    if any(lo or hi for lo, hi in crop):
        x = strided_slice(x, [crop[0][0], crop[1][0]], [h - crop[0][1], wd - crop[1][1]],
                          axes=[2, 3])
    pads = [max(0, a.conv_pad[0]) for a in geo] + [max(0, a.conv_pad[1]) for a in geo]
    w2 = conv_transpose_weight(w, st, dil, groups)
    y = conv2d_nchw(x, w2, 1, (pads[0], pads[1], pads[2], pads[3]), 1, groups)
    return conv_transpose_interleave(y, geo, groups, op)


__all__ = ["conv2d_transpose_nchw", "conv_transpose_interleave", "conv_transpose_weight"]
