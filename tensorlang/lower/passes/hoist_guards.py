"""Pass: move guards out of the loops they do not depend on. A loop whose whole body is a guard
keeps, inside, only the conjuncts that mention its variable; the others are tested once, above it:

    for rci in range(16):                   if oh >= 1:
      for z in range(14):                     for rci in range(16):
        if oh >= 1 && z + rx >= 1:   ==>        for z in range(14):
          acc[z] = ...                            if z + rx >= 1:
                                                    acc[z] = ...

A conjunct that bounds a serial loop's own variable (`oh + ry >= 1`, `oh + ry < 57`: a
kernel row inside the padded border) becomes the loop's bounds instead
(`for ry in range(max(0, 1 - oh), min(3, 57 - oh))`): no test at all, and no branch between
the loop and the accumulator tile it updates (tested inside the loop, the same guard made a
1x64x56^2 3x3 conv 1.4-2x slower on one core: LLVM no longer kept the tile in registers).
So does one that bounds an unrolled loop by a shape variable (`io * 4 + i - n < 0`: the last
row tile of a symbolic M), read in its linear form; that loop becomes a serial loop over the
valid rows (`for i in range(min(4, n - io * 4))`), where unrolled it ran every row of the
tile behind a branch (a 1-row dense: 11 vs 5 us). A constant bound keeps the unrolled loop.

Run before vectorize, a guard leaves the vector loop (which then has a straight-line body);
run after unroll, the unrolled copies' guards have folded to constants and what is left is
tested once per tile instead of once per statement. Moving a side-effect-free test out of a
loop is always valid: inside, it had the same value in every iteration."""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import StmtMutator, Visitor, collect_vars
from ...ir.simplify import simplify, to_linear
from ...te.intrin import all as all_of


def _bound(c, v, shape_vars=None):
    """(lower, None) for a conjunct meaning v >= lower, (None, upper) for v < upper, where
    v appears once, added to terms free of it; else None. With `shape_vars` (the variables of
    the buffers' shapes), a conjunct that also reads one is read in its linear form too
    (`io * 4 + i - n < 0`: the last row tile of a symbolic M)."""
    if not isinstance(c, (E.GE, E.GT, E.LT, E.LE)):
        return None
    x, k = c.a, c.b
    if not isinstance(x, E.Add) or v in collect_vars(k):
        return _linear_bound(c, v, shape_vars) if shape_vars else None
    rest = x.b if x.a is v else x.a if x.b is v else None
    if rest is None or v in collect_vars(rest):
        return _linear_bound(c, v, shape_vars) if shape_vars else None
    edge = E.Sub(k, rest)
    if isinstance(c, (E.GT, E.LE)):
        edge = E.Add(edge, E.const(1, edge.dtype))
    return (edge, None) if isinstance(c, (E.GE, E.GT)) else (None, edge)


def _linear_bound(c, v, shape_vars):
    """_bound of `v + rest OP k` in any arrangement, for a conjunct that reads a shape
    variable (one in the shape of a buffer the kernel accesses)."""
    if not (collect_vars(c) & shape_vars) or not dt.is_int(c.a.dtype):
        return None
    lin = to_linear(simplify(E.Sub(c.a, c.b)))
    coef, rest = 0, []
    for t, k in lin.terms.values():
        if t is v:
            coef = k
        elif v in collect_vars(t):
            return None
        else:
            rest.append(E.Mul(t, E.const(k, lin.dtype)))
    if coef != 1:
        return None
    other = E.const(lin.const, lin.dtype)
    for r in rest:
        other = E.Add(other, r)
    edge = simplify(E.Sub(E.const(0, lin.dtype), other))  # v OP edge
    if isinstance(c, (E.GT, E.LE)):
        edge = simplify(E.Add(edge, E.const(1, edge.dtype)))
    return (edge, None) if isinstance(c, (E.GE, E.GT)) else (None, edge)


def _clip(loop: S.For, bounds: list) -> S.For:
    lo, end = loop.min, E.Add(loop.min, loop.extent)
    for low, high in bounds:
        lo = E.Max(lo, low) if low is not None else lo
        end = E.Min(end, high) if high is not None else end
    return loop.replace(min=lo, extent=E.Sub(end, lo))


def _constant_extent(loop: S.For) -> bool:
    return E.as_int(simplify(loop.extent)) is not None


