"""Concat in blocked layouts (issue 18): convert_layout keeps a concat of NCHW[b]c values, and a
batch norm of one, blocked (SqueezeNet's fire modules, DenseNet's dense blocks) instead of
converting every input back to NCHW and the result to NCHW[b]c again; graph.build against
onnxruntime, and which concats run blocked."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_testing import assert_close, ort_run
from tensorlang.graph.passes import convert_layout, infer_types

from tensorlang import graph

RNG = np.random.default_rng(11)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


class _Net:
    """A small ONNX graph written node by node (convs with random weights, relus, concats)."""

    def __init__(self, c, hw):
        self.nodes, self.inits, self.shapes = [], [], {"x": (1, c, hw, hw)}

    def conv(self, x, oc, k=1, stride=1):
        i = len(self.nodes)
        n, c, h, w = self.shapes[x]
        pad = k // 2
        self.inits += [numpy_helper.from_array(_rand(oc, c, k, k) * 0.3, f"w{i}"),
                       numpy_helper.from_array(_rand(oc), f"b{i}")]
        self.nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"],
                                           kernel_shape=[k, k], strides=[stride] * 2,
                                           pads=[pad] * 4))
        self.nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        oh, ow = ((s + 2 * pad - k) // stride + 1 for s in (h, w))
        self.shapes[f"r{i}"] = (n, oc, oh, ow)
        return f"r{i}"

    def concat(self, xs, axis=1):
        name = f"cat{len(self.nodes)}"
        self.nodes.append(helper.make_node("Concat", xs, [name], axis=axis))
        shape = list(self.shapes[xs[0]])
        shape[axis] = sum(self.shapes[x][axis] for x in xs)
        self.shapes[name] = tuple(shape)
        return name

    def bn_relu(self, x):
        """BatchNormalization (random statistics) then Relu: DenseNet's pre-activation."""
        i, c = len(self.nodes), self.shapes[x][1]
        stats = [_rand(c), _rand(c), _rand(c), np.abs(_rand(c)) + 0.5]
        self.inits += [numpy_helper.from_array(a, f"bn{i}_{k}") for k, a in enumerate(stats)]
        self.nodes.append(helper.make_node("BatchNormalization",
                                           [x, *(f"bn{i}_{k}" for k in range(4))],
                                           [f"bn{i}"], epsilon=1e-3))
        self.nodes.append(helper.make_node("Relu", [f"bn{i}"], [f"br{i}"]))
        self.shapes[f"bn{i}"] = self.shapes[f"br{i}"] = self.shapes[x]
        return f"br{i}"

    def model(self, out):
        g = helper.make_graph(
            self.nodes, "concat",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, self.shapes["x"])],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, self.shapes[out])],
            initializer=self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _fire():
    """SqueezeNet's fire module twice: squeeze 1x1, expand 1x1 and 3x3, concat on channels."""
    net, x = _Net(8, 12), "x"
    for squeeze, expand in ((16, 32), (16, 48)):
        s = net.conv(x, squeeze)
        x = net.concat([net.conv(s, expand), net.conv(s, expand, k=3)])
    return net, net.conv(x, 16)


def _dense_block():
    """DenseNet: each layer's 16 new channels concatenated to everything before, the graph
    input (32 channels, NCHW) included."""
    net = _Net(32, 10)
    x = net.concat(["x", net.conv("x", 16, k=3)])
    for _ in range(2):
        x = net.concat([x, net.conv(net.conv(x, 32), 16, k=3)])
    return net, net.conv(x, 32)


def _densenet():
    """DenseNet's layer: batch norm and relu before each conv, on the concatenated value."""
    net = _Net(32, 10)
    x = net.conv("x", 32)
    for _ in range(2):
        x = net.concat([x, net.conv(net.bn_relu(net.conv(net.bn_relu(x), 32)), 16, k=3)])
    return net, net.bn_relu(x)


def _mixed_blocks():
    """24 channels (NCHW8c) and 32 (NCHW16c) concatenated: only 8 divides both."""
    net = _Net(16, 9)
    s = net.conv("x", 16)
    return net, net.conv(net.concat([net.conv(s, 24), net.conv(s, 32, k=3)]), 16)


def _no_block_fits():
    """A 20-channel input (NCHW, 20 = 4 x 5) beside a 32-channel blocked one."""
    net = _Net(16, 9)
    s = net.conv("x", 16)
    return net, net.conv(net.concat([net.conv(s, 20), net.conv(s, 32)]), 16)


def _spatial():
    """Concat along H and along W of blocked values."""
    net = _Net(16, 8)
    a, b = net.conv("x", 32), net.conv("x", 32, k=3)
    return net, net.conv(net.concat([net.concat([a, b], axis=2), net.concat([b, a], axis=2)],
                                    axis=3), 16)


NETS = {"fire": _fire, "dense_block": _dense_block, "densenet": _densenet,
        "mixed_blocks": _mixed_blocks, "no_block_fits": _no_block_fits, "spatial": _spatial}
# the layout each net's concats end in after convert_layout
CONCAT_LAYOUTS = {"fire": {"NCHW16c"}, "dense_block": {"NCHW16c"}, "densenet": {"NCHW16c"},
                  "mixed_blocks": {"NCHW8c"}, "no_block_fits": {""}, "spatial": {"NCHW16c"}}


@pytest.mark.parametrize("name", sorted(NETS))
def test_concat_nets_match_onnxruntime(name):
    net, out = NETS[name]()
    model = net.model(out)
    feeds = {"x": _rand(*net.shapes["x"])}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    assert_close(got[out], ort_run(model, feeds)[out])


def _converted(name):
    net, out = NETS[name]()
    return infer_types(convert_layout(infer_types(graph.from_onnx(net.model(out)))))


@pytest.mark.parametrize("name", sorted(NETS))
def test_which_concats_run_blocked(name):
    g = _converted(name)
    concats = [n for n in g.nodes if n.op == "concat"]
    assert concats and {n.outputs[0].layout or "" for n in concats} == CONCAT_LAYOUTS[name]


def test_blocked_concat_needs_no_conversion_of_conv_outputs():
    # fire: every concat input is a conv's NCHW16c output, read as it is; the only transform
    # left is the graph output's
    g = _converted("fire")
    transforms = [n for n in g.nodes if n.op == "layout_transform"]
    assert [n.outputs[0] for n in transforms] == list(g.outputs)
    # dense block: the NCHW graph input is converted once, for the first concat
    g = _converted("dense_block")
    to_blocked = [n for n in g.nodes if n.op == "layout_transform"
                  and n.attrs["dst_layout"] != "NCHW"]
    assert [n.inputs[0].name for n in to_blocked] == ["x"]


def test_batch_norm_of_a_blocked_value_stays_blocked():
    # densenet: each batch norm (after a concat: nothing to fold it into) becomes a multiply
    # and an add in NCHW16c; the only transform left is the graph output's
    g = _converted("densenet")
    assert not any(n.op == "batch_norm" for n in g.nodes)
    affine = [n for n in g.nodes if n.op in ("multiply", "add")]
    assert len(affine) == 2 * 5 and {n.outputs[0].layout for n in affine} == {"NCHW16c"}
    transforms = [n for n in g.nodes if n.op == "layout_transform"]
    assert [n.outputs[0] for n in transforms] == list(g.outputs)
