"""Whole-model tuning at equal trial budgets (issue 21): autotune.TaskScheduler against
heaviest-first tune_tasks (budget / tasks trials each, heaviest task first), on a ResNet-50-shaped
model; the model's end-to-end latency, measured (graph.build with the log up to 25%, 50% and
100% of the budget's trials, timed interleaved with the untuned build, the rounds spread over
fresh processes: see time_in_processes), plus the estimate (sum of weight x best kernel
time). The scheduler is run to each of those budgets in turn (each run
ends by re-measuring what it tuned, as tune_tasks ends each task); heaviest-first's log up to
a share holds the re-measurements of the tasks finished by then. Each scheduler build is
compared with heaviest-first's final one round by round (median ratio, bootstrap interval),
and the log of heaviest-first gives a bound: the fewest of its trials that, chosen with
hindsight, reach the estimate of all of them.

    python benchmarks/task_scheduler.py [--model resnet50|transformer | --onnx FILE]
                                        [--template-free [all]] [--without-default]
                                        [--budget 2000] [--size 224] [--width 64]
                                        [--tuner xgb] [--rounds 7] [--processes 5]
                                        [--dir DIR]
                                        [--fractions 0.25,0.5,1]
                                        [--steps tune-heaviest-first,tune-scheduler,time]

--onnx FILE: a model nobody here wrote instead (a corpus CNN, exported by
benchmarks/export_models.py into ~/.cache/tensorlang/real_models; one input of fixed shape).
--model transformer: graph.model_zoo.transformer_block with sequence --size, hidden --width,
4 heads, feed-forward 4 x --width. --template-free adds a template-free task for every kernel
no template tunes (graph.extract_tasks(g, template_free=True): softmax, layer norm,
transposes, pools...), tasks whose defaults can be far from their tuned schedules, beside
template tasks whose defaults are near their best: where the gradient has something to
allocate (tune them with --tuner evolution, which measures a template-free task's default
and its structural variants first). --template-free all: template-free tasks for every kernel
instead, convs included, as Ansor tunes a model (graph.extract_tasks(g, template_free="all")).

Both strategies measure candidates as the model runs them (model_measure_option: caches evicted
before each timed call by writing as many bytes as graph.calibrate_flush finds for the model on
this machine, once per --dir in flush.json; a task's non-constant inputs read back); the last
lines compare each task's best record with its kernel's time inside a run of the built model
(fidelity). The
thread count is the runtime's (TENSORLANG_NUM_THREADS). Needs a quiet machine: both tunings and
the timings share the cores. A tiny run that proves the script works: --budget 60 --size 56
--width 16 --tuner random --round-trials 2.

--without-default: both strategies tune as TVM's tuners do, without the head start of the
template's default config: the xgb tuner does not measure it first (include_fallback=False), no
re-measurement brings it back (remeasure_top=0), and no in-model choice (--no-in-model). A
build then runs each task's fastest record, whatever the trials found. Why: with the default
measured first, tuning gains 3-6% on these models, below the spread of whole runs, and every
allocation of the trials looks level; without it, what the trials find decides the latency.
With --template-free all (any tuner; evolution is the one for these spaces) it means no
default kernel timed beside the trials: a build applies every task's best record even where
the graph's default schedule is faster (a task no trial reached keeps that default).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import math
import multiprocessing
import os
import statistics
import tempfile
import time
import warnings

import numpy as np
from tensorlang.autotune.measure import _cold_costs, _random_inputs
from tensorlang.autotune.task_scheduler import model_measure_option
from tensorlang.autotune.tune import TUNERS
from tensorlang.graph import model_zoo

from tensorlang import autotune, graph, runtime

FRACTIONS = (0.25, 0.5, 1.0)
STEPS = ("tune-heaviest-first", "tune-scheduler", "time")
PAUSE_S = 0.3  # between two timed builds: a previous run's worker threads may still spin


def measure_option(flush_bytes: int):
    """Both strategies measure as the model runs its kernels: each call from caches evicted by
    writing ``flush_bytes`` (flush_for), the task's non-constant inputs read back first."""
    return model_measure_option(repeat=10, n_parallel=os.cpu_count(), flush_bytes=flush_bytes)


