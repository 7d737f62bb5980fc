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
    for _ in range(2):  # a refused shape stays refused (accepted shapes skip the check)
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
    # an unnamed dynamic dimension is <input>_<axis>, made an identifier
    x = onnx_helper.make_tensor_value_info("in.1", TensorProto.FLOAT, [None, 3])
    model.graph.input.pop()
    model.graph.input.append(x)
    model.graph.node[0].input[0] = "in.1"
    assert graph.from_onnx(model).inputs[0].type_str() == "float32[in_1_0, 3]"


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


def _chain_model(use_shape_at_run_time: bool = False):
    """x [b, s, 8] reshaped to [b, s * 2, 4] by the chain exporters write for x.view(b, -1, 4)
    with a dynamic batch: Shape -> Gather -> Mul/Div -> Unsqueeze -> Concat -> Reshape."""
    from onnx import TensorProto, numpy_helper

    def node(op, ins, out, **kw):
        return onnx_helper.make_node(op, ins, [out], **kw)

    consts = {"i0": np.array(0, np.int64), "i1": np.array(1, np.int64),
              "four": np.array([4], np.int64), "k4": np.array(4, np.int64),
              "k2": np.array(2, np.int64), "ax": np.array([0], np.int64)}
    nodes = [node("Shape", ["x"], "shp"), node("Gather", ["shp", "i0"], "b", axis=0),
             node("Gather", ["shp", "i1"], "s", axis=0), node("Mul", ["s", "k4"], "s4"),
             node("Div", ["s4", "k2"], "s2"), node("Unsqueeze", ["b", "ax"], "ub"),
             node("Unsqueeze", ["s2", "ax"], "us"),
             node("Concat", ["ub", "us", "four"], "target", axis=0),
             node("Reshape", ["x", "target"], "r"), node("Relu", ["r"], "y")]
    if use_shape_at_run_time:  # the size as data: a kernel would read it
        nodes += [node("Cast", ["s"], "sf", to=TensorProto.FLOAT), node("Add", ["y", "sf"], "z")]
    out = "z" if use_shape_at_run_time else "y"
    g = onnx_helper.make_graph(
        nodes, "chain",
        [onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 8])],
        [onnx_helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    return model


def test_shape_gather_concat_reshape_chain_folds_symbolically():
    model = _chain_model()
    g = graph.from_onnx(model)
    assert g.outputs[0].type_str() == "float32[b, s * 2, 4]"
    assert g.op_counts() == {"relu": 1, "reshape": 1}  # the chain left no node
    gm = graph.build(g)
    sess = _ort(model)
    for b, s in [(1, 3), (4, 5)]:
        x = np.random.default_rng(s).standard_normal((b, s, 8)).astype("float32")
        np.testing.assert_array_equal(gm.run(x=x)["y"], sess.run(None, {"x": x})[0])


def test_symbolic_shape_read_at_run_time_is_computed_at_run_time():
    """A size used as data (cast to float and added): the shape value is computed by a kernel
    from the sizes the model runs at, one build for every size."""
    model = _chain_model(use_shape_at_run_time=True)
    g = graph.from_onnx(model)
    assert "shape_values" in g.op_counts()
    gm = graph.build(g)
    sess = _ort(model)
    for b, s in [(1, 3), (4, 5), (2, 11)]:
        x = np.random.default_rng(s).standard_normal((b, s, 8)).astype("float32")
        np.testing.assert_array_equal(gm.run(x=x)["z"], sess.run(None, {"x": x})[0])
    # with the sizes given the same model folds the shape into a constant
    fixed = graph.from_onnx(model, shapes={"x": (2, 3, 8)})
    assert fixed.outputs[0].shape == (2, 6, 4) and "shape_values" not in fixed.op_counts()


def test_shape_values_from_the_builder_and_their_refusal():
    gb = graph.Builder("run_time_shape", fold=True)
    shape = np.empty(2, dtype=object)
    b = S.shape_var("b")
    shape[:] = [b * 3 + 1, 4]
    x = gb.input("x", (b, 2), "int64")
    y = gb.add(x, gb.const(shape))
    gm = graph.build(gb.build([y]))
    for n in (1, 5):
        xs = np.arange(2 * n, dtype=np.int64).reshape(n, 2)
        np.testing.assert_array_equal(gm.run(x=xs)[y.name], xs + [3 * n + 1, 4])
    # a variable no input has as a dimension of its own, nor on an axis linear in it alone
    # (2 * c would do: the kernel solves c from it)
    gb = graph.Builder("no_carrier", fold=True)
    only = np.empty(1, dtype=object)
    only[:] = [S.shape_var("c")]
    x = gb.input("x", (S.dim(S.shape_var("c") * S.shape_var("c")),), "int64")
    with pytest.raises(GraphError, match="reads a value computed from symbolic dimension c, "
                                         "which no graph input has as a dimension of its own"):
        gb.add(x, gb.const(only))


def test_fold_symbolic_refuses_what_depends_on_sizes():
    shape = np.empty(2, dtype=object)
    shape[:] = [S.shape_var("b"), 4]
    got = S.fold_symbolic("multiply", [shape, np.array([2, 2], np.int64)], {}, "n")[0]
    assert list(got) == [S.dim(BATCH * 0 + S.shape_var("b") * 2), 8]
    # b may be 4 at run time: the comparison is left to run time (it was folded to False)
    with pytest.raises(GraphError, match=r"cannot compare b and 4"):
        S.fold_symbolic("equal", [shape, np.array([4, 4], np.int64)], {}, "n")
    # a size is never 0 or -1 (torch's Where(Equal(shape, -1), ...) of Expand folds)
    eq = S.fold_symbolic("equal", [shape, np.array([-1, 4], np.int64)], {}, "n")[0]
    assert eq.tolist() == [False, True]
    eq = S.fold_symbolic("not_equal", [shape, np.array([0, 4], np.int64)], {}, "n")[0]
    assert eq.tolist() == [True, False]
    # integer Div rounds towards zero: 1 - b is negative, its rounding is left to run time
    with pytest.raises(GraphError, match=r"cannot divide"):
        S.fold_symbolic("divide", [1 - shape[:1].astype(object), np.array([2])], {}, "n")
    got = S.fold_symbolic("divide", [np.array([-7], np.int64).astype(object), np.array([2])],
                          {}, "n")[0]
    assert got.tolist() == [-3]
    # max and min of sizes are dimensions (dynamo's max(0, 2048 - seq)), exact at every size
    got = S.fold_symbolic("maximum", [shape, np.array([3, 3], np.int64)], {}, "n")[0]
    assert [str(d) for d in got] == ["max(b, 3)", "4"]
    with pytest.raises(GraphError, match="cannot compute exp of a shape"):
        S.fold_symbolic("exp", [shape], {}, "n")


def test_specialised_variants_are_dispatched_by_size(tmp_path):
    g = _model()
    gm = graph.build(g, specialize={"seq": [4]})
    assert gm.variants == [{"seq": 4}]
    (_, variant), = gm._variants
    assert variant.shape_vars == ("batch",)  # batch stays symbolic in the seq=4 build
    loaded = runtime.load(gm.save(tmp_path / "v.tlpkg"))
    assert loaded.variants == [{"seq": 4}]
    names = [v.name for v in g.outputs]
    for b, s in [(2, 4), (3, 5), (1, 4)]:
        x, y = _inputs(b, s, seed=s)
        assert (gm._variant_for({"batch": b, "seq": s}) is not None) == (s == 4)
        for m in (gm, loaded):
            got = m.run(x=x, y=y)
            for name, want in zip(names, _reference(x, y)):
                np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-6)
    # a variant added after runs at its sizes takes the next run of that shape (the module
    # remembers the last run's shape and its buffers: that memory is dropped)
    plain = graph.build(g)
    x, y = _inputs(2, 6, seed=6)
    plain.run(x=x, y=y)
    ran = []
    fixed = graph.build(g, specialize={"seq": [6]})._variants[0][1]
    fixed_run = fixed._run_private
    fixed._run_private = lambda mode, values: ran.append(mode) or fixed_run(mode, values)
    plain.add_variant({"seq": 6}, fixed)
    got = plain.run(x=x, y=y)
    assert ran == ["graph"]
    for name, want in zip(names, _reference(x, y)):
        np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-6)
    with pytest.raises(GraphError, match=r"specialize names \['len'\], which are not shape "
                                         r"variables of the graph"):
        graph.build(g, specialize={"len": [4]})
    with pytest.raises(GraphError, match=r"specialize\['seq'\] must be sizes"):
        graph.build(g, specialize={"seq": [-1]})


