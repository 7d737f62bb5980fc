"""Pass: loop partitioning. A loop whose body holds tail guards (`io * 6 + ii < 1024`) is split
into the iterations where every such guard provably holds and the rest:

    for io in range(171):              for io in range(170):      # guards proven: removed
      if io * 6 + ii < 1024: ...  ==>    ...
                                       for io in range(170, 171):
                                         if io * 6 + ii < 1024: ...

Without it a register-tiled kernel keeps a branch per row in its innermost loop, which costs
spills of the accumulator tile. Only loops of constant extent are partitioned, and only at the
first iteration where a guard can fail (found by bisection with the simplifier).

Serial loops are also cut where a conjunct of a guard starts to hold (a head guard: the
padding guards of guard_padded_reads, `z.outer * 14 + z + rx >= 1`) or stops to, so a
convolution's border tiles are split off its guard-free interior -- but only at conjuncts of
the loop's own and inner variables, which the cut turns into constants once the inner loops
are unrolled. A conjunct that also reads an outer variable (a kernel row's `oh + ry >= 1`
inside the row loop) would stay a guard in every piece; hoist_guards tests it once per
iteration instead, without copies of the loop. Parallel loops are cut at tails of whole
guards only: each piece of a parallel loop is one more launch of the thread pool.

A loop of symbolic extent (a split of a shape variable: `for io in range((n + 5) // 6)`) is cut
at a symbolic point instead, for the tail guards linear in its variable (`io * 6 + ii - n < 0`,
a register tile's rows): `a * io + rest < 0` holds for every value of the inner loops exactly
while io < (a - 1 - max(rest)) // a, so the head piece drops those conjuncts (the simplifier
cannot prove them over a symbolic range) and the tail piece keeps them (issue 19: a dense over
`n` rows with 6 guarded rows in its k loop ran at half the speed of the static kernel). When
the tail tile allocates (an accumulator) and its rows are `n - a * io` for a shape variable n
and a <= 4, the tail is copied per count of rows left with n replaced by `a * io + k`: its
rows are then constants, and the accumulators stay in registers (_specialize_rows). A tile of
columns whose last tile is partial runs it in half tiles (_whole_tiles, _half_tiles), the
second shifted inwards to end at the row's end past a row's first tile: it recomputes columns
of the tile before it instead of testing a guard per column (_shift_inwards; only where the
tile's stores are not read back, so running some of them twice stores the same values)."""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.checks import checked_minimums
from ...ir.functor import Mutator, StmtMutator, StmtVisitor, Visitor, collect_vars, substitute
from ...ir.simplify import INF, Analyzer, Linear, simplify, to_linear


def _guards(body, var, an: Analyzer) -> list:
    """(condition, ranges of the loops around it inside `body`) for guards that mention var."""
    found = []

    def walk(s, ranges):
        if s is None:
            return
        if isinstance(s, S.For):
            inner = dict(ranges)
            lo, hi = an.bound(s.min)[0], None
            ext_hi = Analyzer({**an.ranges, **inner}).bound(s.extent)[1]
            if lo != -float("inf") and ext_hi != float("inf"):
                hi = lo + ext_hi - 1
            inner[s.loop_var] = (lo, hi if hi is not None else float("inf"))
            walk(s.body, inner)
        elif isinstance(s, S.SeqStmt):
            for x in s.stmts:
                walk(x, ranges)
        elif isinstance(s, (S.Allocate, S.LetStmt)):
            walk(s.body, ranges)
        elif isinstance(s, S.IfThenElse):
            if var in collect_vars(s.condition):
                found.append((s.condition, ranges))
            walk(s.then_case, ranges)
            walk(s.else_case, ranges)

    walk(body, {})
    return found


def _holds(cond, var, at: int, an: Analyzer, ranges: dict, at_end: bool = False) -> bool:
    """cond provably holds for var in [start, at] (at_end: in [at, end]) and every value of
    the loops inside."""
    lo, hi = an.ranges[var]
    sub = Analyzer({**an.ranges, **ranges, var: (at, hi) if at_end else (lo, at)})
    out = simplify(cond, sub)
    return isinstance(out, E.Const) and bool(out.value)


