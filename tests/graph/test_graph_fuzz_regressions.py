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