def test_tasks_of_a_symbolic_graph_are_extracted_at_given_sizes():
    from tensorlang.graph import model_zoo
    from tensorlang.graph.specialize import specialise

    g = graph.from_onnx(model_zoo.mlp(batch="batch"))
    with pytest.raises(GraphError, match=r"has shape variables \['batch'\]: tune it at "
                                         r"representative sizes.*giving batch"):
        graph.extract_tasks(g)
    # the tasks are those of the graph specialised to the sizes, so a log tuned from them names
    # the kernels of graph.build(g, specialize=...)'s variant at those sizes
    fixed = specialise(g, {"batch": 8})
    assert fixed.inputs[0].shape == (8, 64)
    tasks = graph.extract_tasks(g, sizes={"batch": 8})
    assert len(tasks) == 3
    assert sorted(t.args for t in tasks) == sorted(t.args for t in graph.extract_tasks(fixed))


def test_cnn_with_a_dynamic_batch_matches_onnxruntime():
    """conv/bn/relu, pooling, a residual add, global pool, Flatten, Gemm, Softmax over a
    symbolic batch, with every optimization: the convs run blocked (NCHW16c), so the
    layout_transform back to NCHW takes the symbolic batch too."""
    from tensorlang.graph import model_zoo

    model = model_zoo.small_cnn(batch="batch")
    g = graph.from_onnx(model)
    assert g.inputs[0].type_str() == "float32[batch, 3, 16, 16]"
    gm = graph.build(g)
    kernels = list(gm.plan["kernels"].values())
    assert any("conv" in k["ops"] and k["layout"] == "NCHW16c" for k in kernels)
    assert any(k["ops"] == ["layout_transform"] for k in kernels)
    sess = _ort(model)
    out = model.graph.output[0].name
    for b in (1, 3, 8):
        x = np.random.default_rng(b).standard_normal((b, 3, 16, 16)).astype("float32")
        np.testing.assert_allclose(gm.run(x=x)[out], sess.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-5)


