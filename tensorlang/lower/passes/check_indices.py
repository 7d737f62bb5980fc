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
from ...analysis.bounds import set_is_empty
from ...analysis.intervals import in_bounds, nonneg_facts
from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.checks import FIRST_INDEX_CODE, IndexCheck, checked_minimums
from ...ir.functor import Mutator, collect_vars, contains
from ...ir.simplify import Analyzer, simplify


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
        self.loops: list[S.For] = []  # the loops around the statement visited, outermost first
        self.facts: list = []  # integer expressions >= 0 where the statement visited runs
        self.code = FIRST_INDEX_CODE

    def visit_For(self, s: S.For):
        self.ranges.bind_range(s.loop_var, s.min, s.extent)
        if E.is_const(s.min, 0):
            self.loop_extents[s.loop_var] = s.extent
        self.loops.append(s)
        try:
            return self.generic(s)
        finally:
            self.loops.pop()

    def visit_IfThenElse(self, s: S.IfThenElse):
        cond = self.visit(s.condition)
        then = self._under(cond, True, s.then_case)
        other = self._under(cond, False, s.else_case)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return S.IfThenElse(cond, then, other)

    def visit_Select(self, e: E.Select):
        cond = self.visit(e.condition)
        a, b = self._under(cond, True, e.true_value), self._under(cond, False, e.false_value)
        if cond is e.condition and a is e.true_value and b is e.false_value:
            return e
        return E.Select(cond, a, b)

    def _under(self, cond, holds: bool, node):
        """node visited where `cond` is `holds` (what it states joins the facts)."""
        if node is None:
            return None
        n = len(self.facts)
        self.facts.extend(nonneg_facts(cond, holds))
        try:
            return self.visit(node)
        finally:
            del self.facts[n:]

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
        access = f"{buf.name}[{', '.join(str(_as_written(i)) for i in indices)}]"
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
        return (not in_bounds(self.ranges, idx, extent, self.facts)
                and not self._proven_over_loops(idx, extent))

    def _proven_over_loops(self, idx, extent) -> bool:
        """isl's proof that idx is in [0, extent) over the ranges of the loops and the guards
        around it, each part isl cannot read (a product of sizes: a sequence of h * w tokens)
        taken as an unknown (_as_unknowns). A split of such an extent (whole vectors, then a
        tail) is in bounds whatever the product's value; left checked, an attention's softmax
        over h * w / 64 keys compared each vector's index at run time (5x its static kernel)."""
        names = Names()
        params, env, unknowns = Params(names), {}, {}
        for lp in self.loops:
            env[lp.loop_var] = names.fresh(lp.loop_var.name)
        ranges = []
        for lp in self.loops:
            lo, n = (to_isl(self._as_unknowns(e, unknowns), env, params)
                     for e in (lp.min, lp.extent))
            if lo is not None and n is not None:  # else unbounded: still a safe verdict
                v = env[lp.loop_var]
                ranges.append(f"({lo}) <= {v} < ({lo}) + ({n})")
        for f in self.facts:
            got = to_isl(self._as_unknowns(f, unknowns), env, params)
            if got is not None:
                ranges.append(f"({got}) >= 0")
        i, n = (to_isl(self._as_unknowns(e, unknowns), env, params) for e in (idx, extent))
        if i is None or n is None:
            return False
        for part, var in unknowns.values():  # (a product of sizes >= 1 is >= 1)
            lo = self.ranges.bound(part)[0]
            if isinstance(lo, int):
                ranges.append(f"{params.name(var)} >= {lo}")
        out = " and ".join(ranges + [f"(({i}) < 0 or ({i}) >= ({n}))"])
        return set_is_empty(f"{params.decl()}{{ [{', '.join(env.values())}] : {out} }}")

    def _as_unknowns(self, e, unknowns: dict):
        """e with each smallest part isl cannot read (a product of two sizes, a division by a
        size, a value loaded from memory) replaced by a variable standing for it, so that
        what is around it (the product // 16, a clamp of a loaded index) stays readable.
        Sound: the proof then holds for every value of the variable, the part's among them.
        `unknowns`: key -> (the part, its variable); a part without loads is one variable
        wherever it occurs (its text the key), a load is a variable of its own."""
        if not isinstance(e, E.Expr) or _quasi_affine(e):
            return e
        if isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)):
            a, b = self._as_unknowns(e.a, unknowns), self._as_unknowns(e.b, unknowns)
            if a is not e.a or b is not e.b:
                e = type(e)(a, b)
                if _quasi_affine(e):
                    return e
        if not dt.is_int(e.dtype):
            return e
        # equal forms of one part are one unknown; a loaded value is one of its own
        key = len(unknowns) if contains(e, E.Load) else _structure(simplify(e))
        if key not in unknowns:
            unknowns[key] = (e, E.Var(f"_part{len(unknowns)}", e.dtype))
        return unknowns[key][1]


def _as_written(index):
    """An index as the user wrote it, for messages: without the widening cast lowering puts
    around an int32 gather's index (`A[int64(Ix[i]), j]` was `A[Ix[i], j]` in the compute).
    Only a cast that is the whole index: inside arithmetic its operand's type is needed."""
    while isinstance(index, E.Cast) and dt.is_int(index.dtype) and \
            dt.is_int(index.value.dtype) and dt.lanes(index.dtype) == 1:
        index = index.value
    return index


def _structure(e):
    """A hashable key equal for structurally equal expressions (variables by identity: two
    loops may share a name)."""
    if isinstance(e, E.Var):
        return id(e)
    if isinstance(e, E.Expr):
        return (type(e).__name__, *(_structure(getattr(e, f)) for f in e.fields()))
    if isinstance(e, tuple):
        return tuple(_structure(x) for x in e)
    return e


def check_indices(body: S.Stmt) -> S.Stmt:
    checker = _CheckIndices()
    checker.ranges.ranges.update(checked_minimums(body))
    return checker.visit(body)
