"""max/min with NaN follow numpy under every schedule (issue 15: a result must never change
under an accepted schedule).

Semantics: np.max / np.maximum (and min): a NaN anywhere gives NaN; argmax/argmin give the first
NaN's index; fmax/fmin ignore NaN. The codegen emits float Max/Min as llvm.maximum/minimum, which
propagate a NaN from either operand, so the result cannot depend on where a reorder, a split,
a vectorized or parallel reduce loop or rfactor puts the NaN. (It was a compare-select, x86
vmaxps, which returns one fixed operand on NaN: a max reduction kept the NaN only when it came
last.) onnxruntime 1.32 differs, each way depending on position: its ReduceMax/ReduceMin keep a
NaN only at the start of the reduced axis, MaxPool drops NaN, ArgMax/ArgMin ignore NaN unless it
is first; its Max/Min and Relu propagate as numpy does."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.ir import expr as E
from tensorlang.ir.simplify import simplify

ROWS, COLS = 8, 37  # 37 = 4 x 8 + 5: split by 8 leaves a tail of 5
DTYPES = ["float32", "float64", "float16"]


def _rows_with_nan(dtype: str) -> np.ndarray:
    """Each row puts NaN (or infinities) somewhere else, so one run checks every position:
    the first, the middle, the last (in the vector tail), the tail's first, two NaNs, none,
    NaN among infinities, infinities alone."""
    x = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(dtype)
    for row, col in ((0, 0), (1, 18), (2, COLS - 1), (3, 32), (4, 0), (4, COLS - 1)):
        x[row, col] = np.nan
    x[6, :] = -np.inf
    x[6, 9] = np.nan
    x[6, 10] = np.inf
    x[7, ::2] = np.inf
    x[7, 1::2] = -np.inf
    return x


# ----------------------------------------------------------------------------- schedules


def _default(s, st, k):
    pass


def _reorder(s, st, k):
    st.reorder(k, st.op.axis[0])


def _rfactor_stage(s, st, k):
    _, ki = st.split(k, factor=8)
    rf = s.rfactor(st.op.output(0), ki)
    return s[rf[0] if isinstance(rf, (list, tuple)) else rf]


def _split_vectorize_k(s, st, k):
    """A reduce loop is not vectorized directly: its split part becomes rfactor's lanes."""
    rf = _rfactor_stage(s, st, k)
    lanes, i = rf.op.axis[0], rf.op.axis[1]
    rf.reorder(i, *rf.op.reduce_axis, lanes)
    rf.vectorize(lanes)


def _vectorize_rows(s, st, k):
    io, ii = st.split(st.op.axis[0], factor=4)
    st.reorder(io, k, ii)
    st.vectorize(ii)


def _rfactor(s, st, k):
    rf = _rfactor_stage(s, st, k)
    rf.parallel(rf.op.axis[0])


def _parallel_rows(s, st, k):
    st.parallel(st.op.axis[0])


# a reduce loop itself is never vectorized or parallel (refused): rfactor makes it spatial
SCHEDULES = [_default, _reorder, _split_vectorize_k, _vectorize_rows, _rfactor, _parallel_rows]
SCHEDULE_IDS = ["default", "reorder", "split_vectorize_k", "vectorize_rows", "rfactor_parallel",
                "parallel_rows"]


def _reduce_kernel(reducer, dtype, schedule):
    x = tl.placeholder((ROWS, COLS), name="X", dtype=dtype)
    k = tl.reduce_axis((0, COLS), name="k")
    y = tl.compute((ROWS,), lambda i: reducer(x[i, k], axis=k), name="Y")
    s = tl.create_schedule(y)
    schedule(s, s[y], k)
    return tl.build(s, [x, y])


