"""Pass: strided vector loads that together read a block of a buffer become contiguous vector
loads and a transpose in registers.

After vectorize and unroll, a 2-D access whose vector runs along the strided side leaves, in one
statement sequence, m gathers of n lanes ``buf[ramp(b + j, S, n)]`` for j = 0..m-1 (e.g. the
NCHW16c -> NCHW layout transform: the vector runs along W, stride 16 in the input, and the
block's 16 channels are the unrolled loop). Together they read the n x m block
``b + i*S + j``: n contiguous rows of m elements. Codegen builds a gather lane by lane (a scalar
load and an insert per lane); here the rows are loaded as vectors and each t x t square
(t = min(n, m)) is transposed by log2(t) rounds of two-source shuffles (t*log2(t) shuffles for
t*t lanes; one vpermt2ps each on AVX-512). Measured on the NCHW16c -> NCHW transform of
1x64x56x56: see ops.schedule._schedule_layout_transform.

Conditions (anything else is left as it is): n and m are powers of two from 4 to 16, the same
buffer, stride and lane count (a stride may be symbolic, H * W for the channels of an NCHW
tensor over a symbolic plane: the rows read b + i*S .. b + i*S + m - 1 whatever S is, so the
transpose is exact for any value, 0 and 1 included); each gather is read unconditionally by a plain store at
the top level of the sequence (not under a select, a predicate or an if, which may skip it);
nothing in the sequence from the first to the last of those statements stores to the buffer.
The rows are read before the first statement of the group; they cover exactly the elements the
gathers read, so no access is added.

Two masked forms, the ragged last tile of a row of symbolic width (loop_partition's tail), are
grouped too, their rows read masked so that they still cover exactly what the gathers read:
- every gather of the group is ``select(M, gather, 0)`` under one lane mask M (the NCHW16c ->
  NCHW tail: lane i is a column of the row): row i is read when lane i of M holds (a branch
  per row), and column j of the transpose is the select itself;
- each column's gathers are stored under an ``if c_j`` with no else (the NCHW -> NCHW16c tail:
  column j of the row), where c_j are one comparison whose sides differ by j times a constant:
  the rows are read with the vector mask [c_j0, c_j0+1, ...] (a masked load).
Adjacent ifs on the same condition are merged first (vectorize's split of a guard leaves one
per unrolled copy), so that the copies' stores share one statement sequence.
"""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator, Visitor, post_order
from ...ir.simplify import simplify

_SIZES = (16, 8, 4)


def _is_gather(e) -> bool:
    idx = e.indices[0] if type(e) is E.Load else None
    return (isinstance(idx, E.Ramp) and idx.lanes in _SIZES
            and E.as_int(idx.stride) not in (0, 1))


class _Gathers(Visitor):
    """The strided vector loads that an expression evaluates unconditionally, as (load, lane
    mask or None, the node a transposed column replaces); with masked=True only the masked
    ones, select(M, gather, 0) (a predicated store's plain loads are masked by its predicate,
    which a row read would not be)."""

    def __init__(self, masked: bool = False):
        self.masked = masked
        self.found: list = []

    def visit_Select(self, e):
        self.visit(e.condition)  # only the condition is always evaluated
        zero = type(e.false_value) is E.Broadcast and _is_zero(e.false_value.value)
        if zero and _is_gather(e.true_value) and _lane(e.condition, 0) is not None:
            self.found.append((e.true_value, e.condition, e))

    def visit_Load(self, e):
        if _is_gather(e) and not self.masked:
            self.found.append((e, None, e))


def _is_zero(e) -> bool:
    return type(e) is E.Const and e.value == 0


_LANE_NODES = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.EQ, E.NE, E.LT,
               E.LE, E.GT, E.GE, E.And, E.Or)


def _lane(e, i: int):
    """Lane i of the vector expression e as a scalar expression (None: e holds a node this
    does not take apart, a load, a call)."""
    t = type(e)
    if t is E.Ramp:
        return simplify(e.base + e.stride * i)
    if t is E.Broadcast:
        return e.value
    if t is E.Const or t is E.Var:
        return e
    if t is E.Not:
        a = _lane(e.a, i)
        return None if a is None else E.Not(a)
    if t in _LANE_NODES:
        a, b = _lane(e.a, i), _lane(e.b, i)
        return None if a is None or b is None else simplify(t(a, b))
    return None


def _column_mask(conds: list, j0: int, t: int):
    """The vector [c_j0, ..., c_j0+t-1] of the columns' conditions as one comparison: each c_j
    is cmp(e_j, f_j) with e_j - f_j == (e_0 - f_0) + j * d for one constant d (conds[0] is
    column j0's). None otherwise."""
    c0 = conds[0]
    if not isinstance(c0, E.CmpOp) or any(type(c) is not type(c0) for c in conds):
        return None
    diff0 = simplify(c0.a - c0.b)
    if dt.lanes(diff0.dtype) != 1:
        return None
    steps = [E.as_int(simplify((c.a - c.b) - diff0)) for c in conds]
    d = steps[1] if len(steps) > 1 else 0
    if d is None or any(s != j * d for j, s in enumerate(steps)):
        return None
    ty = diff0.dtype
    lanes = E.Broadcast(diff0, t) + E.Ramp(E.const(0, ty), E.const(d, ty), t)
    return type(c0)(lanes, E.Broadcast(E.const(0, ty), t))


