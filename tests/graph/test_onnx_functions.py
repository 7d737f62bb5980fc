"""Operators without a converter of their own, imported through their ONNX function bodies
(graph/frontends/onnx_functions.py): what torch writes at opset 23 (Attention,
RMSNormalization), a fixed body with attribute references (Swish), and the refusal when a body
does not import. Each against onnxruntime."""

import numpy as np
import onnxruntime as ort
import pytest
from graph_testing import assert_close
from onnx import helper
from tensorlang.graph.frontends.onnx import CONVERTERS

from tensorlang import graph

ort.set_default_logger_severity(3)
RNG = np.random.default_rng(23)


def _model(nodes, inputs, outputs, opset, inits=()):
    """A model of ``nodes``; inputs as (name, array) pairs (their types), inits as (name,
    array) pairs."""
    return _dynamic_model(nodes, [(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                                  for n, a in inputs], outputs, opset, inits)


def _check(m, feeds, rtol=1e-5):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, feeds)
    got = graph.build(graph.from_onnx(m)).run(**feeds)
    assert len(got) == len(ref)
    for g, r in zip(got.values(), ref):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
        assert_close(g, r, rtol=rtol)


@pytest.mark.parametrize("op", ["Attention", "RMSNormalization", "Swish"])
def test_these_operators_have_no_converter(op):
    """What this file tests is the function path: a converter of their own would bypass it."""
    assert op not in CONVERTERS


@pytest.mark.parametrize("axis,eps", [(-1, 1e-6), (1, 1e-3)])
def test_rms_normalization_vs_onnxruntime(axis, eps):
    x = RNG.standard_normal((2, 5, 16)).astype(np.float32) * 3
    scale = RNG.standard_normal((16,) if axis == -1 else (5, 16)).astype(np.float32)
    node = helper.make_node("RMSNormalization", ["x", "scale"], ["y"], axis=axis, epsilon=eps)
    _check(_model([node], [("x", x)], ["y"], 23, [("scale", scale)]), {"x": x})


def _qkv(b, hq, hkv, s_q, s_kv, d):
    q = RNG.standard_normal((b, hq, s_q, d)).astype(np.float32)
    k = RNG.standard_normal((b, hkv, s_kv, d)).astype(np.float32)
    v = RNG.standard_normal((b, hkv, s_kv, d)).astype(np.float32)
    return q, k, v


@pytest.mark.parametrize("attrs,mask", [
    ({}, None),
    ({"is_causal": 1}, None),
    ({"scale": 0.3}, "bool"),
    ({}, "float"),
    ({"softcap": 5.0, "is_causal": 1}, None),
], ids=["plain", "causal", "scale-bool-mask", "float-mask", "softcap-causal"])
def test_attention_4d_vs_onnxruntime(attrs, mask):
    q, k, v = _qkv(2, 4, 4, 6, 6, 8)
    feeds = {"q": q, "k": k, "v": v}
    names = ["q", "k", "v"]
    if mask == "bool":
        feeds["m"] = RNG.random((6, 6)) > 0.3
        feeds["m"][:, 0] = True  # no row masked whole
        names.append("m")
    elif mask == "float":
        feeds["m"] = RNG.standard_normal((2, 1, 6, 6)).astype(np.float32)
        names.append("m")
    node = helper.make_node("Attention", names, ["y"], **attrs)
    _check(_model([node], list(feeds.items()), ["y"], 23), feeds)


def test_attention_grouped_heads_3d_vs_onnxruntime():
    """3-D inputs [B, S, heads * D] with q_num_heads / kv_num_heads, two query heads per key
    head (grouped-query attention), causal."""
    q, k, v = _qkv(1, 4, 2, 5, 5, 8)
    q3 = q.transpose(0, 2, 1, 3).reshape(1, 5, 32)
    k3 = k.transpose(0, 2, 1, 3).reshape(1, 5, 16)
    v3 = v.transpose(0, 2, 1, 3).reshape(1, 5, 16)
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=4, kv_num_heads=2,
                            is_causal=1)
    feeds = {"q": q3, "k": k3, "v": v3}
    _check(_model([node], list(feeds.items()), ["y"], 23), feeds)


