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

``transpose_geometry`` gives, per spatial axis, the convolution's padding and the
interleave's offsets, all constants: every length is the input's plus a constant (times the
stride), so a symbolic height and width (a UNet exported with dynamic sizes) take the same
path, the lengths as expressions. The graph layer imports ConvTranspose as weight transform
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
    as_int,
    check_int,
    check_tensor,
    dims_of,
    int_tuple,
    is_symbolic,
    op_compute,
    prod_of,
    static_shape,
)


@dataclass(frozen=True)
class AxisGeometry:
    """One spatial axis of a transposed convolution done as a convolution; every field is a
    constant, whatever the input's length n (so a symbolic n gives expressions only for the
    lengths, conv_len and out_len below).

    stride; taps: the phase kernels' length T; conv_pad: (before, after) zero padding (>= 0)
    of the input for the stride-1 convolution, whose output is then n + conv_pad - T + 1
    long; shift: output pixel Y reads phase position Y + shift of that output (its row
    (Y + shift) // stride, its phase (Y + shift) % stride); end: the phase positions past the
    last output pixel, so the output is stride * conv_len - shift - end long."""

    stride: int
    taps: int
    conv_pad: tuple[int, int]
    shift: int
    end: int

    def conv_len(self, in_len):
        return in_len + self.conv_pad[0] + self.conv_pad[1] - self.taps + 1

    def out_len(self, conv_len):
        return self.stride * conv_len - self.shift - self.end


def transpose_geometry(kernel: int, stride: int, dilation: int, pad_begin: int,
                       pad_end: int) -> AxisGeometry:
    """The geometry of an axis whose output is ONNX's stride * (n - 1) + (kernel - 1) *
    dilation + 1 - pad_begin - pad_end long (pad_end net of output_padding: may be < 0).

    Phase position P = Y + pad_begin reads input q - t for the phase kernel's taps; the rows
    it needs run from q0 = pad_begin // stride to n - 1 + hi, so the input is padded by reach
    - q0 before and hi after. Where that is negative (pads past the kernel's reach), the
    convolution computes the rows before (after) anyway and the interleave skips them: the
    input is never cropped, which keeps every length n + a constant (a symbolic n needs no
    slice, whose clamping would hide the sizes too small)."""
    reach = ((kernel - 1) * dilation) // stride  # the farthest input a phase reads back
    q0 = pad_begin // stride  # the phase row of the first output pixel (floor)
    lo, hi = reach - q0, ((kernel - 1) * dilation - pad_end) // stride
    skip = max(0, -lo)
    pad = (max(lo, 0), max(hi, 0))
    shift = pad_begin - stride * q0 + stride * skip
    # stride * conv_len - shift - out_len, the n terms cancel
    end = stride * (pad[0] + pad[1] - reach + 1) - shift - ((kernel - 1) * dilation + 1) + \
        pad_begin + pad_end
    return AxisGeometry(stride, reach + 1, pad, shift, end)


