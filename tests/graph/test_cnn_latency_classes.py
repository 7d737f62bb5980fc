"""Classes of slow kernels found by profiling the corpus CNNs against onnxruntime (issue 18,
ResNet-50 / VGG-19 / EfficientNet-B0 / MobileNet-v3): each fix against onnxruntime, and the
structure it leaves.

- The model-zoo ResNets add their residual with ONNX ``Sum`` (two inputs): ``sum_n`` was not a
  binary op to convert_layout, so both blocked sides went back to NCHW for it and the result to
  NCHW16c again for the next conv (zoo_resnet50: 4.4 of its 73 ms kernel sum)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_testing import assert_close, ort_run
from tensorlang.graph.passes import convert_layout, infer_types

from tensorlang import graph

# the pass's module (the package exports the pass function under the same name)
convert_layout_module = importlib.import_module("tensorlang.graph.passes.convert_layout")

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


# squeeze-excite (EfficientNet, MobileNet-v3): x * sigmoid(fc2(relu(fc1(mean over H, W of x))))
# with the convs blocked. The mean written as ReduceMean over [2, 3] (dynamo's export) was a
# reduction that took x back to NCHW; the gate [1, C, 1, 1] (a run-time value, not a constant)
# made the multiply convert x to NCHW and its result back to NCHW16c for the next conv.


def _squeeze_excite(pool, c=32, hw=10, gate_shape="channel", gate_first=True):
    """conv -> x; gate from ``pool`` ("global": GlobalAveragePool, or (op, axes, keepdims)
    for a Reduce* node); x * gate; conv. gate_shape "spatial": the gate is a mean over
    channels ([1, 1, H, W]) instead, which does not broadcast per channel. gate_first: Mul(gate,
    x) as torch exports ``x * scale`` of torchvision's SqueezeExcitation (the order that made
    the multiply run NCHW even with both operands blocked)."""
    inits = [numpy_helper.from_array(_rand(c, c, 3, 3) * 0.2, "w0"),
             numpy_helper.from_array(_rand(c // 4, c, 1, 1) * 0.3, "w1"),
             numpy_helper.from_array(_rand(c // 4), "b1"),
             numpy_helper.from_array(_rand(c, c // 4, 1, 1) * 0.3, "w2"),
             numpy_helper.from_array(_rand(c), "b2"),
             numpy_helper.from_array(_rand(16, c, 1, 1) * 0.2, "wo")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["x0"])]
    if gate_shape == "spatial":
        nodes += [helper.make_node("ReduceMean", ["x0"], ["m"], axes=[1], keepdims=1),
                  helper.make_node("Sigmoid", ["m"], ["gate"])]
    else:
        if pool == "global":
            nodes.append(helper.make_node("GlobalAveragePool", ["x0"], ["p"]))
        else:
            op, axes, keep = pool
            nodes.append(helper.make_node(op, ["x0"], ["p"], axes=axes, keepdims=keep))
            if not keep:
                inits.append(numpy_helper.from_array(np.array([1, c, 1, 1], np.int64), "s"))
                nodes.append(helper.make_node("Reshape", ["p", "s"], ["p4"]))
        p = "p" if pool == "global" or pool[2] else "p4"
        nodes += [helper.make_node("Conv", [p, "w1", "b1"], ["f1"], kernel_shape=[1, 1]),
                  helper.make_node("Relu", ["f1"], ["r1"]),
                  helper.make_node("Conv", ["r1", "w2", "b2"], ["f2"], kernel_shape=[1, 1]),
                  helper.make_node("Sigmoid", ["f2"], ["gate"])]
    nodes += [helper.make_node("Mul", ["gate", "x0"] if gate_first else ["x0", "gate"], ["se"]),
              helper.make_node("Conv", ["se", "wo"], ["y"], kernel_shape=[1, 1])]
    g = helper.make_graph(nodes, "squeeze_excite",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, c, hw, hw))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


SE_CASES = {  # name: (pool, gate shape, the pool op after convert_layout, multiply blocked)
    "global_pool": ("global", "channel", "global_avg_pool", True),
    "global_pool_x_first": ("global", "x_first", "global_avg_pool", True),
    "reduce_mean_hw": (("ReduceMean", [2, 3], 1), "channel", "global_avg_pool", True),
    "reduce_mean_negative_axes": (("ReduceMean", [-1, -2], 1), "channel", "global_avg_pool",
                                  True),
    "reduce_max_hw": (("ReduceMax", [2, 3], 1), "channel", "global_max_pool", True),
    # dims dropped: stays a reduction (NCHW); the gate still broadcasts per channel
    "reduce_mean_no_keepdims": (("ReduceMean", [2, 3], 0), "channel", "reduce_mean", True),
    # a reduction over H alone stays one; its [1, C, 1, W] gate broadcasts blocked
    "reduce_mean_h_only": (("ReduceMean", [2], 1), "channel", "reduce_mean", True),
    # a [1, 1, H, W] gate broadcasts over channels: the multiply stays NCHW
    "spatial_gate": (None, "spatial", "reduce_mean", False),
}


def _se_model(pool, gate):
    if gate == "x_first":
        return _squeeze_excite(pool, gate_first=False)
    return _squeeze_excite(pool, gate_shape=gate)


def _se_feed():
    return {"x": _rand(1, 32, 10, 10)}


@pytest.mark.parametrize("name", sorted(SE_CASES))
def test_squeeze_excite_matches_onnxruntime(name):
    pool, gate, _, _ = SE_CASES[name]
    model = _se_model(pool, gate)
    feeds = _se_feed()
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    assert_close(got["y"], ort_run(model, feeds)["y"])


@pytest.mark.parametrize("name", sorted(SE_CASES))
def test_squeeze_excite_runs_blocked(name):
    pool, gate, pool_op, mul_blocked = SE_CASES[name]
    g = infer_types(convert_layout(infer_types(graph.from_onnx(_se_model(pool, gate)))))
    pools = [n for n in g.nodes if n.op.startswith(("global_", "reduce_"))]
    assert [n.op for n in pools] == [pool_op]
    mul, = [n for n in g.nodes if n.op == "multiply"]
    assert (mul.outputs[0].layout == "NCHW16c") == mul_blocked
    if mul_blocked and pool_op.startswith("global"):  # nothing goes back to NCHW but y
        back = [n for n in g.nodes if n.op == "layout_transform"
                and n.attrs["dst_layout"] == "NCHW"]
        assert [n.outputs[0] for n in back] == list(g.outputs)


def test_squeeze_excite_gate_kernel_leaves_the_multiply_out():
    # the gate's conv + sigmoid is one kernel and the broadcast multiply another: fused into
    # the conv's kernel the sigmoid ran once per element of x (fuse_ops)
    gm = graph.build(graph.from_onnx(_se_model("global", "channel")))
    kernels = [st["kernel"].rsplit("_", 1)[0] for st in gm.plan["steps"]]
    assert "multiply" in kernels and "fused_conv_sigmoid" in kernels, kernels
    assert not any("multiply" in k and "conv" in k for k in kernels), kernels


def _vgg_block(c=256, hw=14):
    """VGG-style: a 3x3 conv of the NCHW input, relu, two c -> c 3x3 convs (+ bias, relu) at
    hw x hw, the second with a residual add, a 1x1 conv to 16 channels."""
    inits = [numpy_helper.from_array(_rand(c, 16, 3, 3) * 0.2, "w0")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["r0"])]
    for i in (1, 2):
        inits += [numpy_helper.from_array(_rand(c, c, 3, 3) * np.float32(0.02), f"w{i}"),
                  numpy_helper.from_array(_rand(c), f"b{i}")]
        nodes.append(helper.make_node("Conv", [f"r{i - 1}", f"w{i}", f"b{i}"], [f"c{i}"],
                                      kernel_shape=[3, 3], pads=[1] * 4))
        if i == 1:
            nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    nodes += [helper.make_node("Add", ["c2", "r0"], ["s"]),
              helper.make_node("Relu", ["s"], ["r2"])]
    inits.append(numpy_helper.from_array(_rand(16, c, 1, 1) * 0.2, "wo"))
    nodes.append(helper.make_node("Conv", ["r2", "wo"], ["y"], kernel_shape=[1, 1]))
    g = helper.make_graph(nodes, "vgg_block",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, hw, hw))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_big_3x3_convs_run_as_winograd_and_match_onnxruntime():
    """VGG-19 / ResNet-50's 3x3 stride-1 convs ran at the FMA peak as direct convs (zoo_vgg19:
    ~115 GFLOP/s per core, onnxruntime the same); Winograd F(4x4, 3x3) does a quarter of the
    multiplications. The blocked c -> c convs take it (bias, relu and the residual add fused
    into its output transform); the 16-channel NCHW stem and the 1x1 conv do not."""
    model = _vgg_block()
    g = infer_types(convert_layout(infer_types(graph.from_onnx(model))))
    layouts = [n.attrs.get("weight_layout") for n in g.nodes if n.op == "conv"]
    assert layouts == ["OIHW16o", "WINOGRAD4x4_OIHW16i16o", "WINOGRAD4x4_OIHW16i16o",
                       "OIHW16i16o"]
    feeds = {"x": _rand(1, 16, 14, 14)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    assert_close(got["y"], ort_run(model, feeds)["y"])


@pytest.mark.parametrize("flops_per_byte, winograd", [(6.8, False), (4.0, True)])
def test_a_7x7_conv_runs_as_winograd_only_where_the_machine_streams_its_weights_fast_enough(
        monkeypatch, flops_per_byte, winograd):
    """At 7x7 the products read 4x the direct conv's weights for 49 pixels of output: on a
    machine of 6.8 FLOPs per byte of memory (an Intel Xeon, where it ran 1.40x slower) the
    direct conv keeps it; at 4 it is Winograd. The direct build matches onnxruntime (the
    Winograd one is the test above's, at 14x14)."""
    monkeypatch.setattr(convert_layout_module, "flops_per_byte", lambda: flops_per_byte)
    model = _vgg_block(hw=7)
    g = infer_types(convert_layout(infer_types(graph.from_onnx(model))))
    layouts = [n.attrs.get("weight_layout") for n in g.nodes if n.op == "conv"]
    assert layouts[1:3] == ["WINOGRAD4x4_OIHW16i16o" if winograd else "OIHW16i16o"] * 2
    if winograd:
        return
    feeds = {"x": _rand(1, 16, 7, 7)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    assert_close(got["y"], ort_run(model, feeds)["y"])
