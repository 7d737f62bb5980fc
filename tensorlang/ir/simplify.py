"""Arithmetic simplification: constant folding, integer expressions to an affine canonical form
(sum of coefficient * term + constant), floordiv/floormod rules that use known loop ranges, and
comparisons decided from bounds (which is what removes provably true guards).

Only integer arithmetic is reassociated; floating-point expressions are only constant-folded,
since reassociating them would change results."""

from __future__ import annotations

import math
import operator
from functools import cache

from . import dtype as dt
from . import expr as E
from . import stmt as S
from .functor import Mutator

INF = math.inf


class Analyzer:
    """Known integer ranges of variables: var -> (lo, hi), inclusive, ints or +-inf."""

    def __init__(self, ranges: dict | None = None):
        self.ranges: dict = dict(ranges or {})

    def bind(self, var: E.Var, lo, hi) -> None:
        self.ranges[var] = (lo, hi)

    def bind_range(self, var: E.Var, min_e, extent_e) -> None:
        lo = self.bound(min_e)[0]
        ext_hi = self.bound(extent_e)[1]
        hi_min = self.bound(min_e)[1]
        self.ranges[var] = (lo, hi_min + ext_hi - 1 if ext_hi != INF and hi_min != INF else INF)

    def copy(self) -> Analyzer:
        return Analyzer(self.ranges)

    # ------------------------------------------------------------------ bounds
    def bound(self, e) -> tuple:
        """Inclusive (lo, hi) of an integer expression; +-inf where unknown."""
        t = type(e)
        if t is E.Const:
            v = e.value
            return (int(v), int(v)) if not isinstance(v, float) else (v, v)
        if t is E.Var:
            return self.ranges.get(e, (-INF, INF))
        if t is E.Add:
            a, b = self.bound(e.a), self.bound(e.b)
            return (a[0] + b[0], a[1] + b[1])
        if t is E.Sub:
            a, b = self.bound(e.a), self.bound(e.b)
            return (a[0] - b[1], a[1] - b[0])
        if t is E.Mul:
            a, b = self.bound(e.a), self.bound(e.b)
            prods = [_mul(x, y) for x in a for y in b]
            return (min(prods), max(prods))
        if t is E.FloorDiv:
            b = self.bound(e.b)
            if b[0] == b[1] and b[0] > 0:
                a = self.bound(e.a)
                c = b[0]
                return (_floordiv(a[0], c), _floordiv(a[1], c))
            return (-INF, INF)
        if t is E.FloorMod:
            b = self.bound(e.b)
            if b[0] == b[1] and b[0] > 0:
                a = self.bound(e.a)
                if a[0] >= 0 and a[1] < b[0]:
                    return a
                return (0, b[0] - 1)
            return (-INF, INF)
        if t is E.Min:
            a, b = self.bound(e.a), self.bound(e.b)
            return (min(a[0], b[0]), min(a[1], b[1]))
        if t is E.Max:
            a, b = self.bound(e.a), self.bound(e.b)
            return (max(a[0], b[0]), max(a[1], b[1]))
        if t is E.Select:
            a, b = self.bound(e.true_value), self.bound(e.false_value)
            return (min(a[0], b[0]), max(a[1], b[1]))
        if t is E.Cast and dt.is_int(e.dtype) and dt.is_int(e.value.dtype):
            return self.bound(e.value)
        if t is E.Ramp:
            base = self.bound(e.base)
            step = self.bound(E.Mul(e.stride, E.const(e.lanes - 1, e.stride.dtype)))
            return (base[0] + min(0, step[0]), base[1] + max(0, step[1]))
        if t is E.Broadcast:
            return self.bound(e.value)
        return (-INF, INF)

    def can_prove(self, cond) -> bool:
        s = simplify(cond, self)
        return isinstance(s, E.Const) and bool(s.value)


