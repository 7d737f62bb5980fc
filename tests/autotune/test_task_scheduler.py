"""autotune.TaskScheduler: which task each round goes to, when tasks stop, budgets, resuming
from the log, the curve file, refused arguments. Measurements are fake (a builder and a runner
that return a time per config chosen by the test): deterministic and fast."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from autotune_test_templates import FakeBuilder
from killed_driver import kill_after_first_record
from tensorlang.autotune.measure import MeasureOption

from tensorlang import autotune


class FakeRunner:
    """cost(task, index) -> seconds, or None for a failed run; `measured` lists every
    (workload key, config index) timed."""

    check_correctness = False

    def __init__(self, cost, sleep: float = 0.0):
        self.cost = cost
        self.sleep = sleep
        self.measured: list[tuple[str, int]] = []

    def run_one(self, task, path):
        idx = int(path)
        self.measured.append((task.key, idx))
        if self.sleep:
            time.sleep(self.sleep)
        c = self.cost(task, idx)
        if c is None:
            return autotune.RUN_ERROR, "fake failure", []
        return None, "", [c]

    def close(self):
        pass


def fake_option(cost, sleep: float = 0.0) -> MeasureOption:
    return MeasureOption(FakeBuilder(), FakeRunner(cost, sleep))


def tasks_of(*ns, size: int = 40):
    return [autotune.create_task("test_fake_knob", (n, size)) for n in ns]


def scheduler(tasks, log, cost, weights=None, sleep=0.0, **kw):
    kw.setdefault("round_trials", 4)
    kw.setdefault("first_round_trials", 4)  # rounds of one size: trial counts are multiples
    kw.setdefault("epsilon", 0.0)
    kw.setdefault("progress", False)
    kw.setdefault("remeasure_top", 0)  # what is measured is these tests' subject (see below)
    return autotune.TaskScheduler(tasks, task_weights=weights, log_file=log,
                                  measure_option=fake_option(cost, sleep), tuner="grid", **kw)


def improving(ms: float):
    """Config i costs ms / (1 + i): every round finds a faster config."""
    return lambda idx: ms * 1e-3 / (1 + idx)


def flat(ms: float):
    return lambda idx: ms * 1e-3


def by_n(**costs):
    """A cost function per task, by its first argument (n), e.g. by_n(n64=flat(1))."""
    return lambda task, idx: costs[f"n{task.args[0]}"](idx)


def trials_per_task(log, tasks) -> list[int]:
    recs = autotune.load_records(log) if log.exists() else []
    return [sum(r.key == t.key and not r.remeasured for r in recs) for t in tasks]


# ------------------------------------------------------------------------------ allocation
def test_each_round_goes_to_the_task_with_the_largest_expected_gain(tmp_path):
    tasks = tasks_of(64, 128, 256)
    cost = by_n(n64=improving(1.0), n128=flat(2.0), n256=improving(0.5))
    sched = scheduler(tasks, tmp_path / "m.jsonl", cost, weights=[1, 3, 2], flatten_rounds=3)
    picks = []
    for _ in range(14):  # one round per call: n_trial is what the log will then hold
        before = [s.trials for s in sched.states]
        gains = sched.expected_gains()
        sched.tune(n_trial=sched.trials + 4)
        grown = [n for n, s in enumerate(sched.states) if s.trials > before[n]]
        assert len(grown) == 1
        if all(before):  # after every task's first round: the largest expected gain
            assert grown[0] == max(range(3), key=lambda n: (gains[n], -n))
        picks.append(grown[0])
    # the first rounds: each task once, heaviest (weight x FLOPs) first: 2x256, 3x128, 1x64
    assert picks[:3] == [2, 1, 0]
    # the flat task is the slowest per FLOP by far: expected to catch up with the others, it
    # gets the next rounds, until 3 rounds without improvement stop it; the improving tasks
    # share the rest
    assert picks[3:6] == [1, 1, 1] and sched.states[1].done == "flattened"
    assert picks.count(1) == 4 and picks[6:].count(0) and picks[6:].count(2)


def test_expected_gain_is_weight_times_backward_and_forward_estimates(tmp_path):
    tasks = tasks_of(64, 128)
    sched = scheduler(tasks, tmp_path / "m.jsonl", lambda t, i: 1e-3, weights=[2, 5],
                      alpha=0.25, beta=1.0, window=2)
    a, b = sched.states
    # a: 3 rounds of 4 trials, best 8 -> 6 -> 5 ms; b: one round, best 4 ms
    a.history = [(4, 8e-3), (8, 6e-3), (12, 5e-3)]
    a.trials, a.best, a.first_best = 12, 5e-3, 8e-3
    b.history = [(4, 4e-3)]
    b.trials, b.best, b.first_best = 4, 4e-3, 4e-3
    n = 4
    # the tasks improved by 3/8 (a) and 0 (b) since their first round: 3/16 on average
    typical = (3 / 8 + 0) / 2
    # a: backward over the last 2 rounds (8 ms -> 5 ms over 8 trials); its headroom: the larger
    # of the typical improvement and the gap to b's throughput (b: 128 FLOP in 4 ms), of
    # which a round is expected to find the share 4/12
    back_a = (8e-3 - 5e-3) / 8 * n
    fwd_a = max(typical * 5e-3, 5e-3 - 64 / (128 / 4e-3)) * n / 12
    assert fwd_a == pytest.approx(3e-3 * n / 12)  # the gap to b's throughput is the larger
    # b: one point, no backward; b is the fastest per FLOP (its gap is negative): the typical
    # improvement is its headroom
    fwd_b = max(typical * 4e-3, 4e-3 - 128 / (64 / 5e-3)) * n / 4
    assert fwd_b == pytest.approx(typical * 4e-3)
    gains = sched.expected_gains()
    assert gains[0] == pytest.approx(2 * (0.25 * back_a + 0.75 * fwd_a))
    assert gains[1] == pytest.approx(5 * 0.75 * fwd_b)
    b.done = "flattened"
    assert sched.expected_gains()[1] == 0.0


def test_a_task_far_behind_similar_tasks_is_expected_to_catch_up(tmp_path):
    tasks = tasks_of(64, 128)
    sched = scheduler(tasks, tmp_path / "m.jsonl", lambda t, i: 1e-3, alpha=0.0, beta=1.0)
    a, b = sched.states
    a.history, a.trials, a.best = [(100, 10e-3)], 100, 10e-3  # 6.4 MFLOP/s
    b.history, b.trials, b.best = [(100, 1e-3)], 100, 1e-3  # 128 MFLOP/s
    # a at b's throughput would take 0.5 ms: a headroom of 9.5 ms, of which a round of 4
    # trials is expected to find 4/100; b has no faster peer and no task improved yet: none
    assert sched.expected_gains() == pytest.approx([(10e-3 - 64 / 128e3) * 4 / 100, 0.0])


def test_the_round_goes_to_the_task_behind_its_peers_not_to_the_slowest(tmp_path):
    """Given recorded states: b takes the most time but runs at its peers' best throughput;
    a, slower per FLOP than its peer c, gets the round (the former forward term, time x
    round / trials, chose b: 2 x 8 ms against 1 x 6 ms)."""
    tasks = tasks_of(64, 128, 256)
    sched = scheduler(tasks, tmp_path / "m.jsonl", lambda t, i: 1e-3, weights=[1, 2, 1],
                      alpha=0.0)
    a, b, c = sched.states
    for state, best in ((a, 6e-3), (b, 8e-3), (c, 16e-3)):  # 10.7, 16, 16 kFLOP/s
        state.history, state.trials, state.best, state.first_best = [(8, best)], 8, best, best
    assert sched._next_task(None, math.inf) is a
    # c halves its time (32 kFLOP/s): a and b are now behind it; c, the fastest per FLOP, is
    # expected to improve by the tasks' mean relative improvement since their first round
    c.history.append((12, 8e-3))
    c.trials, c.best = 12, 8e-3
    typical = (0 + 0 + 0.5) / 3
    assert sched.expected_gains() == pytest.approx([
        (6e-3 - 64 / (256 / 8e-3)) * 4 / 8, 2 * (8e-3 - 128 / (256 / 8e-3)) * 4 / 8,
        typical * 8e-3 * 4 / 12])


def test_the_typical_improvement_counts_from_each_task_s_first_valid_round(tmp_path):
    tasks = tasks_of(64, 128)
    sched = scheduler(tasks, tmp_path / "m.jsonl", lambda t, i: 1e-3, alpha=0.0)
    a, b = sched.states
    sched._count_round(a, 4, math.inf, exhausted=False)  # every trial of its first round failed
    sched._count_round(a, 4, 5e-3, exhausted=False)
    sched._count_round(a, 4, 5e-3, exhausted=False)
    sched._count_round(b, 4, 8e-3, exhausted=False)
    sched._count_round(b, 4, 4e-3, exhausted=False)  # halved: 32 kFLOP/s, a at 12.8
    assert (a.first_best, b.first_best) == (5e-3, 8e-3)
    typical = (0 + 0.5) / 2
    # b is the fastest per FLOP: its headroom is the typical improvement
    assert sched.expected_gains() == pytest.approx([(5e-3 - 64 / (128 / 4e-3)) * 4 / 12,
                                                    typical * 4e-3 * 4 / 8])


def test_a_resumed_run_counts_the_typical_improvement_from_the_log_s_first_rounds(tmp_path):
    """A second run (its tasks' histories start at the log's best) takes each task's first
    round from the log: its first first_round_trials trials."""
    tasks = tasks_of(64, 128)
    log = tmp_path / "m.jsonl"
    cost = by_n(n64=improving(1.0), n128=improving(2.0))
    first = scheduler(tasks, log, cost, first_round_trials=2, alpha=0.0)
    first.tune(n_trial=14)
    # alpha 0: the forward terms alone (the backward term needs this run's rounds)
    again = scheduler(tasks, log, cost, first_round_trials=2, alpha=0.0)
    again.tune(n_trial=14)  # the budget is spent: it only reads the log
    records = [r for r in autotune.load_records(log) if not r.remeasured]
    for s, t in zip(again.states, tasks):
        own = [r.cost for r in records if r.key == t.key]
        assert s.first_best == min(own[:2]) > s.best
        assert [s.first_best, s.best] == [first.states[tasks.index(t)].first_best,
                                          first.states[tasks.index(t)].best]
    assert again.expected_gains() == pytest.approx(first.expected_gains())


def test_a_first_round_is_first_round_trials(tmp_path):
    """Each task's first round is first_round_trials trials (its default and the tuner's
    first picks), later rounds round_trials; the first pass costs 2 trials per task."""
    tasks = tasks_of(64, 128, 256)
    log = tmp_path / "m.jsonl"
    sched = scheduler(tasks, log, by_n(n64=improving(1.0), n128=improving(1.0),
                                       n256=improving(1.0)), first_round_trials=2)
    sched.tune(n_trial=6)
    assert trials_per_task(log, tasks) == [2, 2, 2]
    sched.tune(n_trial=10)
    assert sorted(trials_per_task(log, tasks)) == [2, 2, 6]
    # more than round_trials: a first round is at most a round
    assert scheduler(tasks, tmp_path / "n.jsonl", flat, round_trials=3,
                     first_round_trials=8).first_round_trials == 3


def test_flattened_tasks_stop_and_the_budget_goes_elsewhere(tmp_path):
    tasks = tasks_of(64, 128)
    cost = by_n(n64=flat(5.0), n128=improving(1.0))
    log = tmp_path / "m.jsonl"
    sched = scheduler(tasks, log, cost, weights=[10, 1], flatten_rounds=2)
    sched.tune(n_trial=40)
    a, b = sched.states
    # the heavy flat task: its first round, then 2 rounds without improvement -> stopped
    assert a.done == "flattened"
    assert a.trials == 12
    assert b.trials == 28 and not b.done
    assert trials_per_task(log, tasks) == [12, 28]


def test_a_task_whose_space_is_exhausted_stops(tmp_path):
    tasks = tasks_of(64, size=6) + tasks_of(128, size=40)
    sched = scheduler(tasks, tmp_path / "m.jsonl", by_n(n64=improving(9), n128=flat(1)),
                      flatten_rounds=50)
    sched.tune(n_trial=30)
    assert sched.states[0].trials == 6 and sched.states[0].done == "space exhausted"
    assert sched.trials == 30


def test_every_task_stopped_ends_the_run_before_the_budget(tmp_path):
    tasks = tasks_of(64, 128)
    sched = scheduler(tasks, tmp_path / "m.jsonl", by_n(n64=flat(1), n128=flat(2)),
                      flatten_rounds=1)
    sched.tune(n_trial=1000)
    assert [s.trials for s in sched.states] == [8, 8]
    assert all(s.done == "flattened" for s in sched.states)


def test_max_trials_per_task_caps_each_task(tmp_path):
    tasks = tasks_of(64, 128)
    sched = scheduler(tasks, tmp_path / "m.jsonl", by_n(n64=improving(1), n128=improving(5)),
                      flatten_rounds=50, max_trials_per_task=10)
    sched.tune(n_trial=100)
    assert [s.trials for s in sched.states] == [10, 10]


# ------------------------------------------------------------------------------ budgets
@pytest.mark.parametrize("budget", [0, 1, 5, 10, 13])
def test_the_trial_budget_is_honoured_exactly(tmp_path, budget):
    tasks = tasks_of(64, 128, 256)
    log = tmp_path / "m.jsonl"
    sched = scheduler(tasks, log, by_n(n64=improving(1), n128=improving(2), n256=flat(1)),
                      flatten_rounds=50)
    sched.tune(n_trial=budget)
    assert sum(trials_per_task(log, tasks)) == budget == sched.trials
    assert len(sched.measure_option.runner.measured) == budget


def test_the_time_budget_stops_starting_rounds(tmp_path):
    tasks = tasks_of(64, 128)
    # 4 trials of 0.1 s: a round takes 0.4 s; both tasks keep improving: only the time stops
    sched = scheduler(tasks, tmp_path / "m.jsonl", by_n(n64=improving(1), n128=improving(2)),
                      sleep=0.1, flatten_rounds=50)
    t0 = time.perf_counter()
    sched.tune(timeout=1.0)
    elapsed = time.perf_counter() - t0
    assert sched.trials >= 4 and sched.trials % 4 == 0
    assert 1.0 <= elapsed < 1.0 + 0.4 + 1.0  # the round in flight at 1 s finishes, no other
    with open(sched.curve_file) as f:
        times = [json.loads(line)["time"] for line in f]
    # each round started before the deadline (its start: the rounds' time before it, which
    # leaves out the scheduler's own time between rounds)
    assert all(t < 1.0 for t in [0.0, *times[:-1]])
    sched.tune(timeout=0)
    assert sched.trials == 4 * len(times)


# ------------------------------------------------------------------------------ resuming
def test_resume_counts_the_log_and_measures_nothing_twice(tmp_path):
    tasks = tasks_of(64, 128)
    log = tmp_path / "m.jsonl"
    cost = by_n(n64=improving(1), n128=improving(3))
    first = scheduler(tasks, log, cost, flatten_rounds=50)
    first.tune(n_trial=14)
    measured_before = set(first.measure_option.runner.measured)
    latency_before = first.estimated_latency()

    again = scheduler(tasks, log, cost, flatten_rounds=50)
    again.tune(n_trial=14)  # the log holds the budget: nothing to do
    assert again.measure_option.runner.measured == []
    assert again.estimated_latency() == pytest.approx(latency_before)
    again.tune(n_trial=22)
    new = again.measure_option.runner.measured
    assert len(new) == 8 and not set(new) & measured_before
    assert sum(trials_per_task(log, tasks)) == 22
    curve = [json.loads(line) for line in
             (tmp_path / "m.jsonl.curve.jsonl").read_text().splitlines()]
    # the second run's rounds continue, and its time adds to the first's
    assert [c["round"] for c in curve] == list(range(1, len(curve) + 1))
    assert [c["trials"] for c in curve] == [4, 8, 12, 14, 18, 22]
    times = [c["time"] for c in curve]
    assert times == sorted(times) and times[0] > 0


def test_records_stream_into_the_log_as_each_candidate_finishes(tmp_path):
    """Before each candidate is timed, every candidate finished before it is in the log (not
    only at the end of its round), and none twice."""
    tasks = tasks_of(64, 128)
    log = tmp_path / "m.jsonl"
    sched = scheduler(tasks, log, by_n(n64=improving(1), n128=improving(2)),
                      flatten_rounds=50)
    runner = sched.measure_option.runner
    timed = runner.run_one
    logged_before = []

    def run_one(task, path):
        logged_before.append(len(autotune.load_records(log)) if log.exists() else 0)
        return timed(task, path)

    runner.run_one = run_one
    sched.tune(n_trial=10)
    assert logged_before == list(range(10))
    records = autotune.load_records(log)
    assert len(records) == 10
    assert len({(r.key, r.config["index"]) for r in records}) == 10


def counted_process_pools(monkeypatch) -> list:
    """The process pools created from now on (concurrent.futures), in a list."""
    import concurrent.futures as cf

    executors = []

    class CountedExecutor(cf.ProcessPoolExecutor):
        def __init__(self, *a, **kw):
            executors.append(self)
            super().__init__(*a, **kw)

    monkeypatch.setattr(cf, "ProcessPoolExecutor", CountedExecutor)
    return executors


def test_tune_tasks_starts_one_set_of_feature_workers_and_measures_once_they_are_up(
        tmp_path, monkeypatch):
    """Heaviest-first tune_tasks over three tasks: one set of feature worker processes serves
    every task's XGB tuner (each started its own before), and no candidate is measured while
    they start (their imports took the cores from the kernels timed beside them: at 2 threads,
    60 us convs recorded at 5 ms)."""
    from tensorlang.autotune.features import FeaturePool

    executors, pools, measured_while_starting = counted_process_pools(monkeypatch), [], []
    start = FeaturePool.start

    def recorded_start(self):
        pools.append(self)
        start(self)

    monkeypatch.setattr(FeaturePool, "start", recorded_start)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the XGB tuners' feature_workers
    option = fake_option(by_n(n64=improving(1), n128=improving(2), n256=improving(3)))
    run_one = option.runner.run_one

    def checked_run_one(task, path):
        measured_while_starting.append(
            any(not f.done() for p in pools for f in p._warm_up))
        return run_one(task, path)

    option.runner.run_one = checked_run_one
    log = tmp_path / "h.jsonl"
    autotune.tune_tasks(tasks_of(64, 128, 256), n_trial=12, log_file=log, tuner="xgb",
                        measure_option=option, progress=False, batch_size=4, seed=0,
                        remeasure_top=1)
    assert trials_per_task(log, tasks_of(64, 128, 256)) == [12, 12, 12]
    assert len(executors) == 1
    assert len(measured_while_starting) > 36  # the trials, then the re-measurements
    assert not any(measured_while_starting)
    assert all(not p._warm_up for p in pools)  # stopped when tune_tasks returned


def test_a_task_keeps_its_tuner_and_the_feature_workers_across_rounds(tmp_path, monkeypatch):
    """Rounds alternate between tasks: each task's XGB tuner is built once and kept (never a
    config measured twice), one set of feature worker processes serves every task, and each
    round's tuner first learns the records the other task's rounds added to the log."""
    from tensorlang.autotune.tuner import XGBTuner

    executors = counted_process_pools(monkeypatch)

    def calls_per_task(method: str) -> Counter:
        calls, original = Counter(), getattr(XGBTuner, method)

        def counted(self, *args):
            calls[self.task.key] += 1
            return original(self, *args)

        monkeypatch.setattr(XGBTuner, method, counted)
        return calls

    plans, relearned = calls_per_task("_plan"), calls_per_task("relearn_transfer")
    # the least tried task gets each round: this test is about what a task keeps between its
    # rounds, so its rounds alternate whatever the gradient would choose
    monkeypatch.setattr(autotune.TaskScheduler, "_gain", lambda self, s: -s.trials)
    tasks = tasks_of(64, 128, size=96)
    sched = autotune.TaskScheduler(
        tasks, log_file=tmp_path / "m.jsonl", tuner="xgb", round_trials=4,
        first_round_trials=4, epsilon=0.0, flatten_rounds=50, progress=False, seed=0, remeasure_top=0,
        measure_option=fake_option(by_n(n64=improving(1), n128=improving(2))))
    sched.tune(n_trial=48)
    curve = [json.loads(line) for line in
             (tmp_path / "m.jsonl.curve.jsonl").read_text().splitlines()]
    order = [c["task"] for c in curve]
    switches = sum(a != b for a, b in itertools.pairwise(order))
    assert len(curve) == 12 and switches >= 3, order
    assert sched.tuners_built == 2
    measured = sched.measure_option.runner.measured
    assert len(measured) == 48 and len(set(measured)) == 48
    assert len(executors) == 1  # the feature workers: started once for both tasks
    assert sched._features is None  # and stopped when tune returned
    # per task: the first round (no model yet: 4 random picks), then each round, since the
    # other task's round before it added records, relearns them and plans anew (one search
    # per round, never more)
    for s in sched.states:
        assert plans[s.task.key] <= s.rounds + 1, (s.rounds, plans)
        assert relearned[s.task.key] == s.rounds - 1, (s.rounds, relearned)
    # the last round's tuner had learned every record but that round's own 4
    assert max(s.learned for s in sched.states) == 48 - 4


def test_template_and_template_free_tasks_each_start_from_their_default(tmp_path):
    """tuner="evolution" tunes a template task and a template-free one in one budget: each
    task's first trial is its default (the schedule an untuned build falls back to: the
    gradient's first best is the untuned time), nothing is measured twice."""
    import autotune_test_workloads as W

    tasks = [*tasks_of(64), autotune.create_task(W.layer_norm, (16, 64))]
    sched = autotune.TaskScheduler(
        tasks, log_file=tmp_path / "m.jsonl", tuner="evolution", round_trials=3,
        epsilon=0.0, flatten_rounds=50, progress=False, seed=0, remeasure_top=0,
        measure_option=fake_option(lambda task, idx: 1e-3 / (1 + idx % 7)))
    sched.tune(n_trial=12)
    measured = sched.measure_option.runner.measured
    assert len(measured) == 12 and len(set(measured)) == 12
    for t in tasks:
        own = [idx for key, idx in measured if key == t.key]
        assert own and own[0] == t.config_space.fallback_index(), (t.name, own)
    assert sched.tuners_built == 2