def output_length(in_len, kernel, stride, dilation, pad_begin, pad_end, output_padding):
    """ONNX's output length: stride * (in - 1) + output_padding + (K - 1) * dilation + 1 -
    pads (an int, or an expression for a symbolic in_len)."""
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
                              op: str = "conv_transpose_interleave", out_lens=None) -> Tensor:
    """The phases of the equivalent convolution's output [N, groups * P * OCg, conv_len...]
    written to their pixels: [N, groups * OCg, out_len...] (a pixel shuffle with the crop),
    out_len = stride * conv_len - shift - end. geometry: one AxisGeometry per spatial axis;
    conv_len may be symbolic: ``out_lens`` then gives the output lengths as the caller
    writes them (a graph's canonical forms), and a length that would be < 1 at some size is
    refused at the kernel's entry. op: the tag (conv2d_transpose_nchw's output is this)."""
    check_tensor(op, "y", y)
    ys = dims_of(op, "y", y, constant=(1,), why="channels")
    geo = tuple(geometry)
    nsp = len(ys) - 2
    g = check_int(op, "groups", groups, 1)
    phases = prod_of([a.stride for a in geo])
    if len(geo) != nsp or ys[1] % (g * phases):
        raise ValueError(f"{op}: y {ys} does not hold {g} groups of {phases} phases over "
                         f"{len(geo)} spatial axes")
    ocg = ys[1] // (g * phases)
    outs = _interleave_lens(op, ys[2:], geo, out_lens)

    def f(n, oc, *sp):
        ph, pos = 0, []
        for d, a in enumerate(geo):
            yp = sp[d] + a.shift
            ph = ph * a.stride + yp % a.stride if d else yp % a.stride
            pos.append(yp // a.stride)
        ch = ((oc // ocg) * phases + ph) * ocg + oc % ocg
        return y[(n, ch, *pos)]

    return op_compute(op, (ys[0], g * ocg, *outs), f, INJECTIVE, groups=g,
                      **_interleave_requires(op, ys[2:], geo))


def _interleave_lens(op: str, conv_lens, geo, given) -> list:
    """The output lengths: the given forms over symbolic lengths, checked over constant ones."""
    if given is not None and len(given) != len(geo):
        raise ValueError(f"{op}: out_lens must give {len(geo)} lengths, got {given!r}")
    outs = []
    for d, (n, a) in enumerate(zip(conv_lens, geo)):
        own = a.out_len(n)
        if given is not None and not is_symbolic(n) and as_int(given[d]) != own:
            raise ValueError(f"{op}: out_lens gives {given[d]!r} for axis {d + 2}, the "
                             f"geometry gives {own}")
        if not is_symbolic(n) and own < 1:
            raise ValueError(f"{op}: the output would be empty along axis {d + 2}")
        outs.append(given[d] if given is not None and is_symbolic(n) else own)
    return outs


def _interleave_requires(op: str, conv_lens, geo) -> dict:
    """attrs["requires"] over symbolic lengths: the output length >= 1 (ONNX refuses an empty
    output; the conv's windows only make its own length >= 1, which leaves shift + end)."""
    need = [(a.out_len(n) - 1, f"{op}: the output length along axis {d + 2} would be < 1")
            for d, (n, a) in enumerate(zip(conv_lens, geo))
            if is_symbolic(n) and a.shift + a.end >= a.stride]
    return {"requires": tuple(need)} if need else {}


def conv2d_transpose_nchw(x: Tensor, w: Tensor, stride=1, padding=0, output_padding=0,
                          dilation=1, groups: int = 1) -> Tensor:
    """ONNX ConvTranspose of NCHW data: x [N, C, H, W], w [C, OC/groups, KH, KW] -> [N, OC,
    OH, OW] with OH = stride * (H - 1) + output_padding + (KH - 1) * dilation + 1 - pads.
    padding: int, (ph, pw) or (top, left, bottom, right). Computed as one convolution over
    the phase kernels (conv2d_nchw, the library's fast conv) and an interleave. H and W may
    be symbolic (tl.var): the lengths are then expressions, and a size whose output would be
    empty is refused at the kernel's entry."""
    from .nn import conv2d_nchw

    op = "conv2d_transpose_nchw"
    check_tensor(op, "x", x)
    check_tensor(op, "w", w)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"{op}: x and w must be 4-D, got {x.ndim}-D and {w.ndim}-D")
    _, c, h, wd = dims_of(op, "x", x, constant=(1,), why="channels")
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
    geo = [transpose_geometry(k, st[d], dil[d], p[d], p[d + 2] - op_[d])
           for d, k in enumerate((kh, kw))]
    for d, n in enumerate((h, wd)):
        if not is_symbolic(n) and output_length(n, (kh, kw)[d], st[d], dil[d], p[d], p[d + 2],
                                                op_[d]) < 1:
            raise ValueError(f"{op}: the output would be empty along axis {d + 2}")
    pads = [a.conv_pad[0] for a in geo] + [a.conv_pad[1] for a in geo]
    w2 = conv_transpose_weight(w, st, dil, groups)
    y = conv2d_nchw(x, w2, 1, tuple(pads), 1, groups)
    return conv_transpose_interleave(y, geo, groups, op)


__all__ = ["conv2d_transpose_nchw", "conv_transpose_interleave", "conv_transpose_weight"]
