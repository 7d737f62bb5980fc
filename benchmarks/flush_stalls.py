"""Tiny kernels timed with a cache flush before each call (issue 21's measurement): how many
timed calls come out far beyond the kernel, on a machine whose cores other processes share.

Before 21cf90a a flushed timed call launched on pool workers that had spent the flush in
sched_yield: where another process ran on a worker's CPU, the launch waited out that process's
time slice, and a 1-5 us kernel was recorded at 1-7 ms (calibrate_flush's ratios in the
hundreds at 32-128 MiB, a small conv tuned at 0.5 GFLOP/s). Run it with the pool at its
default size (2 threads here); the figures depend on what else the machine runs.

    python benchmarks/flush_stalls.py                    # calibrate_flush on a 2-conv model
    python benchmarks/flush_stalls.py --runner calls     # its first kernel, woken or not
    python benchmarks/flush_stalls.py --runner local     # a 16-channel 8x8 conv, 8 trials
    python benchmarks/flush_stalls.py --runner dask      # the same through a LocalCluster

Each tuning line: the candidates' GFLOP/s (a record is the median of its repeats) and how many
timed calls took over STALL_US. ``--runner calls`` times the model's first kernel after each
flush as the runner does, alternately with and without the workers woken first (threadpool
time_calls' ``woken``), and says for each call over STALL_US whose wait filled it: the
measuring thread's (off its CPU: the machine is oversubscribed, any timing pays that) or only
the worker's (Linux schedstat's time spent runnable but waiting).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading

import numpy as np

from tensorlang import autotune, graph

STALL_US = 100  # the kernels take 1-10 us: a call over this waited for something else
CONV = (1, 16, 8, 8, 16, 3, 3, 1, 1)  # conv2d_nchwc: N, C, H, W, OC, KH, KW, stride, padding


def tiny_model(path: str) -> None:
    """Conv 4->8 3x3 + ReLU, conv 8->8 3x3 + ReLU over 1x4x8x8: two 1-2 us kernels."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
               for n, s in (("W1", (8, 4, 3, 3)), ("W2", (8, 8, 3, 3)))]
    nodes = [helper.make_node("Conv", ["x", "W1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "W2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["y"])]
    g = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], weights)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def calibrate(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tiny.onnx")
        tiny_model(path)
        g = graph.from_onnx(path)
        for _ in range(rounds):
            print(graph.calibrate_flush(g), flush=True)


def _waiting_ns(tid: int) -> int:
    """Nanoseconds thread ``tid`` of this process has spent runnable but off a CPU."""
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[1])


def calls(rounds: int, flush_mib: int) -> None:
    from tensorlang.autotune.measure import _random_inputs, _workers_kept_awake
    from tensorlang.graph.in_model import set_sample_inputs
    from tensorlang.runtime import threadpool

    if threadpool.get_num_threads() < 2:
        raise SystemExit("--runner calls needs a pool of 2 threads or more (the workers' "
                         "waits are what it counts)")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tiny.onnx")
        tiny_model(path)
        g = graph.from_onnx(path)
    gm = set_sample_inputs(graph.build(g))
    first = gm.plan["steps"][0]
    kernel = gm.kernels[first["kernel"]]
    bufs = _random_inputs(kernel.manifest)
    timer, raw = kernel._native_timer(), kernel.prepare_args(*bufs)
    junk = np.zeros(flush_mib << 20, np.uint8)
    main = threading.get_native_id()
    counts = {False: [0, 0, 0, 0], True: [0, 0, 0, 0]}  # calls, stalls, main's, worker's only
    with _workers_kept_awake(lambda: timer(raw, 1)):
        workers = threadpool.worker_tids()
        for n in range(400 * rounds):
            woken = bool(n % 2)  # interleaved: both meet the same neighbours
            junk[::64] += 1  # the runner's flush
            before = [_waiting_ns(t) for t in [main, *workers]]
            elapsed, rc = timer(raw, 1, woken=woken)
            if rc:
                raise kernel._kernel_error(rc)
            waits = [_waiting_ns(t) - b for t, b in zip([main, *workers], before)]
            c = counts[woken]
            c[0] += 1
            if elapsed * 1e6 > STALL_US:
                c[1] += 1
                half = elapsed * 1e9 / 2
                if waits[0] > half:
                    c[2] += 1
                elif max(waits[1:]) > half:
                    c[3] += 1
    for woken, (n, stalls, main_waited, worker_waited) in counts.items():
        print(f"{first['node']} after {flush_mib} MiB, workers {'woken' if woken else 'as found'}"
              f": {stalls}/{n} calls over {STALL_US} us; in {main_waited} the measuring thread "
              f"was off its CPU, in {worker_waited} only a worker", flush=True)


def tune(runner_kind: str, rounds: int, trials: int) -> None:
    task = autotune.create_task("conv2d_nchwc", args=CONV, target="llvm")
    settings = {"number": 1, "repeat": 10, "flush_cache": True, "timeout": 20}
    cluster = client = None
    if runner_kind == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=1, threads_per_worker=1, resources={"measure": 1},
                               processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        for _ in range(rounds):
            if client is not None:
                option = autotune.measure_option(autotune.DaskBuilder(client, timeout=60),
                                                 autotune.DaskRunner(client, **settings))
            else:
                option = autotune.measure_option(autotune.LocalBuilder(n_parallel=1),
                                                 autotune.LocalRunner(**settings))
            results = []
            try:
                autotune.RandomTuner(task).tune(
                    n_trial=trials, measure_option=option,
                    callbacks=[lambda _t, _i, rs, into=results: into.extend(rs)])
            finally:
                option.close()
            valid = [r for r in results if r.valid]
            if not valid:
                print(f"{runner_kind}: no valid candidate "
                      f"({', '.join(sorted({str(r.error) for r in results}))})")
                continue
            gflops = [task.flop / r.cost / 1e9 for r in valid]
            calls = [c * 1e6 for r in valid for c in r.costs]
            print(f"{runner_kind}: {len(valid)} candidates, GFLOP/s min {min(gflops):.2f} "
                  f"median {statistics.median(gflops):.1f}; timed calls over {STALL_US} us: "
                  f"{sum(c > STALL_US for c in calls)}/{len(calls)} (max {max(calls):.0f} us)",
                  flush=True)
    finally:
        if client is not None:
            client.close()
            cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", choices=["calibrate", "calls", "local", "dask"],
                    default="calibrate")
    ap.add_argument("--flush-mib", type=int, default=64, help="--runner calls: bytes written")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=8)
    args = ap.parse_args()
    if args.rounds < 1 or args.trials < 1:
        ap.error("--rounds and --trials must be >= 1")
    if args.flush_mib < 1:
        ap.error("--flush-mib must be >= 1")
    if args.runner == "calibrate":
        calibrate(args.rounds)
    elif args.runner == "calls":
        calls(args.rounds, args.flush_mib)
    else:
        tune(args.runner, args.rounds, args.trials)


if __name__ == "__main__":
    main()