_KILLED_DRIVER = """
import sys

from tensorlang import autotune

if __name__ == "__main__":
    tasks = [autotune.create_task("matmul", (m, 64, 64, "float32"), target="llvm")
             for m in (64, 32)]
    option = autotune.measure_option(autotune.LocalBuilder(n_parallel=2, timeout=30),
                                     autotune.LocalRunner(number=1, repeat=2, min_repeat_ms=100,
                                                          timeout=60))
    autotune.TaskScheduler(tasks, log_file=sys.argv[1], measure_option=option, tuner="random",
                           round_trials=4, seed=0, progress=False).tune(n_trial=8)
    option.close()
"""


@pytest.mark.slow  # two driver processes, each starting builders and a measuring process
def test_a_driver_killed_mid_round_resumes_without_measuring_twice(tmp_path):
    """A driver SIGKILLed in the middle of a round (real builds and measurements): its log
    holds the round's finished candidates, whole; run again, the scheduler measures only the
    rest: every trial of the budget in the log exactly once."""
    script, log = tmp_path / "driver.py", tmp_path / "killed.jsonl"
    script.write_text(_KILLED_DRIVER)
    cmd = [sys.executable, str(script), str(log)]
    text = kill_after_first_record(cmd, log)
    # each candidate's measurement takes >= 200 ms: the first round (4) was not done
    assert text.endswith("\n") and 1 <= text.count("\n") < 4, text
    killed = {(r.key, r.config["index"]) for r in autotune.load_records(log)}
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    records = autotune.load_records(log)
    trials = Counter((r.key, r.config["index"]) for r in records)
    assert len(records) == 8 and set(trials.values()) == {1}, trials
    assert killed <= set(trials)
    assert all(r.result["error"] in (None, autotune.ILLEGAL) for r in records)
    assert {r.key for r in records if r.valid} == {
        autotune.create_task("matmul", (m, 64, 64, "float32"), target="llvm").key
        for m in (64, 32)}


