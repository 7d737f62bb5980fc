"""Indexing by index tuples: gather_nd (ONNX GatherND, with batch_dims) and scatter_nd (ONNX
ScatterND, reductions none / add / mul / max / min); by an index per element along one axis:
gather_elements (ONNX GatherElements, torch.gather).

Every index is a run-time value: each is read through a load whose index it is, so the
run-time check that lowering puts on data-dependent indices (lower/passes/check_indices.py)
makes an index outside [-n, n) fail the kernel with a KernelError instead of reading or
writing out of bounds. Negative indices count from the end.

scatter_nd has no scatter statement to lower to: it is computed from the output's side. Each
update's target cell (a load from a table of cell numbers at the update's index: the checked
read) is compared with every output cell; with reduction none the last update that targets a
cell wins (max of the update numbers), with a reduction all of them combine with the data.
Work: O(cells x updates) for none, O(output x updates) with a reduction (the updates of
exported models are few: masked assignments, cache writes)."""

from __future__ import annotations

from .. import te
from ..ir import dtype as dt
from ..ir.expr import const
from ..te.tensor import Tensor
from ._base import (
    INJECTIVE,
    OPAQUE,
    REDUCE,
    check_int,
    check_tensor,
    dim_equal,
    dims_of,
    normalize_axis,
    op_compute,
    prod_of,
    static_shape,
)

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _wrapped(v, n: int):
    """A run-time index as int64 with ONNX's negative indices counted from the end."""
    v = te.cast(v, "int64")
    return te.select(v < 0, v + n, v)


def _index_tensor(op: str, indices: Tensor, symbolic: bool = False) -> tuple:
    check_tensor(op, "indices", indices)
    if not dt.is_int(indices.dtype):
        raise ValueError(f"{op}: indices must be an integer tensor, got {indices.dtype}")
    shp = tuple(indices.shape) if symbolic else static_shape(op, "indices", indices)
    if len(shp) < 1:
        raise ValueError(f"{op}: indices must have rank >= 1 (its last axis holds the index "
                         "tuples)")
    return shp


def gather_nd(data: Tensor, indices: Tensor, batch_dims: int = 0) -> Tensor:
    """ONNX GatherND: indices [..., k] picks slices of data; the first batch_dims axes of data
    and indices are matched (a batch of gathers). Output: indices.shape[:-1] +
    data.shape[batch_dims + k:]."""
    op = "gather_nd"
    check_tensor(op, "data", data)
    # symbolic extents are allowed (a batch, a sequence: an exported attention mask's
    # indexing); the tuples' length sizes the index, so it is a constant
    ds = dims_of(op, "data", data)
    _index_tensor(op, indices, symbolic=True)
    ishp = dims_of(op, "indices", indices, constant=(-1,), why="the index tuples' length")
    b = check_int(op, "batch_dims", batch_dims, 0)
    k, q, r = ishp[-1], len(ishp), len(ds)
    if b >= min(q, r) or not 1 <= k <= r - b:
        raise ValueError(f"{op}: indices {ishp} (tuples of {k}) with batch_dims={b} do not fit "
                         f"data {ds}: need batch_dims < rank of both and 1 <= k <= "
                         f"{r - b}")
    if not all(dim_equal(a, d) for a, d in zip(ishp[:b], ds[:b])):
        raise ValueError(f"{op}: the batch axes of indices {ishp[:b]} and data {ds[:b]} differ")
    shape = ishp[:-1] + ds[b + k:]

    def f(*o):
        lead, rest = o[:q - 1], o[q - 1:]
        idx = list(lead[:b])
        for j in range(k):
            idx.append(_wrapped(indices[tuple(lead) + (j,)], ds[b + j]))
        return data[tuple(idx) + tuple(rest)]

    return op_compute(op, shape, f, INJECTIVE, batch_dims=b)


