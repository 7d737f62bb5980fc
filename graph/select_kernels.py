"""Kernel selection, a step of ``graph.build``: one compiled kernel per distinct workload.

A workload is (op, attributes, input and output types). Its kernel is the tuned schedule of its
tuning record when the build has a tuning log with one, else the first default schedule that
builds (:func:`schedule_candidates`). Kernels are cached in-process and on disk
(:mod:`.kernel_cache`) by workload and schedule variant, checked before any compiler work, so a
rebuild of the same model is a load per kernel ("warm cache").

What falls back and what raises. A schedule the compiler refuses (a ``TensorlangError``: a
refused primitive, a lowering, codegen or time-limit error) or a record whose knobs the template
no longer has (a ``ValueError``, ``TemplateError`` included) is a refusal: the build tries the
next candidate, and a tuned record refused this way is reported (a warning naming the record and
the error, and ``BuildReport.tuned_failures``). Any other exception (an ``AttributeError``, a
``KeyError``...) is a bug in the compiler or a template, not a property of the schedule: it is
raised, with a note naming the kernel and the schedule it was building, never hidden behind a
slower default kernel.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tensorlang.errors import TensorlangError

from . import op_registry as R
from .fused_group import group_of, kernel_attrs, kernel_label
from .ir import Graph
from .report import BuildError, KernelInfo, TunedRecordFailure
from .symbolic import shape_json, variables

# the exceptions that mean "this schedule cannot be built", as opposed to a bug (module doc)
REFUSALS = (TensorlangError, ValueError)

# workload key -> (runtime Module, schedule name); kernels are pure functions of their workload,
# so a process compiling several models (or the same one twice) shares them.
_KERNEL_CACHE: dict[str, Any] = {}

# workload key -> (flops, bytes) of the kernel: counted once per process (declaring the
# computes again costs ~1 ms a kernel, a warm build's share)
_WORK: dict[str, tuple[float, float]] = {}


@dataclass(frozen=True)
class KernelSelection:
    """The kernels of a graph: ``kernel_of`` maps each kernel node to its kernel's name,
    ``modules`` each kernel's name to its compiled module; ``infos`` in first-use order."""

    kernel_of: dict[str, str]
    modules: dict[str, Any]
    infos: tuple[KernelInfo, ...]
    untuned: tuple[str, ...]  # tunable kernels without a record in the tuning log
    tuned_failures: tuple[TunedRecordFailure, ...]
    time_s: float

    def describe(self) -> str:
        built = sum(k.source is None for k in self.infos)
        tuned = sum(k.tuned for k in self.infos)
        return (f"{len(self.infos)} kernels for {len(self.kernel_of)} nodes ({built} compiled, "
                f"{len(self.infos) - built} cached; {tuned} tuned, {len(self.untuned)} untuned, "
                f"{len(self.tuned_failures)} tuned records failed)")


@dataclass(frozen=True)
class _Built:
    """One kernel as :func:`build_kernel` found or made it."""

    module: Any
    key: str
    source: str | None  # None: compiled now; "memory" / "disk": from a cache
    schedule: str
    untuned: bool
    tuned_failure: TunedRecordFailure | None = None