@pytest.mark.slow  # two tensorlang processes with their builders and measuring process
def test_ctrl_c_mid_batch_leaves_a_log_to_resume_from(tmp_path):
    """`tensorlang tune` interrupted as a terminal's Ctrl-C does (SIGINT to the whole process
    group) in the middle of its batch of 8: exit status 130, the log holds the candidates that
    finished, whole; the same command again measures only the rest."""
    log = tmp_path / "interrupted.jsonl"
    cmd = [sys.executable, "-m", "tensorlang.cli", "tune", "matmul", "--args",
           "64,64,64,float32", "--trials", "8", "--tuner", "random", "--seed", "0",
           "--log", str(log), "--number", "1", "--repeat", "2", "--min-repeat-ms", "100"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_text().count("\n") >= 1:
            break
        time.sleep(0.005)
    assert proc.poll() is None, proc.communicate()[0].decode()[-2000:]
    os.killpg(proc.pid, signal.SIGINT)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 130, out[-2000:]
    text = log.read_text()
    assert text.endswith("\n") and 1 <= text.count("\n") < 8, text
    interrupted = autotune.load_records(log)
    assert all(r.result["error"] in (None, autotune.ILLEGAL) for r in interrupted)
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    records = autotune.load_records(log)
    assert len(records) == 8 and len({r.config["index"] for r in records}) == 8
    assert records[:len(interrupted)] == interrupted


def test_a_truncated_curve_line_of_a_killed_run_is_skipped(tmp_path):
    tasks = tasks_of(64)
    log = tmp_path / "m.jsonl"
    sched = scheduler(tasks, log, by_n(n64=improving(1)), flatten_rounds=50)
    sched.tune(n_trial=8)
    curve = tmp_path / "m.jsonl.curve.jsonl"
    curve.write_text(curve.read_text() + '{"round": 3, "tas')
    again = scheduler(tasks, log, by_n(n64=improving(1)), flatten_rounds=50)
    again.tune(n_trial=12)
    lines = curve.read_text().splitlines()
    assert json.loads(lines[-1])["round"] == 3 and json.loads(lines[-1])["trials"] == 12


# ------------------------------------------------------------------------------ reports
def test_the_curve_file_has_one_valid_line_per_round(tmp_path, capsys):
    tasks = tasks_of(64, 128)
    log = tmp_path / "m.jsonl"
    weights = [3, 2]
    sched = scheduler(tasks, log, by_n(n64=improving(1), n128=improving(4)), weights=weights,
                      flatten_rounds=50, progress=True)
    sched.tune(n_trial=18)
    with open(sched.curve_file) as f:
        lines = [json.loads(line) for line in f]
    assert sched.curve_file == str(log) + ".curve.jsonl"
    assert [x["round"] for x in lines] == [1, 2, 3, 4, 5]
    assert [x["trials"] for x in lines] == [4, 8, 12, 16, 18]
    assert [x["new_trials"] for x in lines] == [4, 4, 4, 4, 2]
    times = [x["time"] for x in lines]
    assert times == sorted(times)
    assert lines[0]["estimated_latency"] is None  # one task not measured yet
    recs = autotune.load_records(log)
    best = [min(r.cost for r in recs if r.key == t.key) for t in tasks]
    assert lines[-1]["best"] == {"0:test_fake_knob": pytest.approx(best[0]),
                                 "1:test_fake_knob": pytest.approx(best[1])}
    expected = sum(w * b for w, b in zip(weights, best))
    assert lines[-1]["estimated_latency"] == pytest.approx(expected)
    assert sched.estimated_latency() == pytest.approx(expected)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and out[0].startswith("[round 1] 1:test_fake_knob +4 trials")
    assert f"estimated latency {expected * 1e3:.4g} ms" in out[-1]


def test_a_task_whose_every_trial_fails_is_named_at_the_end(tmp_path):
    tasks = tasks_of(64, 128)
    cost = lambda t, i: None if t.args[0] == 128 else 1e-3 / (1 + i)
    sched = scheduler(tasks, tmp_path / "m.jsonl", cost, flatten_rounds=2)
    # its first round all failed: no time to improve on, no expected gain: the other task
    # gets the rest of the budget
    with pytest.raises(autotune.TuningError, match=r"all 4 trials of test_fake_knob "
                                                   r"\[128, 40\] failed \(run error 4\)") as e:
        sched.tune(n_trial=40)
    assert e.value.best[tasks[1].key] == 0.0 and e.value.best[tasks[0].key] > 0
    assert math.isinf(sched.estimated_latency())
    assert [s.trials for s in sched.states] == [36, 4]


# ------------------------------------------------------------------------------ re-measurement
def lucky_once(lucky: dict):
    """A cost per (task, config): config i costs (1 + i % 5) ms, except that the configs in
    `lucky` ({n: index}) measure 0.1 ms the first time they are timed (a lucky window) and
    3 ms after."""
    calls = Counter()

    def cost(task, idx):
        calls[task.key, idx] += 1
        if lucky.get(task.args[0]) == idx:
            return 1e-4 if calls[task.key, idx] == 1 else 3e-3
        return (1 + idx % 5) * 1e-3
    return cost


def test_the_run_ends_by_remeasuring_each_task_so_luck_is_not_deployed(tmp_path):
    """After the budget, each task's top configs and its default are measured again
    (interleaved) and the winner is marked chosen: the config that was fast once by luck is
    not the log's best, and the estimate is of the re-measured times. Re-measurements are not
    trials: the budget counts trials only."""
    tasks = tasks_of(64, 128)
    log = tmp_path / "m.jsonl"
    sched = scheduler(tasks, log, lucky_once({64: 2}), remeasure_top=2, remeasure_rounds=3,
                      flatten_rounds=50)
    sched.tune(n_trial=16)
    assert sum(trials_per_task(log, tasks)) == 16
    recs = autotune.load_records(log)
    chosen = {r.key: tasks[0].config_space.from_json(r.config).index
              for r in recs if r.chosen}
    # re-measured, the lucky config 2 takes 3 ms and no finalist beats its default (1 ms)
    assert chosen == {tasks[0].key: 0, tasks[1].key: 0}
    best = autotune.apply_history_best(str(log)).best(tasks[0].target, tasks[0].name,
                                                      tasks[0].args)
    assert best.chosen and best.cost == pytest.approx(1e-3)
    assert sched.estimated_latency() == pytest.approx(2e-3)  # not 0.1 ms + 1 ms
    curve = [json.loads(x) for x in (tmp_path / "m.jsonl.curve.jsonl").read_text().splitlines()]
    assert curve[-1]["task"] == "re-measured" and curve[-1]["trials"] == 16
    assert curve[-1]["estimated_latency"] == pytest.approx(2e-3)
    assert curve[-2]["estimated_latency"] == pytest.approx(1.1e-3)  # the lucky figure


def test_a_resumed_run_remeasures_only_the_tasks_it_tuned_further(tmp_path):
    tasks = [autotune.create_task("test_fake_knob", (64, 40)),
             autotune.create_task("test_fake_knob", (128, 4))]  # 4 configs: spent at once
    log = tmp_path / "m.jsonl"
    cost = by_n(n64=improving(1), n128=flat(3))

    def run(n_trial):
        sched = scheduler(tasks, log, cost, remeasure_top=1, remeasure_rounds=2,
                          flatten_rounds=50)
        sched.tune(n_trial=n_trial)
        return sched

    first = run(12)
    assert trials_per_task(log, tasks) == [8, 4]
    again = run(12)  # the budget is in the log and every task settled: nothing measured
    assert again.measure_option.runner.measured == []
    assert again.estimated_latency() == pytest.approx(first.estimated_latency())
    again = run(16)  # four more trials, all of the task with configs left
    assert {key for key, _ in again.measure_option.runner.measured} == {tasks[0].key}
    chosen = Counter(r.key for r in autotune.load_records(log) if r.chosen)
    assert chosen == {tasks[0].key: 2, tasks[1].key: 1}


# ------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("kw, error, message", [
    ({"task_weights": [1, 2, 3]}, ValueError, "3 task_weights for 2 tasks"),
    ({"task_weights": [1, 0]}, ValueError, "task weights must be positive"),
    ({"task_weights": [1, math.nan]}, ValueError, "task weights must be positive"),
    ({"tuner": "annealing"}, ValueError, "tuner must be one of"),
    ({"round_trials": 0}, ValueError, "round_trials must be a positive integer"),
    ({"first_round_trials": 0}, ValueError, "first_round_trials must be a positive integer"),
    ({"first_round_trials": 2.0}, ValueError, "first_round_trials must be a positive integer"),
    ({"alpha": 1.5}, ValueError, r"alpha must be a number in \[0, 1\]"),
    ({"max_trials_per_task": -3}, ValueError, "max_trials_per_task must be a positive"),
    ({"remeasure_top": -1}, ValueError, "remeasure_top must be >= 0"),
    ({"remeasure_rounds": 2.5}, TypeError, "remeasure_rounds must be an int"),
])
def test_bad_arguments_are_refused(tmp_path, kw, error, message):
    with pytest.raises(error, match=message):
        autotune.TaskScheduler(tasks_of(64, 128), log_file=tmp_path / "m.jsonl", **kw)


