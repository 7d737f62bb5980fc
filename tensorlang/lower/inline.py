"""Step 1 of lowering: substitute compute_inline'd stages into the stages that read them."""

from __future__ import annotations

from ..errors import ScheduleError
from ..ir.functor import MAX_EXPR_DEPTH, Mutator, expr_depth, fit_recursion, substitute
from ..te.tensor import Reduce, TensorRead


def inline_bodies(schedule) -> dict:
    """stage -> its body expressions with every read of an inlined stage replaced by that
    stage's expression (inlined stages are processed producers-first, so chains collapse)."""
    mut = _Inline(schedule)
    bodies: dict = {}
    for st in schedule.stages:
        body = tuple(mut.visit(b) for b in st.op.body)
        bodies[st] = body
        mut.depth_bound[st] = _depth_bound(mut, st, body)
        if st.attach_type == "inline":
            mut.inlined[st] = ([iv.var for iv in st.op.axis], body[0])
    return bodies


def _depth_bound(mut, st, body) -> int:
    """A bound on the depth of a stage's inlined body, its exact depth where that bound is over
    the limit (refused then: the walkers that follow recurse once per level). An inlined read
    puts the producer's body (its indices replaced by the reader's, no deeper than the reader)
    where the read was: at most twice the reader's depth plus the producer's."""
    if all(x is y for x, y in zip(body, st.op.body)):  # nothing inlined into it
        return st.op.expr_depth
    producers = [mut.depth_bound[p] for p in mut.inlined if p in mut.read_by(st)]
    bound = 2 * st.op.expr_depth + max(producers, default=0)
    if bound > MAX_EXPR_DEPTH:
        bound = expr_depth(body)
        fit_recursion(bound, f"stage {st.name} with the stages inlined into it", ScheduleError,
                      "compute the inlined stages at the root or at a loop instead")
    return bound


# module level, not a class statement per call: the legality model inlines the bodies of every
# new schedule, so this runs once per tuning candidate
class _Inline(Mutator):
    def __init__(self, schedule):
        super().__init__()
        self.schedule = schedule
        self.inlined: dict = {}  # stage -> (axis vars, body expr)
        self.depth_bound: dict = {}  # stage -> a bound on the depth of its inlined body

    def read_by(self, st) -> set:
        """The stages whose tensors stage `st` reads."""
        return {self.schedule.stage_map.get(t.op) for t in st.op.input_tensors}

    def visit_TensorRead(self, r):
        idx = tuple(self.visit(i) for i in r.indices)
        st = self.schedule.stage_map.get(r.tensor.op)
        if st is not None and st in self.inlined:
            axis_vars, body = self.inlined[st]
            return substitute(body, dict(zip(axis_vars, idx)))
        if all(a is b for a, b in zip(idx, r.indices)):
            return r
        return TensorRead(r.tensor, idx)

    def visit_Reduce(self, r):
        src = tuple(self.visit(s) for s in r.source)
        cond = self.visit(r.condition) if r.condition is not None else None
        if all(a is b for a, b in zip(src, r.source)) and cond is r.condition:
            return r
        return Reduce(r.combiner, src, r.axis, cond, r.value_index)
