"""A schedule as a map from each statement's instances to time.

Time is a "2d+1" vector, the order in which the lowered loop nest runs the instances:

    root stage S:          [pos(S), c0, L0, c1, L1, ..., L(n-1), cn]
    S computed at loop Lj of host H:  [H's vector up to and including Lj, k(S), c0, L0, ...]

`pos` dims are constants: the stage's place among the root stages, or among the stages computed
at the same loop (in stage order, as lowering emits them), or the place of the next loop in a
loop's body after the stages computed there. Loop dims are the values of the stage's leaf loops,
functions of its axes: a split gives `floor(i/f), i mod f`, a fuse `o*E + i` (or the pair
(o, i) when the inner extent E is symbolic: same order, still affine), a reorder permutes them.
A reduction's init is a statement of its own, placed where lowering puts it: just before the
first reduce loop, inside the spatial loops that come after that reduce loop.

compute_at. A stage computed at loop Lj of H is recomputed, into a buffer allocated inside that
loop, in every iteration of Lj for the region that iteration reads (bound inference). So its
instances have no fixed host-loop values: those dims are left free, and a dependence whose source
is such a stage is *tied*: its time dims up to Lj are equated with the sink's, i.e. the sink uses
the copy made in its own iteration. That copy exists only if the sink runs inside that loop (a
`scope` condition), and must come before the sink in the loop's body. Since the copy is private
to the iteration, no dependence through it is ever carried by H's loops.

A loop value that is not affine (an `nparts` split of a symbolic extent, or a split of a fused
loop whose inner extent is symbolic) is *opaque*: its dim is free, which over-approximates; the
checks use the fact that it is a function of the axes it was made from."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import as_int
from ..schedule.relations import leaf_extents
from ..schedule.stage import Fuse, Split
from .affine import to_isl

POS, LOOP = "p", "l"


@dataclass(frozen=True)
class LeafValue:
    """A loop's value as isl text over the stage's axis dims (`{0}`, `{1}`: format fields of
    the dims, so the same text serves the source and the sink copy of a statement), or None when
    it is not affine (opaque). `roots`: indices of the axes it is a function of."""

    exprs: tuple | None
    roots: frozenset

    @property
    def width(self) -> int:
        return 1 if self.exprs is None else len(self.exprs)


def leaf_values(stage, params) -> list[LeafValue]:
    """LeafValue of each of the stage's leaf loops, in loop order."""
    roots = stage.root_iter_vars
    vals: dict = {}
    for k, iv in enumerate(roots):
        lo = to_isl(iv.dom.min, {}, params)
        if lo == 0:
            text = f"{{{k}}}"
        elif lo is None:
            vals[iv] = LeafValue(None, frozenset([k]))
            continue
        else:
            text = f"({{{k}}} - ({lo}))"
        vals[iv] = LeafValue((text,), frozenset([k]))
    ext = leaf_extents(stage, {iv: iv.dom.extent for iv in roots})
    for rel in stage.relations:
        if isinstance(rel, Split):
            pv = vals[rel.parent]
            f = as_int(ext[rel.inner])
            if pv.exprs is None or len(pv.exprs) != 1 or f is None:
                vals[rel.outer] = vals[rel.inner] = LeafValue(None, pv.roots)
            elif f == 1:
                vals[rel.outer], vals[rel.inner] = pv, LeafValue(("0",), pv.roots)
            else:
                p = pv.exprs[0]
                vals[rel.outer] = LeafValue((f"floor(({p})/{f})",), pv.roots)
                vals[rel.inner] = LeafValue((f"(({p}) mod {f})",), pv.roots)
        elif isinstance(rel, Fuse):
            o, i = vals[rel.outer], vals[rel.inner]
            e = as_int(ext[rel.inner])
            both = o.roots | i.roots
            if o.exprs is None or i.exprs is None:
                vals[rel.fused] = LeafValue(None, both)
            elif e is not None and len(o.exprs) == 1 and len(i.exprs) == 1:
                vals[rel.fused] = LeafValue((f"{e}*({o.exprs[0]}) + ({i.exprs[0]})",), both)
            else:
                # o*E + i with E symbolic is not affine, but orders exactly like the pair (o, i)
                vals[rel.fused] = LeafValue(o.exprs + i.exprs, both)
    out = []
    for lv in stage.leaf_iter_vars:
        v = vals[lv]
        if v.exprs is None and as_int(ext[lv]) == 1:
            # one iteration (e.g. the outer loop of nparts=1): its value is 0, whatever the
            # symbolic extent that made the split opaque
            v = LeafValue(("0",), v.roots)
        out.append(v)
    return out


class PlacementError(Exception):
    """An attachment the time model cannot express (the lowering could not either)."""

    def __init__(self, stage: str, text: str):
        super().__init__(text)
        self.stage = stage
        self.text = text


