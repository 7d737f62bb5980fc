"""Lowering graph nodes and fused groups to the operator library's computes.

Every graph operator is expressed with ``tensorlang.ops`` (``tl.ops``): one library op, or a short
composition of library ops where the library has no op of that name (elu, tile, depth_to_space,
instance norm, ONNX's truncating integer division...). Each library compute carries its pattern
kind, so ``tl.ops.default_schedule`` recognises a fused group's anchor (conv, matmul, pooling,
reduction) and its elementwise tail, and inlines the rest.

Only convolution and pooling over other than two spatial axes (1-D, 3-D: the library's are 2-D)
have computes of their own here (:func:`_conv_nd`, :func:`_pool_nd`).

Rank-0 values are stored as one element: their placeholders are shape (1,), and a library result
whose shape differs from the graph's storage shape only by unit axes is reshaped to it
(:func:`_conform`), as is a result whose dtype differs (integer sums accumulate in int64).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import tensorlang as tl
from tensorlang import ops as O
from tensorlang.ir import dtype as dt
from tensorlang.ops._base import op_compute
from tensorlang.ops.patterns import INJECTIVE
from tensorlang.ops.rnn import split_inputs

from . import op_registry as R
from .fused_group import FUSED, FusedGroup
from .symbolic import dim, is_symbolic, parse, shape_of

Type = R.Type


def storage_shape(shape: Sequence) -> tuple:
    """The shape a value has in a kernel: rank-0 values are one element of shape (1,); a
    symbolic dimension stays the expression of the graph's shape variables."""
    return shape_of(shape) or (1,)


def _shape(t) -> tuple:
    return shape_of(t.shape)


def _conform(t, shape: Sequence[int], dtype: str):
    """``t`` with the graph's storage shape and dtype (a reshape/cast stage when they differ)."""
    shape = storage_shape(shape)
    if t.dtype != dtype:
        t = O.cast(t, dtype)
    if _shape(t) != shape:
        t = O.reshape(t, shape)
    return t


# ----------------------------------------------------------------------------- elementwise


def _unary(op: str, x, a: dict):
    direct = {"relu": O.relu, "sigmoid": O.sigmoid, "tanh": O.tanh, "exp": O.exp, "log": O.log,
              "sqrt": O.sqrt, "erf": O.erf, "floor": O.floor, "ceil": O.ceil, "abs": O.abs,
              "negative": O.negative, "logical_not": O.logical_not, "sin": O.sin,
              "cos": O.cos, "tan": O.tan, "asin": O.asin, "acos": O.acos, "atan": O.atan,
              "sinh": O.sinh, "cosh": O.cosh, "asinh": O.asinh, "acosh": O.acosh,
              "atanh": O.atanh, "round": O.round, "sign": O.sign, "mish": O.mish,
              "bitwise_not": O.bitwise_not}
    if op in direct:
        return direct[op](x)
    if op == "gelu":
        return O.gelu(x, a.get("approximate", "none"))
    if op == "leaky_relu":
        return O.leaky_relu(x, a.get("alpha", 0.01))
    if op == "thresholded_relu":
        return O.thresholded_relu(x, a.get("alpha", 1.0))
    if op == "shrink":
        return O.shrink(x, a.get("lambd", 0.5), a.get("bias", 0.0))
    if op == "clip":
        return O.clip(x, a.get("min"), a.get("max"))
    if op == "cast":
        return O.cast(x, a["dtype"])
    if op == "copy":
        # a same-shape reshape is the library's plain copy compute
        return O.reshape(x, _shape(x))
    if op == "reciprocal":
        return O.divide(1.0, x)
    if op in ("elu", "selu"):
        alpha = a.get("alpha", 1.0 if op == "elu" else 1.67326)
        neg = O.multiply(O.subtract(O.exp(x), 1.0), float(alpha))
        y = O.where(O.greater(x, 0.0), x, neg)
        return y if op == "elu" else O.multiply(y, float(a.get("gamma", 1.0507)))
    if op == "hard_sigmoid":
        y = O.add(O.multiply(x, float(a.get("alpha", 0.2))), float(a.get("beta", 0.5)))
        return O.clip(y, 0.0, 1.0)
    if op == "hard_swish":
        return O.multiply(x, O.clip(O.add(O.multiply(x, 1.0 / 6.0), 0.5), 0.0, 1.0))
    if op == "softplus":
        # log(1 + exp(x)) overflows for large x, where it equals x to float precision
        return O.where(O.greater(x, 20.0), x, O.log(O.add(O.exp(x), 1.0)))
    if op == "softsign":
        return O.divide(x, O.add(O.abs(x), 1.0))
    raise NotImplementedError(f"graph operator {op!r} has no lowering")


