"""Pass: move heap allocations out of the serial loops around them, so that a buffer of symbolic
size is allocated once, not once per iteration. A buffer computed at a loop (compute_at) is
written before it is read in every iteration, so one allocation serves them all. A parallel
loop is a barrier: its iterations run at once and each needs its own buffer (codegen allocates
one per task instead, see CodeGen._task_body).

Why: a softmax row of symbolic length keeps its exp in a row buffer; allocated per row, the
aligned_alloc / free pair cost as much as a short row's work (so the schedule computed exp twice
instead, 1.6-3.5x the static kernel)."""

from __future__ import annotations

from ...ir import stmt as S
from ...ir.functor import StmtMutator, collect_vars


def leading_allocations(body: S.Stmt, loop_var) -> tuple[list[S.Buffer], S.Stmt]:
    """The heap buffers allocated in the chain of Allocates that starts `body` whose sizes do
    not depend on `loop_var`, and the body without them (the other Allocates kept, in order)."""
    hoisted: list[S.Buffer] = []
    kept: list[S.Buffer] = []
    while isinstance(body, S.Allocate):
        buf = body.buffer
        if buf.scope == "heap" and not any(loop_var in collect_vars(d) for d in buf.shape
                                           if not isinstance(d, int)):
            hoisted.append(buf)
        else:
            kept.append(buf)
        body = body.body
    for buf in reversed(kept):
        body = S.Allocate(buf, body)
    return hoisted, body


class _Hoist(StmtMutator):
    def visit_For(self, s: S.For):
        s = self.generic(s)
        if s.kind == "parallel":
            return s
        hoisted, body = leading_allocations(s.body, s.loop_var)
        if not hoisted:
            return s
        out: S.Stmt = s.replace(body=body)
        for buf in reversed(hoisted):
            out = S.Allocate(buf, out)
        return out


def hoist_allocations(body: S.Stmt) -> S.Stmt:
    return _Hoist().visit(body)
