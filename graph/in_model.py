"""Each tuned kernel's config chosen by its time inside runs of the model, after tuning.

A tuning record times its kernel alone, called again and again on the same arguments (the
tuner's re-measurement too). Inside the model the kernel meets the caches as the kernels before
it leave them, which can rank its configs otherwise; this choice checks the finalists where they
will run, and its records give the times the deployed kernels run at. Measured on a
ResNet-50-shaped model (112x112, width 32, one thread, Zen 4; BENCHMARKS.md, issue 21): the
ranking mostly held (0-14 of 26 kernels changed per log), and whole runs with and without the
choice were level within their noise (0.983, interval 0.946-1.007).

:func:`remeasure_in_model` builds the model once per rank of the tasks' finalists (each task's
few best distinct configs in the log, and its default): build ``i`` runs every task's ``i``-th
finalist. It runs each build's kernels in the steps of the first build (the same buffers and
weights: where a build's memory lies moves its kernels by several percent, so finalists timed
in builds of their own were ranked by their builds' placement), timing every step inside whole
runs, the builds' turns interleaved round by round, and appends one record per finalist whose
costs are those per-call times (flag ``in_model``). Each task's fastest finalist, or its
incumbent (the log's best until now) unless another is faster by more than REMEASURE_MARGIN,
is marked ``chosen``: ``graph.build`` then applies it (Record.rank puts the latest choice made
in a model first).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from tensorlang import autotune
from tensorlang.version import __version__

from . import op_registry as R
from .build import BuildError, build, run_graph_passes
from .ir import Graph
from .symbolic import is_static
from .tuning import TEMPLATE, GraphTuning, _types

IN_MODEL_TOP = 3  # each task's best distinct configs tried in the model (its default besides)
IN_MODEL_ROUNDS = 6  # interleaved rounds over the builds
RUNS_PER_ROUND = 5  # runs of one build per round, every step timed in each


@dataclass(frozen=True)
class InModelChoice:
    """One task's finalists timed inside runs of the model."""

    key: str  # the task's workload key (as in the log)
    nodes: tuple[str, ...]  # the graph nodes that run its kernel
    configs: tuple[dict, ...]  # the finalists' config entities, the incumbent first
    times: tuple[float, ...]  # each finalist's seconds per call inside runs (median)
    chosen: int  # the index of the chosen finalist

    def describe(self) -> str:
        kept = "kept the log's best" if self.chosen == 0 else \
            f"chose finalist {self.chosen} ({self.times[0] / self.times[self.chosen]:.2f}x)"
        times = ", ".join(f"{t * 1e6:.1f}" for t in self.times)
        return f"{self.nodes[0]} (x{len(self.nodes)}): in-model us {times}: {kept}"


def remeasure_in_model(g: Graph, log_file: str, top: int = IN_MODEL_TOP,
                       rounds: int = IN_MODEL_ROUNDS, opt_level: int = 2) -> list[InModelChoice]:
    """Time each tuned task's finalists inside runs of ``g`` and append the results to
    ``log_file`` (see the module's doc); returns one InModelChoice per task that had more than
    one finalist. ValueError for a graph with shape variables (fix them, e.g. ``from_onnx(...,
    shapes=)``) or a bad ``top`` / ``rounds``; BuildError where the log is missing."""
    for name, value in (("top", top), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"remeasure_in_model: {name} must be an int >= 1, got {value!r}")
    dynamic = [v.name for v in g.inputs if not is_static(v.shape)]
    if dynamic:
        raise ValueError(f"remeasure_in_model times runs of a model with fixed shapes; inputs "
                         f"{dynamic} have shape variables (give their sizes when importing)")
    if not os.path.exists(log_file):
        raise BuildError(f"tuning log {log_file!r} does not exist")
    logged = autotune.load_records(log_file)
    nodes, incumbents = _tuned_kernels(g, logged, opt_level)
    by_key: dict[str, list] = {}
    for r in logged:
        by_key.setdefault(r.key, []).append(r)
    finalists = {key: _finalists(by_key[key], rec, top) for key, rec in incumbents.items()}
    width = max((len(f) for f in finalists.values()), default=0)
    if width < 2:
        return []
    # the template-free kernels' records (and their defaults' timings) as the log has them
    others = [r for r in logged if r.workload.get("name") != TEMPLATE]
    # build i: every kernel's i-th finalist (its incumbent where it has fewer)
    logs = [others + [recs[i] if i < len(recs) else recs[0] for recs in finalists.values()]
            for i in range(width)]
    per_build = _time_builds(g, logs, rounds, opt_level)
    choices, records = [], []
    for key, recs in finalists.items():
        if len(recs) < 2:
            continue
        costs = [_per_call(per_build[i], nodes[key]) for i in range(len(recs))]
        choice = _choose(key, nodes[key], recs, costs)
        choices.append(choice)
        records += [_timed_record(r, c, i == choice.chosen) for i, (r, c) in
                    enumerate(zip(recs, costs))]
    autotune.record.append_records(log_file, records)
    return choices


