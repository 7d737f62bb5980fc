"""IsNaN, IsInf, Mod, Where, Max/Min with NaN, ArgMax/ArgMin, CumSum, TopK and Einsum
imported from one-node ONNX models, against onnxruntime and against the onnx package's own
backend node cases (issue 18). NaN and inf are made or fed at run time, in tensors long enough
for the vector loop and its scalar tail."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
from graph_testing import assert_close, onnx, ort_run

from tensorlang import graph

helper, TP = onnx.helper, onnx.TensorProto


def _model(op, inputs, outputs, opset, inits=(), **attrs):
    """One-node model: inputs/outputs as (name, elem_type, shape)."""
    node = helper.make_node(op, [n for n, *_ in inputs] + [i.name for i in inits],
                            [n for n, *_ in outputs], **attrs)
    g = helper.make_graph([node], op.lower(),
                          [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run_both(model, feeds):
    gm = graph.build(graph.from_onnx(model))
    return gm.run(**feeds), ort_run(model, feeds)


def _specials(shape, seed=0):
    """Random floats with NaN, +inf, -inf, +-0 and large values sprinkled in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=min(flat.size, max(8, flat.size // 4)), replace=False)
    vals = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, np.nan], np.float32)
    flat[picks] = vals[np.arange(picks.size) % vals.size]
    return x


def _assert_same(got, ref):
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, got.dtype,
                                                               ref.shape, ref.dtype)
    np.testing.assert_array_equal(got, ref)


# ---------------------------------------------------------------------------- IsNaN / IsInf


@pytest.mark.parametrize("opset", [9, 13, 20])
@pytest.mark.parametrize("shape", [(3, 37), (5,)])  # vector loop + tail; scalar only
def test_isnan_on_run_time_values(opset, shape):
    x = _specials(shape)
    m = _model("IsNaN", [("x", TP.FLOAT, shape)], [("y", TP.BOOL, shape)], opset)
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["y"], ref["y"])
    assert ref["y"].any()


@pytest.mark.parametrize("neg,pos", [(1, 1), (0, 1), (1, 0), (0, 0)])
def test_isinf_detect_flags(neg, pos):
    x = _specials((4, 33), seed=1)
    m = _model("IsInf", [("x", TP.FLOAT, (4, 33))], [("y", TP.BOOL, (4, 33))], 10,
               detect_negative=neg, detect_positive=pos)
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["y"], ref["y"])


def test_softmax_isnan_where_attention_pattern():
    """transformers' masked attention export: Softmax -> IsNaN -> Where(0) on run-time values
    (a fully masked row is all -inf, its softmax NaN)."""
    shape = (2, 4, 24)
    nodes = [helper.make_node("Softmax", ["x"], ["p"], axis=-1),
             helper.make_node("IsNaN", ["p"], ["nan"]),
             helper.make_node("Where", ["nan", "zero", "p"], ["y"])]
    zero = onnx.numpy_helper.from_array(np.zeros((1,), np.float32), "zero")
    g = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info("x", TP.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TP.FLOAT, shape)],
                          initializer=[zero])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    x[0, 1, :] = -np.inf  # a fully masked row
    x[1, 2, 5:] = -np.inf
    got, ref = _run_both(m, {"x": x})
    assert not np.isnan(got["y"]).any()
    assert (got["y"][0, 1] == 0).all()
    assert_close(got["y"], ref["y"], 1e-5)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_with_nan_match_onnxruntime(op):
    a, b = _specials((3, 37), 3), _specials((3, 37), 4)
    m = _model(op, [("a", TP.FLOAT, (3, 37)), ("b", TP.FLOAT, (3, 37))],
               [("y", TP.FLOAT, (3, 37))], 13)
    got, ref = _run_both(m, {"a": a, "b": b})
    _assert_same(got["y"], ref["y"])


@pytest.mark.parametrize("op,attrs,opset", [
    ("Relu", {}, 14), ("Clip", {"min": -1.0, "max": 1.0}, 6), ("HardSigmoid", {}, 6),
    ("LeakyRelu", {}, 6), ("Sigmoid", {}, 13), ("Abs", {}, 13), ("Softmax", {}, 13)])
