"""TopK's sorting kernel: a stable LSD radix sort of each row, written as loop IR (a tl.extern
with an IRBody, ops/sort.py chooses it): what no compute can say, since the place an element
goes depends on the data.

Per row (the elements along the axis): each element becomes an unsigned key whose order is the
wanted order (best first: largest or smallest), then 8 bits of the key at a time, lowest first,
the (key, index) pairs are scattered into 256 buckets in order (a counting sort). Each pass is
stable and the pairs start in index order, so equal keys keep the lower index first: ONNX's tie
rule, with no comparison of indices. A float NaN takes the best key of its sign-less kind
(+inf for largest, -inf for smallest), as the ranks' NaN pre-pass does in ops/sort.py, so the
indices stay a permutation. The histograms of every pass come from one read of the row; a pass
whose digit is the same for the whole row (the top bytes of small ints, the exponent byte of
values of one binade) only copies. Cost per row: one read of the row plus, per byte of the
dtype, a scatter of n pairs; independent of k, which only sets how many indices are written.
"""

from __future__ import annotations

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.simplify import simplify
from ..te.extern import IRBody, extern
from ..te.tensor import Tensor

RADIX_BITS = 8
BUCKETS = 1 << RADIX_BITS
SPLIT = 4  # histograms of the first read's top digit, interleaved (see _read)
# dtypes the kernel sorts (float16 computes in float32 elsewhere: the ranks paths keep it)
KEY_DTYPES = {"float32": "uint32", "float64": "uint64", "int8": "uint32", "int16": "uint32",
              "int32": "uint32", "int64": "uint64", "uint8": "uint32", "uint16": "uint32",
              "uint32": "uint32", "uint64": "uint64"}
# rows x n elements from which the rows are sorted on the thread pool
PARALLEL_ELEMENTS = 1 << 14


def supports(dtype: str) -> bool:
    return dtype in KEY_DTYPES


def radix_topk_indices(x: Tensor, ax: int, n: int, k: int, largest: bool) -> Tensor:
    """The int64 indices of the k best elements along `ax`, best first, ties by the lower
    index: [..., k, ...] in x's other axes."""
    shape = tuple(x.shape[:ax]) + (k,) + tuple(x.shape[ax + 1:])

    def build(ins, outs):
        return _sort_rows(ins[0], outs[0], ax, n, k, largest)

    body = IRBody("topk_radix", build)
    return extern(shape, [x], lambda ins, outs: body, name="topk_radix", dtype="int64",
                  attrs={"k": k, "axis": ax, "largest": largest})


def _c(value, dtype: str = "int64") -> E.Const:
    return E.const(value, dtype)


def _at(idx: tuple, ax: int, t) -> tuple:
    return idx[:ax] + (t,) + idx[ax + 1:]


def _extent(d) -> E.Expr:
    return _c(d) if isinstance(d, int) else d.astype("int64")


def _row_index(r: E.Var, shape: tuple, ax: int) -> tuple:
    """Row r's position in every axis but `ax` (row-major over those axes, constant or
    symbolic extents); a placeholder 0 at `ax`."""
    out: list = []
    rest = r
    outer = [d for d in range(len(shape)) if d != ax]
    for d in reversed(range(len(shape))):
        if d == ax:
            out.append(_c(0))
        elif d == outer[0]:  # the outermost: what is left (r < rows)
            out.append(rest)
        else:
            out.append(rest % _extent(shape[d]))
            rest = rest // _extent(shape[d])
    return tuple(reversed(out))


def _key(v: E.Expr, dtype: str, largest: bool) -> E.Expr:
    """An unsigned key of v whose ascending order is the wanted order (best first)."""
    kt = KEY_DTYPES[dtype]
    bits = dt.bits(dtype)
    top = 1 << (dt.bits(kt) - 1)
    ones = (1 << dt.bits(kt)) - 1
    if dt.is_float(dtype):
        best = float("inf") if largest else float("-inf")
        # NaN: the best key; -0.0: +0.0's (equal values rank by index)
        v = E.Select(v != v, E.const(best, dtype),  # noqa: PLR0124 - NaN test
                     E.Select(v == E.const(0.0, dtype), E.const(0.0, dtype), v))
        u = E.Call(kt, "reinterpret", (v,))
        # negative: all bits flipped; positive: the sign bit set (ascending unsigned order)
        key = E.Select(u >= E.const(top, kt), E.const(ones, kt) - u, u + E.const(top, kt))
    elif dt.is_unsigned(dtype):
        key = v.astype(kt)
    elif bits == 64:  # two's complement shifted by half the range: ascending unsigned order
        key = v.astype(kt) + E.const(top, kt)
    else:
        key = (v.astype("int64") + E.const(1 << (bits - 1), "int64")).astype(kt)
    if largest:  # descending: the complement within the dtype's width
        key = E.const((1 << bits) - 1, kt) - key
    return key


