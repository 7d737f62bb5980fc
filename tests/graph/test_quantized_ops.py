"""ONNX's quantization operators imported from one-node models against onnxruntime (issue 22):
QuantizeLinear / DequantizeLinear (per tensor and per axis, uint8 and int8, ties rounded half
to even), QLinearConv (u8 x s8 per-channel, s8 x s8, depthwise), QLinearMatMul, MatMulInteger,
ConvInteger and DynamicQuantizeLinear. Integer results are compared exactly: our integer
products are exact and the requantization computes what onnxruntime's does. Refusals
(unsupported zero-point types, axes out of range, mismatched per-axis parameters) name what
was wrong."""

from __future__ import annotations

import numpy as np
import pytest
from graph_testing import onnx, ort_run
from tensorlang.graph.frontends.onnx_context import OnnxImportError

import tensorlang as tl
from tensorlang import graph

helper, TP, nh = onnx.helper, onnx.TensorProto, onnx.numpy_helper
RNG = np.random.default_rng(22)
ELEM = {"float32": TP.FLOAT, "uint8": TP.UINT8, "int8": TP.INT8, "int32": TP.INT32,
        "float16": TP.FLOAT16}


def _model(op, inputs, out_types, inits, opset=13, **attrs):
    """One-node model: inputs as (name, array) fed at run time, inits as (name, array)."""
    names = [n for n, _ in inputs] + [n for n, _ in inits]
    outs = [f"y{k}" for k in range(len(out_types))]
    node = helper.make_node(op, names, outs, **attrs)
    g = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info(n, ELEM[a.dtype.name], a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(o, ELEM[t], None) for o, t in zip(outs, out_types)],
        initializer=[nh.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _check_exact(model, feeds):
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    want = ort_run(model, feeds)
    for k, w in want.items():
        g = got[k]
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=k)


def _scales(n):
    return (RNG.random(n) * 0.05 + 0.005).astype(np.float32)


def _zeros(n, dtype):
    lo, hi = (-20, 20) if dtype == "int8" else (100, 150)
    return RNG.integers(lo, hi, n).astype(dtype)


# ---------------------------------------------------------------------------- Q / DQ


@pytest.mark.parametrize("dtype,axis", [("uint8", None), ("int8", 1), ("uint8", -1)])
def test_quantize_linear(dtype, axis):
    x = (RNG.standard_normal((2, 6, 3, 5)) * 2).astype(np.float32)
    n = 1 if axis is None else x.shape[axis]
    s = _scales(n) if axis is not None else np.float32(0.03)
    z = _zeros(n, dtype) if axis is not None else np.asarray(_zeros(1, dtype)[0])
    attrs = {} if axis is None else {"axis": axis}
    _check_exact(_model("QuantizeLinear", [("x", x)], [dtype], [("s", s), ("z", z)], **attrs),
                 {"x": x})


def test_quantize_linear_rounds_ties_to_even_and_saturates():
    # scale 0.5: x / scale is exact, so k + 0.5 ties are ties; far values saturate
    ties = (np.arange(-40, 40, dtype=np.float32) + 0.5) * np.float32(0.5)
    x = np.concatenate([ties, np.float32([1e4, -1e4, 0.0, 63.75, -64.25])])
    m = _model("QuantizeLinear", [("x", x)], ["int8"],
               [("s", np.float32(0.5)), ("z", np.int8(3))])
    _check_exact(m, {"x": x})
    got = graph.build(graph.from_onnx(m)).run(x=x)["y0"]
    assert got[40] == 3 and got[41] == 5 and got[39] == 3  # 0.5 -> 0, 1.5 -> 2, -0.5 -> -0
    assert got[80] == 127 and got[81] == -128


def test_quantize_linear_without_zero_point_is_uint8():
    x = (RNG.standard_normal((4, 33)) * 3).astype(np.float32)
    _check_exact(_model("QuantizeLinear", [("x", x)], ["uint8"], [("s", np.float32(0.02))]),
                 {"x": x})


