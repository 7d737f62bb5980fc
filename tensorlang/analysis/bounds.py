"""The static bounds proof: every read of a tensor, as the compute that makes it was written,
stays inside the tensor's box over the compute's whole iteration domain.

For each read `A[f0(x), ..., fk(x)]` of a compute with iteration domain D (its spatial and
reduce axes; with symbolic shapes, for every value >= 0 of the shape variables: an array may be
empty) and each dimension d, the proof shows that no point x of D has fd(x) < 0 or
fd(x) >= A.shape[d]. A read
can be guarded: in `tl.if_then_else(i >= 1, A[i - 1], 0)` (a padding stage) and in a reduction's
`where=` it happens only where the guard holds, so the guards that dominate a read restrict D for
it (codegen does not touch memory on a select's side not taken, lower/passes/guard_padded_reads
and codegen's masked loads keep that true).

Two provers, cheapest first:
1. interval arithmetic over the axes' ranges, alone or relative to a guard (`A[h + r - 1]`
   under `0 <= h + r - 1 < H`: padding, every conv), a select's branches each under its side of
   the condition (analysis/intervals.py, which the run-time check pass shares);
2. isl, exactly (symbolic shapes, coupled bounds, and every refusal: the offending point is
   isl's sample of the out-of-bounds set).

A size of 0 empties every loop over it, so most reads are in bounds then too; one that is not
(`B[0] = A[n - 1]` reads A[-1] when n = 0) is proven for n >= 1, and the proof records that the
compute needs n >= 1 (Access.needs: a minimal set of variables that must be >= 1, found by isl):
lower/entry_checks.py turns it into a check at the kernel's entry, so the call refuses n = 0 with
a KernelError naming the variable and the read, instead of reading out of bounds.

A read isl finds out of bounds (for sizes >= 1) is refused with a LoweringError naming the compute, the read as
written, the tensor's shape and one offending index with the point that makes it. Where a guard or
an extent is not affine (it reads data, or multiplies variables) the proof holds only where it
holds without that guard: what is left is refused too, saying why it cannot be proven. An index
isl cannot express (a gather `A[Ix[i]]`, `A[i * j]` that the ranges do not bound) is "runtime":
lower/passes/check_indices.py checks it when the kernel runs.

A proof depends only on the compute definition, never on the schedule (which changes the order
of the reads, not which ones happen), so it is made once per compute op and memoized on it;
isl's verdicts are also cached by their text, for computes re-declared alike."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

import islpy as isl

from ..errors import LoweringError
from ..ir import expr as E
from ..ir.functor import Visitor, collect_vars, contains, substitute
from ..ir.simplify import Analyzer, simplify
from ..te.tensor import ComputeOp, TensorRead
from .affine import Names, Params, cond_to_isl, to_isl
from .intervals import in_bounds, nonneg_facts

PROVEN, REFUSED, RUNTIME = "proven", "refused", "runtime"


@dataclass(frozen=True)
class Access:
    """The verdict on one dimension of one read of a compute."""

    compute: str
    tensor_read: TensorRead  # the read as written
    dim: int
    status: str  # PROVEN | REFUSED | RUNTIME
    how: str = ""  # proven: by which prover; refused: the offending point; runtime: why
    certain: bool = True  # refused: False when a guard or range isl cannot read may exclude it
    needs: tuple = ()  # proven: the shape variables (Vars) that must be >= 1 for it (0 reads out)

    @property
    def read(self) -> str:
        return str(self.tensor_read)  # e.g. "A[i + 1]"

    @property
    def index(self) -> str:
        return str(self.tensor_read.indices[self.dim])

    @property
    def shape(self) -> str:
        shape = self.tensor_read.tensor.shape
        return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"

    def message(self) -> str:
        t = self.tensor_read.tensor
        where = f" (dimension {self.dim})" if len(t.shape) > 1 else ""
        if self.status == REFUSED:
            verdict = "out of bounds" if self.certain else "and it cannot be proven in bounds"
            return (f"compute {self.compute} reads {self.read} {verdict}: {t.name} has "
                    f"shape {self.shape}, and index {self.index}{where}{self.how}")
        return f"compute {self.compute} reads {self.read}: index {self.index}{where}: {self.how}"

    def needs_message(self, var) -> str:
        """Why the kernel refuses `var` = 0: this read (which needs it >= 1)."""
        t = self.tensor_read.tensor
        return (f"{var.name} must be at least 1: compute {self.compute} reads {self.read}, "
                f"out of bounds when {var.name} = 0 ({t.name} has shape {self.shape})")


@dataclass(frozen=True)
class Proof:
    """The verdicts on every read of one compute (and what proving them cost)."""

    compute: str
    accesses: tuple
    seconds: float
    shape_vars: tuple = ()  # the shape variables the proof assumed >= 0

    @property
    def needs(self) -> dict:
        """{shape variable: the first read that needs it >= 1}."""
        out: dict = {}
        for a in self.accesses:
            for v in a.needs:
                out.setdefault(v, a)
        return out

    @property
    def refused(self) -> list:
        return [a for a in self.accesses if a.status == REFUSED]

    @property
    def runtime(self) -> list:
        return [a for a in self.accesses if a.status == RUNTIME]


_PROOFS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def prove_op(op: ComputeOp) -> Proof:
    """The bounds proof of one compute (memoized on the op)."""
    got = _PROOFS.get(op)
    if got is None:
        t0 = time.perf_counter()
        prover = _Prover(op)
        accesses = prover.run()
        got = _PROOFS[op] = Proof(op.name, accesses, time.perf_counter() - t0,
                                  prover.shape_vars())
    return got


def check_bounds(schedule) -> list:
    """Prove the reads of every compute of the schedule in bounds (tl.lower runs this); raises
    LoweringError for the first read that is not. Returns the proofs."""
    proofs = [prove_op(st.op) for st in schedule.stages if isinstance(st.op, ComputeOp)]
    for p in proofs:
        bad = p.refused
        if bad:
            raise LoweringError(bad[0].message())
    return proofs


# ----------------------------------------------------------------------------- reads and guards


class _GuardedReads(Visitor):
    """Every TensorRead with the conditions that dominate it: (condition, holds) pairs from the
    selects whose branch it is in and from a reduction's where=."""

    def __init__(self):
        self.guards: list = []
        self.found: list = []

    def visit_TensorRead(self, r):
        self.found.append((r, tuple(self.guards)))
        for i in r.indices:
            self.visit(i)

    def visit_Select(self, e):
        self.visit(e.condition)  # evaluated unconditionally
        for value, holds in ((e.true_value, True), (e.false_value, False)):
            self.guards.append((e.condition, holds))
            self.visit(value)
            self.guards.pop()

    def visit_Reduce(self, r):
        if r.condition is None:
            self.generic(r)
            return
        self.visit(r.condition)
        pieces = _conjuncts(r.condition)
        self.guards.extend((c, True) for c in pieces)
        for s in r.source:
            self.visit(s)
        del self.guards[len(self.guards) - len(pieces):]


