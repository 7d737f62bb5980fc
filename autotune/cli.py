"""The `tensorlang tune` and `tensorlang inspect` subcommands (tensorlang/cli.py parses the
arguments and calls these, importing autotune only when one of them runs)."""

from __future__ import annotations

import os
from collections import Counter

from .record import best_records, load_records
from .task import create_task
from .tune import TUNERS, tune_tasks
from .tuner import TuningError


def parse_args_list(text: str) -> tuple:
    """"1024,1024,1024,float32" -> (1024, 1024, 1024, "float32")."""
    out = []
    for tok in (t.strip() for t in text.split(",") if t.strip()):
        try:
            out.append(int(tok))
        except ValueError:
            try:
                out.append(float(tok))
            except ValueError:
                out.append(tok)
    return tuple(out)


def run_tune(a) -> int:
    task = create_task(a.template, parse_args_list(a.args), a.target)
    print(task)
    opt = measure_option_of(a)
    try:
        best = tune_tasks([task], n_trial=a.trials, log_file=a.log, tuner=a.tuner,
                          measure_option=opt, early_stopping=a.early_stopping, seed=a.seed)
    except TuningError:
        fail_if_no_valid_record(a.log, [task])  # the same error, counted over the whole log
        raise
    finally:
        opt.close()
    fail_if_no_valid_record(a.log, [task])
    print(f"best {best[task.key]:.1f} GFLOP/s{_failed_share(a.log, task)}; log {a.log}")
    if a.plot:
        plot_curve(a.log, a.plot)
    return 0


def fail_if_no_valid_record(log: str, tasks) -> None:
    """CLIError when the log holds no valid record of one of `tasks`: every trial failed (a
    target the CPU cannot run, a template that never builds, ...); says how they failed."""
    from tensorlang.cli import CLIError

    records = load_records(log) if os.path.exists(log) else []
    for task in tasks:
        own = [r for r in records if r.key == task.key and r.target == task.target]
        if any(r.valid for r in own):
            continue
        kinds = Counter(r.result.get("error") or "no time measured" for r in own)
        first = next((r.result.get("error_msg") for r in own if r.result.get("error_msg")), "")
        first = " ".join(str(first).split())[:200]
        raise CLIError(f"all {len(own)} trials of {task.name} {list(task.args)} failed ("
                       f"{', '.join(f'{k} {n}' for k, n in kinds.most_common())}); first: "
                       f"{first or 'no message'}; log {log}")


def _failed_share(log: str, task) -> str:
    """'; 12 of 16 trials failed (build error 12)' when most of the task's logged trials
    failed, else ''."""
    own = [r for r in load_records(log) if r.key == task.key and r.target == task.target]
    kinds = Counter(r.result.get("error") or "no time measured" for r in own if not r.valid)
    failed = sum(kinds.values())
    if failed * 2 <= len(own):
        return ""
    return (f"; {failed} of {len(own)} trials failed "
            f"({', '.join(f'{k} {n}' for k, n in kinds.most_common())})")


def measure_option_of(a, model: bool = False, flush_bytes: int | None = None):
    """The measure option of `tensorlang tune`'s arguments (the tuner name checked first).
    model: the kernels of a model, each timed as the model runs it (TaskScheduler's
    model_measure_option: every repeat from evicted caches but the kernel's own inputs, one
    call; back to back a kernel's weights stay cached, which in a run they are not), the
    caches evicted by writing ``flush_bytes`` (None: the runner's default)."""
    from .measure import LocalBuilder, LocalRunner, measure_option

    if a.tuner not in TUNERS:
        raise ValueError(f"--tuner must be one of {sorted(TUNERS)}, got {a.tuner!r}")
    timing = {"number": a.number or (1 if model else 3),
              "repeat": a.repeat or (10 if model else 3), "timeout": a.timeout,
              "min_repeat_ms": 0 if model else a.min_repeat_ms, "flush_cache": model}
    if flush_bytes is not None:
        timing["flush_bytes"] = flush_bytes
    if getattr(a, "scheduler", None):
        return _dask_option(a, timing)
    return measure_option(LocalBuilder(n_parallel=a.n_parallel), LocalRunner(**timing))


def _dask_option(a, timing: dict):
    """--scheduler: DaskBuilder and DaskRunner on a client of that scheduler."""
    from tensorlang.cli import CLIError

    if a.n_parallel is not None:
        raise CLIError("--n-parallel sets local builder processes; with --scheduler the "
                       "workers build (each with as many processes as its --nthreads)")
    try:
        from .dask_measure import dask_measure_option

        return dask_measure_option(a.scheduler, **timing)
    except ImportError as e:
        raise CLIError(str(e)) from None


def run_inspect(a) -> int:
    recs = load_records(a.log)
    by_key: dict[str, list] = {}
    for r in recs:
        by_key.setdefault(r.key, []).append(r)
    best = {k: r for (k, _), r in best_records(recs).items()}
    print(f"{a.log}: {len(recs)} records, {len(by_key)} workload(s)")
    for key, rs in by_key.items():
        errors = Counter(r.result.get("error") for r in rs if r.result.get("error"))
        versions = sorted({r.version for r in rs})
        line = f"\n{key}: {len(rs)} trials, {sum(r.valid for r in rs)} valid"
        if errors:
            line += ", errors: " + ", ".join(f"{k} {n}" for k, n in errors.most_common())
        print(line + f"; versions {versions}")
        b = best.get(key)
        if b is None:
            print("  no valid record")
            continue
        try:
            flop = create_task(b.workload["name"], b.workload["args"], b.target).flop
            perf = f"{flop / b.cost / 1e9:.1f} GFLOP/s, "
        except Exception:  # noqa: BLE001 - the template is not importable here: times only
            perf = ""
        print(f"  best: {perf}{b.cost * 1e3:.3f} ms (line {b.line}), config "
              f"{b.config['entity']}")
    if a.plot:
        plot_curve(a.log, a.plot)
    return 0


def plot_curve(log: str, path: str) -> None:
    """Best-so-far throughput against trials, one line per workload (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from tensorlang.cli import CLIError

        raise CLIError("--plot needs matplotlib (pip install tensorlang[plot])") from None
    by_key: dict[str, list] = {}
    for r in load_records(log):
        by_key.setdefault(r.key, []).append(r)
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, rs in by_key.items():
        best, ys = 0.0, []
        for r in sorted(rs, key=lambda r: r.timestamp):
            if r.valid:
                best = max(best, 1.0 / r.cost)
            ys.append(best)
        ax.plot(range(1, len(ys) + 1), ys, label=key)
    ax.set_xlabel("trials")
    ax.set_ylabel("best so far (calls / s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    print(f"wrote {path}")
