"""The legality checks: every dependence stays lexicographically forward in time, its source's
values are alive where its sink runs, and no parallel or vectorized loop carries one.

Two ways to the same verdict:

* exact (`check(s, exact=True)`): each dependence is mapped into time with isl
  (`dep.apply_domain(T_src).apply_range(T_sink)`, tied for computed-at sources, see timemap.py),
  then `{t_src >=lex t_sink}` must be empty, and for a parallel/vectorized loop at time dim d the
  pairs with equal dims before d and a different dim d must be empty.
* fast (the default; what every primitive pays): the same tests decided on the *structure* of
  the two time vectors, which is how they come out for every dependence this language can have.
  Walking the two vectors from the outside in, the first component where they differ decides:
  two different constants (positions) order the pair whatever the loop values are, and a shared
  loop is either tied (a host loop of a computed-at source) or a spatial loop of the one stage
  both statements belong to (init and update of one accumulator element: same value). Only a
  parallel or vectorized *reduce* loop needs isl: whether two updates of one accumulator fall in
  different iterations of it with the outer reduce loops equal (a reduce loop of one iteration,
  say, carries nothing). Anything the structural walk does not recognise falls back to isl.
  Tests check that both agree on random schedules, and against brute-force enumeration.

Results are cached per loop structure (the stages' relations, loop order, annotations and
attachments) on top of the per-definition dependence cache, so a repeated candidate costs a dict
look-up and a new one tens of microseconds."""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import islpy as isl

from ..schedule.stage import Split
from .model import Binding, Dependence, Statement, build_spec, definition_for
from .timemap import LOOP, POS, Layout, PlacementError, dim_offsets, leaf_values, time_map_text

UNDECIDED = "undecided"
_CHECKED_ATTRS = ("parallel", "vectorize")


@dataclass(frozen=True)
class Violation:
    """One way a schedule breaks a dependence.

    kind: "carried" (a parallel/vectorize loop carries a dependence), "order" (a sink runs before
    its source), "scope" (a sink runs outside the loop where its computed-at source lives) or
    "placement" (an attachment that cannot be lowered). `stage`/`loop` name the loop (or the
    attachment) at fault; `dependence` is one violated instance pattern, `example` a concrete one."""

    kind: str
    stage: str
    loop: str | None
    dependence: str = ""
    example: str = ""
    reason: str = ""
    annotation: str | None = None  # "parallel" / "vectorize" for carried
    reduce_loop: bool = False
    host: str | None = None  # for order/scope: the host stage of the loop named
    sink_stage: str | None = None
    src_stage: str | None = None
    text: str = ""  # placement: the whole explanation
    # carried, or order of an update after another: the reducer declared commutative=False
    ordered_reducer: str | None = None
    scan: str | None = None  # carried: the loop runs over the time axis of this tl.scan

    def describe(self, step_stage: str | None = None) -> str:
        """The explanation, phrased relative to the stage a primitive was applied to."""
        if self.kind == "placement":
            return self.text
        if self.kind == "carried":
            where = f"loop {self.loop}" if self.stage == step_stage else \
                f"loop {self.loop} of stage {self.stage}"
            what = " is a reduce loop: it carries" if self.reduce_loop else " carries"
            if self.ordered_reducer:
                hint = (f"; reducer {self.ordered_reducer} combines its values in order, so "
                        f"its reduce loops stay serial")
            elif self.reduce_loop:
                hint = "; rfactor it into a spatial loop first"
            elif self.scan:
                hint = (f"; it runs over the time axis of tl.scan {self.scan}, whose steps "
                        "read the state the steps before them wrote: the scan dependence "
                        "keeps them in order (parallelize the state's other axes)")
            else:
                hint = f"; a {self.annotation} loop needs independent iterations"
            return (f"{where}{what} a dependence: {self.dependence} ({self.reason}); "
                    f"e.g. {self.example}{hint}")
        if self.kind == "scope":
            return (f"stage {self.sink_stage} uses {self.src_stage} outside loop {self.loop} of "
                    f"{self.host}, where {self.src_stage} is computed (its values exist only "
                    f"inside that loop): {self.dependence} ({self.reason}); e.g. {self.example}")
        where = f"inside loop {self.loop} of {self.host}" if self.loop else "at the root"
        if self.ordered_reducer:
            return (f"the updates of stage {self.sink_stage} would run out of the order of its "
                    f"reduce axes ({where}): {self.dependence} ({self.reason}); "
                    f"e.g. {self.example}")
        return (f"stage {self.sink_stage} would run before stage {self.src_stage} has computed "
                f"what it needs ({where}): {self.dependence} ({self.reason}); "
                f"e.g. {self.example}")

    def message(self, primitive: str, step_stage: str) -> str:
        """The ScheduleError text: primitive, stage, loop and the violated dependence."""
        return f"{primitive} on stage {step_stage}: {self.describe(step_stage)}"

    def __str__(self) -> str:
        return self.describe()


