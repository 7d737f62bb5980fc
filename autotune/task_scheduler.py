"""TaskScheduler: tune a whole model's tasks under one budget, round by round, giving each round
to the task whose next trials are expected to shorten the model's end-to-end latency most.

The model's latency is estimated as sum_i w_i * c_i: task i's weight w_i (how many times the
model runs its kernel: ``GraphTask.weight``) times its best measured time c_i. A round is one
tuner batch of ``round_trials`` trials of one task. The expected decrease of the model's latency
from task i's next round (Ansor's gradient, in our terms) is

    w_i * (alpha * backward_i + (1 - alpha) * forward_i)

- backward_i: how fast c_i fell over the task's last ``window`` rounds (seconds per trial),
  times a round's trials;
- forward_i: what the task has still to find (its headroom), of which a round is expected to
  find the share round / trials_i (a task tried little finds much per trial: the improvement
  still expected shrinks like 1/trials). The headroom is the larger of
  - the gap to the throughput of similar tasks (same template and graph op): c_i - beta *
    flop_i / best similar FLOP/s (a conv slower per FLOP than the model's other convs can
    likely catch up with them), and
  - rho * c_i, rho the mean relative improvement the model's tasks made since their first
    round (a task as fast per FLOP as its peers, or with none, is expected to improve as much
    as the typical task did).

Why (benchmarks/scheduler_replay.py, ResNet-50-shaped logs of heaviest-first's trials): after a
task's first round, its gap to its peers' throughput correlates with what it still finds (0.4-0.7,
relative), its improvement so far does not (0.03-0.05); the former forward term, c_i * round /
trials_i, gave each task trials in proportion to its weighted time. A task's first round is
``first_round_trials`` trials (its default config and the tuner's first pick: on those logs the
first pick alone held about half of all the trials' weighted gain), so the first pass over the
tasks costs less of the budget. Replayed, both together need 48-62% of heaviest-first's budget
to reach its estimate at 10 trials per task where the former rule needed 57-75%, and 65-85%
at 5 (85-104%); the same or less at 20 (84-93%, was 92-94%).

Every task gets its first round first (heaviest, by w_i x FLOPs, first); then the task with the
largest expected decrease, except that with probability ``epsilon`` a random live task
(exploration).
A task stops when its best improved by less than ``min_improvement`` over its last
``flatten_rounds`` rounds (flattened), or its space is exhausted, or it reached
``max_trials_per_task``. Each candidate's record is appended to the log as it finishes (the
tuners stream to log_to_file), and records already in the log count (trials and best) and are
never measured again, so ``tune`` resumes a killed run, losing only the candidates in flight. After each round the estimated latency is
printed and one JSON line is appended to ``<log>.curve.jsonl``: round, its task, its new
trials, trials in all, time (seconds spent in rounds, earlier runs' included), estimated
latency (null while a task has no valid record), each task's best (seconds, or null).

When the budget is spent (or every task stopped, or the time is up), each task tuned since its
last re-measurement has its ``remeasure_top`` fastest configs and its default measured again,
interleaved, as ``tune_tasks`` ends each task (Tuner.remeasure): the log's best for the task
is their winner, not the luckiest trial. Re-measurements are not trials (the budget counts
trials only) and take seconds: about ``(remeasure_top + 1) x remeasure_rounds x`` the runner's
repeats kernel calls per task. The curve gets one more line (task "re-measured").
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .arguments import check_seed
from .callbacks import log_to_file
from .features import FeaturePool
from .measure import FLUSH_BYTES, LocalBuilder, LocalRunner, MeasureOption
from .measure import measure_option as _measure_option
from .record import Record, load_records, make_record
from .task import Task
from .tune import TUNERS, _logged_failure
from .tuner import (
    REMEASURE_ROUNDS,
    Tuner,
    TuningError,
    TuningWarning,
    XGBTuner,
    check_remeasure,
    own_records,
    share_feature_workers,
)

# configs an XGB tuner ranks in one search, measured over the task's next rounds while no other
# task's round adds records to learn from (then it relearns and plans anew: _tuner_of)
PLAN_AHEAD = 16


def model_measure_option(repeat: int = 10, timeout: float = 10.0,
                         n_parallel: int | None = None,
                         flush_bytes: int = FLUSH_BYTES) -> MeasureOption:
    """How the TaskScheduler measures by default: each of ``repeat`` timed calls starts from
    evicted caches, with only the arguments a task names in ``warm_args`` (a graph task: its
    non-constant inputs) read back first, since inside a model a kernel's weights were evicted
    by the other kernels since its last call. Back-to-back calls keep them cached and time
    what the model never runs (ResNet-50-shaped at 112x112, one thread: late-stage convs
    1.5-2.5x and the dense 5x slower in a run than back to back). ``flush_bytes``: the bytes
    each eviction writes (graph.calibrate_flush measures the size that fits a model here)."""
    return _measure_option(LocalBuilder(n_parallel=n_parallel),
                           LocalRunner(number=1, repeat=repeat, flush_cache=True,
                                       timeout=timeout, flush_bytes=flush_bytes))


@dataclass
class _TaskState:
    """What the scheduler knows of one task."""

    task: Task
    weight: float
    label: str  # "<index>:<op or template>", the task's name in printed lines and the curve
    trials: int = 0  # in the log before this run plus measured since
    best: float = math.inf  # seconds of the best valid record
    # (trials, best) after each of the task's rounds (the first point: what the log held)
    history: list[tuple[int, float]] = field(default_factory=list)
    # best after the task's first round (from the log's first trials on a resumed run): the
    # typical improvement counts from it
    first_best: float = math.inf
    rounds: int = 0  # rounds run in this process
    stale_rounds: int = 0  # consecutive rounds without an improvement of min_improvement
    done: str = ""  # why the task stopped ("flattened", "space exhausted", ...), "" while live
    tuner: Tuner | None = None
    learned: int = 0  # records of the log its tuner has learned from
    settled: bool = False  # its best is a re-measurement's, made after its last trial


class TaskScheduler:
    """Tune `tasks` into `log_file` under one trial and/or time budget (see the module doc).

    task_weights: how many times the model runs each task's kernel (default: each task's
    ``weight`` attribute, as ``graph.extract_tasks`` sets it, else 1). tuner: "xgb", "ga",
    "random" or "grid". round_trials: trials per round (the tuner's batch); first_round_trials:
    those of a task's first round (at most round_trials). measure_option: as
    for a tuner (default: model_measure_option(), kernels timed from the caches a model run
    leaves them, closed when tune returns; its flush size is the default: pass
    ``model_measure_option(flush_bytes=graph.calibrate_flush(g).flush_bytes)`` to fit the
    model on this machine, as ``tensorlang tune model.onnx`` does). progress:
    print one line per round (to `file`, default stdout). alpha, beta, window, epsilon: the
    gradient's parameters; flatten_rounds, min_improvement: when a task has flattened;
    max_trials_per_task: a cap per task (logged trials included); seed: the exploration's and
    the tuners' random generator. remeasure_top, remeasure_rounds: as for tune_tasks, at the
    end of ``tune`` (module doc); 0: no re-measurement."""

    def __init__(self, tasks: Sequence[Task], task_weights: Sequence[float] | None = None,
                 log_file: str | os.PathLike = "tuning.jsonl",
                 measure_option: MeasureOption | None = None, tuner: str = "xgb",
                 round_trials: int = 16, first_round_trials: int = 2, transfer: bool = True,
                 progress: bool = True, alpha: float = 0.2, beta: float = 1.0, window: int = 3,
                 epsilon: float = 0.05,
                 flatten_rounds: int = 4, min_improvement: float = 0.01,
                 max_trials_per_task: int | None = None, seed: int | None = None,
                 remeasure_top: int = 3, remeasure_rounds: int = REMEASURE_ROUNDS, file=None):
        tasks = list(tasks)
        if not tasks:
            raise ValueError("TaskScheduler: no tasks to tune")
        for t in tasks:
            if not isinstance(t, Task):
                raise TypeError(f"TaskScheduler: tasks must be autotune Tasks, got "
                                f"{type(t).__name__}")
        if len({t.key for t in tasks}) != len(tasks):
            raise ValueError("TaskScheduler: two tasks have the same workload; give each "
                             "workload once with its weight")
        if tuner not in TUNERS:
            raise ValueError(f"TaskScheduler: tuner must be one of {sorted(TUNERS)}, got "
                             f"{tuner!r}")
        weights = _weights(tasks, task_weights)
        _check_positive_int("round_trials", round_trials)
        _check_positive_int("first_round_trials", first_round_trials)
        _check_positive_int("window", window)
        _check_positive_int("flatten_rounds", flatten_rounds)
        if max_trials_per_task is not None:
            _check_positive_int("max_trials_per_task", max_trials_per_task)
        check_remeasure("TaskScheduler", remeasure_top, remeasure_rounds)
        for name, value, low, high in (("alpha", alpha, 0, 1), ("epsilon", epsilon, 0, 1),
                                       ("min_improvement", min_improvement, 0, 1),
                                       ("beta", beta, 0, math.inf)):
            if not isinstance(value, (int, float)) or not low <= value <= high:
                raise ValueError(f"TaskScheduler: {name} must be a number in [{low}, {high}], "
                                 f"got {value!r}")
        self.log_file = os.fspath(log_file)
        self.curve_file = self.log_file + ".curve.jsonl"
        self.tuner_name = tuner
        self.measure_option = measure_option
        self.round_trials = round_trials
        self.first_round_trials = min(first_round_trials, round_trials)
        self.transfer, self.progress, self.file = transfer, progress, file
        self.alpha, self.beta, self.window, self.epsilon = alpha, beta, window, epsilon
        self.flatten_rounds, self.min_improvement = flatten_rounds, min_improvement
        self.max_trials_per_task = max_trials_per_task
        self.remeasure_top, self.remeasure_rounds = remeasure_top, remeasure_rounds
        self.seed = check_seed("TaskScheduler", seed)
        self.rng = np.random.default_rng(self.seed)
        self.states = [_TaskState(t, w, f"{n}:{getattr(t, 'op', None) or t.name}")
                       for n, (t, w) in enumerate(zip(tasks, weights))]
        self.round = 0  # rounds in the curve file (those of earlier runs included)
        self.seconds = 0.0  # tuning time of the rounds in the curve file (earlier runs too)
        self.measured = 0  # trials measured by this scheduler (not counting the log's)
        self._resumed = False
        self.tuners_built = 0  # one per task that had a round in this scheduler
        self._features: FeaturePool | None = None  # the XGB tuners' feature workers
        self._log: list[Record] = []  # the log's records: read once, then kept by _collect

    # ------------------------------------------------------------------------ what it reports
    @property
    def tasks(self) -> list[Task]:
        return [s.task for s in self.states]

    @property
    def trials(self) -> int:
        """Trials of the tasks in the log (before this run) and measured since."""
        return sum(s.trials for s in self.states)

    def estimated_latency(self) -> float:
        """Seconds: sum of weight x best time over the tasks; inf while some task has no valid
        record (its time is unknown)."""
        return float(sum(s.weight * s.best for s in self.states))

    def best(self) -> dict[str, float]:
        """{workload key: best GFLOP/s} (0.0 for a task without a valid record), as
        tune_tasks returns."""
        return {s.task.key: (s.task.flop / s.best / 1e9 if s.best < math.inf else 0.0)
                for s in self.states}

    def expected_gains(self) -> list[float]:
        """Per task, the expected decrease of the model's latency (seconds) from its next
        round; 0 for a stopped task."""
        return [0.0 if s.done else self._gain(s) for s in self.states]

    # ------------------------------------------------------------------------ tuning
    def tune(self, n_trial: int | None = None, timeout: float | None = None) -> dict[str, float]:
        """Tune until the log holds `n_trial` trials of these tasks (those there before
        count), `timeout` seconds have passed (no round starts after that; the one in flight
        finishes), or every task has stopped. Returns {workload key: best GFLOP/s}.

        A task none of whose trials succeeded (now or in the log) does not stop the others;
        at the end, TuningError names each such task (its `.best` holds the return value)."""
        _check_budget(n_trial, timeout)
        t_start = time.perf_counter()
        deadline = math.inf if timeout is None else t_start + timeout
        option = self.measure_option or model_measure_option()
        if not self._resumed:
            self._resume()
        try:
            while True:
                state = self._next_task(n_trial, deadline)
                if state is None:
                    break
                n = self._round_size(state, n_trial)
                self._run_round(state, n, option)
            if self.remeasure_top:
                self._remeasure(option)
        finally:
            self._close_tuners()
            if self.measure_option is None:
                option.close()
        self._raise_failures()
        return self.best()

    def _resume(self) -> None:
        """Trials, best and curve position from the log and the curve file of earlier runs."""
        self._resumed = True
        records = load_records(self.log_file) if os.path.exists(self.log_file) else []
        self._log = list(records)
        by_key: dict[tuple[str, str], list[Record]] = {}
        for r in records:
            by_key.setdefault((r.key, r.target), []).append(r)
        for s in self.states:
            own = by_key.get((s.task.key, s.task.target), [])
            s.trials = sum(not r.remeasured for r in own)  # a re-measurement is not a trial
            valid = [r for r in own if r.valid]
            s.best = min(valid, key=lambda r: r.rank).cost if valid else math.inf
            s.settled = bool(own) and own[-1].remeasured
            if own:
                s.history.append((s.trials, s.best))
            trials = [r for r in own if not r.remeasured][:self.first_round_trials]
            s.first_best = min((r.cost for r in trials if r.valid), default=math.inf)
        self.round, self.seconds = _last_round(self.curve_file)
        _end_with_newline(self.curve_file)

    def _next_task(self, n_trial: int | None, deadline: float) -> _TaskState | None:
        """The task of the next round, or None when the budget is spent or every task
        stopped."""
        if time.perf_counter() >= deadline:
            return None
        if n_trial is not None and self.trials >= n_trial:
            return None
        for s in self.states:
            if not s.done and self.max_trials_per_task is not None and \
                    s.trials >= self.max_trials_per_task:
                s.done = "reached max_trials_per_task"
        live = [s for s in self.states if not s.done]
        if not live:
            return None
        first = [s for s in live if not s.trials]
        if first:  # every task's first round, heaviest first
            return max(first, key=lambda s: s.weight * s.task.flop)
        if self.epsilon and self.rng.random() < self.epsilon:
            return live[int(self.rng.integers(len(live)))]
        gains = self.expected_gains()
        return max(live, key=lambda s: gains[self.states.index(s)])

    def _round_size(self, state: _TaskState, n_trial: int | None) -> int:
        n = self.first_round_trials if not state.trials else self.round_trials
        if n_trial is not None:
            n = min(n, n_trial - self.trials)
        if self.max_trials_per_task is not None:
            n = min(n, self.max_trials_per_task - state.trials)
        return n

    def _gain(self, s: _TaskState) -> float:
        """Expected decrease of the model's latency from task s's next round (seconds)."""
        if not s.history or s.best == math.inf:
            return 0.0  # nothing valid measured: no time to improve on
        n = self.round_trials
        back = 0.0
        # the window's oldest point with a valid time (before one, there is no rate)
        recent = [p for p in s.history[-1 - self.window:-1] if p[1] < math.inf]
        if recent and s.trials > recent[0][0]:
            trials0, best0 = recent[0]
            back = (best0 - s.best) / (s.trials - trials0) * n
        headroom = self._typical_improvement() * s.best
        similar = self._similar_throughput(s)
        if similar > 0:
            headroom = max(headroom, s.best - self.beta * s.task.flop / similar)
        forward = headroom * n / max(s.trials, 1)
        return s.weight * (self.alpha * back + (1 - self.alpha) * forward)

    def _typical_improvement(self) -> float:
        """The mean relative improvement of the tasks' best since their first round (the log's
        first first_round_trials trials of a task tuned before): what a task is expected to
        improve by when its peers' throughput says nothing (0 before any task improved). A
        task without a valid first round counts from its first valid round."""
        found = [(s.first_best - s.best) / s.first_best for s in self.states
                 if 0 < s.first_best < math.inf]
        return sum(found) / len(found) if found else 0.0

    def _similar_throughput(self, s: _TaskState) -> float:
        """The best FLOP/s among the other tasks of the same template and graph op (0 when
        none has a valid record)."""
        kind = _kind(s.task)
        return max((o.task.flop / o.best for o in self.states
                    if o is not s and _kind(o.task) == kind and o.best < math.inf),
                   default=0.0)

    def _run_round(self, s: _TaskState, n: int, option: MeasureOption) -> None:
        t0 = time.perf_counter()
        tuner = self._tuner_of(s, option)
        before, best_before = tuner.trials, s.best
        callbacks = [log_to_file(self.log_file), self._collect]
        with warnings.catch_warnings():
            # a round whose trials mostly failed is reported for the task at the end
            warnings.simplefilter("ignore", TuningWarning)
            try:
                tuner.tune(n, option, callbacks=callbacks)  # n more trials
            except TuningError:
                pass  # every trial of this round failed: recorded in the log, counted below
        measured = tuner.trials - before
        self.measured += measured
        self._count_round(s, measured, tuner.best_cost,
                          exhausted=not measured or not (tuner.has_next() or tuner._settled))
        self.round += 1
        self.seconds += time.perf_counter() - t0
        self._report(s, best_before, measured)

    def _collect(self, tuner: Tuner, inputs: list, results: list) -> None:
        """A callback: the batch's records, as log_to_file writes them, kept for the tuners
        (a log of thousands of records is not parsed again every round)."""
        self._log.extend(make_record(i, r) for i, r in zip(inputs, results))

    def _remeasure(self, option: MeasureOption) -> None:
        """Each task tuned since its last re-measurement: its ``remeasure_top`` fastest configs
        and its default measured again, interleaved (Tuner.remeasure, as tune_tasks ends each
        task), the winner marked chosen in the log; its best becomes the winner's time. The
        fastest trial of a task is the luckiest of many noisy measurements: ResNet-50-shaped,
        the scheduler's picks ran up to 30% slower in the model than their records said."""
        t0 = time.perf_counter()
        done = []
        for s in sorted(self.states, key=lambda s: -s.weight * s.best):
            if s.settled or s.best == math.inf:
                continue
            tuner = self._tuner_of(s, option)
            results = tuner.remeasure(option, self.remeasure_top, self.remeasure_rounds,
                                      [log_to_file(self.log_file), self._collect])
            if any(r.error is None for r in results):
                s.best = tuner.best_cost
                s.history = [(s.trials, s.best)]  # the rate so far was of lucky figures
            s.settled = True
            done.append(s.label)
        if done:
            self.round += 1
            self.seconds += time.perf_counter() - t0
            self._report_line("re-measured", 0, f"[re-measured] top {self.remeasure_top} "
                              f"configs and the default of {len(done)} tasks")

    def _count_round(self, s: _TaskState, measured: int, best: float, exhausted: bool) -> None:
        """Task s's state after a round of `measured` trials whose best was `best` seconds:
        its trials, best and history, and whether it stops (its space exhausted, or no
        improvement of min_improvement in flatten_rounds rounds)."""
        best_before = s.best
        s.trials += measured
        s.settled = s.settled and not measured
        s.rounds += 1
        s.best = min(s.best, best)
        if s.first_best == math.inf:
            s.first_best = s.best
        s.history.append((s.trials, s.best))
        improved = s.best < best_before * (1 - self.min_improvement) or \
            (best_before == math.inf and s.best < math.inf)
        s.stale_rounds = 0 if improved else s.stale_rounds + 1
        if exhausted:
            s.done = "space exhausted"
        elif s.stale_rounds >= self.flatten_rounds:
            s.done = "flattened"

    def _tuner_of(self, s: _TaskState, option: MeasureOption) -> Tuner:
        """Task s's tuner, built on its first round with the log's records and kept for the
        task's later rounds (its model, its measured set, its planned configs); an XGB tuner
        featurizes in the scheduler's one set of feature workers."""
        if s.tuner is None:
            tuner = TUNERS[self.tuner_name](s.task, batch_size=self.round_trials,
                                            seed=self.seed)
            self.tuners_built += 1
            history = list(self._log)
            tuner.load_history(history if self.transfer else own_records(s.task, history))
            if isinstance(tuner, XGBTuner):
                tuner.plan_ahead = max(self.round_trials, PLAN_AHEAD)
            # tune() closes a tuner's helper processes when it returns: here they outlive the
            # round (this scheduler's tune() closes them)
            tuner.close = lambda: None
            s.tuner, s.learned = tuner, len(history)
        elif isinstance(s.tuner, XGBTuner) and self.transfer and len(self._log) > s.learned:
            # the other tasks' rounds since this task's last one: a model that learns from
            # them plans better (task by task, heaviest first, a tuner learns from the tasks
            # tuned before it; here every task's first round comes early, when the log held
            # little to learn from, and its tuner's plan was made then)
            s.tuner.relearn_transfer(self._log)
            s.learned = len(self._log)
        tuner = s.tuner
        self._features = share_feature_workers(tuner, self._features, option.builder.timeout)
        return tuner

    def _close_tuners(self) -> None:
        for s in self.states:
            if s.tuner is not None:
                type(s.tuner).close(s.tuner)
        if self._features is not None:
            self._features.close()
            self._features = None

    def _report(self, s: _TaskState, best_before: float, measured: int) -> None:
        stop = f"; {s.label} stopped ({s.done})" if s.done else ""
        self._report_line(s.label, measured,
                          f"[round {self.round}] {s.label} +{measured} trials (total "
                          f"{self.trials}, {self.seconds:.0f} s): best {_ms(best_before)} -> "
                          f"{_ms(s.best)}", stop)

    def _report_line(self, task: str, measured: int, head: str, tail: str = "") -> None:
        """One curve line (and one printed line) after a round or the re-measurement."""
        latency = self.estimated_latency()
        line = {"round": self.round, "task": task, "new_trials": measured,
                "trials": self.trials, "time": round(self.seconds, 3),
                "estimated_latency": _finite(latency),
                "best": {o.label: _finite(o.best) for o in self.states}}
        with open(self.curve_file, "a") as f:
            f.write(json.dumps(line) + "\n")
        if not self.progress:
            return
        est = _ms(latency) if latency < math.inf else \
            f"n/a ({sum(o.best == math.inf for o in self.states)} tasks without a valid record)"
        print(f"{head}; estimated latency {est}{tail}", file=self.file or sys.stdout,
              flush=True)

    def _raise_failures(self) -> None:
        failed = [s for s in self.states if s.trials and s.best == math.inf]
        if not failed:
            return
        records = load_records(self.log_file)  # every trial is there: how each failed
        failures = [_logged_failure(s.task, [r for r in records if r.key == s.task.key
                                             and r.target == s.task.target])
                    for s in failed]
        if failures:
            head = "" if len(failures) == 1 else \
                f"{len(failures)} of {len(self.states)} tasks have no successful trial: "
            error = TuningError(head + "; ".join(map(str, failures)),
                                sum((Counter(e.errors) for e in failures), Counter()))
            error.best = self.best()
            raise error


