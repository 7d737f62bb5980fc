"""Pass: run conv chains in the blocked activation layout NCHW16c (TVM's AlterOpLayout +
ConvertLayout, onnxruntime's NCHWc transformer).

A 2-D conv with a constant weight, ``groups == 1``, output channels that are a multiple of the
block (16 fp32 = one zmm) and a blocked input becomes the library's blocked conv
(``tl.ops.conv2d_nchwc``): its input and output are ``[N, C/16, H, W, 16]`` and its weight is
packed at build time into ``[OC/16, C/16, KH, KW, 16, 16]`` (``OIHW16i16o``). With an NCHW
input (a graph input, the 3-channel first conv of a CNN, the output of an op that stays NCHW)
it reads NCHW and writes NCHW16c (``tl.ops.conv2d_nchw(..., out_layout="NCHW16c")``, weight
``[OC/16, C, KH, KW, 16]``): its register tile broadcasts one input scalar per FMA either way,
so it runs as fast as the blocked conv and the input needs no conversion (measured: 1x1 32->64
at 112x112 0.113 ms vs 0.109 + 0.043 ms for the transform; 3x3 64->64 at 56x56 0.480 vs
0.484 + 0.021 ms). A depthwise conv (groups = channels, a multiple of 16) with a blocked input
becomes ``tl.ops.depthwise_conv2d_nchwc`` with its weight packed into ``[C/16, 1, KH, KW, 16]``
(``OIHW16o``). With an NCHW input it stays NCHW when its output is at least 14 wide: the NCHW
schedule vectorizes along W, and converting the input costs more than the blocked kernel saves
(32 channels at 112x112: 0.036 ms NCHW vs 0.024 + 0.052 ms; 64 channels 112 -> 56 stride 2:
0.075 vs 0.023 + 0.088 ms; at 7 wide the blocked kernel wins, 0.011 vs 0.002 + 0.003 ms).
The layout then flows forward through every op that works in it unchanged:

- elementwise unary ops;
- binary ops between two blocked values of the same shape (the residual add), or a blocked
  value and a constant that is a scalar or per channel (re-laid out at build time), or a
  blocked value and an NCHW value of the same shape (which is converted);
- max/avg pooling and global pooling (their windows are over H and W; the block rides along).

Any other reader of a blocked value gets a ``layout_transform`` back to NCHW, inserted once per
value; so do graph outputs. An NCHW value read by blocked convs is converted once.

Why: the NCHW conv keeps its output tile in registers as channel vectors and writes NCHW with
scalar stores; a fused bias / residual add then reads NCHW with scalar loads. Measured on this
machine (default schedules, one kernel each): 1x1 conv 64->256 at 56x56 with bias, residual add
and relu 0.414 ms NCHW vs 0.231 ms blocked; 3x3 512->512 at 7x7 0.716 vs 0.468 ms; 3x3 64->64
at 56x56 0.506 vs 0.485 ms.
"""

from __future__ import annotations

import numpy as np

from .. import op_registry as R
from ..ir import Graph, Node, Value
from .pack_conv_weights import pack_oihw
from .rewrite import Emitter, rebuild

BLOCK = 16
BLOCKED = f"NCHW{BLOCK}c"
WEIGHT_LAYOUT = f"OIHW{BLOCK}i{BLOCK}o"
# [OC/16, C, KH, KW, 16]: depthwise convs (C = 1) and convs from NCHW into NCHW16c
OC_BLOCKED_WEIGHT_LAYOUT = f"OIHW{BLOCK}o"
SUFFIX = f"_{BLOCKED}"
# a depthwise conv reading NCHW stays NCHW from this output width up (see the module doc)
NCHW_DEPTHWISE_MIN_WIDTH = 14


