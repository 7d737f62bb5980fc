"""Symbolic dimensions of graph values (issue 19: dynamic shapes).

A value's shape is a tuple whose entries are ints or integer expressions of shape variables
(``tl.var("batch")``, ``batch * seq``, ``seq // 2 + 1``, ``max(0, seq - 2)``). Every expression
here is kept in one canonical form (:func:`dim`): a sum of products of variables, floor
divisions/remainders and maxima/minima (ONNX's clamped Slice and Range lengths) with integer
coefficients, terms in a fixed order. So two dimensions that are the same
polynomial are the same expression, structurally (``batch * seq`` and ``seq * batch``), and
shape inference can compare them with ``==`` as it compares ints. An expression that is a
constant is an ``int``.

The text of a dimension (:func:`dim_text`) is what the plan of a compiled model records and what
the runtime evaluates (runtime/_dims.py: ``+ - * // %``, ``max`` and ``min`` over the variable
names).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tensorlang.ir import expr as E

from .ir import GraphError

# a polynomial: {monomial: coefficient}; a monomial is a sorted tuple of atom keys, where an
# atom is a variable or a floor division / remainder held whole
_Poly = dict[tuple[str, ...], int]


# tensorlang compares variables by identity; in a graph a shape variable is its name (as an
# ONNX dim_param), so every dimension is rewritten over one Var per name
_VARS: dict[str, E.Var] = {}


def shape_var(name: str) -> E.Var:
    """The graph's shape variable ``name`` (the same object for the same name)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise GraphError(f"shape variable name {name!r} must be an identifier")
    v = _VARS.get(name)
    if v is None:
        from tensorlang.te.tensor import var

        v = _VARS.setdefault(name, var(name))
    return v


def is_symbolic(d: Any) -> bool:
    return isinstance(d, E.Expr)


def is_static(shape: Sequence[Any]) -> bool:
    return not any(is_symbolic(d) for d in shape)


def dim(d: Any) -> Any:
    """``d`` in canonical form: an int, or an integer expression of shape variables."""
    if isinstance(d, bool):
        raise GraphError(f"dimension {d!r} is a bool, expected an int or a shape expression")
    if isinstance(d, int):
        return d
    if isinstance(d, float):  # (an inference rule's float arithmetic, as int() took it)
        return int(d)
    if hasattr(d, "__index__") and not isinstance(d, E.Expr):
        return int(d)
    if not isinstance(d, E.Expr):
        raise GraphError(f"dimension {d!r} is neither an int nor a shape expression")
    return _memo(_CANONICAL, str(d), lambda: _canonical(d))


def _canonical(d: E.Expr) -> Any:
    atoms: dict[str, E.Expr] = {}
    return _rebuild(_poly(d, atoms), atoms)


# Canonical forms and evident bounds by expression text. Nested max/min (ONNX's clamped slice
# bounds, read with their sign) canonicalize their operands and compare them again at every
# level: without these a model's dims took minutes (a 4-deep bound: 0.2-0.5 s per dim() call).
# The text names the expression exactly (variables are interned by name); the values are
# immutable expressions.
_CANONICAL: dict[str, Any] = {}
_LOWER_BOUND: dict[str, Any] = {}
_AT_LEAST: dict[tuple[str, str], bool] = {}
_MEMO_LIMIT = 100_000


def _memo(table: dict, key, compute) -> Any:
    if key not in table:
        if len(table) >= _MEMO_LIMIT:
            table.clear()
        table[key] = compute()
    return table[key]


def shape_of(shape: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dim(d) for d in shape)


def dim_text(d: Any) -> str:
    return str(dim(d))


def shape_json(shape: Sequence[Any]) -> list:
    """A shape as a plan records it: ints stay ints, expressions become their text."""
    return [d if isinstance(d, int) else dim_text(d) for d in shape]


def variables(shape: Iterable[Any]) -> set[str]:
    out: set[str] = set()
    for d in shape:
        if is_symbolic(d):
            _collect_vars(d, out)
    return out


def _collect_vars(e: E.Expr, out: set[str]) -> None:
    if isinstance(e, E.Var):
        out.add(e.name)
    elif isinstance(e, E.BinaryOp):
        _collect_vars(e.a, out)
        _collect_vars(e.b, out)


def num_elements(shape: Sequence[Any]) -> Any:
    n: Any = 1
    for d in shape:
        n = n * d
    return dim(n)