class Layout:
    """The structure of every statement's time vector under one schedule state: a list of
    components, (POS, constant) or (LOOP, stage index, leaf position)."""

    def __init__(self, schedule):
        stages = schedule.stages
        self.stages = stages
        self.index = {st: k for k, st in enumerate(stages)}
        self.attached: dict[tuple, list[int]] = {}
        roots = []
        for k, st in enumerate(stages):
            if st.attach_type == "root":
                roots.append(k)
            elif st.attach_type == "scope":
                host, loop = st.attach_stage, st.attach_ivar
                if host not in self.index:
                    raise PlacementError(st.name, f"stage {st.name} is computed at a loop of "
                                         f"{host.name}, which is not a stage of this schedule")
                if host.attach_type == "inline":
                    raise PlacementError(st.name, f"stage {st.name} is computed at loop "
                                         f"{loop.name} of {host.name}, but {host.name} is "
                                         "inlined and has no loops")
                if loop not in host.leaf_iter_vars:
                    raise PlacementError(st.name, f"stage {st.name} is computed at loop "
                                         f"{loop.name} of {host.name}, which is no longer a "
                                         f"loop of it ({host.loop_names()})")
                key = (self.index[host], host.leaf_iter_vars.index(loop))
                self.attached.setdefault(key, []).append(k)
        self.root_pos = {k: p for p, k in enumerate(roots)}
        self._main: dict[int, list] = {}
        self._init: dict[int, list] = {}
        self.tie: dict[int, int] = {}
        self._busy: set[int] = set()

    # ------------------------------------------------------------------ construction
    def first_reduce(self, k: int) -> int | None:
        for j, lv in enumerate(self.stages[k].leaf_iter_vars):
            if lv.kind == "reduce":
                return j
        return None

    def prefix(self, k: int) -> list:
        st = self.stages[k]
        if st.attach_type == "root":
            return [(POS, self.root_pos[k])]
        h = self.index[st.attach_stage]
        j = self.stages[h].leaf_iter_vars.index(st.attach_ivar)
        hm = self.main(h)
        cut = hm.index((LOOP, h, j)) + 1
        return hm[:cut] + [(POS, self.attached[(h, j)].index(k))]

    def main(self, k: int) -> list:
        got = self._main.get(k)
        if got is not None:
            return got
        if k in self._busy:
            raise PlacementError(self.stages[k].name, f"stage {self.stages[k].name} is "
                                 "computed inside its own loops (the attachments form a cycle)")
        self._busy.add(k)
        pre = self.prefix(k)
        self._busy.discard(k)
        leaves = self.stages[k].leaf_iter_vars
        r = self.first_reduce(k)
        own = []
        for j in range(len(leaves)):
            c = (len(self.attached.get((k, j - 1), ())) if j > 0 else 0) + (1 if j == r else 0)
            own += [(POS, c), (LOOP, k, j)]
        n = len(leaves)
        own.append((POS, len(self.attached.get((k, n - 1), ())) if n else 0))
        self.tie[k] = len(pre) - 1 if self.stages[k].attach_type == "scope" else 0
        got = pre + own
        self._main[k] = got
        if r is not None:
            # the init: the same loops up to the first reduce loop, one place before it, then
            # the spatial loops that come after it (lower/loop_nest.py puts it exactly there)
            at = len(pre) + 2 * r
            init = got[:at] + [(POS, got[at][1] - 1)]
            for j in range(r + 1, n):
                if leaves[j].kind != "reduce":
                    init += [(LOOP, k, j), (POS, 0)]
            self._init[k] = init
        return got

    def comps(self, stmt) -> list:
        main = self.main(stmt.stage_index)
        return self._init[stmt.stage_index] if stmt.kind == "init" else main

    def build_all(self) -> None:
        for k, st in enumerate(self.stages):
            if st.attach_type != "inline":
                self.main(k)


def time_map_text(binding, layout: Layout, leafvals: dict, stmt, n_dims: int) -> str:
    """isl text of `stmt`'s map to time: `{ S[i, j] -> [_t0, ...] : _t0 = 2 and ... }`."""
    cons, k = [], 0
    for c in layout.comps(stmt):
        if c[0] == POS:
            cons.append(f"_t{k} = {c[1]}")
            k += 1
            continue
        lv = leafvals[c[1]][c[2]]
        if lv.exprs is not None and (c[1] == stmt.stage_index or
                                     _at_scan_step(layout, stmt, c[1], lv)):
            for e in lv.exprs:
                cons.append(f"_t{k} = {e.format(*stmt.dims)}")
                k += 1
        else:
            k += lv.width  # a host loop (tied per dependence) or an opaque value: free
    while k < n_dims:
        cons.append(f"_t{k} = 0")
        k += 1
    outs = ", ".join(f"_t{d}" for d in range(n_dims))
    return (f"{binding.model.decl}{{ {stmt.id}[{', '.join(stmt.dims)}] -> [{outs}] : "
            f"{' and '.join(cons)} }}")


def _at_scan_step(layout: Layout, stmt, host: int, lv: LeafValue) -> bool:
    """Whether the host loop's value is known for `stmt`'s instances: a loop of a tl.scan's
    update over its time axis alone, `stmt` of that scan's body. A body stage computed there
    holds exactly the steps of that iteration (its readers in the body read it at their own
    step), so the loop's value is its own time axis's: the same expression, of its first dim.
    (Other host loops stay free: a copy may serve several of their iterations.)"""
    from ..te.scan import scan_of

    if not stmt.scan_body or lv.roots != frozenset([0]):
        return False
    scan = scan_of(layout.stages[host].op)
    return scan is not None and layout.stages[host].op is scan.update.op and \
        scan_of(layout.stages[stmt.stage_index].op) is scan


def dim_offsets(comps: list, leafvals: dict) -> list[int]:
    """Time-dim offset of each component (loops may span several dims)."""
    out, k = [], 0
    for c in comps:
        out.append(k)
        k += 1 if c[0] == POS else leafvals[c[1]][c[2]].width
    out.append(k)
    return out