def _digit(key: E.Expr, p: int) -> E.Expr:
    kt = key.dtype
    shifted = key // E.const(1 << (RADIX_BITS * p), kt) if p else key
    return (shifted % E.const(BUCKETS, kt)).astype("int64")


def _buf(name: str, n: int, dtype: str) -> S.Buffer:
    return S.Buffer(name, (_c(n, "int64"),), dtype, "local")


def _for(name: str, extent, body_fn, kind: str = "serial") -> S.Stmt:
    v = E.Var(name, "int64")
    extent = _c(extent) if isinstance(extent, int) else extent
    return S.For(v, _c(0), extent, kind, body_fn(v))


def _load(b: S.Buffer, i) -> E.Load:
    return E.Load(b, (i,))


def _store(b: S.Buffer, i, value) -> S.Store:
    return S.Store(b, (i,), value)


class _Row:
    """The scratch of one row: keys and indices twice (a pass reads one pair, writes the
    other), the histograms of every pass, the first read's top digit (SPLIT of them), the
    next digit's of the candidates, and scalars (SUM, BOUND, COUNT, POS, BEFORE)."""

    SUM, BOUND, COUNT, POS, BEFORE = 0, 1, 2, 3, 4

    def __init__(self, n: int, kt: str, passes: int):
        self.n, self.passes = n, passes
        self.keys = (_buf("topk_keys_a", n, kt), _buf("topk_keys_b", n, kt))
        self.idx = (_buf("topk_idx_a", n, "int32"), _buf("topk_idx_b", n, "int32"))
        self.hist = _buf("topk_hist", passes * BUCKETS, "int32")
        self.top = _buf("topk_top", SPLIT * BUCKETS, "int32")
        self.scalars = _buf("topk_scalars", 5, "int32")
        self.next = _buf("topk_next", BUCKETS, "int32")

    def allocate(self, body: S.Stmt) -> S.Stmt:
        for b in (*self.keys, *self.idx, self.hist, self.top, self.next, self.scalars):
            body = S.Allocate(b, body)
        return body

    def get(self, which: int) -> E.Expr:
        return _load(self.scalars, _c(which))

    def set(self, which: int, value: E.Expr) -> S.Stmt:
        return _store(self.scalars, _c(which), value)


def _count_digits(row: _Row, key: E.Expr) -> list:
    """hist[p][digit p of key] += 1 for every pass p (key: an expression without let-bound
    values, so that the interval analysis proves the digit's read in bounds)."""
    out = []
    for p in range(row.passes):
        slot = _c(p * BUCKETS) + _digit(key, p)
        out.append(_store(row.hist, slot, _load(row.hist, slot) + _c(1, "int32")))
    return out


def _zero_histograms(row: _Row) -> S.Stmt:
    return _for("topk_h0", row.passes * BUCKETS, lambda d: _store(row.hist, d, _c(0, "int32")))


def _read(row: _Row, x: S.Buffer, base: tuple, ax: int, largest: bool) -> S.Stmt:
    """The keys in index order (pair 0's keys; its indices are implied: t at t), then the top
    digit's histogram: two loops, so that the keys' loop (selects and a bitcast per element)
    can be vectorized. The top digit (sign and exponent of a float) takes few values, so
    consecutive elements often count into one bucket: SPLIT histograms (by t % SPLIT) keep
    those increments independent."""
    top = row.passes - 1

    def key(t):
        # the value as a let: a load inside a select's branch is made safe by its own select
        # of the index, which would chain the loads
        v = E.Var("topk_x", x.dtype)
        return S.LetStmt(v, E.Load(x, _at(base, ax, t)),
                         _store(row.keys[0], t, _key(v, x.dtype, largest)))

    def count(t):
        slot = (t % _c(SPLIT)) * _c(BUCKETS) + _digit(_load(row.keys[0], t), top)
        return _store(row.top, slot, _load(row.top, slot) + _c(1, "int32"))

    zero = _for("topk_z", SPLIT * BUCKETS, lambda d: _store(row.top, d, _c(0, "int32")))
    return S.seq(zero, _for("topk_t", row.n, key), _for("topk_u", row.n, count))


