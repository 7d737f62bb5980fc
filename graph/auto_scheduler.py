"""``tensorlang.auto_scheduler``: TVM's auto_scheduler (Ansor) API, so that a script written
for it runs after ``from tvm import auto_scheduler`` becomes ``from tensorlang import
auto_scheduler`` (docs/tvm_compat.md has the table of names).

The task-level names (SearchTask, TuningOptions, SketchPolicy, ApplyHistoryBest,
TaskScheduler, ...) are defined in ``tensorlang.autotune.auto_scheduler``, which knows nothing
of graphs; this module, the public one, lives in the graph layer because it adds what takes a
whole model: ``extract_tasks(g, params, target)``, where TVM takes a Relay module and here it is
a ``tensorlang.graph.Graph`` (``graph.from_onnx`` or ``graph.Builder``). ``graph.build(g)``
inside ``auto_scheduler.ApplyHistoryBest(log)`` compiles with that log. TVM names with no
equivalent here raise an AttributeError saying what to use (tensorlang/tvm_names.py).
"""

from __future__ import annotations

import json
import os

from tensorlang.autotune.auto_scheduler import (
    ApplyHistoryBest,
    ComputeDAG,
    LocalBuilder,
    LocalRunner,
    PreloadMeasuredStates,
    RandomModel,
    RecordToFile,
    SearchTask,
    SketchPolicy,
    TaskScheduler,
    TuningOptions,
    XGBModel,
    history_in_context,
    refuse,
    register_workload,
    target_string,
)

from .ir import Graph

__all__ = ["ApplyHistoryBest", "ComputeDAG", "LocalBuilder", "LocalRunner",
           "PreloadMeasuredStates", "RandomModel", "RecordToFile", "SearchTask", "SketchPolicy",
           "TaskScheduler", "TuningOptions", "XGBModel", "extract_tasks", "history_in_context",
           "register_workload"]


def extract_tasks(mod, params=None, target="llvm", target_host=None, hardware_params=None,
                  include_simple_tasks: bool = False, dump_workload_to_dag_log=None,
                  opt_level: int = 3, other_targets=None) -> tuple[list[SearchTask], list[int]]:
    """The tuning tasks of a graph's kernels, after its passes and fusion (as ``graph.build``
    compiles them), and how many kernels of the graph each one is: ``(tasks, task_weights)``.

    mod: a ``graph.Graph`` (TVM's Relay module is refused); params: None (the graph holds its
    weights); opt_level: the graph passes' (0-3; build with the same); include_simple_tasks:
    also the kernels without a reduction (layout transforms, elementwise chains), which TVM
    leaves out by default; dump_workload_to_dag_log: a JSON file to write {workload key:
    printed compute} to. Every task is template-free (graph.extract_tasks(template_free="all"),
    as Ansor tunes a model), and its kernel's default schedule is timed beside its trials, so
    that the build keeps the default where no trial beat it."""
    who = "extract_tasks"
    g = _graph_of(mod)
    if params:
        raise ValueError(f"{who}: params: the graph holds its weights (graph.from_onnx binds the "
                         "model's initializers, graph.Builder.const makes constants); give "
                         "params=None")
    target = target_string(target, who)
    if target_host is not None and target_string(target_host, who) != target:
        raise ValueError(f"{who}: target_host={target_host!r} differs from target={target!r}; "
                         "CPU kernels are their own host (leave target_host None)")
    refuse(who, "hardware_params", hardware_params, None, "this machine's CPU is the target")
    refuse(who, "other_targets", other_targets, None, "the host CPU is the one target")
    from .tasks import extract_tasks as graph_tasks

    tasks = [SearchTask.of(t, desc=t.op)
             for t in graph_tasks(g, target=target, opt_level=opt_level, template_free="all")]
    if not include_simple_tasks:
        tasks = [t for t in tasks if t.compute_dag.has_reduction()]
    if dump_workload_to_dag_log is not None:
        with open(dump_workload_to_dag_log, "w", encoding="utf-8") as f:
            json.dump({t.workload_key: str(t.compute_dag) for t in tasks}, f, indent=1)
    return tasks, [int(t.task.weight) for t in tasks]


def _graph_of(mod) -> Graph:
    """The graph, or TypeError saying how to get one from what was given."""
    if isinstance(mod, Graph):
        return mod
    kind = type(mod).__name__
    if type(mod).__module__.split(".")[0] == "tvm" or kind in ("IRModule", "Function"):
        raise TypeError(f"extract_tasks: got a Relay {kind}; tensorlang imports the model "
                        "itself: g = graph.from_onnx('model.onnx') (relay.frontend.from_onnx), "
                        "then auto_scheduler.extract_tasks(g, None, target)")
    if kind == "ModelProto" or isinstance(mod, (str, os.PathLike)):
        raise TypeError(f"extract_tasks: got {kind}, a model not imported yet: "
                        "g = graph.from_onnx(model), then auto_scheduler.extract_tasks(g, None, "
                        "target)")
    raise TypeError(f"extract_tasks: expected a tensorlang graph.Graph (graph.from_onnx or "
                    f"graph.Builder), got {kind}")


def __getattr__(name: str):
    # a TVM auto_scheduler name we do not have: the error says what to use (tvm_names.py)
    from tensorlang.tvm_names import AUTO_SCHEDULER_NAMES, missing

    raise missing("module 'tensorlang.auto_scheduler'", name, AUTO_SCHEDULER_NAMES)