def test_unary_ops_propagate_nan_as_onnxruntime(op, attrs, opset):
    """relu and clip were max(v, 0) = select(v > 0, v, 0): a NaN became 0. The bound first,
    max(0, v) = select(0 > v, 0, v), keeps it at the same cost (one vmaxps)."""
    x = _specials((3, 37), 21)
    m = _model(op, [("x", TP.FLOAT, (3, 37))], [("y", TP.FLOAT, (3, 37))], opset, **attrs)
    got, ref = _run_both(m, {"x": x})
    np.testing.assert_array_equal(np.isnan(got["y"]), np.isnan(ref["y"]))
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-5, atol=1e-6)


def test_where_with_nan_branches_and_full_broadcasting():
    c = np.random.default_rng(5).random((4, 1, 6)) > 0.5
    x, y = _specials((1, 3, 1), 6), _specials((3, 6), 7)
    m = _model("Where", [("c", TP.BOOL, (4, 1, 6)), ("x", TP.FLOAT, (1, 3, 1)),
                         ("y", TP.FLOAT, (3, 6))], [("z", TP.FLOAT, (4, 3, 6))], 16)
    got, ref = _run_both(m, {"c": c, "x": x, "y": y})
    _assert_same(got["z"], ref["z"])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last,keep,axis", [(0, 1, 1), (1, 0, -1), (1, 1, 0)])
def test_argmax_argmin_modes(op, last, keep, axis):
    x = np.random.default_rng(8).integers(-3, 3, (4, 19)).astype(np.float32)  # many ties
    out_shape = [4, 19]
    if keep:
        out_shape[axis] = 1
    else:
        del out_shape[axis]
    m = _model(op, [("x", TP.FLOAT, (4, 19))], [("y", TP.INT64, out_shape)], 13,
               axis=axis, keepdims=keep, select_last_index=last)
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["y"], ref["y"])


# ---------------------------------------------------------------------------- Mod


@pytest.mark.parametrize("dtype,fmod", [(np.int32, 0), (np.int64, 0), (np.int32, 1),
                                        (np.int64, 1), (np.float32, 1)])
def test_mod_sign_rules(dtype, fmod):
    rng = np.random.default_rng(9)
    if dtype == np.float32:
        a = (rng.standard_normal((3, 37)) * 7).astype(dtype)
        b = (rng.standard_normal((37,)) * 3).astype(dtype)
        a[0, :4] = [1e-10, -1e-10, np.inf, np.nan]  # tiny remainders keep their value
    else:
        a = rng.integers(-50, 50, (3, 37)).astype(dtype)
        b = rng.integers(1, 9, (37,)).astype(dtype) * rng.choice([-1, 1], 37).astype(dtype)
    et = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = _model("Mod", [("a", et, (3, 37)), ("b", et, (37,))], [("y", et, (3, 37))], 13,
               fmod=fmod)
    got, ref = _run_both(m, {"a": a, "b": b})
    if dtype == np.float32:
        np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-6, atol=0)
        assert got["y"][0, 0] == np.float32(1e-10)
    else:
        _assert_same(got["y"], ref["y"])


