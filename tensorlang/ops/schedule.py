"""Default x86 (AVX-512) schedules of the operator library.

`default_schedule(outs)` dispatches on each stage's tag and pattern kind:

* an *anchor* (a heavy op: matmul family, convolution, pooling, a reduction, an opaque op) with
  a chain of elementwise/broadcast consumers ending in an output gets that output's loop nest
  shaped like its own, and is computed at the output's tile loop: the tail (bias add, relu,
  gelu...) runs on the tile while it is in registers/L1 (TVM's "out_elemwise_fusable");
* other injective stages are inlined into their readers;
* whatever is left at the root gets a generic parallel + vectorized schedule.

Every heavy schedule is a function of explicit knobs (tile sizes, vector lanes, unrolling) whose
defaults are the choices documented on it, so tunable templates can wrap it later. All of them
stay legal for the dependence checker: reduce loops are never parallel or vectorized (rfactor
first), only spatial loops are."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.dtype import storage_bytes
from ..ir.expr import as_int
from ..runtime._cpu import cache_bytes, last_level_cache_bytes
from ..schedule import create_schedule
from ..te.scan import ScanOp, scan_of
from ..te.tensor import ComputeOp, Tensor
from ._base import BROADCAST, ELEMWISE, INJECTIVE, OPAQUE, OUT_ELEMWISE_FUSABLE, REDUCE, pattern_of
from .definition import (
    AnchorSchedule,
    CompositeSchedule,
    Part,
    anchor_schedule,
    definition_of,
    is_op,
    op_definition,
    part_role,
)

LANES = 16  # fp32 lanes of one zmm register
# Outputs at least this big are written with non-temporal stores (pragma "nontemporal"): half
# of the host's last-level cache (16 MB of a Zen 4 CCD's 32 MB L3), so they would not stay
# cached for a reader anyway, and bypassing the caches saves reading every line before it is
# written (softmax 4096x1024, 16 MB: 0.59 -> 0.44 ms; relu(a*b+c) on 64 MB: see
# docs/benchmarks_history.md).
STREAMING_BYTES = last_level_cache_bytes() // 2


# What a schedule assumes of a symbolic extent (batch, sequence) when it sizes work: the common
# range of a sequence or batch * seq is tens to thousands, so a symbolic loop counts as 64
# iterations (enough to run an elementwise op over a 768-wide row on the thread pool).
SYMBOLIC_EXTENT = 64


def _stream_if_big(st, loop) -> None:
    """Non-temporal stores for a kernel output of at least STREAMING_BYTES (the pragma at
    `loop`, the stage's outermost loop) whose rows all start on a vector boundary. A row of
    another length leaves most rows' vectors misaligned: those stores stay ordinary (a
    non-temporal store needs an aligned address) and the mix was slower than no streaming at
    all (whisper's [6, 1500, 1500] softmax, rows at offsets 0 / 48 / 32 / 16 bytes: 1 thread
    7.35 -> 5.85 ms without it; 1536 or 1024 columns keep it: 5.65 vs 5.92, 1.62 vs 1.73)."""
    if not st.is_output or not st.op.axis:
        return
    item = storage_bytes(st.op.output(0).dtype)
    n = item
    for a in st.op.axis:
        n *= _ext(a) or 0
    row = (_ext(st.op.axis[-1]) or 0) * item
    if n >= STREAMING_BYTES and row % (LANES * 4) == 0:
        st.pragma(loop, "nontemporal")


def _ext(iv) -> int:
    return as_int(iv.dom.extent)


def _largest_divisor(n: int, limit: int, multiple_of: int = 1) -> int:
    """The largest d <= limit with n % d == 0 and d % multiple_of == 0 (0 when none)."""
    for d in range(min(n, limit), 0, -1):
        if n % d == 0 and d % multiple_of == 0:
            return d
    return 0


def _vector_lanes(n: int | None, want: int = LANES) -> int:
    """Lanes for vectorizing a loop of extent n: 16 when it divides, else the widest power of two
    that does (so no scalar tail), else 16 with a scalar tail (also for a symbolic extent,
    None: whole vectors, then the tail)."""
    if n is None:
        return want
    for v in (want, 8, 4):
        if v <= want and n % v == 0:
            return v
    return want if n >= want else 0


def _masked_lanes(n: int | None, want: int = LANES) -> int:
    """Lanes for a loop of extent n whose last vector runs masked (the vectorize pass masks a
    constant tail whose stores go to memory, not to a register tile): `want` where n is over
    8 and `want` does not divide it (a 14-wide row: one masked 16-lane vector, not a scalar
    loop; a 28-wide one: 16 + 12 masked lanes, not 7 vectors of 4), else _vector_lanes'
    choice (rows of 8 or fewer: a masked vector measured no faster than the scalar loop).
    One thread, Zen 4, before -> after: x + y, relu on 1x272x14^2 0.062 -> 0.0068 ms, on
    1x1000x13^2 0.285 -> 0.030 ms; ShuffleNet's channel-shuffle transpose 1x4x34x28^2 0.136
    -> 0.032 ms (14^2, 13^2 and 28^2 elementwise rows otherwise within the noise, +-10%)."""
    if n is not None and n > 8 and n % want:
        return want
    return _vector_lanes(n, want)


def _stages_by_op(s) -> dict:
    return {st.op: st for st in s.stages}


# ----------------------------------------------------------------------------- generic pieces


def schedule_injective(s, t: Tensor, lanes: int = LANES, parallel_min: int = 1 << 14) -> None:
    """Root injective/elementwise stage: vectorize the innermost axis (split by `lanes`), fuse
    the outer axes and run them on the thread pool when the work is large enough."""
    st = s[t]
    axes = list(st.op.axis)
    if not axes:
        return
    if is_op(st.op, "layout_transform") and _schedule_layout_transform(st):
        return
    swapped = _transposed_axis(s, st)
    if swapped is not None:
        _schedule_transpose_tiles(st, *swapped, parallel_min)
        return
    inner = axes[-1]
    n = _ext(inner)
    total = 1
    for a in axes:
        total *= _ext(a) or SYMBOLIC_EXTENT
    outer = axes[:-1]
    v = None
    if n is None or n >= 4:
        v = _masked_lanes(n, lanes)
        if v and (n is None or n > v or n % v):
            io, ii = st.split(inner, factor=v)
            st.vectorize(ii)
            outer = outer + [io]
        elif v == n:
            st.vectorize(inner)
    if total >= parallel_min and outer:
        if len(outer) > 1 and any(_ext(a) is None for a in outer[1:]):
            # fusing a loop of symbolic extent into one outside it recovers each index by a
            # division by that extent (not constant-folded, and not affine, so also checked at
            # run time): per vector if the vector loop is fused too. The tasks are the axes
            # above the row (_task_axes).
            rows = axes[:-1] if len(axes) > 1 else outer
            if n is not None and v == n and len(rows) > 1 and _ext(rows[-1]) is None:
                # the innermost axis a blocked layout's channel lanes ([n, c, h, w, 8]): the
                # row is its outer's last (the fused rows divided per vector by w and h, with
                # run-time checks: squeeze-excite's multiply of a 25 x 8-channel map at
                # 12 x 48 took 0.22 ms against the static 0.017)
                rows = rows[:-1]
            outer = _task_axes(rows, INJECTIVE_TASKS)
        fused = _fuse_tasks(st, *outer)
        st.parallel(fused)
        _stream_if_big(st, fused)


# Tiles of a transpose's two swapped axes (the output's row and the output axis along which the
# input's rows run): 16 x 16 floats, a zmm register per row, transposed in registers.
TRANSPOSE_TILE = 16


def _transposed_axis(s, st) -> tuple[int, int] | None:
    """(k, row): the output axis k that walks the input's contiguous rows of a transpose this
    stage computes (itself, or inlined through an elementwise/broadcast tail of the same shape,
    e.g. a GELU), and the output's row (its innermost axis of extent other than 1), when they
    differ: the generic schedule's vector along the output row would then read the input with
    a stride (a gather per vector). Axes of extent 1 are no rows: tf2onnx transposes [N, L, C,
    1] to [N, C, L, 1] before a conv (magika: 512 x 256, 151 us as a strided copy of rows of
    one element, 19 us in tiles). None: no such transpose, it keeps the row innermost, or its
    extents are below a vector of 4 (a symbolic extent is taken as long: its tiles split, the
    last one guarded)."""
    for op in _inlined_transposes(s, st):
        perm = list(op.attrs.get("axes", ()))
        axes = list(st.op.axis)
        if len(perm) != len(axes) or len(perm) < 2:
            continue
        long = [i for i, a in enumerate(axes) if _ext(a) != 1]  # (None: symbolic)
        if len(long) < 2:
            continue
        row = long[-1]
        k = perm.index(max(perm[i] for i in long))  # the input's innermost long axis
        if k == row:
            continue
        if all(_ext(axes[i]) is None or _ext(axes[i]) >= 4 for i in (k, row)):
            return k, row
    return None


def _inlined_transposes(s, st) -> list:
    """The transpose computes of st's shape that st is, or reads through inlined same-shape
    elementwise/broadcast stages."""
    found, todo, seen = [], [st], set()
    shape = [_ext(a) for a in st.op.axis]
    while todo:
        cur = todo.pop()
        if id(cur) in seen or [_ext(a) for a in cur.op.axis] != shape:
            continue
        seen.add(id(cur))
        if is_op(cur.op, "transpose"):
            found.append(cur.op)
            continue
        if cur is not st and pattern_of(cur.op) not in (ELEMWISE, BROADCAST):
            continue
        for t in cur.op.input_tensors:
            p = s.stage_map.get(t.op)
            if p is not None and p.attach_type == "inline":
                todo.append(p)
    return found


def _schedule_transpose_tiles(st, k: int, row: int, parallel_min: int) -> None:
    """A transpose (and its fused elementwise tail) in square tiles of the output's axis k (the
    input's contiguous rows) x its row axis (the innermost one longer than 1, axes of extent 1
    outside the tiles): the vector runs along the output row and
    axis k's tile is unrolled, so each tile reads TRANSPOSE_TILE contiguous input rows that the
    transpose_gathers pass turns around in registers (not a gather per vector), the tail is
    computed on the tile's vectors, and the outer tiles run on the thread pool. Ragged extents
    (197, 49): loop_partition splits the guarded last tile off the guard-free main tiles, whose
    last vector is masked. SegFormer's [1, 64, 128^2] -> [1, 128^2, 64] and its GELU-fused
    version were 4-7x slower under the generic schedule (BENCHMARKS.md, issue 18)."""
    axes = list(st.op.axis)
    t = TRANSPOSE_TILE
    ko, ki = st.split(axes[k], factor=t)
    lo, li = st.split(axes[row], factor=t)
    outer = [a for i, a in enumerate(axes) if i not in (k, row)] + [ko]
    st.reorder(*outer, lo, ki, li)
    st.unroll(ki)
    st.vectorize(li)
    total = 1
    for a in axes:
        total *= _ext(a) or SYMBOLIC_EXTENT
    if total >= parallel_min:
        fused = _fuse_tasks(st, *outer)
        st.parallel(fused)
        _stream_if_big(st, fused)


def _schedule_layout_transform(st) -> bool:
    """NCHW <-> NCHW[x]c as one task per (n, row, channel block), rows outside as in the
    blocked convs: the loops inside run over the row and the block's channels with plain
    strides, the vector along the side that is contiguous in the output (the channel block, or
    the row), the other side read by a strided load whose cache lines stay in L1 for the whole
    row. The generic schedule fuses every axis and pays a division chain per vector to recover
    the indices (1x32x112^2 -> NCHW16c: 0.086 vs 0.043 ms). False when the shapes do not fit
    (the block does not divide the channels)."""
    from .transform import BLOCKED_LAYOUT

    axes = list(st.op.axis)
    if len(axes) == 5:  # NCHW -> NCHW[x]c
        n, cb, h, w, ci = axes
        if _ext(ci) % LANES and _ext(ci) not in (4, 8):
            return False
        tile = _transpose_tile(_ext(ci), _ext(w))
        if tile:  # tile columns x the block's channels, transposed in registers
            wo, wi = st.split(w, factor=tile)
            st.reorder(n, h, cb, wo, wi, ci)
            st.unroll(wi)
        else:
            st.reorder(n, h, cb, w, ci)
        st.vectorize(ci)
        st.parallel(_fuse_tasks(st, n, h, cb))
        return True
    m = BLOCKED_LAYOUT.match(str(st.op.attrs.get("src_layout", "")))
    block = int(m.group(1)) if m else 0
    if len(axes) != 4 or not block or (_ext(axes[1]) or 1) % block:
        return False
    n, c, h, w = axes
    cb, ci = st.split(c, factor=block)
    tile = _transpose_tile(block, _ext(w))
    if tile:  # the block's channels x tile columns, transposed in registers
        wo, wi = st.split(w, factor=tile)
        st.reorder(n, h, cb, wo, ci, wi)
        st.unroll(ci)
        st.vectorize(wi)
    else:
        st.reorder(n, h, cb, ci, w)
        _vectorize_row(st, w)
    st.parallel(_fuse_tasks(st, n, h, cb))
    return True


def _transpose_tile(block: int | None, width: int | None) -> int | None:
    """Columns per tile for a layout transform done as block x tile transposes in registers
    (the lowering's transpose_gathers pass): the widest of 16, 8, 4 that divides the row, for
    a block of 4, 8 or 16 channels. A row of symbolic width (a model exported with dynamic
    h/w) gets 16: loop_partition splits off the ragged last tile, whose rows transpose_gathers
    reads masked; the strided schedule it had took 2.4-8x the static kernel's time (1x64
    channels at 56^2, 28^2, 30x20, 128^2, one thread), now 0.6-1.6x (benchmarks/symbolic_ops.py,
    layout_*). So does a static row that none of them divides (its last tile's columns past
    the row dropped once unrolled), which had the strided schedule: 64 channels to NCHW16c and
    back, one thread, at 10^2 3.9 / 3.4 -> 1.8 / 1.0 us, 13^2 6.6 / 5.8 -> 2.5 / 2.8 us, 26^2
    42 / 45 -> 7.1 / 10.7 us (YOLOv8's maps at 320 and 416). None under 4 columns (the strided
    row schedule)."""
    if block not in (4, 8, 16):
        return None
    if width is None:
        return 16
    return next((t for t in (16, 8, 4) if width % t == 0), 16 if width >= 4 else None)


def _reduce_rows(s, red: Tensor, lanes: int = 64):
    """A reduction over only its last input axis (contiguous): split it by `lanes`, rfactor the
    inner part into a vector of partial results (spatial, so it may be vectorized) and reduce
    that vector at the end. 64 lanes = 4 zmm accumulators, enough independent adds to hide
    their latency. Returns the rf stages, in producer order (or None when the shape does not
    fit)."""
    st = s[red]
    if len(st.op.reduce_axis) != 1:
        return None
    k = st.op.reduce_axis[0]
    n = _ext(k)
    if n is not None and n < 2 * LANES:
        return None
    # a symbolic extent (a sequence): whole vectors, then a masked one (loop_partition and
    # vectorize); one vector of partial results, not 4: a short row (seq = 8) would pay for
    # folding 64 partials
    # a constant row that `lanes` does not divide: under 4 x `lanes` (197 tokens) one vector of
    # partials and a peeled ragged chunk, like a symbolic one, not a scalar reduction; longer
    # (whisper's 1500) the 4 accumulators, each a vector, so that the ragged chunk is whole
    # vectors and one scalar remainder (1 x 100 x 1500 softmax, one thread: 0.071 -> 0.054 ms)
    if n is None or (n % lanes and n < 4 * lanes):
        lanes = LANES
    _ko, ki = st.split(k, factor=lanes)
    rf = s.rfactor(red, ki, factor_index=len(st.op.axis))
    rst = s[rf]
    # rf loops: spatial axes..., ki, ko -> put ko before ki so ki is the vector lane loop
    ki_rf = rst.op.axis[-1]
    rst.reorder(rst.op.reduce_axis[0], ki_rf)
    if n is not None and n % lanes and lanes > LANES:
        kv, kl = rst.split(ki_rf, factor=LANES)
        rst.unroll(kv)
        rst.vectorize(kl)
    else:
        rst.vectorize(ki_rf)
    if lanes > LANES:
        # The final reduction of the `lanes` partials is a serial chain of scalar adds (64 x
        # the add latency per row, as long as a 1k-element row's vector pass). Fold the
        # partial vectors into one zmm first (a second rfactor, vectorized), leaving 16.
        st = s[red]
        kv = st.op.reduce_axis[0]
        _, kvi = st.split(kv, factor=LANES)
        rf2 = s[s.rfactor(red, kvi, factor_index=len(st.op.axis))]
        rf2.reorder(rf2.op.reduce_axis[0], rf2.op.axis[-1])
        rf2.vectorize(rf2.op.axis[-1])
        return [rst, rf2]
    return [rst]


def schedule_reduce(s, t: Tensor, rows: int = 4) -> None:
    """Root reduction: a last-axis reduction gets the rfactor vector accumulator (computed per
    tile of `rows` output rows); the outer spatial axes run on the thread pool. The rows of a
    tile are interleaved inside the reduce loop: `rows` independent load streams keep more
    memory requests in flight than one row does (row sum of 4096^2: 1.2-1.4 -> 1.0 ms)."""
    st = s[t]
    if _reduce_over_outer_axes(st):
        # e.g. global pooling of NCHW[x]c: the innermost output axis (the channel block) is
        # also every read's innermost index, so it is the vector and the reduce loops wrap it;
        # a longer one (a softmax over a middle axis: YOLOv8's DFL over 16 bins of [n, 16, 4,
        # anchors]) in vectors of 16 lanes, each wrapped by the reduce loops
        *outer, inner = st.op.axis
        row = _fuse_tasks(st, *outer) if len(outer) > 1 else outer[0]
        n = _ext(inner)
        if n is not None and n <= 4 * LANES:
            st.reorder(row, *st.op.reduce_axis, inner)
            st.vectorize(inner)
        else:
            io, ii = st.split(inner, factor=LANES)
            st.reorder(row, io, *st.op.reduce_axis, ii)
            st.vectorize(ii)
        st.parallel(row)
        return
    rst = _reduce_rows(s, t) if st.op.num_outputs == 1 and _reduce_rows_ok(st.op) else None
    st = s[t]  # rfactor replaced the stage's op (and axes)
    big = list(st.op.axis)  # all of them: they are adjacent (extent-1 ones cost nothing)
    if not big or all((_ext(a) or 2) == 1 for a in big):
        return
    row = st.fuse(*big) if len(big) > 1 else big[0]
    # one spatial axis only: a tile of a fused axis would give the rf stage a region whose
    # extent varies from tile to tile, which cannot be unrolled
    tile = rows if rst and len(big) == 1 and (_ext(row) or 0) >= 4 * rows and \
        _ext(row) % rows == 0 else 1
    if tile > 1:
        row, _ = st.split(row, factor=tile)
    st.parallel(row)
    for r in reversed(rst or []):  # readers first: compute_at needs the host's reader placed
        r.compute_at(st, row)
    if tile > 1:
        first = rst[0]
        ko, (r_ax, lane) = first.op.reduce_axis[0], first.op.axis
        first.reorder(ko, r_ax, lane)
        first.unroll(r_ax)


def _reduce_over_outer_axes(st) -> bool:
    """True when the stage's innermost output axis is a whole number of vectors, or longer
    than 4 vectors (or symbolic: vectors and a masked last one), and the innermost index of
    every read it makes (reduce axes outside it)."""
    if st.op.num_outputs != 1 or len(st.op.axis) < 2:
        return False
    inner = st.op.axis[-1]
    n = _ext(inner)
    if n is not None and n <= 4 * LANES and n % LANES and n not in (4, 8):
        return False
    from ..ir.functor import Visitor

    ok = []

    class _V(Visitor):
        def visit_TensorRead(self, r):
            ok.append(bool(r.indices) and r.indices[-1] is inner.var)

    for b in st.op.body:
        for src in b.source:
            _V().visit(src)
    return bool(ok) and all(ok)


def _reduce_rows_ok(op) -> bool:
    """True when the compute op reduces one axis that is its input's innermost, contiguous
    index."""
    if len(op.reduce_axis) != 1:
        return False
    k = op.reduce_axis[0]
    from ..ir.functor import Visitor, collect_vars

    ok = []

    class _V(Visitor):
        def visit_TensorRead(self, r):
            # reads that do not depend on k (layer norm's variance reads the row's mean) are
            # loop-invariant for the vector accumulator and do not stop it
            uses_k = any(k.var in collect_vars(i) for i in r.indices)
            if uses_k:
                ok.append(bool(r.indices) and r.indices[-1] is k.var)
            for i in r.indices:
                self.visit(i)

    for b in op.body:
        for src in b.source:
            _V().visit(src)
    return bool(ok) and all(ok)


# ----------------------------------------------------------------------------- matmul family


def matmul_row_tile(m: int | None, tile_m: int = 6) -> int:
    """The rows of schedule_matmul's register tile for M = m: tile_m when it divides m, else
    the largest divisor of m below it unless that is under half of tile_m (a ragged last row
    tile is cheaper than a much smaller register tile). A symbolic M (None) gets the largest
    power of two <= tile_m (4 for 6), with a guarded last tile: the common sizes (multiples of
    8: batch * seq, an attention's seq) then have none, and 4 rows measured as fast as 6 on a
    768x768 dense and 2x faster on an attention's q . k^T (12 x S x 64 x S, S = 64 and 384:
    0.054 vs 0.114 ms and 6.4 vs 12.5 ms, loaded machine)."""
    if m is None:
        return 1 << (tile_m.bit_length() - 1) if tile_m > 0 else 1
    tm = _largest_divisor(m, tile_m) if m % tile_m else tile_m
    if tm < tile_m // 2:
        tm = tile_m
    return min(tm, m)


def matmul_col_tile(n: int | None, tile_n: int = 64, lanes: int = LANES) -> int:
    """The columns of schedule_matmul's register tile for N = n (whole vectors of `lanes`);
    a symbolic N (None) gets at most 2 vectors, its last panel masked: an attention's q . k^T
    (12 x S x 64 x S, 1 thread, ms, static in brackets) with 4 / 2 / 1 vectors: S=8 0.046 /
    0.0024 / 0.0024 (0.0020), S=24 0.12 / 0.011 / 0.012 (0.009), S=64 0.054 / 0.057 / 0.061
    (0.054), S=128 0.23 / 0.22 / 0.24 (0.22)."""
    if n is None:
        return min(tile_n, 2 * lanes)
    return min(tile_n, -(-n // lanes) * lanes) if n >= lanes else n


def matmul_takes_row_reduction(op, tile_m: int = 6) -> bool:
    """True when schedule_matmul schedules the (untransformed) stage of the compute op `op` as
    k-vectorized dot products instead of the register tile: both operands contiguous along k
    (dense's [N, K] weight, unpacked below 12 rows or 16 columns) and few rows, where the tile
    would read B's columns as gathers of stride K (1x2048 . [1000, 2048] measured 1.70 -> 0.10
    ms), or fewer columns than a vector, where the tile is scalar whatever the rows (a
    classifier's [M, 256] . [10, 256], 1 thread, us, tile / dot products: M=1 34 / 3.7, M=64
    60 / 15, M=1024 474 / 184; M symbolic or not). Its knobs then do not apply."""
    kext = _ext(op.reduce_axis[0]) if len(op.reduce_axis) == 1 else None
    rows, cols = _ext(op.axis[-2]), _ext(op.axis[-1])
    few = (rows is not None and rows < 2 * tile_m) or (cols is not None and cols < LANES)
    return bool(few and op.num_outputs == 1 and _reduce_rows_ok(op) and kext and
                kext % LANES == 0 and kext >= 2 * LANES)


def schedule_matmul(s, c: Tensor, out: Tensor | None = None, tile_m: int = 6,
                    tile_n: int = 64, lanes: int = LANES, parallel: bool = True,
                    fit_rows: bool = True, k_outer: bool = True, unroll_rows: bool = True,
                    rows_outer: bool = False) -> None:
    """The register-blocked micro-kernel (DESIGN §3): a tile_m x tile_n accumulator tile (6 rows
    x 4 zmm = 24 accumulators) kept in registers, k outermost inside it, A broadcast, B read as
    `tile_n / lanes` contiguous vectors; the packed B panel (the compute's `*_pack` stage,
    [N/16, K, 16]) is packed per column panel, inside the panel loop, once for all rows.
    Loop order: (batch, j panel, i tile) so a panel is reused by every row tile.

    c: the matmul-family tensor; out: the output hosting it (an elementwise tail) or None.
    The knobs the autotune templates vary (their defaults are this schedule):
    fit_rows: tile_m shrunk to a divisor of M (matmul_row_tile), or exactly tile_m rows with
    a guarded last tile; k_outer: the reduction outside the tile rows (A broadcast, the panel
    streamed) or inside each row; unroll_rows: the tile's rows unrolled (each accumulator a
    register); rows_outer: row tiles outside the panels (B packed once at the root instead
    of per panel).

    Few rows with both operands contiguous along k take the row-reduction schedule instead
    (matmul_takes_row_reduction); the tail, if any, then runs as its own vectorized stage."""
    if not s[c].is_transformed() and matmul_takes_row_reduction(c.op, tile_m):
        pack = _pack_stage(s, s[c])
        if pack is not None:
            pack.compute_inline()
        schedule_reduce(s, c)
        return
    comp, out = _accumulator(s, c, out)
    o = s[out]
    axes = list(o.op.axis)
    batch, i, j = axes[:-2], axes[-2], axes[-1]
    m, n = _ext(i), _ext(j)
    wide = n is None or n >= lanes  # a symbolic N: whole vectors plus a guarded tail
    pack = _pack_stage(s, s[comp])
    if pack is not None and m is not None and m < 2 * tile_m:
        pack.compute_inline()
        pack = None
    tm = matmul_row_tile(m, tile_m) if fit_rows else min(tile_m, m or tile_m)
    tn = matmul_col_tile(n, tile_n, lanes)
    jo, ji = o.split(j, factor=tn)
    io, ii = o.split(i, factor=tm)
    o.reorder(*batch, *((io, jo) if rows_outer else (jo, io)), ii, ji)
    if wide:
        _jio, jii = o.split(ji, factor=lanes)
        o.vectorize(jii)
    tile_loop = jo if rows_outer else io
    s[comp].compute_at(o, tile_loop)
    cs = s[comp]
    ci, cj = cs.op.axis[-2], cs.op.axis[-1]
    k = cs.op.reduce_axis[0]
    if wide:
        cjo, cji = cs.split(cj, factor=lanes)
        cs.reorder(*((k, ci) if k_outer else (ci, k)), cjo, cji)
        cs.vectorize(cji)
        cs.unroll(cjo)
    else:
        cs.reorder(*((k, ci) if k_outer else (ci, k)), cj)
    if unroll_rows:
        cs.unroll(ci)
    if pack is not None:
        pj, pk, pl = pack.op.axis
        if rows_outer:
            if parallel:
                pack.parallel(pj)
        else:
            pack.compute_at(o, jo)
        if pack.op.attrs.get("layout", "N")[-1] == "N":
            pack.vectorize(pl)  # B rows are contiguous: one vector load per (panel, k)
        else:
            pack.reorder(pj, pl, pk)  # w rows (k) are contiguous: read along k
    if parallel:
        first = io if rows_outer else jo
        # a tile loop of symbolic extent, or with a ragged last tile, stays out of the fused
        # parallel loop: fused, its index is recovered by a division by its extent and its
        # tail guards are no longer linear, so loop_partition cannot split the whole tiles
        # from the last one (an attention's q . k^T over a symbolic sequence: 0.1 vs 50
        # GFLOP/s static at seq = 8)
        whole = (m, tm) if rows_outer else (n, tn)
        # (batch axes of extent 1 fuse away: the tile loop then keeps its linear guards; over
        # a symbolic extent they stay outside it, _fuse_tasks)
        single = all(_ext(b) == 1 for b in batch)
        outer = list(batch) + ([first] if single or _whole_tiles(*whole) else [])
        par = _fuse_tasks(o, *outer)
        # few column panels (a narrow or tall matrix): split rows across threads instead
        # (the packed panel is at jo, outside io: packed once, then its row tiles in parallel)
        if not rows_outer and _ext(jo) is not None and _ext(jo) < 4 and not batch:
            o.parallel(io)
        else:
            o.parallel(par)


# B's bytes (per batch) up to which schedule_matmul's default runs row tiles outside the column
# panels for a big output: half of the host's L2 (512 KB on Zen 4), so all of B stays there
# while every row tile reads it again.
ROWS_OUTER_B_BYTES = cache_bytes(2, 1 << 20) // 2
# The output size from which it does so: STREAMING_BYTES, but at most 32 MB. What decides is the
# order of the stores, not whether the output fits the last-level cache: on an Intel Xeon VM
# that reports a 260 MB L3 (STREAMING_BYTES 130 MB), 2 threads, ms panels outside -> rows
# outside: whisper's q . k^T 6 x 1500 x 64 x 1500 (54 MB) 11.23 -> 6.00, 12 x 1024 x 64 x 1024
# (50 MB) 10.11 -> 7.81, where 4096 x 64 x 1100 (18 MB) went 2.19 -> 2.39.
ROWS_OUTER_OUT_BYTES = min(STREAMING_BYTES, 32 << 20)


def matmul_rows_outer(op) -> bool:
    """The default of schedule_matmul's rows_outer knob for the matmul-family compute `op` (a
    tuning config that sets the knob keeps its value): True for an output of at least
    ROWS_OUTER_OUT_BYTES over a short reduction, where storing the output dominates and B fits in
    L2 (K x N <= ROWS_OUTER_B_BYTES). Row tiles outside the panels store each row's tiles one
    after another, panels outside them walk down a 64-column strip, a line per row. 1 / 2
    threads, min of 15, loaded machine, ms, panels outside -> rows outside: whisper's q . k^T
    6 x 1500 x 64 x 1500 22.3 -> 17.3 / 13.3 -> 12.6; 12 x 1024 x 64 x 1024 17.3 -> 15.6 /
    12.9 -> 11.9; 2048 x 32 x 2048 3.10 -> 2.53 / 1.60 -> 1.30; 4096 x 64 x 1100 5.71 -> 5.47
    / 3.00 -> 2.69."""
    if len(op.reduce_axis) != 1 or len(op.axis) < 2:
        return False
    dims = [_ext(a) for a in op.axis] + [_ext(op.reduce_axis[0])]
    if any(d is None for d in dims):
        return False
    item = storage_bytes(op.output(0).dtype)
    out_bytes = item
    for d in dims[:-1]:
        out_bytes *= d
    return out_bytes >= ROWS_OUTER_OUT_BYTES and dims[-1] * dims[-2] * item <= ROWS_OUTER_B_BYTES


def _whole_tiles(extent: int | None, tile: int) -> bool:
    """True when a tile loop over `extent` has no ragged last tile (extent known, a multiple of
    `tile`). Only such a loop joins a batch matmul's fused parallel loop: a ragged one's tail
    guards are no longer linear in the fused index, so loop_partition cannot peel the last
    tile and every k step of every tile tests each vector of the tile (an attention's q . k^T
    over 1500 tokens, 6 x 1500 x 64 x 1500, 64-column panels: 1500 = 23 x 64 + 28; 1 thread
    42 -> 20.6 ms, 2 threads 10.6 ms, onnxruntime 17.6 ms at 1 thread)."""
    return extent is not None and extent % tile == 0


def _accumulator(s, c: Tensor, out: Tensor | None):
    """(stage that computes c, output stage): with no tail, c gets a cache_write accumulator."""
    if out is None or out is c:
        acc = s.cache_write(c, "local")
        return acc, c
    return c, out


def _pack_stage(s, cs):
    for t in cs.op.input_tensors:
        st = s.stage_map.get(t.op)
        if st is not None and part_role(st.op) == "pack":
            return st
    return None


# ----------------------------------------------------------------------------- convolution


def schedule_conv2d_nchwc(s, c: Tensor, out: Tensor | None = None, reg_n: int = 14,
                          unroll_kw: bool = True, oc_blocks: int = 2,
                          oc_outer: bool | None = None, parallel: bool = True,
                          chain: int = 256) -> None:
    """Blocked conv: output [N, OC/16, OH, OW, 16]; a register tile of reg_n output columns x
    oc_blocks zmm of 16 output channels (2 x 14 = 28 accumulators), reduction order (ic block,
    kh, kw, ic lane) with each input value broadcast once for the oc_blocks FMAs of its column
    and oc_blocks packed weight vectors loaded per reg_n columns (with one block: one weight
    vector per 14 FMAs, 78-82% of a core's peak; the direct NCHW conv measured 2 blocks best).
    reg_n: the largest divisor of OW not above the knob, or a ragged tile when that is under
    4 columns (_register_columns: wav2vec2's 799 and 199); oc_blocks: the largest divisor of
    OC/16 not above the knob. oc_outer: tasks are (oc blocks, row) with the oc blocks
    outside, so each thread reads half of the weights, or (row, oc blocks), so each thread
    computes (and later reads) the same rows of every channel that the layers before and
    after it do, which keeps a chain's activations in that core's L2; None: rows outside when
    the packed weights fit in 256 KB of L2. chain: the most terms one float32 accumulator
    sums serially (_chunked_reduction; 0: all of them)."""
    comp, out = _accumulator(s, c, out)
    o = s[out]
    n, oco, oh, ow, oci = o.op.axis
    blocks = _ext(oco)
    if (_ext(oci) or LANES) < LANES and blocks:
        # narrower blocks (NCHW8c): at most about as many vector lanes per broadcast input as
        # with 16-lane blocks (the divisor of the block count nearest to that), the tile kept
        # within the registers (_narrow_block_tile). 1x1 144 -> 24 at 56x56: 1 block x 14
        # columns 0.099 ms, 3 x 8 0.093 ms, 3 x 14 (spilling) 0.111 ms; 240 -> 40 at 28x28:
        # 1 x 14 0.068 ms, 5 x 4 0.061 ms
        want = oc_blocks * LANES // _ext(oci)
        most = min(_divisors(blocks), key=lambda d: (abs(d - want), -d))
        nb, rn = _narrow_block_tile(blocks, _ext(ow), most, reg_n)
    else:
        nb = _largest_divisor(blocks, max(1, oc_blocks)) or 1
        rn = _register_columns(_ext(ow), max(1, reg_n))
    owo, owi = o.split(ow, factor=rn)
    ocoo, ocoi = o.split(oco, factor=nb)
    if oc_outer is None:
        oc_outer = _nbytes(s[comp].op.input_tensors[-1]) > 256 * 1024  # the weights
    oc_outer = oc_outer and _ext(oh) is not None  # (rows of symbolic count: _fuse_tasks)
    o.reorder(*((n, ocoo, oh) if oc_outer else (n, oh, ocoo)), owo, ocoi, owi, oci)
    _vectorize_block(o, oci)
    cs = tile_sums_at(s, comp, s[comp].op.reduce_axis[0], chain, o, owo)
    _, cb, _, cw, cc = cs.op.axis[:5]
    rco, ry, rx, rci = cs.op.reduce_axis
    cs.reorder(*cs.op.axis[5:], rco, ry, rx, rci, cw, cb, cc)
    cs.unroll(cw)
    cs.unroll(cb)
    _vectorize_block(cs, cc)
    if unroll_kw:
        cs.unroll(rx)
    inline_pad_input(s, cs)
    if parallel:
        o.parallel(_fuse_tasks(o, n, ocoo, oh) if oc_outer else _fuse_tasks(o, n, oh, ocoo))


def tile_sums_at(s, comp: Tensor, outer, chain: int, o, at):
    """The register tile ``comp`` computed at ``o``'s loop ``at``, its reduction over ``outer``
    in chunks of at most ``chain`` terms (_chunked_reduction); the stage whose loops sum the
    terms: the chunks' partial sums, or ``comp`` itself when one chunk holds them all."""
    part = _chunked_reduction(s, comp, outer, chain)
    s[comp].compute_at(o, at)
    if part is None:
        return s[comp]
    _schedule_chunk_sums(s[comp])
    s[part].compute_at(s[comp], s[comp].op.reduce_axis[0])
    return s[part]


def _block_lanes(iv) -> bool:
    """A channel-block loop that vectorizes whole: a multiple of the vector width, or 4 / 8."""
    return _ext(iv) % LANES == 0 or _ext(iv) in (4, 8)


def _vectorize_block(st, iv) -> None:
    if _block_lanes(iv):
        st.vectorize(iv)


def _chunked_reduction(s, comp: Tensor, outer, chain: int):
    """Split a conv's outermost reduce loop ``outer`` into chunks of at most ``chain`` terms
    (at least one step of it: the other reduce loops' terms) and rfactor them: each register
    tile then sums one chunk at a time from zero and adds it to the tile's total. A serial
    float32 sum of n terms of random sign errs by about sqrt(n / 2) roundings of the result,
    and a deep net amplifies that: FCN-ResNet50 (random weights) carries its first conv's
    rounding (7 x 7 x 3 terms, 4.9e-7 relative to the largest output) to 8e-5 at its output,
    onnxruntime's (sums per input channel, 2.1e-7) to 4e-5. One chain over its head's
    2048 x 3 x 3 terms erred 5.8e-6, chunks of 144 terms 4.8e-7 (onnxruntime: 7.3e-7), at
    the same speed: one vector add per accumulator per chunk. Returns the partial-sum
    tensor, or None when one chunk holds the whole loop (or chain is 0)."""
    chunk = _chunk_steps(s[comp].op, outer, chain)
    if chunk is None:
        return None
    chunk_loop, _ = s[comp].split(outer, factor=chunk)
    return s.rfactor(comp, chunk_loop, factor_axis=len(s[comp].op.axis))


SHORT_CHUNK = 64  # chunk terms under which the NCHW stem's register tile keeps its totals


def _chunk_terms(op, outer) -> int:
    """The terms one step of the reduce loop ``outer`` of ``op`` sums (0: a symbolic extent)."""
    terms = 1
    for iv in op.reduce_axis:
        if iv is not outer:
            terms *= _ext(iv) or 0
    return terms


def _chunk_steps(op, outer, chain: int) -> int | None:
    """Steps of ``outer`` per chunk of at most ``chain`` terms (at least one), or None when
    one chunk holds them all, chain is 0 or an extent is symbolic."""
    if isinstance(chain, bool) or not isinstance(chain, int) or chain < 0:
        raise ValueError(f"stage {op.name}: chain must be an int >= 0 (the most terms one "
                         f"accumulator sums serially; 0: all of them), got {chain!r}")
    terms = _chunk_terms(op, outer)
    chunk = max(1, chain // terms) if terms else 0
    if chain == 0 or not chunk or chunk >= (_ext(outer) or 0):
        return None
    return chunk


def _schedule_chunk_sums(cs) -> None:
    """The tile's total over the chunks: the chunk loop outside, the tile's vectors unrolled."""
    _, cb, _, cw, cc = cs.op.axis
    cs.reorder(cs.op.reduce_axis[0], cw, cb, cc)
    cs.unroll(cw)
    cs.unroll(cb)
    _vectorize_block(cs, cc)


WINOGRAD_PARTS = ("winograd_rows", "winograd_input", "winograd_product", "winograd_cols",
                  "winograd_tile")


def _winograd_stages(s, c: Tensor) -> dict:
    """{role: stage} of conv2d_winograd_nchwc's parts, walked back from its output ``c``."""
    found, todo = {}, [c]
    while todo:
        for t in todo.pop().op.input_tensors:
            st = s.stage_map.get(t.op)
            role = part_role(st.op) if st is not None else None
            if role is not None and role.startswith("winograd_") and role not in found:
                found[role] = st
                todo.append(t)
    return found


def schedule_conv2d_winograd(s, c: Tensor, out: Tensor | None = None, reg_n: int = 14,
                             oc_blocks: int = 2, parallel: bool = True) -> None:
    """Winograd conv (ops/winograd.py). The input transform: one 6x6x16 tile of one channel
    block per task step (its row pass kept in registers, the pad read in place). The 36
    products: a register tile of reg_n tile columns x oc_blocks blocks of 16 output channels
    (28 accumulators) over the input channels, each V value broadcast once, as the direct
    conv's tile; the oc blocks outside the tile rows so that a thread's weight slice stays in
    L2 while it walks the rows. Narrow tile rows (7 tiles: 28 columns) take more oc blocks to
    keep 28 accumulators. The output transform: per 4x4 output tile, at the output's loop,
    so the fused bias / activation / residual tail reads it from registers."""
    parts = _winograd_stages(s, c)
    o = s[out if out is not None else c]
    if out is not None and out is not c:
        s[c].compute_inline()
    n, ob, h, w, oi = o.op.axis
    ho, hi = o.split(h, factor=4)
    wo, wi = o.split(w, factor=4)
    o.reorder(n, ob, ho, wo, hi, wi, oi)
    o.unroll(hi)
    o.unroll(wi)
    o.vectorize(oi)
    for role in ("winograd_tile", "winograd_cols"):
        st = parts[role]
        st.compute_at(o, wo)
        ax = st.op.axis
        # tile: (n, ob, ty, p, tx, q, oi); cols: (a, n, ty, tx, q, ob, oi): unroll all but lanes
        for iv in ax[:-1]:
            if _ext(iv) and _ext(iv) > 1:
                st.unroll(iv)
        st.vectorize(ax[-1])
    _schedule_winograd_product(s, parts["winograd_product"], reg_n, oc_blocks, parallel)
    _schedule_winograd_input(parts["winograd_input"], parts["winograd_rows"], parallel)
    if parallel:
        o.parallel(o.fuse(n, ob, ho))


def _schedule_winograd_product(s, sm, reg_n: int, oc_blocks: int, parallel: bool) -> None:
    acc = s.cache_write(sm.op.output(0), "local")
    sm = s[sm.op.output(0)]
    a, b, n, ty, tx, ob, oi = sm.op.axis
    rn = _register_columns(_ext(tx), max(1, reg_n))
    want = oc_blocks if rn * oc_blocks * 2 > 28 else max(oc_blocks, 28 // max(1, rn))
    nb = _largest_divisor(_ext(ob), want) or 1
    txo, txi = sm.split(tx, factor=rn)
    obo, obi = sm.split(ob, factor=nb)
    sm.reorder(a, b, n, obo, ty, txo, obi, txi, oi)
    sm.vectorize(oi)
    s[acc].compute_at(sm, txo)
    cs = s[acc]
    _, _, _, _, cw, cb, cc = cs.op.axis
    rco, rci = cs.op.reduce_axis
    cs.reorder(rco, rci, cw, cb, cc)
    cs.unroll(cw)
    cs.unroll(cb)
    cs.vectorize(cc)
    if parallel:
        sm.parallel(sm.fuse(a, b, n, obo))


def _schedule_winograd_input(sv, rows, parallel: bool) -> None:
    a, b, n, ty, tx, cb, ci = sv.op.axis
    sv.reorder(n, ty, tx, cb, a, b, ci)
    sv.unroll(a)
    sv.unroll(b)
    sv.vectorize(ci)
    rows.compute_at(sv, cb)
    _, _, _, _, ra, rj, rci = rows.op.axis
    rows.unroll(ra)
    rows.unroll(rj)
    rows.vectorize(rci)
    if parallel:
        sv.parallel(sv.fuse(n, ty))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _narrow_block_tile(blocks: int, ow: int | None, max_blocks: int, max_cols: int,
                       registers: int = 28) -> tuple[int, int]:
    """(oc blocks, output columns) of an NCHW8c conv's register tile: divisors of the block
    count (at most max_blocks) and of OW (at most max_cols) with at most ``registers``
    accumulators, chosen for the most FMAs per load (nb * rn FMAs for nb weight loads and rn
    broadcasts per reduction step), then the larger tile. Choosing the blocks first and the
    columns after left a 1-column tile wherever OW has no divisor near the remaining
    registers: SqueezeNet's last conv (512 -> 1000 = 125 blocks at 13x13) got 5 blocks x 1
    column: 3.37 ms (51 GFLOP/s) on one core, 1 x 13: 2.05 ms (84 GFLOP/s). It picks the
    measured best of the cases that chose the knob defaults: 3 x 8 for 144 -> 24 at 56x56,
    5 x 4 for 240 -> 40 at 28x28."""
    # (a row of symbolic width takes any tile width, its last tile guarded)
    widths = range(1, max(1, max_cols) + 1) if ow is None else _divisors(ow)
    tiles = [(nb, rn) for nb in _divisors(blocks) if nb <= max_blocks
             for rn in widths if rn <= max(1, max_cols) and nb * rn <= registers]
    return max(tiles, key=lambda t: (t[0] * t[1] / (t[0] + t[1]), t[0] * t[1]))


def inline_pad_input(s, cs) -> None:
    """The padded input of a register-tiled convolution read in place, without a padded copy:
    inlined, the pad is a select in the accumulation, which the lowering turns into guards
    (guard_padded_reads), cuts the border tiles and kernel rows off the guard-free interior at
    (loop_partition) and tests once per border tile (hoist_guards). The copy it saves cost
    7-35% of 3x3 convs (1x64x56^2: 433 -> 510 GFLOP/s; 1x128x56^2 stride 2: 400 -> 500)."""
    for t in cs.op.input_tensors:
        st = s.stage_map.get(t.op)
        if st is not None and is_op(st.op, "pad") and st.attach_type == "root":
            st.compute_inline()


def _schedule_pad_input(s, cs) -> None:
    """A padded input of a convolution/pool: computed at the root (one pass, parallel and
    vectorized) rather than inlined, which would put bound checks in the inner loop."""
    for t in cs.op.input_tensors:
        st = s.stage_map.get(t.op)
        if st is not None and is_op(st.op, "pad") and st.attach_type == "root":
            schedule_injective(s, t)


def schedule_conv2d_nchw(s, c: Tensor, out: Tensor | None = None, tile_oc: int = 4,
                         tile_ow: int = 32, oc_vectors: int = 2, reg_ow: int = 14,
                         unroll_kw: bool = False, oc_outer: bool | None = None,
                         parallel: bool = True, pixel_rows: int = 0,
                         pixel_vectors: int = 4, chain: int = 32) -> None:
    """NCHW conv. With the oc-blocked accumulator stage (conv2d_nchw's fast path, groups=1):
    schedule_conv2d_nchw_blocked with its knobs (oc_vectors ... oc_outer, chain). A 1x1 conv off that
    path (its pixels stage): schedule_conv2d_pixels (pixel_rows, pixel_vectors). Otherwise
    (groups, odd channel counts) a plain tile of tile_oc output channels x a row segment of
    tile_ow columns, vectorized along the output row (input rows are contiguous for stride 1),
    weights broadcast; OW is split by the widest vector width that divides it."""
    if _conv_block_stage(s, c) is not None:
        schedule_conv2d_nchw_blocked(s, c, out, oc_vectors=oc_vectors, reg_ow=reg_ow,
                                     unroll_kw=unroll_kw, oc_outer=oc_outer,
                                     parallel=parallel, chain=chain)
        return
    if _conv_part(s, c, "pixels") is not None:
        schedule_conv2d_pixels(s, c, out, rows=pixel_rows, vectors=pixel_vectors,
                               parallel=parallel)
        return
    comp, out = _accumulator(s, c, out)
    o = s[out]
    n, oc, oh, ow = o.op.axis
    owe, oce = _ext(ow), _ext(oc)
    lanes = _vector_lanes(owe)
    toc = _largest_divisor(oce, tile_oc) or 1
    if owe is None:  # a row of symbolic width: segments of tile_ow, the last one guarded
        tw = tile_ow
    else:
        tw = owe if owe <= tile_ow else (_largest_divisor(owe, tile_ow, lanes or 1) or tile_ow)
    oco, oci = o.split(oc, factor=toc)
    owo, owi = o.split(ow, factor=tw)
    o.reorder(n, oco, oh, owo, oci, owi)
    s[comp].compute_at(o, owo)
    cs = s[comp]
    _, ccc, _, cw = cs.op.axis
    red = list(cs.op.reduce_axis)
    if lanes and (_ext(cw) or tw) % lanes == 0 and _stride_one(cs):
        cwo, cwi = cs.split(cw, factor=lanes)
        cs.reorder(*red, ccc, cwo, cwi)
        cs.vectorize(cwi)
        cs.unroll(cwo)
        cs.unroll(ccc)
    else:
        cs.reorder(*red, ccc, cw)
    _schedule_pad_input(s, cs)
    if parallel:
        o.parallel(_fuse_tasks(o, n, oco, oh))


def _conv_block_stage(s, c: Tensor):
    """The `conv2d_nchw_block` stage that the NCHW conv output `c` reads, or None."""
    return _conv_part(s, c, "block")


def _conv_part(s, c: Tensor, role: str):
    """The stage of conv2d_nchw's part `role` that its output `c` reads, or None."""
    for t in s[c].op.input_tensors:
        st = s.stage_map.get(t.op)
        if st is not None and part_role(st.op) == role:
            return st
    return None


PIXEL_ACCUMULATORS = 24  # zmm accumulators of a pixels tile: 8 of the 32 left for loads


def pixel_tile(ocpg: int, rows: int = 0, vectors: int = 4) -> tuple[int, int]:
    """(rows, vectors) of schedule_conv2d_pixels' register tile for OC/g = ocpg. rows 0: the
    divisor r of ocpg (a tile never straddles two groups, and a ragged row tile would leave
    guards in the reduction loop) with the most FMAs per load (r * v FMAs for r broadcasts and
    v vector loads, v = min(vectors, 24 // r)): 17 per group -> 17 x 1, 20 -> 5 x 4, 12 -> 6 x
    4, 1000 -> 5 x 4. Else rows as matmul_row_tile takes it."""
    v = max(1, vectors)
    if rows > 0:
        r = matmul_row_tile(ocpg, rows)
        return r, max(1, min(v, PIXEL_ACCUMULATORS // r))

    def fmas_per_load(r):
        vr = min(v, PIXEL_ACCUMULATORS // r)
        return r * vr / (r + vr)

    r = max((d for d in _divisors(ocpg) if d <= PIXEL_ACCUMULATORS), key=fmas_per_load)
    return r, min(v, PIXEL_ACCUMULATORS // r)


def schedule_conv2d_pixels(s, c: Tensor, out: Tensor | None = None, rows: int = 0,
                           vectors: int = 4, parallel: bool = True) -> None:
    """A 1x1 conv as a matmul per group, [OC/g, C/g] x [C/g, pixels] (conv2d_nchw's pixels
    stage): a register tile of `rows` output channels of one group (the largest divisor of
    OC/g not above the knob) x `vectors` zmm of consecutive pixels of the plane, accumulated
    over the group's input channels with one weight broadcast per row and one input vector
    load per column vector, then stored to the NCHW output (or its elementwise tail) as whole
    vectors. The pixel loop is split by 16 * vectors with a guarded last tile (H*W = 196, 49:
    loop_partition cuts it off the serial pixel loop). Tasks are (group, row tile) pairs, the
    pixel tiles inside: a task's weights stay in registers/L1 and it streams its group's
    input plane (C/g * H*W * 4 bytes, L2-sized) once."""
    pix = _conv_part(s, c, "pixels")
    if out is None or out is c:
        out = c
    else:
        s[c].compute_inline()  # the tail reads the tile through the 4-D view
    o = s[out]
    n, oc, oh, ow = o.op.axis
    groups = int(pix.op.attrs.get("groups", 1))
    ocpg = _ext(oc) // groups
    r, v = pixel_tile(ocpg, rows, vectors)
    if _ext(pix.op.axis[2]) != _ext(oh) * _ext(ow):
        _schedule_padded_pixels(s, pix, o, groups, r, v, parallel)
        return
    outer = [n]
    if groups > 1:
        grp, oc = o.split(oc, factor=ocpg)
        outer.append(grp)
    oco, oci = o.split(oc, factor=r)
    outer.append(oco)
    hwo, hwi = o.split(o.fuse(oh, ow), factor=LANES * v)
    hwv, hwl = o.split(hwi, factor=LANES)
    o.reorder(*outer, hwo, oci, hwv, hwl)
    o.vectorize(hwl)
    o.unroll(hwv)
    o.unroll(oci)
    pix.compute_at(o, hwo)
    _, po, pp = pix.op.axis
    ppv, ppl = pix.split(pp, factor=LANES)
    pix.reorder(*pix.op.reduce_axis, po, ppv, ppl)
    pix.vectorize(ppl)
    pix.unroll(ppv)
    pix.unroll(po)
    if parallel:
        o.parallel(o.fuse(*outer))


def _schedule_padded_pixels(s, pix, o, groups: int, r: int, v: int, parallel: bool) -> None:
    """The pixels stage padded to whole vectors: computed at the root, its register tile
    (r channels x v vectors, the last pixel tile guarded a vector at a time) accumulated in a
    cache_write stage; the NCHW output (or its tail) then reads the plane back, vectorized."""
    acc = s[s.cache_write(pix.op.output(0), "local")]
    pix = s[pix.op.output(0)]
    n, pc, pp = pix.op.axis
    outer = [n]
    if groups > 1:
        grp, pc = pix.split(pc, factor=_ext(pc) // groups)
        outer.append(grp)
    pco, pci = pix.split(pc, factor=r)
    outer.append(pco)
    ppo, ppi = pix.split(pp, factor=LANES * v)
    ppv, ppl = pix.split(ppi, factor=LANES)
    pix.reorder(*outer, ppo, pci, ppv, ppl)
    acc.compute_at(pix, ppo)
    _, ao, ap = acc.op.axis
    apv, apl = acc.split(ap, factor=LANES)
    acc.reorder(*acc.op.reduce_axis, ao, apv, apl)
    acc.vectorize(apl)
    acc.unroll(apv)
    acc.unroll(ao)
    pix.vectorize(ppl)
    if parallel:
        pix.parallel(pix.fuse(*outer))
    schedule_injective(s, o.op.output(0))


def schedule_conv2d_nchw_blocked(s, c: Tensor, out: Tensor | None = None, oc_vectors: int = 2,
                                 reg_ow: int = 14, unroll_kw: bool = False,
                                 oc_outer: bool | None = None,
                                 parallel: bool = True, chain: int = 32) -> None:
    """Direct NCHW conv on AVX-512 without input/output layout transforms: per tile of
    (oc_vectors x 16 output channels) x (reg_ow output columns) of one output row, the
    oc-blocked accumulator stage is computed into a stack tile of oc_vectors * reg_ow zmm
    (2 x 14 = 28 of the 32 registers; LLVM keeps it in registers because every index is a
    constant once the tile loops are unrolled), reducing over (input channel, kh, kw) with
    one input scalar broadcast per output column, shared by the oc_vectors FMAs of that
    column, and one contiguous packed weight vector per oc vector. The tile is then copied out
    to NCHW (a transpose inside the registers: scalar stores, ~3% of a 3x3 tile's work).
    The reduction runs (kh, kw, input channel) with the channel loop innermost: with kw
    inside, LLVM unrolls it and shares the broadcast of column j + kw between kw steps, which
    keeps 16 broadcasts live next to the 28 accumulators and spills (35 vs 237 GFLOP/s on one
    core for 1x64x56^2->64).
    reg_ow: the largest divisor of OW not above the knob, or a ragged tile when that divisor is
    under 4 columns (_register_columns). unroll_kw: unroll the kw loop in the schedule.
    oc_outer: tasks are (oc block, row) with the oc blocks outside, or rows with every oc block
    inside; None picks oc blocks inside when the packed weights fit in 256 KB of L2.
    The padding is read in place (inline_pad_input: 1x256x14^2 3x3 382 -> 413 GFLOP/s against
    a padded copy at the root, 1x64x56^2 464 -> 476 against rows padded per task in a stack
    buffer). An in-op weight pack is computed at the root, parallel. chain: the most terms
    one float32 accumulator sums serially, in whole kernel rows (_chunked_reduction; 0: all)."""
    blk = _conv_block_stage(s, c)
    if out is None or out is c:
        out = c
    else:
        s[c].compute_inline()  # the NCHW read-back becomes the tail's read of the tile
    o = s[out]
    n, oc, oh, ow = o.op.axis[:4]
    lane = o.op.axis[4] if len(o.op.axis) == 5 else None  # NCHW16c out: the block's lanes
    ob = _ext(blk.op.axis[-1])
    nvec = _largest_divisor(_group_blocks(blk), _oc_vectors(blk, oc_vectors)) or 1
    chunk = _chunk_steps(blk.op, blk.op.reduce_axis[1], chain)
    if chunk is not None and chunk * _chunk_terms(blk.op, blk.op.reduce_axis[1]) < SHORT_CHUNK:
        # short chunks (the stem's 7 x 3 terms): one oc vector, so the tile's totals stay in
        # registers beside its accumulators (14 + 14 zmm); 2 x 14 of each spill the totals
        # at every chunk (1 thread, 3 -> 64 7x7 s2 at 224: 2.06 ms one chain, 2.35 ms
        # chunked with 2 vectors, 2.06 ms with 1)
        nvec = 1
    rn = _register_columns(_ext(ow), max(1, reg_ow))
    oco, oci = o.split(oc, factor=nvec if lane is not None else nvec * ob)
    owo, owi = o.split(ow, factor=rn)
    if oc_outer is None:
        # rows outside the oc blocks when all the packed weights stay in L2 (each task then
        # reads its input rows once for every oc block); else oc blocks outside, so a task's
        # weight block is reused by the rows that follow it
        oc_outer = _nbytes(blk_weight(blk)) > 256 * 1024
    oc_outer = oc_outer and _ext(oh) is not None  # (rows of symbolic count: _fuse_tasks)
    o.reorder(*((n, oco, oh) if oc_outer else (n, oh, oco)), owo, oci, owi,
              *([lane] if lane is not None else []))
    task = _fuse_tasks(o, n, oco, oh) if oc_outer else _fuse_tasks(o, n, oh)
    total = blk.op.output(0)
    blk = tile_sums_at(s, total, blk.op.reduce_axis[1], chain, o, owo)
    _, bo, _, bw, bc = blk.op.axis[:5]
    rc, ry, rx = blk.op.reduce_axis
    # the column loop outside the oc-vector loop: one broadcast feeds oc_vectors FMAs
    blk.reorder(*blk.op.axis[5:], ry, rx, rc, bw, bo, bc)
    blk.unroll(bw)
    blk.unroll(bo)
    if ob % LANES == 0 or ob in (4, 8):
        blk.vectorize(bc)
    if unroll_kw:
        blk.unroll(rx)
    o.unroll(oci)
    o.unroll(owi)
    if lane is not None and (ob % LANES == 0 or ob in (4, 8)):
        o.vectorize(lane)
    inline_pad_input(s, blk)
    for t in blk.op.input_tensors:  # weights packed inside the op: one parallel pass
        st = s.stage_map.get(t.op)
        if st is not None and is_op(st.op, "conv2d_weight_layout") and \
                st.attach_type == "root":
            schedule_injective(s, t)
    if parallel:
        o.parallel(task)


# Tasks enough for the thread pool from the static axes above a symbolic one (an elementwise
# op's channels above a symbolic plane): up to this count the symbolic axis is the parallel one.
INJECTIVE_TASKS = 64


def _task_axes(rows: list, enough: int) -> list:
    """The axes of `rows` (outermost first, one of symbolic extent below the first) to run as
    the parallel tasks: those above the first symbolic one when they make at least `enough`
    tasks (fused, each index is divided by constants only), else that symbolic axis alone (the
    axes above it serial loops around it). Fused into the tasks, a symbolic axis divides every
    index by its extent, with a run-time check: a resize over a symbolic plane fused over
    (1, 128 channels, rows) took 6.7x its static kernel; a [1, 1, h * w, keys] softmax fused
    the rows above its sequence, one task."""
    cut = next((d for d in range(1, len(rows)) if _ext(rows[d]) is None), None)
    if cut is None:  # (only the outermost is symbolic: its index is divided by no extent)
        return rows
    tasks = 1
    for a in rows[:cut]:
        tasks *= _ext(a) or enough
    return rows[:cut] if tasks >= enough else rows[:cut + 1]


def _fuse_tasks(st, *axes):
    """The parallel loop over the task axes ``axes`` (outermost first, adjacent): their
    fusion; where one is of symbolic extent, less the leading axes of extent 1 and the axes
    outside the innermost symbolic one, which stay serial loops outside it. A fused index is
    divided by the extents inside each axis to recover it: by constants, quasi-affine, when
    only the outermost extent is symbolic. A division by a symbolic extent is neither folded nor
    provable, so every load it indexes got a run-time check (a conv over a symbolic plane
    fused over (batch 1, rows): two checks per FMA row, 1.7x the static kernel's time)."""
    keep = list(axes)
    if any(_ext(a) is None for a in keep):  # (static tasks fuse as they are)
        while len(keep) > 1 and _ext(keep[0]) == 1:
            keep.pop(0)
        keep = keep[max(i for i, a in enumerate(keep) if _ext(a) is None):]
    return st.fuse(*keep) if len(keep) > 1 else keep[0]


def _register_columns(ow: int | None, limit: int) -> int:
    """The register tile's output columns: the largest divisor of ow up to `limit`, or, when
    that is narrow (< 4 columns: 799 = 17 x 47 and the prime 199 of wav2vec2's feature
    extractor got 1: a third to half of onnxruntime's speed) and the row is wider than the knob, a
    ragged width of limit // 2 ... limit that leaves the fewest unused columns in the last tile
    (10 for 799 and 199: 1 column). The split's tail guard bounds the last tile to the row:
    loop_partition peels that tile off the guard-free interior, and its unrolled columns past
    the row are dropped, so no read leaves the input (check_indices refuses one at build).
    A row of symbolic width (None) gets the knob's width, its last tile ragged the same way."""
    if ow is None:
        return limit
    best = _largest_divisor(ow, limit) or 1
    if best >= 4 or limit < 4 or ow <= limit:
        return best
    widths = range(max(4, limit // 2), limit + 1)
    return min(widths, key=lambda w: (-(-ow // w) * w - ow, -w))


def _group_blocks(blk) -> int:
    """The oc blocks of one group of the conv block stage (all of them for groups=1): a
    register tile takes its oc vectors from one group, whose input channels they share."""
    return _ext(blk.op.axis[1]) // int(blk.op.attrs.get("groups", 1))


def _oc_vectors(blk, oc_vectors: int) -> int:
    """The knob oc_vectors counts 16-lane vectors; a grouped conv's 8-channel blocks (ymm) get
    as many lanes per broadcast input: twice the vectors."""
    ob = _ext(blk.op.axis[-1])
    if int(blk.op.attrs.get("groups", 1)) > 1 and ob < LANES:
        return max(1, oc_vectors * LANES // ob)
    return max(1, oc_vectors)


def blk_weight(blk):
    """The (packed) weight tensor the conv block stage reads."""
    return blk.op.input_tensors[-1] if len(blk.op.input_tensors) > 1 else None


def _nbytes(t) -> int:
    if t is None:
        return 0
    total = 4
    for d in t.shape:
        total *= as_int(d) or 1
    return total


def _sole_root_pad(s, cs):
    """The 4-D pad stage at the root that only `cs` reads, or None."""
    for t in cs.op.input_tensors:
        st = s.stage_map.get(t.op)
        if st is not None and is_op(st.op, "pad") and st.attach_type == "root" and \
                len(s.consumers(st)) == 1 and len(st.op.axis) == 4:
            return st
    return None


def _vectorize_row(st, iv) -> None:
    """Vectorize the row loop `iv`: a row of at most 64 elements that is not a whole number of
    zmm as one vector of its width (a 16-lane split of 30 would leave 14 scalar loads), else
    split by the widest vector width that divides it (a symbolic width: by whole vectors, the
    last one guarded)."""
    width = _ext(iv)
    v = _vector_lanes(width)
    if width is None:
        st.vectorize(st.split(iv, factor=v)[1])
    elif width <= 64 and width % LANES:
        st.vectorize(iv)
    elif v and width > v:
        st.vectorize(st.split(iv, factor=v)[1])
    elif v:
        st.vectorize(iv)


def _stride_one(cs) -> bool:
    return list(cs.op.attrs.get("stride", [1, 1]))[-1] == 1


def schedule_spatial_window(s, c: Tensor, out: Tensor | None = None, parallel: bool = True,
                            row_lanes_max: int = 64, rows: int = 4, reg_ow: int = 14):
    """Depthwise conv and pooling (NCHW): per (n, c, output row), the output row is vectorized
    (input rows are contiguous for stride 1; strided reads are gathers), the small window loops
    unrolled around it. A row of at most `row_lanes_max` elements is one vector of the row's
    width: LLVM splits <28 x float> into zmm + ymm + xmm pieces with no scalar tail, and the
    pieces are independent FMA chains (a 16-lane split of 28 would leave a 12-element scalar
    tail, and 4 lanes, the widest power of two dividing 28, quarters the throughput). At stride
    1 the padding is not materialized (masked loads); at other strides the padded input is built
    per channel (a window reads one input channel) in a stack buffer that stays in L1, instead
    of a whole padded copy of the input on the heap.
    rows: output rows computed together (the largest divisor of OH not above the knob), their
    window loops interleaved: a row alone is a chain of KH*KW dependent FMAs (latency bound, 4
    cycles each), `rows` rows are that many independent chains.
    On NCHW[x]c (5-D, the blocked depthwise conv and pooling) the channel block is the vector
    instead and reg_ow output columns are computed together (_schedule_window_blocked)."""
    comp, out = _accumulator(s, c, out)
    o = s[out]
    if len(o.op.axis) == 5:
        _schedule_window_blocked(s, s[comp], o, parallel, reg_ow, rows)
        return
    n, ch, oh, ow = o.op.axis
    cs = s[comp]
    width = _ext(cs.op.axis[3])
    whole_row = width is not None and width <= row_lanes_max and width % LANES != 0
    lanes = width if whole_row else _vector_lanes(width)
    fast = bool(lanes) and _stride_one(cs) and (width is None or width >= lanes)
    # (over a symbolic plane one row at a time: its tasks are rows, whatever their count)
    rb = (_largest_divisor(_ext(oh) or 1, max(1, rows)) or 1) if fast else 1
    if rb > 1:
        _, ohi = o.split(oh, factor=rb)
        o.reorder(n, ch, _, ohi, ow)
        s[comp].compute_at(o, _)
    else:
        s[comp].compute_at(o, oh)
    cs = s[comp]
    crow, cw = cs.op.axis[2], cs.op.axis[3]
    red = list(cs.op.reduce_axis)
    rowpart = [crow] if rb > 1 else []
    if fast:
        if lanes == width:
            cs.reorder(*red, *rowpart, cw)
            cs.vectorize(cw)
        else:
            cwo, cwi = cs.split(cw, factor=lanes)
            cs.reorder(cwo, *red, *rowpart, cwi)
            cs.vectorize(cwi)
        if rb > 1:
            cs.unroll(crow)
        for r in red:
            if (_ext(r) or 99) <= 7:
                cs.unroll(r)
    lanes_o = _ext(ow) if whole_row else _vector_lanes(_ext(ow))
    if lanes_o and (_ext(ow) is None or _ext(ow) > lanes_o):
        _, owi = o.split(ow, factor=lanes_o)
        o.vectorize(owi)
    elif lanes_o == _ext(ow):
        o.vectorize(ow)
    chan = o.fuse(n, ch)
    pad = _sole_root_pad(s, cs)
    if fast and pad is not None:
        # stride 1, rows vectorized: read the input directly, the window's reads that may fall
        # into the padding become masked loads (3x3 depthwise 1x32x112^2: 0.058 -> 0.035 ms,
        # 1x512x14^2: 0.015 -> 0.009 ms). Strided reads are gathers: a masked gather costs
        # more than the padded plane (1x64x112^2 stride 2: 0.073 -> 0.140 ms)
        pad.compute_inline()
    elif not _pad_per_channel(s, cs, o, chan):
        _schedule_pad_input(s, cs)
    if parallel:
        o.parallel(chan)


def _schedule_window_blocked(s, cs, o, parallel: bool, reg_ow: int, rows: int) -> None:
    """Depthwise conv / pooling on NCHW[x]c: the channel block is the vector, so any stride
    reads contiguous vectors. Per (n, channel block, `rows` output rows) task, reg_ow output
    columns (the largest divisor of OW not above it) are computed together with the small
    window loops unrolled around them: reg_ow independent chains. The padding is not
    materialized: reads that may fall into it are masked loads."""
    n, cb, oh, ow, ci = o.op.axis
    # a row of symbolic width: tiles of reg_ow columns, the last one guarded (loop_partition
    # peels it); a symbolic height: one row per task
    rn = reg_ow if _ext(ow) is None else _largest_divisor(_ext(ow), reg_ow) or 1
    owo, owi = o.split(ow, factor=rn)
    rb = _largest_divisor(_ext(oh) or 1, max(1, rows)) or 1
    oh, ohi = o.split(oh, factor=rb)
    # rows outside the channel blocks: a thread works on the same rows of every channel as in
    # the blocked convs before and after (whose activations then stay in its L2)
    o.reorder(n, oh, cb, ohi, owo, owi, ci)
    lanes_ok = _block_lanes(ci)
    if lanes_ok:
        o.vectorize(ci)
    o.unroll(owi)
    if cs is not o:
        cs.compute_at(o, owo)
        cw, cc = cs.op.axis[3], cs.op.axis[4]
        red = list(cs.op.reduce_axis)
        cs.reorder(*red, cw, cc)
        cs.unroll(cw)
        if lanes_ok:
            cs.vectorize(cc)
        for r in red:
            if (_ext(r) or 99) <= 7:
                cs.unroll(r)
    task = _fuse_tasks(o, n, oh, cb)
    for t in cs.op.input_tensors:
        st = s.stage_map.get(t.op)
        if st is not None and is_op(st.op, "pad") and st.attach_type == "root":
            # read the input directly: the window's reads become masked loads where they may
            # fall into the padding; a padded copy of the task's rows costs as much as the
            # window itself here (3x3 depthwise 1x64x112^2 stride 2: 0.052 -> 0.045 ms;
            # 1x32x112^2 stride 1: 0.033 -> 0.025 ms)
            st.compute_inline()
    if parallel:
        o.parallel(task)


def _pad_per_channel(s, cs, o, chan) -> bool:
    """Compute the padded input of a per-channel window op at the output's channel loop: one
    padded plane per channel, rows vectorized. Returns False when there is no such pad stage."""
    st = _sole_root_pad(s, cs)
    if st is None:
        return False
    st.compute_at(o, chan)
    _vectorize_row(st, st.op.axis[3])
    return True


# ----------------------------------------------------------------------------- row ops


def schedule_softmax(s, out: Tensor) -> None:
    """softmax / log_softmax over the last axis: one row per parallel iteration; the max and sum
    reductions use the rfactor vector accumulator, the exp and the output are vectorized; the
    row's intermediates live in a buffer of one row (on the heap for a row of symbolic length,
    allocated once per task: hoist_allocations)."""
    o = s[out]
    ax = o.op.attrs.get("axis")
    parts = _internal_stages(s, o, ("max", "exp", "sum"))
    if ax != len(o.op.axis) - 1 or len(parts) != 3 or len(o.op.axis) < 2:
        _generic_opaque(s, out)
        return
    mx, ex, sm = parts
    row, lanes = _row_parallel_output(o)
    _stream_if_big(o, row)
    ecol = ex.op.axis[-1]
    if lanes and (_ext(ecol) or lanes + 1) > lanes:
        _, eci = ex.split(ecol, factor=lanes)
        ex.vectorize(eci)
    _attach_row_stages(s, o, row, (sm, ex, mx), reductions=(mx, sm))


def _row_parallel_output(o):
    """The output of a row-wise composite (softmax, layer norm): leading axes fused into one
    parallel row loop, the last axis vectorized. Returns (row loop, lanes or 0). Row axes
    after a symbolic one below the first stay serial loops inside the parallel one, and the
    row loop returned is the innermost: fused, each row's index would be divided by the
    symbolic extent (an attention's [batch, heads, seq, seq] softmax: fused over batch and
    heads, the seq rows inside)."""
    rows = list(o.op.axis[:-1])
    if any(_ext(a) is None for a in rows[1:]):
        par = _fuse_tasks(o, *_task_axes(rows, 2))
        lanes = _vectorize_columns(o)
        o.parallel(par)
        return rows[-1], lanes
    row = o.fuse(*rows) if len(rows) > 1 else rows[0]
    lanes = _vectorize_columns(o)
    o.parallel(row)
    return row, lanes


def _vectorize_columns(o) -> int:
    """Vectorize stage o's last axis (split by the vector's lanes when longer); the lanes. A
    row 16 does not divide gets 16-lane vectors and a peeled tail (_masked_lanes), not 4-lane
    vectors (whisper's [6, 1500, 1500] softmax, 1 thread: 24 -> 7.2 ms with _reduce_rows'
    ragged partials, onnxruntime 8.2 ms)."""
    col = o.op.axis[-1]
    lanes = _masked_lanes(_ext(col))
    if lanes and (_ext(col) or lanes + 1) > lanes:
        _, ci = o.split(col, factor=lanes)
        o.vectorize(ci)
    elif lanes:
        o.vectorize(col)
    return lanes


def _attach_row_stages(s, o, row, stages, reductions) -> None:
    """Compute `stages` (readers before producers) at the output's row loop; the `reductions`
    among them get the rfactor vector accumulator first. rfactor runs while everything is still
    at the root, then each stage is attached after a stage that reads it (compute_at needs a
    host reader; the structural check sees every state)."""
    rf = {id(st): _reduce_rows(s, st.op.output(0)) if _reduce_rows_ok(st.op) else None
          for st in reductions}
    for st in stages:
        st.compute_at(o, row)
        for r in reversed(rf.get(id(st)) or []):
            r.compute_at(o, row)


def schedule_layer_norm(s, out: Tensor) -> None:
    """layer norm over the last axis: a row per parallel iteration, mean and variance with the
    rfactor vector accumulator, the normalisation vectorized."""
    o = s[out]
    parts = _internal_stages(s, o, ("mean", "var"))
    if len(parts) != 2 or len(parts[0].op.reduce_axis) != 1 or len(o.op.axis) < 2:
        _generic_opaque(s, out)
        return
    mean, var = parts
    row, _ = _row_parallel_output(o)
    _stream_if_big(o, row)
    _attach_row_stages(s, o, row, (var, mean), reductions=(mean, var))


def schedule_lrn(s, out: Tensor) -> None:
    """LRN across channels: per row of the output (all axes but the last fused onto the pool),
    the row's sums of squares over the channel window first, the window loop outside the row's
    vectors (each vector a sum of `size` squared contiguous inputs), then the row normalised.
    The generic reduce schedule ran the sums one scalar at a time with an index division each:
    GoogLeNet's first LRN (1x64x55x55) 2.1 ms, the second (1x192x55x55) 6.4 ms, 31% of the
    model (one thread, Intel Xeon)."""
    o = s[out]
    parts = _internal_stages(s, o, ("sqsum",))
    if len(parts) != 1 or len(o.op.axis) < 2:
        _generic_opaque(s, out)
        return
    sq, = parts
    row, _ = _row_parallel_output(o)
    sq.compute_at(o, row)
    *rows, col = sq.op.axis
    lanes = _masked_lanes(_ext(col))
    if not lanes:
        return
    outer, inner = sq.split(col, factor=lanes)
    sq.reorder(*rows, outer, *sq.op.reduce_axis, inner)
    sq.vectorize(inner)


def _internal_stages(s, o, roles) -> list:
    """The stages of a composite op (its parts with these roles, in this order) that feed the
    output stage `o`."""
    owner = op_definition(o.op)
    found = {}
    todo = [o]
    seen = set()
    while todo:
        st = todo.pop()
        for t in st.op.input_tensors:
            p = s.stage_map.get(t.op)
            if p is None or id(p) in seen:
                continue
            seen.add(id(p))
            d = definition_of(p.op)
            if owner is not None and isinstance(d, Part) and d.owner == owner.name and \
                    d.role in roles:
                found[d.role] = p
                todo.append(p)
    return [found[x] for x in roles if x in found]


def _generic_opaque(s, out: Tensor) -> None:
    """Composite op in a layout without a dedicated schedule: root stages, parallel outer."""
    for st in list(s.stages):
        if st.attach_type == "root" and st.op is not out.op and _feeds(s, st, s[out]):
            _root_generic(s, st)
    _root_generic(s, s[out])


def _feeds(s, producer, consumer) -> bool:
    return any(c is consumer or _feeds(s, c, consumer) for c in s.consumers(producer))


def _root_generic(s, st) -> None:
    if st.is_transformed():
        return
    t = st.op.output(0)
    if st.op.reduce_axis:
        schedule_reduce(s, t)
    else:
        schedule_injective(s, t)


def _schedule_scan_stage(st) -> None:
    """A tl.scan's init, update and body stages: the update's first loop is the time loop, which
    the state's dependence keeps serial (the generic schedule would parallelize it); a step's
    innermost state axis is vectorized when it is contiguous and wide enough.
    A body reduction (computed at the update's step) runs its reduction outside the innermost
    state axis, so that axis is a vector of independent sums."""
    if isinstance(st.op, ScanOp) or not st.op.axis:
        return
    if st.op.reduce_axis:
        if len(st.op.axis) < 2:
            return
        st.reorder(st.op.axis[0], *st.op.reduce_axis, *st.op.axis[1:])
    inner = st.op.axis[-1]
    n = _ext(inner)
    if len(st.op.axis) < 2 or n is None or n < 4:
        return
    v = _vector_lanes(n)
    if v and n > v:
        st.vectorize(st.split(inner, factor=v)[1])
    elif v == n:
        st.vectorize(inner)


# A topk stage with less work than this (outputs x reduced extent) runs on the calling thread:
# a thread-pool launch costs more than it ([80,8400] k=5 on 2 threads, 14 launches of 400-2800
# tasks: 0.325 ms against 0.142 on one thread)
TOPK_PARALLEL_WORK = 1 << 17


def _work(st) -> int:
    n = 1
    for a in (*st.op.axis, *st.op.reduce_axis):
        n *= _ext(a) or 1
    return n


def schedule_topk_part(s, t: Tensor, out: Tensor | None = None) -> None:
    """topk's small reductions (block bests of the lanes, block order): the generic root
    reduction when big, else serial (the spatial loops fused, nothing on the pool)."""
    st = s[t]
    if _work(st) >= TOPK_PARALLEL_WORK:
        schedule_reduce(s, t)
    elif len(st.op.axis) > 1:
        st.fuse(*st.op.axis)


def schedule_topk_block_lanes(s, t: Tensor, out: Tensor | None = None) -> None:
    """topk's per-lane block bests [..., blocks, L]: the block's vectors reduced outside the
    L lanes, which are one vector (contiguous in x), the rows x blocks on the thread pool
    when there is enough work (TOPK_PARALLEL_WORK)."""
    st = s[t]
    *outer, lane = st.op.axis
    row = st.fuse(*outer) if len(outer) > 1 else outer[0]
    st.reorder(row, *st.op.reduce_axis, lane)
    st.vectorize(lane)
    if _work(st) >= TOPK_PARALLEL_WORK:
        st.parallel(row)


def schedule_topk_full(s, t: Tensor, out: Tensor | None = None) -> None:
    """topk's full ranks (an element's rank: a count over the axis) and their inversion
    (position r: a sum over the axis): the reduction outside 16 consecutive outputs, which are
    one vector (contiguous reads of the axis; the reduced element is broadcast), 2 vectors a
    step for two independent chains; rows x vector pairs on the thread pool."""
    st = s[t]
    *outer, inner = st.op.axis
    io, ii = st.split(inner, factor=LANES)
    ioo, ioi = st.split(io, factor=2)
    st.reorder(*outer, ioo, *st.op.reduce_axis, ioi, ii)
    st.vectorize(ii)
    st.unroll(ioi)
    task = st.fuse(*outer, ioo) if outer else ioo
    if _work(st) >= TOPK_PARALLEL_WORK:
        st.parallel(task)


# ----------------------------------------------------------------------------- dispatch


@dataclass(frozen=True)
class _Step:
    """One schedule that default_schedule runs: a composite op's (on its output) or an anchor's
    (on the anchor tensor, with the output hosting its tail or None)."""

    op: str
    schedule: AnchorSchedule | CompositeSchedule
    anchor: Tensor | None
    out: Tensor | None

    def run(self, s, knobs: dict | None) -> None:
        if isinstance(self.schedule, CompositeSchedule):
            self.schedule.function(s, self.out)
            return
        if self.schedule.function is schedule_matmul and "rows_outer" not in (knobs or {}) \
                and matmul_rows_outer(self.anchor.op):
            knobs = dict(knobs or {}, rows_outer=True)
        self.schedule.apply(self.op, s, self.anchor, self.out, knobs)


def _anchor_step(st, out: Tensor | None = None) -> _Step:
    return _Step(definition_of(st.op).name, anchor_schedule(st.op), st.op.output(0), out)


def _is_anchor(st) -> bool:
    """A stage whose compute is a heavy library op with an anchor schedule (one output)."""
    return anchor_schedule(st.op) is not None and st.op.num_outputs == 1


def _tail_anchor(s, out_stage):
    """Walk back from an output through same-shape elementwise/broadcast stages to a heavy op
    that only they read: (anchor stage, [tail stages]) or (None, [])."""
    cur = out_stage
    tails = []
    while pattern_of(cur.op) in (ELEMWISE, BROADCAST):
        cand = None
        for t in cur.op.input_tensors:
            p = s.stage_map.get(t.op)
            if p is None or p.is_output or len(p.op.axis) != len(cur.op.axis) or \
                    any(_ext(a) != _ext(b) for a, b in zip(p.op.axis, cur.op.axis)):
                continue
            if len(s.consumers(p)) != 1:
                continue
            kind = pattern_of(p.op)
            if anchor_schedule(p.op) is not None and kind in (OUT_ELEMWISE_FUSABLE, REDUCE):
                return p, tails
            if kind in (ELEMWISE, BROADCAST) and cand is None:
                cand = p
        if cand is None:
            break
        tails.append(cand)
        cur = cand
    return _tail_tree_anchor(s, out_stage)


def _same_extents(p, st) -> bool:
    return len(p.op.axis) == len(st.op.axis) and all(
        _ext(a) == _ext(b) for a, b in zip(p.op.axis, st.op.axis))


def _tail_tree_anchor(s, out_stage):
    """_tail_anchor for a tail that reads a value more than once: the same-shape
    elementwise/broadcast stages the output reads (transitively) down to one heavy op, where
    nothing outside them reads the heavy op or any of them. erf GELU after a dense + bias,
    x * 0.5 * (1 + erf(x / sqrt 2)) with x = dense + bias, reads x twice: missed by the chain
    walk, the dense wrote its output to a heap buffer and the GELU ran as a second pass over
    it. (anchor stage, [tail stages]) or (None, [])."""
    if pattern_of(out_stage.op) not in (ELEMWISE, BROADCAST):
        return None, []
    anchor, tails, todo = None, [], [out_stage]
    while todo:
        cur = todo.pop()
        for t in cur.op.input_tensors:
            p = s.stage_map.get(t.op)
            if p is None or p.is_output or not _same_extents(p, out_stage):
                continue
            kind = pattern_of(p.op)
            if anchor_schedule(p.op) is not None and kind in (OUT_ELEMWISE_FUSABLE, REDUCE):
                if anchor is not None and anchor is not p:
                    return None, []  # two heavy ops: each keeps its own schedule
                anchor = p
            elif kind in (ELEMWISE, BROADCAST) and all(p is not q for q in tails):
                tails.append(p)
                todo.append(p)
    inside = {id(out_stage), *(id(q) for q in tails)}
    if anchor is None or any(id(c) not in inside for st in (anchor, *tails)
                             for c in s.consumers(st)):
        return None, []
    return anchor, tails


def _plan_outputs(s, keep: set) -> list[_Step]:
    """The schedules the outputs ask for: a composite op's own, an anchor's, or the anchor that
    an output's elementwise tail leads back to (placed at the output's tile loop)."""
    plan = []
    for st in s.stages:
        if not st.is_output:
            continue
        d = op_definition(st.op)
        if d is not None and d.composite is not None and pattern_of(st.op) == OPAQUE:
            plan.append(_Step(d.name, d.composite, None, st.op.output(0)))
            keep.update(id(p) for p in _internal_stages(s, st, d.composite.keeps))
            continue
        if _is_anchor(st):
            plan.append(_anchor_step(st))
            continue
        anchor, _tails = _tail_anchor(s, st)
        if anchor is not None:
            plan.append(_anchor_step(anchor, st.op.output(0)))
            keep.add(id(anchor))
    # a heavy op that feeds an output through something other than an elementwise tail (a
    # blocked conv followed by a layout transform back to NCHW) still gets its own schedule at
    # the root instead of the generic reduction one
    for st in s.stages:
        if not st.is_output and id(st) not in keep and _is_anchor(st):
            plan.append(_anchor_step(st))
            keep.add(id(st))
    return plan


def _placed_by_consumer(s, st) -> bool:
    """Injective stages that a consumer's schedule places itself: padding read by a conv, pool
    or row sum (computed at the root so the inner loop has no bound checks, or read in place),
    packed operands, and a weight layout read by the blocked NCHW conv."""
    consumers = s.consumers(st)
    if is_op(st.op, "pad") and any(anchor_schedule(c.op) is not None or
                                   part_role(c.op) in ("block", "sum") for c in consumers):
        return True
    if part_role(st.op) == "pack" or part_role(st.op) in WINOGRAD_PARTS:
        return True
    return is_op(st.op, "conv2d_weight_layout") and any(
        part_role(c.op) == "block" for c in consumers)


def _inline_injective(s, keep: set) -> None:
    """Inline the injective intermediates that no schedule places."""
    for st in reversed(s.stages):
        if st.is_output or id(st) in keep or st.op.reduce_axis or st.op.num_outputs != 1:
            continue
        if not isinstance(st.op, ComputeOp) or pattern_of(st.op) not in (
                ELEMWISE, BROADCAST, INJECTIVE):
            continue
        if _placed_by_consumer(s, st):
            continue
        if any(c.attach_type == "scope" and c.attach_stage is st for c in s.stages):
            continue
        st.compute_inline()


def default_schedule(outs, target: str = "llvm", knobs: dict | None = None):
    """A fast schedule for any composition of library ops ending in `outs` (one tensor or a
    list). Stages that are not library ops get the generic injective/reduce schedule.

    knobs: keyword arguments for the anchor schedules, checked against the knobs each anchor's
    definition declares (e.g. tile_m / tile_n of schedule_matmul, tile_oc of
    schedule_conv2d_nchw): what a tuner varies; None keeps their defaults. A knob the anchor
    does not declare, or of the wrong type, is a TypeError naming the op and the knob."""
    if target not in ("llvm", "llvm -mcpu=native") and not str(target).startswith("llvm"):
        raise ValueError(f"default_schedule: target {target!r} is not supported (only 'llvm')")
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    for t in outs:
        if not isinstance(t, Tensor):
            raise TypeError(f"default_schedule: outs must be tensors, got {type(t).__name__}")
    s = create_schedule(outs)
    keep: set = set()  # stages the anchor schedules place themselves
    plan = _plan_outputs(s, keep)
    _inline_injective(s, keep)
    for step in plan:
        step.run(s, knobs)
    for st in s.stages:
        if scan_of(st.op) is not None and st.attach_type != "root" and not st.is_transformed():
            _schedule_scan_stage(st)  # a scan's body stage, computed at its update's step
    for st in s.stages:
        if st.attach_type == "root" and not st.is_transformed():
            if isinstance(st.op, ScanOp) or scan_of(st.op) is not None:
                _schedule_scan_stage(st)
                continue
            if part_role(st.op) == "pack":
                st.compute_inline()
                continue
            _root_generic(s, st)
    return s


__all__ = [
    "default_schedule",
    "schedule_conv2d_nchw",
    "schedule_conv2d_nchw_blocked",
    "schedule_conv2d_nchwc",
    "schedule_conv2d_pixels",
    "schedule_conv2d_winograd",
    "schedule_injective",
    "schedule_layer_norm",
    "schedule_lrn",
    "schedule_matmul",
    "schedule_reduce",
    "schedule_softmax",
    "schedule_spatial_window",
    "schedule_topk_block_lanes",
    "schedule_topk_full",
    "schedule_topk_part",
]
