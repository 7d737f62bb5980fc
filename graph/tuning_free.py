"""Template-free tasks for the graph kernels no template tunes (issue 20): softmax, norms,
reductions, elementwise chains, fused groups without a conv / dense anchor.

The workload ``graph_kernel_free`` rebuilds a kernel's computes from the same description as the
``graph_kernel`` template (op, attributes, input and output types, JSON strings) and leaves its
schedule to the sketch rules (autotune/sketch.py). ``graph.extract_tasks(g,
template_free=True)`` adds one such task per distinct untemplated kernel; ``graph.build(g,
tuning_log=...)`` replays their best records (GraphTuning.config_for asks
:func:`free_config`).

A searched schedule is not always faster than the kernel's default one (``tl.ops.default_schedule``,
which the build uses without a record): a tuner of a FreeGraphTask (any tuner, ``tune_tasks``,
``TaskScheduler``) first times the task's default kernel with the trials' measure option, once
per log (``FreeGraphTask.baseline``, autotune.tuner.baseline_of), as a record of the one-config
template ``graph_kernel_default``; :func:`measure_baselines` does it for a log tuned before.
The build keeps the default wherever it was measured no slower than the best searched record."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence

from tensorlang import autotune

from . import op_registry as R
from .ir import Graph
from .tuning import (
    GraphKernelTask,
    _anchor_op,
    _parse,
    _types,
    _warm_args,
    is_tunable,
    template_args,
)

WORKLOAD = "graph_kernel_free"
BASELINE = "graph_kernel_default"


@autotune.workload(name=WORKLOAD)
def graph_kernel_free(op: str, attrs: str, in_types: str, out_types: str):
    from .lowering import lower

    ins, outs = lower(*_parse((op, attrs, in_types, out_types)))
    return [*ins, *outs]


@autotune.template(BASELINE)
def graph_kernel_default(op: str, attrs: str, in_types: str, out_types: str):
    """The kernel the build makes without a record: its one config is the default schedule."""
    import tensorlang as tl

    from .lowering import lower

    ins, outs = autotune.computes_once(lambda: lower(*_parse((op, attrs, in_types, out_types))))
    return tl.ops.default_schedule(outs), [*ins, *outs]


class FreeGraphTask(GraphKernelTask, autotune.WorkloadTask):
    """A template-free task for one graph kernel workload (see GraphKernelTask)."""

    def __init__(self, args, target: str, op: str, nodes: list[str], layout: str = "",
                 warm_args: Sequence[int] = ()):
        super().__init__(WORKLOAD, args, target, op, nodes, layout, warm_args)

    def baseline(self) -> BaselineGraphTask:
        """The task of the same kernel with its default schedule (one config). A tuner measures
        it once per log besides the trials (autotune.tuner.baseline_of), so that the build
        can keep the default where no record beats it."""
        if getattr(self, "_baseline", None) is None:
            self._baseline = BaselineGraphTask(self.args, self.target, self.op, self.nodes,
                                               self.layout, self.warm_args)
        return self._baseline


class BaselineGraphTask(GraphKernelTask, autotune.Task):
    """A graph kernel's default schedule as a one-config task: measuring it gives the time a
    template-free record must beat to be applied (see :func:`free_config`)."""

    def __init__(self, args, target: str, op: str, nodes: list[str], layout: str = "",
                 warm_args: Sequence[int] = ()):
        super().__init__(BASELINE, args, target, op, nodes, layout, warm_args)


def measure_baselines(tasks, measure_option, log: str) -> dict[str, float]:
    """Time the default kernel of each template-free task in ``tasks`` (others are skipped)
    with ``measure_option``, appending one record each to ``log``: measure with the option the
    tasks were tuned with, so that the build compares like with like. Tuning a task (any tuner,
    tune_tasks, TaskScheduler) logs its baseline already; a task whose baseline ``log`` holds is
    not measured again. Returns {task key: seconds per call} (inf for a default kernel that
    failed to build or run)."""
    out = {}
    for task in tasks:
        if not isinstance(task, FreeGraphTask):
            continue
        base = task.baseline()
        if not _logged(log, base):
            tuner = autotune.RandomTuner(base, batch_size=1, seed=0)
            tuner.tune(1, measure_option, callbacks=[autotune.log_to_file(log)])
        costs = [r.cost for r in autotune.load_records(log) if r.key == base.key and r.valid]
        out[task.key] = min(costs, default=float("inf"))
    return out


def _logged(log: str, task) -> bool:
    """Whether ``log`` (may not exist yet) holds a record of ``task``."""
    return os.path.exists(log) and any(r.key == task.key and r.target == task.target
                                       for r in autotune.load_records(log))


def extract_free_tasks(g: Graph, target: str = "llvm", opt_level: int = 2,
                       every_kernel: bool = False) -> list:
    """One template-free task per distinct kernel of ``g`` (after the graph passes) that no
    template tunes (``every_kernel``: per distinct kernel, templated or not). Kernels the
    sketch rules cannot schedule (an extern call, a symbolic extent) are left to their default
    schedule, named in one warning."""
    from .passes import run_passes

    found: dict[tuple, tuple[str, list[str], str, tuple[int, ...]]] = {}
    for n in run_passes(g, opt_level).nodes:
        if R.get_op(n.op).alias:
            continue
        in_types, out_types = _types(n)
        args = template_args(n.op, n.attrs, in_types, out_types)
        if args in found:
            found[args][1].append(n.name)
        elif every_kernel or not is_tunable(n.op, n.attrs, in_types, out_types):
            found[args] = (_anchor_op(n), [n.name], n.outputs[0].layout, _warm_args(n))
    tasks, skipped = [], []
    for args, (op, nodes, layout, warm) in found.items():
        try:
            tasks.append(FreeGraphTask(args, target, op, nodes, layout, warm))
        except (TypeError, ValueError) as e:  # TemplateError is a ValueError
            skipped.append(f"{nodes[0]} ({op}: {e})")
    if skipped:
        warnings.warn(f"extract_tasks: {len(skipped)} kernel(s) without a template-free task "
                      f"(default schedule): {'; '.join(skipped)[:500]}", stacklevel=3)
    return tasks


def free_config(history, target: str, args: tuple):
    """(args, config, config json, workload name) of a kernel's best template-free record in
    ``history`` (an ApplyHistoryBest), or None: also None when the log holds a measurement of
    the kernel's default schedule (:func:`measure_baselines`) no slower than that record."""
    if searched_loses(history, target, args):
        return None
    cfg = history.query(target, WORKLOAD, args)
    if autotune.task.workload_key(WORKLOAD, args) not in history.applied:
        return None
    return args, cfg, json.dumps(cfg.to_json(), sort_keys=True), WORKLOAD


def searched_loses(history, target: str, args: tuple) -> bool:
    """Whether the log measured the kernel's default schedule no slower than its best
    applicable template-free record (then the build keeps the default)."""
    base = history.best(target, BASELINE, args)
    rec = history.best(target, WORKLOAD, args)
    return base is not None and rec is not None and base.cost <= rec.cost


def free_record(history, target: str, args: tuple):
    """The template-free record :func:`free_config` would apply to the kernel, or None."""
    if searched_loses(history, target, args):
        return None
    return history.best(target, WORKLOAD, args)
