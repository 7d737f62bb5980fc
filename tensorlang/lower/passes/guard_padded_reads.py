"""Pass: a reduction step that reads zero padding adds nothing, so it is skipped instead of
computed. An inlined pad puts a select into the accumulation:

    acc[i] = acc[i] + select(0 <= oh + ry - 1 < H && ..., x[...], 0.0f) * w[...]
==>
    if 0 <= oh + ry - 1 < H && ...:
      acc[i] = acc[i] + x[...] * w[...]

The guard is then something loop_partition can cut loops at (the interior of a convolution
loses it, only its borders keep one) and hoist_guards can move out of the loops it does not
depend on; a select can be neither. What padding contributes is exactly nothing for finite
operands, which is what every convolution library computes (an inf or nan weight times a
padding zero is the one case where the result differs).

Only selects whose condition is the same for every lane of an enclosing vectorized loop are
turned into guards (a condition that varies along the vector stays a select: a masked load)."""

from __future__ import annotations

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import StmtMutator, collect_vars


def _is_zero(e) -> bool:
    return isinstance(e, E.Const) and e.value == 0


def _unguard(e, vector_vars: set):
    """(condition, e with the select replaced by its true value) when e is a product whose
    factors include one select(c, v, 0) with c free of vector_vars; else None."""
    if isinstance(e, E.Select):
        if _is_zero(e.false_value) and not (collect_vars(e.condition) & vector_vars):
            return e.condition, e.true_value
        return None
    if isinstance(e, E.Mul):
        for side, other in ((e.a, e.b), (e.b, e.a)):
            found = _unguard(side, vector_vars)
            if found is not None:
                cond, inner = found
                return cond, (E.Mul(inner, other) if side is e.a else E.Mul(other, inner))
    if isinstance(e, E.Cast):
        found = _unguard(e.value, vector_vars)
        if found is not None:
            return found[0], e.replace(value=found[1])
    return None


class _Guard(StmtMutator):
    def __init__(self):
        super().__init__()
        self.vector_vars: set = set()

    def visit_For(self, s: S.For):
        if s.kind != "vectorized":
            return self.generic(s)
        self.vector_vars.add(s.loop_var)
        try:
            return self.generic(s)
        finally:
            self.vector_vars.discard(s.loop_var)

    def visit_Store(self, s: S.Store):
        v = s.value
        if s.predicate is not None or not isinstance(v, E.Add):
            return s
        for acc, term in ((v.a, v.b), (v.b, v.a)):
            if isinstance(acc, E.Load) and acc.buffer is s.buffer and \
                    E.structural_equal(acc.indices, s.indices):
                found = _unguard(term, self.vector_vars)
                if found is not None:
                    cond, inner = found
                    value = E.Add(acc, inner) if acc is v.a else E.Add(inner, acc)
                    return S.IfThenElse(cond, s.replace(value=value))
        return s


def guard_padded_reads(body: S.Stmt) -> S.Stmt:
    return _Guard().visit(body)
