"""Quantization operators (issue 22), with ONNX's semantics: ``quantize_linear`` (float ->
int8/uint8: round half to even, then saturate), ``dequantize_linear`` (int -> float) and
``requantize`` (an int32 accumulator -> int8/uint8 through a float multiplier, the way
onnxruntime's QLinearConv/QLinearMatMul requantize: the product in float32, rounded half to even).

Scales and zero points broadcast against the data as numpy does: a per-tensor parameter is a
one-element tensor, a per-axis one is shaped to broadcast along its axis (``[C, 1, 1]`` for
axis 1 of an NCHW tensor); :func:`per_axis_shape` gives that shape.

The numpy references at the end (``*_ref``) are what the tests and the graph's constant folding
compare against; ``matmul_integer_ref`` and ``conv_integer_ref`` are the exact int32 products of
ONNX's MatMulInteger / ConvInteger."""

from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import const
from ..te.tensor import Tensor
from ._base import BROADCAST, ELEMWISE, broadcast_index, broadcast_shapes, check_tensor, op_compute

# the integer types a quantized tensor may have (ONNX QuantizeLinear's outputs up to int16)
QUANT_DTYPES = ("int8", "uint8", "int16", "uint16")


def _check_quant_dtype(op: str, what: str, d: str) -> str:
    d = dt.canonical(d)
    if d not in QUANT_DTYPES:
        raise ValueError(f"{op}: {what} must be one of {', '.join(QUANT_DTYPES)}, got {d}")
    return d


def _limits(d: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(d))
    return int(info.min), int(info.max)


def _check_params(op: str, x: Tensor, scale: Tensor, zero_point: Tensor | None) -> tuple:
    check_tensor(op, "x", x)
    check_tensor(op, "scale", scale)
    if not dt.is_float(scale.dtype):
        raise ValueError(f"{op}: scale must be a float tensor, got {scale.dtype}")
    shapes = [x.shape, scale.shape]
    if zero_point is not None:
        check_tensor(op, "zero_point", zero_point)
        if not dt.is_int(zero_point.dtype):
            raise ValueError(f"{op}: zero_point must be an integer tensor, got "
                             f"{zero_point.dtype}")
        shapes.append(zero_point.shape)
    shape = broadcast_shapes(op, *shapes)
    if len(shape) != x.ndim:
        raise ValueError(f"{op}: scale and zero_point must broadcast to x's shape "
                         f"{tuple(x.shape)}, not widen it to rank {len(shape)}")
    return shape


def _kind(x: Tensor, *params) -> str:
    """ELEMWISE when every parameter has x's shape (an instance of a BROADCAST op)."""
    same = all(p is None or tuple(p.shape) == tuple(x.shape) for p in params)
    return ELEMWISE if same else BROADCAST


def _at(t: Tensor | None, idx, d: str, default=0):
    if t is None:
        return const(default, d)
    v = t[broadcast_index(t, idx)]
    return v if v.dtype == d else te.cast(v, d)


def _saturate(v, zero, lo: int, hi: int, fd: str, out: str):
    """cast(clip(v + zero, lo, hi)) with v already rounded (integral in float ``fd``)."""
    v = v + zero
    return te.cast(te.min(te.max(v, const(float(lo), fd)), const(float(hi), fd)), out)


def quantize_linear(x: Tensor, scale: Tensor, zero_point: Tensor | None = None,
                    dtype: str | None = None) -> Tensor:
    """ONNX QuantizeLinear: ``saturate(round_half_even(x / scale) + zero_point)`` in ``dtype``
    (the zero point's dtype when given, else uint8). The division is a true float division, as
    onnxruntime computes it (not a multiplication by 1 / scale, which rounds differently)."""
    op = "quantize_linear"
    shape = _check_params(op, x, scale, zero_point)
    if not dt.is_float(x.dtype):
        raise ValueError(f"{op}: x must be a float tensor, got {x.dtype}")
    out = _check_quant_dtype(op, "dtype", dtype or (zero_point.dtype if zero_point is not None
                                                    else "uint8"))
    if zero_point is not None and dt.canonical(zero_point.dtype) != out:
        raise ValueError(f"{op}: zero_point is {zero_point.dtype} but the output is {out}: "
                         "they must be the same type")
    fd = x.dtype
    lo, hi = _limits(out)

    def f(*i):
        q = te.round(x[i] / _at(scale, i, fd))
        return _saturate(q, _at(zero_point, i, fd), lo, hi, fd, out)

    return op_compute(op, shape, f, _kind(x, scale, zero_point))


def dequantize_linear(x: Tensor, scale: Tensor, zero_point: Tensor | None = None) -> Tensor:
    """ONNX DequantizeLinear: ``(x - zero_point) * scale`` in the scale's float type; the
    subtraction in int32 (exact), then one float multiplication, as onnxruntime does."""
    op = "dequantize_linear"
    shape = _check_params(op, x, scale, zero_point)
    if not dt.is_int(x.dtype) or dt.bits(x.dtype) > 32:
        raise ValueError(f"{op}: x must be an integer tensor of at most 32 bits, got {x.dtype}")
    fd = scale.dtype

    def f(*i):
        d = x[i] if x.dtype == "int32" else te.cast(x[i], "int32")
        if zero_point is not None:
            d = d - _at(zero_point, i, "int32")
        return te.cast(d, fd) * _at(scale, i, fd)

    return op_compute(op, shape, f, _kind(x, scale, zero_point))


