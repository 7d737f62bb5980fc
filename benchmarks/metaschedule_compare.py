"""Template-free tuning (issue 20) against TVM MetaSchedule at equal trials: the same computes
(tests/autotune/autotune_test_workloads.py, rewritten in TVM's tensor expressions by
benchmarks/metaschedule_tvm.py), each tuned by our EvolutionTuner (as benchmarks/autoschedule.py
does it: batches of 16) and by MetaSchedule (``tune_tir``: evolutionary search, XGBoost cost
model, batches of 16), then both best kernels re-measured in interleaved rounds.

TVM lives in its own interpreter (``--tvm-python``, default /work/tvm-venv/bin/python; never in
this environment): its tuning runs as a child process, and its best kernel is served by a second
child that times it on request, so each round times ours here, pauses, times theirs there,
pauses (0.2 s), with the same inputs; the figures are medians over the rounds. Both outputs are
checked against numpy before any timing.

    python benchmarks/metaschedule_compare.py [--trials 64] [--only plain_matmul,layer_norm]
        [--rounds 7] [--logdir /tmp/ms_compare] [--reuse]

--reuse re-measures the logs / databases of an earlier run instead of tuning again.

Equal trials both ways: where MetaSchedule's space is spent before --trials (it measured fewer
candidates and stopped), ours is also tuned with the number of candidates it measured (a log of
its own), re-measured in the same rounds, and printed as a second row ("ours at MS's trials").
"""

from __future__ import annotations

import argparse
import json
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
from autoschedule import _ours, _tune
from ops import _median_time  # (the pause before a peer's turn, then the median)

from tensorlang import autotune

TVM_SIDE = HERE / "metaschedule_tvm.py"
PAUSE_S = 0.2

CASES = [
    ("plain_matmul", (512, 512, 512)),
    ("plain_conv2d", (1, 64, 56, 56, 64, 3, 1, 1)),
    ("dw_conv2d", (1, 64, 56, 56)),
    ("layer_norm", (1024, 768)),
    ("attention", (8, 128, 64)),
    ("bmm_nt_bias_relu", (8, 128, 128, 64)),
    ("grouped_conv2d", (1, 64, 28, 28, 64, 4)),
    ("plain_conv2d", (1, 3, 224, 224, 24, 3, 2, 1)),
    ("conv3d", (1, 8, 16, 16, 16, 16)),
    ("row_sum", (256, 16384)),
    ("stencil_chain", (1 << 20,)),
    ("transpose", (1024, 1024)),
]


def _tvm_env(cores: int) -> dict:
    return {**os.environ, "TVM_NUM_THREADS": str(cores)}


def tune_theirs(py: str, name: str, args: tuple, workdir: str, trials: int, cores: int) -> dict:
    """MetaSchedule's search in a child process; its JSON summary (wall s, records...)."""
    cmd = [py, str(TVM_SIDE), "tune", name, ",".join(map(str, args)), "--workdir", workdir,
           "--trials", str(trials), "--per-iter", "16", "--cores", str(cores)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=_tvm_env(cores), check=False)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        raise RuntimeError(f"MetaSchedule tuning of {name} failed (rc {p.returncode}):\n"
                           f"{p.stderr[-3000:]}")
    return json.loads(lines[-1])


class TheirKernel:
    """MetaSchedule's best kernel, built and kept loaded by a serving child process."""

    def __init__(self, py, name, args, workdir, inputs_npz, output_npy, cores):
        cmd = [py, str(TVM_SIDE), "serve", name, ",".join(map(str, args)), "--workdir",
               workdir, "--inputs", inputs_npz, "--output", output_npy, "--cores", str(cores)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=_tvm_env(cores))
        for line in self.proc.stdout:
            if line.strip() == "ready":
                return
        raise RuntimeError(f"MetaSchedule serving child for {name} exited "
                           f"(rc {self.proc.wait()}) before it was ready")

    def median_time(self, number: int) -> float:
        time.sleep(PAUSE_S)
        self.proc.stdin.write(f"time {number}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


def _our_task_from_log(name: str, args: tuple, log: str):
    task = autotune.create_task(name, args)
    recs = autotune.load_records(log)
    failed = sum(1 for r in recs if r.result.get("error"))
    return task, {"wall": float("nan"), "trials": len(recs), "failed": failed}


def _rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(out - ref).max() / (np.abs(ref).max() + 1e-30))


def _tune_ours(name: str, args: tuple, trials: int, log: str, a, tag: str) -> tuple:
    """(task, stats) of our search of `trials` trials into `log`, or of its log (--reuse)."""
    if a.reuse:
        return _our_task_from_log(name, args, log)
    task, tuner, wall = _tune(name, args, trials, log, a.seed)
    stats = {"wall": wall, "trials": len(autotune.load_records(log)),
             "failed": sum(tuner.errors.values()), "refused": tuner.refused}
    print(f"# {tag}: ours tuned in {wall:.0f} s ({stats['trials']} trials of {trials}"
          f"{'; ' + tuner.stop_reason if tuner.stop_reason else ''})", flush=True)
    return task, stats


