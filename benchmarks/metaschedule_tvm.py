"""The TVM side of benchmarks/metaschedule_compare.py: runs under the TVM-only interpreter
(/work/tvm-venv/bin/python, apache-tvm 0.27 + apache-tvm-ffi 0.1.14.post0), never imports
tensorlang. The computes are those of tests/autotune/autotune_test_workloads.py written again in
TVM's tensor expressions, the same loops, pads and reductions.

    metaschedule_tvm.py tune NAME ARGS --workdir DIR --trials 64 --per-iter 16
        MetaSchedule (tune_tir, evolutionary search, XGBoost cost model) for the compute;
        prints one JSON line: wall seconds, trials, builder-pool starts, best ms it measured.
    metaschedule_tvm.py serve NAME ARGS --workdir DIR --inputs FILE.npz --output FILE.npy
        builds the best record of DIR's database, runs it once on the inputs (saving the output
        for the caller's check), then answers lines on stdin: "time N" -> the median seconds
        of one call over N calls (after one warm-up call), "quit" -> exits.

ARGS is the workload's integer arguments joined by commas (e.g. 512,512,512)."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms


def _pad(x, p: int, name: str):
    *lead, h, w = (int(d) for d in x.shape)

    def body(*idx):
        i, j = idx[-2], idx[-1]
        inside = te.all(i >= p, i < h + p, j >= p, j < w + p)
        return te.if_then_else(inside, x[(*idx[:-2], i - p, j - p)], 0.0)

    return te.compute((*lead, h + 2 * p, w + 2 * p), body, name=name)


def plain_matmul(M, N, K):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def plain_conv2d(N, C, H, W, OC, KS, stride=1, pad=1):
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((OC, C, KS, KS), name="W")
    P = _pad(X, pad, "P")
    oh = (H + 2 * pad - KS) // stride + 1
    ow = (W + 2 * pad - KS) // stride + 1
    c = te.reduce_axis((0, C), name="c")
    kh = te.reduce_axis((0, KS), name="kh")
    kw = te.reduce_axis((0, KS), name="kw")
    Y = te.compute((N, OC, oh, ow), lambda n, o, y, x: te.sum(
        P[n, c, y * stride + kh, x * stride + kw] * Wt[o, c, kh, kw], axis=[c, kh, kw]),
        name="Y")
    return [X, Wt, Y]


def grouped_conv2d(N, C, H, W, OC, groups, KS=3):
    cg, per = C // groups, OC // groups
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((OC, cg, KS, KS), name="W")
    P = _pad(X, KS // 2, "P")
    c = te.reduce_axis((0, cg), name="c")
    kh = te.reduce_axis((0, KS), name="kh")
    kw = te.reduce_axis((0, KS), name="kw")
    Y = te.compute((N, OC, H, W), lambda n, o, y, x: te.sum(
        P[n, o // per * cg + c, y + kh, x + kw] * Wt[o, c, kh, kw], axis=[c, kh, kw]),
        name="Y")
    return [X, Wt, Y]


def dw_conv2d(N, C, H, W, KS=5):
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((C, KS, KS), name="W")
    P = _pad(X, KS // 2, "P")
    kh = te.reduce_axis((0, KS), name="kh")
    kw = te.reduce_axis((0, KS), name="kw")
    Y = te.compute((N, C, H, W), lambda n, c, y, x: te.sum(
        P[n, c, y + kh, x + kw] * Wt[c, kh, kw], axis=[kh, kw]), name="Y")
    return [X, Wt, Y]


def bmm_nt_bias_relu(Bt, M, N, K):
    A = te.placeholder((Bt, M, K), name="A")
    B = te.placeholder((Bt, N, K), name="B")
    bias = te.placeholder((N,), name="bias")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((Bt, M, N), lambda b, i, j: te.sum(A[b, i, k] * B[b, j, k], axis=k),
                   name="C")
    D = te.compute((Bt, M, N), lambda b, i, j: te.max(C[b, i, j] + bias[j], 0.0), name="D")
    return [A, B, bias, D]


def attention(Bh, S, Dh):
    Q, K, V = (te.placeholder((Bh, S, Dh), name=n) for n in "QKV")
    d = te.reduce_axis((0, Dh), name="d")
    scale = float(1.0 / np.sqrt(Dh))
    Sc = te.compute((Bh, S, S), lambda b, i, j: te.sum(Q[b, i, d] * K[b, j, d], axis=d),
                    name="S")
    j1 = te.reduce_axis((0, S), name="j1")
    Mx = te.compute((Bh, S), lambda b, i: te.max(Sc[b, i, j1], axis=j1), name="Mx")
    E = te.compute((Bh, S, S), lambda b, i, j: te.exp((Sc[b, i, j] - Mx[b, i]) * scale),
                   name="E")
    j2 = te.reduce_axis((0, S), name="j2")
    Sm = te.compute((Bh, S), lambda b, i: te.sum(E[b, i, j2], axis=j2), name="Sm")
    Pr = te.compute((Bh, S, S), lambda b, i, j: E[b, i, j] / Sm[b, i], name="Pr")
    j3 = te.reduce_axis((0, S), name="j3")
    O = te.compute((Bh, S, Dh), lambda b, i, e: te.sum(Pr[b, i, j3] * V[b, j3, e], axis=j3),
                   name="O")
    return [Q, K, V, O]


def layer_norm(R, C):
    X = te.placeholder((R, C), name="X")
    g = te.placeholder((C,), name="gamma")
    b = te.placeholder((C,), name="beta")
    k1 = te.reduce_axis((0, C), name="k1")
    total = te.compute((R,), lambda i: te.sum(X[i, k1], axis=k1), name="total")
    mean = te.compute((R,), lambda i: total[i] * (1.0 / C), name="mean")
    k2 = te.reduce_axis((0, C), name="k2")
    sq = te.compute((R,), lambda i: te.sum((X[i, k2] - mean[i]) * (X[i, k2] - mean[i]),
                                           axis=k2), name="sq")
    Y = te.compute((R, C), lambda i, j: (X[i, j] - mean[i]) *
                   te.rsqrt(sq[i] * (1.0 / C) + 1e-5) * g[j] + b[j], name="Y")
    return [X, g, b, Y]


def conv3d(N, C, D, H, W, OC, KS=3):
    X = te.placeholder((N, C, D, H, W), name="X")
    Wt = te.placeholder((OC, C, KS, KS, KS), name="W")
    c = te.reduce_axis((0, C), name="c")
    kd, kh, kw = (te.reduce_axis((0, KS), name=n) for n in ("kd", "kh", "kw"))
    Y = te.compute((N, OC, D - KS + 1, H - KS + 1, W - KS + 1), lambda n, o, z, y, x: te.sum(
        X[n, c, z + kd, y + kh, x + kw] * Wt[o, c, kd, kh, kw], axis=[c, kd, kh, kw]),
        name="Y")
    return [X, Wt, Y]


def row_sum(R, C):
    X = te.placeholder((R, C), name="X")
    k = te.reduce_axis((0, C), name="k")
    return [X, te.compute((R,), lambda i: te.sum(X[i, k], axis=k), name="Y")]


def stencil_chain(N, steps=3):
    X = te.placeholder((N,), name="X")
    cur = X
    for s in range(steps):
        cur = _average3(cur, f"T{s}")
    return [X, cur]


def _average3(p, name: str):
    # (te.compute refuses an fcompute with default arguments: p is bound by this call)
    return te.compute((int(p.shape[0]) - 2,),
                      lambda i: (p[i] + p[i + 1] + p[i + 2]) * (1.0 / 3.0), name=name)


def transpose(R, C):
    X = te.placeholder((R, C), name="X")
    return [X, te.compute((C, R), lambda i, j: X[j, i], name="Y")]


WORKLOADS = {f.__name__: f for f in (plain_matmul, plain_conv2d, grouped_conv2d, dw_conv2d,
                                      bmm_nt_bias_relu, attention, layer_norm, conv3d, row_sum,
                                      stencil_chain, transpose)}


def _module(name: str, args: tuple) -> tvm.IRModule:
    if name not in WORKLOADS:
        raise SystemExit(f"unknown workload {name!r}: one of {sorted(WORKLOADS)}")
    return tvm.IRModule({"main": te.create_prim_func(WORKLOADS[name](*args))})


def _target(cores: int):
    from tvm.target import codegen

    return tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(),
                              "num-cores": cores})


def _build_fp32(mod, target, _params):
    """MetaSchedule's default_build without its first step, `import tvm.s_tir.tensor_intrin`
    (the tensorization intrinsics, which no fp32 CPU schedule here uses): each batch starts a
    fresh builder pool, and that import costs ~24 s per worker on this machine, which made the
    default 30 s build timeout kill every candidate."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return tvm_build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)


