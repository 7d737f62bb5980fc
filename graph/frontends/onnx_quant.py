"""ONNX import of the quantization operators (issue 22): QuantizeLinear, DequantizeLinear,
QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger and DynamicQuantizeLinear; registered
into :data:`onnx.CONVERTERS` when the importer module loads.

Integer products are exact. With a constant int8 weight without zero point (what
onnxruntime's quantizers write) they run on the library's VNNI kernels: MatMulInteger /
QLinearMatMul on ``dense_integer`` (A's zero point, constant or computed at run time by
DynamicQuantizeLinear, compensated with the weight's column sums) and a QLinearConv of one
group without dilation on ``qlinear_conv2d`` (products, bias and requantization in one
kernel). Otherwise the 8-bit operands are widened to int32 with their zero points subtracted
(``cast`` then ``subtract``; a constant weight is widened at import) and the graph's conv /
dense / matmul accumulate in int32. QLinearConv and QLinearMatMul requantize the accumulator
the way onnxruntime does (the float32 product with x_scale * w_scale / y_scale, rounded half
to even, plus the output zero point, saturated).

A DequantizeLinear of a constant (a QDQ model's weights and biases) stays a node here, not a
folded constant, so that the ``fold_qdq`` pass sees the integer weight and its scale;
``fold_constants`` folds the ones it leaves."""

from __future__ import annotations

import numpy as np

from ..ir import Value
from ..symbolic import num_elements
from .onnx_context import CONVERTERS, _conv, refuse

# zero point / quantized data types per opset (int16/uint16 from opset 21)
_QTYPES = ("int8", "uint8")
_QTYPES_21 = ("int8", "uint8", "int16", "uint16")


def _qtypes(c) -> tuple[str, ...]:
    return _QTYPES_21 if c.opset >= 21 else _QTYPES


def _axis(c, a: dict, rank: int, *params: Value | None) -> int:
    """The quantization axis; ONNX's default (1) matters only for per-axis parameters, so a
    per-tensor one on a rank-1 tensor is not refused for it."""
    axis = int(a.get("axis", 1))
    per_axis = any(v is not None and int(np.prod(v.shape)) > 1 for v in params)
    if not (per_axis or "axis" in a):
        return 0
    if not -rank <= axis < max(rank, 1):
        raise refuse(c, f"axis {axis} is out of range for an input of rank {rank}")
    return axis % max(rank, 1)


def _no_blocks(c, a: dict) -> None:
    if int(a.get("block_size", 0)) != 0:
        raise refuse(c, f"blocked quantization (block_size={a['block_size']}) is not "
                        "supported; per-tensor and per-axis parameters are")


def _check_zero_dtype(c, z: Value | None, allowed: tuple[str, ...], what: str) -> None:
    if z is not None and z.dtype not in allowed:
        raise refuse(c, f"{what} has type {z.dtype}; supported: {', '.join(allowed)}")


def _param(c, v: Value | None, rank: int, axis: int, extent: int, what: str) -> Value | None:
    """A scale or zero point shaped to broadcast over a rank-``rank`` tensor: one element as
    it is, a 1-D one of ``extent`` entries along ``axis`` ([C, 1, ...])."""
    if v is None:
        return None
    n = int(np.prod(v.shape)) if v.shape else 1
    if len(v.shape) > 1:
        raise refuse(c, f"{what} must be a scalar or 1-D, got shape {list(v.shape)}")
    if len(v.shape) == 0 or (n == 1 and rank > 0 and extent != 1):
        return v if len(v.shape) == 0 else c.op("reshape", [v], shape=[])
    if n != extent:
        raise refuse(c, f"{what} has {n} entries but axis {axis} of the data has {extent}")
    shape = [n] + [1] * (rank - axis - 1)
    return c.op("reshape", [v], shape=shape) if len(shape) != 1 else v


def _scale_zero(c, x: Value, s: Value, z: Value | None, axis: int, what: str):
    extent = x.shape[axis] if x.shape else 1
    return (_param(c, s, len(x.shape), axis, extent, f"{what} scale"),
            _param(c, z, len(x.shape), axis, extent, f"{what} zero point"))


@_conv("QuantizeLinear")
def _quantize(c, ins, a):
    x, s = ins[0], ins[1]
    z = ins[2] if len(ins) > 2 else None
    _no_blocks(c, a)
    _check_zero_dtype(c, z, _qtypes(c), "the zero point")
    if x.dtype not in ("float32", "float16", "float64"):
        raise refuse(c, f"x must be a float tensor, got {x.dtype}")
    out = z.dtype if z is not None else _output_dtype(c, a)
    _check_precision(c, a, x)
    s, z = _scale_zero(c, x, s, z, _axis(c, a, len(x.shape), s, z), "the")
    s = s if s.dtype == x.dtype else c.op("cast", [s], dtype=x.dtype)
    return [c.op("quantize_linear", [x, s] + ([z] if z is not None else []), dtype=out)]


