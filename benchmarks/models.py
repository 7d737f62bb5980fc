"""Whole-model benchmarks: compile time (cold and warm kernel cache), latency in both execution
modes, per-kernel dispatch overhead, and onnxruntime's latency measured in the same run.

    python benchmarks/models.py                    # ResNet-50-shaped CNN, batch 1, 224x224
    python benchmarks/models.py --model small_cnn  # any model of tensorlang.graph.model_zoo

Cold compile runs in a child process with an empty kernel cache directory; warm compile in a
second child process reusing that directory (the in-process kernel cache is empty both times).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def _make_model(name: str):
    """A model of the zoo by name, plus the issue-7 benchmark configurations."""
    from tensorlang.graph import model_zoo

    extra = {
        # MobileNet-like: depthwise-separable block at 112x112, 32 -> 64 channels
        "mobilenet_like": lambda: model_zoo.depthwise_separable(1, 112, 32, 64),
        # BERT-base-sized encoder block: seq 128, hidden 768, 12 heads, FFN 3072
        "transformer_768": lambda: model_zoo.transformer_block(128, 768, 12, 3072),
    }
    return extra[name]() if name in extra else model_zoo.ZOO[name]()


def _compile_child(model_name: str) -> None:
    from tensorlang import graph

    model = _make_model(model_name)
    t0 = time.perf_counter()
    g = graph.from_onnx(model)
    gm = graph.build(g)
    print(json.dumps({"compile_s": time.perf_counter() - t0, "kernels": gm.num_kernels,
                      "steps": gm.num_steps}))


def _compile_time(model_name: str, cache: str) -> dict:
    env = dict(os.environ, TENSORLANG_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, __file__, "--compile-child", model_name],
                       capture_output=True, text=True, env=env, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _best(fn, number: int, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--number", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compile-child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.compile_child:
        _compile_child(a.compile_child)
        return 0

    import onnxruntime as ort

    from tensorlang import graph

    with tempfile.TemporaryDirectory(prefix="tl-bench-cache-") as cache:
        cold = _compile_time(a.model, cache)
        warm = _compile_time(a.model, cache)
    model = _make_model(a.model)
    rep = graph.BuildReport()
    gm = graph.build(graph.from_onnx(model), report=rep)
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {inp.name: x})[0]
    out_g = next(iter(gm.run(mode="graph", **{inp.name: x}).values()))
    out_i = next(iter(gm.run(mode="interactive", **{inp.name: x}).values()))
    err = float(np.abs(out_g - ref).max() / np.abs(ref).max())
    same_modes = bool(np.array_equal(out_g, out_i))
    t_graph = gm.benchmark("graph", a.number, a.repeat).min
    t_inter = gm.benchmark("interactive", a.number, a.repeat).min
    t_ort = _best(lambda: sess.run(None, {inp.name: x}), a.number, a.repeat)
    d = gm.dispatch_overhead(number=max(2, a.number), repeat=a.repeat)
    mem = gm.plan["memory"]
    rows = [
        ("model", a.model),
        ("nodes (steps) / distinct kernels", f"{gm.num_steps} / {gm.num_kernels}"),
        ("kernel nodes before / after fusion",
         f"{rep.kernels_before_fusion} / {rep.kernels_after_fusion}"),
        ("compile, cold kernel cache", f"{cold['compile_s']:.2f} s"),
        ("compile, warm kernel cache", f"{warm['compile_s']:.2f} s"),
        ("latency, graph mode", f"{t_graph * 1e3:.2f} ms"),
        ("latency, interactive mode", f"{t_inter * 1e3:.2f} ms"),
        ("latency, onnxruntime", f"{t_ort * 1e3:.2f} ms"),
        ("graph / onnxruntime", f"{t_graph / t_ort:.2f}x"),
        ("dispatch per kernel, graph mode", f"{d['graph_per_kernel_s'] * 1e6:.2f} us"),
        ("dispatch per kernel, interactive", f"{d['interactive_per_kernel_s'] * 1e6:.2f} us"),
        ("arena / naive / lower bound", (f"{mem['arena_bytes'] / 1e6:.1f} / "
                                         f"{mem['naive_bytes'] / 1e6:.1f} / "
                                         f"{mem['lower_bound_bytes'] / 1e6:.1f} MB")),
        ("max rel. error vs onnxruntime", f"{err:.1e}"),
        ("graph == interactive outputs", str(same_modes)),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
