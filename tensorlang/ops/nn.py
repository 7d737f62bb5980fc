"""Neural-network operators: matmul / batch matmul (numpy broadcasting), dense, gemm, conv2d
(NCHW with groups, blocked NCHW[x]c), depthwise conv2d, max/avg/global pooling, batch norm
(inference), LRN, softmax, log-softmax, layer norm."""
# ruff: noqa: TRY004 - bad attributes raise ValueError (the library contract)


from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import as_int, const
from ..te.tensor import Tensor
from ._base import (
    BROADCAST,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OUT_ELEMWISE_FUSABLE,
    REDUCE,
    broadcast_index,
    broadcast_shapes,
    check_int,
    check_tensor,
    dim_equal,
    dims_of,
    int_tuple,
    is_one,
    is_symbolic,
    normalize_axis,
    op_compute,
    reciprocal_count,
    result_dtype,
    static_shape,
)
from .transform import pad as _pad
from .transform import squeeze as _squeeze

# ----------------------------------------------------------------------------- matmul family


def _mm_dtype(op, a, b):
    d = result_dtype(op, a, b)
    if dt.is_bool(d):
        raise ValueError(f"{op}: bool operands are not supported")
    return d


def _read(t, idx, d):
    v = t[idx]
    return v if v.dtype == d else te.cast(v, d)


PACK_BLOCK = 16  # columns of a packed B panel: one zmm of fp32
PACK_MIN_ROWS = 12  # fewer rows than this do not amortize packing B (memory-bound products)


