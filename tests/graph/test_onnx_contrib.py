"""onnxruntime's contrib operators (com.microsoft, graph/frontends/onnx_contrib.py and
onnx_attention.py) against onnxruntime: one hand-built node per case, its optional inputs
and outputs left out and given, within 1e-5 of the output's largest magnitude (fp32); the
refusals (the nchwc domain, a wrong rank, a missing attribute, an operator without a
converter). The models its optimizers write are in test_ort_optimized_models.py."""

from __future__ import annotations

import numpy as np
import pytest
from graph_testing import assert_close, onnx, ort_run  # skips without onnx/onnxruntime
from onnx import helper
from tensorlang.graph.frontends.onnx import OnnxImportError

from tensorlang import graph

RTOL = 1e-5
MS = "com.microsoft"


def _rng(seed: int = 0):
    return np.random.default_rng(seed)


def _f(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _model(node, feeds: dict, consts: dict, outputs: list[tuple[str, type]], opset: int = 17):
    """A one-node model: ``feeds`` graph inputs, ``consts`` initializers, ``outputs`` (name,
    numpy dtype)."""
    def info(name, dtype, shape=None):
        return helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)

    inits = [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()]
    g = helper.make_graph([node], "contrib", [info(k, v.dtype, v.shape) for k, v in feeds.items()],
                          [info(name, dt) for name, dt in outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                               helper.make_opsetid(MS, 1)])


def check(model, feeds: dict, rtol: float = RTOL) -> dict:
    """Import, build and run ``model``: every output as onnxruntime's."""
    ref = ort_run(model, feeds)
    out = graph.build(graph.from_onnx(model)).run(**feeds)
    for name, r in ref.items():
        if np.issubdtype(r.dtype, np.integer):
            np.testing.assert_array_equal(out[name], r, err_msg=name)
        else:
            assert_close(out[name], r, rtol)
    return out


# ---------------------------------------------------------------------------- activations


@pytest.mark.parametrize("op, bias, attrs", [
    ("Gelu", False, {}), ("FastGelu", False, {}), ("FastGelu", True, {}),
    ("BiasGelu", True, {}), ("QuickGelu", False, {}), ("QuickGelu", False, {"alpha": 1.0}),
])
def test_gelu_family(op, bias, attrs):
    rng = _rng(1)
    x = _f(rng, 2, 5, 16) * 3
    consts = {"b": _f(rng, 16)} if bias else {}
    node = helper.make_node(op, ["x"] + (["b"] if bias else []), ["y"], domain=MS, **attrs)
    check(_model(node, {"x": x}, consts, [("y", np.float32)]), {"x": x})


@pytest.mark.parametrize("activation, params", [
    ("Relu", None), ("Clip", [0.0, 6.0]), ("HardSigmoid", [1 / 6, 0.5]), ("Sigmoid", None),
    ("LeakyRelu", [0.2]), ("Tanh", None),
])
def test_fused_conv(activation, params):
    rng = _rng(2)
    x, w, b = _f(rng, 1, 3, 9, 9), _f(rng, 4, 3, 3, 3), _f(rng, 4)
    attrs = {"activation": activation, "pads": [1, 1, 1, 1], "strides": [2, 2]}
    if params is not None:
        attrs["activation_params"] = params
    node = helper.make_node("FusedConv", ["x", "w", "b"], ["y"], domain=MS, **attrs)
    check(_model(node, {"x": x}, {"w": w, "b": b}, [("y", np.float32)]), {"x": x})


def test_fused_conv_with_sum_input():
    """Z, the residual added before the activation, and no bias."""
    rng = _rng(3)
    x, w, z = _f(rng, 1, 4, 6, 6), _f(rng, 4, 4, 1, 1), _f(rng, 1, 4, 6, 6)
    node = helper.make_node("FusedConv", ["x", "w", "", "z"], ["y"], domain=MS,
                            activation="Relu")
    check(_model(node, {"x": x, "z": z}, {"w": w}, [("y", np.float32)]), {"x": x, "z": z})


@pytest.mark.parametrize("attrs", [
    {"activation": "Tanh", "transB": 1},
    {"activation": "LeakyRelu", "activation_alpha": 0.3, "alpha": 0.5, "beta": 2.0},
])
def test_fused_gemm(attrs):
    rng = _rng(4)
    a, c = _f(rng, 3, 8), _f(rng, 6)
    w = _f(rng, 6, 8) if attrs.get("transB") else _f(rng, 8, 6)
    node = helper.make_node("FusedGemm", ["a", "w", "c"], ["y"], domain=MS, **attrs)
    check(_model(node, {"a": a}, {"w": w, "c": c}, [("y", np.float32)]), {"a": a})