def test_mod_of_constants_folds():
    a = onnx.numpy_helper.from_array(np.array([7, -7, 7, -7], np.int64), "a")
    b = onnx.numpy_helper.from_array(np.array([3, 3, -3, -3], np.int64), "b")
    node = helper.make_node("Mod", ["a", "b"], ["m"])
    add = helper.make_node("Add", ["x", "m"], ["y"])
    g = helper.make_graph([node, add], "g", [helper.make_tensor_value_info("x", TP.INT64, [4])],
                          [helper.make_tensor_value_info("y", TP.INT64, [4])],
                          initializer=[a, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    gr = graph.from_onnx(m)
    assert [n.op for n in gr.nodes] == ["add"]
    out = graph.build(gr).run(x=np.zeros(4, np.int64))["y"]
    np.testing.assert_array_equal(out, [1, 2, -2, -1])


def test_mod_float_without_fmod_from_opset_28_vs_onnxruntime():
    """Opset 28 defines fmod=0 for floats: the divisor's sign, a zero result signed as the
    divisor, NaN for an infinite dividend or a zero divisor, an infinite divisor keeping a
    dividend of its sign (and giving the divisor otherwise)."""
    a = np.array([5, -5, 5.5, -5.5, 0.0, -0.0, np.inf, 3, 1e-10, -1e-10, 2, -2, np.nan, 6],
                 np.float32)
    b = np.array([3, 3, -2, 2, -2, 2, 1, 0, np.inf, np.inf, -np.inf, np.inf, 1, 3], np.float32)
    m = _model("Mod", [("a", TP.FLOAT, (14,)), ("b", TP.FLOAT, (14,))],
               [("y", TP.FLOAT, (14,))], 28)
    got, ref = _run_both(m, {"a": a, "b": b})
    np.testing.assert_array_equal(got["y"], ref["y"])
    np.testing.assert_array_equal(np.signbit(got["y"]), np.signbit(ref["y"]))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got["y"], np.mod(a, b))


def test_mod_float_without_fmod_is_refused():
    m = _model("Mod", [("a", TP.FLOAT, (3,)), ("b", TP.FLOAT, (3,))], [("y", TP.FLOAT, (3,))],
               13)
    with pytest.raises(graph.OnnxImportError, match=r"\(Mod, opset 13\): fmod=0 .*integer"):
        graph.from_onnx(m)


# ---------------------------------------------------------------------------- Pow


def _integer_pow_operands(base, expo, seed=3):
    """Bases and exponents for Pow on an integer base: negative exponents (truncated to 0 unless
    the base is +-1), 0 ** -1, results past int32 and beyond 2**53, and for a float exponent
    fractions and negative bases (NaN)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-12, 17, (3, 37)).astype(base)
    a[0, :6] = [0, 1, -1, -17, 3, 0]
    if np.dtype(expo).kind == "f":
        b = rng.uniform(-3, 12, 37).astype(expo)
        b[::5] = np.round(b[::5])
    else:
        b = rng.integers(-3, 17, 37).astype(expo)
    b[:6] = [-1, -5, -3, 13, 39, 0]
    return a, b


@pytest.mark.parametrize("base,expo", [(np.int32, np.int32), (np.int64, np.int64),
                                       (np.int32, np.float32), (np.int64, np.float32),
                                       (np.int32, np.int64), (np.int64, np.int32)])
def test_pow_of_an_integer_base_matches_onnxruntime(base, expo):
    """onnxruntime computes C's pow in float64 and converts it to the base's type (x86: the
    type's minimum out of range); tensorlang gives the same bits, also for int64 results beyond
    2**53, which float64 rounds."""
    a, b = _integer_pow_operands(base, expo)
    et, ft = (onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in (base, expo))
    m = _model("Pow", [("a", et, (3, 37)), ("b", ft, (37,))], [("y", et, (3, 37))], 15)
    got, ref = _run_both(m, {"a": a, "b": b})
    _assert_same(got["y"], ref["y"])
    assert got["y"][0, 0] == np.iinfo(base).min  # 0 ** -1: inf, out of range
    assert list(got["y"][0, 1:3]) == [1, -1]


def test_pow_of_integer_constants_folds_as_it_runs():
    a, b = _integer_pow_operands(np.int64, np.float32, seed=4)
    inits = [onnx.numpy_helper.from_array(a, "a"), onnx.numpy_helper.from_array(b, "b")]
    pw = helper.make_node("Pow", ["a", "b"], ["p"])
    add = helper.make_node("Add", ["x", "p"], ["y"])
    g = helper.make_graph([pw, add], "g", [helper.make_tensor_value_info("x", TP.INT64, [3, 37])],
                          [helper.make_tensor_value_info("y", TP.INT64, [3, 37])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    gr = graph.from_onnx(m)
    assert [n.op for n in gr.nodes] == ["add"]
    x = np.zeros((3, 37), np.int64)
    _assert_same(graph.build(gr).run(x=x)["y"], ort_run(m, {"x": x})["y"])


# ---------------------------------------------------------------------------- CumSum


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum_modes(exclusive, reverse, axis):
    x = np.random.default_rng(10).standard_normal((5, 23)).astype(np.float32)
    ax = onnx.numpy_helper.from_array(np.array(axis, np.int32), "axis")
    m = _model("CumSum", [("x", TP.FLOAT, (5, 23))], [("y", TP.FLOAT, (5, 23))], 14,
               inits=[ax], exclusive=exclusive, reverse=reverse)
    got, ref = _run_both(m, {"x": x})
    assert_close(got["y"], ref["y"], 1e-5)


def test_cumsum_int64_and_run_time_axis_refused():
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    ax = onnx.numpy_helper.from_array(np.array(1, np.int64), "axis")
    m = _model("CumSum", [("x", TP.INT64, (3, 4))], [("y", TP.INT64, (3, 4))], 11, inits=[ax])
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["y"], ref["y"])
    m = _model("CumSum", [("x", TP.INT64, (3, 4)), ("axis", TP.INT64, ())],
               [("y", TP.INT64, (3, 4))], 11)
    with pytest.raises(graph.OnnxImportError, match="axis input of CumSum must be known"):
        graph.from_onnx(m)


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("shape,axis", [((3, 7, 5), 1), ((6, 1), 1), ((1, 9), 0),
                                        ((2, 300), 1), ((130, 3), 0)])
def test_cumsum_scan_exact_on_integers(shape, axis, exclusive, reverse):
    """The scan over a middle, a last and a first axis, of one element (exclusive: zeros)
    and of 300 (a vector step over the other axes and its tail): int32 sums are exact."""
    x = np.random.default_rng(12).integers(-1000, 1000, shape).astype(np.int32)
    ax = onnx.numpy_helper.from_array(np.array(axis, np.int64), "axis")
    m = _model("CumSum", [("x", TP.INT32, shape)], [("y", TP.INT32, shape)], 14, inits=[ax],
               exclusive=exclusive, reverse=reverse)
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["y"], ref["y"])


def test_cumsum_is_a_serial_scan_numpy_order():
    """A long float axis: the scan adds in numpy's order (x[0] + x[1] + ...), so it matches
    np.cumsum closely where a blocked sum would round differently; the op holds a tl.scan."""
    from tensorlang import ops, te
    from tensorlang.ops import reduce as R
    from tensorlang.te.scan import ScanOp

    x = np.random.default_rng(13).standard_normal((4, 4096)).astype(np.float32)
    m = _model("CumSum", [("x", TP.FLOAT, x.shape)], [("y", TP.FLOAT, x.shape)], 14,
               inits=[onnx.numpy_helper.from_array(np.array(1, np.int64), "axis")])
    got, _ = _run_both(m, {"x": x})
    np.testing.assert_array_equal(got["y"], np.cumsum(x, 1, dtype=np.float32))
    y = R.cumsum(te.placeholder((4, 4096), name="x"), 1)
    s = ops.default_schedule(y)
    assert any(isinstance(st.op, ScanOp) for st in s.stages)


# ---------------------------------------------------------------------------- TopK


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [1, 0])
def test_topk_with_ties_lower_index_first(largest, axis):
    x = np.random.default_rng(11).integers(-4, 4, (6, 40)).astype(np.float32)  # many ties
    k = 5
    out = [6, 40]
    out[axis] = k
    kk = onnx.numpy_helper.from_array(np.array([k], np.int64), "k")
    m = _model("TopK", [("x", TP.FLOAT, (6, 40))],
               [("v", TP.FLOAT, out), ("i", TP.INT64, out)], 11, inits=[kk], axis=axis,
               largest=largest)
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["v"], ref["v"])
    _assert_same(got["i"], ref["i"])


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_blocked_candidates_on_a_long_axis(largest):
    """An axis of 1000, three rows and k=20 take the ranks' two-level path (blocks of 64, the
    last one short)."""
    x = np.random.default_rng(17).integers(-50, 50, (3, 1000)).astype(np.float32)
    assert not _takes_insertion((3, 1000), 1, 20)
    kk = onnx.numpy_helper.from_array(np.array([20], np.int64), "k")
    m = _model("TopK", [("x", TP.FLOAT, (3, 1000))],
               [("v", TP.FLOAT, (3, 20)), ("i", TP.INT64, (3, 20))], 11, inits=[kk],
               largest=largest)
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["v"], ref["v"])
    _assert_same(got["i"], ref["i"])


def _takes_insertion(shape, axis, k) -> bool:
    """Whether topk builds the running list (a tl.scan) for this shape."""
    from tensorlang import te
    from tensorlang.ops import sort as SO
    from tensorlang.schedule import create_schedule
    from tensorlang.te.scan import ScanOp

    v, i = SO.topk(te.placeholder(shape, name="x"), k, axis)
    return any(isinstance(st.op, ScanOp) for st in create_schedule([v, i]).stages)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("shape,axis,k,dtype", [
    ((8, 500), 1, 10, TP.FLOAT), ((8, 37), 1, 37, TP.FLOAT), ((6, 40), 1, 1, TP.FLOAT),
    ((40, 6), 0, 6, TP.INT32), ((2, 5, 33), 1, 5, TP.FLOAT), ((4, 70), 1, 16, TP.INT64), ((2, 90), 1, 4, TP.FLOAT),
    ((5, 2), 1, 2, TP.FLOAT)])
def test_topk_running_list_ties_and_extremes(shape, axis, k, dtype, largest, monkeypatch):
    """The running list (a scan over the axis) on many ties: k = n, k = 1, a first and a
    middle axis, integers with their extreme values (a held value equal to the dtype's min or
    max must still rank by index), vs onnxruntime. (The radix sort kernel, which the rule
    takes for some of these shapes, is kept out: tests/tensorlang/test_topk_radix.py.)"""
    from tensorlang.ops import sort as SO

    monkeypatch.setattr(SO, "FORCE_RADIX", False)
    assert _takes_insertion(shape, axis, k)
    npd = {TP.FLOAT: np.float32, TP.INT32: np.int32, TP.INT64: np.int64}[dtype]
    x = np.random.default_rng(18).integers(-4, 4, shape).astype(npd)
    if dtype != TP.FLOAT:
        x.reshape(-1)[::5] = np.iinfo(npd).min
        x.reshape(-1)[::7] = np.iinfo(npd).max
    out = list(shape)
    out[axis] = k
    kk = onnx.numpy_helper.from_array(np.array([k], np.int64), "k")
    m = _model("TopK", [("x", dtype, shape)], [("v", dtype, out), ("i", TP.INT64, out)], 11,
               inits=[kk], axis=axis, largest=largest)
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["v"], ref["v"])
    _assert_same(got["i"], ref["i"])


def test_topk_big_state_takes_ranks():
    """Where every step's list would not stay in the caches (8 x 8000 x 300 indices), a list
    over the whole axis is not built (the ranks', or topk's block path first); the result is
    the same."""
    from tensorlang import te
    from tensorlang.ops import sort as SO

    assert not SO._insertion_fits(te.placeholder((8, 8000), name="x"), 1, 8000, 300)
    assert SO._insertion_fits(te.placeholder((8, 4000), name="x"), 1, 4000, 200)
    x = np.random.default_rng(19).integers(-100, 100, (8, 8000)).astype(np.float32)
    kk = onnx.numpy_helper.from_array(np.array([300], np.int64), "k")
    m = _model("TopK", [("x", TP.FLOAT, (8, 8000))],
               [("v", TP.FLOAT, (8, 300)), ("i", TP.INT64, (8, 300))], 11, inits=[kk])
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["v"], ref["v"])
    _assert_same(got["i"], ref["i"])


def test_topk_opset10_k_input_without_largest():
    x = np.random.default_rng(16).integers(-3, 3, (2, 3, 9)).astype(np.float32)
    kk = onnx.numpy_helper.from_array(np.array([3], np.int64), "k")
    m = _model("TopK", [("x", TP.FLOAT, (2, 3, 9))],
               [("v", TP.FLOAT, (2, 3, 3)), ("i", TP.INT64, (2, 3, 3))], 10, inits=[kk])
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["v"], ref["v"])
    _assert_same(got["i"], ref["i"])


def test_topk_opset9_attribute_and_bad_k():
    x = np.random.default_rng(12).standard_normal((3, 10)).astype(np.float32)
    m = _model("TopK", [("x", TP.FLOAT, (3, 10))],
               [("v", TP.FLOAT, (3, 4)), ("i", TP.INT64, (3, 4))], 9, k=4)
    got, ref = _run_both(m, {"x": x})
    _assert_same(got["v"], ref["v"])
    _assert_same(got["i"], ref["i"])
    kk = onnx.numpy_helper.from_array(np.array([11], np.int64), "k")
    m = _model("TopK", [("x", TP.FLOAT, (3, 10))],
               [("v", TP.FLOAT, (3, 11)), ("i", TP.INT64, (3, 11))], 11, inits=[kk])
    with pytest.raises(graph.OnnxImportError, match=r"\(TopK, opset 11\): K=11 is not in"):
        graph.from_onnx(m)


# ---------------------------------------------------------------------------- Einsum


EINSUM_CASES = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 6, 8)]),
    ("bhqk,bhkd->bhqd", [(1, 2, 5, 6), (1, 2, 6, 8)]),
    ("i,j->ij", [(5,), (7,)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ii->i", [(6, 6)]),
    ("ii", [(6, 6)]),
    ("bii->b", [(3, 4, 4)]),
    ("ij->ji", [(3, 5)]),
    ("ijk->", [(2, 3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 2)]),
    ("i,i->", [(9,)] * 2),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("nchw,oc->nohw", [(1, 3, 4, 5), (6, 3)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_equations(eq, shapes):
    rng = np.random.default_rng(13)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ref = np.einsum(eq, *arrays)
    names = [f"x{i}" for i in range(len(shapes))]
    m = _model("Einsum", [(n, TP.FLOAT, s) for n, s in zip(names, shapes)],
               [("y", TP.FLOAT, ref.shape)], 12, equation=eq)
    got, ort = _run_both(m, dict(zip(names, arrays)))
    assert_close(got["y"], ort["y"], 1e-5)
    assert_close(got["y"], ref.astype(np.float32), 1e-5)


def test_einsum_constant_weight_becomes_dense():
    w = onnx.numpy_helper.from_array(
        np.random.default_rng(14).standard_normal((8, 6)).astype(np.float32), "w")
    m = _model("Einsum", [("x", TP.FLOAT, (2, 5, 8))], [("y", TP.FLOAT, (2, 5, 6))], 12,
               inits=[w], equation="bsk,kn->bsn")
    g = graph.from_onnx(m)
    assert "dense" in [n.op for n in g.nodes]
    x = np.random.default_rng(15).standard_normal((2, 5, 8)).astype(np.float32)
    assert_close(graph.build(g).run(x=x)["y"], ort_run(m, {"x": x})["y"], 1e-5)


@pytest.mark.parametrize("eq,match", [("ij,jk->ik", "2 input terms for 1 inputs"),
                                      ("ijk->ij", "does not match an input of rank 2"),
                                      ("ij->iz", r"output letters \['z'\] are in no input")])
def test_einsum_bad_equations_are_refused(eq, match):
    m = _model("Einsum", [("x", TP.FLOAT, (3, 4))], [("y", TP.FLOAT, None)], 12, equation=eq)
    with pytest.raises(graph.OnnxImportError, match=r"\(Einsum, opset 12\): equation .*" + match):
        graph.from_onnx(m)


# ---------------------------------------------------------------------------- onnx's own cases


def node_cases(op_type: str, module: str):
    """The onnx package's backend node cases of one operator (its reference inputs and
    outputs), made by importing the case module with the package's op filter set."""
    from onnx.backend.test.case import node

    full = f"onnx.backend.test.case.node.{module}"
    if full not in sys.modules:
        node._TargetOpType = op_type
        try:
            importlib.import_module(full)
        finally:
            node._TargetOpType = None
    return [c for c in node._NodeTestCases
            if [n.op_type for n in c.model.graph.node] == [op_type]]