class _Partition(StmtMutator):
    def __init__(self):
        super().__init__()
        self.an = Analyzer()
        self.in_symbolic_tail = False

    def visit_For(self, s: S.For):
        # Outer loops first: once an outer loop is cut, the inner loops of its head see the
        # narrower range and their guards hold throughout (cutting inner loops first would split
        # e.g. `for ii in range(4)` of a 10 = 4 * 3 - 2 split into [0, 2) and [2, 4) for nothing).
        self.an.bind_range(s.loop_var, s.min, s.extent)
        mn, n = E.as_int(s.min), E.as_int(s.extent)
        cut = None
        if s.kind in ("serial", "parallel") and mn is not None and n is None \
                and not self.in_symbolic_tail:
            pieces = _symbolic_cut(s, mn, self.an)
            if pieces is not None:
                heads = _head_guards(s.body, s.loop_var, self.an) if s.kind == "serial" \
                    else []
                self.an.ranges.pop(s.loop_var, None)
                return S.seq(*self._visit_pieces(pieces, heads))
        if s.kind in ("serial", "parallel") and mn is not None and n is not None and n > 1:
            cut = self._cut(s, mn, n)
        if cut is not None:
            self.an.ranges.pop(s.loop_var, None)
            head = s.replace(extent=E.const(cut - mn))
            tail = s.replace(min=E.const(cut), extent=E.const(mn + n - cut))
            return S.seq(self.visit(head), self.visit(tail))
        body = self.visit(s.body)
        self.an.ranges.pop(s.loop_var, None)
        return s if body is s.body else s.replace(body=body)

    def _visit_pieces(self, pieces: tuple, heads: list) -> list:
        # A tail piece runs the last, partial tile once, a border piece the first few: their
        # inner symbolic loops keep their guards. Cutting them too doubled the code at every
        # nested symbolic split (a fuzzed matmul's 282 lowered lines became 1348, its LLVM
        # build 2.6 s -> 14 s).
        *border, head, tail = pieces if len(pieces) > 1 else (*pieces, None)
        out = [self._visit_guarded(p, None) for p in border] + [self.visit(head)]
        return out + ([self._visit_guarded(tail, heads)] if tail is not None else [])

    def _visit_guarded(self, piece: S.For, heads: list | None) -> S.Stmt:
        """heads: the head guards the cut dropped from the piece (None: a border piece,
        which keeps them)."""
        self.in_symbolic_tail, outer = True, self.in_symbolic_tail
        try:
            return self.visit(_whole_tiles(piece, self.an, heads))
        finally:
            self.in_symbolic_tail = outer

    def _cut(self, loop: S.For, mn: int, n: int) -> int | None:
        """The first iteration where some guard may start to fail (a tail guard) or, for serial
        loops, starts to hold (a head guard), if it is inside the loop."""
        best = None
        head_cuts = loop.kind == "serial"
        last = mn + n - 1
        candidates = []
        for cond, ranges in _guards(loop.body, loop.loop_var, self.an):
            candidates.append((cond, ranges))
            if head_cuts:
                own = {loop.loop_var, *ranges}
                candidates += [(c, ranges) for c in E.conjuncts(cond)
                               if loop.loop_var in collect_vars(c) and collect_vars(c) <= own]
        for cond, ranges in candidates:
            at_first = _holds(cond, loop.loop_var, mn, self.an, ranges)
            at_last = _holds(cond, loop.loop_var, last, self.an, ranges, at_end=True)
            if at_first == at_last:
                continue  # always true (the simplifier removes it) or no single cut helps
            if not at_first and not head_cuts:
                continue
            # invariant: the guard is at_first up to lo, not at_first somewhere up to hi
            lo, hi = mn, last
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _holds(cond, loop.loop_var, mid, self.an, ranges, at_end=not at_first) \
                        == at_first:
                    lo = mid
                else:
                    hi = mid
            best = lo + 1 if best is None else min(best, lo + 1)
        return best


def _as_negative(c):
    """The linear form L of a comparison that means L < 0 (integers), or None."""
    if isinstance(c, E.LT):
        d = E.Sub(c.a, c.b)
    elif isinstance(c, E.LE):
        d = E.Sub(E.Sub(c.a, c.b), E.const(1, c.a.dtype))
    elif isinstance(c, E.GT):
        d = E.Sub(c.b, c.a)
    elif isinstance(c, E.GE):
        d = E.Sub(E.Sub(c.b, c.a), E.const(1, c.a.dtype))
    else:
        return None
    if not dt.is_int(c.a.dtype) or not dt.is_int(c.b.dtype) or dt.lanes(c.a.dtype) != 1:
        return None
    return to_linear(simplify(d))


def _term_max(t, coef: int, ranges: dict):
    """The largest value of coef * t over t's constant range, None when t has none."""
    if t not in ranges:
        return None
    edge = ranges[t][1 if coef > 0 else 0]
    return None if edge in (INF, -INF) else coef * edge