def gather_elements(data: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
    """ONNX GatherElements (torch.gather): out[i] = data[i with its ``axis`` coordinate replaced
    by indices[i]]. Output: indices.shape; indices has data's rank, and along every other axis
    at most data's extent."""
    op = "gather_elements"
    check_tensor(op, "data", data)
    _index_tensor(op, indices, symbolic=True)
    ds, ishp = dims_of(op, "data", data), dims_of(op, "indices", indices)
    r = len(ds)
    ax = normalize_axis(op, "axis", axis, r)
    if len(ishp) != r or not all(_fits(i, d) for j, (i, d) in enumerate(zip(ishp, ds))
                                 if j != ax):
        raise ValueError(f"{op}: indices {ishp} do not fit data {ds} along axis {ax}: need the "
                         "same rank and, on every other axis, at most data's extent")

    def f(*o):
        idx = list(o)
        idx[ax] = _wrapped(indices[o], ds[ax])
        return data[tuple(idx)]

    return op_compute(op, ishp, f, INJECTIVE, axis=ax)


def _fits(i, d) -> bool:
    """An extent i that is at most d at every size (symbolic ones: the same, or i is 1)."""
    if isinstance(i, int) and isinstance(d, int):
        return i <= d
    return dim_equal(i, d) or i == 1


def _scatter_args(op, data, indices, updates, reduction):
    check_tensor(op, "data", data)
    check_tensor(op, "updates", updates)
    # symbolic extents are allowed, as in gather_nd (RWKV's state written at a position of a
    # dynamic batch); the tuples' length sizes the index, so it is a constant
    _index_tensor(op, indices, symbolic=True)
    ds, us = dims_of(op, "data", data), dims_of(op, "updates", updates)
    ishp = dims_of(op, "indices", indices, constant=(-1,), why="the index tuples' length")
    k = ishp[-1]
    if not 1 <= k <= len(ds):
        raise ValueError(f"{op}: index tuples of {k} do not fit data of rank {len(ds)}")
    want = ishp[:-1] + ds[k:]
    if len(us) != len(want) or not all(dim_equal(a, b) for a, b in zip(us, want)):
        raise ValueError(f"{op}: updates {us} must have shape indices.shape[:-1] + "
                         f"data.shape[{k}:] = {want}")
    if updates.dtype != data.dtype:
        raise ValueError(f"{op}: updates are {updates.dtype}, data {data.dtype}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {', '.join(REDUCTIONS)}; got "
                         f"{reduction!r}")
    return ds, ishp, k


def _flat(idx, shape) -> object:
    flat = None
    for i, n in zip(idx, shape):
        flat = i if flat is None else flat * n + i
    return flat if flat is not None else const(0, "int64")


def _targets(data_shape, indices: Tensor, ishp, k: int) -> Tensor:
    """The cell number (row-major over data.shape[:k]) each update writes, read from a table
    of cell numbers at the update's index: an index out of range fails that checked read."""
    cells = op_compute("scatter_nd_cells", data_shape[:k],
                       lambda *p: te.cast(_flat(p, data_shape[:k]), "int64"), OPAQUE)

    def f(*i):
        idx = [_wrapped(indices[tuple(i) + (j,)], data_shape[j]) for j in range(k)]
        return cells[tuple(idx)]

    return op_compute("scatter_nd_target", ishp[:-1], f, OPAQUE)


def scatter_nd(data: Tensor, indices: Tensor, updates: Tensor, reduction: str = "none") -> Tensor:
    """ONNX ScatterND: a copy of data where updates[i, ...] is written to (reduction none) or
    combined into (add, mul, max, min) data[indices[i], ...]. With reduction none and an index
    twice, the later update wins (onnxruntime's order; ONNX leaves it undefined)."""
    op = "scatter_nd"
    ds, ishp, k = _scatter_args(op, data, indices, updates, reduction)
    target = _targets(ds, indices, ishp, k)
    ups = ishp[:-1]
    red = [te.reduce_axis((0, n), name=f"u{j}") for j, n in enumerate(ups)]
    uvars = tuple(a.var for a in red)
    hit = lambda p: target[uvars] == te.cast(_flat(p, ds[:k]), "int64")
    if reduction == "none":
        count = prod_of(ups)
        owner = op_compute("scatter_nd_owner", ds[:k], lambda *p: te.max(
            te.select(hit(p), te.cast(_flat(uvars, ups), "int64"), const(-1, "int64")),
            axis=red), REDUCE)

        def f(*o):
            p, rest = o[:k], o[k:]
            w = owner[p]
            last = const(count - 1, "int64") if isinstance(count, int) else te.cast(
                count - 1, "int64")
            src = te.max(te.min(w, last), const(0, "int64"))
            uidx, left = [], src
            for n in reversed(ups):
                uidx.insert(0, left % n)
                left = left // n
            return te.select(w >= 0, updates[tuple(uidx) + tuple(rest)], data[o])

        return op_compute(op, ds, f, OPAQUE, reduction=reduction)
    reducer = {"add": te.sum, "mul": te.prod, "max": te.max, "min": te.min}[reduction]
    acc = op_compute("scatter_nd_combine", ds, lambda *o: reducer(
        updates[uvars + tuple(o[k:])], axis=red, where=hit(o[:k])), REDUCE)
    combine = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": te.max,
               "min": te.min}[reduction]
    return op_compute(op, ds, lambda *o: combine(data[o], acc[o]), OPAQUE, reduction=reduction)