# ----------------------------------------------------------------------------- per-schedule state


class _State:
    """What one schedule's current dataflow binds to (rebuilt when its ops or inlining change)."""

    __slots__ = ("binding", "inline", "ops")

    def __init__(self, ops, inline, binding):
        self.ops, self.inline, self.binding = ops, inline, binding


_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SERIAL = itertools.count()
_SERIALS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def bind(schedule) -> Binding:
    """The dependence model of the schedule's current compute definition."""
    ops = tuple(st.op for st in schedule.stages)
    inline = tuple(st.attach_type == "inline" for st in schedule.stages)
    state = _STATES.get(schedule)
    if state is not None and state.inline == inline and len(state.ops) == len(ops) and \
            all(a is b for a, b in zip(state.ops, ops)):
        return state.binding
    spec, params = build_spec(schedule)
    model = definition_for(spec)
    if model not in _SERIALS:
        _SERIALS[model] = next(_SERIAL)
    binding = Binding(model, params, list(schedule.stages))
    _STATES[schedule] = _State(ops, inline, binding)
    return binding


def _stage_key(st, index: dict) -> tuple:
    # positions by id(): the same as by IterVar (hashed by identity), without a Python-level
    # __hash__ call per look-up (this key is built for every stage after every primitive)
    pos = {id(iv): n for n, iv in enumerate(st.all_iter_vars)}
    rels = tuple((0, pos[id(r.parent)], pos[id(r.outer)], pos[id(r.inner)], r.factor, r.nparts)
                 if isinstance(r, Split) else
                 (1, pos[id(r.outer)], pos[id(r.inner)], pos[id(r.fused)])
                 for r in st.relations)
    leaves = tuple(pos[id(lv)] for lv in st.leaf_iter_vars)
    attrs = tuple(sorted((pos[id(iv)], a) for iv, a in st.iter_attrs.items()
                         if a in _CHECKED_ATTRS and id(iv) in pos))
    if st.attach_type == "scope":
        host = st.attach_stage
        hpos = next((n for n, iv in enumerate(host.all_iter_vars) if iv is st.attach_ivar), -1)
        attach = ("scope", index.get(host, -1), hpos)
    else:
        attach = (st.attach_type,)
    return (rels, leaves), attrs, attach


_VERDICTS: OrderedDict = OrderedDict()
_VERDICTS_SIZE = 4096
_LEAFVALS: OrderedDict = OrderedDict()
_CARRIED: OrderedDict = OrderedDict()


def _lru_put(cache: OrderedDict, key, value, size: int = 4096):
    cache[key] = value
    if len(cache) > size:
        cache.popitem(last=False)
    return value


def analyze(schedule, exact: bool = False) -> list[Violation]:
    """All violations of the schedule's current state (empty when legal)."""
    binding = bind(schedule)
    serial = _SERIALS[binding.model]
    index = {st: k for k, st in enumerate(schedule.stages)}
    skeys = tuple(_stage_key(st, index) for st in schedule.stages)
    key = (serial, skeys, exact)
    got = _VERDICTS.get(key)
    if got is not None:
        _VERDICTS.move_to_end(key)
        return list(got)
    try:
        ctx = _Context(schedule, binding, serial, skeys)
        ctx.layout.build_all()
    except PlacementError as e:
        out = [Violation("placement", e.stage, None, text=e.text)]
    else:
        out = ctx.order_violations(exact) + ctx.carried_violations(exact)
    _lru_put(_VERDICTS, key, tuple(out), _VERDICTS_SIZE)
    return out


