"""Integer kernels for quantized inference (issue 22): uint8 x int8 products accumulated exactly
in int32, in layouts that AVX-512 VNNI's vpdpbusd reads directly, with default schedules that
tensorize their innermost 16 x 4 block (te/tensorize.py; a CPU without VNNI runs the exact
widening fallback, chosen by codegen from the target).

What each kernel returns is the exact integer sum_k (a - a_zero) * (w - w_zero) in int32
(requantization, bias and activations are the graph's, graph/ and ops/quant.py):

    wp, colsum = pack_dense_weight(w)                      # numpy, at build time
    y = dense_int8(a, tl_const_or_placeholder(wp), n=w.shape[0], a_zero=za, w_zero=zw,
                   w_colsum=colsum_tensor)                 # [M, n] int32
    s = tl.create_schedule(y); schedule_dense_int8(s, y)

    xb = conv-input in NCHW16c (uint8 or int8), wp = pack_conv_weight(w) (OIHW[4i16o4i])
    y = conv2d_int8_nchwc(xb, wp, ...)                     # [N, OC/16, OH, OW, 16] int32

int8 activations are shifted into uint8 (a + 128, the zero point with them), since vpdpbusd
multiplies unsigned by signed bytes; the shift is compensated exactly with the weights' column
sums."""

from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import as_int
from ..te.tensor import Tensor
from ..te.tensorize import dot_u8s8_16x4

OB, IB = 16, 4  # outputs per vpdpbusd (int32 lanes), inputs summed per lane


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _static(op: str, arg: str, t: Tensor) -> tuple[int, ...]:
    shape = tuple(as_int(d) for d in t.shape)
    if None in shape:
        raise ValueError(f"{op}: {arg} needs a constant shape, got {t.shape}")
    return shape


def _check_dtype(op: str, arg: str, t: Tensor, allowed: tuple) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {arg} must be a tensor, got {type(t).__name__}")
    if t.dtype not in allowed:
        raise TypeError(f"{op}: {arg} must be {' or '.join(allowed)}, got {t.dtype}")


def _check_zero(op: str, arg: str, v, dtype: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}: {arg} must be an int (a per-tensor zero point), got {v!r}")
    lo, hi = dt.limits(dtype)
    if not lo <= int(v) <= hi:
        raise ValueError(f"{op}: {arg} {v} is outside {dtype}'s range [{lo}, {hi}]")
    return int(v)


# ----------------------------------------------------------------------------- weights


