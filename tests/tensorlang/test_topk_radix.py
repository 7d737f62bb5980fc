"""TopK's radix sort kernel (ops/sort_kernel.py: loop IR in a tl.extern, data-dependent
stores): against numpy's stable argsort (ONNX's order, ties by the lower index) on many ties,
NaN, infinities, -0.0 beside +0.0, the dtypes' extreme values, k = 1 and k = n, both
directions, a first, middle and last axis, rows that take the candidate filter and rows that
do not; inside a graph vs onnxruntime in both execution modes and after save/load; the rule
that chooses it; bad k."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.ops import sort as SO
from tensorlang.ops import sort_kernel as SK
from tensorlang.te.extern import ExternOp

RNG = np.random.default_rng(181)


def reference(a, k, axis, largest):
    """numpy's stable order of a's dense ranks (NaN ranks as the best value, as the kernel
    and the ranks' pre-pass put it; +0 and -0 are one value)."""
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.inf if largest else -np.inf, a)
    key = np.unique(a, return_inverse=True)[1].reshape(a.shape)
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    return np.take(order, np.arange(k), axis=axis)


def data(shape, dtype):
    if np.dtype(dtype).kind == "f":
        a = RNG.integers(-6, 6, shape).astype(dtype)  # many ties
        flat = a.reshape(-1)
        flat[::9] = RNG.standard_normal(flat[::9].size)
        flat[1::13] = np.nan
        flat[2::17] = np.inf
        flat[3::19] = -np.inf
        flat[4::7] = -0.0  # equal to +0: ties by index
        flat[5::11] = 0.0
        return a
    info = np.iinfo(dtype)
    a = RNG.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dtype)
    a.reshape(-1)[::5] = info.min
    a.reshape(-1)[::7] = info.max
    return a


def radix_topk(shape, axis, k, dtype, largest):
    X = tl.placeholder(shape, dtype=dtype, name="X")
    with _forced(True):
        v, i = tl.ops.topk(X, k, axis, largest)
    assert any(isinstance(t.op, ExternOp) for t in (i,)), "the radix kernel was not taken"
    return tl.build(tl.ops.default_schedule([v, i]), [X, v, i]), tuple(
        int(d.value) for d in v.shape)


class _forced:
    def __init__(self, value):
        self.value = value

    def __enter__(self):
        self.old, SO.FORCE_RADIX = SO.FORCE_RADIX, self.value

    def __exit__(self, *exc):
        SO.FORCE_RADIX = self.old


# (shape, axis, k, dtype, largest)
CASES = [
    ((3, 200), 1, 1, "float32", True),      # k = 1, the candidate filter
    ((3, 200), 1, 200, "float32", False),   # k = n: the whole row sorted
    ((4, 1000), 1, 37, "float32", True),
    ((2, 300), 1, 150, "float64", False),   # 8 passes; k = n / 2: no filter
    ((2, 5, 33), 1, 5, "float32", False),   # a middle axis
    ((40, 6), 0, 40, "int32", True),        # the first axis, k = n
    ((2, 90), 1, 4, "int64", False),        # int64's extremes (the key wraps at 2^63)
    ((3, 64), 1, 9, "int8", True),          # one pass
    ((3, 64), 1, 9, "int16", False),
    ((2, 70), 1, 70, "uint8", True),
    ((2, 70), 1, 3, "uint64", False),
    ((2, 50), 1, 50, "uint32", True),
]


@pytest.mark.parametrize("shape,axis,k,dtype,largest", CASES)
def test_radix_matches_numpy(shape, axis, k, dtype, largest):
    a = data(shape, dtype)
    f, out_shape = radix_topk(shape, axis, k, dtype, largest)
    gv, gi = np.zeros(out_shape, dtype), np.zeros(out_shape, np.int64)
    f(a, gv, gi)
    ref = reference(a, k, axis, largest)
    np.testing.assert_array_equal(gi, ref)
    np.testing.assert_array_equal(gv, np.take_along_axis(a, ref, axis))