def test_runs_at_different_sizes_from_several_threads(built):
    import threading

    g, gm = built
    names = [v.name for v in g.outputs]
    errors: list = []

    def worker(b, s):
        try:
            for k in range(6):
                x, y = _inputs(b, s + k % 2, seed=b * 10 + k)
                got = gm.run(x=x, y=y)
                for name, want in zip(names, _reference(x, y)):
                    np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-6)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(b, s)) for b, s in [(1, 3), (2, 9), (5, 3)]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_sizes_a_model_cannot_take_are_refused():
    """An axis that is an expression of a variable: solved from the input, checked, and a size
    no integer value gives is refused naming the expression."""
    n = S.shape_var("n")
    gb = graph.Builder("pairs")
    x = gb.input("x", (n * 2, 3))
    y = gb.input("y", (n + 1, 3))
    g = gb.build([gb.relu(x), gb.sigmoid(y)])
    gm = graph.build(g)
    got = gm.run(x=np.ones((6, 3), "float32"), y=np.zeros((4, 3), "float32"))
    assert got[g.outputs[0].name].shape == (6, 3) and got[g.outputs[1].name].shape == (4, 3)
    with pytest.raises(InputError, match=r"input 'x' axis 0 must be n \* 2 for some integer n, "
                                         r"got 5"):
        gm.run(x=np.ones((5, 3), "float32"), y=np.zeros((3, 3), "float32"))
    with pytest.raises(InputError, match=r"input 'y' axis 0 must be n \+ 1 = 4 with n = 3 "
                                         r"\(from input 'x' axis 0 \(n \* 2\)\), got 5"):
        gm.run(x=np.ones((6, 3), "float32"), y=np.zeros((5, 3), "float32"))
    gb = graph.Builder("single")
    one = graph.build(gb.build([gb.relu(gb.input("y", (n + 1, 3)))]))
    with pytest.raises(InputError, match=r"input 'y' axis 0 must be n \+ 1, got 0: that needs "
                                         r"n = -1 < 0"):
        one.run(y=np.zeros((0, 3), "float32"))