def _count(row: _Row, pair: int, count: E.Expr) -> S.Stmt:
    """Every pass's histogram of the first `count` keys of pair `pair`."""
    def element(t):
        return S.seq(*_count_digits(row, _load(row.keys[pair], t)))

    return S.seq(_zero_histograms(row), _for(f"topk_g{pair}", count, element))


def _pass(row: _Row, p: int, src: int, count: E.Expr, in_order: bool) -> S.Stmt:
    """Counting-sort pass p (digit p) of the first `count` pairs of pair `src` into the other
    pair: a copy when every element has the same digit. in_order: the source pairs are the
    row in index order (pair t holds index t: not read)."""
    sk, si = row.keys[src], row.idx[src]
    dk, di = row.keys[1 - src], row.idx[1 - src]

    def index(t):
        return t.astype("int32") if in_order else _load(si, t)

    hb = _c(p * BUCKETS)
    same = _load(row.hist, hb + _digit(_load(sk, _c(0)), p)) == count.astype("int32")
    copy = _for(f"topk_c{p}", count, lambda t: S.seq(
        _store(dk, t, _load(sk, t)), _store(di, t, index(t))))

    def start(d):  # bucket d's first slot: the exclusive prefix sum of the counts
        c = E.Var("topk_count", "int32")
        return S.LetStmt(c, _load(row.hist, hb + d), S.seq(
            _store(row.hist, hb + d, row.get(row.SUM)),
            row.set(row.SUM, row.get(row.SUM) + c)))

    def scatter(t):
        slot = hb + _digit(_load(sk, t), p)
        pos = E.Var("topk_pos", "int32")
        at = pos.astype("int64")
        return S.LetStmt(pos, _load(row.hist, slot), S.seq(
            _store(dk, at, _load(sk, t)), _store(di, at, index(t)),
            _store(row.hist, slot, pos + _c(1, "int32"))))

    sort = S.seq(row.set(row.SUM, _c(0, "int32")), _for(f"topk_d{p}", BUCKETS, start),
                 _for(f"topk_s{p}", count, scatter))
    return S.IfThenElse(same, copy, sort)


def _sort(row: _Row, src: int, count: E.Expr, in_order: bool) -> tuple:
    """Every pass over the first `count` pairs of pair `src`: the statements, and the pair
    that holds the sorted result."""
    passes = [_pass(row, p, (src + p) % 2, count, in_order and p == 0)
              for p in range(row.passes)]
    return S.seq(*passes), (src + row.passes) % 2


def _boundary(row: _Row, counts, k: E.Expr, name: str) -> S.Stmt:
    """From a histogram (counts(d): bucket d's count): BOUND, the bucket holding the k-th best
    key, BEFORE and COUNT, how many keys lie before it and up to it (every key after it has k
    ahead)."""
    def bucket(d):
        c = E.Var("topk_in", "int32")
        before = row.get(row.SUM)
        here = (before < k) & (before + c >= k)
        return S.LetStmt(c, counts(d), S.seq(
            S.IfThenElse(here, S.seq(row.set(row.BOUND, d.astype("int32")),
                                     row.set(row.BEFORE, before),
                                     row.set(row.COUNT, before + c))),
            row.set(row.SUM, before + c)))

    return S.seq(row.set(row.SUM, _c(0, "int32")), row.set(row.BOUND, _c(BUCKETS - 1, "int32")),
                 row.set(row.BEFORE, _c(0, "int32")), row.set(row.COUNT, _c(row.n, "int32")),
                 _for(name, BUCKETS, bucket))


def _top_counts(row: _Row):
    def counts(d):
        total = _load(row.top, d)
        for part in range(1, SPLIT):
            total = total + _load(row.top, _c(part * BUCKETS) + d)
        return total

    return counts


def _compact(row: _Row, src: int, count: E.Expr, keep, index, extra=()) -> S.Stmt:
    """The pairs of pair `src` (the first `count`) for which keep(key) holds, in order, into the
    other pair (branch-free: every pair is written at POS, which moves on past a kept one
    only). extra(t, key): more statements per element."""
    sk, dk, di = row.keys[src], row.keys[1 - src], row.idx[1 - src]

    def element(t):
        pos = row.get(row.POS).astype("int64")
        key = _load(sk, t)
        return S.seq(_store(dk, pos, key), _store(di, pos, index(t)),
                     *[f(t, key) for f in extra],
                     row.set(row.POS, row.get(row.POS) + keep(key).astype("int32")))

    return S.seq(row.set(row.POS, _c(0, "int32")), _for(f"topk_f{src}", count, element))


