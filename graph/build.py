"""``graph.build``: a graph compiled into a ``runtime.GraphModule``, in named steps, each a
function of its own with a typed result that the next steps read:

    passes          (:func:`run_graph_passes`)  type inference, folding, layout, fusion...
                    -> :class:`PassesResult` (the graph to compile, the pass log)
    select kernels  (:func:`.select_kernels.select_kernels`)  one kernel per distinct workload,
                    tuned or default, from the kernel caches or compiled
                    -> :class:`.select_kernels.KernelSelection`
    assign storage  (:func:`.storage.assign_storage`)  which buffer each value lives in (aliases
                    and in-place reuse), the steps, each buffer's lifetime
                    -> :class:`.storage.StorageAssignment`
    plan memory     (:func:`plan_arena`)  one arena, liveness-based reuse
                    -> :class:`.passes.plan_memory.MemoryPlan`
    emit driver     (:func:`emit_driver`)  the native function that runs every step
                    (:mod:`.driver`) -> a runtime Module
    GraphModule     (:func:`make_plan`)  the typed :class:`~tensorlang.runtime._plan.ExecutionPlan`,
                    checked, and the module that runs it

``BuildReport.steps`` says what each step decided and how long it took.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorlang.runtime._plan import ExecutionPlan, KernelEntry, TensorSpec

from .driver import build_driver
from .ir import Graph
from .passes import run_passes
from .passes.convert_layout import BLOCKS
from .passes.plan_memory import MemoryPlan, plan_memory
from .report import BuildError, BuildReport, KernelInfo, StepReport, TunedRecordFailure
from .select_kernels import KernelSelection, schedule_candidates, select_kernels, workload_key
from .storage import StorageAssignment, assign_storage

__all__ = ["BuildError", "BuildReport", "KernelInfo", "TunedRecordFailure", "build",
           "schedule_candidates", "workload_key"]


@dataclass(frozen=True)
class PassesResult:
    graph: Graph
    log: tuple[tuple[str, float, int], ...]  # (pass, seconds, nodes after it)
    blocks: dict[str, int]  # conv -> activation block chosen from the tuning log
    kernels_before_fusion: int
    kernels_after_fusion: int
    time_s: float

    def describe(self) -> str:
        return (f"{len(self.log)} passes, {len(self.graph.nodes)} nodes; kernel nodes "
                f"{self.kernels_before_fusion} before fusion, {self.kernels_after_fusion} after")


def run_graph_passes(g: Graph, opt_level: int, tuning, dump_ir: str | None) -> PassesResult:
    """Step "passes". With a tuning log, each conv's activation block comes from its fastest
    record (tasks extracted with blocks=): the passes run again when that changes the layout."""
    from .passes.fuse_ops import kernel_count

    t0 = time.perf_counter()
    before: list[int] = []

    def count_kernels(name, graph_before, _after):
        if name == "fuse_ops":
            before.append(kernel_count(graph_before))

    log: list = []
    out = run_passes(g, opt_level, log, dump_ir, count_kernels)
    blocks: dict[str, int] = {}
    if tuning is not None:
        from .tuning import choose_blocks

        blocks = choose_blocks(g, tuning, opt_level, laid_out={BLOCKS[0]: out})
        if any(b != BLOCKS[0] for b in blocks.values()):
            log.clear()
            out = run_passes(g, opt_level, log, dump_ir, count_kernels,
                             {"convert_layout": {"blocks": blocks}})
    after = kernel_count(out)
    return PassesResult(out, tuple(log), blocks, before[-1] if before else after, after,
                        time.perf_counter() - t0)


def plan_arena(storage: StorageAssignment, reuse: bool) -> MemoryPlan:
    """Step "plan memory": an offset in one arena for every arena storage. A graph with
    symbolic shapes is placed by the runtime at the first run of each shape (its sizes are
    formulas of the shape variables until then): nothing placed here."""
    arena = [st for st in storage.storages if st.kind == "arena"]
    if not all(isinstance(st.nbytes, int) for st in arena):
        return MemoryPlan({}, 0, 0, 0, per_shape=True)
    return plan_memory({st.id: st.nbytes for st in arena},
                       {st.id: storage.lifetimes[st.id] for st in arena}, reuse=reuse)


def emit_driver(storage: StorageAssignment, kernels: KernelSelection, target,
                shape_vars: tuple[str, ...] = ()):
    """Step "emit driver": kernels are indexed by sorted name (runtime/_plan.driver_steps); with
    shape variables, each step also says where its kernel's variables are in ``shape_vars``."""
    kidx = {n: i for i, n in enumerate(sorted(kernels.modules))}
    if not shape_vars:
        steps = [(kidx[s.kernel], len(s.args)) for s in storage.steps]
        return build_driver(steps, len(kidx), sum(n for _, n, *_ in steps), target)
    pos = {v: i for i, v in enumerate(shape_vars)}
    steps = [(kidx[s.kernel], len(s.args),
              [pos[v] for v in kernels.modules[s.kernel].manifest["vars"]])
             for s in storage.steps]
    return build_driver(steps, len(kidx), sum(len(s.args) for s in storage.steps), target,
                        len(shape_vars))


