"""How fast XGBTuner's search scores new candidates (issue 5: "the model scores thousands of
candidates per second").

The real search loop (XGBTuner.next_batch: simulated annealing plus the random share), with a
model fitted on `--fit` random configs labelled by a synthetic throughput (the search does not
care where the labels come from) and a fixed search budget per batch. Reported: configs
featurized (instantiated without the legality checks, lowered to the feature IR, featurized) per
second of search time and per second spent featurizing (in the worker processes, with
workers), the share of the space featurized by then (a search whose rest of the space fits in
its budget featurizes it whole and stops early), and the phase times of one candidate (template,
lowering, extraction). The worker processes are up before the timed batches (in tune() they
start with the first batch and come up, ~0.4 s, while it is measured). Then, per workload, the
workers' rate on 256 new configs at once (what the exact ranking of a space's rest asks).

    python benchmarks/featurize.py [--workers 0 2] [--batches 4] [--budget 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from tensorlang.autotune.features import extract_features, lower_for_features

import tensorlang as tl
from tensorlang import autotune

WORKLOADS = {
    "matmul": ("matmul", (1024, 1024, 1024, "float32")),
    "conv2d_nchwc": ("conv2d_nchwc", (1, 64, 56, 56, 64, 3, 3, 1, 1, 16, "float32")),
}


def phases(task, n: int = 40, seed: int = 0) -> dict:
    """Median milliseconds per phase over n random legal configs."""
    sp = task.config_space
    rng = np.random.default_rng(seed)
    t = {"template": [], "lower": [], "extract": []}
    for i in rng.choice(len(sp), size=min(n, len(sp)), replace=False):
        t0 = time.perf_counter()
        try:
            s, args = task.instantiate(sp.get(int(i)), check=False)  # as the search does
        except tl.ScheduleError:  # refused by the template: not a candidate the model scores
            continue
        t1 = time.perf_counter()
        f = lower_for_features(s, args)
        t2 = time.perf_counter()
        extract_features(f)
        t3 = time.perf_counter()
        t["template"].append(t1 - t0)
        t["lower"].append(t2 - t1)
        t["extract"].append(t3 - t2)
    return {k: 1e3 * statistics.median(v) for k, v in t.items()}


def search_rate(task, workers: int, batches: int, budget: float, fit: int, seed: int = 0):
    """(configs featurized per second of search, per second of featurizing, configs scored per
    second of search, share of the space featurized) over `batches` calls of next_batch after
    fitting on `fit` random configs."""
    tuner = autotune.XGBTuner(task, batch_size=16, seed=seed, feature_workers=workers)
    try:
        idxs = tuner._legal_random(fit)  # (starts the feature workers)
        feats = [tuner.features(i) for i in idxs]
        # in tune() the workers come up while the first batch is measured: wait for them here
        while tuner._pool is not None and not tuner._pool.ready():
            time.sleep(0.01)
        # a synthetic label (any deterministic function of the features): only the search's
        # cost is measured here, not its choices
        w = np.random.default_rng(seed).standard_normal(len(feats[0]))
        tuner._x = feats
        tuner._flops = [float(np.exp(0.05 * f @ w)) for f in feats]
        tuner.visited.update(idxs)
        tuner._fit()
        tuner._last_measure = budget / tuner.search_ratio
        n0 = tuner.search_stats["featurized"]
        f0 = tuner._feat_cost
        s0 = tuner.search_stats.get("scored", 0)
        t0 = tuner.time_search
        for _ in range(batches):
            batch = tuner.next_batch(16)
            tuner.visited.update(batch)
        dt = tuner.time_search - t0
        f1 = tuner._feat_cost
        return ((tuner.search_stats["featurized"] - n0) / dt,
                (f1[1] - f0[1]) / max(f1[0] - f0[0], 1e-9),
                (tuner.search_stats.get("scored", 0) - s0) / dt,
                len(tuner._feat) / len(task.config_space))
    finally:
        tuner.close()


def pool_rate(task, workers: int, n: int = 256, seed: int = 0) -> float:
    """Configs per second featurized by `workers` warm worker processes handed `n` new
    configs at once (as the search's exact ranking of a space's rest does)."""
    from tensorlang.autotune.features import FeaturePool

    pool = FeaturePool(task, workers)
    try:
        pool.start()
        while not pool.ready():
            time.sleep(0.01)
        idx = np.random.default_rng(seed).permutation(len(task.config_space))
        pool.map([int(i) for i in idx[:2 * workers]])  # each worker declares its computes
        todo = [int(i) for i in idx[2 * workers:2 * workers + n]]
        t0 = time.perf_counter()
        pool.map(todo)
        return len(todo) / (time.perf_counter() - t0)
    finally:
        pool.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--budget", type=float, default=1.0, help="search seconds per batch")
    ap.add_argument("--fit", type=int, default=64)
    ap.add_argument("--workload", nargs="+", default=list(WORKLOADS))
    a = ap.parse_args()
    print("| workload | space | template ms | lower ms | extract ms | workers | "
          "featurized / s | featurized / s featurizing | scored / s | space featurized |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for w in a.workload:
        task = autotune.create_task(*WORKLOADS[w])
        ph = phases(task)
        for nw in a.workers:
            rate, feat_rate, scored, covered = search_rate(task, nw, a.batches, a.budget,
                                                           a.fit)
            print(f"| {w} | {len(task.config_space)} | {ph['template']:.2f} | "
                  f"{ph['lower']:.2f} | {ph['extract']:.2f} | {nw} | {rate:.0f} | "
                  f"{feat_rate:.0f} | {scored:.0f} | {covered:.0%} |", flush=True)
    for w in a.workload:
        task = autotune.create_task(*WORKLOADS[w])
        for nw in (n for n in a.workers if n > 1):
            print(f"{w}: {pool_rate(task, nw):.0f} configs / s featurized by {nw} warm workers "
                  "given 256 new configs at once", flush=True)


if __name__ == "__main__":  # feature worker processes re-import this file: keep the guard
    main()
