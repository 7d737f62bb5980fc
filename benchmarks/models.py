"""Whole-model benchmarks (issue 7): latency against onnxruntime as medians of interleaved
rounds, memory plan, whole-graph dispatch per kernel, build time with a cold and a warm kernel
cache, kernel counts before/after fusion, and optionally a tuned figure.

    python benchmarks/models.py                                  # all three issue-7 models
    python benchmarks/models.py --models resnet50 --rounds 11    # any model of graph.model_zoo
    python benchmarks/models.py --models resnet50 --tune-tasks 4 --tune-trials 16

Latency: each round times tensorlang's graph mode (``gm.run``, ``number`` runs, mean) then
onnxruntime on the same input (a fresh session per turn, ``number`` runs, mean); the figures are
the medians over the rounds and the ratio is the median of the per-round ratios, so a burst of
load from other processes on the shared machine hits one round of both peers, not one peer.

Build time: a child process with an empty ``TENSORLANG_CACHE_DIR`` (cold), then a second child
reusing it (warm: the in-process caches are empty, the on-disk kernel cache is full); each
child times ``from_onnx`` + ``graph.build``.

Dispatch: a graph of ``--tiny-kernels`` elementwise kernels on 16 floats (opt_level 0, so no
fusion): run time minus the sum of the kernels' own times (each timed in a native loop), per
kernel (``GraphModule.dispatch_overhead``); a model's own figure would mostly measure cache
effects between big kernels.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

DEFAULT_MODELS = "resnet50,mobilenet_like,mobilenet_v2_block,transformer_768"


def _make_model(name: str):
    """A model of the zoo by name, plus the issue-7 benchmark configurations."""
    from tensorlang.graph import model_zoo

    extra = {
        # MobileNet-like: depthwise-separable block at 112x112, 32 -> 64 channels
        "mobilenet_like": lambda: model_zoo.depthwise_separable(1, 112, 32, 64),
        # MobileNetV2 inverted residual at 56x56, 24 channels (block 8), expansion 6
        "mobilenet_v2_block": lambda: model_zoo.inverted_residual(1, 56, 24, 6),
        # BERT-base-sized encoder block: seq 128, hidden 768, 12 heads, FFN 3072
        "transformer_768": lambda: model_zoo.transformer_block(128, 768, 12, 3072),
        # ShuffleNet v1 at 224x224 (grouped 1x1 convs, channel shuffles), groups 3 and 8
        "shufflenet_v1_g3": lambda: model_zoo.shufflenet_v1(1, 224, 3),
        "shufflenet_v1_g8": lambda: model_zoo.shufflenet_v1(1, 224, 8),
    }
    if name in extra:
        return extra[name]()
    if name not in model_zoo.ZOO:
        raise SystemExit(f"unknown model {name!r}: one of {sorted([*extra, *model_zoo.ZOO])}")
    return model_zoo.ZOO[name]()


def _compile_child(model_name: str) -> None:
    from tensorlang import graph

    model = _make_model(model_name)
    t0 = time.perf_counter()
    gm = graph.build(graph.from_onnx(model))
    print(json.dumps({"compile_s": time.perf_counter() - t0, "kernels": gm.num_kernels}))


def _compile_time(model_name: str, cache: str) -> float:
    env = dict(os.environ, TENSORLANG_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, __file__, "--compile-child", model_name],
                       capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"compile child for {model_name} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["compile_s"]


def _mean_time(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def interleaved(peers: dict, rounds: int, number: int, pause: float) -> dict:
    """{peer: [seconds per call, one per round]}: every round times each peer in turn (one
    untimed warm-up call first) with ``pause`` seconds between peers. A peer with `begin` /
    `end` methods is set up just before its turn and torn down after it."""
    times: dict[str, list[float]] = {k: [] for k in peers}
    for _ in range(rounds):
        for name, fn in peers.items():
            getattr(fn, "begin", lambda: None)()
            fn()
            times[name].append(_mean_time(fn, number))
            getattr(fn, "end", lambda: None)()
            time.sleep(pause)
    return times


def isolated(peers: dict, rounds: int, number: int, blocks: int = 3) -> dict:
    """{peer: [seconds per call, one per round]} with each peer timed alone: in each of
    ``blocks`` blocks, every peer in turn is set up, warmed up and timed for its share of the
    rounds back to back, then torn down (a deployed model runs alone: neither peer's thread
    pool wakes up after the other's turn in every round, as in :func:`interleaved`)."""
    times: dict[str, list[float]] = {k: [] for k in peers}
    per_block = max(1, rounds // blocks)
    for _ in range(blocks):
        for name, fn in peers.items():
            getattr(fn, "begin", lambda: None)()
            for _ in range(3):
                fn()
            times[name] += [_mean_time(fn, number) for _ in range(per_block)]
            getattr(fn, "end", lambda: None)()
    return times


def _ort_session(model):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


class OrtPeer:
    """onnxruntime with its default (spinning) thread pool, in a fresh session for each of its
    turns. An idle session's worker threads keep spinning long after a run (measured: a model
    of ours that runs in 0.37 ms took 0.65-1.0 ms beside an idle session, even 0.5 s after its
    last run), so a session that outlived its turn would steal the cores from the next peer."""

    def __init__(self, model, feed: dict):
        self.model, self.feed, self.sess = model, feed, None

    def begin(self) -> None:
        self.sess = _ort_session(self.model)

    def end(self) -> None:
        self.sess = None
        gc.collect()  # the session joins its threads when it is destroyed

    def __call__(self):
        return self.sess.run(None, self.feed)


def bench_model(name: str, a, tuning_log: str | None = None) -> dict:
    import warnings

    from tensorlang import graph

    model = _make_model(name)
    rep = graph.BuildReport()
    with warnings.catch_warnings():
        # with a partial tuning log the untuned kernels are expected (reported in the table)
        warnings.simplefilter("ignore", UserWarning)
        gm = graph.build(graph.from_onnx(model), report=rep, tuning_log=tuning_log)
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess = _ort_session(model)
    ref = sess.run(None, {inp.name: x})[0]
    del sess  # its idle threads would spin through our first round (see OrtPeer)
    gc.collect()
    out = next(iter(gm.run(mode="graph", **{inp.name: x}).values()))
    err = float(np.abs(out - ref).max() / np.abs(ref).max())
    gm.set_input(**{inp.name: x})
    feed = {inp.name: x}
    # gm.run vs sess.run: both take the input and return fresh outputs, as a user calls them
    # (gm.benchmark would add its own warm-up run to every timed call)
    peers = {"tensorlang": lambda: gm.run(mode="graph", **feed),
             "onnxruntime": OrtPeer(model, feed)}
    t = isolated(peers, a.rounds, a.number) if a.isolated else \
        interleaved(peers, a.rounds, a.number, a.pause)
    ratios = [o / r for o, r in zip(t["tensorlang"], t["onnxruntime"])]
    mem = gm.plan["memory"]
    return {
        "model": name, "tuned": tuning_log is not None,
        "kernels_before_fusion": rep.kernels_before_fusion,
        "kernels_after_fusion": rep.kernels_after_fusion,
        "distinct_kernels": gm.num_kernels,
        "tuned_kernels": sum(k.tuned for k in rep.kernels),
        "blocks_from_log": dict(collections.Counter(rep.blocks.values())),
        "tensorlang_ms": [v * 1e3 for v in t["tensorlang"]],
        "onnxruntime_ms": [v * 1e3 for v in t["onnxruntime"]],
        "median_tensorlang_ms": statistics.median(t["tensorlang"]) * 1e3,
        "median_onnxruntime_ms": statistics.median(t["onnxruntime"]) * 1e3,
        "median_ratio": statistics.median(ratios),
        "arena_mb": mem["arena_bytes"] / 1e6, "naive_mb": mem["naive_bytes"] / 1e6,
        "lower_bound_mb": mem["lower_bound_bytes"] / 1e6,
        "max_rel_error": err,
    }


def bench_dispatch(n_kernels: int, rounds: int) -> dict:
    """Per-kernel dispatch on a chain of tiny elementwise kernels (opt_level 0: no fusion)."""
    from tensorlang import graph

    b = graph.Builder("tiny_chain")
    v = b.input("x", (16,))
    one = b.const(np.ones(16, np.float32), name="one")
    for i in range(n_kernels):
        v = b.relu(v) if i % 2 == 0 else b.add(v, one)
    gm = graph.build(b.build(v), opt_level=0)
    rows = [gm.dispatch_overhead(number=2000, repeat=3) for _ in range(rounds)]
    med = lambda k: statistics.median(r[k] for r in rows)
    return {"kernels": int(rows[0]["kernels"]),
            "graph_run_us": med("graph_run_s") * 1e6,
            "graph_run_per_kernel_us": med("graph_run_s") * 1e6 / rows[0]["kernels"],
            "kernel_sum_us": med("kernel_sum_s") * 1e6,
            "graph_per_kernel_us": med("graph_per_kernel_s") * 1e6,
            "interactive_per_kernel_us": med("interactive_per_kernel_s") * 1e6}


def tune_model(name: str, n_tasks: int, n_trial: int, log: str, flush: bool = False,
               blocks=None) -> dict:
    """Tune the ``n_tasks`` heaviest tasks (FLOPs x nodes sharing the workload) of a model for
    ``n_trial`` trials each (with ``blocks``, the conv kernels in each of these activation
    blocks); returns what was tuned and how long it took."""
    from tensorlang import autotune, graph

    tasks = graph.extract_tasks(graph.from_onnx(_make_model(name)), blocks=blocks)
    tasks.sort(key=lambda t: t.flop * t.weight, reverse=True)
    chosen = tasks[:n_tasks]
    t0 = time.perf_counter()
    # flush: each timed call starts with cold caches, as a layer of a whole model finds its
    # weights (streamed from memory) rather than as back-to-back calls of one kernel do
    option = autotune.measure_option(runner=autotune.LocalRunner(
        number=1, repeat=5, flush_cache=True)) if flush else None
    try:
        autotune.tune_tasks(chosen, n_trial=n_trial, log_file=log, progress=False,
                            measure_option=option)
    finally:
        if option is not None:
            option.close()
    return {"tasks_total": len(tasks), "tasks_tuned": [repr(t) for t in chosen],
            "trials_per_task": n_trial, "tuning_s": time.perf_counter() - t0}


def _table(results: list[dict]) -> str:
    cols = [r["model"] + (" (tuned)" if r["tuned"] else "") for r in results]
    rows = [
        ("kernel nodes before / after fusion",
         lambda r: f"{r['kernels_before_fusion']} / {r['kernels_after_fusion']}"),
        ("distinct kernels (tuned)",
         lambda r: f"{r['distinct_kernels']} ({r['tuned_kernels']})"),
        ("conv blocks chosen from the log",
         lambda r: ", ".join(f"{b} ({n} convs)"
                             for b, n in sorted(r["blocks_from_log"].items())) or "-"),
        ("latency, graph mode (median)", lambda r: f"{r['median_tensorlang_ms']:.2f} ms"),
        ("latency, onnxruntime (median)", lambda r: f"{r['median_onnxruntime_ms']:.2f} ms"),
        ("tensorlang / onnxruntime (median of rounds)", lambda r: f"{r['median_ratio']:.2f}x"),
        ("arena / lower bound / naive sum",
         lambda r: f"{r['arena_mb']:.1f} / {r['lower_bound_mb']:.1f} / {r['naive_mb']:.1f} MB"),
        ("max rel. error vs onnxruntime", lambda r: f"{r['max_rel_error']:.1e}"),
        ("build, cold / warm kernel cache",
         lambda r: (f"{r['cold_s']:.2f} s / {r['warm_s']:.2f} s" if "cold_s" in r else "-")),
    ]
    out = ["| figure | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for label, fmt in rows:
        out.append(f"| {label} | " + " | ".join(fmt(r) for r in results) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--number", type=int, default=10, help="runs per peer per round")
    # no pause by default: onnxruntime's sessions end with their turn (OrtPeer), so nothing
    # spins between peers, and on this VM a pause lets the idle vCPUs be descheduled (measured:
    # our 0.39 ms MobileNet-like block took 0.71 ms per call in rounds after 0.5 s pauses)
    ap.add_argument("--pause", type=float, default=0.0, help="seconds between peers")
    ap.add_argument("--isolated", action="store_true",
                    help="time each peer alone for a block of rounds (3 blocks, ABABAB) instead "
                         "of alternating the peers every round")
    ap.add_argument("--skip-compile", action="store_true", help="no cold/warm build times")
    ap.add_argument("--tiny-kernels", type=int, default=200)
    ap.add_argument("--tune-tasks", type=int, default=0, help="tune the N heaviest tasks of "
                    "the first model and add a tuned column (0: skip)")
    ap.add_argument("--tune-trials", type=int, default=16)
    ap.add_argument("--tune-blocks", type=lambda v: tuple(int(b) for b in v.split(",")),
                    default=None, help="e.g. 16,8: tune conv kernels in each block, and let "
                    "the build choose each conv's block from the log")
    ap.add_argument("--tune-log", default=None, help="reuse/extend this log (default: temp)")
    ap.add_argument("--tune-flush", action="store_true",
                    help="measure each candidate with cold caches (LocalRunner flush_cache)")
    ap.add_argument("--json", default=None, help="also write all figures here")
    ap.add_argument("--compile-child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.compile_child:
        _compile_child(a.compile_child)
        return 0

    models = [m for m in a.models.split(",") if m]
    results = []
    for name in models:
        r = {}
        if not a.skip_compile:
            with tempfile.TemporaryDirectory(prefix="tl-bench-cache-") as cache:
                r["cold_s"] = _compile_time(name, cache)
                r["warm_s"] = _compile_time(name, cache)
        r.update(bench_model(name, a))
        results.append(r)
        print(f"{name}: {json.dumps(r)}", file=sys.stderr, flush=True)
    extra = {}
    if a.tune_tasks:
        log = a.tune_log or os.path.join(tempfile.mkdtemp(prefix="tl-tune-"), "tune.jsonl")
        extra["tuning"] = tune_model(models[0], a.tune_tasks, a.tune_trials, log,
                                     a.tune_flush, a.tune_blocks)
        results.append(bench_model(models[0], a, tuning_log=log))
    extra["dispatch"] = bench_dispatch(a.tiny_kernels, rounds=max(3, a.rounds // 2))

    print(f"timing: {'each peer alone, 3 blocks' if a.isolated else 'peers alternating'} "
          f"({a.rounds} rounds x {a.number} calls)")
    print(_table(results))
    d = extra["dispatch"]
    print(f"\ndispatch, {d['kernels']} tiny kernels (opt_level 0): run {d['graph_run_us']:.1f} us"
          f" ({d['graph_run_per_kernel_us']:.3f} us per kernel, kernel work included)"
          f", kernels alone {d['kernel_sum_us']:.1f} us -> graph mode "
          f"{d['graph_per_kernel_us']:.3f} us per kernel, interactive "
          f"{d['interactive_per_kernel_us']:.3f} us per kernel (medians)")
    if "tuning" in extra:
        tu = extra["tuning"]
        print(f"tuned: {len(tu['tasks_tuned'])} of {tu['tasks_total']} tasks x "
              f"{tu['trials_per_task']} trials in {tu['tuning_s']:.0f} s: "
              + ", ".join(tu["tasks_tuned"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"models": results, **extra}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
