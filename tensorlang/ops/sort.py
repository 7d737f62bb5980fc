"""Selection: topk (ONNX TopK)."""
# ruff: noqa: TRY004 - bad attributes raise ValueError (the library contract)

from __future__ import annotations

from .. import te
from ..ir import dtype as dt
from ..ir.expr import as_int, const
from ..te.tensor import Tensor
from . import sort_kernel
from ._base import OPAQUE, REDUCE, check_int, op_compute, scan_axis


def topk(x: Tensor, k: int, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    """ONNX TopK: (values, indices) of the k largest (smallest) elements along `axis`, sorted,
    ties broken by the lower index first (ONNX's rule).

    Where it is estimated cheaper (_radix_wins: mostly k above ~5-10), a stable radix sort
    of each row written as loop IR (ops/sort_kernel.py, a tl.extern), with data-dependent
    stores. Else by computes, with no data-dependent control flow. Where k is small next to
    the axis, first through blocks
    (_filtered_indices: the k best are among the elements of the k blocks with the best
    bests), which leaves two shorter selections; each selection is one of two ways. Mostly a
    running top-k list per row
    (_insertion_indices: n*k steps, a vector across rows). Where its state (every step's list:
    n*rows*k indices) would leave the caches (over INSERTION_MAX_BYTES), or for fewer than 4
    rows and k > 4, by ranks: an element's rank is the number of elements ahead of it in that
    order. Two levels: the axis is cut into blocks of b; the k best of each block by their
    rank within the block ("block_rank", n*b comparisons) are gathered as candidates
    ("candidate", nb*min(k, b) of them, with their indices), the candidates are ranked among
    themselves ("rank", C*C) and output position r takes the candidate of rank r ("index").
    b minimises the comparisons (b = n: one level, n*n, taken up to n = 256). NaN inputs have
    no defined rank (ONNX leaves their order unspecified)."""
    ax, n = scan_axis("topk", x, axis)
    if not isinstance(largest, bool):
        raise ValueError(f"topk: largest must be a bool, got {largest!r}")
    k = check_int("topk", "k", k, 1)  # k = 0 would be an empty output: no tensor here is
    if k > n:
        raise ValueError(f"topk: k={k} is larger than the axis ({n} elements)")
    return _values_at(x, _topk_indices(x, ax, n, k, largest), ax, k, largest)


def _topk_indices(x, ax: int, n: int, k: int, largest: bool) -> Tensor:
    """The int64 indices of the k best along `ax`, in order: through the best blocks when
    that saves work (_filter_block), else by the running list or by ranks."""
    vector, rows = ax == x.ndim - 1, _rows(x, ax)
    if _radix_wins(x.dtype, n, k, vector, rows):
        return sort_kernel.radix_topk_indices(x, ax, n, k, largest)
    b = _filter_block(n, k, vector, rows)
    if b:
        return _filtered_indices(x, ax, n, k, b, largest)
    costs = (_list_cost(n, k, rows), _rank_cost(n, k, vector), _blocked_rank_cost(n, k))
    if costs[1] < min(costs[0], costs[2]):
        return _full_rank_indices(x, ax, n, k, largest)
    if costs[0] <= costs[2]:
        return _insertion_indices(x, ax, n, k, largest)
    cand_val, cand_idx = _candidates(x, ax, n, k, _block(n, k), largest)
    return _rank_indices(cand_val, cand_idx, ax, k, largest)


# The k best elements lie in the k blocks whose best elements are best (block ties: the lower
# block first): an element outside them has k blocks' best elements ahead of it. So the k best
# of n are the k best of the k*b elements of those blocks, found from the nb = n/b block bests
# (one pass, a vector op when 8 divides b): two shorter selections instead of one, taken when
# the estimate (_selection_cost) is under half. Only blocks that divide n: a padded last block
# could put a padding slot among the k best when NaNs fill a row, its index past the axis.
FILTER_MAX_BLOCK = 512
# Estimated ns per row of each way (one thread, Zen 4, measured with each way forced on
# [1,1000] k=100/1000, [8,256] k=256, [8,1000] k=10/300, [8,4000] k=50, [80,400] k=5, [80,1050]
# k=100): the running list ~0.6 ns per slot update (n*k), 5x that once its state leaves the
# caches (over 16 MB: 3.2 ns at 80 x 1050 x 100); full ranks (last axis only: a vector over
# it) ~0.12 ns per compare (n*n + n*k) up to n = 1024, ~0.4 beyond ([8,4000]: 0.37); a block
# pass ~0.05 ns per element as a vector op, 0.5 as scalar reductions.
LIST_NS, LIST_SPILL_NS, LIST_SPILL_BYTES = 0.6, 3.0, 16 << 20
RANK_NS, RANK_LONG_NS, RANK_LONG_N = 0.12, 0.4, 1024
BLOCKED_RANK_NS = 0.25
RANK_MIN_N = 64


# The radix sort (ops/sort_kernel.py), per row and byte of the dtype: a scatter of what it
# sorts (~RADIX_NS an element) and a prefix sum over the 256 buckets (~RADIX_BUCKET_NS each);
# where k <= n / 2 the kernel first filters the row (~RADIX_FILTER_NS an element: the read and
# two compactions) and sorts only the candidates (~2k of them on spread-out data). Measured one
# thread, float32, on the 2-core Zen 4 (load 2-5): [1,1000] k=1000 9-13 us, [1,8400] k=100
# 24 us, [8,8000] k=300 0.22 ms. Taken where it beats the cheapest computed way, the block
# filter's two shorter selections included.
RADIX_NS, RADIX_BUCKET_NS, RADIX_FILTER_NS = 2.5, 1.5, 2.5
FORCE_RADIX: bool | None = None  # tests and measurements: True/False overrides the rule


def _radix_cost(dtype: str, n: int, k: int) -> float:
    def sort(m):
        return (dt.bits(dtype) // 8) * (RADIX_NS * m + RADIX_BUCKET_NS * sort_kernel.BUCKETS)

    if 2 * k > n:
        return sort(n)
    return RADIX_FILTER_NS * n + sort(2 * k)


def _radix_wins(dtype: str, n: int, k: int, vector: bool, rows: int) -> bool:
    if not sort_kernel.supports(dtype) or k < 1 or n >= 1 << 31:  # int32 indices inside
        return False
    if FORCE_RADIX is not None:
        return FORCE_RADIX
    radix = _radix_cost(dtype, n, k)
    b = _filter_block(n, k, vector, rows)
    other = _filter_cost(n, k, b, vector, rows) if b else _selection_cost(n, k, vector, rows)
    return radix < other


def _list_cost(n: int, k: int, rows: int) -> float:
    if not _list_allowed(n, k, rows):
        return float("inf")
    spill = n * k * rows * 4 > LIST_SPILL_BYTES
    return n * k * (LIST_SPILL_NS if spill else LIST_NS)


def _blocked_rank_cost(n: int, k: int) -> float:
    """The ranks in blocks (_candidates, _rank_indices), scalar reductions: 0.12 ns a
    comparison at [1,1000] k=100 (712k of them in 0.088 ms), counted as 0.25 (slower on
    longer axes: [8,4000] k=200 through them took 3x the vector ranks)."""
    return BLOCKED_RANK_NS * _block_compares(n, k, _block(n, k))


def _rank_cost(n: int, k: int, vector: bool) -> float:
    if not vector or n < RANK_MIN_N:  # a few vectors: the scalar tail is much of the work
        return float("inf")
    return (n * n + n * k) * (RANK_NS if n <= RANK_LONG_N else RANK_LONG_NS)


def _selection_cost(n: int, k: int, vector: bool, rows: int) -> float:
    return min(_list_cost(n, k, rows), _rank_cost(n, k, vector), _blocked_rank_cost(n, k))


def _filter_cost(n: int, k: int, b: int, vector: bool, rows: int) -> float:
    return (n * (0.05 if b % 8 == 0 and vector else 0.5)
            + _selection_cost(n // b, k, vector, rows) + _selection_cost(k * b, k, vector, rows))


def _filter_block(n: int, k: int, vector: bool = True, rows: int = 1) -> int:
    """The block b of the two-level selection (_filtered_indices), 0 when it saves too little
    (k close to n, short axes, no divisor of n that fits)."""
    options = [b for b in range(2, min(n, FILTER_MAX_BLOCK) + 1)
               if n % b == 0 and n // b >= 2 * k and k * b * 2 <= n]
    if k < 1 or not options:
        return 0

    def cost(b):
        return _filter_cost(n, k, b, vector, rows)

    b = min(options, key=cost)
    return b if cost(b) <= _selection_cost(n, k, vector, rows) / 2 else 0


def _is_nan(v):
    return v != v  # noqa: PLR0124 - NaN is the one value unequal to itself


def _full_rank_indices(x, ax: int, n: int, k: int, largest: bool) -> Tensor:
    """Every element's rank among all of the axis ("full_rank": n compares each, a vector
    over the axis), then output position r takes the element of rank r ("full_index": n
    compares each). A NaN ranks as the best value, an infinity ("full_key": one pass), ties by
    index, so the ranks stay a permutation (ONNX leaves NaN's place unspecified; an index must
    stay valid); the values output keep the NaN. (NaN tests inside the compares instead:
    [1,1000] k=1000 0.198 ms against 0.180, [8,256] k=256 0.103 against 0.082.)"""
    key = x
    if x.dtype.startswith("float"):
        best = const(float("inf") if largest else float("-inf"), x.dtype)
        key = op_compute("topk_full_key", tuple(x.shape),
                         lambda *i: te.select(_is_nan(x[i]), best, x[i]), OPAQUE)
    t = te.reduce_axis((0, n), name="t")

    def rank(*i):
        ahead = _ahead(key[_at(i, ax, t.var)], t.var, key[i], i[ax], largest)
        return te.sum(te.cast(ahead, "int32"), axis=t)

    ranks = op_compute("topk_full_rank", tuple(x.shape), rank, REDUCE)
    j = te.reduce_axis((0, n), name="j")
    pos = op_compute("topk_full_index", _at(tuple(x.shape), ax, k), lambda *r: te.sum(
        te.select(ranks[_at(r, ax, j.var)] == te.cast(r[ax], "int32"), te.cast(j.var, "int32"),
                  const(0, "int32")), axis=j), REDUCE)
    return op_compute("topk_full", tuple(pos.shape), lambda *r: te.cast(pos[r], "int64"),
                      OPAQUE, name="topk_indices")


def _block_best(x, ax: int, n: int, b: int, largest: bool) -> Tensor:
    """The best element of each block of b along `ax` ("block_best"). On the last axis with b
    a multiple of 8, through "block_lanes": per block, the best of each of L = 16 (or 8)
    lanes over the block's b / L vectors, a vector op (schedule_topk_block_lanes), then the
    best of the L lanes; else one reduction per block."""
    pick = te.max if largest else te.min
    shape = _at(tuple(x.shape), ax, n // b)
    lanes = next((v for v in (16, 8) if b % v == 0), 0)
    if ax != x.ndim - 1 or not lanes:
        m = te.reduce_axis((0, b), name="m")
        return op_compute("topk_block_best", shape,
                          lambda *i: pick(x[_at(i, ax, i[ax] * b + m.var)], axis=m), REDUCE)
    mo = te.reduce_axis((0, b // lanes), name="mo")
    per_lane = op_compute("topk_block_lanes", (*shape, lanes), lambda *i: pick(
        x[(*i[:-2], i[-2] * b + mo.var * lanes + i[-1])], axis=mo), REDUCE, lanes=lanes)
    lane = te.reduce_axis((0, lanes), name="lane")
    return op_compute("topk_block_best", shape,
                      lambda *i: pick(per_lane[(*i, lane.var)], axis=lane), REDUCE)


def _filtered_indices(x, ax: int, n: int, k: int, b: int, largest: bool) -> Tensor:
    """The k best through their blocks: each block's best (_block_best), the k best blocks
    (their indices by a top-k of the block bests, put back in index order: "block_order",
    "blocks"), their k*b elements as candidates in index order ("filtered"), the k best
    candidates, mapped back to x's indices ("filtered_index")."""
    best = _block_best(x, ax, n, b, largest)
    blocks = _topk_indices(best, ax, n // b, k, largest)
    r = te.reduce_axis((0, k), name="r")
    before = op_compute("topk_block_order", tuple(blocks.shape), lambda *i: te.sum(
        te.cast(blocks[_at(i, ax, r.var)] < blocks[i], "int32"), axis=r), REDUCE)
    q = te.reduce_axis((0, k), name="q")
    chosen = op_compute("topk_blocks", tuple(blocks.shape), lambda *i: te.sum(
        te.select(before[_at(i, ax, q.var)] == te.cast(i[ax], "int32"),
                  blocks[_at(i, ax, q.var)], const(0, "int64")), axis=q), REDUCE)

    def source(i, c):  # candidate c's index in x
        return chosen[_at(i, ax, c // b)] * b + te.cast(c % b, "int64")

    cand = op_compute("topk_filtered", _at(tuple(x.shape), ax, k * b),
                      lambda *i: x[_at(i, ax, source(i, i[ax]))], OPAQUE)
    inner = _topk_indices(cand, ax, k * b, k, largest)
    return op_compute("topk_filtered_index", tuple(inner.shape),
                      lambda *i: source(i, inner[i]), OPAQUE, name="topk_indices")


# Measured (one thread, [rows, n] float32, ranks -> insertion, ms): [8,1000] k=10 0.218 ->
# 0.055, [8,300] k=4 0.066 -> 0.012, [8,256] k=256 0.44 -> 0.27, [8,1000] k=100 0.77 -> 0.46,
# [8,4000] k=50 3.7 -> 0.9, [8,4000] k=200 7.8 -> 5.1 (a 26 MB state), but [8,8000] k=300
# 21 -> 61 (77 MB, out of the caches). With fewer than 4 rows (no vector across them):
# [1,1000] k=1 0.017 -> 0.007, [2,1000] k=3 0.045 -> 0.012, [1,4000] k=4 0.061 -> 0.065,
# [2,1000] k=10 0.042 -> 0.059.
INSERTION_MAX_BYTES = 32 << 20  # the scan keeps every step's list: n*rows*k int32 indices
INSERTION_MAX_K_FEW_ROWS = 4


def _rows(x, ax: int) -> int:
    rows = 1
    for d, extent in enumerate(x.shape):
        if d != ax:
            rows *= as_int(extent) if as_int(extent) is not None else 1 << 40
    return rows


def _insertion_fits(x, ax: int, n: int, k: int) -> bool:
    return _list_allowed(n, k, _rows(x, ax))


def _list_allowed(n: int, k: int, rows: int) -> bool:
    small = rows >= 4 or k <= INSERTION_MAX_K_FEW_ROWS
    return k >= 1 and n >= 2 and small and n * rows * k * 4 <= INSERTION_MAX_BYTES


def _insertion_indices(x, ax, n, k, largest):
    """A running top-k list per row, one element at a time (a tl.scan over the axis): the list
    holds the indices of the best so far, in order, -1 for an empty slot; element t goes in
    behind every held element at least as good (ties: the earlier index stays ahead, ONNX's
    rule), the slots behind it shift by one and the last drops out. A step counts the held
    elements ahead of x[t] (its place, "list_place": a body reduction, k gathers) and moves
    the list ("list_step", selects only). The state is [n, k, x's other axes...]: the other
    axes innermost, so a step is a vector across rows. (Two gather-free scans, values then
    indices, measured slower: twice the state to write.)"""
    rest = tuple(x.shape[:ax]) + tuple(x.shape[ax + 1:])
    # int32 indices (an axis has fewer than 2^31 elements): half the state to write, and
    # gathers of 8 lanes instead of 4
    state = te.placeholder((n, k, *rest), "int32", name="topk_state")
    empty = const(-1, "int32")

    def at_pos(r, pos):
        return x[tuple(r[:ax]) + (pos,) + tuple(r[ax:])]

    init = op_compute("topk_list_init", (1, k, *rest),
                      lambda _t, j, *r: te.select(j == 0, const(0, "int32"), empty), OPAQUE)

    c = te.reduce_axis((0, k), name="c")

    def ahead(t, *r):  # how many held elements stay ahead of element t: where it goes in
        idx = state[(t - 1, c.var, *r)]
        # clamped both ways (an index is < t <= n - 1): the interval proves the read in
        # bounds, so no run-time check per lane
        w = at_pos(r, te.min(te.max(idx, const(0, "int32")), const(n - 1, "int32")))
        v = at_pos(r, t)
        held = (idx >= 0) & ((w >= v) if largest else (w <= v))
        return te.sum(te.cast(held, "int32"), axis=c)

    place = op_compute("topk_list_place", (n, *rest), ahead, REDUCE)

    def step(t, j, *r):
        at, slot = place[(t, *r)], te.cast(j, "int32")  # compared in int32: 8 lanes a vector
        shifted = state[(t - 1, te.max(j - 1, 0), *r)]
        return te.select(slot < at, state[(t - 1, j, *r)],
                         te.select(slot == at, te.cast(t, "int32"), shifted))

    update = op_compute("topk_list_step", (n, k, *rest), step, OPAQUE)
    lists = te.scan(init, update, state, inputs=[x], name="topk_lists")
    out_shape = _at(tuple(x.shape), ax, k)
    return op_compute("topk_list", out_shape,
                      lambda *i: te.cast(lists[(n - 1, i[ax], *i[:ax], *i[ax + 1:])], "int64"),
                      OPAQUE,
                      name="topk_indices")




def _block_compares(n: int, k: int, b: int) -> int:
    """The ranks' comparisons with blocks of b: 2 n b (ranks in blocks, candidates) + C^2
    (candidate ranks) + C k (selection), C = ceil(n / b) min(k, b) candidates."""
    c = -(-n // b) * min(b, k)
    return 2 * n * b + c * c + c * k


def _block(n: int, k: int) -> int:
    """The block that needs the fewest comparisons (_block_compares)."""
    if n <= 256:  # measured: below this the extra stages cost more than they save
        return n
    options = [b for b in (16, 32, 64, 128, 256, 512, 1024) if b < n] + [n]
    return min(options, key=lambda b: _block_compares(n, k, b))


def _at(i, ax, j):
    return i[:ax] + (j,) + i[ax + 1:]


def _ahead(w, iw, v, iv, largest):
    """(w at index iw) comes before (v at index iv): better, or equal at a lower index."""
    better = (w > v) if largest else (w < v)
    return better | ((w == v) & (iw < iv))


def _candidates(x, ax, n, k, b, largest):
    """Per block, its min(k, b) best elements in order: values and indices, [.., nb*kk, ..];
    slots past a short last block hold a value that ranks last and the index n + slot."""
    kk = min(b, k)
    nb = -(-n // b)
    m = te.reduce_axis((0, b), name="m")

    def block_rank(*i):
        pos = (i[ax] // b) * b + m.var
        ahead = _ahead(x[_at(i, ax, pos)], pos, x[i], i[ax], largest)
        return te.sum(te.cast(ahead, "int64"), axis=m, where=pos < n)

    rb = op_compute("topk_block_rank", x.shape, block_rank, REDUCE)
    j = te.reduce_axis((0, b), name="j")

    def index(*i):
        blk, r = i[ax] // kk, i[ax] % kk
        pos = blk * b + j.var
        hit = rb[_at(i, ax, pos)] == te.cast(r, "int64")
        return te.sum(te.select(hit, te.cast(pos, "int64"), const(0, "int64")), axis=j,
                      where=pos < n)

    shape = _at(tuple(x.shape), ax, nb * kk)
    found = op_compute("topk_candidate", shape, index, REDUCE)
    pad = te.min_value(x.dtype) if largest else te.max_value(x.dtype)

    def valid(i):  # slot r of block blk exists when the block has more than r elements
        return (i[ax] % kk) < n - (i[ax] // kk) * b

    def cand_index(*i):
        return te.select(valid(i), found[i], te.cast(i[ax], "int64") + const(n, "int64"))

    def cand_value(*i):
        safe = te.min(found[i], const(n - 1, "int64"))
        return te.select(valid(i), x[_at(i, ax, safe)], pad)

    # materialized (opaque): the candidate ranking reads each C times
    idx = op_compute("topk_candidate_index", shape, cand_index, OPAQUE)
    val = op_compute("topk_candidate_value", shape, cand_value, OPAQUE)
    return val, idx


def _rank_indices(val, idx, ax, k, largest):
    c = as_int(val.shape[ax])
    t = te.reduce_axis((0, c), name="t")

    def rank(*i):
        ahead = _ahead(val[_at(i, ax, t.var)], idx[_at(i, ax, t.var)], val[i], idx[i], largest)
        return te.sum(te.cast(ahead, "int64"), axis=t)

    ranks = op_compute("topk_rank", val.shape, rank, REDUCE)
    s = te.reduce_axis((0, c), name="s")
    out_shape = _at(tuple(val.shape), ax, k)

    def index(*r):
        # exactly one candidate has rank r: its index is the sum over the matching ranks
        return te.sum(te.select(ranks[_at(r, ax, s.var)] == te.cast(r[ax], "int64"),
                                idx[_at(r, ax, s.var)], const(0, "int64")), axis=s)

    return op_compute("topk_index", out_shape, index, REDUCE, name="topk_indices")


def _values_at(x, indices, ax, k, largest):
    out_shape = tuple(indices.shape)
    values = op_compute("topk", out_shape, lambda *r: x[_at(r, ax, indices[r])], OPAQUE,
                        name="topk_values", k=k, axis=ax, largest=largest)
    return values, indices


__all__ = ["topk"]
