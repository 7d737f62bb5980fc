"""Step 1 of lowering: substitute compute_inline'd stages into the stages that read them."""

from __future__ import annotations

from ..ir.functor import Mutator, substitute
from ..te.tensor import Reduce, TensorRead


def inline_bodies(schedule) -> dict:
    """stage -> its body expressions with every read of an inlined stage replaced by that
    stage's expression (inlined stages are processed producers-first, so chains collapse)."""
    mut = _Inline(schedule)
    bodies: dict = {}
    for st in schedule.stages:
        body = tuple(mut.visit(b) for b in st.op.body)
        bodies[st] = body
        if st.attach_type == "inline":
            mut.inlined[st] = ([iv.var for iv in st.op.axis], body[0])
    return bodies


# module level, not a class statement per call: the legality model inlines the bodies of every
# new schedule, so this runs once per tuning candidate
class _Inline(Mutator):
    def __init__(self, schedule):
        super().__init__()
        self.schedule = schedule
        self.inlined: dict = {}  # stage -> (axis vars, body expr)

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
