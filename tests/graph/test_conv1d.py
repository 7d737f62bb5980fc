"""1-D convolutions (issue 18): the conv1d_as_conv2d pass runs a conv over one spatial axis as
the 2-D conv with a height of 1 (library schedules, blocked layouts); graph.build against
onnxruntime, and what the passes leave between convs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_testing import assert_close, ort_run
from tensorlang.graph.passes import run_passes

from tensorlang import graph

RNG = np.random.default_rng(5)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


class _Net:
    """An ONNX graph of 1-D convs (random weights) and the ops between them."""

    def __init__(self, c, length):
        self.nodes, self.inits, self.shapes = [], [], {"x": (1, c, length)}

    def conv(self, x, oc, k, stride=1, pad=0, dilation=1, groups=1, bias=True, act="Relu"):
        i = len(self.nodes)
        n, c, length = self.shapes[x]
        ins = [x, f"w{i}"]
        self.inits.append(numpy_helper.from_array(_rand(oc, c // groups, k) * 0.3, f"w{i}"))
        if bias:
            self.inits.append(numpy_helper.from_array(_rand(oc), f"b{i}"))
            ins.append(f"b{i}")
        self.nodes.append(helper.make_node("Conv", ins, [f"c{i}"], kernel_shape=[k],
                                           strides=[stride], pads=[pad, pad],
                                           dilations=[dilation], group=groups))
        out = (length + 2 * pad - dilation * (k - 1) - 1) // stride + 1
        self.shapes[f"c{i}"] = (n, oc, out)
        if act is None:
            return f"c{i}"
        self.nodes.append(helper.make_node(act, [f"c{i}"], [f"a{i}"]))
        self.shapes[f"a{i}"] = (n, oc, out)
        return f"a{i}"

    def add(self, a, b):
        name = f"s{len(self.nodes)}"
        self.nodes.append(helper.make_node("Add", [a, b], [name]))
        self.shapes[name] = self.shapes[a]
        return name

    def model(self, outs):
        g = helper.make_graph(
            self.nodes, "conv1d",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, self.shapes["x"])],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, self.shapes[o]) for o in outs],
            initializer=self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _encoder():
    """silero-vad's shape: an STFT-like conv (many filters, long taps, a big stride), then
    3-tap encoder convs at 128 / 64 channels, strides 1 and 2."""
    net = _Net(1, 576)
    x = net.conv("x", 66, 64, stride=32, bias=False, act=None)
    for oc, stride in ((128, 1), (64, 2), (64, 2), (128, 1)):
        x = net.conv(x, oc, 3, stride=stride, pad=1)
    return net, [x]


def _variety():
    """Dilation, groups (depthwise and grouped), no bias, a residual add, a shared input,
    Sigmoid, odd lengths and channel counts, two outputs."""
    net = _Net(16, 37)
    a = net.conv("x", 32, 5, pad=4, dilation=2)
    b = net.conv(a, 32, 3, pad=1, groups=32, bias=False, act="Sigmoid")
    c = net.conv(net.add(a, b), 24, 3, stride=2, pad=1, groups=4)
    d = net.conv("x", 20, 1, act=None)
    return net, [c, d]


NETS = {"encoder": _encoder, "variety": _variety}


@pytest.mark.parametrize("name", sorted(NETS))
def test_conv1d_nets_match_onnxruntime(name):
    net, outs = NETS[name]()
    model = net.model(outs)
    feeds = {"x": _rand(*net.shapes["x"])}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    for out, ref in ort_run(model, feeds).items():
        assert got[out].shape == ref.shape
        assert_close(got[out], ref)


@pytest.mark.parametrize("opt_level", [1, 2])
def test_conv1d_runs_as_2d_with_no_reshape_between_convs(opt_level):
    net, outs = _encoder()
    g = run_passes(graph.from_onnx(net.model(outs)), opt_level)
    nodes = [m for n in g.nodes for m in ([n] if n.op != "fused" else _members(n))]
    convs = [n for n in nodes if n.op == "conv"]
    assert len(convs) == 5
    assert all(len(n.attrs["strides"]) == 2 and n.attrs["strides"][0] == 1 for n in convs)
    # one reshape to 4-D at the input, one back to 3-D at the output: none between the convs
    assert sum(n.op == "reshape" for n in nodes) == 2


def _members(n):
    return [type("Member", (), {"op": m["op"], "attrs": m["attrs"]})
            for m in n.attrs["body"]]


def test_a_conv1d_with_a_runtime_weight_is_left_as_it_is():
    # the weight is an input: its reshape would cost a copy per run
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [6, 4, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8])
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3])], "rw", [x, w], [y]),
        opset_imports=[helper.make_opsetid("", 13)])
    feeds = {"x": _rand(1, 4, 10), "w": _rand(6, 4, 3)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    assert_close(got["y"], ort_run(model, feeds)["y"])
    g = run_passes(graph.from_onnx(model), 2)
    assert not any(n.op == "reshape" for n in g.nodes)


def _column_net():
    """tf2onnx's Conv1D: 2-D convs over [N, C, L, 1] with kernels one column wide (padding,
    dilation and a stride along L, groups), a residual add, and a 3x3 conv padded across the
    width (trim_conv_taps cuts its all-padding columns first: a column conv too)."""
    def w(*shape):
        return _rand(*shape) * 0.3

    inits = {"w0": w(16, 8, 5, 1), "b0": _rand(16), "w1": w(16, 4, 3, 1), "w2": w(8, 16, 3, 1),
             "w3": w(8, 8, 3, 3)}
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[5, 1],
                         pads=[4, 0, 4, 0], dilations=[2, 1]),
        helper.make_node("Relu", ["c0"], ["a0"]),
        helper.make_node("Conv", ["a0", "w1"], ["c1"], kernel_shape=[3, 1], pads=[1, 0, 1, 0],
                         group=4),
        helper.make_node("Add", ["a0", "c1"], ["s1"]),
        helper.make_node("Conv", ["s1", "w2"], ["y"], kernel_shape=[3, 1], strides=[2, 1]),
        helper.make_node("Conv", ["x", "w3"], ["z"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ]
    g = helper.make_graph(
        nodes, "column", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 37, 1])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y", "z")],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_convs_over_one_column_match_onnxruntime_and_run_along_the_width():
    model = _column_net()
    feeds = {"x": _rand(2, 8, 37, 1)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    for out, ref in ort_run(model, feeds).items():
        assert got[out].shape == ref.shape
        assert_close(got[out], ref)
    g = run_passes(graph.from_onnx(model), 1)
    nodes = [m for n in g.nodes for m in ([n] if n.op != "fused" else _members(n))]
    convs = [n for n in nodes if n.op == "conv"]
    assert len(convs) == 4
    # each conv's height (its taps, padding, dilation and stride) moved to the width
    assert sorted(n.attrs["strides"] for n in convs) == [[1, 1], [1, 1], [1, 1], [1, 2]]
    assert sorted(n.attrs["pads"] for n in convs) == [[0, 0, 0, 0], [0, 1, 0, 1], [0, 1, 0, 1],
                                                      [0, 4, 0, 4]]
    assert max(n.attrs["dilations"] for n in convs) == [1, 2]
    # x to a row once (both its convs read it), y and z back to columns: none between convs
    assert sum(n.op == "reshape" for n in nodes) == 3
