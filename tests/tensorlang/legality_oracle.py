"""A brute-force legality oracle, independent of isl: run the scheduled loop nest instance by
instance in Python and compare with the unscheduled one.

The loop nest is the one lowering builds before its passes (inline, bound inference, loop nest),
so every instance runs in exactly the order the schedule gives, with the buffers that lowering
allocates: a stage computed at a loop gets a fresh buffer (filled with NaN) each time the loop
body allocates it. A schedule is illegal when

* its outputs differ from the unscheduled schedule's (a value used before it was computed, a
  stale or missing one: NaN), or the nest cannot even be built or run (a read of a buffer outside
  the loop that allocates it, an index out of range); or
* two instances in different iterations of one run of a parallel or vectorized loop touch the same
  element of the same buffer and one of them writes it (they would race, or interfere across
  vector lanes).

Reductions are compared with a tolerance: their updates may legally run in any order."""

from __future__ import annotations

import itertools
import math

import numpy as np

from tensorlang.ir import expr as E
from tensorlang.ir import stmt as S


class OracleError(Exception):
    """The nest cannot run (that alone makes the schedule illegal)."""


def loop_nest(schedule, args):
    """The loop nest of a schedule before any pass, without the legality check."""
    from tensorlang.lower.bound import infer_bounds
    from tensorlang.lower.inline import inline_bodies
    from tensorlang.lower.loop_nest import build_loop_nest

    bodies = inline_bodies(schedule)
    bounds = infer_bounds(schedule, bodies)
    return build_loop_nest(schedule, bodies, bounds, args, "oracle")


_UNARY = {"exp": math.exp, "sqrt": math.sqrt, "tanh": math.tanh, "abs": abs,
          "floor": math.floor, "ceil": math.ceil}


class _Run:
    def __init__(self, func: S.PrimFunc, arrays: list, sizes: dict):
        self.env: dict = {}
        for v in func.shape_vars:
            self.env[v] = sizes[v.name]
        self.mem: dict = {}  # Buffer -> (instance id, numpy array)
        self.ids = itertools.count()
        for b, a in zip(func.params, arrays):
            self.mem[b] = (next(self.ids), a)
        self.ctx: tuple = ()  # ((loop run id, iteration), ...) of enclosing parallel loops
        self.touch: dict = {}  # (instance id, index) -> [(is_write, ctx)]
        self.races: list = []

    # ------------------------------------------------------------------ memory
    def _access(self, buf, idx, write: bool):
        got = self.mem.get(buf)
        if got is None:
            raise OracleError(f"{buf.name} is used outside the loop that allocates it")
        inst, arr = got
        if len(idx) != arr.ndim or any(not 0 <= i < n for i, n in zip(idx, arr.shape)):
            raise OracleError(f"{buf.name}{list(idx)} is out of range {list(arr.shape)}")
        if self.ctx or write:
            key = (inst, idx)
            seen = self.touch.setdefault(key, [])
            for w, ctx in seen:
                if (w or write) and _concurrent(ctx, self.ctx):
                    self.races.append((buf.name, idx))
                    break
            seen.append((write, self.ctx))
        return arr

    # ------------------------------------------------------------------ expressions
    def ev(self, e):
        t = type(e)
        if t is E.Const:
            return e.value
        if t is E.Var:
            return self.env[e]
        if t is E.Load:
            idx = tuple(int(self.ev(i)) for i in e.indices)
            return self._access(e.buffer, idx, False)[idx]
        if t is E.Add:
            return self.ev(e.a) + self.ev(e.b)
        if t is E.Sub:
            return self.ev(e.a) - self.ev(e.b)
        if t is E.Mul:
            return self.ev(e.a) * self.ev(e.b)
        if t is E.Div:
            return self.ev(e.a) / self.ev(e.b)
        if t is E.FloorDiv:
            return self.ev(e.a) // self.ev(e.b)
        if t is E.FloorMod:
            return self.ev(e.a) % self.ev(e.b)
        if t is E.Min:
            return min(self.ev(e.a), self.ev(e.b))
        if t is E.Max:
            return max(self.ev(e.a), self.ev(e.b))
        if t in (E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE):
            a, b = self.ev(e.a), self.ev(e.b)
            return {E.LT: a < b, E.LE: a <= b, E.GT: a > b, E.GE: a >= b, E.EQ: a == b,
                    E.NE: a != b}[t]
        if t is E.And:
            return bool(self.ev(e.a)) and bool(self.ev(e.b))
        if t is E.Or:
            return bool(self.ev(e.a)) or bool(self.ev(e.b))
        if t is E.Not:
            return not self.ev(e.a)
        if t is E.Select:
            return self.ev(e.true_value) if self.ev(e.condition) else self.ev(e.false_value)
        if t is E.Cast:
            v = self.ev(e.value)
            return int(v) if e.dtype.startswith(("int", "uint")) else float(v)
        if t is E.Call and e.name in _UNARY:
            return _UNARY[e.name](self.ev(e.args[0]))
        if t is E.Let:
            self.env[e.var] = self.ev(e.value)
            return self.ev(e.body)
        raise NotImplementedError(f"oracle: expression {t.__name__}")

    # ------------------------------------------------------------------ statements
    def run(self, s):
        t = type(s)
        if s is None:
            return
        if t is S.SeqStmt:
            for x in s.stmts:
                self.run(x)
        elif t is S.For:
            lo, n = int(self.ev(s.min)), int(self.ev(s.extent))
            concurrent = s.kind in ("parallel", "vectorized")
            run_id = next(self.ids)
            outer = self.ctx
            for v in range(lo, lo + n):
                self.env[s.loop_var] = v
                if concurrent:
                    self.ctx = outer + ((run_id, v),)
                self.run(s.body)
            self.ctx = outer
        elif t is S.Store:
            idx = tuple(int(self.ev(i)) for i in s.indices)
            val = self.ev(s.value)
            self._access(s.buffer, idx, True)[idx] = val
        elif t is S.IfThenElse:
            if self.ev(s.condition):
                self.run(s.then_case)
            elif s.else_case is not None:
                self.run(s.else_case)
        elif t is S.LetStmt:
            self.env[s.var] = self.ev(s.value)
            self.run(s.body)
        elif t is S.Allocate:
            shape = tuple(int(self.ev(d)) for d in s.buffer.shape)
            old = self.mem.get(s.buffer)
            self.mem[s.buffer] = (next(self.ids), np.full(shape, np.nan))
            self.run(s.body)
            if old is None:
                del self.mem[s.buffer]
            else:
                self.mem[s.buffer] = old
        elif t is S.Evaluate:
            self.ev(s.value)
        else:
            raise NotImplementedError(f"oracle: statement {t.__name__}")