def test_attention_3d_without_head_counts_is_refused():
    q = np.zeros((1, 5, 32), np.float32)
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="att")
    m = _model([node], [("q", q), ("k", q), ("v", q)], ["y"], 23)
    with pytest.raises(graph.OnnxImportError, match=r"'att' \(Attention, opset 23\): 3-D inputs "
                                                    r".* need the q_num_heads and kv_num_heads"):
        graph.from_onnx(m)


def test_attention_with_past_key_values_vs_onnxruntime():
    """An optional input left out (no mask) before ones given (past key and value): the body's
    nodes read it as absent; the present key and value are outputs too."""
    q, k, v = _qkv(1, 2, 2, 3, 3, 4)
    pk, pv = (RNG.standard_normal((1, 2, 5, 4)).astype(np.float32) for _ in range(2))
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "pk2", "pv2"])
    feeds = {"q": q, "k": k, "v": v, "pk": pk, "pv": pv}
    _check(_model([node], list(feeds.items()), ["y", "pk2", "pv2"], 23), feeds)


@pytest.mark.parametrize("attrs", [{}, {"alpha": 1.702}])
def test_swish_attribute_reference_and_its_default(attrs):
    """Swish's body reads alpha by reference: the caller's value, or the schema's default 1."""
    x = RNG.standard_normal((3, 7)).astype(np.float32) * 4
    m = _model([helper.make_node("Swish", ["x"], ["y"], **attrs)], [("x", x)], ["y"], 24)
    got = graph.build(graph.from_onnx(m)).run(x=x)["y"]
    alpha = attrs.get("alpha", 1.0)
    want = x / (1 + np.exp(-np.float32(alpha) * x))
    assert_close(got, want, rtol=1e-5)


def test_a_body_that_does_not_import_is_refused_naming_what_inside():
    """Bernoulli's body draws with RandomUniformLike, which tensorlang does not import: the
    refusal names the node, says its function body did not import, and names the operator
    inside."""
    x = RNG.random((3, 4)).astype(np.float32)
    node = helper.make_node("Bernoulli", ["x"], ["y"], name="coin")
    with pytest.raises(graph.OnnxImportError,
                       match=r"'coin' \(Bernoulli, opset 22\): tensorlang has no converter for "
                             r"Bernoulli and its ONNX function body \(opset 22\) does not "
                             r"import: RandomUniformLike \(no converter\)"):
        graph.from_onnx(_model([node], [("x", x)], ["y"], 22))


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_vs_onnxruntime(interleaved):
    """RotaryEmbedding's body splits the head into the rotated part and an empty rest (the
    rotary dimension is the whole head): the empty part is dropped by the Concat."""
    x = RNG.standard_normal((2, 4, 3, 8)).astype(np.float32)
    cos, sin = (RNG.standard_normal((50, 4)).astype(np.float32) for _ in range(2))
    pos = np.array([[0, 1, 2], [5, 6, 7]], np.int64)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                            interleaved=interleaved)
    m = _model([node], [("x", x), ("pos", pos)], ["y"], 23, [("cos", cos), ("sin", sin)])
    _check(m, {"x": x, "pos": pos})


def test_split_with_an_empty_part_then_concat_vs_onnxruntime():
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    sizes = np.array([6, 0], np.int64)
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
             helper.make_node("Concat", ["b", "a", "b"], ["y"], axis=1)]
    _check(_model(nodes, [("x", x)], ["y"], 18, [("sizes", sizes)]), {"x": x})