def _conjuncts(cond) -> list:
    """The conditions that all hold where `cond` does: the sides of an `and`, and of
    `select(c, t, False)` (rfactor's tail guard c, then a where= t that reads data where c
    holds): the affine ones bound the domain even when another is not affine."""
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    if isinstance(cond, E.Select) and E.is_const(cond.false_value, False):
        return _conjuncts(cond.condition) + _conjuncts(cond.true_value)
    return [cond]


# ----------------------------------------------------------------------------- the prover


class _Prover:
    def __init__(self, op: ComputeOp):
        self.op = op
        self.axes = tuple(op.axis) + tuple(op.reduce_axis)
        names = Names()
        self.dims = [names.fresh(iv.var.name) for iv in self.axes]
        self.env = {iv.var: d for iv, d in zip(self.axes, self.dims)}
        self.params = Params(Names(self.dims))
        self.ranges = Analyzer()
        for iv in self.axes:
            for v in collect_vars(iv.dom.extent) | collect_vars(iv.dom.min):
                if v not in self.env and v not in self.ranges.ranges:
                    self.ranges.bind(v, 0, float("inf"))  # a shape variable (0: empty arrays)
            self.ranges.bind_range(iv.var, iv.dom.min, iv.dom.extent)

    @cached_property
    def domain(self) -> tuple[dict, bool]:
        """({axis var: (its isl constraints, the other axes and shape variables its range
        names)}, whether the constraints are exact)."""
        out, exact = {}, True
        for iv, dim in zip(self.axes, self.dims):
            lo = to_isl(iv.dom.min, self.env, self.params)
            ext = to_isl(iv.dom.extent, self.env, self.params)
            exact = exact and lo is not None and ext is not None
            cons = []
            if lo is not None:
                cons.append(f"{dim} >= {_p(lo)}")
                if ext is not None:
                    cons.append(f"{dim} < {_p(lo)} + {_p(ext)}")
            out[iv.var] = (cons, collect_vars(iv.dom.min) | collect_vars(iv.dom.extent))
        return out, exact

    def _domain_of(self, exprs) -> tuple[list, set]:
        """The domain's constraints that matter to expressions over some axes: those of the
        axes they name, of the axes whose ranges are tied to these (both ways), and of every
        axis with a symbolic range (which may be empty); an axis of a constant range is never
        empty (declarations refuse that), so it can be left out."""
        ranges, _ = self.domain
        named = set()
        for e in exprs:
            named |= collect_vars(e)
        keep = {v for v, (_, deps) in ranges.items()
                if v in named or any(d not in self.env for d in deps)}
        grown = True
        while grown:
            grown = False
            for v, (_, deps) in ranges.items():
                tied = v in keep or deps & keep
                if tied and not ({v} | (deps & ranges.keys())) <= keep:
                    keep |= {v} | (deps & ranges.keys())
                    grown = True
        return [c for v, (cons, _) in ranges.items() if v in keep for c in cons], keep

    def run(self) -> tuple:
        finder = _GuardedReads()
        for b in self.op.body:
            finder.visit(b)
        out: list = []
        pending: list = []  # (position in out, isl problem) left to isl
        seen: set = set()  # a read repeated under the same guards is proven once
        for r, guards in finder.found:
            for d in range(len(r.indices)):
                key = _Same((r.tensor, d, r.indices[d], guards))
                if key in seen:
                    continue
                seen.add(key)
                access, problem = self._dimension(r, d, guards)
                if problem is not None:
                    pending.append((len(out), problem))
                out.append(access)
        self._decide(pending, out)
        return tuple(out)

    def shape_vars(self) -> tuple:
        """The shape variables the proof assumed >= 0: those of the axes' ranges (the interval
        prover's) and those isl met."""
        found = [v for v in self.ranges.ranges if v not in self.env]
        return tuple(found + [v for v in self.params.by_var if v not in found])

    def _decide(self, pending: list, out: list) -> None:
        """isl's verdicts, in place in `out`: first with every shape variable >= 0 (known only
        now: they are met while converting); what is out of bounds only where some variable is
        0 again for all of them >= 1, which is what the compute then needs."""
        names = list(self.params.by_var.values())
        decl = self.params.decl()
        empty_ok = [f"{n} >= 0" for n in names]
        positive = [f"{n} >= 1" for n in names]
        again = []
        for (pos, problem), (_, sample) in zip(pending, _decide([p for _, p in pending], decl,
                                                                empty_ok)):
            if sample is None:
                out[pos] = _verdict(out[pos], problem, None)
            else:
                again.append((pos, problem))
        for (pos, problem), (_, sample) in zip(again, _decide([p for _, p in again], decl,
                                                              positive)):
            out[pos] = _verdict(out[pos], problem, sample)
            if sample is None:
                out[pos] = _with(out[pos], needs=self._needed(problem, names, decl))

    def _needed(self, problem: _Problem, names: list, decl: str) -> tuple:
        """A minimal set of shape variables that, all >= 1, leave no point out of bounds (each
        dropped where the others suffice: one isl call per variable the problem names, none
        when it names one, which it needs: without it the problem is the one found
        non-empty)."""
        text = " and ".join(problem.cons)
        need = [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]
        for n in list(need):
            if len(need) == 1:
                break
            trial = [m for m in need if m != n]
            floor = [f"{m} >= 0" for m in names] + [f"{m} >= 1" for m in trial]
            if _decide([problem], decl, floor)[0][1] is None:
                need = trial
        by_name = {name: v for v, name in self.params.by_var.items()}
        return tuple(by_name[n] for n in need)

    def _dimension(self, r: TensorRead, d: int, guards: tuple):
        """(Access, None) when decided without isl; else (Access to fill in, _Problem)."""
        idx, ext = r.indices[d], r.tensor.shape[d]
        access = Access(self.op.name, r, d, PROVEN)
        facts = [f for c, holds in guards for f in nonneg_facts(c, holds)]
        if in_bounds(self.ranges, idx, ext, facts) or self._is_axis_over(idx, ext):
            return _with(access, how="ranges under its guards" if facts else "ranges"), None
        idx = simplify(idx, self.ranges)  # (a select its ranges decide is its branch)
        idx_t = to_isl(idx, self.env, self.params)
        ext_t = to_isl(ext, self.env, self.params)
        if idx_t is None or ext_t is None:
            # lower/passes/check_indices.py checks exactly these (it reads the same isl forms)
            why = ("data-dependent index" if contains(idx, TensorRead) else "index not affine"
                   if idx_t is None else f"extent {ext} not affine")
            return _with(access, status=RUNTIME, how=f"{why}, checked when the kernel runs"), None
        cons, axes = self._domain_of([idx, *(c for c, _ in guards)])
        inexact = [] if self.domain[1] else ["an axis range is not affine"]
        for c, holds in guards:
            g = cond_to_isl(c, self.env, self.params)
            if g is None:
                inexact.append(f"the guard {c} is not affine"
                               + (" (it reads data)" if contains(c, TensorRead) else ""))
            else:
                cons.append(f"({g})" if holds else f"not ({g})")
        cons.append(f"({_p(idx_t)} < 0 or {_p(idx_t)} >= {_p(ext_t)})")
        return access, _Problem(self.dims, cons, idx, ext, inexact, self, axes)

    def _is_axis_over(self, idx, ext) -> bool:
        """`A[i]` with i an axis over [0, extent of A's dimension): in bounds whatever the
        extent is (n * m, which neither intervals nor isl can bound)."""
        for iv in self.axes:
            if iv.var is idx:
                return E.is_const(iv.dom.min, 0) and E.structural_equal(iv.dom.extent, ext)
        return False


