"""Tuners: pick configs to measure, batch by batch.

- GridSearchTuner: the space in index order (baseline);
- RandomTuner: uniformly at random without replacement (baseline);
- XGBTuner: an XGBoost model of normalized throughput, refit after every batch (with the
  records of other workloads of the same template as extra training data), and simulated
  annealing over its predictions to choose the next batch; a share `epsilon` of each batch is
  random (exploration). The search scores candidates from schedules built without the
  per-step legality checks (a third of a candidate's featurizing); the configs it picks are
  then checked, and an illegal one is pruned and replaced, so it is never built. When the rest
  of a small space fits in a search's budget, it is featurized whole and ranked exactly.

No tuner measures a config twice (visited set, seeded by load_history).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np

from ..errors import TensorlangError
from .arguments import check_int, check_seed, list_of
from .callbacks import streamer
from .features import FeaturePool, SharedFeaturePool, config_features
from .measure import (
    BUILD_ERROR,
    ILLEGAL,
    MeasureInput,
    MeasureOption,
    MeasureResult,
    measure_batch,
    remeasure_batch,
)
from .record import Record
from .task import Task, create_task, instantiate_time_limit
from .timelimit import TemplateTimeout


def first_message(msg: str) -> str:
    """An error message as one short line: without the traceback a build error carries."""
    msg = str(msg).split("Traceback (most recent call last)")[0]
    return " ".join(msg.split())[:200] or "no message"


class TuningError(TensorlangError):
    """Every trial of a tuning run failed: there is no tuned config (the message names the
    task, how its trials failed and the first error message; `.errors`: kind -> count)."""

    def __init__(self, message: str, errors: dict | None = None):
        super().__init__(message)
        self.errors = dict(errors or {})


class TuningWarning(UserWarning):
    """Most trials of a tuning run failed (the best config comes from the few that did not)."""


# remeasure(): interleaved rounds of the finalists (each round: the runner's repeats of each)
REMEASURE_ROUNDS = 5


def check_remeasure(who: str, top, rounds) -> None:
    """TypeError / ValueError naming a bad remeasure_top or remeasure_rounds."""
    for name, value, least in (("remeasure_top", top, 0), ("remeasure_rounds", rounds, 1)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{who}: {name} must be an int, got {type(value).__name__}")
        if value < least:
            raise ValueError(f"{who}: {name} must be >= {least}, got {value}")


def check_callbacks(who: str, callbacks) -> list:
    """The callbacks as a list; TypeError for one callback not in a list (a single
    log_to_file) or an entry that is not callable, before anything is measured."""
    if callable(callbacks) or isinstance(callbacks, (str, bytes)):
        raise TypeError(f"{who}: callbacks must be a list of callables, got one "
                        f"{type(callbacks).__name__}; give [it]")
    return list_of(callbacks, callable,
                   f"{who}: callbacks must be a list of callables, got "
                   f"{type(callbacks).__name__}",
                   lambda cb: f"{who}: each callback must be callable as cb(tuner, inputs, "
                              f"results), got {type(cb).__name__} {cb!r}")


def baseline_of(task: Task) -> Task | None:
    """The one-config task a tuner measures besides `task`'s trials, once per log, or None: a
    graph's template-free task has the kernel's default schedule, which the build keeps unless
    a record beats its logged time (graph.tuning_free)."""
    make = getattr(task, "baseline", None)
    return make() if callable(make) else None


def own_records(task: Task, records: Sequence[Record]) -> list[Record]:
    """The records of `task`'s workload and of its baseline's (a resume without transfer)."""
    base = baseline_of(task)
    keys = {task.key} | ({base.key} if base is not None else set())
    return [r for r in records if r.key in keys]


# a finalist replaces the default only when its re-measured median is faster than the
# default's by more than this share: near-equal configs (a conv's four finalists within 0.7%)
# differ by noise, and the default is what an untuned build runs
REMEASURE_MARGIN = 0.01
# how long a batch waits for feature workers that are starting before it is measured anyway
POOL_START_WAIT_S = 60.0


def margin_winner(costs: Sequence[float], keep: int) -> int | None:
    """The index of the fastest of `costs` (inf: not valid), or `keep` unless the fastest is
    faster than it by more than REMEASURE_MARGIN; None when none is valid."""
    valid = [n for n, c in enumerate(costs) if c < math.inf]
    if not valid:
        return None
    fastest = min(valid, key=costs.__getitem__)
    if costs[keep] < math.inf and costs[fastest] > costs[keep] * (1 - REMEASURE_MARGIN):
        return keep
    return fastest


class Tuner:
    def __init__(self, task: Task, batch_size: int = 16, seed: int | None = None):
        if not isinstance(task, Task):
            raise TypeError(f"tuner needs an autotune Task, got {type(task).__name__}")
        self.task = task
        self.space = task.config_space
        self.batch_size = check_int(type(self).__name__, "batch_size", batch_size, 1)
        self.rng = np.random.default_rng(check_seed(type(self).__name__, seed))
        self.visited: set[int] = set()
        self.best_flops = 0.0
        self.best_config = None
        self.best_cost = math.inf
        self.trials = 0  # measured in this tuner (not counting loaded history)
        self.errors: dict[str, int] = {}
        self.first_error: tuple[str, str] | None = None  # (kind, message) of the first failure
        self.curve: list[float] = []  # best GFLOP/s after each trial of this tuner
        self.time_measure = 0.0  # wall seconds inside build + run
        self.time_total = 0.0
        self.n_trial = 0
        self.progress: list[tuple[int, float]] = []  # (trials, wall seconds) after each batch
        # seconds to instantiate one config here (tune() takes its builder's timeout): a
        # template that hangs for some config must not hang the tuner
        self.time_limit: float | None = 60.0
        # configs whose result is known without measuring them (their instantiation timed
        # out while the search featurized or checked them): recorded with the next batch
        self._settled: dict[int, MeasureResult] = {}
        self._costs: dict[int, float] = {}  # config index -> seconds, of this workload's valid
        # measurements (loaded or measured): the finalists of remeasure()
        # a task with a baseline (baseline_of): whether the log has (or this tuner logged) it
        self.baseline_logged = False

    # ---------------------------------------------------------------------------- to override
    def next_batch(self, n: int) -> list[int]:
        """The next `n` config indices to measure; each tuner (XGB, random, grid) says."""
        raise NotImplementedError(f"{type(self).__name__} must implement next_batch()")

    def update(self, inputs: list[MeasureInput], results: list[MeasureResult]) -> None:
        """Learn from a measured batch (the base class only tracks the best)."""

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    def close(self) -> None:
        """Release the tuner's helper processes (tune() calls it when it returns)."""

    # ---------------------------------------------------------------------------- history
    def load_history(self, records: Sequence[Record]) -> None:
        """Mark the configs of this workload in `records` as measured (never measured again) and
        learn from them (XGBTuner also learns from other workloads of the same template)."""
        self.mark_measured(records)

    def mark_measured(self, records: Sequence[Record]) -> None:
        """Only the first half of load_history: the configs of this workload in `records`
        become measured (never measured again; the best of them is the tuner's best), and no
        model learns from them (TVM's PreloadMeasuredStates, without its XGBModel)."""
        base = baseline_of(self.task)
        for r in records:
            if r.in_model:  # a model's per-call time: its config's own trial is in the log
                continue
            if base is not None and r.key == base.key and r.target == base.target:
                self.baseline_logged = True
            if r.key != self.task.key or r.target != self.task.target:
                continue
            try:
                idx = self.space.index_of(r.config["entity"])
            except ValueError:
                continue  # the template's space changed: this record says nothing about it
            self.visited.add(idx)
            if r.valid:
                self._costs[idx] = min(self._costs.get(idx, math.inf), r.cost)
                flops = self.task.flop / r.cost
                if flops > self.best_flops:
                    self.best_flops, self.best_cost = flops, r.cost
                    self.best_config = self.space.get(idx)

    # ---------------------------------------------------------------------------- main loop
    def tune(self, n_trial: int, measure_option: MeasureOption,
             callbacks: Sequence[Callable] = (), early_stopping: int | None = None,
             si_prefix: str = "G", remeasure_top: int = 0,
             remeasure_rounds: int = REMEASURE_ROUNDS) -> None:
        """Measure up to `n_trial` new configs; stop early after `early_stopping` trials without
        improvement. Callbacks are called as cb(tuner, inputs, results) after each batch.
        si_prefix: TVM's unit of its log lines (the progress bar takes its own).
        remeasure_top: then measure again the best `remeasure_top` configs and the default
        together (remeasure(); tune_tasks does it by default; 0: not, as TVM's tune).

        Raises TuningError when every trial of this call failed (the records are logged
        first); warns (TuningWarning) when most did."""
        if not isinstance(measure_option, MeasureOption):
            raise TypeError("tune: measure_option must come from autotune.measure_option(...)")
        if si_prefix not in ("", "K", "M", "G", "T", "P"):
            raise ValueError(f"tune: si_prefix must be one of '', K, M, G, T, P; got "
                             f"{si_prefix!r}")
        check_remeasure("tune", remeasure_top, remeasure_rounds)
        n_trial = check_int("tune", "n_trial", n_trial, 0)
        if early_stopping is not None:
            early_stopping = check_int("tune", "early_stopping", early_stopping, 1)
        callbacks = check_callbacks("tune", callbacks)
        t_start = time.perf_counter()
        self.n_trial = n_trial
        trials0, errors0 = self.trials, dict(self.errors)
        self.first_error = None
        self.time_limit = measure_option.builder.timeout
        with instantiate_time_limit(self.time_limit):
            self._prepare_reference(measure_option)
        for cb in callbacks:
            if hasattr(cb, "start"):
                cb.start(self)
        try:
            with instantiate_time_limit(self.time_limit):
                self._measure_baseline(measure_option, callbacks)
                # n_trial new trials: a tuner tuned again measures more, as TVM's does
                self._tune_loop(trials0 + n_trial, measure_option, callbacks, early_stopping,
                                t_start)
                if remeasure_top:
                    self.remeasure(measure_option, remeasure_top, remeasure_rounds, callbacks)
        finally:
            self.close()
            self.time_total += time.perf_counter() - t_start
            for cb in callbacks:
                if hasattr(cb, "close"):
                    cb.close()
        self._check_outcome(self.trials - trials0,
                            {k: n - errors0.get(k, 0) for k, n in self.errors.items()
                             if n > errors0.get(k, 0)})

    def _measure_baseline(self, measure_option: MeasureOption, callbacks) -> None:
        """Measure the task's baseline (baseline_of) once per log, with the trials' option, and
        hand it to the callbacks (log_to_file records it): not a trial."""
        base = baseline_of(self.task)
        if base is None or self.baseline_logged:
            return
        inputs = [MeasureInput(base, base.config_space.get(0))]
        results = measure_batch(measure_option, inputs)
        self.baseline_logged = True
        for cb in callbacks:
            cb(self, inputs, results)

    # ---------------------------------------------------------------------------- remeasure
    def remeasure(self, measure_option: MeasureOption, top: int = 3,
                  rounds: int = REMEASURE_ROUNDS, callbacks: Sequence[Callable] = ()) -> list:
        """Measure the `top` fastest configs measured so far and the template's default again
        (a template-free task: only the configs), built once and timed in `rounds` interleaved
        rounds, and hand the results (marked ``remeasured``) to the callbacks (log_to_file
        records them). The fastest of them, or the default (template-free: the fastest by the
        trials) unless that is faster by more than REMEASURE_MARGIN, is marked ``chosen``: the
        log's best record (best_records, apply_history_best). The fastest of a search
        is the luckiest of many noisy measurements of near-equal configs (a conv's top six
        records at 237.7-238.2 GFLOP/s, none re-timed above 230), and the default stays the
        best unless a config is measurably faster. Sets best_config / best_flops to the
        winner; returns the results (none measured when nothing was valid)."""
        check_remeasure("remeasure", top, rounds)
        finalists = sorted(self._costs, key=self._costs.get)[:top]
        if not finalists:
            return []
        keep = finalists[0]
        if not getattr(self.task, "template_free", False):
            # a template's default: what an untuned build runs (a sketch's fallback is only one
            # point of the space, maybe one its rules refuse; the graph's default schedule is
            # the template-free task's baseline)
            keep = self.space.fallback_index()
            if keep not in finalists:
                finalists.append(keep)
        inputs = [MeasureInput(self.task, self.space.get(i)) for i in finalists]
        self._before_measuring()
        t0 = time.perf_counter()
        results = remeasure_batch(measure_option, inputs, rounds)
        self.time_measure += time.perf_counter() - t0
        won = margin_winner([r.cost for r in results], finalists.index(keep))
        if won is not None:
            results[won].chosen = True
            cost = results[won].cost
            self.best_cost, self.best_flops, self.best_config = cost, self.task.flop / cost, \
                inputs[won].config
        for cb in callbacks:
            cb(self, inputs, results)
        return results

    # ---------------------------------------------------------------------------- outcome
    def failure_summary(self, errors: dict | None = None) -> str:
        """'build error 12, timeout 1; first: <message>' for `errors` (kind -> count; default:
        every failure of this tuner), the message being the latest tune() run's first; empty
        when nothing failed."""
        errors = self.errors if errors is None else errors
        if not errors:
            return ""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(errors.items(), key=lambda kv: -kv[1]))
        return f"{kinds}; first: {first_message(self.first_error[1] if self.first_error else '')}"

    def _check_outcome(self, measured: int, errors: dict) -> None:
        """TuningError when every trial of this run failed; a TuningWarning when most did."""
        failed = sum(errors.values())
        if not measured or failed * 2 <= measured:
            return
        workload = f"{self.task.name} {list(self.task.args)}"
        if failed == measured:
            raise TuningError(f"all {measured} trials of {workload} failed "
                              f"({self.failure_summary(errors)})", errors)
        warnings.warn(f"{failed} of {measured} trials of {workload} failed "
                      f"({self.failure_summary(errors)})", TuningWarning, stacklevel=3)

    def _tune_loop(self, until: int, measure_option: MeasureOption,
                   callbacks: Sequence[Callable], early_stopping: int | None,
                   t_start: float) -> None:
        """Measure batches until the tuner has `until` trials (those of earlier calls too)."""
        last_improve = self.trials
        while self.trials < until and (self.has_next() or self._settled):
            n = min(self.batch_size, until - self.trials)
            idxs = [i for i in self.next_batch(n) if i not in self.visited][:n]
            if not idxs and not self._settled:
                break
            self.visited.update(idxs)
            inputs = [MeasureInput(self.task, self.space.get(i)) for i in idxs]
            self._before_measuring()
            t0 = time.perf_counter()
            results = measure_batch(measure_option, inputs, streamer(self, inputs, callbacks))
            self.time_measure += time.perf_counter() - t0
            inputs, results = self._with_settled(inputs, results)
            if self._account(inputs, results):
                last_improve = self.trials
            self.update(inputs, results)
            self.progress.append((self.trials,
                                  self.time_total + time.perf_counter() - t_start))
            for cb in callbacks:
                cb(self, inputs, results)
            if early_stopping is not None and self.trials - last_improve >= early_stopping:
                break

    def _before_measuring(self) -> None:
        """Called before each batch is measured: a tuner whose helper processes are starting
        waits for them (XGBTuner)."""

    def _settle(self, idx: int, error: TemplateTimeout) -> None:
        """Config `idx` timed out instantiating here: a build error record (with the next
        batch), never measured."""
        if idx not in self.visited and idx not in self._settled:
            self._settled[idx] = MeasureResult([], BUILD_ERROR, f"build timed out: {error}",
                                               self.time_limit or 0.0, time.time(), None)

    def _with_settled(self, inputs: list, results: list) -> tuple[list, list]:
        settled, self._settled = self._settled, {}
        self.visited.update(settled)
        return (inputs + [MeasureInput(self.task, self.space.get(i)) for i in settled],
                results + list(settled.values()))

    def _prepare_reference(self, option: MeasureOption) -> None:
        """Without a numpy reference, the task's reference_schedule kernel is the reference."""
        runner = option.runner
        if self.task.template.reference is not None or not runner.check_correctness or \
                self.task.key in runner._reference_kernels:
            return
        import os

        import tensorlang as tl

        s, args = self.task.reference_schedule()
        os.makedirs(option.builder._dir, exist_ok=True)
        path = os.path.join(option.builder._dir, f"reference-{abs(hash(self.task.key))}.tlm")
        tl.build(s, args, name="reference").save(path)
        runner.set_reference_kernel(self.task.key, path)

    def _account(self, inputs, results) -> bool:
        improved = False
        for inp, res in zip(inputs, results):
            self.trials += 1
            if res.valid:
                self._costs[inp.config.index] = res.cost
                flops = self.task.flop / res.cost
                if flops > self.best_flops:
                    self.best_flops, self.best_cost = flops, res.cost
                    self.best_config = inp.config
                    improved = True
            else:
                self.errors[res.error] = self.errors.get(res.error, 0) + 1
                if self.first_error is None:
                    self.first_error = (res.error, res.error_msg)
            self.curve.append(self.best_flops / 1e9)
        return improved

    def _random_unvisited(self, n: int, exclude: set | None = None) -> list[int]:
        exclude = exclude or set()
        size = len(self.space)
        out: list[int] = []
        left = size - len(self.visited) - len(exclude)
        if left <= 4 * n:  # nearly exhausted: enumerate what is left
            rest = [i for i in range(size) if i not in self.visited and i not in exclude]
            self.rng.shuffle(rest)
            return rest[:n]
        while len(out) < n:
            i = int(self.rng.integers(size))
            if i not in self.visited and i not in exclude and i not in out:
                out.append(i)
        return out


