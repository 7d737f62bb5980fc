"""Grouped convolutions in graphs (issue 18): ONNX Conv with 1 < group < channels built by
graph.build against onnxruntime, with NCHW and blocked neighbours; the passes run a grouped
conv whose groups' output channels a block divides on the library's oc-blocked kernel (weight
packed at build time, NCHW<b>c out) and leave the others NCHW."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_testing import assert_close, ort_run
from tensorlang.graph.passes import convert_layout, infer_types, pack_conv_weights

from tensorlang import graph

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _model(c, hw, convs, name="grouped"):
    """A chain of Conv (+ Relu) nodes: convs = [(out channels, kernel, groups, stride, pad)]."""
    nodes, inits, x, ch, size = [], [], "x", c, hw
    for i, (oc, k, g, stride, pad) in enumerate(convs):
        w, b = f"w{i}", f"b{i}"
        inits += [numpy_helper.from_array(_rand(oc, ch // g, k, k) * 0.3, w),
                  numpy_helper.from_array(_rand(oc), b)]
        nodes.append(helper.make_node("Conv", [x, w, b], [f"c{i}"], group=g, kernel_shape=[k, k],
                                      strides=[stride] * 2, pads=[pad] * 4))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x, ch, size = f"r{i}", oc, (size + 2 * pad - k) // stride + 1
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, c, hw, hw])], [helper.make_tensor_value_info(
            x, TensorProto.FLOAT, [1, ch, size, size])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


CHAINS = {
    # AlexNet-style: a grouped 5x5 after an NCHW input, then a grouped 3x3 after a dense conv
    "alexnet": (8, 13, [(32, 5, 2, 1, 2), (48, 3, 1, 1, 1), (32, 3, 2, 1, 1)]),
    # ResNeXt-style bottleneck: 1x1, grouped 3x3 stride 2 (8 per group), 1x1
    "resnext": (16, 12, [(32, 1, 1, 1, 0), (32, 3, 4, 2, 1), (64, 1, 1, 1, 0)]),
    # ShuffleNet-style 1x1 grouped convs with 6 and 12 channels per group (stay NCHW)
    "shufflenet": (24, 10, [(24, 1, 4, 1, 0), (48, 1, 4, 1, 0), (32, 3, 1, 1, 1)]),
    # 3 groups of 16 (a 48-channel value is blocked by 16), stride 2 and 1
    "regnet": (48, 9, [(48, 3, 3, 2, 1), (48, 3, 3, 1, 1)]),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_grouped_conv_chains_match_onnxruntime(name):
    c, hw, convs = CHAINS[name]
    model = _model(c, hw, convs, name)
    feeds = {"x": _rand(1, c, hw, hw)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    for out, ref in ort_run(model, feeds).items():
        assert_close(got[out], ref)


def _grouped_nodes(g):
    return [n for n in g.nodes if n.op == "conv" and n.attrs.get("groups", 1) > 1]


def test_blockable_grouped_conv_runs_blocked_and_others_stay_nchw():
    c, hw, convs = CHAINS["alexnet"]
    g = infer_types(convert_layout(infer_types(graph.from_onnx(_model(c, hw, convs)))))
    first, second = _grouped_nodes(g)
    for n in (first, second):  # NCHW in (the second converted back from blocked), 16c out
        assert n.attrs["out_layout"] == "NCHW16c" and n.attrs["weight_layout"] == "OIHW16o"
        assert n.inputs[0].layout in (None, "", "NCHW")
    assert any(n.op == "layout_transform" and n.outputs[0] is second.inputs[0] for n in g.nodes)
    c, hw, convs = CHAINS["shufflenet"]
    g = infer_types(convert_layout(infer_types(graph.from_onnx(_model(c, hw, convs)))))
    assert all("out_layout" not in n.attrs for n in _grouped_nodes(g))


def test_pack_conv_weights_packs_grouped_convs_a_block_divides():
    # 16, 12 and 8 output channels per group
    model = _model(16, 8, [(32, 3, 2, 1, 1), (48, 1, 4, 1, 0), (32, 1, 4, 1, 0)])
    g = infer_types(pack_conv_weights(infer_types(graph.from_onnx(model))))
    assert [n.attrs.get("weight_layout") for n in _grouped_nodes(g)] == [
        "OIHW16o", None, "OIHW8o"]
