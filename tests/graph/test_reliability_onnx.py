"""Issue 15: ONNX import. Valid models that were refused (a graph output that is also a graph
input; names that collide once sanitized) import, run under their exact ONNX names and match
onnxruntime; bad ones (an initializer whose data does not match its dims, damaged files) raise
OnnxImportError naming what is wrong."""

from __future__ import annotations

import random

import numpy as np
import pytest
from graph_testing import assert_close, ort_run
from tensorlang.graph import model_zoo

from tensorlang import graph

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper


def _model(nodes, inputs, outputs, inits=(), shape=(2, 3)):
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "g", [vi(n, TensorProto.FLOAT, list(shape)) for n in inputs],
                          [vi(n, TensorProto.FLOAT, None) for n in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _check_against_onnxruntime(model, inputs):
    feeds = {n: np.random.default_rng(i).standard_normal((2, 3)).astype(np.float32)
             for i, n in enumerate(inputs)}
    ref = ort_run(model, feeds)
    for opt_level in (0, 2):
        got = graph.build(graph.from_onnx(model), opt_level=opt_level).run(**feeds)
        assert list(got) == list(ref)  # the ONNX output names, exactly and in order
        for k in ref:
            assert_close(got[k], ref[k])
    return got, feeds


def test_output_that_is_also_an_input():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], ["x"], ["x", "y"])
    got, feeds = _check_against_onnxruntime(m, ["x"])
    np.testing.assert_array_equal(got["x"], feeds["x"])
    assert not np.shares_memory(got["x"], feeds["x"])  # the result is the caller's own


def test_output_that_is_an_input_passed_through_and_outputs_sharing_a_value():
    m = _model([helper.make_node("Identity", ["x"], ["y"]),
                helper.make_node("Relu", ["x"], ["r"]),
                helper.make_node("Identity", ["r"], ["r2"])], ["x"], ["y", "x", "r", "r2"])
    _check_against_onnxruntime(m, ["x"])


def test_names_that_collide_once_sanitized():
    # inputs "in a" / "in_a", intermediates "t 1" / "t_1", outputs "out:0" / "out 0" / "out_0"
    nodes = [helper.make_node("Add", ["in a", "in_a"], ["t 1"]),
             helper.make_node("Mul", ["in a", "in_a"], ["t_1"]),
             helper.make_node("Sub", ["t 1", "t_1"], ["out 0"]),
             helper.make_node("Relu", ["t 1"], ["out_0"]),
             helper.make_node("Neg", ["t_1"], ["out:0"])]
    m = _model(nodes, ["in a", "in_a"], ["out 0", "out_0", "out:0"])
    _check_against_onnxruntime(m, ["in a", "in_a"])
    g = graph.from_onnx(m)
    assert [v.name for v in g.inputs] == ["in a", "in_a"]
    names = [v.name for v in g.values()]
    assert len(names) == len(set(names))


def test_constant_output_and_an_initializer_named_like_an_output():
    w = helper.make_tensor("y", TensorProto.FLOAT, [2, 3], list(range(6)))
    c = helper.make_tensor("c", TensorProto.FLOAT, [2, 3], [1.0] * 6)
    m = _model([helper.make_node("Add", ["x", "c"], ["z"])], ["x"], ["z", "y"], inits=[w, c])
    # ("y" is an initializer and a graph output: a constant output)
    _check_against_onnxruntime(m, ["x"])


def _bad_initializer(raw: bool):
    if raw:
        t = helper.make_tensor("w", TensorProto.FLOAT, [2, 3],
                               np.ones(6, np.float32).tobytes(), raw=True)
        t.raw_data = t.raw_data[:20]  # 5 floats for dims [2, 3]
    else:
        t = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [1.0] * 6)
        t.dims[1] = 4  # 6 values for dims [2, 4]
    return _model([helper.make_node("Add", ["x", "w"], ["y"])], ["x"], ["y"], inits=[t])


@pytest.mark.parametrize("raw", [False, True], ids=["float_data", "raw_data"])
def test_initializer_data_that_does_not_match_its_dims(raw):
    with pytest.raises(graph.OnnxImportError, match=r"initializer 'w' \(dims \[2, [34]\]\) cannot be read"):
        graph.from_onnx(_bad_initializer(raw))


def test_name_that_is_not_utf8():
    m = _model([helper.make_node("Relu", ["x"], ["zz"])], ["x"], ["zz"])
    data = m.SerializeToString().replace(b"zz", b"\xff\xfe")
    with pytest.raises(graph.OnnxImportError, match="not UTF-8 text"):
        graph.from_onnx(data)


def _damaged(data: bytes, rng: random.Random, cut: bool) -> bytes:
    if cut:
        return data[: rng.randrange(len(data))]
    b = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def test_truncated_and_tampered_files_give_onnx_import_errors(tmp_path):
    """Every damaged copy of a model either imports or raises OnnxImportError (never a
    protobuf, numpy or Python error from inside the importer)."""
    data = model_zoo.small_cnn().SerializeToString()
    rng = random.Random(0)
    refused = 0
    for i in range(120):
        bad = _damaged(data, rng, cut=i % 3 == 0)
        try:
            graph.from_onnx(bad)
        except graph.OnnxImportError:
            refused += 1
    assert refused > 0
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(graph.OnnxImportError, match="cut.onnx"):
        graph.from_onnx(path)
