"""Models as onnxruntime's optimizers leave them (com.microsoft contrib operators), committed in
tests/graph/data/ort_optimized by ``benchmarks/export_ort_optimized.py`` (torch there, not
here): tiny BERT, DistilBERT, GPT-2, ViT and Whisper-encoder exports through
``onnxruntime.transformers.optimizer.optimize_model`` with their heads and hidden size
(Attention, EmbedLayerNormalization, SkipLayerNormalization, the GELUs; BERT also with dynamic
axes, built once without shapes=), and tiny BERT and a
CNN saved by an ORT_ENABLE_EXTENDED session (FusedMatMul, FusedGemm, FusedConv, QuickGelu).
Each imports, builds and matches onnxruntime on the same file, and the unoptimized model's
outputs (onnxruntime's, stored beside the inputs as ``ref:NAME``), within 1e-4 (fp32)."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import numpy as np
import pytest
from graph_testing import onnx, ort_run  # skips without onnx/onnxruntime

from tensorlang import graph

DATA = Path(__file__).parent / "data" / "ort_optimized"
MODELS = sorted(Path(p).name[:-len(".onnx")] for p in glob.glob(str(DATA / "*.onnx")))
RTOL = 1e-4
# the contrib operators the committed files hold between them: each must stay covered
EXPECTED_OPS = {"Attention", "EmbedLayerNormalization", "SkipLayerNormalization", "Gelu",
                "BiasGelu", "FastGelu", "FusedMatMul", "FusedGemm", "FusedConv", "QuickGelu"}


def _rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    assert got.shape == ref.shape, (got.shape, ref.shape)
    scale = max(float(np.abs(ref).max()), 1e-12)
    return float(np.abs(got.astype(np.float64) - ref).max()) / scale


def test_committed_files_are_small_and_cover_the_operators():
    assert len(MODELS) >= 8, MODELS
    ops = set()
    for name in MODELS:
        assert os.path.getsize(DATA / f"{name}.onnx") < 1_500_000, name
        assert (DATA / f"{name}.inputs.npz").exists(), name
        ops |= {n.op_type for n in onnx.load(str(DATA / f"{name}.onnx")).graph.node
                if n.domain == "com.microsoft"}
    assert EXPECTED_OPS <= ops, sorted(EXPECTED_OPS - ops)


@pytest.mark.parametrize("name", MODELS)
def test_optimized_model_matches_onnxruntime_and_the_unoptimized_model(name):
    model = onnx.load(str(DATA / f"{name}.onnx"))
    assert any(n.domain == "com.microsoft" for n in model.graph.node), name
    with np.load(DATA / f"{name}.inputs.npz") as z:
        feed = {k: z[k] for k in z.files if not k.startswith("ref:")}
        unoptimized = {k[len("ref:"):]: z[k] for k in z.files if k.startswith("ref:")}
    g = graph.from_onnx(model, shapes={k: v.shape for k, v in feed.items()})
    out = graph.build(g).run(**feed)
    same_file = ort_run(model, feed)
    assert set(same_file) == set(unoptimized), (sorted(same_file), sorted(unoptimized))
    for k, ref in same_file.items():
        assert _rel_error(out[k], ref) <= RTOL, (k, "vs onnxruntime on the optimized file")
        assert _rel_error(out[k], unoptimized[k]) <= RTOL, (k, "vs the unoptimized model")


def test_optimized_model_with_dynamic_axes_runs_at_every_size():
    """BERT exported with its batch and sequence dynamic, then optimized (Attention's 1-D
    mask index and EmbedLayerNormalization's positions counted at run time): one build
    without shapes= matches onnxruntime at several sizes, padded rows included."""
    model = onnx.load(str(DATA / "tiny_bert_dynamic.attention.onnx"))
    gm = graph.build(graph.from_onnx(model))
    rng = np.random.default_rng(2)
    for batch, seq in [(1, 16), (2, 9), (3, 5)]:
        mask = np.ones((batch, seq), np.int64)
        mask[0, seq - 2:] = 0
        feed = {"input_ids": rng.integers(0, 100, (batch, seq)), "attention_mask": mask}
        out = gm.run(**feed)
        for k, ref in ort_run(model, feed).items():
            assert _rel_error(out[k], ref) <= RTOL, (k, batch, seq)