def graph_shape_vars(g: Graph) -> tuple[str, ...]:
    """The shape variables of a graph, sorted: those of its inputs' shapes. A dimension of any
    other value must be an expression of them (the runtime learns their sizes from the inputs
    and nothing else)."""
    from .ir import GraphError
    from .symbolic import variables

    names = variables(d for v in g.inputs for d in v.shape)
    for v in g.values():
        extra = variables(v.shape) - names
        if extra:
            raise GraphError(f"value {v.name!r} has shape {v.type_str()}, which uses "
                             f"{', '.join(sorted(extra))}: no graph input's shape does")
    return tuple(sorted(names))


def make_plan(g: Graph, target, kernels: KernelSelection, storage: StorageAssignment,
              mem: MemoryPlan, shape_vars: tuple[str, ...] = ()) -> ExecutionPlan:
    """The execution plan, checked: a storage overlap would silently corrupt results, and the
    check is cheap (quadratic in the storages, a few thousand checks for ResNet-50). A plan
    with shape variables is checked for its form here and at each shape it runs at."""
    if shape_vars:
        return _symbolic_plan(g, target, kernels, storage, shape_vars)
    storages = tuple(dataclasses.replace(st, offset=mem.offsets[st.id]) if st.kind == "arena"
                     else st for st in storage.storages)
    plan = ExecutionPlan(
        name=g.name, target=target.to_dict(),
        inputs=tuple(TensorSpec(v.name, tuple(v.shape), v.dtype) for v in g.inputs),
        outputs=tuple(TensorSpec(v.name, tuple(v.shape), v.dtype) for v in g.outputs),
        values=storage.values, storages=storages, arena_bytes=max(mem.arena_bytes, 64),
        steps=storage.steps,
        kernels=_kernel_entries(kernels),
        memory={"arena_bytes": mem.arena_bytes, "naive_bytes": mem.naive_bytes,
                "lower_bound_bytes": mem.lower_bound})
    return plan  # (GraphModule checks it: runtime/_plan.check_plan, lifetimes included)


def _kernel_entries(kernels: KernelSelection) -> dict[str, KernelEntry]:
    return {k.name: KernelEntry(k.op, k.workload, k.schedule, k.tuned, tuple(k.ops), k.layout,
                                k.flops, k.bytes, k.time_s, k.time_source) for k in kernels.infos}


def _symbolic_plan(g: Graph, target, kernels: KernelSelection, storage: StorageAssignment,
                   shape_vars: tuple[str, ...]) -> ExecutionPlan:
    from tensorlang.runtime._plan import check_plan

    plan = ExecutionPlan(
        name=g.name, target=target.to_dict(),
        inputs=tuple(TensorSpec(v.name, tuple(v.shape), v.dtype) for v in g.inputs),
        outputs=tuple(TensorSpec(v.name, tuple(v.shape), v.dtype) for v in g.outputs),
        values=storage.values, storages=storage.storages, arena_bytes=0, steps=storage.steps,
        kernels=_kernel_entries(kernels), vars=shape_vars, lifetimes=storage.lifetimes)
    check_plan(plan.to_json())
    return plan