def test_cli_compiles_once_and_runs_at_any_size(tmp_path):
    import subprocess
    import sys

    import onnx
    from onnx import TensorProto

    x = onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])
    y = onnx_helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = onnx_helper.make_model(onnx_helper.make_graph(
        [onnx_helper.make_node("Relu", ["x"], ["y"])], "m", [x], [y]),
        opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "m.onnx")

    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "tensorlang.cli", *argv],
                              capture_output=True, text=True, timeout=300, check=False)

    pkg = str(tmp_path / "m.tlpkg")
    proc = cli("compile", str(tmp_path / "m.onnx"), "-o", pkg)
    assert proc.returncode == 0, proc.stderr
    for n in (3, 7):
        np.save(tmp_path / f"x{n}.npy", -np.ones((n, 2), np.float32))
        proc = cli("run", pkg, "--input", f"x={tmp_path / f'x{n}.npy'}")
        assert proc.returncode == 0 and f"y: float32[{n}, 2] mean=0" in proc.stdout, proc.stderr
    np.save(tmp_path / "bad.npy", np.ones((3, 5), np.float32))
    proc = cli("run", pkg, "--input", f"x={tmp_path / 'bad.npy'}")
    assert proc.returncode != 0 and r"input 'x' must have shape [n, 2]" in proc.stderr
    assert "Traceback" not in proc.stderr


def _expand_model(constant_of_shape: bool = False):
    """x [b, 1, 4] expanded to the shape of y [b, s, 4] (Shape -> Expand), added to y; or a
    ConstantOfShape of that shape (2.5 everywhere) added to y."""
    from onnx import TensorProto

    nodes = [onnx_helper.make_node("Shape", ["y"], ["shp"])]
    if constant_of_shape:
        value = onnx_helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])
        nodes += [onnx_helper.make_node("ConstantOfShape", ["shp"], ["e"], value=value),
                  onnx_helper.make_node("Add", ["e", "y"], ["z"])]
    else:
        nodes += [onnx_helper.make_node("Expand", ["x", "shp"], ["e"]),
                  onnx_helper.make_node("Add", ["e", "y"], ["z"])]
    g = onnx_helper.make_graph(
        nodes, "expand",
        [onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1, 4]),
         onnx_helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", 4])],
        [onnx_helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("constant_of_shape", [False, True])
def test_expand_and_constant_of_shape_to_a_symbolic_shape(constant_of_shape):
    model = _expand_model(constant_of_shape)
    g = graph.from_onnx(model)
    assert g.outputs[0].type_str() == "float32[b, s, 4]"
    gm = graph.build(g)
    sess = _ort(model)
    for b, s in [(1, 3), (2, 5)]:
        rng = np.random.default_rng(s)
        feeds = {"x": rng.standard_normal((b, 1, 4)).astype("float32"),
                 "y": rng.standard_normal((b, s, 4)).astype("float32")}
        np.testing.assert_allclose(gm.run(**feeds)["z"], sess.run(None, feeds)[0], rtol=1e-6)


def _range_model(start: int, delta: int, dtype):
    """Position ids up to the sequence length, as exports compute them: Range(start,
    Shape(x)[1], delta), cast to float: one output, and x plus the ids (when as long as a row)."""
    from onnx import TensorProto, numpy_helper

    ty = {np.int64: TensorProto.INT64, np.int32: TensorProto.INT32}[dtype]
    consts = [numpy_helper.from_array(np.array(v, dtype), n)
              for n, v in (("start", start), ("delta", delta))]
    nodes = [onnx_helper.make_node("Shape", ["x"], ["shp"]),
             onnx_helper.make_node("Gather", ["shp", "one"], ["seq"], axis=0),
             onnx_helper.make_node("Cast", ["seq"], ["limit"], to=ty),
             onnx_helper.make_node("Range", ["start", "limit", "delta"], ["ids"]),
             onnx_helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT)]
    outs = [onnx_helper.make_tensor_value_info("f", TensorProto.FLOAT, None)]
    if start == 0 and delta == 1:
        nodes.append(onnx_helper.make_node("Add", ["x", "f"], ["y"]))
        outs.append(onnx_helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    g = onnx_helper.make_graph(
        nodes, "range", [onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])],
        outs, initializer=consts + [numpy_helper.from_array(np.array(1, np.int64), "one")])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("start,delta,dtype", [(0, 1, np.int64), (3, 2, np.int32)])