def test_an_empty_tensor_computed_at_run_time_is_refused():
    """A kernel of no elements (a Slice of nothing, an empty Split part added to something) is
    refused at import, naming the node, instead of failing to compile."""
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    consts = [("s", np.array([3], np.int64)), ("e", np.array([3], np.int64)),
              ("ax", np.array([1], np.int64))]
    node = helper.make_node("Slice", ["x", "s", "e", "ax"], ["y"], name="nothing")
    with pytest.raises(graph.OnnxImportError,
                       match=r"'nothing'.*computes an empty tensor \(shape \[2, 0\]\) at run "
                             r"time; empty tensors are not supported"):
        graph.from_onnx(_model([node], [("x", x)], ["y"], 13, consts))
    sizes = [("sizes", np.array([6, 0], np.int64))]
    split = helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)
    nodes = [split, helper.make_node("Add", ["b", "x1"], ["y"], name="add_nothing")]
    inputs = [("x", x), ("x1", x[:, :1])]
    with pytest.raises(graph.OnnxImportError, match=r"'add_nothing'.*empty tensor"):
        graph.from_onnx(_model(nodes, inputs, ["y"], 18, sizes))
    nodes = [split, helper.make_node("Relu", ["b"], ["y"])]  # folded: an empty output
    with pytest.raises(graph.OnnxImportError,
                       match=r"graph output 'y' is an empty tensor \(shape \[2, 0\]\)"):
        graph.from_onnx(_model(nodes, [("x", x)], ["y"], 18, sizes))


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization_mean_and_inverse_std_outputs_vs_onnxruntime(axis):
    """LayerNormalization's training outputs (Mean, InvStdDev): a node that names them is
    imported through the operator's function body; one that does not keeps its kernel."""
    x = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    scale, bias = (RNG.standard_normal(x.shape[axis:]).astype(np.float32) for _ in range(2))
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"],
                            axis=axis, epsilon=1e-3)
    m = _model([node], [("x", x)], ["y", "mean", "inv"], 17, [("s", scale), ("b", bias)])
    _check(m, {"x": x})
    assert "layer_norm" not in {n.op for n in graph.from_onnx(m).nodes}
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=axis)
    m = _model([node], [("x", x)], ["y"], 17, [("s", scale), ("b", bias)])
    assert [n.op for n in graph.from_onnx(m).nodes] == ["layer_norm"]


def _dynamic_model(nodes, inputs, outputs, opset, inits=()):
    """A model whose inputs have named dynamic dimensions: inputs are (name, elem_type,
    [int | str])."""
    g = helper.make_graph(
        nodes, "fn", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [helper.make_tensor(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape,
                            a.reshape(-1).tolist()) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_of_symbolic_shape_vs_onnxruntime(interleaved):
    """What torch's dynamo exporter writes for Llama at opset 23 with dynamic shapes: the
    whole head rotated, so the body's Split has an empty part of symbolic shape [b, s, h, 0],
    which only its Concat reads (it was refused: 'an empty part ... is not supported')."""
    from onnx import TensorProto

    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], num_heads=2,
                            interleaved=interleaved)
    f = TensorProto.FLOAT
    m = _dynamic_model([node], [("x", f, ["b", "s", 16]), ("cos", f, ["b", "s", 4]),
                                ("sin", f, ["b", "s", 4])], ["y"], 23)
    gm = graph.build(graph.from_onnx(m))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for b, s in [(1, 1), (2, 5), (3, 2)]:
        feeds = {"x": RNG.standard_normal((b, s, 16)).astype(np.float32),
                 "cos": RNG.standard_normal((b, s, 4)).astype(np.float32),
                 "sin": RNG.standard_normal((b, s, 4)).astype(np.float32)}
        assert_close(gm.run(**feeds)["y"], sess.run(None, feeds)[0], rtol=1e-5)


def test_an_empty_part_of_symbolic_shape_read_by_other_than_concat_is_refused():
    from onnx import TensorProto

    sizes = [("sizes", np.array([6, 0], np.int64))]
    split = helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)
    inputs = [("x", TensorProto.FLOAT, ["n", 6]), ("x1", TensorProto.FLOAT, ["n", 1])]
    nodes = [split, helper.make_node("Add", ["b", "x1"], ["y"], name="add_nothing")]
    with pytest.raises(graph.OnnxImportError, match=r"'add_nothing'.*empty tensor"):
        graph.from_onnx(_dynamic_model(nodes, inputs, ["y"], 18, sizes))
    nodes = [split, helper.make_node("Relu", ["b"], ["y"], name="relu_nothing")]
    with pytest.raises(graph.OnnxImportError, match=r"'relu_nothing'.*empty tensor"):
        graph.from_onnx(_dynamic_model(nodes, inputs[:1], ["y"], 18, sizes))
    nodes = [split, helper.make_node("Identity", ["b"], ["y"])]
    with pytest.raises(graph.OnnxImportError, match=r"graph output 'y' is an empty tensor"):
        graph.from_onnx(_dynamic_model(nodes, inputs[:1], ["y"], 18, sizes))
