"""Graphs with symbolic dimensions (issue 19): one build runs at any consistent sizes.

Differential against numpy at several sizes, in both execution modes; inconsistent sizes are
refused naming the variable; the arena is placed per shape; save/load keeps the variables."""

import numpy as np
import pytest
from tensorlang.graph import symbolic as S
from tensorlang.graph.ir import GraphError
from tensorlang.runtime.graph_module import InputError

import tensorlang as tl
from tensorlang import graph, runtime

BATCH, SEQ = tl.var("batch"), tl.var("seq")


def test_dims_have_one_canonical_form():
    assert S.same(BATCH * SEQ, SEQ * BATCH)
    assert S.dim(SEQ * 2 // 2) is S.shape_var("seq")
    assert S.dim((SEQ + 1) - 1) is S.shape_var("seq")
    assert S.dim(SEQ - SEQ) == 0 and isinstance(S.dim(SEQ - SEQ), int)
    assert not S.same(SEQ // 2 + 1, SEQ // 2)
    for e in (BATCH * SEQ * 4, SEQ // 2 + 1, SEQ % 4, BATCH * (SEQ + 1)):
        assert S.same(S.parse(S.dim_text(e)), e)
        assert S.evaluate(S.dim(e), {"batch": 3, "seq": 9}) == S.evaluate(e, {"batch": 3,
                                                                            "seq": 9})


def test_broadcast_of_symbolic_shapes():
    assert S.broadcast((BATCH, 1, SEQ), (4, SEQ)) == (S.shape_var("batch"), 4,
                                                      S.shape_var("seq"))
    with pytest.raises(GraphError, match="do not broadcast"):
        S.broadcast((BATCH, SEQ), (SEQ, SEQ))
    with pytest.raises(GraphError, match="only ints, shape variables"):
        S.parse("seq ** 2")


def _model():
    gb = graph.Builder("dyn")
    x = gb.input("x", (BATCH, SEQ, 16))
    y = gb.input("y", (BATCH, 1, 16))
    bias = gb.const(np.linspace(-1, 1, 16, dtype="float32"), "bias")
    z = gb.relu(gb.multiply(gb.add(x, y), bias))
    return gb.build([gb.sigmoid(z), z])


def _reference(x, y):
    z = np.maximum((x + y) * np.linspace(-1, 1, 16, dtype="float32"), 0)
    return 1 / (1 + np.exp(-z)), z


def _inputs(b, s, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((b, s, 16)).astype("float32"),
            rng.standard_normal((b, 1, 16)).astype("float32"))


@pytest.fixture(scope="module")
def built():
    g = _model()
    return g, graph.build(g)


def test_one_build_runs_at_every_size(built):
    g, gm = built
    assert gm.shape_vars == ("batch", "seq")
    assert all(gm.kernels[k].vars for k in gm.kernels)  # compiled once, symbolic extents
    names = [v.name for v in g.outputs]
    for b, s in [(1, 1), (2, 5), (4, 17), (2, 5), (8, 3)]:
        x, y = _inputs(b, s, seed=b * 100 + s)
        for mode in ("graph", "interactive"):
            got = gm.run(mode=mode, x=x, y=y)
            for name, want in zip(names, _reference(x, y)):
                assert got[name].shape == (b, s, 16)
                np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-6)


def test_inconsistent_sizes_are_refused(built):
    _, gm = built
    x, y = _inputs(3, 4)
    with pytest.raises(InputError, match=r"inputs disagree on batch: input 'x' axis 0 gives 3,"
                                         r" input 'y' axis 0 has 2"):
        gm.run(x=x, y=y[:2])
    with pytest.raises(InputError, match=r"input 'y' must have shape \[batch, 1, 16\]"):
        gm.run(x=x, y=np.zeros((3, 2, 16), "float32"))
    with pytest.raises(InputError, match=r"input 'x' must have shape \[batch, seq, 16\]"):
        gm.run(x=x[..., :8].copy(), y=y)


def test_arena_is_placed_per_shape(built):
    _, gm = built
    small, big = gm.memory_at(batch=1, seq=8), gm.memory_at(batch=8, seq=512)
    for m in (small, big):
        assert m["lower_bound_bytes"] <= m["arena_bytes"] <= m["naive_bytes"]
    # two outputs and the two inputs are live at the end: at least their bytes
    assert big["lower_bound_bytes"] >= 4 * (2 * 8 * 512 * 16 + 8 * 16)
    assert big["arena_bytes"] > 50 * small["arena_bytes"]
    with pytest.raises(InputError, match="needs a size for each of"):
        gm.memory_at(batch=2)


def test_stateful_api_and_save_load(built, tmp_path):
    g, gm = built
    path = gm.save(tmp_path / "dyn.tlpkg")
    loaded = runtime.load(path)
    assert loaded.shape_vars == ("batch", "seq")
    assert loaded.input_info()["x"] == (("batch", "seq", 16), "float32")
    x, y = _inputs(3, 7, seed=5)
    loaded.set_input(x=x)
    loaded.set_input(y=y)
    loaded.run()
    want = _reference(x, y)
    np.testing.assert_allclose(loaded.get_output(0), want[0], rtol=1e-6, atol=1e-6)
    got = loaded.run(x=x[:1], y=y[:1])
    np.testing.assert_allclose(got[g.outputs[1].name], want[1][:1], rtol=1e-6, atol=1e-6)


def test_unknown_variable_in_a_value_is_refused():
    gb = graph.Builder("bad")
    x = gb.input("x", (BATCH, 4))
    g = gb.build([gb.relu(x)])
    # a value whose dimension no input defines (made by hand; no operator infers it)
    from tensorlang.graph.build import graph_shape_vars
    from tensorlang.graph.ir import Graph, Node, Value

    out = Value("out", (S.shape_var("other"), 4), "float32")
    bad = Graph([Node("n", "relu", [g.inputs[0]], [out])], g.inputs, [out])
    with pytest.raises(GraphError, match="uses other: no graph input's shape does"):
        graph_shape_vars(bad)


# -- ONNX models with dim_param (dynamic axes) -----------------------------------------------

ort = pytest.importorskip("onnxruntime")
onnx_helper = pytest.importorskip("onnx.helper")


def _ort(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_onnx_dim_params_become_shape_variables():
    from onnx import TensorProto

    x = onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "T"])
    y = onnx_helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = onnx_helper.make_model(onnx_helper.make_graph(
        [onnx_helper.make_node("Relu", ["x"], ["y"])], "m", [x], [y]),
        opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    g = graph.from_onnx(model)
    assert str(g.inputs[0].type_str()) == "float32[N, 3, T]"
    # shapes= still specialises: a fixed build
    fixed = graph.from_onnx(model, shapes={"x": (2, 3, 5)})
    assert fixed.inputs[0].shape == (2, 3, 5)
    named = graph.from_onnx(model, shapes={"x": ("batch", 3, 7)})
    assert named.inputs[0].type_str() == "float32[batch, 3, 7]"


def _shape_model():
    """Flatten at axis 2 and a Reshape with 0 (copy) and -1 over [b, 4, s]."""
    from onnx import TensorProto, numpy_helper

    nodes = [onnx_helper.make_node("Flatten", ["x"], ["f"], axis=2),
             onnx_helper.make_node("Reshape", ["x", "target"], ["r"]),
             onnx_helper.make_node("Relu", ["r"], ["y"]),
             onnx_helper.make_node("Sigmoid", ["f"], ["z"])]
    g = onnx_helper.make_graph(
        nodes, "shapes",
        [onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4, "s"])],
        [onnx_helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "yz"],
        [numpy_helper.from_array(np.array([0, -1, 2], np.int64), "target")])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    return model


