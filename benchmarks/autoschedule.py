"""Template-free tuning (issue 20) on computes written without templates or library ops
(tests/autotune/autotune_test_workloads.py, at the sizes below): EvolutionTuner for `--trials`
trials each, then the best record re-measured against the peers.

Per workload: the best kernel's GFLOP/s (re-measured here, median over interleaved rounds
after 0.2 s pauses, as benchmarks/ops.py), the tuning's wall time (search, builds and
measurements), the candidates checked (instantiated with the legality checks on), those the
checks refused (and the oversized register tiles skipped), the trials that failed (build
timeouts, ...), and ratio = peer time / our time (> 1: ours faster) against numpy and
onnxruntime (one-node models where ONNX has the op). For matmul and the 3x3 conv the bar is the library's hand schedule (tl.ops.matmul,
tl.ops.conv2d_nchw with packed weights, default schedules).

    python benchmarks/autoschedule.py [--trials 64] [--only plain_matmul,row_sum] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "autotune"))

import autotune_test_workloads as W
from ops import _OPENBLAS_VARS, _median_time, _ort

import tensorlang as tl
from tensorlang import autotune

ops = tl.ops

# name, args, ONNX peer (op, attrs) or None
CASES = [
    ("plain_matmul", (512, 512, 512), ("MatMul", {})),
    ("plain_conv2d", (1, 64, 56, 56, 64, 3, 1, 1), ("Conv", {"pads": [1] * 4})),
    ("plain_conv2d", (1, 3, 224, 224, 24, 3, 2, 1),
     ("Conv", {"pads": [1] * 4, "strides": [2, 2]})),
    ("grouped_conv2d", (1, 64, 28, 28, 64, 4), ("Conv", {"pads": [1] * 4, "group": 4})),
    ("conv3d", (1, 8, 16, 16, 16, 16), ("Conv", {})),
    ("dw_conv2d", (1, 64, 56, 56), ("Conv", {"pads": [2] * 4, "group": 64})),
    ("bmm_nt_bias_relu", (8, 128, 128, 64), None),
    ("attention", (8, 128, 64), None),
    ("layer_norm", (1024, 768), ("LayerNormalization", {"axis": -1, "epsilon": 1e-5})),
    # ViT-small's attention softmax (6 heads x 197 rows of 197: a prime, no vector divides it)
    ("softmax_rows", (1182, 197), ("Softmax", {"axis": -1})),
    ("row_sum", (256, 16384), None),
    ("stencil_chain", (1 << 20,), None),
    ("transpose", (1024, 1024), ("Transpose", {"perm": [1, 0]})),
]


def _numpy_peer(name: str, args: tuple, ins: list):
    """numpy computing the same thing in float32 (einsum / BLAS where they apply)."""
    if name == "plain_matmul":
        return lambda: ins[0] @ ins[1]
    if name == "bmm_nt_bias_relu":
        a, b, bias = ins
        return lambda: np.maximum(a @ b.transpose(0, 2, 1) + bias, 0.0)
    if name == "attention":
        q, k, v = ins

        def attn():
            s = q @ k.transpose(0, 2, 1) * (1.0 / np.sqrt(q.shape[-1]))
            e = np.exp(s - s.max(-1, keepdims=True))
            return (e / e.sum(-1, keepdims=True)) @ v
        return attn
    if name == "layer_norm":
        x, g, b = ins

        def ln():
            m = x.mean(-1, keepdims=True)
            d = x - m
            return d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * g + b
        return ln
    if name == "softmax_rows":
        def softmax():
            e = np.exp(ins[0] - ins[0].max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
        return softmax
    if name == "row_sum":
        return lambda: ins[0].sum(-1)
    if name == "stencil_chain":
        return lambda: W._stencil_ref(ins[0])
    if name == "transpose":
        return lambda: np.ascontiguousarray(ins[0].T)
    return None  # convolutions: numpy has no convolution worth timing


def _onnx_peer(spec, ins: list, out_shape: tuple):
    if spec is None:
        return None
    op, attrs = spec
    if op == "Conv":
        w = ins[1] if ins[1].ndim == ins[0].ndim else ins[1][:, None]  # depthwise: (C, 1, k, k)
        return _ort("Conv", ins[:1], list(out_shape), attrs, {"w": w})
    if op == "LayerNormalization":
        return _ort(op, ins[:1], list(out_shape), attrs, {"g": ins[1], "b": ins[2]})
    return _ort(op, ins, list(out_shape), attrs)


def _hand(name: str, args: tuple, ins: list):
    """The library's hand schedule of the same operator, or None."""
    if name == "plain_matmul":
        A, B = (tl.placeholder(x.shape, name=n) for x, n in zip(ins, "AB"))
        out = ops.matmul(A, B)
        f = tl.build(ops.default_schedule(out), [A, B, out], name="hand")
        arrays = list(ins)
    elif name == "plain_conv2d" and args[1] % 16 == 0 and args[4] % 16 == 0:
        x, w = ins
        oc, c, k, _ = w.shape
        wp = w.reshape(oc // 16, 16, c, k, k).transpose(0, 2, 3, 4, 1).copy()
        X, WP = tl.placeholder(x.shape, name="X"), tl.placeholder(wp.shape, name="W")
        out = ops.conv2d_nchw(X, WP, stride=args[6], padding=args[7])
        f = tl.build(ops.default_schedule(out), [X, WP, out], name="hand")
        arrays = [x, wp]
    elif name == "softmax_rows":  # the library's softmax and its default (ragged) schedule
        X = tl.placeholder(ins[0].shape, name="X")
        out = ops.softmax(X, axis=-1)
        f = tl.build(ops.default_schedule(out), [X, out], name="hand")
        arrays = list(ins)
    else:
        return None
    res = np.zeros([int(d.value) for d in out.shape], np.float32)
    return lambda: f(*arrays, res)


def _tune(name: str, args: tuple, trials: int, log: str, seed: int):
    task = autotune.create_task(name, args)
    if os.path.exists(log):
        os.remove(log)
    tuner = autotune.EvolutionTuner(task, batch_size=16, seed=seed)
    opt = autotune.measure_option(autotune.LocalBuilder(n_parallel=2, timeout=40),
                                  autotune.LocalRunner(number=3, repeat=3, timeout=10))
    t0 = time.perf_counter()
    try:
        tuner.tune(trials, opt, callbacks=[autotune.log_to_file(log)])
    finally:
        opt.close()
    return task, tuner, time.perf_counter() - t0


def _ours(task, log: str, ins: list):
    with autotune.apply_history_best(log):
        s, tensors = task.instantiate()
    f = tl.build(s, tensors, name="tuned")
    out = np.zeros([int(d.value) for d in tensors[-1].shape], np.float32)
    return (lambda: f(*ins, out)), out


def run_case(name, args, spec, trials, rounds, seed, logdir, reuse=False) -> dict:
    log = os.path.join(logdir, f"{name}-{'x'.join(map(str, args))}.jsonl")
    if reuse and os.path.exists(log):  # re-measure a finished run's best (no search figures)
        task = autotune.create_task(name, args)
        tuner = autotune.EvolutionTuner(task)
        recs = autotune.load_records(log)
        tuner.load_history(recs)
        for r in recs:
            if r.result.get("error"):
                tuner.errors[r.result["error"]] = tuner.errors.get(r.result["error"], 0) + 1
        tuner.search_stats.update(refused="-", oversized="-", featurized="-")
        wall = float("nan")
    else:
        task, tuner, wall = _tune(name, args, trials, log, seed)
    rng = np.random.default_rng(0)
    with autotune.apply_history_best(log):
        _, tensors = task.instantiate()
    n_in = len(tensors) - 1
    ins = [rng.standard_normal([int(d.value) for d in t.shape]).astype(np.float32)
           for t in tensors[:n_in]]
    ours, out = _ours(task, log, ins)
    ours()
    ref = W.reference(name, args, ins)
    err = float(np.abs(out - ref).max() / (np.abs(ref).max() + 1e-30))
    contenders = {"ours": ours, "hand": _hand(name, args, ins),
                  "numpy": _numpy_peer(name, args, ins),
                  "ort": _onnx_peer(spec, ins, out.shape)}
    contenders = {k: v for k, v in contenders.items() if v is not None}
    times = {k: [] for k in contenders}
    number = 10
    for r in range(rounds):
        order = list(contenders)
        order = order[r % len(order):] + order[:r % len(order)]
        for k in order:
            times[k].append(_median_time(contenders[k], number))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"name": f"{name}{list(args)}", "gflops": task.flop / med["ours"] / 1e9,
            "tuned_gflops": tuner.best_flops / 1e9, "wall": wall,
            "refused": tuner.refused, "oversized": tuner.search_stats["oversized"],
            "checked": tuner.search_stats["featurized"], "errors": dict(tuner.errors),
            "trials": tuner.trials if not reuse else len(autotune.load_records(log)),
            "stop_reason": getattr(tuner, "stop_reason", None),
            "err": err, "ms": med["ours"] * 1e3,
            "ratios": {k: med[k] / med["ours"] for k in med if k != "ours"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="")
    ap.add_argument("--logdir", default="autoschedule_logs")
    ap.add_argument("--keep-openblas-env", action="store_true")
    ap.add_argument("--reuse-logs", action="store_true",
                    help="re-measure the best record of an existing log instead of tuning")
    a = ap.parse_args()
    if not a.keep_openblas_env and any(v in os.environ for v in _OPENBLAS_VARS):
        env = {k: v for k, v in os.environ.items() if k not in _OPENBLAS_VARS}
        sys.exit(subprocess.call([sys.executable, *sys.argv], env=env))
    os.makedirs(a.logdir, exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    print(f"# trials {a.trials}; load {os.getloadavg()}; {time.strftime('%Y-%m-%d %H:%M')}")
    print("| workload | trials | ms | GFLOP/s | tuning wall s | checked | refused | oversized | "
          "failed trials | vs hand | vs numpy | vs ort | max rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, args, spec in CASES:
        if only and name not in only:
            continue
        r = run_case(name, args, spec, a.trials, a.rounds, a.seed, a.logdir, a.reuse_logs)
        ratio = {k: f"{v:.2f}" for k, v in r["ratios"].items()}
        failed = sum(r["errors"].values())
        if r["stop_reason"]:
            print(f"# {r['stop_reason']}", flush=True)
        print(f"| {r['name']} | {r['trials']} | {r['ms']:.3f} | {r['gflops']:.1f} | "
              f"{r['wall']:.0f} | "
              f"{r['checked']} | {r['refused']} | {r['oversized']} | {failed} | "
              f"{ratio.get('hand', '-')} | {ratio.get('numpy', '-')} | "
              f"{ratio.get('ort', '-')} | {r['err']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
