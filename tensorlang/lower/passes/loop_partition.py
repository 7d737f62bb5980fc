"""Pass: loop partitioning. A loop whose body holds tail guards (`io * 6 + ii < 1024`) is split
into the iterations where every such guard provably holds and the rest:

    for io in range(171):              for io in range(170):      # guards proven: removed
      if io * 6 + ii < 1024: ...  ==>    ...
                                       for io in range(170, 171):
                                         if io * 6 + ii < 1024: ...

Without it a register-tiled kernel keeps a branch per row in its innermost loop, which costs
spills of the accumulator tile. Only loops of constant extent are partitioned, and only at the
first iteration where a guard can fail (found by bisection with the simplifier).

Serial loops are also cut where a conjunct of a guard starts to hold (a head guard: the
padding guards of guard_padded_reads, `z.outer * 14 + z + rx >= 1`) or stops to, so a
convolution's border tiles are split off its guard-free interior -- but only at conjuncts of
the loop's own and inner variables, which the cut turns into constants once the inner loops
are unrolled. A conjunct that also reads an outer variable (a kernel row's `oh + ry >= 1`
inside the row loop) would stay a guard in every piece; hoist_guards tests it once per
iteration instead, without copies of the loop. Parallel loops are cut at tails of whole
guards only: each piece of a parallel loop is one more launch of the thread pool."""

from __future__ import annotations

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator, collect_vars
from ...ir.simplify import Analyzer, simplify


def _guards(body, var, an: Analyzer) -> list:
    """(condition, ranges of the loops around it inside `body`) for guards that mention var."""
    found = []

    def walk(s, ranges):
        if s is None:
            return
        if isinstance(s, S.For):
            inner = dict(ranges)
            lo, hi = an.bound(s.min)[0], None
            ext_hi = Analyzer({**an.ranges, **inner}).bound(s.extent)[1]
            if lo != -float("inf") and ext_hi != float("inf"):
                hi = lo + ext_hi - 1
            inner[s.loop_var] = (lo, hi if hi is not None else float("inf"))
            walk(s.body, inner)
        elif isinstance(s, S.SeqStmt):
            for x in s.stmts:
                walk(x, ranges)
        elif isinstance(s, (S.Allocate, S.LetStmt)):
            walk(s.body, ranges)
        elif isinstance(s, S.IfThenElse):
            if var in collect_vars(s.condition):
                found.append((s.condition, ranges))
            walk(s.then_case, ranges)
            walk(s.else_case, ranges)

    walk(body, {})
    return found


def _holds(cond, var, at: int, an: Analyzer, ranges: dict, at_end: bool = False) -> bool:
    """cond provably holds for var in [start, at] (at_end: in [at, end]) and every value of
    the loops inside."""
    lo, hi = an.ranges[var]
    sub = Analyzer({**an.ranges, **ranges, var: (at, hi) if at_end else (lo, at)})
    out = simplify(cond, sub)
    return isinstance(out, E.Const) and bool(out.value)


class _Partition(Mutator):
    def __init__(self):
        super().__init__()
        self.an = Analyzer()

    def visit_For(self, s: S.For):
        # Outer loops first: once an outer loop is cut, the inner loops of its head see the
        # narrower range and their guards hold throughout (cutting inner loops first would split
        # e.g. `for ii in range(4)` of a 10 = 4 * 3 - 2 split into [0, 2) and [2, 4) for nothing).
        self.an.bind_range(s.loop_var, s.min, s.extent)
        mn, n = E.as_int(s.min), E.as_int(s.extent)
        cut = None
        if s.kind in ("serial", "parallel") and mn is not None and n is not None and n > 1:
            cut = self._cut(s, mn, n)
        if cut is not None:
            self.an.ranges.pop(s.loop_var, None)
            head = s.replace(extent=E.const(cut - mn))
            tail = s.replace(min=E.const(cut), extent=E.const(mn + n - cut))
            return S.seq(self.visit(head), self.visit(tail))
        body = self.visit(s.body)
        self.an.ranges.pop(s.loop_var, None)
        return s if body is s.body else s.replace(body=body)

    def _cut(self, loop: S.For, mn: int, n: int) -> int | None:
        """The first iteration where some guard may start to fail (a tail guard) or, for serial
        loops, starts to hold (a head guard), if it is inside the loop."""
        best = None
        head_cuts = loop.kind == "serial"
        last = mn + n - 1
        candidates = []
        for cond, ranges in _guards(loop.body, loop.loop_var, self.an):
            candidates.append((cond, ranges))
            if head_cuts:
                own = {loop.loop_var, *ranges}
                candidates += [(c, ranges) for c in E.conjuncts(cond)
                               if loop.loop_var in collect_vars(c) and collect_vars(c) <= own]
        for cond, ranges in candidates:
            at_first = _holds(cond, loop.loop_var, mn, self.an, ranges)
            at_last = _holds(cond, loop.loop_var, last, self.an, ranges, at_end=True)
            if at_first == at_last:
                continue  # always true (the simplifier removes it) or no single cut helps
            if not at_first and not head_cuts:
                continue
            # invariant: the guard is at_first up to lo, not at_first somewhere up to hi
            lo, hi = mn, last
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _holds(cond, loop.loop_var, mid, self.an, ranges, at_end=not at_first) \
                        == at_first:
                    lo = mid
                else:
                    hi = mid
            best = lo + 1 if best is None else min(best, lo + 1)
        return best


def partition_loops(body: S.Stmt) -> S.Stmt:
    return _Partition().visit(body)
