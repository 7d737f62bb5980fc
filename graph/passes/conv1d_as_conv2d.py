"""Pass: a 1-D convolution runs as the 2-D one with a height of 1.

``conv`` over one spatial axis ([N, C, L] by a weight [OC, C/g, K]) had only the generic
N-D compute of the lowering, scheduled as a plain reduction: speech models are chains of them
(silero-vad: an STFT as a conv of 258 filters of 256 taps at stride 128, then 128- and
64-channel encoder convs of 3 taps) and ran at about 3 GFLOP/s on one core, 2.4-3.5x
onnxruntime's time. As ``reshape(x, [N, C, 1, L])`` convolved with the weight reshaped to
[OC, C/g, 1, K] at build time (strides [1, s], dilations [1, d], pads [0, lo, 0, hi]) and
reshaped back, a 1-D conv is a 2-D one to every later pass: convert_layout blocks it and its
neighbours, pack_conv_weights packs its weight, and it gets the library's register-tiled
schedules. ``sink_reshape``, which runs next, moves the reshape back to 3-D below the
elementwise ops that follow (bias, activation) and collapses it into the next conv's reshape
to 4-D, so a chain of 1-D convs stays 4-D between them. silero-vad (op18, if-less), one
thread, kernels of a run: 360 -> 42 us (the first encoder conv 127 -> 2.4 us, the STFT conv
181 -> 26 us); a whole run 395 -> 139 us of CPU time (onnxruntime: 107 us).

Only a conv whose weight is a constant is rewritten (the weight's reshape is then free at
build time); a conv that a layout pass already rewrote (it carries a layout) is left alone.
A length of symbolic size is rewritten too: the 2-D kernels take a plane of symbolic width
(wav2vec2 / HuBERT's feature extractor over the audio length).

A 2-D conv over a plane one column wide ([N, C, H, 1] by a kernel [OC, C/g, KH, 1], no
padding of the width: tf2onnx's Conv1D, which convolves [N, L, 1] after an expand_dims) is the
same 1-D conv along the height, and runs as one along the width: ``reshape(x, [N, C, 1, H])``
(the same memory), the weight [OC, C/g, 1, KH], strides / dilations / pads of the height moved
to the width. The register-tiled schedules tile output columns: over a plane one column wide
their tile was one column (1 x 2 vectors of output channels, an input broadcast per 2 FMAs).
magika's 256 -> 512 channel conv of 5 taps over 512 bytes, one thread: 11.8 -> 4.1 ms
(onnxruntime 3.8 ms), its layout transforms to and from NCHW16c 152 + 369 -> 29 + 85 us.
"""

from __future__ import annotations

from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild


def conv1d_as_conv2d(g: Graph) -> Graph:
    em = Emitter()
    made: dict[int, Value] = {}  # a value (or weight) read by several convs: one 4-D copy

    def as_2d(v: Value) -> Value:
        if id(v) not in made:
            shape = (*v.shape[:2], 1, v.shape[2])  # [N, C, L] or [N, C, H, 1] -> [N, C, 1, L]
            made[id(v)] = (Value(f"{v.name}_as_2d", shape, v.dtype, data=v.data.reshape(shape))
                           if v.is_constant else
                           _reshape(em, f"{v.name}_to_2d", v, shape, f"{v.name}_as_2d"))
        return made[id(v)]

    def visit(n: Node, ins: list[Value]):
        if n.op != "conv" or not ins[1].is_constant \
                or {"layout", "out_layout", "weight_layout"} & n.attrs.keys():
            return None
        if len(n.outputs[0].shape) == 4 and _one_column(ins[0], ins[1], n.attrs):
            return column_as_row(n, ins)
        if len(n.outputs[0].shape) != 3:
            return None
        out = n.outputs[0]
        lo, hi = n.attrs["pads"]
        attrs = dict(n.attrs, strides=[1, *n.attrs["strides"]],
                     dilations=[1, *n.attrs["dilations"]], pads=[0, lo, 0, hi])
        y = Value(f"{out.name}_2d", (*out.shape[:2], 1, out.shape[2]), out.dtype)
        y, = em.emit(n.name, "conv", [as_2d(ins[0]), as_2d(ins[1]), *ins[2:]], attrs, [y])
        y3 = _reshape(em, f"{n.name}_to_1d", y, out.shape, out.name)
        made[id(y3)] = y  # a conv reading this one reads the 4-D value
        return [y3]

    def column_as_row(n: Node, ins: list[Value]):
        out = n.outputs[0]
        top, _, bottom, _ = n.attrs["pads"]
        attrs = dict(n.attrs, strides=[1, n.attrs["strides"][0]],
                     dilations=[1, n.attrs["dilations"][0]], pads=[0, top, 0, bottom])
        y = Value(f"{out.name}_2d", (*out.shape[:2], 1, out.shape[2]), out.dtype)
        y, = em.emit(n.name, "conv", [as_2d(ins[0]), as_2d(ins[1]), *ins[2:]], attrs, [y])
        y4 = _reshape(em, f"{n.name}_to_column", y, out.shape, out.name)
        made[id(y4)] = y  # a conv reading this one reads the row
        return [y4]

    return rebuild(g, visit, em)


def _one_column(x: Value, w: Value, attrs: dict) -> bool:
    """A conv over [N, C, H, 1] (H not 1) whose kernel is one column wide, the width unpadded:
    its output is [N, OC, OH, 1]."""
    pads = attrs.get("pads", [0, 0, 0, 0])
    return (len(x.shape) == 4 and x.shape[3] == 1 and x.shape[2] != 1 and w.shape[3] == 1
            and len(pads) == 4 and pads[1] == 0 and pads[3] == 0)


def _reshape(em: Emitter, name: str, x: Value, shape: tuple, out_name: str) -> Value:
    return em.emit(name, "reshape", [x], {"shape": list(shape)},
                   [Value(out_name, tuple(shape), x.dtype)])[0]
