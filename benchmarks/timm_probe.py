"""A hunt over timm's model zoo: export the smallest variant of many architectures (random
weights) to ONNX with both of torch's exporters, then import, build and run each file with
tensorlang against onnxruntime; prints one row per file and a table.

    # in a venv with torch, timm, onnx, onnxscript (nothing is downloaded but packages)
    python benchmarks/timm_probe.py export --out /tmp/timm_onnx [--models convnext_atto,levit]
    # with tensorlang and onnxruntime (the same venv or another)
    python benchmarks/timm_probe.py probe --out /tmp/timm_onnx [--models ...] [--time]

export: ``NAME.ts.onnx`` (TorchScript exporter, opset 17), ``NAME.dynamo.onnx`` (dynamo=True,
opset 18), ``NAME.dyn.onnx`` (TorchScript with a dynamic batch axis, for ``--dynamic``) and
``NAME.npz`` (the input). Parameters that random init leaves constant get noise and BatchNorm
statistics are measured on random batches (export_models._informative), so activations
neither vanish nor explode. A model that fails to export is recorded in ``NAME.json``.

probe: each file in a child process (a crash or a hang is that file's row, not the run's):
import with the input's shapes, build, run; error = max |ours - ort| / max |ort| (the worst
output); where that is over 1e-4, both are compared with onnx's float64 reference evaluator.
``--time``: latency at one thread each (TENSORLANG_NUM_THREADS=1, onnxruntime's
intra_op_num_threads=1), alternating, 0.3 s pause after each turn, median of 3 rounds
(``--time 5``: 5).
Skips cleanly (exit 0, a message) where torch / timm (export) or onnxruntime (probe) are
missing.
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

# timm name -> input (C, H, W); the smallest variant of each architecture, inputs reduced
# where the architecture allows it
MODELS = {
    "convnext_atto": (3, 224, 224), "convnextv2_atto": (3, 224, 224),
    "tf_efficientnetv2_b0": (3, 192, 192), "regnetx_002": (3, 224, 224),
    "regnety_002": (3, 224, 224), "rexnet_100": (3, 224, 224), "ghostnet_100": (3, 224, 224),
    "ghostnetv2_100": (3, 224, 224), "repvgg_a0": (3, 224, 224), "mobileone_s0": (3, 224, 224),
    "fastvit_t8": (3, 256, 256), "efficientformer_l1": (3, 224, 224),
    "efficientformerv2_s0": (3, 224, 224), "levit_128s": (3, 224, 224),
    "mobilevit_xxs": (3, 256, 256), "mobilevitv2_050": (3, 256, 256),
    "poolformer_s12": (3, 224, 224), "poolformerv2_s12": (3, 224, 224),
    "coat_lite_tiny": (3, 224, 224), "maxvit_pico_rw_256": (3, 256, 256),
    "coatnet_nano_rw_224": (3, 224, 224), "edgenext_xx_small": (3, 256, 256),
    "tinynet_e": (3, 106, 106), "hardcorenas_a": (3, 224, 224), "lcnet_050": (3, 224, 224),
    "dla46_c": (3, 224, 224), "hrnet_w18_small": (3, 224, 224),
    "res2net50_14w_8s": (3, 224, 224), "resnest14d": (3, 224, 224),
    "skresnet18": (3, 224, 224), "nf_regnet_b0": (3, 192, 192), "nf_resnet26": (3, 224, 224),
    "cs3darknet_s": (3, 256, 256), "darknet17": (3, 256, 256),
    "ese_vovnet19b_slim_dw": (3, 224, 224), "xception41": (3, 299, 299),
    "inception_v4": (3, 299, 299), "deit_tiny_patch16_224": (3, 224, 224),
    "vit_tiny_patch16_224": (3, 224, 224), "swin_tiny_patch4_window7_224": (3, 224, 224),
    "swinv2_cr_tiny_ns_224": (3, 224, 224), "crossvit_tiny_240": (3, 240, 240),
    "pit_ti_224": (3, 224, 224), "tnt_s_patch16_224": (3, 224, 224),
    "cait_xxs24_224": (3, 224, 224), "volo_d1_224": (3, 224, 224), "gcvit_xxtiny": (3, 224, 224),
    "davit_tiny": (3, 224, 224), "hiera_tiny_224": (3, 224, 224),
    "eva02_tiny_patch14_224": (3, 224, 224), "beit_base_patch16_224": (3, 224, 224),
    "mixer_s16_224": (3, 224, 224), "resmlp_12_224": (3, 224, 224),
    "gmlp_ti16_224": (3, 224, 224), "convmixer_768_32": (3, 224, 224),
    "sequencer2d_s": (3, 224, 224), "visformer_tiny": (3, 224, 224),
    "twins_pcpvt_small": (3, 224, 224), "pvt_v2_b0": (3, 224, 224),
    "mobilenetv4_conv_small": (3, 224, 224), "efficientvit_b0": (3, 224, 224),
    "efficientvit_m0": (3, 224, 224), "tiny_vit_5m_224": (3, 224, 224),
    "inception_next_tiny": (3, 224, 224), "repghostnet_050": (3, 224, 224),
    "mambaout_femto": (3, 224, 224), "starnet_s050": (3, 224, 224), "repvit_m0_9": (3, 224, 224),
    "halonet26t": (3, 256, 256), "botnet26t_256": (3, 256, 256),
    "lambda_resnet26t": (3, 256, 256), "selecsls42b": (3, 224, 224), "dpn68": (3, 224, 224),
    "hgnetv2_b0": (3, 224, 224), "resnetv2_50x1_bit": (3, 224, 224),
    "tresnet_m": (3, 224, 224), "gernet_s": (3, 224, 224), "focalnet_tiny_srf": (3, 224, 224),
    "gcresnet33ts": (3, 256, 256), "nest_tiny": (3, 224, 224), "xcit_nano_12_p16_224": (3, 224, 224),
    "convit_tiny": (3, 224, 224), "mvitv2_tiny": (3, 224, 224), "regnetz_b16": (3, 224, 224),
    "efficientnet_lite0": (3, 224, 224), "mixnet_s": (3, 224, 224), "fbnetv3_b": (3, 224, 224),
    "vit_small_patch16_rope_224": (3, 224, 224), "nextvit_small": (3, 224, 224),
    "rdnet_tiny": (3, 224, 224), "cspresnext50": (3, 224, 224), "senet154": (3, 224, 224),
}
EXPORTERS = ("ts", "dynamo")
MATCH_RTOL = 1e-4


def _selected(filters: str | None) -> list[str]:
    if not filters:
        return list(MODELS)
    keys = filters.split(",")
    return [m for m in MODELS if any(k in m for k in keys)]


# ------------------------------------------------------------------------------ export side

def export_one(name: str, out: Path, exporters: tuple[str, ...]) -> dict:
    import timm
    import torch
    from export_models import _informative

    torch.manual_seed(0)
    shape = MODELS[name]
    model = timm.create_model(name, pretrained=False)
    calib = [(torch.randn(4, *shape),) for _ in range(2)]
    _informative(model, calib)
    x = torch.randn(1, *shape)
    np.savez(out / f"{name}.npz", x=x.numpy())
    meta: dict = {"name": name, "input": list(shape)}
    for kind in exporters:
        path = out / f"{name}.{kind}.onnx"
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                if kind == "dynamo":
                    torch.onnx.export(model, (x,), str(path), dynamo=True, opset_version=18,
                                      input_names=["x"], external_data=False)
                else:
                    axes = {"x": {0: "batch"}} if kind == "dyn" else None
                    torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17,
                                      input_names=["x"], dynamic_axes=axes)
            meta[f"{kind}_export_s"] = round(time.perf_counter() - t0, 1)
        except Exception as e:  # noqa: BLE001 - an exporter's failure is a row of the hunt
            meta[f"{kind}_export_error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    (out / f"{name}.json").write_text(json.dumps(meta))
    return meta


# ------------------------------------------------------------------------------- probe side

def _ort(path: str, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _median_call(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def _latency(ours, theirs, rounds: int = 3, pause: float = 0.3) -> tuple[float, float]:
    """Median seconds per call of each, alternating turns with a pause after each."""
    n = {k: max(1, int(0.2 / max(_median_call(f, 1), 1e-6))) for k, f in
         (("a", ours), ("b", theirs))}
    ta, tb = [], []
    for _ in range(rounds):
        ours()
        ta.append(_median_call(ours, n["a"]))
        time.sleep(pause)
        theirs()
        tb.append(_median_call(theirs, n["b"]))
        time.sleep(pause)
    return statistics.median(ta), statistics.median(tb)


def probe_child(path: str, inputs: str, timing: int, batch: int) -> dict:
    """Import, build, run one file; the row names the first stage that fails."""
    from real_models import float64_reference, max_rel_error

    from tensorlang import graph

    with np.load(inputs) as z:
        feed = {k: z[k] for k in z.files}
    if batch > 1:
        feed = {k: np.concatenate([v] * batch) * np.linspace(0.5, 1.5, batch).reshape(
            -1, *[1] * (v.ndim - 1)).astype(v.dtype) for k, v in feed.items()}
    row: dict = {"stage": "ort"}
    sess = _ort(path, 1)
    names = [o.name for o in sess.get_outputs()]
    ref = dict(zip(names, sess.run(None, feed)))
    row["stage"] = "import"
    t0 = time.perf_counter()
    shapes = None if batch > 1 else {k: v.shape for k, v in feed.items()}
    g = graph.from_onnx(path, shapes=shapes)
    row["stage"], row["import_s"] = "build", round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    gm = graph.build(g)
    row["stage"], row["build_s"] = "run", round(time.perf_counter() - t0, 2)
    got = gm.run(**feed)
    row["err"] = max_rel_error(got, ref)
    row["stage"] = "ok"
    if row["err"] > MATCH_RTOL:
        f64 = float64_reference(Path(path), feed)
        row["ours_f64"] = max_rel_error(got, f64)
        row["ort_f64"] = max_rel_error(ref, f64)
    if timing:
        t_ours, t_ort = _latency(lambda: gm.run(**feed), lambda: sess.run(None, feed),
                                 rounds=timing)
        row.update(ours_ms=round(t_ours * 1e3, 2), ort_ms=round(t_ort * 1e3, 2),
                   ratio=round(t_ours / t_ort, 2))
    return row


def probe_file(path: Path, inputs: Path, a) -> dict:
    env = dict(os.environ, TENSORLANG_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "child", str(path), str(inputs), "--batch", str(a.batch)]
    if a.time:
        cmd += ["--time", str(a.time)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout,
                           check=False)
    except subprocess.TimeoutExpired:
        return {"stage": "timeout", "reason": f"over {a.timeout} s"}
    lines = r.stdout.strip().splitlines()
    if r.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    return {"stage": "crash", "reason": f"exit {r.returncode}: {tail[-1] if tail else ''}"}


def _child_main(a) -> int:
    row: dict = {}
    try:
        row = probe_child(a.path, a.inputs, a.time, a.batch)
    except Exception as e:  # noqa: BLE001 - the first failing stage is the row's finding
        row = {"stage": "?", "reason": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    print(json.dumps(row), flush=True)
    return 0


def _print_row(name: str, kind: str, row: dict) -> None:
    err = row.get("err")
    extra = ""
    if "ours_f64" in row:
        extra = f" (f64: ours {row['ours_f64']:.1e}, ort {row['ort_f64']:.1e})"
    ratio = f" {row['ours_ms']}/{row['ort_ms']} ms = {row['ratio']}x" if "ratio" in row else ""
    status = row.get("stage")
    print(f"| {name} | {kind} | {status} | {'' if err is None else f'{err:.1e}'}{extra} |"
          f"{ratio} | {row.get('reason', '')} |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export")
    pr = sub.add_parser("probe")
    for p in (ex, pr):
        p.add_argument("--out", type=Path, default=Path("/tmp/timm_onnx"))
        p.add_argument("--models", default=None, help="comma-separated name filters")
        p.add_argument("--exporters", default=",".join(EXPORTERS))
    pr.add_argument("--time", type=int, nargs="?", const=3, default=0, metavar="ROUNDS",
                    help="time both at one thread, alternating, median of ROUNDS (3)")
    pr.add_argument("--timeout", type=float, default=900)
    pr.add_argument("--batch", type=int, default=1,
                    help="> 1: import as exported (symbolic axes) and run that batch")
    ch = sub.add_parser("child")
    ch.add_argument("path")
    ch.add_argument("inputs")
    ch.add_argument("--time", type=int, default=0)
    ch.add_argument("--batch", type=int, default=1)
    a = ap.parse_args(argv)
    if a.cmd == "child":
        return _child_main(a)
    exporters = tuple(a.exporters.split(","))
    if a.cmd == "export":
        try:
            import timm  # noqa: F401
            import torch  # noqa: F401
        except ImportError as e:
            print(f"skipped: export needs torch and timm ({e})")
            return 0
        a.out.mkdir(parents=True, exist_ok=True)
        for name in _selected(a.models):
            try:
                meta = export_one(name, a.out, exporters)
            except Exception as e:  # noqa: BLE001 - a model timm cannot build here: its row says so
                meta = {"name": name, "error": f"{type(e).__name__}: {str(e)[:200]}"}
            print(json.dumps(meta), flush=True)
        return 0
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("skipped: probe needs onnxruntime")
        return 0
    print("| model | exporter | stage | max rel err | 1-thread ours/ort | failure |")
    print("|---|---|---|---|---|---|")
    for name in _selected(a.models):
        for kind in exporters:
            path = a.out / f"{name}.{kind}.onnx"
            if path.exists():
                _print_row(name, kind, probe_file(path, a.out / f"{name}.npz", a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
