"""Vision operators of issue 18 against onnxruntime: one-node ONNX models through graph.build
(default schedules, no tuning) and an onnxruntime session, both on all cores, alternating turns
with a pause after each (onnxruntime's and our pool's threads spin for a while after a call and
would slow the other side), median over rounds of each turn's median call time. ratio = ours /
onnxruntime (< 1: we are faster); outputs are compared too (max error relative to the largest
output).

    python benchmarks/vision_ops.py [--rounds 7] [--only conv_transpose]"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tensorlang import graph

PAUSE_S = 0.25


def _model(op, x, attrs, consts, opset=19):
    names = ["x"] + [n for n, _ in consts]
    g = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in consts if n])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def workloads() -> dict:
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    x256 = f32(1, 256, 32, 32)
    yolo = f32(1, 3, 80, 80, 85)
    unet = f32(1, 320, 64, 64)
    scales2 = np.array([1, 1, 2, 2], np.float32)
    return {
        # a segmentation head's upsampling: 1x256x32x32 -> 1x128x64x64, k=4, s=2, p=1
        "conv_transpose": (_model("ConvTranspose", x256, {"strides": [2, 2],
                                                          "pads": [1, 1, 1, 1]},
                                  [("w", f32(256, 128, 4, 4) * 0.05), ("b", f32(128))]), x256),
        # a bilinear-initialized upsampling layer: depthwise (group = channels)
        "conv_transpose_depthwise": (_model("ConvTranspose", x256, {
            "strides": [2, 2], "pads": [1, 1, 1, 1], "group": 256},
            [("w", f32(256, 1, 4, 4))]), x256),
        "resize_nearest_2x": (_model("Resize", x256, {"mode": "nearest"},
                                     [("", None), ("s", scales2)]), x256),
        "resize_linear_2x": (_model("Resize", x256, {"mode": "linear"},
                                    [("", None), ("s", scales2)]), x256),
        "resize_cubic_2x": (_model("Resize", x256, {"mode": "cubic"},
                                   [("", None), ("s", scales2)]), x256),
        "resize_linear_antialias_0.4x": (_model("Resize", x256, {"mode": "linear",
                                                                 "antialias": 1},
                                                [("", None), ("s", np.array([1, 1, 0.4, 0.4], np.float32))]), x256),
        "group_norm_32": (_model("GroupNormalization", x256, {"num_groups": 32},
                                 [("s", f32(256)), ("b", f32(256))], 21), x256),
        # a diffusion U-Net's normalization: 1x320x64x64, 32 groups
        "group_norm_unet": (_model("GroupNormalization", unet, {"num_groups": 32},
                                   [("s", f32(320)), ("b", f32(320))], 21), unet),
        "space_to_depth_2": (_model("SpaceToDepth", x256, {"blocksize": 2}, []), x256),
        "trilu_upper": (_model("Trilu", x256, {}, []), x256),
        "gather_nd_rows": (_model("GatherND", x256, {}, [
            ("i", np.stack([np.zeros(64, np.int64), rng.integers(0, 256, 64)], 1))], 13),
                           x256),
        "scatter_nd_rows": (_model("ScatterND", x256, {}, [
            ("i", np.stack([np.zeros(16, np.int64), rng.permutation(256)[:16]], 1)),
            ("u", f32(16, 32, 32))], 13), x256),
        # an exported slice assignment y[..., 0:4] = u of a detection head (YOLO-style):
        # one index tuple per element of the slice (76800 updates)
        "scatter_nd_slice_assign": (_model("ScatterND", yolo, {}, [
            ("i", np.stack(np.meshgrid(*[np.arange(n) for n in (1, 3, 80, 80, 4)],
                                       indexing="ij"), -1).astype(np.int64)),
            ("u", f32(1, 3, 80, 80, 4))], 13), yolo),
    }


def _turn(fn, calls: int) -> float:
    fn()
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    time.sleep(PAUSE_S)
    return statistics.median(ts)


def bench(name, model, x, rounds: int) -> None:
    gm = graph.build(graph.from_onnx(model))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ours = lambda: gm.run(x=x)["y"]
    theirs = lambda: sess.run(None, {"x": x})[0]
    ref = theirs()
    err = float(np.abs(ours() - ref).max() / max(np.abs(ref).max(), 1e-6))
    t_ours, t_ort = [], []
    for r in range(rounds):
        for side in ((ours, t_ours), (theirs, t_ort))[:: 1 if r % 2 == 0 else -1]:
            side[1].append(_turn(side[0], 10))
    a, b = statistics.median(t_ours), statistics.median(t_ort)
    print(f"{name:20s} ours {a * 1e3:8.3f} ms  onnxruntime {b * 1e3:8.3f} ms  "
          f"ratio {a / b:5.2f}  max rel err {err:.1e}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    a = ap.parse_args(argv)
    only = set(filter(None, a.only.split(",")))
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}; ratio = ours / onnxruntime")
    for name, (model, x) in workloads().items():
        if not only or name in only:
            bench(name, model, x, a.rounds)


if __name__ == "__main__":
    sys.exit(main())