def _divide(x, y):
    q = O.divide(x, y)
    if dt.is_float(q.dtype):
        return q
    # the library floors integer quotients (numpy's //); ONNX truncates toward zero: add one
    # where the signs differ and the division is inexact
    signs_differ = O.not_equal(O.less(x, 0), O.less(y, 0))
    inexact = O.not_equal(O.multiply(q, y), x)
    return O.where(O.logical_and(signs_differ, inexact), O.add(q, 1), q)


def _binary(op: str, x, y):
    direct = {"add": O.add, "subtract": O.subtract, "multiply": O.multiply, "power": O.power,
              "maximum": O.maximum, "minimum": O.minimum, "equal": O.equal, "less": O.less,
              "greater": O.greater, "less_equal": O.less_equal,
              "greater_equal": O.greater_equal, "logical_and": O.logical_and,
              "logical_or": O.logical_or, "bitwise_and": O.bitwise_and,
              "bitwise_or": O.bitwise_or, "bitwise_xor": O.bitwise_xor,
              "left_shift": O.left_shift, "right_shift": O.right_shift}
    if op in direct:
        return direct[op](x, y)
    if op == "divide":
        return _divide(x, y)
    if op == "prelu":
        return O.where(O.greater_equal(x, 0), x, O.multiply(x, y))
    if op == "logical_xor":
        return O.logical_and(O.logical_or(x, y), O.logical_not(O.logical_and(x, y)))
    raise NotImplementedError(f"graph operator {op!r} has no lowering")


def _nary(op: str, ins):
    fn = {"sum_n": O.add, "mean_n": O.add, "max_n": O.maximum, "min_n": O.minimum}[op]
    acc = ins[0]
    for t in ins[1:]:
        acc = fn(acc, t)
    if len(ins) == 1:
        acc = O.reshape(acc, _shape(acc))  # a one-input sum is a copy
    if op == "mean_n":
        acc = O.divide(acc, float(len(ins)))
    return acc


# ----------------------------------------------------------------------------- nn


def _channel_vector(b, nd: int):
    """A per-channel vector [C] shaped to broadcast over an N C ... tensor of rank nd."""
    return O.reshape(b, (_shape(b)[0],) + (1,) * (nd - 2))


def _conv(ins, a, out_shape):
    x, w = ins[0], ins[1]
    blocked_in = R.channel_block(a.get("layout")) is not None
    if blocked_in or a.get("out_layout") is not None:  # NCHW[x]c out
        p = a["pads"]
        window = (a["strides"], (p[0], p[1], p[2], p[3]), a["dilations"])
        hw = _symbolic_out_hw(out_shape)
        if not blocked_in:  # NCHW in (e.g. 3 channels): the oc-blocked direct conv
            y = O.conv2d_nchw(x, w, *window, a["groups"], out_layout=a["out_layout"],
                              out_hw=hw)
        elif a.get("groups", 1) > 1:
            y = O.depthwise_conv2d_nchwc(x, w, *window, out_hw=hw)
        elif str(a.get("weight_layout")).startswith(R.WINOGRAD_LAYOUT_PREFIX):
            y = O.conv2d_winograd_nchwc(x, w, window[1])
        else:
            y = O.conv2d_nchwc(x, w, *window, out_hw=hw)
        if len(ins) > 2:  # bias [OC] is [OC/o, 1, 1, o] in the blocked layout
            y = O.add(y, O.reshape(ins[2], (out_shape[1], 1, 1, out_shape[4])))
        return y
    nsp = len(out_shape) - 2
    if nsp == 2:
        p = a["pads"]
        y = O.conv2d_nchw(x, w, a["strides"], (p[0], p[1], p[2], p[3]), a["dilations"],
                          a["groups"], out_hw=_symbolic_out_hw(out_shape))
    else:
        y = _conv_nd(x, w, a, out_shape)
    if len(ins) > 2:
        y = O.add(y, _channel_vector(ins[2], len(out_shape)))
    return y


