"""pad_conv_channels: a conv whose output channels no 16-channel vector divides (SqueezeNet's
1000 classes, a YOLO head's 255) runs on zero-padded channels up to the next multiple of 16, the
padding sliced off where the model reads the value as NCHW anyway; against onnxruntime, and the
convs it leaves alone."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_testing import assert_close, ort_run
from tensorlang.graph.passes import pad_conv_channels, run_passes

from tensorlang import graph

RNG = np.random.default_rng(1000)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _model(oc, tail, c=32, hw=9, groups=1, out_shape=None):
    """x -> a 3x3 conv to c channels (blocked input) -> relu -> a 1x1 conv to oc (+ bias)
    -> ``tail``: a list of (op, attrs, extra initializers) applied in turn."""
    inits = [numpy_helper.from_array(_rand(c, 16, 3, 3) * 0.2, "w0"),
             numpy_helper.from_array(_rand(oc, c // groups, 1, 1) * 0.2, "w1"),
             numpy_helper.from_array(_rand(oc), "b1")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["t0"], kernel_shape=[1, 1],
                              group=groups)]
    for i, (op, attrs, extra) in enumerate(tail):
        inits += extra
        nodes.append(helper.make_node(op, [f"t{i}", *(t.name for t in extra)], [f"t{i + 1}"],
                                      **attrs))
    nodes[-1].output[0] = "y"
    g = helper.make_graph(nodes, "head",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, hw, hw))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


CLASSIFIER = [("Relu", {}, []), ("GlobalAveragePool", {}, []), ("Softmax", {"axis": 1}, [])]


def _run(model):
    feeds = {"x": _rand(1, 16, 9, 9)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)["y"]
    assert_close(got, ort_run(model, feeds)["y"])
    return got


def _padded_widths(model) -> list[int]:
    """Output channels of each conv after the passes that precede convert_layout."""
    g = pad_conv_channels(graph.from_onnx(model))
    return [n.outputs[0].shape[1] for n in g.nodes if n.op == "conv"]


def test_a_classifier_conv_runs_on_16_channel_vectors_and_the_padding_is_sliced_after_the_pool():
    model = _model(200, CLASSIFIER)  # 200 = 8 x 25: 8-channel blocks before
    g = pad_conv_channels(graph.from_onnx(model))
    ops = [(n.op, n.outputs[0].shape) for n in g.nodes]
    assert ops[-5:] == [("conv", (1, 208, 9, 9)), ("relu", (1, 208, 9, 9)),
                        ("global_avg_pool", (1, 208, 1, 1)), ("slice", (1, 200, 1, 1)),
                        ("softmax", (1, 200, 1, 1))]
    built = run_passes(graph.from_onnx(model))
    assert any(v.layout == "NCHW16c" and v.shape[1] == 13 for n in built.nodes
               for v in n.outputs)  # 208 / 16 blocks, where 200 channels ran as 25 x 8
    got = _run(model)
    assert got.shape == (1, 200, 1, 1) and abs(float(got.sum()) - 1.0) < 1e-5


def test_a_255_channel_head_read_through_a_reshape_is_padded_to_256():
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [1, 255, 81])
    model = _model(255, [("Reshape", {}, [shape])], out_shape=(1, 255, 81))
    assert _padded_widths(model)[1] == 256
    _run(model)


def test_a_conv_that_is_a_graph_output_is_padded_and_sliced():
    model = _model(120, [("Sigmoid", {}, [])])  # sigmoid(0) = 0.5 on the padding: sliced off
    assert _padded_widths(model) == [32, 128]
    _run(model)


@pytest.mark.parametrize("oc, tail, groups, why", [
    (200, [("Relu", {}, []), ("Conv", {"kernel_shape": [1, 1]},
                              [numpy_helper.from_array(_rand(16, 200, 1, 1), "w2")])], 1,
     "a conv reads it: the padding would reach an op that mixes channels"),
    (21, CLASSIFIER, 1, "21 -> 32 is half as much work again"),
    (208, CLASSIFIER, 1, "16 divides it already"),
    (200, CLASSIFIER, 2, "a grouped conv"),
    (200, [("Add", {}, [numpy_helper.from_array(_rand(1, 200, 1, 1), "s")])], 1,
     "a binary op with a per-channel constant: convert_layout keeps it blocked"),
])
def test_convs_left_alone(oc, tail, groups, why):
    model = _model(oc, tail, groups=groups)
    assert _padded_widths(model)[1] == oc, why
    _run(model)


def test_two_convs_sharing_a_weight_share_its_padded_copy():
    b = graph.Builder("shared")
    x = b.input("x", (1, 32, 5, 5))
    w, bias = b.const(_rand(200, 32, 1, 1), name="w"), b.const(_rand(200), name="b")
    heads = [b.softmax(b.global_avg_pool(b.relu(b.conv(v, w, bias))), axes=[1])
             for v in (x, b.sigmoid(x))]
    g = b.build(b.add(*heads))
    padded = pad_conv_channels(g)
    weights = {id(n.inputs[1]) for n in padded.nodes if n.op == "conv"}
    assert len(weights) == 1 and [n.outputs[0].shape[1] for n in padded.nodes
                                  if n.op == "conv"] == [208, 208]
    feeds = {"x": _rand(1, 32, 5, 5)}
    want = graph.build(g, opt_level=0).run(**feeds)
    got = graph.build(g).run(**feeds)
    name = g.outputs[0].name
    np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-6)
