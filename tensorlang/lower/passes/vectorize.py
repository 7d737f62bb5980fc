"""Pass: loops marked `vectorize` become explicit vector operations (DESIGN §3: explicit
`<N x T>` code, never left to LLVM's auto-vectorizer).

The loop variable becomes Ramp(min, 1, N); every expression that depends on it becomes a vector.
An access whose flat index is affine in the loop variable with stride 1 becomes a contiguous
vector load/store; stride 0 a scalar (broadcast); anything else a gather. A guard that depends on
the loop variable (the tail of a non-dividing split) is split: the vector body runs when the guard
holds for the first and the last lane (affine guards are monotone), the scalar loop otherwise.
Loops whose body cannot be vectorized (inner loops, allocations, scattered stores) stay scalar,
and say so in an annotation."""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator, collect_vars, substitute
from ...ir.packed import ExternCall
from ...ir.simplify import simplify, to_linear


class _CannotVectorize(Exception):
    pass


def _lanes(e) -> int:
    return dt.lanes(e.dtype)


def _bcast(e, n):
    return e if _lanes(e) == n else E.Broadcast(e, n)


def _affine_coef(idx, var):
    """(coef, base) when idx == coef * var + base with base free of var, else None."""
    lin = to_linear(simplify(idx))
    coef = 0
    for term, c in lin.terms.values():
        if term is var:
            coef = c
        elif var in collect_vars(term):
            return None
    base = simplify(substitute(idx, {var: E.const(0, var.dtype)}))
    return coef, base


class _Vectorizer(Mutator):
    def __init__(self, var: E.Var, start: E.Expr, lanes: int):
        super().__init__()
        self.var, self.start, self.n = var, start, lanes
        self.let_map: dict = {}

    def visit_Var(self, v):
        if v is self.var:
            return E.Ramp(self.start, E.const(1, v.dtype), self.n)
        return self.let_map.get(v, v)

    def _elementwise(self, e):
        parts = {}
        lanes = 1
        for name in e.fields():
            val = getattr(e, name)
            if isinstance(val, E.Expr):
                parts[name] = self.visit(val)
                lanes = max(lanes, _lanes(parts[name]))
            elif isinstance(val, tuple) and val and isinstance(val[0], E.Expr):
                parts[name] = tuple(self.visit(x) for x in val)
                lanes = max([lanes] + [_lanes(x) for x in parts[name]])
        if lanes == 1:
            return e
        fixed = {}
        for name, val in parts.items():
            fixed[name] = tuple(_bcast(x, lanes) for x in val) if isinstance(val, tuple) \
                else _bcast(val, lanes)
        if isinstance(e, (E.Cast, E.Call, ExternCall)):  # a C call: one call per lane
            fixed["dtype"] = dt.with_lanes(e.dtype, lanes)
        return e.replace(**fixed)

    visit_Add = visit_Sub = visit_Mul = visit_Div = _elementwise
    visit_FloorDiv = visit_FloorMod = visit_Min = visit_Max = _elementwise
    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _elementwise
    visit_And = visit_Or = visit_Not = visit_Select = visit_Cast = visit_Call = _elementwise
    visit_ExternCall = _elementwise

    def _index(self, idx):
        """Vectorized flat index: Ramp for affine accesses, scalar when invariant."""
        if self.var not in collect_vars(idx) and not (collect_vars(idx) & self.let_map.keys()):
            return idx
        if not (collect_vars(idx) & self.let_map.keys()):
            aff = _affine_coef(idx, self.var)
            if aff is not None:
                coef, base = aff
                start_base = simplify(base + self.start * coef) if coef else base
                if coef == 0:
                    return start_base
                return E.Ramp(start_base, E.const(coef, idx.dtype), self.n)
        return _bcast(self.visit(idx), self.n)

    def visit_Load(self, e):
        idx = self._index(e.indices[0])
        return e if idx is e.indices[0] else E.Load(e.buffer, (idx,))

    def visit_Store(self, s):
        idx = self._index(s.indices[0])
        val = self.visit(s.value)
        if _lanes(idx) == 1:
            if _lanes(val) > 1:
                raise _CannotVectorize("every lane stores to the same element")
            return s
        if not (isinstance(idx, E.Ramp) and E.as_int(idx.stride) == 1):
            # codegen stores a vector contiguously from the ramp's base: any other stride is a
            # scatter, which stays a scalar loop
            raise _CannotVectorize("scattered store")
        pred = None if s.predicate is None else _bcast(self.visit(s.predicate), self.n)
        return S.Store(s.buffer, (idx,), _bcast(val, self.n), pred)

    def visit_LetStmt(self, s):
        val = self.visit(s.value)
        if _lanes(val) == 1:
            return s.replace(body=self.visit(s.body))
        nv = E.Var(s.var.name, val.dtype)
        self.let_map[s.var] = nv
        return S.LetStmt(nv, val, self.visit(s.body))

    def visit_IfThenElse(self, s):
        cond = self.visit(s.condition)
        if _lanes(cond) > 1:
            raise _CannotVectorize("lane-dependent condition")
        return self.generic(s)

    def visit_For(self, s):
        raise _CannotVectorize("inner loop")

    def visit_Allocate(self, s):
        raise _CannotVectorize("allocation inside the loop")


def _monotone_guard(cond, var) -> bool:
    """Conditions made of affine comparisons joined by &&: true at both ends => true between."""
    if isinstance(cond, E.And):
        return _monotone_guard(cond.a, var) and _monotone_guard(cond.b, var)
    if type(cond) in (E.LT, E.LE, E.GT, E.GE):
        return _affine_coef(cond.a - cond.b, var) is not None
    return var not in collect_vars(cond)


class _Vectorize(Mutator):
    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        if s.kind != "vectorized":
            return s if body is s.body else s.replace(body=body)
        n = E.as_int(s.extent)
        serial = S.For(s.loop_var, s.min, s.extent, "serial", body, s.annotations)
        if n is None:
            return serial.replace(annotations=s.annotations + (("vectorize_failed",
                                                                "non-constant extent"),))
        if n == 1:
            return serial
        # tail guard: split into a guarded vector body and the scalar loop
        if isinstance(body, S.IfThenElse) and body.else_case is None and \
                s.loop_var in collect_vars(body.condition):
            if not _monotone_guard(body.condition, s.loop_var):
                return serial.replace(annotations=s.annotations + (("vectorize_failed",
                                                                    "non-affine guard"),))
            vec = self._vectorize(s, body.then_case, n)
            if vec is None:
                return serial.replace(annotations=s.annotations + (
                    ("vectorize_failed", "body not vectorizable"),))
            first = substitute(body.condition, {s.loop_var: s.min})
            last = substitute(body.condition, {s.loop_var: simplify(s.min + (n - 1))})
            return S.IfThenElse(simplify(first & last), vec, serial)
        vec = self._vectorize(s, body, n)
        return vec if vec is not None else serial.replace(
            annotations=s.annotations + (("vectorize_failed", "body not vectorizable"),))

    @staticmethod
    def _vectorize(s: S.For, body, n):
        try:
            return _Vectorizer(s.loop_var, s.min, n).visit(body)
        except _CannotVectorize:
            return None


def vectorize_loops(body: S.Stmt) -> S.Stmt:
    return _Vectorize().visit(body)
