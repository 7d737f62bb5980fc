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
from ..ir.expr import as_int, const
from ..te.tensor import Tensor
from . import quant_kernels as QK
from ._base import (
    BROADCAST,
    ELEMWISE,
    OUT_ELEMWISE_FUSABLE,
    broadcast_index,
    broadcast_shapes,
    check_tensor,
    op_compute,
)

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


def dense_integer(a: Tensor, w_packed: Tensor, w_colsum: Tensor | None, n: int,
                  a_zero: Tensor | None = None) -> Tensor:
    """ONNX MatMulInteger with a constant int8 weight: ``y[i, j] = sum_k (a[i, k] - a_zero) *
    w[j, k]`` exactly in int32, [M, n]. ``w_packed`` / ``w_colsum`` are
    ``quant_kernels.pack_dense_weight(w)`` of the weight as [n, K]; ``a_zero`` a one-element
    tensor of a's type read at run time (DynamicQuantizeLinear's zero point), or None.

    The products are quant_kernels.dense_int8's (the same compute, so its schedule and the
    vpdpbusd intrinsic apply: a uint8 copy of a when a is int8, shifted by 128, or K is not a
    multiple of 4), declared here as this op's parts so the graph's default schedule places
    them; the zero point (run time, + 128 for int8) is compensated as ``zero * w_colsum[j]``."""
    op = "dense_integer"
    check_tensor(op, "a", a)
    if a.dtype not in ("uint8", "int8") or a.ndim != 2:
        raise ValueError(f"{op}: a must be a 2-D uint8 or int8 tensor, got {a.dtype}{a.ndim}-D")
    # rows may be a shape expression (a symbolic batch or sequence); K fixes the weight
    m, k = a.shape[0], as_int(a.shape[1])
    if k is None:
        raise ValueError(f"{op}: a's reduction axis must have a static size, got {a.shape[1]}")
    nb, kb, ob, ib = (as_int(d) for d in check_tensor(op, "w_packed", w_packed).shape)
    if w_packed.dtype != "int8" or (nb, kb, ob, ib) != (-(-n // 16), -(-k // 4), 16, 4):
        raise ValueError(f"{op}: w_packed must be pack_dense_weight's int8 [{-(-n // 16)}, "
                         f"{-(-k // 4)}, 16, 4] for n={n}, K={k}, got {w_packed.dtype}"
                         f"{[nb, kb, ob, ib]}")
    if w_colsum is None and (a_zero is not None or a.dtype == "int8"):
        raise ValueError(f"{op}: w_colsum is needed with a zero point or an int8 a")
    if a_zero is not None and (check_tensor(op, "a_zero", a_zero).dtype != a.dtype or
                               tuple(as_int(d) for d in a_zero.shape) not in ((1,), ())):
        raise ValueError(f"{op}: a_zero must be one {a.dtype} element, got {a_zero.dtype}"
                         f"{list(a_zero.shape)}")
    shift = 128 if a.dtype == "int8" else 0
    au = a if shift == 0 and k == kb * 4 else _as_uint8(a, kb * 4, shift)
    ko, ki = te.reduce_axis((0, kb), name="ko"), te.reduce_axis((0, 4), name="ki")
    acc = op_compute("dense_integer_acc", (m, nb, 16), lambda i, jo, ji: te.sum(
        au[i, ko * 4 + ki].astype("int32") * w_packed[jo, ko, ji, ki].astype("int32"),
        axis=[ko, ki]), "opaque", name="dense_integer.acc")

    def f(i, j):
        v = acc[i, j // 16, j % 16]
        zero = const(shift, "int32")
        if a_zero is not None:
            zero = te.cast(a_zero[(0,) * a_zero.ndim], "int32") + zero
        return v if a_zero is None and not shift else v - zero * w_colsum[j]

    return op_compute(op, (m, n), f, OUT_ELEMWISE_FUSABLE)


def _as_uint8(a: Tensor, kp: int, shift: int) -> Tensor:
    """a in uint8 (int8 shifted by 128) with its reduction axis zero padded to kp."""
    k = as_int(a.shape[1])

    def f(i, kk):
        v = (a[i, kk].astype("int32") + shift).astype("uint8") if shift else a[i, kk]
        return te.if_then_else(kk < k, v, const(0, "uint8")) if kp != k else v

    return op_compute("dense_integer_u8", (a.shape[0], kp), f, "opaque",
                      name="dense_integer.u8")


def schedule_dense_integer(s, y: Tensor, out: Tensor | None = None, rows: int = 4,
                           blocks: int = 4, parallel: bool = True) -> None:
    """dense_integer's anchor schedule: quant_kernels' dense_int8 schedule (tiles of rows x
    blocks zmm accumulators, the innermost 16 x 4 block one vpdpbusd) on its stages, with
    ``out``, an elementwise tail of y's shape (the graph's fused dequantization, bias,
    activation), finishing each tile in registers. A tail of another shape is a pass of its
    own after the products."""
    same = out is not None and tuple(as_int(d) for d in out.shape) == tuple(
        as_int(d) for d in y.shape) and not out.op.reduce_axis
    QK.schedule_dense_int8(s, y, rows, blocks, parallel, out=out if same else None)
    if out is not None and not same:
        st = s[out]
        axes = list(st.op.axis)
        if as_int(out.shape[-1]) >= 16:
            _, inner = st.split(axes[-1], 16)
            st.vectorize(inner)
        if parallel and len(axes) > 1:
            st.parallel(axes[0])


def dense_integer_ref(a, w_packed, w_colsum, n, a_zero=None) -> np.ndarray:
    """What dense_integer computes from its inputs: the shifted uint8 products minus the
    (shifted) zero point times w_colsum, which equals sum_k (a - a_zero) * w when w_colsum
    holds w's sums (pack_dense_weight's)."""
    a = np.asarray(a)
    shift = 128 if a.dtype == np.int8 else 0
    wp = np.asarray(w_packed)
    w = wp.transpose(0, 2, 1, 3).reshape(wp.shape[0] * wp.shape[2], -1)[:n, :a.shape[-1]]
    y = (a.astype(np.int64) + shift) @ w.astype(np.int64).T
    zero = shift + (0 if a_zero is None else int(np.asarray(a_zero).reshape(-1)[0]))
    if zero:
        y = y - zero * np.asarray(w_colsum, np.int64)
    return y.astype(np.int32)


def qlinear_conv2d(x: Tensor, w_packed: Tensor, w_sums: Tensor | None, bias: Tensor | None,
                   multiplier: Tensor, y_zero: Tensor, oc: int, stride=1, padding=0,
                   x_zero: int = 0, out_dtype: str = "uint8", relu: bool = False,
                   blocked_in: bool = False, blocked_out: bool = False) -> Tensor:
    """A quantized 2-D conv (ONNX QLinearConv, groups 1, no dilation), NCHW in and out, in one
    kernel: ``y = saturate(round((acc + bias) * multiplier) + y_zero)`` per output channel with
    ``acc = sum (x - x_zero) * w`` exact in int32 on the VNNI product.

    x: [N, C, H, W] uint8/int8; w_packed: ``quant_kernels.pack_conv_weight(w, cb)[0]``
    ([ceil(OC/16), ceil(C/cb), KH, KW, cb/4, 16, 4] int8, cb 16, or 8/4 for few channels);
    w_sums: [ceil(OC/16)*16] int32, the weights' sums (compensating the zero point, + 128 for
    int8 x; None when that is 0); bias: [OC] int32 or None; multiplier: [OC] float32 (x_scale * w_scale / y_scale);
    y_zero: one element of out_dtype. Stages: x's padded uint8 copy in NCHW[cb]c (pads hold the
    zero point, so they add nothing), the products (quant_kernels.conv2d_int8_nchwc's compute,
    declared as this op's part so its schedule tensorizes it), then the requantization.
    blocked_in: x is already NCHW16c [N, C/16, H, W, 16] (the copy reads 16 channels at once,
    and is skipped for unpadded uint8); blocked_out: the result is NCHW16c [N, OC/16, OH, OW,
    16] (OC a multiple of 16), written as the products lie. Between convs the graph keeps
    blocked uint8 values: an NCHW side costs a transposing pass over the tensor (measured 1x1
    64 -> 256 at 56x56, loaded machine: the NCHW copy in and out took ~20x the products)."""
    op = "qlinear_conv2d"
    check_tensor(op, "x", x)
    if x.dtype not in ("uint8", "int8") or x.ndim != (5 if blocked_in else 4):
        raise ValueError(f"{op}: x must be a uint8 or int8 tensor in "
                         f"{'NCHW16c' if blocked_in else 'NCHW'}, got {x.dtype} {x.ndim}-D")
    if (blocked_in and as_int(x.shape[4]) != 16) or (blocked_out and oc % 16):
        raise ValueError(f"{op}: blocked input and output are NCHW16c (x's last axis 16, "
                         f"{oc} output channels a multiple of 16)")
    out_dtype = _check_quant_dtype(op, "out_dtype", out_dtype)
    if blocked_in:
        n, cx, h, wd, b16 = (as_int(d) for d in x.shape)
        c = cx * b16
    else:
        n, c, h, wd = (as_int(d) for d in x.shape)
    ob, cbn, kh, kw, icb, o16, i4 = (as_int(d) for d in w_packed.shape)
    cb = icb * 4
    if w_packed.dtype != "int8" or (o16, i4) != (16, 4) or cb not in (4, 8, 16) or \
            cbn != -(-c // cb) or ob != -(-oc // 16):
        raise ValueError(f"{op}: w_packed {list(w_packed.shape)} is not pack_conv_weight's "
                         f"layout for {oc} output and {c} input channels")
    sh, sw = (stride, stride) if isinstance(stride, int) else tuple(stride)
    pad = (padding,) * 4 if isinstance(padding, int) else tuple(padding)
    shift = 128 if x.dtype == "int8" else 0
    zero = int(x_zero) + shift
    if zero and w_sums is None:
        raise ValueError(f"{op}: w_sums is needed with a zero point ({zero} in uint8)")
    if blocked_in:
        xb = _padded_from_blocks(x, pad, shift, zero)
    else:
        xb = _padded_blocks(x, cbn, cb, pad, shift, zero)
    oh, ow = (h + pad[0] + pad[2] - kh) // sh + 1, (wd + pad[1] + pad[3] - kw) // sw + 1
    rc, ry, rx = (te.reduce_axis((0, e), name=nm) for e, nm in ((cbn, "rc"), (kh, "ry"),
                                                                   (kw, "rx")))
    rb, ri = te.reduce_axis((0, icb), name="rb"), te.reduce_axis((0, 4), name="ri")
    acc = op_compute("qlinear_conv2d_acc", (n, ob, oh, ow, 16), lambda b, o, y, z, oi: te.sum(
        xb[b, rc, y * sh + ry, z * sw + rx, rb * 4 + ri].astype("int32")
        * w_packed[o, rc, ry, rx, rb, oi, ri].astype("int32"), axis=[rc, ry, rx, rb, ri]),
        "opaque", name="qlinear_conv2d.acc")
    lo, hi = _limits(out_dtype)

    def requant(b, ob_, y, z, oi):
        o = ob_ * 16 + oi
        a = acc[b, ob_, y, z, oi]
        if zero:
            a = a - const(zero, "int32") * w_sums[o]
        if bias is not None:
            a = a + bias[o]
        q = te.round(te.cast(a, "float32") * multiplier[o])
        if relu:
            q = te.max(q, const(0.0, "float32"))
        return _saturate(q, _at(y_zero, (0,) * y_zero.ndim, "float32"), lo, hi, "float32",
                         out_dtype)

    if blocked_out:
        return op_compute(op, (n, oc // 16, oh, ow, 16), requant, "opaque")
    return op_compute(op, (n, oc, oh, ow),
                      lambda b, o, y, z: requant(b, o // 16, y, z, o % 16), "opaque")


def _padded_from_blocks(x: Tensor, pad: tuple, shift: int, zero: int) -> Tensor:
    """An NCHW16c x as uint8 with its pads (holding the zero point); x itself when it is
    uint8 and unpadded."""
    if not shift and not any(pad):
        return x
    n, cbn, h, wd, cb = (as_int(d) for d in x.shape)
    pt, pl, pb, pr = pad

    def f(b, cc, y, z, ci):
        v = x[b, cc, y - pt, z - pl, ci]
        v = (v.astype("int32") + shift).astype("uint8") if shift else v
        inside = (y >= pt) & (y < h + pt) & (z >= pl) & (z < wd + pl)
        return te.if_then_else(inside, v, const(zero, "uint8"))

    return op_compute("qlinear_conv2d_pad", (n, cbn, h + pt + pb, wd + pl + pr, cb), f,
                      "opaque", name="qlinear_conv2d.pad")


def _padded_blocks(x: Tensor, cbn: int, cb: int, pad: tuple, shift: int, zero: int) -> Tensor:
    """x [N, C, H, W] as uint8 [N, C/cb, H + pads, W + pads, cb] (int8 shifted by 128); pads
    hold the zero point (they add (zero - zero) * w = 0 once compensated), the channels past C
    hold 0 (they add nothing, whatever the packed weights hold there)."""
    n, c, h, wd = (as_int(d) for d in x.shape)
    pt, pl, pb, pr = pad

    def f(b, cc, y, z, ci):
        ch = cc * cb + ci
        v = x[b, ch, y - pt, z - pl]
        v = (v.astype("int32") + shift).astype("uint8") if shift else v
        inside = (y >= pt) & (y < h + pt) & (z >= pl) & (z < wd + pl)
        if cbn * cb == c:
            return te.if_then_else(inside, v, const(zero, "uint8"))
        return te.if_then_else(ch < c, te.if_then_else(inside, v, const(zero, "uint8")),
                               const(0, "uint8"))

    return op_compute("qlinear_conv2d_pad", (n, cbn, h + pt + pb, wd + pl + pr, cb), f,
                      "opaque", name="qlinear_conv2d.pad")


def schedule_qlinear_conv2d(s, out: Tensor) -> None:
    """qlinear_conv2d's schedule: quant_kernels' conv schedule on the products (8 columns x 2
    output blocks of zmm accumulators, 16 x 4 blocks as vpdpbusd) and the padded copy; a
    blocked requantization is its tail (out=), an NCHW one a pass of its own vectorized along
    the output columns, parallel over (n, channels)."""
    acc = next(t for t in out.op.input_tensors if t.op.reduce_axis)
    if out.ndim == 5:
        # NCHW16c, as the products lie: the requantization owns the tiles, each tile of
        # products finished while it is in registers (never stored as int32)
        QK.schedule_conv2d_int8(s, acc, out=out)
        return
    QK.schedule_conv2d_int8(s, acc)
    st = s[out]
    b, o, _, z = st.op.axis
    width = as_int(out.shape[3])
    lanes = max(d for d in range(1, min(width, 16) + 1) if width % d == 0)
    if lanes > 1:
        _, zi = st.split(z, lanes)
        st.vectorize(zi)
    st.parallel(st.fuse(b, o))


def pack_qconv_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An int8 conv weight [OC, C, KH, KW] for qlinear_conv2d: (pack_conv_weight's layout with
    an input block that fits C: 4, 8 or 16; the per-channel sums padded to a multiple of 16)."""
    c = w.shape[1]
    packed, _ = QK.pack_conv_weight(w, 4 if c <= 4 else 8 if c <= 8 else 16)
    sums = np.zeros(packed.shape[0] * 16, np.int32)
    sums[:w.shape[0]] = w.astype(np.int64).reshape(w.shape[0], -1).sum(axis=1)
    return packed, sums


def unpack_conv_weight(w_packed: np.ndarray, oc: int, c: int) -> np.ndarray:
    """pack_conv_weight's layout back to [OC, C, KH, KW] (for references and tests)."""
    ob, cbn, kh, kw, icb, o16, i4 = w_packed.shape
    w = np.asarray(w_packed).transpose(0, 5, 1, 4, 6, 2, 3)
    return w.reshape(ob * o16, cbn * icb * i4, kh, kw)[:oc, :c]


def qlinear_conv2d_ref(x, w_packed, w_sums, bias, multiplier, y_zero, oc, stride=1,
                       padding=0, x_zero=0, out_dtype="uint8", relu=False, blocked_in=False,
                       blocked_out=False) -> np.ndarray:
    """What qlinear_conv2d computes from its inputs (w_sums as given: the weights' sums make
    it ONNX's QLinearConv)."""
    x = np.asarray(x)
    if blocked_in:
        n, cb, h, w_, b = x.shape
        x = x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w_)
    if blocked_out:
        y = qlinear_conv2d_ref(x, w_packed, w_sums, bias, multiplier, y_zero, oc, stride,
                               padding, x_zero, out_dtype, relu)
        n, _, oh, ow = y.shape
        return np.ascontiguousarray(y.reshape(n, oc // 16, 16, oh, ow).transpose(0, 1, 3, 4, 2))
    shift = 128 if x.dtype == np.int8 else 0
    zero = int(x_zero) + shift
    w = unpack_conv_weight(np.asarray(w_packed), oc, x.shape[1]).astype(np.int64)
    pad = (padding,) * 4 if isinstance(padding, int) else tuple(padding)
    st = (stride, stride) if isinstance(stride, int) else tuple(stride)
    acc = conv_integer_ref(x.astype(np.int64) + shift, w.astype(np.int64), zero, 0, st,
                           pad).astype(np.int64)
    if zero:
        acc += zero * (w.reshape(oc, -1).sum(axis=1) - np.asarray(w_sums, np.int64)[:oc]
                       ).reshape(1, -1, 1, 1)
    if bias is not None:
        acc += np.asarray(bias, np.int64).reshape(1, -1, 1, 1)
    return requantize_ref(acc.astype(np.float32), np.asarray(multiplier).reshape(1, -1, 1, 1),
                          np.asarray(y_zero).reshape(()), out_dtype, relu)


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


__all__ = ["QUANT_DTYPES", "dense_integer", "dequantize_linear", "per_axis_shape",
           "qlinear_conv2d", "quantize_linear", "requantize"]
