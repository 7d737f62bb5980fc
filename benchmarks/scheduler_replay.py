"""The TaskScheduler's allocation replayed offline on recorded trials (issue 21): how much of a
budget its decisions need to reach heaviest-first's estimate, against the bound of an
allocation chosen with hindsight, at several trials per task.

    python benchmarks/scheduler_replay.py LOG [--trials-per-task 40] [--size 112] [--width 32]
                                          [--model resnet50|transformer] [--seed 0]
                                          [--per-task 5,10,20,40] [--round-trials 4]

LOG: a log of every task of the model (default ResNet-50-shaped) tuned heaviest-first with many
trials each; made first when missing (task_scheduler.heaviest_first with --trials-per-task each,
xgb, the tuners' --seed;
its re-measured records are left out: minutes, on a quiet machine). A task's trials are
taken in the order they were measured, whichever strategy asks for them; each task's first
trial is its default config (what an untuned build runs). For a budget of p trials per task:
heaviest-first's estimate (weight x best of each task's first p trials), the fewest trials
that reach it with hindsight (benchmarks/task_scheduler.fewest_trials), the same bound for a
scheduler of these rounds (each task's first round, then whole rounds), and the share of the
budget after which the scheduler's estimate reaches it (its own task choice: the gradient,
first rounds, flattening, epsilon over 8 seeds). The replay's limit: a task cannot get more
trials than the log holds for it.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics

from task_scheduler import fewest_trials, heaviest_first, model_of, trial_sequences
from tensorlang.autotune.task_scheduler import TaskScheduler

from tensorlang import graph


class ReplayedScheduler(TaskScheduler):
    """The scheduler's choices, each round fed the task's next recorded trials."""

    def __init__(self, tasks, seqs, **kw):
        super().__init__(tasks, progress=False, log_file=os.devnull, remeasure_top=0, **kw)
        self.seqs = seqs
        self.curve: list[tuple[int, float]] = []

    def replay(self, n_trial: int) -> list[tuple[int, float]]:
        while (s := self._next_task(n_trial, math.inf)) is not None:
            seq = self.seqs[s.task.key]
            take = seq[s.trials:s.trials + self._round_size(s, n_trial)]
            self._count_round(s, len(take), min(take, default=math.inf),
                              exhausted=s.trials + len(take) >= len(seq))
            self.curve.append((self.trials, self.estimated_latency()))
        return self.curve


def gather(tasks, log: str, per_task: int, seed: int) -> None:
    """Heaviest-first, as task_scheduler.py tunes it (its re-measurements are ignored here)."""
    heaviest_first(tasks, per_task * len(tasks), log, "xgb", seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--trials-per-task", type=int, default=40, help="when LOG is made")
    ap.add_argument("--model", choices=("resnet50", "transformer"), default="resnet50")
    ap.add_argument("--seed", type=int, default=0, help="the tuners' seed when LOG is made")
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--per-task", default="5,10,20,40", help="budgets, in trials per task")
    ap.add_argument("--round-trials", type=int, default=4)
    a = ap.parse_args()
    tasks = graph.extract_tasks(graph.from_onnx(model_of(a.model, a.size, a.width)))
    if not os.path.exists(a.log):
        gather(tasks, a.log, a.trials_per_task, a.seed)
    seqs = trial_sequences(tasks, a.log)
    missing = [t.key for t in tasks if not seqs[t.key]]
    if missing:
        raise SystemExit(f"{a.log}: no trials of {len(missing)} of the model's tasks")
    untried = {k: v[0] for k, v in seqs.items()}  # the first trial: the default config
    print(f"{len(tasks)} tasks, {sum(map(len, seqs.values()))} trials in {a.log}")
    first = ReplayedScheduler(tasks, seqs, round_trials=a.round_trials).first_round_trials
    print("| trials per task | budget | heaviest-first estimate ms | hindsight | hindsight in "
          f"rounds of {first}, then {a.round_trials} | scheduler (median of 8 seeds, range) |"
          "\n|---|---|---|---|---|---|")
    for p in map(int, a.per_task.split(",")):
        budget = p * len(tasks)
        goal = sum(t.weight * min(seqs[t.key][:p]) for t in tasks)
        bound = fewest_trials(tasks, seqs, untried, goal)
        in_rounds = fewest_trials(tasks, seqs, untried, goal, (first, a.round_trials))
        shares = []
        for seed in range(8):
            curve = ReplayedScheduler(tasks, seqs, round_trials=a.round_trials,
                                      seed=seed).replay(budget)
            hit = next((n for n, lat in curve if lat <= goal * (1 + 1e-9)), None)
            shares.append(hit / budget if hit else math.inf)
        cell = (f"{statistics.median(shares):.0%} ({min(shares):.0%}-{max(shares):.0%})"
                if max(shares) < math.inf else
                f"{sum(x < math.inf for x in shares)} of 8 seeds reach it")
        print(f"| {p} | {budget} | {goal * 1e3:.3f} | {bound / budget:.0%} | "
              f"{in_rounds / budget:.0%} | {cell} |")


if __name__ == "__main__":  # tuning's builder / runner processes re-import this file
    main()