def _symbolic_out_hw(out_shape) -> tuple | None:
    """A window op's output plane in the graph's canonical forms when it is symbolic (the
    library's ops then take them as they are, so the kernel's shapes are the graph's)."""
    return tuple(out_shape[2:4]) if R.symbolic_spatial(out_shape) else None


def _pad_spatial(x, lo, hi, value):
    if not any(lo) and not any(hi):
        return x
    return O.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)), "constant", value)


def _window_reader(x, lo, hi, value):
    """read(idx): x padded by lo/hi with ``value`` at idx (N, C, then padded positions). Over
    a symbolic plane every spatial read is a select on its position being inside x, not a read
    of a padded tensor: the output extents there are clamped to >= 1 (the runtime refuses the
    sizes without a whole window before the kernel runs), so the windows of sizes never run
    would reach past any padded extent, and the build's bounds proof must see the condition.
    (The code generator masks a load by the condition selecting it: no read leaves x.)"""
    xs = _shape(x)
    if not R.symbolic_spatial(xs):
        xp = _pad_spatial(x, lo, hi, value)
        return lambda idx: xp[idx]
    fill = tl.const(value, x.dtype)

    def read(idx):
        pos = [p - b if b else p for p, b in zip(idx[2:], lo)]
        inside = [c for d, j in enumerate(pos) for c in (j >= 0, j < xs[2 + d])]
        return tl.select(tl.all(*inside), x[(*idx[:2], *pos)], fill)

    return read


def _window_pads(in_sp, out_sp, k, st, dil, lo, hi, ceil_mode=False):
    """High-side padding that the windows actually reach (strided windows may stop short).
    Over an axis of symbolic size: the given padding, and with ceil_mode up to a stride less
    one more for the last window (a bound: the output's extent stops the windows, and the
    padded rows no window reaches are never read, the pad being inlined as a condition)."""
    return [h + (s - 1 if ceil_mode else 0) if is_symbolic(n) or is_symbolic(o)
            else max(0, (o - 1) * s + d * (kk - 1) + 1 - n - p)
            for n, o, kk, s, d, p, h in zip(in_sp, out_sp, k, st, dil, lo, hi)]