def workload_key(op: str, attrs: dict, in_types, out_types) -> str:
    """The kernel's workload, hashed: op, attributes (a fused group's without member names:
    identical groups share one workload) and input and output types."""
    types = lambda ts: [[shape_json(s), t] for s, t in ts]
    text = json.dumps([op, kernel_attrs(op, attrs, in_types), types(in_types), types(out_types)],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def schedule_candidates(outs) -> list[tuple[str, Callable]]:
    """Schedules to try for a kernel's outputs, best first; the build falls back to the next
    when the core refuses one. ``tl.ops.default_schedule`` knows every library op (anchor
    schedules for conv/matmul/pooling with their elementwise tails, inlined injective stages);
    the plain schedule is the safety net for a composition it cannot place."""
    import tensorlang as tl

    return [("default", lambda: tl.ops.default_schedule(outs)),
            ("naive", lambda: tl.create_schedule(outs))]


def _short(attrs: dict) -> str:
    text = json.dumps(attrs, sort_keys=True)
    return text if len(text) < 300 else text[:300] + "..."


def _layout_of(n) -> str:
    """The data layout a kernel works in: NCHW for image tensors (every conv/pool of the graph
    layer is NCHW), else the rank's plain row-major layout."""
    rank = len(n.outputs[0].shape)
    return "NCHW" if rank == 4 else f"row-major {rank}-d"


def _types(n) -> tuple[list, list]:
    return [(v.shape, v.dtype) for v in n.inputs], [(v.shape, v.dtype) for v in n.outputs]


def select_kernels(g: Graph, target, tuning) -> KernelSelection:
    """Step "select kernels": a kernel for every node that is not an alias, in node order."""
    t0 = time.perf_counter()
    kernel_of: dict[str, str] = {}
    modules: dict[str, Any] = {}
    infos: list[KernelInfo] = []
    untuned: list[str] = []
    failures: list[TunedRecordFailure] = []
    for n in g.nodes:
        if R.get_op(n.op).alias:
            continue
        in_types, out_types = _types(n)
        got = build_kernel(n.op, n.attrs, in_types, out_types, target, tuning)
        name = got.module.name
        kernel_of[n.name] = name
        if got.tuned_failure is not None:
            failures.append(got.tuned_failure)
        if name in modules:
            continue
        modules[name] = got.module
        infos.append(_kernel_info(n, got, tuning))
        if got.untuned:
            untuned.append(name)
    return KernelSelection(kernel_of, modules, tuple(infos), tuple(untuned), tuple(failures),
                           time.perf_counter() - t0)


def _kernel_info(n, got: _Built, tuning) -> KernelInfo:
    group = group_of(n)
    ops = group.ops if group is not None else [n.op]
    build_s = getattr(got.module, "_graph_build_s", 0.0) if got.source is None else 0.0
    info = KernelInfo(got.module.name, n.op, got.key, got.schedule, got.schedule == "tuned",
                      build_s, got.source is not None, ops,
                      n.outputs[0].layout or _layout_of(n), got.source)
    _time_kernel(info, n, *_types(n), tuning)
    return info


def build_kernel(op: str, attrs: dict, in_types, out_types, target, tuning) -> _Built:
    """The kernel of one workload, from a cache or compiled.

    Both caches are checked before any compiler work (declaring computes, scheduling,
    lowering, emitting IR): the in-process one by key, then the on-disk one
    (:mod:`.kernel_cache`), which makes a rebuild in a fresh process cost a load per kernel."""
    from . import kernel_cache

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
        return _Built(hit[0], key, "memory", hit[1], untuned)
    disk_key = kernel_cache.entry_key(key, variant, target)
    cached = kernel_cache.load(disk_key)
    if cached is not None:
        mod, meta = cached
        _KERNEL_CACHE[key] = (mod, meta["schedule"])
        return _Built(mod, key, "disk", meta["schedule"], untuned)
    name = f"{kernel_label(op, attrs, in_types)}_{key[:12]}"
    mod, sched, failure = _compile_kernel(op, attrs, in_types, out_types, target, tuning,
                                          found, name)
    _KERNEL_CACHE[key] = (mod, sched)
    kernel_cache.store(disk_key, mod, {"schedule": sched, "build_s": mod._graph_build_s})
    return _Built(mod, key, None, sched, untuned, failure)


def _compile_kernel(op, attrs, in_types, out_types, target, tuning, found, name):
    """(module, schedule name, the tuned record's failure or None): the first schedule that
    builds, the tuned one first when there is one (module doc: what falls back)."""
    import tensorlang as tl

    from .lowering import lower

    errors: list[str] = []
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
        except REFUSALS as e:
            errors.append(f"{sched_name}: {type(e).__name__}: {e}")
            continue
        except Exception as e:
            e.add_note(f"(graph.build: while building kernel {name} with the {sched_name} "
                       f"schedule{_record_note(found) if sched_name == 'tuned' else ''})")
            raise
        mod._graph_build_s = time.perf_counter() - t0  # for the build report
        return mod, sched_name, _report_fallbacks(name, sched_name, errors, found)
    raise BuildError(f"cannot compile {kernel_label(op, attrs, in_types)} ({_short(attrs)}) for "
                     f"inputs {[f'{t}{list(s)}' for s, t in in_types]}:\n  " + "\n  ".join(errors)
                     + _symbolic_hint(in_types, out_types))


def _symbolic_hint(in_types, out_types) -> str:
    """A workload with symbolic dimensions that no schedule builds: the way out today."""
    names = variables(d for s, _ in [*in_types, *out_types] for d in s)
    if not names:
        return ""
    return (f"\n(the kernel has symbolic dimensions {', '.join(sorted(names))}; fix them to "
            "build it: graph.from_onnx(model, shapes={...}) or a Builder input of fixed shape)")


def _record_note(found) -> str:
    from tensorlang.autotune.task import workload_key as template_workload_key

    from .tuning import TEMPLATE

    return f" of the tuning record for workload {template_workload_key(TEMPLATE, found[0])}, " \
           f"config {found[2]}"


def _report_fallbacks(name: str, sched_name: str, errors: list[str],
                      found) -> TunedRecordFailure | None:
    """Warn about the schedules refused before ``sched_name`` built; the tuned record's
    failure, when it was refused."""
    failure = None
    if found is not None and sched_name != "tuned":
        from tensorlang.autotune.task import workload_key as template_workload_key

        from .tuning import TEMPLATE

        failure = TunedRecordFailure(name, template_workload_key(TEMPLATE, found[0]), found[2],
                                     errors[0].split(": ", 1)[1])
        warnings.warn(failure.describe(), stacklevel=5)
    if sched_name == "naive" and len(errors) > (failure is not None):
        # the library could not place this composition: it runs, but unoptimized
        warnings.warn(f"kernel {name}: the default schedule was refused, so it uses the "
                      f"naive schedule (correct but slow): {errors[-1]}", stacklevel=5)
    return failure


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
