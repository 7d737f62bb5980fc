"""Pass: decide where each intermediate buffer lives. Small buffers of constant size go on the
stack (where LLVM can promote them to registers, e.g. a matmul's accumulator tile); large or
symbolically sized ones on the heap (64-byte aligned)."""

from __future__ import annotations

from ...ir import stmt as S
from ...ir.functor import Mutator

STACK_LIMIT_BYTES = 128 * 1024


class _Plan(Mutator):
    def __init__(self):
        super().__init__()
        self.remap: dict = {}

    def visit_Allocate(self, s: S.Allocate):
        b = s.buffer
        n = b.const_elements()
        scope = "stack" if n is not None and n * b.nbytes_per_element <= STACK_LIMIT_BYTES \
            else "heap"
        nb = S.Buffer(b.name, b.shape, b.dtype, scope)
        self.remap[b] = nb
        return S.Allocate(nb, self.visit(s.body))

    def visit_Load(self, e):
        e = self.generic(e)
        nb = self.remap.get(e.buffer)
        return e if nb is None else e.replace(buffer=nb)

    def visit_Store(self, s):
        s = self.generic(s)
        nb = self.remap.get(s.buffer)
        return s if nb is None else s.replace(buffer=nb)


def plan_allocation(body: S.Stmt) -> S.Stmt:
    return _Plan().visit(body)