def test_reshape_and_flatten_keep_symbolic_dims():
    model = _shape_model()
    g = graph.from_onnx(model, name="shapes")
    types = {v.name: v.type_str() for v in g.outputs}
    assert types == {"y": "float32[b, s * 2, 2]", "z": "float32[b * 4, s]"}
    gm = graph.build(g)
    sess = _ort(model)
    for b, s in [(1, 2), (3, 6)]:
        x = np.random.default_rng(s).standard_normal((b, 4, s)).astype("float32")
        got, want = gm.run(x=x), dict(zip("yz", sess.run(None, {"x": x})))
        for k in "yz":
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6)
    with pytest.raises(InputError, match=r"input 'x' must have shape \[b, 4, s\]"):
        gm.run(x=np.zeros((2, 3, 4), "float32"))


def test_mlp_with_a_dynamic_batch_matches_onnxruntime():
    from tensorlang.graph import model_zoo

    model = model_zoo.mlp(batch="batch")
    gm = graph.build(graph.from_onnx(model))
    sess = _ort(model)
    for b in (1, 5, 8):
        x = np.random.default_rng(b).standard_normal((b, 64)).astype("float32")
        np.testing.assert_allclose(gm.run(x=x)[model.graph.output[0].name],
                                   sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_bert_style_encoder_one_build_every_size():
    """Dynamic batch and sequence: attention heads split/merged by Reshapes with 0 and -1,
    an additive mask broadcast over heads and queries, written-out layer norm, GELU."""
    from tensorlang.graph import model_zoo

    model = model_zoo.bert_encoder(layers=1, hidden=32, heads=2, ffn=64)
    gm = graph.build(graph.from_onnx(model))
    assert gm.shape_vars == ("batch", "seq")
    sess = _ort(model)
    out = model.graph.output[0].name
    for b, s in [(1, 8), (3, 13), (2, 64)]:
        rng = np.random.default_rng(b * s)
        x = rng.standard_normal((b, s, 32)).astype("float32")
        mask = np.where(rng.random((b, 1, 1, s)) < 0.2, -1e4, 0).astype("float32")
        want = sess.run(None, {"x": x, "mask": mask})[0]
        np.testing.assert_allclose(gm.run(x=x, mask=mask)[out], want, rtol=1e-4, atol=1e-4)
    with pytest.raises(InputError, match="inputs disagree on seq"):
        gm.run(x=x, mask=mask[..., :-1].copy())
