"""Run-time checks in the loop IR: an index whose range no compile-time proof covers (a gather
`A[Ix[i], j]`, a product `A[i * j]`) is wrapped in an IndexCheck, which evaluates to the index
when it lies in [0, extent) and otherwise makes the kernel return `code` (the runtime raises
KernelError with `message`, which the manifest maps the code to). See
lower/passes/check_indices.py for where the checks are placed and analysis/bounds.py for the
static proof that leaves only these."""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Expr
from .functor import Visitor

# Kernel return codes 1..999 are left to other failures; an index check's code is
# FIRST_INDEX_CODE + its position in the kernel (so each message names its own access).
FIRST_INDEX_CODE = 1000


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IndexCheck(Expr):
    """`index`, checked against [0, extent) where evaluated (vector lanes that a select masks
    off are not checked: their loads do not happen either)."""

    index: Expr
    extent: Expr
    code: int
    message: str

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.index.dtype

    def text(self, p) -> str:
        return f"checked({p.expr(self.index)}, {p.expr(self.extent)})"


class _Messages(Visitor):
    def __init__(self):
        self.found: dict[str, str] = {}

    def visit_IndexCheck(self, e: IndexCheck):
        self.found[str(e.code)] = e.message
        self.generic(e)


def error_messages(body) -> dict[str, str]:
    """{return code (as text, the manifest's keys): message} of the checks in a kernel body."""
    v = _Messages()
    v.visit(body)
    return v.found
