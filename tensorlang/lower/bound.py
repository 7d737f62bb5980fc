"""Step 2 of lowering: bound inference. For each stage, the range of each of its compute's axes
that must be computed: the whole domain for stages at the root; for a stage computed at loop `l`
of stage P, the union of the regions its consumers read during one iteration of `l` (loops inside
`l` relaxed over their ranges, loops outside it fixed). Loop extents then follow from the split /
fuse relations."""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.structural import attach_path
from ..errors import LoweringError
from ..ir import expr as E
from ..ir.functor import Visitor, collect_vars, substitute
from ..ir.simplify import Analyzer, Linear, simplify, to_linear
from ..schedule.relations import leaf_extents, root_values
from ..te.tensor import read_tensors


@dataclass
class StageBounds:
    root_min: dict  # root IterVar -> Expr (in terms of enclosing loop vars)
    root_ext: dict  # root IterVar -> Expr
    extents: dict  # every IterVar of the stage -> Expr
    alloc_shape: tuple  # buffer shape of the stage (per spatial axis), constant where possible
    loop_values: tuple | None = None  # see axis_values


def axis_values(st, b: StageBounds) -> tuple[dict, list]:
    """({root IterVar: its value in terms of the stage's loop variables, simplified}, [guard of
    each inexact split]): what bound inference substitutes into the stage's reads and what the
    loop nest computes at, worked out once for both (kept in `b`; the guards are not copied)."""
    if b.loop_values is None:
        vals, guards = root_values(st, {lv: lv.var for lv in st.leaf_iter_vars}, b.extents)
        b.loop_values = ({iv: simplify(b.root_min[iv] + vals[iv]) for iv in st.root_iter_vars},
                         guards)
    return b.loop_values


