"""Pass: give a conv whose output channels no full vector divides zero channels up to the next
multiple of 16, and slice them off where the model reads its result as NCHW anyway.

``convert_layout`` blocks a conv's output by 16 channels (one zmm of fp32) when 16 divides
them, else by 8 (one ymm), else not at all. So SqueezeNet's 1000-class 1x1 conv ran in 8-channel
blocks, every FMA half a vector wide: 2.12 ms against onnxruntime's 1.00 ms (one thread, Intel
Xeon), half the model's gap; a YOLO head's 255 channels stay NCHW, with scalar stores. Here such
a conv gets 16 - oc % 16 more output channels of zero weights and zero bias (at most an eighth
more work), and the ops after it that keep each channel to itself (unary elementwise ops,
pooling) run on the padded channels too. The padding is sliced off where the chain ends, at a
reader that converts the value back to NCHW in any case (softmax, reshape, a dense layer, a
graph output), so the slice is the only added work, on the smallest value of the chain (after
the global pool, for a classifier). onnxruntime's NCHWc transformer pads a conv's output
channels to its block the same way.

A conv is padded only when its weight (and bias) are constants, it is not grouped, and its chain
ends at such a reader; its padded channels never reach an op that mixes channels.
"""

from __future__ import annotations

import numpy as np

from .. import op_registry as R
from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild

VECTOR_CHANNELS = 16  # fp32 lanes of a zmm: convert_layout's preferred block
MAX_ADDED_SHARE = 1 / 8  # of the conv's work
# ops that keep each channel to itself: the padding runs through them
PER_CHANNEL_OPS = frozenset(R.UNARY_REFS) | {"max_pool", "avg_pool", "global_avg_pool",
                                             "global_max_pool"}
# readers that take the value in NCHW whatever layout it arrives in (convert_layout converts it
# for them), so slicing the padding off before them costs no extra conversion
NCHW_READERS = frozenset({"softmax", "reshape", "transpose", "dense", "matmul"})


def pad_conv_channels(g: Graph) -> Graph:
    readers: dict[int, list[Node]] = {}
    for n in g.nodes:
        for v in n.inputs:
            readers.setdefault(id(v), []).append(n)
    outputs = {id(v) for v in g.outputs}
    padded: dict[str, int] = {}  # name of a node of a padded chain -> the channels to keep
    ends: set[str] = set()  # the last node of each chain
    for n in g.nodes:
        chain = _padded_chain(n, readers, outputs)
        if chain:
            padded.update((m.name, n.outputs[0].shape[1]) for m in chain)
            ends.add(chain[-1].name)
    if not padded:
        return g
    em = Emitter()
    constants: dict[int, Value] = {}  # a weight two convs share is padded once (names are unique)

    def visit(n: Node, ins: list[Value]):
        if n.name not in padded:
            return None
        out = n.outputs[0]
        if n.op == "conv":
            ins = [ins[0], *(constants.setdefault(id(v), _zero_padded(v)) for v in ins[1:])]
        (shape, dtype), = R.infer_types(n.op, [(v.shape, v.dtype) for v in ins], n.attrs,
                                        n.name)
        y, = em.emit(n.name, n.op, ins, n.attrs, [Value(f"{out.name}_c{shape[1]}", shape, dtype)])
        if n.name not in ends:
            return [y]
        keep = padded[n.name]
        return em.emit(f"{n.name}_unpadded", "slice", [y],
                       {"starts": [0], "ends": [keep], "axes": [1], "steps": [1]}, [out])

    return rebuild(g, visit, em)


def _padded_chain(n: Node, readers: dict[int, list[Node]], outputs: set[int]) -> list[Node]:
    """The conv ``n`` and the per-channel ops after it to run on padded channels, or []."""
    if not _paddable_conv(n):
        return []
    chain, v = [n], n.outputs[0]
    while id(v) not in outputs and len(readers.get(id(v), [])) == 1:
        m = readers[id(v)][0]
        if m.op not in PER_CHANNEL_OPS or len(m.inputs) != 1 or len(m.outputs) != 1:
            break
        chain.append(m)
        v = m.outputs[0]
    rs = readers.get(id(v), [])
    if (rs or id(v) in outputs) and all(m.op in NCHW_READERS for m in rs):
        return chain
    return []


def _paddable_conv(n: Node) -> bool:
    if n.op != "conv" or len(n.outputs) != 1 or n.attrs.get("groups", 1) != 1 \
            or {"layout", "out_layout", "weight_layout"} & n.attrs.keys() \
            or len(n.inputs[0].shape) != 4:
        return False
    w, bias = n.inputs[1], n.inputs[2:]
    oc = w.shape[0]
    added = -oc % VECTOR_CHANNELS
    return (len(w.shape) == 4 and w.dtype == "float32" and n.inputs[0].dtype == "float32"
            and all(v.is_constant for v in (w, *bias)) and 0 < added <= MAX_ADDED_SHARE * oc)


def _zero_padded(v: Value) -> Value:
    """A conv's weight or bias constant with zeros for the added output channels."""
    added = -v.shape[0] % VECTOR_CHANNELS
    data = np.concatenate([v.data, np.zeros((added, *v.shape[1:]), v.data.dtype)])
    return Value(f"{v.name}_c{data.shape[0]}", data.shape, v.dtype, data=data)