def _tail_cut(c, var, ranges: dict, inside: set):
    """The first value of `var` where conjunct c may fail, as an expression of what is defined
    outside the loop, when c is `a * var + rest < 0` with a > 0, rest linear in the inner loop
    variables (constant ranges) and terms free of anything defined in the loop; else None."""
    lin = _as_negative(c)
    if lin is None:
        return None
    a, rest_max, outside = 0, lin.const, E.const(0, lin.dtype)
    step = 1  # the guard reads var // step (a fused loop's outer index: `f // 56 - n < 0`)
    for t, coef in lin.terms.values():
        if t is var or (type(t) is E.FloorDiv and t.a is var and (E.as_int(t.b) or 0) > 0):
            if a:
                return None
            a, step = coef, (1 if t is var else E.as_int(t.b))
        elif t in ranges:
            most = _term_max(t, coef, ranges)
            if most is None:
                return None
            rest_max += most
        elif collect_vars(t) & inside or var in collect_vars(t):
            return None
        else:
            outside = E.Add(outside, E.Mul(t, E.const(coef, lin.dtype)))
    if a <= 0:
        return None
    num = E.Sub(E.const(a - 1 - rest_max, lin.dtype), outside)
    cut = num if a == 1 else E.FloorDiv(num, E.const(a, lin.dtype))
    return simplify(cut if step == 1 else E.Mul(cut, E.const(step, lin.dtype)))


def _defined_inside(body) -> set:
    found = set()

    def walk(s):
        if isinstance(s, S.For):
            found.add(s.loop_var)
        elif isinstance(s, S.LetStmt):
            found.add(s.var)
        for f in s.fields():
            v = getattr(s, f)
            if isinstance(v, S.Stmt):
                walk(v)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    if isinstance(x, S.Stmt):
                        walk(x)

    walk(body)
    return found


class _DropConjuncts(StmtMutator):
    """Guards without the given conjuncts (proven to hold); a guard left with none is its
    then-branch."""

    def __init__(self, proven: list):
        super().__init__()
        self.proven = proven

    def visit_IfThenElse(self, s: S.IfThenElse):
        then_case = self.visit(s.then_case)
        else_case = self.visit(s.else_case) if s.else_case is not None else None
        keep = [c for c in E.conjuncts(s.condition)
                if not any(E.structural_equal(c, p) for p in self.proven)]
        if not keep:
            return then_case
        cond = keep[0]
        for c in keep[1:]:
            cond = E.And(cond, c)
        return S.IfThenElse(cond, then_case, else_case)


def _provably_le(x, y) -> bool:
    """x <= y for every value of the variables: y - x folds to a constant >= 0, or both are
    floor divisions by the same positive constant of such operands (the cut `n // 6` of a
    split's extent `(n + 5) // 6`), or y a max with a side that is."""
    d = simplify(E.Sub(*E.binary_operands(y, x)))
    if isinstance(d, E.Const):
        return d.value >= 0
    if isinstance(y, E.Max):  # (a piece's start max(n // 4, 0))
        return _provably_le(x, y.a) or _provably_le(x, y.b)
    if isinstance(x, E.FloorDiv) and isinstance(y, E.FloorDiv):
        a, b = E.as_int(x.b), E.as_int(y.b)
        return a is not None and a == b and a > 0 and _provably_le(x.a, y.a)
    return False


def _head_cut(c, var, ranges: dict) -> int | None:
    """The first value of `var` from which conjunct c holds for every value of the inner
    loops, when c is `rest - a * var < 0` with a > 0 and rest linear in the inner loop
    variables (constant ranges) and constants: a left padding guard of a conv's border
    tiles (`z.outer * 28 + rx >= 3`); else None."""
    lin = _as_negative(c)
    if lin is None:
        return None
    a, rest_max = 0, lin.const
    for t, coef in lin.terms.values():
        if t is var:
            a = coef
        elif _term_max(t, coef, ranges) is not None:
            rest_max += _term_max(t, coef, ranges)
        else:
            return None
    # rest - a * var < 0 for every inner value once a * var > rest_max
    return rest_max // -a + 1 if a < 0 else None


