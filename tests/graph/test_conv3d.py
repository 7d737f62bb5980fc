"""3-D convolutions (video nets): the conv3d_as_conv2d pass runs an ungrouped conv over three
spatial axes as one 2-D conv over its stacked time taps; graph.build against onnxruntime for
strides, pads, dilations and bias on every axis, and what the passes leave."""

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

RNG = np.random.default_rng(11)


def _model(xs, ws, strides, pads, dilations, bias, group=1):
    inits = [numpy_helper.from_array(RNG.standard_normal(ws).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(ws[0]).astype(np.float32), "b"))
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["y"], strides=strides, pads=pads,
                              dilations=dilations, group=group),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "conv3d",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("xs,ws,strides,pads,dilations,bias", [
    ((1, 3, 8, 20, 20), (8, 3, 3, 3, 3), [1, 1, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1], True),
    ((2, 4, 7, 9, 11), (5, 4, 3, 3, 2), [2, 1, 2], [1, 0, 1, 0, 1, 0], [1, 1, 1], False),
    ((1, 4, 9, 10, 10), (6, 4, 2, 3, 3), [1, 2, 1], [0, 1, 1, 1, 1, 1], [2, 1, 1], True),
    ((1, 16, 4, 14, 14), (32, 16, 1, 1, 1), [1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1], False),
    ((1, 3, 8, 16, 16), (16, 3, 3, 7, 7), [1, 2, 2], [1, 3, 3, 1, 3, 3], [1, 1, 1], False),
])
def test_conv3d_runs_as_a_2d_conv_and_matches_onnxruntime(xs, ws, strides, pads, dilations,
                                                          bias):
    m = _model(xs, ws, strides, pads, dilations, bias)
    g = graph.from_onnx(m)
    convs = [n for n in run_passes(g, 1).nodes if n.op == "conv"]  # before the layout pass
    assert len(convs) == 1 and len(convs[0].outputs[0].shape) == 4
    x = RNG.standard_normal(xs).astype(np.float32)
    assert_close(graph.build(g).run(x=x)["z"], ort_run(m, {"x": x})["z"])


def test_grouped_conv3d_keeps_the_generic_conv_and_stays_right():
    m = _model((1, 4, 5, 6, 6), (4, 2, 3, 3, 3), [1, 1, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1],
               True, group=2)
    g = graph.from_onnx(m)
    nodes = run_passes(g, 1).nodes  # one kernel: the generic 5-D conv with its relu
    assert [n.op for n in nodes] == ["fused"] and len(nodes[0].outputs[0].shape) == 5
    x = RNG.standard_normal((1, 4, 5, 6, 6)).astype(np.float32)
    assert_close(graph.build(g).run(x=x)["z"], ort_run(m, {"x": x})["z"])


def test_conv3d_of_a_symbolic_batch_is_left_to_the_generic_conv():
    """The frames' batch would be N * OT: with N a shape variable the pass leaves the conv."""
    m = _model(("batch", 3, 4, 6, 6), (4, 3, 3, 3, 3), [1, 1, 1], [1, 1, 1, 1, 1, 1],
               [1, 1, 1], False)
    nodes = run_passes(graph.from_onnx(m), 1).nodes
    assert [n.op for n in nodes] == ["fused"] and len(nodes[0].outputs[0].shape) == 5
