"""Pass: multi-dimensional buffer accesses become one flat row-major index."""

from __future__ import annotations

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator
from ...ir.simplify import simplify


def flat_index(buffer: S.Buffer, indices: tuple) -> E.Expr:
    if len(indices) == 1:
        return indices[0]
    if not indices:  # a 0-d (scalar) tensor, e.g. a reduction over all axes: one element
        return E.const(0)
    idx = indices[0]
    for d in range(1, len(indices)):
        idx = idx * buffer.shape[d] + indices[d]
    return idx


class _Flatten(Mutator):
    def visit_Load(self, e: E.Load):
        idx = tuple(self.visit(i) for i in e.indices)
        if len(idx) == 1 and idx[0] is e.indices[0]:
            return e
        return E.Load(e.buffer, (simplify(flat_index(e.buffer, idx)),))

    def visit_Store(self, s: S.Store):
        idx = tuple(self.visit(i) for i in s.indices)
        val = self.visit(s.value)
        pred = self.visit(s.predicate) if s.predicate is not None else None
        return S.Store(s.buffer, (simplify(flat_index(s.buffer, idx)),), val, pred)


def storage_flatten(body: S.Stmt) -> S.Stmt:
    return _Flatten().visit(body)
