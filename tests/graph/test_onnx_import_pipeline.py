"""The import pipeline: nodes fold as they are imported (with the graph op's reference, or
onnx's reference evaluator for operators tensorlang lacks), then one error lists every node left
unsupported; inputs that need a shape say which dimension; Dropout's mask in inference."""

import numpy as np
import pytest
from graph_testing import assert_close, ort_run
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tensorlang import graph

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, opset=13, inits=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _check_vs_ort(m, feeds, **kw):
    gm = graph.build(graph.from_onnx(m, **kw))
    got, ref = gm.run(**feeds), ort_run(m, feeds)
    assert list(got) == list(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype, k
        assert_close(got[k], ref[k])
    return gm


def test_constant_mod_and_det_fold_before_the_support_check():
    """Mod and Det of constants: folded by onnx's reference evaluator, whatever the registry
    has; the model builds and matches onnxruntime."""
    a = numpy_helper.from_array(np.array([7.5, -3.0, 5.0, 9.0], np.float32), "a")
    d = numpy_helper.from_array(np.array([2.0, 2.0, -4.0, 4.0], np.float32), "d")
    mat = numpy_helper.from_array(np.array([[2.0, 1.0], [1.0, 3.0]], np.float32), "mat")
    nodes = [helper.make_node("Mod", ["a", "d"], ["r"], fmod=1, name="mod"),
             helper.make_node("Det", ["mat"], ["det"], name="det"),
             helper.make_node("Mul", ["r", "det"], ["rd"]),
             helper.make_node("Add", ["x", "rd"], ["y"])]
    m = _model(nodes, [_vi("x", [4])], [_vi("y", [4])], inits=[a, d, mat])
    g = graph.from_onnx(m)
    assert g.op_counts() == {"add": 1}
    _check_vs_ort(m, {"x": np.arange(4, dtype=np.float32)})


def test_nonzero_of_a_constant_gives_static_shapes():
    c = numpy_helper.from_array(np.array([0, 3, 0, 5, 6], np.int64), "c")
    nodes = [helper.make_node("NonZero", ["c"], ["nz"]),
             helper.make_node("Shape", ["nz"], ["s"]),
             helper.make_node("Cast", ["s"], ["sf"], to=F),
             helper.make_node("ReduceSum", ["sf"], ["n"], keepdims=1),
             helper.make_node("Mul", ["x", "n"], ["y"])]
    m = _model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3])], inits=[c])
    _check_vs_ort(m, {"x": np.ones((2, 3), np.float32)})


def test_what_is_left_after_folding_is_listed_in_one_error():
    """Run-time NonZero and Det, a Det downstream of them, an unsupported op inside the branch
    of an If that is not imported, a non-default domain: all listed, each with node and
    opset; the foldable Mod is not."""
    a = numpy_helper.from_array(np.array([5.0], np.float32), "a")
    branch = helper.make_graph([helper.make_node("Det", ["x"], ["bd"], name="in_branch")],
                               "then", [], [_vi("bd", [])])
    nodes = [helper.make_node("Mod", ["a", "a"], ["r"], fmod=1, name="const_mod"),
             helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
             helper.make_node("Cast", ["nz"], ["nzf"], to=F, name="cast"),
             helper.make_node("Det", ["nzf"], ["d2"], name="det_after"),
             helper.make_node("Greater", ["d2", "r"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch,
                              name="if"),
             helper.make_node("Frobnicate", ["x"], ["z"], domain="org.example", name="ms")]
    m = helper.make_model(
        helper.make_graph(nodes, "m", [_vi("x", [2, 2])], [_vi("y", []), _vi("z", [2, 2])],
                          initializer=[a]),
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("org.example", 1)])
    with pytest.raises(graph.UnsupportedOperatorError) as e:
        graph.from_onnx(m)
    assert e.value.unsupported == [("NonZero", "nz", 13), ("Det", "det_after", 13),
                                   ("Det", "in_branch", 13), ("org.example::Frobnicate", "ms", 13)]
    msg = str(e.value)
    assert "4 node(s) use operators tensorlang does not support" in msg
    assert ("NonZero (node 'nz', opset 13): reads values computed at run time (from input(s) "
            "['x'])") in msg
    assert "Det (node 'det_after', opset 13): downstream of another unsupported node" in msg
    assert "Det (node 'in_branch', opset 13)" in msg


def test_a_symbolic_dimension_is_a_shape_variable_or_given():
    # issue 19: dim_params are shape variables (tests/graph/test_dynamic_shapes.py runs such
    # models); shapes= still fixes them
    x = helper.make_tensor_value_info("x", F, ["N", 3, "T"])
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y", None)])
    assert graph.from_onnx(m).inputs[0].type_str() == "float32[N, 3, T]"
    gm = graph.build(graph.from_onnx(m, shapes={"x": (2, 3, 5)}))
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(gm.run(x=x)["y"], np.maximum(x, 0))


def test_a_shape_computed_from_input_values_names_the_input():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")]
    m = _model(nodes, [_vi("x", [6]), _vi("s", [2], TensorProto.INT64)], [_vi("y", None)])
    with pytest.raises(graph.OnnxImportError,
                       match=r"node 'rs' \(Reshape, opset 13\): the target shape of Reshape "
                             r"must be known at compile time.*from the values of graph "
                             r"input\(s\) \['s'\]"):
        graph.from_onnx(m)


