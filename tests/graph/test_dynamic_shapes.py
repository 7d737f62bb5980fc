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
