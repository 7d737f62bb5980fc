"""tune_tasks: tune many tasks (e.g. a graph's kernels) into one log, resuming from it."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence

from .arguments import check_int, list_of
from .callbacks import log_to_file, progress_bar
from .evolution import EvolutionTuner
from .measure import MeasureOption
from .measure import measure_option as _measure_option
from .record import best_records, load_records
from .task import Task
from .tuner import (
    REMEASURE_ROUNDS,
    GATuner,
    GridSearchTuner,
    RandomTuner,
    TuningError,
    XGBTuner,
    check_remeasure,
    first_message,
    own_records,
    share_feature_workers,
)

# "evolution": the XGB model with a genetic search over legal fills, which measures a
# template-free task's default and structural variants first (a whole model's template and
# template-free tasks in one tune_tasks / TaskScheduler run)
TUNERS = {"xgb": XGBTuner, "evolution": EvolutionTuner, "ga": GATuner, "random": RandomTuner,
          "grid": GridSearchTuner}


def tune_tasks(tasks: Sequence[Task], n_trial: int, log_file: str | os.PathLike,
               tuner: str = "xgb", measure_option: MeasureOption | None = None,
               early_stopping: int | None = None, transfer: bool = True,
               progress: bool = True, batch_size: int = 16, seed: int | None = None,
               remeasure_top: int = 3, remeasure_rounds: int = REMEASURE_ROUNDS) -> dict:
    """Tune each task for up to `n_trial` trials, appending to `log_file`.

    Resuming: trials already in the log for a workload count against its `n_trial` and are never
    measured again; with `transfer`, the XGB model also learns from the log's records of other
    workloads of the same template. Returns {workload key: best GFLOP/s}.

    remeasure_top: at the end of each task's tuning, its `remeasure_top` fastest configs and
    its default are measured again, interleaved over `remeasure_rounds` rounds, and logged as
    re-measured records, which the log's best is chosen from (Tuner.remeasure); 0: not. The
    re-measurements are not trials (they never count against `n_trial`).

    A task none of whose trials succeeded (measured now, or in the log when resuming) does not
    stop the others; once all are done, TuningError names each such task, how its trials
    failed and the first message (its `.best` holds the return value of the others)."""
    if tuner not in TUNERS:
        raise ValueError(f"tune_tasks: tuner must be one of {sorted(TUNERS)}, got {tuner!r}")
    check_remeasure("tune_tasks", remeasure_top, remeasure_rounds)
    tasks = _task_list(tasks)
    # checked here, not in each task's tune(): a bad count failed after tuning the first tasks
    n_trial = check_int("tune_tasks", "n_trial", n_trial, 0)
    check_int("tune_tasks", "batch_size", batch_size, 1)
    if early_stopping is not None:
        check_int("tune_tasks", "early_stopping", early_stopping, 1)
    option = measure_option or _measure_option()
    log_file = os.fspath(log_file)
    best = {}
    failures: list[TuningError] = []
    features = None  # the XGB tuners' feature workers, one set for every task
    try:
        for n, task in enumerate(tasks, 1):
            history = load_records(log_file) if os.path.exists(log_file) else []
            own = [r for r in history if r.key == task.key and r.target == task.target]
            left = max(0, n_trial - sum(not r.remeasured for r in own))
            finished = any(r.remeasured for r in own) or not any(r.valid for r in own)
            if not left and not (remeasure_top and not finished):
                # tuned before: nothing to measure, no model to fit
                chosen = best_records(own).get((task.key, task.target))
                best[task.key] = task.flop / chosen.cost / 1e9 if chosen else 0.0
                if own and not any(r.valid for r in own):
                    failures.append(_logged_failure(task, own))
                continue
            t = TUNERS[tuner](task, batch_size=batch_size, seed=seed)
            features = share_feature_workers(t, features, option.builder.timeout)
            t.load_history(history if transfer else own_records(task, history))
            callbacks = [log_to_file(log_file)]
            if progress:
                callbacks.insert(0, progress_bar(desc=f"[{n}/{len(tasks)}] {task.name}"))
            if not left:  # all trials logged by a run stopped before its re-measurement
                t.remeasure(option, remeasure_top, remeasure_rounds, callbacks[-1:])
                t.close()
                best[task.key] = t.best_flops / 1e9
                continue
            try:
                t.tune(left, option, callbacks=callbacks, early_stopping=early_stopping,
                       remeasure_top=remeasure_top, remeasure_rounds=remeasure_rounds)
            except TuningError as e:
                failures.append(e)
            best[task.key] = t.best_flops / 1e9
    finally:
        if features is not None:
            features.close()
        if measure_option is None:
            option.close()
    if failures:
        head = "" if len(failures) == 1 else \
            f"{len(failures)} of {len(tasks)} tasks have no successful trial: "
        error = TuningError(head + "; ".join(map(str, failures)),
                            sum((Counter(e.errors) for e in failures), Counter()))
        error.best = best
        raise error
    return best


def _task_list(tasks) -> list[Task]:
    """`tasks` as a list of Tasks; TypeError for one Task not in a list, or another object."""
    if isinstance(tasks, Task):
        raise TypeError("tune_tasks: tasks must be a list of Tasks, got one Task; give [task]")
    return list_of(tasks, lambda t: isinstance(t, Task),
                   f"tune_tasks: tasks must be a list of Tasks, got {type(tasks).__name__}",
                   lambda t: f"tune_tasks: tasks must be autotune Tasks, got "
                             f"{type(t).__name__}")


def _logged_failure(task: Task, records: list) -> TuningError:
    """The TuningError of a task whose logged trials all failed."""
    kinds = Counter(r.result.get("error") or "no time measured" for r in records)
    first = first_message(next((r.result.get("error_msg") for r in records
                                if r.result.get("error_msg")), ""))
    return TuningError(f"all {len(records)} trials of {task.name} {list(task.args)} failed "
                       f"({', '.join(f'{k} {n}' for k, n in kinds.most_common())}); first: "
                       f"{first}", dict(kinds))