def _conv_nd(x, w, a, out_shape):
    """Convolution over 1 or 3 spatial axes (the library's conv is 2-D)."""
    nsp = len(out_shape) - 2
    xs, ws = _shape(x), _shape(w)
    groups, st, dil = a["groups"], a["strides"], a["dilations"]
    lo = a["pads"][:nsp]
    hi = _window_pads(xs[2:], out_shape[2:], ws[2:], st, dil, lo, a["pads"][nsp:])
    read = _window_reader(x, lo, hi, 0.0)
    cin_g, cout_g = ws[1], ws[0] // groups
    rc = tl.reduce_axis(cin_g, "rc")
    rk = [tl.reduce_axis(ws[2 + d], f"r{d}") for d in range(nsp)]

    def f(*idx):
        n, k, sp = idx[0], idx[1], idx[2:]
        c = rc.var if groups == 1 else (k // cout_g) * cin_g + rc.var
        xi = (n, c) + tuple(sp[d] * st[d] + rk[d].var * dil[d] for d in range(nsp))
        return tl.sum(read(xi) * w[(k, rc.var) + tuple(r.var for r in rk)], axis=[rc, *rk])

    return tl.compute(tuple(out_shape), f, name="conv_nd")


def _dense(ins, a, out_shape):
    # the graph's dense weight is [K, N] (K-major): a matmul with the library's packed panels,
    # packed at build time when the weight is a constant (weight_layout NK16n)
    if a.get("weight_layout") is not None:
        y = O.matmul_prepacked(ins[0], ins[1], a["units"])
    else:
        y = O.matmul(ins[0], ins[1])
    return O.add(y, ins[2]) if len(ins) > 2 else y


def _matmul(ins, a, out_shape):
    x, y = ins
    if x.ndim == 1 and y.ndim > 2:  # the library wants stacks of matrices on both sides
        return O.matmul(O.reshape(x, (1, _shape(x)[0])), y)
    if y.ndim == 1 and x.ndim > 2:
        return O.matmul(x, O.reshape(y, (_shape(y)[0], 1)))
    return O.matmul(x, y)


def _pool(op, ins, a, out_shape):
    x = ins[0]
    blocked = R.channel_block(a.get("layout")) is not None  # NCHW[x]c: the block rides along
    nsp = len(out_shape) - (3 if blocked else 2)
    k, st, p = a["kernel"], a["strides"], a["pads"]
    dil = a.get("dilations", [1] * nsp)
    ceil = bool(a.get("ceil_mode", 0))
    if nsp == 2:
        hw = _symbolic_out_hw(out_shape)
        try:
            if op == "max_pool":
                return O.max_pool2d(x, k, st, (p[0], p[1], p[2], p[3]), dil, ceil, out_hw=hw)
            if dil == [1, 1]:
                return O.avg_pool2d(x, k, st, (p[0], p[1], p[2], p[3]), ceil,
                                    bool(a.get("count_include_pad", 0)), out_hw=hw)
        except ValueError:
            if blocked:
                raise
            # padding wider than the window (legal in ONNX): the generic compute below
    if blocked:  # convert_layout blocks only the pooling the library computes
        raise ValueError(f"{op} in layout {a['layout']}: only the library's 2-D pooling")
    return _pool_nd(op, x, a, out_shape)


def _pool_nd(op, x, a, out_shape):
    """Pooling over any number of spatial axes with any padding (the library's is 2-D)."""
    nsp = len(out_shape) - 2
    xs = _shape(x)
    k, st, lo = a["kernel"], a["strides"], a["pads"][:nsp]
    dil = a.get("dilations", [1] * nsp)
    hi = _window_pads(xs[2:], out_shape[2:], k, st, dil, lo, a["pads"][nsp:],
                      bool(a.get("ceil_mode", 0)))
    is_max = op == "max_pool"
    fill = O.max_pool_pad_value(x.dtype) if is_max else 0.0
    read = _window_reader(x, lo, hi, fill)
    rk = [tl.reduce_axis(k[d], f"r{d}") for d in range(nsp)]

    def window(*o):
        n, c, sp = o[0], o[1], o[2:]
        idx = (n, c) + tuple(sp[d] * st[d] + rk[d].var * dil[d] for d in range(nsp))
        return (tl.max if is_max else tl.sum)(read(idx), axis=rk)

    red = tl.compute(tuple(out_shape), window, name=f"{op}_nd")
    if is_max:
        return red
    include = a.get("count_include_pad", 0)

    def avg(*o):
        n, c, sp = o[0], o[1], o[2:]
        count = None
        for d in range(nsp):
            start = sp[d] * st[d] - lo[d]
            top = xs[2 + d] + (a["pads"][nsp + d] if include else 0)
            bottom = -lo[d] if include else 0
            # the window's taps start + r * dil inside [bottom, top): with dilation they are
            # not a contiguous span, so each tap is counted (k is a few taps)
            taps = [tl.all(start + r * dil[d] >= bottom, start + r * dil[d] < top)
                    for r in range(k[d])]
            cnt = sum((tl.select(t, 1, 0) for t in taps[1:]), tl.select(taps[0], 1, 0))
            count = cnt if count is None else count * cnt
        return red[(n, c, *sp)] / tl.cast(count, x.dtype)

    return tl.compute(tuple(out_shape), avg, name="avg_pool_nd")


def _global_pool(op, x, a):
    if x.ndim == 4 or R.channel_block(a.get("layout")):
        return O.global_avg_pool2d(x) if op == "global_avg_pool" else O.global_max_pool2d(x)
    axes = tuple(range(2, x.ndim))
    red = O.mean if op == "global_avg_pool" else O.max
    return red(x, axis=axes, keepdims=True)


def _instance_norm(ins, a):
    x, g, b = ins
    axes = tuple(range(2, x.ndim))
    d = O.subtract(x, O.mean(x, axis=axes, keepdims=True))
    var = O.mean(O.multiply(d, d), axis=axes, keepdims=True)
    rstd = O.divide(1.0, O.sqrt(O.add(var, float(a["epsilon"]))))
    y = O.multiply(O.multiply(d, rstd), _channel_vector(g, x.ndim))
    return O.add(y, _channel_vector(b, x.ndim))


def _softmax(x, a):
    axes = sorted(a["axes"])
    fn = O.log_softmax if a.get("log") else O.softmax
    if len(axes) == 1:
        return fn(x, axes[0])
    # opset < 13 normalises over trailing axes together: one row per leading index
    xs = _shape(x)
    lead = int(math.prod(xs[: axes[0]]))
    y = fn(O.reshape(x, (lead, int(math.prod(xs[axes[0]:])))), 1)
    return O.reshape(y, xs)


def _reduce(op, x, a):
    fn = {"reduce_sum": O.sum, "reduce_mean": O.mean, "reduce_max": O.max,
          "reduce_min": O.min, "reduce_prod": O.prod}[op]
    return fn(x, axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1)))


