"""Real models (issue 18) against onnxruntime: outputs within 1e-4 relative (fp32), and the saved
package loads and gives the same outputs bit for bit.

- Small exports committed in tests/graph/data/real_models (made by
  ``python benchmarks/export_models.py --test-data tests/graph/data/real_models``, torch 2.13.0:
  random weights, each model from the TorchScript exporter and the dynamo exporter;
  tiny_llama.dynamo23 at opset 23, with the Attention and RMSNormalization torch writes there;
  tiny_gpt2_past.ts_dynamic, a generation step after a KV cache, tiny_t5_past.ts_dynamic, one
  after a self and a cross cache, and tiny_bert.ts_dynamic, with dynamic axes).
- The onnx package's model-zoo files (their ConstantOfShape weights replaced by random ones with
  calibrated BatchNorm statistics, as benchmarks/export_models.py does): squeezenet here,
  the others marked slow.
- The whole corpus of benchmarks/export_models.py (torch, transformers, torchvision, the model
  wheels): slow, and skipped without torch.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from graph_testing import onnx, ort_run  # skips without onnx/onnxruntime

from tensorlang import graph, runtime

DATA = Path(__file__).parent / "data" / "real_models"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
RTOL = 1e-4
COMMITTED = sorted(Path(p).name[:-len(".onnx")] for p in glob.glob(str(DATA / "*.onnx")))
# the committed exports whose operators were not all supported when they were added: each one
# must import once its operators land (a refusal for another reason fails)
AWAITING_OPS: dict[str, str] = {}


def _bench_module(name: str):
    """benchmarks/NAME.py, imported once (real_models imports export_models by name)."""
    if name not in sys.modules:
        if name == "real_models":
            _bench_module("export_models")
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # its dataclasses look their module up
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def _export_models():
    return _bench_module("export_models")


def _max_rel_error(got: dict, ref: dict) -> float:
    worst = 0.0
    for name, r in ref.items():
        assert name in got, f"output {name!r} missing: got {sorted(got)}"
        assert got[name].shape == r.shape, (name, got[name].shape, r.shape)
        r64 = r.astype(np.float64)
        scale = max(float(np.abs(r64).max()), 1e-12)
        worst = max(worst, float(np.abs(got[name].astype(np.float64) - r64).max()) / scale)
    return worst


def _closer_to_float64(model, feed: dict, out: dict, ref: dict, err: float) -> float:
    """Ours vs a float64 evaluation of the model, where ours is off onnxruntime by more than
    RTOL: a match only if within RTOL of it and no further than onnxruntime (which is the less
    accurate side on ocr_det_ppocrv4's sigmoid map)."""
    real_models = _bench_module("real_models")
    exact = real_models.float64_outputs(model, feed)
    ours, theirs = _max_rel_error(out, exact), _max_rel_error(ref, exact)
    assert ours <= RTOL and ours <= theirs, (
        f"max relative error {err:.2e} > {RTOL} vs onnxruntime; vs float64: ours {ours:.2e}, "
        f"onnxruntime {theirs:.2e}")
    return ours


def check_model(model, feed: dict, tmp_path) -> float:
    """Import, build, compare with onnxruntime, save/load: the max relative error."""
    g = graph.from_onnx(model, shapes={k: v.shape for k, v in feed.items()})
    gm = graph.build(g)
    out = gm.run(**feed)
    ref = ort_run(model, feed)
    err = _max_rel_error(out, ref)
    if err > RTOL:
        err = _closer_to_float64(model, feed, out, ref, err)
    gm.save(tmp_path / "m.tlpkg")
    again = runtime.load(tmp_path / "m.tlpkg").run(**feed)
    for k in out:
        np.testing.assert_array_equal(again[k], out[k], err_msg=f"output {k} after save/load")
    return err


def test_committed_models_are_small_and_complete():
    assert len(COMMITTED) >= 8, COMMITTED
    total = sum(os.path.getsize(p) for p in glob.glob(str(DATA / "*")))
    # (1.5 MB: the GPT-2 cache step and the opset-23 Llama are ~200 KB each)
    assert total < 1_500_000, f"tests/graph/data/real_models holds {total} bytes (< 1.5 MB)"
    for name in COMMITTED:
        assert (DATA / f"{name}.inputs.npz").exists(), name


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_export_matches_onnxruntime(name, tmp_path):
    model = onnx.load(str(DATA / f"{name}.onnx"))
    with np.load(DATA / f"{name}.inputs.npz") as z:
        feed = {k: z[k] for k in z.files}
    if name in AWAITING_OPS:
        try:
            graph.from_onnx(model, shapes={k: v.shape for k, v in feed.items()})
        except graph.UnsupportedOperatorError as e:
            ops = sorted({u[0] for u in e.unsupported})
            pytest.skip(f"awaiting operators {ops} (expected: {AWAITING_OPS[name]})")
    check_model(model, feed, tmp_path)


def test_gpt2_cache_step_with_dynamic_axes(tmp_path):
    """The exported GPT-2 generation step imported without sizes: one build runs at every
    sequence and cache length (its position ids are past_len + arange(seq), computed from the
    cache's size at run time), against onnxruntime, and after save/load."""
    name = "tiny_gpt2_past.ts_dynamic"
    model = onnx.load(str(DATA / f"{name}.onnx"))
    gm = graph.build(graph.from_onnx(model))
    assert gm.shape_vars == ("p", "s", "t")
    gm.save(tmp_path / "m.tlpkg")
    again = runtime.load(tmp_path / "m.tlpkg")
    rng = np.random.default_rng(5)
    for s, p in [(1, 6), (1, 1), (4, 9), (3, 20)]:
        feed = {"input_ids": rng.integers(0, 100, (1, s)).astype(np.int64),
                "attention_mask": np.ones((1, s + p), np.int64)}
        feed.update({f"past_{i}": rng.standard_normal((1, 4, p, 8)).astype(np.float32)
                     for i in range(4)})
        out, ref = gm.run(**feed), ort_run(model, feed)
        assert _max_rel_error(out, ref) < RTOL, (s, p)
        for k, v in again.run(**feed).items():
            np.testing.assert_array_equal(v, out[k])


def test_bert_with_dynamic_batch_and_sequence():
    """BERT exported with dynamic batch and sequence axes, imported without sizes: its
    position and token-type ids are slices of constant buffers up to the sequence length
    (gathered at run time); one build at every size against onnxruntime, and a sequence past
    the model's 32 positions is refused at run time (onnxruntime fails to broadcast)."""
    model = onnx.load(str(DATA / "tiny_bert.ts_dynamic.onnx"))
    gm = graph.build(graph.from_onnx(model))
    assert gm.shape_vars == ("batch", "seq")
    rng = np.random.default_rng(3)
    for b, s in [(1, 1), (2, 7), (3, 16), (1, 32)]:
        feed = {"input_ids": rng.integers(0, 100, (b, s)).astype(np.int64),
                "attention_mask": np.ones((b, s), np.int64)}
        feed["attention_mask"][0, s // 2 + 1:] = 0
        assert _max_rel_error(gm.run(**feed), ort_run(model, feed)) < RTOL, (b, s)
    too_long = {"input_ids": np.zeros((1, 33), np.int64),
                "attention_mask": np.ones((1, 33), np.int64)}
    with pytest.raises(runtime.KernelError, match="index out of bounds"):
        gm.run(**too_long)


def _t5_feed(rng, b: int, s: int, p: int, e: int, t: int) -> dict:
    """Inputs of tiny_t5_past (its encoder output is no input: the cross cache holds it)."""
    feed = {"input_ids": rng.integers(0, 100, (b, s)).astype(np.int64),
            "attention_mask": np.ones((b, t), np.int64)}
    feed["attention_mask"][-1, :1] = 0
    for i in range(2):
        for k, n in (("pk", p), ("pv", p), ("ck", e), ("cv", e)):
            feed[f"{k}{i}"] = rng.standard_normal((b, 4, n, 8)).astype(np.float32)
    return feed


def test_t5_cache_step_with_dynamic_axes(tmp_path):
    """T5's decoder step after a self and a cross cache, imported without sizes (was refused:
    its mask is padded by p + s - t, a width of symbolic size): one build at every batch, new,
    cache and encoder length, with the mask as long as past + new and longer (cropped, as
    onnxruntime's negative pad), against onnxruntime and after save/load. (A shorter mask,
    padded, fails in onnxruntime too with this TorchScript export: a Gather traced from
    transformers' mask code indexes past it.)"""
    name = "tiny_t5_past.ts_dynamic"
    model = onnx.load(str(DATA / f"{name}.onnx"))
    gm = graph.build(graph.from_onnx(model))
    assert gm.shape_vars == ("b", "e", "p", "s", "t")
    gm.save(tmp_path / "m.tlpkg")
    again = runtime.load(tmp_path / "m.tlpkg")
    rng = np.random.default_rng(7)
    for b, s, p, e, t in [(2, 3, 6, 5, 9), (1, 1, 1, 2, 2), (3, 2, 4, 1, 8), (1, 4, 2, 3, 6)]:
        feed = _t5_feed(rng, b, s, p, e, t)
        out, ref = gm.run(**feed), ort_run(model, feed)
        assert _max_rel_error(out, ref) < RTOL, (b, s, p, e, t)
        for k, v in again.run(**feed).items():
            np.testing.assert_array_equal(v, out[k])


def _zoo_case(stem: str, tmp_path):
    em = _export_models()
    entry = next(e for e in em.corpus() if e.name == f"zoo_{stem}")
    feed = entry.make(tmp_path)
    return onnx.load(str(tmp_path / f"zoo_{stem}.onnx")), feed


def test_zoo_squeezenet_random_weights(tmp_path):
    model, feed = _zoo_case("squeezenet", tmp_path)
    # informative weights: the softmax is neither one-hot nor uniform
    probs = next(iter(ort_run(model, feed).values()))
    assert 2e-3 < probs.max() < 0.9, probs.max()
    check_model(model, feed, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2",
                                  "resnet50", "shufflenet", "vgg19", "zfnet512"])
def test_zoo_random_weights(stem, tmp_path):
    model, feed = _zoo_case(stem, tmp_path)
    check_model(model, feed, tmp_path)


def _corpus_names() -> list[str]:
    try:
        return [e.name for e in _export_models().corpus()]
    except Exception:  # noqa: BLE001 - collection must not fail where the benchmarks cannot load
        return []


@pytest.mark.slow
@pytest.mark.parametrize("name", _corpus_names())
def test_corpus_model(name, tmp_path):
    """Every model of benchmarks/export_models.py (exported here; needs torch for torch ones)."""
    em = _export_models()
    entry = next(e for e in em.corpus() if e.name == name)
    if entry.name.startswith(("tv_", "hf_", "pt_")):
        pytest.importorskip("torch")
    meta = em.ensure(entry, tmp_path)
    if "export_error" in meta:
        pytest.skip(f"the exporter fails: {meta['export_error']}")
    with np.load(tmp_path / meta["inputs"]) as z:
        feed = {k: z[k] for k in z.files}
    check_model(onnx.load(str(tmp_path / meta["onnx"])), feed, tmp_path)
