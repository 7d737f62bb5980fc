"""The Schedule: one Stage per compute, in producer-before-consumer order, and the trace of
recorded steps. Dataflow-changing primitives (cache_read, cache_write, rfactor) live here since
they add stages."""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import ScheduleError
from ..ir import dtype as dt
from ..ir.expr import Select, Var, const
from ..ir.functor import Mutator, substitute
from ..ir.stmt import IterVar, Range
from ..te.tensor import (
    ComputeOp,
    Operation,
    PlaceholderOp,
    Reduce,
    Tensor,
    TensorRead,
    read_tensors,
)
from .opaque_stage import ExternStage, FixedStage, attach_scan_bodies, stage_for
from .relations import leaf_extents, root_values
from .stage import Stage

STEP_KINDS = ("split", "fuse", "reorder", "parallel", "vectorize", "unroll", "pragma",
              "compute_at", "compute_inline", "compute_root", "cache_read", "cache_write",
              "rfactor", "tensorize")


@dataclass
class Step:
    """One recorded primitive: what a tuning record stores and replay re-applies."""

    kind: str
    stage: str
    loops: list = field(default_factory=list)
    args: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"kind": self.kind, "stage": self.stage, "loops": list(self.loops),
                "args": dict(self.args)}

    @staticmethod
    def from_json(d: dict) -> Step:
        if not isinstance(d, dict) or d.get("kind") not in STEP_KINDS:
            raise ValueError(f"not a schedule step: {d!r}")
        return Step(d["kind"], d["stage"], list(d.get("loops", [])), dict(d.get("args", {})))

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items() if v is not None)
        loops = ", ".join(self.loops)
        inner = ", ".join(x for x in (loops, args) if x)
        return f"s[{self.stage}].{self.kind}({inner})"


class Trace(list):
    """The list of steps of a schedule."""

    def to_json(self) -> list:
        return [s.to_json() for s in self]

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    @staticmethod
    def loads(text_or_list) -> Trace:
        data = json.loads(text_or_list) if isinstance(text_or_list, str) else text_or_list
        return Trace(Step.from_json(d) for d in data)

    def __str__(self) -> str:
        return "\n".join(str(s) for s in self)


# Whether new schedules check legality (see deferred_checks).
_CHECKS: contextvars.ContextVar[bool] = contextvars.ContextVar("schedule_checks", default=True)


@contextlib.contextmanager
def deferred_checks() -> Iterator[None]:
    """Schedules created inside this context are created with check=False: no legality check
    per step, none when lowered. For code that decides legality later, once, for the schedules
    it keeps: the auto-tuner's cost model featurizes thousands of candidates this way and checks
    only those it picks for measurement (the per-step checks cost about a third of a
    candidate's featurizing)."""
    token = _CHECKS.set(False)
    try:
        yield
    finally:
        _CHECKS.reset(token)


def _collect_ops(outputs: list[Operation]) -> list[Operation]:
    """All operations reachable from the outputs, producers before consumers, deterministic."""
    order: list[Operation] = []
    seen: set[int] = set()

    def visit(op):
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for op in outputs:
        visit(op)
    return order