def scatter_nd_plan(indices, data_shape, reduction: str = "none"):
    """For indices known when the kernel is built (numpy): per data cell (data.shape[:k]) the
    numbers of the updates that reach it, in order, padded with -1 to the largest count:
    [cells..., D] int64 (D = 1 for reduction none: the last update wins). IndexError for an
    index outside [-n, n)."""
    import numpy as np

    idx = np.asarray(indices, dtype=np.int64)
    k = idx.shape[-1]
    cells = tuple(int(n) for n in data_shape[:k])
    flat = idx.reshape(-1, k)
    bad = (flat < -np.array(cells)) | (flat >= np.array(cells))
    if bad.any():
        i = int(np.argwhere(bad.any(axis=1))[0][0])
        raise IndexError(f"scatter_nd: update {i} has index {flat[i].tolist()}, outside the "
                         f"data's {list(cells)} (negative counts from the end)")
    wrapped = np.where(flat < 0, flat + np.array(cells), flat)
    target = np.ravel_multi_index(tuple(wrapped.T), cells) if k else np.zeros(len(flat), int)
    lists: dict = {}
    for u, t in enumerate(target.tolist()):
        lists.setdefault(t, []).append(u)
    depth = 1 if reduction == "none" else max((len(v) for v in lists.values()), default=1)
    plan = np.full((int(np.prod(cells)), depth), -1, np.int64)
    for t, us in lists.items():
        plan[t, :len(us[-depth:])] = us[-depth:] if reduction == "none" else us
    return plan.reshape(cells + (depth,))


def scatter_nd_planned(data: Tensor, plan: Tensor, updates: Tensor,
                       reduction: str = "none") -> Tensor:
    """scatter_nd with the updates per cell given (scatter_nd_plan: indices known at build
    time, as exported slice assignments have): each output element reads its cell's few
    updates, O(output x D) instead of O(cells x updates). updates: [count, data.shape[k:]...]
    flattened over the index axes."""
    op = "scatter_nd_planned"
    check_tensor(op, "data", data)
    check_tensor(op, "plan", plan)
    check_tensor(op, "updates", updates)
    ds, ps, us = (static_shape(op, n, t) for n, t in (("data", data), ("plan", plan),
                                                       ("updates", updates)))
    k, depth = len(ps) - 1, ps[-1]
    if not dt.is_int(plan.dtype) or ps[:-1] != ds[:k] or us[1:] != ds[k:]:
        raise ValueError(f"{op}: plan {ps} ({plan.dtype}) and updates {us} do not fit data {ds}"
                         f": need an integer plan of data.shape[:k] + (D,) and updates of "
                         f"(count,) + data.shape[k:]")
    if reduction not in REDUCTIONS or (reduction == "none" and depth != 1):
        raise ValueError(f"{op}: reduction must be one of {', '.join(REDUCTIONS)} (none with a "
                         f"plan of depth 1); got {reduction!r} with depth {depth}")
    combine = {"none": lambda a, b: b, "add": lambda a, b: a + b, "mul": lambda a, b: a * b,
               "max": te.max, "min": te.min}[reduction]

    def f(*o):
        p, rest = o[:k], o[k:]
        v = data[o]
        for d in range(depth):
            u = plan[tuple(p) + (d,)]
            src = te.max(te.min(u, const(us[0] - 1, u.dtype)), const(0, u.dtype))
            v = te.select(u >= 0, combine(v, updates[(src,) + tuple(rest)]), v)
        return v

    return op_compute(op, ds, f, INJECTIVE, reduction=reduction)


