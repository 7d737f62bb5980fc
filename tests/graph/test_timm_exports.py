"""Patterns of timm's models (benchmarks/timm_probe.py) that did not import, build or match:
each as a small hand-made ONNX model checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from graph_testing import check_against_ort, onnx, onnx_model

helper, TP = onnx.helper, onnx.TensorProto


def _floats(name, a):
    return helper.make_tensor(name, TP.FLOAT, list(a.shape), a.reshape(-1).tolist())


def test_weight_standardization_as_training_mode_batch_norm():
    """NF-Nets' ScaledStdConv2d standardizes each filter of its weight with F.batch_norm in
    training mode: BatchNormalization(training_mode=1) of the constant weight reshaped to
    [1, filters, fan_in] (here its product with an input stands for the conv)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1, 6, 27)).astype(np.float32) + 0.5
    nodes = [
        helper.make_node("BatchNormalization", ["w", "gain", "zero", "zero", "one"],
                         ["ws", "rm", "rv"], epsilon=1e-5, momentum=1.0, training_mode=1),
        helper.make_node("Mul", ["x", "ws"], ["y"]),
    ]
    inits = [_floats("w", w), _floats("gain", rng.uniform(0.5, 2, 6).astype(np.float32)),
             _floats("zero", np.zeros(6, np.float32)), _floats("one", np.ones(6, np.float32))]
    model = onnx_model(nodes, [("x", TP.FLOAT, [2, 6, 27])], [("y", TP.FLOAT, None)], 17,
                       inits)
    check_against_ort(model, [{"x": rng.standard_normal((2, 6, 27)).astype(np.float32)}])


@pytest.mark.parametrize("read_stats", [False, True])
def test_training_mode_batch_norm_of_an_input(read_stats):
    """Batch statistics of a run-time 4-D input over N, H, W; with read_stats the running
    mean and variance outputs (momentum-weighted) are graph outputs too (onnxruntime wants the
    three outputs named in training mode, read or not)."""
    rng = np.random.default_rng(1)
    outs = ["y", "rm", "rv"] if read_stats else ["y"]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                            epsilon=1e-3, momentum=0.8, training_mode=1)
    inits = [_floats("s", rng.uniform(0.5, 2, 4).astype(np.float32)),
             _floats("b", rng.standard_normal(4).astype(np.float32)),
             _floats("m", rng.standard_normal(4).astype(np.float32)),
             _floats("v", rng.uniform(0.5, 2, 4).astype(np.float32))]
    model = onnx_model([node], [("x", TP.FLOAT, [3, 4, 5, 6])],
                       [(o, TP.FLOAT, None) for o in outs], 15, inits)
    x = (3 * rng.standard_normal((3, 4, 5, 6)) + 1).astype(np.float32)
    check_against_ort(model, [{"x": x}])
