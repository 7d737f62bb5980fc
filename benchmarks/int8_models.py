"""Quantized models (issue 22): latency of tensorlang on onnxruntime's int8 model against
onnxruntime's int8 session on the same model, and against tensorlang's own fp32 build of the
float model it was quantized from; plus the accuracy criterion of the issue (share of output
values within one / two quantization steps of onnxruntime's).

    python benchmarks/int8_models.py                         # both models, 7 rounds
    python benchmarks/int8_models.py --models cnn --rounds 11 --number 20

Models (tests/graph/quantized_models.py builds them; the benchmark's sizes are larger than the
tests'): ``resnet50`` (``--models resnet50``: graph.model_zoo's ResNet-50 at 224x224, 2 random
calibration inputs; minutes to build), ``cnn``, a ResNet-style CNN at 56x56 (widths 64, 128, two basic blocks each) quantized
by ``quantize_static`` (QDQ, per-channel int8 weights, uint8 activations, 8 random calibration
inputs); ``encoder``, a BERT-style encoder (seq 128, hidden 256, 4 heads, FFN 1024, 2 layers)
quantized by ``quantize_dynamic``.

Timing: ``benchmarks/models.py``'s interleaved rounds (each round times every peer in turn,
``number`` calls each after a warm-up call, ``--pause`` seconds between peers; onnxruntime in a
fresh session per turn, so its spinning pool never overlaps our turn); figures are medians over
rounds, ratios medians of per-round ratios. Both sides use their default threads (all cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "graph"))
sys.path.insert(0, HERE)

import quantized_models as qm
from models import OrtPeer, interleaved


def _zoo_resnet50():
    from tensorlang.graph import model_zoo

    return model_zoo.resnet50()  # its input is "x" [1, 3, 224, 224]


MODELS = {
    "cnn": (lambda: qm.resnet_cnn(size=56, widths=(64, 128), blocks=2),
            lambda f: qm.quantize_static_qdq(f, calib=8), (1, 3, 56, 56)),
    "encoder": (lambda: qm.bert_encoder(seq=128, hidden=256, heads=4, ffn=1024, layers=2),
                qm.quantize_dynamic_int8, (128, 256)),
    # graph.model_zoo's ResNet-50 (224x224, bottleneck blocks), quantized as the cnn
    "resnet50": (_zoo_resnet50, lambda f: qm.quantize_static_qdq(f, calib=2),
                 (1, 3, 224, 224)),
}




def _accuracy(q, got: np.ndarray, want: np.ndarray) -> tuple:
    step = qm.output_step(q)
    if step is None:  # a float output: the step of its own range over 255 levels
        step = float(want.max() - want.min()) / 255
    return step, *qm.steps_within(got, want, step)


def bench(name: str, a) -> dict:
    from tensorlang import graph

    make_float, quantize, shape = MODELS[name]
    f = make_float()
    q = quantize(f)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    feed = {"x": x}
    gm8 = graph.build(graph.from_onnx(q))
    gm32 = graph.build(graph.from_onnx(f))
    ort8 = OrtPeer(q, feed)
    ort8.begin()
    want = ort8()[0]
    ort8.end()
    got = next(iter(gm8.run(**feed).values()))
    step, one, two, worst = _accuracy(q, got, want)
    peers = {"ours_int8": lambda: gm8.run(**feed), "ort_int8": ort8,
             "ours_fp32": lambda: gm32.run(**feed), "ort_fp32": OrtPeer(f, feed)}
    t = interleaved(peers, a.rounds, a.number, a.pause)
    med = {k: statistics.median(v) * 1e3 for k, v in t.items()}

    def ratio(p, r):
        return statistics.median([x / y for x, y in zip(t[p], t[r])])

    return {"model": name, "kernels_int8": gm8.num_kernels, "kernels_fp32": gm32.num_kernels,
            **{f"{k}_ms": v for k, v in med.items()},
            "int8_vs_ort_int8": ratio("ours_int8", "ort_int8"),
            "fp32_over_int8": ratio("ours_fp32", "ours_int8"),
            "ort_fp32_over_int8": ratio("ort_fp32", "ort_int8"),
            "step": step, "within_one": one, "within_two": two, "worst_steps": worst}


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="cnn,encoder")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--pause", type=float, default=0.25)
    a = p.parse_args()
    print(f"load: {_uptime()}")
    for name in a.models.split(","):
        r = bench(name, a)
        print(f"\n{name}: kernels int8 {r['kernels_int8']}, fp32 {r['kernels_fp32']}")
        print(f"  ours int8 {r['ours_int8_ms']:.3f} ms | onnxruntime int8 {r['ort_int8_ms']:.3f}"
              f" ms | ours fp32 {r['ours_fp32_ms']:.3f} ms | onnxruntime fp32 "
              f"{r['ort_fp32_ms']:.3f} ms")
        print(f"  ours int8 / onnxruntime int8 = {r['int8_vs_ort_int8']:.2f}x (target <= 1.0); "
              f"ours fp32 / ours int8 = {r['fp32_over_int8']:.2f}x (target >= 2); "
              f"onnxruntime fp32 / int8 = {r['ort_fp32_over_int8']:.2f}x")
        print(f"  accuracy vs onnxruntime int8: {100 * r['within_one']:.2f}% within one step "
              f"({r['step']:.4g}), {100 * r['within_two']:.2f}% within two, worst "
              f"{r['worst_steps']:.3g} steps")
    print(f"load after: {_uptime()}")


if __name__ == "__main__":
    main()