def test_bad_task_lists_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no tasks"):
        autotune.TaskScheduler([], log_file=tmp_path / "m.jsonl")
    with pytest.raises(TypeError, match="must be autotune Tasks, got str"):
        autotune.TaskScheduler(["matmul"], log_file=tmp_path / "m.jsonl")
    with pytest.raises(ValueError, match="same workload"):
        autotune.TaskScheduler(tasks_of(64, 64), log_file=tmp_path / "m.jsonl")


@pytest.mark.parametrize("budget, message", [
    ({"n_trial": -1}, "n_trial must be an integer >= 0"),
    ({"n_trial": 2.5}, "n_trial must be an integer >= 0"),
    ({"timeout": -1.0}, "timeout must be a finite number of seconds >= 0"),
    ({"timeout": math.inf}, "timeout must be a finite number"),
])
def test_bad_budgets_are_refused(tmp_path, budget, message):
    sched = scheduler(tasks_of(64), tmp_path / "m.jsonl", by_n(n64=flat(1)))
    with pytest.raises(ValueError, match=message):
        sched.tune(**budget)
    assert sched.measure_option.runner.measured == []


# ------------------------------------------------------------------------------ command line
@pytest.mark.parametrize("argv, message", [
    (["--budget", "0"], "--budget: must be more than 0"),
    (["--budget", "10x"], r"--budget: expected trials \(2000\) or a time"),
    (["--budget", "0s"], "--budget: must be more than 0"),
    (["--budget", "10", "--budget", "20"], "two trials budgets"),
    (["--in-model-top", "-1"], "--in-model-top: must be at least 0, got -1"),
])
def test_cli_budget_refusals(tmp_path, capsys, argv, message):
    import onnx
    from tensorlang.graph import model_zoo

    from tensorlang.cli import main

    model = tmp_path / "cnn.onnx"
    onnx.save(model_zoo.small_cnn(), model)
    try:
        code = main(["tune", str(model), "--log", str(tmp_path / "x.jsonl"), *argv])
    except SystemExit as e:
        code = e.code
    assert code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "x.jsonl").exists()