def tune(name: str, args: tuple, workdir: str, trials: int, per_iter: int, cores: int) -> dict:
    import tvm.s_tir.tensor_intrin  # noqa: F401  (once, before the clock: the search loads it)

    mod = _module(name, args)
    target = _target(cores)
    builder = ms.builder.LocalBuilder(max_workers=cores, timeout_sec=120, f_build=_build_fp32)
    # MetaSchedule's own evaluator defaults: 3 calls a repeat, 1 repeat, >= 100 ms a repeat
    runner = ms.runner.LocalRunner(timeout_sec=30, evaluator_config=ms.runner.EvaluatorConfig())
    t0 = time.perf_counter()
    db = ms.tune_tir(mod, target, workdir, max_trials_global=trials,
                     num_trials_per_iter=per_iter, builder=builder, runner=runner,
                     num_tuning_cores=cores, seed=0)
    wall = time.perf_counter() - t0
    records = db.get_all_tuning_records()
    costs = [statistics.mean(float(c) for c in r.run_secs) for r in records if r.run_secs]
    ok = [c for c in costs if c < 1e9]
    return {"wall": wall, "records": len(records), "valid": len(ok),
            "batches": math.ceil(trials / per_iter),
            "best_ms": min(ok) * 1e3 if ok else None}


def _built(name: str, args: tuple, workdir: str, cores: int):
    mod = _module(name, args)
    target = _target(cores)
    db = ms.database.JSONDatabase(work_dir=workdir, allow_missing=False)
    sch = ms.tir_integration.compile_tir(db, mod, target)
    if sch is None:
        raise SystemExit(f"{workdir}: no valid MetaSchedule record for {name}{list(args)}")
    return tvm.compile(sch.mod, target=target), sch