def _symbolic_cut(loop: S.For, mn: int, an: Analyzer):
    """The pieces of a loop of symbolic extent: (border, head, tail) or (head, tail) or
    (head,). The head runs without the linear tail guards (cut where the first may fail) and,
    in a serial loop, without the head guards that hold from a constant iteration on (a
    conv's left padding: the border piece before it keeps them). None when no guard conjunct
    is such a tail or head."""
    var, inside = loop.loop_var, _defined_inside(loop.body)
    # a parallel loop is not cut at a conjunct that also bounds a serial loop inside (a
    # conv's bottom rows, `y + ry - h < 1`): hoist_guards makes it that loop's bounds, where
    # a cut ran the last rows' every tile with guards, as a tail (13-20% of a 3x3 conv over a
    # symbolic 56x56 plane)
    serial = _loop_vars(loop.body, "serial") if loop.kind == "parallel" else set()
    cuts, proven, refused, heads = [], [], [], []
    for cond, ranges in _guards(loop.body, var, an):
        for c in E.conjuncts(cond):
            if var not in collect_vars(c) or collect_vars(c) & serial:
                continue
            cut = _tail_cut(c, var, ranges, inside)
            head = _head_cut(c, var, ranges) if cut is None and loop.kind == "serial" else None
            if head is not None and head > mn:
                heads.append((head, c))
            elif cut is None:
                refused.append(c)
            else:
                cuts.append(cut)
                proven.append(c)
    proven = [c for c in proven if not any(E.structural_equal(c, r) for r in refused)]
    if heads and not any(E.structural_equal(c, r) for _, c in heads for r in refused):
        return _border_cut(loop, max(h for h, _ in heads), [c for _, c in heads], an)
    if not proven:
        return None
    cut = cuts[0]
    for c in cuts[1:]:
        if _provably_le(c, cut):
            cut = c
        elif not _provably_le(cut, c):
            cut = E.Min(*E.binary_operands(cut, c))
    end = simplify(E.Add(*E.binary_operands(loop.min, loop.extent)))
    if _provably_le(end, cut):  # the guards hold in every iteration (`i0 - n < 0` in range(n))
        return (loop.replace(body=_DropConjuncts(proven).visit(loop.body)),)
    rows = _rows_left(proven, var, inside) if _allocates(loop.body) else None
    if not _provably_le(cut, end):
        cut = E.Min(*E.binary_operands(cut, end))
    lo, hi = E.binary_operands(cut, loop.min)
    head_ext = simplify(E.Max(E.Sub(lo, hi), E.const(0, lo.dtype)))
    head = loop.replace(extent=head_ext, body=_DropConjuncts(proven).visit(loop.body))
    tail = loop.replace(min=simplify(E.Add(*E.binary_operands(loop.min, head_ext))),
                        extent=simplify(E.Sub(*E.binary_operands(loop.extent, head_ext))))
    if rows is None:
        return head, tail
    # cut at n // a alone, the tail is the one tile of 1 .. a - 1 rows left
    last = simplify(E.FloorDiv(rows[0], E.const(rows[1], rows[0].dtype)))
    return head, _specialize_rows(tail, *rows, all(E.structural_equal(c, last) for c in cuts))


def _loop_vars(body, kind: str) -> set:
    """The variables of the loops of ``kind`` in body."""
    return {s.loop_var for s in _loops(body) if s.kind == kind}


def _whole_tiles(piece: S.For, an: Analyzer, heads: list | None = None) -> S.For:
    """A border or tail piece with a copy of its body for the iterations whose tiles are
    whole: there the tail guards of its unrolled tile loops (`z.outer * 14 + z - ow < 0`, of
    the piece's loop and one tile loop) hold, and are dropped. Kept, hoist_guards
    turns them into the bounds of a serial loop over a tile in memory; dropped, the tile
    stays unrolled in registers, its far edge's guards (a conv's right padding, which moves
    with the kernel column) versioned by _edge_versions. A conv over a symbolic plane, whose
    first and last column tiles are such pieces, ran 2.7x the static kernel's time at 56
    columns without it. The iterations whose tile is partial run _half_tiles."""
    var, inside = piece.loop_var, _defined_inside(piece.body)
    unrolled = _loop_vars(piece.body, "unrolled")
    an.bind_range(var, piece.min, piece.extent)
    try:
        found = [(c, _tail_cut(c, var, ranges, inside))
                 for cond, ranges in _guards(piece.body, var, an) for c in E.conjuncts(cond)
                 if var in collect_vars(c) and collect_vars(c) & unrolled
                 and len(collect_vars(c) & inside) == 1]
    finally:
        an.ranges.pop(var, None)
    found = [(c, cut) for c, cut in found if cut is not None]  # (head guards stay)
    if not found:
        return piece
    cut = found[0][1]
    for _, c in found[1:]:
        cut = c if _provably_le(c, cut) else cut if _provably_le(cut, c) else \
            E.Min(*E.binary_operands(cut, c))
    if _provably_le(cut, piece.min):  # (a tail of these guards' own cut: no whole tile)
        return piece
    conjs = [c for c, _ in found]
    an.bind_range(var, piece.min, piece.extent)
    try:
        whole = _edge_versions(_DropConjuncts(conjs).visit(piece.body), var, an)
        # the head guards a shifted half tile must start after: those the cut dropped from
        # this piece and those it kept
        heads = None if heads is None or piece.kind != "serial" else \
            heads + _head_guards(piece.body, var, an)
        partial = _half_tiles(piece.body, var, conjs, an, inside, heads,
                              an.bound(piece.min)[0]) or piece.body
    finally:
        an.ranges.pop(var, None)
    return piece.replace(body=S.IfThenElse(E.LT(*E.binary_operands(var, cut)), whole,
                                           partial))


