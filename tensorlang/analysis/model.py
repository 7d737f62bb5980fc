"""The polyhedral model of a compute definition: statements, their iteration domains, their reads
and writes, and the RAW / WAR / WAW dependences between their instances.

Statements. A stage that is not inlined gives one statement per instance of its body: a plain
stage `S[i, j]`; a reduction two, the accumulator's initialisation `S_init[i, j]` and its update
`S[i, j, k]` (which reads and writes the accumulator). An inlined stage gives none: its body is
substituted into its readers first (`lower.inline.inline_bodies`), so its reads move into them.

Dependences are value-based, computed with `UnionAccessInfo.compute_flow` against the order of
the unscheduled program (stages in order; in a stage, its axes in declaration order). A
reduction's updates are *may* writes: its combiner is commutative and associative (as in TVM), so
the updates of one accumulator may run in any order, and what must hold is that the init comes
before every update and every update before every read of the result. With may-writes isl reports
exactly those pairs (not only the last writer), plus every ordered pair of updates of one
accumulator: the *reduction* dependences, which constrain parallelism but not order.

Everything here depends only on the compute definition (and on which stages are inlined), never
on loop structure, so a model is built once and cached under its isl text: a template that the
tuner re-declares for every candidate maps to the same cached model."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import islpy as isl

from ..errors import ScheduleError
from ..ir.functor import Visitor
from ..te.extern import ExternOp
from ..te.scan import ScanOp
from ..te.tensor import PlaceholderOp, Reduce
from .affine import Names, Params, cond_to_isl, to_isl
from .dataflow import dataflow, maps_of


@dataclass(eq=False)
class Statement:
    """One statement of the model. `dims` are the isl names of `axes` (the compute's axes:
    spatial first, then reduce), both in the order of the stage's root iteration variables."""

    id: str
    stage_index: int  # position in schedule.stages
    stage_name: str
    kind: str  # "plain" | "init" | "update"
    axes: tuple  # source names of the axes (for messages)
    dims: tuple  # isl dim names
    n_spatial: int
    domain_text: str
    domain: isl.Set | None = None
    # an update whose reducer is declared commutative=False (its name): the updates of one
    # accumulator must keep their order, so its reduction dependences constrain order too
    ordered_reducer: str | None = None
    # a stage of a tl.scan's body: its updates may read the accumulators of earlier steps
    scan_body: bool = False
    state_of: str | None = None  # the tl.scan whose state (array) this update statement writes

    @property
    def is_update(self) -> bool:
        return self.kind == "update"

    def __repr__(self) -> str:
        return f"Statement({self.id})"


@dataclass(eq=False)
class Dependence:
    """Instances of `sink` that must see (RAW), must not be overwritten before (WAR), or must be
    written after (WAW) the related instances of `src`. `map`: src instance -> sink instance."""

    kind: str  # "RAW" | "WAR" | "WAW"
    src: Statement
    sink: Statement
    map: isl.Map
    reduction: bool  # update -> update of one accumulator: any order, never concurrently

    def orders(self) -> bool:
        """Whether the schedule must keep the sink after the source (every dependence but the
        reduction dependences of a commutative reducer)."""
        return not self.reduction or self.src.ordered_reducer is not None

    def __repr__(self) -> str:
        return f"Dependence({self.kind}, {self.src.id} -> {self.sink.id})"


@dataclass(eq=False)
class Spec:
    """The isl text of a definition (its cache key) plus what maps it back to source terms."""

    key: tuple
    decl: str
    statements: list
    reads_text: str
    reads_all_text: str
    must_writes_text: str
    may_writes_text: str
    order_text: str
    arrays: dict  # isl array name -> source tensor name