def _arg_reduce(op, x, a):
    fn = O.argmax if op == "argmax" else O.argmin
    axis = a["axis"] % x.ndim
    keep = bool(a.get("keepdims", 1))
    if not a.get("select_last_index", 0):
        return fn(x, axis, keep)
    # the last extremum is the first one of the reversed axis, counted from the end
    n = _shape(x)[axis]
    rev = O.strided_slice(x, [n - 1], [-n - 1], [-1], [axis])
    return O.subtract(n - 1, fn(rev, axis, keep))


# ----------------------------------------------------------------------------- data movement


def _slice(x, a):
    n = _shape(x)
    starts, steps, lens = R.slice_params(list(n), a)
    if all(isinstance(d, int) for d in n):
        axes = [d for d in range(len(n)) if (starts[d], steps[d], lens[d]) != (0, 1, n[d])]
        ends = [starts[d] + lens[d] * steps[d] for d in axes]
        ends = [e if e >= 0 else -n[d] - 1 for d, e in zip(axes, ends)]  # (a negative step
        # runs to index 0)
        return O.strided_slice(x, [starts[d] for d in axes], ends, [steps[d] for d in axes],
                               axes)
    # a symbolic axis: its first index and length are expressions of the sizes with ONNX's
    # clamping (R.slice_params), which the library's strided_slice (int bounds) cannot take
    first = [_index_expr(v) for v in starts]

    def f(*i):
        return x[tuple(first[d] + steps[d] * i[d] for d in range(len(n)))]

    return op_compute("slice", [_index_expr(d) for d in lens], f, INJECTIVE,
                      begin=first, steps=steps)


def _index_expr(d):
    return d if isinstance(d, int) else tl.const(0, "int64") + d


def _pad(x, a):
    xs = _shape(x)
    nd = len(xs)
    p = [parse(v) for v in a["pads"]]
    cropped = any(isinstance(v, int) and v < 0 for v in p)
    sized = all(isinstance(d, int) for d in xs)
    if not all(isinstance(v, int) for v in p) or (
            cropped and not sized and a.get("mode", "constant") == "constant"):
        # (a crop of a symbolic axis has expression bounds, which strided_slice cannot take:
        # RWKV's time shift, ZeroPad2d((0, 0, 1, -1)) over a dynamic sequence)
        return _symbolic_pad(x, xs, p, a.get("value", 0.0))
    if any(v < 0 for v in p):  # negative pads crop first
        lo = [max(0, -p[d]) for d in range(nd)]
        hi = [xs[d] - max(0, -p[nd + d]) for d in range(nd)]
        x = O.strided_slice(x, lo, hi)
    width = [(max(0, p[d]), max(0, p[nd + d])) for d in range(nd)]
    if not any(lo or hi for lo, hi in width):
        return O.reshape(x, _shape(x))
    return O.pad(x, width, a.get("mode", "constant"), a.get("value", 0.0))


