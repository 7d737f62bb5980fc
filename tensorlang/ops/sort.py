"""Selection: topk (ONNX TopK)."""
# ruff: noqa: TRY004 - bad attributes raise ValueError (the library contract)

from __future__ import annotations

from .. import te
from ..ir import dtype as dt
from ..ir.expr import as_int, const
from ..te.tensor import Tensor
from ._base import OPAQUE, REDUCE, check_int, check_tensor, normalize_axis, op_compute


def topk(x: Tensor, k: int, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    """ONNX TopK: (values, indices) of the k largest (smallest) elements along `axis`, sorted,
    ties broken by the lower index first (ONNX's rule).

    Each element's rank is the number of elements that precede it in that order (a
    reduction over the axis), and output position r takes the element of rank r: n*n
    comparisons per row of n, no data-dependent control flow, every output independent. Meant
    for the axes of exported models (detections, beams, a few thousand elements); NaN inputs
    have no defined rank (ONNX leaves their order unspecified)."""
    check_tensor("topk", "x", x)
    if not isinstance(largest, bool):
        raise ValueError(f"topk: largest must be a bool, got {largest!r}")
    if dt.is_bool(x.dtype):
        raise ValueError("topk: x must be numeric, got bool")
    ax = normalize_axis("topk", "axis", axis, x.ndim)
    n = as_int(x.shape[ax])
    if n is None:
        raise ValueError(f"topk: the axis needs a constant extent, got {x.shape[ax]!r}")
    k = check_int("topk", "k", k, 0)
    if k > n:
        raise ValueError(f"topk: k={k} is larger than the axis ({n} elements)")

    def at(i, j):
        return i[:ax] + (j,) + i[ax + 1:]

    m = te.reduce_axis((0, n), name="m")

    def rank(*i):
        v, w = x[i], x[at(i, m.var)]
        ahead = (w > v) if largest else (w < v)
        ahead = ahead | ((w == v) & (m.var < i[ax]))
        return te.sum(te.cast(ahead, "int64"), axis=m)

    ranks = op_compute("topk_rank", x.shape, rank, REDUCE)
    j = te.reduce_axis((0, n), name="j")
    out_shape = tuple(x.shape[:ax]) + (k,) + tuple(x.shape[ax + 1:])

    def index(*r):
        # exactly one j has rank r: its index is the sum of j over the matching ranks
        return te.sum(te.select(ranks[at(r, j.var)] == te.cast(r[ax], "int64"),
                                te.cast(j.var, "int64"), const(0, "int64")), axis=j)

    indices = op_compute("topk_index", out_shape, index, REDUCE, name="topk_indices")
    values = op_compute("topk", out_shape, lambda *r: x[at(r, indices[r])], OPAQUE,
                        name="topk_values", k=k, axis=ax, largest=largest)
    return values, indices


__all__ = ["topk"]