def quotient(a: Any, b: Any) -> Any:
    """a // b where b divides a exactly as a polynomial (``batch * seq * 64`` by ``seq * 4``
    is ``batch * 16``), else the floor division held whole (an int when both are ints)."""
    a, b = dim(a), dim(b)
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    atoms: dict[str, E.Expr] = {}
    num, den = _poly(_as_expr(a), atoms), _poly(_as_expr(b), atoms)
    if len(den) == 1:
        (dm, dc), = den.items()
        out: _Poly = {}
        for m, c in num.items():
            rest = list(m)
            if c % dc or any(rest.count(k) < dm.count(k) for k in set(dm)):
                break
            for k in dm:
                rest.remove(k)
            out[tuple(rest)] = c // dc
        else:
            return _rebuild(out, atoms)
    return dim(_as_expr(a) // _as_expr(b))


def evaluate(d: Any, env: Mapping[str, int]) -> int:
    """The value of a dimension for the given sizes of its variables."""
    if isinstance(d, int):
        return d
    if isinstance(d, E.Var):
        if d.name not in env:
            raise GraphError(f"shape variable {d.name!r} has no value")
        return int(env[d.name])
    if isinstance(d, E.Const):
        return int(d.value)
    if isinstance(d, E.BinaryOp) and type(d) in _OPS:
        return _OPS[type(d)](evaluate(d.a, env), evaluate(d.b, env))
    raise GraphError(f"dimension {d} is not an integer expression of shape variables")


_OPS = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
        E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b,
        E.Max: max, E.Min: min}


def broadcast(*shapes: Sequence[Any]) -> tuple[Any, ...]:
    """numpy's broadcasting over symbolic dimensions: a 1 takes the other side; two
    dimensions that are not 1 must be the same expression (a variable that might be 1 at
    run time is not broadcast: ONNX exporters write such axes as 1)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Any] = []
    for axis in range(rank):
        got: Any = 1
        for s in shapes:
            d = s[axis - rank + len(s)] if axis - rank + len(s) >= 0 else 1
            d = dim(d)
            if _is_one(d):
                continue
            if _is_one(got):
                got = d
            else:
                require_equal(got, d, f"shapes {', '.join(str(list(s)) for s in shapes)} do "
                                      "not broadcast")
        out.append(got)
    return tuple(out)


class UnprovenEqual(GraphError):
    """Shape inference needs dimensions ``a`` and ``b`` equal and can neither prove it nor
    prove them unequal (``t`` and ``p + s``: two axes an exporter named apart). A Builder user
    sees it as any GraphError; from_onnx solves the equation for one variable and imports the
    model again with that variable replaced, the runtime then checking the inputs' sizes."""

    def __init__(self, message: str, a: Any, b: Any) -> None:
        super().__init__(message)
        self.a, self.b = a, b

    def reworded(self, message: str) -> UnprovenEqual:
        return UnprovenEqual(message, self.a, self.b)


def require_equal(a: Any, b: Any, message: str) -> None:
    """Nothing when ``a`` and ``b`` are the same dimension; a GraphError(``message``) when
    they differ at every size (two ints, or evidently apart: ``n`` and ``n + 1``); else
    UnprovenEqual, which carries the equation."""
    if same(a, b):
        return
    if (isinstance(dim(a), int) and isinstance(dim(b), int)) or _never_equal(a, b):
        raise GraphError(message)
    raise UnprovenEqual(f"{message} ({a} and {b} are equal only at some sizes)", dim(a), dim(b))


def _is_one(d: Any) -> bool:
    return isinstance(d, int) and d == 1


def same(a: Any, b: Any) -> bool:
    """True when two dimensions are the same polynomial."""
    a, b = dim(a), dim(b)
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return E.structural_equal(a, b)


# -- the canonical form ----------------------------------------------------------------------


def _poly(e: E.Expr, atoms: dict[str, E.Expr]) -> _Poly:
    if isinstance(e, E.Const):
        return {(): int(e.value)} if int(e.value) else {}
    if isinstance(e, E.Var):
        atoms[e.name] = shape_var(e.name)
        return {(e.name,): 1}
    if isinstance(e, E.Add):
        return _add(_poly(e.a, atoms), _poly(e.b, atoms), 1)
    if isinstance(e, E.Sub):
        return _add(_poly(e.a, atoms), _poly(e.b, atoms), -1)
    if isinstance(e, E.Mul):
        return _mul(_poly(e.a, atoms), _poly(e.b, atoms))
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        return _div_or_mod(e, atoms)
    if isinstance(e, (E.Max, E.Min)):
        return _max_or_min(e, atoms)
    raise GraphError(f"dimension {e} is not an integer expression of shape variables "
                     "(+ - * // %, max and min of ints and tl.var)")