def _check_precision(c, a: dict, x: Value) -> None:
    """QuantizeLinear's ``precision`` (opset 23), the type x / y_scale is computed in: x's own
    type is what the kernel divides in (y_scale is cast to it), and the default."""
    from onnx import helper

    code = int(a.get("precision", 0))
    if code and np.dtype(helper.tensor_dtype_to_np_dtype(code)).name != x.dtype:
        raise refuse(c, f"precision {_type_name(code)} is not supported: the division is "
                        f"computed in x's type ({x.dtype})")


def _type_name(code: int) -> str:
    from onnx import helper

    return helper.tensor_dtype_to_string(code).rsplit(".", 1)[-1]


def _output_dtype(c, a: dict) -> str:
    from onnx import helper

    code = int(a.get("output_dtype", 0))
    if code == 0:
        return "uint8"
    d = np.dtype(helper.tensor_dtype_to_np_dtype(code)).name
    if d not in _qtypes(c):
        raise refuse(c, f"output_dtype {d} is not supported; supported: "
                        f"{', '.join(_qtypes(c))}")
    return d


@_conv("DequantizeLinear")
def _dequantize(c, ins, a):
    x, s = ins[0], ins[1]
    z = ins[2] if len(ins) > 2 else None
    _no_blocks(c, a)
    allowed = _qtypes(c) + ("int32",)
    if x.dtype not in allowed:
        raise refuse(c, f"x has type {x.dtype}; supported: {', '.join(allowed)}")
    _check_zero_dtype(c, z, allowed, "the zero point")
    if z is not None and z.dtype != x.dtype:
        raise refuse(c, f"the zero point ({z.dtype}) and x ({x.dtype}) differ in type")
    s, z = _scale_zero(c, x, s, z, _axis(c, a, len(x.shape), s, z), "the")
    # a constant's dequantization stays a node (module doc); nothing else changes
    fold, c.b.fold = c.b.fold, c.b.fold and not x.is_constant
    try:
        y = c.op("dequantize_linear", [x, s] + ([z] if z is not None else []))
    finally:
        c.b.fold = fold
    return [_as_output_dtype(c, a, y)]


def _as_output_dtype(c, a: dict, y: Value) -> Value:
    """DequantizeLinear's ``output_dtype`` (opset 23; the scale's type when absent). A product
    of an 8- or 16-bit integer and a float16 scale is exact in float32, so computing in the
    scale's type and rounding once to the output's is the spec's one rounding."""
    from onnx import helper

    code = int(a.get("output_dtype", 0))
    if not code:
        return y
    d = np.dtype(helper.tensor_dtype_to_np_dtype(code)).name
    if d not in ("float32", "float16"):
        raise refuse(c, f"output_dtype {_type_name(code)} is not supported; supported: FLOAT, "
                        "FLOAT16")
    return y if d == y.dtype else c.op("cast", [y], dtype=d)


# ---------------------------------------------------------------------------- integer products


def _widened(c, v: Value, z: Value | None, axis: int, what: str) -> Value:
    """int32(v) - int32(z), z per tensor or along ``axis``; folded when both are constants."""
    if v.dtype not in _QTYPES:
        raise refuse(c, f"{what} has type {v.dtype}; supported: {', '.join(_QTYPES)}")
    if z is not None and z.dtype != v.dtype:
        raise refuse(c, f"{what}'s zero point ({z.dtype}) and {what} ({v.dtype}) differ in "
                        "type")
    w = c.op("cast", [v], dtype="int32")
    if z is None:
        return w
    extent = v.shape[axis] if v.shape else 1
    z = _param(c, z, len(v.shape), axis, extent, f"{what}'s zero point")
    return c.op("subtract", [w, c.op("cast", [z], dtype="int32")])


def _int_conv(c, ins, a, zx: Value | None, zw: Value | None) -> Value:
    x, w = ins[0], ins[1]
    if len(x.shape) != 4:
        raise refuse(c, f"only 2-D convolutions (NCHW inputs) are supported, got rank "
                        f"{len(x.shape)}")
    xi = _widened(c, x, zx, 1, "x")
    wi = _widened(c, w, zw, 0, "w")
    return CONVERTERS["Conv"](c, [xi, wi], a)[0]


