"""Models as onnxruntime's optimizers leave them (com.microsoft contrib operators: FusedConv,
FusedGemm, FusedMatMul, SkipLayerNormalization, Gelu, Attention, ...) against the models they
came from, each run by tensorlang and by onnxruntime, one thread per side unless --threads.

    python benchmarks/ort_optimized.py                       # corpus models, ORT_ENABLE_EXTENDED
    python benchmarks/ort_optimized.py --models hf_bert.ts --files bert_opt.onnx

Per model: the corpus export (benchmarks/export_models.py's cache), the same model saved by an
onnxruntime session at ORT_ENABLE_EXTENDED (no torch needed), and any --files made from it
(e.g. by onnxruntime.transformers.optimizer, which needs torch: benchmarks/export_ort_optimized.py
shows how). Every file is built by tensorlang with the model's input sizes, checked against
onnxruntime on the same file, then all are timed in alternating rounds with a pause between
turns (real_models.alternate). Printed: median ms per file and side, and ours / onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import export_ort_optimized  # beside this file
import real_models

DEFAULT_MODELS = "hf_bert.ts,hf_gpt2.ts,hf_vit.ts,hf_whisper_encoder.ts,tv_resnet18.ts," \
                 "tv_mobilenet_v2.ts"


def _variants(model: str, cache: Path, work: Path, extra: list[str]) -> dict[str, Path]:
    source = cache / f"{model}.onnx"
    extended = work / f"{model}.ort_extended.onnx"
    export_ort_optimized._optimize(source, "extended", extended)
    return {"export": source, "ORT_ENABLE_EXTENDED": extended} | {Path(f).name: Path(f)
                                                                 for f in extra}


def _peers(files: dict[str, Path], feeds: dict, threads: int) -> dict:
    from tensorlang import graph

    real_models.THREADS = threads
    peers = {}
    for label, path in files.items():
        gm = graph.build(graph.from_onnx(str(path), shapes={k: v.shape for k, v in
                                                            feeds.items()}))
        sess = real_models._ort_session(path)
        got, ref = gm.run(**feeds), sess.run(None, feeds)
        for (name, v), r in zip(got.items(), ref):
            err = np.abs(np.asarray(v) - r).max() / max(np.abs(r).max(), 1e-30)
            if err > 1e-4:
                raise SystemExit(f"{path.name}: output {name} differs from onnxruntime's by "
                                 f"{err:.2e} (relative)")
        peers[("ours", label)] = lambda gm=gm: gm.run(**feeds)
        peers[("ort", label)] = lambda s=sess: s.run(None, feeds)
    return peers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help="corpus names, comma-separated")
    ap.add_argument("--files", nargs="*", default=[], help="more optimized files (one model)")
    ap.add_argument("--cache", default=str(Path.home() / ".cache/tensorlang/real_models"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    os.environ["TENSORLANG_NUM_THREADS"] = str(a.threads)
    print(f"{'model':24s} {'file':28s} {'ours ms':>9s} {'ort ms':>9s} {'ours/ort':>9s}")
    with tempfile.TemporaryDirectory() as work:
        for model in a.models.split(","):
            with np.load(Path(a.cache) / f"{model}.inputs.npz") as z:
                feeds = {k: z[k] for k in z.files}
            files = _variants(model, Path(a.cache), Path(work), a.files)
            times = real_models.alternate(_peers(files, feeds, a.threads), a.rounds, pause=0.3)
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            for label in files:
                ours, ort = med[("ours", label)], med[("ort", label)]
                print(f"{model:24s} {label:28s} {ours:9.3f} {ort:9.3f} {ours / ort:9.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
