"""Pass: a 3-D convolution runs as one 2-D convolution over its time taps.

``conv`` over three spatial axes ([N, C, T, H, W] by a weight [OC, C, KT, KH, KW]) had only the
generic N-D compute of the lowering, scheduled as a plain reduction: a video net (torchvision's
R3D-18 at 8 x 112 x 112) ran 37x onnxruntime's time. Each output frame t sums, over the kernel's
KT time taps, 2-D convs of the input frames t * st + kt * dt (after the time padding). Stacking
those KT frames along the channels makes it one 2-D conv: x' [N * OT, KT * C, H, W] (frame kt
of output t at channels kt * C ...), the weight [OC, KT * C, KH, KW] rearranged at build time,
the output [N * OT, OC, OH, OW] moved back to [N, OC, OT, OH, OW]. The graph ops are a pad of
the time axis, KT strided slices of it, a concat, transposes and reshapes; every later pass sees
a 2-D conv (blocked layouts, packed weights, the library's register-tiled schedules). The cost
is the KT-fold copy of the input's frames.

Only an ungrouped conv of static shape whose weight is a constant is rewritten (a symbolic
batch would make the frames' batch N * OT symbolic too; such a conv keeps the generic compute);
a conv that a layout pass already rewrote (it carries a layout) is left alone.
"""

from __future__ import annotations

import numpy as np

from .. import op_registry as R
from ..ir import Graph, Node, Value
from ..symbolic import is_static
from .rewrite import Emitter, rebuild


def conv3d_as_conv2d(g: Graph) -> Graph:
    em = Emitter()

    def visit(n: Node, ins: list[Value]):
        if n.op != "conv" or len(n.outputs[0].shape) != 5 or not ins[1].is_constant \
                or n.attrs.get("groups", 1) != 1 \
                or not is_static(ins[0].shape) or not is_static(n.outputs[0].shape) \
                or {"layout", "out_layout", "weight_layout"} & n.attrs.keys():
            return None
        out = n.outputs[0]
        st, sh, sw = n.attrs["strides"]
        dt, dh, dw = n.attrs["dilations"]
        t0, h0, w0, t1, h1, w1 = n.attrs["pads"]
        frames = _frames(em, n.name, ins[0], out.shape[2], ins[1].shape[2], st, dt, t0, t1)
        w = ins[1].data  # [OC, C, KT, KH, KW] -> [OC, KT * C, KH, KW], tap-major
        oc, c, kt, kh, kw = w.shape
        w2 = np.ascontiguousarray(w.transpose(0, 2, 1, 3, 4).reshape(oc, kt * c, kh, kw))
        weight = Value(f"{ins[1].name}_taps", w2.shape, ins[1].dtype, data=w2)
        attrs = dict(n.attrs, strides=[sh, sw], dilations=[dh, dw], pads=[h0, w0, h1, w1])
        nb, _, ot, oh, ow = out.shape
        y = Value(f"{out.name}_2d", (nb * ot, oc, oh, ow), out.dtype)
        y, = em.emit(n.name, "conv", [frames, weight, *ins[2:]], attrs, [y])
        y = _op(em, f"{n.name}_frames", "reshape", y, {"shape": [nb, ot, oc, oh, ow]})
        return [_op(em, f"{n.name}_to_3d", "transpose", y, {"perm": [0, 2, 1, 3, 4]},
                    out.name)]

    return rebuild(g, visit, em)


def _frames(em: Emitter, name: str, x: Value, ot: int, kt: int, st: int, dt: int, t0: int,
            t1: int) -> Value:
    """x [N, C, T, H, W] -> [N * OT, KT * C, H, W]: for output frame t, the input frames
    t * st + k * dt (k < KT, after padding time by t0 / t1), stacked tap-major."""
    if t0 or t1:
        x = _op(em, f"{name}_pad_time", "pad", x,
                {"pads": [0, 0, t0, 0, 0, 0, 0, t1, 0, 0], "mode": "constant", "value": 0.0})
    taps = [x if (k == 0 and st == 1 and x.shape[2] == ot) else
            _op(em, f"{name}_tap{k}", "slice", x,
                {"starts": [k * dt], "ends": [k * dt + (ot - 1) * st + 1], "axes": [2],
                 "steps": [st]})
            for k in range(kt)]
    stacked = taps[0] if kt == 1 else em.emit(
        f"{name}_taps", "concat", taps, {"axis": 1},
        [Value(f"{name}_taps", (x.shape[0], kt * x.shape[1], ot, *x.shape[3:]), x.dtype)])[0]
    moved = _op(em, f"{name}_frames_first", "transpose", stacked, {"perm": [0, 2, 1, 3, 4]})
    n, c = x.shape[:2]
    return _op(em, f"{name}_as_2d", "reshape", moved,
               {"shape": [n * ot, kt * c, *x.shape[3:]]})


def _op(em: Emitter, name: str, op: str, x: Value, attrs: dict, out_name: str | None = None):
    """One single-output op whose output shape the registry infers."""
    (shape, dtype), = R.infer_types(op, [(x.shape, x.dtype)], attrs, name)
    return em.emit(name, op, [x], attrs, [Value(out_name or f"{name}_out", shape, dtype)])[0]
