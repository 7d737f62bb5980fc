"""Graphs the differential graph fuzzer (graph_fuzz.py, benchmarks/fuzz_graphs.py) found wrong
or failing, minimized and written by hand, each compared with onnxruntime at the default and
the unoptimized build. The docstring of each names the seed and what was wrong."""

from __future__ import annotations

import numpy as np
import pytest
from graph_fuzz import compare, ort_run
from onnx import TensorProto, helper, numpy_helper

from tensorlang import graph

F32 = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "regression", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _io(name, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, shape)


def _matches_onnxruntime(model, feeds, levels=(2, 0)):
    want = ort_run(model, feeds)
    g = graph.from_onnx(model)
    for level in levels:
        got = graph.build(g, opt_level=level).run(**{k: v.copy() for k, v in feeds.items()})
        for name, w in want.items():
            diff = compare(got[name], w)
            assert diff is None, f"opt_level={level}, output {name}: {diff}"
    return want


def _const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


@pytest.mark.parametrize("spatial", [2, 1])
def test_max_pool_window_of_only_padding_is_lowest_finite(spatial):
    """Seed 57: MaxPool over W=1 with dilation 2, kernel 2, pads 1/1: every window's taps
    (w-1, w+1) fall in the padding. onnxruntime gives the lowest float (its initial maximum);
    tensorlang padded with -inf and gave -inf (the 2-D library pool; the n-D one of a 1-D pool
    too). Both pad with the lowest finite value now."""
    shape = [1, 2, 5, 1][: 2 + spatial]
    attrs = {"kernel_shape": [2] * spatial, "dilations": [2] * spatial,
             "strides": [1, 2][-spatial:], "pads": [0, 1, 1, 1] if spatial == 2 else [1, 1]}
    if spatial == 1:
        shape = [1, 2, 1]
    node = helper.make_node("MaxPool", ["x"], ["y"], **attrs)
    model = _model([node], [_io("x", shape)], [_io("y", None)])
    x = np.random.default_rng(0).uniform(-2, 2, shape).astype(np.float32)
    want = _matches_onnxruntime(model, {"x": x})
    assert (want["y"] == np.finfo(np.float32).min).any()  # the case: a window of only padding


@pytest.mark.parametrize("constant", [True, False])
def test_transpose_of_a_scalar(constant):
    """Seed 20011: Transpose (no perm) of a 0-d constant was refused at import, "folded shape
    (1,) differs from the inferred ()": the fold's np.ascontiguousarray makes a 0-d array 1-d.
    The same transpose of a 0-d input (computed at run time) is checked too."""
    nodes = [helper.make_node("Transpose", ["s"], ["t"]),
             helper.make_node("Add", ["t", "x"], ["y"])]
    s = np.float32(1.25)
    inputs, inits, feeds = [_io("x", [2])], [], {"x": np.array([1, -2], np.float32)}
    if constant:
        inits.append(_const("s", s))
    else:
        inputs.append(_io("s", []))
        feeds["s"] = np.asarray(s)
    model = _model(nodes, inputs, [_io("t", []), _io("y", [2])], inits)
    want = _matches_onnxruntime(model, feeds)
    assert want["t"].shape == ()


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("after_conv", [False, True])
def test_pool_window_longer_than_the_padded_input_by_less_than_a_stride(op, after_conv):
    """Seeds 20084, 20280: a pool whose window is longer than the padded input (H=1, kernel 2
    dilated 2 or W=2, kernel 3) by less than its stride has one output in ONNX's formula
    ((span / stride) + 1, truncated) and onnxruntime; it was refused ("kernel larger than the
    padded input"). After a 16-channel conv the pool runs on the blocked layout."""
    shape = [1, 16 if after_conv else 3, 1, 2]
    attrs = {"kernel_shape": [2, 3], "strides": [2, 3], "pads": [0, 0, 1, 0]}
    if op == "MaxPool":
        attrs["dilations"] = [2, 1]
    else:
        attrs["kernel_shape"] = [3, 3]
    nodes, inits = [helper.make_node(op, ["h"], ["y"], **attrs)], []
    if after_conv:
        w = np.random.default_rng(1).uniform(-1, 1, (16, 16, 1, 1)).astype(np.float32)
        nodes.insert(0, helper.make_node("Conv", ["x", "w"], ["h"], kernel_shape=[1, 1]))
        inits.append(_const("w", w))
    else:
        nodes.insert(0, helper.make_node("Relu", ["x"], ["h"]))
    model = _model(nodes, [_io("x", shape)], [_io("y", None)], inits)
    x = np.random.default_rng(0).uniform(-2, 2, shape).astype(np.float32)
    assert _matches_onnxruntime(model, {"x": x})["y"].shape == (1, shape[1], 1, 1)


def test_average_pool_counting_padding_over_a_too_long_window_is_refused():
    """onnxruntime divides such a window's sum by the whole kernel, taps past the padding
    included (count_include_pad=1); the library counts only the padded input: refused, said."""
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3], strides=[3],
                            count_include_pad=1)
    model = _model([node], [_io("x", [1, 1, 2])], [_io("y", None)])
    with pytest.raises(graph.OnnxImportError, match="kernel .3. larger than the padded input"):
        graph.from_onnx(model)
