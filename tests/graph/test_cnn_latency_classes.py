"""Classes of slow kernels found by profiling the corpus CNNs against onnxruntime (issue 18,
ResNet-50 / VGG-19 / EfficientNet-B0 / MobileNet-v3): each fix against onnxruntime, and the
structure it leaves.

- The model-zoo ResNets add their residual with ONNX ``Sum`` (two inputs): ``sum_n`` was not a
  binary op to convert_layout, so both blocked sides went back to NCHW for it and the result to
  NCHW16c again for the next conv (zoo_resnet50: 4.4 of its 73 ms kernel sum)."""

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

RNG = np.random.default_rng(1818)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _residual_nary(op, n_inputs, c=32, hw=9, side_shape=None):
    """conv -> relu, then ``op`` of that and n_inputs - 1 other convs of x (or, with
    ``side_shape``, of a graph input of that shape: broadcast), relu, conv."""
    nodes, inits, ins = [], [], []
    for i in range(n_inputs):
        inits += [numpy_helper.from_array(_rand(c, c, 3, 3) * 0.2, f"w{i}"),
                  numpy_helper.from_array(_rand(c), f"b{i}")]
        nodes.append(helper.make_node("Conv", ["x", f"w{i}", f"b{i}"], [f"c{i}"],
                                      kernel_shape=[3, 3], pads=[1] * 4))
        ins.append(f"c{i}")
    graph_ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, c, hw, hw))]
    if side_shape is not None:
        ins[-1] = "side"
        graph_ins.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, side_shape))
    nodes.append(helper.make_node(op, ins, ["s"]))
    nodes.append(helper.make_node("Relu", ["s"], ["r"]))
    inits.append(numpy_helper.from_array(_rand(16, c, 1, 1) * 0.2, "wo"))
    nodes.append(helper.make_node("Conv", ["r", "wo"], ["y"], kernel_shape=[1, 1]))
    g = helper.make_graph(nodes, "residual_nary", graph_ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


NARY_CASES = {  # name: (ONNX op, inputs, broadcast side input shape or None, runs blocked)
    "sum2": ("Sum", 2, None, True),
    "sum3": ("Sum", 3, None, True),
    "mean2": ("Mean", 2, None, True),
    "max3": ("Max", 3, None, True),
    "min2": ("Min", 2, None, True),
    "sum_same_shape_input": ("Sum", 2, (1, 32, 9, 9), True),  # the NCHW input is converted
    "sum_broadcast_input": ("Sum", 2, (1, 1, 9, 9), False),  # broadcast: stays NCHW
}


@pytest.mark.parametrize("name", sorted(NARY_CASES))
def test_nary_residual_matches_onnxruntime(name):
    op, k, side, _ = NARY_CASES[name]
    model = _residual_nary(op, k, side_shape=side)
    feeds = {"x": _rand(1, 32, 9, 9)}
    if side is not None:
        feeds["side"] = _rand(*side)
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    assert_close(got["y"], ort_run(model, feeds)["y"])


@pytest.mark.parametrize("name", sorted(NARY_CASES))
def test_nary_residual_runs_blocked(name):
    op, k, side, blocked = NARY_CASES[name]
    g = infer_types(convert_layout(infer_types(graph.from_onnx(
        _residual_nary(op, k, side_shape=side)))))
    nary, = [n for n in g.nodes if n.op.endswith("_n")]
    assert (nary.outputs[0].layout == "NCHW16c") == blocked
    back_to_nchw = [n for n in g.nodes if n.op == "layout_transform"
                    and n.attrs["dst_layout"] == "NCHW"]
    if blocked:  # only the graph output goes back to NCHW
        assert [n.outputs[0] for n in back_to_nchw] == list(g.outputs)
    else:  # the blocked conv outputs are converted for the op that stays NCHW
        assert len(back_to_nchw) == k - 1 + 1


def test_nary_residual_fuses_into_the_conv():
    # sum2 after the blocked convs: the Sum and the Relu run in a conv's kernel
    gm = graph.build(graph.from_onnx(_residual_nary("Sum", 2)))
    kernels = {st["kernel"] for st in gm.plan["steps"]}
    assert not any(k.startswith(("fused_layout_transform", "sum_n")) for k in kernels), kernels
    assert any(k.startswith("fused_conv_sum_n_relu") for k in kernels), kernels
