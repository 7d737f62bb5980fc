"""Differential tests of the operator library's nn operators (matmul family, convolutions,
pooling, normalizations, softmax) and of default schedules of fused compositions."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ops_helpers import check, ph, rand

import tensorlang as tl

ops = tl.ops
TOL = {"rtol": 2e-4, "atol": 2e-4}


@pytest.mark.parametrize("m,k,n", [(1, 33, 50), (13, 20, 37), (24, 16, 64), (7, 5, 3)])
def test_matmul(m, k, n):
    a, b = rand((m, k)), rand((k, n))
    A, B = ph(a, "A"), ph(b, "B")
    check(ops.matmul(A, B), [A, B], [a, b], a @ b, **TOL)


def test_matmul_vectors_and_batch_broadcast():
    v, a = rand((6,)), rand((6, 5))
    V, A = ph(v, "V"), ph(a, "A")
    check(ops.matmul(V, A), [V, A], [v, a], v @ a, **TOL)
    at = a.T.copy()
    AT = ph(at, "AT")
    check(ops.matmul(AT, V), [AT, V], [at, v], at @ v, **TOL)
    x, y = rand((2, 1, 5, 7)), rand((3, 7, 18))
    X, Y = ph(x, "X"), ph(y, "Y")
    check(ops.matmul(X, Y), [X, Y], [x, y], np.matmul(x, y), **TOL)
    p, q = rand((4, 9, 6)), rand((4, 17, 6))
    P, Q = ph(p, "P"), ph(q, "Q")
    check(ops.batch_matmul(P, Q, trans_b=True), [P, Q], [p, q],
          np.matmul(p, q.transpose(0, 2, 1)), **TOL)


def test_batch_matmul_ragged_panels_stay_out_of_the_parallel_loop():
    """A batch matmul whose columns end in a ragged panel (197 = 3 x 64 + 5) runs its batch
    in parallel with the panel loop serial inside it, so loop_partition peels the last panel
    (fused, every k step tested each vector of every tile: whisper's q . k^T, 6 x 1500 x 64 x
    1500, 1 thread: 42 -> 20.6 ms, onnxruntime 17.6). Whole panels (128) still join the fused
    loop, and so do ragged ones under a batch of 1 (the fused index is the panel's own)."""
    for batch, n, fused in ((3, 197, False), (3, 128, True), (1, 197, True)):
        a, b = rand((batch, 20, 64)), rand((batch, 64, n))
        A, B = ph(a, "A"), ph(b, "B")
        out = ops.matmul(A, B)
        text = str(tl.lower(ops.default_schedule(out), [A, B, out]))
        assert ("parallel for i0.i2.outer.fused in" in text) == fused, text[:400]
        check(out, [A, B], [a, b], np.matmul(a, b), **TOL)


@pytest.mark.parametrize("m", [1, 14])
def test_dense_with_bias(m):
    x, w, b = rand((m, 24)), rand((40, 24)), rand((40,))
    X, W, Bi = ph(x, "X"), ph(w, "W"), ph(b, "b")
    check(ops.dense(X, W, Bi), [X, W, Bi], [x, w, b], x @ w.T + b, **TOL)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("cshape", [(13, 19), (19,), (13, 1), None])
def test_gemm(ta, tb, cshape):
    a = rand((9, 13) if ta else (13, 9))
    b = rand((19, 9) if tb else (9, 19))
    A, B = ph(a, "A"), ph(b, "B")
    ins, arrs = [A, B], [a, b]
    exp = 0.5 * ((a.T if ta else a) @ (b.T if tb else b))
    C = None
    if cshape is not None:
        c = rand(cshape)
        C = ph(c, "C")
        ins.append(C)
        arrs.append(c)
        exp = exp + 2.0 * c
    check(ops.gemm(A, B, C, alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb), ins, arrs,
          exp.astype("float32"), **TOL, both=cshape == (19,))


def conv_ref(x, w, stride, pad, dil, groups):
    sh, sw = stride
    pt, pl, pb, pr = pad
    dh, dw = dil
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, _c, h, wd = xp.shape
    oc, cpg, kh, kw = w.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow), "float64")
    ocpg = oc // groups
    for o in range(oc):
        g = o // ocpg
        for y in range(kh):
            for z in range(kw):
                patch = xp[:, g * cpg:(g + 1) * cpg, y * dh:y * dh + sh * (oh - 1) + 1:sh,
                           z * dw:z * dw + sw * (ow - 1) + 1:sw]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, y, z])
    return out.astype("float32")


@pytest.mark.parametrize("stride,pad,dil,groups", [
    (1, (1, 1, 1, 1), 1, 1), (2, (0, 1, 2, 1), 1, 1), (1, (2, 0, 1, 3), 2, 1),
    ((2, 1), (1, 1, 1, 1), (1, 2), 2), (1, (1, 1, 1, 1), 1, 4)])