def _kind(task: Task) -> tuple:
    """Tasks of one kind are compared by throughput: same template, same graph op."""
    return task.name, getattr(task, "op", None)


def _finite(x: float) -> float | None:
    return x if x < math.inf else None


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms" if seconds < math.inf else "none"


def _check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"TaskScheduler: {name} must be a positive integer, got {value!r}")


def _check_budget(n_trial, timeout) -> None:
    if n_trial is not None and (isinstance(n_trial, bool) or not isinstance(n_trial, int)
                                or n_trial < 0):
        raise ValueError(f"TaskScheduler.tune: n_trial must be an integer >= 0 (trials in the "
                         f"log included), got {n_trial!r}")
    if timeout is not None and (isinstance(timeout, bool) or
                                not isinstance(timeout, (int, float)) or
                                not timeout >= 0 or timeout == math.inf):
        raise ValueError(f"TaskScheduler.tune: timeout must be a finite number of seconds "
                         f">= 0, got {timeout!r}")


def _weights(tasks: list[Task], given) -> list[float]:
    if given is None:
        given = [getattr(t, "weight", 1) for t in tasks]
    else:
        given = list(given)
        if len(given) != len(tasks):
            raise ValueError(f"TaskScheduler: {len(given)} task_weights for {len(tasks)} "
                             "tasks; give one weight per task (how many times the model runs "
                             "its kernel)")
    for w in given:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w < math.inf:
            raise ValueError(f"TaskScheduler: task weights must be positive finite numbers, "
                             f"got {w!r}")
    return [float(w) for w in given]


def _end_with_newline(path: str) -> None:
    """A killed run may leave a truncated last line: the next run's lines start on a new one."""
    if os.path.exists(path) and os.path.getsize(path):
        with open(path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")


def _last_round(curve_file: str) -> tuple[int, float]:
    """(round, time) of the last line of a curve file of earlier runs ((0, 0.0) when none); a
    truncated last line (a killed run) is ignored."""
    last = (0, 0.0)
    if not os.path.exists(curve_file):
        return last
    with open(curve_file) as f:
        for line in f:
            try:
                entry = json.loads(line)
                last = max(last, (int(entry["round"]), float(entry["time"])))
            except (ValueError, KeyError, TypeError):
                continue
    return last