def test_range_up_to_a_symbolic_length(start, delta, dtype):
    """Range(0, seq, 1) is seq long and Range(3, seq, 2) max(0, (seq - 2) // 2): each matches
    onnxruntime at every length, a limit at or below the start giving an empty tensor (was a
    run-time error)."""
    model = _range_model(start, delta, dtype)
    gm = graph.build(graph.from_onnx(model))
    sess = _ort(model)
    for b, s in [(1, 1), (1, start + 1), (2, 4), (2, 7), (3, 64)]:
        x = np.random.default_rng(s).standard_normal((b, s)).astype("float32")
        got, want = gm.run(x=x), sess.run(None, {"x": x})
        assert got["f"].shape == want[0].shape == (len(range(start, s, delta)),)
        for g, w in zip(got.values(), want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def _past_range_model(delta: int = 1):
    """Position ids after a cache, as generation exports compute them: Range(past_len,
    past_len + seq, delta) with past_len and seq the sizes of two inputs, cast to float and
    added to x [b, seq]."""
    from onnx import TensorProto, numpy_helper

    nodes = [onnx_helper.make_node("Shape", ["past"], ["ps"]),
             onnx_helper.make_node("Gather", ["ps", "one"], ["p"], axis=0),
             onnx_helper.make_node("Shape", ["x"], ["xs"]),
             onnx_helper.make_node("Gather", ["xs", "one"], ["s"], axis=0),
             onnx_helper.make_node("Add", ["p", "s"], ["end"]),
             onnx_helper.make_node("Range", ["p", "end", "delta"], ["ids"]),
             onnx_helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
             onnx_helper.make_node("Add", ["x", "f"], ["y"])]
    g = onnx_helper.make_graph(
        nodes, "past_range",
        [onnx_helper.make_tensor_value_info("past", TensorProto.FLOAT, ["b", "p", 4]),
         onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])],
        [onnx_helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array(1, np.int64), "one"),
                     numpy_helper.from_array(np.array(delta, np.int64), "delta")])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    return model


def test_range_from_a_symbolic_start_vs_onnxruntime():
    """Range(past_len, past_len + seq): seq long, its start computed at run time from the
    cache's size; one build for every past and sequence length."""
    model = _past_range_model()
    g = graph.from_onnx(model)
    assert "shape_values" in g.op_counts()
    gm = graph.build(g)
    sess = _ort(model)
    for b, p, s in [(1, 1, 1), (2, 7, 3), (1, 30, 1), (3, 2, 9)]:
        rng = np.random.default_rng(p * 10 + s)
        feeds = {"past": rng.standard_normal((b, p, 4)).astype("float32"),
                 "x": rng.standard_normal((b, s)).astype("float32")}
        np.testing.assert_array_equal(gm.run(**feeds)["y"], sess.run(None, feeds)[0])


def test_range_refuses_what_it_cannot_size():
    from onnx import TensorProto, numpy_helper

    nodes = [onnx_helper.make_node("Shape", ["x"], ["shp"]),
             onnx_helper.make_node("Gather", ["shp", "zero"], ["s"], axis=0),
             onnx_helper.make_node("Range", ["zero", "s", "s"], ["y"])]
    g = onnx_helper.make_graph(
        nodes, "range", [onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b"])],
        [onnx_helper.make_tensor_value_info("y", TensorProto.INT64, None)],
        initializer=[numpy_helper.from_array(np.array(0, np.int64), "zero")])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 13)])
    with pytest.raises(graph.OnnxImportError, match=r"Range's delta depends on symbolic "
                                                    r"dimensions \(b\)"):
        graph.from_onnx(model)
    with pytest.raises(graph.OnnxImportError, match=r"'Range_\d+' \(Range, opset 13\): delta 0 "
                                                    r"makes an endless range"):
        graph.from_onnx(_range_model(0, 0, np.int64))


