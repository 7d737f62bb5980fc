"""Selection: topk (ONNX TopK)."""
# ruff: noqa: TRY004 - bad attributes raise ValueError (the library contract)

from __future__ import annotations

from .. import te
from ..ir.expr import as_int, const
from ..te.tensor import Tensor
from ._base import OPAQUE, REDUCE, check_int, op_compute, scan_axis


def topk(x: Tensor, k: int, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    """ONNX TopK: (values, indices) of the k largest (smallest) elements along `axis`, sorted,
    ties broken by the lower index first (ONNX's rule).

    Two ways, neither with data-dependent control flow. Mostly a running top-k list per row
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
    k = check_int("topk", "k", k, 0)
    if k > n:
        raise ValueError(f"topk: k={k} is larger than the axis ({n} elements)")
    if _insertion_fits(x, ax, n, k):
        return _values_at(x, _insertion_indices(x, ax, n, k, largest), ax, k, largest)
    b = _block(n, k)
    cand_val, cand_idx = _candidates(x, ax, n, k, b, largest)
    return _select(x, cand_val, cand_idx, ax, k, largest)


# Measured (one thread, [rows, n] float32, ranks -> insertion, ms): [8,1000] k=10 0.218 ->
# 0.055, [8,300] k=4 0.066 -> 0.012, [8,256] k=256 0.44 -> 0.27, [8,1000] k=100 0.77 -> 0.46,
# [8,4000] k=50 3.7 -> 0.9, [8,4000] k=200 7.8 -> 5.1 (a 26 MB state), but [8,8000] k=300
# 21 -> 61 (77 MB, out of the caches). With fewer than 4 rows (no vector across them):
# [1,1000] k=1 0.017 -> 0.007, [2,1000] k=3 0.045 -> 0.012, [1,4000] k=4 0.061 -> 0.065,
# [2,1000] k=10 0.042 -> 0.059.
INSERTION_MAX_BYTES = 32 << 20  # the scan keeps every step's list: n*rows*k int32 indices
INSERTION_MAX_K_FEW_ROWS = 4


def _insertion_fits(x, ax: int, n: int, k: int) -> bool:
    rows = 1
    for d, extent in enumerate(x.shape):
        if d != ax:
            rows *= as_int(extent) if as_int(extent) is not None else 1 << 40
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




def _block(n: int, k: int) -> int:
    """The block that needs the fewest comparisons: 2 n b (ranks in blocks, candidates) +
    C^2 (candidate ranks) + C k (selection), C = ceil(n / b) min(k, b) candidates."""
    def cost(b):
        c = -(-n // b) * min(b, k)
        return 2 * n * b + c * c + c * k

    if n <= 256:  # measured: below this the extra stages cost more than they save
        return n
    options = [b for b in (16, 32, 64, 128, 256, 512, 1024) if b < n] + [n]
    return min(options, key=cost)


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


def _select(x, val, idx, ax, k, largest):
    c = as_int(val.shape[ax])
    t = te.reduce_axis((0, c), name="t")

    def rank(*i):
        ahead = _ahead(val[_at(i, ax, t.var)], idx[_at(i, ax, t.var)], val[i], idx[i], largest)
        return te.sum(te.cast(ahead, "int64"), axis=t)

    ranks = op_compute("topk_rank", val.shape, rank, REDUCE)
    s = te.reduce_axis((0, c), name="s")
    out_shape = _at(tuple(x.shape), ax, k)

    def index(*r):
        # exactly one candidate has rank r: its index is the sum over the matching ranks
        return te.sum(te.select(ranks[_at(r, ax, s.var)] == te.cast(r[ax], "int64"),
                                idx[_at(r, ax, s.var)], const(0, "int64")), axis=s)

    indices = op_compute("topk_index", out_shape, index, REDUCE, name="topk_indices")
    return _values_at(x, indices, ax, k, largest)


def _values_at(x, indices, ax, k, largest):
    out_shape = tuple(indices.shape)
    values = op_compute("topk", out_shape, lambda *r: x[_at(r, ax, indices[r])], OPAQUE,
                        name="topk_values", k=k, axis=ax, largest=largest)
    return values, indices


__all__ = ["topk"]