def _int_matmul(c, A: Value, B: Value, za: Value | None, zb: Value | None) -> Value:
    if len(A.shape) < 2 or len(B.shape) < 2:
        raise refuse(c, "1-D operands are not supported; A and B must be at least 2-D")
    if _on_int8_kernel(A, B, za, zb):
        return _dense_integer(c, A, B, za)
    ai = _widened(c, A, za, len(A.shape) - 2, "A")  # A's zero point: per row
    bi = _widened(c, B, zb, len(B.shape) - 1, "B")  # B's: per column
    return CONVERTERS["MatMul"](c, [ai, bi], {})[0]


def _on_int8_kernel(A: Value, B: Value, za: Value | None, zb: Value | None) -> bool:
    """A product the library's VNNI kernel takes: a constant 2-D int8 weight with no zero
    point (quantize_dynamic's and quantize_static's symmetric weights) and one zero point for
    A, constant or computed at run time (DynamicQuantizeLinear's)."""
    return (B.is_constant and len(B.shape) == 2 and B.dtype == "int8" and
            A.dtype in _QTYPES[:2] and (zb is None or (zb.is_constant and not zb.data.any()))
            and (za is None or (za.dtype == A.dtype and int(np.prod(za.shape)) == 1)))


def _dense_integer(c, A: Value, B: Value, za: Value | None) -> Value:
    from tensorlang.ops.quant_kernels import pack_dense_weight

    k, n = B.shape
    rows = num_elements(A.shape[:-1])  # an expression where a batch or sequence is symbolic
    a2 = A if len(A.shape) == 2 else c.op("reshape", [A], shape=[rows, k])
    packed, colsum = pack_dense_weight(np.ascontiguousarray(B.data.T))
    ins = [a2, c.b.const(packed, name=f"{B.name}_packed")]
    if za is not None or A.dtype == "int8":  # the column sums compensate a zero point
        ins.append(c.b.const(colsum, name=f"{B.name}_colsum"))
    if za is not None:
        ins.append(za if len(za.shape) == 0 else c.op("reshape", [za], shape=[]))
    y = c.op("dense_integer", ins, n=int(n))
    return y if len(A.shape) == 2 else c.op("reshape", [y], shape=[*A.shape[:-1], n])


@_conv("ConvInteger")
def _conv_integer(c, ins, a):
    zx = ins[2] if len(ins) > 2 else None
    zw = ins[3] if len(ins) > 3 else None
    return [_int_conv(c, ins[:2], a, zx, zw)]


@_conv("MatMulInteger")
def _matmul_integer(c, ins, a):
    za = ins[2] if len(ins) > 2 else None
    zb = ins[3] if len(ins) > 3 else None
    return [_int_matmul(c, ins[0], ins[1], za, zb)]


def _multiplier(c, sx: Value, sw: Value, sy: Value, what: str) -> np.ndarray:
    """x_scale * w_scale / y_scale in float32, in onnxruntime's order of operations."""
    vals = [c.const_array(v, f"{what} {n}") for v, n in
            ((sx, "x_scale"), (sw, "w_scale"), (sy, "y_scale"))]
    for v, n in zip(vals, ("x_scale", "w_scale", "y_scale")):
        if v.dtype != np.float32:
            raise refuse(c, f"{n} must be float32, got {v.dtype}")
        if v.size > 1 and n != "w_scale":
            raise refuse(c, f"{n} must be a scalar, got shape {list(v.shape)}")
    x, w, y = (np.float32(vals[0].reshape(-1)[0]), vals[1].reshape(-1).astype(np.float32),
               np.float32(vals[2].reshape(-1)[0]))
    return (x * w) / y


def _requantized(c, acc: Value, m: np.ndarray, zy: Value | None, axis: int, out: str):
    rank = len(acc.shape)
    shape = [m.size] + [1] * (rank - axis - 1) if m.size > 1 else []
    mv = c.b.const(m.reshape(shape), name=f"{c.node_name}_multiplier")
    ins = [acc, mv]
    if zy is not None:
        ins.append(_param(c, zy, rank, axis, acc.shape[axis], "y_zero_point"))
    return c.op("requantize", ins, dtype=out)


def _conv_on_int8_kernel(x: Value, zx: Value | None, w: Value, zw: Value | None,
                         a: dict) -> bool:
    """A QLinearConv the library's int8 kernel (qlinear_conv2d) runs whole: 2-D, one group, no
    dilation, explicit pads, a constant int8 weight without zero point, one constant x zero
    point."""
    return (len(x.shape) == 4 and x.dtype in _QTYPES[:2] and w.is_constant and
            w.dtype == "int8" and (zw is None or (zw.is_constant and not zw.data.any())) and
            (zx is None or (zx.is_constant and zx.data.size == 1)) and
            int(a.get("group", 1)) == 1 and all(d == 1 for d in a.get("dilations", [1, 1])) and
            a.get("auto_pad", "NOTSET") in ("NOTSET", ""))