def _symbolic_pad(x, xs, p, value):
    """Constant padding by widths that are expressions of the sizes (T5's attention mask padded
    to past + new length): out[i] = x[i - before] where that lies in x, else the value. A
    negative width crops (ONNX allows it): the same condition then never holds on that side.
    The output extent xs + before + after is checked >= 0 at the kernel's entry."""
    nd = len(xs)
    before = [_index_expr(v) for v in p[:nd]]
    out = [_index_expr(dim(xs[d] + p[d] + p[nd + d])) for d in range(nd)]
    fill = tl.const(value, x.dtype)

    def f(*i):
        idx = [i[d] - before[d] for d in range(nd)]
        inside = [c for d in range(nd) if not _is_zero_int(p[d]) or not _is_zero_int(p[nd + d])
                  for c in (idx[d] >= 0, idx[d] < xs[d])]
        return tl.select(tl.all(*inside), x[tuple(idx)], fill) if inside else x[tuple(idx)]

    return op_compute("pad", out, f, INJECTIVE, pad_width=[[str(v) for v in p]], mode="constant")


def _is_zero_int(v) -> bool:
    return isinstance(v, int) and v == 0


def _tile(x, a):
    # [s0, s1] -> [1, s0, 1, s1] -> expand [r0, s0, r1, s1] -> [r0 s0, r1 s1]
    xs, reps = _shape(x), a["repeats"]
    inter = [v for s in xs for v in (1, s)]
    big = [v for s, r in zip(xs, reps) for v in (r, s)]
    y = O.expand(O.reshape(x, inter), big)
    return O.reshape(y, [s * r for s, r in zip(xs, reps)])


def _depth_to_space(x, a):
    n, c, h, w = _shape(x)
    b = a["blocksize"]
    cb = c // (b * b)
    if a.get("mode", "DCR") == "DCR":
        y = O.transpose(O.reshape(x, (n, b, b, cb, h, w)), (0, 3, 4, 1, 5, 2))
    else:
        y = O.transpose(O.reshape(x, (n, cb, b, b, h, w)), (0, 1, 4, 2, 5, 3))
    return O.reshape(y, (n, cb, h * b, w * b))


# ----------------------------------------------------------------------------- vision (issue 18)


def _resize(x, a, out_shape):
    # the output shape: the sizes as expressions where they are symbolic (attrs hold text)
    return O.resize(x, out_shape, a.get("scales"), a["mode"],
                    a["coordinate_transformation_mode"], a.get("nearest_mode",
                                                               "round_prefer_floor"),
                    a.get("cubic_coeff_a", -0.75), bool(a.get("exclude_outside", 0)),
                    a.get("extrapolation_value", 0.0), a.get("roi"), bool(a.get("antialias", 0)))


def _ct_interleave(y, a, out_shape):
    from tensorlang.ops.conv_transpose import AxisGeometry

    # (taps and the conv's padding are the conv's business: the interleave reads the rest)
    geo = [AxisGeometry(s, 0, (0, 0), sh, e)
           for s, sh, e in zip(a["strides"], a["shifts"], a["ends"])]
    return O.conv_transpose_interleave(y, geo, a["groups"], out_lens=tuple(out_shape[2:]))


def _vision(op: str, ins: list, a: dict, out_shape):
    if op == "resize":
        return _resize(ins[0], a, out_shape)
    if op == "conv_transpose_weight":
        return O.conv_transpose_weight(ins[0], a["strides"], a["dilations"], a["groups"])
    if op == "conv_transpose_interleave":
        return _ct_interleave(ins[0], a, out_shape)
    if op == "gather_elements":
        return O.gather_elements(ins[0], ins[1], a.get("axis", 0))
    if op == "gather_nd":
        return O.gather_nd(ins[0], ins[1], a.get("batch_dims", 0))
    if op == "scatter_nd":
        return O.scatter_nd(ins[0], ins[1], ins[2], a.get("reduction", "none"))
    if op == "scatter_nd_planned":
        return O.scatter_nd_planned(ins[0], ins[1], ins[2], a.get("reduction", "none"))
    if op == "scatter_nd_boxed":
        return O.scatter_nd_boxed(ins[0], ins[1], a["starts"], a["steps"],
                                  a.get("reduction", "none"))
    if op == "space_to_depth":
        return O.space_to_depth(ins[0], a["blocksize"], a.get("mode", "DCR"))
    if op == "trilu":
        return O.trilu(ins[0], a.get("k", 0), bool(a.get("upper", 1)))
    if op == "group_norm":
        return O.group_norm(ins[0], a["num_groups"], *(list(ins[1:3]) + [None, None])[:2],
                            a["epsilon"], a.get("compute_dtype"))
    if op == "grid_sample":
        return O.grid_sample(ins[0], ins[1], a["mode"], a["padding_mode"],
                             bool(a["align_corners"]))
    raise NotImplementedError(f"graph operator {op!r} has no lowering")