def _shift_inwards(body: S.Stmt, var, an: Analyzer, inside: set, heads: list):
    """(a, base, least, shifted body) for a tile of `width` columns `a * var + z`
    (its tile loops of one constant extent, cut by tail guards `a * var + z + k - e < 0`)
    moved to end at the row's last column e - k - 1: `a * var` becomes base = `e - k - width`
    wherever it appears, so the tile recomputes columns of the tile before it (Halide's
    ShiftInwards tails). Its tail guards then hold, and the guards `heads` (_head_guards) are
    dropped: the caller runs it where base >= least, from which they hold. None where
    recomputing is not harmless (_recomputable), the guards disagree on the row's end, or
    `var` appears other than as multiples of `a * var`."""
    if not _recomputable(body):
        return None
    tails = [c for cond, ranges in _guards(body, var, an) for c in E.conjuncts(cond)
             if var in collect_vars(c) and len(collect_vars(c) & inside) == 1
             and _tail_cut(c, var, ranges, inside) is not None]
    tile_vars = {v for c in tails for v in collect_vars(c) & inside}
    extents = {E.as_int(s.extent) for s in _loops(body) if s.loop_var in tile_vars}
    if not tails or len(extents) != 1 or None in extents:
        return None
    width, ends = extents.pop(), []
    for c in tails:
        lin = _as_negative(c)
        coefs = {t: k for t, k in lin.terms.values()}
        if any(coefs.get(v) not in (None, 1) for v in tile_vars):
            return None
        end = E.const(-lin.const - width, lin.dtype)  # where a * var + width - 1 is the last
        for t, k in lin.terms.values():
            if t is not var and t not in tile_vars:
                end = E.Sub(end, E.Mul(t, E.const(k, lin.dtype)))
        ends.append((coefs.get(var), simplify(end)))
    a, base = ends[0]
    least = _least_shift(heads, var, a)
    if least is None or any(k != a or not E.structural_equal(e, base) for k, e in ends):
        return None
    shift = _ShiftTile(var, a, base)
    shifted = shift.visit(_DropConjuncts([c for c, _ in heads]).visit(body))
    return None if shift.failed else (a, base, least, shifted)


def _head_guards(body: S.Stmt, var, an: Analyzer) -> list:
    """(conjunct, ranges of the loops inside) of the guards in `body` that hold from some
    value of the serial loop variable `var` on (_head_cut): a conv's left padding, which a
    cut drops from the pieces after the row's border tiles."""
    return [(c, ranges) for cond, ranges in _guards(body, var, an)
            for c in E.conjuncts(cond) if _head_cut(c, var, ranges) is not None]