class _Context:
    """One analysis of one schedule state."""

    def __init__(self, schedule, binding: Binding, serial: int, skeys: tuple):
        self.schedule = schedule
        self.stages = schedule.stages
        self.binding = binding
        self.model = binding.model
        self.serial = serial
        self.skeys = skeys
        self.layout = Layout(schedule)
        self._leafvals: dict = {}
        self._tmaps: dict = {}
        self._n_dims: int | None = None
        self._timed: dict = {}

    # ------------------------------------------------------------------ shared pieces
    def leafvals(self, k: int) -> list:
        got = self._leafvals.get(k)
        if got is None:
            ck = (self.serial, k, self.skeys[k][0])
            got = _LEAFVALS.get(ck)
            if got is None:
                got = _lru_put(_LEAFVALS, ck, leaf_values(self.stages[k], self.binding.params))
            self._leafvals[k] = got
        return got

    def all_leafvals(self) -> dict:
        return {k: self.leafvals(k) for k, st in enumerate(self.stages)
                if st.attach_type != "inline"}

    def n_dims(self) -> int:
        if self._n_dims is None:
            lv = self.all_leafvals()
            self._n_dims = max((dim_offsets(self.layout.comps(s), lv)[-1]
                                for s in self.model.statements), default=1)
        return self._n_dims

    def time_map(self, stmt: Statement) -> isl.Map:
        got = self._tmaps.get(stmt.id)
        if got is None:
            text = time_map_text(self.binding, self.layout, self.all_leafvals(), stmt,
                                 self.n_dims())
            got = isl.Map(text).intersect_domain(stmt.domain)
            self._tmaps[stmt.id] = got
        return got

    def tie_dims(self, stmt: Statement) -> int:
        comps = self.layout.comps(stmt)
        return dim_offsets(comps, self.all_leafvals())[self.layout.tie[stmt.stage_index]]

    def timed(self, dep: Dependence) -> isl.Map:
        """The dependence in time, tied (see timemap.py): src time -> sink time."""
        got = self._timed.get(id(dep))
        if got is not None:
            return got
        m = dep.map.apply_domain(self.time_map(dep.src)).apply_range(self.time_map(dep.sink))
        for d in range(self.tie_dims(dep.src)):
            m = _same_time_dim(m, d)
        if dep.src.stage_index == dep.sink.stage_index:
            # same stage: one accumulator element, so opaque spatial loops agree
            lv = self.leafvals(dep.src.stage_index)
            ca, cb = self.layout.comps(dep.src), self.layout.comps(dep.sink)
            oa = dim_offsets(ca, self.all_leafvals())
            for n, (x, y) in enumerate(zip(ca, cb)):
                if x != y:
                    break
                if x[0] == LOOP and x[1] == dep.src.stage_index and lv[x[2]].exprs is None \
                        and self.stages[x[1]].leaf_iter_vars[x[2]].kind != "reduce":
                    m = _same_time_dim(m, oa[n])
        self._timed[id(dep)] = m
        return m

    # ------------------------------------------------------------------ order and scope
    def order_violations(self, exact: bool) -> list[Violation]:
        out = []
        for src, sink in self.model.ordered_pairs:
            verdict = None if exact else self.fast_order(src, sink)
            if exact or verdict == UNDECIDED:
                verdict = self.isl_order(src, sink)
            if verdict is not None:
                out.append(self.order_violation(src, sink, verdict))
        return out

    def fast_order(self, src: Statement, sink: Statement):
        """None (forward), ("scope", i), ("order", i) or UNDECIDED, from the structure alone."""
        ca, cb = self.layout.comps(src), self.layout.comps(sink)
        tie = self.layout.tie[src.stage_index]
        for i, (x, y) in enumerate(zip(ca, cb)):
            if x == y:
                if x[0] == LOOP and i >= tie:
                    # src's own loop, shared with sink: the same stage (init -> update of one
                    # accumulator element), so a spatial loop has the same value on both sides
                    same = src.stage_index == sink.stage_index == x[1]
                    if not same or self.stages[x[1]].leaf_iter_vars[x[2]].kind == "reduce":
                        return UNDECIDED
                continue
            if i < tie:
                return ("scope", i)
            if x[0] == POS and y[0] == POS:
                return None if x[1] < y[1] else ("order", i)
            return UNDECIDED
        return UNDECIDED

    def isl_order(self, src: Statement, sink: Statement):
        tie = self.layout.tie[src.stage_index]
        where = self._divergence(src, sink)
        for dep in self.model.deps_between(src, sink):
            if not dep.orders():
                continue
            m = self.timed(dep)
            if tie and m.is_empty():
                return ("scope", where)
            bad = m.intersect(isl.Map.lex_ge(m.get_space().range()))
            if not bad.is_empty():
                return ("order", where)
        return None

    def _divergence(self, src: Statement, sink: Statement) -> int:
        ca, cb = self.layout.comps(src), self.layout.comps(sink)
        for i, (x, y) in enumerate(zip(ca, cb)):
            if x != y:
                return i
        return min(len(ca), len(cb))

    def order_violation(self, src: Statement, sink: Statement, verdict) -> Violation:
        kind, i = verdict
        deps = [d for d in self.model.deps_between(src, sink) if d.orders()]
        deps.sort(key=lambda d: ("RAW", "WAW", "WAR").index(d.kind))
        dep = deps[0]
        pattern, example, moved = render(dep.map, src, sink)
        reason = _ordered_reason(src, moved) if dep.reduction else _reason(dep)
        ss, ks = self.stages[src.stage_index], self.stages[sink.stage_index]
        if kind == "scope":
            host, loop = ss.attach_stage, ss.attach_ivar
            # name the innermost attachment of src that the sink is not inside
            comps = self.layout.comps(src)
            for n in range(i, len(comps)):
                if comps[n][0] == LOOP:
                    h = self.stages[comps[n][1]]
                    host, loop = h, h.leaf_iter_vars[comps[n][2]]
                    break
            return Violation("scope", ss.name, loop.name, pattern, example, reason,
                             host=host.name, sink_stage=ks.name, src_stage=ss.name)
        comps = self.layout.comps(src)
        loop_name = host_name = None
        for n in range(min(i, len(comps)) - 1, -1, -1):
            if comps[n][0] == LOOP:
                h = self.stages[comps[n][1]]
                loop_name, host_name = h.leaf_iter_vars[comps[n][2]].name, h.name
                break
        stage = host_name or ks.name
        return Violation("order", stage, loop_name, pattern, example, reason, host=host_name,
                         sink_stage=ks.name, src_stage=ss.name,
                         ordered_reducer=src.ordered_reducer if dep.reduction else None)

    # ------------------------------------------------------------------ parallel / vectorize
    def carried_violations(self, exact: bool) -> list[Violation]:
        out = []
        for k, st in enumerate(self.stages):
            if st.attach_type == "inline" or not st.iter_attrs:
                continue
            for j, lv in enumerate(st.leaf_iter_vars):
                ann = st.iter_attrs.get(lv)
                if ann not in _CHECKED_ATTRS:
                    continue
                scan = self.scan_step_loop(k, j)
                if exact or scan:
                    found = self.isl_carried(k, j)
                elif lv.kind != "reduce":
                    continue  # a spatial loop: only one stage's same-element pairs share it
                else:
                    found = self.reduce_carried(k, j)
                if found is not None:
                    dep_pattern, example, reason = found
                    out.append(Violation("carried", st.name, lv.name, dep_pattern, example,
                                         reason, annotation=ann,
                                         reduce_loop=lv.kind == "reduce",
                                         ordered_reducer=self.binding.main(k).ordered_reducer,
                                         scan=scan))
        return out

    def scan_step_loop(self, k: int, j: int) -> str | None:
        """The tl.scan whose time axis loop j of stage k runs over (in part), else None: its
        iterations may depend on each other, like a reduce loop's (decided with isl)."""
        from ..te.scan import scan_of

        scan = scan_of(self.stages[k].op)
        return scan.name if scan is not None and 0 in self.leafvals(k)[j].roots else None

    def reduce_carried(self, k: int, j: int):
        """Do two updates of one accumulator fall in different iterations of reduce loop j with
        the outer reduce loops equal? (Spatial loops are equal: one accumulator element.)"""
        lvs = self.leafvals(k)
        leaves = self.stages[k].leaf_iter_vars
        outer = tuple(lvs[jj] for jj in range(j) if leaves[jj].kind == "reduce")
        # the answer depends on nothing else (spatial loops are equal on both sides), so
        # candidates that differ only in their spatial tiling share it
        ck = (self.serial, k, outer, lvs[j])
        if ck in _CARRIED:
            return _CARRIED[ck]
        red = self.model.reduction_map(k)
        found = None
        if red is not None:
            stmt = self.binding.main(k)
            xs = stmt.dims
            ys = tuple(f"_y_{d}" for d in xs)
            cons = []
            for o in outer:
                if o.exprs is not None:
                    cons += [f"{e.format(*xs)} = {e.format(*ys)}" for e in o.exprs]
            lv = lvs[j]
            if lv.exprs is not None:
                pairs = [(e.format(*xs), e.format(*ys)) for e in lv.exprs]
            else:  # opaque: a function of its axes, so it differs only where they differ
                pairs = [(xs[r], ys[r]) for r in sorted(lv.roots)]
            cons.append("(" + " or ".join(f"({a}) < ({b}) or ({a}) > ({b})"
                                          for a, b in pairs) + ")")
            text = (f"{self.model.decl}{{ {stmt.id}[{', '.join(xs)}] -> "
                    f"{stmt.id}[{', '.join(ys)}] : {' and '.join(cons)} }}")
            w = red.intersect(isl.Map(text))
            if not w.is_empty():
                pattern, example, moved = render(w, stmt, stmt)
                found = (pattern, example, _reduce_reason(stmt, moved))
        return _lru_put(_CARRIED, ck, found)

    def isl_carried(self, k: int, j: int):
        stmt = self.binding.main(k)
        comps = self.layout.comps(stmt)
        offs = dim_offsets(comps, self.all_leafvals())
        c = comps.index((LOOP, k, j))
        d0, d1 = offs[c], offs[c + 1]
        n = self.n_dims()
        outs_t = ", ".join(f"_t{d}" for d in range(n))
        outs_u = ", ".join(f"_u{d}" for d in range(n))
        cons = [f"_t{d} = _u{d}" for d in range(d0)]
        # the loop's own nest: the positions that lead to it (dim d0 is other loops elsewhere)
        cons += [f"_t{offs[n]} = {x[1]}" for n, x in enumerate(comps[:c]) if x[0] == POS]
        cons.append("(" + " or ".join(f"_t{d} < _u{d} or _t{d} > _u{d}"
                                      for d in range(d0, d1)) + ")")
        differ = isl.Map(f"{{ [{outs_t}] -> [{outs_u}] : {' and '.join(cons)} }}")
        for dep in self.model.deps:
            m = self.timed(dep)
            if m.intersect(differ).is_empty():
                continue
            # back to instances for the message: pairs whose times are in `differ` and tied
            tied = differ
            for d in range(min(self.tie_dims(dep.src), d0)):
                tied = tied.equate(isl.dim_type.in_, tied.find_dim_by_name(isl.dim_type.in_,
                                                                           f"_t{d}"),
                                   isl.dim_type.out, tied.find_dim_by_name(isl.dim_type.out,
                                                                           f"_u{d}"))
            rel = self.time_map(dep.src).apply_range(tied).apply_range(
                self.time_map(dep.sink).reverse())
            w = dep.map.intersect(rel)
            if w.is_empty():
                w = dep.map
            pattern, example, moved = render(w, dep.src, dep.sink)
            reason = _reduce_reason(dep.src, moved) if dep.reduction else _reason(dep)
            return pattern, example, reason
        return None


