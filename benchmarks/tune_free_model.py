"""A whole model tuned with template-free tasks (issue 20): latency untuned, tuned with the
template tasks only, and tuned with the template tasks plus a template-free task for every
kernel no template covers (`graph.extract_tasks(g, template_free=True)`), against onnxruntime.

Models: ``shufflenet`` (ShuffleNet-v1-style, built here: 1x1 group convs with 4 groups, channel
shuffles as Reshape-Transpose-Reshape, 3x3 depthwise convs, stride-2 units that concat an
average-pooled shortcut; 224^2 input) and ``transformer`` (graph.model_zoo.transformer_block), or
a model of the exported corpus (benchmarks/export_models.py) with its saved inputs.

Tuning: every task with the EvolutionTuner, ``--trials`` each, batches of 16; the template
tasks' records go to ``tmpl.jsonl``, which is copied to ``all.jsonl`` before the template-free
tasks append theirs, so the two tuned builds differ only by the template-free records. Then each
template-free task's default kernel is timed by the same runner (``measure_baselines``) into
``all+baselines.jsonl``: built from it, a kernel keeps its default schedule wherever that was
no slower than the searched record.
Latency: each round times every contender (``gm.run`` / ``sess.run`` on the same input,
median of ``--number`` calls after a warm-up) with 0.2 s pauses, rotating the order; the
figures are medians over the rounds. Outputs are checked against onnxruntime first. Per kernel
node, its time inside each build (``gm.profile()``) beside its best record's measured time.

    python benchmarks/tune_free_model.py [--model shufflenet|transformer|hf_vit.dynamo]
        [--threads 1] [--trials 32] [--rounds 7]
        [--logdir /tmp/tune_free_model] [--phase all|templates|free|measure]
        [--skip-templates]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

import numpy as np
from tensorlang.graph import model_zoo
from tensorlang.graph.tuning_free import FreeGraphTask, measure_baselines

from tensorlang import autotune, graph

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ops import _median_time  # (beside this file)

GROUPS = 4


def _shuffle(m, x, c: int, hw: int):
    """ShuffleNet's channel shuffle: [1, g, c/g, h, w] -> swap the group axes -> [1, c, h, w]."""
    x = m.op("Reshape", [x, m.const(np.array([1, GROUPS, c // GROUPS, hw, hw], np.int64))])
    x = m.op("Transpose", [x], perm=[0, 2, 1, 3, 4])
    return m.op("Reshape", [x, m.const(np.array([1, c, hw, hw], np.int64))])


def _unit(m, x, cin: int, cout: int, hw: int, stride: int, first: bool = False):
    """One ShuffleNet v1 unit at input size hw; returns (output, output size)."""
    branch_out = cout - cin if stride == 2 else cout
    mid = cout // 4
    y = m.conv_bn(x, cin, mid, 1, groups=1 if first else GROUPS)
    y = _shuffle(m, y, mid, hw)
    y = m.conv_bn(y, mid, mid, 3, stride=stride, groups=mid, relu=False)
    y = m.conv_bn(y, mid, branch_out, 1, groups=GROUPS, relu=False)
    if stride == 1:
        return m.op("Relu", [m.op("Add", [y, x])]), hw
    sc = m.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    return m.op("Relu", [m.op("Concat", [y, sc], axis=1)]), hw // 2


def shufflenet(size: int = 224, classes: int = 1000, repeats=(3, 3)):
    """A ShuffleNet-v1-style network (g = 4): stem, two stages (240 and 480 channels)."""
    m = model_zoo._M(11)
    x = m.conv_bn("x", 3, 24, 3, stride=2)
    x = m.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    hw, cin = size // 4, 24
    for stage, cout in enumerate((240, 480)):
        x, hw = _unit(m, x, cin, cout, hw, 2, first=stage == 0)
        for _ in range(repeats[stage]):
            x, hw = _unit(m, x, cout, cout, hw, 1)
        cin = cout
    x = m.op("Flatten", [m.op("GlobalAveragePool", [x])], axis=1)
    y = m.op("Gemm", [x, m.w((classes, cin)), m.w((classes,), 0.1)], transB=1)
    return m.model("shufflenet_g4", [("x", [1, 3, size, size])], [y])


MODELS = {"shufflenet": shufflenet,
          "transformer": lambda: model_zoo.transformer_block(128, 256, 4, 1024)}


def _measure_option(kind: str):
    """``back-to-back``: 3 calls x 3 repeats on warm caches; ``model``: as the model runs a
    kernel (TaskScheduler's default: flushed caches but for the task's ``warm_args``, one call a
    repeat, 10 repeats)."""
    if kind == "model":
        from tensorlang.autotune.task_scheduler import model_measure_option

        return model_measure_option()
    return autotune.measure_option(autotune.LocalBuilder(n_parallel=2, timeout=40),
                                   autotune.LocalRunner(number=3, repeat=3, timeout=10))


def _tune_group(tasks: list, trials: int, log: str, seed: int, opt) -> dict:
    stats = {"tasks": len(tasks), "trials": 0, "refused": 0, "failed": 0, "wall": 0.0}
    for task in tasks:
        t0 = time.perf_counter()
        tuner = autotune.EvolutionTuner(task, batch_size=16, seed=seed)
        tuner.tune(trials, opt, callbacks=[autotune.log_to_file(log)])
        stats["wall"] += time.perf_counter() - t0
        stats["trials"] += sum(r.key == task.key for r in autotune.load_records(log))
        stats["refused"] += tuner.refused
        stats["failed"] += sum(tuner.errors.values())
        print(f"#   {task.name} {getattr(task, 'op', '')} {task.nodes[:2]}: "
              f"{tuner.best_flops / 1e9:.1f} GFLOP/s, {time.perf_counter() - t0:.0f} s",
              flush=True)
    return stats


def _best_costs(log: str) -> dict[str, float]:
    """{workload key: the best valid record's seconds per call} of a log."""
    best: dict[str, float] = {}
    for r in autotune.load_records(log):
        if r.valid:
            best[r.key] = min(best.get(r.key, float("inf")), r.cost)
    return best


def _kernel_table(tasks: list, gms: dict, log: str, rows: dict) -> None:
    """Per kernel node: its time inside each build (gm.profile(), native loop on the model's
    buffers) next to its best record's measured time and its default kernel's (baseline)."""
    best = _best_costs(log)
    rec, base = {}, {}
    for t in tasks:
        for node in t.nodes:
            rec[node] = best.get(t.key)
            if isinstance(t, FreeGraphTask):
                base[node] = best.get(t.baseline().key)
    names = list(gms)
    print("| node | op | " + " | ".join(f"{k} us" for k in names)
          + " | best record us | default measured us |")
    print("|---|---|" + "---|" * (len(names) + 2))
    us = lambda v: "-" if v is None else f"{v * 1e6:.1f}"
    for node, op in rows[names[0]]["ops"].items():
        print(f"| {node} | {op} | " + " | ".join(us(rows[k]["t"].get(node)) for k in names)
              + f" | {us(rec.get(node))} | {us(base.get(node))} |")
    print("| sum | | " + " | ".join(f"{sum(rows[k]['t'].values()) * 1e6:.1f}" for k in names)
          + " | | |", flush=True)


def _profile(gm, feed: dict) -> dict:
    gm.run(**feed)
    prof = gm.profile()
    return {"t": {r["node"]: r["time_s"] for r in prof}, "ops": {r["node"]: r["op"] for r in prof}}


def _build(g, log: str | None):
    rep = graph.BuildReport()
    t0 = time.perf_counter()
    gm = graph.build(g, tuning_log=log, report=rep)
    tuned = sum(k.tuned for k in rep.kernels)
    print(f"# build with {log}: {time.perf_counter() - t0:.0f} s, {tuned} of "
          f"{len(rep.kernels)} kernels tuned, {len(rep.tuned_failures)} records that failed "
          "to build", flush=True)
    return gm


def _ort_session(model, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


def _load(name: str, cache: str):
    """(onnx model, graph, input feed): a model built here, or one of the exported corpus
    (benchmarks/export_models.py; ``<cache>/<name>.onnx`` and its ``.inputs.npz``)."""
    import onnx

    if name in MODELS:
        model = MODELS[name]()
        inp = model.graph.input[0]
        x = np.random.default_rng(0).standard_normal(
            [d.dim_value for d in inp.type.tensor_type.shape.dim]).astype(np.float32)
        return model, graph.from_onnx(model), {inp.name: x}
    path = os.path.join(os.path.expanduser(cache), name)
    if not os.path.exists(path + ".onnx"):
        raise SystemExit(f"--model {name!r}: neither a model of this script ({sorted(MODELS)}) "
                         f"nor an exported one ({path}.onnx)")
    model = onnx.load(path + ".onnx")
    with np.load(path + ".inputs.npz") as z:
        feed = {k: z[k] for k in z.files}
    return model, graph.from_onnx(model, shapes={k: v.shape for k, v in feed.items()}), feed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="shufflenet",
                    help=f"{', '.join(sorted(MODELS))}, or a model of the exported corpus "
                         "(e.g. hf_vit.dynamo, in --cache)")
    ap.add_argument("--cache", default="~/.cache/tensorlang/real_models")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of our kernels (tuning included) and of onnxruntime")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--logdir", default="tune_free_model_logs")
    ap.add_argument("--phase", choices=["all", "templates", "free", "measure"], default="all",
                    help="tune the template tasks only, then (a second run) the template-free "
                         "ones only, then measure: each part under ~8 minutes")
    ap.add_argument("--measure", choices=["back-to-back", "model"], default="back-to-back",
                    help="how records time a kernel (see _measure_option)")
    ap.add_argument("--skip-templates", action="store_true",
                    help="tune the template-free tasks only (the template ones keep defaults)")
    a = ap.parse_args()
    if a.threads < 1:
        ap.error(f"--threads must be at least 1, got {a.threads}")
    # before any kernel runs: the runner's processes inherit it
    os.environ["TENSORLANG_NUM_THREADS"] = str(a.threads)
    from tensorlang import runtime

    runtime.set_num_threads(a.threads)
    os.makedirs(a.logdir, exist_ok=True)
    tmpl_log = os.path.join(a.logdir, f"{a.model}-tmpl.jsonl")
    all_log = os.path.join(a.logdir, f"{a.model}-all.jsonl")
    base_log = os.path.join(a.logdir, f"{a.model}-all+baselines.jsonl")
    model, g, feed = _load(a.model, a.cache)
    tasks = graph.extract_tasks(g, template_free=True)
    free = [t for t in tasks if isinstance(t, FreeGraphTask)]
    tmpl = [t for t in tasks if not isinstance(t, FreeGraphTask)]
    print(f"# {a.model}: {len(tmpl)} template tasks, {len(free)} template-free tasks "
          f"({', '.join(sorted({t.op for t in free}))}); load {os.getloadavg()}; "
          f"{time.strftime('%Y-%m-%d %H:%M')}; {a.threads} thread(s)", flush=True)
    if a.phase in ("all", "templates"):
        for p in (tmpl_log, all_log):
            if os.path.exists(p):
                os.remove(p)
        # --skip-templates: the template kernels keep their default schedules in all builds,
        # so "templates+free" differs from "untuned" by the template-free records only
        opt = _measure_option(a.measure)
        try:
            st = _tune_group([] if a.skip_templates else tmpl, a.trials, tmpl_log, a.seed, opt)
        finally:
            opt.close()
        open(tmpl_log, "a").close()
        print(f"# template tasks: {st}", flush=True)
    if a.phase in ("all", "free"):
        shutil.copyfile(tmpl_log, all_log)
        opt = _measure_option(a.measure)
        try:
            sf = _tune_group(free, a.trials, all_log, a.seed, opt)
            print(f"# template-free tasks: {sf}", flush=True)
            # the default kernels timed by the same runner: the build keeps a default
            # wherever it is no slower than the searched record
            shutil.copyfile(all_log, base_log)
            base = measure_baselines(free, opt, base_log)
        finally:
            opt.close()
        best = _best_costs(all_log)
        for t in free:
            print(f"#   {t.op} {t.nodes[:2]}: default {base[t.key] * 1e6:.1f} us, searched "
                  f"{best.get(t.key, float('inf')) * 1e6:.1f} us", flush=True)
    if a.phase in ("templates", "free"):
        return
    sess = _ort_session(model, a.threads)
    ref = sess.run(None, feed)
    # "templates, built again": the same kernels as "templates", timed as another contender
    # (how far two identical builds' figures differ in these rounds)
    gms = {"untuned": _build(g, None), "templates": _build(g, tmpl_log),
           "templates, built again": _build(g, tmpl_log),
           "templates+free (every record)": _build(g, all_log),
           "templates+free (records faster than the default)": _build(g, base_log)}
    contenders = {k: (lambda gm=gm: gm.run(**feed)) for k, gm in gms.items()}
    contenders["onnxruntime"] = lambda: sess.run(None, feed)
    for k, gm in gms.items():
        err = max(np.abs(np.asarray(o) - r).max() / (np.abs(r).max() + 1e-30)
                  for o, r in zip(gm.run(**feed).values(), ref, strict=True))
        print(f"# {k}: max |ours - onnxruntime| / max |onnxruntime| = {err:.1e} (worst of "
              f"{len(ref)} outputs)", flush=True)
    _kernel_table(tasks, gms, base_log, {k: _profile(gm, feed) for k, gm in gms.items()})
    times = {k: [] for k in contenders}
    for r in range(a.rounds):
        order = list(contenders)
        order = order[r % len(order):] + order[:r % len(order)]
        for k in order:
            times[k].append(_median_time(contenders[k], a.number))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"# load after {os.getloadavg()}")
    print("| build | ms | vs untuned | onnxruntime time / ours |")
    print("|---|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v * 1e3:.3f} | {med['untuned'] / v:.2f} | "
              f"{med['onnxruntime'] / v:.2f} |")


if __name__ == "__main__":
    main()