class Schedule:
    def __init__(self, outputs, check: bool = True):
        outs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        ops = []
        for o in outs:
            op = o.op if isinstance(o, Tensor) else o
            if not isinstance(op, Operation):
                raise TypeError(f"create_schedule: expected tensors, got {type(o).__name__}")
            if isinstance(op, PlaceholderOp):
                # a Tensor of the wrong kind: the type is right, the value is not
                raise ValueError(f"create_schedule: {op.name} is a placeholder, not a compute")  # noqa: TRY004
            if op not in ops:
                ops.append(op)
        self.outputs = ops
        self.check_legality = check and _CHECKS.get()
        self.trace = Trace()
        # broken dependences between stages that a later primitive may still repair (checked
        # by tl.lower): (kind, producer, reader) -> the step that left it (analysis.check_step)
        self.pending_causes: dict = {}
        self.stages: list[Stage] = []
        self.stage_map: dict[Operation, Stage] = {}
        self.placeholders: list[PlaceholderOp] = []
        for op in _collect_ops(ops):
            if isinstance(op, PlaceholderOp):
                self.placeholders.append(op)
                continue
            st = stage_for(op, self)
            # computes may share a name (every library add is "add"); steps and traces name
            # stages, so a second "add" is the stage "add.1" (in creation order: a trace
            # replayed on the same computes names the same stages)
            st.name = self._unique_stage_name(op.name)
            st.is_output = op in ops
            self.stages.append(st)
            self.stage_map[op] = st
        attach_scan_bodies(self)

    def __getattr__(self, name: str):
        # only for a missing attribute: TVM schedule methods we lack, named (tvm_names.py)
        from ..tvm_names import SCHEDULE_NAMES, missing

        raise missing("'Schedule' object", name, SCHEDULE_NAMES)

    def normalize(self) -> Schedule:
        """TVM's s.normalize() (rebases loops to start at 0): this schedule itself, whose loops
        already start at 0 (lowering builds them so)."""
        return self

    # ------------------------------------------------------------------ lookups
    def __getitem__(self, key) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if isinstance(op, PlaceholderOp):
            raise ScheduleError(f"{op.name} is a placeholder (an input); it has no stage to "
                                "schedule (use cache_read to stage a copy of it)")
        st = self.stage_map.get(op)
        if st is None:
            raise ScheduleError(f"{getattr(op, 'name', op)!r} is not part of this schedule")
        return st

    def stage_by_name(self, name: str) -> Stage:
        for st in self.stages:
            if st.name == name:
                return st
        raise ScheduleError(f"no stage named {name!r} in this schedule (stages: "
                            f"{[s.name for s in self.stages]})")

    def stage_index(self, st: Stage) -> int:
        return self.stages.index(st)

    def tensor_by_name(self, name: str) -> Tensor:
        for st in self.stages:
            for t in st.op.outputs:
                if t.name == name or st.name == name:
                    return t
        for op in self.placeholders:
            if op.name == name:
                return op.output(0)
        raise ScheduleError(f"no tensor named {name!r} in this schedule")

    def stage_of_tensor(self, t: Tensor) -> Stage | None:
        return self.stage_map.get(t.op)

    def consumers(self, st: Stage) -> list[Stage]:
        outs = set(map(id, st.op.outputs)) | set(map(id, st.origin_op.outputs))
        return [c for c in self.stages
                if any(id(t) in outs or self.stage_map.get(t.op) is st
                       for t in c.op.input_tensors)]

    def reads_through_inline(self, reader: Stage, st: Stage) -> bool:
        """True when reader reads st directly or through stages that are inlined."""
        for t in reader.op.input_tensors:
            src = self.stage_map.get(t.op)
            if src is st:
                return True
            if src is not None and src.attach_type == "inline" and \
                    self.reads_through_inline(src, st):
                return True
        # also through stages computed inside the reader's loops (e.g. a packed panel hosted
        # at a loop of the output stage that the cache_write accumulator, computed at an
        # inner loop of that output, reads): bound inference sizes it from those readers
        for other in self.stages:
            if other.attach_type == "scope" and other.attach_stage is reader and \
                    other is not st and self.reads_through_inline(other, st):
                return True
        return False

    # ------------------------------------------------------------------ recording
    def _record(self, stage: Stage, kind: str, loops: list, args: dict):
        # to undo a refused step: the stage, and the stages attached to it (a split or fuse of
        # their attach loop moves them to its successor)
        snap = [(st, st._snapshot()) for st in self.stages
                if st is stage or st.attach_stage is stage] if self.check_legality else None
        call_args = dict(args)
        if kind == "compute_at":
            call_args["parent"] = self.stage_by_name(args["parent"])
        if kind in ("parallel", "vectorize", "unroll"):
            result = stage._set_attr(loops[0], kind)
        else:
            result = getattr(stage, "_" + kind)(*loops, **call_args)
        step = Step(kind, stage.name, [iv.name for iv in loops],
                    {k: {"var": v.name} if isinstance(v, Var) else v for k, v in args.items()})
        self.trace.append(step)
        if self.check_legality:
            try:
                self._check(stage, step)
            except ScheduleError:
                for st, saved in snap:
                    st._restore(saved)
                self.trace.pop()
                raise
        return result

    def _check(self, stage: Stage, step: Step) -> None:
        from ..analysis import check_step

        check_step(self, stage, step)

    # ------------------------------------------------------------------ dataflow primitives
    def _unique_stage_name(self, base: str) -> str:
        names = {s.name for s in self.stages} | {p.name for p in self.placeholders}
        if base not in names:
            return base
        n = 1
        while f"{base}.{n}" in names:
            n += 1
        return f"{base}.{n}"

    def _insert_stage(self, op: ComputeOp, before: Stage | None) -> Stage:
        st = Stage(op, self)
        if before is None:
            self.stages.append(st)
        else:
            self.stages.insert(self.stage_index(before), st)
        self.stage_map[op] = st
        return st

    def cache_read(self, tensor: Tensor, scope: str, readers, layout=None) -> Tensor:
        """Copy `tensor` into a new stage that `readers` read instead:

            C = f(A)   ==>   A.local = A;  C = f(A.local)   (then compute_at A.local somewhere)

        layout: the copy's storage order, a permutation of the tensor's dimensions (outermost
        first; default: as the tensor). W[o, c, kh, kw] copied with layout=(1, 2, 3, 0) is
        stored W.local[c, kh, kw, o], so a loop vectorized over o reads it contiguously (the
        weight panel packing of a conv, computed inside the o tile loop)."""
        if not isinstance(tensor, Tensor):
            raise TypeError(f"cache_read: expected a tensor, got {type(tensor).__name__}")
        _check_scope("cache_read", scope)
        readers = readers if isinstance(readers, (list, tuple)) else [readers]
        if not readers:
            raise ValueError("cache_read: give at least one reader")
        reader_stages = [self[r] for r in readers]
        for rs in reader_stages:
            if isinstance(rs, ExternStage):
                rs.refuse("cache_read", f"it takes {tensor.name} whole, as a buffer")
            if isinstance(rs, FixedStage):  # a scan's stage: its op is fixed by the scan
                rs.refuse("cache_read", f"a reader of a copy of {tensor.name} would replace "
                          "its op, which the scan holds")
        for rs in reader_stages:
            if tensor not in rs.op.input_tensors:
                raise ScheduleError(f"cache_read: stage {rs.name} does not read {tensor.name}")
        perm = _layout_permutation(tensor, layout)
        out = self._cache_read(tensor, scope, reader_stages, perm)
        args = {"scope": scope, "readers": [r.name for r in reader_stages]}
        if perm != tuple(range(len(perm))):
            args["layout"] = list(perm)
        self.trace.append(Step("cache_read", tensor.name, [], args))
        return out

    def _cache_read(self, tensor, scope, reader_stages, perm: tuple):
        name = self._unique_stage_name(f"{tensor.name}.{scope}")
        # storage position p holds the tensor's dimension perm[p]
        axis = tuple(IterVar(Var(f"ax{p}"), Range(const(0), tensor.shape[d]), "spatial")
                     for p, d in enumerate(perm))
        src = [None] * len(perm)
        for p, d in enumerate(perm):
            src[d] = axis[p].var
        op = ComputeOp(name, axis, (), (TensorRead(tensor, tuple(src)),),
                       attrs={"scope": scope})
        first = min(reader_stages, key=self.stage_index)
        self._insert_stage(op, first)
        new_t = op.output(0)
        for rs in reader_stages:
            old = rs.op
            body = tuple(_PermutedRead(tensor, new_t, perm).visit(b) for b in old.body)
            new_op = ComputeOp(old.name, old.axis, old.reduce_axis, body, old.tag, old.attrs,
                               [t.name for t in old.outputs], old.axis_copies)
            rs.op = new_op
            self.stage_map[new_op] = rs
        return new_t

    def cache_write(self, tensor, scope: str, layout=None):
        """Compute into a new stage and copy the result out:

            C = sum(...)   ==>   C.local = sum(...);  C = C.local

        Call it before transforming the stage of `tensor`. layout: the accumulator's storage
        order, a permutation of the output's dimensions (default: as the output): an NCHW
        conv's tile vectorized over the channels accumulates in [n, h, w, c] order
        (layout=(0, 2, 3, 1)), its vectors contiguous, and the copy out transposes.

        A multi-output compute is cached whole (its outputs share one loop nest): give a list
        of its outputs, as TVM does, to get their caches in that order, or one of them to get
        its cache."""
        tensors = _cache_write_tensors(tensor)
        _check_scope("cache_write", scope)
        st = self[tensors[0]]
        if isinstance(st, FixedStage):
            st.refuse("cache_write", "its op cannot be replaced by a copy")
        if st.is_transformed():
            raise ScheduleError(f"cache_write on stage {st.name}: the stage was already "
                                "transformed; call cache_write before split/reorder/...")
        perm = _layout_permutation(tensors[0], layout)
        caches = self._cache_write(st, scope, perm)
        args = {"scope": scope}
        if perm != tuple(range(len(perm))):
            args["layout"] = list(perm)
        self.trace.append(Step("cache_write", st.name, [], args))
        picked = [caches[t.value_index] for t in tensors]
        return picked if isinstance(tensor, (list, tuple)) else picked[0]

    def _cache_write(self, st: Stage, scope: str, perm: tuple) -> tuple:
        old = st.op
        name = self._unique_stage_name(f"{st.name}.{scope}")
        # the body names its axes by variable: permuting them permutes the storage only
        cache_op = ComputeOp(name, tuple(old.axis[d] for d in perm), old.reduce_axis, old.body,
                             old.tag, dict(old.attrs, scope=scope),
                             axis_copies=old.axis_copies)
        self._insert_stage(cache_op, st)
        axis = tuple(IterVar(Var(iv.name), iv.dom, "spatial") for iv in old.axis)
        index = tuple(axis[d].var for d in perm)
        copy = ComputeOp(st.name, axis, (), tuple(c[index] for c in cache_op.outputs),
                         old.tag, old.attrs, [t.name for t in old.outputs])
        st._replace_op(copy, f"cache_write moved the reduction to stage {name} (schedule it "
                             f"on s[{name}])")
        self.stage_map[copy] = st
        return cache_op.outputs

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0, *,
                factor_index: int | None = None) -> Tensor:
        """Factor a reduction: the loop `axis` (a split of a reduce axis) becomes a spatial
        axis of a new stage that holds partial results, and the original stage reduces those:

            C[i] = sum(A[i, k], k)   with k = ko * 4 + ki, rfactor(ki) ==>
            C.rf[ki, i] = sum(A[i, ko * 4 + ki], ko);   C[i] = sum(C.rf[kr, i], kr)

        factor_axis (TVM's name and meaning): the position of the new factored dimension in
        the shape of the returned tensor, 0 (first, as above) to the number of the stage's axes
        (last: `C.rf[i, ki]`, whose partial sums of a row are contiguous). factor_index is an
        older name for it. Then the new spatial axis can be parallelized or vectorized."""
        if not isinstance(tensor, Tensor):
            raise TypeError(f"rfactor: expected a tensor, got {type(tensor).__name__}")
        if factor_index is not None:
            if factor_axis not in (0, factor_index):
                raise TypeError(f"rfactor: factor_index={factor_index!r} is the older name of "
                                f"factor_axis={factor_axis!r}; give one of them")
            factor_axis = factor_index
        st = self[tensor]
        if isinstance(st, FixedStage):
            st.refuse("rfactor", "its op cannot be replaced")
        st._check_not_tensorized("rfactor")
        axis = st._leaf(axis, "rfactor")
        if axis.kind != "reduce":
            raise ScheduleError(f"rfactor on stage {st.name}: loop {axis.name} is not a "
                                "reduce loop")
        reducer = st.op.body[0].combiner
        if not reducer.commutative:
            raise ScheduleError(f"rfactor on stage {st.name}: reducer {reducer.name} is declared "
                                "commutative=False, and rfactor combines its values out of the "
                                "order of the reduce axes (partial results per "
                                f"{axis.name}, then across them)")
        n_axes = len(st.op.axis)
        if isinstance(factor_axis, bool) or not isinstance(factor_axis, int) or \
                not 0 <= factor_axis <= n_axes:
            given = "factor_index" if factor_index is not None else "factor_axis"
            raise ValueError(f"rfactor on stage {st.name}: {given} must be in [0, {n_axes}] "
                             "(an int: the position of the factored dimension in the result's "
                             f"shape), got {factor_axis!r}")
        out = self._rfactor(st, axis, factor_axis)
        self.trace.append(Step("rfactor", st.name, [axis.name], {"factor_axis": factor_axis}))
        return out

    def _rfactor(self, st: Stage, kf: IterVar, factor_index: int) -> Tensor:
        old = st.op
        spatial = _SpatialLoops(st)  # its splits are replayed on the new op's axes
        extents = leaf_extents(st, {iv: iv.dom.extent for iv in st.root_iter_vars})
        # new iteration variables: the factored loop becomes spatial, other reduce leaves stay
        kf_new = IterVar(Var(kf.name), Range(const(0), extents[kf]), "spatial")
        new_axis = [IterVar(Var(iv.name), iv.dom, "spatial") for iv in old.axis]
        red_leaves = [iv for iv in st.leaf_iter_vars if iv.kind == "reduce" and iv is not kf]
        new_red = [IterVar(Var(iv.name), Range(const(0), extents[iv]), "reduce")
                   for iv in red_leaves]
        leaf_vals = {kf: kf_new.var}
        leaf_vals.update({o: n.var for o, n in zip(red_leaves, new_red)})
        leaf_vals.update({iv: iv.var for iv in st.leaf_iter_vars if iv.kind == "spatial"})
        vals, guards = root_values(st, leaf_vals, extents)
        guards = [g for g in guards if not spatial.used_by(g)]  # the final stage keeps those
        vmap = {iv.var: vals[iv] + iv.dom.min for iv in old.reduce_axis}
        vmap.update({o.var: n.var for o, n in zip(old.axis, new_axis)})
        red0: Reduce = old.body[0]
        src = tuple(substitute(s, vmap) for s in red0.source)
        cond = _guarded_where([substitute(g, vmap) for g in guards],
                              None if red0.condition is None
                              else substitute(red0.condition, vmap))
        rf_axis = list(new_axis)
        rf_axis.insert(factor_index, kf_new)
        if new_red:
            rf_body = tuple(Reduce(red0.combiner, src, tuple(new_red), cond, i)
                            for i in range(len(src)))
        else:
            # the factored loop was the only reduce loop: each partial result is one source
            # value (the reducer's identity where the guard or the where= condition fails)
            ident = red0.combiner.identity(tuple(x.dtype for x in src))
            rf_body = src if cond is None else tuple(Select(cond, x, i)
                                                     for x, i in zip(src, ident))
        rf_name = self._unique_stage_name(f"{st.name}.rf")
        rf_op = ComputeOp(rf_name, tuple(rf_axis), tuple(new_red), rf_body, old.tag,
                          dict(old.attrs))
        self._insert_stage(rf_op, st)
        # the original stage now reduces the partial results over a fresh reduce axis
        kr = IterVar(Var(kf.name + ".v"), Range(const(0), extents[kf]), "reduce")
        axis = tuple(IterVar(Var(iv.name), iv.dom, "spatial") for iv in old.axis)
        outs = []
        for t in rf_op.outputs:
            idx = [a.var for a in axis]
            idx.insert(factor_index, kr.var)
            outs.append(TensorRead(t, tuple(idx)))
        body = tuple(Reduce(red0.combiner, tuple(outs), (kr,), None, i)
                     for i in range(len(outs)))
        new_op = ComputeOp(st.name, axis, (kr,), body, old.tag, old.attrs,
                           [t.name for t in old.outputs])
        st._replace_op(new_op, f"rfactor moved the reduction over it to stage {rf_name}; "
                               f"{st.name} now reduces over {kr.name}")
        spatial.replay(st)
        self.stage_map[new_op] = st
        return rf_op.output(0) if rf_op.num_outputs == 1 else rf_op.outputs

    # ------------------------------------------------------------------ replay
    def apply_step(self, step: Step):
        """Re-apply one recorded step (by stage and loop names)."""
        if step.kind == "cache_read":
            t = self.tensor_by_name(step.stage)
            readers = [self.stage_by_name(n).op.output(0) for n in step.args["readers"]]
            return self.cache_read(t, step.args["scope"], readers, step.args.get("layout"))
        if step.kind == "cache_write":
            return self.cache_write(self.stage_by_name(step.stage).op.output(0),
                                    step.args["scope"], step.args.get("layout"))
        st = self.stage_by_name(step.stage)
        if step.kind == "compute_at":
            # the recorded loop belongs to the host stage, not to the stage being attached
            parent = self.stage_by_name(step.args["parent"])
            return st.compute_at(parent, parent.find_loop(step.loops[0]))
        loops = [st.find_loop(n) for n in step.loops]
        if step.kind == "rfactor":
            # records written before the parameter took TVM's name store "factor_index"
            position = step.args.get("factor_axis", step.args.get("factor_index", 0))
            return self.rfactor(st.op.output(0), loops[0], position)
        if step.kind == "split":
            return st.split(loops[0], factor=self._split_arg(step.args.get("factor")),
                            nparts=self._split_arg(step.args.get("nparts")))
        if step.kind == "fuse":
            return st.fuse(*loops)
        if step.kind == "reorder":
            return st.reorder(*loops)
        if step.kind in ("parallel", "vectorize", "unroll"):
            return getattr(st, step.kind)(loops[0])
        if step.kind == "pragma":
            return st.pragma(loops[0], step.args["key"], step.args["value"])
        if step.kind == "tensorize":
            from ..te.tensorize import get_intrin

            return st.tensorize(loops[0], get_intrin(step.args["intrin"]))
        if step.kind == "compute_inline":
            return st.compute_inline()
        if step.kind == "compute_root":
            return st.compute_root()
        raise ValueError(f"unknown step kind {step.kind!r}")

    def _split_arg(self, value):
        """A recorded split factor: an int, or {"var": name} for a symbolic one, which must be
        a shape variable of this schedule's tensors (a record cannot carry the object of a
        variable that only an argument list names)."""
        if not isinstance(value, dict):
            return value
        name = value.get("var")
        for v in self._shape_vars():
            if v.name == name:
                return v
        raise ScheduleError(f"replay: the split factor {name!r} is not a shape variable of this "
                            "schedule's tensors; split by it directly (s[T].split(loop, "
                            "factor=var)) instead of replaying the record")

    def _shape_vars(self) -> list[Var]:
        from ..ir.functor import collect_vars

        found: list[Var] = []
        tensors = [op.output(0) for op in self.placeholders]
        tensors += [t for st in self.stages for t in st.op.outputs]
        for t in tensors:
            for d in t.shape:
                found.extend(v for v in collect_vars(d) if v not in found)
        return found

    def apply_trace(self, trace) -> Schedule:
        steps = trace if isinstance(trace, Trace) else Trace.loads(trace)
        for step in steps:
            self.apply_step(step)
        return self