def flush_for(g, tasks, out: str) -> int:
    """The runner's flush size for the model on this machine (graph.calibrate_flush), found
    once per --dir so that both strategies' steps measure alike."""
    path = os.path.join(out, "flush.json")
    if not os.path.exists(path):
        found = graph.calibrate_flush(g, tasks)
        with open(path, "w") as f:
            json.dump({"flush_bytes": found.flush_bytes, "calibration": str(found)}, f)
    with open(path) as f:
        saved = json.load(f)
    print(saved["calibration"], flush=True)
    return saved["flush_bytes"]


@contextlib.contextmanager
def tuners_seen():
    """The tuners whose tune() ran inside the block (each once, in order of their first
    call): where a strategy's wall time went."""
    seen: dict[int, autotune.Tuner] = {}
    tune = autotune.Tuner.tune

    def recorded(self, *args, **kw):
        seen.setdefault(id(self), self)
        return tune(self, *args, **kw)

    autotune.Tuner.tune = recorded
    try:
        yield seen
    finally:
        autotune.Tuner.tune = tune


def wall_split(name: str, wall: float, tuners) -> str:
    """A strategy's tuning wall time: building + measuring, the search, the model's fits, the
    rest (features outside the search, the driver)."""
    measure = sum(t.time_measure for t in tuners)
    search = sum(getattr(t, "time_search", 0.0) for t in tuners)
    model = sum(getattr(t, "time_model", 0.0) for t in tuners)
    trials = sum(t.trials for t in tuners)
    return (f"{name}: {trials} trials in {wall:.1f} s ({len(tuners)} tuners): build + measure "
            f"{measure:.1f} s, search {search:.1f} s, model fits {model:.1f} s, rest "
            f"{wall - measure - search - model:.1f} s")


def _timed_tuning(name: str, tune, flush_bytes: int) -> float:
    """Run ``tune(measure_option)`` and print its wall time split; a task without a valid
    config (TuningError) is reported, not fatal. Returns the wall time."""
    opt = measure_option(flush_bytes)
    t0 = time.perf_counter()
    with tuners_seen() as seen:
        try:
            tune(opt)
        except autotune.TuningError as e:
            print(f"{name}: {e}")
        finally:
            opt.close()
    wall = time.perf_counter() - t0
    print(wall_split(name, wall, seen.values()), flush=True)
    return wall


