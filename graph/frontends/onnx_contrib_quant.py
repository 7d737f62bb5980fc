"""ONNX import of onnxruntime's quantized contrib operators (``com.microsoft``): what
``quantize_static(..., quant_format=QuantFormat.QOperator)`` writes beside the default
domain's QLinearConv and QLinearMatMul (onnx_quant.py).

QGemm is an integer product like QLinearMatMul (onnx_quant's int32 accumulation, on the VNNI
kernel where it applies, then onnxruntime's requantization, or a float output without
y_scale). The element-wise and pooling ones compute what onnxruntime's kernels compute in
float (its lookup tables for Sigmoid / LeakyRelu, its float sums for Add / Mul and the
pools): dequantized inputs, the float op, quantized to the output's scale and zero point;
graph.passes' fold_qdq may turn those chains back into integer kernels."""

from __future__ import annotations

import numpy as np

from ..ir import Value, freeze
from .onnx_context import CONVERTERS, _conv_in, refuse
from .onnx_contrib import MS, _opt
from .onnx_quant import _int_matmul, _multiplier, _requantized


def _dequantized(c, ins: list, i: int) -> Value:
    """Input triple (x, scale, zero point) at ``i`` as float."""
    x, s, z = ins[i], _opt(ins, i + 1), _opt(ins, i + 2)
    if s is None:
        raise refuse(c, f"input {i + 1} (the scale of input {i}) is required")
    return CONVERTERS["DequantizeLinear"](c, [x, s] + ([z] if z is not None else []), {})[0]


def _quantized(c, y: Value, s: Value | None, z: Value | None) -> Value:
    if s is None:
        raise refuse(c, "the output's scale is required")
    return CONVERTERS["QuantizeLinear"](c, [y, s] + ([z] if z is not None else []), {})[0]


@_conv_in(MS, "QLinearAdd", "QLinearMul")
def _qlinear_binary(c, ins, a):
    """A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp."""
    op = "add" if c.op_type == "QLinearAdd" else "multiply"
    y = c.op(op, [_dequantized(c, ins, 0), _dequantized(c, ins, 3)])
    return [_quantized(c, y, _opt(ins, 6), _opt(ins, 7))]


@_conv_in(MS, "QLinearSigmoid", "QLinearLeakyRelu")
def _qlinear_unary(c, ins, a):
    """X, X_scale, X_zp, Y_scale, Y_zp."""
    x = _dequantized(c, ins, 0)
    y = c.op("sigmoid", [x]) if c.op_type == "QLinearSigmoid" else \
        c.op("leaky_relu", [x], alpha=float(a.get("alpha", 0.01)))
    return [_quantized(c, y, _opt(ins, 3), _opt(ins, 4))]


@_conv_in(MS, "QLinearConcat")
def _qlinear_concat(c, ins, a):
    """Y_scale, Y_zp, then (X, X_scale, X_zp) per input."""
    if "axis" not in a:
        raise refuse(c, "the axis attribute is required")
    if len(ins) < 5 or (len(ins) - 2) % 3:
        raise refuse(c, f"expects Y_scale, Y_zero_point and (X, X_scale, X_zero_point) per "
                        f"input, got {len(ins)} inputs")
    xs = [_dequantized(c, ins, i) for i in range(2, len(ins), 3)]
    rank = len(xs[0].shape)
    axis = int(a["axis"])
    if not -rank <= axis < rank:
        raise refuse(c, f"axis {axis} is out of range for inputs of rank {rank}")
    return [_quantized(c, c.op("concat", xs, axis=axis % rank), ins[0], ins[1])]


@_conv_in(MS, "QLinearAveragePool", "QLinearGlobalAveragePool")
def _qlinear_pool(c, ins, a):
    """X, x_scale, x_zp, y_scale, y_zp; channels first only."""
    if a.get("channels_last", 0):
        raise refuse(c, "channels_last=1 (NHWC) is not supported")
    x = _dequantized(c, ins, 0)
    if len(x.shape) < 3:
        raise refuse(c, f"the input {list(x.shape)} must have rank >= 3 (N, C, spatial)")
    if c.op_type == "QLinearGlobalAveragePool":
        y = c.op("global_avg_pool", [x])
    else:
        attrs = {k: v for k, v in a.items() if k != "channels_last"}
        y = CONVERTERS["AveragePool"](c, [x], attrs)[0]
    return [_quantized(c, y, _opt(ins, 3), _opt(ins, 4))]


@_conv_in(MS, "QGemm")
def _qgemm(c, ins, a):
    """alpha * (A - a_zp) @ (B - b_zp) * a_scale * b_scale (+ C, int32 at that scale), then
    requantized to y_scale / y_zp, or float without y_scale."""
    A, sa, za, B, sb, zb = (list(ins) + [None] * 6)[:6]
    C, sy, zy = _opt(ins, 6), _opt(ins, 7), _opt(ins, 8)
    if sa is None or sb is None:
        raise refuse(c, "a_scale and b_scale are required")
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise refuse(c, f"A {list(A.shape)} and B {list(B.shape)} must be 2-D")
    if a.get("transA", 0):
        A = c.op("transpose", [A], perm=[1, 0])
    if a.get("transB", 0):  # B's per-channel parameters follow its N axis either way
        B = c.b.const(freeze(np.ascontiguousarray(B.data.T)), name=f"{B.name}_kn") \
            if B.is_constant else c.op("transpose", [B], perm=[1, 0])
    acc = _int_matmul(c, A, B, za, zb)
    if C is not None:
        if C.dtype != "int32":
            raise refuse(c, f"C must be int32 (at a_scale * b_scale), got {C.dtype}")
        acc = c.op("add", [acc, C])
    alpha = np.float32(a.get("alpha", 1.0))
    if sy is None:
        scale = _multiplier(c, sa, sb, c.b.const(np.float32(1.0)), "QGemm's") * alpha
        return [c.op("multiply", [c.op("cast", [acc], dtype="float32"),
                                  c.b.const(scale, name=f"{c.node_name}_scale")])]
    m = _multiplier(c, sa, sb, sy, "QGemm's") * alpha
    out = zy.dtype if zy is not None else "uint8"
    return [_requantized(c, acc, m, zy, 1, out)]