def _tuned_kernels(g: Graph, logged: list, opt_level: int) -> tuple[dict, dict]:
    """(workload key -> the nodes running it, workload key -> the record a build applies) for
    the kernels a build of ``g`` with the log runs with a template's tuned config (in the layout
    that build chooses; a template-free kernel keeps what the log gives it)."""
    tuning = GraphTuning(logged)
    passes = run_graph_passes(g, opt_level, tuning, None)
    nodes: dict[str, list[str]] = {}
    incumbents = {}
    for n in passes.graph.nodes:
        if R.get_op(n.op).alias:
            continue
        rec = tuning.best_record(n.op, n.attrs, *_types(n))
        if rec is not None and rec.workload.get("name") == TEMPLATE:
            nodes.setdefault(rec.key, []).append(n.name)
            incumbents[rec.key] = rec
    return nodes, incumbents


def _finalists(of_key: list, incumbent, top: int) -> list:
    """The incumbent, then the next best records of other configs of its workload (up to
    ``top`` configs), then the default config's record when the log has it and it is not
    among them. Only records a build would apply (this version, the same compute)."""
    same = [r for r in of_key if r.valid and r.target == incumbent.target
            and r.version == __version__
            and r.workload.get("hash") == incumbent.workload.get("hash")]
    same.sort(key=lambda r: r.rank)
    picked: dict[str, object] = {_entity(incumbent): incumbent}
    for r in same:
        if len(picked) >= top:
            break
        picked.setdefault(_entity(r), r)
    default = _default_entity(incumbent)
    if default is not None and default not in picked:
        found = next((r for r in same if _entity(r) == default), None)
        if found is not None:
            picked[default] = found
    return list(picked.values())


def _entity(rec) -> str:
    return json.dumps(rec.config.get("entity"), sort_keys=True)


def _default_entity(rec) -> str | None:
    """The entity of the template's fallback config (the default schedule) of ``rec``'s
    workload; None for a workload of another template (a template-free task)."""
    if rec.workload.get("name") != TEMPLATE:
        return None
    space = autotune.create_task(TEMPLATE, rec.workload["args"], rec.target).config_space
    return json.dumps(space.get(space.fallback_index()).to_json()["entity"], sort_keys=True)


def _time_builds(g: Graph, logs: list[list], rounds: int,
                 opt_level: int) -> list[dict[str, list[float]]]:
    """Per build of ``g`` with each of ``logs`` (lists of records): node -> seconds of its
    kernel in each timed run, the rounds interleaved. Every build's kernels run in the first
    build's steps (GraphModule.step_times(kernels=)): where a build's arena and weights land
    in memory moves its kernels' times by several percent, more than configs differ by, and
    the fastest of several builds would be the luckiest placement."""
    built = []
    with tempfile.TemporaryDirectory(prefix="tl-in-model-") as d:
        for i, records in enumerate(logs):
            path = os.path.join(d, f"finalists_{i}.jsonl")
            autotune.record.append_records(path, records)
            with warnings.catch_warnings():  # untuned kernels: as the log's own build
                warnings.simplefilter("ignore", UserWarning)
                built.append(build(g, tuning_log=path, opt_level=opt_level))
    gm = set_sample_inputs(built[0])
    kernels = [_kernels_of(other, gm) for other in built]
    times: list[dict[str, list[float]]] = [{} for _ in built]
    for _ in range(rounds):
        for swapped, per in zip(kernels, times):
            for node, got in gm.step_times(RUNS_PER_ROUND, swapped).items():
                per.setdefault(node, []).extend(got)
    return times


def _kernels_of(other, gm) -> dict:
    """Node -> ``other``'s kernel for it, where it takes the arguments of ``gm``'s."""
    mine = {st["node"]: gm.kernels[st["kernel"]] for st in gm.plan["steps"]}
    out = {}
    for st in other.plan["steps"]:
        k, own = other.kernels[st["kernel"]], mine.get(st["node"])
        if own is not None and k.manifest["args"] == own.manifest["args"]:
            out[st["node"]] = k
    return out


def set_sample_inputs(gm):
    """``gm`` with every input set to a sample to time with (the same each time); returned."""
    rng = np.random.default_rng(0)
    for name, (shape, dtype) in gm.input_info().items():
        gm.set_input(name, _sample(rng, shape, dtype))
    return gm


def _sample(rng, shape, dtype) -> np.ndarray:
    """Inputs to time with: normal floats; zeros elsewhere (valid indices and masks)."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype)


def _per_call(per_node: dict[str, list[float]], nodes: list[str]) -> list[float]:
    """One task's seconds per call in each timed run: the mean over its nodes."""
    runs = zip(*(per_node[n] for n in nodes))
    return [sum(r) / len(nodes) for r in runs]


def _choose(key: str, nodes: list[str], recs: list, costs: list[list[float]]) -> InModelChoice:
    medians = [statistics.median(c) for c in costs]
    return InModelChoice(key, tuple(nodes), tuple(r.config.get("entity") for r in recs),
                         tuple(medians), autotune.tuner.margin_winner(medians, 0))


def _timed_record(rec, costs: list[float], chosen: bool):
    result = {"costs": costs, "error": None, "error_msg": "", "all_cost": 0.0,
              "remeasured": True, "in_model": True}
    if chosen:
        result["chosen"] = True
    return replace(rec, result=result, timestamp=time.time(), line=0)
