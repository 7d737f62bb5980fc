"""Symbolic sizes that a model needs equal but its inputs name apart (issue 19): OPT with a
KV cache adds a mask of length t to scores of length p + s, torch's dynamo export of GPT-2
names the batch of two inputs s23 and s31. from_onnx solves the equation for one variable
(t := p + s) and imports the model with the inputs' shapes rewritten; the runtime checks the
inputs' sizes against it before any kernel runs, also after save/load. Every model is checked
against onnxruntime at several consistent sizes; inconsistent ones (a size of 1 that ONNX
would broadcast included) are refused naming the inputs, the axes and the sizes."""

import numpy as np
import pytest
from tensorlang.graph import symbolic as S
from tensorlang.graph.ir import GraphError
from tensorlang.runtime.graph_module import InputError

import tensorlang as tl
from tensorlang import graph, runtime

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper
from tensorlang.graph.frontends.onnx_context import OnnxImportError


def _model(nodes, inputs, inits=()):
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(np.asarray(v, np.int64), k) for k, v in dict(inits).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    return m


def _feeds(shapes: dict) -> dict:
    rng = np.random.default_rng(sum(map(sum, shapes.values())))
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def _check(model, shape_list):
    """One build without sizes against onnxruntime at each consistent size."""
    gm = graph.build(graph.from_onnx(model))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shapes in shape_list:
        feeds = _feeds(shapes)
        want = sess.run(None, feeds)[0]
        got = gm.run(**feeds)["y"]
        assert got.shape == want.shape, shapes
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return gm


def _input_shapes(model) -> dict:
    return {v.name: [str(d) for d in v.shape] for v in graph.from_onnx(model).inputs}


# -- elementwise: [b, t] + [b, s] ---------------------------------------------------------------

ADD = _model([helper.make_node("Add", ["x", "z"], ["y"])], [("x", ["b", "t"]), ("z", ["b", "s"])])


def test_add_of_axes_named_apart_is_one_size():
    """x[b, t] + z[b, s] was refused at import (t and s cannot be proven equal); now s := t
    (z, later in the inputs, gives its name up) and the model runs at every consistent size."""
    assert _input_shapes(ADD) == {"x": ["b", "t"], "z": ["b", "t"]}
    _check(ADD, [{"x": (b, n), "z": (b, n)} for b, n in [(1, 1), (2, 3), (3, 7)]])


def test_add_with_sizes_that_differ_is_refused_naming_both():
    gm = graph.build(graph.from_onnx(ADD))
    with pytest.raises(InputError, match=r"inputs disagree on t: input 'x' axis 1 gives 3, "
                                         r"input 'z' axis 1 has 5"):
        gm.run(**_feeds({"x": (2, 3), "z": (2, 5)}))


@pytest.mark.parametrize("x, z", [((2, 3), (2, 1)), ((2, 1), (2, 3))])
def test_a_size_of_1_that_onnx_broadcasts_is_refused_not_computed(x, z):
    """onnxruntime broadcasts a 1 against the other side; this build took the axes as equal, so
    the call is refused (shapes= builds for that size), never answered at another size."""
    assert ort.InferenceSession(ADD.SerializeToString()).run(None, _feeds({"x": x, "z": z}))
    gm = graph.build(graph.from_onnx(ADD))
    with pytest.raises(InputError, match=rf"inputs disagree on t: input 'x' axis 1 gives "
                                         rf"{x[1]}, input 'z' axis 1 has {z[1]}"):
        gm.run(**_feeds({"x": x, "z": z}))
    fixed = graph.build(graph.from_onnx(ADD, shapes={"x": ("b", x[1]), "z": ("b", z[1])}))
    feeds = _feeds({"x": x, "z": z})
    np.testing.assert_allclose(fixed.run(**feeds)["y"], feeds["x"] + feeds["z"])


# -- a mask of length t added to a cache and new positions: t := p + s ----------------------------

CACHE = _model(
    [helper.make_node("Concat", ["past", "x"], ["kv"], axis=1),
     helper.make_node("Unsqueeze", ["mask", "two"], ["m"]),
     helper.make_node("Add", ["kv", "m"], ["y"])],
    [("x", ["b", "s", 4]), ("past", ["b", "p", 4]), ("mask", ["b", "t"])], {"two": [2]})