def _filtered(row: _Row, k: int, out_write) -> S.Stmt:
    """After _boundary on the top digit: the candidates (top digit up to BOUND) into pair 1,
    counting the next digit of those in BOUND's bucket; a second boundary on that digit
    narrows them into pair 0 (top digit before BOUND, or at BOUND with the next digit up to
    the second bound); their histograms, the sort, the output."""
    top = row.passes - 1
    bound = row.get(row.BOUND).astype("int64")
    if row.passes == 1:  # one digit: the candidates are final
        c = E.Var("topk_c", "int64")
        some, final = _sort(row, 1, c, False)
        return S.seq(
            _compact(row, 0, _c(row.n), lambda key: _digit(key, top) <= bound,
                     lambda t: t.astype("int32")),
            S.LetStmt(c, row.get(row.COUNT).astype("int64"),
                      S.seq(_count(row, 1, c), some, out_write(row.idx[final]))))

    def count_next(t, key):  # a branch: few keys are in the boundary bucket, as a rule
        slot = _digit(key, top - 1)
        return S.IfThenElse(_digit(key, top) == bound, _store(
            row.next, slot, _load(row.next, slot) + _c(1, "int32")))

    zero = _for("topk_z2", BUCKETS, lambda d: _store(row.next, d, _c(0, "int32")))
    c1, c2 = E.Var("topk_c1", "int64"), E.Var("topk_c2", "int64")
    b1, b2 = E.Var("topk_b1", "int64"), E.Var("topk_b2", "int64")
    before = E.Var("topk_before", "int32")  # keys before BOUND's bucket: all kept

    def keep2(key):
        d = _digit(key, top)
        return (d < b1) | ((d == b1) & (_digit(key, top - 1) <= b2))

    some, final = _sort(row, 0, c2, False)
    second = S.seq(
        _compact(row, 1, c1, keep2, lambda t: _load(row.idx[1], t)),
        _count(row, 0, c2), some, out_write(row.idx[final]))
    return S.seq(
        zero,
        _compact(row, 0, _c(row.n), lambda key: _digit(key, top) <= bound,
                 lambda t: t.astype("int32"), (count_next,)),
        S.LetStmt(c1, row.get(row.COUNT).astype("int64"), S.LetStmt(b1, bound, S.LetStmt(
            before, row.get(row.BEFORE), S.seq(
                _boundary(row, lambda d: _load(row.next, d), _c(k, "int32") - before,
                          "topk_b2"),
                S.LetStmt(c2, (before + row.get(row.COUNT)).astype("int64"),
                          S.LetStmt(b2, row.get(row.BOUND).astype("int64"), second)))))))


def _write(out: S.Buffer, base: tuple, ax: int, k: int, idx: S.Buffer) -> S.Stmt:
    return _for("topk_j", k, lambda j: S.Store(out, _at(base, ax, j), _load(idx, j).astype(
        "int64")))


# Sort only the candidates (the keys up to the bucket of the k-th best by the top digit) when
# they are at most this fraction of the row: filtering costs about one more read.
FILTER_FRACTION = 0.5


def _sort_rows(x: S.Buffer, out: S.Buffer, ax: int, n: int, k: int, largest: bool) -> S.Stmt:
    shape = tuple(E.as_int(d) if E.as_int(d) is not None else d for d in x.shape)
    rows = _c(1)
    for d, extent in enumerate(shape):
        rows = rows * _extent(extent) if d != ax else rows
    passes = dt.bits(x.dtype) // RADIX_BITS
    known = E.as_int(simplify(rows))
    rows = _c(known) if known is not None else rows
    # a symbolic count of rows is taken as many (the pool splits what there is)
    kind = "serial" if known is not None and (known == 1 or known * n < PARALLEL_ELEMENTS) \
        else "parallel"

    def row_body(r):
        row = _Row(n, KEY_DTYPES[x.dtype], passes)
        base = _row_index(r, shape, ax)
        full, final = _sort(row, 0, _c(n), True)
        whole = S.seq(_count(row, 0, _c(n)), full, _write(out, base, ax, k, row.idx[final]))
        if k * 2 > n:  # at least half the row is wanted: no filter can pay
            return row.allocate(S.seq(_read(row, x, base, ax, largest), whole))
        def out_write(idx):
            return _write(out, base, ax, k, idx)

        small = row.get(row.COUNT) <= _c(int(n * FILTER_FRACTION), "int32")
        return row.allocate(S.seq(
            _read(row, x, base, ax, largest),
            _boundary(row, _top_counts(row), _c(k, "int32"), "topk_b"),
            S.IfThenElse(small, _filtered(row, k, out_write), whole)))

    return _for("topk_row", rows, row_body, kind)


__all__ = ["radix_topk_indices", "supports"]
