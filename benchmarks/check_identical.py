"""Behaviour fingerprints for refactorings that must change nothing (issue 17).

Writes one line per item to a text file; run it before and after a change and diff the files:

- per config of each built-in template (N random configs per workload, a fixed seed): the
  template's verdict, the SHA-256 of the fully lowered IR text (``tl.lower``) and of the cost
  model's feature vector (its float64 bytes);
- per graph model (the model zoo's small models, and ResNet-50 at a reduced size with
  ``--resnet``): the SHA-256 of each output's bytes for a fixed input, and of the graph driver's
  optimized LLVM IR.

    python benchmarks/check_identical.py out.txt [--configs 180] [--resnet] [--no-models]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time

import numpy as np

import tensorlang as tl
from tensorlang import autotune

# small shapes: the check is about what the lowering and the features compute, not speed
WORKLOADS = (
    ("matmul", (64, 96, 128, "float32")),
    ("dense", (64, 256, 128, "float32")),
    ("batch_matmul", (3, 32, 48, 40, "float32")),
    ("conv2d_nchwc", (1, 32, 14, 14, 32, 3, 3, 1, 1, 16, "float32")),
    ("conv2d_nchwc", (1, 32, 16, 16, 64, 3, 3, 2, 1, 16, "float32")),
    ("conv2d_nchwc", (1, 16, 8, 8, 32, 1, 1, 1, 0, 16, "float32")),
    ("depthwise_conv2d", (1, 16, 18, 18, 3, 3, 2, 1, "float32")),
    ("depthwise_conv2d", (1, 32, 28, 28, 3, 3, 1, 1, "float32")),
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def config_lines(name: str, args: tuple, n: int, seed: int = 0):
    from tensorlang.autotune.features import extract_features, lower_for_features

    task = autotune.create_task(name, args=args, target="llvm")
    space = task.config_space
    rng = np.random.default_rng(seed)
    picks = sorted({0, *map(int, rng.choice(len(space), size=min(n, len(space)) - 1,
                                            replace=False))})
    for i in picks:
        cfg = space.get(i)
        try:
            s, tensors = task.instantiate(cfg, check=False)
            feats = extract_features(lower_for_features(s, tensors))
        except tl.ScheduleError as e:
            yield f"{name} {i} refused-features {type(e).__name__}"
            continue
        try:
            s, tensors = task.instantiate(cfg, check=False)
            ir = str(tl.lower(s, tensors, name="k"))
            ir_sha = _sha(ir.encode())
        except tl.TensorlangError as e:
            ir_sha = f"refused:{type(e).__name__}"
        yield f"{name} {i} ir={ir_sha} feat={_sha(np.asarray(feats, np.float64).tobytes())}"


def _models(resnet: bool):
    from tensorlang.graph import model_zoo as Z

    out = [("mlp", Z.mlp()), ("small_cnn", Z.small_cnn()),
           ("depthwise_separable", Z.depthwise_separable()),
           ("inverted_residual", Z.inverted_residual()),
           ("transformer_block", Z.transformer_block())]
    if resnet:
        out.append(("resnet50", Z.resnet50(size=64)))
    return out


def model_lines(resnet: bool):
    from tensorlang import graph

    for name, model in _models(resnet):
        g = graph.from_onnx(model)
        gm = graph.build(g, target="llvm")
        rng = np.random.default_rng(1)
        feeds = {v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in g.inputs}
        outs = gm.run(**feeds)
        for k in sorted(outs):
            yield f"model {name} out {k} {_sha(np.ascontiguousarray(outs[k]).tobytes())}"
        yield f"model {name} driver-steps {_sha(repr(gm.plan['steps']).encode())}"
        yield from _driver_lines(name, gm)


def _driver_lines(name: str, gm):
    """The driver's IR before optimization (text: changes with value names) and after the
    build's O1 pipeline, and its machine code."""
    from tensorlang.codegen.target import Target, compile_ir

    if gm.driver is None:
        return
    ll = gm.driver.get_source("ll")
    obj = compile_ir(ll, Target.host(), opt_level=1, want_asm=True, cache=False)
    yield f"model {name} driver-ll {_sha(ll.encode())}"
    yield f"model {name} driver-optimized-ir {_sha(obj.optimized_ir.encode())}"
    yield f"model {name} driver-asm {_sha(obj.asm.encode())}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--configs", type=int, default=180, help="configs per workload")
    ap.add_argument("--resnet", action="store_true")
    ap.add_argument("--no-models", action="store_true")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    lines = []
    for name, args in WORKLOADS:
        lines += config_lines(name, args, a.configs)
    if not a.no_models:
        lines += model_lines(a.resnet)
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    n_cfg = sum(not ln.startswith("model ") for ln in lines)
    print(f"{n_cfg} configs, {len(lines) - n_cfg} model lines -> {a.out} "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