def pack_oihw_blocked(w: np.ndarray, ib: int, ob: int) -> np.ndarray:
    """OIHW -> [O/ob, I/ib, KH, KW, ib, ob] (``tl.ops.kernel_layout_transform``'s layout)."""
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(
        w.reshape(o // ob, ob, i // ib, ib, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def _blocked_conv(n: Node, ins: list[Value]) -> str | None:
    """How a conv node runs blocked: "conv" (NCHW16c in and out), "depthwise", "nchw_in" (NCHW
    in, NCHW16c out: input channels that are not a multiple of 16); None: stays NCHW."""
    if n.op != "conv" or {"weight_layout", "layout", "out_layout"} & n.attrs.keys():
        return None
    x, w, out = ins[0], ins[1], n.outputs[0]
    xs = R.unblocked_shape(x.shape, x.layout)
    if not w.is_constant or len(w.shape) != 4 or len(xs) != 4 or w.shape[0] % BLOCK:
        return None
    groups = n.attrs.get("groups", 1)
    if groups == 1:
        if x.layout != BLOCKED:
            return "nchw_in"
        return "conv" if w.shape[1] % BLOCK == 0 else None
    if groups == xs[1] == w.shape[0] and w.shape[1] == 1:
        if x.layout != BLOCKED and out.shape[3] >= NCHW_DEPTHWISE_MIN_WIDTH:
            return None
        return "depthwise"
    return None


def _library_pool(n: Node) -> bool:
    """A 2-D pooling the library's blocked pooling computes (the graph's generic pooling, for
    pads wider than the window or a dilated average, is NCHW only)."""
    k, pads = n.attrs["kernel"], n.attrs["pads"]
    dil = n.attrs.get("dilations", [1] * len(k))
    if len(k) != 2 or (n.op == "avg_pool" and dil != [1, 1]):
        return False
    return all(p <= (k[d % 2] - 1) * dil[d % 2] + 1 for d, p in enumerate(pads))


def _per_channel_constant(c: Value, nchan: int) -> np.ndarray | None:
    """A constant that broadcasts over an NCHW tensor along the channels only, re-laid out to
    broadcast over NCHW16c ([1, C/16, 1, 1, 16]); a scalar as it is. None otherwise."""
    if not c.is_constant or len(c.shape) > 4:
        return None
    if c.size == 1:
        return c.data.reshape(())
    shape = (1,) * (4 - len(c.shape)) + tuple(c.shape)
    if shape[0] != 1 or shape[1] != nchan or shape[2:] != (1, 1):
        return None
    return c.data.reshape(1, nchan // BLOCK, 1, 1, BLOCK)


def convert_layout(g: Graph) -> Graph:
    em = Emitter()
    to_plain: dict[int, Value] = {}  # blocked value id -> its NCHW copy
    to_blocked: dict[int, Value] = {}  # NCHW value id -> its blocked copy
    packed: dict[int, Value] = {}  # weight id -> packed weight (shared weights pack once)
    relaid: dict[int, Value | None] = {}  # constant id -> its NCHW16c copy

    def node(name: str, op: str, ins: list[Value], attrs: dict, layout: str,
             out_name: str) -> Value:
        (shape, dtype), = R.infer_types(op, [(v.shape, v.dtype) for v in ins], attrs, name)
        return em.emit(name, op, ins, attrs, [Value(out_name, shape, dtype, layout)])[0]

    def transform(v: Value, dst: str, cache: dict) -> Value:
        # a blocked value is named <name>_NCHW16c; back in NCHW it gets <name> again, so
        # graph outputs keep their names
        name = v.name.removesuffix(SUFFIX) if dst == "NCHW" else v.name + SUFFIX
        if id(v) not in cache:
            cache[id(v)] = node(f"{v.name}_to_{dst}", "layout_transform", [v],
                                {"src_layout": v.layout or "NCHW", "dst_layout": dst},
                                "" if dst == "NCHW" else dst, name)
        return cache[id(v)]

    def plain(v: Value) -> Value:
        return transform(v, "NCHW", to_plain) if v.layout == BLOCKED else v

    def blocked(v: Value) -> Value:
        return v if v.layout == BLOCKED else transform(v, BLOCKED, to_blocked)

    def constant(name: str, data: np.ndarray, like: Value) -> Value:
        return Value(name, data.shape, like.dtype, data=data)

    def channel_constant(v: Value, nchan: int) -> Value | None:
        """v re-laid out for NCHW16c (once per constant: names are unique in a graph)."""
        if id(v) not in relaid:
            data = _per_channel_constant(v, nchan)
            relaid[id(v)] = None if data is None else constant(v.name + SUFFIX, data, v)
        return relaid[id(v)]

    def visit(n: Node, ins: list[Value]):
        out = n.outputs[0] if len(n.outputs) == 1 else None
        kind = _blocked_conv(n, ins)
        if kind is not None:
            w = ins[1]
            wl = WEIGHT_LAYOUT if kind == "conv" else OC_BLOCKED_WEIGHT_LAYOUT
            if id(w) not in packed:
                data = (pack_oihw_blocked(w.data, BLOCK, BLOCK) if kind == "conv" else
                        pack_oihw(w.data, BLOCK))
                packed[id(w)] = constant(f"{w.name}_{wl}", data, w)
            if kind == "nchw_in":
                x, attrs = ins[0], dict(n.attrs, out_layout=BLOCKED, weight_layout=wl)
            else:
                x, attrs = blocked(ins[0]), dict(n.attrs, layout=BLOCKED, weight_layout=wl)
            return [node(n.name, "conv", [x, packed[id(w)], *ins[2:]], attrs, BLOCKED,
                         out.name + SUFFIX)]
        kinds = [v.layout == BLOCKED for v in ins]
        if not any(kinds) or out is None:
            return _unblock_all(n, ins)
        if n.op in R.UNARY_REFS and len(ins) == 1:
            return [node(n.name, n.op, ins, n.attrs, BLOCKED, out.name + SUFFIX)]
        if n.op in R.BINARY_REFS and len(ins) == 2:
            b = ins[kinds.index(True)]
            nchw = R.unblocked_shape(b.shape, b.layout)
            if tuple(out.shape) == nchw:
                pair = []
                for v in ins:
                    if v.layout == BLOCKED:
                        pair.append(v)
                    elif v.is_constant and channel_constant(v, nchw[1]) is not None:
                        pair.append(channel_constant(v, nchw[1]))
                    elif not v.is_constant and tuple(v.shape) == nchw:
                        pair.append(blocked(v))
                    else:
                        break
                else:
                    return [node(n.name, n.op, pair, n.attrs, BLOCKED, out.name + SUFFIX)]
        if n.op in ("global_avg_pool", "global_max_pool") or n.op in ("max_pool", "avg_pool") \
                and _library_pool(n):
            return [node(n.name, n.op, ins, dict(n.attrs, layout=BLOCKED), BLOCKED,
                         out.name + SUFFIX)]
        return _unblock_all(n, ins)

    def _unblock_all(n: Node, ins: list[Value]):
        if not any(v.layout == BLOCKED for v in ins):
            return None
        return em.emit(n.name, n.op, [plain(v) for v in ins], n.attrs, list(n.outputs))

    g2 = rebuild(g, visit, em)
    if not any(v.layout == BLOCKED for v in g2.outputs):
        return g2
    outputs = [plain(v) for v in g2.outputs]
    return Graph([*g2.nodes, *em.pending], g2.inputs, outputs, name=g2.name)