def test_conv2d_nchw(stride, pad, dil, groups):
    x = rand((2, 8, 11, 13))
    w = rand((12, 8 // groups, 3, 3))
    X, W = ph(x, "X"), ph(w, "W")
    out = ops.conv2d_nchw(X, W, stride=stride, padding=pad, dilation=dil, groups=groups)
    st = stride if isinstance(stride, tuple) else (stride, stride)
    dl = dil if isinstance(dil, tuple) else (dil, dil)
    check(out, [X, W], [x, w], conv_ref(x, w, st, pad, dl, groups), **TOL,
          both=groups == 1 and stride == 1)


@pytest.mark.parametrize("stride,pad,mult", [(1, 1, 1), (2, (0, 1, 1, 2), 1), (1, 1, 2)])
def test_depthwise(stride, pad, mult):
    x = rand((1, 6, 12, 20))
    w = rand((6 * mult, 1, 3, 3))
    X, W = ph(x, "X"), ph(w, "W")
    p4 = (pad,) * 4 if isinstance(pad, int) else pad
    ref = conv_ref(np.repeat(x, mult, axis=1), w, (stride, stride), p4, (1, 1), 6 * mult)
    check(ops.depthwise_conv2d_nchw(X, W, stride, pad), [X, W], [x, w], ref, **TOL)
    if mult == 1:  # groups == channels dispatches to the depthwise op
        check(ops.conv2d_nchw(X, W, stride, pad, groups=6), [X, W], [x, w], ref, **TOL,
              both=False)


@pytest.mark.parametrize("stride,pad,hw,rows", [
    (1, 1, (12, 20), None), (2, (0, 1, 1, 2), (11, 13), None), (1, 1, (9, 30), 4)])
def test_depthwise_nchw16c(stride, pad, hw, rows):
    """The blocked depthwise conv against the NCHW reference: the channel block is the vector,
    rows per task, and the padding read as masked loads (no padded copy) at any stride."""
    x, w = rand((1, 32, *hw)), rand((32, 1, 3, 3))
    p4 = (pad,) * 4 if isinstance(pad, int) else pad
    ref = conv_ref(x, w, (stride, stride), p4, (1, 1), 32)
    xb = _nchw16c(x)
    wb = np.ascontiguousarray(w.reshape(2, 16, 1, 3, 3).transpose(0, 2, 3, 4, 1))
    X, W = ph(xb, "X"), ph(wb, "W")
    out = ops.relu(ops.depthwise_conv2d_nchwc(X, W, stride, pad))
    knobs = None if rows is None else {"rows": rows}
    check(out, [X, W], [xb, wb], _nchw16c(np.maximum(ref, 0)), **TOL, knobs=knobs)
    text = str(tl.lower(ops.default_schedule(out, knobs=knobs), [X, W, out]))
    assert "allocate pad" not in text and "parallel for" in text


def test_depthwise_nchw16c_checks_the_weight():
    X, W = ph(rand((1, 2, 5, 5, 16)), "X"), ph(rand((2, 1, 3, 3, 8)), "W")
    with pytest.raises(ValueError, match=r"depthwise_conv2d_nchwc: w must be \[2, 1, KH, KW, 16\]"):
        ops.depthwise_conv2d_nchwc(X, W)


@pytest.mark.parametrize("width,whole_row", [(28, True), (13, True), (32, False), (70, False)])
def test_depthwise_row_vectors_and_padding(width, whole_row):
    """Rows up to 64 wide that 16 does not divide are one vector of the row's width (no scalar
    tail). At stride 1 the padding is read as masked loads (no padded copy); at stride 2 (the
    window's reads are gathers) the padded input is a per-channel stack plane, not a heap copy
    of the input."""
    x, w = rand((2, 5, 7, width)), rand((5, 1, 3, 3))
    X, W = ph(x, "X"), ph(w, "W")
    out = ops.depthwise_conv2d_nchw(X, W, padding=1)
    text = str(tl.lower(ops.default_schedule(out), [X, W, out]))
    assert (f"1, {width})]" in text) == whole_row
    assert "allocate pad" not in text
    check(out, [X, W], [x, w], conv_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 5), **TOL)
    out = ops.depthwise_conv2d_nchw(X, W, stride=2, padding=1)
    text = str(tl.lower(ops.default_schedule(out), [X, W, out]))
    assert "allocate pad: float32[1, 1, 9, " in text and "(stack)" in text
    check(out, [X, W], [x, w], conv_ref(x, w, (2, 2), (1, 1, 1, 1), (1, 1), 5), **TOL)


@pytest.mark.parametrize("h,rows", [(12, 4), (14, 2), (7, 1)])
def test_depthwise_row_blocks_and_unclamped_pad(h, rows):
    """Output rows are computed `rows` at a time (independent FMA chains), and the window reads
    each input row as one contiguous vector, masked where it may fall into the padding (no
    clamped index, no gather)."""
    x, w = rand((1, 3, h, 28)), rand((3, 1, 3, 3))
    X, W = ph(x, "X"), ph(w, "W")
    out = ops.depthwise_conv2d_nchw(X, W, padding=1)
    text = str(tl.lower(ops.default_schedule(out), [X, W, out]))
    assert f"allocate depthwise_conv2d_nchw.local: float32[1, 1, {rows}, 28]" in text
    reads = [ln for ln in text.splitlines() if "X[" in ln]
    assert len(reads) == 9 * rows
    assert all("X[ramp(" in ln and "select(" in ln for ln in reads)
    assert "max(" not in text and "min(" not in text
    check(out, [X, W], [x, w], conv_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 3), **TOL)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_stride_one_pool_whole_row(kind):
    x = rand((1, 4, 6, 28))
    X = ph(x, "X")
    pad = (1, 1, 1, 1)
    out = ops.max_pool2d(X, 3, 1, pad) if kind == "max" else ops.avg_pool2d(X, 3, 1, pad)
    assert "1, 28)]" in str(tl.lower(ops.default_schedule(out), [X, out]))
    check(out, [X], [x], pool_ref(x, 3, 1, pad, False, kind), **TOL)


def test_conv2d_nchwc_matches_nchw():
    x, w = rand((1, 32, 9, 14)), rand((32, 32, 3, 3))
    X, W = ph(x, "X"), ph(w, "W")
    xc = ops.layout_transform(X, "NCHW", "NCHW16c")
    wc = ops.kernel_layout_transform(W, 16, 16)
    y = ops.conv2d_nchwc(xc, wc, stride=1, padding=(1, 0, 1, 2))
    out = ops.layout_transform(y, "NCHW16c", "NCHW")
    check(out, [X, W], [x, w], conv_ref(x, w, (1, 1), (1, 0, 1, 2), (1, 1), 1), **TOL)
    # the blocked conv alone, on pre-transformed inputs
    xb = x.reshape(1, 2, 16, 9, 14).transpose(0, 1, 3, 4, 2).copy()
    wb = w.reshape(2, 16, 2, 16, 3, 3).transpose(0, 2, 4, 5, 3, 1).copy()
    XB, WB = ph(xb, "XB"), ph(wb, "WB")
    ref = conv_ref(x, w, (2, 2), (1, 1, 1, 1), (1, 1), 1)
    refb = ref.reshape(1, 2, 16, *ref.shape[2:]).transpose(0, 1, 3, 4, 2)
    check(ops.conv2d_nchwc(XB, WB, stride=2, padding=1), [XB, WB], [xb, wb], refb, **TOL)