def _same_time_dim(m: isl.Map, d: int) -> isl.Map:
    """m with time dim `_t{d}` equal on both sides (found by name: isl keeps the names that
    time_map_text gives through apply_domain / apply_range)."""
    name = f"_t{d}"
    return m.equate(isl.dim_type.in_, m.find_dim_by_name(isl.dim_type.in_, name),
                    isl.dim_type.out, m.find_dim_by_name(isl.dim_type.out, name))


# ----------------------------------------------------------------------------- messages


def _reason(dep: Dependence) -> str:
    src = _stmt_label(dep.src)
    sink = _stmt_label(dep.sink)
    if dep.kind == "RAW" and dep.src.state_of and dep.sink.scan_body and dep.src.kind != "init":
        return (f"{sink} reads what {src} writes: the state of tl.scan {dep.src.state_of}, "
                "which a step reads from the steps before it")
    if dep.kind == "RAW":
        return f"{sink} reads what {src} writes"
    if dep.kind == "WAR":
        return f"{sink} overwrites what {src} reads"
    return f"{sink} overwrites what {src} writes"


def _reduce_reason(stmt: Statement, moved: list) -> str:
    names = [stmt.axes[d] for d in moved if d >= stmt.n_spatial] or \
        list(stmt.axes[stmt.n_spatial:])
    if len(names) == 1:
        return f"reduce axis {names[0]} carries the accumulation"
    return f"reduce axes {', '.join(names)} carry the accumulation"


