"""Patterns of timm's models (benchmarks/timm_probe.py) that did not import, build or match:
each as a small hand-made ONNX model checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from graph_testing import check_against_ort, onnx, onnx_model

from tensorlang import graph

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


@pytest.mark.parametrize("image,block,strides,pads,dilations", [
    ([6, 6], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1]),  # VOLO's outlooker: F.fold, 3x3, pad 1
    ([7, 9], [2, 3], [2, 2], [0, 1, 1, 0], [1, 2]),  # uneven: a remainder no block reaches
    ([5, 5], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1]),  # non-overlapping patches
])
def test_col2im(image, block, strides, pads, dilations):
    """Col2Im (torch's F.fold at opset 18: timm's VOLO) sums each column's block into the
    image."""
    taps, channels = int(np.prod(block)), 3
    counts = [(n + pads[d] + pads[2 + d] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
              for d, n in enumerate(image)]
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=strides,
                            pads=pads, dilations=dilations)
    inits = [helper.make_tensor("image", TP.INT64, [2], image),
             helper.make_tensor("block", TP.INT64, [2], block)]
    shape = [2, channels * taps, int(np.prod(counts))]
    model = onnx_model([node], [("x", TP.FLOAT, shape)], [("y", TP.FLOAT, None)], 18, inits)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    check_against_ort(model, [{"x": x}])


def test_col2im_refuses_columns_that_do_not_fit():
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"])
    inits = [helper.make_tensor("image", TP.INT64, [2], [4, 4]),
             helper.make_tensor("block", TP.INT64, [2], [2, 2])]
    model = onnx_model([node], [("x", TP.FLOAT, [1, 8, 10])], [("y", TP.FLOAT, None)], 18, inits)
    with pytest.raises(Exception, match=r"Col2Im.*must be \[N, C \* 4, 9\]"):
        graph.from_onnx(model)
