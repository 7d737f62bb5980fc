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
buffer, constant stride and lane count; each gather is read unconditionally by a plain store at
the top level of the sequence (not under a select, a predicate or an if, which may skip it);
nothing in the sequence from the first to the last of those statements stores to the buffer.
The rows are read before the first statement of the group; they cover exactly the elements the
gathers read, so no access is added.
"""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator, Visitor, post_order
from ...ir.simplify import simplify

_SIZES = (16, 8, 4)


class _Gathers(Visitor):
    """The strided vector loads that an expression evaluates unconditionally."""

    def __init__(self):
        self.found: list = []

    def visit_Select(self, e):
        self.visit(e.condition)  # only the condition is always evaluated

    def visit_Load(self, e):
        idx = e.indices[0]
        if (isinstance(idx, E.Ramp) and idx.lanes in _SIZES
                and E.as_int(idx.stride) not in (None, 0, 1)):
            self.found.append(e)


def _stores_to(s, buf) -> bool:
    found = []
    post_order(s, lambda x: found.append(x) if type(x) is S.Store and x.buffer is buf else None)
    return bool(found)


def _offset(a, b) -> int | None:
    return E.as_int(simplify(a - b))


class _Group:
    """m gathers of n lanes reading b + i*S + j (lane i, gather j)."""

    def __init__(self, buf, base, stride: int, n: int, loads: dict):
        self.buf, self.base, self.stride, self.n = buf, base, stride, n
        self.loads = loads  # j -> the gather loads reading column j
        self.m = len(loads)

    def bindings(self, fresh) -> tuple[list, dict]:
        """(var, value) pairs to bind, in order, and id(load) -> the var holding its vector."""
        n, m, b, st = self.n, self.m, self.base, self.stride
        t = min(n, m)
        lets: list = []

        def bind(value):
            v = E.Var(fresh(), value.dtype)
            lets.append((v, value))
            return v

        def row(start):
            return bind(E.Load(self.buf, (E.Ramp(simplify(start), E.const(1, b.dtype), t),)))

        cols: dict[int, list] = {j: [] for j in range(m)}  # column j's t-lane pieces
        if m >= n:  # m // n squares side by side: rows i, columns p*n .. p*n + n - 1
            for p in range(m // n):
                tr = _transpose([row(b + i * st + p * n) for i in range(n)], bind)
                for jj in range(n):
                    cols[p * n + jj].append(tr[jj])
        else:  # n // m squares stacked: rows q*m .. q*m + m - 1, all m columns
            for q in range(n // m):
                tr = _transpose([row(b + (q * m + ii) * st) for ii in range(m)], bind)
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


def _find_groups(stmts) -> list[tuple[int, _Group]]:
    """(index of the group's first statement, group) for every group in the sequence."""
    cands: dict[tuple, list] = {}  # (buffer, stride, lanes) -> [(stmt index, load)]
    for k, st in enumerate(stmts):
        if type(st) is not S.Store or st.predicate is not None:
            continue
        gathers = _Gathers()
        gathers.visit(st.value)
        for ld in gathers.found:
            r = ld.indices[0]
            cands.setdefault((ld.buffer, E.as_int(r.stride), r.lanes), []).append((k, ld))
    groups = []
    for (buf, stride, n), items in cands.items():
        while items:
            ld0 = items[0][1]
            rel = {}  # offset from the first gather's base -> [(stmt index, load)]
            for k, ld in items:
                off = _offset(ld.indices[0].base, ld0.indices[0].base)
                if off is not None:  # the others: another block, compared on a later turn
                    rel.setdefault(off, []).append((k, ld))
            lo = min(rel)
            m = next((m for m in _SIZES if all(lo + j in rel for j in range(m))), None)
            if m is not None:
                members = [x for j in range(m) for x in rel[lo + j]]
                first = min(k for k, _ in members)
                last = max(k for k, _ in members)
                if not any(_stores_to(stmts[k], buf) for k in range(first, last + 1)):
                    base = simplify(ld0.indices[0].base + lo)
                    loads = {j: [ld for _, ld in rel[lo + j]] for j in range(m)}
                    groups.append((first, _Group(buf, base, stride, n, loads)))
                used = {id(ld) for _, ld in members}
            else:
                used = {id(ld) for off in rel for _, ld in rel[off]}
            items = [x for x in items if id(x[1]) not in used]
    return groups


class _Replace(Mutator):
    def __init__(self, vars_: dict):
        super().__init__()
        self.vars = vars_

    def visit_Load(self, e):
        v = self.vars.get(id(e))
        return v if v is not None else self.generic(e)


class _TransposeGathers(Mutator):
    def __init__(self):
        super().__init__()
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"tr{self.count}"

    def visit_SeqStmt(self, s):
        stmts = [self.visit(x) for x in s.stmts]
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


def transpose_gathers(body: S.Stmt) -> S.Stmt:
    return _TransposeGathers().visit(body)