VISION_OPS = ("resize", "conv_transpose_weight", "conv_transpose_interleave", "gather_nd",
              "gather_elements", "scatter_nd", "scatter_nd_planned", "scatter_nd_boxed",
              "space_to_depth", "trilu", "group_norm", "grid_sample")


# ----------------------------------------------------------------------------- issue 18: float
# classes, remainder, cumulative sum, selection


def _misc(op: str, ins: list, a: dict):
    x = ins[0]
    if op == "isnan":
        return O.isnan(x)
    if op == "isinf":
        return O.isinf(x, bool(a.get("detect_negative", 1)), bool(a.get("detect_positive", 1)))
    if op == "mod":
        return O.mod(x, ins[1], bool(a.get("fmod", 0)))
    if op in ("cumsum", "cumprod"):
        fn = O.cumsum if op == "cumsum" else O.cumprod
        return fn(x, a["axis"] % x.ndim, bool(a.get("exclusive", 0)), bool(a.get("reverse", 0)))
    raise NotImplementedError(f"graph operator {op!r} has no lowering")


MISC_OPS = ("isnan", "isinf", "mod", "cumsum", "cumprod")


def _quant(op: str, ins: list, a: dict):
    zero = ins[2] if len(ins) > 2 else None
    if op == "quantize_linear":
        return O.quantize_linear(ins[0], ins[1], zero, a["dtype"])
    if op == "dequantize_linear":
        return O.dequantize_linear(ins[0], ins[1], zero)
    if op == "qlinear_conv2d":
        sums, bias = R.qlinear_conv_extras(ins, a)
        return O.qlinear_conv2d(ins[0], ins[1], sums, bias, ins[2], ins[3], a["oc"],
                                tuple(a["strides"]), tuple(a["pads"]), a["x_zero"], a["dtype"],
                                bool(a.get("relu", False)), bool(a.get("layout")),
                                bool(a.get("out_layout")))
    if op == "dense_integer":
        return O.dense_integer(ins[0], ins[1], ins[2] if len(ins) > 2 else None, a["n"],
                               ins[3] if len(ins) > 3 else None)
    return O.requantize(ins[0], ins[1], zero, a["dtype"], bool(a.get("relu", False)))


QUANT_OPS = (*R.QUANT_OPS, "dense_integer", "qlinear_conv2d")
def _rnn_recurrence(ins: list, a: dict) -> list:
    *ins, lens = split_inputs(ins, a["cell"])
    return O.rnn_recurrence(*ins, a["cell"], a["direction"], a["activations"], a.get("clip"),
                            bool(a.get("linear_before_reset", 0)), lens)


# ops whose node has several outputs, lowered to one tensor per output
MULTI_OUTPUT_OPS = {
    "topk": lambda ins, a: O.topk(ins[0], a["k"], a["axis"] % ins[0].ndim,
                                  bool(a.get("largest", 1))),
    "rnn_recurrence": lambda ins, a: _rnn_recurrence(ins, a),
}


# ----------------------------------------------------------------------------- dispatch