def check_node_case(case, static_inputs=(), rtol=1e-5):
    """Run one case; ``static_inputs``: inputs the case feeds that tensorlang needs at compile
    time (CumSum's axis, TopK's K), made initializers with the case's values."""
    (inputs, outputs), = case.data_sets
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    gp = model.graph
    feeds = {v.name: np.asarray(a) for v, a in zip(gp.input, inputs)}
    for name in static_inputs:
        gp.initializer.append(onnx.numpy_helper.from_array(feeds.pop(name), name))
        gp.input.remove(next(v for v in gp.input if v.name == name))
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    for v, want in zip(gp.output, outputs):
        want = np.asarray(want)
        assert got[v.name].shape == want.shape, (v.name, got[v.name].shape, want.shape)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got[v.name], want, rtol=rtol, atol=1e-6)
        else:
            np.testing.assert_array_equal(got[v.name], want)


_FLOAT32_ONLY = ("bfloat16",)  # the one type of these cases the graph does not compute in


NODE_OPS = [("IsNaN", "isnan", ()), ("IsInf", "isinf", ()), ("Mod", "mod", ()),
            ("CumSum", "cumsum", ("axis",)), ("TopK", "topk", ("k",)),
            ("Einsum", "einsum", ()), ("ArgMax", "argmax", ()), ("ArgMin", "argmin", ()),
            ("Where", "where", ()), ("Pow", "pow", ())]


@pytest.mark.parametrize("op,module,static", NODE_OPS, ids=[o[0] for o in NODE_OPS])
def test_onnx_backend_node_cases(op, module, static):
    cases = [c for c in node_cases(op, module) if not any(t in c.name for t in _FLOAT32_ONLY)]
    assert cases
    for case in cases:
        try:
            check_node_case(case, static)
        except AssertionError as e:
            raise AssertionError(f"{case.name}: {e}") from None