@pytest.mark.parametrize("schedule", SCHEDULES, ids=SCHEDULE_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_reducers_propagate_nan_under_every_schedule(name, dtype, schedule):
    f = _reduce_kernel(getattr(tl, name), dtype, schedule)
    x = _rows_with_nan(dtype)
    out = np.zeros(ROWS, dtype)
    f(x, out)
    np.testing.assert_array_equal(out, getattr(np, name)(x, axis=1))
    assert np.isnan(out[[0, 1, 2, 3, 4, 6]]).all() and not np.isnan(out[[5, 7]]).any()


@pytest.mark.parametrize("schedule", [_default, _reorder, _split_vectorize_k, _rfactor,
                                      _parallel_rows],
                         ids=["default", "reorder", "split_vectorize_k", "rfactor_parallel",
                              "parallel_rows"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_library_argmax_argmin_take_the_first_nan_under_every_schedule(name, dtype, schedule):
    x = tl.placeholder((ROWS, COLS), name="X", dtype=dtype)
    idx = getattr(tl.ops, name)(x, axis=1)
    s = tl.create_schedule(idx)
    pair = next(st for st in s.stages if st.op.reduce_axis)
    schedule(s, pair, pair.op.reduce_axis[0])
    f = tl.build(s, [x, idx])
    xv = _rows_with_nan(dtype)
    out = np.zeros(ROWS, "int64")
    f(xv, out)
    np.testing.assert_array_equal(out, getattr(np, name)(xv, axis=1))


def test_max_reducer_keeps_minus_inf_and_nan_once_seen():
    """Identity and propagation together: all -inf gives -inf (the identity is -inf, not the
    lowest finite value), and NaN after it still wins."""
    f = _reduce_kernel(tl.max, "float32", _split_vectorize_k)
    x = np.full((ROWS, COLS), -np.inf, np.float32)
    x[1, 20] = np.nan
    out = np.zeros(ROWS, np.float32)
    f(x, out)
    np.testing.assert_array_equal(out, np.max(x, axis=1))


# ----------------------------------------------------------------------------- elementwise

N = 37  # vector loop of 16 and a tail


def _operands(dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(N).astype(dtype)
    b = rng.standard_normal(N).astype(dtype)
    a[[0, 5, 33, 36]] = np.nan  # NaN on the left, in the vector body and in the tail
    b[[1, 5, 20, 34]] = np.nan  # on the right; both at 5
    a[10], b[11] = np.inf, -np.inf
    return a, b


def _elementwise_kernel(fn, dtype, vector):
    a = tl.placeholder((N,), name="A", dtype=dtype)
    b = tl.placeholder((N,), name="B", dtype=dtype)
    c = tl.compute((N,), lambda i: fn(a[i], b[i]), name="C")
    s = tl.create_schedule(c)
    if vector:
        _, ii = s[c].split(c.op.axis[0], factor=16)
        s[c].vectorize(ii)
    return tl.build(s, [a, b, c])


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tl_fn,np_fn", [(tl.max, np.maximum), (tl.min, np.minimum),
                                         (tl.fmax, np.fmax), (tl.fmin, np.fmin)],
                         ids=["max", "min", "fmax", "fmin"])
def test_elementwise_max_min_nan_on_either_side(tl_fn, np_fn, dtype, vector):
    a, b = _operands(dtype)
    for fn, ref in (((lambda x, y: tl_fn(x, y)), np_fn(a, b)),
                    ((lambda x, y: tl_fn(y, x)), np_fn(b, a))):
        out = np.zeros(N, dtype)
        _elementwise_kernel(fn, dtype, vector)(a, b, out)
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("const_first", [True, False], ids=["const_first", "const_last"])
def test_max_min_with_a_constant_keep_nan_in_either_order(const_first, vector):
    """relu/clip wrote the bound first because a compare-select kept the NaN only there; no
    rewrite may rely on that order any more."""
    x = tl.placeholder((N,), name="X")
    zero, one = tl.const(0.0, "float32"), tl.const(1.0, "float32")

    def clamp(v):
        lo = tl.max(zero, v) if const_first else tl.max(v, zero)
        return tl.min(one, lo) if const_first else tl.min(lo, one)

    y = tl.compute((N,), lambda i: clamp(x[i]), name="Y")
    s = tl.create_schedule(y)
    if vector:
        _, ii = s[y].split(y.op.axis[0], factor=16)
        s[y].vectorize(ii)
    f = tl.build(s, [x, y])
    xv, _ = _operands("float32")
    out = np.zeros(N, np.float32)
    f(xv, out)
    np.testing.assert_array_equal(out, np.clip(xv, 0.0, 1.0))


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_and_clip_ops_propagate_nan(dtype, vector):
    x = tl.placeholder((N,), name="X", dtype=dtype)
    outs = [tl.ops.relu(x), tl.ops.clip(x, -0.5, 0.5), tl.ops.maximum(x, 0.25)]
    xv, _ = _operands(dtype)
    refs = [np.maximum(xv, 0), np.clip(xv, -0.5, 0.5), np.maximum(xv, dtype and 0.25)]
    for y, ref in zip(outs, refs):
        s = tl.create_schedule(y)
        if vector:
            _, ii = s[y].split(y.op.axis[0], factor=16)
            s[y].vectorize(ii)
        out = np.zeros(N, dtype)
        tl.build(s, [x, y])(xv, out)
        np.testing.assert_array_equal(out, ref.astype(dtype))


# ----------------------------------------------------------------------------- folding, flags


@pytest.mark.parametrize("node", [E.Max, E.Min])
def test_constant_folding_of_nan_does_not_depend_on_operand_order(node):
    nan, one = E.const(math.nan, "float32"), E.const(1.0, "float32")
    for a, b in ((nan, one), (one, nan)):
        folded = simplify(node(a, b))
        assert isinstance(folded, E.Const) and math.isnan(folded.value), folded


def test_constant_folding_of_signed_zeros_does_not_depend_on_operand_order():
    pos, neg = E.const(0.0, "float64"), E.const(-0.0, "float64")
    for node, sign in ((E.Max, 1.0), (E.Min, -1.0)):
        for a, b in ((pos, neg), (neg, pos)):
            assert math.copysign(1.0, simplify(node(a, b)).value) == sign


def test_no_fast_math_flag_can_drop_nan_handling():
    """nnan/ninf/fast would let LLVM turn llvm.maximum back into a plain compare-select."""
    f = _reduce_kernel(tl.max, "float32", _split_vectorize_k)
    ll = f.get_source("ll")
    assert "llvm.maximum" in ll
    for flag in (" nnan ", " ninf ", " fast ", " reassoc "):
        assert flag not in ll, flag


# ----------------------------------------------------------------------------- graph level


def _one_node_model(op, x_shape, opset, extra_inputs=(), **attrs):
    onnx = pytest.importorskip("onnx")
    helper, tp = onnx.helper, onnx.TensorProto
    inputs = [helper.make_tensor_value_info("x", tp.FLOAT, x_shape)]
    inputs += [helper.make_tensor_value_info(n, tp.FLOAT, s) for n, s in extra_inputs]
    node = helper.make_node(op, [i.name for i in inputs], ["y"], **attrs)
    g = helper.make_graph([node], op.lower(), inputs,
                          [helper.make_tensor_value_info("y", tp.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run_graph(model, **feeds):
    from tensorlang import graph

    return graph.build(graph.from_onnx(model)).run(**feeds)["y"]


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_onnx_reduce_max_min_propagate_nan_like_numpy(op):
    """onnxruntime 1.32 keeps the NaN of row 0 only (NaN first); we give numpy's answer."""
    x = _rows_with_nan("float32")
    got = _run_graph(_one_node_model(op, x.shape, 13, axes=[1], keepdims=0), x=x)
    np.testing.assert_array_equal(got, (np.max if op == "ReduceMax" else np.min)(x, axis=1))


def test_onnx_maxpool_propagates_nan_like_numpy():
    """onnxruntime 1.32's MaxPool drops NaN (gives the window's largest number)."""
    x = np.random.default_rng(3).standard_normal((1, 2, 9, 9)).astype(np.float32)
    x[0, 0, 0, 0] = x[0, 0, 4, 7] = x[0, 1, 8, 8] = np.nan
    got = _run_graph(_one_node_model("MaxPool", x.shape, 13, kernel_shape=[3, 3],
                                     strides=[2, 2], pads=[1, 1, 1, 1]), x=x)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    np.testing.assert_array_equal(got, windows[:, :, ::2, ::2].max(axis=(-2, -1)))
    assert np.isnan(got).sum() == 4  # (4, 7) lies in two windows


def test_onnx_max_and_relu_propagate_nan_like_numpy():
    a, b = _operands("float32")
    got = _run_graph(_one_node_model("Max", (N,), 13, extra_inputs=[("b", (N,))]), x=a, b=b)
    np.testing.assert_array_equal(got, np.maximum(a, b))
    got = _run_graph(_one_node_model("Relu", (N,), 14), x=a)
    np.testing.assert_array_equal(got, np.maximum(a, 0))
