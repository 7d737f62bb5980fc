"""Pass: loops marked `vectorize` become explicit vector operations (DESIGN §3: explicit
`<N x T>` code, never left to LLVM's auto-vectorizer).

The loop variable becomes Ramp(min, 1, N); every expression that depends on it becomes a vector.
An access whose flat index is affine in the loop variable with stride 1 becomes a contiguous
vector load/store; stride 0 a scalar (broadcast); anything else a gather. A guard that depends on
the loop variable (the tail of a non-dividing split) is split: the vector body runs when the guard
holds for the first and the last lane (affine guards are monotone), the scalar loop otherwise --
or, for a guard on a shape variable (a tail known only at run time) over a body of stores, the
vector body again with its stores and their loads masked by the guard's lanes. A tail of
constant length runs masked too where its body touches memory only outside the kernel's stack
(rows of 13, 14 or 28 elements of an elementwise op or a transpose); a register tile's tail
keeps the scalar loop (_masks_constant_tail).
Loops whose body cannot be vectorized (inner loops, allocations, scattered stores) stay scalar,
and say so in an annotation."""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator, collect_vars, substitute
from ...ir.packed import ExternCall
from ...ir.simplify import Analyzer, simplify, to_linear


class _CannotVectorize(Exception):
    pass


def _lanes(e) -> int:
    return dt.lanes(e.dtype)


def _bcast(e, n):
    return e if _lanes(e) == n else E.Broadcast(e, n)


def _affine_coef(idx, var):
    """(coef, base) when idx == coef * var + base with base free of var, else None. coef is an
    int, or an expression free of var where it is symbolic (a channel's stride H * W in an
    NCHW tensor over a symbolic plane)."""
    lin = to_linear(simplify(idx))
    coef = 0
    for term, c in lin.terms.values():
        if term is var:
            coef = c
        elif var in collect_vars(term):
            return _symbolic_coef(idx, var)
    base = simplify(substitute(idx, {var: E.const(0, var.dtype)}))
    return coef, base


def _symbolic_coef(idx, var):
    """(coef, base) for idx == coef * var + base where coef is an expression (sums and products
    distribute exactly over integers), None where var sits under any other operator (a
    division, a min). A Ramp of that stride is a gather like the vector index it replaces,
    but transpose_gathers can then turn a group of them into rows and shuffles."""
    t = type(idx)
    if idx is var:
        return E.const(1, idx.dtype), E.const(0, idx.dtype)
    if var not in collect_vars(idx):
        return E.const(0, idx.dtype), idx
    if t in (E.Add, E.Sub):
        a, b = _symbolic_coef(idx.a, var), _symbolic_coef(idx.b, var)
        if a is None or b is None:
            return None
        return simplify(t(a[0], b[0])), simplify(t(a[1], b[1]))
    if t is E.Mul:
        a, b = _symbolic_coef(idx.a, var), _symbolic_coef(idx.b, var)
        if a is None or b is None or not (_zero(a[0]) or _zero(b[0])):
            return None
        (ca, ba), other = (a, idx.b) if not _zero(a[0]) else (b, idx.a)
        return simplify(ca * other), simplify(ba * other)
    return None


def _zero(e) -> bool:
    return E.as_int(e) == 0


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
                if not isinstance(coef, int) and E.as_int(coef) is not None:
                    coef = E.as_int(coef)
                if coef == 0:
                    return base
                start_base = simplify(base + self.start * coef)
                stride = E.const(coef, idx.dtype) if isinstance(coef, int) else coef
                return E.Ramp(start_base, stride, self.n)
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
    def __init__(self):
        super().__init__()
        self.loops: dict = {}  # the loops around the current statement: var -> (lo, hi)

    def visit_For(self, s: S.For):
        lo, hi = Analyzer(self.loops).bound(s.min)
        ext_hi = Analyzer(self.loops).bound(s.extent)[1]
        self.loops[s.loop_var] = (lo, hi + ext_hi - 1)
        body = self.visit(s.body)
        del self.loops[s.loop_var]
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
            runtime_tail = bool(collect_vars(body.condition) - self.loops.keys() - {s.loop_var})
            masked = _masked_tail(s, body, n, self.loops) \
                if runtime_tail or _masks_constant_tail(body.then_case) else None
            if masked is not None and _falls_with_lanes(body.condition, s.loop_var):
                # no lane holds when the first does not: a vector wholly past the end (3 of a
                # 64-column tile's 4 at seq = 8) is skipped, not run masked
                masked = S.IfThenElse(simplify(first), masked)
            return S.IfThenElse(simplify(first & last), vec, serial if masked is None else masked)
        vec = self._vectorize(s, body, n)
        return vec if vec is not None else serial.replace(
            annotations=s.annotations + (("vectorize_failed", "body not vectorizable"),))

    @staticmethod
    def _vectorize(s: S.For, body, n):
        try:
            return _Vectorizer(s.loop_var, s.min, n).visit(body)
        except _CannotVectorize:
            return None


def _falls_with_lanes(cond, var) -> bool:
    """Every conjunct of cond can only turn false as var grows (`var * c + rest < k`, c > 0):
    then cond false at the first lane is false at every lane."""
    for c in E.conjuncts(cond):
        if var not in collect_vars(c):
            continue
        if type(c) in (E.LT, E.LE):
            aff = _affine_coef(c.a - c.b, var)
        elif type(c) in (E.GT, E.GE):
            aff = _affine_coef(c.b - c.a, var)
        else:
            return False
        if aff is None or aff[0] <= 0:
            return False
    return True