class _Same:
    """A set key comparing by structure (`==` on expressions builds a comparison node)."""

    __slots__ = ("h", "value")

    def __init__(self, value):
        self.value, self.h = value, hash(value)

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other) -> bool:
        return E.structural_equal(self.value, other.value)


def _with(a: Access, **changes) -> Access:
    return dataclasses.replace(a, **changes)


def _p(x) -> str:
    return str(x) if isinstance(x, int) else f"({x})"


@dataclass
class _Problem:
    """Is there a point of the domain (under the read's guards) where the index is outside
    [0, extent)? `cons` is its isl constraint text."""

    dims: list
    cons: list
    index: E.Expr
    extent: E.Expr
    inexact: list  # why a point found may not be real (a guard or range isl cannot express)
    prover: _Prover
    axes: set  # the axis vars constrained (the others' sampled values mean nothing)

    def text(self, name: str, assume: list) -> str:
        return f"{name}[{', '.join(self.dims)}] : {' and '.join([*self.cons, *assume])}"


def _verdict(a: Access, problem: _Problem, sample) -> Access:
    """The access decided by isl's answer: None (no point out of bounds) or a sample point
    {isl name: value}."""
    if sample is None:
        return _with(a, how="isl")
    prover = problem.prover
    values = {v: E.const(sample[n], v.dtype) for v, n in prover.env.items() if n in sample}
    values.update({v: E.const(sample[n], v.dtype) for v, n in prover.params.by_var.items()
                   if n in sample})
    at = simplify(substitute(problem.index, values))
    point = ", ".join(f"{v.name} = {sample[n]}" for v, n in prover.env.items()
                      if n in sample and v in problem.axes)
    shape_vars = ", ".join(f"{v.name} = {sample[n]}" for v, n in prover.params.by_var.items()
                           if n in sample)
    value = "" if str(at) == a.index else f" = {at}"
    how = f"{value} is outside [0, {problem.extent})" + (f" at {point}" if point else "")
    if shape_vars:
        how += f" (with {shape_vars})"
    names = [v.name for v in prover.params.by_var]
    twins = sorted({n for n in names if names.count(n) > 1})
    if twins:
        how += (f"; note: {names.count(twins[0])} different tl.var objects are named "
                f"{twins[0]!r} (different sizes to the compiler): declare it once and reuse it")
    if problem.inexact:
        how += (", unless what the proof cannot read excludes that point: "
                + "; ".join(problem.inexact)
                + " (clamp the index with tl.max/tl.min, or guard it with an affine condition)")
    return _with(a, status=REFUSED, how=how, certain=not problem.inexact)


