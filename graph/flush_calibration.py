"""``graph.calibrate_flush``: how many bytes a measurement writes to evict the caches before
each timed call, so that a model's kernels, timed alone as the tuner times candidates
(``model_measure_option``), take what they take in runs of the model on this machine.

Why measured rather than derived from the cache sizes: what a run leaves in the caches depends
on their real capacity, inclusion policy and neighbours, which a VM does not show. The same
kernels (ResNet-50-shaped 112x112 width 32, one thread, each task's tuned config), records
summed against the kernels' time in runs: on an AMD Zen 4 VM (32 MiB L3) 64 MiB written matched
(5.71 against 5.68 ms); on an Intel Emerald Rapids VM (260 MiB L3 reported) 64 MiB gave 5.04
against 3.81 ms (1.33x), 32 MiB 3.98 (1.05x), 4 MiB 3.67 (0.96x), and the per-task ratios
spread 1.09-1.60, so the cost model ranked configs by a cold start that runs never see."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .build import build
from .in_model import set_sample_inputs
from .ir import Graph
from .symbolic import is_static

FLUSH_SIZES = tuple(mib << 20 for mib in (2, 4, 8, 16, 32, 64, 128))
CALIBRATION_TASKS = 8  # the heaviest tasks' kernels (weight x FLOPs) are timed


@dataclass(frozen=True)
class FlushCalibration:
    """``flush_bytes``: the size chosen; ``ratios``: size -> the timed kernels' records summed
    (weighted by the nodes sharing them) over their time in runs; ``kernels``: how many."""

    flush_bytes: int
    ratios: dict
    kernels: int

    def __str__(self) -> str:
        others = ", ".join(f"{size >> 20} MiB {r:.2f}x" for size, r in self.ratios.items())
        return (f"cache flush {self.flush_bytes >> 20} MiB: {self.kernels} default kernels "
                f"timed alone at {self.ratios[self.flush_bytes]:.2f}x their time in runs "
                f"({others})")


def calibrate_flush(g: Graph, tasks=None, sizes=FLUSH_SIZES, top: int = CALIBRATION_TASKS,
                    runs: int = 15, rounds: int = 3, opt_level: int = 2) -> FlushCalibration:
    """Build ``g`` untuned, time the default kernels of its ``top`` heaviest tasks (``tasks``,
    default ``extract_tasks(g)``) inside runs of it, then alone as the tuner's runner times a
    candidate with each of ``sizes`` bytes written before every call; the size whose records
    sum closest to the in-run times (a ratio nearest 1) is chosen. Pass it on as
    ``model_measure_option(flush_bytes=...)``. ValueError for a graph with shape variables or
    without tasks."""
    from tensorlang.autotune.measure import _cold_costs, _random_inputs

    from .tasks import extract_tasks

    sizes, top, rounds = _checked_arguments(g, sizes, top, rounds)
    if not all(is_static(v.shape) for v in g.inputs):
        raise ValueError("calibrate_flush times runs of a model with fixed shapes; give the "
                         "inputs' sizes when importing")
    tasks = extract_tasks(g, opt_level=opt_level) if tasks is None else tasks
    heaviest = sorted(tasks, key=lambda t: t.weight * t.flop, reverse=True)[:top]
    if not heaviest or not sizes:
        raise ValueError("calibrate_flush: no tunable task to time (and sizes must not be "
                         "empty)")
    gm = set_sample_inputs(build(g, opt_level=opt_level))  # untuned: the default kernels
    in_run = {n: statistics.median(v) for n, v in gm.step_times(runs).items()}
    kernels = {st["node"]: gm.kernels[st["kernel"]] for st in gm.plan["steps"]}
    timed = [t for t in heaviest if t.nodes[0] in kernels
             and all(i < len(kernels[t.nodes[0]].manifest["args"]) for i in t.warm_args)]
    if not timed:
        raise ValueError("calibrate_flush: no task's kernel is a step of the untuned build "
                         "(tasks of another graph?)")
    args = {t.key: _random_inputs(kernels[t.nodes[0]].manifest) for t in timed}
    alone = {size: {t.key: [] for t in timed} for size in sizes}
    for _ in range(rounds):  # sizes interleaved: a drift of the machine hits all of them
        for size in sizes:
            for t in timed:
                alone[size][t.key] += _cold_costs(kernels[t.nodes[0]], args[t.key], 1, 5, 0.0,
                                                  t.warm_args, size)
    run_sum = sum(t.weight * statistics.median(in_run[n] for n in t.nodes) for t in timed)
    ratios = {size: sum(t.weight * statistics.median(alone[size][t.key]) for t in timed)
              / run_sum for size in sizes}
    best = min(sizes, key=lambda size: abs(math.log(ratios[size])))
    return FlushCalibration(best, ratios, len(timed))


def _checked_arguments(g, sizes, top, rounds) -> tuple[tuple[int, ...], int, int]:
    """calibrate_flush's arguments, or the error naming one: rounds=0 ended in
    StatisticsError, top=0 in "no tunable task", a negative size was chosen (-1 MiB), a
    float one failed in a shift."""
    from tensorlang.autotune.arguments import check_int

    if not isinstance(g, Graph):
        raise TypeError(f"calibrate_flush: expected a Graph (graph.from_onnx), got "
                        f"{type(g).__name__}")
    sizes = tuple(sizes)
    if not sizes:
        raise ValueError("calibrate_flush: sizes must not be empty")
    sizes = tuple(check_int("calibrate_flush", "each size", n, 0) for n in sizes)
    return (sizes, check_int("calibrate_flush", "top", top, 1),
            check_int("calibrate_flush", "rounds", rounds, 1))