def _qconv_int8(c, x, zx, w, m: np.ndarray, zy: Value | None, bias, a: dict, out: str):
    from tensorlang.ops.quant import pack_qconv_weight

    oc = w.shape[0]
    packed, sums = pack_qconv_weight(w.data)
    zero = zy if zy is not None else c.b.const(np.zeros((), out), name=f"{c.node_name}_yz")
    x_zero = 0 if zx is None else int(zx.data.reshape(-1)[0])
    with_sums = x_zero != 0 or x.dtype == "int8"  # the effective (uint8) zero point is not 0
    ins = [x, c.b.const(packed, name=f"{w.name}_packed"),
           c.b.const(np.broadcast_to(m, (oc,)).copy(), name=f"{c.node_name}_multiplier"),
           zero if len(zero.shape) == 0 else c.op("reshape", [zero], shape=[])]
    ins += [c.b.const(sums, name=f"{w.name}_sums")] if with_sums else []
    ins += [bias] if bias is not None else []
    return c.op("qlinear_conv2d", ins, oc=int(oc), strides=list(a.get("strides", [1, 1])),
                pads=list(a.get("pads", [0, 0, 0, 0])), x_zero=x_zero, dtype=out,
                sums=with_sums, bias=bias is not None)


@_conv("QLinearConv")
def _qlinear_conv(c, ins, a):
    x, sx, zx, w, sw, zw, sy, zy = ins[:8]
    bias = ins[8] if len(ins) > 8 else None
    _check_zero_dtype(c, zy, _QTYPES, "y_zero_point")
    if bias is not None and bias.dtype != "int32":
        raise refuse(c, f"the bias must be int32, got {bias.dtype}")
    if _conv_on_int8_kernel(x, zx, w, zw, a):
        m = _multiplier(c, sx, sw, sy, "QLinearConv's")
        return [_qconv_int8(c, x, zx, w, m, zy, bias, a,
                            zy.dtype if zy is not None else "uint8")]
    acc = _int_conv(c, [x, w], a, zx, zw)
    if bias is not None:
        acc = c.op("add", [acc, c.op("reshape", [bias], shape=[bias.shape[0], 1, 1])])
    m = _multiplier(c, sx, sw, sy, "QLinearConv's")
    out = zy.dtype if zy is not None else "uint8"
    return [_requantized(c, acc, m, zy, 1, out)]


@_conv("QLinearMatMul")
def _qlinear_matmul(c, ins, a):
    A, sa, za, B, sb, zb, sy, zy = ins[:8]
    _check_zero_dtype(c, zy, _QTYPES, "y_zero_point")
    acc = _int_matmul(c, A, B, za, zb)
    m = _multiplier(c, sa, sb, sy, "QLinearMatMul's")
    out = zy.dtype if zy is not None else "uint8"
    return [_requantized(c, acc, m, zy, len(acc.shape) - 1, out)]


@_conv("DynamicQuantizeLinear")
def _dynamic_quantize(c, ins, a):
    """uint8 with a scale and zero point from the run-time range of x (widened to hold 0):
    scale = (max(x, 0) - min(x, 0)) / 255 (1 for an all-zero x, as onnxruntime), zero point =
    saturate(round(-min / scale)), y = saturate(round(x / scale) + zero point), as the ONNX
    specification writes it."""
    x = ins[0]
    if x.dtype != "float32":
        raise refuse(c, f"x must be float32, got {x.dtype}")
    axes = list(range(len(x.shape)))
    zero = c.b.const(np.float32(0.0), name=f"{c.node_name}_zero")
    hi = c.op("maximum", [c.op("reduce_max", [x], axes=axes, keepdims=0), zero])
    lo = c.op("minimum", [c.op("reduce_min", [x], axes=axes, keepdims=0), zero])
    span = c.op("subtract", [hi, lo])
    scale = c.op("divide", [span, c.b.const(np.float32(255.0), name=f"{c.node_name}_255")])
    # an all-zero x has no range: scale 1 (onnxruntime's choice), not 0 (x / 0 is NaN)
    scale = c.op("where", [c.op("equal", [span, zero]),
                           c.b.const(np.float32(1.0), name=f"{c.node_name}_one"), scale])
    zp = c.op("quantize_linear", [c.op("negative", [lo]), scale], dtype="uint8")
    y = c.op("quantize_linear", [x, scale, zp], dtype="uint8")
    return [y, scale, zp]