def _shape_vars(body) -> set:
    """The variables in the shapes of the buffers that `body` loads, stores or allocates."""
    found: set = set()

    class _Buffers(Visitor):
        def _note(self, buf):
            for d in buf.shape:
                found.update(collect_vars(d))

        def visit_Load(self, e):
            self._note(e.buffer)
            self.generic(e)

        def visit_Store(self, s):
            self._note(s.buffer)
            self.generic(s)

        def visit_Allocate(self, s):
            self._note(s.buffer)
            self.generic(s)

    _Buffers().visit(body)
    return found


def _merged_guards(body: S.Stmt) -> S.Stmt:
    """`if a: if b: S` (neither with an else) as `if a && b: S`, so that every conjunct of
    both can leave the loop: a compute_at's bound guard over a fused symbolic axis (`f // oh <
    1 && ...`, true but unproven) wrapped a conv tile's row guard, which then stayed inside
    the tile's loops (a symbolic-plane stem conv: 2.2 vs 1.4 ms static)."""
    while isinstance(body, S.IfThenElse) and body.else_case is None and \
            isinstance(body.then_case, S.IfThenElse) and body.then_case.else_case is None:
        inner = body.then_case
        body = S.IfThenElse(E.And(body.condition, inner.condition), inner.then_case)
    return body


class _Hoist(StmtMutator):
    def __init__(self, body: S.Stmt):
        super().__init__()
        self.body = body
        self._shape_vars: set | None = None
        self.tile_loops: list = []  # loop variables inside the innermost allocation

    @property
    def shape_vars(self) -> set:
        """Found on first use (a walk of every expression: most kernels have no loop whose body
        is a guard, and never need them)."""
        if self._shape_vars is None:
            self._shape_vars = _shape_vars(self.body)
        return self._shape_vars

    def visit_Allocate(self, s: S.Allocate):
        outer, self.tile_loops = self.tile_loops, []
        try:
            return self.generic(s)
        finally:
            self.tile_loops = outer

    def visit_For(self, s: S.For):
        enclosing = set(self.tile_loops)
        self.tile_loops.append(s.loop_var)
        try:
            body = _merged_guards(self.visit(s.body))
        finally:
            self.tile_loops.pop()
        if not (isinstance(body, S.IfThenElse) and body.else_case is None):
            return s if body is s.body else s.replace(body=body)
        v = s.loop_var
        parts = E.conjuncts(body.condition)
        outside = [c for c in parts if v not in collect_vars(c)]
        inside = [c for c in parts if v in collect_vars(c)]
        # An unrolled loop is bounded by a shape variable only where the bound holds for the
        # whole tile (`io * 4 + i - n < 0`: a symbolic M's last rows). One that moves with a
        # loop inside the tile's allocation (a conv's right padding at each kernel column,
        # `z.outer * 14 + z + rx - w < 1`) stays a guard per unrolled copy, as in a static
        # kernel: a serial loop there kept the tile in memory (the last column tile of a
        # conv over a symbolic plane ran 3-4x a whole tile's time)
        bounding = inside if s.kind == "serial" else \
            [c for c in inside if collect_vars(c) & self.shape_vars
             and not collect_vars(c) & enclosing] if s.kind == "unrolled" else []
        bounds = [b for b in (_bound(c, v, self.shape_vars) for c in bounding) if b is not None]
        if s.kind == "unrolled" and bounds and _constant_extent(_clip(s, bounds)):
            bounds = []  # a constant tail stays unrolled and guarded, as before
        if not outside and not bounds:
            return s if body is s.body else s.replace(body=body)
        if bounds:
            inside = [c for c in inside
                      if not any(c is x for x in bounding)
                      or _bound(c, v, self.shape_vars) is None]
        then = S.IfThenElse(all_of(*inside), body.then_case) if inside else body.then_case
        loop = _clip(s.replace(body=then), bounds) if bounds else s.replace(body=then)
        if bounds and loop.kind == "unrolled":
            # bounded by a shape variable (the last row tile of a symbolic M: n - 4 * io rows):
            # a loop over the valid rows, not every row behind a branch (a 1-row dense ran a
            # whole 4-row tile: 11 vs 5 us)
            loop = loop.replace(kind="serial")
        return S.IfThenElse(all_of(*outside), loop) if outside else loop


def hoist_guards(body: S.Stmt) -> S.Stmt:
    return _Hoist(body).visit(body)
