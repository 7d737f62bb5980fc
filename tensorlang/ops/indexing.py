"""Indexing by index tuples: gather_nd (ONNX GatherND, with batch_dims) and scatter_nd (ONNX
ScatterND, reductions none / add / mul / max / min).

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
    op_compute,
    prod_of,
    static_shape,
)

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _wrapped(v, n: int):
    """A run-time index as int64 with ONNX's negative indices counted from the end."""
    v = te.cast(v, "int64")
    return te.select(v < 0, v + n, v)


def _index_tensor(op: str, indices: Tensor) -> tuple:
    check_tensor(op, "indices", indices)
    if not dt.is_int(indices.dtype):
        raise ValueError(f"{op}: indices must be an integer tensor, got {indices.dtype}")
    shp = static_shape(op, "indices", indices)
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
    ds, ishp = static_shape(op, "data", data), _index_tensor(op, indices)
    b = check_int(op, "batch_dims", batch_dims, 0)
    k, q, r = ishp[-1], len(ishp), len(ds)
    if b >= min(q, r) or not 1 <= k <= r - b:
        raise ValueError(f"{op}: indices {ishp} (tuples of {k}) with batch_dims={b} do not fit "
                         f"data {ds}: need batch_dims < rank of both and 1 <= k <= "
                         f"{r - b}")
    if ishp[:b] != ds[:b]:
        raise ValueError(f"{op}: the batch axes of indices {ishp[:b]} and data {ds[:b]} differ")
    shape = ishp[:-1] + ds[b + k:]

    def f(*o):
        lead, rest = o[:q - 1], o[q - 1:]
        idx = list(lead[:b])
        for j in range(k):
            idx.append(_wrapped(indices[tuple(lead) + (j,)], ds[b + j]))
        return data[tuple(idx) + tuple(rest)]

    return op_compute(op, shape, f, INJECTIVE, batch_dims=b)


def _scatter_args(op, data, indices, updates, reduction):
    check_tensor(op, "data", data)
    check_tensor(op, "updates", updates)
    ds, ishp = static_shape(op, "data", data), _index_tensor(op, indices)
    us = static_shape(op, "updates", updates)
    k = ishp[-1]
    if not 1 <= k <= len(ds):
        raise ValueError(f"{op}: index tuples of {k} do not fit data of rank {len(ds)}")
    want = ishp[:-1] + ds[k:]
    if us != want:
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
            src = te.max(te.min(w, const(count - 1, "int64")), const(0, "int64"))
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


__all__ = ["gather_nd", "scatter_nd"]
