"""Batch-1 dense layers (gemv): ONNX Gemm / MatMul with a constant weight and one row, built by
graph.build, against onnxruntime; the weight is packed into the matmul kernel's panels at build
time for any row count (pack_dense_weights), so the kernel streams it once; and the library's
prepacked kernel with one row against numpy."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_testing import assert_close, ort_run
from tensorlang.graph.passes import infer_types, pack_dense_weights
from tensorlang.graph.passes.pack_dense_weights import pack_kn

import tensorlang as tl
from tensorlang import graph

RNG = np.random.default_rng(18)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _gemm_model(k: int, n: int, rows: int, trans_b: bool, bias: bool, alpha=1.0, beta=1.0):
    w = _rand(n, k) if trans_b else _rand(k, n)
    inits = [numpy_helper.from_array(w, "fc.weight")]
    ins = ["input.1", "fc.weight"]
    if bias:
        inits.append(numpy_helper.from_array(_rand(n), "fc.bias"))
        ins.append("fc.bias")
    node = helper.make_node("Gemm", ins, ["logits:0"], transB=int(trans_b), alpha=alpha,
                            beta=beta)
    g = helper.make_graph([node], "gemv", [helper.make_tensor_value_info(
        "input.1", TensorProto.FLOAT, [rows, k])], [helper.make_tensor_value_info(
            "logits:0", TensorProto.FLOAT, [rows, n])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _matmul_model(k: int, n: int):
    w = _rand(k, n)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    g = helper.make_graph([node], "gemv", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, k])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, n])], initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _build_and_compare(model, feeds):
    gm = graph.build(graph.from_onnx(model))
    got = gm.run(**feeds)
    ref = ort_run(model, feeds)
    assert set(got) == set(ref)
    for name, r in ref.items():
        assert_close(got[name], r)


@pytest.mark.parametrize("k,n,trans_b,bias", [
    (2048, 1000, True, True),    # a ResNet classifier at batch 1
    (544, 1000, True, True),     # ShuffleNet's
    (300, 37, False, False),     # N not a multiple of 16: a zero-padded last panel
    (33, 10, True, True),        # K odd, fewer columns than one panel
])
def test_batch1_gemm_matches_onnxruntime(k, n, trans_b, bias):
    model = _gemm_model(k, n, 1, trans_b, bias)
    _build_and_compare(model, {"input.1": _rand(1, k)})


def test_batch1_gemm_alpha_beta_and_few_rows():
    model = _gemm_model(200, 70, 3, True, True, alpha=0.5, beta=2.0)
    _build_and_compare(model, {"input.1": _rand(3, 200)})


def test_batch1_matmul_matches_onnxruntime():
    model = _matmul_model(1024, 250)
    _build_and_compare(model, {"x": _rand(1, 1024)})


def test_batch1_dense_weight_is_packed_at_build_time():
    g = infer_types(graph.from_onnx(_gemm_model(96, 40, 1, True, True)))
    dense = [nd for nd in infer_types(pack_dense_weights(g)).nodes if nd.op == "dense"]
    assert len(dense) == 1 and dense[0].attrs["weight_layout"] == "NK16n"
    w_kn = next(nd for nd in g.nodes if nd.op == "dense").inputs[1].data
    assert dense[0].attrs["units"] == 40
    assert np.array_equal(dense[0].inputs[1].data, pack_kn(w_kn))


@pytest.mark.parametrize("k,n", [(512, 300), (64, 16), (100, 7)])
def test_prepacked_gemv_kernel_matches_numpy(k, n):
    x, w = _rand(1, k), _rand(k, n)
    wp = pack_kn(w)
    X = tl.placeholder(x.shape, name="X")
    W = tl.placeholder(wp.shape, name="W")
    y = tl.ops.matmul_prepacked(X, W, n)
    f = tl.build(tl.ops.default_schedule(y), [X, W, y])
    out = np.zeros((1, n), np.float32)
    f(x, wp, out)
    np.testing.assert_allclose(out, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def test_prepacked_gemv_refuses_panels_of_another_matrix():
    X = tl.placeholder((1, 64), name="X")
    W = tl.placeholder((2, 64, 16), name="W")
    with pytest.raises(ValueError, match=r"is not B \[64, 40\] packed into \[3, 64, 16\]"):
        tl.ops.matmul_prepacked(X, W, 40)
