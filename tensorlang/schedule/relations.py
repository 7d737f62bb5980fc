"""How a stage's loops relate to its compute's axes: the values of the axes given the values of
the loops, the tail guards that non-dividing splits need, and the loop extents given the axes'
ranges (which bound inference may shrink for a stage computed at another stage's loop)."""

from __future__ import annotations

from ..ir.expr import Expr, as_int
from ..ir.simplify import simplify
from .stage import Fuse, Split, ceildiv, split_extent


def leaf_extents(stage, root_extents: dict) -> dict:
    """Extent of every iteration variable, from the extents of the root axes."""
    ext = dict(root_extents)
    for rel in stage.relations:
        if isinstance(rel, Split):
            pe = ext[rel.parent]
            if rel.factor is not None:
                ext[rel.outer], ext[rel.inner] = ceildiv(pe, rel.factor), split_extent(rel.factor)
            else:
                ext[rel.outer], ext[rel.inner] = split_extent(rel.nparts), ceildiv(pe, rel.nparts)
        elif isinstance(rel, Fuse):
            ext[rel.fused] = simplify(ext[rel.outer] * ext[rel.inner])
    return ext


def root_values(stage, values: dict, extents: dict) -> tuple[dict, list]:
    """Given loop values (leaf IterVar -> Expr), the value of every iteration variable (relative
    to the root axes' minimum) plus the guard conditions of inexact splits."""
    vals = dict(values)
    guards: list[Expr] = []
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            inner_ext = extents[rel.inner]
            pv = vals[rel.outer] * inner_ext + vals[rel.inner]
            vals[rel.parent] = pv
            pe = extents[rel.parent]
            prod = simplify(extents[rel.outer] * inner_ext)
            ip, ie = as_int(prod), as_int(pe)
            if ip is None or ie is None or ip != ie:
                guards.append(pv < pe)
        elif isinstance(rel, Fuse):
            ie = extents[rel.inner]
            vals[rel.outer] = vals[rel.fused] // ie
            vals[rel.inner] = vals[rel.fused] % ie
    return vals, guards