def build(g: Graph, target: str = "llvm", tuning_log: str | None = None,
          mode: str = "graph", opt_level: int = 2, memory_reuse: bool = True,
          inplace: bool = True, dump_ir: str | None = None,
          report: BuildReport | None = None, specialize: dict | None = None):
    """Compile a graph into a :class:`tensorlang.runtime.GraphModule`.

    ``tuning_log``: a tuning log (JSON lines); workloads with a record use the tuned schedule,
    the others the default one, and the untuned ones are reported once (a warning); a record
    that fails to build is reported too (a warning naming it, ``report.tuned_failures``);
    inside ``auto_scheduler.ApplyHistoryBest(log)`` it defaults to that log (TVM's way).
    ``mode``: "graph" (one native call per run) or "interactive" (kernels called from Python,
    ``gm.profile()``). ``report``: a :class:`BuildReport` to fill (the steps, pass times,
    kernels, memory plan). ``specialize``: shape variable -> sizes (``{"seq": [128, 512]}``);
    for a graph with shape variables, a build specialised to each combination of them is made
    too and a run whose inputs give those sizes runs on it (:mod:`.specialize`)."""
    from tensorlang.runtime.graph_module import MODES, GraphModule

    from tensorlang.codegen.target import Target

    if not isinstance(g, Graph):
        hint = ""
        if type(g).__name__ == "ModelProto" or isinstance(g, (str, bytes, Path)):
            # (an ONNX model, or its path: the import step is its own call, with shapes=)
            hint = "; import an ONNX model first: graph.build(graph.from_onnx(model))"
        raise TypeError(f"graph.build expects a graph.Graph, got {type(g).__name__}{hint}")
    if tuning_log is None:
        # TVM compiles a model inside `with auto_scheduler.ApplyHistoryBest(log):`
        from .auto_scheduler import history_in_context

        tuning_log = history_in_context()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    from .control_flow import build_program, has_control_flow

    if has_control_flow(g):  # run-time If: each piece and branch is built by this function
        return build_program(g, report, target=target, tuning_log=tuning_log, mode=mode,
                             opt_level=opt_level, memory_reuse=memory_reuse, inplace=inplace,
                             dump_ir=dump_ir)
    t_start = time.perf_counter()
    rep = report if report is not None else BuildReport()
    tgt = Target.from_string(target)
    tuning = None if tuning_log is None else _open_tuning_log(tuning_log, tgt)
    passes = run_graph_passes(g, opt_level, tuning, dump_ir)
    _report_passes(rep, passes)
    if not specialize:
        _warn_generic_windows(passes.graph)
    kernels = select_kernels(passes.graph, tgt, tuning)
    _report_kernels(rep, kernels, tuning_log)
    storage = _timed(rep, "assign storage",
                     lambda: assign_storage(passes.graph, kernels.kernel_of, inplace,
                                            frozenset(k.name for k in kernels.infos
                                                      if k.schedule != "default")))
    rep.memory = _timed(rep, "plan memory", lambda: plan_arena(storage, memory_reuse))
    shape_vars = graph_shape_vars(passes.graph)
    driver = _timed(rep, "emit driver", lambda: emit_driver(storage, kernels, tgt, shape_vars))
    rep.driver_s = rep.steps[-1].time_s
    plan = _timed(rep, "make plan", lambda: make_plan(passes.graph, tgt, kernels, storage,
                                                      rep.memory, shape_vars))
    gm = GraphModule(plan, kernels.modules, driver, storage.constants, mode=mode)
    if specialize:
        options = {"target": target, "tuning_log": tuning_log, "mode": mode,
                   "opt_level": opt_level, "memory_reuse": memory_reuse, "inplace": inplace}
        _add_variants(gm, g, specialize, options)
    rep.total_s = time.perf_counter() - t_start
    gm.build_report = rep
    return gm


