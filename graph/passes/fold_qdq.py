"""Pass: the QDQ patterns of onnxruntime's ``quantize_static`` become integer products with the
requantization fused (issue 22).

A QDQ model computes every conv / matmul in float between a DequantizeLinear of each operand and
a QuantizeLinear of the result::

    DQ(xq, sx, zx) -> conv(., DQ(wq, sw, zw), DQ(bq, sx*sw)) [-> relu] -> Q(., sy, zy)

onnxruntime runs it as an integer product requantized: ``acc = sum (xq - zx)(wq - zw) + bq``,
``y = saturate(round(acc * (sx * sw / sy)) + zy)``. This pass rewrites it into that form::

    (xq - zx) -> conv(., wq - zw, bq) -> requantize(., sx * sw / sy, zy [, relu])

so our results are onnxruntime's integer arithmetic, not a float approximation of it, and the
requantization is an elementwise tail that fuses into the conv's kernel (with a following
residual add's dequantize / add / quantize when they fuse too).

A 2-D conv of one group without dilation (the common case) runs whole on the library's int8
kernel (``qlinear_conv2d``: VNNI products, bias and requantization in one kernel, uint8/int8
in and out); a Gemm / MatMul on ``dense_integer`` (VNNI products; a MatMul's activation of
higher rank with its leading axes as rows), its bias added in int32, then ``requantize``. Other products run in float32 when that is exact: every term is an integer and every partial sum
is bounded by ``max|xq - zx| * sum_k |wq - zw| + |bq|`` per output channel; below 2**24 every
float32 addition is exact in any order, so the float conv's accumulator *is* the int32 sum, at
the speed of the float kernels (checked per node at build time from the constant weights).
Otherwise it runs in int32 (the 8-bit operands widened, exact, slower).

Matched: ``conv``, ``dense`` (an imported Gemm; its weight may go through a transpose) and
``matmul`` with a constant 2-D weight, each with an optional ``relu`` before the quantize; the
activation's scale and zero point and the output's per tensor, the weight's per tensor or per
output channel, and a bias (if any) an int32 DequantizeLinear whose scale is sx * sw. A pattern
that does not match (an intermediate value read twice, a run-time weight, parameters that are
not constants...) is left as it is: dequantize -> float op -> quantize, correct, and
``fold_constants`` then folds the weights' DequantizeLinear into float constants."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from ..symbolic import num_elements, shape_json
from .rewrite import Emitter, rebuild

EXACT_LIMIT = 2 ** 24  # every integer of magnitude <= 2**24 is a float32
_PRODUCTS = ("conv", "dense", "matmul")


def fold_qdq(g: Graph) -> Graph:
    em = Emitter()
    users = g.consumers()
    outputs = {id(v) for v in g.outputs}
    new: dict[int, Value] = {}  # old value -> its copy, for the values a rewrite reads

    def only_use(v: Value) -> bool:
        return len(users.get(id(v), [])) == 1 and id(v) not in outputs

    def visit(n: Node, ins: list[Value]):
        for old, cur in zip(n.inputs, ins):
            new[id(old)] = cur
        if n.op != "quantize_linear":
            return None
        m = _match(n, only_use)
        if m is None:
            return None
        return [_emit(em, n, m, new)]

    return rebuild(g, visit, em)


def _const(v: Value | None) -> np.ndarray | None:
    return None if v is None or not v.is_constant else v.data


def _dq_parts(v: Value) -> tuple | None:
    """(quantized value, scale array, zero point array or None) of a dequantize_linear with
    constant parameters that produces ``v``."""
    p = v.producer
    if p is None or p.op != "dequantize_linear":
        return None
    s, z = _const(p.inputs[1]), _const(p.inputs[2]) if len(p.inputs) > 2 else None
    if s is None or (len(p.inputs) > 2 and z is None):
        return None
    return p.inputs[0], s, z


def _match(q: Node, only_use) -> dict | None:
    sy = _const(q.inputs[1])
    zy = _const(q.inputs[2]) if len(q.inputs) > 2 else np.zeros((), q.attrs["dtype"])
    if sy is None or zy is None or sy.size != 1 or zy.size != 1:
        return None
    y, relu = q.inputs[0], False
    if y.producer is not None and y.producer.op == "relu" and only_use(y):
        y, relu = y.producer.inputs[0], True
    p = y.producer
    if p is None or p.op not in _PRODUCTS or not only_use(y) or len(p.inputs) < 2:
        return None
    x = _dq_parts(p.inputs[0])
    w = _weight(p.inputs[1])
    if x is None or w is None or x[1].size != 1 or (x[2] is not None and x[2].size != 1):
        return None
    if x[0].dtype not in ("uint8", "int8") or (p.op == "matmul" and w[0].ndim != 2):
        return None
    bias = _bias(p, x[1], w[1])
    if bias is False:
        return None
    return {"p": p, "x": x, "w": w, "bias": bias, "sy": sy, "zy": zy, "relu": relu,
            "out_dtype": q.attrs["dtype"]}


def _weight(v: Value) -> tuple | None:
    """(integer weight wq - zw as int64, its scale per output channel [OC] or [1]) of a
    constant dequantized weight, through a transpose (an imported Gemm's transB)."""
    perm = None
    p = v.producer
    if p is not None and p.op == "transpose":
        perm, v = p.attrs["perm"], p.inputs[0]
    parts = _dq_parts(v)
    if parts is None or not parts[0].is_constant:
        return None
    wq, s, z = parts
    ints = wq.data.astype(np.int64) - (0 if z is None else z.astype(np.int64))
    scale = np.broadcast_to(s, wq.shape)
    if perm is not None:
        ints, scale = np.transpose(ints, perm), np.transpose(scale, perm)
    # the scale must vary along the output-channel axis only (0 for a conv, the last for a
    # [K, N] weight)
    axis = 0 if ints.ndim == 4 else ints.ndim - 1
    per = np.moveaxis(scale, axis, 0).reshape(scale.shape[axis], -1)
    if not (per == per[:, :1]).all():
        return None
    return ints, per[:, 0].astype(np.float32), axis


def _bias(p: Node, sx: np.ndarray, sw: np.ndarray):
    """The int32 bias of a product node (None without one); False when it is not the
    dequantized int32 of scale sx * sw that the integer form needs."""
    if len(p.inputs) < 3:
        return None
    parts = _dq_parts(p.inputs[2])
    if parts is None or not parts[0].is_constant or parts[0].dtype != "int32":
        return False
    bq, s, z = parts
    want = np.float32(sx.reshape(-1)[0]) * sw
    if (z is not None and z.any()) or not np.allclose(np.broadcast_to(s, bq.shape).reshape(-1),
                                                      np.broadcast_to(want, bq.shape).reshape(-1),
                                                      rtol=1e-6, atol=0):
        return False
    return bq.data.astype(np.int64).reshape(-1)


def _exact_in_float(x_dtype: str, zx: int, ints: np.ndarray, axis: int, bias) -> bool:
    lo, hi = (0, 255) if x_dtype == "uint8" else (-128, 127)
    xmax = max(abs(lo - zx), abs(hi - zx))
    per = np.abs(np.moveaxis(ints, axis, 0)).reshape(ints.shape[axis], -1).sum(axis=1)
    bound = xmax * per + (0 if bias is None else np.abs(bias))
    return bool(bound.max() < EXACT_LIMIT)


def _on_int8_kernel(p: Node, ints: np.ndarray) -> bool:
    """A conv the library's int8 kernel runs whole (qlinear_conv2d): 2-D, one group, no
    dilation, weights that are int8 after their zero point is taken off."""
    a = p.attrs
    return (p.op == "conv" and ints.ndim == 4 and a.get("groups", 1) == 1 and
            all(d == 1 for d in a["dilations"]) and ints.min() >= -128 and ints.max() <= 127)


def _emit_qconv(em: Emitter, q: Node, m: dict, xq: Value, zx: int) -> Value:
    from tensorlang.ops.quant import pack_qconv_weight

    p, (ints, sw, _) = m["p"], m["w"]
    name, oc = p.name, ints.shape[0]
    packed, sums = pack_qconv_weight(ints.astype(np.int8))
    mult = (np.float32(m["x"][1].reshape(-1)[0]) * sw) / np.float32(m["sy"].reshape(-1)[0])
    ins = [xq, Value(f"{name}_wpacked", packed.shape, "int8", data=packed),
           Value(f"{name}_multiplier", (oc,), "float32",
                 data=np.broadcast_to(mult.astype(np.float32), (oc,)).copy()),
           Value(f"{name}_y_zero", (), m["out_dtype"], data=m["zy"].reshape(()))]
    with_sums = zx != 0 or xq.dtype == "int8"  # the effective (uint8) zero point is not 0
    if with_sums:
        ins.append(Value(f"{name}_wsums", sums.shape, "int32", data=sums))
    if m["bias"] is not None:
        ins.append(Value(f"{name}_bint", (oc,), "int32", data=m["bias"].astype(np.int32)))
    attrs = {"oc": int(oc), "strides": list(p.attrs["strides"]), "pads": list(p.attrs["pads"]),
             "x_zero": zx, "dtype": m["out_dtype"], "relu": m["relu"], "sums": with_sums,
             "bias": m["bias"] is not None}
    return em.emit(f"{name}_int8", "qlinear_conv2d", ins, attrs, q.outputs)[0]


def _emit_qdense(em: Emitter, q: Node, m: dict, xq: Value, zx: int,
                 outs: list[Value] | None = None) -> Value:
    """A 2-D product with an int8 weight [K, N] on dense_integer, bias added in int32, then
    requantized per column into ``outs`` (the quantize's outputs unless given)."""
    from tensorlang.ops.quant_kernels import pack_dense_weight

    p, ints = m["p"], m["w"][0]
    name, n = p.name, ints.shape[1]
    shape = (xq.shape[0], n)
    packed, colsum = pack_dense_weight(np.ascontiguousarray(ints.T.astype(np.int8)))
    ins = [xq, Value(f"{name}_wpacked", packed.shape, "int8", data=packed)]
    if zx != 0 or xq.dtype == "int8":  # the column sums compensate the zero point
        ins.append(Value(f"{name}_colsum", colsum.shape, "int32", data=colsum))
    if zx != 0:
        ins.append(Value(f"{name}_x_zero", (), xq.dtype, data=np.asarray(zx, xq.dtype)))
    out = p.outputs[0]
    acc, = em.emit(f"{name}_int8", "dense_integer", ins, {"n": int(n)},
                   [Value(f"{out.name}_acc", shape, "int32")])
    if m["bias"] is not None:
        b = Value(f"{name}_bint", (n,), "int32", data=m["bias"].astype(np.int32))
        acc, = em.emit(f"{name}_bias", "add", [acc, b], {},
                       [Value(f"{out.name}_biased", shape, "int32")])
    return _requantize(em, q, m, name, acc, outs)


def _emit_qdense_rows(em: Emitter, q: Node, m: dict, xq: Value, zx: int) -> Value:
    """A matmul of an activation of rank > 2 (a transformer's [batch, sequence, K]) and an
    int8 weight [K, N]: its leading axes flattened into the rows of one dense_integer, the
    requantized rows given their axes back (a reshape: an alias, no copy)."""
    name, n, out = m["p"].name, m["w"][0].shape[1], q.outputs[0]
    k = xq.shape[-1]
    rows = num_elements(xq.shape[:-1])
    flat, = em.emit(f"{name}_rows", "reshape", [xq], {"shape": shape_json([rows, k])},
                    [Value(f"{name}_xrows", (rows, k), xq.dtype)])
    y = _emit_qdense(em, q, m, flat, zx, [Value(f"{out.name}_rows", (rows, n), out.dtype)])
    return em.emit(f"{name}_unflatten", "reshape", [y], {"shape": shape_json(out.shape)},
                   q.outputs)[0]


def _requantize(em: Emitter, q: Node, m: dict, name: str, acc: Value,
                outs: list[Value] | None = None) -> Value:
    p, sw = m["p"], m["w"][1]
    mult = (np.float32(m["x"][1].reshape(-1)[0]) * sw) / np.float32(m["sy"].reshape(-1)[0])
    shape = _channel_shape(mult.size, len(acc.shape), p.op)
    mv = Value(f"{name}_multiplier", shape, "float32", data=mult.astype(np.float32).reshape(shape))
    zy = Value(f"{name}_y_zero", (), m["out_dtype"], data=m["zy"].reshape(()))
    y, = em.emit(f"{name}_requantize", "requantize", [acc, mv, zy],
                 {"dtype": m["out_dtype"], "relu": m["relu"]}, outs or q.outputs)
    return y


def _emit(em: Emitter, q: Node, m: dict, new: dict) -> Value:
    p, (xq, _, zx), (ints, _, axis) = m["p"], m["x"], m["w"]
    xq = new.get(id(xq), xq)
    zx = 0 if zx is None else int(zx.reshape(-1)[0])
    if _on_int8_kernel(p, ints):
        return _emit_qconv(em, q, m, xq, zx)
    int8 = ints.ndim == 2 and ints.min() >= -128 and ints.max() <= 127
    if p.op in ("dense", "matmul") and int8 and len(xq.shape) == 2:
        return _emit_qdense(em, q, m, xq, zx)
    if p.op == "matmul" and int8 and len(xq.shape) > 2:
        return _emit_qdense_rows(em, q, m, xq, zx)
    exact = _exact_in_float(xq.dtype, zx, ints, axis, m["bias"])
    acc_t = "float32" if exact else "int32"
    name = p.name
    xs = _shifted(em, name, xq, zx, acc_t)
    w = Value(f"{name}_wint", ints.shape, acc_t, data=ints.astype(acc_t))
    ins = [xs, w]
    if m["bias"] is not None:
        ins.append(Value(f"{name}_bint", m["bias"].shape, acc_t, data=m["bias"].astype(acc_t)))
    out = p.outputs[0]
    acc, = em.emit(f"{name}_int", p.op, ins, p.attrs,
                   [Value(f"{out.name}_acc", out.shape, acc_t)])
    return _requantize(em, q, m, name, acc)


def _shifted(em: Emitter, name: str, xq: Value, zx: int, acc_t: str) -> Value:
    """xq - zx in the accumulation type: a dequantize with scale 1 for float (exact), a cast
    and a subtraction for int32."""
    out = Value(f"{name}_xint", xq.shape, acc_t)
    zero = Value(f"{name}_x_zero", (), xq.dtype, data=np.asarray(zx, xq.dtype))
    if acc_t == "float32":
        one = Value(f"{name}_one", (), "float32", data=np.float32(1.0))
        return em.emit(f"{name}_shift", "dequantize_linear", [xq, one, zero], {}, [out])[0]
    wide = em.emit(f"{name}_widen", "cast", [xq], {"dtype": "int32"},
                   [Value(f"{name}_xwide", xq.shape, "int32")])[0]
    z32 = Value(f"{name}_x_zero32", (), "int32", data=np.int32(zx))
    return em.emit(f"{name}_shift", "subtract", [wide, z32], {}, [out])[0]


def _channel_shape(n: int, rank: int, op: str) -> tuple:
    """The multiplier's shape: per tensor (), or per output channel ([OC, 1, 1] for a conv's
    NCHW output, [N] for a product's last axis)."""
    if n == 1:
        return ()
    return (n,) + (1,) * (rank - 2) if op == "conv" else (n,)
