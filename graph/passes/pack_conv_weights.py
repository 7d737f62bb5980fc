"""Pass: pack constant conv weights into the operator library's blocked weight layout at build
time (TVM's "alter op layout" for kernels), instead of inside the kernel on every run.

``tl.ops.conv2d_nchw`` accumulates ``CONV_OC_BLOCK`` (16) output channels per SIMD vector and
reads its weights as [OC/16, C, KH, KW, 16] (``OIHW16o``); given OIHW weights it packs them in
the kernel, which costs a pass over the weights per call: measured with default schedules
(conv + bias + relu, batch 1), pre-packed weights take 0.38x the time at 512->512 7x7 3x3,
0.86x at 256->256 14x14, 0.83x at 512->2048 7x7 1x1 and 0.93-0.99x at 28x28-56x56, where the
weights are small next to the activations.

A conv node whose weight is a constant, 2-D (4-D OIHW), groups == 1 and OC a multiple of the
block -- exactly the cases where the library takes the blocked path anyway, so the kernel's
arithmetic is unchanged -- gets the packed constant and ``weight_layout="OIHW16o"``. So does a
grouped conv (1 < groups, more than one input channel per group) whose output channels per
group 16 or 8 divides (``tl.ops.nn.grouped_conv_block``, the block of its blocked path), in
``OIHW16o`` or ``OIHW8o``: a block never straddles two groups, so the packing is the same. The
activations stay NCHW: the library's direct NCHW conv reads them as they are. Convs whose input
channels are a multiple of 16 were already moved to NCHW16c by ``convert_layout`` (which packs
their weights itself); this pass packs the rest (e.g. the 3-channel stem of a CNN).
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild


def packed_layout(block: int) -> str:
    return f"OIHW{block}o"


def pack_oihw(w: np.ndarray, block: int) -> np.ndarray:
    """OIHW -> [O/block, I, KH, KW, block] (``tl.ops.pack_conv_weight``'s layout, in numpy)."""
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(o // block, block, i, kh, kw).transpose(0, 2, 3, 4, 1))


def _conv_block(n: Node, w: Value) -> int:
    """The block the library's blocked path packs this conv's weight in, 0 when none."""
    from tensorlang.ops.nn import CONV_OC_BLOCK, grouped_conv_block

    groups = n.attrs.get("groups", 1)
    if groups == 1:
        return CONV_OC_BLOCK if w.shape[0] % CONV_OC_BLOCK == 0 else 0
    return grouped_conv_block(w.shape[0] // groups) if w.shape[1] > 1 else 0


def pack_conv_weights(g: Graph) -> Graph:
    em = Emitter()
    packed: dict[tuple, Value] = {}  # a weight shared by several convs is packed once

    def visit(n: Node, ins: list[Value]):
        if n.op != "conv" or "weight_layout" in n.attrs or len(n.inputs[0].shape) != 4:
            return None  # (1-D and 3-D convs left by their passes: the generic conv reads OIHW)
        w = ins[1]
        block = _conv_block(n, w) if w.is_constant and len(w.shape) == 4 else 0
        if not block:
            return None
        wv = packed.get((id(w), block))
        if wv is None:
            data = pack_oihw(w.data, block)
            wv = packed[id(w), block] = Value(f"{w.name}_{packed_layout(block)}", data.shape,
                                              w.dtype, layout=packed_layout(block), data=data)
        return em.emit(n.name, "conv", [ins[0], wv, *ins[2:]],
                       dict(n.attrs, weight_layout=packed_layout(block)), n.outputs)

    return rebuild(g, visit, em)