def _index_range(range_idx, size: int, who: str) -> range:
    """TVM's range_idx=(first, last), both included: the part of the space a tuner covers."""
    if range_idx is None:
        return range(size)
    first, last = (int(x) for x in range_idx)
    if not 0 <= first <= last < size:
        raise ValueError(f"{who}: range_idx must be (first, last) with 0 <= first <= last < "
                         f"{size} (the space's size), got {tuple(range_idx)}")
    return range(first, last + 1)


class GridSearchTuner(Tuner):
    """Every config in index order (those of TVM's range_idx=(first, last) when given)."""

    def __init__(self, task: Task, batch_size: int = 16, seed: int | None = None,
                 range_idx=None):
        super().__init__(task, batch_size, seed)
        self._range = _index_range(range_idx, len(self.space), "GridSearchTuner")
        self._next = self._range.start

    def next_batch(self, n: int) -> list[int]:
        out = []
        while len(out) < n and self._next < self._range.stop:
            if self._next not in self.visited:
                out.append(self._next)
            self._next += 1
        return out

    def has_next(self) -> bool:
        return any(i not in self.visited for i in range(self._next, self._range.stop))


class RandomTuner(Tuner):
    """Uniformly random configs, without replacement (from TVM's range_idx=(first, last))."""

    def __init__(self, task: Task, batch_size: int = 16, seed: int | None = None,
                 range_idx=None):
        super().__init__(task, batch_size, seed)
        self._range = _index_range(range_idx, len(self.space), "RandomTuner")

    def next_batch(self, n: int) -> list[int]:
        if len(self._range) == len(self.space):
            return self._random_unvisited(n)
        rest = [i for i in self._range if i not in self.visited]
        self.rng.shuffle(rest)
        return rest[:n]

    def has_next(self) -> bool:
        if len(self._range) == len(self.space):
            return super().has_next()
        return any(i not in self.visited for i in self._range)


