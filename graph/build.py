"""``graph.build``: graph -> passes -> kernels -> execution plan -> memory plan -> driver ->
``runtime.GraphModule``.

1. passes (:mod:`.passes`): type inference, constant folding, dead-code elimination;
2. kernel selection: one kernel per distinct workload (op, attributes, input and output types);
   each lowered with :mod:`.lowering` and the first default schedule that builds (or the tuned
   one, see ``tuning_log``); kernels are cached in-process and on disk (:mod:`.kernel_cache`)
   by workload and schedule variant, checked before any compiler work, so a rebuild of the
   same model is a load per kernel ("warm cache");
3. the execution plan: steps in topological order; reshape-like ops are aliases (no kernel);
4. memory planning (:mod:`.passes.plan_memory`): one arena, liveness-based reuse;
5. the driver: generated LLVM IR that calls every step's kernel through a function-pointer table,
   compiled once per plan shape.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorlang.errors import TensorlangError

from . import op_registry as R
from .ir import Graph, GraphError
from .passes import run_passes
from .passes.convert_layout import BLOCKS
from .passes.plan_memory import plan_memory, validate_plan


class BuildError(TensorlangError):
    """A node could not be compiled with any schedule."""


@dataclass
class KernelInfo:
    name: str
    op: str
    workload: str
    schedule: str
    tuned: bool
    build_s: float
    cache_hit: bool
    ops: list[str] = field(default_factory=list)  # the graph ops the kernel holds, in order
    layout: str = ""
    source: str | None = None  # None: compiled by this build; "memory" / "disk": from a cache
    flops: float = 0.0  # floating-point operations of one call (its computes, counted)
    bytes: float = 0.0  # bytes of its arguments
    time_s: float = 0.0  # one call: the tuning record's measured time, else the roofline's
    time_source: str = "roofline estimate"  # or "tuning log"; gm.profile(): "profile"


@dataclass
class BuildReport:
    passes: list = field(default_factory=list)
    kernels: list[KernelInfo] = field(default_factory=list)
    untuned: list[str] = field(default_factory=list)
    kernels_before_fusion: int | None = None  # kernel nodes before / after the fuse_ops pass
    kernels_after_fusion: int | None = None
    blocks: dict[str, int] = field(default_factory=dict)  # conv -> block chosen from the log
    memory: Any = None
    driver_s: float = 0.0
    total_s: float = 0.0

    def __str__(self) -> str:
        lines = ["passes:"]
        lines += [f"  {n:24s} {t * 1e3:8.2f} ms  {c} nodes" for n, t, c in self.passes]
        mem = sum(k.source == "memory" for k in self.kernels)
        disk = sum(k.source == "disk" for k in self.kernels)
        lines.append(f"kernels: {len(self.kernels)} distinct ({mem} from the in-process cache, "
                     f"{disk} from the disk cache)"
                     f"; kernel nodes {self.kernels_before_fusion} before fusion, "
                     f"{self.kernels_after_fusion} after")
        for k in self.kernels:
            lines.append(f"  {k.name:32s} {k.schedule:20s} {'tuned' if k.tuned else 'default'}"
                         f" {k.build_s * 1e3:8.1f} ms build, {k.time_s * 1e6:9.1f} us per call"
                         f" ({k.time_source})")
        if self.blocks:
            lines.append("conv blocks from the tuning log: " + ", ".join(
                f"{c} {b}" for c, b in sorted(self.blocks.items())))
        if self.memory is not None:
            lines.append(f"memory: {self.memory.describe()}")
        lines.append(f"driver: {self.driver_s * 1e3:.1f} ms; total {self.total_s:.2f} s")
        return "\n".join(lines)


# workload key -> runtime Module; kernels are pure functions of their workload, so a process
# compiling several models (or the same one twice) shares them.
_KERNEL_CACHE: dict[str, Any] = {}


def workload_key(op: str, attrs: dict, in_types, out_types) -> str:
    if op == "fused":
        # member names do not change the kernel: identical groups share one workload
        attrs = dict(attrs, body=[{k: v for k, v in m.items() if k != "name"}
                                  for m in attrs["body"]])
    text = json.dumps([op, attrs, [[list(s), t] for s, t in in_types],
                       [[list(s), t] for s, t in out_types]], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def schedule_candidates(outs) -> list[tuple[str, Callable]]:
    """Schedules to try for a kernel's outputs, best first; the build falls back to the next
    when the core refuses one. ``tl.ops.default_schedule`` knows every library op (anchor
    schedules for conv/matmul/pooling with their elementwise tails, inlined injective stages);
    the plain schedule is the safety net for a composition it cannot place."""
    import tensorlang as tl

    return [("default", lambda: tl.ops.default_schedule(outs)),
            ("naive", lambda: tl.create_schedule(outs))]


def _build_kernel(op: str, attrs: dict, in_types, out_types, target, tuning) -> tuple:
    """(module, key, where it came from: None (compiled), "memory" or "disk", schedule name,
    untuned) for one kernel.

    Both caches are checked before any compiler work (declaring computes, scheduling,
    lowering, emitting IR): the in-process one by key, then the on-disk one
    (:mod:`.kernel_cache`), which makes a rebuild in a fresh process cost a load per kernel."""
    import tensorlang as tl

    from . import kernel_cache
    from .lowering import lower

    key = workload_key(op, attrs, in_types, out_types)
    found = tuning.config_for(op, attrs, in_types, out_types) if tuning is not None else None
    untuned = tuning is not None and tuning.last_untuned
    variant = "default"
    if found is not None:
        variant = "tuned:" + found[2]
        # a tuned kernel is cached apart from the default one of the same workload
        key = f"{key}:{hashlib.sha256(found[2].encode()).hexdigest()[:12]}"
    hit = _KERNEL_CACHE.get(key)
    if hit is not None:
        return hit[0], key, "memory", hit[1], untuned
    disk_key = kernel_cache.entry_key(key, variant, target)
    cached = kernel_cache.load(disk_key)
    if cached is not None:
        mod, meta = cached
        _KERNEL_CACHE[key] = (mod, meta["schedule"])
        return mod, key, "disk", meta["schedule"], untuned
    name = f"{kernel_label(op, attrs)}_{key[:12]}"
    errors = []
    t0 = time.perf_counter()
    attempts: list[tuple[str, Callable | None]] = []
    if found is not None:
        attempts.append(("tuned", lambda: tuning.schedule_of(found)))
    attempts += [(nm, None) for nm, _ in schedule_candidates([])]
    for sched_name, make in attempts:
        try:
            if make is not None:
                s, args = make()
            else:
                # declare the computes afresh for each attempt: a refused schedule may have
                # left stages attached or inlined
                ins, outs = lower(op, attrs, in_types, out_types)
                s = dict(schedule_candidates(outs))[sched_name]()
                args = [*ins, *outs]
            mod = tl.build(s, args, target=target, name=name)
        except Exception as e:  # noqa: BLE001 - a refused schedule: try the next, simpler one
            errors.append(f"{sched_name}: {type(e).__name__}: {e}")
            continue
        if sched_name == "naive" and errors:
            # the library could not place this composition: it runs, but unoptimized
            warnings.warn(f"kernel {name}: the default schedule was refused, so it uses the "
                          f"naive schedule (correct but slow): {errors[-1]}", stacklevel=2)
        mod._graph_build_s = time.perf_counter() - t0  # for the build report
        _KERNEL_CACHE[key] = (mod, sched_name)
        kernel_cache.store(disk_key, mod, {"schedule": sched_name, "build_s": mod._graph_build_s})
        return mod, key, None, sched_name, untuned
    raise BuildError(f"cannot compile {kernel_label(op, attrs)} ({_short(attrs)}) for inputs "
                     f"{[f'{t}{list(s)}' for s, t in in_types]}:\n  " + "\n  ".join(errors))


def kernel_label(op: str, attrs: dict) -> str:
    """A readable kernel name: the op, or a fused group's member ops joined by '_'."""
    if op != "fused":
        return op
    ops = [m["op"] for m in attrs["body"]]
    label = "_".join(ops[:4]) + ("_etc" if len(ops) > 4 else "")
    return "fused_" + label