def test_a_converter_that_cannot_take_symbolic_dims_says_so():
    """Split of a symbolic axis into equal parts is not supported: the error names the node,
    the inputs' symbolic shapes and the way out."""
    from onnx import TensorProto

    g = onnx_helper.make_graph(
        [onnx_helper.make_node("Split", ["x"], ["y1", "y2"], axis=0, num_outputs=2)], "split",
        [onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
        [onnx_helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y1", "y2")])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 18)])
    model.ir_version = 9
    with pytest.raises(graph.OnnxImportError, match=r"node 'Split_0' \(Split, opset 18\): .*its "
                                                    r"inputs have symbolic dimensions, x: "
                                                    r"float32\[b, 4\].*shapes="):
        graph.from_onnx(model)
    assert graph.from_onnx(model, shapes={"x": (6, 4)}).outputs[0].shape == (3, 4)


def test_build_with_a_tuning_log(tmp_path):
    """A symbolic graph built with a tuning log (was a TypeError from json): its tunable
    kernels without a record are reported untuned and use the default schedules."""
    from tensorlang.graph import model_zoo

    log = tmp_path / "empty.jsonl"
    log.write_text("")
    g = graph.from_onnx(model_zoo.mlp(batch="batch"))
    with pytest.warns(UserWarning, match="3 tunable kernels have no record"):
        gm = graph.build(g, tuning_log=str(log))
    x = np.ones((3, 64), "float32")
    assert gm.run(x=x)[gm.output_names[0]].shape == (3, 10)


@pytest.mark.slow  # a tuning run (measurements in subprocesses): ~12 s on the loaded machine
def test_records_tuned_at_one_size_apply_to_the_symbolic_kernel(tmp_path):
    """Tuned at batch 8 (extract_tasks(sizes=)), the symbolic build replays the record on its
    kernel with a symbolic batch (fused groups' member types unified too), at every size."""
    from tensorlang.graph import model_zoo

    from tensorlang import autotune

    model = model_zoo.mlp(batch="batch")
    g = graph.from_onnx(model)
    tasks = graph.extract_tasks(g, sizes={"batch": 8})
    log = str(tmp_path / "mlp.jsonl")
    autotune.tune_tasks(tasks[:1], n_trial=1, log_file=log)
    gm = graph.build(g, tuning_log=log)
    tuned = [k for k in gm.build_report.kernels if k.tuned]
    assert len(tuned) == 1 and tuned[0].schedule == "tuned"
    assert gm.kernels[tuned[0].name].vars == ("batch",)
    sess = _ort(model)
    for b in (1, 8, 13):
        x = np.random.default_rng(b).standard_normal((b, 64)).astype("float32")
        np.testing.assert_allclose(gm.run(x=x)[model.graph.output[0].name],
                                   sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_sizes_matching_unifies_symbolic_and_concrete_workloads():
    from tensorlang.graph.tuning import sizes_matching

    sym = ('{"units": 4}', '[[["b", 8], "float32"]]', '[[["b", 4], "float32"]]')
    assert sizes_matching(sym, ('{"units": 4}', '[[[3, 8], "float32"]]',
                                '[[[3, 4], "float32"]]')) == 36
    # the same variable at two sizes, another attribute, another dtype: no match
    assert sizes_matching(sym, ('{"units": 4}', '[[[3, 8], "float32"]]',
                                '[[[2, 4], "float32"]]')) is None
    assert sizes_matching(sym, ('{"units": 5}', '[[[3, 8], "float32"]]',
                                '[[[3, 4], "float32"]]')) is None
    assert sizes_matching(sym, ('{"units": 4}', '[[[3, 8], "float16"]]',
                                '[[[3, 4], "float32"]]')) is None
    # an expression checked against the sizes its variables take elsewhere
    expr = ('{}', '[[["b", "b * 2"], "float32"]]', '[[["b"], "float32"]]')
    assert sizes_matching(expr, ('{}', '[[[3, 6], "float32"]]', '[[[3], "float32"]]')) == 21
    assert sizes_matching(expr, ('{}', '[[[3, 5], "float32"]]', '[[[3], "float32"]]')) is None


def test_sizes_matching_solves_variables_found_only_inside_products():
    """A transformer's dense over batch * seq rows (docs/dynamic_shapes.md's BERT): tuned at
    batch 8, seq 128 (1024 rows), its symbolic kernel replays the record (it found none: no
    axis was a variable alone). Sizes that no assignment gives still do not match."""
    from tensorlang.graph.tuning import sizes_matching

    rows = ('{"units": 16}', '[[["batch * seq", 16], "float32"]]',
            '[[["batch * seq", 16], "float32"]]')
    at = lambda i, o: ('{"units": 16}', f'[[[{i}, 16], "float32"]]', f'[[[{o}, 16], "float32"]]')
    assert sizes_matching(rows, at(1024, 1024)) == 2 * 1024 * 16
    assert sizes_matching(rows, at(1024, 1000)) is None
    # one variable read from its own axis, the other solved from the product
    mixed = ('{}', '[[["b", "b * s"], "float32"]]', '[[["s * 2"], "float32"]]')
    assert sizes_matching(mixed, ('{}', '[[[8, 1024], "float32"]]', '[[[256], "float32"]]')) \
        == 8 * 1024 + 256
    assert sizes_matching(mixed, ('{}', '[[[8, 1024], "float32"]]',
                                  '[[[250], "float32"]]')) is None
    # no integer sizes make 2 * b * s odd
    even = ('{}', '[[["b * s * 2"], "float32"]]', '[[[1], "float32"]]')
    assert sizes_matching(even, ('{}', '[[[7], "float32"]]', '[[[1], "float32"]]')) is None
    assert sizes_matching(even, ('{}', '[[[8], "float32"]]', '[[[1], "float32"]]')) == 9


def test_run_time_if_with_a_symbolic_batch():
    """A model with an If on a run-time condition (tests/graph/test_control_flow.py's gate:
    before / then / else / after pieces) and a dim_param batch, its branches' outputs too: one
    build, both branches at three batch sizes vs onnxruntime."""
    from test_control_flow import _gate_model

    m = _gate_model()
    for vi in [*m.graph.input, *m.graph.output,
               *[o for n in m.graph.node for a in n.attribute if a.HasField("g")
                 for o in a.g.output]]:
        vi.type.tensor_type.shape.dim[0].dim_param = "b"
    gm = graph.build(graph.from_onnx(m))
    sess = _ort(m)
    for b in (1, 2, 5):
        x = np.random.default_rng(b).standard_normal((b, 8)).astype("float32")
        for feed in (np.abs(x), -np.abs(x)):  # both branches
            np.testing.assert_allclose(gm.run(x=feed)["out"], sess.run(None, {"x": feed})[0],
                                       rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match=r"input 'x' must have shape \[b, 8\]"):
        gm.run(x=np.zeros((2, 7), "float32"))


def test_positions_that_depend_on_symbolic_sizes():
    """OPT's position ids (a Slice from the past length on) and T5's mask (a Pad to the total
    length) as torch's exporters write them with dynamic axes: a slice start or a pad width
    that is an expression of the shape variables (was refused: the pad now an index condition
    in the kernel, the slice a gather of positions computed at run time)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["p"], ["ps"], start=2, end=3),
             helper.make_node("Slice", ["x", "ps", "big", "one"], ["y"], name="pos"),
             helper.make_node("Concat", ["zeros", "ps"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["z"], name="pad")]
    inits = [helper.make_tensor("big", TensorProto.INT64, [1], [2**62]),
             helper.make_tensor("one", TensorProto.INT64, [1], [1]),
             helper.make_tensor("zeros", TensorProto.INT64, [3], [0, 0, 0])]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t"]),
                     helper.make_tensor_value_info("p", TensorProto.FLOAT, ["b", 2, "p", 4])],
        [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("z")],
        inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    gm = graph.build(graph.from_onnx(m))
    for p in (1, 3, 6):
        got = gm.run(x=x, p=np.zeros((2, 2, p, 4), np.float32))
        np.testing.assert_array_equal(got["y"], x[:, p:])
        np.testing.assert_array_equal(got["z"], np.pad(x, [(0, 0), (0, p)]))


@pytest.mark.parametrize("case", ["equal_one", "negative_div"])
def test_size_dependent_comparisons_and_divisions_are_computed_at_run_time(case):
    """Equal(Shape(x), 1) was folded to False (a variable was assumed never equal to a
    number) and the integer Div of a negative size expression rounded down (ONNX rounds
    towards zero): both gave wrong answers at some sizes; they are now computed at run
    time."""
    from onnx import TensorProto, helper

    one, two, ten = (helper.make_tensor(n, TensorProto.INT64, [1], [v])
                     for n, v in (("one", 1), ("two", 2), ("ten", 10)))
    if case == "equal_one":
        nodes = [helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Equal", ["s", "one"], ["e"]),
                 helper.make_node("Where", ["e", "ten", "s"], ["y"])]
    else:
        nodes = [helper.make_node("Shape", ["x"], ["s"]),
                 helper.make_node("Sub", ["one", "s"], ["d"]),
                 helper.make_node("Div", ["d", "two"], ["y"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])],
                          [helper.make_empty_tensor_value_info("y")], [one, two, ten])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    gm = graph.build(graph.from_onnx(m))
    sess = _ort(m)
    for a, b in [(1, 1), (1, 4), (2, 2), (4, 7)]:
        x = np.zeros((a, b), np.float32)
        np.testing.assert_array_equal(gm.run(x=x)["y"], sess.run(None, {"x": x})[0])


def test_gather_nd_over_symbolic_extents_vs_onnxruntime():
    """GatherND of data [b, s, 4] by indices [b, k, 1] (batch_dims 1; negative ones count
    from the end), the way dynamo exports index an attention mask: one build, every size."""
    from onnx import TensorProto

    node = onnx_helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)
    g = onnx_helper.make_graph(
        [node], "gnd",
        [onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 4]),
         onnx_helper.make_tensor_value_info("i", TensorProto.INT64, ["b", "k", 1])],
        [onnx_helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    gm = graph.build(graph.from_onnx(model))
    sess = _ort(model)
    for b, s, k in [(1, 1, 1), (2, 5, 3), (3, 9, 7)]:
        rng = np.random.default_rng(b * s * k)
        feeds = {"x": rng.standard_normal((b, s, 4)).astype("float32"),
                 "i": rng.integers(-s, s, (b, k, 1)).astype(np.int64)}
        np.testing.assert_array_equal(gm.run(**feeds)["y"], sess.run(None, feeds)[0])


def _slice_model(start, end, step=1):
    """ids = buffer[:, start:end:step] of a constant [1, 10] buffer, with start and end written
    as ONNX computes them from x's sequence length s (Shape -> Gather), added to x [1, s]."""
    from onnx import TensorProto, numpy_helper

    def bound(name, spec):
        if spec == "s":
            return [onnx_helper.make_node("Unsqueeze", ["s", "ax0"], [name])]
        if spec == "-s":
            return [onnx_helper.make_node("Neg", ["s"], [f"{name}_n"]),
                    onnx_helper.make_node("Unsqueeze", [f"{name}_n", "ax0"], [name])]
        return [onnx_helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
            np.array([spec], np.int64)))]

    nodes = [onnx_helper.make_node("Shape", ["x"], ["shp"]),
             onnx_helper.make_node("Gather", ["shp", "one"], ["s"], axis=0),
             *bound("st", start), *bound("en", end),
             onnx_helper.make_node("Slice", ["buf", "st", "en", "axis", "step"], ["ids"]),
             onnx_helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
             onnx_helper.make_node("Add", ["x", "f"], ["y"])]
    inits = {"buf": np.arange(100, 110, dtype=np.int64).reshape(1, 10),
             "one": np.array(1, np.int64), "ax0": np.array([0], np.int64),
             "axis": np.array([1], np.int64), "step": np.array([step], np.int64)}
    g = onnx_helper.make_graph(
        nodes, "slice_s", [onnx_helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "s"])],
        [onnx_helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = onnx_helper.make_model(g, opset_imports=[onnx_helper.make_opsetid("", 13)])
    model.ir_version = 9
    return model


def test_slice_up_to_a_symbolic_position_vs_onnxruntime():
    """buffer[:, :s] (BERT's position ids) is gathered at run time: one build, every length up
    to the buffer's; a longer one is refused by the gather (onnxruntime clamps the slice, and
    the Add then fails to broadcast)."""
    model = _slice_model(0, "s")
    gm = graph.build(graph.from_onnx(model))
    sess = _ort(model)
    for s in (1, 4, 10):
        x = np.random.default_rng(s).standard_normal((1, s)).astype("float32")
        np.testing.assert_array_equal(gm.run(x=x)["y"], sess.run(None, {"x": x})[0])
    with pytest.raises(runtime.KernelError, match="index out of bounds"):
        gm.run(x=np.zeros((1, 11), "float32"))