def _mul(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def _floordiv(x, c):
    return x if x in (INF, -INF) else x // c


# ----------------------------------------------------------------------------- linear form


class _Key:
    """Structural dictionary key for an expression term."""

    __slots__ = ("e", "h")

    def __init__(self, e):
        self.e = e
        self.h = hash(e)

    def __hash__(self):
        return self.h

    def __eq__(self, other):
        return E.structural_equal(self.e, other.e)


class Linear:
    """sum(coef * term) + const over integer terms."""

    __slots__ = ("const", "dtype", "terms")

    def __init__(self, dtype: str, terms=None, c: int = 0):
        self.dtype = dtype
        self.terms: dict = terms if terms is not None else {}
        self.const = c

    def add(self, other: Linear, sign: int = 1) -> Linear:
        terms = dict(self.terms)
        for k, (t, c) in other.terms.items():
            old = terms.get(k)
            nc = (old[1] if old else 0) + sign * c
            if nc == 0:
                terms.pop(k, None)
            else:
                terms[k] = (t, nc)
        return Linear(self.dtype, terms, self.const + sign * other.const)

    def scale(self, f: int) -> Linear:
        if f == 0:
            return Linear(self.dtype)
        return Linear(self.dtype, {k: (t, c * f) for k, (t, c) in self.terms.items()},
                      self.const * f)

    def to_expr(self) -> E.Expr:
        out = self._build_expr()
        if type(out) is not E.Const:
            _remember_linear(out, self)
        return out

    def _build_expr(self) -> E.Expr:
        d = self.dtype
        pos, neg = [], []
        for t, c in self.terms.values():
            (pos if c > 0 else neg).append((t, abs(c)))
        out = None
        for t, c in pos:
            term = t if c == 1 else E.Mul(t, E.const(c, d))
            out = term if out is None else E.Add(out, term)
        for t, c in neg:
            term = t if c == 1 else E.Mul(t, E.const(c, d))
            out = E.Sub(E.const(0, d), term) if out is None else E.Sub(out, term)
        if out is None:
            return E.const(self.const, d)
        if self.const > 0:
            out = E.Add(out, E.const(self.const, d))
        elif self.const < 0:
            out = E.Sub(out, E.const(-self.const, d))
        return out


# The linear form of each expression that Linear.to_expr built, by identity (each entry keeps
# its expression alive, so the id is not reused meanwhile). Simplifying an affine chain bottom-up
# linearizes every partial sum again, which the simplifier just built from a Linear: quadratic
# in the chain's length without this. Linear forms are never changed in place, and depend only
# on the expression's structure, so any simplifier may share them. Bounded like _PLAIN_MEMO.
_LINEAR_OF: dict = {}
_LINEAR_OF_SIZE = 8192


def _remember_linear(e: E.Expr, lin: Linear) -> None:
    """Record to_linear(e) for e == lin.to_expr(): lin's terms, the positive ones first (the
    order in which to_expr writes them, and so the order to_linear reads them back in)."""
    if len(_LINEAR_OF) > _LINEAR_OF_SIZE:
        _LINEAR_OF.clear()
    negative = False
    for _, c in lin.terms.values():
        if c < 0:
            negative = True
        elif negative:  # a positive term after a negative one: to_expr wrote it first
            terms = {k: tc for k, tc in lin.terms.items() if tc[1] > 0}
            terms.update((k, tc) for k, tc in lin.terms.items() if tc[1] < 0)
            lin = Linear(lin.dtype, terms, lin.const)
            break
    _LINEAR_OF[id(e)] = (e, lin)


def to_linear(e: E.Expr) -> Linear:
    """Linear form of an (already simplified) integer expression."""
    hit = _LINEAR_OF.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    t = type(e)
    if t is E.Const:
        return Linear(e.dtype, None, int(e.value))
    if t is E.Add:
        return to_linear(e.a).add(to_linear(e.b))
    if t is E.Sub:
        return to_linear(e.a).add(to_linear(e.b), -1)
    if t is E.Mul:
        if isinstance(e.b, E.Const):
            return to_linear(e.a).scale(int(e.b.value))
        if isinstance(e.a, E.Const):
            return to_linear(e.b).scale(int(e.a.value))
    # (the dtype only here: an operator's is its left operand's, a walk down a long sum)
    return Linear(e.dtype, {_Key(e): (e, 1)}, 0)


def _merge_divmod(lin: Linear) -> Linear:
    """k * c * (x // c) + k * (x % c) == k * x (floor division, any sign of x): the index of a
    fused loop recombined, e.g. `f // 6 * 6 + f % 6` back to `f` (a contiguous access again).
    Repeated to a fixpoint, so that three fused loops (`f // 21 * 21 + f // 3 % 7 * 3 + f % 3`)
    collapse step by step (`(f // 3) // 7` is matched in its canonical form `f // 21`)."""
    changed = True
    while changed:
        changed = False
        for key, (t, coef) in list(lin.terms.items()):
            c = E.as_int(t.b) if type(t) is E.FloorMod else None
            if not c or c <= 0 or key not in lin.terms:
                continue
            div = _plain_simplifier().visit_FloorDiv(E.FloorDiv(t.a, t.b))
            dkey = _Key(div)
            d = lin.terms.get(dkey)
            if d is not None and d[1] == coef * c:
                pair = Linear(lin.dtype, {key: (t, coef), dkey: d})
                lin = lin.add(pair, -1).add(to_linear(t.a).scale(coef))
                changed = True
    return lin


# ----------------------------------------------------------------------------- folding

_FOLD = {
    E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul,
    E.EQ: operator.eq, E.NE: operator.ne, E.LT: operator.lt, E.LE: operator.le,
    E.GT: operator.gt, E.GE: operator.ge,
}


def _wrap_int(value: int, d: str) -> int:
    """Two's complement wrap-around, as the generated code does."""
    bits = dt.bits(d)
    if dt.is_unsigned(d):
        return value % (1 << bits)
    value %= 1 << bits
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _float_minmax(va: float, vb: float, is_max: bool) -> float:
    """What the generated code computes (llvm.maximum/minimum): NaN if either is NaN, -0 < +0.
    Python's max(nan, 1) is nan but max(1, nan) is 1: the fold must not depend on the order."""
    if math.isnan(va) or math.isnan(vb):
        return math.nan
    if va == vb:  # equal zeros of either sign: order them by sign, -0 below +0
        neg_a = math.copysign(1.0, va) < 0
        return (vb if neg_a else va) if is_max else (va if neg_a else vb)
    return max(va, vb) if is_max else min(va, vb)


def _fold_const(e, a: E.Const, b: E.Const):
    t = type(e)
    va, vb = a.value, b.value
    if dt.is_float(a.dtype):
        if t is E.Div:
            if vb == 0:
                return None
            return E.const(va / vb, a.dtype)
        if t in (E.Min, E.Max):
            return E.const(_float_minmax(va, vb, t is E.Max), a.dtype)
        fn = _FOLD.get(t)
        if fn is None:
            return None
        r = fn(va, vb)
        if isinstance(r, bool):
            return E.const(r, "bool")
        if a.dtype != "float64":
            import numpy as np

            r = float(np.array(r, dtype=a.dtype))
        return E.const(r, a.dtype)
    if t is E.And:
        return E.const(bool(va and vb), "bool")
    if t is E.Or:
        return E.const(bool(va or vb), "bool")
    if t is E.FloorDiv:
        return None if vb == 0 else E.const(_wrap_int(va // vb, a.dtype), a.dtype)
    if t is E.FloorMod:
        return None if vb == 0 else E.const(_wrap_int(va % vb, a.dtype), a.dtype)
    if t is E.Min:
        return E.const(min(va, vb), a.dtype)
    if t is E.Max:
        return E.const(max(va, vb), a.dtype)
    fn = _FOLD.get(t)
    if fn is None:
        return None
    r = fn(va, vb)
    if isinstance(r, bool):
        return E.const(r, "bool")
    return E.const(_wrap_int(r, a.dtype), a.dtype)


@cache
def _signed_scalar_int(d: str) -> bool:
    """Whether the affine rules apply to dtype d (asked of every integer node simplified)."""
    return dt.lanes(d) == 1 and dt.is_int(d) and not dt.is_unsigned(d)


class Simplifier(Mutator):
    def __init__(self, analyzer: Analyzer | None = None):
        super().__init__()
        self.an = analyzer or Analyzer()
        # Results by structure. Unrolled code repeats the same subexpressions many times (a
        # register tile's 24 stores share their index terms); whoever changes the analyzer's
        # ranges must clear this, since results depend on them.
        self.memo: dict = {}
        # Vars replaced by (unsimplified) expressions as they are reached: visiting e with
        # subst {v: x} simplifies e with v substituted by x, without building the substituted
        # copy first (the statement pass's single-iteration loops). Clear the memo with it.
        self.subst: dict = {}

    def visit(self, node):
        # the leaves first, by exact type: most visits end at a constant or a loop variable
        t = type(node)
        if t is E.Const:
            return node
        if t is E.Var:
            return self.visit_Var(node)
        if not isinstance(node, E.Expr):
            return super().visit(node)
        key = _Key(node)
        hit = self.memo.get(key)
        if hit is None:
            fn = self._dispatch.get(t)
            out = fn(node) if fn is not None else super().visit(node)
            self.memo[key] = (node, out)
            return out
        # (what was visited, its result): an unchanged node stays the caller's own object
        seen, out = hit
        return node if out is seen else out

    def visit_Var(self, v):
        # bottom-up, a substituted var simplifies to what its value simplifies to
        x = self.subst.get(v) if self.subst else None
        return v if x is None else self.visit(x)

    # integer affine arithmetic ----------------------------------------------------------
    def _linear_op(self, e):
        e = self.generic(e)
        a, b = e.a, e.b
        if isinstance(a, E.Const) and isinstance(b, E.Const):
            f = _fold_const(e, a, b)
            if f is not None:
                return f
        d = e.dtype
        if not _signed_scalar_int(d):
            # vectors stay as they are, and so do unsigned integers: their wrap-around makes
            # reassociation across Sub unsafe
            if dt.lanes(d) > 1 or dt.is_int(d):
                return e
            return self._float_identity(e)
        if type(e) is E.Mul and not (isinstance(a, E.Const) or isinstance(b, E.Const)):
            return e
        return _merge_divmod(to_linear(e)).to_expr()

    visit_Add = _linear_op
    visit_Sub = _linear_op
    visit_Mul = _linear_op

    def _float_identity(self, e):
        a, b = e.a, e.b
        t = type(e)
        if t is E.Mul:
            if E.is_const(b, 1.0):
                return a
            if E.is_const(a, 1.0):
                return b
        if t is E.Add and E.is_const(b, 0.0) and not (isinstance(b.value, float)
                                                     and math.copysign(1, b.value) > 0):
            return a  # x + (-0.0) == x exactly
        return e

    def _divmod_operands(self, e):
        """(simplified node, folded result or None, positive constant divisor or None)."""
        e = self.generic(e)
        if isinstance(e.a, E.Const) and isinstance(e.b, E.Const):
            f = _fold_const(e, e.a, e.b)
            if f is not None:
                return e, f, None
        c = E.as_int(e.b)
        if c is None or c <= 0 or dt.lanes(e.dtype) > 1 or dt.is_unsigned(e.dtype):
            return e, None, None
        return e, None, c

    def visit_FloorDiv(self, e):
        e, folded, c = self._divmod_operands(e)
        if folded is not None or c is None:
            return folded if folded is not None else e
        a, b = e.a, e.b
        if c == 1:
            return a
        q, r = self._split_divisible(to_linear(a), c)
        lo, hi = self.an.bound(r.to_expr())
        if lo != -INF and hi != INF and lo // c == hi // c:
            return q.add(Linear(e.dtype, None, lo // c)).to_expr() if q.terms or q.const \
                else E.const(lo // c, e.dtype)
        g = math.gcd(c, *(coef for _, coef in r.terms.values())) if r.terms else 1
        if g > 1:
            # g * A + r0 with 0 <= r0 < g: (g * A + r0) // (g * m) == A // m, e.g. the oc
            # vector v of tile t of a grouped conv, (2 * t + v) // 8 == t // 4 (its group)
            k, _ = divmod(r.const, g)
            a = Linear(e.dtype, {key: (t, coef // g) for key, (t, coef) in r.terms.items()}, k)
            inner = self.visit_FloorDiv(E.FloorDiv(a.to_expr(), E.const(c // g, e.dtype)))
            return q.add(to_linear(inner)).to_expr()
        r_e = r.to_expr()
        inner = E.FloorDiv(r_e, b)
        # (x // a) // b == x // (a * b) for positive constants
        if type(r_e) is E.FloorDiv and E.as_int(r_e.b) is not None and E.as_int(r_e.b) > 0:
            inner = E.FloorDiv(r_e.a, E.const(E.as_int(r_e.b) * c, e.dtype))
        if not q.terms and q.const == 0:
            return inner
        return q.add(Linear(e.dtype, {_Key(inner): (inner, 1)}, 0)).to_expr()

    def visit_FloorMod(self, e):
        e, folded, c = self._divmod_operands(e)
        if folded is not None or c is None:
            return folded if folded is not None else e
        a, b = e.a, e.b
        if c == 1:
            return E.const(0, e.dtype)
        _, r = self._split_divisible(to_linear(a), c)
        lo, hi = self.an.bound(r.to_expr())
        if lo != -INF and hi != INF and lo // c == hi // c:
            return r.add(Linear(e.dtype, None, -(lo // c) * c)).to_expr()
        r_e = r.to_expr()
        # (x % (a*c)) % c == x % c
        if type(r_e) is E.FloorMod and E.as_int(r_e.b) is not None and E.as_int(r_e.b) % c == 0:
            r_e = r_e.a
        return E.FloorMod(r_e, b)

    @staticmethod
    def _split_divisible(lin: Linear, c: int) -> tuple[Linear, Linear]:
        """lin == c * q + r where q collects the terms whose coefficient c divides."""
        q_terms, r_terms = {}, {}
        for k, (t, coef) in lin.terms.items():
            if coef % c == 0:
                q_terms[k] = (t, coef // c)
            else:
                r_terms[k] = (t, coef)
        return (Linear(lin.dtype, q_terms, lin.const // c),
                Linear(lin.dtype, r_terms, lin.const % c))

    def _minmax(self, e):
        e = self.generic(e)
        a, b = e.a, e.b
        if isinstance(a, E.Const) and isinstance(b, E.Const):
            return _fold_const(e, a, b)
        if E.structural_equal(a, b):
            return a
        if dt.is_int(e.dtype) and dt.lanes(e.dtype) == 1:
            d = self.an.bound(self.visit(E.Sub(a, b)))
            if type(e) is E.Min:
                if d[1] <= 0:
                    return a
                if d[0] >= 0:
                    return b
            else:
                if d[0] >= 0:
                    return a
                if d[1] <= 0:
                    return b
        return e

    visit_Min = _minmax
    visit_Max = _minmax

    def visit_Div(self, e):
        e = self.generic(e)
        if isinstance(e.a, E.Const) and isinstance(e.b, E.Const):
            f = _fold_const(e, e.a, e.b)
            if f is not None:
                return f
        if E.is_const(e.b, 1.0):
            return e.a
        return e

    # comparisons --------------------------------------------------------------------------
    def _compare(self, e):
        e = self.generic(e)
        a, b = e.a, e.b
        if isinstance(a, E.Const) and isinstance(b, E.Const):
            f = _fold_const(e, a, b)
            if f is not None:
                return f
        if not _signed_scalar_int(a.dtype):
            return e
        # Moving terms across a comparison (a < b -> a - b < 0) is only exact when a - b cannot
        # overflow: true of index arithmetic, not of data read from memory (e.g. an argmax
        # whose accumulator starts at INT32_MIN). Leave comparisons of loaded values alone.
        if _reads_data(a) or _reads_data(b):
            return e
        diff = to_linear(a).add(to_linear(b), -1)
        lo, hi = self.an.bound(diff.to_expr())
        t = type(e)
        verdict = None
        if t is E.LT:
            verdict = True if hi < 0 else False if lo >= 0 else None
        elif t is E.LE:
            verdict = True if hi <= 0 else False if lo > 0 else None
        elif t is E.GT:
            verdict = True if lo > 0 else False if hi <= 0 else None
        elif t is E.GE:
            verdict = True if lo >= 0 else False if hi < 0 else None
        elif t is E.EQ:
            verdict = True if lo == hi == 0 else False if lo > 0 or hi < 0 else None
        elif t is E.NE:
            verdict = False if lo == hi == 0 else True if lo > 0 or hi < 0 else None
        if verdict is not None:
            return E.const(verdict, "bool")
        # canonical form: (terms) < const, which makes guards of one loop comparable
        if diff.terms and t in (E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE):
            rhs = -diff.const
            lhs = Linear(diff.dtype, diff.terms, 0).to_expr()
            return t(lhs, E.const(rhs, diff.dtype))
        return e

    visit_LT = _compare
    visit_LE = _compare
    visit_GT = _compare
    visit_GE = _compare
    visit_EQ = _compare
    visit_NE = _compare

    def visit_And(self, e):
        e = self.generic(e)
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(x, E.Const):
                return y if x.value else E.const(False, e.dtype)
        return e

    def visit_Or(self, e):
        e = self.generic(e)
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(x, E.Const):
                return E.const(True, e.dtype) if x.value else y
        return e

    def visit_Not(self, e):
        e = self.generic(e)
        if isinstance(e.a, E.Const):
            return E.const(not e.a.value, e.dtype)
        if isinstance(e.a, E.Not):
            return e.a.a
        return e

    def visit_Select(self, e):
        e = self.generic(e)
        if isinstance(e.condition, E.Const):
            return e.true_value if e.condition.value else e.false_value
        if E.structural_equal(e.true_value, e.false_value):
            return e.true_value
        return e

    def visit_Cast(self, e):
        e = self.generic(e)
        v = e.value
        if v.dtype == e.dtype:
            return v
        if isinstance(v, E.Const) and dt.lanes(e.dtype) == 1:
            import numpy as np

            if (dt.is_float(v.dtype) and not dt.is_float(e.dtype) and not dt.is_bool(e.dtype)
                    and not math.isfinite(v.value)):
                return e  # inf/nan to int is undefined: leave it to the hardware, as numpy does
            with np.errstate(all="ignore"):
                out = np.array(v.value, dtype=dt.element(v.dtype)).astype(e.dtype).item()
            return E.const(out, e.dtype)
        return e


def simplify(node, analyzer: Analyzer | None = None):
    """Simplify an expression or statement (statements: expressions inside are simplified with
    the ranges of the enclosing loops; see lower/passes/simplify.py for the statement pass)."""
    if analyzer is not None:
        return Simplifier(analyzer).visit(node)
    return _plain_simplifier().visit(node)


# Without known ranges, simplification is a function of the expression's structure alone, so
# every such call shares one memo: lowering simplifies many expressions built from the same
# pieces (a stage's loop values reappear in its indices, its guards, its consumers' bounds).
# Bounded: the entries keep their expressions (and the Vars in them) alive.
_PLAIN_MEMO: dict = {}
_PLAIN_MEMO_SIZE = 8192


_PLAIN: Simplifier | None = None


def _plain_simplifier() -> Simplifier:
    """The one range-free simplifier (it has no other state than the memo, and keeps its
    dispatch table warm: lowering calls simplify() thousands of times per kernel)."""
    global _PLAIN
    if len(_PLAIN_MEMO) > _PLAIN_MEMO_SIZE:
        _PLAIN_MEMO.clear()
    if _PLAIN is None:
        _PLAIN = Simplifier()
        _PLAIN.memo = _PLAIN_MEMO
    return _PLAIN


def _reads_data(e) -> bool:
    """True when the expression reads a buffer or tensor (a value, not index arithmetic)."""
    # a direct walk (what a Visitor with visit_Load / visit_TensorRead reaches): it runs on
    # both sides of every integer comparison the simplifier sees
    if e is None:
        return False
    if type(e).__name__ in _DATA_READS:
        return True
    if isinstance(e, _LEAVES) or not isinstance(e, E.Node):
        return False
    for name in e.fields():
        if _reads_in(getattr(e, name)):
            return True
    return False


def _reads_in(value) -> bool:
    if isinstance(value, _CHILDREN):
        return _reads_data(value)
    if isinstance(value, tuple):
        return any(_reads_in(v) for v in value)
    return False


_DATA_READS = ("Load", "TensorRead")
_LEAVES = (E.Var, S.Buffer, S.IterVar)
_CHILDREN = (E.Expr, S.Stmt, S.Range)