class GATuner(Tuner):
    """A genetic algorithm over the knobs (TVM's GATuner): a generation of `pop_size` configs
    is measured; the next keeps the `elite_num` fastest as parents and breeds new configs from
    parents picked with probability proportional to their throughput, each knob taken from
    either parent and then, with probability `mutation_prob`, set to a random value."""

    def __init__(self, task: Task, pop_size: int = 100, elite_num: int = 3,
                 mutation_prob: float = 0.1, batch_size: int = 16, seed: int | None = None):
        super().__init__(task, batch_size, seed)
        if pop_size < 1 or not 0 <= elite_num <= pop_size:
            raise ValueError(f"GATuner: need pop_size >= 1 and 0 <= elite_num <= pop_size, got "
                             f"pop_size={pop_size}, elite_num={elite_num}")
        if not 0.0 <= mutation_prob <= 1.0:
            raise ValueError(f"GATuner: mutation_prob must be in [0, 1], got {mutation_prob}")
        self.pop_size = min(int(pop_size), len(self.space))
        self.elite_num = int(elite_num)
        self.mutation_prob = float(mutation_prob)
        self._queue: list[int] = []  # this generation's configs not measured yet
        self._scores: dict[int, float] = {}  # measured members of the parents' pool -> FLOP/s

    def next_batch(self, n: int) -> list[int]:
        if not any(i not in self.visited for i in self._queue):
            self._queue = self._next_generation()
        out = [i for i in self._queue if i not in self.visited][:n]
        self._queue = [i for i in self._queue if i not in out]
        return out

    def update(self, inputs, results) -> None:
        for inp, res in zip(inputs, results):
            self._scores[inp.config.index] = self.task.flop / res.cost if res.valid else 0.0

    def _next_generation(self) -> list[int]:
        if not self._scores:  # the first generation: random
            return self._random_unvisited(self.pop_size)
        ranked = sorted(self._scores, key=lambda i: -self._scores[i])
        weights = np.array([self._scores[i] for i in ranked])
        prob = weights / weights.sum() if weights.sum() > 0 else None
        children: list[int] = []
        for _ in range(20 * self.pop_size):
            if len(children) == self.pop_size:
                break
            a, b = self.rng.choice(len(ranked), size=2, p=prob)
            child = self._crossover(ranked[int(a)], ranked[int(b)])
            if child not in self.visited and child not in children:
                children.append(child)
        children += self._random_unvisited(self.pop_size - len(children), exclude=set(children))
        self._scores = {i: self._scores[i] for i in ranked[:self.elite_num]}
        return children

    def _crossover(self, a: int, b: int) -> int:
        pa, pb = self.space.point(a), self.space.point(b)
        child = [x if self.rng.random() < 0.5 else y for x, y in zip(pa, pb)]
        for d, n in enumerate(self.space.dims):
            if self.rng.random() < self.mutation_prob:
                child[d] = int(self.rng.integers(n))
        return self.space.index_from_point(child)


