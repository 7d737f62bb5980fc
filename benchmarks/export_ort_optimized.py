"""Small models as onnxruntime's optimizers leave them (com.microsoft contrib operators), for
tests/graph/test_ort_optimized_models.py, which runs in CI without torch:

    python benchmarks/export_ort_optimized.py [--out tests/graph/data/ort_optimized]

needs torch, transformers and onnxruntime (the transformer optimizer imports torch). Each model
is a random-weight transformers / torch module exported with the TorchScript exporter (opset
17), or taken from data/real_models (tiny_bert.ts), then either
``optimize_model(model_type, num_heads, hidden_size, opt_level)`` or an onnxruntime
session at ORT_ENABLE_EXTENDED with ``optimized_model_filepath``. Written per model:
NAME.onnx (the optimized file) and NAME.inputs.npz with the inputs and, as ``ref:OUTPUT``, the
unoptimized model's outputs by onnxruntime. What each holds is printed.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import export_models as em  # (the corpus' model builders and exporter)

REAL = HERE.parent / "tests" / "graph" / "data" / "real_models"


def _tiny_distilbert():
    tf = em._transformers()
    cfg = tf.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                              max_position_embeddings=32, attn_implementation="eager")
    ids, mask = em._text_args(cfg.vocab_size, seq=16, pad=5)
    return em._OutputsOnly(tf.DistilBertModel(cfg)), ["input_ids", "attention_mask"], \
        (ids, mask)


def _tiny_gpt2():
    tf = em._transformers()
    cfg = tf.GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                        use_cache=False, attn_implementation="eager")
    ids, mask = em._text_args(cfg.vocab_size, seq=16, pad=5)
    names = ("input_ids", "attention_mask")
    return em._OutputsOnly(tf.GPT2Model(cfg), names), list(names), (ids, mask)


def _tiny_whisper_encoder():
    import torch
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    cfg = em._transformers().WhisperConfig(
        d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
        num_mel_bins=16, max_source_positions=20, attn_implementation="eager")
    return em._OutputsOnly(WhisperEncoder(cfg)), ["input_features"], (torch.randn(1, 16, 40),)


def _tiny_vit():
    import torch

    tf = em._transformers()
    cfg = tf.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64, num_channels=3,
                       attn_implementation="eager")
    return em._OutputsOnly(tf.ViTModel(cfg, add_pooling_layer=False)), ["pixel_values"], \
        (torch.rand(1, 3, 32, 32) * 2 - 1,)


def _tiny_cnn():
    """Convolutions onnxruntime fuses with each activation it knows (FusedConv), SiLU
    (QuickGelu) and a Linear + Tanh head (FusedGemm)."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, stride=2)
            self.c3, self.c4 = nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.c5, self.fc = nn.Conv2d(8, 16, 1), nn.Linear(16, 10)

        def forward(self, x):
            x = torch.relu(self.c1(x))
            x = nn.functional.relu6(self.c2(x))
            x = nn.functional.hardsigmoid(self.c3(x)) * x
            x = nn.functional.silu(self.c4(x))
            x = torch.sigmoid(self.c5(x)).mean(dim=(2, 3))
            return torch.tanh(self.fc(x))

    return Net(), ["x"], (torch.rand(1, 3, 16, 16) * 2 - 1,)


# name, source (a builder, or a committed export), how it is optimized
MODELS = [
    ("tiny_bert.attention", "tiny_bert.ts", ("bert", 4, 32, 0)),
    ("tiny_bert.ort_default", "tiny_bert.ts", ("bert", 4, 32, None)),
    ("tiny_bert.ort_extended", "tiny_bert.ts", "extended"),
    ("tiny_bert_dynamic.attention", "tiny_bert.ts_dynamic", ("bert", 4, 32, 0)),
    ("tiny_distilbert.attention", _tiny_distilbert, ("bert", 4, 32, 0)),
    ("tiny_gpt2.ort_default", _tiny_gpt2, ("gpt2", 4, 32, None)),
    ("tiny_whisper_encoder.ort2", _tiny_whisper_encoder, ("bert", 4, 32, 2)),
    ("tiny_vit.ort2", _tiny_vit, ("vit", 4, 32, 2)),
    ("tiny_cnn.ort_extended", _tiny_cnn, "extended"),
]


def _source(source, folder: Path) -> tuple[Path, dict]:
    if isinstance(source, str):
        with np.load(REAL / f"{source}.inputs.npz") as z:
            return REAL / f"{source}.onnx", {k: z[k] for k in z.files}
    import torch

    torch.manual_seed(0)
    module, names, args = source()
    em._informative(module, [])
    path = folder / "source.onnx"
    torch.onnx.export(module, args, str(path), dynamo=False, opset_version=17,
                      input_names=names)
    return path, {n: a.numpy() for n, a in zip(names, args)}


def _optimize(path: Path, how, out: Path) -> None:
    import onnxruntime as ort

    if how == "extended":
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = str(out)
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        return
    from onnxruntime.transformers import optimizer

    kind, heads, hidden, level = how
    m = optimizer.optimize_model(str(path), model_type=kind, num_heads=heads,
                                 hidden_size=hidden, opt_level=level)
    m.save_model_to_file(str(out))


def write(folder: Path, only: str | None = None) -> None:
    import onnx
    import onnxruntime as ort

    folder.mkdir(parents=True, exist_ok=True)
    for name, source, how in MODELS:
        if only and not any(part in name for part in only.split(",")):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path, feed = _source(source, Path(tmp))
            sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
            _optimize(path, how, folder / f"{name}.onnx")
        np.savez(folder / f"{name}.inputs.npz", **feed, **{f"ref:{k}": v for k, v in ref.items()})
        ops = collections.Counter(f"{n.domain}::{n.op_type}" for n in
                                  onnx.load(str(folder / f"{name}.onnx")).graph.node
                                  if n.domain not in ("", "ai.onnx"))
        size = (folder / f"{name}.onnx").stat().st_size
        print(f"{name:28s} {size:8d} B  {dict(ops)}", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path,
                   default=HERE.parent / "tests" / "graph" / "data" / "ort_optimized")
    p.add_argument("--models", help="comma-separated parts of the names to write (default: all)")
    args = p.parse_args()
    write(args.out, args.models)
