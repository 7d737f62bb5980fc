"""Patterns of ONNX files shipped inside PyPI packages (not exported here) that did not import,
build or match onnxruntime, each as a small hand-made ONNX model checked against onnxruntime:
magika (tf2onnx from JAX: slices "to the end" written as 1e9 on a symbolic batch axis).
"""

from __future__ import annotations

import numpy as np
from graph_testing import assert_close, onnx, ort_run

from tensorlang import graph

helper, TP = onnx.helper, onnx.TensorProto


def _model(nodes, inputs, outputs, opset, inits=()):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ints(name, values):
    return helper.make_tensor(name, TP.INT64, [len(values)], values)


def _check(model, feeds_list, rtol=1e-4):
    gm = graph.build(graph.from_onnx(model))
    for feeds in feeds_list:
        got, ref = gm.run(**feeds), ort_run(model, feeds)
        for name, r in ref.items():
            assert np.asarray(got[name]).shape == r.shape, name
            assert_close(np.asarray(got[name]), r, rtol)


def test_slice_to_end_written_as_1e9_on_a_symbolic_axis():
    """magika's tf2onnx export slices a [batch, 2048, 40] tensor with ends 1e9 (TensorFlow's
    masked strided slice) and then reshapes its per-row sums to [batch, 1] (the batch read
    from the input's shape): 1e9 past a batch axis that no tensor in memory can reach is its
    end, so the reshape's sizes agree (it was refused: min(batch, 1e9) vs batch)."""
    nodes = [
        helper.make_node("Slice", ["x", "zeros", "far", "axes"], ["s"]),
        helper.make_node("ReduceSum", ["s", "rows"], ["sums"], keepdims=0),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero", "one"], ["batch"]),
        helper.make_node("Concat", ["batch", "one"], ["to"], axis=0),
        helper.make_node("Reshape", ["sums", "to"], ["y"]),
    ]
    inits = [_ints("zeros", [0, 0]), _ints("far", [10**9] * 2), _ints("axes", [0, 2]),
             _ints("rows", [1, 2]), _ints("zero", [0]), _ints("one", [1])]
    model = _model(nodes, [("x", TP.FLOAT, ["batch", 2048, 40])], [("y", TP.FLOAT, None)], 13,
                   inits)
    rng = np.random.default_rng(0)
    _check(model, [{"x": rng.standard_normal((b, 2048, 40)).astype(np.float32)}
                   for b in (1, 3)])