# ----------------------------------------------------------------------------- isl, cached

_DECIDED: OrderedDict = OrderedDict()
_DECIDED_SIZE = 512
_DECIDED_LOCK = threading.Lock()


_EMPTY: OrderedDict = OrderedDict()


def set_is_empty(text: str) -> bool:
    """isl's verdict on whether the set `text` is empty (cached by text)."""
    with _DECIDED_LOCK:
        got = _EMPTY.get(text)
        if got is not None:
            _EMPTY.move_to_end(text)
            return got
        got = _EMPTY[text] = isl.Set(text).is_empty()
        if len(_EMPTY) > _DECIDED_SIZE:
            _EMPTY.popitem(last=False)
    return got


def _decide(problems: list, decl: str, assume: list) -> list:
    """[(k, None or sample point)] for each problem k under the constraints `assume` on the
    shape variables: one isl parse for all of them."""
    if not problems:
        return []
    text = decl + "{ " + "; ".join(p.text(f"p{k}", assume)
                                   for k, p in enumerate(problems)) + " }"
    # one thread at a time: builds may run in threads, and isl's context is not thread-safe
    with _DECIDED_LOCK:
        got = _DECIDED.get(text)
        if got is not None:
            _DECIDED.move_to_end(text)
            return got
        got = _solve(text, len(problems))
        _DECIDED[text] = got
        if len(_DECIDED) > _DECIDED_SIZE:
            _DECIDED.popitem(last=False)
    return got


def _solve(text: str, n: int) -> list:
    bad = isl.UnionSet(text)
    samples: list = [None] * n
    sets = bad.get_set_list()
    for j in range(sets.n_set()):
        s = sets.get_at(j)
        if s.is_empty():
            continue
        pt = s.sample_point()
        point = {}
        for kind in (isl.dim_type.param, isl.dim_type.set):
            for k in range(s.dim(kind)):
                point[s.get_dim_name(kind, k)] = pt.get_coordinate_val(kind, k).to_python()
        samples[int(s.get_tuple_name()[1:])] = point
    return list(enumerate(samples))
