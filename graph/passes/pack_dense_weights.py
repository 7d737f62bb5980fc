"""Pass: pack constant dense weights into the matmul micro-kernel's panels at build time.

``tl.ops.matmul`` packs its B operand into [ceil(N/16), K, 16] panels inside the kernel (one zmm
of 16 columns per k, a contiguous stream per panel) on every call; for a model's weight that is
a pass over the weight per inference. Measured 128x768 . 768x3072 (the transformer FFN): 1.57 ms
packing in the kernel, 1.21 ms with the weight packed once (``tl.ops.matmul_prepacked``).

A dense node with a constant [K, N] weight gets the panels and ``weight_layout="NK16n"``,
``units=N``, whatever its rows. With one row (a classifier at batch 1, a gemv) the product is
memory-bound: the kernel is a pass over the weight, and in [K, N] each k of a 64-column task is
256 bytes one row (N * 4 bytes) after the last, a new page every few rows for a large weight,
where the panels are contiguous streams the prefetchers follow. Measured 1x9216 . 9216x4096
(AlexNet's fc6, 151 MB): 60.7 ms reading [K, N], 14.7 ms reading the panels, numpy 23.7 ms,
onnxruntime 28.7 ms; 1x2048 . 2048x1000 (8 MB, cached): 0.081 / 0.054 / numpy 0.083 ms (a
loaded 2-core machine, alternating runs).
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild

LAYOUT = "NK16n"


def pack_kn(w: np.ndarray, block: int = 16) -> np.ndarray:
    """[K, N] -> [ceil(N/block), K, block], zero-padded past N."""
    k, n = w.shape
    nb = -(-n // block)
    padded = np.zeros((k, nb * block), w.dtype)
    padded[:, :n] = w
    return np.ascontiguousarray(padded.reshape(k, nb, block).transpose(1, 0, 2))


def pack_dense_weights(g: Graph) -> Graph:
    em = Emitter()
    packed: dict[int, Value] = {}  # a weight shared by several dense nodes is packed once

    def visit(n: Node, ins: list[Value]):
        if n.op != "dense" or "weight_layout" in n.attrs:
            return None
        x, w = ins[0], ins[1]
        if not w.is_constant or len(w.shape) != 2:
            return None
        if id(w) not in packed:
            data = pack_kn(w.data)
            packed[id(w)] = Value(f"{w.name}_{LAYOUT}", data.shape, w.dtype, layout=LAYOUT,
                                  data=data)
        attrs = dict(n.attrs, weight_layout=LAYOUT, units=int(w.shape[1]))
        return em.emit(n.name, "dense", [x, packed[id(w)], *ins[2:]], attrs, n.outputs)

    return rebuild(g, visit, em)