# where a cached copy may live on this CPU target: TVM's "local" (a stage's private buffer)
# and "global" (a buffer like any other) are the same memory here
CPU_SCOPES = ("local", "global")
GPU_SCOPES = ("shared", "shared.dyn", "warp", "local.fragment")


def _guarded_where(guards: list, where):
    """The factored reduction's condition: the split's tail guards, then the where= condition
    only where they hold (a select, whose untaken side is not evaluated: where= may read the
    data at the index the guard keeps in bounds; `guards & where` would read it anyway)."""
    guard = None
    for g in guards:
        guard = g if guard is None else guard & g
    if guard is None or where is None:
        return where if guard is None else guard
    return Select(guard, where, const(False))


class _SpatialLoops:
    """The spatial loops of a stage that rfactor replaces (TVM splits them before or after
    rfactor alike): its splits of the spatial axes, the loop order, annotations and the stages
    computed at them, to be given back on the new op's axes."""

    def __init__(self, st: Stage):
        from .stage import Fuse, Split

        if any(isinstance(r, Fuse) for r in st.relations):
            raise ScheduleError(f"rfactor on stage {st.name}: fused loops are not supported; "
                                "rfactor before fusing")
        self.axis = tuple(st.op.axis)
        self.splits = [r for r in st.relations if isinstance(r, Split) and r.parent.kind ==
                       "spatial"]
        self.leaves = [iv for iv in st.leaf_iter_vars if iv.kind == "spatial"]
        self.attrs = {iv: a for iv, a in st.iter_attrs.items() if iv.kind == "spatial"}
        self.pragmas = {iv: list(p) for iv, p in st.pragmas.items() if iv.kind == "spatial"}
        self.vars = {iv.var for r in self.splits for iv in (r.outer, r.inner)}

    def used_by(self, guard) -> bool:
        from ..ir.functor import collect_vars

        return bool(collect_vars(guard) & self.vars)

    def replay(self, st: Stage) -> None:
        new = dict(zip(self.axis, st.op.axis))
        for rel in self.splits:
            new[rel.outer], new[rel.inner] = st._split(new[rel.parent], rel.factor, rel.nparts)
        reduce_leaves = [iv for iv in st.leaf_iter_vars if iv.kind == "reduce"]
        st.leaf_iter_vars[:] = [new[iv] for iv in self.leaves] + reduce_leaves
        st.iter_attrs.update({new[iv]: a for iv, a in self.attrs.items()})
        st.pragmas.update({new[iv]: p for iv, p in self.pragmas.items()})
        st.former_loops.update(new)  # the loops the user holds name the new ones
        for other in st.schedule.stages:
            if other.attach_stage is st and other.attach_ivar in new:
                other.attach_ivar = new[other.attach_ivar]