def serve(name: str, args: tuple, workdir: str, inputs: str, output: str, cores: int) -> None:
    lib, _ = _built(name, args, workdir, cores)
    f = lib["main"]
    dev = tvm.cpu()
    ins = np.load(inputs)
    arrays = [tvm.runtime.tensor(ins[f"arr_{i}"], dev) for i in range(len(ins.files))]
    out_shape = [int(d) for d in f_out_shape(name, args)]
    out = tvm.runtime.tensor(np.zeros(out_shape, np.float32), dev)
    f(*arrays, out)
    np.save(output, out.numpy())
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            return
        number = int(cmd[1])
        f(*arrays, out)
        times = []
        for _ in range(number):
            t0 = time.perf_counter()
            f(*arrays, out)
            times.append(time.perf_counter() - t0)
        print(statistics.median(times), flush=True)


def f_out_shape(name: str, args: tuple) -> tuple:
    return tuple(int(d) for d in WORKLOADS[name](*args)[-1].shape)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["tune", "serve", "trace"])
    ap.add_argument("name")
    ap.add_argument("args")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--per-iter", type=int, default=16)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--inputs")
    ap.add_argument("--output")
    a = ap.parse_args()
    args = tuple(int(x) for x in a.args.split(","))
    if a.mode == "tune":
        print(json.dumps(tune(a.name, args, a.workdir, a.trials, a.per_iter, a.cores)),
              flush=True)
    elif a.mode == "trace":
        print(_built(a.name, args, a.workdir, a.cores)[1].trace)
    else:
        serve(a.name, args, a.workdir, a.inputs, a.output, a.cores)


if __name__ == "__main__":
    main()