def _stores_to(s, buf) -> bool:
    found = []
    post_order(s, lambda x: found.append(x) if type(x) is S.Store and x.buffer is buf else None)
    return bool(found)


def _offset(a, b) -> int | None:
    return E.as_int(simplify(a - b))


class _Group:
    """m gathers of n lanes reading b + i*S + j (lane i, gather j)."""

    def __init__(self, buf, base, stride, n: int, loads: dict, mask=None, conds=None):
        self.buf, self.base, self.stride, self.n = buf, base, stride, n
        self.loads = loads  # j -> the nodes (gather loads, or their selects) of column j
        self.m = len(loads)
        self.mask = mask  # the lane mask every gather is selected by (rows: lanes)
        self.conds = conds  # the columns' if conditions, j -> c_j

    def _read(self, start, t: int, i: int, j0: int):
        """Row i's t elements from start (columns j0 ...), masked as the gathers are."""
        ld = E.Load(self.buf, (E.Ramp(simplify(start), E.const(1, self.base.dtype), t),))
        zero = E.Broadcast(E.const(0, dt.element(ld.dtype)), t)
        if self.mask is not None:
            lane = _lane(self.mask, i)
            if type(lane) is E.Const:  # a lane always or never read
                return ld if lane.value else zero
            return E.Select(E.Broadcast(lane, t), ld, zero)
        if self.conds is not None:
            return E.Select(_column_mask(self.conds[j0:j0 + t], j0, t), ld, zero)
        return ld

    def bindings(self, fresh) -> tuple[list, dict]:
        """(var, value) pairs to bind, in order, and id(load) -> the var holding its vector."""
        n, m, b, st = self.n, self.m, self.base, self.stride
        t = min(n, m)
        lets: list = []

        def bind(value):
            v = E.Var(fresh(), value.dtype)
            lets.append((v, value))
            return v

        def row(i, j0):
            return bind(self._read(b + i * st + j0, t, i, j0))

        cols: dict[int, list] = {j: [] for j in range(m)}  # column j's t-lane pieces
        if m >= n:  # m // n squares side by side: rows i, columns p*n .. p*n + n - 1
            for p in range(m // n):
                tr = _transpose([row(i, p * n) for i in range(n)], bind)
                for jj in range(n):
                    cols[p * n + jj].append(tr[jj])
        else:  # n // m squares stacked: rows q*m .. q*m + m - 1, all m columns
            for q in range(n // m):
                tr = _transpose([row(q * m + ii, 0) for ii in range(m)], bind)
                for j in range(m):
                    cols[j].append(tr[j])
        result = {}
        for j, pieces in cols.items():
            while len(pieces) > 1:  # concatenate the stacked pieces: t, 2t, ... lanes
                pieces = [bind(E.Shuffle(x, y, tuple(range(2 * dt.lanes(x.dtype)))))
                          for x, y in zip(pieces[::2], pieces[1::2])]
            for ld in self.loads[j]:
                result[id(ld)] = pieces[0]
        return lets, result


def _transpose(rows: list, bind) -> list:
    """Transpose t rows of t lanes: each round pairs row i with row i + t/2 and interleaves
    their low and high halves, which rotates the (row, lane) address bits left by one; after
    log2(t) rounds row and lane have swapped."""
    t, h = len(rows), len(rows) // 2
    lo = tuple(x for j in range(h) for x in (j, t + j))
    hi = tuple(x for j in range(h, t) for x in (j, t + j))
    for _ in range(t.bit_length() - 1):
        nxt = []
        for i in range(h):
            a, b = rows[i], rows[i + h]
            nxt += [bind(E.Shuffle(a, b, lo)), bind(E.Shuffle(a, b, hi))]
        rows = nxt
    return rows


def _candidates(stmts) -> dict:
    """(buffer, stride, lanes, lane mask) -> [(stmt index, load, column condition, node)]."""
    cands: dict[tuple, list] = {}
    for k, st in enumerate(stmts):
        cond = None
        if type(st) is S.IfThenElse and st.else_case is None and \
                dt.lanes(st.condition.dtype) == 1:
            cond, st = st.condition, st.then_case
        if type(st) is not S.Store:
            continue
        gathers = _Gathers(masked=st.predicate is not None)
        gathers.visit(st.value)
        for ld, mask, node in gathers.found:
            if mask is not None and cond is not None:
                continue
            r = ld.indices[0]
            key = (ld.buffer, r.stride, r.lanes, mask)
            cands.setdefault(key, []).append((k, ld, cond, node))
    return cands


def _find_groups(stmts) -> list[tuple[int, _Group]]:
    """(index of the group's first statement, group) for every group in the sequence."""
    groups = []
    for (buf, stride, n, mask), items in _candidates(stmts).items():
        while items:
            ld0 = items[0][1]
            rel = {}  # offset from the first gather's base -> [(stmt index, load, cond, node)]
            for item in items:
                off = _offset(item[1].indices[0].base, ld0.indices[0].base)
                if off is not None:  # the others: another block, compared on a later turn
                    rel.setdefault(off, []).append(item)
            lo = min(rel)
            m = next((m for m in _SIZES if all(lo + j in rel for j in range(m))), None)
            if m is not None:
                members = [x for j in range(m) for x in rel[lo + j]]
                group = _make_group(stmts, (buf, stride, n, mask), rel, lo, m, ld0)
                if group is not None:
                    groups.append((min(x[0] for x in members), group))
                used = {id(x[1]) for x in members}
            else:
                used = {id(x[1]) for off in rel for x in rel[off]}
            items = [x for x in items if id(x[1]) not in used]
    return groups


def _make_group(stmts, key, rel, lo, m, ld0) -> _Group | None:
    """The group of columns lo .. lo + m - 1, or None where it cannot be one: the buffer is
    stored to between its members, or its columns' conditions are not one vector mask."""
    buf, stride, n, mask = key
    members = [x for j in range(m) for x in rel[lo + j]]
    first, last = min(x[0] for x in members), max(x[0] for x in members)
    if any(_stores_to(stmts[k], buf) for k in range(first, last + 1)):
        return None
    conds = None
    if any(x[2] is not None for x in members):
        per_col = [{x[2] for x in rel[lo + j]} for j in range(m)]
        if any(len(c) != 1 or None in c for c in per_col):
            return None
        conds = [next(iter(c)) for c in per_col]
        t = min(n, m)
        if any(_column_mask(conds[j0:j0 + t], j0, t) is None for j0 in range(0, m, t)):
            return None
    base = simplify(ld0.indices[0].base + lo)
    loads = {j: [x[3] for x in rel[lo + j]] for j in range(m)}
    return _Group(buf, base, stride, n, loads, mask, conds)


class _Replace(Mutator):
    def __init__(self, vars_: dict):
        super().__init__()
        self.vars = vars_

    def visit_Load(self, e):
        v = self.vars.get(id(e))
        return v if v is not None else self.generic(e)

    visit_Select = visit_Load


class _TransposeGathers(Mutator):
    def __init__(self):
        super().__init__()
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"tr{self.count}"

    def visit_SeqStmt(self, s):
        stmts = [self.visit(x) for x in _merge_ifs(list(s.stmts))]
        groups = _find_groups(stmts)
        if not groups:
            return s if all(a is b for a, b in zip(stmts, s.stmts)) else S.seq(*stmts)
        at: dict[int, list] = {}
        replace = {}
        for first, g in groups:
            lets, vars_ = g.bindings(self.fresh)
            at.setdefault(first, []).extend(lets)
            replace.update(vars_)
        replacer = _Replace(replace)
        stmts = [replacer.visit(x) for x in stmts]
        points = sorted(at)
        body = None
        for k, end in zip(reversed(points), [len(stmts), *reversed(points)]):
            inner = S.seq(*stmts[k:end], body)  # seq drops the None of the last segment
            for var, value in reversed(at[k]):
                inner = S.LetStmt(var, value, inner)
            body = inner
        return S.seq(*stmts[:points[0]], body)


def _merge_ifs(stmts: list) -> list:
    """Adjacent ifs on one condition as one if (the conditions read no memory: loop and shape
    variables only, which the branches do not change), the branches' sequences merged."""
    out: list = []
    for st in stmts:
        prev = out[-1] if out else None
        if type(st) is S.IfThenElse and type(prev) is S.IfThenElse and \
                (st.else_case is None) == (prev.else_case is None) and \
                E.structural_equal(st.condition, prev.condition) and _pure(st.condition):
            other = None if st.else_case is None else \
                _merged(prev.else_case, st.else_case)
            out[-1] = S.IfThenElse(st.condition, _merged(prev.then_case, st.then_case), other)
        else:
            out.append(st)
    return out


def _merged(a, b):
    inner = S.seq(a, b)
    if type(inner) is not S.SeqStmt:
        return inner
    return S.seq(*_merge_ifs(list(inner.stmts)))


def _pure(e) -> bool:
    loads = []
    post_order(e, lambda x: loads.append(x) if type(x) in (E.Load, E.Call) else None)
    return not loads


def transpose_gathers(body: S.Stmt) -> S.Stmt:
    return _TransposeGathers().visit(body)
