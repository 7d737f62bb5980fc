"""flush_denormal_weights: the subnormal elements of conv, dense and matmul weights are zeros in
the built graph (PP-OCRv6's detector ships 1x1 convs whose weights are up to 63% subnormal: each
FMA on one took a microcode assist), other constants keep theirs; the outputs match
onnxruntime's, which computes with the subnormals."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_testing import assert_close, ort_run
from tensorlang.graph.passes import flush_denormal_weights, infer_types

from tensorlang import graph

RNG = np.random.default_rng(11)
TINY = np.finfo(np.float32).tiny


def _subnormal(shape, share=0.5):
    w = RNG.standard_normal(shape).astype(np.float32) * 0.3
    mask = RNG.random(shape) < share
    w[mask] = (RNG.uniform(-1, 1, mask.sum()) * TINY).astype(np.float32)
    return w


def _model():
    """A conv, a Gemm (dense) and a MatMul by subnormal-laden weights, and a Div by a
    subnormal constant (not a weight: kept, its quotient is large)."""
    inits = {"cw": _subnormal((16, 8, 3, 3)), "gw": _subnormal((32, 16)),
             "mw": _subnormal((16, 8)), "lw": _subnormal((2, 5, 8)), "tiny": np.full((1,), 1e-30, np.float32),
             "d": np.full((1,), TINY / 2, np.float32), "shape": np.array([2, 8, 16], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "cw"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("GlobalAveragePool", ["c"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "gw"], ["g"], transB=1),
             helper.make_node("MatMul", ["f", "mw"], ["m"]),
             helper.make_node("Reshape", ["c", "shape"], ["rows"]),
             helper.make_node("MatMul", ["lw", "rows"], ["l"]),  # a weight on the left
             helper.make_node("Mul", ["m", "tiny"], ["mt"]),
             helper.make_node("Div", ["mt", "d"], ["y"])]
    g = helper.make_graph(
        nodes, "subnormal", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("g", "y", "l")],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _subnormals(v) -> int:
    return int(np.count_nonzero((np.abs(v.data) < TINY) & (v.data != 0)))


def test_subnormal_weights_are_zeros_and_the_outputs_match_onnxruntime():
    model = _model()
    g = flush_denormal_weights(infer_types(graph.from_onnx(model)))
    weights = [(n.op, v) for n in g.nodes if n.op in ("conv", "dense", "matmul")
               for v in n.inputs if v.is_constant]
    assert sorted(op for op, _ in weights) == ["conv", "dense", "dense", "matmul"]
    assert all(_subnormals(v) == 0 for _, v in weights)
    divisor = next(n.inputs[1] for n in g.nodes if n.op == "divide")
    assert _subnormals(divisor) == 1  # not a weight: as it was
    feeds = {"x": RNG.standard_normal((1, 8, 4, 4)).astype(np.float32)}
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    for name, ref in ort_run(model, feeds).items():
        assert_close(got[name], ref)
