"""Pass: unroll loops marked `unroll`, and loops under an `auto_unroll_max_step` pragma whose
total trip count is at most the pragma's value."""

from __future__ import annotations

from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import StmtMutator, substitute

PRAGMA = "auto_unroll_max_step"


def _steps(s) -> int | None:
    """Total number of innermost statement executions of a subtree (None if not constant)."""
    if s is None:
        return 0
    if isinstance(s, S.For):
        n = E.as_int(s.extent)
        inner = _steps(s.body)
        return None if n is None or inner is None else n * inner
    if isinstance(s, S.SeqStmt):
        total = 0
        for x in s.stmts:
            v = _steps(x)
            if v is None:
                return None
            total += v
        return total
    if isinstance(s, (S.Allocate, S.LetStmt)):
        return _steps(s.body)
    if isinstance(s, S.IfThenElse):
        a, b = _steps(s.then_case), _steps(s.else_case)
        return None if a is None or b is None else max(a, b)
    return 1


class _Unroll(StmtMutator):
    def __init__(self):
        super().__init__()
        self.auto_limit = 0

    def visit_For(self, s: S.For):
        saved = self.auto_limit
        for k, v in s.annotations:
            if k == PRAGMA:
                self.auto_limit = v
        body = self.visit(s.body)
        self.auto_limit = saved
        n = E.as_int(s.extent)
        want = s.kind == "unrolled"
        if not want and s.kind == "serial" and self.auto_limit and n is not None:
            steps = _steps(body)  # of one iteration: the loop's total is n times that
            want = steps is not None and n * steps <= self.auto_limit
        if want:
            if n is None:
                raise LoweringError(f"unroll: loop {s.loop_var.name} has a non-constant extent "
                                    f"{s.extent!r}; split it by a constant factor first")
            return S.seq(*[substitute(body, {s.loop_var: s.min + i}) for i in range(n)])
        if body is s.body:
            return s
        return S.For(s.loop_var, s.min, s.extent, s.kind, body, s.annotations)


def unroll_loops(body: S.Stmt) -> S.Stmt:
    return _Unroll().visit(body)