def test_cli_budget_is_for_models(tmp_path, capsys):
    from tensorlang.cli import main

    assert main(["tune", "matmul", "--args", "64,64,64,float32", "--budget", "30m",
                 "--log", str(tmp_path / "x.jsonl")]) == 2
    assert "--budget is for models" in capsys.readouterr().err


def test_cli_budget_on_a_model_with_nothing_to_tune_deploys_it_as_trials_do(tmp_path):
    # the scheduler refuses an empty task list: with --budget the run failed ("TaskScheduler:
    # no tasks to tune", status 2) where --trials printed the deploy line
    import onnx
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])])
    model = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    code, out = _cli_out(["tune", str(model), "--log", str(tmp_path / "r.jsonl"),
                          "--budget", "5"])
    assert code == 0 and f"deploy with: tensorlang compile {model}" in out, out


def _cli_out(argv) -> tuple[int, str]:
    """main(argv)'s exit status and what it printed."""
    import contextlib
    import io

    from tensorlang.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def small_cnn_budget_runs(tmp_path_factory):
    """`tensorlang tune cnn.onnx --budget 3`, then the same with `--budget 5` (a resumed run),
    both --in-model-top 0: (the model, its log, the arguments but the budget, each run's
    (exit status, output, trials logged after it)). The two tests below read these runs: one
    tuning of the model from scratch between them (test_cli_ends_... made its own, of 4 trials,
    only to have a log to choose in)."""
    import onnx
    from tensorlang.graph import model_zoo

    d = tmp_path_factory.mktemp("cnn")
    model = d / "cnn.onnx"
    onnx.save(model_zoo.small_cnn(), model)
    log = d / "cnn.jsonl"
    argv = ["tune", str(model), "--log", str(log), "--tuner", "random", "--seed", "0",
            "--number", "1", "--repeat", "1", "--min-repeat-ms", "0",
            "--flush-mib", "8"]  # the calibration (9 s a run): test_errors_and_artifacts.py
    runs = []
    for budget in (["--budget", "3"], ["--budget", "5", "--budget", "10m"]):
        # the choice in the model: test_cli_ends_a_model_s_tuning_by_choosing_inside_runs_...
        code, out = _cli_out([*argv, *budget, "--in-model-top", "0"])
        runs.append((code, out, _trials(log)))
    return model, log, argv, runs