@pytest.mark.parametrize("opset", [7, 9, 10, 12, 13])
@pytest.mark.parametrize("read_mask", [False, True])
def test_dropout_mask_in_inference(opset, read_mask):
    outs = ["y", "mask"] if read_mask else ["y"]
    nodes = [helper.make_node("Dropout", ["x"], outs, **({"ratio": 0.3} if opset < 12 else {})),
             helper.make_node("Relu", ["y"], ["r"])]
    mask_t = F if opset < 10 else TensorProto.BOOL
    outputs = [_vi("r", [3, 4])] + ([_vi("mask", [3, 4], mask_t)] if read_mask else [])
    m = _model(nodes, [_vi("x", [3, 4])], outputs, opset=opset)
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    got = graph.build(graph.from_onnx(m)).run(x=x)
    assert_close(got["r"], ort_run(m, {"x": x})["r"])
    if read_mask:
        # the ONNX spec (and onnx's reference evaluator): in inference nothing is dropped, the
        # mask is all true. onnxruntime fills it with zeros for opsets 7-11 (its Dropout kernel
        # for those opsets writes 0/false) and ones from 12: the spec is followed here
        ref = ReferenceEvaluator(m).run(None, {"x": x})[list(got).index("mask")]
        assert got["mask"].dtype == (np.float32 if opset < 10 else np.bool_)
        np.testing.assert_array_equal(got["mask"], np.ones((3, 4), got["mask"].dtype))
        np.testing.assert_array_equal(got["mask"], ref.astype(got["mask"].dtype))


def test_dropout_in_training_mode_is_refused():
    ratio = numpy_helper.from_array(np.array(0.5, np.float32), "ratio")
    train = numpy_helper.from_array(np.array(True), "train")
    m = _model([helper.make_node("Dropout", ["x", "ratio", "train"], ["y"], name="drop")],
               [_vi("x", [3])], [_vi("y", [3])], inits=[ratio, train])
    with pytest.raises(graph.OnnxImportError,
                       match=r"node 'drop' \(Dropout, opset 13\): training mode"):
        graph.from_onnx(m)


def test_batch_norm_spatial_0_is_refused():
    inits = [numpy_helper.from_array(np.ones((3, 2), np.float32), n)
             for n in ("s", "b", "m", "v")]
    m = _model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                 spatial=0, name="bn")],
               [_vi("x", [1, 3, 2])], [_vi("y", [1, 3, 2])], opset=7, inits=inits)
    with pytest.raises(graph.OnnxImportError,
                       match=r"node 'bn' \(BatchNormalization, opset 7\): spatial=0"):
        graph.from_onnx(m)


def test_refused_nodes_are_listed_with_the_unsupported_ones():
    """A supported operator the importer refuses (training-mode Dropout, a Reshape to a shape
    computed at run time) does not hide the rest: one error lists them with the unsupported
    operators."""
    ratio = numpy_helper.from_array(np.array(0.5, np.float32), "ratio")
    train = numpy_helper.from_array(np.array(True), "train")
    nodes = [helper.make_node("Dropout", ["x", "ratio", "train"], ["d"], name="drop"),
             helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
             helper.make_node("Reshape", ["x", "s"], ["r"], name="rs"),
             helper.make_node("Relu", ["r"], ["y"])]
    m = _model(nodes, [_vi("x", [6]), _vi("s", [2], TensorProto.INT64)],
               [_vi("d", [6]), _vi("nz", None), _vi("y", None)], inits=[ratio, train])
    with pytest.raises(graph.UnsupportedOperatorError) as e:
        graph.from_onnx(m)
    assert e.value.unsupported == [("NonZero", "nz", 13)]
    assert [r[:3] for r in e.value.refused] == [("Dropout", "drop", 13), ("Reshape", "rs", 13)]
    msg = str(e.value)
    assert "2 node(s) of supported operators are refused:" in msg
    assert "node 'drop' (Dropout, opset 13): training mode" in msg
    assert "node 'rs' (Reshape, opset 13): the target shape of Reshape must be known" in msg


def test_gather_elements_of_constants_folds_past_32_indices():
    """BERT's exports gather 128 position ids out of a constant (1, 512) buffer (onnx's
    reference evaluator fails on it: np.choose takes at most 32 choices): it folds."""
    buf = numpy_helper.from_array(np.arange(512, dtype=np.int64)[None] * 3, "buf")
    idx = numpy_helper.from_array(np.array([[5, -1, 0] + list(range(100, 225))], np.int64),
                                  "idx")
    nodes = [helper.make_node("GatherElements", ["buf", "idx"], ["pos"], axis=1),
             helper.make_node("Cast", ["pos"], ["posf"], to=F),
             helper.make_node("Add", ["x", "posf"], ["y"])]
    m = _model(nodes, [_vi("x", [1, 128])], [_vi("y", [1, 128])], inits=[buf, idx])
    assert graph.from_onnx(m).op_counts() == {"add": 1}
    _check_vs_ort(m, {"x": np.zeros((1, 128), np.float32)})


def test_identity_before_an_output_needs_no_copy():
    """Exporters often end with Identity: the computed value takes the output's name; an input
    passed on and one value returned twice still get their copies."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Identity", ["r"], ["y"]),
             helper.make_node("Identity", ["r"], ["y2"]),
             helper.make_node("Identity", ["x"], ["xi"])]
    m = _model(nodes, [_vi("x", [3])], [_vi("y", [3]), _vi("y2", [3]), _vi("xi", [3])])
    assert graph.from_onnx(m).op_counts() == {"copy": 2, "relu": 1}
    _check_vs_ort(m, {"x": np.array([1.0, -2.0, 3.0], np.float32)})