def test_radix_random_rows_parallel_and_filtered():
    """Rows enough for the thread pool (rows x n >= PARALLEL_ELEMENTS), distinct values: the
    filter keeps few candidates; one row all equal: every pass a copy."""
    shape = (24, 1500)
    a = RNG.standard_normal(shape).astype(np.float32)
    a[3] = 2.5
    a[4, :] = np.arange(1500, dtype=np.float32)  # ascending: the best are last
    assert shape[0] * shape[1] >= SK.PARALLEL_ELEMENTS
    for k, largest in ((10, True), (10, False), (1500, True)):
        f, out_shape = radix_topk(shape, 1, k, "float32", largest)
        gv, gi = np.zeros(out_shape, np.float32), np.zeros(out_shape, np.int64)
        f(a, gv, gi)
        np.testing.assert_array_equal(gi, reference(a, k, 1, largest))


def test_rule_takes_radix_for_large_k_and_keeps_small_k():
    def takes_radix(shape, k):
        _, i = tl.ops.topk(tl.placeholder(shape, name="X"), k)
        return isinstance(i.op, ExternOp)

    assert takes_radix((1, 1000), 100) and takes_radix((1, 1000), 1000)
    assert takes_radix((80, 8400), 100) and takes_radix((8, 8000), 300)
    assert not takes_radix((1, 1000), 1) and not takes_radix((80, 8400), 5)
    assert not takes_radix((6, 40), 40)  # short rows: the buckets' prefix sums dominate
    _, i = tl.ops.topk(tl.placeholder((2, 400), dtype="float16", name="X"), 100)
    assert not isinstance(i.op, ExternOp)  # float16: the computed ways


@pytest.mark.parametrize("k", [0, 1001, -1])
def test_bad_k_is_refused(k):
    X = tl.placeholder((2, 1000), name="X")
    with pytest.raises(ValueError, match=r"topk: k"):
        tl.ops.topk(X, k)


@pytest.mark.parametrize("mode", ["graph", "interactive"])
def test_graph_modes_and_save_load_vs_onnxruntime(mode, tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto as TP
    from onnx import helper

    from tensorlang import graph, runtime

    shape, k = (3, 700), 120
    x = data(shape, "float32")
    x[np.isnan(x)] = 7.0  # NaN's place is unspecified in ONNX; onnxruntime's differs
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=1)
    g = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, shape)],
        [helper.make_tensor_value_info("v", TP.FLOAT, (3, k)),
         helper.make_tensor_value_info("i", TP.INT64, (3, k))],
        initializer=[onnx.numpy_helper.from_array(np.array([k], np.int64), "k")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert SO._radix_wins("float32", shape[1], k, True, shape[0])  # the graph's lowering too
    gm = graph.build(graph.from_onnx(model), mode=mode)
    ref = _ort_run(model, {"x": x})
    got = gm.run(x=x)
    np.testing.assert_array_equal(got["i"], ref["i"])
    np.testing.assert_array_equal(got["v"], ref["v"])
    gm.save(str(tmp_path / "topk.tlpkg"))
    again = runtime.load(str(tmp_path / "topk.tlpkg"))
    np.testing.assert_array_equal(again.run(x=x)["i"], ref["i"])


def _ort_run(model, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def test_symbolic_rows():
    """A symbolic count of rows (issue 19's shape variables): the kernel's row loop runs to
    the bound size."""
    b = tl.var("batch")
    X = tl.placeholder((b, 300), name="X")
    with _forced(True):
        v, i = tl.ops.topk(X, 20)
    assert isinstance(i.op, ExternOp)
    f = tl.build(tl.ops.default_schedule([v, i]), [X, v, i])
    for rows in (1, 5):
        a = data((rows, 300), "float32")
        gv, gi = np.zeros((rows, 20), np.float32), np.zeros((rows, 20), np.int64)
        f(a, gv, gi)
        np.testing.assert_array_equal(gi, reference(a, 20, 1, True))