def scatter_nd_box(indices, data_shape):
    """For indices known at build time (numpy): ((starts, steps) of the first k axes) when the
    index tuples are a regular grid, index [i0, .., ik-1] of the updates writing cell
    (start_d + step_d * i_d)_d with steps >= 1 (an exported slice assignment y[a:b:s, ...] =
    u); None otherwise. IndexError for an index outside [-n, n)."""
    import numpy as np

    idx = np.asarray(indices, dtype=np.int64)
    k = idx.shape[-1]
    grid = idx.shape[:-1]
    cells = np.array(data_shape[:k])
    if len(grid) != k or 0 in grid:
        return None
    if ((idx < -cells) | (idx >= cells)).any():
        return None  # scatter_nd_plan names the bad index
    idx = np.where(idx < 0, idx + cells, idx)
    starts, steps = [], []
    for d in range(k):
        lo = int(idx[(0,) * k + (d,)])
        step = int(idx[(0,) * d + (1,) + (0,) * (k - d - 1) + (d,)]) - lo if grid[d] > 1 else 1
        want = lo + step * np.arange(grid[d]).reshape((1,) * d + (-1,) + (1,) * (k - d - 1))
        if step < 1 or not np.array_equal(idx[..., d], np.broadcast_to(want, grid)):
            return None
        starts.append(lo)
        steps.append(step)
    return starts, steps


def scatter_nd_boxed(data: Tensor, updates: Tensor, starts, steps,
                     reduction: str = "none") -> Tensor:
    """scatter_nd whose index tuples are a regular grid (scatter_nd_box): updates [g0, ..,
    gk-1, data.shape[k:]...] written to (or combined into) the cells start_d + step_d * i_d:
    an elementwise select over the output, no index read at all."""
    op = "scatter_nd_boxed"
    check_tensor(op, "data", data)
    check_tensor(op, "updates", updates)
    ds, us = static_shape(op, "data", data), static_shape(op, "updates", updates)
    k = len(starts)
    if len(steps) != k or us[k:] != ds[k:] or any(
            s < 1 or lo < 0 or lo + s * (g - 1) >= n
            for lo, s, g, n in zip(starts, steps, us[:k], ds[:k])):
        raise ValueError(f"{op}: updates {us} at starts {list(starts)}, steps {list(steps)} do "
                         f"not fit data {ds}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {', '.join(REDUCTIONS)}; got "
                         f"{reduction!r}")
    combine = {"none": lambda a, b: b, "add": lambda a, b: a + b, "mul": lambda a, b: a * b,
               "max": te.max, "min": te.min}[reduction]

    def f(*o):
        inside, src = [], []
        for d in range(k):
            t = o[d] - starts[d]
            inside += [t >= 0, t < steps[d] * (us[d] - 1) + 1]
            if steps[d] > 1:
                inside.append(t % steps[d] == 0)
            src.append(t // steps[d] if steps[d] > 1 else t)
        v = data[o]
        return te.select(te.all(*inside), combine(v, updates[tuple(src) + tuple(o[k:])]), v)

    return op_compute(op, ds, f, INJECTIVE, starts=list(starts), steps=list(steps),
                      reduction=reduction)


# scatter_nd_box and scatter_nd_plan are numpy helpers of the importer, not ops
__all__ = ["gather_elements", "gather_nd", "scatter_nd", "scatter_nd_boxed", "scatter_nd_planned"]
