"""Pass: drop the kernel taps of a convolution that read only padding.

A dilated convolution on a small plane has taps that fall in the zero padding for every output
pixel: DeepLabV3's ASPP head convolves a 14x14 map with 3x3 kernels at dilations 12, 24 and 36
(pads equal to the dilation), and at 24 and 36 the eight outer taps of every output read
only padding, so the conv is the 1x1 conv of its centre tap. Computed as written it is nine
times the arithmetic plus a padded copy of the input (tv_deeplabv3_mobilenet_v3, one thread:
those two convs were 4.7-4.8 ms each against onnxruntime's 1.3 ms). Along each spatial axis
the taps that read at least one input element form one contiguous range [first, last]; the
weight is cut to that range at build time, the leading pad shrinks by ``first * dilation`` and
the trailing one by ``(k - 1 - last) * dilation``, so every output reads the same inputs with
the same weights and the output shape is unchanged. An axis cut to one tap gets dilation 1
(it no longer matters), so a kernel cut to 1x1 takes the library's 1x1 paths.

Only a conv whose weight is a constant and that no layout pass has rewritten yet is cut, and
only when both new pads stay non-negative (a cut that would need to crop the input is left
alone).
"""

from __future__ import annotations

from .. import op_registry as R
from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild


def trim_conv_taps(g: Graph) -> Graph:
    em = Emitter()

    def visit(n: Node, ins: list[Value]):
        if n.op != "conv" or not ins[1].is_constant \
                or {"layout", "out_layout", "weight_layout"} & n.attrs.keys() \
                or R.symbolic_spatial(ins[0].shape):
            return None  # (which taps read the input depends on a symbolic size)
        cut = _live_taps(ins[0].shape, ins[1].shape, n.outputs[0].shape, n.attrs)
        if cut is None:
            return None
        w = ins[1]
        keep = (slice(None), slice(None), *(slice(a, b + 1) for a, b in cut))
        data = w.data[keep].copy()
        w_cut = Value(f"{w.name}_taps", data.shape, w.dtype, data=data)
        out, = em.emit(n.name, "conv", [ins[0], w_cut, *ins[2:]],
                       _cut_attrs(n.attrs, w.shape[2:], cut), [n.outputs[0]])
        return [out]

    return rebuild(g, visit, em)


def _live_taps(xs: tuple, ws: tuple, ys: tuple, attrs: dict) -> list[tuple[int, int]] | None:
    """Per spatial axis the range [first, last] of taps that read an input element for some
    output; None when no axis loses a tap, or when a cut is not expressible with pads >= 0."""
    nsp = len(ws) - 2
    strides, dil, pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    cut = []
    for d in range(nsp):
        size, k, out = xs[2 + d], ws[2 + d], ys[2 + d]
        # tap r reads rows r*dil - pad_begin + [0, (out - 1) * stride]
        live = [r for r in range(k)
                if r * dil[d] - pads[d] <= size - 1
                and (out - 1) * strides[d] + r * dil[d] - pads[d] >= 0]
        if not live:
            return None  # output is the bias alone: rare, and left to the conv as written
        first, last = live[0], live[-1]
        if pads[d] - first * dil[d] < 0 or pads[nsp + d] - (k - 1 - last) * dil[d] < 0:
            return None
        cut.append((first, last))
    if all(b - a + 1 == k for (a, b), k in zip(cut, ws[2:])):
        return None
    return cut


def _cut_attrs(attrs: dict, kernel: tuple, cut: list[tuple[int, int]]) -> dict:
    nsp = len(kernel)
    dil = attrs["dilations"]
    begin = [attrs["pads"][d] - a * dil[d] for d, (a, _) in enumerate(cut)]
    end = [attrs["pads"][nsp + d] - (kernel[d] - 1 - b) * dil[d] for d, (_, b) in enumerate(cut)]
    return dict(attrs, pads=begin + end,
                dilations=[1 if a == b else dil[d] for d, (a, b) in enumerate(cut)])