@pytest.mark.parametrize("oc,width,tile", [(24, 12, (3, 6)), (40, 10, (5, 5)), (32, 14, (4, 7))])
def test_conv2d_nchwc_with_8_lane_blocks(oc, width, tile):
    """16 input channels in one block, oc output channels in blocks of 8 (NCHW8c, what the graph
    uses for channel counts 16 does not divide): the register tile takes about as many lanes
    per broadcast input as two 16-lane blocks (the divisor of the block count nearest to 4)
    and at most 28 accumulators."""
    x, w = rand((1, 16, 5, width)), rand((oc, 16, 1, 1))
    xb = x.reshape(1, 1, 16, 5, width).transpose(0, 1, 3, 4, 2).copy()
    wb = w.reshape(oc // 8, 8, 1, 16, 1, 1).transpose(0, 2, 4, 5, 3, 1).copy()
    XB, WB = ph(xb, "XB"), ph(wb, "WB")
    out = ops.conv2d_nchwc(XB, WB)
    blocks, cols = tile
    text = str(tl.lower(ops.default_schedule(out), [XB, WB, out]))
    assert f"allocate conv2d_nchwc.local: float32[1, {blocks}, 1, {cols}, 8]" in text
    ref = conv_ref(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    refb = ref.reshape(1, oc // 8, 8, 5, width).transpose(0, 1, 3, 4, 2)
    check(out, [XB, WB], [xb, wb], refb, **TOL)


def pool_ref(x, k, s, pad, ceil_mode, kind, count_include_pad=False, dil=1):
    n, c, h, w = x.shape
    pt, pl, pb, pr = pad

    def osz(size, lo, hi):
        span = size + lo + hi - dil * (k - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + lo:
            o -= 1
        return o

    oh, ow = osz(h, pt, pb), osz(w, pl, pr)
    out = np.zeros((n, c, oh, ow), "float32")
    for y in range(oh):
        for z in range(ow):
            y0, z0 = y * s - pt, z * s - pl
            ys = [y0 + dil * i for i in range(k) if 0 <= y0 + dil * i < h]
            zs = [z0 + dil * i for i in range(k) if 0 <= z0 + dil * i < w]
            win = x[:, :, ys][:, :, :, zs]
            if kind == "max":
                out[:, :, y, z] = win.max(axis=(2, 3))
            else:
                if count_include_pad:
                    cnt = (min(y0 + k, h + pb) - max(y0, -pt)) * (min(z0 + k, w + pr) -
                                                                 max(z0, -pl))
                else:
                    cnt = len(ys) * len(zs)
                out[:, :, y, z] = win.sum(axis=(2, 3)) / cnt
    return out


@pytest.mark.parametrize("k,s,pad,ceil_mode,dil", [
    (3, 2, (1, 1, 1, 1), False, 1), (3, 2, (0, 0, 0, 0), True, 1), (2, 2, (1, 0, 0, 1), True, 1),
    (3, 1, (1, 1, 1, 1), False, 2)])
def test_max_pool(k, s, pad, ceil_mode, dil):
    x = rand((1, 3, 10, 11))
    X = ph(x, "X")
    out = ops.max_pool2d(X, k, s, pad, dilation=dil, ceil_mode=ceil_mode)
    check(out, [X], [x], pool_ref(x, k, s, pad, ceil_mode, "max", dil=dil))


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("k,s,pad,ceil_mode", [
    (3, 2, (1, 1, 1, 1), False), (3, 2, (1, 1, 1, 1), True), (2, 3, (1, 0, 0, 1), True)])
def test_avg_pool(k, s, pad, ceil_mode, count_include_pad):
    x = rand((2, 3, 10, 11))
    X = ph(x, "X")
    out = ops.avg_pool2d(X, k, s, pad, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    check(out, [X], [x], pool_ref(x, k, s, pad, ceil_mode, "avg", count_include_pad), **TOL)


def test_global_pools():
    x = rand((2, 5, 7, 9))
    X = ph(x, "X")
    check(ops.global_avg_pool2d(X), [X], [x], x.mean(axis=(2, 3), keepdims=True), **TOL)
    check(ops.global_max_pool2d(X), [X], [x], x.max(axis=(2, 3), keepdims=True))


def _nchw16c(a):
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // 16, 16, h, w).transpose(0, 1, 3, 4, 2))


@pytest.mark.parametrize("k,s,pad,ceil_mode", [
    (3, 2, (1, 1, 1, 1), False), (2, 2, (0, 0, 1, 1), True), (3, 1, (1, 1, 1, 1), False)])
def test_pools_on_nchw16c(k, s, pad, ceil_mode):
    """Pooling keeps the channel block innermost: the same windows as on NCHW, one vector of
    16 channels per output pixel."""
    x = rand((1, 32, 11, 13))
    X = ph(_nchw16c(x), "X")
    mx = ops.max_pool2d(X, k, s, pad, ceil_mode=ceil_mode)
    check(mx, [X], [_nchw16c(x)], _nchw16c(pool_ref(x, k, s, pad, ceil_mode, "max")))
    av = ops.avg_pool2d(X, k, s, pad, ceil_mode=ceil_mode, count_include_pad=True)
    check(av, [X], [_nchw16c(x)],
          _nchw16c(pool_ref(x, k, s, pad, ceil_mode, "avg", True)), **TOL)
    text = str(tl.lower(ops.default_schedule(mx), [X, mx]))
    assert ", 1, 16)]" in text and "parallel for" in text


def test_global_pools_on_nchw16c_vectorize_the_channel_block():
    x = rand((2, 32, 7, 9))
    X = ph(_nchw16c(x), "X")
    out = ops.global_avg_pool2d(X)
    assert [int(d.value) for d in out.shape] == [2, 2, 1, 1, 16]
    check(out, [X], [_nchw16c(x)], _nchw16c(x.mean(axis=(2, 3), keepdims=True)), **TOL)
    check(ops.global_max_pool2d(X), [X], [_nchw16c(x)],
          _nchw16c(x.max(axis=(2, 3), keepdims=True)))
    text = str(tl.lower(ops.default_schedule(out), [X, out]))
    assert ", 1, 16)]" in text  # the reduce loops wrap the 16-lane channel vector


def test_batch_norm_and_lrn():
    x = rand((2, 6, 4, 5))
    g, b, m, v = rand((6,)), rand((6,)), rand((6,)), rand((6,), lo=0.1, hi=2)
    X, G, B, M, V = (ph(t, n) for t, n in zip((x, g, b, m, v), "XGBMV"))
    ref = (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-3) * g[:, None, None] \
        + b[:, None, None]
    check(ops.batch_norm(X, G, B, M, V, epsilon=1e-3), [X, G, B, M, V], [x, g, b, m, v], ref,
          **TOL)
    for size in (3, 4):
        sq = np.zeros_like(x)
        lo, hi = (size - 1) // 2, math.ceil((size - 1) / 2)
        for c in range(6):
            sq[:, c] = (x[:, max(0, c - lo):min(6, c + hi + 1)] ** 2).sum(axis=1)
        ref = x / (2.0 + 1e-2 / size * sq) ** 0.75
        check(ops.lrn(X, size, 1e-2, 0.75, 2.0), [X], [x], ref, **TOL)


def test_lrn_sums_each_row_in_vectors_and_takes_the_power_three_quarters_without_pow():
    """GoogLeNet's LRN (1x192x55x55) took 6.4 ms with the sums one scalar at a time and pow
    through f64, 0.55 ms now (one thread, Intel Xeon)."""
    X = ph(rand((1, 192, 55, 55)), "X")
    out = ops.lrn(X, 5)
    text = str(tl.lower(ops.default_schedule(out), [X, out]))
    assert "allocate lrn_sqsum: float32[1, 1, 1, 64] (stack)" in text  # one row, per row
    assert "lrn_sqsum[ramp(" in text and "pow(" not in text and "rsqrt(" in text
    out = ops.lrn(X, 5, beta=0.6)
    assert "pow(" in str(tl.lower(ops.default_schedule(out), [X, out]))  # another exponent


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((5, 64), -1), ((3, 37), 1), ((4, 6, 5), 1),
                                        ((2, 3, 40), -1)])
def test_softmax_log_softmax(shape, axis):
    x = rand(shape, lo=-5, hi=5)
    X = ph(x, "X")
    check(ops.softmax(X, axis), [X], [x], _softmax(x, axis), **TOL)
    check(ops.log_softmax(X, axis), [X], [x], np.log(_softmax(x, axis)), **TOL)


@pytest.mark.parametrize("width", [49, 197])
def test_row_ops_over_widths_16_does_not_divide(width):
    """Softmax, layer norm and a row max over rows of 49 or 197 (a 7x7-patch wav2vec2 / ViT
    sequence): 16-lane vectors with one peeled tail, the reductions' partials one 16-lane
    vector (rfactor with a ragged last chunk), not 4-lane vectors and scalar reductions
    (whisper's 1500-wide softmax rows, 1 thread: 24 -> 7.2 ms). All-negative rows check the
    max's partial lanes that the tail never reaches keep -inf."""
    x = rand((3, width), lo=-9, hi=-1)
    X = ph(x, "X")
    for out, ref in ((ops.softmax(X), _softmax(x, -1)),
                     (ops.layer_norm(X), (x - x.mean(-1, keepdims=True)) /
                      np.sqrt(x.var(-1, keepdims=True) + 1e-5)),
                     (ops.max(X, axis=-1), x.max(-1))):
        text = str(tl.lower(ops.default_schedule(out), [X, out]))
        assert ".rf[ramp(0, 1, 16)]" in text and "ramp(0, 1, 4)" not in text
        check(out, [X], [x], ref, **TOL)


@pytest.mark.parametrize("width", [300, 1500])
def test_long_ragged_rows_reduce_in_4_vector_accumulators(width):
    """Rows of at least 4 x 64 that 64 does not divide (whisper's 1500): the max and the sum
    keep 4 independent 16-lane accumulators (the add latency hidden), their ragged chunk whole
    vectors then a scalar remainder. All-negative rows: the lanes the remainder never reaches
    keep -inf."""
    x = rand((3, width), lo=-9, hi=-1)
    X = ph(x, "X")
    for out, ref in ((ops.softmax(X), _softmax(x, -1)), (ops.max(X, axis=-1), x.max(-1)),
                     (ops.sum(X, axis=-1), x.sum(-1))):
        text = str(tl.lower(ops.default_schedule(out), [X, out]))
        assert all(f".rf[ramp({lane}, 1, 16)] = " in text for lane in (0, 16, 32, 48)), text
        check(out, [X], [x], ref, **TOL)


def test_big_outputs_get_non_temporal_stores():
    """Outputs of at least STREAMING_BYTES (16 MB) are written past the caches; smaller ones,
    which a reader may still find in cache, are not."""
    from tensorlang.ops.schedule import STREAMING_BYTES

    def pragmas(out):
        return [st.args["key"] for st in ops.default_schedule(out).trace if st.kind == "pragma"]

    rows = STREAMING_BYTES // (4 * 1024)
    big, small = tl.placeholder((rows, 1024), name="X"), tl.placeholder((64, 1024), name="Y")
    assert pragmas(ops.softmax(big)) == ["nontemporal"]
    assert pragmas(ops.layer_norm(big)) == ["nontemporal"]
    assert pragmas(ops.relu(big)) == ["nontemporal"]
    assert pragmas(ops.softmax(small)) == [] and pragmas(ops.relu(small)) == []


def test_big_outputs_with_misaligned_rows_keep_ordinary_stores():
    """A row whose length in bytes is not a multiple of the vector (1500 floats: rows start at
    0 / 48 / 32 / 16 bytes past a line) is written with ordinary stores; whole-vector rows
    (1504) keep the non-temporal ones. The misaligned big softmax still matches numpy."""
    from tensorlang.ops.schedule import STREAMING_BYTES

    def pragmas(out):
        return [st.args["key"] for st in ops.default_schedule(out).trace if st.kind == "pragma"]

    rows = -(-STREAMING_BYTES // (4 * 1500))
    odd, even = tl.placeholder((rows, 1500), name="X"), tl.placeholder((rows, 1504), name="Y")
    assert pragmas(ops.softmax(odd)) == [] and pragmas(ops.relu(odd)) == []
    assert pragmas(ops.layer_norm(odd)) == []
    assert pragmas(ops.softmax(even)) == ["nontemporal"]
    x = rand((rows, 1500))
    X = ph(x, "X")
    check(ops.softmax(X), [X], [x], _softmax(x, -1), both=False, **TOL)


def test_one_dimensional_row_ops():
    x = rand((50,))
    X = ph(x, "X")
    check(ops.softmax(X), [X], [x], _softmax(x, 0), **TOL)
    check(ops.layer_norm(X), [X], [x], (x - x.mean()) / np.sqrt(x.var() + 1e-5), **TOL)


@pytest.mark.parametrize("shape,axis,affine", [((6, 64), -1, True), ((3, 4, 10), 1, True),
                                               ((5, 33), -1, False)])
def test_layer_norm(shape, axis, affine):
    """Normalized over [axis, rank); gamma full-shaped, beta broadcast from the last axis."""
    x = rand(shape)
    X = ph(x, "X")
    ax = axis % len(shape)
    red = tuple(range(ax, len(shape)))
    mu = x.mean(axis=red, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=red, keepdims=True) + 1e-5)
    ins, arrs = [X], [x]
    g = b = None
    if affine:
        gv, bv = rand(shape[ax:]), rand(shape[-1:])
        g, b = ph(gv, "G"), ph(bv, "B")
        ins, arrs = [X, g, b], [x, gv, bv]
        ref = ref * gv + bv
    check(ops.layer_norm(X, g, b, axis), ins, arrs, ref, **TOL)


def test_row_reductions_fold_partials_in_vectors():
    """Layer norm's variance (it reads the row mean, which does not depend on the reduce axis)
    and softmax's sum get the rfactor vector accumulator, and its 64 partials are folded into
    16 with vector adds before the scalar tail. Rows far from zero keep the two-pass variance
    accurate."""
    x = rand((6, 256)) + np.float32(300.0)
    X = ph(x, "X")
    out = ops.layer_norm(X)
    text = str(tl.lower(ops.default_schedule(out), [X, out]))
    assert "layer_norm_var.rf[ramp(0, 1, 64)]" in text
    assert "layer_norm_var.rf.1[ramp(0, 1, 16)]" in text
    mu = x.astype("float64").mean(axis=1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    check(out, [X], [x], ref.astype("float32"), rtol=2e-3, atol=2e-3)
    y = rand((3, 128), lo=-5, hi=5)
    Y = ph(y, "Y")
    sm = ops.softmax(Y)
    assert "softmax_sum.rf.1[ramp(0, 1, 16)]" in str(tl.lower(ops.default_schedule(sm), [Y, sm]))
    check(sm, [Y], [y], _softmax(y, -1), **TOL)
    check(ops.sum(Y, axis=1), [Y], [y], y.sum(axis=1), **TOL)


# ----------------------------------------------------------------------------- fused compositions


def test_fused_conv_bias_relu():
    x, w, b = rand((1, 16, 10, 14)), rand((16, 16, 3, 3)), rand((16, 1, 1))
    X, W, B = ph(x, "X"), ph(w, "W"), ph(b, "b")
    out = ops.relu(ops.add(ops.conv2d_nchw(X, W, padding=1), B))
    s = ops.default_schedule(out)
    # 16 output channels: the oc-blocked accumulator is computed per tile of the tail's loop
    # nest, and the NCHW read-back is inlined into the tail (the tile's total over its chunks
    # of kernel rows: the chunks' partial sums, conv2d_nchw_block.rf, are computed inside it)
    conv = next(st for st in s.stages if st.op.name == "conv2d_nchw_block")
    assert conv.attach_type == "scope" and conv.attach_stage.op is out.op  # tail fused
    assert any(st.attach_type == "inline" and st.op.tag == "add" for st in s.stages)
    assert any(st.attach_type == "inline" and st.op.tag == "conv2d_nchw" for st in s.stages)
    ref = np.maximum(conv_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1) + b, 0)
    check(out, [X, W, B], [x, w, b], ref, **TOL)
    # 12 output channels (not a multiple of 16): the plain NCHW conv hosts the tail
    w12, b12 = rand((12, 16, 3, 3)), rand((12, 1, 1))
    W12, B12 = ph(w12, "W12"), ph(b12, "b12")
    out = ops.relu(ops.add(ops.conv2d_nchw(X, W12, padding=1), B12))
    s = ops.default_schedule(out)
    conv = next(st for st in s.stages if st.op.tag == "conv2d_nchw")
    assert conv.attach_type == "scope" and conv.attach_stage.op is out.op
    ref = np.maximum(conv_ref(x, w12, (1, 1), (1, 1, 1, 1), (1, 1), 1) + b12, 0)
    check(out, [X, W12, B12], [x, w12, b12], ref, **TOL)


@pytest.mark.parametrize("c,hw,oc,k,stride,pad,dil", [
    (3, (9, 13), 16, 3, 1, (1, 1, 1, 1), 1),  # odd sizes: OW 13 is its own register tile
    (8, (12, 17), 32, 3, 2, (0, 1, 2, 1), 1),  # stride 2, asymmetric padding, OW 8
    (5, (11, 17), 48, 1, 1, (0, 0, 0, 0), 1),  # 1x1, OW 17 (prime > reg_ow: 1-column tiles)
    (4, (10, 10), 16, 3, 1, (2, 2, 2, 2), 2),  # dilation
])
def test_conv2d_nchw_oc_blocked(c, hw, oc, k, stride, pad, dil):
    """groups=1 with OC a multiple of 16: the oc-blocked accumulator (a register tile of
    2 x 16 channels x up to 14 columns, computed per output tile and copied out to NCHW), with
    the weights packed inside the op (OIHW given) or pre-packed by pack_conv_weight (5-D)."""
    x, w = rand((1, c) + hw), rand((oc, c, k, k))
    X, W = ph(x, "X"), ph(w, "W")
    ref = conv_ref(x, w, (stride, stride), pad, (dil, dil), 1)
    out = ops.conv2d_nchw(X, W, stride=stride, padding=pad, dilation=dil)
    s = ops.default_schedule(out)
    blk = next(st for st in s.stages if st.op.name == "conv2d_nchw_block")
    assert blk.attach_type == "scope" and blk.attach_stage.op is out.op
    text = str(tl.lower(s, [X, W, out]))
    # chunks of whole kernel rows of at most 32 terms (chain); chunks under 64 terms get one
    # oc vector, so the tile's totals stay in registers beside its accumulators
    rows = max(1, 32 // (k * c))
    short = rows < k and rows * k * c < 64
    nvec = 2 if oc % 32 == 0 and not short else 1
    assert f"allocate conv2d_nchw_block: float32[1, {nvec}, 1, " in text  # per-tile, stack
    # the padding is read in place (guarded border tiles), with no padded copy
    assert "allocate pad" not in text
    check(out, [X, W], [x, w], ref, **TOL)
    # oc blocks outside the rows (what large weights get)
    s2 = ops.default_schedule(out, knobs={"oc_outer": True})
    assert "allocate pad" not in str(tl.lower(s2, [X, W, out]))
    f = tl.build(s2, [X, W, out])
    got = np.zeros(ref.shape, "float32")
    f(x, w, got)
    np.testing.assert_allclose(got, ref, **TOL)
    wp = w.reshape(oc // 16, 16, c, k, k).transpose(0, 2, 3, 4, 1).copy()
    WP = ph(wp, "WP")
    check(ops.conv2d_nchw(X, WP, stride=stride, padding=pad, dilation=dil), [X, WP], [x, wp],
          ref, **TOL)
    # the packing op on its own (an output: a plain injective kernel)
    check(ops.pack_conv_weight(W), [W], [w], wp, **TOL)


def test_conv2d_nchw_groups_fall_back_to_plain_schedule():
    """groups > 1 with output channels per group that no block (16, 8) divides keeps the plain
    NCHW conv: no blocked stage (test_grouped_conv.py has the blocked grouped convs)."""
    x, w = rand((1, 8, 9, 10)), rand((12, 4, 3, 3))
    X, W = ph(x, "X"), ph(w, "W")
    out = ops.conv2d_nchw(X, W, padding=1, groups=2)
    s = ops.default_schedule(out)
    assert not any(st.op.tag == "conv2d_nchw_block" for st in s.stages)
    check(out, [X, W], [x, w], conv_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 2), **TOL)


def test_conv2d_nchw_packed_weight_errors():
    X = tl.placeholder((1, 16, 8, 8), name="X")
    with pytest.raises(ValueError, match="output channels of each of the 4 groups"):
        ops.conv2d_nchw(X, tl.placeholder((1, 4, 3, 3, 16), name="W"), groups=4)
    with pytest.raises(ValueError, match="oc_block"):
        ops.pack_conv_weight(tl.placeholder((24, 16, 3, 3), name="W"), 16)


@pytest.mark.parametrize("packed", [False, True])
def test_conv2d_nchw_into_nchw16c(packed):
    """NCHW input with 3 channels (a CNN's first conv), NCHW16c output written from the
    register tile as vectors, with a fused bias + relu tail."""
    x, w, b = rand((1, 3, 15, 28)), rand((32, 3, 5, 5)), rand((2, 1, 1, 16))
    wp = np.ascontiguousarray(w.reshape(2, 16, 3, 5, 5).transpose(0, 2, 3, 4, 1))
    X, W, B = ph(x, "X"), ph(wp if packed else w, "W"), ph(b, "b")
    out = ops.relu(ops.add(ops.conv2d_nchw(X, W, 2, 2, out_layout="NCHW16c"), B))
    ref = conv_ref(x, w, (2, 2), (2, 2, 2, 2), (1, 1), 1) + b.reshape(1, 32, 1, 1)
    check(out, [X, W, B], [x, wp if packed else w, b], _nchw16c(np.maximum(ref, 0)), **TOL)
    text = str(tl.lower(ops.default_schedule(out), [X, W, B, out]))
    assert ", 1, 16)] = max(" in text  # whole-vector stores of 16 channels


def test_conv2d_nchw_out_layout_errors():
    X = tl.placeholder((1, 3, 8, 8), name="X")
    with pytest.raises(ValueError, match="conv2d_nchw: out_layout must be 'NCHW' or 'NCHW16c'"):
        ops.conv2d_nchw(X, tl.placeholder((24, 3, 3, 3), name="W"), out_layout="NCHW16c")
    with pytest.raises(ValueError, match="out_layout must be 'NCHW' or 'NCHW16c'"):
        ops.conv2d_nchw(X, tl.placeholder((32, 3, 3, 3), name="W"), out_layout="NCHW8c")


def test_fused_conv_nchwc_bias_relu():
    x, w, b = rand((1, 2, 6, 14, 16)), rand((2, 2, 3, 3, 16, 16)), rand((2, 1, 1, 16))
    X, W, B = ph(x, "X"), ph(w, "W"), ph(b, "b")
    out = ops.relu(ops.add(ops.conv2d_nchwc(X, W, padding=1), B))
    s = ops.default_schedule(out)
    conv = next(st for st in s.stages if st.op.name == "conv2d_nchwc")  # not its .rf chunks
    assert conv.attach_stage is not None and conv.attach_stage.op is out.op
    xn = x.transpose(0, 1, 4, 2, 3).reshape(1, 32, 6, 14)
    wn = w.transpose(0, 5, 1, 4, 2, 3).reshape(32, 32, 3, 3)
    ref = conv_ref(xn, wn, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    ref = ref.reshape(1, 2, 16, 6, 14).transpose(0, 1, 3, 4, 2)
    check(out, [X, W, B], [x, w, b], np.maximum(ref + b, 0), **TOL)


@pytest.mark.parametrize("ocb,want", [(3, 1), (4, 2)])
def test_conv2d_nchwc_oc_blocks_per_tile(ocb, want):
    """The blocked kernel's register tile holds 2 output-channel blocks when OC/16 is even,
    else 1 (the largest divisor of OC/16 up to the oc_blocks knob)."""
    x, w = rand((1, 16, 5, 7)), rand((16 * ocb, 16, 3, 3))
    xb = x.reshape(1, 1, 16, 5, 7).transpose(0, 1, 3, 4, 2).copy()
    wb = w.reshape(ocb, 16, 1, 16, 3, 3).transpose(0, 2, 4, 5, 3, 1).copy()
    XB, WB = ph(xb, "XB"), ph(wb, "WB")
    out = ops.conv2d_nchwc(XB, WB, padding=1)
    text = str(tl.lower(ops.default_schedule(out), [XB, WB, out]))
    assert f"allocate conv2d_nchwc.local: float32[1, {want}, 1, 7, 16]" in text
    ref = conv_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    check(out, [XB, WB], [xb, wb], ref.reshape(1, ocb, 16, 5, 7).transpose(0, 1, 3, 4, 2), **TOL)


def test_blocked_conv_between_layout_transforms():
    """NCHW in, NCHW out through the blocked conv: the conv is not the output (a layout
    transform is) and still gets the blocked conv schedule, not the generic reduction one."""
    x, w = rand((1, 32, 6, 14)), rand((32, 32, 3, 3))
    wb = w.reshape(2, 16, 2, 16, 3, 3).transpose(0, 2, 4, 5, 3, 1).copy()
    X, WB = ph(x, "X"), ph(wb, "W")
    conv = ops.conv2d_nchwc(ops.layout_transform(X, "NCHW", "NCHW16c"), WB, padding=1)
    out = ops.layout_transform(conv, "NCHW16c", "NCHW")
    text = str(tl.lower(ops.default_schedule(out), [X, WB, out]))
    # register tile: 2 oc blocks x 14 columns x 16 channels
    assert "allocate conv2d_nchwc.local: float32[1, 2, 1, 14, 16]" in text
    check(out, [X, WB], [x, wb], conv_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1), **TOL)


@pytest.mark.parametrize("m,k,n", [(30, 20, 37), (12, 64, 128)])
def test_fused_matmul_add_gelu(m, k, n):
    a, b, c = rand((m, k)), rand((k, n)), rand((n,))
    A, B, C = ph(a, "A"), ph(b, "B"), ph(c, "c")
    out = ops.gelu(ops.add(ops.matmul(A, B), C))
    s = ops.default_schedule(out)
    mm = next(st for st in s.stages if st.op.tag == "matmul")
    assert mm.attach_type == "scope" and mm.attach_stage.op is out.op
    from scipy.special import erf

    r = a.astype("float64") @ b + c
    check(out, [A, B, C], [a, b, c], (0.5 * r * (1 + erf(r / np.sqrt(2)))).astype("float32"),
          **TOL)


def _erf_gelu_as_onnx_exports_it(x, d, c1, c05):
    """x * 0.5 * (1 + erf(x / sqrt 2)) as five ops (Div, Erf, Add, Mul, Mul): x read twice."""
    return ops.multiply(ops.multiply(x, ops.add(ops.erf(ops.divide(x, d)), c1)), c05)


def _scalars():
    vals = [np.array([math.sqrt(2.0)], "float32"), np.array([1.0], "float32"),
            np.array([0.5], "float32")]
    return [ph(v, nm) for v, nm in zip(vals, ("d", "one", "half"))], vals


def _gelu_ref(r):
    from scipy.special import erf

    return (0.5 * r * (1 + erf(r / np.sqrt(2)))).astype("float32")


@pytest.mark.parametrize("m,k,n", [(30, 20, 37), (13, 9, 50), (12, 64, 128)])
def test_dense_bias_then_onnx_gelu_is_computed_on_the_register_tile(m, k, n):
    """The tail reads the dense + bias value twice (not a chain): the dense is still placed at
    the output's tile loop (one parallel loop, no heap buffer of the dense's output)."""
    x, w, b = rand((m, k)), rand((n, k)), rand((n,))
    X, W, B = ph(x, "X"), ph(w, "W"), ph(b, "b")
    (D, C1, C05), vals = _scalars()
    out = _erf_gelu_as_onnx_exports_it(ops.dense(X, W, B), D, C1, C05)
    s = ops.default_schedule(out)
    mm = next(st for st in s.stages if st.op.tag == "dense")
    assert mm.attach_type == "scope" and mm.attach_stage.op is out.op
    text = str(tl.lower(s, [X, W, B, D, C1, C05, out]))
    assert text.count("parallel for") == 1 and "(heap)" not in text
    check(out, [X, W, B, D, C1, C05], [x, w, b, *vals],
          _gelu_ref(x.astype("float64") @ w.T + b), **TOL)


@pytest.mark.parametrize("bsz,m,k,n", [(3, 17, 8, 45), (2, 12, 16, 64)])
def test_batch_matmul_silu_tail_reads_the_product_twice(bsz, m, k, n):
    a, b = rand((bsz, m, k)), rand((bsz, k, n))
    A, B = ph(a, "A"), ph(b, "B")
    mm = ops.batch_matmul(A, B)
    out = ops.multiply(mm, ops.sigmoid(mm))
    s = ops.default_schedule(out)
    assert s[mm].attach_type == "scope" and s[mm].attach_stage.op is out.op
    r = a.astype("float64") @ b
    check(out, [A, B], [a, b], (r / (1 + np.exp(-r))).astype("float32"), **TOL)


def test_tail_value_read_outside_the_tail_keeps_the_matmul_at_the_root():
    """A tail stage that a second output also reads: the matmul cannot live in the first
    output's tiles (its values are needed elsewhere), so it keeps its own root schedule; both
    outputs still match numpy."""
    a, b, c = rand((14, 24)), rand((24, 40)), rand((40,))
    A, B, C = ph(a, "A"), ph(b, "B"), ph(c, "c")
    (D, C1, C05), vals = _scalars()
    biased = ops.add(ops.matmul(A, B), C)
    gelu = _erf_gelu_as_onnx_exports_it(biased, D, C1, C05)
    other = ops.sigmoid(ops.divide(biased, D))
    s = ops.default_schedule([gelu, other])
    mm = next(st for st in s.stages if st.op.tag == "matmul")
    assert mm.attach_type != "scope" or mm.attach_stage.op not in (gelu.op, other.op)
    r = a.astype("float64") @ b + c
    check([gelu, other], [A, B, C, D, C1, C05], [a, b, c, *vals],
          [_gelu_ref(r), (1 / (1 + np.exp(-r / np.sqrt(2)))).astype("float32")], **TOL)


def test_big_output_short_reduction_puts_row_tiles_outside_the_panels(monkeypatch):
    """q . k^T over a long sequence (an output of at least ROWS_OUTER_OUT_BYTES, B within
    ROWS_OUTER_B_BYTES): the default runs row tiles outside the column panels; ragged row
    tiles and a ragged last panel (1201 rows, 1900 columns) still match numpy. A tuning
    config's rows_outer=False is kept, and a small output keeps the panels outside. Both
    bounds come from the host's caches: set here to a Zen 4's (32 MB L3, 1 MB L2). The output
    bound is half the last-level cache but at most 32 MB (a VM may report a whole socket's)."""
    from tensorlang.ops import schedule as sched
    from tensorlang.ops.schedule import matmul_rows_outer

    assert sched.ROWS_OUTER_OUT_BYTES == min(sched.STREAMING_BYTES, 32 << 20)
    monkeypatch.setattr(sched, "ROWS_OUTER_OUT_BYTES", 16 << 20)
    monkeypatch.setattr(sched, "ROWS_OUTER_B_BYTES", 1 << 19)

    def text(out, ins, knobs=None):
        return str(tl.lower(ops.default_schedule(out, knobs=knobs), [*ins, out]))

    a, b = rand((2, 1201, 32)), rand((2, 32, 1900))
    A, B = ph(a, "A"), ph(b, "B")
    out = ops.batch_matmul(A, B)
    assert matmul_rows_outer(out.op)
    default = text(out, [A, B])
    assert default == text(out, [A, B], {"rows_outer": True})
    assert default != text(out, [A, B], {"rows_outer": False})
    check(out, [A, B], [a, b], a.astype("float64") @ b, both=False, **TOL)
    small = ops.batch_matmul(*(tl.placeholder(sh, name=nm) for sh, nm in
                               (((2, 64, 32), "A"), ((2, 32, 64), "B"))))
    assert not matmul_rows_outer(small.op)
    long_k = ops.batch_matmul(*(tl.placeholder(sh, name=nm) for sh, nm in
                                (((2, 1100, 512), "A"), ((2, 512, 1900), "B"))))
    assert not matmul_rows_outer(long_k.op)  # B (3.9 MB) would not stay in L2


@pytest.mark.parametrize("m,k,n", [(24, 20, 48), (13, 9, 37), (4, 16, 20)])
def test_matmul_prepacked(m, k, n):
    """B packed once into [ceil(N/16), K, 16] panels (zero-padded past N), then the matmul
    reads the panels directly: the same result, and no packing stage in the kernel."""
    a, b = rand((m, k)), rand((k, n))
    B = ph(b, "B")
    packed = ops.pack_matmul_weight(B)
    bp = np.zeros((-(-n // 16), k, 16), "float32")
    tl.build(ops.default_schedule(packed), [B, packed])(b, bp)
    columns = bp.transpose(1, 0, 2).reshape(k, -1)  # panel p, lane l is column 16 p + l
    assert np.array_equal(columns[:, :n], b) and not columns[:, n:].any()
    A, BP = ph(a, "A"), ph(bp, "BP")
    out = ops.matmul_prepacked(A, BP, n)
    check(out, [A, BP], [a, bp], a @ b, **TOL)
    s = ops.default_schedule(out)
    assert not [st for st in s.stages if st.op.tag.endswith("_pack")]


def test_matmul_prepacked_checks_the_panels():
    A = tl.placeholder((8, 10), name="A")
    with pytest.raises(ValueError, match=r"bp \(2, 10, 16\) is not B \[10, 40\] packed"):
        ops.matmul_prepacked(A, tl.placeholder((2, 10, 16), name="BP"), 40)
    with pytest.raises(ValueError, match="bp 3-D"):
        ops.matmul_prepacked(A, tl.placeholder((10, 40), name="B"), 40)


def test_matmul_with_bias_and_residual_adds_in_its_tail():
    """Two library adds are two computes named "add": their stages get distinct names
    ("add", "add.1"), so the matmul is placed at the output's loops, not the inlined add's
    (which the legality check refused, and a graph fell back to the naive schedule)."""
    a, b, c, r = rand((20, 32)), rand((32, 48)), rand((48,)), rand((20, 48))
    A, B, C, R = ph(a, "A"), ph(b, "B"), ph(c, "c"), ph(r, "R")
    out = ops.add(ops.add(ops.matmul(A, B), C), R)
    s = ops.default_schedule(out)
    assert [st.name for st in s.stages if st.op.tag == "add"] == ["add", "add.1"]
    mm = next(st for st in s.stages if st.op.tag == "matmul")
    assert mm.attach_type == "scope" and mm.attach_stage.op is out.op
    check(out, [A, B, C, R], [a, b, c, r], a @ b + c + r, **TOL)
    replayed = tl.create_schedule(out).apply_trace(s.trace.dumps())
    assert str(tl.lower(replayed, [A, B, C, R, out])) == str(tl.lower(s, [A, B, C, R, out]))


def test_default_schedule_lowering_has_vector_and_parallel_code():
    A = tl.placeholder((48, 64), name="A")
    B = tl.placeholder((64, 64), name="B")
    out = ops.relu(ops.matmul(A, B))
    text = str(tl.lower(ops.default_schedule(out), [A, B, out]))
    assert "parallel for" in text and "ramp(" in text


@pytest.mark.parametrize("call,words", [
    (lambda X, W: ops.conv2d_nchw(X, W, stride=-1), ("conv2d_nchw", "stride")),
    (lambda X, W: ops.conv2d_nchw(X, W, groups=3), ("conv2d_nchw", "groups")),
    (lambda X, W: ops.conv2d_nchw(X, W, padding=(1, 2, 3)), ("conv2d_nchw", "padding")),
    (lambda X, W: ops.conv2d_nchw(X, W, padding=-1), ("conv2d_nchw", "padding")),
    (lambda X, W: ops.conv2d_nchw(X, W, dilation=0), ("conv2d_nchw", "dilation")),
    (lambda X, W: ops.matmul(X, W), ("matmul", "mismatched")),
    (lambda X, W: ops.max_pool2d(X, 0), ("max_pool2d", "kernel_size")),
    (lambda X, W: ops.avg_pool2d(X, 2, count_include_pad=1), ("avg_pool2d", "count_include_pad")),
    (lambda X, W: ops.softmax(X, axis=4), ("softmax", "axis")),
    (lambda X, W: ops.lrn(X, 0), ("lrn", "size")),
    (lambda X, W: ops.dense(tl.placeholder((2, 3)), tl.placeholder((4, 5))), ("dense", "in_f")),
])
def test_bad_attributes_raise_value_error(call, words):
    X = tl.placeholder((1, 4, 8, 8), name="X")
    W = tl.placeholder((6, 4, 3, 3), name="W")
    with pytest.raises(ValueError) as e:
        call(X, W)
    for wd in words:
        assert wd in str(e.value)


def test_dense_with_one_row_reads_the_weight_contiguously():
    # batch-1 dense with its [N, K] weight: a k-vectorized dot product per output (the register
    # tile would read the weight's columns as gathers of stride K)
    X = tl.placeholder((1, 320), name="X")
    W = tl.placeholder((70, 320), name="W")
    b = tl.placeholder((70,), name="b")
    Y = tl.ops.relu(tl.ops.add(tl.ops.dense(X, W), b))
    s = tl.ops.default_schedule(Y)
    text = str(tl.lower(s, [X, W, b, Y]))
    assert "W[ramp(" in text and ", 320, " not in text
    f = tl.build(s, [X, W, b, Y])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 320), dtype=np.float32)
    w = rng.standard_normal((70, 320), dtype=np.float32)
    bb = rng.standard_normal(70, dtype=np.float32)
    y = np.full((1, 70), np.nan, np.float32)
    f(x, w, bb, y)
    np.testing.assert_allclose(y, np.maximum(x @ w.T + bb, 0), rtol=1e-4, atol=1e-4)