def _max_or_min(e: E.Expr, atoms: dict[str, E.Expr]) -> _Poly:
    """max/min of two dimensions: the one evidently larger (smaller) when there is one (so
    max(0, seq - 1) is seq - 1), else held whole with its operands in a fixed order."""
    a, b = dim(_rebuild(_poly(e.a, atoms), atoms)), dim(_rebuild(_poly(e.b, atoms), atoms))
    pick_max = isinstance(e, E.Max)
    if _at_least(a, b) or _at_least(b, a):
        keep = a if _at_least(a, b) == pick_max else b
        return _poly(_as_expr(keep), atoms)
    a, b = sorted((a, b), key=lambda d: (isinstance(d, int), str(d)))
    whole = (E.Max if pick_max else E.Min)(_as_expr(a), _as_expr(b))
    key = f"({whole})"
    atoms[key] = whole
    return {(key,): 1}


def _at_least(a: Any, b: Any) -> bool:
    """True when a >= b at every size, evidently: their difference has a lower bound >= 0
    (lower_bound), or b is a min (a a max) of which one operand is evidently at most a (at
    least b): min(n, 3) <= n."""
    return _memo(_AT_LEAST, (str(a), str(b)), lambda: _evidently_at_least(a, b))


def _evidently_at_least(a: Any, b: Any) -> bool:
    low = lower_bound(dim(a) - dim(b))
    if low is not None and low >= 0:
        return True
    if isinstance(b, E.Min) and (_at_least(a, dim(b.a)) or _at_least(a, dim(b.b))):
        return True
    return isinstance(a, E.Max) and (_at_least(dim(a.a), b) or _at_least(dim(a.b), b))


def smax(a: Any, b: Any) -> Any:
    """max(a, b) of two dimensions in canonical form (one of them when evidently larger)."""
    return dim(E.Max(_as_expr(dim(a)), _as_expr(dim(b))))


def smin(a: Any, b: Any) -> Any:
    """min(a, b) of two dimensions in canonical form (one of them when evidently smaller)."""
    return dim(E.Min(_as_expr(dim(a)), _as_expr(dim(b))))