def pack_dense_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w [N, K] int8 -> (packed [ceil(N/16), ceil(K/4), 16, 4] int8, zero padded, the layout
    of dot_u8s8_16x4's B; column sums [N] int32 = sum_k w[j, k], for the zero-point
    compensation)."""
    w = np.asarray(w)
    if w.ndim != 2 or w.dtype != np.int8:
        raise ValueError(f"pack_dense_weight: w must be a 2-D int8 array, got {w.ndim}-D "
                         f"{w.dtype}")
    n, k = w.shape
    padded = np.zeros((_ceil(n, OB) * OB, _ceil(k, IB) * IB), np.int8)
    padded[:n, :k] = w
    packed = padded.reshape(-1, OB, padded.shape[1] // IB, IB).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(packed), w.astype(np.int32).sum(axis=1).astype(np.int32)


def _as_uint8(op: str, a: Tensor, kp: int, a_zero: int, mp: int | None = None
              ) -> tuple[Tensor, int]:
    """a as uint8 with its reduction axis padded to kp and (2-D a) its rows to mp (zeros:
    they add nothing, the zero point's compensation counts the real K only; padded rows are
    computed and never read) and the zero point that goes with it."""
    *lead, k = _static(op, "a", a)
    mp = lead[0] if mp is None else mp
    if a.dtype == "uint8" and k == kp and mp == lead[0]:
        return a, a_zero
    shift = 128 if a.dtype == "int8" else 0

    def f(*idx):
        v = (a[idx].astype("int32") + shift).astype("uint8")
        inside = [c for c in (idx[-1] < k if kp != k else None,
                              idx[0] < lead[0] if mp != lead[0] else None) if c is not None]
        if not inside:
            return v
        cond = inside[0] if len(inside) == 1 else inside[0] & inside[1]
        return te.if_then_else(cond, v, te.const(0, "uint8"))

    # reading a out of its shape is guarded: out of the select's taken branch, proven in bounds
    return te.compute((mp, *lead[1:], kp), f, name=f"{a.name}_u8"), a_zero + shift


ROWS = 4  # the row tile dense_int8's products are padded for (schedule_dense_int8's default)


# ----------------------------------------------------------------------------- dense


def dense_int8(a: Tensor, w_packed: Tensor, n: int, a_zero: int = 0, w_zero: int = 0,
               w_colsum: Tensor | None = None, name: str = "dense_int8") -> Tensor:
    """y[i, j] = sum_k (a[i, k] - a_zero) * (w[j, k] - w_zero), int32, exact.

    a: [M, K] uint8 or int8; w_packed: pack_dense_weight(w)[0] as a tensor [ceil(n/16),
    ceil(K/4), 16, 4] int8; n: w's rows; w_colsum: [n] int32 (pack_dense_weight(w)[1]),
    needed when the effective a zero point is not 0 (always for int8 a, shifted by 128).
    Stages: a's uint8 copy (int8 a or K % 4 != 0 only), `name`.acc (the tensorized
    products, [M, ceil(n/16), 16]), a's row sums (w_zero != 0 only), `name` (the
    compensation). Schedule with schedule_dense_int8."""
    op = "dense_int8"
    _check_dtype(op, "a", a, ("uint8", "int8"))
    _check_dtype(op, "w_packed", w_packed, ("int8",))
    m, k = _static(op, "a", a)
    nb, kb, ob, ib = _static(op, "w_packed", w_packed)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{op}: n (w's rows) must be a positive int, got {n!r}")
    if (nb, kb, ob, ib) != (_ceil(n, OB), _ceil(k, IB), OB, IB):
        raise ValueError(f"{op}: w_packed {(nb, kb, ob, ib)} is not pack_dense_weight's layout "
                         f"for n={n}, K={k}: expected {(_ceil(n, OB), _ceil(k, IB), OB, IB)}")
    a_zero = _check_zero(op, "a_zero", a_zero, a.dtype)
    w_zero = _check_zero(op, "w_zero", w_zero, "int8")
    # rows padded to the row tile when M is not a multiple of it (M < 4 is its own tile): a
    # tile of the products is then never cut by a guard, which the tensorized nest refuses
    mp = m if m % ROWS == 0 or m < ROWS else _ceil(m, ROWS) * ROWS
    au, za = _as_uint8(op, a, kb * IB, a_zero, mp)
    if za != 0:
        if w_colsum is None:
            raise ValueError(f"{op}: a zero point of a ({za} once shifted into uint8) needs "
                             "w_colsum (pack_dense_weight's column sums)")
        _check_dtype(op, "w_colsum", w_colsum, ("int32",))
        if _static(op, "w_colsum", w_colsum) != (n,):
            raise ValueError(f"{op}: w_colsum must have shape ({n},), got {w_colsum.shape}")
    ko = te.reduce_axis((0, kb), name="ko")
    ki = te.reduce_axis((0, IB), name="ki")
    acc = te.compute((mp, nb, OB), lambda i, jo, ji: te.sum(
        au[i, ko * IB + ki].astype("int32") * w_packed[jo, ko, ji, ki].astype("int32"),
        axis=[ko, ki]), name=f"{name}.acc")
    rows = None
    if w_zero:
        rk = te.reduce_axis((0, kb * IB), name="rk")
        rows = te.compute((m,), lambda i: te.sum(au[i, rk].astype("int32"), axis=rk),
                          name=f"{name}.rowsum")

    def out(i, j):
        v = acc[i, j // OB, j % OB]
        if za:
            v = v - za * w_colsum[j]
        if w_zero:
            v = v - w_zero * rows[i] + k * za * w_zero
        return v

    return te.compute((m, n), out, name=name)


def _stages_before(y: Tensor) -> dict[str, Tensor]:
    """The stages of a quant kernel by role (the suffix of their names), found from y."""
    found, todo = {}, [y]
    while todo:
        t = todo.pop()
        for u in getattr(t.op, "input_tensors", ()):
            if hasattr(u.op, "body"):
                found[u.op.name.rsplit(".", 1)[-1] if "." in u.op.name else "input"] = u
                todo.append(u)
    return found


def schedule_dense_int8(s, y: Tensor, rows: int = 4, blocks: int = 4,
                        parallel: bool = True, out: Tensor | None = None) -> None:
    """The default schedule: the output in tiles of `rows` x `blocks` 16-wide column blocks,
    column tiles outermost (parallel), each tile's products computed at its row tile
    (compute_at: a [rows, blocks, 16] int32 buffer, no [M, N] intermediate) with the whole
    reduction inside the tile: rows * blocks zmm accumulators, the innermost 16 x 4 block one
    vpdpbusd. A column tile's packed weights (blocks * K * 16 bytes) stay in L2 while every
    row tile reads them. Measured one thread, loaded machine, best of 7 rounds: 128x768x768
    466 GOPS (98% of the VNNI peak; 445 with the products in an [M, N] buffer, which also
    cost 1.5 MB at N = 3072). Chunking K by 64 groups (16 KB of weights, L1) was slower: each
    chunk stores and reloads the accumulators (128x3072x768: 124 vs 147 GOPS).

    out: an elementwise tail of y of y's shape (requantization, bias, relu, residual add),
    which then owns the tiles (the stages between y and out inlined): each tile of products
    is compensated and finished while in registers."""
    parts = _stages_before(y)
    acc = parts["acc"]
    m, nb = as_int(acc.shape[0]), as_int(acc.shape[1])
    # A row count that the tile does not divide (a symbolic one: a dynamic batch; or 7, 197)
    # keeps the row tile: the last tile's rows, min(rows, m - rows * io), are partitioned off
    # the whole tiles, and are constants (a static count) or copied per count left (a
    # symbolic one, tiles of at most loop_partition.MAX_SPECIALIZED_ROWS rows), so the
    # accumulators stay in registers. Tiles of a divisor, one row for a symbolic or prime
    # count, read each column tile's weights once per row: 2.3-3.6x the time at 64-1500 rows.
    rows, blocks = (rows if m is None else min(m, rows)), _divisor(nb, blocks)
    ys = s[_tail_host(s, y, acc, out)]
    i, j = ys.op.axis
    io, ii = ys.split(i, rows)
    jo, ji = ys.split(j, blocks * OB)
    ys.reorder(jo, io, ii, ji)
    _, lanes = ys.split(ji, OB)
    ys.vectorize(lanes)
    st = s[acc]
    st.compute_at(ys, io)
    ai, ajo, aji = st.op.axis
    ko, ki = st.op.reduce_axis
    st.reorder(ko, ai, ajo, aji, ki)
    st.unroll(ai)
    st.unroll(ajo)
    st.tensorize(aji, dot_u8s8_16x4())
    if parallel:
        ys.parallel(jo)
    for role, t in parts.items():
        if role not in ("acc",):
            _vectorize_last(s, t)


def _divisor(n: int, want: int) -> int:
    """The largest divisor of n that is at most want (a tile that leaves no tail)."""
    return max(d for d in range(1, min(n, want) + 1) if n % d == 0)


def _vectorize_last(s, t: Tensor, parallel: bool = False) -> None:
    st = s[t]
    if t.op.reduce_axis:
        return
    axes = list(st.op.axis)
    last = as_int(t.shape[-1])
    if last >= 16:
        _, inner = st.split(axes[-1], 16)
        st.vectorize(inner)
    if parallel and len(axes) > 1:
        # the outer axes together (an NCHW16c stage's batch of 1 alone would be one task)
        st.parallel(st.fuse(*axes[:-2]) if len(axes) > 3 else axes[0])


# ----------------------------------------------------------------------------- conv2d


def pack_conv_weight(w: np.ndarray, in_block: int = OB) -> tuple[np.ndarray, np.ndarray]:
    """w [OC, C, KH, KW] int8 -> (packed [ceil(OC/16), ceil(C/cb), KH, KW, cb/4, 16, 4] int8,
    zero padded: OIHW[cb/4 i 16o 4i] with cb = in_block (16; 4 or 8 for a conv of few input
    channels, e.g. an image's 3: a 16-channel block would multiply 13 zeros), element
    [oco, ico, y, x, icb, oci, ici] = w[16 oco + oci, cb ico + 4 icb + ici, y, x]; sums [OC]
    int32 = sum over c, y, x of w[oc], for the zero-point compensation). The 16 x 4 block of
    one (y, x, icb) is dot_u8s8_16x4's B."""
    w = np.asarray(w)
    if w.ndim != 4 or w.dtype != np.int8:
        raise ValueError(f"pack_conv_weight: w must be a 4-D int8 array [OC, C, KH, KW], got "
                         f"{w.ndim}-D {w.dtype}")
    if in_block not in (4, 8, 16):
        raise ValueError(f"pack_conv_weight: in_block must be 4, 8 or 16, got {in_block!r}")
    oc, c, kh, kw = w.shape
    padded = np.zeros((_ceil(oc, OB) * OB, _ceil(c, in_block) * in_block, kh, kw), np.int8)
    padded[:oc, :c] = w
    blocks = padded.reshape(-1, OB, padded.shape[1] // in_block, in_block // IB, IB, kh, kw)
    # axes: oco, oci, ico, icb, ici, y, x -> oco, ico, y, x, icb, oci, ici
    packed = blocks.transpose(0, 2, 5, 6, 3, 1, 4)
    return np.ascontiguousarray(packed), w.astype(np.int32).sum(axis=(1, 2, 3)).astype(np.int32)


def _pad_shift(op: str, x: Tensor, pad: tuple, x_zero: int) -> tuple[Tensor, int]:
    """x [N, C/16, H, W, 16] as uint8 (int8 shifted by 128), padded in H and W with the zero
    point (a padded tap adds (zero - zero) * w = 0), and the zero point in uint8."""
    n, cb, h, wd, c16 = _static(op, "x", x)
    pt, pl, pb, pr = pad
    shift = 128 if x.dtype == "int8" else 0
    zero = x_zero + shift
    if not shift and not any(pad):
        return x, zero

    def f(b, c, y, z, ci):
        v = x[b, c, y - pt, z - pl, ci]
        v = (v.astype("int32") + shift).astype("uint8") if shift else v
        if not any(pad):
            return v
        inside = (y >= pt) & (y < h + pt) & (z >= pl) & (z < wd + pl)
        return te.if_then_else(inside, v, te.const(zero, "uint8"))

    return te.compute((n, cb, h + pt + pb, wd + pl + pr, c16), f, name=f"{x.name}_pad"), zero


def _padded_window(op: str, x: Tensor, hw: tuple, khw: tuple, stride, padding, x_zero):
    """(the padded, zero-point-shifted input, the effective zero point, (stride h, w), (out h,
    w)) of a conv window, with stride, padding and zero point checked."""
    sh, sw = (stride, stride) if isinstance(stride, int) else tuple(stride)
    pad = (padding,) * 4 if isinstance(padding, int) else tuple(padding)
    if len(pad) != 4 or min(pad) < 0 or min(sh, sw) < 1:
        raise ValueError(f"{op}: padding must be an int or 4 ints >= 0 and stride >= 1, got "
                         f"{padding!r}, {stride!r}")
    x_zero = _check_zero(op, "x_zero", x_zero, x.dtype)
    xp, zero = _pad_shift(op, x, pad, x_zero)
    (h, wd), (kh, kw) = hw, khw
    oh = (h + pad[0] + pad[2] - kh) // sh + 1
    ow = (wd + pad[1] + pad[3] - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: the kernel {kh}x{kw} does not fit the padded input")
    return xp, zero, (sh, sw), (oh, ow)


def conv2d_int8_nchwc(x: Tensor, w_packed: Tensor, stride=1, padding=0, x_zero: int = 0,
                      w_sums: Tensor | None = None, name: str = "conv2d_int8") -> Tensor:
    """y[n, oco, oy, ox, oci] = sum_{c, ky, kx} (x[n, c, oy*s + ky - pt, ox*s + kx - pl] -
    x_zero) * w[16 oco + oci, c, ky, kx], int32, exact (pads count as x_zero: they add 0).

    x: [N, ceil(C/cb), H, W, cb] uint8 or int8 (NCHW16c, or cb = 8 or 4 for few input channels;
    padded channels hold anything: their packed weights are 0); w_packed:
    pack_conv_weight(w, in_block=cb)[0] as a tensor; the output is NCHW16c whatever cb;
    w_sums: [OC] int32 (pack_conv_weight's second result, over ceil(OC/16)*16 outputs padded
    with 0), read only
    when the effective zero point (x_zero, +128 for int8) is not 0. Weights' zero point is 0
    (symmetric, as onnxruntime's quantizer writes them). padding: int or (top, left, bottom,
    right). Stages: x's padded uint8 copy, `name`.acc (the tensorized products), `name`."""
    op = "conv2d_int8_nchwc"
    _check_dtype(op, "x", x, ("uint8", "int8"))
    _check_dtype(op, "w_packed", w_packed, ("int8",))
    n, cb, h, wd, c16 = _static(op, "x", x)
    ob, wcb, kh, kw, icb, oci, ici = _static(op, "w_packed", w_packed)
    if c16 not in (4, 8, 16) or (wcb, icb, oci, ici) != (cb, c16 // IB, OB, IB):
        raise ValueError(f"{op}: x {x.shape} and w_packed {w_packed.shape} are not NCHW[cb]c "
                         "(cb 16, 8 or 4) and pack_conv_weight's OIHW[cb/4 i 16o 4i] with the "
                         "same channel blocks")
    xp, zero, (sh, sw), (oh, ow) = _padded_window(op, x, (h, wd), (kh, kw), stride, padding,
                                                  x_zero)
    if zero and (w_sums is None or _static(op, "w_sums", w_sums) != (ob * OB,)):
        raise ValueError(f"{op}: a zero point of x ({zero} once in uint8) needs w_sums of "
                         f"shape ({ob * OB},) (pack_conv_weight's sums, padded to 16s)")
    rc = te.reduce_axis((0, cb), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rb = te.reduce_axis((0, c16 // IB), name="rb")
    ri = te.reduce_axis((0, IB), name="ri")
    acc = te.compute((n, ob, oh, ow, OB), lambda b, oc, y, z, o: te.sum(
        xp[b, rc, y * sh + ry, z * sw + rx, rb * IB + ri].astype("int32")
        * w_packed[oc, rc, ry, rx, rb, o, ri].astype("int32"), axis=[rc, ry, rx, rb, ri]),
        name=name if not zero else f"{name}.acc")
    if not zero:
        return acc
    return te.compute(acc.shape, lambda b, oc, y, z, o: acc[b, oc, y, z, o]
                      - zero * w_sums[oc * OB + o], name=name)


def schedule_conv2d_int8(s, y: Tensor, cols: int = 8, blocks: int = 2,
                         parallel: bool = True, out: Tensor | None = None) -> None:
    """The default schedule: tiles of `cols` output columns x `blocks` 16-channel output blocks
    (cols * blocks zmm accumulators over the whole reduction: input blocks, kernel rows and
    columns, groups of 4 channels), the innermost 16 x 4 block one vpdpbusd; parallel over
    (batch, channel tiles, rows); the padded copy vectorized by 16 channels.

    out: an elementwise tail of y of y's shape (requantization, bias, relu, a residual add:
    the graph's fused group), or None. The tail (or y's compensation when there is none) is
    the stage that owns the tiles: the products are computed at its column tile into a
    [blocks, cols, 16] int32 buffer and each tile is finished (compensated, requantized) while
    it is in registers; the stages between y and out are inlined."""
    parts = _stages_before(y)
    acc = y if y.op.reduce_axis else parts["acc"]
    st = s[acc]
    cols, blocks = _divisor(as_int(acc.shape[3]), cols), _divisor(as_int(acc.shape[1]), blocks)
    host = _tail_host(s, y, acc, out)
    if host is None:  # the products are the output: tile them in place
        b, oc, oy, ox, o = st.op.axis
        rc, ry, rx, rb, ri = st.op.reduce_axis
        oco, oci = st.split(oc, blocks)
        oxo, oxi = st.split(ox, cols)
        st.reorder(b, oco, oy, oxo, rc, ry, rx, rb, oxi, oci, o, ri)
        outer = (b, oco, oy)
    else:
        outer = _tile_host(s, host, acc, cols, blocks)
        b, oci, oy, oxi, o = st.op.axis
        st.reorder(*st.op.reduce_axis[:4], b, oci, oy, oxi, o, st.op.reduce_axis[4])
    st.unroll(oxi)
    st.unroll(oci)
    st.tensorize(o, dot_u8s8_16x4())
    if parallel:
        s[host or acc].parallel(s[host or acc].fuse(*outer))
    for role, t in parts.items():
        if role != "acc":
            _vectorize_last(s, t, parallel=parallel)


def _tail_host(s, y: Tensor, acc: Tensor, out: Tensor | None) -> Tensor | None:
    """The stage that owns a convolution's tiles: `out` (the stages between it and y inlined),
    else y's compensation, else None (y is the products themselves)."""
    if out is None or out is y:
        return None if y is acc else y
    if tuple(as_int(d) for d in out.shape) != tuple(as_int(d) for d in y.shape) or \
            out.op.reduce_axis:
        raise ValueError(f"schedule of {y.op.name}: out must be an elementwise tail of y's "
                         f"shape {y.shape}, got {out.op.name} {out.shape}")
    todo, seen = [out], set()
    while todo:
        t = todo.pop()
        for u in getattr(t.op, "input_tensors", ()):
            if u.op in seen or not hasattr(u.op, "body") or u is acc or \
                    not _reads(u, y):
                continue
            seen.add(u.op)
            s[u].compute_inline()
            todo.append(u)
    return out


def _reads(t: Tensor, y: Tensor) -> bool:
    """Whether t is y or reads it (through any stages)."""
    if t.op is y.op:
        return True
    return any(_reads(u, y) for u in getattr(t.op, "input_tensors", ()))


def _tile_host(s, host: Tensor, acc: Tensor, cols: int, blocks: int) -> tuple:
    """Tile the NCHW16c host stage (channel blocks x columns, the 16 channels vectorized) and
    compute `acc` at its column tile; returns the host's outer loops (to parallelize)."""
    hs = s[host]
    b, oc, oy, ox, o = hs.op.axis
    oco, oci = hs.split(oc, blocks)
    oxo, oxi = hs.split(ox, cols)
    hs.reorder(b, oco, oy, oxo, oci, oxi, o)
    hs.vectorize(o)
    s[acc].compute_at(hs, oxo)
    return b, oco, oy


# ----------------------------------------------------------------------------- depthwise


def pack_depthwise_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w [C, 1, KH, KW] int8 -> (packed [ceil(C/16), KH, KW, 16] int8, zero padded; sums [C]
    int32 over the window, for the zero-point compensation)."""
    w = np.asarray(w)
    if w.ndim != 4 or w.shape[1] != 1 or w.dtype != np.int8:
        raise ValueError(f"pack_depthwise_weight: w must be an int8 array [C, 1, KH, KW], got "
                         f"{w.dtype} {w.shape}")
    c, _, kh, kw = w.shape
    padded = np.zeros((_ceil(c, OB) * OB, kh, kw), np.int8)
    padded[:c] = w[:, 0]
    packed = padded.reshape(-1, OB, kh, kw).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(packed), w.astype(np.int32).sum(axis=(1, 2, 3)).astype(np.int32)


def depthwise_conv2d_int8_nchwc(x: Tensor, w_packed: Tensor, stride=1, padding=0,
                                x_zero: int = 0, w_sums: Tensor | None = None,
                                name: str = "depthwise_int8") -> Tensor:
    """y[n, cb, oy, ox, c] = sum_{ky, kx} (x[n, cb, oy*s + ky - pt, ox*s + kx - pl, c] - x_zero)
    * w[16 cb + c, 0, ky, kx], int32, exact; x NCHW16c uint8 or int8, w_packed
    pack_depthwise_weight(w)[0], w_sums its sums padded to ceil(C/16)*16 (read only when the
    effective zero point is not 0). No channel reduction, so no vpdpbusd: 16 channels are one
    vector of int32 multiply-adds. Stages: the padded uint8 copy, `name`.acc, `name`."""
    op = "depthwise_conv2d_int8_nchwc"
    _check_dtype(op, "x", x, ("uint8", "int8"))
    _check_dtype(op, "w_packed", w_packed, ("int8",))
    n, cb, h, wd, c16 = _static(op, "x", x)
    wcb, kh, kw, wc16 = _static(op, "w_packed", w_packed)
    if c16 != OB or (wcb, wc16) != (cb, OB):
        raise ValueError(f"{op}: x {x.shape} and w_packed {w_packed.shape} are not NCHW16c and "
                         "pack_depthwise_weight's [C/16, KH, KW, 16] with the same blocks")
    xp, zero, (sh, sw), (oh, ow) = _padded_window(op, x, (h, wd), (kh, kw), stride, padding,
                                                  x_zero)
    if zero and (w_sums is None or _static(op, "w_sums", w_sums) != (cb * OB,)):
        raise ValueError(f"{op}: a zero point of x ({zero} once in uint8) needs w_sums of "
                         f"shape ({cb * OB},)")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    acc = te.compute((n, cb, oh, ow, OB), lambda b, c, y, z, o: te.sum(
        xp[b, c, y * sh + ry, z * sw + rx, o].astype("int32")
        * w_packed[c, ry, rx, o].astype("int32"), axis=[ry, rx]),
        name=name if not zero else f"{name}.acc")
    if not zero:
        return acc
    return te.compute(acc.shape, lambda b, c, y, z, o: acc[b, c, y, z, o]
                      - zero * w_sums[c * OB + o], name=name)


def schedule_depthwise_int8(s, y: Tensor, cols: int = 8, parallel: bool = True,
                            out: Tensor | None = None) -> None:
    """The default schedule: `cols` output columns of 16 channels (cols zmm int32
    accumulators) over the window, the channels vectorized; parallel over channel blocks and
    rows; the padded copy vectorized. out: an elementwise tail of y's shape that owns the
    tiles (see schedule_conv2d_int8)."""
    parts = _stages_before(y)
    acc = y if y.op.reduce_axis else parts["acc"]
    st = s[acc]
    cols = _divisor(as_int(acc.shape[3]), cols)
    host = _tail_host(s, y, acc, out)
    ry, rx = st.op.reduce_axis
    if host is None:
        b, c, oy, ox, o = st.op.axis
        oxo, oxi = st.split(ox, cols)
        st.reorder(b, c, oy, oxo, ry, rx, oxi, o)
        outer = (b, c, oy)
    else:
        outer = _tile_host(s, host, acc, cols, 1)
        b, c, oy, oxi, o = st.op.axis
        st.reorder(ry, rx, b, c, oy, oxi, o)
    st.unroll(oxi)
    st.vectorize(o)
    if parallel:
        s[host or acc].parallel(s[host or acc].fuse(*outer))
    for role, t in parts.items():
        if role != "acc":
            _vectorize_last(s, t, parallel=parallel)


__all__ = [
    "conv2d_int8_nchwc",
    "dense_int8",
    "depthwise_conv2d_int8_nchwc",
    "pack_conv_weight",
    "pack_dense_weight",
    "pack_depthwise_weight",
    "schedule_conv2d_int8",
    "schedule_dense_int8",
    "schedule_depthwise_int8",
]