def _concurrent(a: tuple, b: tuple) -> bool:
    """Do contexts a and b lie in different iterations of one run of a parallel loop?"""
    for (ra, ia), (rb, ib) in zip(a, b):
        if ra != rb:
            return False
        if ia != ib:
            return True
    return False


def execute(schedule, args, inputs: list, sizes: dict | None = None):
    """(outputs, races) of running the schedule's loop nest on `inputs` (numpy arrays for the
    leading placeholder args); outputs start as NaN so unwritten elements show."""
    func = loop_nest(schedule, args)
    sizes = sizes or {}
    arrays = [np.asarray(a, dtype=np.float64).copy() for a in inputs]
    for b in func.params[len(inputs):]:
        shape = tuple(int(d.value) if isinstance(d, E.Const) else sizes[d.name]
                      for d in b.shape)
        arrays.append(np.full(shape, np.nan))
    r = _Run(func, arrays, sizes)
    r.run(func.body)
    return arrays[len(inputs):], r.races


def verdict(schedule, reference, args, inputs: list, sizes: dict | None = None) -> str | None:
    """None when the schedule is legal, else why not (the oracle's reading of it).
    `reference`: the outputs of the unscheduled schedule (from `execute`)."""
    try:
        outs, races = execute(schedule, args, inputs, sizes)
    except OracleError as e:
        return f"cannot run: {e}"
    except Exception as e:  # noqa: BLE001 - lowering itself refusing is also an illegal verdict
        return f"cannot lower: {type(e).__name__}: {e}"
    if races:
        return f"race on {races[0][0]}{list(races[0][1])}"
    for got, want in zip(outs, reference):
        if not np.allclose(got, want, rtol=1e-9, atol=1e-9, equal_nan=False):
            return "wrong result"
    return None