@pytest.mark.parametrize("dtype,axis", [("int8", None), ("uint8", 0), ("int8", 2)])
def test_dequantize_linear(dtype, axis):
    x = RNG.integers(0 if dtype == "uint8" else -128, 128 if dtype == "int8" else 256,
                     (3, 4, 7)).astype(dtype)
    n = 1 if axis is None else x.shape[axis]
    s = _scales(n) if axis is not None else np.float32(0.07)
    z = _zeros(n, dtype) if axis is not None else np.asarray(_zeros(1, dtype)[0])
    attrs = {} if axis is None else {"axis": axis}
    _check_exact(_model("DequantizeLinear", [("x", x)], ["float32"], [("s", s), ("z", z)],
                        **attrs), {"x": x})


def test_opset_23_precision_and_output_dtype_vs_onnxruntime():
    """QuantizeLinear's precision (x's own type) and DequantizeLinear's output_dtype (float16
    from a float32 scale: one rounding of the exact product) at opset 23."""
    x = (RNG.standard_normal((3, 8)) * 2).astype(np.float32)
    _check_exact(_model("QuantizeLinear", [("x", x)], ["int8"],
                        [("s", np.float32(0.03)), ("z", np.int8(2))], opset=23,
                        precision=TP.FLOAT), {"x": x})
    q = RNG.integers(-128, 128, (3, 8)).astype(np.int8)
    m = _model("DequantizeLinear", [("x", q)], ["float16"],
               [("s", np.float32(0.0123)), ("z", np.int8(-3))], opset=23,
               output_dtype=TP.FLOAT16)
    got = graph.build(graph.from_onnx(m)).run(x=q)["y0"]
    want = ((q.astype(np.float32) + 3) * np.float32(0.0123)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,dtype,attrs,match", [
    ("QuantizeLinear", "float32", {"precision": TP.FLOAT16},
     r"precision FLOAT16 is not supported: the division is computed in x's type \(float32\)"),
    ("DequantizeLinear", "int8", {"output_dtype": TP.DOUBLE},
     "output_dtype DOUBLE is not supported; supported: FLOAT, FLOAT16"),
])
def test_opset_23_attributes_refused(op, dtype, attrs, match):
    x = np.zeros((2, 3), dtype)
    z = np.int8(0)
    with pytest.raises(OnnxImportError, match=match):
        _import(op, [("x", x)], [("s", np.float32(0.1)), ("z", z)], opset=23, **attrs)