@pytest.mark.parametrize("attrs, weight", [
    ({"alpha": 0.125, "transB": 1}, False), ({"transA": 1}, False), ({"transB": 1}, True),
    ({}, True),
])
def test_fused_matmul(attrs, weight):
    rng = _rng(5)
    a = _f(rng, 2, 3, 8, 5) if attrs.get("transA") else _f(rng, 2, 3, 5, 8)
    b = _f(rng, 2, 3, 7, 8) if attrs.get("transB") else _f(rng, 2, 3, 8, 7)
    if weight:
        b = b[0, 0]
    feeds, consts = ({"a": a}, {"b": b}) if weight else ({"a": a, "b": b}, {})
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, **attrs)
    check(_model(node, feeds, consts, [("y", np.float32)]), feeds)


# ---------------------------------------------------------------------------- normalizations


def _skip_inputs(rng, hidden=16, skip_shape=None):
    x = _f(rng, 2, 5, hidden) * 2 + 1
    return x, _f(rng, *(skip_shape or x.shape))


@pytest.mark.parametrize("beta, bias, outputs, skip_shape", [
    (True, True, ["y", "mean", "inv", "sum"], None),
    (False, False, ["y"], None),
    (True, False, ["y", "", "", "sum"], (5, 16)),
    (False, True, ["y", "mean", "inv"], (1, 5, 16)),
])
def test_skip_layer_norm(beta, bias, outputs, skip_shape):
    rng = _rng(6)
    x, skip = _skip_inputs(rng, skip_shape=skip_shape)
    consts = {"g": _f(rng, 16), "be": _f(rng, 16), "bi": _f(rng, 16)}
    ins = ["x", "s", "g", "be" if beta else "", "bi" if bias else ""]
    node = helper.make_node("SkipLayerNormalization", ins, outputs, domain=MS, epsilon=1e-5)
    model = _model(node, {"x": x, "s": skip}, consts,
                   [(o, np.float32) for o in outputs if o])
    check(model, {"x": x, "s": skip})


@pytest.mark.parametrize("bias, outputs", [
    (True, ["y", "", "inv", "sum"]), (False, ["y"]), (False, ["y", "", "", "sum"]),
])
def test_skip_simplified_layer_norm(bias, outputs):
    rng = _rng(7)
    x, skip = _skip_inputs(rng)
    consts = {"g": _f(rng, 16), "bi": _f(rng, 16)}
    node = helper.make_node("SkipSimplifiedLayerNormalization",
                            ["x", "s", "g"] + (["bi"] if bias else []), outputs, domain=MS)
    model = _model(node, {"x": x, "s": skip}, consts,
                   [(o, np.float32) for o in outputs if o])
    check(model, {"x": x, "s": skip})


@pytest.mark.parametrize("axis, outputs", [(-1, ["y"]), (1, ["y", "inv"]), (-1, ["y", "inv"])])
def test_simplified_layer_norm(axis, outputs):
    """RMS normalization, which onnxruntime registers in the default domain."""
    rng = _rng(8)
    x = _f(rng, 2, 3, 8)
    scale = _f(rng, *x.shape[axis:])
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "sc"], outputs, axis=axis,
                            epsilon=1e-6)
    check(_model(node, {"x": x}, {"sc": scale}, [(o, np.float32) for o in outputs]), {"x": x})


@pytest.mark.parametrize("outputs", [["y"], ["y", "mean", "inv"]])
def test_layer_normalization_below_opset_17(outputs):
    """onnxruntime's optimizers write LayerNormalization in the default domain at any opset
    (onnxruntime runs it from opset 1); with its mean and inverse deviation too."""
    rng = _rng(9)
    x = _f(rng, 2, 4, 8) + 3
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], outputs, axis=-1,
                            epsilon=1e-5)
    model = _model(node, {"x": x}, {"g": _f(rng, 8), "b": _f(rng, 8)},
                   [(o, np.float32) for o in outputs], opset=14)
    check(model, {"x": x})