def _check_scope(primitive: str, scope) -> None:
    if not isinstance(scope, str):
        raise TypeError(f"{primitive}: scope must be a string such as 'local'")
    if scope in CPU_SCOPES:
        return
    if scope in GPU_SCOPES or scope.startswith(("wmma.", "shared.", "local.")):
        raise ValueError(f"{primitive}: scope {scope!r} is GPU memory; the CPU target has "
                         f"the scopes {', '.join(map(repr, CPU_SCOPES))}")
    raise ValueError(f"{primitive}: unknown scope {scope!r}; the CPU target has the scopes "
                     f"{', '.join(map(repr, CPU_SCOPES))}")


def _cache_write_tensors(tensor) -> list:
    """cache_write's tensor argument as a list of outputs of one compute."""
    tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"cache_write: expected a tensor or a list of tensors, got "
                            f"{type(t).__name__}")
    if not tensors:
        raise ValueError("cache_write: give at least one tensor")
    if any(t.op is not tensors[0].op for t in tensors):
        raise ScheduleError("cache_write: the tensors of a list must be outputs of one compute "
                            f"(got {', '.join(t.name for t in tensors)})")
    return tensors


def _layout_permutation(tensor: Tensor, layout) -> tuple:
    n = len(tensor.shape)
    if layout is None:
        return tuple(range(n))
    if not isinstance(layout, (list, tuple)) or \
            sorted(d for d in layout if isinstance(d, int)) != list(range(n)):
        raise ValueError(f"cache_read/cache_write: layout must be a permutation of {tensor.name}'s "
                         f"{n} dimensions (a list of 0..{n - 1}), got {layout!r}")
    return tuple(layout)


class _PermutedRead(Mutator):
    """Reads of `old` become reads of its copy `new`, whose storage position p holds old's
    dimension perm[p]."""

    def __init__(self, old: Tensor, new: Tensor, perm: tuple):
        super().__init__()
        self.old, self.new, self.perm = old, new, perm

    def visit_TensorRead(self, r):
        idx = tuple(self.visit(i) for i in r.indices)
        if r.tensor is not self.old:
            if all(a is b for a, b in zip(idx, r.indices)):
                return r
            return TensorRead(r.tensor, idx)
        return TensorRead(self.new, tuple(idx[d] for d in self.perm))


def create_schedule(outputs, check: bool = True) -> Schedule:
    """A default schedule (every stage at the root, loops in declaration order) for the given
    output tensor(s). check=False turns off the dependence checks (for experiments only)."""
    return Schedule(outputs, check=check)


__all__ = [
    "Mutator",
    "Schedule",
    "Stage",
    "Step",
    "Trace",
    "create_schedule",
    "deferred_checks",
    "dt",
    "read_tensors",
]