def _least_shift(heads: list, var, a: int) -> int | None:
    """The least value of `a * var` from which every head guard `k * var + rest < 0` (k < 0,
    a multiple of a) holds for every value of the inner loops; None where one is not of
    that form."""
    least = 0
    for c, ranges in heads:
        lin = _as_negative(c)
        k, rest_max = 0, lin.const
        for t, coef in lin.terms.values():
            if t is var:
                k = coef
            else:
                rest_max += _term_max(t, coef, ranges)
        if k >= 0 or k % a:
            return None
        m = -k // a  # k * var + rest < 0 <=> m * (a * var) > rest
        least = max(least, rest_max // m + 1)
    return least


class _ShiftTile(Mutator):
    """Every integer expression with `a * var` in its linear form gets `base` in its place
    (c * var: c / a times base); `failed` where var appears otherwise."""

    def __init__(self, var, a: int, base):
        super().__init__()
        self.var, self.a, self.base, self.failed = var, a, base, False

    def visit(self, node):
        if isinstance(node, E.Expr) and not isinstance(node, E.Const) \
                and dt.is_int(node.dtype) and dt.lanes(node.dtype) == 1 \
                and self.var in collect_vars(node):
            return self._shifted(node)
        return super().visit(node)

    def _shifted(self, e):
        lin = to_linear(simplify(e))
        out = Linear(lin.dtype, None, lin.const)
        for t, c in lin.terms.values():
            if t is self.var:
                if c % self.a:
                    self.failed = True
                    return e
                out = out.add(to_linear(self.base).scale(c // self.a))
            else:
                inner = self.generic(t) if self.var in collect_vars(t) else t
                out = out.add(to_linear(inner).scale(c))
        return simplify(out.to_expr())


def _recomputable(body: S.Stmt) -> bool:
    """True when running ``body`` twice over some of its elements stores what once did: it
    allocates the tile it accumulates in (a register tile computed at this loop), and no
    buffer from outside it is both stored and loaded in it (an output read back, or summed
    into across tiles, would take the first run's values in the second). A kernel whose
    output buffer is also one of its inputs (in place) would break that: the graph runs only
    elementwise kernels and softmax / layer-norm rows in place (graph/storage.py), none of
    which has such a tile."""
    found = _Buffers()
    found.visit(body)
    local = found.local
    return bool(local) and not ((found.stored - local) & (found.loaded - local))


class _Buffers(Visitor):
    """The buffers a body allocates, stores and loads."""

    def __init__(self):
        self.local, self.stored, self.loaded = set(), set(), set()

    def visit_Allocate(self, s):
        self.local.add(s.buffer)
        self.generic(s)

    def visit_Store(self, s):
        self.stored.add(s.buffer)
        self.generic(s)

    def visit_Load(self, e):
        self.loaded.add(e.buffer)
        self.generic(e)


class _TileRange(StmtMutator):
    """The loops over ``tile_vars`` run over [lo, hi) of their columns (their variable
    shifted by lo in their bodies)."""

    def __init__(self, tile_vars: set, lo: int, hi: int):
        super().__init__()
        self.tile_vars, self.lo, self.hi = tile_vars, lo, hi

    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        if s.loop_var not in self.tile_vars:
            return s if body is s.body else s.replace(body=body)
        v = s.loop_var
        if self.lo:
            body = substitute(body, {v: E.Add(v, E.const(self.lo, v.dtype))})
        return s.replace(extent=E.const(self.hi - self.lo, s.extent.dtype), body=body)


def _half_tiles(body: S.Stmt, var, conjs: list, an: Analyzer, inside: set,
                heads: list | None, first_var: int):
    """A partial tile (its columns cut by the tile guards ``conjs``, r of its `width` columns
    in the row) computed in half tiles where the first half is whole (r >= half): `if var <
    cut: first; rest`. A half tile's loops run a constant half tile without guards
    (unrolled, in registers; its far edge versioned as a whole tile's), where the partial
    tile ran them all as a serial loop over a tile in memory: a 3x3 conv over a symbolic 7x7
    plane, whose rows are one partial 14-column tile, ran 2.4x its static kernel.
    Past a row's first tile (the piece's loop from `first_var` >= 1, its dropped head
    guards `heads`: a conv's left padding), the rest (r > half) and a tile of r < half are a
    half tile shifted inwards to end at the row's end (_shift_inwards), which recomputes
    columns of the tile before it: a 3x3 conv over a symbolic 30x20 plane (20 = 14 + 6
    columns) ran 1.56x its static kernel, 1.07x shifted. Elsewhere (a row's first tile) they
    run guarded, as does a row narrower than half a tile (a 10x8 plane: 7 + 1 columns; 4x4
    and 5x5 planes, 2.7-3x their static kernel: quarter tiles brought them to 1.3-1.8x but
    made the kernels' builds 1.7x as long, and a shifted rest in the first tile, under a
    run-time test with the guarded one beside it, 1.4x). None where the tile loops are not
    of one constant extent of at least 4."""
    # every stage's column loop with its tail guard: the unrolled ones' (conjs) and any other
    # of one inner variable (the copy-out's, serial), which must take the same halves
    conjs = conjs + [c for cond, ranges in _guards(body, var, an) for c in E.conjuncts(cond)
                     if var in collect_vars(c) and len(collect_vars(c) & inside) == 1
                     and not any(E.structural_equal(c, k) for k in conjs)
                     and _tail_cut(c, var, ranges, inside) is not None]
    tile_vars = {v for c in conjs for v in collect_vars(c) & inside}
    extents = {E.as_int(s.extent) for s in _loops(body) if s.loop_var in tile_vars}
    if len(extents) != 1 or None in extents or min(extents) < 4:
        return None
    if not all(_writes_along(s) for s in _loops(body) if s.loop_var in tile_vars):
        return None
    width = extents.pop()
    half = width // 2
    cuts = []
    for cond, ranges in _guards(body, var, an):
        for c in E.conjuncts(cond):
            if any(E.structural_equal(c, k) for k in conjs):
                first = dict(ranges)
                for v in collect_vars(c) & tile_vars:
                    first[v] = (0, half - 1)
                cuts.append(_tail_cut(c, var, first, inside))
    if not cuts or any(c is None for c in cuts):
        return None
    cut = cuts[0]
    for c in cuts[1:]:
        cut = c if _provably_le(c, cut) else cut if _provably_le(cut, c) else \
            E.Min(*E.binary_operands(cut, c))
    first = _TileRange(tile_vars, 0, half).visit(_DropConjuncts(conjs).visit(body))
    rest, narrow = _TileRange(tile_vars, half, width).visit(body), body
    found = None if heads is None else \
        _shift_inwards(_TileRange(tile_vars, 0, half).visit(body), var, an, inside, heads)
    # the tile at var has a first column, so base >= a * var + 1 - half: past the row's first
    # tile (var >= first_var >= 1) the shifted half always starts after the head guards'
    if found is not None and found[0] * first_var + 1 - half >= found[2]:
        a, base, _, shifted = found
        # r = base + half - a * var: no rest where r == half
        rest = S.IfThenElse(E.GT(base, simplify(E.Mul(var, E.const(a, var.dtype)))), shifted)
        narrow = shifted
    return S.IfThenElse(E.LT(*E.binary_operands(var, cut)),
                        S.seq(_edge_versions(first, var, an), rest), narrow)


def _writes_along(loop: S.For) -> bool:
    """True when every store inside `loop` writes an element indexed by its variable (a tile's
    columns: each its own output). A reduction's loop (a conv's kernel rows, guarded by the
    padding like the columns) is not: split in two, each half would start the accumulator
    afresh and store it, the second half's store losing the first's terms (a depthwise 5x5
    stride-2 conv's last row over a symbolic plane computed only its last 3 kernel rows)."""
    stores: list = []

    class _Find(StmtVisitor):
        def visit_Store(self, s):
            stores.append(s)

    _Find().visit(loop.body)
    v = loop.loop_var
    return bool(stores) and all(any(v in collect_vars(i) for i in s.indices) for s in stores)


def _loops(body) -> list:
    found = []

    class _Find(StmtVisitor):
        def visit_For(self, s):
            found.append(s)
            self.visit(s.body)

    _Find().visit(body)
    return found


# Distances to a row's far edge that _edge_versions compiles a copy for.
EDGE_COPIES = 1


def _edge_versions(body: S.Stmt, var, an: Analyzer) -> S.Stmt:
    """``body`` (a whole tile) versioned by its distance d = w - a * var to the far edge of a
    symbolic extent w, for the guards `a * var + inner - w < c` of that edge (a conv's right
    padding at each column and kernel column): a copy without them where d is past every
    inner value, and a copy per value of d where some fail (the last EDGE_COPIES), w
    replaced by a * var + d so that they fold to constants per unrolled copy, as in a static
    kernel. Guards that vary per column were a branch per column per reduction step, which
    kept the tile in memory (a 3x3 conv over a symbolic 14x14 plane, one tile per row: 2.75x
    the static kernel's time). Other distances keep the guards."""
    inside = _defined_inside(body)
    edges, edge_of, reaches = [], set(), []
    for cond, ranges in _guards(body, var, an):
        for c in E.conjuncts(cond):
            found = _edge(c, var, ranges, inside)
            if found is not None:
                edges.append(c)
                edge_of.add(found[:2])
                reaches.append(found[2])
    if len(edge_of) != 1:
        return body
    (w, a), reach = edge_of.pop(), max(reaches)
    d = E.Sub(w, E.Mul(var, E.const(a, var.dtype)))
    out = body
    for k in range(reach - EDGE_COPIES + 1, reach + 1):
        at = simplify(E.Add(E.Mul(var, E.const(a, var.dtype)), E.const(k, var.dtype)))
        out = S.IfThenElse(E.EQ(d, E.const(k, var.dtype)), substitute(body, {w: at}), out)
    clean = _DropConjuncts(edges).visit(body)
    return S.IfThenElse(E.GT(d, E.const(reach, var.dtype)), clean, out)


def _edge(c, var, ranges: dict, inside: set):
    """(w, a, reach) when conjunct c is `a * var + inner - w < 0` (a > 0, inner linear in
    loop variables of constant ranges, w a variable defined outside): it holds for every
    inner value exactly where w - a * var > reach; else None."""
    lin = _as_negative(c)
    if lin is None:
        return None
    a, w, reach = 0, None, lin.const
    for t, coef in lin.terms.values():
        if t is var:
            a = coef
        elif isinstance(t, E.Var) and coef == -1 and t not in inside and t not in ranges:
            if w is not None:
                return None
            w = t
        elif _term_max(t, coef, ranges) is not None:
            reach += _term_max(t, coef, ranges)
        else:
            return None
    return (w, a, reach) if w is not None and a > 0 else None


def _border_cut(loop: S.For, start: int, conds: list, an: Analyzer) -> tuple:
    """(border, *pieces): the iterations before ``start`` as they are, and the rest without
    the head guards ``conds`` (they hold from ``start`` on), itself cut at its tail guards."""
    end = simplify(E.Add(*E.binary_operands(loop.min, loop.extent)))
    split = simplify(E.Min(*E.binary_operands(E.const(start, end.dtype), end)))
    border = loop.replace(extent=simplify(E.Max(E.Sub(split, loop.min),
                                                E.const(0, end.dtype))))
    rest = loop.replace(min=split, extent=simplify(E.Sub(end, split)),
                        body=_DropConjuncts(conds).visit(loop.body))
    return (border, *(_symbolic_cut(rest, start, an) or (rest,)))


# A tail piece whose last tile has fewer than this many rows is copied once per row count.
MAX_SPECIALIZED_ROWS = 4


def _rows_left(proven: list, var, inside: set) -> tuple | None:
    """(n, a) when every proven tail guard is `a * var + (inner terms) - n < 0` for one term n
    of what is defined outside the loop (a shape variable, or a product of them: a dense over
    batch * seq rows) and one a in [2, MAX_SPECIALIZED_ROWS]: the tail's tile then has n - a *
    var rows left, 1 to a - 1 of them; else None."""
    found: list = []
    for c in proven:
        lin = _as_negative(c)
        a = outside = None
        for t, coef in lin.terms.values():
            if t is var:
                a = coef
            elif coef == -1 and not collect_vars(t) & (inside | {var}):
                if outside is not None:
                    return None
                outside = t
        if a is None or outside is None:
            return None
        if not any(k == a and E.structural_equal(t, outside) for t, k in found):
            found.append((outside, a))
    if len(found) != 1:
        return None
    (n, a), = found
    return (n, a) if 2 <= a <= MAX_SPECIALIZED_ROWS else None


class _FindAllocate(StmtVisitor):
    def __init__(self):
        self.found = False

    def visit_Allocate(self, s):
        self.found = True


def _allocates(body) -> bool:
    """True when body allocates a buffer (a stage computed inside the tile: an accumulator),
    which is what a constant row count lets LLVM keep in registers."""
    v = _FindAllocate()
    v.visit(body)
    return v.found


def _specialize_rows(tail: S.For, n, a: int, exhaustive: bool) -> S.For:
    """The tail's body copied for each count of rows left (n == a * var + k, k = 1 .. a - 1),
    n replaced by that value in the copy: its row guards become constants, and once the rows
    are unrolled LLVM keeps the tile's accumulators in registers instead of memory indexed by
    a run-time row count (a symbolic dense's batch-1 call is all tail: [M, 256] . [256, 512]
    at M = 1, 1 thread, ~1 us slower than the static kernel before). The body as it was
    stays as the last else, unless `exhaustive` (the tail holds only the last tile, with 1 ..
    a - 1 rows): then the copy for one row is (an int8 dense over symbolic rows: 1171 -> 858
    lines of LLVM IR)."""
    var, body = tail.loop_var, tail.body

    def rows(k):  # n = a * var + k, in the copy for k rows left
        value = simplify(E.Add(E.Mul(var, E.const(a, var.dtype)), E.const(k, var.dtype)))
        copy = substitute(body, {n: value}) if isinstance(n, E.Var) else \
            _ReplaceTerm(n, value).visit(body)
        return value, copy

    out = rows(1)[1] if exhaustive else body
    for k in range(a - 1, 1 if exhaustive else 0, -1):
        value, copy = rows(k)
        out = S.IfThenElse(E.EQ(n, value), copy, out)
    return tail.replace(body=out)


class _ReplaceTerm(Mutator):
    """Every expression structurally equal to ``term`` (a product of shape variables) replaced
    by ``value`` (the buffers' shapes are left: their sizes are the same)."""

    def __init__(self, term, value):
        super().__init__()
        self.term, self.value = term, value

    def visit(self, node):
        if type(node) is type(self.term) and E.structural_equal(node, self.term):
            return self.value
        return super().visit(node)


def partition_loops(body: S.Stmt) -> S.Stmt:
    p = _Partition()
    p.an.ranges.update(checked_minimums(body))
    return p.visit(body)