class Binding:
    """A definition model bound to one schedule state: its stages, its parameter Vars."""

    def __init__(self, model: Definition, params: Params, stages: list):
        self.model = model
        self.params = params
        self.stages = stages  # schedule.stages at the time of binding
        self.stmts_of: dict[int, dict[str, Statement]] = {}
        for st in model.statements:
            self.stmts_of.setdefault(st.stage_index, {})[st.kind] = st

    def main(self, stage_index: int) -> Statement:
        d = self.stmts_of[stage_index]
        return d.get("update") or d["plain"]


class Definition:
    """The isl objects of a spec: domains, accesses and the dependences between statements."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self.decl = spec.decl
        self.statements: list[Statement] = spec.statements
        self.by_id = {s.id: s for s in self.statements}
        for s in self.statements:
            s.domain = isl.Set(s.domain_text)
        self.domains = _union_set([s.domain for s in self.statements])
        self.reads = isl.UnionMap(spec.reads_text).intersect_domain(self.domains)
        self.reads_all = isl.UnionMap(spec.reads_all_text).intersect_domain(self.domains)
        must = isl.UnionMap(spec.must_writes_text).intersect_domain(self.domains)
        may = isl.UnionMap(spec.may_writes_text).intersect_domain(self.domains)
        self.must_writes, self.may_writes = must, may
        self.writes = must.union(may)
        order = isl.UnionMap(spec.order_text).intersect_domain(self.domains)
        self.order = order

        raw, war, waw = dataflow(self.statements, self.decl, self.reads, must, may, order)
        self.raw, self.war, self.waw = raw, war, waw
        self.deps: list[Dependence] = []
        for kind, umap in (("RAW", raw), ("WAR", war), ("WAW", waw)):
            for m in maps_of(umap):
                if m.is_empty():
                    continue
                src = self.by_id[m.get_tuple_name(isl.dim_type.in_)]
                sink = self.by_id[m.get_tuple_name(isl.dim_type.out)]
                red = src is sink and src.is_update
                if red and src.scan_body:
                    # only the pairs of one accumulator element are reduction dependences; a
                    # scan's step also reads earlier steps' elements: ordinary dependences
                    same = m.intersect(_same_element(spec.decl, src))
                    for part, is_red in ((same, True), (m.subtract(same), False)):
                        if not part.is_empty():
                            self.deps.append(Dependence(kind, src, sink, part, is_red))
                    continue
                # (not coalesced here: that costs as much as a flow and only printing gains)
                self.deps.append(Dependence(kind, src, sink, m, red))
        # per stage, the union of its reduction dependences (what parallel/vectorize must avoid)
        self._reduction_parts: dict[int, list] = {}
        for d in self.deps:
            if d.reduction:
                self._reduction_parts.setdefault(d.src.stage_index, []).append(d.map)
        self._reduction: dict[int, isl.Map | None] = {}
        # the pairs of statements related by some non-reduction dependence (what order checks)
        self.ordered_pairs: list[tuple[Statement, Statement]] = []
        seen = set()
        for d in self.deps:
            if d.orders() and (d.src.id, d.sink.id) not in seen:
                seen.add((d.src.id, d.sink.id))
                self.ordered_pairs.append((d.src, d.sink))

    def reduction_map(self, stage_index: int) -> isl.Map | None:
        """All pairs of updates of one accumulator of the stage (coalesced once, on demand)."""
        if stage_index not in self._reduction:
            parts = self._reduction_parts.get(stage_index)
            m = None
            for p in parts or ():
                m = p if m is None else m.union(p)
            self._reduction[stage_index] = None if m is None else m.coalesce()
        return self._reduction[stage_index]

    def deps_between(self, src: Statement, sink: Statement) -> list[Dependence]:
        return [d for d in self.deps if d.src is src and d.sink is sink]


def _same_element(decl: str, s: Statement) -> isl.Map:
    """Pairs of instances of `s` that update one accumulator element (equal spatial dims)."""
    xs = [f"_x{d}" for d in range(len(s.dims))]
    ys = [f"_y{d}" for d in range(len(s.dims))]
    eq = " and ".join(f"{x} = {y}" for x, y in zip(xs[:s.n_spatial], ys[:s.n_spatial]))
    return isl.Map(f"{decl}{{ {s.id}[{', '.join(xs)}] -> {s.id}[{', '.join(ys)}] : "
                   f"{eq or 'true'} }}")



def _union_set(sets) -> isl.UnionSet:
    out = None
    for s in sets:
        u = isl.UnionSet.from_set(s)
        out = u if out is None else out.union(u)
    return out if out is not None else isl.UnionSet("{ }")


# ----------------------------------------------------------------------------- spec building


class _Reads(Visitor):
    def __init__(self):
        self.found: list = []

    def visit_TensorRead(self, r):
        self.found.append(r)
        for i in r.indices:
            self.visit(i)


def _reads(exprs) -> list:
    v = _Reads()
    for e in exprs:
        v.visit(e)
    return v.found


def build_spec(schedule) -> tuple[Spec, Params]:
    """The isl text of the schedule's compute definition (cheap: no isl calls)."""
    return _SpecBuilder(schedule).build()


