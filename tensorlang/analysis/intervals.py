"""The cheap half of the bounds proof (no isl): an index is in [0, extent) when interval
arithmetic over the loop or axis ranges says so, alone or relative to a guard that dominates the
read (`A[h + r - 1]` under `0 <= h + r - 1 < H`: the index minus the guarded expression is
>= 0). A select in an index is proven branch by branch, each under its side of the condition
(a reflect pad's `select(x % 26 < 14, x % 26, 26 - x % 26)`).

Used by the static proof (analysis/bounds.py, before isl) and by the run-time check pass
(lower/passes/check_indices.py, which leaves what this proves unchecked)."""

from __future__ import annotations

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.simplify import Analyzer, simplify

_FLIP = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT}


def nonneg_facts(cond, holds: bool) -> list:
    """Integer expressions that are >= 0 wherever `cond` is `holds` (those it states plainly:
    comparisons, joined by && where it holds, by || where it does not)."""
    if holds and isinstance(cond, E.And):
        return nonneg_facts(cond.a, True) + nonneg_facts(cond.b, True)
    if not holds and isinstance(cond, E.Or):
        return nonneg_facts(cond.a, False) + nonneg_facts(cond.b, False)
    if isinstance(cond, E.Not):
        return nonneg_facts(cond.a, not holds)
    t = type(cond)
    if t not in _FLIP and t is not E.EQ or not dt.is_int(cond.a.dtype):
        return []
    if t is E.EQ:
        return [cond.a - cond.b, cond.b - cond.a] if holds else []
    if not holds:
        t = _FLIP[t]
    a, b = cond.a, cond.b
    one = E.const(1, a.dtype)
    return [{E.LT: b - a - one, E.LE: b - a, E.GT: a - b - one, E.GE: a - b}[t]]


def nonneg(ranges: Analyzer, e, facts) -> bool:
    """Whether integer expression e >= 0 over `ranges`, alone or above one of `facts`."""
    if ranges.bound(e)[0] >= 0:
        return True
    return any(ranges.bound(simplify(e - f))[0] >= 0 for f in facts)


def in_bounds(ranges: Analyzer, index, extent, facts=()) -> bool:
    """Whether 0 <= index < extent is proven by intervals (False: not proven, not refuted)."""
    lo, hi = ranges.bound(index)
    if lo >= 0 and hi < ranges.bound(extent)[0]:  # most reads: no simplification needed
        return True
    index = simplify(index)
    if isinstance(index, E.Select):
        c = index.condition
        return (in_bounds(ranges, index.true_value, extent, [*facts, *nonneg_facts(c, True)])
                and in_bounds(ranges, index.false_value, extent,
                              [*facts, *nonneg_facts(c, False)]))
    if not nonneg(ranges, index, facts):
        return False
    return nonneg(ranges, simplify(extent - E.const(1, extent.dtype) - index), facts)