def _ordered_reason(stmt: Statement, moved: list) -> str:
    return (f"{_reduce_reason(stmt, moved)} of reducer {stmt.ordered_reducer}, declared "
            "commutative=False: its values are combined in the order of the reduce axes")


def _stmt_label(s: Statement) -> str:
    return f"the init of {s.stage_name}" if s.kind == "init" else s.stage_name


def _instance_name(s: Statement) -> str:
    return f"{s.stage_name}.init" if s.kind == "init" else s.stage_name


def _point(w: isl.Map) -> tuple[list, list, dict]:
    pairs = w.wrap()
    try:  # the lexicographically first pair: an example that does not depend on how isl
        first = pairs.lexmin()  # happens to split the relation (C[0, 0, 0] -> C[0, 0, 1])
        pairs = pairs if first.is_empty() else first
    except isl.Error:
        pass
    pt = pairs.sample_point()
    n_in = w.dim(isl.dim_type.in_)
    n_out = w.dim(isl.dim_type.out)
    vals = [pt.get_coordinate_val(isl.dim_type.set, d).to_python() for d in range(n_in + n_out)]
    params = {}
    for d in range(w.dim(isl.dim_type.param)):
        params[w.get_dim_name(isl.dim_type.param, d)] = \
            pt.get_coordinate_val(isl.dim_type.param, d).to_python()
    return vals[:n_in], vals[n_in:], params


