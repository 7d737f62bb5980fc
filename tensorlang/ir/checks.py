"""Run-time checks in the loop IR: an index whose range no compile-time proof covers (a gather
`A[Ix[i], j]`, a product `A[i * j]`) is wrapped in an IndexCheck, which evaluates to the index
when it lies in [0, extent) and otherwise makes the kernel return `code` (the runtime raises
KernelError with `message`, which the manifest maps the code to). See
lower/passes/check_indices.py for where the checks are placed and analysis/bounds.py for the
static proof that leaves only these."""

from __future__ import annotations

from dataclasses import dataclass

from . import stmt as S
from .expr import Add, Const, Expr, Sub, Var
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


def checked_minimums(body) -> dict:
    """{shape variable: (minimum, inf)} that the kernel's entry checks establish: the leading
    statements `checked(v - m, top)` (lower/entry_checks.py) return before the loops when v <
    m, so everything after them may take v >= m (a conv's output width `max(w - 1, 0) + 1` is
    then `w`). The checks themselves are not simplified with it: no pass folds an IndexCheck."""
    out: dict = {}
    stmts = body.stmts if isinstance(body, S.SeqStmt) else (body,)
    for s in stmts:
        if not (isinstance(s, S.Evaluate) and isinstance(s.value, IndexCheck)):
            break
        i = s.value.index
        if isinstance(i, Var):
            out[i] = (0, float("inf"))
        elif isinstance(i, Sub) and isinstance(i.a, Var) and isinstance(i.b, Const):
            out[i.a] = (int(i.b.value), float("inf"))
        elif isinstance(i, Add) and isinstance(i.a, Var) and isinstance(i.b, Const):
            out[i.a] = (-int(i.b.value), float("inf"))
    return out