def _short(attrs: dict) -> str:
    text = json.dumps(attrs, sort_keys=True)
    return text if len(text) < 300 else text[:300] + "..."


def _layout_of(n) -> str:
    """The data layout a kernel works in: NCHW for image tensors (every conv/pool of the graph
    layer is NCHW), else the rank's plain row-major layout."""
    rank = len(n.outputs[0].shape)
    return "NCHW" if rank == 4 else f"row-major {rank}-d"


_INPLACE_PATTERNS = (R.ELEMWISE, R.BROADCAST)


def _inplace_donor(n, storages, storage_of, members, last_read, i):
    """An input whose buffer node ``n`` may write its output into, or None.

    Only for elementwise/broadcast kernels (each output element is computed from the input
    elements at the same index, so writing out[i] never clobbers an input element a later
    iteration still reads), with an input of the output's shape and element size that lives in
    the arena, is not a graph input, and whose storage holds no value read after this node."""
    pattern = n.attrs.get("pattern") if n.op == "fused" else R.get_op(n.op).pattern
    if pattern not in _INPLACE_PATTERNS or len(n.outputs) != 1:
        return None
    out = n.outputs[0]
    for v in n.inputs:
        if v.is_constant or v.shape != out.shape or v.nbytes != out.nbytes:
            continue
        sid = storage_of[id(v)]
        if storages[sid]["kind"] != "arena":
            continue
        if all(last_read.get(id(m), -1) <= i for m in members.get(sid, [])):
            return v
    return None


