"""Lowering graph nodes to tensor-expression computes, and their default schedules.

``lower_node(op, attrs, in_types, out_types)`` returns the kernel's argument tensors (inputs then
outputs) and its schedule. The computes are small and self-contained: the operator library was
written concurrently, so the graph layer does not depend on its signatures yet (issue 7's kernel
selection is where library schedules and tuned records plug in, see :func:`schedule_candidates`).

Reads that a ``select`` guards (padding, concat, gather) use clamped indices: the LLVM emitter
evaluates both arms of a select, so an unclamped out-of-range index would be a real load outside
the buffer even though its value is discarded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import tensorlang as tl
from tensorlang.ir import dtype as dt

from . import op_registry as R

Type = R.Type


def _i(e) -> int:
    """A static extent (shape entries of tensors are constant expressions)."""
    from tensorlang.ir.expr import as_int

    v = as_int(e)
    if v is None:
        raise ValueError(f"graph kernels need static shapes, got extent {e!r}")
    return v


def _c(v, dtype: str):
    return tl.const(v, dtype)


def _clamp(i, lo: int, hi: int):
    return tl.max(tl.min(i, hi), lo)


def _bidx(shape: Sequence[int], idx: Sequence, out_nd: int) -> list:
    """Index into an input of ``shape`` broadcast (numpy rules) to an output of rank out_nd."""
    off = out_nd - len(shape)
    return [0 if shape[d] == 1 else idx[off + d] for d in range(len(shape))]


# ---------------------------------------------------------------------------- elementwise


def _unary_expr(op: str, x, a: dict):
    d = x.dtype
    if op == "relu":
        return tl.max(x, _c(0, d))
    if op in ("sigmoid", "tanh", "exp", "log", "sqrt", "erf", "floor", "ceil", "abs"):
        return getattr(tl, op)(x)
    if op == "negative":
        return -x
    if op == "reciprocal":
        return _c(1.0, d) / x
    if op == "gelu":
        if a.get("approximate", "none") == "tanh":
            inner = _c(math.sqrt(2 / math.pi), d) * (x + _c(0.044715, d) * x * x * x)
            return _c(0.5, d) * x * (_c(1.0, d) + tl.tanh(inner))
        return _c(0.5, d) * x * (_c(1.0, d) + tl.erf(x * _c(1 / math.sqrt(2), d)))
    if op == "leaky_relu":
        return tl.if_then_else(x >= _c(0, d), x, x * _c(a.get("alpha", 0.01), d))
    if op == "elu":
        return tl.if_then_else(x > _c(0, d), x, _c(a.get("alpha", 1.0), d) *
                               (tl.exp(x) - _c(1.0, d)))
    if op == "selu":
        neg = _c(a.get("alpha", 1.67326), d) * (tl.exp(x) - _c(1.0, d))
        return _c(a.get("gamma", 1.0507), d) * tl.if_then_else(x > _c(0, d), x, neg)
    if op == "hard_sigmoid":
        y = _c(a.get("alpha", 0.2), d) * x + _c(a.get("beta", 0.5), d)
        return tl.max(tl.min(y, _c(1.0, d)), _c(0.0, d))
    if op == "hard_swish":
        y = x * _c(1 / 6, d) + _c(0.5, d)
        return x * tl.max(tl.min(y, _c(1.0, d)), _c(0.0, d))
    if op == "softplus":
        # log(1 + exp(x)) overflows for large x, where it equals x to float precision
        return tl.if_then_else(x > _c(20.0, d), x, tl.log(_c(1.0, d) + tl.exp(x)))
    if op == "softsign":
        return x / (_c(1.0, d) + tl.abs(x))
    if op == "clip":
        y = x
        if a.get("max") is not None:
            y = tl.min(y, _c(a["max"], d))
        if a.get("min") is not None:
            y = tl.max(y, _c(a["min"], d))
        return y
    if op == "logical_not":
        return ~x
    if op == "copy":
        return x
    if op == "cast":
        target = a["dtype"]
        if dt.is_bool(target):
            return x != _c(0, d)
        return tl.cast(x, target)
    raise NotImplementedError(op)


def _binary_expr(op: str, x, y):
    d = x.dtype
    if op == "add":
        return x + y
    if op == "subtract":
        return x - y
    if op == "multiply":
        return x * y
    if op == "divide":
        if dt.is_float(d):
            return x / y
        q = x // y
        # ONNX integer division truncates toward zero; floor division differs when the
        # signs differ and the division is inexact
        fix = ((x < _c(0, d)) != (y < _c(0, d))) & (q * y != x)
        return tl.if_then_else(fix, q + _c(1, d), q)
    if op == "power":
        return tl.pow(x, y)
    if op == "maximum":
        return tl.max(x, y)
    if op == "minimum":
        return tl.min(x, y)
    if op == "prelu":
        return tl.if_then_else(x >= _c(0, d), x, x * y)
    if op == "equal":
        return x == y
    if op == "less":
        return x < y
    if op == "greater":
        return x > y
    if op == "less_equal":
        return x <= y
    if op == "greater_equal":
        return x >= y
    if op == "logical_and":
        return x & y
    if op == "logical_or":
        return x | y
    if op == "logical_xor":
        return (x | y) & ~(x & y)
    raise NotImplementedError(op)


def _nary_expr(op: str, vals: list):
    acc = vals[0]
    for v in vals[1:]:
        if op in ("sum_n", "mean_n"):
            acc = acc + v
        elif op == "max_n":
            acc = tl.max(acc, v)
        else:
            acc = tl.min(acc, v)
    if op == "mean_n":
        acc = acc / _c(float(len(vals)), acc.dtype)
    return acc


# ---------------------------------------------------------------------------- computes


def _pad_stage(x, pads_lo: Sequence[int], pads_hi: Sequence[int], value, name: str,
               first_axis: int = 2):
    """x padded on axes first_axis.. with ``value``; returns x itself when nothing is padded."""
    if not any(pads_lo) and not any(pads_hi):
        return x
    shape = [_i(s) for s in x.shape]
    nsp = len(pads_lo)
    out_shape = list(shape)
    for d in range(nsp):
        out_shape[first_axis + d] += pads_lo[d] + pads_hi[d]

    def f(*idx):
        conds = []
        src = list(idx)
        for d in range(nsp):
            ax = first_axis + d
            i = idx[ax] - pads_lo[d]
            if pads_lo[d] > 0:
                conds.append(i >= 0)
            if pads_hi[d] > 0:
                conds.append(i < shape[ax])
            src[ax] = _clamp(i, 0, shape[ax] - 1) if conds else i
        v = x[tuple(src)]
        return tl.if_then_else(tl.all(*conds), v, _c(value, x.dtype)) if conds else v

    return tl.compute(tuple(out_shape), f, name=name)


def _conv(ins, a, out_shape):
    x, w = ins[0], ins[1]
    nsp = len(out_shape) - 2
    groups = a["groups"]
    cin_g = _i(w.shape[1])
    cout_g = _i(w.shape[0]) // groups
    st, dil, pads = a["strides"], a["dilations"], a["pads"]
    # pad only as far as the windows reach (strided convs may not touch the last rows)
    hi = []
    for d in range(nsp):
        reach = (out_shape[2 + d] - 1) * st[d] + dil[d] * (_i(w.shape[2 + d]) - 1) + 1
        hi.append(max(0, reach - _i(x.shape[2 + d]) - pads[d]))
    xp = _pad_stage(x, pads[:nsp], hi, 0.0, "conv_pad")
    rc = tl.reduce_axis(cin_g, "rc")
    rk = [tl.reduce_axis(_i(w.shape[2 + d]), f"r{d}") for d in range(nsp)]

    def f(*idx):
        n, k, sp = idx[0], idx[1], idx[2:]
        c = rc.var if groups == 1 else (k // cout_g) * cin_g + rc.var
        xi = [n, c] + [sp[d] * st[d] + rk[d].var * dil[d] for d in range(nsp)]
        wi = [k, rc.var] + [r.var for r in rk]
        return tl.sum(xp[tuple(xi)] * w[tuple(wi)], axis=[rc, *rk])

    conv = tl.compute(tuple(out_shape), f, name="conv")
    if len(ins) > 2:
        b = ins[2]
        return tl.compute(tuple(out_shape), lambda *i: conv[i] + b[i[1]],
                          name="conv_bias")
    return conv


def _matmul(ins, a, out_shape):
    A, B = ins
    sa, sb = [_i(s) for s in A.shape], [_i(s) for s in B.shape]
    K = sa[-1]
    k = tl.reduce_axis(K, "k")
    out_nd = len(out_shape)

    def f(*idx):
        idx = list(idx)
        if len(sa) == 1:
            ai = [k.var]
        else:
            i = idx[-2] if len(sb) > 1 else idx[-1]
            batch = idx[: out_nd - (2 if len(sb) > 1 else 1)]
            ai = _bidx(sa[:-2], batch, len(batch)) + [i, k.var]
        if len(sb) == 1:
            bi = [k.var]
        else:
            j = idx[-1]
            batch = idx[: out_nd - (2 if len(sa) > 1 else 1)]
            bi = _bidx(sb[:-2], batch, len(batch)) + [k.var, j]
        return tl.sum(A[tuple(ai)] * B[tuple(bi)], axis=k)

    return tl.compute(tuple(out_shape), f, name="matmul")


def _dense(ins, a, out_shape):
    x, w = ins[0], ins[1]
    k = tl.reduce_axis(_i(x.shape[1]), "k")
    mm = tl.compute(tuple(out_shape), lambda i, j: tl.sum(x[i, k] * w[k, j], axis=k),
                    name="dense")
    if len(ins) > 2:
        b = ins[2]
        bs = [_i(s) for s in b.shape]
        return tl.compute(tuple(out_shape),
                          lambda i, j: mm[i, j] + b[tuple(_bidx(bs, [i, j], 2))],
                          name="dense_bias")
    return mm


def _pool(op, ins, a, out_shape):
    x = ins[0]
    nsp = len(out_shape) - 2
    k, st, pads = a["kernel"], a["strides"], a["pads"]
    dil = a.get("dilations", [1] * nsp)
    xs = [_i(s) for s in x.shape]
    hi = []
    for d in range(nsp):
        reach = (out_shape[2 + d] - 1) * st[d] + dil[d] * (k[d] - 1) + 1
        hi.append(max(0, reach - xs[2 + d] - pads[d]))
    is_max = op == "max_pool"
    fill = dt.limits(x.dtype)[0] if is_max else 0.0
    if is_max and dt.is_float(x.dtype):
        fill = -math.inf
    xp = _pad_stage(x, pads[:nsp], hi, fill, "pool_pad")
    rk = [tl.reduce_axis(k[d], f"r{d}") for d in range(nsp)]

    def f(*o):
        n, c, sp = o[0], o[1], o[2:]
        idx = [n, c] + [sp[d] * st[d] + rk[d].var * dil[d] for d in range(nsp)]
        if is_max:
            return tl.max(xp[tuple(idx)], axis=rk)
        return tl.sum(xp[tuple(idx)], axis=rk)

    red = tl.compute(tuple(out_shape), f, name=op)
    if is_max:
        return red
    include_pad = a.get("count_include_pad", 0)

    def avg(*o):
        n, c, sp = o[0], o[1], o[2:]
        count = None
        for d in range(nsp):
            lo = sp[d] * st[d] - pads[d]
            hi_ = lo + (k[d] - 1) * dil[d] + 1
            if include_pad:
                top = xs[2 + d] + pads[nsp + d]
                lo_c = lo
            else:
                top = xs[2 + d]
                lo_c = tl.max(lo, 0)
            # dilation 1 (what pooling uses in practice): the window's valid length
            cnt = tl.min(hi_, top) - lo_c
            count = cnt if count is None else count * cnt
        return red[(n, c, *sp)] / tl.cast(count, x.dtype)

    return tl.compute(tuple(out_shape), avg, name="avg_pool_div")


def _reduce_over(x, axes: Sequence[int], keep: bool, kind: str, name: str, out_shape=None,
                 body: Callable | None = None):
    """Reduce ``x`` (or ``body(idx)``) over ``axes``; kind: sum, max, min, prod."""
    xs = [_i(s) for s in x.shape]
    axes = sorted(axes)
    rs = [tl.reduce_axis(xs[a], f"r{a}") for a in axes]
    if out_shape is None:
        out_shape = [1 if d in axes else xs[d] for d in range(len(xs))] if keep else \
            [xs[d] for d in range(len(xs)) if d not in axes]
    reducer = {"sum": tl.sum, "max": tl.max, "min": tl.min, "prod": tl.prod}[kind]

    def f(*o):
        src, j = [], 0
        for d in range(len(xs)):
            if d in axes:
                src.append(rs[axes.index(d)].var)
                if keep:
                    j += 1
            else:
                src.append(o[j])
                j += 1
        v = body(src) if body is not None else x[tuple(src)]
        return reducer(v, axis=rs)

    # a full reduction without keepdims is rank 0, stored as one element
    return tl.compute(tuple(out_shape) if out_shape else (1,), f, name=name)


def _keep_index(idx, axes):
    return [0 if d in axes else i for d, i in enumerate(idx)]


def _softmax(ins, a, out_shape):
    x = ins[0]
    axes = a["axes"]
    d = x.dtype
    m = _reduce_over(x, axes, True, "max", "sm_max")
    e = tl.compute(x.shape, lambda *i: tl.exp(x[i] - m[tuple(_keep_index(i, axes))]),
                   name="sm_exp")
    s = _reduce_over(e, axes, True, "sum", "sm_sum")
    if a.get("log"):
        return tl.compute(x.shape, lambda *i: x[i] - m[tuple(_keep_index(i, axes))] -
                          tl.log(s[tuple(_keep_index(i, axes))]), name="log_softmax")
    # one division per row, a multiplication per element
    r = tl.compute(s.shape, lambda *i: _c(1.0, d) / s[i], name="sm_rcp")
    return tl.compute(x.shape, lambda *i: e[i] * r[tuple(_keep_index(i, axes))], name="softmax")


def _normalize(x, axes, eps, name):
    """(mean, rstd) over axes, keepdims; two-pass variance for accuracy."""
    d = x.dtype
    n = 1
    for ax in axes:
        n *= _i(x.shape[ax])
    s = _reduce_over(x, axes, True, "sum", f"{name}_sum")
    mean = tl.compute(s.shape, lambda *i: s[i] * _c(1.0 / n, d), name=f"{name}_mean")

    def sq(idx):
        v = x[tuple(idx)] - mean[tuple(_keep_index(idx, axes))]
        return v * v

    ss = _reduce_over(x, axes, True, "sum", f"{name}_sqsum", body=sq)
    rstd = tl.compute(ss.shape, lambda *i: _c(1.0, d) / tl.sqrt(ss[i] * _c(1.0 / n, d) +
                                                                 _c(eps, d)),
                      name=f"{name}_rstd")
    return mean, rstd


def _layer_norm(ins, a, out_shape):
    x = ins[0]
    nd = len(x.shape)
    axes = list(range(a["axis"], nd))
    mean, rstd = _normalize(x, axes, a["epsilon"], "ln")
    scale = ins[1] if len(ins) > 1 else None
    bias = ins[2] if len(ins) > 2 else None

    def f(*i):
        k = tuple(_keep_index(i, axes))
        y = (x[i] - mean[k]) * rstd[k]
        if scale is not None:
            y = y * scale[tuple(_bidx([_i(s) for s in scale.shape], i, nd))]
        if bias is not None:
            y = y + bias[tuple(_bidx([_i(s) for s in bias.shape], i, nd))]
        return y

    return tl.compute(x.shape, f, name="layer_norm")


def _instance_norm(ins, a, out_shape):
    x, g, b = ins
    axes = list(range(2, len(x.shape)))
    mean, rstd = _normalize(x, axes, a["epsilon"], "in")

    def f(*i):
        k = tuple(_keep_index(i, axes))
        return (x[i] - mean[k]) * rstd[k] * g[i[1]] + b[i[1]]

    return tl.compute(x.shape, f, name="instance_norm")


def _batch_norm(ins, a, out_shape):
    x, g, b, m, v = ins
    d = x.dtype
    eps = a["epsilon"]
    return tl.compute(
        x.shape,
        lambda *i: (x[i] - m[i[1]]) * (g[i[1]] / tl.sqrt(v[i[1]] + _c(eps, d))) + b[i[1]],
        name="batch_norm",
    )


def _lrn(ins, a, out_shape):
    x = ins[0]
    size = a["size"]
    d = x.dtype
    lo = (size - 1) // 2
    hi = size - 1 - lo
    xp = _pad_stage(x, [lo], [hi], 0.0, "lrn_pad", first_axis=1)
    r = tl.reduce_axis(size, "r")

    def sq(*o):
        n, c, sp = o[0], o[1], o[2:]
        v = xp[(n, c + r.var, *sp)]
        return tl.sum(v * v, axis=r)

    s = tl.compute(x.shape, sq, name="lrn_sum")
    alpha, beta, bias = a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("bias", 1.0)
    return tl.compute(
        x.shape,
        lambda *i: x[i] / tl.pow(_c(bias, d) + _c(alpha / size, d) * s[i], _c(beta, d)),
        name="lrn",
    )


def _arg_reduce(op, ins, a, out_shape):
    x = ins[0]
    axis = a["axis"]
    keep = a.get("keepdims", 1)
    last = a.get("select_last_index", 0)
    is_max = op == "argmax"

    def combine(i0, v0, i1, v1):
        # ties: the first index (or the last with select_last_index)
        better = (v1 > v0) if is_max else (v1 < v0)
        tie = (v1 == v0) & ((i1 > i0) if last else (i1 < i0))
        take = better | tie
        return tl.select(take, i1, i0), tl.select(take, v1, v0)

    def ident(ti, tv):
        return tl.const(-1, ti), (tl.min_value(tv) if is_max else tl.max_value(tv))

    red = tl.comm_reducer(combine, ident, name=op)
    xs = [_i(s) for s in x.shape]
    r = tl.reduce_axis(xs[axis], "r")

    def f(*o):
        src = list(o)
        if keep:
            src[axis] = r.var
        elif len(xs) == 1:
            src = [r.var]  # rank-0 result stored as one element: its index is not a source axis
        else:
            src.insert(axis, r.var)
        return red((tl.cast(r.var, "int64"), x[tuple(src)]), axis=r)

    idx, _ = tl.compute(tuple(out_shape), f, name=op)
    return idx


def _transpose(ins, a, out_shape):
    x = ins[0]
    perm = a["perm"]
    inv = [perm.index(d) for d in range(len(perm))]
    return tl.compute(tuple(out_shape), lambda *i: x[tuple(i[inv[d]] for d in range(len(inv)))],
                      name="transpose")


def _concat(ins, a, out_shape):
    axis = a["axis"]
    offs = [0]
    for t in ins:
        offs.append(offs[-1] + _i(t.shape[axis]))

    def f(*i):
        v = None
        for t, lo, hi in reversed(list(zip(ins, offs, offs[1:]))):
            src = list(i)
            src[axis] = _clamp(i[axis] - lo, 0, hi - lo - 1)
            r = t[tuple(src)]
            v = r if v is None else tl.if_then_else(i[axis] < hi, r, v)
        return v

    return tl.compute(tuple(out_shape), f, name="concat")


def _slice(ins, a, out_shape):
    x = ins[0]
    starts, steps, _ = R.slice_params([_i(s) for s in x.shape], a)
    return tl.compute(tuple(out_shape),
                      lambda *i: x[tuple(starts[d] + i[d] * steps[d] for d in range(len(i)))],
                      name="slice")


def _pad(ins, a, out_shape):
    x = ins[0]
    xs = [_i(s) for s in x.shape]
    nd = len(xs)
    p = a["pads"]
    mode = a.get("mode", "constant")
    if mode == "constant":
        # negative pads crop: fold them into the index offset
        def f(*i):
            conds, src = [], []
            for d in range(nd):
                j = i[d] - p[d]
                if p[d] > 0:
                    conds.append(j >= 0)
                if p[nd + d] > 0:
                    conds.append(j < xs[d])
                src.append(_clamp(j, 0, xs[d] - 1) if p[d] > 0 or p[nd + d] > 0 else j)
            v = x[tuple(src)]
            return tl.if_then_else(tl.all(*conds), v, _c(a.get("value", 0.0), x.dtype)) \
                if conds else v
    else:
        def f(*i):
            src = []
            for d in range(nd):
                j = i[d] - p[d]
                if mode == "edge":
                    j = _clamp(j, 0, xs[d] - 1)
                elif xs[d] > 1:  # reflect without repeating the edge
                    j = tl.abs(j)
                    j = (xs[d] - 1) - tl.abs((xs[d] - 1) - j)
                else:
                    j = j * 0
                src.append(j)
            return x[tuple(src)]

    return tl.compute(tuple(out_shape), f, name="pad")


def _gather(ins, a, out_shape):
    x, ids = ins
    axis = a["axis"]
    xs = [_i(s) for s in x.shape]
    ni = len(ids.shape)

    def f(*i):
        j = ids[tuple(i[axis: axis + ni])]
        j = tl.cast(j, "int64")
        j = tl.if_then_else(j < 0, j + xs[axis], j)
        src = list(i[:axis]) + [_clamp(j, 0, xs[axis] - 1)] + list(i[axis + ni:])
        return x[tuple(src)]

    return tl.compute(tuple(out_shape), f, name="gather")


def _expand(ins, a, out_shape):
    x = ins[0]
    xs = [_i(s) for s in x.shape]
    return tl.compute(tuple(out_shape), lambda *i: x[tuple(_bidx(xs, i, len(out_shape)))],
                      name="expand")


def _tile(ins, a, out_shape):
    x = ins[0]
    xs = [_i(s) for s in x.shape]
    return tl.compute(tuple(out_shape), lambda *i: x[tuple(i[d] % xs[d] for d in range(len(xs)))],
                      name="tile")


def _depth_to_space(ins, a, out_shape):
    x = ins[0]
    b = a["blocksize"]
    c_out = out_shape[1]
    dcr = a.get("mode", "DCR") == "DCR"

    def f(n, c, h, w):
        bh, bw = h % b, w % b
        ci = (bh * b + bw) * c_out + c if dcr else c * b * b + bh * b + bw
        return x[n, ci, h // b, w // b]

    return tl.compute(tuple(out_shape), f, name="depth_to_space")


def _global_pool(op, ins, a, out_shape):
    x = ins[0]
    axes = list(range(2, len(x.shape)))
    if op == "global_max_pool":
        return _reduce_over(x, axes, True, "max", "gmax")
    n = 1
    for ax in axes:
        n *= _i(x.shape[ax])
    s = _reduce_over(x, axes, True, "sum", "gsum")
    return tl.compute(s.shape, lambda *i: s[i] * _c(1.0 / n, x.dtype), name="global_avg_pool")


def _reduce(op, ins, a, out_shape):
    x = ins[0]
    kind = {"reduce_sum": "sum", "reduce_mean": "sum", "reduce_max": "max",
            "reduce_min": "min", "reduce_prod": "prod"}[op]
    red = _reduce_over(x, a["axes"], bool(a.get("keepdims", 1)), kind, op, out_shape=out_shape)
    if op != "reduce_mean":
        return red
    n = 1
    for ax in a["axes"]:
        n *= _i(x.shape[ax])
    return tl.compute(red.shape, lambda *i: red[i] / _c(float(n), x.dtype), name="reduce_mean")


def compute_outputs(op: str, ins: list, attrs: dict, out_shape: tuple):
    """The output tensor of ``op`` over input tensors ``ins``."""
    if op in R.UNARY_REFS or op == "cast":
        return tl.compute(tuple(out_shape), lambda *i: _unary_expr(op, ins[0][i], attrs),
                          name=op)
    if op in R.BINARY_REFS or op in R.COMPARE_REFS:
        x, y = ins
        xs, ys = [_i(s) for s in x.shape], [_i(s) for s in y.shape]
        nd = len(out_shape)
        return tl.compute(
            tuple(out_shape),
            lambda *i: _binary_expr(op, x[tuple(_bidx(xs, i, nd))], y[tuple(_bidx(ys, i, nd))]),
            name=op,
        )
    if op == "where":
        nd = len(out_shape)
        c, x, y = ins
        shp = [[_i(s) for s in t.shape] for t in ins]
        return tl.compute(
            tuple(out_shape),
            lambda *i: tl.if_then_else(c[tuple(_bidx(shp[0], i, nd))],
                                       x[tuple(_bidx(shp[1], i, nd))],
                                       y[tuple(_bidx(shp[2], i, nd))]),
            name="where",
        )
    if op in ("sum_n", "mean_n", "max_n", "min_n"):
        nd = len(out_shape)
        shp = [[_i(s) for s in t.shape] for t in ins]
        return tl.compute(
            tuple(out_shape),
            lambda *i: _nary_expr(op, [t[tuple(_bidx(s, i, nd))] for t, s in zip(ins, shp)]),
            name=op,
        )
    table: dict[str, Callable] = {
        "conv": _conv, "matmul": _matmul, "dense": _dense, "softmax": _softmax,
        "layer_norm": _layer_norm, "instance_norm": _instance_norm,
        "batch_norm": _batch_norm, "lrn": _lrn, "transpose": _transpose, "concat": _concat,
        "slice": _slice, "pad": _pad, "gather": _gather, "expand": _expand, "tile": _tile,
        "depth_to_space": _depth_to_space,
    }
    if op in table:
        return table[op](ins, attrs, tuple(out_shape))
    if op in ("max_pool", "avg_pool"):
        return _pool(op, ins, attrs, tuple(out_shape))
    if op in ("global_avg_pool", "global_max_pool"):
        return _global_pool(op, ins, attrs, tuple(out_shape))
    if op in R.REDUCE_REFS:
        return _reduce(op, ins, attrs, tuple(out_shape))
    if op in ("argmax", "argmin"):
        return _arg_reduce(op, ins, attrs, tuple(out_shape))
    raise NotImplementedError(f"graph operator {op!r} has no lowering")


# ---------------------------------------------------------------------------- schedules


def _stages(out):
    """Compute stages reachable from ``out`` (outputs first), placeholders excluded."""
    from tensorlang.te.tensor import ComputeOp, read_tensors

    seen, order, stack = set(), [], [out]
    while stack:
        t = stack.pop()
        if id(t.op) in seen or not isinstance(t.op, ComputeOp):
            continue
        seen.add(id(t.op))
        order.append(t)
        stack.extend(read_tensors(t.op.body))
    return order


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _extent(iv) -> int:
    from tensorlang.ir.expr import as_int

    return as_int(iv.dom.extent)


def _parallel_outer(s, t, min_work: int, vec: int):
    """Fuse leading spatial loops until there is enough parallelism; parallelize; vectorize the
    innermost loop when it is a spatial loop of a non-reduction stage and vec > 1."""
    st = s[t]
    axes = list(t.op.axis)
    if not axes:
        return
    inner = None
    if vec > 1 and not t.op.reduce_axis:
        last = axes[-1]
        ext = _extent(last)
        if ext is not None and ext >= vec and ext % vec == 0:
            outer, inner = st.split(last, factor=vec)
            axes = axes[:-1] + [outer]
        elif ext is not None and ext in (4, 8, 16) and ext <= vec:
            inner = last
            axes = axes[:-1]
    total = _prod(_extent(a) for a in t.op.axis) * max(1, _prod(_extent(r) for r in
                                                                 t.op.reduce_axis))
    if axes and total >= min_work:
        fused = axes[0]
        n = _extent(fused)
        k = 1
        while n < 64 and k < len(axes):
            fused = st.fuse(fused, axes[k])
            n *= _extent(axes[k])
            k += 1
        if n > 1:
            st.parallel(fused)
    if inner is not None:
        st.vectorize(inner)


def _schedule_generic(outs, level: int):
    s = tl.create_schedule(outs)
    if level == 0:
        return s
    seen = set()
    for o in outs:
        for t in _stages(o):
            if id(t.op) in seen:
                continue
            seen.add(id(t.op))
            _parallel_outer(s, t, 16384, 16 if level >= 2 else 1)
    return s


def _pick(n: int, options: Sequence[int]) -> int:
    for f in options:
        if n % f == 0:
            return f
    return 1


def _schedule_conv(outs, level: int):
    """Register tile: ko x (xi vector lanes) accumulators kept in a local buffer computed at the
    output tile; reduction loops outside the tile; pad stage computed at root."""
    out = outs[0]
    s = tl.create_schedule(outs)
    stages = _stages(out)
    conv = next(t for t in stages if t.op.name == "conv")
    nsp = len(conv.shape) - 2
    if conv is out:
        local = s.cache_write(conv, "local")
    else:
        local = conv
    O = out
    axes = list(s[O].op.axis)
    n, k = axes[0], axes[1]
    K = _extent(k)
    W = _extent(axes[-1])
    kf = _pick(K, (8, 4, 2))
    xf = _pick(W, (16, 14, 8, 7, 4)) if W > 16 else W
    ko, ki = s[O].split(k, factor=kf)
    xo, xi = s[O].split(axes[-1], factor=xf)
    mid = axes[2:-1]
    s[O].reorder(n, ko, *mid, xo, ki, xi)
    fused = s[O].fuse(n, ko)
    if mid:
        fused = s[O].fuse(fused, mid[0])
    s[O].parallel(fused)
    if xf in (4, 8, 16) and level >= 2:
        s[O].vectorize(xi)
    s[local].compute_at(s[O], xo)
    la = list(s[local].op.axis)
    red = list(s[local].op.reduce_axis)
    s[local].reorder(*red, *la)
    s[local].unroll(la[1])
    if level >= 2 and xf > 1:
        s[local].vectorize(la[-1])
    for t in stages:
        if t.op.name == "conv_pad":
            _parallel_outer(s, t, 16384, 1)
    del nsp
    return s


def _schedule_dense(outs, level: int):
    out = outs[0]
    s = tl.create_schedule(outs)
    stages = _stages(out)
    mm = next(t for t in stages if t.op.name in ("dense", "matmul"))
    local = s.cache_write(mm, "local") if mm is out else mm
    O = out
    axes = list(s[O].op.axis)
    i, j = axes[-2], axes[-1]
    M, N = _extent(i), _extent(j)
    jf = _pick(N, (32, 16, 8)) if N >= 8 else N
    if_ = _pick(M, (4, 2))
    io, ii = s[O].split(i, factor=if_)
    jo, ji = s[O].split(j, factor=jf)
    batch = axes[:-2]
    s[O].reorder(*batch, io, jo, ii, ji)
    lead = batch + [io]
    fused = lead[0]
    for a in lead[1:]:
        fused = s[O].fuse(fused, a)
    if _extent(fused) is not None and _extent(fused) >= 2:
        s[O].parallel(fused)
    else:
        s[O].parallel(jo)
    s[local].compute_at(s[O], jo)
    la = list(s[local].op.axis)
    (kk,) = s[local].op.reduce_axis
    s[local].reorder(kk, *la)
    if if_ > 1:
        s[local].unroll(la[-2])
    if level >= 2 and jf in (8, 16, 32):
        if jf == 32:
            jo2, ji2 = s[local].split(la[-1], factor=16)
            s[local].unroll(jo2)
            s[local].vectorize(ji2)
        else:
            s[local].vectorize(la[-1])
    return s


def schedule_candidates(op: str, outs) -> list[tuple[str, Callable]]:
    """Schedules to try, best first; the build falls back to the next on a refusal. A tuned
    record (issue 7's kernel selection) goes in front of this list."""
    cands: list[tuple[str, Callable]] = []
    if op == "conv":
        cands += [("conv_tiled", lambda: _schedule_conv(outs, 2)),
                  ("conv_tiled_scalar", lambda: _schedule_conv(outs, 1))]
    if op in ("dense", "matmul"):
        cands += [("dense_tiled", lambda: _schedule_dense(outs, 2))]
    cands += [("parallel_vectorized", lambda: _schedule_generic(outs, 2)),
              ("parallel", lambda: _schedule_generic(outs, 1)),
              ("naive", lambda: _schedule_generic(outs, 0))]
    return cands


def lower_node(op: str, attrs: dict, in_types: Sequence[Type], out_types: Sequence[Type]):
    """Placeholders for the inputs, the output compute; returns (args, outs)."""
    ins = [tl.placeholder(tuple(s) if s else (1,), dtype=t, name=f"in{i}")
           for i, (s, t) in enumerate(in_types)]
    # Rank-0 values are stored as one element; the compute sees them as shape (1,) and the
    # broadcasting helpers treat that like a scalar.
    out_shape = tuple(out_types[0][0])
    squeeze = out_shape == ()
    out = compute_outputs(op, ins, attrs, out_shape if not squeeze else (1,))
    return ins, [out]
