"""Tensor-expression integers -> isl's textual quasi-affine expressions.

isl's parser reads `floor(e/c)`, `e mod c`, `min(a, b)`, `max(a, b)` and integer multiples, which
covers every index a schedule primitive or an ordinary compute produces (splits give floor/mod by
constants, padding gives shifts, strided convolutions give multiples). Anything else (`i * j`,
`A[B[i]]`, a select) has no affine form: `to_isl` answers None and the caller over-approximates
(the whole array dimension), which keeps every verdict safe.

isl names must be unique among a map's input dims, output dims and parameters, and may not contain
dots (loop names like `k.inner` do). `Names` hands out sanitized names; generated helper dims use a
leading underscore, which sanitized user names never have, so the two can never collide."""

from __future__ import annotations

import re

from ..ir import dtype as dt
from ..ir import expr as E

_BAD = re.compile(r"[^A-Za-z0-9_]")


def sanitize(name: str) -> str:
    """An isl-safe identifier close to `name` (never starting with an underscore)."""
    s = _BAD.sub("_", name) or "v"
    if not s[0].isalpha():
        s = "v" + s
    return s


class Names:
    """Unique isl identifiers for one namespace (statement names, array names, dims, params)."""

    def __init__(self, taken=()):
        self.taken: set[str] = set(taken)

    def fresh(self, name: str) -> str:
        base = sanitize(name)
        out, n = base, 1
        while out in self.taken:
            out = f"{base}_{n}"
            n += 1
        self.taken.add(out)
        return out


class Params:
    """Symbolic extents (tl.var) seen while converting: Var -> isl parameter name."""

    def __init__(self, names: Names):
        self.names = names
        self.by_var: dict[E.Var, str] = {}

    def name(self, v: E.Var) -> str:
        got = self.by_var.get(v)
        if got is None:
            got = self.names.fresh(v.name)
            self.by_var[v] = got
        return got

    def decl(self) -> str:
        """The `[n, m] -> ` prefix of every isl string of one model (same order everywhere)."""
        return f"[{', '.join(self.by_var.values())}] -> " if self.by_var else ""


def _wrap(x) -> str:
    return str(x) if isinstance(x, int) else f"({x})"


def to_isl(e, env: dict, params: Params | None):
    """isl text for integer expression `e` (an int when it is a constant), or None when it is not
    quasi-affine. `env` maps the Vars that are set dimensions to their isl names; any other
    integer Var is a parameter (registered in `params`; None: refuse parameters)."""
    t = type(e)
    if t is E.Const:
        if isinstance(e.value, bool) or not isinstance(e.value, int):
            return None
        return e.value
    if t is E.Var:
        got = env.get(e)
        if got is not None:
            return got
        if params is None or not dt.is_int(e.dtype):
            return None
        return params.name(e)
    if t is E.Cast:
        if dt.is_int(e.dtype) and dt.is_int(e.value.dtype):
            return to_isl(e.value, env, params)
        return None
    if t is E.Add or t is E.Sub:
        a, b = to_isl(e.a, env, params), to_isl(e.b, env, params)
        if a is None or b is None:
            return None
        if isinstance(a, int) and isinstance(b, int):
            return a + b if t is E.Add else a - b
        return f"{_wrap(a)} {'+' if t is E.Add else '-'} {_wrap(b)}"
    if t is E.Mul:
        a, b = to_isl(e.a, env, params), to_isl(e.b, env, params)
        if a is None or b is None:
            return None
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if isinstance(a, int):
            return f"{a}*{_wrap(b)}"
        if isinstance(b, int):
            return f"{b}*{_wrap(a)}"
        return None  # a product of two unknowns is not affine
    if t is E.FloorDiv or t is E.FloorMod:
        a, b = to_isl(e.a, env, params), to_isl(e.b, env, params)
        if a is None or not isinstance(b, int) or b <= 0:
            return None
        if isinstance(a, int):
            return a // b if t is E.FloorDiv else a % b
        # isl's floor and mod by a positive constant agree with Python's // and %
        return f"floor(({a})/{b})" if t is E.FloorDiv else f"(({a}) mod {b})"
    if t is E.Min or t is E.Max:
        a, b = to_isl(e.a, env, params), to_isl(e.b, env, params)
        if a is None or b is None:
            return None
        if isinstance(a, int) and isinstance(b, int):
            return min(a, b) if t is E.Min else max(a, b)
        return f"{'min' if t is E.Min else 'max'}({a}, {b})"
    return None


_CMP = {E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.EQ: "="}


def cond_to_isl(c, env: dict, params: Params | None) -> str | None:
    """isl constraint text for a boolean expression, or None when it is not Presburger."""
    t = type(c)
    if t in _CMP:
        a, b = to_isl(c.a, env, params), to_isl(c.b, env, params)
        if a is None or b is None:
            return None
        return f"{_wrap(a)} {_CMP[t]} {_wrap(b)}"
    if t is E.NE:
        a, b = to_isl(c.a, env, params), to_isl(c.b, env, params)
        if a is None or b is None:
            return None
        return f"({_wrap(a)} < {_wrap(b)} or {_wrap(a)} > {_wrap(b)})"
    if t is E.And or t is E.Or:
        a, b = cond_to_isl(c.a, env, params), cond_to_isl(c.b, env, params)
        if a is None or b is None:
            return None
        return f"({a} {'and' if t is E.And else 'or'} {b})"
    if t is E.Const and isinstance(c.value, bool):
        return "true" if c.value else "false"
    return None
