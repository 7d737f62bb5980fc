"""Pass: simplify every expression using the ranges of the enclosing loops; drop provably true
guards and empty loops; replace single-iteration loops by their index."""

from __future__ import annotations

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.checks import checked_minimums
from ...ir.functor import StmtMutator, collect_vars, substitute
from ...ir.simplify import Analyzer, Simplifier


class _StmtSimplifier(StmtMutator):
    def __init__(self):
        super().__init__()
        self.an = Analyzer()
        self.expr = Simplifier(self.an)

    def visit_For(self, s: S.For):
        mn = self.expr.visit(s.min)
        ext = self.expr.visit(s.extent)
        n = E.as_int(ext)
        if n is not None and n <= 0:
            return None
        if n == 1:  # one iteration (also of a parallel loop: nothing to share out)
            mapping = {s.loop_var: mn}
            if _substitutes_in_exprs_only(s.body, mapping):
                return self._visit_substituted(s.body, mapping)
            return self.visit(substitute(s.body, mapping))
        saved = self.an.ranges.get(s.loop_var)
        self.an.bind_range(s.loop_var, mn, ext)
        if saved is not None:
            # a variable bound again: what the memo says of it held for the outer range. A
            # fresh one is in no entry yet (it appears only inside its loop), so the entries
            # of the enclosing scope stay true inside (ranges were only added)
            self.expr.memo.clear()
        body = self.visit(s.body)
        if saved is None:
            self.an.ranges.pop(s.loop_var, None)
        else:  # the same variable bound by an enclosing scope: restore its range
            self.an.ranges[s.loop_var] = saved
        self.expr.memo.clear()
        if body is None:
            return None
        if mn is s.min and ext is s.extent and body is s.body:
            return s
        return S.For(s.loop_var, mn, ext, s.kind, body, s.annotations)

    def _visit_substituted(self, body: S.Stmt, mapping: dict):
        """self.visit(substitute(body, mapping)) without building the substituted copy: the
        expression simplifier replaces the vars as it reaches them (the same result, since it
        works bottom-up; its memo is keyed by unsubstituted structure meanwhile)."""
        saved = self.expr.subst
        self.expr.subst = {**saved, **mapping}
        self.expr.memo.clear()
        try:
            return self.visit(body)
        finally:
            self.expr.subst = saved
            self.expr.memo.clear()

    def visit_IfThenElse(self, s: S.IfThenElse):
        cond = self.expr.visit(s.condition)
        if isinstance(cond, E.Const):
            return self.visit(s.then_case if cond.value else s.else_case)
        saved = dict(self.an.ranges)
        _assume(self.an, cond)
        self.expr.memo.clear()
        then = self.visit(s.then_case)
        self.an.ranges = saved
        self.expr.memo.clear()
        other = self.visit(s.else_case)
        if then is None and other is None:
            return None
        if then is None:
            return S.IfThenElse(E.Not(cond), other)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return S.IfThenElse(cond, then, other)

    def visit_SeqStmt(self, s: S.SeqStmt):
        new = [self.visit(x) for x in s.stmts]
        if all(a is b for a, b in zip(new, s.stmts)):
            return s
        return S.seq(*new)

    def visit_Allocate(self, s: S.Allocate):
        body = self.visit(s.body)
        if body is None:
            return None
        return s if body is s.body else S.Allocate(s.buffer, body)

    def visit_LetStmt(self, s: S.LetStmt):
        value = self.expr.visit(s.value)
        if isinstance(value, (E.Const, E.Var)):
            return self.visit(substitute(s.body, {s.var: value}))
        body = self.visit(s.body)
        if body is None:
            return None
        if value is s.value and body is s.body:
            return s
        return S.LetStmt(s.var, value, body)

    def visit_Store(self, s: S.Store):
        idx = tuple(self.expr.visit(i) for i in s.indices)
        val = self.expr.visit(s.value)
        pred = self.expr.visit(s.predicate) if s.predicate is not None else None
        if all(a is b for a, b in zip(idx, s.indices)) and val is s.value and pred is s.predicate:
            return s
        return S.Store(s.buffer, idx, val, pred)

    def visit_Evaluate(self, s):
        return S.Evaluate(self.expr.visit(s.value))


def _substitutes_in_exprs_only(body: S.Stmt, mapping: dict) -> bool:
    """Does substitute(body, mapping) only replace the vars inside the expressions that this
    pass simplifies? Not when it would also rebind a buffer allocated with a shape that
    mentions one, or replace a loop or let variable, or reach into a loop's annotations."""
    stack = [body]
    while stack:
        st = stack.pop()
        t = type(st)
        if st is None or t is S.Store or t is S.Evaluate:
            continue
        if t is S.For:
            if st.loop_var in mapping or not all(
                    isinstance(a, tuple) and a and isinstance(a[0], str) for a in st.annotations):
                return False
            stack.append(st.body)
        elif t is S.SeqStmt:
            stack.extend(st.stmts)
        elif t is S.IfThenElse:
            stack.append(st.then_case)
            stack.append(st.else_case)
        elif t is S.LetStmt:
            if st.var in mapping:
                return False
            stack.append(st.body)
        elif t is S.Allocate:
            if any(not collect_vars(d).isdisjoint(mapping) for d in st.buffer.shape
                   if isinstance(d, E.Expr)):
                return False
            stack.append(st.body)
        else:
            return False
    return True


def _assume(an: Analyzer, cond) -> None:
    """Tighten variable ranges with a condition known to hold (x < c, x <= c, x >= c, x > c)."""
    if isinstance(cond, E.And):
        _assume(an, cond.a)
        _assume(an, cond.b)
        return
    if type(cond) in (E.LT, E.LE, E.GT, E.GE) and isinstance(cond.a, E.Var) and \
            E.as_int(cond.b) is not None:
        c = E.as_int(cond.b)
        lo, hi = an.ranges.get(cond.a, (-float("inf"), float("inf")))
        if type(cond) is E.LT:
            hi = min(hi, c - 1)
        elif type(cond) is E.LE:
            hi = min(hi, c)
        elif type(cond) is E.GT:
            lo = max(lo, c + 1)
        else:
            lo = max(lo, c)
        an.ranges[cond.a] = (lo, hi)


def simplify_stmt(body: S.Stmt) -> S.Stmt:
    simplifier = _StmtSimplifier()
    simplifier.an.ranges.update(checked_minimums(body))
    out = simplifier.visit(body)
    return out if out is not None else S.Evaluate(E.const(0))