class _SpecBuilder:
    def __init__(self, schedule):
        from ..lower.inline import inline_bodies

        self.schedule = schedule
        self.bodies = inline_bodies(schedule)
        self.stages = [st for st in schedule.stages if st.attach_type != "inline"]
        self.index = {st: k for k, st in enumerate(schedule.stages)}
        # names: per-statement dims first, then parameters that clash with none of them
        self.stmt_names = Names()
        self.dims_of: dict = {}
        all_dims: set[str] = set()
        for st in self.stages:
            local = Names()
            dims = tuple(local.fresh(iv.name) for iv in st.root_iter_vars)
            self.dims_of[st] = dims
            all_dims.update(dims)
        self.params = Params(Names(all_dims))
        self.array_names = Names()
        self.arrays: dict = {}  # (stage or placeholder op, value_index) -> isl array name
        self.array_src: dict = {}
        self.statements: list[Statement] = []
        self.reads: list[str] = []
        self.reads_all: list[str] = []
        self.must_w: list[str] = []
        self.may_w: list[str] = []
        self.order: list[str] = []
        self.max_sp = max((len(st.op.axis) for st in self.stages), default=0)
        # tl.scan: its state, init and update are one array (the scan's), and its body runs
        # step by step: ordered by (the update's position, step, own position)
        self.scan_array: dict = {}  # op -> the scan stage whose array it is
        self.scan_group: dict = {}  # stage index of a body stage -> the update's index
        self.state_writer: dict = {}  # stage index of a scan's update -> the scan's name
        for st in self.stages:
            if isinstance(st.op, ScanOp):
                sc = st.op
                for op in (sc.state.op, sc.init.op, sc.update.op):
                    self.scan_array[op] = st
                group = self.index[schedule.stage_map[sc.update.op]]
                self.state_writer[group] = st.name
                for op in sc.body_ops:
                    self.scan_group[self.index[schedule.stage_map[op]]] = group
        self.max_red = max((len(st.op.reduce_axis) for st in self.stages), default=0)

    def array(self, tensor) -> tuple[str, bool]:
        """(isl array name, is it a placeholder) of the tensor a read refers to."""
        op = tensor.op
        owner = self.scan_array.get(op) or self.schedule.stage_map.get(op)
        placeholder = op not in self.scan_array and (isinstance(op, PlaceholderOp)
                                                     or owner is None)
        key = (op, 0) if placeholder else (owner, tensor.value_index)
        got = self.arrays.get(key)
        if got is None:
            src = tensor.name if placeholder else owner.op.outputs[tensor.value_index].name
            got = self.array_names.fresh(src)
            self.arrays[key] = got
            self.array_src[got] = src
        return got, placeholder

    def statement(self, st, kind: str, sdims, cons) -> Statement:
        sid = self.stmt_names.fresh(st.name + ("_init" if kind == "init" else ""))
        text = f"{{ {sid}[{', '.join(sdims)}] : {' and '.join(cons) or 'true'} }}"
        axes = tuple(iv.name for iv in st.root_iter_vars)[:len(sdims)]
        s = Statement(sid, self.index[st], st.name, kind, axes, tuple(sdims), len(st.op.axis),
                      text, scan_body=self.index[st] in self.scan_group,
                      state_of=self.state_writer.get(self.index[st]))
        self.statements.append(s)
        return s

    def write(self, s: Statement, st, into: list) -> None:
        sp = ", ".join(self.dims_of[st][:len(st.op.axis)])
        for t in st.op.outputs:
            into.append(f"{s.id}[{', '.join(s.dims)}] -> {self.array(t)[0]}[{sp}]")

    def read(self, s: Statement, exprs, env: dict) -> None:
        for r in _reads(exprs):
            name, placeholder = self.array(r.tensor)
            text = _access(s, name, r, env, self.params)
            self.reads_all.append(text)
            if not placeholder:  # placeholders are never written: no dependence
                self.reads.append(text)

    def time(self, s: Statement, pos: int, update: bool) -> None:
        """The unscheduled order: stage, spatial axes, init (0) before updates (1), reduce axes."""
        sp, red = list(s.dims[:s.n_spatial]), list(s.dims[s.n_spatial:])
        head = [str(pos)]
        if self.scan_group:
            group = self.scan_group.get(s.stage_index)
            head = [str(pos), "0", "0"] if group is None else [str(group), s.dims[0], str(pos)]
        vec = [*head, *sp, *["0"] * (self.max_sp - len(sp)), "1" if update else "0", *red,
               *["0"] * (self.max_red - len(red))]
        self.order.append(f"{s.id}[{', '.join(s.dims)}] -> [{', '.join(vec)}]")

    def stage(self, st) -> None:
        if isinstance(st.op, ScanOp):
            return  # no statement: its init and update stages write its array
        if isinstance(st.op, ExternOp):
            self.extern_stage(st)
            return
        op, dims = st.op, self.dims_of[st]
        env = {iv.var: d for iv, d in zip(st.root_iter_vars, dims)}
        n_sp = len(op.axis)
        bounds = [_bound(iv, d, env, self.params) for iv, d in zip(st.root_iter_vars, dims)]
        body = self.bodies[st]
        pos = self.index[st]
        if not isinstance(body[0], Reduce):
            s = self.statement(st, "plain", dims, bounds)
            self.write(s, st, self.must_w)
            self.read(s, body, env)
            self.time(s, pos, False)
            return
        red = body[0]
        init = self.statement(st, "init", dims[:n_sp], bounds[:n_sp])
        self.write(init, st, self.must_w)
        self.time(init, pos, False)
        cons = list(bounds)
        if red.condition is not None:
            # the where= condition: exact when it is Presburger, else every k may update
            c = cond_to_isl(red.condition, env, self.params)
            if c is not None:
                cons.append(c)
        upd = self.statement(st, "update", dims, cons)
        if not red.combiner.commutative:
            upd.ordered_reducer = red.combiner.name
        self.write(upd, st, self.may_w)
        # the combiner reads the accumulator it updates
        self.write(upd, st, self.reads)
        self.write(upd, st, self.reads_all)
        srcs = list(red.source) + ([red.condition] if red.condition is not None else [])
        self.read(upd, srcs, env)
        self.time(upd, pos, True)

    def extern_stage(self, st) -> None:
        """A tl.extern: one instance, reading every element of its inputs and writing every
        element of its outputs (what a call into a library may do)."""
        for t in st.op.input_tensors:
            src = self.schedule.stage_map.get(t.op)
            if src is not None and src.attach_type == "inline":
                raise ScheduleError(f"stage {src.name} is inlined, but extern stage {st.name} "
                                    f"(a call into {st.op.call.name!r}) takes it whole, as a "
                                    f"buffer: compute {src.name} at the root")
        s = self.statement(st, "plain", (), [])
        for t in st.op.outputs:
            self.must_w.append(_whole(s, self.array(t)[0], t, self.params))
        for t in dict.fromkeys(st.op.input_tensors):
            name, placeholder = self.array(t)
            text = _whole(s, name, t, self.params)
            self.reads_all.append(text)
            if not placeholder:
                self.reads.append(text)
        self.time(s, self.index[st], False)

    def build(self) -> tuple[Spec, Params]:
        for st in self.stages:
            self.stage(st)
        decl = self.params.decl()  # complete only now: parameters are found while converting
        for s in self.statements:
            s.domain_text = decl + s.domain_text

        def union(items):
            return decl + "{ " + "; ".join(items) + " }"

        key = (decl, tuple((s.id, s.stage_name, s.kind, s.axes, s.domain_text, s.ordered_reducer,
                            s.scan_body, s.state_of)
                           for s in self.statements),
               tuple(self.reads_all), tuple(self.must_w), tuple(self.may_w), tuple(self.order))
        spec = Spec(key=key, decl=decl, statements=self.statements,
                    reads_text=union(self.reads), reads_all_text=union(self.reads_all),
                    must_writes_text=union(self.must_w), may_writes_text=union(self.may_w),
                    order_text=union(self.order), arrays=self.array_src)
        return spec, self.params