def _driver_ir(steps: list[tuple[int, int]]) -> str:
    """LLVM IR of ``i32 @tl_graph_run(ptr fns, ptr args, ptr status)``: for each step
    (kernel index, argument count), load the kernel's address and its argument addresses from
    the tables and call it; stop at the first nonzero code, recording (step, code)."""
    header = "define i32 @tl_graph_run(ptr noalias %fns, ptr noalias %args, ptr noalias %status) {"
    lines = [header, "entry:"]
    arg = 0
    for i, (kidx, nargs) in enumerate(steps):
        lines.append(f"  %fp{i} = getelementptr i64, ptr %fns, i64 {kidx}")
        lines.append(f"  %fi{i} = load i64, ptr %fp{i}")
        lines.append(f"  %f{i} = inttoptr i64 %fi{i} to ptr")
        names = []
        for j in range(nargs):
            lines.append(f"  %ap{i}_{j} = getelementptr i64, ptr %args, i64 {arg}")
            lines.append(f"  %ai{i}_{j} = load i64, ptr %ap{i}_{j}")
            lines.append(f"  %a{i}_{j} = inttoptr i64 %ai{i}_{j} to ptr")
            names.append(f"ptr %a{i}_{j}")
            arg += 1
        lines.append(f"  %r{i} = call i32 %f{i}({', '.join(names)})")
        lines.append(f"  %c{i} = icmp ne i32 %r{i}, 0")
        lines.append(f"  br i1 %c{i}, label %fail{i}, label %ok{i}")
        lines.append(f"fail{i}:")
        lines.append("  store i64 " + str(i) + ", ptr %status")
        lines.append(f"  %rc{i} = sext i32 %r{i} to i64")
        lines.append(f"  %sp{i} = getelementptr i64, ptr %status, i64 1")
        lines.append(f"  store i64 %rc{i}, ptr %sp{i}")
        lines.append(f"  ret i32 {i + 1}")
        lines.append(f"ok{i}:")
    lines.append("  ret i32 0")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _build_driver(steps, n_kernels: int, n_args: int, target):
    from tensorlang.runtime import Module

    from tensorlang.codegen.target import Target, compile_ir
    from tensorlang.version import __version__

    tgt = Target.from_string(target)
    ir = _driver_ir(steps)
    # O1: the driver is straight-line calls; nothing for the O3 pipeline to win
    obj = compile_ir(ir, tgt, opt_level=1)
    manifest = {
        "name": "tl_graph_run",
        "symbol": "tl_graph_run",
        "args": [
            {"name": "fns", "shape": [max(1, n_kernels)], "dtype": "int64"},
            {"name": "args", "shape": [max(1, n_args)], "dtype": "int64"},
            {"name": "status", "shape": [2], "dtype": "int64", "written": True},
        ],
        "vars": [],
        "target": tgt.to_dict(),
        "version": __version__,
        # what the code calls, in order: the runtime checks it against the plan at load
        "steps": [[int(k), int(n)] for k, n in steps],
    }
    return Module.from_object(obj.object_code, manifest, {"ll": ir})