def _offset(name: str, c: int) -> str:
    return name if c == 0 else f"{name} + {c}" if c > 0 else f"{name} - {-c}"


def render(w: isl.Map, src: Statement, sink: Statement) -> tuple[str, str, list]:
    """(pattern, concrete example, sink dims that differ from src's) for one pair of w, e.g.
    ("C[i, j, k] -> C[i, j, k + 1]", "C[0, 0, 3] -> C[0, 0, 4]", [2])."""
    same = src is sink
    if same:
        # the closest pair: the lexicographically smallest distance
        try:
            delta = w.deltas().lexmin()
            pt = delta.sample_point()
            dv = [pt.get_coordinate_val(isl.dim_type.set, d).to_python()
                  for d in range(delta.dim(isl.dim_type.set))]
            fix = " and ".join(f"{b} = {a} + {v}" for a, b, v in
                               zip(_in_names(w), _out_names(w), dv))
            near = w.intersect(isl.Map(f"{_decl(w)}{{ {src.id}[{', '.join(_in_names(w))}] -> "
                                       f"{sink.id}[{', '.join(_out_names(w))}] : {fix} }}"))
            if not near.is_empty():
                w = near
        except isl.Error:
            pass
    xv, yv, params = _point(w)
    moved = [d for d in range(len(yv)) if not same or yv[d] != xv[d]]
    sink_terms = []
    for d, name in enumerate(sink.axes):
        if same:
            sink_terms.append(_offset(name, yv[d] - xv[d]))
            continue
        if name in src.axes:
            s = src.axes.index(name)
            c = yv[d] - xv[s]
            if _implied(w, s, d, c):
                sink_terms.append(_offset(name, c))
                continue
            sink_terms.append(name + "'")
            continue
        sink_terms.append(name)
    pattern = (f"{_instance_name(src)}[{', '.join(src.axes)}] -> "
               f"{_instance_name(sink)}[{', '.join(sink_terms)}]")
    example = (f"{_instance_name(src)}[{', '.join(map(str, xv))}] -> "
               f"{_instance_name(sink)}[{', '.join(map(str, yv))}]")
    if params:
        example += " with " + ", ".join(f"{k} = {v}" for k, v in params.items())
    return pattern, example, moved


def _decl(w: isl.Map) -> str:
    n = w.dim(isl.dim_type.param)
    names = [w.get_dim_name(isl.dim_type.param, d) for d in range(n)]
    return f"[{', '.join(names)}] -> " if names else ""


def _in_names(w: isl.Map) -> list[str]:
    return [f"_x{d}" for d in range(w.dim(isl.dim_type.in_))]


def _out_names(w: isl.Map) -> list[str]:
    return [f"_y{d}" for d in range(w.dim(isl.dim_type.out))]


def _implied(w: isl.Map, s: int, d: int, c: int) -> bool:
    """Does every pair of w have sink dim d == src dim s + c?"""
    xs, ys = _in_names(w), _out_names(w)
    src_id = w.get_tuple_name(isl.dim_type.in_)
    sink_id = w.get_tuple_name(isl.dim_type.out)
    other = isl.Map(f"{_decl(w)}{{ {src_id}[{', '.join(xs)}] -> {sink_id}[{', '.join(ys)}] : "
                    f"{ys[d]} < {xs[s]} + {c} or {ys[d]} > {xs[s]} + {c} }}")
    return w.intersect(other).is_empty()