def lower_op(op: str, ins: list, attrs: dict, out_type: Type):
    """The library compute of one graph node over input tensors ``ins``, in the graph's storage
    shape and dtype for ``out_type``."""
    out_shape, out_dtype = tuple(out_type[0]), out_type[1]
    if op in R.UNARY_REFS or op == "cast":
        y = _unary(op, ins[0], attrs)
    elif op in R.BINARY_REFS or op in R.COMPARE_REFS:
        y = _binary(op, ins[0], ins[1])
    elif op == "where":
        y = O.where(*ins)
    elif op in ("sum_n", "mean_n", "max_n", "min_n"):
        y = _nary(op, ins)
    elif op == "conv":
        y = _conv(ins, attrs, out_shape)
    elif op == "dense":
        y = _dense(ins, attrs, out_shape)
    elif op == "matmul":
        y = _matmul(ins, attrs, out_shape)
    elif op in ("max_pool", "avg_pool"):
        y = _pool(op, ins, attrs, out_shape)
    elif op in ("global_avg_pool", "global_max_pool"):
        y = _global_pool(op, ins[0], attrs)
    elif op == "batch_norm":
        y = O.batch_norm(*ins, axis=1, epsilon=attrs["epsilon"])
    elif op == "instance_norm":
        y = _instance_norm(ins, attrs)
    elif op == "lrn":
        y = O.lrn(ins[0], attrs["size"], attrs.get("alpha", 1e-4), attrs.get("beta", 0.75),
                  attrs.get("bias", 1.0))
    elif op == "layer_norm":
        y = O.layer_norm(ins[0], ins[1] if len(ins) > 1 else None,
                         ins[2] if len(ins) > 2 else None, attrs["axis"], attrs["epsilon"])
    elif op == "softmax":
        y = _softmax(ins[0], attrs)
    elif op in R.REDUCE_REFS:
        y = _reduce(op, ins[0], attrs)
    elif op in ("argmax", "argmin"):
        y = _arg_reduce(op, ins[0], attrs)
    elif op == "reshape":
        y = O.reshape(ins[0], storage_shape(out_shape))
    elif op == "transpose":
        # a 0-d value is stored as [1] (storage_shape): its transpose (perm []) is a copy
        y = O.transpose(ins[0], attrs["perm"] or None)
    elif op == "concat":
        y = O.concat(list(ins), attrs["axis"] % ins[0].ndim)
    elif op == "slice":
        y = _slice(ins[0], attrs)
    elif op == "pad":
        y = _pad(ins[0], attrs)
    elif op == "gather":
        y = O.gather(ins[0], ins[1], attrs["axis"] % ins[0].ndim)
    elif op == "expand":
        y = O.expand(ins[0], out_shape)
    elif op == "tile":
        y = _tile(ins[0], attrs)
    elif op == "arange_like":
        y = O.arange_like(ins[0], attrs["start"], attrs["delta"])
    elif op == "shape_values":
        y = O.reshape(O.shape_values(list(ins), [parse(t) for t in attrs["values"]],
                                     attrs["dtype"]), out_shape)
    elif op == "depth_to_space":
        y = _depth_to_space(ins[0], attrs)
    elif op in VISION_OPS:
        y = _vision(op, ins, attrs, out_shape)
    elif op in MISC_OPS:
        y = _misc(op, ins, attrs)
    elif op in QUANT_OPS:
        y = _quant(op, ins, attrs)
    elif op == "layout_transform":
        y = O.layout_transform(ins[0], attrs["src_layout"], attrs["dst_layout"])
    else:
        raise NotImplementedError(f"graph operator {op!r} has no lowering")
    return _conform(y, out_shape, out_dtype)


def placeholders(in_types: Sequence[Type]) -> list:
    return [tl.placeholder(storage_shape(s), dtype=t, name=f"in{i}")
            for i, (s, t) in enumerate(in_types)]


def lower_node(op: str, attrs: dict, in_types: Sequence[Type], out_types: Sequence[Type]):
    """Placeholders for the inputs and the output compute of one node: (ins, [out])."""
    ins = placeholders(in_types)
    if op in MULTI_OUTPUT_OPS:
        outs = MULTI_OUTPUT_OPS[op](ins, attrs)
        return ins, [_conform(t, s, d) for t, (s, d) in zip(outs, out_types)]
    return ins, [lower_op(op, ins, attrs, out_types[0])]


def lower_fused(group: FusedGroup, out_type: Type):
    """A fused group as one compute: (input placeholders, [output of its root member])."""
    ins = placeholders(group.inputs)
    vals: list = []
    for m in group.members:
        args = [ins[k] if src == "in" else vals[k] for src, k in m.inputs]
        vals.append(lower_op(m.op, args, m.attrs, m.type))
    return ins, [_conform(vals[-1], out_type[0], out_type[1])]


def lower(op: str, attrs: dict, in_types: Sequence[Type], out_types: Sequence[Type]):
    """(ins, outs) of any kernel node: a fused group or a single operator."""
    if op == FUSED:
        return lower_fused(FusedGroup.from_attrs(attrs, in_types), out_types[0])
    return lower_node(op, attrs, in_types, out_types)