def test_cli_tunes_a_model_within_a_trial_budget(small_cnn_budget_runs):
    """`tensorlang tune model.onnx --budget N`: N trials in all, over the model's tasks by the
    scheduler, the curve beside the log; a second run with a larger budget resumes."""
    _, log, _, ((code, out, trials), (code2, _, trials2)) = small_cnn_budget_runs
    assert code == 0
    assert "tuning within 3 trials" in out and "estimated latency of the tuned kernels" not in out
    assert "no valid record (not reached within the budget)" in out  # 3 trials: 2 tasks tried
    assert trials == 3
    assert code2 == 0
    assert trials2 == 5
    curve = [json.loads(x) for x in log.with_name("cnn.jsonl.curve.jsonl").read_text()
             .splitlines()]
    # each run ends by re-measuring the tasks it tuned (a curve line of its own, no trials)
    assert [(c["trials"], c["task"]) for c in curve if c["task"] == "re-measured"] == \
        [(3, "re-measured"), (5, "re-measured")]
    # first rounds of 2 trials: 2 + 1 (the budget's last trial), then 2 more
    assert [c["trials"] for c in curve if c["task"] != "re-measured"] == [2, 3, 5]


def test_cli_ends_a_model_s_tuning_by_choosing_inside_runs_of_the_model(small_cnn_budget_runs,
                                                                         tmp_path):
    """`tune model.onnx` ends by timing each tuned kernel's finalists inside runs of the model
    (graph.remeasure_in_model) unless --in-model-top 0; a run whose budget is already in the
    log only makes the choice. (The log: 5 trials in rounds of 2, 1 and 2, so tasks with
    finalists to choose from.)"""
    import shutil

    _, tuned, argv, runs = small_cnn_budget_runs
    assert all(code == 0 and "in-model choice" not in out for code, out, _ in runs)
    assert not any(r.in_model for r in autotune.load_records(tuned))
    log = tmp_path / "cnn.jsonl"
    shutil.copyfile(tuned, log)
    argv = [str(log) if a == str(tuned) else a for a in argv]
    code, out = _cli_out([*argv, "--budget", "5", "--in-model-top", "2"])
    assert code == 0
    timed = int(re.search(r"in-model choice: (\d+) kernels' finalists timed inside runs of "
                          r"the model in \d+ s; \d+ changed", out).group(1))
    in_model = [r for r in autotune.load_records(log) if r.in_model]
    keys = {r.key for r in in_model}
    assert timed >= 1 and len(keys) == timed
    assert all(sum(r.chosen for r in in_model if r.key == k) == 1 for k in keys)
    assert _trials(log) == 5


def _trials(log) -> int:
    return sum(not r.remeasured for r in autotune.load_records(log))


def test_by_default_each_trial_is_timed_from_the_caches_a_model_run_leaves(tmp_path):
    """Without a measure option the scheduler measures as a model runs its kernels
    (model_measure_option): each of 10 repeats one call after the caches were flushed, so
    every record holds 10 costs (a back-to-back runner's repeats are 3)."""
    task = autotune.create_task("test_fake_knob", (4096, 2), "llvm")
    task.warm_args = (0,)
    log = tmp_path / "default.jsonl"
    autotune.TaskScheduler([task], log_file=log, tuner="grid", round_trials=2,
                           progress=False).tune(n_trial=2)
    records = [r for r in autotune.load_records(log) if not r.remeasured]
    assert len(records) == 2 and all(r.valid and len(r.result["costs"]) == 10
                                     for r in records)