class XGBTunerWithoutDefault(autotune.XGBTuner):
    """The xgb tuner without the default config in its first batch (--without-default)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, include_fallback=False, **kw)


WITHOUT_DEFAULT = "xgb-without-default"
TUNERS[WITHOUT_DEFAULT] = XGBTunerWithoutDefault


def heaviest_first(tasks, budget: int, log: str, tuner: str, seed: int, flush_bytes: int,
                   remeasure_top: int = 3) -> float:
    """Today's tune_tasks: the tasks by weight x FLOPs, budget // tasks trials each."""
    order = sorted(tasks, key=lambda t: t.flop * t.weight, reverse=True)
    return _timed_tuning("heaviest-first", lambda opt: autotune.tune_tasks(
        order, n_trial=max(1, budget // len(tasks)), log_file=log, tuner=tuner,
        measure_option=opt, progress=False, seed=seed, remeasure_top=remeasure_top),
        flush_bytes)


def scheduled(tasks, budgets: list[int], log: str, tuner: str, seed: int,
              round_trials: int, flush_bytes: int, remeasure_top: int = 3) -> float:
    """The TaskScheduler given each budget in turn, resuming its log: as a user who stops at
    each and deploys (each run ends by re-measuring the tasks it tuned)."""
    def stages(opt):
        for n in budgets:
            autotune.TaskScheduler(tasks, log_file=log, measure_option=opt, tuner=tuner,
                                   round_trials=round_trials, seed=seed,
                                   remeasure_top=remeasure_top).tune(n_trial=n)
    return _timed_tuning("scheduler", stages, flush_bytes)


def log_prefix(log: str, n: int, out: str) -> str:
    """A copy of the log up to its n-th trial (the state of the tuning after n trials): a
    re-measured record (tune_tasks ends each task with some) is a measurement, not a trial,
    and comes with the trials before it."""
    kept = []
    trials = 0
    with open(log) as f:
        for line in f:
            if not line.strip():
                continue
            trial = not json.loads(line)["result"].get("remeasured", False)
            if trial and trials == n:
                break
            trials += trial
            kept.append(line)
    with open(out, "w") as f:
        f.writelines(kept)
    return out


def best_costs(log: str) -> dict[str, float]:
    """Workload key -> seconds of the record a build applies, by the tuner's measurements (a
    re-measurement's winner first, else the fastest; not a choice made in the model)."""
    return {key: r.cost for (key, _), r in autotune.best_records(
        r for r in autotune.load_records(log) if not r.in_model).items()}


def estimate_from_log(tasks, log: str, default: dict[str, float]) -> float:
    """sum of weight x best record over the tasks; a task without one at its default time."""
    best = best_costs(log)
    return sum(t.weight * best.get(t.key, default[t.key]) for t in tasks)


def choose_in_model(g, log: str, what: str) -> None:
    """graph.remeasure_in_model on a prefix of a log, as deployment does; prints what it
    changed."""
    t0 = time.perf_counter()
    choices = graph.remeasure_in_model(g, log)
    changed = [c for c in choices if c.chosen]
    gain = sum(len(c.nodes) * (c.times[0] - c.times[c.chosen]) for c in changed)
    print(f"in-model choice, {what}: {len(changed)} of {len(choices)} tasks changed, "
          f"{gain * 1e6:.0f} us per run less by its timing ({time.perf_counter() - t0:.0f} s)",
          flush=True)


def default_times(tasks, flush_bytes: int) -> dict[str, float]:
    """Each task's default schedule (what an untuned build runs: the template's fallback
    config; for a template-free task the graph's default schedule of its kernel), timed as the
    runner times a candidate (from evicted caches, its warm_args read back)."""
    from tensorlang.graph.tuning_free import BaselineGraphTask

    import tensorlang as tl

    out = {}
    for t in tasks:
        untuned = BaselineGraphTask(t.args, t.target, t.op, t.nodes, t.layout,
                                    t.warm_args) if _free(t) else t
        f = tl.build(*untuned.instantiate(autotune.FallbackConfig()), name="default")
        args = _random_inputs(f.manifest)  # as the runner places them
        out[t.key] = statistics.mean(_cold_costs(f, args, 1, 10, 0.0, t.warm_args,
                                                 flush_bytes))
    return out


def in_run_times(gm, feed: dict, runs: int = 15) -> dict[str, float]:
    """Node -> seconds of its kernel inside a run (GraphModule.step_times), the median over
    `runs` runs."""
    gm.set_input(**feed)
    return {node: statistics.median(v) for node, v in gm.step_times(runs).items()}


def fidelity(tasks, log: str, gm, feed: dict, per_task: bool = False) -> str:
    """Each task's best record against its kernel's time inside a run of the model built from
    `log` (the median over its nodes): weighted sums and the extreme tasks, and with
    `per_task` one line per task."""
    best = best_costs(log)
    in_run = in_run_times(gm, feed)
    rec_sum = run_sum = 0.0
    ratios = []
    rows = []
    for n, t in enumerate(tasks):
        if t.key not in best:
            continue
        mine = statistics.median(in_run[node] for node in t.nodes)
        rec_sum += t.weight * best[t.key]
        run_sum += t.weight * mine
        ratios.append((best[t.key] / mine, t))
        rows.append(f"  task {n:2d} {t.op} x{t.weight} ({t.nodes[0]}): record "
                    f"{best[t.key] * 1e6:.1f} us, in-run {mine * 1e6:.1f} us")
    lo, hi = min(ratios, key=lambda p: p[0]), max(ratios, key=lambda p: p[0])
    return (f"records {rec_sum * 1e3:.3f} ms vs in-run {run_sum * 1e3:.3f} ms (weighted, "
            f"{len(ratios)} tasks; all steps in a run {sum(in_run.values()) * 1e3:.3f} ms); "
            f"record / in-run per task {lo[0]:.2f} ({lo[1].op} {lo[1].nodes[0]}) to "
            f"{hi[0]:.2f} ({hi[1].op} {hi[1].nodes[0]}), median "
            f"{statistics.median(p[0] for p in ratios):.2f}"
            + ("\n" + "\n".join(rows) if per_task else ""))


def default_fidelity(tasks, defaults: dict[str, float], gm, feed: dict) -> str:
    """Each task's default as the tuner first times it (a template's fallback config; a
    template-free task's sketch fallback, its first trial) against its kernel inside a run of
    the untuned build (the graph's own default schedule): whether the gradient starts from the
    time the model runs at."""
    in_run = in_run_times(gm, feed)
    rows = []
    for n, t in enumerate(tasks):
        mine = statistics.median(in_run[node] for node in t.nodes)
        rows.append(f"  task {n:2d} {t.op} x{t.weight}{' (free)' if _free(t) else ''}: "
                    f"default timed {defaults[t.key] * 1e6:.1f} us, in the untuned run "
                    f"{mine * 1e6:.1f} us ({defaults[t.key] / mine:.2f})")
    return "\n".join(rows)


def _free(task) -> bool:
    return bool(getattr(task, "template_free", False))


def time_builds(builds: dict, feed: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds per run of each build in each round (the median of 15 runs, each timed on its
    own, after 50 ms of runs that bring the core back from the pause), the builds interleaved
    round by round. One warm run and the mean of 5 put two identical builds 2.3% apart
    (0.955-0.994) on this model; this way 0.9% (0.980-1.007)."""
    times: dict[str, list[float]] = {k: [] for k in builds}
    for _ in range(rounds):
        for k, gm in builds.items():
            time.sleep(PAUSE_S)
            warm_until = time.perf_counter() + 0.05
            while time.perf_counter() < warm_until:
                gm.run(**feed)
            runs = []
            for _ in range(15):
                t0 = time.perf_counter()
                gm.run(**feed)
                runs.append(time.perf_counter() - t0)
            times[k].append(statistics.median(runs))
    return times


def _timed_in_this_process(model: str, size: int, width: int, logs: dict,
                           rounds: int) -> dict:
    """time_builds of the builds of `logs` (key -> log, None: untuned), built here."""
    g = graph.from_onnx(model_of(model, size, width))
    builds = {k: build(g, log) for k, log in logs.items()}
    return time_builds(builds, model_feed(g), rounds)


def time_in_processes(model: str, size: int, width: int, logs: dict, rounds: int,
                      processes: int) -> dict:
    """The rounds of time_builds spread over `processes` fresh processes, each building every
    build anew. Why: where a build's weights and arena land in physical memory changes its
    whole runs by several percent, and that stays the same for as long as the build lives.
    Measured (ResNet-50-shaped 112x112 width 32, one thread, Zen 4): one build timed in five
    processes 5.24-5.60 ms, more than two strategies' builds differed; timed in one process,
    a build's luck of placement decided the comparison."""
    ctx = multiprocessing.get_context("spawn")
    per = max(3, math.ceil(rounds / processes))
    times: dict = {k: [] for k in logs}
    for _ in range(processes):
        with cf.ProcessPoolExecutor(1, mp_context=ctx) as pool:
            got = pool.submit(_timed_in_this_process, model, size, width, logs, per).result()
        for k, v in got.items():
            times[k].extend(v)
    return times


def spread(values: list[float]) -> float:
    """Interquartile range over the median: how far apart the rounds of one build are."""
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4)
    return (q3 - q1) / statistics.median(values)


def reached_at(by_fraction: dict[float, float], target: float) -> str:
    """The first budget share at which a value is at or below `target`."""
    reached = [f for f in sorted(by_fraction) if by_fraction[f] <= target]
    return f"at {int(reached[0] * 100)}% of the budget" if reached else "not within the budget"


def paired_ratio(mine: list[float], theirs: list[float], draws: int = 2000) -> tuple:
    """(median, 5th, 95th percentile) of the per-round ratio mine / theirs: both builds timed in
    the same rounds, so a round's disturbance divides out; the interval by resampling the
    rounds (bootstrap)."""
    ratios = np.array(mine) / np.array(theirs)
    rng = np.random.default_rng(0)
    boot = np.median(rng.choice(ratios, (draws, len(ratios))), axis=1)
    return float(np.median(ratios)), *map(float, np.percentile(boot, [5, 95]))


def verdict(lo: float, hi: float) -> str:
    if hi < 1.0:
        return "faster"
    if lo > 1.0:
        return "slower"
    return "level (the interval holds 1)"


def curve_reach(curve_file: str, goal: float, budget: int) -> str:
    """Where the scheduler's own curve (its estimate after each round) first reaches `goal`."""
    with open(curve_file) as f:
        for line in f:
            entry = json.loads(line)
            lat = entry["estimated_latency"]
            if lat is not None and lat <= goal:
                return (f"; by its curve after {entry['trials']} trials "
                        f"({entry['trials'] / budget:.0%})")
    return "; not by its curve"


def trial_sequences(tasks, log: str) -> dict[str, list[float]]:
    """Workload key -> the seconds of each of its trials in the log, in order (inf: failed;
    re-measurements left out)."""
    seqs: dict[str, list[float]] = {t.key: [] for t in tasks}
    for r in autotune.load_records(log):
        if r.key in seqs and not r.remeasured:
            seqs[r.key].append(r.cost if r.valid else math.inf)
    return seqs


def fewest_trials(tasks, seqs: dict[str, list[float]], untried: dict[str, float],
                  goal: float, rounds: tuple[int, int] | None = None) -> int | None:
    """The fewest trials whose estimate reaches `goal` when each task keeps a prefix of its
    sequence, chosen knowing every trial's outcome (a bound for any allocation of these
    trials): per task, weight x best of its first n trials (`untried` for n = 0); a knapsack
    over the tasks' n. None when even every trial does not reach it. rounds: (first, size):
    the bound for a scheduler whose rounds are these (every task gets its first round of
    `first` trials, then rounds of `size`; n is a round's end or the whole sequence)."""
    total = sum(map(len, seqs.values()))
    # fewest[m]: the least estimate over the tasks so far with m trials in all
    fewest = np.zeros(total + 1)
    for t in tasks:
        costs = t.weight * np.array([untried[t.key],
                                     *np.minimum.accumulate(seqs[t.key] or [math.inf])])
        nxt = np.full(total + 1, math.inf)
        for n in _round_ends(len(seqs[t.key]), rounds):
            nxt[n:] = np.minimum(nxt[n:], fewest[:total + 1 - n] + costs[n])
        fewest = nxt
    reached = np.nonzero(fewest <= goal * (1 + 1e-9))[0]
    return int(reached[0]) if len(reached) else None


def _round_ends(length: int, rounds: tuple[int, int] | None) -> list[int]:
    """The trial counts a task can stop at: any (rounds None), else the ends of its rounds."""
    if rounds is None:
        return list(range(length + 1))
    first, size = rounds
    return sorted({min(n, length) for n in range(first, length + size, size)})


def hindsight_trials(tasks, log: str, defaults: dict[str, float]) -> int:
    """fewest_trials for the estimate of every trial of `log` (its trial figures, as
    estimate_from_log counts a task without records: at its default time)."""
    seqs = trial_sequences(tasks, log)
    goal = sum(t.weight * min([defaults[t.key], *seqs[t.key]]) for t in tasks)
    return fewest_trials(tasks, seqs, defaults, goal)


def load_and_cpu() -> str:
    from tensorlang.codegen.target import Target

    return (f"CPU {Target.host().cpu}, {os.cpu_count()} cores, {runtime.get_num_threads()} "
            f"threads, load {os.getloadavg()[0]:.1f}")


def model_of(name: str, size: int, width: int):
    """The ONNX model: a model_zoo one by name, or a file (--onnx; its input's shape must be
    fixed, as graph.from_onnx reads it)."""
    if name.endswith(".onnx"):
        import onnx

        return onnx.load(name)
    if name == "transformer":
        return model_zoo.transformer_block(size, width, 4, 4 * width)
    return model_zoo.resnet50(1, size, 1000, width)


def model_title(name: str, g, width: int) -> str:
    shape = "x".join(map(str, g.inputs[0].shape))
    if name.endswith(".onnx"):
        return f"{os.path.basename(name)} {shape}"
    if name == "transformer":
        return f"transformer block {shape}, 4 heads, ffn {4 * width}"
    return f"ResNet-50-shaped model {shape}, width {width}"


def model_feed(g) -> dict[str, np.ndarray]:
    """The model's input (one float image or sequence), standard normal, the same each time."""
    (inp,) = g.inputs
    return {inp.name: np.random.default_rng(0).standard_normal(inp.shape).astype(np.float32)}


def build(g, log: str | None):
    with warnings.catch_warnings():  # a prefix leaves tasks untuned: expected here
        warnings.simplefilter("ignore", UserWarning)
        return graph.build(g, tuning_log=log)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("resnet50", "transformer"), default="resnet50")
    ap.add_argument("--onnx", default=None,
                    help="an ONNX file instead of --model (e.g. a corpus CNN; --size and "
                    "--width unused)")
    ap.add_argument("--template-free", nargs="?", const=True, default=False,
                    help="also a template-free task for every kernel no template tunes; "
                    "'--template-free all': template-free tasks for every kernel instead, convs "
                    "included (as Ansor tunes a model)")
    ap.add_argument("--budget", type=int, default=2000, help="trials, both strategies")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--tuner", default="xgb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--round-trials", type=int, default=16,
                    help="the scheduler's trials per round (every task gets one round first)")
    ap.add_argument("--rounds", type=int, default=7, help="timing rounds (median)")
    ap.add_argument("--processes", type=int, default=5,
                    help="fresh processes the timing rounds are spread over")
    ap.add_argument("--dir", default=None, help="where the logs go (default: a temp dir)")
    ap.add_argument("--steps", default=",".join(STEPS),
                    help="comma-separated, of " + ", ".join(STEPS) + " (a tuning step resumes "
                    "its log in --dir: run them one at a time to keep each run short)")
    ap.add_argument("--fractions", default=",".join(map(str, FRACTIONS)),
                    help="budget shares whose builds are timed (1 among them)")
    ap.add_argument("--in-model", action=argparse.BooleanOptionalAction, default=True,
                    help="each build's finalists chosen inside runs of the model first "
                    "(graph.remeasure_in_model, as `tensorlang tune model.onnx` ends)")
    ap.add_argument("--without-default", action="store_true",
                    help="tune without the default config's head start (xgb only; see the "
                    "module doc)")
    ap.add_argument("--per-task", action="store_true",
                    help="one fidelity line per task (record vs in-run time)")
    a = ap.parse_args()
    steps = a.steps.split(",")
    fractions = sorted(float(f) for f in a.fractions.split(","))
    if 1.0 not in fractions or not all(0 < f <= 1 for f in fractions):
        ap.error(f"--fractions: shares in (0, 1], 1 among them; got {a.fractions!r}")
    if not set(steps) <= set(STEPS):
        ap.error(f"--steps: {sorted(set(steps) - set(STEPS))} not among {list(STEPS)}")
    if a.onnx:
        a.model = os.path.abspath(a.onnx)
    if a.template_free not in (True, False, "all"):
        ap.error(f"--template-free: nothing or 'all', got {a.template_free!r}")
    remeasure_top = 3
    # every task template-free without the default: no baseline timed (below)
    free_without_default = a.without_default and a.template_free == "all"
    if free_without_default:
        a.in_model, remeasure_top = False, 0
    elif a.without_default:
        if a.tuner != "xgb":
            ap.error(f"--without-default: only with --tuner xgb (any with --template-free "
                     f"all), got {a.tuner!r}")
        a.tuner, a.in_model, remeasure_top = WITHOUT_DEFAULT, False, 0
    out = a.dir or tempfile.mkdtemp(prefix="tl-bench-sched-")
    os.makedirs(out, exist_ok=True)
    g = graph.from_onnx(model_of(a.model, a.size, a.width))
    tasks = graph.extract_tasks(g, template_free=a.template_free)
    if free_without_default:
        for t in tasks:  # no default kernel timed beside the trials: the build applies them
            t.baseline = None
    title = model_title(a.model, g, a.width) + {
        True: ", template-free tasks", "all": ", every task template-free", False: ""}[
            a.template_free]
    print(f"{title}: {len(tasks)} tasks ({sum(t.weight for t in tasks)} kernels), budget "
          f"{a.budget} trials, tuner {a.tuner}, logs in {out}", flush=True)
    logs = {"heaviest-first": os.path.join(out, "heaviest_first.jsonl"),
            "scheduler": os.path.join(out, "scheduler.jsonl")}
    walls_file = os.path.join(out, "walls.json")
    walls = {}
    if os.path.exists(walls_file):  # tuning seconds of the steps run before
        with open(walls_file) as f:
            walls = json.load(f)
    flush = flush_for(g, tasks, out)
    if "tune-heaviest-first" in steps:
        walls["heaviest-first"] = walls.get("heaviest-first", 0.0) + heaviest_first(
            tasks, a.budget, logs["heaviest-first"], a.tuner, a.seed, flush, remeasure_top)
    if "tune-scheduler" in steps:
        walls["scheduler"] = walls.get("scheduler", 0.0) + scheduled(
            tasks, [round(f * a.budget) for f in fractions], logs["scheduler"], a.tuner,
            a.seed, a.round_trials, flush, remeasure_top)
    with open(walls_file, "w") as f:
        json.dump(walls, f)
    if "time" not in steps:
        return
    defaults = default_times(tasks, flush)
    builds = {"untuned": build(g, None)}
    timed_logs: dict = {"untuned": None}
    estimates = {}
    used = {}
    for name, log in logs.items():
        used[name] = sum(not r.remeasured for r in autotune.load_records(log))
        for f in fractions:
            prefix = log_prefix(log, round(f * a.budget), os.path.join(out, f"{name}_{f}.jsonl"))
            estimates[(name, f)] = estimate_from_log(tasks, prefix, defaults)
            if a.in_model:
                choose_in_model(g, prefix, f"{name} {int(f * 100)}%")
            builds[(name, f)] = build(g, prefix)
            timed_logs[(name, f)] = prefix
    feed = model_feed(g)
    ref = builds["untuned"].run(**feed)
    for k, gm in builds.items():  # every tuned build computes what the untuned one does
        for name, v in gm.run(**feed).items():
            np.testing.assert_allclose(v, ref[name], rtol=1e-3, atol=1e-4, err_msg=str(k))
    print(f"timing: {load_and_cpu()}; {a.rounds} rounds over {a.processes} processes",
          flush=True)
    rounds = time_in_processes(a.model, a.size, a.width, timed_logs, a.rounds, a.processes)
    measured = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"\n## {title}, {len(tasks)} tasks, budget {a.budget} trials ({a.tuner}); untuned "
          f"{measured['untuned'] * 1e3:.3f} ms; {load_and_cpu()} after timing\n")
    print("| strategy | " + " | ".join(f"{int(f * 100)}% measured (estimated) ms"
                                       for f in fractions) + " | trials used | tuning wall s |")
    print("|---|" + "---|" * len(fractions) + "---|---|")
    for name in logs:
        cells = [f"{measured[(name, f)] * 1e3:.3f} ({estimates[(name, f)] * 1e3:.3f})"
                 for f in fractions]
        print(f"| {name} | " + " | ".join(cells) + f" | {used[name]} | "
              f"{walls.get(name, float('nan')):.0f} |")
    print(f"\ntiming spread (IQR / median over {a.rounds} rounds, medians above): "
          + ", ".join(f"{k if isinstance(k, str) else f'{k[0]} {int(k[1] * 100)}%'} "
                      f"{spread(v) * 100:.1f}%" for k, v in rounds.items()))
    target = measured[("heaviest-first", 1.0)]
    print(f"scheduler reaches heaviest-first's final latency ({target * 1e3:.3f} ms, measured) "
          + reached_at({f: measured[("scheduler", f)] for f in fractions}, target)
          + " (target: at 50% or less)")
    for f in fractions:
        med, lo, hi = paired_ratio(rounds[("scheduler", f)], rounds[("heaviest-first", 1.0)])
        print(f"  scheduler at {int(f * 100)}% / heaviest-first at 100%, per round: median "
              f"{med:.3f}, 90% interval {lo:.3f}-{hi:.3f}: {verdict(lo, hi)}")
    goal = estimates[("heaviest-first", 1.0)]
    print(f"scheduler reaches heaviest-first's final estimate ({goal * 1e3:.3f} ms, sum of "
          "weight x best kernel time) "
          + reached_at({f: estimates[("scheduler", f)] for f in fractions}, goal)
          + curve_reach(logs["scheduler"] + ".curve.jsonl", goal, a.budget))
    hf_trials = used["heaviest-first"]
    need = hindsight_trials(tasks, logs["heaviest-first"], defaults)
    print(f"with hindsight, {need} of heaviest-first's {hf_trials} trials ({need / hf_trials:.0%}) "
          "reach the estimate of all of them (each task a prefix of its trials, trial figures "
          "only; no scheduler can know which trials will improve)")
    if a.per_task:
        print("defaults (first trials) vs the untuned build:\n"
              + default_fidelity(tasks, defaults, builds["untuned"], feed))
    for name, log in logs.items():
        print(f"fidelity, {name} 100%: "
              + fidelity(tasks, log, builds[(name, 1.0)], feed, a.per_task))
    curve = logs["scheduler"] + ".curve.jsonl"
    with open(curve) as f:
        curve_rounds = [json.loads(line) for line in f]
    last = curve_rounds[-1]["estimated_latency"] if curve_rounds else None
    print(f"scheduler: {len(curve_rounds)} rounds; its estimate after the last (tuned kernels "
          "only) "
          + (f"{last * 1e3:.3f} ms" if last is not None else "n/a (tasks not reached)")
          + f"; curve {curve}")


if __name__ == "__main__":  # builder / runner processes re-import this file: keep the guard
    main()