def _bound(iv, dim: str, env: dict, params: Params) -> str:
    lo = to_isl(iv.dom.min, env, params)
    ext = to_isl(iv.dom.extent, env, params)
    if lo is None:
        return "true"  # an unknown range: the whole line (over-approximates the domain)
    if ext is None:
        return f"{dim} >= {_p(lo)}"
    return f"{_p(lo)} <= {dim} < {_p(lo)} + {_p(ext)}"


def _p(x) -> str:
    return str(x) if isinstance(x, int) else f"({x})"


def _whole(s: Statement, array: str, tensor, params: Params) -> str:
    """`S[dims] -> A[_o0, ...] : 0 <= _o0 < extent0 and ...`: every element of the tensor."""
    outs, cons = [], []
    for d, ext in enumerate(tensor.shape):
        outs.append(f"_o{d}")
        e = to_isl(ext, {}, params)
        cons.append(f"0 <= _o{d}" if e is None else f"0 <= _o{d} < {_p(e)}")
    where = f" : {' and '.join(cons)}" if cons else ""
    return f"{s.id}[{', '.join(s.dims)}] -> {array}[{', '.join(outs)}]{where}"


def _access(s: Statement, array: str, r, env: dict, params: Params) -> str:
    """`S[dims] -> A[_o0, ...] : _o0 = idx0 and ...`; a non-affine index spans the dimension."""
    outs, cons = [], []
    for d, (idx, ext) in enumerate(zip(r.indices, r.tensor.shape)):
        o = f"_o{d}"
        outs.append(o)
        v = to_isl(idx, env, params)
        if v is not None:
            cons.append(f"{o} = {_p(v)}")
        else:
            e = to_isl(ext, env, params)
            cons.append(f"0 <= {o}" if e is None else f"0 <= {o} < {_p(e)}")
    where = f" : {' and '.join(cons)}" if cons else ""
    return f"{s.id}[{', '.join(s.dims)}] -> {array}[{', '.join(outs)}]{where}"


# ----------------------------------------------------------------------------- cache

_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 128


def definition_for(spec: Spec) -> Definition:
    """The model of a spec, built once per distinct isl text (LRU-cached)."""
    got = _CACHE.get(spec.key)
    if got is not None:
        _CACHE.move_to_end(spec.key)
        return got
    got = Definition(spec)
    _CACHE[spec.key] = got
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return got