def _packed_b(op: str, b: Tensor, k: int, n: int, trans_b: bool, d: str, m: int):
    """Read function rb(k, j) of op(b) [K, N]; for enough rows it reads a packed copy
    P[N/16, K, 16] (a separate stage, tag `<op>_pack`, zero-padded to whole panels) so the
    micro-kernel loads 16 consecutive columns of one k as a single aligned vector and the panel
    it streams is contiguous."""
    def direct(kk, j):
        return _read(b, (j, kk) if trans_b else (kk, j), d)

    # a symbolic M packs (the common range of batch * seq is well above 12 rows); a symbolic N
    # or K (not a weight) reads B as it is
    small = as_int(m) is not None and m < PACK_MIN_ROWS
    if small or as_int(n) is None or as_int(k) is None or n < PACK_BLOCK:
        return direct
    bn = PACK_BLOCK
    nb = -(-n // bn)

    def pk(jo, kk, ji):
        j = jo * bn + ji
        if nb * bn == n:
            return direct(kk, j)
        return te.select(j < n, direct(kk, te.min(j, const(n - 1))), const(0, d))

    p = op_compute(op + "_pack", (nb, k, bn), pk, INJECTIVE, name=f"{b.name}_pack",
                   layout="T" if trans_b else "N")
    return lambda kk, j: p[j // bn, kk, j % bn]


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """numpy.matmul: 2-D x 2-D, 1-D operands promoted and their axis removed again, and stacks of
    matrices with broadcast batch dimensions (-> batch_matmul)."""
    check_tensor("matmul", "a", a)
    check_tensor("matmul", "b", b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must have at least one dimension")
    sa, sb = dims_of("matmul", "a", a), dims_of("matmul", "b", b)
    if a.ndim > 2 or b.ndim > 2:
        if a.ndim == 1 or b.ndim == 1:
            raise ValueError("matmul: mixing a 1-D operand with a stack of matrices is not "
                             "supported; unsqueeze it first")
        return batch_matmul(a, b)
    ka = sa[-1]
    kb = sb[0]
    if not dim_equal(ka, kb):
        raise ValueError(f"matmul: a {sa} and b {sb} have mismatched inner dimensions "
                         f"({ka} vs {kb})")
    d = _mm_dtype("matmul", a, b)
    k = te.reduce_axis((0, ka), name="k")
    m = 1 if a.ndim == 1 else sa[0]
    n = 1 if b.ndim == 1 else sb[1]

    def ra(i, kk):
        return _read(a, (kk,) if a.ndim == 1 else (i, kk), d)

    if b.ndim == 1:
        def rb(kk, j):
            return _read(b, (kk,), d)
    else:
        rb = _packed_b("matmul", b, ka, n, False, d, m)

    c = op_compute("matmul", (m, n), lambda i, j: te.sum(ra(i, k) * rb(k, j), axis=k),
                   OUT_ELEMWISE_FUSABLE, layout="NN")
    drop = [ax for ax, one in ((0, a.ndim == 1), (1, b.ndim == 1)) if one]
    return _squeeze(c, drop) if drop else c


def pack_matmul_weight(b: Tensor) -> Tensor:
    """[K, N] -> [ceil(N/16), K, 16] (zero-padded): the panels matmul's micro-kernel streams,
    one zmm of 16 columns per k. A constant B (a model's weight) packed once, at build time,
    and passed to matmul_prepacked saves the kernel's per-call packing pass (128x768 .
    768x3072: 1.57 -> 1.21 ms)."""
    op = "matmul_weight_layout"
    check_tensor(op, "b", b)
    if b.ndim != 2:
        raise ValueError(f"{op}: b must be 2-D [K, N], got {b.ndim}-D")
    k, n = static_shape(op, "b", b)
    bn = PACK_BLOCK
    nb = -(-n // bn)

    def f(jo, kk, ji):
        j = jo * bn + ji
        if nb * bn == n:
            return b[kk, j]
        return te.select(j < n, b[kk, te.min(j, const(n - 1))], const(0, b.dtype))

    return op_compute(op, (nb, k, bn), f, INJECTIVE)


def matmul_prepacked(a: Tensor, bp: Tensor, n: int) -> Tensor:
    """a [M, K] . B [K, N] with B given packed by pack_matmul_weight ([ceil(N/16), K, 16]);
    n: B's columns (the panels may be zero-padded past them)."""
    op = "matmul"
    check_tensor(op, "a", a)
    check_tensor(op, "bp", bp)
    if a.ndim != 2 or bp.ndim != 3:
        raise ValueError(f"matmul_prepacked: a must be 2-D and bp 3-D [N/16, K, 16], got "
                         f"{a.ndim}-D and {bp.ndim}-D")
    m, ka = dims_of("matmul_prepacked", "a", a, constant=(1,), why="K, the packed weight's")
    nb, kb, bn = static_shape(op, "bp", bp)
    n = check_int("matmul_prepacked", "n", n, 1)
    if ka != kb or bn != PACK_BLOCK or nb != -(-n // bn):
        raise ValueError(f"matmul_prepacked: bp {(nb, kb, bn)} is not B [{ka}, {n}] packed "
                         f"into [{-(-n // PACK_BLOCK)}, {ka}, {PACK_BLOCK}] panels")
    d = _mm_dtype(op, a, bp)
    k = te.reduce_axis((0, ka), name="k")
    return op_compute(op, (m, n), lambda i, j: te.sum(
        _read(a, (i, k), d) * _read(bp, (j // bn, k, j % bn), d), axis=k),
        OUT_ELEMWISE_FUSABLE, layout="NN")


def batch_matmul(a: Tensor, b: Tensor, trans_a: bool = False, trans_b: bool = False) -> Tensor:
    """Stacks of matrices, numpy broadcasting over the leading (batch) dimensions."""
    check_tensor("batch_matmul", "a", a)
    check_tensor("batch_matmul", "b", b)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("batch_matmul: operands must be at least 2-D")
    sa, sb = dims_of("batch_matmul", "a", a), dims_of("batch_matmul", "b", b)
    m, ka = (sa[-1], sa[-2]) if trans_a else (sa[-2], sa[-1])
    kb, n = (sb[-1], sb[-2]) if trans_b else (sb[-2], sb[-1])
    if not dim_equal(ka, kb):
        raise ValueError(f"batch_matmul: a {sa} and b {sb} have mismatched inner dimensions "
                         f"({ka} vs {kb})")
    batch = broadcast_shapes("batch_matmul", a.shape[:-2], b.shape[:-2])
    d = _mm_dtype("batch_matmul", a, b)
    k = te.reduce_axis((0, ka), name="k")
    nb = len(batch)

    def bidx(t, bi):  # numpy broadcasting of the batch dimensions
        off = nb - (t.ndim - 2)
        return tuple(0 if is_one(t.shape[x]) else bi[off + x] for x in range(t.ndim - 2))

    def f(*idx):
        bi, i, j = idx[:nb], idx[nb], idx[nb + 1]
        ai = bidx(a, bi) + ((k, i) if trans_a else (i, k))
        bj = bidx(b, bi) + ((j, k) if trans_b else (k, j))
        return te.sum(_read(a, ai, d) * _read(b, bj, d), axis=k)

    layout = ("T" if trans_a else "N") + ("T" if trans_b else "N")
    return op_compute("batch_matmul", tuple(batch) + (m, n), f, OUT_ELEMWISE_FUSABLE,
                      layout=layout)


def dense(x: Tensor, w: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [M, K] . w[N, K]^T (+ bias[N]): a fully connected layer with the weight laid out
    [out_features, in_features] (ONNX Gemm transB=1, torch Linear)."""
    check_tensor("dense", "x", x)
    check_tensor("dense", "w", w)
    if x.ndim != 2 or w.ndim != 2:
        raise ValueError(f"dense: x and w must be 2-D, got {x.ndim}-D and {w.ndim}-D")
    m, kx = dims_of("dense", "x", x, constant=(1,), why="in_features, the weight's")
    n, kw = static_shape("dense", "w", w)
    if kx != kw:
        raise ValueError(f"dense: x {(m, kx)} and w {(n, kw)} have mismatched in_features "
                         f"({kx} vs {kw})")
    d = _mm_dtype("dense", x, w)
    k = te.reduce_axis((0, kx), name="k")
    rw = _packed_b("dense", w, kx, n, True, d, m)
    out = op_compute("dense", (m, n), lambda i, j: te.sum(_read(x, (i, k), d) * rw(k, j),
                                                         axis=k),
                     OUT_ELEMWISE_FUSABLE, layout="NT")
    if bias is None:
        return out
    check_tensor("dense", "bias", bias)
    if static_shape("dense", "bias", bias) != (n,):
        raise ValueError(f"dense: bias must have shape ({n},), got "
                         f"{static_shape('dense', 'bias', bias)}")
    return op_compute("bias_add", (m, n), lambda i, j: out[i, j] + _read(bias, (j,), d),
                      BROADCAST)


def gemm(a: Tensor, b: Tensor, c: Tensor | None = None, alpha: float = 1.0, beta: float = 1.0,
         trans_a: bool = False, trans_b: bool = False) -> Tensor:
    """ONNX Gemm: alpha * op(a) . op(b) + beta * c, c broadcast to [M, N]."""
    for name, t in (("a", a), ("b", b)):
        check_tensor("gemm", name, t)
        if t.ndim != 2:
            raise ValueError(f"gemm: {name} must be 2-D, got {t.ndim}-D")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"gemm: {name} must be a number, got {v!r}")
    sa, sb = dims_of("gemm", "a", a), dims_of("gemm", "b", b)
    m, ka = (sa[1], sa[0]) if trans_a else sa
    kb, n = (sb[1], sb[0]) if trans_b else sb
    if not dim_equal(ka, kb):
        raise ValueError(f"gemm: op(a) {(m, ka)} and op(b) {(kb, n)} have mismatched inner "
                         "dimensions")
    d = _mm_dtype("gemm", a, b)
    k = te.reduce_axis((0, ka), name="k")
    rb = _packed_b("gemm", b, ka, n, trans_b, d, m)

    def f(i, j):
        x = _read(a, (k, i) if trans_a else (i, k), d)
        return te.sum(x * rb(k, j), axis=k)

    layout = ("T" if trans_a else "N") + ("T" if trans_b else "N")
    out = op_compute("gemm", (m, n), f, OUT_ELEMWISE_FUSABLE, layout=layout)
    if c is None and alpha == 1:
        return out
    if c is not None:
        check_tensor("gemm", "c", c)
        if not _unidirectional(dims_of("gemm", "c", c), (m, n)):
            raise ValueError(f"gemm: c of shape {dims_of('gemm', 'c', c)} does not "
                             f"broadcast to ({m}, {n})")
    al, be = const(alpha, d), const(beta, d)

    def tail(i, j):
        v = out[i, j] if alpha == 1 else al * out[i, j]
        if c is not None:
            cv = _read(c, broadcast_index(c, (i, j)), d)
            v = v + (cv if beta == 1 else be * cv)
        return v

    return op_compute("gemm_epilogue", (m, n), tail, BROADCAST, alpha=alpha, beta=beta)


def _unidirectional(cs, shape) -> bool:
    """True when shape `cs` broadcasts to `shape` without changing it (for gemm's c)."""
    if len(cs) > len(shape):
        return False
    tail = shape[len(shape) - len(cs):]
    return all(is_one(c) or dim_equal(c, s) for c, s in zip(cs, tail))


# ----------------------------------------------------------------------------- convolution


def _padding4(op: str, padding) -> tuple:
    """int | (ph, pw) | (top, left, bottom, right) -> (top, left, bottom, right)."""
    if isinstance(padding, (list, tuple)):
        if len(padding) == 2:
            p = int_tuple(op, "padding", padding, 2, 0)
            return (p[0], p[1], p[0], p[1])
        return int_tuple(op, "padding", padding, 4, 0)
    p = int_tuple(op, "padding", padding, 1, 0)[0]
    return (p, p, p, p)


def _out_size(op, n, k, s, d, lo, hi, ceil_mode=False, axis="height", pool=False):
    """``pool``: a window longer than the padded input by less than the stride still gives
    one output (ONNX's and onnxruntime's integer formula, (span / s) + 1 truncated toward
    zero); its taps past the padding read padding. Over a symbolic size (no ceil_mode): the
    floor formula with the span clamped at 0, so the extent is at least 1 for every size (a
    size without a whole window is the caller's to refuse before the kernel runs: the
    graph's runtime does; the reads stay inside x either way, see _window_input)."""
    span = n + lo + hi - d * (k - 1) - 1
    if not isinstance(span, int):
        if ceil_mode:
            raise ValueError(f"{op}: ceil_mode over the symbolic {axis} {n!r} is not supported")
        return (te.max(span, 0) + s) // s
    if pool and -s < span < 0:
        return 1
    if span < 0:
        raise ValueError(f"{op}: the kernel (extent {d * (k - 1) + 1} with dilation) is larger "
                         f"than the padded input {axis} ({n + lo + hi})")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + lo:
        out -= 1  # the last window must start inside the input or its leading padding
    return out


def _window(op, stride, padding, dilation):
    """The checked geometry of a sliding-window op: ((sh, sw), (dh, dw), (pt, pl, pb, pr))."""
    return (int_tuple(op, "stride", stride, 2, 1), int_tuple(op, "dilation", dilation, 2, 1),
            _padding4(op, padding))


def _out_hw(op, h, w, kh, kw, window, ceil_mode=False, pool=False, out_hw=None) -> tuple:
    """Output height and width of a kh x kw window with `window` (see _window) on h x w;
    ``out_hw``: the caller's forms of the extents over a symbolic plane (a graph writes them
    in its canonical forms, ceil_mode's included), those over static sizes checked."""
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = window
    axes = ((h, kh, sh, dh, pt, pb, "height"), (w, kw, sw, dw, pl, pr, "width"))
    if out_hw is not None and len(out_hw) != 2:
        raise ValueError(f"{op}: out_hw must be (height, width), got {out_hw!r}")
    out = []
    for a, (n, k, st, d, lo, hi, name) in enumerate(axes):
        given = None if out_hw is None else out_hw[a]
        if given is not None and is_symbolic(n):
            out.append(given)
            continue
        own = _out_size(op, n, k, st, d, lo, hi, ceil_mode, axis=name, pool=pool)
        if given is not None and as_int(given) != own:
            raise ValueError(f"{op}: out_hw gives the {name} {given!r}, the window gives {own}")
        out.append(own)
    return tuple(out)


def _window_requires(op, h, w, kh, kw, window) -> dict:
    """The ``requires`` attribute of a window op over a symbolic plane: each symbolic axis
    holds one whole window (the output extents are clamped to >= 1 there, so the kernel
    refuses such a size at its entry instead of computing a window over padding alone)."""
    _, (dh, dw), (pt, pl, pb, pr) = window
    need = []
    for n, k, d, lo, hi, name in ((h, kh, dh, pt, pb, "height"), (w, kw, dw, pl, pr, "width")):
        if is_symbolic(n):
            span = n + lo + hi - d * (k - 1) - 1
            why = (f"{op}: the input {name} {n} with padding {lo} + {hi} is smaller than the "
                   f"window ({d * (k - 1) + 1} with dilation)")
            need.append((span, why))
    return {"requires": tuple(need)} if need else {}


def _window_input(x, pt, pl, pb, pr, value=0.0, spatial=(2, 3)):
    """x padded by (pt, pl, pb, pr) over its two spatial axes, to index as xp[idx]. Over a
    static plane a padded copy (a pad stage, which the conv schedules read in place:
    inline_pad_input). Over a symbolic plane every read is a select on its position being
    inside x: the output extents there are clamped to >= 1 (_out_size), so a window of a size
    that has none would reach past any padded extent, and the bounds proof must see that no
    read leaves x for any size. Once inlined, both are the same select in the accumulation,
    which guard_padded_reads and loop_partition turn into guards at the plane's borders."""
    if is_symbolic(x.shape[spatial[0]]) or is_symbolic(x.shape[spatial[1]]):
        return _InsideReads(x, {spatial[0]: pt, spatial[1]: pl}, const(value, x.dtype))
    return _pad_nchw(x, pt, pl, pb, pr, value, spatial)


class _InsideReads:
    """x read at padded positions: xp[idx] is x[idx - lo] where that is inside x, else fill."""

    def __init__(self, x: Tensor, lo: dict, fill):
        self.x, self.lo, self.fill = x, lo, fill

    def __getitem__(self, idx):
        pos = [i - self.lo[a] if self.lo.get(a) else i for a, i in enumerate(idx)]
        inside = [c for a in self.lo for c in (pos[a] >= 0, pos[a] < self.x.shape[a])]
        return te.select(te.all(*inside), self.x[tuple(pos)], self.fill)


def _pad_nchw(x, pt, pl, pb, pr, value=0.0, spatial=(2, 3)):
    if not (pt or pl or pb or pr):
        return x
    pw = [(0, 0)] * x.ndim
    pw[spatial[0]] = (pt, pb)
    pw[spatial[1]] = (pl, pr)
    return _pad(x, pw, "constant", value)


CONV_OC_BLOCK = 16  # output channels of one accumulator vector (a zmm of fp32)
PIXEL_VECTOR = 16  # pixels of one vector of conv2d_nchw's pixels path


def grouped_conv_block(channels_per_group: int) -> int:
    """The output-channel block of a grouped conv's blocked path: 16 (a zmm) or 8 (a ymm),
    whichever divides the output channels of one group, so that no block straddles two
    groups; 0 when neither does (the plain path)."""
    return next((b for b in (CONV_OC_BLOCK, 8) if channels_per_group % b == 0), 0)


def pack_conv_weight(w: Tensor, oc_block: int = CONV_OC_BLOCK) -> Tensor:
    """OIHW -> [OC/ob, I, KH, KW, ob]: for each (input channel, kh, kw) the ob output channels
    of a block are one contiguous vector, the weight layout conv2d_nchw's blocked path reads.
    Weights are constants in a model: pack them once and pass the 5-D result to conv2d_nchw."""
    op = "conv2d_weight_layout"
    check_tensor(op, "w", w)
    if w.ndim != 4:
        raise ValueError(f"{op}: w must be 4-D OIHW, got {w.ndim}-D")
    o, i, kh, kw = static_shape(op, "w", w)
    ob = check_int(op, "oc_block", oc_block, 1)
    if o % ob:
        raise ValueError(f"{op}: oc_block {ob} must divide the output channels {o}")
    return op_compute(op, (o // ob, i, kh, kw, ob),
                      lambda a, b, y, z, c: w[a * ob + c, b, y, z], INJECTIVE, oc_block=ob)


def conv2d_nchw(x: Tensor, w: Tensor, stride=1, padding=0, dilation=1, groups: int = 1,
                out_dtype: str | None = None, out_layout: str = "NCHW", *,
                out_hw: tuple | None = None) -> Tensor:
    """2-D convolution, x [N, C, H, W], w [OC, C / groups, KH, KW] -> [N, OC, OH, OW]. padding:
    int, (ph, pw) or (top, left, bottom, right). groups == C == OC gives the depthwise op.
    w may also be pre-packed by pack_conv_weight ([OC/ob, C / groups, KH, KW, ob]).
    With groups=1 and OC a multiple of 16, or a grouped conv whose output channels per group
    are a multiple of 16 or 8 (grouped_conv_block), or packed weights, the conv accumulates in
    an oc-blocked stage (`conv2d_nchw_block`) read back to NCHW by the output stage; the
    weights are packed inside the op when given as OIHW. A block never straddles two groups,
    so a grouped conv is the same register-tiled kernel with the block's input channels offset
    to its group's (AlexNet's 96 -> 256 5x5 groups=2 layer: 348 ms on the plain path, see
    docs/operators.md for the figures on this path).
    out_layout: "NCHW", or "NCHW<ob>c" (ob = the weight block) on that blocked path: the
    output is [N, OC/ob, OH, OW, ob], written from the register tile as whole vectors (the
    first conv of a CNN, whose 3 input channels cannot be blocked, feeding blocked layers).
    H and W may be symbolic (tl.var): see _out_size and _window_input; out_hw gives the output
    extents as the caller writes them (a graph's canonical forms of the same formula)."""
    op = "conv2d_nchw"
    check_tensor(op, "x", x)
    check_tensor(op, "w", w)
    if x.ndim != 4 or w.ndim not in (4, 5):
        raise ValueError(f"{op}: x and w must be 4-D, got {x.ndim}-D and {w.ndim}-D")
    n, c, h, wd = dims_of(op, "x", x, constant=(1,), why="channels")
    packed = None
    if w.ndim == 5:
        obn, cpg, kh, kw, ob = static_shape(op, "w", w)
        packed, oc = w, obn * ob
    else:
        oc, cpg, kh, kw = static_shape(op, "w", w)
    win = _window(op, stride, padding, dilation)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = win
    g = check_int(op, "groups", groups, 1)
    if c % g:
        raise ValueError(f"{op}: input channels {c} are not divisible by groups={g}")
    if oc % g:
        raise ValueError(f"{op}: output channels {oc} are not divisible by groups={g}")
    if cpg != c // g:
        raise ValueError(f"{op}: w has {cpg} input channels per group, x has {c} channels and "
                         f"groups={g} (expected {c // g})")
    depthwise = g > 1 and g == c and cpg == 1
    if packed is not None and (oc // g) % ob:
        raise ValueError(f"{op}: packed weights in blocks of {ob} output channels need the "
                         f"block to divide the {oc // g} output channels of each of the "
                         f"{g} groups")
    wb = ob if packed is not None else (
        CONV_OC_BLOCK if g == 1 else 0 if depthwise else grouped_conv_block(oc // g))
    oc_blocked = packed is not None or (wb and oc % wb == 0)
    block_out = f"NCHW{wb or CONV_OC_BLOCK}c"
    if out_layout != "NCHW" and not (oc_blocked and out_layout == block_out):
        raise ValueError(f"{op}: out_layout must be 'NCHW' or '{block_out}' (output channels "
                         f"of each group a multiple of the block), got {out_layout!r} for "
                         f"groups={g}, {oc} output channels")
    if depthwise and packed is None:
        return depthwise_conv2d_nchw(x, w, stride, (pt, pl, pb, pr), dilation, out_dtype,
                                     out_hw=out_hw)
    oh, ow = _out_hw(op, h, wd, kh, kw, win, out_hw=out_hw)
    d = dt.canonical(out_dtype) if out_dtype else _mm_dtype(op, x, w)
    attrs = {"stride": [sh, sw], "padding": [pt, pl, pb, pr], "dilation": [dh, dw], "groups": g,
             **_window_requires(op, h, wd, kh, kw, win)}
    if (kh, kw, sh, sw) == (1, 1, 1, 1) and not any((pt, pl, pb, pr)) and \
            out_layout == "NCHW" and (g > 1 or not oc_blocked) and \
            not (is_symbolic(h) or is_symbolic(wd)):
        return _pointwise_conv_nchw(x, w, d, attrs)
    xp = _window_input(x, pt, pl, pb, pr)
    rc = te.reduce_axis((0, cpg), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    if oc_blocked:
        wp = w if packed is not None else pack_conv_weight(w, wb)
        ob = as_int(wp.shape[4])
        bpg = oc // g // ob  # blocks per group: block oco reads group oco // bpg's channels

        # The oc-blocked accumulator: output channels innermost, so one output pixel's ob
        # channels are one vector; the NCHW input is read as is (a broadcast scalar per
        # FMA row needs no input layout transform) and the weights as contiguous vectors.
        def fb(b, oco, y, z, oci):
            ch = rc if g == 1 else (oco // bpg) * cpg + rc
            return te.sum(_read(xp, (b, ch, y * sh + ry * dh, z * sw + rx * dw), d)
                          * _read(wp, (oco, rc, ry, rx, oci), d), axis=[rc, ry, rx])

        blk = op_compute(op + "_block", (n, oc // ob, oh, ow, ob), fb, OUT_ELEMWISE_FUSABLE,
                         **attrs)
        if out_layout == f"NCHW{ob}c":
            return op_compute(op, (n, oc // ob, oh, ow, ob),
                              lambda b, o, y, z, i: blk[b, o, y, z, i], OUT_ELEMWISE_FUSABLE,
                              oc_block=ob, out_layout=out_layout, **attrs)
        # NCHW out: the schedule computes the block per output tile, so this is a transposed
        # copy out of the register tile, not a pass over memory
        return op_compute(op, (n, oc, oh, ow), lambda b, o, y, z: blk[b, o // ob, y, z, o % ob],
                          OUT_ELEMWISE_FUSABLE, oc_block=ob, **attrs)
    ocpg = oc // g

    def f(b, o, y, z):
        ch = rc if g == 1 else (o // ocpg) * cpg + rc
        return te.sum(_read(xp, (b, ch, y * sh + ry * dh, z * sw + rx * dw), d)
                      * _read(w, (o, rc, ry, rx), d), axis=[rc, ry, rx])

    return op_compute(op, (n, oc, oh, ow), f, OUT_ELEMWISE_FUSABLE, **attrs)


def _pointwise_conv_nchw(x: Tensor, w: Tensor, d: str, attrs: dict) -> Tensor:
    """A 1x1, stride-1, unpadded conv2d_nchw off the oc-blocked path (output channels per group
    not a multiple of 8: ShuffleNet's 20, 17 or 34; or groups=1 with OC not a multiple of 16:
    SqueezeNet's 1000): per group a matmul [OC/g, C/g] x [C/g, H*W]. The accumulation stage
    (`conv2d_nchw_pixels`) is [N, OC, H*W], so its schedule vectorizes the pixels of a plane
    whatever the row width (the reads x[b, c, p // W, p % W] flatten to x's contiguous plane)
    and tiles output channels x whole vectors of pixels; a 4-D stage would be tiled in boxes of
    rows, and vectorized along rows of 28, 14 or 7 columns (4-lane vectors or scalar tails)."""
    n, _, h, wd = dims_of("conv2d_nchw", "x", x, constant=(1, 2, 3),
                          why="channels and spatial extents")
    ws = static_shape("conv2d_nchw", "w", w)
    ob = ws[4] if w.ndim == 5 else 0  # packed by pack_conv_weight: [OC/ob, C/g, 1, 1, ob]
    oc, cpg = (ws[0] * ob if ob else ws[0]), ws[1]
    ocpg, g = oc // attrs["groups"], attrs["groups"]
    rc = te.reduce_axis((0, cpg), name="rc")

    def fp(b, o, p):
        ch = rc if g == 1 else (o // ocpg) * cpg + rc
        wi = (o // ob, rc, 0, 0, o % ob) if ob else (o, rc, 0, 0)
        xv = _read(x, (b, ch, p // wd, p % wd), d)
        if padded != h * wd:
            xv = te.select(p < h * wd, xv, const(0, d))
        return te.sum(xv * _read(w, wi, d), axis=rc)

    padded = _padded_pixels(h * wd)
    pix = op_compute("conv2d_nchw_pixels", (n, oc, padded), fp, OUT_ELEMWISE_FUSABLE, **attrs)
    return op_compute("conv2d_nchw", (n, oc, h, wd), lambda b, o, y, z: pix[b, o, y * wd + z],
                      OUT_ELEMWISE_FUSABLE, **attrs)


def _padded_pixels(p: int) -> int:
    """The pixels of the pixels stage: p, or p padded to whole vectors (the pad read as a
    masked load) where the scalar tail would cost at least half of the vectors: 169 pixels
    are 10 vectors and 9 scalar pixels, which cost as much as the 10 (SqueezeNet's 512 ->
    1000 conv at 13x13, 1 thread: 9.0 -> 5.7 ms, onnxruntime 8.1, load 20). The padded stage
    is read back to NCHW by a copy, which costs more than a short tail saves (196 pixels:
    0.070 -> 0.079 ms; 49: 0.076 -> 0.087)."""
    tail = p % PIXEL_VECTOR
    if tail and 2 * tail >= p // PIXEL_VECTOR:
        return p - tail + PIXEL_VECTOR
    return p


def depthwise_conv2d_nchw(x: Tensor, w: Tensor, stride=1, padding=0, dilation=1,
                          out_dtype: str | None = None, *, out_hw: tuple | None = None
                          ) -> Tensor:
    """Depthwise conv: x [N, C, H, W], w [C * m, 1, KH, KW] (channel multiplier m). H and W
    may be symbolic, out_hw as conv2d_nchw's."""
    op = "depthwise_conv2d_nchw"
    check_tensor(op, "x", x)
    check_tensor(op, "w", w)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"{op}: x and w must be 4-D")
    n, c, h, wd = dims_of(op, "x", x, constant=(1,), why="channels")
    oc, one, kh, kw = static_shape(op, "w", w)
    if one != 1 or oc % c:
        raise ValueError(f"{op}: w must be [C * multiplier, 1, KH, KW] for C={c}, got "
                         f"{(oc, one, kh, kw)}")
    win = _window(op, stride, padding, dilation)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = win
    oh, ow = _out_hw(op, h, wd, kh, kw, win, out_hw=out_hw)
    d = dt.canonical(out_dtype) if out_dtype else _mm_dtype(op, x, w)
    xp = _window_input(x, pt, pl, pb, pr)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    mult = oc // c

    def f(b, o, y, z):
        ch = o if mult == 1 else o // mult
        return te.sum(_read(xp, (b, ch, y * sh + ry * dh, z * sw + rx * dw), d)
                      * _read(w, (o, 0, ry, rx), d), axis=[ry, rx])

    return op_compute(op, (n, oc, oh, ow), f, OUT_ELEMWISE_FUSABLE,
                      stride=[sh, sw], padding=[pt, pl, pb, pr], dilation=[dh, dw],
                      **_window_requires(op, h, wd, kh, kw, win))


def depthwise_conv2d_nchwc(x: Tensor, w: Tensor, stride=1, padding=0, dilation=1,
                           out_dtype: str | None = None, *, out_hw: tuple | None = None
                           ) -> Tensor:
    """Blocked depthwise conv: x [N, C/cb, H, W, cb], w [C/cb, 1, KH, KW, cb] (OIHW packed by
    pack_conv_weight(w, cb)) -> [N, C/cb, OH, OW, cb]. The cb channels of a block are one
    SIMD vector for every window tap, at any stride. H and W may be symbolic, out_hw as
    conv2d_nchw's."""
    op = "depthwise_conv2d_nchwc"
    check_tensor(op, "x", x)
    check_tensor(op, "w", w)
    if x.ndim != 5 or w.ndim != 5:
        raise ValueError(f"{op}: x and w must be 5-D, got {x.ndim}-D and {w.ndim}-D")
    n, cbn, h, wd, cb = dims_of(op, "x", x, constant=(1, 4), why="channels")
    wcbn, one, kh, kw, wcb = static_shape(op, "w", w)
    if (wcbn, one, wcb) != (cbn, 1, cb):
        raise ValueError(f"{op}: w must be [{cbn}, 1, KH, KW, {cb}] for x {(n, cbn, h, wd, cb)},"
                         f" got {(wcbn, one, kh, kw, wcb)}")
    xp, d, (oh, ow), (sh, sw), (dh, dw), attrs = _blocked_window(
        op, x, w, kh, kw, stride, padding, dilation, out_dtype, out_hw)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")

    def f(b, o, y, z, i):
        return te.sum(_read(xp, (b, o, y * sh + ry * dh, z * sw + rx * dw, i), d)
                      * _read(w, (o, 0, ry, rx, i), d), axis=[ry, rx])

    return op_compute(op, (n, cbn, oh, ow, cb), f, OUT_ELEMWISE_FUSABLE, **attrs)


def _blocked_window(op, x, w, kh, kw, stride, padding, dilation, out_dtype, out_hw=None):
    """What the blocked convs share: (padded input, accumulation dtype, (OH, OW), strides,
    dilations, the op's window attributes)."""
    win = _window(op, stride, padding, dilation)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = win
    h, wd = dims_of(op, "x", x)[2:4]
    oh, ow = _out_hw(op, h, wd, kh, kw, win, out_hw=out_hw)
    d = dt.canonical(out_dtype) if out_dtype else _mm_dtype(op, x, w)
    attrs = {"stride": [sh, sw], "padding": [pt, pl, pb, pr], "dilation": [dh, dw],
             **_window_requires(op, h, wd, kh, kw, win)}
    return _window_input(x, pt, pl, pb, pr), d, (oh, ow), (sh, sw), (dh, dw), attrs


def conv2d_nchwc(x: Tensor, w: Tensor, stride=1, padding=0, dilation=1,
                 out_dtype: str | None = None, *, out_hw: tuple | None = None) -> Tensor:
    """Blocked convolution: x [N, C/cb, H, W, cb], w [OC/ob, C/cb, KH, KW, cb, ob] (see
    layout_transform / kernel_layout_transform) -> [N, OC/ob, OH, OW, ob]. The ob output channels
    of a block are consecutive in memory, so they are one SIMD vector. H and W may be
    symbolic, out_hw as conv2d_nchw's."""
    op = "conv2d_nchwc"
    check_tensor(op, "x", x)
    check_tensor(op, "w", w)
    if x.ndim != 5 or w.ndim != 6:
        raise ValueError(f"{op}: x must be 5-D and w 6-D, got {x.ndim}-D and {w.ndim}-D")
    n, cbn, _, _, cb = dims_of(op, "x", x, constant=(1, 4), why="channels")
    obn, wcbn, kh, kw, wcb, ob = static_shape(op, "w", w)
    if (wcbn, wcb) != (cbn, cb):
        raise ValueError(f"{op}: w's input channel blocks {(wcbn, wcb)} do not match x's "
                         f"{(cbn, cb)}")
    xp, d, (oh, ow), (sh, sw), (dh, dw), attrs = _blocked_window(
        op, x, w, kh, kw, stride, padding, dilation, out_dtype, out_hw)
    rco = te.reduce_axis((0, cbn), name="rco")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rci = te.reduce_axis((0, cb), name="rci")

    def f(b, oco, y, z, oci):
        return te.sum(_read(xp, (b, rco, y * sh + ry * dh, z * sw + rx * dw, rci), d)
                      * _read(w, (oco, rco, ry, rx, rci, oci), d), axis=[rco, ry, rx, rci])

    return op_compute(op, (n, obn, oh, ow, ob), f, OUT_ELEMWISE_FUSABLE, **attrs)


# ----------------------------------------------------------------------------- pooling


def _pool_args(op, x, kernel_size, stride, padding, dilation, ceil_mode, out_hw=None):
    """Window geometry of a pooling op on NCHW (4-D) or blocked NCHW[x]c (5-D: [N, C/x, H, W,
    x], the channel block innermost, as the blocked conv writes it)."""
    check_tensor(op, "x", x)
    if x.ndim not in (4, 5):
        raise ValueError(f"{op}: x must be 4-D NCHW or 5-D NCHW[x]c, got {x.ndim}-D")
    n, c, h, wd = dims_of(op, "x", x, constant=(1, 4) if x.ndim == 5 else (1,),
                          why="channels")[:4]
    kh, kw = int_tuple(op, "kernel_size", kernel_size, 2, 1)
    win = _window(op, (kh, kw) if stride is None else stride, padding, dilation)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = win
    if not isinstance(ceil_mode, bool):
        raise ValueError(f"{op}: ceil_mode must be a bool, got {ceil_mode!r}")
    if max(pt, pb) > (kh - 1) * dh + 1 or max(pl, pr) > (kw - 1) * dw + 1:
        raise ValueError(f"{op}: padding {(pt, pl, pb, pr)} is larger than the kernel window")
    oh, ow = _out_hw(op, h, wd, kh, kw, win, ceil_mode, pool=True, out_hw=out_hw)
    # ceil mode may let the last window run past the bottom/right padding: pad that too (over
    # a symbolic plane no padded copy is made: every read is guarded, _window_input)
    eh = 0 if is_symbolic(h) else max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - (h + pt + pb))
    ew = 0 if is_symbolic(wd) else max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - (wd + pl + pr))
    return (n, c, h, wd), (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow), (eh, ew)


def _block_suffix(x) -> tuple:
    """(x,) for a blocked NCHW[x]c input (its channel block stays the innermost output axis),
    () for NCHW."""
    return (as_int(x.shape[4]),) if x.ndim == 5 else ()


def max_pool_pad_value(dtype: str) -> float:
    """What max pooling pads with: the lowest finite value for floats (onnxruntime's and
    PyTorch's initial maximum), so a window that covers only padding gives that value, not
    -inf (ONNX allows pads and dilations that make such windows)."""
    if dt.is_float(dtype):
        return -float(np.finfo(np.dtype(dt.element(dtype))).max)
    return float(te.min_value(dtype).value)


def max_pool2d(x: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, *, out_hw: tuple | None = None) -> Tensor:
    """Max pooling over the spatial axes of NCHW or NCHW[x]c (5-D) input. H and W may be
    symbolic, out_hw as conv2d_nchw's."""
    op = "max_pool2d"
    (n, c, h, wd), (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow), (eh, ew) = \
        _pool_args(op, x, kernel_size, stride, padding, dilation, ceil_mode, out_hw)
    xp = _window_input(x, pt, pl, pb + eh, pr + ew, max_pool_pad_value(x.dtype))
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    blk = _block_suffix(x)
    return op_compute(op, (n, c, oh, ow, *blk), lambda b, o, y, z, *i: te.max(
        xp[(b, o, y * sh + ry * dh, z * sw + rx * dw, *i)], axis=[ry, rx]),
        OUT_ELEMWISE_FUSABLE, kernel_size=[kh, kw], stride=[sh, sw], padding=[pt, pl, pb, pr],
        ceil_mode=ceil_mode,
        **_window_requires(op, h, wd, kh, kw, ((sh, sw), (dh, dw), (pt, pl, pb, pr))))


def avg_pool2d(x: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = False, *, out_hw: tuple | None = None) -> Tensor:
    """Average pooling over the spatial axes of NCHW or NCHW[x]c (5-D) input; count_include_pad
    counts the explicit padding in the divisor (never the extra region ceil mode adds past
    it), as PyTorch and ONNX do. H and W may be symbolic, out_hw as conv2d_nchw's."""
    op = "avg_pool2d"
    if not isinstance(count_include_pad, bool):
        raise ValueError(f"{op}: count_include_pad must be a bool, got {count_include_pad!r}")
    (n, c, h, wd), (kh, kw), (sh, sw), _, (pt, pl, pb, pr), (oh, ow), (eh, ew) = \
        _pool_args(op, x, kernel_size, stride, padding, 1, ceil_mode, out_hw)
    if not dt.is_float(x.dtype):
        raise ValueError(f"{op}: x must be a float tensor, got {x.dtype}")
    xp = _window_input(x, pt, pl, pb + eh, pr + ew, 0.0)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    blk = _block_suffix(x)
    total = op_compute(op + "_sum", (n, c, oh, ow, *blk), lambda b, o, y, z, *i: te.sum(
        xp[(b, o, y * sh + ry, z * sw + rx, *i)], axis=[ry, rx]), REDUCE)
    lo_h, hi_h = (-pt, h + pb) if count_include_pad else (0, h)
    lo_w, hi_w = (-pl, wd + pr) if count_include_pad else (0, wd)

    def f(b, o, y, z, *i):
        y0, x0 = y * sh - pt, z * sw - pl
        cnt_h = te.min(y0 + kh, hi_h) - te.max(y0, lo_h)
        cnt_w = te.min(x0 + kw, hi_w) - te.max(x0, lo_w)
        return total[(b, o, y, z, *i)] / te.cast(cnt_h * cnt_w, x.dtype)

    return op_compute(op, (n, c, oh, ow, *blk), f, ELEMWISE, kernel_size=[kh, kw],
                      stride=[sh, sw], padding=[pt, pl, pb, pr], ceil_mode=ceil_mode,
                      count_include_pad=count_include_pad,
                      **_window_requires(op, h, wd, kh, kw, ((sh, sw), (1, 1), (pt, pl, pb, pr))))


def _global_pool(op, x, reducer, scale):
    check_tensor(op, "x", x)
    if x.ndim not in (4, 5):
        raise ValueError(f"{op}: x must be 4-D NCHW or 5-D NCHW[x]c, got {x.ndim}-D")
    n, c, h, wd = dims_of(op, "x", x, constant=(1, 4) if x.ndim == 5 else (1,),
                          why="channels")[:4]
    ry = te.reduce_axis((0, h), name="ry")
    rx = te.reduce_axis((0, wd), name="rx")
    plane = h * wd
    inv = None if not scale else const(1.0 / plane, x.dtype) if isinstance(plane, int) \
        else const(1.0, x.dtype) / te.cast(plane, x.dtype)
    blk = _block_suffix(x)

    def f(b, o, y, z, *i):
        v = x[(b, o, ry, rx, *i)]
        return reducer(v * inv if scale else v, axis=[ry, rx])

    return op_compute(op, (n, c, 1, 1, *blk), f, REDUCE)


def global_avg_pool2d(x: Tensor) -> Tensor:
    if isinstance(x, Tensor) and not dt.is_float(x.dtype):
        raise ValueError(f"global_avg_pool2d: x must be a float tensor, got {x.dtype}")
    return _global_pool("global_avg_pool2d", x, te.sum, True)


def global_max_pool2d(x: Tensor) -> Tensor:
    return _global_pool("global_max_pool2d", x, te.max, False)


# ----------------------------------------------------------------------------- normalization


def batch_norm(x: Tensor, gamma: Tensor, beta: Tensor, mean: Tensor, var: Tensor,
               axis: int = 1, epsilon: float = 1e-5) -> Tensor:
    """Inference batch norm: (x - mean) / sqrt(var + eps) * gamma + beta along `axis`."""
    op = "batch_norm"
    check_tensor(op, "x", x)
    ax = normalize_axis(op, "axis", axis, x.ndim)
    c = dims_of(op, "x", x, constant=(ax,), why="the channels")[ax]
    for name, t in (("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var)):
        check_tensor(op, name, t)
        if static_shape(op, name, t) != (c,):
            raise ValueError(f"{op}: {name} must have shape ({c},), got "
                             f"{static_shape(op, name, t)}")
    if not dt.is_float(x.dtype):
        raise ValueError(f"{op}: x must be a float tensor, got {x.dtype}")
    if not isinstance(epsilon, (int, float)) or epsilon < 0:
        raise ValueError(f"{op}: epsilon must be a non-negative number, got {epsilon!r}")
    eps = const(float(epsilon), x.dtype)

    def f(*i):
        ch = (i[ax],)
        scale = gamma[ch] * te.rsqrt(var[ch] + eps)
        return (x[i] - mean[ch]) * scale + beta[ch]

    return op_compute(op, x.shape, f, BROADCAST, axis=ax, epsilon=float(epsilon))


def lrn(x: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
        bias: float = 1.0) -> Tensor:
    """ONNX LRN across channels of NCHW: x / (bias + alpha / size * sum of squares over the
    channels [c - floor((size-1)/2), c + ceil((size-1)/2)]) ** beta."""
    op = "lrn"
    check_tensor(op, "x", x)
    if x.ndim < 2:
        raise ValueError(f"{op}: x must be at least 2-D (N, C, ...)")
    size = check_int(op, "size", size, 1)
    c = dims_of(op, "x", x, constant=(1,), why="the channels")[1]
    lo = (size - 1) // 2
    r = te.reduce_axis((0, size), name="r")

    def sq(*i):
        ch = i[1] - lo + r.var
        idx = (i[0], te.max(te.min(ch, const(c - 1)), const(0))) + tuple(i[2:])
        v = x[idx]
        return te.sum(v * v, axis=r, where=te.all(ch >= 0, ch < c))

    s = op_compute(op + "_sqsum", x.shape, sq, REDUCE)
    k, a = const(bias, x.dtype), const(alpha / size, x.dtype)

    def normalised(*i):
        d = k + a * s[i]
        if beta == 0.75:  # every LRN of AlexNet / GoogLeNet: d^-3/4 = rsqrt(d) * sqrt(rsqrt(d)),
            r = te.rsqrt(d)  # vector instructions, where pow takes 4x as long (through f64)
            return x[i] * (r * te.sqrt(r))
        return x[i] / te.pow(d, const(beta, x.dtype))

    return op_compute(op, x.shape, normalised, OPAQUE, size=size, alpha=alpha, beta=beta,
                      bias=bias)


def _row_reduce_setup(op, x, axis):
    check_tensor(op, "x", x)
    if not dt.is_float(x.dtype):
        raise ValueError(f"{op}: x must be a float tensor, got {x.dtype}")
    return normalize_axis(op, "axis", axis, x.ndim)


def _keep_shape(x, ax):
    return tuple(1 if d == ax else s for d, s in enumerate(x.shape))


def _softmax_parts(op, x, axis):
    ax = _row_reduce_setup(op, x, axis)
    shape = _keep_shape(x, ax)
    k1 = te.reduce_axis((0, x.shape[ax]), name="k")

    def at(i, k):
        idx = list(i)
        idx[ax] = k
        return tuple(idx)

    mx = op_compute(op + "_max", shape, lambda *i: te.max(x[at(i, k1.var)], axis=k1), REDUCE,
                    axis=ax)

    def zero_ax(i):
        idx = list(i)
        idx[ax] = const(0)
        return tuple(idx)

    e = op_compute(op + "_exp", x.shape, lambda *i: te.exp(x[i] - mx[zero_ax(i)]), BROADCAST,
                   axis=ax)
    k2 = te.reduce_axis((0, x.shape[ax]), name="k")
    sm = op_compute(op + "_sum", shape, lambda *i: te.sum(e[at(i, k2.var)], axis=k2), REDUCE,
                    axis=ax)
    return ax, mx, e, sm, zero_ax


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis` (numerically stable)."""
    ax, _mx, e, sm, zero_ax = _softmax_parts("softmax", x, axis)
    # one reciprocal per row, then multiplies: a vector divide costs several multiplies
    return op_compute("softmax", x.shape, lambda *i: e[i] * (const(1.0, x.dtype) / sm[zero_ax(i)]),
                      OPAQUE, axis=ax)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    ax, mx, _e, sm, zero_ax = _softmax_parts("log_softmax", x, axis)
    return op_compute("log_softmax", x.shape, lambda *i: x[i] - mx[zero_ax(i)] -
                      te.log(sm[zero_ax(i)]), OPAQUE, axis=ax)


def layer_norm(x: Tensor, gamma: Tensor | None = None, beta: Tensor | None = None,
               axis: int = -1, epsilon: float = 1e-5) -> Tensor:
    """ONNX LayerNormalization: normalize over axes [axis, rank), then * gamma + beta (both of
    shape x.shape[axis:], or broadcastable to it)."""
    op = "layer_norm"
    ax = _row_reduce_setup(op, x, axis)
    shp = dims_of(op, "x", x)
    norm = shp[ax:]
    for name, t in (("gamma", gamma), ("beta", beta)):
        if t is not None:
            check_tensor(op, name, t)
            ts = dims_of(op, name, t)
            if len(ts) > len(norm) or not all(
                    dim_equal(a, b) for a, b in zip(broadcast_shapes(op, norm, ts), norm)):
                raise ValueError(f"{op}: {name} of shape {ts} does not broadcast to the "
                                 f"normalized shape {norm}")
    if not isinstance(epsilon, (int, float)) or epsilon < 0:
        raise ValueError(f"{op}: epsilon must be a non-negative number, got {epsilon!r}")
    inv = reciprocal_count(norm, x.dtype)
    red_shape = shp[:ax] + (1,) * len(norm)

    def axes():
        return [te.reduce_axis((0, s), name=f"k{d}") for d, s in enumerate(norm)]

    k1 = axes()
    mean = op_compute(op + "_mean", red_shape, lambda *i: te.sum(
        x[tuple(i[:ax]) + tuple(k.var for k in k1)] * inv, axis=k1), REDUCE, axis=ax)
    k2 = axes()

    def var_f(*i):
        d = x[tuple(i[:ax]) + tuple(k.var for k in k2)] - mean[i]
        return te.sum(d * d * inv, axis=k2)

    var = op_compute(op + "_var", red_shape, var_f, REDUCE, axis=ax)
    eps = const(float(epsilon), x.dtype)

    def f(*i):
        r = tuple(i[:ax]) + (const(0),) * len(norm)
        v = (x[i] - mean[r]) * te.rsqrt(var[r] + eps)
        tail = i[ax:]
        if gamma is not None:
            v = v * gamma[broadcast_index(gamma, tail)]
        if beta is not None:
            v = v + beta[broadcast_index(beta, tail)]
        return v

    return op_compute(op, x.shape, f, OPAQUE, axis=ax, epsilon=float(epsilon))


__all__ = [
    "avg_pool2d",
    "batch_matmul",
    "batch_norm",
    "conv2d_nchw",
    "conv2d_nchwc",
    "dense",
    "depthwise_conv2d_nchw",
    "depthwise_conv2d_nchwc",
    "gemm",
    "global_avg_pool2d",
    "global_max_pool2d",
    "layer_norm",
    "log_softmax",
    "lrn",
    "matmul",
    "matmul_prepacked",
    "max_pool2d",
    "max_pool_pad_value",
    "pack_conv_weight",
    "pack_matmul_weight",
    "softmax",
]