def build(g: Graph, target: str = "llvm", tuning_log: str | None = None,
          mode: str = "graph", opt_level: int = 2, memory_reuse: bool = True,
          inplace: bool = True, dump_ir: str | None = None,
          report: BuildReport | None = None):
    """Compile a graph into a :class:`tensorlang.runtime.GraphModule`.

    ``tuning_log``: a tuning log (JSON lines); workloads with a record use the tuned schedule,
    the others the default one, and the untuned ones are reported once (a warning).
    ``mode``: "graph" (one native call per run) or "interactive" (kernels called from Python,
    ``gm.profile()``). ``report``: a :class:`BuildReport` to fill (pass times, kernels,
    memory plan)."""
    from tensorlang.runtime.graph_module import MODES, GraphModule

    from tensorlang.codegen.target import Target

    if not isinstance(g, Graph):
        raise TypeError(f"graph.build expects a graph.Graph, got {type(g).__name__}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    t_start = time.perf_counter()
    rep = report if report is not None else BuildReport()
    tgt = Target.from_string(target)
    from .passes.fuse_ops import kernel_count

    def count_kernels(name, before, after):
        if name == "fuse_ops":
            rep.kernels_before_fusion = kernel_count(before)

    tuning = None if tuning_log is None else _open_tuning_log(tuning_log, tgt)
    g_in, g = g, run_passes(g, opt_level, rep.passes, dump_ir, count_kernels)
    if tuning is not None:
        from .tuning import choose_blocks

        # each conv's activation block from its fastest record (tasks extracted with blocks=)
        rep.blocks = choose_blocks(g_in, tuning, opt_level, laid_out={BLOCKS[0]: g})
        if any(b != BLOCKS[0] for b in rep.blocks.values()):
            rep.passes.clear()
            g = run_passes(g_in, opt_level, rep.passes, dump_ir, count_kernels,
                           {"convert_layout": {"blocks": rep.blocks}})
    rep.kernels_after_fusion = kernel_count(g)
    if rep.kernels_before_fusion is None:
        rep.kernels_before_fusion = rep.kernels_after_fusion

    # -- values and storages --------------------------------------------------------------
    storages: list[dict] = []
    values: dict[str, dict] = {}
    storage_of: dict[int, int] = {}
    constants: dict[str, np.ndarray] = {}

    def new_storage(v, kind: str) -> int:
        sid = len(storages)
        st = {"id": sid, "kind": kind, "nbytes": max(1, v.nbytes)}
        if kind == "const":
            st["const"] = v.name
            constants[v.name] = v.data
        storages.append(st)
        return sid

    def add_value(v, sid: int) -> None:
        if v.name in values:
            raise GraphError(f"two values are named {v.name!r}")
        storage_of[id(v)] = sid
        values[v.name] = {"storage": sid, "shape": list(v.shape), "dtype": v.dtype}

    for v in g.inputs:
        add_value(v, new_storage(v, "arena"))
    for c in g.constants:
        add_value(c, new_storage(c, "const"))

    steps: list[dict] = []
    kernels: dict[str, Any] = {}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for v in g.inputs:
        first[storage_of[id(v)]] = -1
    # in-place: the node index after which each value is never read again (graph inputs and
    # outputs never die: the caller owns them)
    last_read: dict[int, float] = {}
    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            last_read[id(v)] = i
    for v in [*g.inputs, *g.outputs]:
        last_read[id(v)] = float("inf")
    members: dict[int, list] = {}  # storage -> the values living in it
    for v in g.inputs:
        members.setdefault(storage_of[id(v)], []).append(v)
    for i, n in enumerate(g.nodes):
        d = R.get_op(n.op)
        if d.alias:
            src = n.inputs[0]
            add_value(n.outputs[0], storage_of[id(src)])
            members[storage_of[id(src)]].append(n.outputs[0])
            continue
        in_types = [(v.shape, v.dtype) for v in n.inputs]
        out_types = [(v.shape, v.dtype) for v in n.outputs]
        mod, key, source, sched, untuned = _build_kernel(n.op, n.attrs, in_types, out_types,
                                                         tgt, tuning)
        if mod.name not in kernels:
            kernels[mod.name] = mod
            ops = [m["op"] for m in n.attrs["body"]] if n.op == "fused" else [n.op]
            build_s = getattr(mod, "_graph_build_s", 0.0) if source is None else 0.0
            info = KernelInfo(mod.name, n.op, key, sched, sched == "tuned", build_s,
                              source is not None, ops, n.outputs[0].layout or _layout_of(n),
                              source)
            _time_kernel(info, n, in_types, out_types, tuning)
            rep.kernels.append(info)
            if untuned:
                rep.untuned.append(mod.name)
        donor = _inplace_donor(n, storages, storage_of, members, last_read, i) \
            if inplace else None
        for v in n.outputs:
            sid = storage_of[id(donor)] if donor is not None else new_storage(v, "arena")
            add_value(v, sid)
            members.setdefault(sid, []).append(v)
        idx = len(steps)
        for v in n.inputs:
            sid = storage_of[id(v)]
            last[sid] = max(last.get(sid, idx), idx)
        for v in n.outputs:
            sid = storage_of[id(v)]
            first.setdefault(sid, idx)
            last[sid] = max(last.get(sid, idx), idx)
        steps.append({"node": n.name, "op": n.op, "kernel": mod.name,
                      "args": [v.name for v in n.inputs] + [v.name for v in n.outputs],
                      "n_out": len(n.outputs)})
        if donor is not None:
            steps[-1]["inplace"] = donor.name
    end = len(steps)
    for v in [*g.inputs, *g.outputs]:
        sid = storage_of[id(v)]
        if storages[sid]["kind"] == "arena":
            last[sid] = end  # inputs are written before the run, outputs read after it
            first.setdefault(sid, -1)
    if tuning is not None and rep.untuned:
        warnings.warn(f"{len(rep.untuned)} tunable kernels have no record in "
                      f"{tuning_log} and use default schedules: {', '.join(rep.untuned)}",
                      stacklevel=2)

    # -- memory plan ----------------------------------------------------------------------
    arena = [st for st in storages if st["kind"] == "arena"]
    sizes = {st["id"]: st["nbytes"] for st in arena}
    lifetimes = {}
    for st in arena:
        sid = st["id"]
        f = first.get(sid, -1)
        lifetimes[sid] = (f, last.get(sid, f))
    mem = plan_memory(sizes, lifetimes, reuse=memory_reuse)
    for st in arena:
        st["offset"] = mem.offsets[st["id"]]
    rep.memory = mem

    # -- driver ---------------------------------------------------------------------------
    kernel_names = sorted(kernels)
    kidx = {n: i for i, n in enumerate(kernel_names)}
    t0 = time.perf_counter()
    driver = _build_driver([(kidx[s["kernel"]], len(s["args"])) for s in steps],
                           len(kernel_names), sum(len(s["args"]) for s in steps), tgt)
    rep.driver_s = time.perf_counter() - t0

    plan = {
        "format": 1,
        "name": g.name,
        "target": tgt.to_dict(),
        "inputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype} for v in g.inputs],
        "outputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype}
                    for v in g.outputs],
        "values": values,
        "storages": storages,
        "arena_bytes": max(mem.arena_bytes, 64),
        "steps": steps,
        "kernels": {k.name: {"op": k.op, "workload": k.workload, "schedule": k.schedule,
                             "tuned": k.tuned, "ops": k.ops, "layout": k.layout,
                             "flops": k.flops, "bytes": k.bytes, "time_s": k.time_s,
                             "time_source": k.time_source}
                    for k in rep.kernels},
        "memory": {"arena_bytes": mem.arena_bytes, "naive_bytes": mem.naive_bytes,
                   "lower_bound_bytes": mem.lower_bound},
    }
    # cheap (quadratic in the storages, a few thousand checks for ResNet-50), and an overlap
    # would silently corrupt results: every build checks its own plan
    validate_plan(plan)
    gm = GraphModule(plan, kernels, driver, constants, mode=mode)
    rep.total_s = time.perf_counter() - t_start
    gm.build_report = rep
    return gm