def _tune_theirs(name: str, args: tuple, workdir: str, a, tag: str) -> dict:
    summary = os.path.join(workdir, "summary.json")
    if a.reuse:
        with open(summary) as fh:
            return json.load(fh)
    stats = tune_theirs(a.tvm_python, name, args, workdir, a.trials, a.cores)
    with open(summary, "w") as fh:
        json.dump(stats, fh)
    print(f"# {tag}: MetaSchedule tuned in {stats['wall']:.0f} s ({stats['records']} "
          f"candidates measured of {a.trials})", flush=True)
    return stats


def run_case(name, args, a) -> dict:
    tag = f"{name}-{'x'.join(map(str, args))}"
    log = os.path.join(a.logdir, f"{tag}.jsonl")
    workdir = os.path.join(a.logdir, f"{tag}.ms")
    task, stats = _tune_ours(name, args, a.trials, log, a, tag)
    logs, stats = {"ours": log}, {"ours": stats}
    stats["theirs"] = _tune_theirs(name, args, workdir, a, tag)
    k = stats["theirs"]["records"]
    at_ms = os.path.join(a.logdir, f"{tag}.at{k}.jsonl")
    if 0 < k < a.trials and (os.path.exists(at_ms) or not a.reuse):
        # MetaSchedule's space was spent: ours at its count too
        logs["ours_at_ms"] = at_ms
        stats["ours_at_ms"] = _tune_ours(name, args, k, at_ms, a, tag)[1]
    rng = np.random.default_rng(0)
    with autotune.apply_history_best(log):
        _, tensors = task.instantiate()
    ins = [rng.standard_normal([int(d.value) for d in t.shape]).astype(np.float32)
           for t in tensors[:-1]]
    ref = W.reference(name, args, ins)
    kernels, errs = {}, {}
    for key, path in logs.items():
        kernels[key], out = _ours(task, path, ins)
        kernels[key]()
        errs[key] = _rel_err(out, ref)
    npz, npy = os.path.join(a.logdir, f"{tag}.in.npz"), os.path.join(a.logdir, f"{tag}.out.npy")
    np.savez(npz, *ins)
    theirs = TheirKernel(a.tvm_python, name, args, workdir, npz, npy, a.cores)
    try:
        errs["theirs"] = _rel_err(np.load(npy), ref)
        times = {k: [] for k in [*kernels, "theirs"]}
        for r in range(a.rounds):  # rotate which goes first
            order = list(times)[r % len(times):] + list(times)[:r % len(times)]
            for k in order:
                times[k].append(theirs.median_time(a.number) if k == "theirs"
                                else _median_time(kernels[k], a.number))
    finally:
        theirs.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"name": f"{name}{list(args)}", "flop": task.flop, "med": med, "errs": errs,
            "stats": stats, "load": os.getloadavg()}


def _rows(r: dict) -> list[str]:
    """The row at --trials, and where MetaSchedule stopped early, ours at its trial count."""
    t, th = r["med"]["theirs"], r["stats"]["theirs"]
    out = []
    for key in ("ours", "ours_at_ms"):
        if key not in r["med"]:
            continue
        o, st = r["med"][key], r["stats"][key]
        name = r["name"] if key == "ours" else f"{r['name']} (ours at MS's trials)"
        out.append(
            f"| {name} | {o * 1e3:.3f} | {r['flop'] / o / 1e9:.1f} | {st['wall']:.0f} | "
            f"{st['trials']} | {t * 1e3:.3f} | {r['flop'] / t / 1e9:.1f} | {th['wall']:.0f} | "
            f"{th['valid']}/{th['records']} | {t / o:.2f} | {r['errs'][key]:.1e} / "
            f"{r['errs']['theirs']:.1e} | {r['load'][0]:.1f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=10, help="calls per timing (median)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--only", default="")
    ap.add_argument("--logdir", default="metaschedule_logs")
    ap.add_argument("--tvm-python", default="/work/tvm-venv/bin/python")
    ap.add_argument("--reuse", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(a.tvm_python):
        raise SystemExit(f"--tvm-python {a.tvm_python} not found: make a TVM-only venv (see "
                         f"BENCHMARKS.md, the MetaSchedule section)")
    os.makedirs(a.logdir, exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    unknown = only - {n for n, _ in CASES}
    if unknown:
        raise SystemExit(f"--only: unknown workloads {sorted(unknown)}")
    print(f"# trials {a.trials}; load {os.getloadavg()}; {time.strftime('%Y-%m-%d %H:%M')}")
    print("| workload | ours ms | ours GFLOP/s | ours wall s | ours trials | MS ms | MS GFLOP/s "
          "| MS wall s | MS valid/trials | MS time / ours | max rel err ours / MS | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, args in CASES:
        if only and name not in only:
            continue
        print("\n".join(_rows(run_case(name, args, a))), flush=True)


if __name__ == "__main__":
    main()
