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
from tensorlang.graph.passes import (
    convert_layout,
    eliminate_dead_code,
    infer_types,
    pack_conv_weights,
    run_passes,
)

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


def _shufflenet_v1():
    from tensorlang.graph import model_zoo

    # groups 3: the units' second 1x1 convs have 72 and 80 output channels per group (8 and
    # 16 divide them), their first 20; planes of 8x8, then 4x4 pixels
    return model_zoo.shufflenet_v1(1, 32, 3, units=(2, 1), classes=10)


def _after_convert_layout(g):
    """g after the passes up to convert_layout (batch norms folded into the convs first)."""
    seen = {}
    run_passes(g, on_pass=lambda name, before, after: seen.setdefault(name, after))
    return eliminate_dead_code(seen["convert_layout"])


def test_shufflenet_v1_grouped_1x1_stay_nchw_and_match_onnxruntime():
    """A grouped 1x1 conv runs on conv2d_nchw's pixels path (NCHW in and out) even where a
    block divides its groups' output channels, and the residual add after it runs NCHW (in
    the conv's kernel) though the shortcut arrives blocked."""
    model = _shufflenet_v1()
    g = _after_convert_layout(graph.from_onnx(model))
    one_by_one = [n for n in _grouped_nodes(g) if n.inputs[1].shape[2:] == (1, 1)]
    assert len(one_by_one) == 5 and any((n.inputs[1].shape[0] // 3) % 16 == 0
                                        for n in one_by_one)
    assert all({"out_layout", "layout"}.isdisjoint(n.attrs) for n in one_by_one)
    adds = [n for n in g.nodes if n.op == "add"]
    assert len(adds) == 1 and all(n.outputs[0].layout in (None, "") for n in adds)
    feeds = {"x": _rand(1, 3, 32, 32)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    for out, ref in ort_run(model, feeds).items():
        assert_close(got[out], ref)


def _add_layouts(g):
    add, = [n for n in g.nodes if n.op == "add"]
    return [v.layout or "NCHW" for v in (*add.inputs, *add.outputs)]


def test_add_of_an_nchw_conv_and_a_blocked_value_runs_nchw():
    """Where an NCHW conv computes one operand of an add (for that add alone) and the other
    arrives blocked, the add runs NCHW, the blocked operand converted: fusion then puts the
    add in the conv's kernel. Where a blocked conv computes the blocked operand for the add
    alone, the add stays blocked (in that conv's kernel)."""
    for shortcut_read_twice in (True, False):
        b = graph.Builder()
        x = b.input("x", (1, 32, 6, 6))
        w3 = b.const(_rand(32, 32, 3, 3) * 0.1)
        w1 = b.const(_rand(32, 16, 1, 1) * 0.3)
        blocked = b.relu(b.conv(x, w3, pads=[1, 1, 1, 1]))
        # a grouped 1x1 conv with 16 output channels per group: the pixels path, NCHW
        pixels = b.conv(blocked if shortcut_read_twice else x, w1, groups=2)
        y = b.add(pixels, blocked)
        g = infer_types(convert_layout(infer_types(b.build(y))))
        want = ["NCHW"] * 3 if shortcut_read_twice else ["NCHW16c"] * 3
        assert _add_layouts(g) == want
        feeds = {"x": _rand(1, 32, 6, 6)}
        ref = graph.build(b.build(y), opt_level=0).run(**feeds)
        for name, got in graph.build(b.build(y)).run(**feeds).items():
            assert_close(got, ref[name])
