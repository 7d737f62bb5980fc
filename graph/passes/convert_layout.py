"""Pass: run conv chains in blocked activation layouts NCHW[x]c (TVM's AlterOpLayout +
ConvertLayout, onnxruntime's NCHWc transformer).

The block of a value is chosen from its channel count (``channel_block``): 16 (fp32, one zmm)
when 16 divides it, else 8 (one ymm) when 8 does (the 24- and 40-channel layers of
MobileNetV2-style networks), else the value stays NCHW. Values with the same channel count get
the same block, so the two sides of a residual add always agree. Measured, a MobileNetV2
inverted residual at 24 channels 56x56 (1x1 24->144, depthwise 144, 1x1 144->24, add): the
projecting conv took 0.20 ms in NCHW, the whole block 0.34 ms against onnxruntime's 0.23 ms,
before block 8 existed (see BENCHMARKS.md for the figures with it).

A 2-D conv with a constant weight, ``groups == 1``, blockable output channels (block ob) and
a blocked input (block ib) becomes the library's blocked conv (``tl.ops.conv2d_nchwc``): its
input is ``[N, C/ib, H, W, ib]``, its output ``[N, OC/ob, OH, OW, ob]`` and its weight is
packed at build time into ``[OC/ob, C/ib, KH, KW, ib, ob]`` (``OIHW<ib>i<ob>o``). With an
NCHW input (a graph input, the 3-channel first conv of a CNN, the output of an op that stays
NCHW) it reads NCHW and writes NCHW<ob>c (``tl.ops.conv2d_nchw(..., out_layout=...)``, weight
``[OC/ob, C, KH, KW, ob]``): its register tile broadcasts one input scalar per FMA either way,
so it runs as fast as the blocked conv and the input needs no conversion (measured: 1x1 32->64
at 112x112 0.113 ms vs 0.109 + 0.043 ms for the transform; 3x3 64->64 at 56x56 0.480 vs
0.484 + 0.021 ms). Not with many input channels: each input channel is a separate plane, so a tile
reads as many planes' rows as there are channels; from BLOCKED_INPUT_MIN_CHANNELS (256) the input
is converted and the blocked conv runs (Intel Xeon, 1 thread, ms NCHW in vs transform + blocked:
wav2vec2's feature-extractor conv 512->512, kernel 3 stride 2 over 3199 samples 22.66 vs 17.27,
over 1599 12.18 vs 8.29; 3x3 stride 2 256->256 at 28x28 1.37 vs 1.22 and 512->512 at 14x14 1.45 vs
1.22; but 1x1 128->128 at 56x56 0.76 vs 0.80). A depthwise conv (groups = channels, blockable) with
a blocked input becomes ``tl.ops.depthwise_conv2d_nchwc`` with its weight packed into
``[C/b, 1, KH, KW, b]`` (``OIHW<b>o``). With an NCHW input it stays NCHW when its output is at
least 14 wide: the NCHW schedule vectorizes along W, and converting the input costs more than the
blocked kernel saves (32 channels at 112x112: 0.036 ms NCHW vs 0.024 + 0.052 ms; 64 channels 112 ->
56 stride 2: 0.075 vs 0.023 + 0.088 ms; at 7 wide the blocked kernel wins, 0.011 vs 0.002 + 0.003
ms).
A grouped conv (1 < groups < channels) whose output channels per group the output block
divides (AlexNet's groups=2 layers, RegNet, ResNeXt's wider variants) reads NCHW and writes
NCHW<ob>c (``tl.ops.conv2d_nchw(..., groups, out_layout=...)``: the oc-blocked register tile
with each block's input channels offset to its group), its weight packed ``OIHW<ob>o``; a
blocked input is converted to NCHW first (the tile broadcasts one input scalar per FMA row,
so an NCHW input costs it nothing). Other grouped convs stay NCHW, and so does a grouped 1x1
conv (stride 1, unpadded) whatever its groups' output channels: ``tl.ops.conv2d_nchw`` runs it
as a matmul per group over the plane's flattened pixels (its pixels path, NCHW in and out, 80-94%
of the FMA peak), where the blocked kernel tiles boxes of rows. Measured on ShuffleNet v1
(``model_zoo.shufflenet_v1``, 224x224, groups 3, one thread, load 6-8): 16.6 ms with these convs
blocked, 13.8 ms on the pixels path; with the adds below run NCHW too, 19.7 -> 13.3 ms (groups
8: 8.1 -> 6.4 ms; groups 3 on two threads: 10.7 -> 7.5 ms).
The layout then flows forward through every op that works in it unchanged:

- elementwise unary ops;
- binary ops (and n-ary sum/mean/max/min: the model-zoo ResNets' residual Sum) between
  blocked values of the same shape (the residual add), or a blocked
  value and a constant that is a scalar or per channel (re-laid out at build time), or a
  blocked value and an NCHW value of the same shape (which is converted), unless an NCHW conv
  computes that NCHW value for the binary op alone and no blocked conv computes the other:
  the op then runs NCHW, in the conv's kernel (ShuffleNet v1's residual adds after its grouped
  1x1 convs: without this, each add read the conv's NCHW output back, wrote NCHW<b>c, and the
  next unit's conv had it converted to NCHW again);
- max/avg pooling and global pooling (their windows are over H and W; the block rides along).
- quantize / dequantize / requantize by constant scales and zero points, per tensor or per
  channel (re-laid out like a binary op's constant; issue 22).

A quantized conv (``qlinear_conv2d``, issue 22) reads NCHW16c when its input channels are a
multiple of 16 and writes NCHW16c when its output channels are (``qconv``).
- an inference batch norm with constant statistics (DenseNet's and pre-activation ResNets'
  batch norms after a concat or an add, which fold_scale_into_conv cannot fold into a conv),
  as x * s + t with per-channel constants re-laid out for the block;
- concat of 4-D values on any axis, in the block most of its inputs arrive in among those that
  divide every input's channel count when it is on the channel axis (the other inputs are
  converted, which fusion puts in the concat's kernel). Without it the fire modules of
  SqueezeNet and every dense block of DenseNet converted both sides back to NCHW for the
  concat and the result to NCHW16c again for the next conv: three copies instead of one.

Any other reader of a blocked value gets a ``layout_transform`` back to NCHW, inserted once per
value; so do graph outputs. An NCHW value read by blocked ops is converted once.

Why: the NCHW conv keeps its output tile in registers as channel vectors and writes NCHW with
scalar stores; a fused bias / residual add then reads NCHW with scalar loads. Measured on this
machine (default schedules, one kernel each): 1x1 conv 64->256 at 56x56 with bias, residual add
and relu 0.414 ms NCHW vs 0.231 ms blocked; 3x3 512->512 at 7x7 0.716 vs 0.468 ms; 3x3 64->64
at 56x56 0.506 vs 0.485 ms.

The block from tuning records (TVM's AlterOpLayout reads the tuned config's channel tiles):
``blocks`` gives a conv a preferred block, used for its input and output values wherever it
divides their channel count (``value_block``). ``graph.extract_tasks(g, blocks=(16, 8))`` tunes
every conv kernel under each block, and ``graph.build(tuning_log=...)`` gives each conv the
block of its fastest record (:func:`tensorlang.graph.tuning.choose_blocks`). A conv whose input
arrives in another block gets a ``layout_transform`` between blocks (NCHW16c -> NCHW8c), as in
TVM; a binary op of two blocked values in different blocks runs in the block of the operand a
conv computes for it alone (the one fusion puts it in the kernel of), the other is converted.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tensorlang.ops.winograd import winograd_eligible, winograd_pays, winograd_weight

from .. import op_registry as R
from ..ir import Graph, Node, Value
from ..kernel_cost import flops_per_byte
from ..symbolic import is_symbolic
from .pack_conv_weights import pack_oihw
from .rewrite import Emitter, rebuild

BLOCKS = (16, 8)  # preferred first: 16 fp32 lanes fill a zmm
# a depthwise conv reading NCHW stays NCHW from this output width up (see the module doc)
NCHW_DEPTHWISE_MIN_WIDTH = 14
# a conv of this many input channels or more has an NCHW input converted to its block and runs
# the blocked conv (see the module doc)
BLOCKED_INPUT_MIN_CHANNELS = 256


# elementwise over any number of same-shape inputs (ONNX Sum / Mean / Max / Min): the
# model-zoo ResNets add their residual with a two-input Sum, which must stay blocked like add
NARY_OPS = ("sum_n", "mean_n", "max_n", "min_n")
# ReduceMean / ReduceMax over axes [2, 3] with kept dims is a global pool (the dynamo exports
# of squeeze-excite blocks write it so): it runs blocked as the pool, where as a reduction the
# blocked value was converted to NCHW for it (EfficientNet-B0: 16 reductions 1.9 ms plus 0.5 ms
# of conversions against 0.14 ms for the same pools in its TorchScript export)
SPATIAL_MEAN_MAX = {"reduce_mean": "global_avg_pool", "reduce_max": "global_max_pool"}


def channel_block(channels: int) -> int | None:
    """The block of a value with this many channels (None: it stays NCHW)."""
    return next((b for b in BLOCKS if channels % b == 0), None)


def value_block(channels: int, preferred: int | None = None) -> int | None:
    """The block of a value with this many channels for a conv that prefers ``preferred``."""
    if preferred is not None and channels % preferred == 0:
        return preferred
    return channel_block(channels)


def blocked_layout(block: int) -> str:
    return f"NCHW{block}c"


def pack_oihw_blocked(w: np.ndarray, ib: int, ob: int) -> np.ndarray:
    """OIHW -> [O/ob, I/ib, KH, KW, ib, ob] (``tl.ops.kernel_layout_transform``'s layout)."""
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(
        w.reshape(o // ob, ob, i // ib, ib, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def _block_of(v: Value) -> int | None:
    return R.channel_block(v.layout)


def _channels(v: Value) -> int:
    """The channel count of an NCHW or NCHW[x]c value."""
    return R.unblocked_shape(v.shape, v.layout)[1]


def _blocked_conv(n: Node, ins: list[Value], preferred: int | None = None
                  ) -> tuple[str, int] | None:
    """How a conv node runs blocked: ("conv", ob) (NCHW[ib]c in, NCHW[ob]c out), ("depthwise",
    b), ("nchw_in", ob) (NCHW in, NCHW[ob]c out), ("grouped", ob) (a grouped conv whose
    groups' output channels ob divides: NCHW in, converted when it arrives blocked, NCHW[ob]c
    out); None: it stays NCHW."""
    if n.op != "conv" or {"weight_layout", "layout", "out_layout"} & n.attrs.keys():
        return None
    x, w, out = ins[0], ins[1], n.outputs[0]
    xs = R.unblocked_shape(x.shape, x.layout)
    if not w.is_constant or len(w.shape) != 4 or len(xs) != 4:
        return None
    ob = value_block(w.shape[0], preferred)
    if ob is None:
        return None
    groups = n.attrs.get("groups", 1)
    if groups == 1:
        reads_nchw = not _block_of(x) and (xs[1] < BLOCKED_INPUT_MIN_CHANNELS
                                           or channel_block(xs[1]) is None)
        return ("nchw_in" if reads_nchw else "conv"), ob
    if groups == xs[1] == w.shape[0] and w.shape[1] == 1:
        # (a row of symbolic width: blocked, whose tiles take any width and stride; the NCHW
        # schedule's strided rows are gathers)
        if not _block_of(x) and not is_symbolic(out.shape[3]) and \
                out.shape[3] >= NCHW_DEPTHWISE_MIN_WIDTH:
            return None
        return "depthwise", ob
    if w.shape[1] > 1 and (w.shape[0] // groups) % ob == 0 and not _pixels_conv(n, w):
        return "grouped", ob
    return None


def _winograd(n: Node, w: Value, x: Value, out: Value) -> bool:
    """A blocked 3x3 stride-1 fp32 conv that runs as Winograd F(4x4, 3x3)
    (``tl.ops.conv2d_winograd_nchwc``: a quarter of the direct conv's multiplications, which
    run at the FMA peak) where ``winograd_eligible`` says it can, and ``winograd_pays`` that its
    products are not bound by reading their weights on this machine."""
    xs = R.unblocked_shape(x.shape, x.layout)
    if w.dtype != "float32" or x.dtype != "float32" or len(xs) != 4 or len(w.shape) != 4 \
            or R.symbolic_spatial(xs):
        return False  # (its tiles of 4 x 4 outputs are sized to a fixed plane)
    a = n.attrs
    return (winograd_eligible(xs[1], w.shape[0], w.shape[2:], a.get("strides", [1, 1]),
                              a.get("dilations", [1, 1]), a.get("groups", 1), out.shape[2:4])
            and winograd_pays(out.shape[2:4], flops_per_byte()))


def _pixels_conv(n: Node, w: Value) -> bool:
    """A 1x1, stride-1, unpadded conv: conv2d_nchw runs it grouped as a matmul per group over
    the plane's flattened pixels (its pixels path, NCHW in and out), faster than the blocked
    grouped conv (see the module doc)."""
    return tuple(w.shape[2:]) == (1, 1) and list(n.attrs.get("strides", [1, 1])) == [1, 1] \
        and not any(n.attrs.get("pads", [0] * 4))


def _library_pool(n: Node) -> bool:
    """A 2-D pooling the library's blocked pooling computes (the graph's generic pooling, for
    pads wider than the window or a dilated average, is NCHW only)."""
    k, pads = n.attrs["kernel"], n.attrs["pads"]
    dil = n.attrs.get("dilations", [1] * len(k))
    if len(k) != 2 or (n.op == "avg_pool" and dil != [1, 1]):
        return False
    return all(p <= (k[d % 2] - 1) * dil[d % 2] + 1 for d, p in enumerate(pads))


def _full_channels(shape: tuple, nchw: tuple) -> bool:
    """``shape`` broadcasts to ``nchw`` along N, H and W only (all its channels)."""
    return len(shape) == 4 and shape[1] == nchw[1] and all(
        s in (1, t) for i, (s, t) in enumerate(zip(shape, nchw)) if i != 1)


def _spatial_reduce(n: Node, x: Value) -> bool:
    """A mean / max over H and W of a blocked 4-D value, dimensions kept: a global pool."""
    if len(R.unblocked_shape(x.shape, x.layout)) != 4 or not n.attrs.get("keepdims", 1):
        return False
    return sorted({a % 4 for a in n.attrs.get("axes") or ()}) == [2, 3]


def _per_channel_constant(c: Value, nchan: int, block: int) -> np.ndarray | None:
    """A constant that broadcasts over an NCHW tensor along the channels only, re-laid out to
    broadcast over NCHW[block]c ([1, C/block, 1, 1, block]); a scalar as it is. None otherwise."""
    if not c.is_constant or len(c.shape) > 4:
        return None
    if c.size == 1:
        return c.data.reshape(())
    shape = (1,) * (4 - len(c.shape)) + tuple(c.shape)
    if shape[0] != 1 or shape[1] != nchan or shape[2:] != (1, 1):
        return None
    return c.data.reshape(1, nchan // block, 1, 1, block)


def convert_layout(g: Graph, blocks: int | Mapping[str, int] | None = None) -> Graph:
    """``blocks``: the block every conv prefers (an int) or each named conv prefers (conv node
    name -> block); None: blocks by channel count alone."""
    if not (blocks is None or isinstance(blocks, (int, Mapping))):
        raise TypeError(f"convert_layout: blocks must be an int, a mapping of conv names to "
                        f"blocks or None, got {type(blocks).__name__}")
    for b in [blocks] if isinstance(blocks, int) else (blocks or {}).values():
        if b not in BLOCKS:
            raise ValueError(f"convert_layout: block {b!r} is not one of {BLOCKS}")
    c = _LayoutConverter(g, blocks)
    g2 = rebuild(g, c.visit, c.em)
    if not any(_block_of(v) for v in g2.outputs):
        return g2
    outputs = [c.plain(v) for v in g2.outputs]
    return Graph([*g2.nodes, *c.em.pending], g2.inputs, outputs, name=g2.name)


class _LayoutConverter:
    """One run of the pass: ``visit`` (for :func:`.rewrite.rebuild`) re-emits each node in a
    blocked layout where it can, and converts values between layouts once each."""

    def __init__(self, g: Graph, blocks: int | Mapping[str, int] | None) -> None:
        self.blocks = blocks
        self.em = Emitter()
        self.converted: dict[tuple, Value] = {}  # (value id, layout) -> the value in it
        self.packed: dict[tuple, Value] = {}  # (weight id, layout) -> packed weight (once)
        self.relaid: dict[tuple, Value | None] = {}  # (constant id, block) -> blocked copy
        self.uses: dict[int, int] = {}  # old value id -> node inputs and graph outputs reading it
        for v in [u for n in g.nodes for u in n.inputs] + list(g.outputs):
            self.uses[id(v)] = self.uses.get(id(v), 0) + 1
        # new values a conv (+ unary ops) computes for one reader
        self.computed_for_one: set[int] = set()

    def preferred(self, n: Node) -> int | None:
        if self.blocks is None or isinstance(self.blocks, int):
            return self.blocks
        return self.blocks.get(n.name)

    def node(self, name: str, op: str, ins: list[Value], attrs: dict, layout: str,
             out_name: str) -> Value:
        (shape, dtype), = R.infer_types(op, [(v.shape, v.dtype) for v in ins], attrs, name)
        return self.em.emit(name, op, ins, attrs, [Value(out_name, shape, dtype, layout)])[0]

    def transform(self, v: Value, dst: str) -> Value:
        # a blocked value is named <name>_NCHW<x>c; back in NCHW it gets <name> again, so
        # graph outputs keep their names
        base = v.name.removesuffix(f"_{v.layout}") if _block_of(v) else v.name
        name = base if dst == "NCHW" else f"{base}_{dst}"
        if (id(v), dst) not in self.converted:
            self.converted[id(v), dst] = self.node(
                f"{v.name}_to_{dst}", "layout_transform", [v],
                {"src_layout": v.layout or "NCHW", "dst_layout": dst},
                "" if dst == "NCHW" else dst, name)
        return self.converted[id(v), dst]

    @staticmethod
    def named(out: Value, layout: str) -> str:
        """The name of ``out`` computed in ``layout``: <name>_NCHW<x>c (kept on a rerun)."""
        return out.name if out.layout == layout else f"{out.name}_{layout}"

    def plain(self, v: Value) -> Value:
        return self.transform(v, "NCHW") if _block_of(v) else v

    def blocked(self, v: Value, block: int) -> Value:
        """v in NCHW[block]c (converted from NCHW or another block when it is not)."""
        return v if _block_of(v) == block else self.transform(v, blocked_layout(block))

    def channel_constant(self, v: Value, nchan: int, block: int) -> Value | None:
        """v re-laid out for NCHW[block]c (once per constant: names are unique in a graph)."""
        key = (id(v), block)
        if tuple(v.shape) == (1, nchan // block, 1, 1, block):  # re-laid out by an earlier run
            return v
        if key not in self.relaid:
            data = _per_channel_constant(v, nchan, block)
            self.relaid[key] = (None if data is None else
                                _constant(f"{v.name}_{blocked_layout(block)}", data, v))
        return self.relaid[key]

    def packed_weight(self, w: Value, kind: str, ib: int | None, ob: int) -> tuple[Value, str]:
        wl = f"OIHW{ib}i{ob}o" if kind == "conv" else f"OIHW{ob}o"
        if (id(w), wl) not in self.packed:
            data = pack_oihw_blocked(w.data, ib, ob) if kind == "conv" else pack_oihw(w.data, ob)
            self.packed[id(w), wl] = _constant(f"{w.name}_{wl}", data, w)
        return self.packed[id(w), wl], wl

    def winograd_weight(self, w: Value, ib: int, ob: int) -> tuple[Value, str]:
        wl = f"{R.WINOGRAD_LAYOUT_PREFIX}OIHW{ib}i{ob}o"
        if (id(w), wl) not in self.packed:
            data = winograd_weight(w.data, ib, ob)
            self.packed[id(w), wl] = _constant(f"{w.name}_winograd{ib}i{ob}o", data, w)
        return self.packed[id(w), wl], wl

    def visit(self, n: Node, ins: list[Value]):
        if n.op == "layout_transform" or n.op == "conv" and \
                {"layout", "out_layout"} & n.attrs.keys():
            return None  # placed by an earlier run (the pass is idempotent)
        out = n.outputs[0] if len(n.outputs) == 1 else None
        if n.op == "qlinear_conv2d" and not {"layout", "out_layout"} & n.attrs.keys():
            return self.qconv(n, ins, out)
        how = _blocked_conv(n, ins, self.preferred(n))
        if how is not None:
            return [self.conv(n, ins, out, *how)]
        if n.op == "conv" and out is not None:
            return [self.nchw_conv(n, ins, out)]
        blocks = [_block_of(v) for v in ins]
        block = next((b for b in blocks if b), None)
        if block is None or out is None:
            return self.unblock_all(n, ins)
        if n.op in R.UNARY_REFS and len(ins) == 1:
            layout = blocked_layout(block)
            y = self.node(n.name, n.op, ins, n.attrs, layout, self.named(out, layout))
            if id(ins[0]) in self.computed_for_one and self.uses.get(id(out)) == 1:
                self.computed_for_one.add(id(y))
            return [y]
        if n.op in R.BINARY_REFS and len(ins) == 2 or n.op in NARY_OPS:
            y = self.binary(n, ins, out, blocks, block)
            if y is not None:
                return [y]
        if n.op in R.QUANT_OPS:
            y = self.quant(n, ins, out, block)
            if y is not None:
                return [y]
        if n.op == "concat":
            y = self.concat(n, ins, out, blocks)
            if y is not None:
                return [y]
        if n.op == "batch_norm" and all(v.is_constant for v in ins[1:]):
            return [self.batch_norm(n, ins, out, block)]
        layout = blocked_layout(block)
        if n.op in SPATIAL_MEAN_MAX and len(ins) == 1 and _spatial_reduce(n, ins[0]):
            return [self.node(n.name, SPATIAL_MEAN_MAX[n.op], ins, {"layout": layout}, layout,
                              self.named(out, layout))]
        if n.op in ("global_avg_pool", "global_max_pool") \
                or n.op in ("max_pool", "avg_pool") and _library_pool(n):
            return [self.node(n.name, n.op, ins, dict(n.attrs, layout=layout), layout,
                              self.named(out, layout))]
        return self.unblock_all(n, ins)

    def conv(self, n: Node, ins: list[Value], out: Value, kind: str, ob: int) -> Value:
        """The conv node re-emitted blocked (_blocked_conv said how)."""
        layout = blocked_layout(ob)
        if kind in ("nchw_in", "grouped"):
            x = self.plain(ins[0])
            w, wl = self.packed_weight(ins[1], kind, None, ob)
            attrs = dict(n.attrs, out_layout=layout, weight_layout=wl)
        else:
            # a depthwise conv's input: the block of its channels (= its output's)
            ib = ob if kind == "depthwise" else value_block(_channels(ins[0]),
                                                            self.preferred(n))
            x = self.blocked(ins[0], ib)
            if kind == "conv" and ib == ob == 16 and _winograd(n, ins[1], x, out):
                w, wl = self.winograd_weight(ins[1], ib, ob)
            else:
                w, wl = self.packed_weight(ins[1], kind, ib, ob)
            attrs = dict(n.attrs, layout=x.layout, weight_layout=wl)
        y = self.node(n.name, "conv", [x, w, *ins[2:]], attrs, layout, self.named(out, layout))
        if self.uses.get(id(out)) == 1:
            self.computed_for_one.add(id(y))
        return y

    def nchw_conv(self, n: Node, ins: list[Value], out: Value) -> Value:
        """A conv that stays NCHW (its input converted to NCHW where it arrives blocked),
        remembered when it computes its output for one reader."""
        y, = self.em.emit(n.name, n.op, [self.plain(v) for v in ins], n.attrs, [out])
        if self.uses.get(id(out)) == 1:
            self.computed_for_one.add(id(y))
        return y

    def binary(self, n: Node, ins: list[Value], out: Value, blocks: list, block: int
               ) -> Value | None:
        """A binary op run blocked, or None when an operand cannot be (module doc)."""
        nchw = R.unblocked_shape(out.shape, out.layout)
        whole = [b if R.unblocked_shape(v.shape, v.layout) == nchw else None
                 for b, v in zip(blocks, ins)]
        if not any(whole):
            return None  # no blocked operand has the result's shape
        # two blocks: the one of the operand fusion will put this op in the kernel of
        fused = next((b for b, v in zip(whole, ins) if b and id(v) in self.computed_for_one),
                     None)
        if fused is None and any(id(v) in self.computed_for_one for v in ins
                                 if R.unblocked_shape(v.shape, v.layout) == nchw):
            return None  # an NCHW conv computes an operand: run NCHW, in that conv's kernel
        block = fused or next(b for b in whole if b)
        layout = blocked_layout(block)
        pair = []
        for v in ins:
            fits = _full_channels(R.unblocked_shape(v.shape, v.layout), nchw)
            if v.layout == layout and fits:
                pair.append(v)
            elif v.is_constant and self.channel_constant(v, nchw[1], block) is not None:
                pair.append(self.channel_constant(v, nchw[1], block))
            elif not v.is_constant and fits:
                # a run-time value broadcast over N, H or W (squeeze-excite's [1, C, 1, 1]
                # gate) is blocked too: NCHW[b]c broadcasts it as NCHW does
                pair.append(self.blocked(v, block))
            else:
                return None
        return self.node(n.name, n.op, pair, n.attrs, layout, self.named(out, layout))

    def qconv(self, n: Node, ins: list[Value], out: Value) -> list[Value] | None:
        """A quantized conv (issue 22) reads NCHW16c when its input channels are a multiple of
        16 and writes NCHW16c when its outputs are: the uint8 values between quantized convs
        stay blocked (an NCHW side costs the kernel a transposing pass over the tensor)."""
        blocked_in = _channels(ins[0]) % 16 == 0
        blocked_out = n.attrs["oc"] % 16 == 0
        if not (blocked_in or blocked_out):
            return self.unblock_all(n, ins)
        x = self.blocked(ins[0], 16) if blocked_in else self.plain(ins[0])
        attrs = dict(n.attrs)
        if blocked_in:
            attrs["layout"] = blocked_layout(16)
        layout = blocked_layout(16) if blocked_out else ""
        if blocked_out:
            attrs["out_layout"] = layout
        return [self.node(n.name, n.op, [x, *ins[1:]], attrs, layout, self.named(out, layout))]

    def quant(self, n: Node, ins: list[Value], out: Value, block: int) -> Value | None:
        """A (de/re)quantization of a blocked value by constants per tensor or per channel,
        run blocked (issue 22: fold_qdq's requantize then fuses into its conv's kernel), or
        None."""
        x = ins[0]
        if _block_of(x) != block:
            return None
        params = [self.channel_constant(v, _channels(x), block) for v in ins[1:]]
        if any(p is None for p in params):
            return None
        layout = blocked_layout(block)
        return self.node(n.name, n.op, [x, *params], n.attrs, layout, self.named(out, layout))

    def concat(self, n: Node, ins: list[Value], out: Value, blocks: list) -> Value | None:
        """A concat of 4-D values run blocked, or None when no block divides every input's
        channels. NCHW[b]c keeps N, H and W as axes 0, 2, 3 and the channel blocks as
        axis 1, so the concat axis is the same; on the channel axis each input's channel
        count must be a multiple of b (its blocks then follow each other)."""
        if len(out.shape) != 4 or any(v.is_constant for v in ins):
            return None
        on_channels = n.attrs["axis"] % 4 == 1
        fits = [b for b in BLOCKS if not on_channels or all(_channels(v) % b == 0 for v in ins)]
        if not fits:
            return None
        # the block most inputs arrive in (the others are converted: fused into the concat)
        block = max(fits, key=lambda b: sum(x == b for x in blocks))
        layout = blocked_layout(block)
        return self.node(n.name, "concat", [self.blocked(v, block) for v in ins], n.attrs,
                         layout, self.named(out, layout))

    def batch_norm(self, n: Node, ins: list[Value], out: Value, block: int) -> Value:
        """An inference batch norm of a blocked value (its statistics constants) as x * s + t
        with s = gamma / sqrt(var + eps) and t = beta - mean * s per channel, re-laid out for
        the block: two elementwise ops that stay blocked and fuse with their neighbours."""
        x = ins[0]
        gamma, beta, mean, var = (v.data.astype(np.float64) for v in ins[1:])
        scale = gamma / np.sqrt(var + n.attrs["epsilon"])
        shift = beta - mean * scale
        layout = blocked_layout(block)
        nchan = _channels(x)
        consts = [_constant(f"{n.name}_{what}_{layout}",
                            data.astype(out.dtype).reshape(1, nchan // block, 1, 1, block), x)
                  for what, data in (("scale", scale), ("shift", shift))]
        scaled = self.node(f"{n.name}_scale", "multiply", [x, consts[0]], {}, layout,
                           f"{out.name}_scaled_{layout}")
        return self.node(n.name, "add", [scaled, consts[1]], {}, layout, self.named(out, layout))

    def unblock_all(self, n: Node, ins: list[Value]):
        if not any(_block_of(v) for v in ins):
            return None
        return self.em.emit(n.name, n.op, [self.plain(v) for v in ins], n.attrs,
                            list(n.outputs))


def _constant(name: str, data: np.ndarray, like: Value) -> Value:
    return Value(name, data.shape, like.dtype, data=data)
