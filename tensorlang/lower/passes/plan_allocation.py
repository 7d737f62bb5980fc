"""Pass: decide where each intermediate buffer lives. Small buffers of constant size go on the
stack (where LLVM can promote them to registers, e.g. a matmul's accumulator tile); large or
symbolically sized ones on the heap (64-byte aligned)."""

from __future__ import annotations

from ...errors import LoweringError
from ...ir import stmt as S
from ...ir.functor import Mutator

STACK_LIMIT_BYTES = 128 * 1024
# No x86-64 or AArch64 machine addresses more than 2^48 bytes: a larger buffer can never be
# allocated (codegen checks symbolic sizes against this at run time).
MAX_ALLOC_BYTES = 1 << 48


class _Plan(Mutator):
    def __init__(self):
        super().__init__()
        self.remap: dict = {}

    def visit_Allocate(self, s: S.Allocate):
        b = s.buffer
        n = b.const_elements()
        if n is not None and n * b.nbytes_per_element > MAX_ALLOC_BYTES:
            shape = ", ".join(str(d) for d in b.shape)
            raise LoweringError(
                f"buffer {b.name!r} ({b.dtype}[{shape}]) needs {n * b.nbytes_per_element} "
                f"bytes, more than the 2^48 bytes a machine can address: make the "
                f"intermediate smaller, or compute it inline (s[T].compute_inline()) or "
                f"inside its consumer (compute_at)")
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