def _add_variants(gm, g: Graph, specialize: dict, options: dict) -> None:
    from .specialize import specialise, variants

    for env in variants(specialize, gm.shape_vars):
        gm.add_variant(env, build(specialise(g, env), **options))


def _timed(rep: BuildReport, name: str, step) -> Any:
    """Run a step, recording its time and what it decided (its result's describe())."""
    t0 = time.perf_counter()
    out = step()
    decided = out.describe() if hasattr(out, "describe") else _describe_other(out)
    rep.steps.append(StepReport(name, decided, time.perf_counter() - t0))
    return out


def _describe_other(out) -> str:
    if isinstance(out, ExecutionPlan):
        arena = f"arena {out.arena_bytes} B" if not out.vars else \
            f"arena placed per shape of {', '.join(out.vars)}"
        return f"{len(out.steps)} steps, {len(out.kernels)} kernels, {arena}"
    return f"{getattr(out, 'name', type(out).__name__)}: {len(out.manifest['steps'])} calls"


def _report_passes(rep: BuildReport, passes: PassesResult) -> None:
    rep.passes[:] = passes.log
    rep.blocks = passes.blocks
    rep.kernels_before_fusion = passes.kernels_before_fusion
    rep.kernels_after_fusion = passes.kernels_after_fusion
    rep.steps.append(StepReport("passes", passes.describe(), passes.time_s))


def _report_kernels(rep: BuildReport, kernels: KernelSelection, tuning_log) -> None:
    rep.kernels.extend(kernels.infos)
    rep.untuned.extend(kernels.untuned)
    rep.tuned_failures.extend(kernels.tuned_failures)
    rep.steps.append(StepReport("select kernels", kernels.describe(), kernels.time_s))
    if tuning_log is not None and kernels.untuned:
        where = tuning_log if isinstance(tuning_log, (str, os.PathLike)) else \
            f"the {len(tuning_log)} records given"
        warnings.warn(f"{len(kernels.untuned)} tunable kernels have no record in "
                      f"{where} and use default schedules: {', '.join(kernels.untuned)}",
                      stacklevel=3)


def _warn_generic_windows(g: Graph) -> None:
    """Convs and pools over 1-D or 3-D spatial axes of symbolic size run, correctly, on the
    generic window computes: measured 3x (HuBERT's convs over the audio length) slower than
    the library's schedules for fixed sizes (2-D windows over a symbolic plane run the
    library's kernels). Said once, with the ways to fix the sizes, rather than left for the
    user to find in a profile."""
    from .op_registry import symbolic_spatial, unblocked_shape

    slow = [n.name for n in g.nodes if n.op in ("conv", "max_pool", "avg_pool")
            and symbolic_spatial(n.inputs[0].shape)
            and len(unblocked_shape(n.inputs[0].shape, n.attrs.get("layout"))) != 4]
    if slow:
        names = ", ".join(slow[:4]) + (f" and {len(slow) - 4} more" if len(slow) > 4 else "")
        warnings.warn(f"{len(slow)} conv/pool node(s) slide their windows over spatial axes of "
                      f"symbolic size ({names}): they run on generic schedules, many times "
                      "slower than with fixed sizes; fix the sizes with from_onnx(..., shapes=) "
                      "or build for the sizes you run with build(..., specialize={var: [sizes]})",
                      stacklevel=3)


def _open_tuning_log(path, target):
    """Kernel selection from a tuning log (:class:`.tuning.GraphTuning`): its path, or a list
    of its records (an auto_scheduler.ApplyHistoryBest given records)."""
    if isinstance(path, (str, os.PathLike)) and not os.path.exists(path):
        raise BuildError(f"tuning log {path!r} does not exist")
    from .tuning import GraphTuning

    # autotune's records name the target "llvm" (the host CPU is implied by the build)
    return GraphTuning(path, "llvm")
