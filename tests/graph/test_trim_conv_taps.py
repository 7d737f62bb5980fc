"""The trim_conv_taps pass (issue 18, DeepLabV3's ASPP head): a conv's taps that read only
padding are cut from the kernel at build time. graph.build against onnxruntime, and the kernel
the pass leaves."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_testing import assert_close, ort_run
from tensorlang.graph.passes.infer_types import infer_types
from tensorlang.graph.passes.trim_conv_taps import trim_conv_taps

from tensorlang import graph

RNG = np.random.default_rng(18)

# name: (input shape, out channels, kernel, dilations, pads, strides, groups, kernel after pass)
CASES = {
    # ASPP at dilation 24 on a 14x14 map: only the centre tap reads data -> a 1x1 conv
    "aspp_centre_only": ((1, 16, 14, 14), 8, (3, 3), (24, 24), (24, 24, 24, 24), (1, 1), 1,
                         (1, 1)),
    # one axis cut (width 5 at dilation 6), the other kept (height 7 at dilation 3), grouped
    "one_axis": ((1, 8, 7, 5), 12, (3, 3), (3, 6), (3, 6, 3, 6), (1, 1), 4, (3, 1)),
    # asymmetric pads at stride 2: the first tap reads only the leading pad
    "leading_pad_strided": ((1, 4, 8, 9), 6, (3, 3), (6, 1), (6, 1, 0, 1), (2, 1), 1, (2, 3)),
    # the dead taps' cut would need a negative pad (crop the input): left as written
    "negative_pad_kept": ((1, 3, 2, 2), 5, (3, 3), (6, 6), (5, 5, 6, 6), (1, 1), 1, (3, 3)),
    # every tap reads data (ASPP at dilation 12 on 14x14): nothing to cut
    "all_live": ((1, 8, 14, 14), 4, (3, 3), (12, 12), (12, 12, 12, 12), (1, 1), 1, (3, 3)),
}


def _model(shape, oc, kernel, dil, pads, strides, groups, bias=True):
    w = (RNG.standard_normal((oc, shape[1] // groups, *kernel)) * 0.3).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(oc).astype(np.float32), "b"))
        ins.append("b")
    conv = helper.make_node("Conv", ins, ["c"], kernel_shape=list(kernel), dilations=list(dil),
                            pads=list(pads), strides=list(strides), group=groups)
    relu = helper.make_node("Relu", ["c"], ["y"])
    g = helper.make_graph([conv, relu], "dilated",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("name", sorted(CASES))
def test_trimmed_conv_matches_onnxruntime(name):
    shape, *conv, _ = CASES[name]
    model = _model(shape, *conv)
    feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    ref = ort_run(model, feeds)["y"]
    assert_close(got["y"], ref)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_pass_cuts_only_the_taps_that_read_padding(name):
    shape, *conv, kept = CASES[name]
    g = trim_conv_taps(infer_types(graph.from_onnx(_model(shape, *conv))))
    c, = [n for n in g.nodes if n.op == "conv"]
    assert tuple(c.inputs[1].shape[2:]) == kept
    _, kernel, dil, pads, strides, _ = conv
    assert c.outputs[0].shape[2:] == tuple(
        (shape[2 + d] + pads[d] + pads[2 + d] - dil[d] * (kernel[d] - 1) - 1) // strides[d] + 1
        for d in range(2))
    if kept == (1, 1):
        assert c.attrs["dilations"] == [1, 1] and c.attrs["pads"] == [0, 0, 0, 0]


def test_a_conv_with_a_runtime_weight_is_left_as_it_is():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 2, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], dilations=[8, 8],
                          pads=[8, 8, 8, 8])], "rw", [x, w], [y]),
        opset_imports=[helper.make_opsetid("", 13)])
    g = trim_conv_taps(infer_types(graph.from_onnx(model)))
    c, = [n for n in g.nodes if n.op == "conv"]
    assert c.inputs[1].shape == (3, 2, 3, 3)
    feeds = {"x": RNG.standard_normal((1, 2, 4, 4)).astype(np.float32),
             "w": RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    assert_close(got["y"], ort_run(model, feeds)["y"])
