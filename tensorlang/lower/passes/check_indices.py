"""Pass: every load whose index no compile-time proof covers is checked at run time.

tl.lower proves each compute's quasi-affine reads in bounds before lowering (analysis/bounds.py)
and refuses the ones it cannot (a read proven only for sizes >= 1 gets its check at the kernel's
entry instead: lower/entry_checks.py); what is left are indices isl cannot express: data-dependent
ones (a gather `A[Ix[i], j]`, ONNX's negative-index wrap `A[select(Ix[i] < 0, Ix[i] + n,
Ix[i])]`) and products of loop variables. Each such index, per dimension and before flattening
(a flat index in range could still be a row index out of range), becomes

    A[checked(Ix[i], 16), j]

which codegen turns into one unsigned compare `idx <u extent` and a branch to a `return code`
(the runtime raises KernelError with the message the manifest maps the code to). An index the
loop ranges already bound inside [0, extent) (`A[i * j]` over small loops, a reflect pad's
select of two in-range branches: analysis/intervals.py) is left alone.

The check sits where the load is, so it is as conditional as the load: under an if, only when
the if is taken; under a select, only for the lanes that take it. An index that does not
change in the inner loops is compared there all the same, but the compare is loop-invariant
and LLVM's unswitching hoists it with the load of the index."""

from __future__ import annotations

from ...analysis.affine import Names, Params, to_isl
from ...analysis.intervals import in_bounds
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.checks import FIRST_INDEX_CODE, IndexCheck
from ...ir.functor import Mutator, collect_vars
from ...ir.simplify import Analyzer


def _quasi_affine(e) -> bool:
    """What the static proof covers: an index isl can express (loop and shape variables as
    parameters)."""
    return to_isl(e, {}, Params(Names())) is not None


class _CheckIndices(Mutator):
    def __init__(self):
        super().__init__()
        self.ranges = Analyzer()
        self.data_vars: set = set()  # let-bound variables that hold computed values
        self.loop_extents: dict = {}  # loop variable -> extent, for loops from 0
        self.code = FIRST_INDEX_CODE

    def visit_For(self, s: S.For):
        self.ranges.bind_range(s.loop_var, s.min, s.extent)
        if E.is_const(s.min, 0):
            self.loop_extents[s.loop_var] = s.extent
        return self.generic(s)

    def visit_LetStmt(self, s: S.LetStmt):
        value = self.visit(s.value)
        if not _quasi_affine(value) or collect_vars(value) & self.data_vars:
            self.data_vars.add(s.var)
        body = self.visit(s.body)
        return s if value is s.value and body is s.body else S.LetStmt(s.var, value, body)

    def visit_Load(self, e: E.Load):
        indices = tuple(self.visit(i) for i in e.indices)  # an inner gather is checked first
        checked = tuple(self._checked(e.buffer, indices, d) for d in range(len(indices)))
        if all(a is b for a, b in zip(checked, e.indices)):
            return e
        return E.Load(e.buffer, checked)

    def _checked(self, buf: S.Buffer, indices: tuple, d: int):
        idx, extent = indices[d], buf.shape[d]
        if not self._unproven(idx, extent):
            return idx
        code, self.code = self.code, self.code + 1
        access = f"{buf.name}[{', '.join(str(i) for i in indices)}]"
        what = f"dimension {d}'s index" if len(indices) > 1 else "the index"
        msg = f"index out of bounds in {access}: {what} is not in [0, {extent})"
        return IndexCheck(idx, extent, code, msg)

    def _unproven(self, idx, extent) -> bool:
        if collect_vars(idx) & self.data_vars:
            return True
        # what the static proof left to run time: an index, or an extent (n * m), that isl
        # cannot read
        if _quasi_affine(idx) and _quasi_affine(extent):
            return False
        # `A[i]` for i in range(extent of A): in bounds
        over = self.loop_extents.get(idx) if type(idx) is E.Var else None
        if over is not None and E.structural_equal(over, extent):
            return False
        return not in_bounds(self.ranges, idx, extent)


def check_indices(body: S.Stmt) -> S.Stmt:
    return _CheckIndices().visit(body)