@pytest.mark.parametrize("segment, mask, positions, outputs", [
    (True, True, False, ["y", "mask_index"]),
    (False, False, False, ["y", "mask_index"]),  # no mask: zeros
    (True, False, True, ["y", "mask_index", "sum"]),
    (False, True, True, ["y", "", "sum"]),
])
def test_embed_layer_norm(segment, mask, positions, outputs):
    rng = _rng(10)
    ids = rng.integers(0, 30, (2, 6)).astype(np.int32)
    feeds = {"ids": ids}
    if segment:
        feeds["seg"] = rng.integers(0, 2, (2, 6)).astype(np.int32)
    if mask:  # a padded row, a full one, and a 0 inside a row (counted, not searched for)
        feeds["mask"] = np.array([[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1]], np.int32)
    if positions:
        feeds["pos"] = rng.integers(0, 8, (1, 6)).astype(np.int32)
    consts = {"W": _f(rng, 30, 16), "P": _f(rng, 8, 16), "S": _f(rng, 2, 16),
              "g": _f(rng, 16), "b": _f(rng, 16)}
    ins = ["ids", "seg" if segment else "", "W", "P", "S" if segment else "", "g", "b",
           "mask" if mask else "", "pos" if positions else ""]
    node = helper.make_node("EmbedLayerNormalization", ins, outputs, domain=MS)
    types = {"y": np.float32, "mask_index": np.int32, "sum": np.float32}
    check(_model(node, feeds, consts, [(o, types[o]) for o in outputs if o]), feeds)


# ---------------------------------------------------------------------------- attention


def _attention_case(rng, mask_kind: str, batch=2, seq=5, hidden=16):
    x = _f(rng, batch, seq, hidden)
    mask = {
        "none": None,
        "end": np.array([3, 5], np.int32),
        "end_start": np.array([4, 5, 1, 0], np.int32),
        "raw2d": np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]], np.int32),
        "raw3d": (rng.random((batch, seq, seq)) > 0.3).astype(np.int32),
    }[mask_kind]
    return x, mask


@pytest.mark.parametrize("mask_kind, attrs", [
    ("none", {}), ("end", {}), ("end_start", {}), ("raw2d", {"mask_filter_value": -1e4}),
    ("raw3d", {}), ("none", {"unidirectional": 1}), ("raw2d", {"unidirectional": 1}),
    ("end", {"scale": 0.3, "qkv_hidden_sizes": [16, 16, 8]}), ("raw2d", {"bias": 1}),
])
def test_attention(mask_kind, attrs):
    """bias: an attention_bias input (added to the scores) with the mask."""
    rng = _rng(11)
    x, mask = _attention_case(rng, mask_kind)
    width = sum(attrs.get("qkv_hidden_sizes", [16] * 3))
    consts = {"w": _f(rng, 16, width) * 0.5, "b": _f(rng, width)}
    feeds = {"x": x} if mask is None else {"x": x, "m": mask}
    ins = ["x", "w", "b", "m" if mask is not None else ""]
    if attrs.pop("bias", 0):
        feeds["ab"] = _f(rng, 2, 1, 5, 5)
        ins += ["", "ab"]
    node = helper.make_node("Attention", ins, ["y"], domain=MS, num_heads=4, **attrs)
    check(_model(node, feeds, consts, [("y", np.float32)]), feeds)


@pytest.mark.parametrize("mask", [False, True])
def test_attention_with_past(mask):
    """A generation step: past keys / values, present out, no QKV bias."""
    rng = _rng(12)
    batch, seq, past, heads, size = 2, 3, 4, 2, 4
    x = _f(rng, batch, seq, heads * size)
    feeds = {"x": x, "past": _f(rng, 2, batch, heads, past, size)}
    if mask:
        feeds["m"] = np.array([[1] * 7, [0, 0, 1, 1, 1, 1, 1]], np.int32)
    node = helper.make_node("Attention", ["x", "w", "", "m" if mask else "", "past"],
                            ["y", "present"], domain=MS, num_heads=heads, unidirectional=1)
    model = _model(node, feeds, {"w": _f(rng, heads * size, 3 * heads * size)},
                   [("y", np.float32), ("present", np.float32)])
    check(model, feeds)


