"""The fold_qdq pass (issue 22): QDQ patterns (DequantizeLinear -> Conv / Gemm / MatMul [-> Relu]
-> QuantizeLinear) become an integer product with the requantization fused, computing
onnxruntime's integer arithmetic exactly: in float32 when the weights bound every partial sum
below 2**24, else in int32. Hand-made QDQ models against onnxruntime, bit for bit; the rewritten
graph is checked for what it must (and must not) contain."""

from __future__ import annotations

import numpy as np
import pytest
from graph_testing import onnx, ort_run
from tensorlang.graph.passes import eliminate_dead_code, fold_qdq, infer_types

from tensorlang import graph

helper, TP, nh = onnx.helper, onnx.TensorProto, onnx.numpy_helper
RNG = np.random.default_rng(8)


def _qdq_model(kind: str, w: np.ndarray, relu: bool = False, bias: bool = True,
               x_shape=(1, 8, 7, 7), extra_reader: bool = False, out_zero: int = 100,
               group: int = 1):
    """Q(x) -> DQ -> conv/gemm/matmul(DQ(w) per channel, DQ(b)) [-> relu] -> Q -> DQ."""
    oc = w.shape[0] if kind in ("conv", "gemm") else w.shape[1]
    sx, sy = np.float32(0.05), np.float32(0.2)
    sw = (RNG.random(oc) * 0.02 + 0.002).astype(np.float32)
    inits = [nh.from_array(sx, "sx"), nh.from_array(np.uint8(120), "zx"),
             nh.from_array(w, "wq"), nh.from_array(sw, "sw"),
             nh.from_array(np.zeros(oc, np.int8), "zw"), nh.from_array(sy, "sy"),
             nh.from_array(np.uint8(out_zero), "zy"),
             nh.from_array(RNG.integers(-500, 500, oc).astype(np.int32), "bq"),
             nh.from_array(sx * sw, "sb")]
    w_axis = 1 if kind == "matmul" else 0
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wf"], axis=w_axis),
             helper.make_node("DequantizeLinear", ["bq", "sb"], ["bf"], axis=0)]
    ins = ["xf", "wf"] + (["bf"] if bias and kind != "matmul" else [])
    if kind == "conv":
        nodes.append(helper.make_node("Conv", ins, ["y"], pads=[1, 1, 1, 1], group=group))
    elif kind == "gemm":
        nodes.append(helper.make_node("Gemm", ins, ["y"], transB=1))
    else:
        nodes.append(helper.make_node("MatMul", ins, ["y"]))
    last = "y"
    if relu:
        nodes.append(helper.make_node("Relu", ["y"], ["r"]))
        last = "r"
    nodes += [helper.make_node("QuantizeLinear", [last, "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["out"])]
    outs = [helper.make_tensor_value_info("out", TP.FLOAT, None)]
    if extra_reader:  # the float product also read elsewhere: the pattern must not match
        nodes.append(helper.make_node("Sigmoid", [last], ["side"]))
        outs.append(helper.make_tensor_value_info("side", TP.FLOAT, None))
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TP.FLOAT, x_shape)],
                          outs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _folded_ops(model) -> list[str]:
    g = eliminate_dead_code(fold_qdq(infer_types(graph.from_onnx(model))))
    return [n.op for n in g.nodes]


def _assert_exact(model, x_shape):
    x = (RNG.standard_normal(x_shape) * 3).astype(np.float32)
    got = graph.build(graph.from_onnx(model)).run(x=x)
    want = ort_run(model, {"x": x})
    for k, w in want.items():
        np.testing.assert_array_equal(got[k], w, err_msg=k)


def _acc_dtype(model) -> str:
    g = fold_qdq(infer_types(graph.from_onnx(model)))
    req = next(n for n in g.nodes if n.op == "requantize")
    return req.inputs[0].dtype


@pytest.mark.parametrize("relu", [False, True])
def test_conv_runs_on_the_int8_kernel(relu):
    w = RNG.integers(-128, 128, (20, 8, 3, 3)).astype(np.int8)
    m = _qdq_model("conv", w, relu=relu, out_zero=0 if relu else 100)
    assert _folded_ops(m) == ["quantize_linear", "qlinear_conv2d", "dequantize_linear"]
    _assert_exact(m, (1, 8, 7, 7))


@pytest.mark.parametrize("x_shape", [(2, 5, 40), (1, 3, 2, 40)])
def test_matmul_of_a_3d_activation_runs_its_rows_on_the_int8_kernel(x_shape):
    """A transformer's [batch, sequence, K] activation (pipecat's smart-turn, a QDQ Whisper
    encoder): its rows on dense_integer (was a float matmul, 1.6x onnxruntime's time)."""
    w = RNG.integers(-128, 128, (40, 12)).astype(np.int8)
    m = _qdq_model("matmul", w, x_shape=x_shape)
    ops = _folded_ops(m)
    assert "dense_integer" in ops and "matmul" not in ops and ops.count("requantize") == 1
    _assert_exact(m, x_shape)


def test_matmul_of_a_3d_activation_over_a_symbolic_sequence():
    w = RNG.integers(-128, 128, (40, 12)).astype(np.int8)
    m = _qdq_model("matmul", w, x_shape=(2, "seq", 40))
    gm = graph.build(graph.from_onnx(m))
    for n in (1, 7):
        x = (RNG.standard_normal((2, n, 40)) * 3).astype(np.float32)
        np.testing.assert_array_equal(gm.run(x=x)["out"], ort_run(m, {"x": x})["out"])


def test_grouped_conv_becomes_an_exact_float_product_requantized():
    w = RNG.integers(-128, 128, (16, 4, 3, 3)).astype(np.int8)
    m = _qdq_model("conv", w, group=2)
    ops = _folded_ops(m)
    assert ops.count("requantize") == 1 and "relu" not in ops
    assert _acc_dtype(m) == "float32"  # 127 * 36 * 128 + 500 < 2**24
    _assert_exact(m, (1, 8, 7, 7))


def test_conv_whose_sums_may_pass_2_pow_24_runs_in_int32():
    # 2 groups of 128 x 9 weights, most -128: max |x - 120| * sum |w| ~ 135 * 147000 > 2**24
    w = np.full((16, 128, 3, 3), -128, np.int8)
    w[:, :, 1, 1] = RNG.integers(-128, 128, (16, 128)).astype(np.int8)
    m = _qdq_model("conv", w, x_shape=(1, 256, 5, 5), group=2)
    assert _acc_dtype(m) == "int32"
    _assert_exact(m, (1, 256, 5, 5))


@pytest.mark.parametrize("kind", ["gemm", "matmul"])
def test_gemm_and_matmul(kind):
    w = RNG.integers(-128, 128, (12, 40) if kind == "gemm" else (40, 12)).astype(np.int8)
    m = _qdq_model(kind, w, x_shape=(5, 40))
    ops = _folded_ops(m)
    assert ops.count("requantize") == 1 and "dense_integer" in ops  # the VNNI product
    _assert_exact(m, (5, 40))


def test_value_read_twice_stays_dequantize_float_quantize():
    w = RNG.integers(-128, 128, (16, 8, 3, 3)).astype(np.int8)
    m = _qdq_model("conv", w, extra_reader=True)
    ops = _folded_ops(m)
    assert "requantize" not in ops and ops.count("quantize_linear") == 2
    x = (RNG.standard_normal((1, 8, 7, 7)) * 3).astype(np.float32)
    got = graph.build(graph.from_onnx(m)).run(x=x)
    want = ort_run(m, {"x": x})
    # float conv then quantize: onnxruntime rounds its integer form; one step apart at most
    step = 0.2
    assert np.abs(got["out"] - want["out"]).max() <= step * 1.001
    np.testing.assert_allclose(got["side"], want["side"], rtol=1e-4, atol=1e-5)


def test_bias_with_another_scale_is_not_folded():
    w = RNG.integers(-128, 128, (16, 8, 3, 3)).astype(np.int8)
    m = _qdq_model("conv", w)
    for init in m.graph.initializer:
        if init.name == "sb":
            init.CopyFrom(nh.from_array(nh.to_array(init) * np.float32(2), "sb"))
    assert "requantize" not in _folded_ops(m)