def _masks_constant_tail(s) -> bool:
    """A tail of constant length runs masked when it stores to memory and touches no stack
    buffer (an elementwise op's or a transpose's 13-, 14- or 28-wide rows). A register tile's
    tail keeps the scalar loop, and so does the copy out of it: LLVM unrolls the loop to the
    live lanes and keeps them in scalar registers, where a masked accumulator puts a blend on
    each accumulator's chain and a masked copy reads the whole vector, which keeps the tile's
    tail in memory (1x1 convs on 7x7 and 14x14 planes, pixels path, 1 thread: masked tile
    0.87-0.97x, masked copy alone 0.78-0.99x the scalar tail's speed)."""
    scopes = []

    class _Accesses(Mutator):
        def visit_Store(self, st):
            scopes.append(st.buffer.scope)
            return self.generic(st)

        def visit_Load(self, e):
            scopes.append(e.buffer.scope)
            return self.generic(e)

    _Accesses().visit(s)
    return bool(scopes) and not {"stack", "local"} & set(scopes)


def _stores_only(s) -> bool:
    """A statement made only of stores whose indices read no memory (what a masked tail may
    run: each store's loads are under its mask, and nothing else executes)."""
    if isinstance(s, S.SeqStmt):
        return all(_stores_only(x) for x in s.stmts)
    if not isinstance(s, S.Store) or s.predicate is not None:
        return False
    found = []

    class _Loads(Mutator):
        def visit_Load(self, e):
            found.append(e)
            return e

    _Loads().visit(s.indices[0])
    return not found and not _divides_by_data(s.value)


def _divides_by_data(e) -> bool:
    """An integer division by a non-constant: a masked-off lane divides by the 0 its masked
    load gives (a trap on x86), so such a body keeps the scalar tail."""
    found = []

    class _Div(Mutator):
        def _div(self, x):
            if dt.is_int(x.dtype) and E.as_int(x.b) is None:
                found.append(x)
            return self.generic(x)

        visit_Div = visit_FloorDiv = visit_FloorMod = _div

    _Div().visit(e)
    return bool(found)


class _MaskedVectorizer(_Vectorizer):
    """The vector body of a guarded tail with its memory accesses masked by the guard's lanes:
    each load as select(mask, load, 0) (codegen masks a load under a select) and each store
    written for the lanes in the mask only, so a vector loop over a symbolic extent has no
    scalar tail (an attention's q . k^T at seq = 8 is all tail).

    A constant-size stack buffer that the loop ranges keep every lane inside (a register
    tile's accumulator, an rfactor's partial sums) is read whole and written whole, the lanes
    off the mask written back with the value read: a masked access to it would keep LLVM from
    holding the tile in registers (1.2 vs 50 GFLOP/s). Its reads are bound before the store
    (let), so no select masks them."""

    def __init__(self, var, start, lanes, mask, ranges: dict):
        super().__init__(var, start, lanes)
        self.mask, self.ranges = mask, ranges
        self.reads: list = []  # (let var, load) of the scratch reads of the current store

    def _scratch(self, buf, idx) -> bool:
        size = buf.const_elements() if buf.scope in ("stack", "local") else None
        if size is None or not isinstance(idx, E.Ramp) or E.as_int(idx.stride) != 1:
            return False
        lo, hi = Analyzer(self.ranges).bound(idx.base)
        return lo >= 0 and hi + self.n <= size

    def _read(self, load):
        for v, seen in self.reads:
            if seen.buffer is load.buffer and E.structural_equal(seen.indices, load.indices):
                return v
        v = E.Var(f"{load.buffer.name}_lanes", load.dtype)
        self.reads.append((v, load))
        return v

    def visit_Load(self, e):
        out = super().visit_Load(e)
        if _lanes(out) == 1:
            return out
        if self._scratch(out.buffer, out.indices[0]):
            return self._read(out)
        return E.Select(self.mask, out, E.Broadcast(E.const(0, dt.element(out.dtype)), self.n))

    def visit_Store(self, s):
        self.reads = []
        out = super().visit_Store(s)
        if out is s or _lanes(out.indices[0]) == 1:
            raise _CannotVectorize("a store every lane makes")
        if self._scratch(out.buffer, out.indices[0]):
            old = self._read(E.Load(out.buffer, out.indices))
            stmt = S.Store(out.buffer, out.indices, E.Select(self.mask, out.value, old))
        else:
            idx = out.indices[0]
            if not (isinstance(idx, E.Ramp) and E.as_int(idx.stride) == 1) or \
                    dt.is_bool(out.buffer.dtype):
                # what codegen's masked store writes: a contiguous vector of numbers
                raise _CannotVectorize("a masked store that is not a contiguous numeric vector")
            stmt = S.Store(out.buffer, out.indices, out.value, self.mask)
        for v, load in reversed(self.reads):
            stmt = S.LetStmt(v, load, stmt)
        return stmt


def _masked_tail(s: S.For, body: S.IfThenElse, n: int, ranges: dict):
    """The guarded vector loop `s` as one masked vector body, or None where it cannot be one
    (a body that is not stores alone, a lane-invariant store). ranges: the enclosing loops'."""
    if not _stores_only(body.then_case):
        return None
    try:
        mask = _bcast(_Vectorizer(s.loop_var, s.min, n).visit(body.condition), n)
        if dt.element(mask.dtype) != "bool":
            return None
        return _MaskedVectorizer(s.loop_var, s.min, n, mask, ranges).visit(body.then_case)
    except (_CannotVectorize, TypeError, ValueError):
        return None


def vectorize_loops(body: S.Stmt) -> S.Stmt:
    return _Vectorize().visit(body)