def requantize(acc: Tensor, multiplier: Tensor, zero_point: Tensor | None = None,
               dtype: str | None = None, relu: bool = False) -> Tensor:
    """An integer conv/matmul's accumulator (bias included) requantized:
    ``saturate(round_half_even(float32(acc) * multiplier) + zero_point)``, multiplier =
    x_scale * w_scale / y_scale (per tensor or per output channel). ``relu`` clamps below at
    the zero point (a ReLU between the float op and its quantization). ``acc`` is int32, or
    float32 holding the exact integer sum (a float conv/matmul of small integers whose every
    partial sum stays below 2**24, which the graph's fold_qdq pass proves before using it)."""
    op = "requantize"
    shape = _check_params(op, acc, multiplier, zero_point)
    if acc.dtype not in ("int32", "float32"):
        raise ValueError(f"requantize: acc must be int32 (or float32 holding integers), got "
                         f"{acc.dtype}")
    out = _check_quant_dtype(op, "dtype", dtype or (zero_point.dtype if zero_point is not None
                                                    else "uint8"))
    fd = multiplier.dtype
    lo, hi = _limits(out)

    def f(*i):
        a = acc[i] if acc.dtype == fd else te.cast(acc[i], fd)
        q = te.round(a * _at(multiplier, i, fd))
        zero = _at(zero_point, i, fd)
        if relu:
            q = te.max(q, const(0.0, fd))
        return _saturate(q, zero, lo, hi, fd, out)

    return op_compute(op, shape, f, _kind(acc, multiplier, zero_point), relu=bool(relu))


def per_axis_shape(param_len: int, rank: int, axis: int) -> tuple[int, ...]:
    """The shape a per-axis parameter of ``param_len`` entries takes to broadcast along
    ``axis`` of a rank-``rank`` tensor: [C] + [1] * (rank - axis - 1)."""
    return (param_len,) + (1,) * (rank - axis - 1)


# ----------------------------------------------------------------------------- numpy references


def _np_round_sat(v: np.ndarray, zero, out: str) -> np.ndarray:
    lo, hi = _limits(out)
    return np.clip(np.rint(v) + np.asarray(zero, v.dtype), lo, hi).astype(out)


def quantize_ref(x, scale, zero_point=None, dtype=None) -> np.ndarray:
    d = dtype or (np.asarray(zero_point).dtype.name if zero_point is not None else "uint8")
    x = np.asarray(x)
    zero = 0 if zero_point is None else np.asarray(zero_point).astype(x.dtype)
    return _np_round_sat(x / np.asarray(scale, x.dtype), zero, d)


def dequantize_ref(x, scale, zero_point=None) -> np.ndarray:
    scale = np.asarray(scale)
    d = np.asarray(x).astype(np.int32)
    if zero_point is not None:
        d = d - np.asarray(zero_point).astype(np.int32)
    return d.astype(scale.dtype) * scale


def requantize_ref(acc, multiplier, zero_point=None, dtype=None, relu=False) -> np.ndarray:
    d = dtype or (np.asarray(zero_point).dtype.name if zero_point is not None else "uint8")
    m = np.asarray(multiplier)
    v = np.rint(np.asarray(acc).astype(m.dtype) * m)
    if relu:
        v = np.maximum(v, 0)
    zero = 0 if zero_point is None else np.asarray(zero_point).astype(m.dtype)
    return _np_round_sat(v, zero, d)


def matmul_integer_ref(a, b, a_zero=0, b_zero=0) -> np.ndarray:
    """ONNX MatMulInteger: (a - a_zero) @ (b - b_zero) exactly, in int32 (int64 inside)."""
    a = np.asarray(a).astype(np.int64) - np.asarray(a_zero).astype(np.int64)
    b = np.asarray(b).astype(np.int64) - np.asarray(b_zero).astype(np.int64)
    return np.matmul(a, b).astype(np.int32)


def conv_integer_ref(x, w, x_zero=0, w_zero=0, strides=(1, 1), pads=(0, 0, 0, 0),
                     dilations=(1, 1), groups=1) -> np.ndarray:
    """ONNX ConvInteger (2-D, NCHW): the exact int32 convolution of (x - x_zero) with
    (w - w_zero); w_zero may be per output channel. Padding is with the zero point (0 after
    the subtraction), as ONNX specifies."""
    x = np.asarray(x).astype(np.int64) - np.asarray(x_zero).astype(np.int64)
    wz = np.asarray(w_zero).astype(np.int64)
    w = np.asarray(w).astype(np.int64) - (wz.reshape(-1, 1, 1, 1) if wz.ndim else wz)
    n = x.shape[0]
    oc, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    x = np.pad(x, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    oh = (x.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow), np.int64)
    og = oc // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum(
                    "nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    return out.astype(np.int32)


__all__ = ["QUANT_DTYPES", "dequantize_linear", "per_axis_shape", "quantize_linear",
           "requantize"]
