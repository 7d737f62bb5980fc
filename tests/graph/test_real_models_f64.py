"""The real-model corpus's float64 check (issue 18, benchmarks/real_models.py): where ours and
onnxruntime disagree by more than 1e-4, both are compared with the model evaluated in float64 by
onnx's reference evaluator (ocr_det_ppocrv4: onnxruntime's Sigmoid is the less accurate side).
float64_model must compute the same function in float64: float initializers, constants, inputs,
outputs and Cast targets become double, a Resize's scales (tensor(float) at every opset) stay."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from graph_testing import onnx  # skips without onnx/onnxruntime
from onnx import TensorProto, helper, numpy_helper

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
BN = {"bn_s": np.array([1.5, 0.5], np.float32), "bn_b": np.array([0.25, -1.0], np.float32),
      "bn_m": np.array([0.5, -2.0], np.float32), "bn_v": np.array([4.0, 0.25], np.float32)}


def _real_models():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("real_models_f64", BENCH / "real_models.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod


def _few_node_model(w: np.ndarray):
    """1x1 conv -> inference BatchNormalization with a momentum attribute (as paddle exports
    it) -> nearest 2x Resize (constant scales) -> Cast(float) -> Sigmoid -> Mul by a Constant
    node's float tensor."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c0"]),
        helper.make_node("BatchNormalization", ["c0", "bn_s", "bn_b", "bn_m", "bn_v"], ["c"],
                         epsilon=1e-5, momentum=0.9),
        helper.make_node("Resize", ["c", "", "scales"], ["r"], mode="nearest"),
        helper.make_node("Cast", ["r"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Sigmoid", ["f"], ["s"]),
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
            np.array([0.3], np.float32), "k")),
        helper.make_node("Mul", ["s", "k"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, "w")]
    inits += [numpy_helper.from_array(v, k) for k, v in BN.items()]
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
    g = helper.make_graph(nodes, "few", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 2, 3, 3])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 2, 6, 6])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _numpy_f64(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    c = np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    s, b, m, v = (BN[k].astype(np.float64).reshape(-1, 1, 1) for k in BN)
    c = (c - m) / np.sqrt(v + np.float64(np.float32(1e-5))) * s + b
    r = c.repeat(2, axis=2).repeat(2, axis=3)
    return np.float64(np.float32(0.3)) / (1.0 + np.exp(-r))


def test_float64_model_computes_the_model_in_float64(tmp_path):
    rm = _real_models()
    rng = np.random.default_rng(0)
    # large weights put the sigmoid's input far into its tail, where float32 loses its digits
    w = rng.normal(0, 12, (2, 2, 1, 1)).astype(np.float32)
    x = rng.normal(0, 1, (1, 2, 3, 3)).astype(np.float32)
    path = tmp_path / "few.onnx"
    onnx.save(_few_node_model(w), str(path))
    got = rm.float64_reference(path, {"x": x})["y"]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _numpy_f64(x, w), rtol=1e-12, atol=0)
    m64 = rm.float64_model(onnx.load(str(path)))
    kinds = {t.name: t.data_type for t in m64.graph.initializer}
    assert kinds == {"w": TensorProto.DOUBLE, "scales": TensorProto.FLOAT,
                     **{k: TensorProto.DOUBLE for k in BN}}


@pytest.mark.parametrize("row, expected", [
    ({"max_rel_err": 5e-5}, True),
    ({"max_rel_err": 1.7e-4}, False),  # no float64 evaluation: a mismatch
    ({"max_rel_err": 1.7e-4, "f64_rel_err": 4.2e-5, "ort_f64_rel_err": 1.7e-4}, True),
    ({"max_rel_err": 1.7e-4, "f64_rel_err": 1.7e-4, "ort_f64_rel_err": 4.2e-5}, False),
    ({"max_rel_err": 3e-4, "f64_rel_err": 2e-4, "ort_f64_rel_err": 5e-4}, False),
    ({"max_rel_err": float("inf"), "f64_rel_err": float("inf"),
      "ort_f64_rel_err": float("inf")}, False),
])
def test_match_falls_back_to_float64_only_where_onnxruntime_is_further(row, expected):
    assert _real_models().matches(row) is expected