# workload key -> (flops, bytes) of the kernel: counted once per process (declaring the
# computes again costs ~1 ms a kernel, a warm build's share)
_WORK: dict[str, tuple[float, float]] = {}


def _time_kernel(info: KernelInfo, n, in_types, out_types, tuning) -> None:
    """The kernel's work and time per call: its tuning record's measured time when the build
    chose that record, else the roofline estimate (:mod:`.kernel_cost`)."""
    from .kernel_cost import estimate_seconds, kernel_work
    from .lowering import lower

    work = _WORK.get(info.workload)
    if work is None:
        work = _WORK[info.workload] = kernel_work(*lower(n.op, n.attrs, in_types, out_types))
    info.flops, info.bytes = work
    # (a tuned kernel was built from a tuning log)
    record = tuning.best_record(n.op, n.attrs, in_types, out_types) if info.tuned else None
    if record is not None and record.valid:
        info.time_s, info.time_source = record.cost, "tuning log"
    else:
        info.time_s = estimate_seconds(info.flops, info.bytes)


def _open_tuning_log(path: str, target):
    """Kernel selection from a tuning log (:class:`.tuning.GraphTuning`)."""
    import os

    if not os.path.exists(path):
        raise BuildError(f"tuning log {path!r} does not exist")
    from .tuning import GraphTuning

    # autotune's records name the target "llvm" (the host CPU is implied by the build)
    return GraphTuning(path, "llvm")