def test_mask_of_past_plus_new_positions():
    assert _input_shapes(CACHE)["mask"] == ["b", "p + s"]
    _check(CACHE, [{"x": (b, s, 4), "past": (b, p, 4), "mask": (b, p + s)}
                   for b, s, p in [(1, 1, 1), (2, 3, 5), (3, 1, 9), (1, 6, 2)]])


def test_mask_of_another_length_is_refused_also_after_save_load(tmp_path):
    gm = graph.build(graph.from_onnx(CACHE))
    gm.save(tmp_path / "m")
    feeds = _feeds({"x": (2, 3, 4), "past": (2, 4, 4), "mask": (2, 6)})
    for m in (gm, runtime.load(tmp_path / "m")):
        with pytest.raises(InputError, match=r"input 'mask' axis 1 must be p \+ s = 7 with "
                                             r"p = 4 \(from input 'past' axis 1\), s = 3 "
                                             r"\(from input 'x' axis 1\), got 6"):
            m.run(**feeds)


# -- matmul: batch axes, inner axes ------------------------------------------------------------


def test_matmul_batch_and_inner_axes_named_apart():
    """a[n, s, k] @ c[m, u, 5]: the batch broadcast needs n == m, the product k == u."""
    model = _model([helper.make_node("MatMul", ["a", "c"], ["y"])],
                   [("a", ["n", "s", "k"]), ("c", ["m", "u", 5])])
    assert _input_shapes(model) == {"a": ["n", "s", "k"], "c": ["n", "k", "5"]}
    gm = _check(model, [{"a": (n, s, k), "c": (n, k, 5)}
                        for n, s, k in [(1, 1, 1), (2, 3, 4), (3, 2, 7)]])
    with pytest.raises(InputError, match=r"inputs disagree on k: input 'a' axis 2 gives 4, "
                                         r"input 'c' axis 1 has 3"):
        gm.run(**_feeds({"a": (2, 3, 4), "c": (2, 3, 5)}))


# -- concat's other axes; reshape's element count ------------------------------------------------


def test_concat_other_axes_named_apart():
    model = _model([helper.make_node("Concat", ["x", "z"], ["y"], axis=1)],
                   [("x", ["b", "s"]), ("z", ["c", "u"])])
    assert _input_shapes(model) == {"x": ["b", "s"], "z": ["b", "u"]}
    gm = _check(model, [{"x": (b, s), "z": (b, u)} for b, s, u in [(1, 1, 1), (3, 2, 5)]])
    with pytest.raises(InputError, match=r"inputs disagree on b: input 'x' axis 0 gives 3, "
                                         r"input 'z' axis 0 has 2"):
        gm.run(**_feeds({"x": (3, 2), "z": (2, 2)}))


def test_reshape_to_another_inputs_shape_needs_equal_element_counts():
    """Reshape x[b, s] to z's shape [c, s]: b * s == c * s, so c == b (s divides out)."""
    model = _model([helper.make_node("Shape", ["z"], ["zs"]),
                    helper.make_node("Reshape", ["x", "zs"], ["r"]),
                    helper.make_node("Add", ["r", "z"], ["y"])],
                   [("z", ["c", "s"]), ("x", ["b", "s"])])
    assert _input_shapes(model) == {"z": ["c", "s"], "x": ["c", "s"]}
    _check(model, [{"z": (c, s), "x": (c, s)} for c, s in [(1, 1), (2, 5), (4, 3)]])