@pytest.mark.parametrize("case", ["self", "cross_mask", "past", "causal_nobias"])
def test_multi_head_attention(case):
    rng = _rng(13)
    batch, seq, kv, hidden, heads = 2, 4, 6 if case == "cross_mask" else 4, 16, 4
    feeds = {"q": _f(rng, batch, seq, hidden), "k": _f(rng, batch, kv, hidden),
             "v": _f(rng, batch, kv, hidden)}
    ins = ["q", "k", "v", "" if case == "causal_nobias" else "b"]
    outputs = ["y"]
    if case == "cross_mask":
        feeds["m"] = np.array([[1] * 4 + [0, 0], [1] * 6], np.int32)
        ins.append("m")
    if case == "past":
        feeds["pk"] = _f(rng, batch, heads, 3, hidden // heads)
        feeds["pv"] = _f(rng, batch, heads, 3, hidden // heads)
        ins += ["", "", "pk", "pv"]
        outputs += ["present_k", "present_v"]
    attrs = {"unidirectional": 1} if case in ("causal_nobias", "past") else {}
    node = helper.make_node("MultiHeadAttention", ins, outputs, domain=MS, num_heads=heads,
                            **attrs)
    check(_model(node, feeds, {"b": _f(rng, 3 * hidden)},
                 [(o, np.float32) for o in outputs]), feeds)


@pytest.mark.parametrize("trans_a, bias, float_out", [(False, True, True), (True, False, False),
                                                     (False, True, False)])
def test_qgemm(trans_a, bias, float_out):
    """QGemm (the QOperator format's Gemm): per-channel int8 B transposed, an int32 C, a
    uint8 output or (without y_scale) a float one; exact against onnxruntime."""
    rng = _rng(17)
    a = rng.integers(0, 255, (6, 4) if trans_a else (4, 6)).astype(np.uint8)
    consts = {"sa": np.float32(0.02), "za": np.uint8(120),
              "b": rng.integers(-127, 127, (5, 6)).astype(np.int8),
              "sb": (rng.random(5) * 0.01 + 0.005).astype(np.float32), "zb": np.zeros(5, np.int8),
              "c": rng.integers(-500, 500, 5).astype(np.int32), "sy": np.float32(0.05),
              "zy": np.uint8(128)}
    ins = ["a", "sa", "za", "b", "sb", "zb", "c" if bias else ""]
    ins += [] if float_out else ["sy", "zy"]
    node = helper.make_node("QGemm", ins, ["y"], domain=MS, transA=int(trans_a), transB=1,
                            alpha=0.5)
    out = _model(node, {"a": a}, consts, [("y", np.float32 if float_out else np.uint8)])
    check(out, {"a": a}, rtol=1e-6)


# ---------------------------------------------------------------------------- refusals


def _one_node(op, domain, x, **attrs):
    node = helper.make_node(op, ["x"], ["y"], domain=domain, **attrs)
    m = _model(node, {"x": x}, {}, [("y", np.float32)])
    m.opset_import.append(helper.make_opsetid(domain, 1))
    return m


def test_nchwc_operators_are_refused_with_the_way_out():
    x = np.zeros((1, 8, 4, 4), np.float32)
    with pytest.raises(OnnxImportError, match=r"com\.microsoft\.nchwc::ReorderInput.*"
                                              r"opt_level <= 2"):
        graph.from_onnx(_one_node("ReorderInput", "com.microsoft.nchwc", x))


@pytest.mark.parametrize("op, domain", [("BiasSoftmax", MS), ("Frobnicate", "org.example")])
def test_operator_without_converter_is_named_with_its_domain(op, domain):
    with pytest.raises(graph.UnsupportedOperatorError, match=f"{domain}::{op}"):
        graph.from_onnx(_one_node(op, domain, np.zeros((2, 3), np.float32)))


def test_wrong_rank_is_refused():
    rng = _rng(14)
    x = _f(rng, 1, 2, 3, 8)
    node = helper.make_node("SkipLayerNormalization", ["x", "x", "g"], ["y"], domain=MS)
    model = _model(node, {"x": x}, {"g": _f(rng, 8)}, [("y", np.float32)])
    with pytest.raises(OnnxImportError, match=r"SkipLayerNormalization.*input must have rank "
                                              r"2 or 3, got shape \[1, 2, 3, 8\]"):
        graph.from_onnx(model)


def test_missing_required_attribute_is_refused():
    rng = _rng(15)
    x = _f(rng, 1, 4, 8)
    node = helper.make_node("Attention", ["x", "w"], ["y"], domain=MS)
    model = _model(node, {"x": x}, {"w": _f(rng, 8, 24)}, [("y", np.float32)])
    with pytest.raises(OnnxImportError, match=r"com\.microsoft::Attention.*num_heads attribute "
                                              "is required"):
        graph.from_onnx(model)


def test_unknown_activation_is_refused():
    rng = _rng(16)
    x = _f(rng, 1, 2, 5, 5)
    node = helper.make_node("FusedConv", ["x", "w"], ["y"], domain=MS, activation="Swoosh")
    model = _model(node, {"x": x}, {"w": _f(rng, 2, 2, 1, 1)}, [("y", np.float32)])
    with pytest.raises(OnnxImportError, match="activation 'Swoosh' is not supported"):
        graph.from_onnx(model)
