"""Build throughput, LocalBuilder vs DaskBuilder, and the per-candidate costs that bound how
measurement on a dask.distributed cluster scales with the number of measuring machines.

    python benchmarks/dask_throughput.py [--candidates 24] [--rounds 2] [--size 256]
                                         [--scheduler tcp://host:8786]

Without --scheduler: a LocalCluster of one worker process with as many threads as this machine
has cores (the LocalBuilder gets as many processes), both with the `measure` resource. Builds
compile distinct configs of a matmul into a fresh kernel cache (no candidate is a cache hit);
the two builders alternate, round by round, on fresh configs.

What it prints: candidates per second for each builder; a dask task's round trip and the
scheduler's cost per task; the bytes of a module going from its builder to its measurer; the
whole pipeline (measure_batch) locally and on the cluster; and the scaling model
    candidates/s <= min(N_measure / t_measure, build capacity / t_build, 1 / t_driver)
with the figures measured here. On one machine N_measure is 1 (a measurement holds the machine):
it cannot show scaling, only the overheads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

# a fresh kernel cache, inherited by the builder processes and the dask workers: a candidate
# compiled before (an earlier run) must not count as a build
os.environ["TENSORLANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="tl-bench-cache-")

import numpy as np

from tensorlang import autotune


def _configs(task, count: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(task.config_space), size=count, replace=False)
    return [autotune.MeasureInput(task, task.config_space.get(int(i))) for i in idx]


def _build_rate(builder, inputs) -> tuple[float, int]:
    t0 = time.perf_counter()
    results = builder.build(inputs)
    elapsed = time.perf_counter() - t0
    for r in results:
        if r.path:
            os.unlink(r.path)
    return len(inputs) / elapsed, sum(r.error is None for r in results)


def _round_trip(client, n: int = 40) -> float:
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        client.submit(int, i, pure=False).result()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _per_task(client, n: int = 400) -> float:
    t0 = time.perf_counter()
    client.gather(client.map(int, range(n), pure=False))
    return (time.perf_counter() - t0) / n


def _pipeline(option, inputs) -> tuple[float, list]:
    t0 = time.perf_counter()
    results = autotune.measure_batch(option, inputs)
    return len(inputs) / (time.perf_counter() - t0), results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=24, help="per builder and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--size", type=int, default=256, help="matmul M = N = K")
    ap.add_argument("--scheduler", default=None)
    a = ap.parse_args(argv)
    import distributed

    cores = len(os.sched_getaffinity(0))
    cluster = None
    if a.scheduler:
        client = distributed.Client(a.scheduler)
    else:
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=cores,
                                           processes=True, resources={"measure": 1},
                                           dashboard_address=None)
        client = distributed.Client(cluster)
    task = autotune.create_task("matmul", (a.size, a.size, a.size, "float32"), target="llvm")
    local = autotune.LocalBuilder(n_parallel=cores, timeout=60)
    dask = autotune.DaskBuilder(client, timeout=60)
    n = a.candidates
    print(f"matmul {a.size}^3, {cores} cores, {len(client.scheduler_info(n_workers=-1)['workers'])}"
          f" dask worker(s); {n} candidates per builder and round")
    # warm-up (process start, imports) on configs not counted
    warm = _configs(task, 2 * cores, seed=999)
    _build_rate(local, warm[:cores])
    _build_rate(dask, warm[cores:])
    rates: dict[str, list[float]] = {"LocalBuilder": [], "DaskBuilder": []}
    for r in range(a.rounds):
        inputs = _configs(task, 2 * n, seed=r)
        for name, builder, part in (("LocalBuilder", local, inputs[::2]),
                                    ("DaskBuilder", dask, inputs[1::2])):
            rate, ok = _build_rate(builder, part)
            rates[name].append(rate)
            print(f"  round {r}: {name:12s} {rate:6.2f} candidates/s ({ok} of {n} built)")
    for name, rs in rates.items():
        print(f"{name:12s} median {statistics.median(rs):6.2f} candidates/s")

    rt, per_task = _round_trip(client), _per_task(client)
    print(f"dask task round trip (submit -> result, one at a time): {rt * 1e3:.2f} ms; "
          f"scheduler cost per task (400 at once): {per_task * 1e3:.2f} ms")
    built = dask.submit(_configs(task, 1, seed=777))[0].result()
    print(f"a module from builder to measurer: {len(built.get('module', b'')) / 1024:.1f} KiB")

    number, repeat = 3, 3
    local_opt = autotune.measure_option(local, autotune.LocalRunner(number=number,
                                                                    repeat=repeat))
    dask_opt = autotune.measure_option(dask, autotune.DaskRunner(client, number=number,
                                                                 repeat=repeat))
    _pipeline(local_opt, _configs(task, cores, seed=555))  # measuring process start-up
    _pipeline(dask_opt, _configs(task, cores, seed=556))
    lrate, lres = _pipeline(local_opt, _configs(task, n, seed=100))
    drate, _ = _pipeline(dask_opt, _configs(task, n, seed=101))
    kernel = statistics.median(min(r.costs) for r in lres if r.valid)
    print(f"pipeline (build + measure, number={number} repeat={repeat}): local "
          f"{lrate:.2f} candidates/s, dask {drate:.2f} candidates/s; median kernel "
          f"{kernel * 1e3:.3f} ms")
    t_build = 1 / statistics.median(rates["DaskBuilder"])
    t_measure = max(1 / drate - t_build, 0.0)
    print(f"model: t_build = {t_build * 1e3:.0f} ms per candidate on this worker "
          f"({cores} cores), t_measure ~ {t_measure * 1e3:.0f} ms occupancy of a measuring "
          f"machine beyond the build it waits for, dask ~{rt * 1e3:.1f} ms per task; "
          f"N measuring machines of this kind give at most ~N x "
          f"{1 / max(t_measure, rt):.1f} candidates/s if builds keep up, and builds need "
          f"~{t_build * 1e3:.0f} ms x candidates of build capacity (this machine: one "
          "measuring machine, so no scaling is shown here)")
    local_opt.close()
    dask_opt.close()
    client.close()
    if cluster is not None:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