def _div_or_mod(e: E.Expr, atoms: dict[str, E.Expr]) -> _Poly:
    num, den = _poly(e.a, atoms), _poly(e.b, atoms)
    if set(den) <= {()} and den.get((), 0) > 0:
        k = den.get((), 0)
        if all(c % k == 0 for m, c in num.items() if m):
            # k * q + r with a constant r: (k * q + r) // k is q + r // k and the remainder
            # r % k for every integer q ((4 * n) // 2 is 2 * n, (32 * t + 1) // 2 is 16 * t)
            r = num.get((), 0)
            if isinstance(e, E.FloorMod):
                return {(): r % k} if r % k else {}
            return _add({m: c // k for m, c in num.items() if m}, {(): r // k}, 1)
        nested = _nested_floordiv(num, atoms) if isinstance(e, E.FloorDiv) else None
        if nested is not None:
            # (p // m + q) // k is (p + m * q) // (m * k) for integer p and q: a size halved
            # three times rounding up, ((h + 1) // 2 + 1) // 2 + 1) // 2, is (h + 7) // 8,
            # as a dynamo export writes it ((h - 1) // 8 + 1)
            key, inner, m = nested
            rest = _as_expr(_rebuild({t: c for t, c in num.items() if t != (key,)}, atoms))
            return _poly(E.FloorDiv(inner.a + rest * m, _as_expr(m * k)), atoms)
        r = num.get((), 0)
        extremum = [t for t in num if t and num[t] == 1 and isinstance(atoms[t[0]], (E.Max, E.Min))
                    and len(t) == 1]
        if r and len(num) == 2 and extremum:
            # max(x, y) + r is max(x + r, y + r): a clamped window count, (max(h - 16, 0) + 16)
            # // 16, stays one floor division, max(h, 16) // 16
            x = atoms[extremum[0][0]]
            moved = type(x)(x.a + _as_expr(r), x.b + _as_expr(r))
            return _poly(type(e)(_as_expr(dim(moved)), e.b), atoms)
        if not 0 <= r < k:
            # the constant in [0, k): (p + r) // k is (p + r % k) // k + r // k, and
            # (p + r) % k is (p + r % k) % k ((h - 1) // 8 + 1 is (h + 7) // 8)
            num = _add(num, {(): r % k - r}, 1)
            shifted = _div_or_mod(type(e)(_as_expr(_rebuild(num, atoms)), e.b), atoms)
            return _add(shifted, {(): r // k}, 1) if isinstance(e, E.FloorDiv) else shifted
    a, b = _as_expr(_rebuild(num, atoms)), _as_expr(_rebuild(den, atoms))
    whole = a // b if isinstance(e, E.FloorDiv) else a % b
    key = f"({whole})"
    atoms[key] = whole
    return {(key,): 1}


def _nested_floordiv(num: _Poly, atoms: Mapping[str, E.Expr]) -> tuple | None:
    """(key, p // m, m) for a term of ``num`` that is ``p // m`` alone with coefficient 1 and
    a constant m > 0; None when there is none."""
    for t, c in num.items():
        if len(t) == 1 and c == 1:
            a = atoms[t[0]]
            if (isinstance(a, E.FloorDiv) and isinstance(a.b, E.Const)
                    and isinstance(a.b.value, int) and a.b.value > 0):
                return t[0], a, a.b.value
    return None


def _as_expr(x: Any) -> E.Expr:
    return E.const(x, "int64") if isinstance(x, int) else x


def _add(a: _Poly, b: _Poly, sign: int) -> _Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _mul(a: _Poly, b: _Poly) -> _Poly:
    out: _Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def _rebuild(p: _Poly, atoms: Mapping[str, E.Expr]) -> Any:
    """The expression of a polynomial: terms by degree then name, constant last (``n + 1``)."""
    if set(p) <= {()}:
        return p.get((), 0)
    out: Any = None
    for m in sorted(p, key=lambda m: (m == (), -len(m), m)):
        c = p[m]
        term: Any = None
        for key in m:
            term = atoms[key] if term is None else term * atoms[key]
        mag = abs(c)
        term = E.const(mag, "int64") if term is None else (term if mag == 1 else term * mag)
        if out is None:
            out = term if c > 0 else E.const(0, "int64") - term
        else:
            out = out + term if c > 0 else out - term
    return out


def parse(text: Any) -> Any:
    """A dimension from a plan's or a fused group's JSON: an int as it is, a text
    (``"batch * seq"``) as its expression, variables made with tl.var."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str):
        raise GraphError(f"dimension {text!r} is neither an int nor an expression's text")
    import ast

    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise GraphError(f"dimension {text!r} is not an expression") from None
    return dim(_from_ast(tree, text))


def parse_shape(shape: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(parse(d) for d in shape)


def _from_ast(node: Any, text: str) -> Any:
    import ast

    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return shape_var(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return 0 - _as_expr(_from_ast(node.operand, text))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("max", "min") and len(node.args) == 2 and not node.keywords:
        a, b = (_from_ast(arg, text) for arg in node.args)
        return (smax if node.func.id == "max" else smin)(a, b)
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
           ast.Mod: lambda a, b: a % b}
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        a, b = _from_ast(node.left, text), _from_ast(node.right, text)
        if isinstance(a, int) and isinstance(b, int):
            return ops[type(node.op)](a, b)
        return ops[type(node.op)](_as_expr(a), _as_expr(b))
    raise GraphError(f"dimension {text!r}: only ints, shape variables, + - * // %, max and min "
                     "are allowed")


# -- shape tensors holding symbolic dimensions (ONNX Shape -> Gather -> Concat -> Reshape) -------

_FOLD_ELEMENTWISE = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
                     "multiply": lambda a, b: a * b, "divide": lambda a, b: _divide(a, b),
                     "maximum": lambda a, b: smax(a, b), "minimum": lambda a, b: smin(a, b)}
# ONNX Max/Min of any number of inputs (dynamo's max(0, 2048 - seq)), folded pairwise
_FOLD_NARY = {"max_n": smax, "min_n": smin}
# ops that only move elements: their numpy references work on object arrays as they are
_FOLD_MOVES = ("gather", "concat", "reshape", "slice", "transpose", "expand", "tile")


def lower_bound(d: Any) -> int | None:
    """A lower bound of dimension expression ``d`` over all sizes (every shape variable is at
    least 1), when one is evident: a polynomial whose non-constant terms all have positive
    coefficients and atoms of evident non-negative lower bounds (a variable: 1; max(a, b): the
    larger known bound; min(a, b): the smaller; a // k: a's bound // k; a % k: 0) takes at least
    its value with every atom at its bound. None when there is no such evident bound (a
    difference of variables)."""
    d = dim(d)
    if isinstance(d, int):
        return d
    return _memo(_LOWER_BOUND, str(d), lambda: _evident_lower_bound(d))


def _evident_lower_bound(d: E.Expr) -> int | None:
    atoms: dict[str, E.Expr] = {}
    poly = _poly(_as_expr(d), atoms)
    total = 0
    for m, c in poly.items():
        if not m:
            total += c
            continue
        lows = [_atom_lower_bound(atoms[k]) for k in m]
        if c <= 0 or None in lows or (len(lows) > 1 and min(lows) < 0):
            return None  # (one atom may be negative: c * atom >= c * its bound still)
        term = c
        for low in lows:
            term *= low
        total += term
    return total


def _atom_lower_bound(a: E.Expr) -> int | None:
    if isinstance(a, E.Var):
        return 1
    if isinstance(a, (E.Max, E.Min)):
        lows = [lower_bound(x) for x in (a.a, a.b)]
        if isinstance(a, E.Max):
            known = [low for low in lows if low is not None]
            return max(known) if known else None
        return None if None in lows else min(lows)
    k = a.b.value if isinstance(a.b, E.Const) else None
    if not isinstance(k, int) or k <= 0:
        return None
    if isinstance(a, E.FloorMod):
        return 0
    low = lower_bound(a.a)
    return None if low is None else low // k


def _never_equal(a: Any, b: Any) -> bool:
    """True when a and b differ at every size: their difference (or its negation) is
    evidently at least 1."""
    low, high = lower_bound(dim(a) - dim(b)), lower_bound(dim(b) - dim(a))
    return (low is not None and low >= 1) or (high is not None and high >= 1)


def _equal(a: Any, b: Any) -> bool:
    if same(a, b):
        return True
    if _never_equal(a, b):
        return False
    raise GraphError(f"cannot compare {a} and {b}: the result depends on the sizes")


def _divide(a: Any, b: Any) -> Any:
    """ONNX's integer Div (rounding towards zero) of two dimensions: exactly when the
    quotient is a polynomial or both are evidently not negative (floor division is then the
    same); otherwise the result depends on the signs, known only at run time."""
    a, b = dim(a), dim(b)
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise GraphError("integer division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    q = quotient(a, b)
    if not isinstance(q, E.FloorDiv):
        return q  # divided exactly
    la, lb = lower_bound(a), lower_bound(b)
    if la is not None and la >= 0 and lb is not None and lb >= 1:
        return q
    raise GraphError(f"cannot divide {a} by {b} at import: the rounding depends on the sizes")


def _mod(a: Any, b: Any, fmod: int) -> Any:
    """ONNX's integer Mod of two dimensions by a positive constant: a % k (Python's, the sign
    of the divisor, as fmod=0; fmod=1 has the dividend's sign, the same where a is evidently
    not negative). A Swin's padding to whole windows, (w - h % w) % w. Else refused (computed
    at run time)."""
    a, b = dim(a), dim(b)
    if isinstance(a, int) and isinstance(b, int) and b:
        return a % b if not fmod or a >= 0 else -(-a % abs(b))
    low = lower_bound(a)
    if not isinstance(b, int) or b <= 0 or (fmod and (low is None or low < 0)):
        raise GraphError(f"cannot compute {a} mod {b} at import: the result depends on the "
                         "sizes")
    return dim(_as_expr(a) % _as_expr(b))


def _abs(d: Any) -> Any:
    """|d|: d or -d where the sizes decide its sign evidently, else max(d, -d) (exact)."""
    return smax(d, dim(0 - _as_expr(dim(d))))


def _clip_bound(v: Any, node: str) -> int | None:
    """A Clip bound (the converter's float) as the int it is for integer shape values; None
    for no bound."""
    if v is None or abs(float(v)) == float("inf"):
        return None
    if float(v) != int(v):
        raise GraphError(f"clip node {node!r}: bound {v} of integer shape values is not an "
                         "integer")
    return int(v)


def _clip(d: Any, attrs: Mapping[str, Any], node: str) -> Any:
    """ONNX Clip of a dimension: min(max(d, lo), hi), as onnxruntime applies the bounds."""
    lo, hi = (_clip_bound(attrs.get(k), node) for k in ("min", "max"))
    d = d if lo is None else smax(d, lo)
    return d if hi is None else smin(d, hi)


def _elementwise(fn, objs: list) -> Any:
    """fn over the broadcast elements of object arrays, as an object array."""
    import numpy as np

    arrs = np.broadcast_arrays(*objs)
    flat = [a.reshape(-1) for a in arrs]
    return np.array([dim(fn(*xs)) for xs in zip(*flat)],
                    dtype=object).reshape(arrs[0].shape)


def _fold_nary(fn, objs: list) -> Any:
    def pairwise(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out

    return _elementwise(pairwise, objs)


def fold_symbolic(op: str, arrays, attrs, node: str) -> list:
    """Fold an op over shape tensors some of whose elements are symbolic dimensions (object
    arrays): element moves (gather, concat, reshape/unsqueeze/squeeze, slice), integer
    arithmetic (negation; integer division where its rounding is known at import; Mod by a
    positive constant; max, min,
    Max/Min of several inputs, Clip and Abs as max/min of dimensions), casts
    between integer types, and equality where it is known at import (the same expression; or
    a difference that is at least 1 at every size: a variable is never 0 or -1, but may be 1).
    Anything else is a GraphError naming the op (the builder then computes it at run time);
    the result is an int64 array when no symbolic element is left."""
    import numpy as np

    from . import op_registry as R

    objs = [np.asarray(a, dtype=object) for a in arrays]
    if op in _FOLD_MOVES:  # (indices and other int arrays as they are)
        out = R.evaluate(op, [np.asarray(a) for a in arrays], attrs)[0]
    elif op == "cast" and np.dtype(attrs.get("dtype", "int64")).kind in "iu":
        out = objs[0].copy()
    elif op == "negative":  # (a width or a bound counted back from the end: -past)
        out = np.array([dim(0 - _as_expr(dim(x))) for x in objs[0].reshape(-1)],
                       dtype=object).reshape(objs[0].shape)
    elif op in _FOLD_ELEMENTWISE:
        out = _elementwise(_FOLD_ELEMENTWISE[op], objs)
    elif op in _FOLD_NARY:
        out = _fold_nary(_FOLD_NARY[op], objs)
    elif op == "mod":
        out = _elementwise(lambda a, b: _mod(a, b, attrs.get("fmod", 0)), objs)
    elif op == "abs":
        out = _elementwise(_abs, objs[:1])
    elif op == "clip":
        out = _elementwise(lambda d: _clip(d, attrs, node), objs[:1])
    elif op in ("equal", "not_equal"):
        a, b = np.broadcast_arrays(*objs)
        eq = np.array([_equal(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1))],
                      dtype=bool).reshape(a.shape)
        return [eq if op == "equal" else ~eq]
    elif op == "where":
        c, a, b = np.broadcast_arrays(*objs)
        out = np.where(c.astype(bool), a, b)
    else:
        raise GraphError(f"{op} node {node!r}: cannot compute {op} of a shape with symbolic "
                         "dimensions at import; give the inputs' sizes "
                         "(from_onnx(model, shapes=...))")
    out = np.asarray(out, dtype=object)
    flat = [dim(d) for d in out.reshape(-1)]
    if all(isinstance(d, int) for d in flat):
        return [np.array(flat, dtype=np.int64).reshape(out.shape)]
    res = np.empty(out.shape, dtype=object)
    res.reshape(-1)[:] = flat
    return [res]


# -- ONNX's clamped Slice over symbolic extents ------------------------------------------------


def onnx_bound(v: Any, n: Any) -> Any:
    """ONNX's reading of a Slice bound ``v`` on an axis of extent n, counted from the axis'
    beginning: v, or v + n where v is negative, exactly for either sign: v + n * min(max(-v,
    0), 1), the last factor the 0/1 step of v < 0 (the reading jumps at v = 0, which no max or
    min of v and n alone can hold). Still to be clamped (clamped_slice)."""
    v = dim(v)
    negative = smin(smax(dim(0 - _as_expr(v)), 0), 1)
    return dim(_as_expr(v) + _as_expr(dim(n)) * _as_expr(negative))


def clamped_slice(n: Any, start: Any, end: Any, step: int, within: bool = False,
                  start_inside: bool = False) -> tuple[Any, Any]:
    """(first index, length) of ONNX's Slice start:end:step on an axis of extent n, where
    start and end are already counted from the axis' beginning (a negative bound plus n) and
    may still lie outside it. ONNX clamps them to [0, n] (for a negative step, the start to
    [0, n - 1] and the end to [-1, n - 1]); the length then is max(0, ceil((end - start) /
    step)). A bound clamped on the side away from the other one only makes the length
    negative, which max(0, ...) already takes, so for a positive step one clamp per bound is
    enough: start up from 0 and end down to n (min(end, n) - max(start, 0) is the least of
    end - start, n - start, end and n); for a negative one the start both ways and the end up
    to -1 (and the length at most n: none at n = 0). Every max/min that the sizes decide
    evidently is simplified away (x[:, :-1] is n - 1 long, x[:, ::-1] n, x[:, -3:] min(n, 3)).
    ``within`` (a positive step): the end is taken as inside the axis, unclamped; the caller
    checks that at run time. ``start_inside`` (a positive step): the start is taken as inside
    [0, n], unclamped, which the caller checks at run time."""
    if step > 0 and start_inside:  # (end clamped up from 0 only makes the span negative)
        first = dim(start)
        spans = (end - _as_expr(first),) + (() if within else (n - _as_expr(first),))
    elif step > 0:
        first = smax(start, 0)
        spans = (end - _as_expr(dim(start)), end) + \
            (() if within else (n - _as_expr(dim(start)), n))
    else:  # (the start is also clamped up to 0: x[-5::-1] of 3 elements is [x[0]])
        first = smax(smin(start, dim(n - 1)), 0)
        spans = (first - _as_expr(dim(end)), first + 1, n)
    span = spans[0]
    for other in spans[1:]:
        span = smin(span, other)
    k = abs(step)
    if k > 1:
        span = dim((_as_expr(span) + (k - 1)) // k)
    return first, smax(span, 0)


# -- equations the graph needs between sizes named apart (from_onnx) ---------------------------


def substitute(d: Any, env: Mapping[str, Any]) -> Any:
    """Dimension ``d`` with each variable named in ``env`` replaced by its dimension there."""
    d = dim(d)
    return d if isinstance(d, int) else dim(_substituted(d, env))


def _substituted(e: E.Expr, env: Mapping[str, Any]) -> E.Expr:
    if isinstance(e, E.Var):
        return _as_expr(dim(env[e.name])) if e.name in env else e
    if isinstance(e, E.BinaryOp):
        return type(e)(_substituted(e.a, env), _substituted(e.b, env))
    return e


def solve_equal(a: Any, b: Any, prefer: Sequence[str]) -> tuple[str, Any] | None:
    """(v, d): ``a == b`` holds exactly when variable v is dimension d (in which v does not
    occur), for the first variable of ``prefer`` it can be solved for; None when there is none.
    Every size being at least 1 decides two steps: an extremum whose other operand is evidently
    off the other side drops (max(t - p, 0) == s is t - p == s), and a variable in every term
    divides out (s31 * s64 == s23 * s64 is s31 == s23). Then v must be linear: alone in one
    term whose coefficient divides every other (t - p - s == 0 gives t := p + s)."""
    a, b = _drop_extrema(dim(a), dim(b))
    atoms: dict[str, E.Expr] = {}
    poly = _cancel_common_variables(_poly(_as_expr(dim(_as_expr(a) - _as_expr(b))), atoms))
    for v in prefer:
        value = _solve_linear(poly, atoms, v)
        if value is not None:
            return v, value
    return None


# the multiples tried by solve_multiple: a UNet's depth of 2x2 poolings (2 ** 6 = 64)
_MULTIPLES = (2, 4, 8, 16, 32, 64)


def solve_multiple(a: Any, b: Any, prefer: Sequence[str]) -> tuple[str, Any] | None:
    """(v, m * v_divm) where ``a == b`` holds at every multiple of m of the one variable v
    they hold, m the smallest of _MULTIPLES for which the canonical forms prove it; None when
    there is none. A UNet pools a plane of height h twice and upsamples it back: the skip's
    2 * (h // 2 // 2 * 2 // 2) == h // 2 holds where h is a multiple of 4 (and at 4t + 1, where
    the next skip fails). A stricter reading than the equation's, as for ONNX's runtime
    failures: the runtime refuses an input size that is no multiple of m, never computes it."""
    names = variables([a, b])
    if len(names) != 1 or not prefer or next(iter(names)) not in prefer:
        return None
    (v,) = names
    for m in _MULTIPLES:
        part = shape_var(f"{v}_div{m}")
        value = dim(m * part)
        if same(substitute(a, {v: value}), substitute(b, {v: value})):
            return v, value
    return None


def solve_offset(a: Any, b: Any, prefer: Sequence[str]) -> tuple[str, Any] | None:
    """(v, v_overc + c) where ``a == b`` holds once every variable of theirs is large enough
    that no max/min of theirs depends on it: c the least offset (per variable) for which each
    such extremum's operands are evidently ordered at ``v_overc >= 0``. A conv or pool over a
    size too small for one window is refused at run time, so its output extent is written
    clamped (max(h - 16, 0) // 16 + 1 for a 16x16 patch embedding, op_registry.conv_out_dim),
    while an exporter computes the same extent from Shape ops unclamped (h // 16: a ViT's
    position embeddings interpolated to the patch grid, a Swin's windows): equal at every size
    the model runs. The input's axis then becomes ``h_over16 + 16`` (h_over16 >= 0: every
    extremum decided at h = 16 already), and the runtime refuses smaller sizes naming the
    input.
    The first variable of ``prefer`` (with an offset) is returned; the next import solves the
    others. None when no offsets make the forms equal."""
    names = variables([a, b])
    if not names or not names <= set(prefer):
        return None
    env: dict[str, Any] = {}
    for v in sorted(names, key=list(prefer).index):
        c = _least_offset([a, b], v)
        if c:
            env[v] = dim(shape_var(f"{v}_over{c}") + c)
    if not env or not same(substitute(a, env), substitute(b, env)):
        return None
    v = next(iter(env))
    return v, env[v]


_OFFSET_LIMIT = 1 << 16


def _least_offset(ds: Sequence[Any], v: str) -> int:
    """The least c >= 0 such that every max/min in ``ds`` whose operands' order depends on v
    alone has them evidently ordered at v = u + c with u >= 0 (0 when there is none)."""
    extrema: list[E.Expr] = []
    for d in ds:
        _collect_extrema(_as_expr(dim(d)), extrema)
    best = 0
    u = shape_var(f"__{v}_offset")
    for x in extrema:
        diff = dim(_as_expr(dim(x.a)) - _as_expr(dim(x.b)))
        if variables([diff]) != {v}:
            continue
        for sign in (1, -1):
            def ordered(c, sign=sign, diff=diff):  # (u >= 1: v = u - 1 + c covers u >= 0)
                low = lower_bound(substitute(sign * diff, {v: dim(u + (c - 1))}))
                return low is not None and low >= 0
            if not ordered(_OFFSET_LIMIT):
                continue
            lo, hi = 0, _OFFSET_LIMIT  # (ordered(hi); the least such c, by bisection)
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if ordered(mid) else (mid + 1, hi)
            best = max(best, lo)
            break
    return best


def _collect_extrema(e: E.Expr, out: list) -> None:
    if isinstance(e, (E.Max, E.Min)):
        out.append(e)
    if isinstance(e, E.BinaryOp):
        _collect_extrema(e.a, out)
        _collect_extrema(e.b, out)


def _drop_extrema(a: Any, b: Any) -> tuple[Any, Any]:
    """max(x, y) == z where z > y at every size is x == z (min: where z < y); repeated."""
    for x, z in ((a, b), (b, a)):
        if not isinstance(x, (E.Max, E.Min)):
            continue
        for keep, other in ((x.a, x.b), (x.b, x.a)):
            gap = dim(z) - dim(other) if isinstance(x, E.Max) else dim(other) - dim(z)
            low = lower_bound(gap)
            if low is not None and low >= 1:
                return _drop_extrema(dim(keep), z)
    return a, b


def _cancel_common_variables(poly: _Poly) -> _Poly:
    """The polynomial divided by every variable that is a factor of each of its terms (a size
    is never 0, so the equation poly == 0 is unchanged)."""
    while poly and () not in poly:
        common = set(next(iter(poly)))
        for m in poly:
            common &= set(m)
        common = {k for k in common if not k.startswith("(")}  # variables, not held atoms
        if not common:
            break
        k = min(common)
        poly = {_without(m, k): c for m, c in poly.items()}
    return poly


def _without(m: tuple[str, ...], key: str) -> tuple[str, ...]:
    rest = list(m)
    rest.remove(key)
    return tuple(rest)


def _solve_linear(poly: _Poly, atoms: Mapping[str, E.Expr], v: str) -> Any:
    """d with poly == 0 exactly when v == d, when v is alone in one term of poly and nowhere
    else (not inside a held division or extremum) and that term's coefficient divides the
    others; else None."""
    terms = [m for m in poly if v in m]
    if terms != [(v,)]:
        return None
    held: set[str] = set()
    for k, atom in atoms.items():
        if k.startswith("(") and any(k in m for m in poly):
            _collect_vars(atom, held)
    coef = poly[(v,)]
    rest = {m: c for m, c in poly.items() if m != (v,)}
    if v in held or any(c % coef for c in rest.values()):
        return None
    return dim(_rebuild({m: -c // coef for m, c in rest.items()}, atoms))
