"""Dynamic shapes (issue 19): one symbolic build against builds specialised to each size.

    python benchmarks/dynamic_shapes.py                     # encoder and MLP, default sizes
    python benchmarks/dynamic_shapes.py --models encoder --sizes 1x8,4x128 --rounds 5
    python benchmarks/dynamic_shapes.py --threads 1          # one thread each (ours and ORT)
    python benchmarks/dynamic_shapes.py --models cnn --sizes 1x1,2x1,4x1,8x1   # batch only
    python benchmarks/dynamic_shapes.py --models cnn_hw --sizes 224x224,97x131   # height x width

For each model (graph.model_zoo, inputs with dim_params) the symbolic build is made once; then
at each size a build specialised to that size (``from_onnx(model, shapes=...)``) is made, and
the symbolic build, the specialised one and onnxruntime are timed in interleaved rounds
(``number`` runs each, a pause between peers), so a burst of load from other processes hits
one round of every peer. Reported per size: the medians, the symbolic/specialised ratio
(median of the per-round ratios; the issue's target is <= 1.15), the ratio to onnxruntime,
the first run at that size (arena placed and buffers made: the cost of a new shape) against a
steady run, and the arena / lower bound at that size. Build times: the symbolic build and each
specialised one, in this process, with an empty on-disk kernel cache at the start (a temporary
TENSORLANG_CACHE_DIR; ``--warm-cache`` keeps the configured one): a specialised build still
finds the kernels of earlier sizes that it shares (those without a symbolic extent).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

MODELS = {
    # BERT-style: 2 layers, hidden 128, 4 heads, FFN 512; dims batch x seq
    "encoder": lambda: __import__("tensorlang.graph.model_zoo", fromlist=["x"]).bert_encoder(
        layers=2, hidden=128, heads=4, ffn=512),
    # 4 dense layers 256 wide: dims batch (the size's seq is ignored)
    "mlp": lambda: __import__("tensorlang.graph.model_zoo", fromlist=["x"]).mlp(
        batch="batch", sizes=(256, 512, 256, 10)),
    # ResNet-50's layer structure at 64x64, width 16: dims batch (the size's seq is ignored)
    "cnn": lambda: __import__("tensorlang.graph.model_zoo", fromlist=["x"]).resnet50(
        batch="batch", size=64, classes=100, width=16),
    # the same over a symbolic height and width: dims height x width
    "cnn_hw": lambda: __import__("tensorlang.graph.model_zoo", fromlist=["x"]).resnet50(
        batch=1, size=("h", "w"), classes=100, width=16),
}
BATCH_ONLY = ("mlp", "cnn")


THREADS = [0]  # --threads: ours and onnxruntime's (0: their defaults, every core)


def _inputs(name: str, b: int, s: int, hidden: int = 128) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(b * 1000 + s)
    if name == "mlp":
        return {"x": rng.standard_normal((b, 256)).astype("float32")}
    if name == "cnn":
        return {"x": rng.standard_normal((b, 3, 64, 64)).astype("float32")}
    if name == "cnn_hw":
        return {"x": rng.standard_normal((1, 3, b, s)).astype("float32")}
    mask = np.where(rng.random((b, 1, 1, s)) < 0.1, -1e4, 0).astype("float32")
    return {"x": rng.standard_normal((b, s, hidden)).astype("float32"), "mask": mask}


def _mean_time(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def _one_size(name, model, gm_sym, b, s, rounds, number, pause):
    import onnxruntime as ort

    from tensorlang import graph

    feeds = _inputs(name, b, s)
    shapes = {k: v.shape for k, v in feeds.items()}
    t0 = time.perf_counter()
    gm_fix = graph.build(graph.from_onnx(model, shapes=shapes))
    build_fix = time.perf_counter() - t0
    t0 = time.perf_counter()
    out_sym = gm_sym.run(**feeds)  # the first run at this size: buffers made, arena placed
    first = time.perf_counter() - t0
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS[0]
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    out_ort = sess.run(None, feeds)[0]
    out_fix = gm_fix.run(**feeds)
    err = max(float(np.abs(next(iter(out_sym.values())) - out_ort).max()),
              float(np.abs(next(iter(out_fix.values())) - out_ort).max()))
    peers = {"sym": lambda: gm_sym.run(**feeds), "fix": lambda: gm_fix.run(**feeds),
             "ort": lambda: sess.run(None, feeds)}
    times: dict[str, list[float]] = {k: [] for k in peers}
    for _ in range(rounds):
        for k, fn in peers.items():
            times[k].append(_mean_time(fn, number))
            time.sleep(pause)
    ratio = statistics.median(a / f for a, f in zip(times["sym"], times["fix"]))
    vs_ort = statistics.median(a / o for a, o in zip(times["sym"], times["ort"]))
    mem = gm_sym.memory_at(**_sizes(gm_sym, b, s))
    return {"size": f"{b}x{s}" if name not in BATCH_ONLY else f"{b}",
            "sym_ms": 1e3 * statistics.median(times["sym"]),
            "fix_ms": 1e3 * statistics.median(times["fix"]),
            "ort_ms": 1e3 * statistics.median(times["ort"]), "ratio": ratio, "vs_ort": vs_ort,
            "first_ms": 1e3 * first, "build_fix_s": build_fix, "err": err,
            "arena_mb": mem["arena_bytes"] / 1e6, "bound_mb": mem["lower_bound_bytes"] / 1e6}


def _sizes(gm, b: int, s: int) -> dict[str, int]:
    return {v: b if v in ("batch", "h") else s for v in gm.shape_vars}


def run_model(name: str, sizes, rounds: int, number: int, pause: float) -> None:
    from tensorlang import graph

    model = MODELS[name]()
    t0 = time.perf_counter()
    gm_sym = graph.build(graph.from_onnx(model))
    build_sym = time.perf_counter() - t0
    print(f"\n{name}: symbolic build {build_sym:.2f} s, variables {gm_sym.shape_vars}, "
          f"{gm_sym.num_kernels} kernels")
    print(f"{'size':>8} {'sym ms':>8} {'fixed ms':>9} {'sym/fix':>8} {'ort ms':>8} "
          f"{'sym/ort':>8} {'1st run ms':>10} {'fix build s':>11} {'arena MB':>9} "
          f"{'bound MB':>9} {'max err':>8}")
    seen = set()
    for b, s in sizes:
        if name in BATCH_ONLY and b in seen:
            continue
        seen.add(b)
        r = _one_size(name, model, gm_sym, b, s, rounds, number, pause)
        print(f"{r['size']:>8} {r['sym_ms']:8.3f} {r['fix_ms']:9.3f} {r['ratio']:8.2f} "
              f"{r['ort_ms']:8.3f} {r['vs_ort']:8.2f} {r['first_ms']:10.2f} "
              f"{r['build_fix_s']:11.2f} {r['arena_mb']:9.2f} {r['bound_mb']:9.2f} "
              f"{r['err']:8.1e}", flush=True)


def _warm_up() -> None:
    """One tiny build: the thread pool's library is compiled into the fresh cache here, not in
    the first timed build."""
    from tensorlang import graph

    b = graph.Builder("warm")
    graph.build(b.build([b.relu(b.input("y", (4,)))]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="encoder,mlp")
    p.add_argument("--sizes", default="1x8,1x128,4x64,8x128,2x512",
                   help="batch x seq (cnn_hw: height x width), comma-separated")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--number", type=int, default=20)
    p.add_argument("--pause", type=float, default=0.25)
    p.add_argument("--threads", type=int, default=0, help="threads of both (0: all cores)")
    p.add_argument("--warm-cache", action="store_true",
                   help="keep the configured kernel cache (build times then measure loads)")
    a = p.parse_args()
    if not a.warm_cache:
        os.environ["TENSORLANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="tl-dyn-bench-")
        _warm_up()
    if a.threads:
        from tensorlang.runtime import threadpool

        threadpool.set_num_threads(a.threads)
        THREADS[0] = a.threads
    sizes = [tuple(int(d) for d in item.split("x")) for item in a.sizes.split(",")]
    for name in a.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"unknown model {name!r}: one of {sorted(MODELS)}")
        run_model(name, sizes, a.rounds, a.number, a.pause)


if __name__ == "__main__":
    main()