def test_reshape_to_a_batch_and_minus_one_keeps_the_batch():
    """GPT-2's mask.view(batch, -1) with the mask's batch named apart (dynamo's s31 vs s23):
    [c, t] into [b, -1] is taken to keep the batch, c := b; another batch is refused."""
    model = _model([helper.make_node("Shape", ["x"], ["xs"], end=1),
                    helper.make_node("Concat", ["xs", "minus1"], ["target"], axis=0),
                    helper.make_node("Reshape", ["mask", "target"], ["r"]),
                    helper.make_node("Unsqueeze", ["r", "one"], ["r1"]),
                    helper.make_node("Add", ["x", "r1"], ["y"])],
                   [("x", ["b", 1, 4]), ("mask", ["c", 4])], {"minus1": [-1], "one": [1]})
    assert _input_shapes(model) == {"x": ["b", "1", "4"], "mask": ["b", "4"]}
    gm = _check(model, [{"x": (b, 1, 4), "mask": (b, 4)} for b in (1, 2, 5)])
    with pytest.raises(InputError, match=r"inputs disagree on b: input 'x' axis 0 gives 3, "
                                         r"input 'mask' axis 0 has 2"):
        gm.run(**_feeds({"x": (3, 1, 4), "mask": (2, 4)}))


# -- what stays refused at import ----------------------------------------------------------------


def test_sizes_unequal_at_every_size_are_still_refused():
    """[b, 2 s] + [b, s]: never equal (s >= 1), so no requirement: the import refuses."""
    model = _model([helper.make_node("Concat", ["x", "x"], ["xx"], axis=1),
                    helper.make_node("Add", ["xx", "x"], ["y"])], [("x", ["b", "s"])])
    with pytest.raises(OnnxImportError, match=r"shapes \[b, s \* 2\], \[b, s\] do not broadcast"
                                              r" \(its inputs"):
        graph.from_onnx(model)


def test_an_equation_without_a_whole_solution_is_refused_naming_shapes():
    """2 s == 3 u has no variable with a whole solution: refused naming the equation and
    shapes=, with which the model imports."""
    model = _model([helper.make_node("Concat", ["x", "x"], ["xx"], axis=1),
                    helper.make_node("Concat", ["z", "z", "z"], ["zzz"], axis=1),
                    helper.make_node("Add", ["xx", "zzz"], ["y"])],
                   [("x", [2, "s"]), ("z", [2, "u"])])
    with pytest.raises(OnnxImportError, match=r"s \* 2 and u \* 3 are equal only at some sizes"
                                              r".*shapes="):
        graph.from_onnx(model)
    gm = graph.build(graph.from_onnx(model, shapes={"x": (2, 3), "z": (2, 2)}))
    feeds = _feeds({"x": (2, 3), "z": (2, 2)})
    want = np.concatenate([feeds["x"]] * 2, 1) + np.concatenate([feeds["z"]] * 3, 1)
    np.testing.assert_allclose(gm.run(**feeds)["y"], want)


def test_builder_graphs_keep_their_variables_apart():
    """graph.Builder's users name their variables: an add of [b, t] and [b, s] stays an error
    there (a GraphError naming both shapes)."""
    b = graph.Builder("g")
    x = b.input("x", (tl.var("b"), tl.var("t")))
    z = b.input("z", (tl.var("b"), tl.var("s")))
    with pytest.raises(GraphError, match=r"shapes \[b, t\], \[b, s\] do not broadcast"):
        b.op("add", [x, z])


# -- solving the equations (graph/symbolic.py) ---------------------------------------------------


def _solved(a, b, prefer):
    """solve_equal's answer as text (an expression's == builds an expression, not a bool)."""
    got = S.solve_equal(a, b, prefer)
    return None if got is None else (got[0], str(got[1]))


def test_solve_equal():
    b, p, s, t = (S.shape_var(n) for n in "bpst")
    # OPT's positions past the cache: max(t - p, 0) long, added to s new ones (s >= 1)
    assert _solved(S.smax(t - p, 0), s, ["t", "s", "p"]) == ("t", "p + s")
    assert _solved(S.smin(t, s + 5), s, ["t"]) == ("t", "s")  # s + 5 is never s
    assert _solved(S.smin(t, 3), s, ["t"]) is None  # s may be 3 or less
    assert _solved(b * t, b * s, ["t"]) == ("t", "s")  # b divides out
    assert _solved(t * 2, s, ["t", "s"]) == ("s", "t * 2")  # t's 2 does not divide s's 1
    assert _solved(t * t, s, ["t"]) is None  # not linear in t
    assert _solved(t // 2, s, ["t"]) is None  # t inside a division
    assert str(S.substitute(S.smax(t - p, 0), {"t": p + s})) == "s"