def test_dequantize_linear_int32_and_constant_input():
    x = RNG.integers(-(2 ** 20), 2 ** 20, (5, 9)).astype(np.int32)
    _check_exact(_model("DequantizeLinear", [("x", x)], ["float32"], [("s", np.float32(1e-3))]),
                 {"x": x})
    # a constant's dequantization (a QDQ weight) is kept as a node, then folded
    w = RNG.integers(-128, 128, (4, 6)).astype(np.int8)
    node = helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0)
    add = helper.make_node("Add", ["x", "wf"], ["y0"])
    g = helper.make_graph([node, add], "dq", [helper.make_tensor_value_info("x", TP.FLOAT, [4, 6])],
                          [helper.make_tensor_value_info("y0", TP.FLOAT, None)],
                          initializer=[nh.from_array(w, "w"), nh.from_array(_scales(4), "s"),
                                       nh.from_array(_zeros(4, "int8"), "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    gi = graph.from_onnx(m)
    assert [n.op for n in gi.nodes] == ["dequantize_linear", "add"]
    _check_exact(m, {"x": RNG.standard_normal((4, 6)).astype(np.float32)})


# ---------------------------------------------------------------------------- integer products


def _qconv_inits(x_dtype, w_dtype, oc, cg, k, per_channel):
    w = RNG.integers(-128 if w_dtype == "int8" else 0, 128 if w_dtype == "int8" else 256,
                     (oc, cg, k, k)).astype(w_dtype)
    ws = _scales(oc) if per_channel else np.float32(0.004)
    wz = np.zeros(oc if per_channel else (), w_dtype)
    return [("xs", np.float32(0.02)), ("xz", np.asarray(_zeros(1, x_dtype)[0])), ("w", w),
            ("ws", ws), ("wz", wz), ("ys", np.float32(0.25)),
            ("yz", np.asarray(_zeros(1, x_dtype)[0])),
            ("b", RNG.integers(-3000, 3000, oc).astype(np.int32))]


@pytest.mark.parametrize("x_dtype,per_channel,group,stride", [
    ("uint8", True, 1, 1), ("uint8", False, 1, 2), ("int8", True, 1, 1), ("uint8", True, 8, 1),
    ("uint8", True, 1, 3)])
def test_qlinear_conv(x_dtype, per_channel, group, stride):
    c, oc = 8, 8 if group > 1 else 16
    x = RNG.integers(-128 if x_dtype == "int8" else 0, 128 if x_dtype == "int8" else 256,
                     (1, c, 9, 9)).astype(x_dtype)
    inits = _qconv_inits(x_dtype, "int8", oc, c // group, 3, per_channel)
    if stride == 3:  # x's zero point 0 and no bias: the kernel without compensation
        inits = [(n, np.uint8(0) if n == "xz" else a) for n, a in inits if n != "b"]
    m = _model("QLinearConv", [("x", x)], [x_dtype], inits, pads=[1, 1, 1, 1],
               strides=[stride, stride], group=group)
    # one group: the library's int8 kernel runs it whole; grouped: the widened int32 conv
    on_kernel = "qlinear_conv2d" in [n.op for n in graph.from_onnx(m).nodes]
    assert on_kernel == (group == 1)
    _check_exact(m, {"x": x})


@pytest.mark.parametrize("b_dtype", ["uint8", "int8"])
def test_qlinear_matmul(b_dtype):
    a = RNG.integers(0, 256, (2, 5, 24)).astype(np.uint8)
    b = RNG.integers(-128 if b_dtype == "int8" else 0, 128 if b_dtype == "int8" else 256,
                     (24, 17)).astype(b_dtype)
    inits = [("as", np.float32(0.03)), ("az", np.uint8(120)), ("b", b), ("bs", np.float32(0.01)),
             ("bz", np.asarray(_zeros(1, b_dtype)[0])), ("ys", np.float32(0.6)),
             ("yz", np.uint8(128))]
    node_inputs = [("a", a)]
    m = _model("QLinearMatMul", node_inputs, ["uint8"], inits)
    _check_exact(m, {"a": a})


def test_matmul_integer_with_per_column_zero_points():
    a = RNG.integers(0, 256, (3, 7, 40)).astype(np.uint8)
    b = RNG.integers(-128, 128, (40, 12)).astype(np.int8)
    m = _model("MatMulInteger", [("a", a)], ["int32"],
               [("b", b), ("az", np.uint8(131)), ("bz", _zeros(12, "int8"))])
    _check_exact(m, {"a": a})


@pytest.mark.parametrize("a_dtype,k,zero", [("uint8", 64, True), ("int8", 37, True),
                                           ("uint8", 16, False)])
def test_matmul_integer_on_the_int8_kernel(a_dtype, k, zero):
    """A constant int8 weight without zero point runs on the library's VNNI product
    (dense_integer: packed weight, zero point compensated with its column sums); int8 A is
    shifted into uint8 and a K that is not a multiple of 4 zero padded inside it."""
    lo, hi = (0, 256) if a_dtype == "uint8" else (-128, 128)
    a = RNG.integers(lo, hi, (2, 9, k)).astype(a_dtype)
    b = RNG.integers(-128, 128, (k, 33)).astype(np.int8)
    inits = [("b", b)] + ([("az", np.asarray(_zeros(1, a_dtype)[0]))] if zero else [])
    m = _model("MatMulInteger", [("a", a)], ["int32"], inits)
    assert "dense_integer" in [n.op for n in graph.from_onnx(m).nodes]
    _check_exact(m, {"a": a})


def test_matmul_integer_both_at_run_time():
    a = RNG.integers(0, 256, (6, 20)).astype(np.uint8)
    b = RNG.integers(0, 256, (20, 9)).astype(np.uint8)
    m = _model("MatMulInteger", [("a", a), ("b", b)], ["int32"], [("az", np.uint8(7))])
    _check_exact(m, {"a": a, "b": b})


def test_conv_integer():
    x = RNG.integers(0, 256, (2, 4, 8, 8)).astype(np.uint8)
    w = RNG.integers(0, 256, (6, 4, 3, 3)).astype(np.uint8)
    m = _model("ConvInteger", [("x", x)], ["int32"],
               [("w", w), ("xz", np.uint8(128)), ("wz", np.uint8(3))], pads=[0, 1, 2, 1])
    _check_exact(m, {"x": x})


@pytest.mark.parametrize("shift", [0.0, 3.0, None])  # around 0; all positive; all zero
def test_dynamic_quantize_linear(shift):
    x = (RNG.standard_normal((4, 3, 10)) + (shift or 0)).astype(np.float32)
    x = x if shift is not None else np.zeros_like(x)
    _check_exact(_model("DynamicQuantizeLinear", [("x", x)], ["uint8", "float32", "uint8"], []),
                 {"x": x})


# ---------------------------------------------------------------------------- refusals


def _import(op, inputs, inits, opset=13, **attrs):
    return graph.from_onnx(_model(op, inputs, ["float32"], inits, opset=opset, **attrs))


def test_refuses_unsupported_zero_point_type():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(OnnxImportError, match=r"zero point has type int32; supported: int8, "
                                              r"uint8"):
        _import("QuantizeLinear", [("x", x)], [("s", np.float32(0.1)), ("z", np.int32(0))])


def test_refuses_axis_out_of_range():
    x = np.zeros((2, 3), np.int8)
    with pytest.raises(OnnxImportError, match=r"axis 2 is out of range for an input of rank 2"):
        _import("DequantizeLinear", [("x", x)], [("s", _scales(3)), ("z", _zeros(3, "int8"))],
                axis=2)


def test_refuses_per_axis_parameter_of_wrong_length():
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(OnnxImportError, match=r"scale has 5 entries but axis 1 of the data has 3"):
        _import("QuantizeLinear", [("x", x)], [("s", _scales(5)), ("z", _zeros(5, "uint8"))])


def test_refuses_blocked_quantization():
    x = np.zeros((4, 8), np.float32)
    with pytest.raises(OnnxImportError, match=r"blocked quantization \(block_size=4\)"):
        _import("QuantizeLinear", [("x", x)], [("s", np.ones((4, 2), np.float32)),
                                               ("z", np.zeros((4, 2), np.uint8))],
                opset=21, axis=1, block_size=4)


def test_refuses_non_integer_bias_and_run_time_scales():
    x = np.zeros((1, 2, 4, 4), np.uint8)
    inits = _qconv_inits("uint8", "int8", 2, 2, 1, False)
    inits[-1] = ("b", np.zeros(2, np.float32))
    with pytest.raises(OnnxImportError, match=r"the bias must be int32, got float32"):
        _import("QLinearConv", [("x", x)], inits)
    a = np.zeros((2, 3), np.uint8)
    b = np.zeros((3, 2), np.uint8)
    with pytest.raises(OnnxImportError, match=r"x_scale must be known at compile time"):
        _import("QLinearMatMul", [("a", a), ("as", np.float32(1.0))],
                [("az", np.uint8(0)), ("b", b), ("bs", np.float32(1)), ("bz", np.uint8(0)),
                 ("ys", np.float32(1)), ("yz", np.uint8(0))])


def test_library_refusals():
    x = tl.placeholder((4, 3), dtype="int32", name="x")
    s = tl.placeholder((1,), name="s")
    with pytest.raises(ValueError, match=r"quantize_linear: x must be a float tensor, got int32"):
        tl.ops.quantize_linear(x, s)
    f = tl.placeholder((4, 3), name="f")
    with pytest.raises(ValueError, match=r"dtype must be one of int8, uint8, int16, uint16, "
                                         r"got int32"):
        tl.ops.quantize_linear(f, s, dtype="int32")
    with pytest.raises(ValueError, match=r"requantize: acc must be int32 \(or float32 holding "
                                         r"integers\), got float64"):
        tl.ops.requantize(tl.placeholder((4, 3), dtype="float64", name="f64"), s)
    with pytest.raises(ValueError, match=r"must broadcast to x's shape"):
        tl.ops.dequantize_linear(x, tl.placeholder((2, 4, 3), name="s3"))


@pytest.mark.parametrize("target", [
    "llvm -mattr=-avx512vnni",
    pytest.param("llvm -mattr=-avx512vnni,-avx512bw", marks=pytest.mark.slow)])
def test_int8_kernels_without_vnni_stay_exact(target):
    """A CPU without AVX-512 VNNI (simulated by the target string) runs the kernels' fallback
    (vpmaddwd, or plain widening without AVX-512BW): the same integers as onnxruntime."""
    x = RNG.integers(0, 256, (1, 8, 6, 6)).astype(np.uint8)
    m = _model("QLinearConv", [("x", x)], ["uint8"], _qconv_inits("uint8", "int8", 16, 8, 3, True),
               pads=[1, 1, 1, 1])
    gm = graph.build(graph.from_onnx(m), target=target)
    np.testing.assert_array_equal(gm.run(x=x)["y0"], ort_run(m, {"x": x})["y0"])
    a = RNG.integers(0, 256, (5, 24)).astype(np.uint8)
    m = _model("MatMulInteger", [("a", a)], ["int32"],
               [("b", RNG.integers(-128, 128, (24, 20)).astype(np.int8)), ("az", np.uint8(9))])
    gm = graph.build(graph.from_onnx(m), target=target)
    np.testing.assert_array_equal(gm.run(a=a)["y0"], ort_run(m, {"a": a})["y0"])


def test_int8_kernel_ops_refuse_bad_arguments():
    a = tl.placeholder((4, 40), dtype="uint8", name="a")
    wp = tl.placeholder((2, 10, 16, 4), dtype="int8", name="wp")
    with pytest.raises(ValueError, match=r"w_packed must be pack_dense_weight's int8 \[1, 10, "
                                         r"16, 4\] for n=9, K=40, got int8\[2, 10, 16, 4\]"):
        tl.ops.dense_integer(a, wp, None, 9)
    z = tl.placeholder((1,), dtype="uint8", name="z")
    with pytest.raises(ValueError, match=r"w_colsum is needed with a zero point or an int8 a"):
        tl.ops.dense_integer(a, wp, None, 20, z)
    with pytest.raises(ValueError, match=r"a must be a 2-D uint8 or int8 tensor, got float32"):
        tl.ops.dense_integer(tl.placeholder((4, 40), name="f"), wp, None, 20)
    x = tl.placeholder((1, 16, 5, 5), dtype="uint8", name="x")
    w = tl.placeholder((2, 1, 3, 3, 4, 16, 4), dtype="int8", name="w")
    m = tl.placeholder((20,), name="m")
    with pytest.raises(ValueError, match=r"20 output channels a multiple of 16"):
        tl.ops.qlinear_conv2d(x, w, None, None, m, z, 20, blocked_out=True)
    with pytest.raises(ValueError, match=r"w_packed \[2, 1, 3, 3, 4, 16, 4\] is not "
                                         r"pack_conv_weight's layout for 40 output"):
        tl.ops.qlinear_conv2d(x, w, None, None, m, z, 40)
    with pytest.raises(ValueError, match=r"w_sums is needed with a zero point \(3 in uint8\)"):
        tl.ops.qlinear_conv2d(x, w, None, None, m, z, 20, x_zero=3)