def interval(e: E.Expr, relax: dict):
    """Symbolic inclusive range (lo, hi) of an integer expression when the variables in `relax`
    (var -> (lo, hi)) range independently; None when the expression is not monotone enough."""
    if not (collect_vars(e) & relax.keys()):
        return e, e
    t = type(e)
    if t is E.Var:
        # a loop's range may depend on an outer loop relaxed as well (the loops of a stage
        # computed at an inner loop of its host, sized by that loop's variable): relax it too
        lo, hi = relax[e]
        if type(lo) is E.Const and type(hi) is E.Const:
            return lo, hi
        outer = {v: r for v, r in relax.items() if v is not e}
        rlo, rhi = interval(lo, outer), interval(hi, outer)
        return None if rlo is None or rhi is None else (rlo[0], rhi[1])
    if t in (E.Add, E.Sub) or (t is E.Mul and (isinstance(e.a, E.Const)
                                              or isinstance(e.b, E.Const))):
        lin = to_linear(e)
        lo = Linear(lin.dtype, None, lin.const)
        hi = Linear(lin.dtype, None, lin.const)
        for term, coef in lin.terms.values():
            r = interval(term, relax)
            if r is None:
                return None
            a, b = (r[0], r[1]) if coef > 0 else (r[1], r[0])
            lo = lo.add(to_linear(simplify(a)).scale(coef))
            hi = hi.add(to_linear(simplify(b)).scale(coef))
        return lo.to_expr(), hi.to_expr()
    if t is E.FloorDiv and E.as_int(e.b) is not None and E.as_int(e.b) > 0:
        r = interval(e.a, relax)
        return None if r is None else (r[0] // e.b, r[1] // e.b)
    if t is E.FloorMod and E.as_int(e.b) is not None and E.as_int(e.b) > 0:
        return E.const(0, e.dtype), E.const(E.as_int(e.b) - 1, e.dtype)
    if t in (E.Min, E.Max):
        ra, rb = interval(e.a, relax), interval(e.b, relax)
        if ra is None or rb is None:
            return None
        return t(ra[0], rb[0]), t(ra[1], rb[1])
    if t is E.Select:
        ra, rb = interval(e.true_value, relax), interval(e.false_value, relax)
        if ra is None or rb is None:
            return None
        return E.Min(ra[0], rb[0]), E.Max(ra[1], rb[1])
    return None


def _reads_of(exprs, stage, schedule) -> list:
    v = _Reads(schedule, stage)
    for x in exprs:
        v.visit(x)
    return v.found


# module level, not a class statement per call: bound inference runs once per tuning candidate
class _Reads(Visitor):
    """The reads of `stage`'s tensors."""

    def __init__(self, schedule, stage):
        self.schedule, self.stage = schedule, stage
        self.found: list = []

    def visit_TensorRead(self, r):
        if self.schedule.stage_map.get(r.tensor.op) is self.stage:
            self.found.append(r)
        for i in r.indices:
            self.visit(i)


def _leaf_relax(stage, loops, bounds, relax):
    ext = bounds[stage].extents
    for lv in loops:
        n = E.as_int(ext[lv])
        # a constant extent (the usual case) folds here without a simplifier round trip
        relax[lv.var] = (E.const(0), E.const(n - 1, ext[lv].dtype) if n is not None
                         else simplify(ext[lv] - 1))


def infer_bounds(schedule, bodies: dict) -> dict:
    bounds: dict = {}
    for st in reversed(schedule.stages):
        if st.attach_type == "inline":
            continue
        root_min = {iv: iv.dom.min for iv in st.root_iter_vars}
        root_ext = {iv: iv.dom.extent for iv in st.root_iter_vars}
        if st.attach_type == "scope":
            _infer_attached(schedule, st, bodies, bounds, root_min, root_ext)
        extents = leaf_extents(st, root_ext)
        an = Analyzer()
        alloc = []
        for iv in st.op.axis:
            ext = root_ext[iv]
            if E.as_int(ext) is None:
                hi = an.bound(ext)[1]
                if hi != float("inf"):
                    ext = E.const(int(hi))
            alloc.append(ext)
        bounds[st] = StageBounds(root_min, root_ext, extents, tuple(alloc))
    return bounds


def _infer_attached(schedule, st, bodies, bounds, root_min, root_ext):
    host, loop = st.attach_stage, st.attach_ivar
    lo_acc: dict = {}
    hi_acc: dict = {}
    for c in schedule.stages:
        if c.attach_type == "inline" or c not in bounds:
            continue
        reads = _reads_of(bodies[c], st, schedule)
        if not reads:
            continue
        relax: dict = {}
        if c is host:
            pos = host.leaf_iter_vars.index(loop)
            _leaf_relax(host, host.leaf_iter_vars[pos + 1:], bounds, relax)
        else:
            _leaf_relax(c, c.leaf_iter_vars, bounds, relax)
            for h, lp in attach_path(c):
                pos = h.leaf_iter_vars.index(lp)
                if h is host:
                    start = host.leaf_iter_vars.index(loop) + 1
                    _leaf_relax(h, h.leaf_iter_vars[start:pos + 1], bounds, relax)
                    break
                _leaf_relax(h, h.leaf_iter_vars[:pos + 1], bounds, relax)
        vmap = {iv.var: v for iv, v in axis_values(c, bounds[c])[0].items()}
        for r in reads:
            for d, (iv, idx) in enumerate(zip(st.op.axis, r.indices)):
                idx = simplify(substitute(idx, vmap))
                # an index read from data (P[Ix[i], j]) is known only at run time: the region
                # is then the whole dimension, like an index not affine enough to bound
                rng = None if read_tensors((idx,)) else interval(idx, relax)
                if rng is None:
                    # not affine enough to bound: compute the whole dimension (safe)
                    rng = (iv.dom.min, simplify(iv.dom.min + iv.dom.extent - 1))
                lo, hi = simplify(rng[0]), simplify(rng[1])
                lo_acc[iv] = lo if iv not in lo_acc else simplify(E.Min(lo_acc[iv], lo))
                hi_acc[iv] = hi if iv not in hi_acc else simplify(E.Max(hi_acc[iv], hi))
    if not lo_acc:
        raise LoweringError(f"stage {st.name} is computed at {host.name}.{loop.name} but no "
                            "stage inside that loop reads it")
    for iv in st.op.axis:
        root_min[iv] = lo_acc[iv]
        root_ext[iv] = simplify(hi_acc[iv] - lo_acc[iv] + 1)