class XGBTuner(Tuner):
    """Cost-model guided search (see the module doc).

    epsilon: share of each batch picked at random (half of it until `warmup` configs were
    measured); include_fallback: measure the template's
    default config in the first batch; search_ratio: the annealing's time budget per
    batch as a share of the previous batch's measuring time (keeps the tuner's own overhead
    small); population / temperature: simulated annealing parameters; feature_workers:
    processes featurizing the search's new candidates (None: one per CPU; 0 or 1: in this
    process), started on the first search and stopped when tune() returns.

    loss_type: the model's objective, TVM's choice: "reg" (regression on throughput normalized
    to the best seen; the default) or "rank" (xgboost's pairwise ranking). TVM's other
    arguments (keyword only): plan_size is batch_size (configs planned per model fit),
    num_threads is feature_workers, feature_type "itervar" and optimizer "sa" are what this
    tuner does (others are refused), log_interval is accepted (the progress bar reports)."""

    _OBJECTIVES: ClassVar[dict[str, str]] = {"reg": "reg:squarederror",
                                             "rank": "rank:pairwise"}

    def __init__(self, task: Task, batch_size: int = 16, seed: int | None = None,
                 epsilon: float = 0.05, search_ratio: float = 0.1, population: int = 64,
                 temperature: float = 0.5, n_rounds: int = 60, include_fallback: bool = True,
                 warmup: int = 48, feature_workers: int | None = None,
                 loss_type: str = "reg", *, plan_size: int | None = None,
                 num_threads: int | None = None, feature_type: str = "itervar",
                 optimizer: str = "sa", diversity_filter_ratio: float | None = None,
                 log_interval: int | None = None):
        if loss_type not in self._OBJECTIVES:
            raise ValueError(f"XGBTuner: loss_type must be one of {sorted(self._OBJECTIVES)} "
                             f"(TVM's 'rank-binary' is not supported), got {loss_type!r}")
        _refuse_tvm_choice("feature_type", feature_type, "itervar",
                           "features are per-store loop-nest statistics")
        _refuse_tvm_choice("optimizer", optimizer, "sa", "the search is simulated annealing")
        _refuse_tvm_choice("diversity_filter_ratio", diversity_filter_ratio, None,
                           "no diversity filter")
        del log_interval  # TVM logs every log_interval trials; the progress bar reports here
        super().__init__(task, batch_size if plan_size is None else plan_size, seed)
        self.loss_type = loss_type
        if num_threads is not None and feature_workers is None:
            feature_workers = num_threads
        import os

        self.feature_workers = int(os.cpu_count() or 1) if feature_workers is None \
            else int(feature_workers)
        self._pool: FeaturePool | None = None
        self.warmup = warmup
        # The template's default config is its author's best guess: measuring it in the first
        # batch guarantees the result is never worse than the untuned build.
        self.include_fallback = include_fallback
        self.epsilon = epsilon
        self.search_ratio = search_ratio
        self.population = population
        self.temperature = temperature
        self.n_rounds = n_rounds
        self._feat: dict[int, np.ndarray | None] = {}
        self._x: list[np.ndarray] = []  # this workload's measured features
        self._flops: list[float] = []
        self._tx: list[np.ndarray] = []  # transferred (other workloads), y already normalized
        self._ty: list[float] = []
        self._model = None
        self._last_measure = 2.0
        self.time_model = 0.0
        self.time_search = 0.0
        self.search_stats = {"featurized": 0, "illegal_pruned": 0, "scored": 0}
        self._legal: dict[int, bool] = {}  # True: passed the legality checks; False: pruned
        self._feat_cost = (0.0, 0)  # (wall seconds, configs) of featurize(): cost per config
        # configs ranked by one search, measured over the next batches (see next_batch); 0:
        # each batch searches anew (tune_tasks, whose batch is a whole plan)
        self.plan_ahead = 0
        self._planned: list[int] = []

    # ---------------------------------------------------------------- features & model
    def features(self, idx: int) -> np.ndarray | None:
        if idx not in self._feat:  # cached; None: the template refuses the config
            try:
                f = config_features(self.task, self.space.get(idx))
            except TemplateTimeout as e:
                f = e
            self._store_features(idx, f)
        return self._feat[idx]

    def _store_features(self, idx: int, f) -> None:
        """f: the features, None (the template refuses the config) or a TemplateTimeout."""
        if isinstance(f, TemplateTimeout):
            self._settle(idx, f)
            f = None
        self._feat[idx] = f
        self.search_stats["featurized"] += 1
        if f is None:  # the template refused it, or hangs on it
            self._prune(idx)

    def _prune(self, idx: int) -> None:
        """An illegal config: never proposed again, never measured."""
        if self._legal.get(idx) is not False:
            self._legal[idx] = False
            self.search_stats["illegal_pruned"] += 1
        self.visited.add(idx)

    # below this many new configs, shipping them to the workers costs more than it saves
    _PARALLEL_MIN = 8
    # configs featurized before their mean cost decides whether the rest of a space fits in
    # one search (their cost varies with the loop nest: a tile's unrolled loops...)
    _COST_SAMPLE = 16

    def featurize(self, idxs: Sequence[int], deadline: float | None = None) -> None:
        """Compute (and cache) the features of configs `idxs`: in the worker processes when
        there are enough of them, else here, stopping at `deadline` (perf_counter seconds;
        the parallel path finishes its round: one round is a population / workers configs).
        The first call starts the workers; until they are up (the first batch's measurements
        hide their start), configs are featurized here."""
        todo = [i for i in dict.fromkeys(idxs) if i not in self._feat]
        t0, n0 = time.perf_counter(), len(self._feat)
        try:
            if self.feature_workers > 1 and len(todo) >= self._PARALLEL_MIN:
                if self._pool is None:
                    self._pool = FeaturePool(self.task, self.feature_workers, self.time_limit)
                    self._pool.start()
                if self._pool.ready():
                    for i, f in zip(todo, self._pool.map(todo)):
                        self._store_features(i, f)
                    return
            for i in todo:
                if deadline is not None and time.perf_counter() > deadline:
                    return
                self.features(i)
        finally:
            seconds, count = self._feat_cost
            self._feat_cost = (seconds + time.perf_counter() - t0,
                               count + len(self._feat) - n0)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _before_measuring(self) -> None:
        # feature workers starting (each spawns and imports tensorlang: about a second of CPU
        # on this machine) beside a measurement take the cores from the kernel: at 2 threads
        # on 2 cores, a default conv of 60 us was recorded at 5 ms, the first trials of each
        # task that tune_tasks started a pool for
        if self._pool is not None:
            self._pool.wait_ready(POOL_START_WAIT_S)

    def load_history(self, records: Sequence[Record]) -> None:
        with instantiate_time_limit(self.time_limit):
            self._learn_history(records)

    def relearn_transfer(self, records: Sequence[Record]) -> None:
        """Learn the other workloads' records anew from `records` (a TaskScheduler's log,
        which its other tasks' rounds have grown since this tuner was built), refit, and drop
        the configs planned with the older model. The labels are normalized per workload by
        its best, which a newer record can change: so all of them, not only the new ones."""
        with instantiate_time_limit(self.time_limit):
            self._tx, self._ty = [], []
            self._learn_history([r for r in records if r.key != self.task.key])
        self._planned = []

    def learn_records(self, records: Sequence[Record]) -> None:
        """Only the second half of load_history: the model learns from `records` (this
        workload's and, as transfer, other workloads' of the same template) and refits, but
        their configs are not marked measured, so the search may propose one again (TVM's
        XGBModel.update_from_file, without PreloadMeasuredStates). Their illegal configs are
        pruned all the same: they are never worth measuring."""
        with instantiate_time_limit(self.time_limit):
            self._learn_history(records, mark_measured=False)

    def _learn_history(self, records: Sequence[Record], mark_measured: bool = True) -> None:
        if mark_measured:
            super().load_history(records)
        by_key: dict[str, list[Record]] = {}
        for r in records:
            if r.in_model:  # (see Tuner.load_history)
                continue
            if r.workload.get("name") == self.task.name and r.target == self.task.target:
                by_key.setdefault(r.key, []).append(r)
        for key, recs in by_key.items():
            task = self.task if key == self.task.key else _cached_task(
                self.task.name, recs[0].workload["args"], self.task.target)
            if task is None:
                continue
            xs, fl = [], []
            for r in recs:
                try:
                    idx = task.config_space.index_of(r.config["entity"])
                except ValueError:
                    continue
                if r.result.get("error") == ILLEGAL:
                    # not a slow kernel but none (features come from unchecked schedules: they
                    # would teach the model a throughput of 0 for it)
                    if task is self.task:
                        self._prune(idx)
                    continue
                f = self.features(idx) if task is self.task else _transfer_features(task, idx)
                if f is None:
                    continue
                xs.append(f)
                fl.append(task.flop / r.cost if r.valid else 0.0)
            if task is self.task:
                self._x.extend(xs)
                self._flops.extend(fl)
            elif fl and max(fl) > 0:
                m = max(fl)
                self._tx.extend(xs)
                self._ty.extend(v / m for v in fl)
        self._fit()

    def update(self, inputs, results) -> None:
        t0 = time.perf_counter()
        for inp, res in zip(inputs, results):
            if res.error == ILLEGAL:  # as in load_history
                self._prune(inp.config.index)
                continue
            f = self.features(inp.config.index)
            if f is None:
                continue
            self._x.append(f)
            self._flops.append(self.task.flop / res.cost if res.valid else 0.0)
        self._last_measure = max(0.5, self.time_measure / max(1, self.trials) * len(inputs))
        self._fit()
        self.time_model += time.perf_counter() - t0

    def _fit(self) -> None:
        import xgboost as xgb

        if not self._x and not self._tx:
            return
        m = max(self._flops) if self._flops and max(self._flops) > 0 else 1.0
        x = np.array(self._x + self._tx)
        y = np.array([v / m for v in self._flops] + self._ty)
        if len(x) < 4 or y.max() <= 0:
            return
        # by default reg:squarederror on throughput normalized to the best seen: ranks configs
        # by predicted speed without relying on xgboost's pairwise ranking (whose semantics
        # changed in 2.0); loss_type="rank" asks for that ranking, as TVM's option does.
        # one thread, as the training: the default (every core) costs more in thread start-up
        # than the copy of a few hundred rows
        dtrain = xgb.DMatrix(x, label=y, nthread=1)
        params = {"objective": self._OBJECTIVES[self.loss_type], "max_depth": 6, "eta": 0.2,
                  "subsample": 1.0, "min_child_weight": 1, "nthread": 1, "verbosity": 0,
                  "seed": int(self.rng.integers(1 << 30))}
        self._model = xgb.train(params, dtrain, num_boost_round=self.n_rounds)

    def predict(self, feats: list[np.ndarray]) -> np.ndarray:
        if self._model is None or not feats:
            return self.rng.random(len(feats))
        # in place: the same predictions as through a DMatrix, which costs ~40x more to build
        # than to predict a search round's candidates from (~6 ms vs 0.15 ms for 64)
        return self._model.inplace_predict(np.array(feats))

    # ---------------------------------------------------------------- search
    def _neighbor(self, idx: int) -> int:
        point = self.space.point(idx)
        dims = self.space.dims
        movable = [d for d, n in enumerate(dims) if n > 1]
        if not movable:
            return idx
        d = movable[int(self.rng.integers(len(movable)))]
        # mostly a step to an adjacent value (split factors are sorted), sometimes a jump
        if self.rng.random() < 0.7:
            point[d] = int(np.clip(point[d] + (1 if self.rng.random() < 0.5 else -1), 0,
                                   dims[d] - 1))
        else:
            point[d] = int(self.rng.integers(dims[d]))
        return self.space.index_from_point(point)

    def next_batch(self, n: int) -> list[int]:
        """The next n configs: the rest of the last plan while it holds n unmeasured ones,
        else a new plan of max(n, plan_ahead) (one search ranks them all: a TaskScheduler's
        rounds of a few trials each would otherwise pay a whole search per round). Without a
        model yet, only n (random picks planned ahead would outlive the first fit)."""
        planned = [i for i in self._planned if i not in self.visited]
        if len(planned) < n or self._model is None:
            planned = self._plan(n if self._model is None else max(n, self.plan_ahead))
        self._planned = planned[n:]
        return planned[:n]

    def _plan(self, n: int) -> list[int]:
        t0 = time.perf_counter()
        try:
            # the fallback first, also when a model transferred from other workloads is
            # already there (tune_tasks): the best record is then never worse than the default
            first = []
            if self.include_fallback and not self.trials:
                fb = self.space.fallback_index()
                if fb not in self.visited and self._is_legal(fb):
                    first = [fb]
            n -= len(first)
            if self._model is None:
                return first + self._legal_random(n, exclude=set(first))
            # while the model has seen few configs it ranks poorly: explore more (half the batch
            # random below `warmup` measurements), then settle to epsilon
            eps = self.epsilon if len(self._x) >= self.warmup else max(self.epsilon, 0.5)
            n_random = int(n * eps)
            if self.rng.random() < n * eps - n_random:
                n_random += 1
            # the best-ranked candidates that pass the legality checks (the search scored
            # them unchecked)
            picked = []
            for i in self._search(n - n_random):
                if len(picked) == n - n_random:
                    break
                if i not in first and self._is_legal(i):
                    picked.append(i)
            randoms = self._legal_random(n - len(picked), exclude={*picked, *first})
            return first + _spread(picked, randoms)
        finally:
            self.time_search += time.perf_counter() - t0

    def _is_legal(self, idx: int) -> bool:
        """Whether config `idx` passes every legality check (checked once; an illegal config
        is pruned)."""
        ok = self._legal.get(idx)
        if ok is None:
            refused = idx in self._feat and self._feat[idx] is None  # by the template
            try:
                ok = not refused and self.task.is_legal(self.space.get(idx))
            except TemplateTimeout as e:
                self._settle(idx, e)
                ok = False
            if ok:
                self._legal[idx] = True
            else:
                self._prune(idx)
        return ok

    def _legal_random(self, n: int, exclude: set | None = None) -> list[int]:
        """n random unvisited configs that pass the legality checks (to measure)."""
        return self._random_featurized(n, exclude, check=True)

    def _random_featurized(self, n: int, exclude: set | None = None,
                           check: bool = False) -> list[int]:
        """n random unvisited configs that the template accepts (features cached), and with
        check, that pass the legality checks too."""
        out: list[int] = []
        exclude = set(exclude or ())
        tries = 0
        while len(out) < n and self.has_next() and tries < 50 * max(n, 1):
            fresh = self._random_unvisited(n - len(out), exclude | set(out))
            if not fresh:  # every unvisited config is already excluded or picked
                break
            self.featurize(fresh)
            for i in fresh:
                tries += 1
                if self._feat[i] is not None and (not check or self._is_legal(i)):
                    out.append(i)
                else:
                    exclude.add(i)
        return out

    def _search(self, n: int) -> list[int]:
        """Unvisited configs ranked by the model, best first (none when n <= 0): simulated
        annealing within the search's time budget, or, when featurizing the rest of the
        space fits in that budget, every config (the exact ranking, and the budget unspent)."""
        if n <= 0:
            return []
        budget = max(0.3, self.search_ratio * self._last_measure)
        return self._rank_all() if self._rest_fits(budget) else self._anneal(budget)

    def _rest_fits(self, seconds: float) -> bool:
        """Whether featurizing the configs not featurized yet takes at most `seconds`."""
        left = len(self.space) - len(self._feat)
        spent, count = self._feat_cost
        return left == 0 or (count >= self._COST_SAMPLE and left * spent / count <= seconds)

    def _rank_all(self) -> list[int]:
        """Every unvisited config the template accepts, ranked by the model."""
        self.featurize([i for i in range(len(self.space)) if i not in self._feat])
        cands = [i for i, f in self._feat.items() if f is not None and i not in self.visited]
        pred = self.predict([self._feat[i] for i in cands])
        self.search_stats["scored"] += len(cands)
        return [cands[j] for j in np.argsort(-pred, kind="stable")]

    def _anneal(self, budget: float) -> list[int]:
        deadline = time.perf_counter() + budget
        # start from the best measured configs and random ones
        scores: dict[int, float] = {}
        seeds: list[int] = []
        measured = [i for i in self.visited if self._feat.get(i, None) is not None
                    and self._legal.get(i) is not False]
        if measured:
            pred = self.predict([self._feat[i] for i in measured])
            order = np.argsort(-pred)[: self.population // 2]
            seeds = [measured[j] for j in order]
        seeds += self._random_featurized(self.population - len(seeds), exclude=set(seeds))
        cur = list(seeds)
        cur_s = list(self.predict([self._feat[i] for i in cur]))
        for i, sc in zip(cur, cur_s):
            scores[i] = float(sc)
        temp = self.temperature
        while time.perf_counter() < deadline:
            # in a small space the walk soon finds few new configs: once featurizing all the
            # rest fits in the time left, rank them all instead
            if self._rest_fits(deadline - time.perf_counter()):
                return self._rank_all()
            props = [self._neighbor(i) for i in cur]
            new = [p for p in dict.fromkeys(props) if p not in scores]
            self.featurize(new, deadline)
            feats = []
            legal_new = []
            for p in new:
                if p not in self._feat:  # the deadline came first
                    continue
                f = self._feat[p]
                if f is None:
                    scores[p] = -math.inf
                else:
                    feats.append(f)
                    legal_new.append(p)
            for p, sc in zip(legal_new, self.predict(feats)):
                scores[p] = float(sc)
            self.search_stats["scored"] += len(legal_new)
            for k, p in enumerate(props):
                sp = scores.get(p)
                if sp is None or sp == -math.inf:
                    continue
                delta = sp - cur_s[k]
                if delta > 0 or self.rng.random() < math.exp(delta / max(temp, 1e-6)):
                    cur[k], cur_s[k] = p, sp
            temp *= 0.9
        return sorted((i for i, s in scores.items() if s > -math.inf and i not in self.visited),
                      key=lambda i: -scores[i])


def _refuse_tvm_choice(name: str, value, supported, what: str) -> None:
    if value != supported:
        raise ValueError(f"XGBTuner: TVM's {name}={value!r} is not supported ({what}; only "
                         f"{name}={supported!r})")


_TASKS: dict[tuple, Task | None] = {}

# Features of other workloads' configs, for transfer learning: tune_tasks gives each of a
# model's tasks the records of all the tasks before it, which would featurize every record
# again for every later task (quadratic in the tasks). Bounded (a few KB per entry).
_TRANSFER_FEATURES: dict[tuple[str, int], np.ndarray | None] = {}
_TRANSFER_FEATURES_SIZE = 20000


def _spread(ranked: list[int], randoms: list[int]) -> list[int]:
    """The two lists merged, the ranked first, so that every prefix holds about its share of
    the random picks: a TaskScheduler measures a plan over several short rounds, and with the
    random picks at its end a task's first rounds explored nothing (ResNet-50-shaped, one
    conv's first 28 trials in a scheduler all had oc_blocks 2 or 4, as its default, while
    oc_blocks 1 ran 20% faster)."""
    out, i, j = [], 0, 0
    total = len(ranked) + len(randoms)
    for k in range(1, total + 1):
        if j < len(randoms) and (i == len(ranked) or (j + 1) * total <= k * len(randoms)):
            out.append(randoms[j])
            j += 1
        else:
            out.append(ranked[i])
            i += 1
    return out


def _transfer_features(task: Task, idx: int) -> np.ndarray | None:
    key = (task.key, idx)
    if key not in _TRANSFER_FEATURES:
        if len(_TRANSFER_FEATURES) >= _TRANSFER_FEATURES_SIZE:
            _TRANSFER_FEATURES.clear()
        try:
            f = config_features(task, task.config_space.get(idx))
        except TemplateTimeout:
            f = None  # another workload's config: nothing to learn from it
        _TRANSFER_FEATURES[key] = f
    return _TRANSFER_FEATURES[key]


def _cached_task(name: str, args, target: str) -> Task | None:
    """The task of another workload's records (for transfer learning), or None when the
    template refuses the records' arguments (a TensorlangError, or a TypeError / ValueError:
    arguments from a log written by another version): that is warned once, naming the
    workload and the error, and the records are not learned from. Any other exception is a
    bug and propagates."""
    key = (name, repr(args), target)
    if key not in _TASKS:
        try:
            _TASKS[key] = create_task(name, tuple(args), target)
        except (TensorlangError, TypeError, ValueError) as e:
            _TASKS[key] = None
            warnings.warn(f"tuning history: records of {name}{tuple(args)!r} are not learned "
                          f"from: the template refuses these arguments ({type(e).__name__}: "
                          f"{e})", stacklevel=3)
    return _TASKS[key]


def share_feature_workers(tuner: Tuner, owner: FeaturePool | None,
                          time_limit: float | None) -> FeaturePool | None:
    """Give an XGB tuner that featurizes in processes a view of `owner`'s feature workers
    (started here, from the tuner's task, when `owner` is None), so that the tasks of one
    tuning run start one set of processes between them. Returns the owner (None while no
    tuner needed one)."""
    if not (isinstance(tuner, XGBTuner) and tuner.feature_workers > 1 and tuner._pool is None):
        return owner
    if owner is None:
        owner = FeaturePool(tuner.task, tuner.feature_workers, time_limit)
        owner.start()
    tuner._pool = SharedFeaturePool(tuner.task, owner)
    return owner


def __getattr__(name: str):
    # an AutoTVM tuner we do not have: the error says what to use (tensorlang/tvm_names.py)
    from tensorlang.tvm_names import AUTOTVM_NAMES, missing

    raise missing("module 'tensorlang.autotune.tuner'", name, AUTOTVM_NAMES)
