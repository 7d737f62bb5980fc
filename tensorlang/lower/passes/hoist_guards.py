"""Pass: move guards out of the loops they do not depend on. A loop whose whole body is a guard
keeps, inside, only the conjuncts that mention its variable; the others are tested once, above it:

    for rci in range(16):                   if oh >= 1:
      for z in range(14):                     for rci in range(16):
        if oh >= 1 && z + rx >= 1:   ==>        for z in range(14):
          acc[z] = ...                            if z + rx >= 1:
                                                    acc[z] = ...

Run before vectorize, a guard leaves the vector loop (which then has a straight-line body);
run after unroll, the unrolled copies' guards have folded to constants and what is left is
tested once per tile instead of once per statement. Moving a side-effect-free test out of a
loop is always valid: inside, it had the same value in every iteration."""

from __future__ import annotations

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator, collect_vars


def _conjuncts(c) -> list:
    if isinstance(c, E.And):
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _all(cs: list):
    out = cs[0]
    for c in cs[1:]:
        out = E.And(out, c)
    return out


class _Hoist(Mutator):
    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        if isinstance(body, S.IfThenElse) and body.else_case is None:
            parts = _conjuncts(body.condition)
            outside = [c for c in parts if s.loop_var not in collect_vars(c)]
            if outside:
                inside = [c for c in parts if s.loop_var in collect_vars(c)]
                then = S.IfThenElse(_all(inside), body.then_case) if inside else body.then_case
                return S.IfThenElse(_all(outside), s.replace(body=then))
        return s if body is s.body else s.replace(body=body)


def hoist_guards(body: S.Stmt) -> S.Stmt:
    return _Hoist().visit(body)
