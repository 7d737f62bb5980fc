"""Operators added from the scan of onnx's node test cases, second round: RNN, ScatterElements
(and its opset-9 name Scatter), OneHot, BitShift, CumProd, LpPool and GridSample.

Each against every onnx node test case of its name, the inputs that models hold as constants
(an RNN's weights, OneHot's depth, CumProd's axis) given as initializers, and against
onnxruntime on random data with the edge values the operator defines (negative indices,
duplicates, shift counts past the width, empty sequences); refusals with their messages."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from graph_testing import onnx_node_cases
from onnx import helper, numpy_helper
from tensorlang.graph.frontends import onnx_rnn

from tensorlang import graph
from tensorlang import ops as O

ort.set_default_logger_severity(3)

RNG = np.random.default_rng(31)

# ---------------------------------------------------------------------------- onnx node cases

_NAMES = re.compile(r"test_(rnn_|simple_rnn_|scatter_elements_|scatter_with|scatter_without|"
                    r"onehot_|bitshift_|cumprod_|lppool_|gridsample(?!_volumetric))")
# the inputs each case feeds at run time that models hold as constants (and the converters
# need at build time): those become initializers
_CONSTANT_INPUTS = {"W", "R", "B", "depth", "axis"}

# the onnx case modules that hold every case _NAMES matches (graph_testing.onnx_node_cases)
_MODULES = ("bitshift", "cumprod", "gridsample", "lppool", "onehot", "rnn", "scatter",
            "scatterelements")
_CASES = onnx_node_cases(_MODULES, _NAMES)


def _array(v):
    return numpy_helper.to_array(v) if hasattr(v, "dims") else np.asarray(v)


def _with_initializers(model, names: list, inputs: list, constant: set):
    """(a copy of model whose inputs named in ``constant`` are initializers holding their
    values in ``inputs``, the feeds of the other inputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    values = {n: _array(v) for n, v in zip(names, inputs)}
    m.graph.initializer.extend(numpy_helper.from_array(values[n], n) for n in names
                               if n in constant)
    kept = [i for i in m.graph.input if i.name not in constant]
    del m.graph.input[:]
    m.graph.input.extend(kept)
    return m, {n: v for n, v in values.items() if n not in constant}


def _assert_matches(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, \
        (what, got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    scale = max(float(np.abs(want).max(initial=0)), 1e-6)
    assert float(np.abs(got.astype(np.float64) - want).max(initial=0)) <= 1e-5 * scale, what


def test_the_node_cases_are_found():
    names = {c.name for c in _CASES}
    for must in ("test_rnn_seq_length", "test_simple_rnn_bidirectional",
                 "test_scatter_elements_with_reduction_min", "test_scatter_with_axis",
                 "test_onehot_negative_indices", "test_bitshift_right_int8_negative_input",
                 "test_bitshift_left_uint64", "test_cumprod_1d_reverse_exclusive",
                 "test_lppool_2d_same_lower", "test_lppool_3d_default"):
        assert must in names


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_onnx_node_case(case):
    if "bfloat16" in case.name:
        with pytest.raises(graph.OnnxImportError, match="is a bfloat16 tensor, which is not "
                                                        "supported"):
            graph.from_onnx(case.model)
        return
    inits = {x.name for x in case.model.graph.initializer}
    names = [x.name for x in case.model.graph.input if x.name not in inits]
    for inputs, outputs in case.data_sets:
        m, feeds = _with_initializers(case.model, names, inputs, _CONSTANT_INPUTS)
        got = list(graph.build(graph.from_onnx(m)).run(**feeds).values())
        for k, want in enumerate(outputs):
            _assert_matches(got[k], _array(want), f"{case.name} output {k}")


def test_scatter_cases_with_constant_indices():
    """The node cases' indices as initializers: the planned kernels (an index table per data
    cell), where run-time indices go through scatter_nd's comparison."""
    for case in _CASES:
        if not case.name.startswith("test_scatter"):
            continue
        names = [x.name for x in case.model.graph.input]
        inputs, outputs = case.data_sets[0]
        m, feeds = _with_initializers(case.model, names, inputs, {"indices"})
        got = graph.build(graph.from_onnx(m)).run(**feeds)["y"]
        _assert_matches(got, _array(outputs[0]), case.name)


# ---------------------------------------------------------------------------- vs onnxruntime


def _model(op, inputs, opset, n_out=1, consts=(), **attrs):
    """A one-node model; ``inputs`` (name, array) pairs ("" and None: an omitted optional
    input), those named in ``consts`` stored as initializers."""
    node = helper.make_node(op, [n for n, _ in inputs], [f"y{k}" for k in range(n_out)],
                            **attrs)
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in inputs if n and n not in consts]
    inits = [numpy_helper.from_array(a, n) for n, a in inputs if n in consts]
    g = helper.make_graph([node], op, vis, [helper.make_empty_tensor_value_info(f"y{k}")
                                            for k in range(n_out)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _both(op, inputs, opset, n_out=1, consts=(), **attrs):
    """(tensorlang's outputs, onnxruntime's) for a one-node model."""
    m = _model(op, inputs, opset, n_out, consts=consts, **attrs)
    feeds = {n: a for n, a in inputs if n and n not in consts}
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    got = list(graph.build(graph.from_onnx(m)).run(**feeds).values())
    return got, want


def _close(got, want, rtol=1e-5):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * float(np.abs(w).max()))


def _f(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _rnn_inputs(T, B, I, H, dirs, lens=None, h0=True):
    ins = [("x", _f(T, B, I)), ("W", _f(dirs, H, I, scale=0.5)),
           ("R", _f(dirs, H, H, scale=0.5)), ("B", _f(dirs, 2 * H, scale=0.5))]
    ins.append(("lens", lens) if lens is not None else ("", None))
    if h0:
        ins.append(("h0", _f(dirs, B, H)))
    return ins


_RNN_FORMS = [  # direction, activations (+ alpha), clip, lens, layout
    ("forward", None, None, None, 0),
    ("reverse", ["Relu"], 1.5, np.array([3, 0, 5], np.int32), 0),
    ("bidirectional", ["Tanh", "LeakyRelu"], None, np.array([5, 2, 4], np.int32), 0),
    ("bidirectional", ["Sigmoid", "HardSigmoid"], 2.0, None, 1),
]


@pytest.mark.parametrize("form", range(len(_RNN_FORMS)))
def test_rnn_matches_onnxruntime(form):
    """One kernel for the recurrence; sequence_lens a constant and a run-time input (a length
    0 included: onnxruntime's final state 0, Y 0); layout 1 ([B, T, ...], which onnxruntime
    refuses) against onnxruntime's layout 0, transposed."""
    direction, acts, clip, lens, layout = _RNN_FORMS[form]
    dirs, H = (2 if direction == "bidirectional" else 1), 16
    ins = _rnn_inputs(5, 3, 4, H, dirs, lens)
    attrs = {"hidden_size": H, "direction": direction}
    if acts:
        attrs["activations"] = acts
    if clip:
        attrs["clip"] = clip
    for consts in (("W", "R", "B"), ("W", "R", "B", "lens")):
        if consts[-1] == "lens" and lens is None:
            continue
        if not layout:
            got, want = _both("RNN", ins, 13, 2, consts=consts, **attrs)
            _close(got, want)
            continue
        _, want = _both("RNN", ins, 14, 2, consts=consts, **attrs)
        batch_first = [(n, np.ascontiguousarray(a.transpose(1, 0, 2)) if n in ("x", "h0")
                        else a) for n, a in ins]
        m = _model("RNN", batch_first, 14, 2, consts=consts, layout=1, **attrs)
        assert "rnn_recurrence" in _ops(m)
        got = list(graph.build(graph.from_onnx(m)).run(
            **{n: a for n, a in batch_first if n and n not in consts}).values())
        _close([got[0].transpose(1, 2, 0, 3), got[1].transpose(1, 0, 2)], want)


def _ops(model) -> list[str]:
    return [n.op for n in graph.from_onnx(model).nodes]


def test_rnn_unrolled_form_matches_onnxruntime(monkeypatch):
    """benchmarks/rnn.py's unrolled form (one_kernel replaced): the same results."""
    monkeypatch.setattr(onnx_rnn, "one_kernel", lambda rnn: False)
    ins = _rnn_inputs(4, 3, 4, 5, 2, np.array([4, 1, 0], np.int32))
    attrs = {"hidden_size": 5, "direction": "bidirectional", "activations": ["Tanh", "Relu"]}
    m = _model("RNN", ins, 14, 2, consts=("W", "R", "B", "lens"), **attrs)
    assert "rnn_recurrence" not in _ops(m)
    got, want = _both("RNN", ins, 14, 2, consts=("W", "R", "B", "lens"), **attrs)
    _close(got, want)


@pytest.mark.parametrize(("reduction", "axis", "constant"), [
    ("none", 0, True), ("none", -1, False), ("add", 1, True), ("add", 2, False),
    ("mul", 0, False), ("max", 1, True), ("min", -2, False)])
def test_scatter_elements_matches_onnxruntime(reduction, axis, constant):
    """Negative indices and (with a reduction) duplicates; indices known at build time (the
    planned kernels) and at run time."""
    data = _f(3, 4, 5)
    ax = axis % 3
    n, shape = data.shape[ax], [2, 3, 4]
    shape[ax] = 3
    if reduction == "none":  # distinct targets along the axis (duplicates: undefined order)
        lines = [s for j, s in enumerate(shape) if j != ax]
        idx = np.moveaxis(np.argsort(RNG.random((*lines, n)), -1)[..., :3], -1, ax)
        idx = np.where(RNG.random(shape) < 0.5, idx - n, idx).astype(np.int64)
    else:
        idx = RNG.integers(-n, n, size=shape).astype(np.int64)
    upd = _f(*idx.shape)
    ins = [("data", data), ("idx", idx), ("upd", upd)]
    got, want = _both("ScatterElements", ins, 18, consts=("idx",) if constant else (),
                      axis=axis, reduction=reduction)
    _close(got, want)


def test_scatter_elements_integers_and_scatter_9():
    data = RNG.integers(-50, 50, size=(4, 3)).astype(np.int32)
    idx = np.array([[3, -4, 1], [0, 2, -1]], np.int64)
    upd = RNG.integers(-50, 50, size=(2, 3)).astype(np.int32)
    for op, opset in (("ScatterElements", 11), ("Scatter", 9)):
        got, want = _both(op, [("data", data), ("idx", idx), ("upd", upd)], opset, axis=0)
        np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize(("axis", "idx_dtype", "values", "depth"), [  # onnxruntime's types
    (-1, np.int64, np.array([0.0, 1.0], np.float32), np.int64),
    (0, np.int32, np.array([-1.5, 2.5], np.float32), np.float32),
    (1, np.float32, np.array([-1.5, 2.5], np.float32), np.float32),
    (-2, np.int64, np.array([3, -7], np.int32), np.float32),
    (2, np.int64, np.array([3, -7], np.int64), np.int64)])
def test_one_hot_matches_onnxruntime(axis, idx_dtype, values, depth):
    """Indices past the depth either way: a row of off values; negative ones wrap."""
    n = 6
    idx = RNG.integers(-n - 2, n + 2, size=(3, 4)).astype(idx_dtype)
    got, want = _both("OneHot", [("idx", idx), ("depth", np.array(n, depth)),
                                 ("values", values)], 11, consts=("depth",), axis=axis)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0].dtype == values.dtype


def test_one_hot_of_unsigned_indices_matches_onnx_reference():
    """(onnxruntime has no kernel for uint8 indices: onnx's reference evaluator)"""
    from onnx.reference import ReferenceEvaluator

    idx = RNG.integers(0, 9, size=(2, 5)).astype(np.uint8)
    values = np.array([4, -2], np.int16)
    m = _model("OneHot", [("idx", idx), ("depth", np.array(7, np.int64)),
                          ("values", values)], 11, consts=("depth",), axis=0)
    want = ReferenceEvaluator(m).run(None, {"idx": idx, "values": values})
    got = graph.build(graph.from_onnx(m)).run(idx=idx, values=values)
    np.testing.assert_array_equal(got["y0"], want[0])


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64", "int8", "int16",
                                   "int32", "int64"])
def test_bit_shift_matches_onnxruntime(dtype):
    """Counts past the width (and, signed, negative ones): 0, or -1 for a right shift of a
    negative x (opset 28's rule; unsigned types at opset 11 too)."""
    info, bits = np.iinfo(dtype), np.dtype(dtype).itemsize * 8
    x = RNG.integers(info.min, info.max, size=(3, 8), endpoint=True, dtype=dtype)
    x[0, :2] = info.min, info.max
    y = RNG.integers(max(info.min, -3), bits + 3, size=(8,), endpoint=True).astype(dtype)
    for direction in ("LEFT", "RIGHT"):
        for opset in ((11, 28) if info.min == 0 else (28,)):
            got, want = _both("BitShift", [("x", x), ("y", y)], opset, direction=direction)
            np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize(("dtype", "axis", "exclusive", "reverse"), [
    ("float32", 1, 0, 0), ("float32", 0, 1, 1), ("float64", -1, 1, 0), ("int32", 1, 0, 1),
    ("int64", 0, 1, 0)])
def test_cumprod_matches_onnxruntime(dtype, axis, exclusive, reverse):
    x = (RNG.random((4, 7)) + 0.5).astype(dtype) if dtype.startswith("float") else \
        RNG.integers(-3, 4, size=(4, 7)).astype(dtype)
    got, want = _both("CumProd", [("x", x), ("axis", np.array(axis, np.int32))], 26,
                      consts=("axis",), exclusive=exclusive, reverse=reverse)
    _close(got, want)


@pytest.mark.parametrize(("shape", "attrs"), [
    ((1, 3, 9), {"kernel_shape": [3], "strides": [2], "p": 1}),
    ((2, 2, 7, 8), {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1], "p": 2}),
    ((1, 2, 7, 8), {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER",
                    "p": 3}),
    ((1, 2, 8, 7), {"kernel_shape": [3, 3], "strides": [2, 3], "ceil_mode": 1,
                    "dilations": [2, 1], "pads": [1, 1, 0, 0], "p": 4}),
    ((1, 1, 4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "p": 2}),
])
def test_lp_pool_matches_onnxruntime(shape, attrs):
    """(sum |x|^p)^(1/p) over each window, the padding and ceil_mode's partial windows
    adding 0 (no divisor)."""
    got, want = _both("LpPool", [("x", _f(*shape))], 22, **attrs)
    _close(got, want, rtol=2e-5)


# ---------------------------------------------------------------------------- refusals


def _refused(op, inputs, opset, consts, match, **attrs):
    with pytest.raises(graph.OnnxImportError, match=match):
        graph.from_onnx(_model(op, inputs, opset, consts=consts, **attrs))


# opset 16 differs only in the modes' names (the same kernels): slow
@pytest.mark.parametrize("opset", [pytest.param(16, marks=pytest.mark.slow), 20])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_matches_onnxruntime(mode, opset):
    """Every padding mode and align_corners, coordinates reaching past the image on every
    side (a grid in [-1.6, 1.6]), opset 16's mode names and 20's. Cubic with border padding
    clamps each tap as onnxruntime (and torch) do; onnx's reference clamps the coordinate."""
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = (RNG.random((2, 4, 7, 2)) * 3.2 - 1.6).astype(np.float32)
    name = {16: {"linear": "bilinear", "cubic": "bicubic"}}.get(opset, {}).get(mode, mode)
    for padding in ("zeros", "border", "reflection"):
        for align in (0, 1):
            m = _model("GridSample", [("x", x), ("g", grid)], opset, mode=name,
                       padding_mode=padding, align_corners=align)
            want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x, "g": grid})
            got = graph.build(graph.from_onnx(m)).run(x=x, g=grid)["y0"]
            _assert_matches(got, want[0], f"{mode} {padding} align_corners={align}")


def test_refusals_name_the_problem():
    f, i = np.zeros((3, 4), np.float32), np.zeros((2, 4), np.int64)
    _refused("ScatterElements", [("d", f), ("i", np.array([[5]])), ("u", f[:1, :1])], 18,
             ("i",), r"update 0 has index \[5, 0\], outside the data's \[3, 4\]")
    _refused("ScatterElements", [("d", f), ("i", i), ("u", f[:1])], 18, (),
             r"indices \[2, 4\] and updates \[1, 4\] do not fit data \[3, 4\]")
    _refused("ScatterElements", [("d", f), ("i", i), ("u", f[:2])], 13, (),
             r"reduction='add' is not one of none", reduction="add")
    _refused("Scatter", [("d", f), ("i", i), ("u", f[:2])], 11, (),
             "Scatter is deprecated from opset 11")
    _refused("OneHot", [("i", i), ("d", np.array(3)), ("v", np.zeros(2, np.float32))], 11,
             (), r"depth \(the size of the one-hot axis\) must be known at compile time")
    _refused("OneHot", [("i", i), ("d", np.array(0)), ("v", np.zeros(2, np.float32))], 11,
             ("d",), "depth must be positive, got 0")
    _refused("OneHot", [("i", i), ("d", np.array(3)), ("v", np.zeros(3, np.float32))], 11,
             ("d",), r"values must be \[off, on\] \(shape \[2\]\), got \[3\]")
    _refused("BitShift", [("x", i), ("y", i)], 11, (),
             "int64 input: signed integers need opset 28", direction="LEFT")
    _refused("BitShift", [("x", i), ("y", i)], 28, (),
             "direction must be 'LEFT' or 'RIGHT', got 'UP'", direction="UP")
    _refused("CumProd", [("x", f), ("a", np.array(2))], 26, ("a",),
             "axis 2 is out of range for rank 2")
    _refused("LpPool", [("x", np.zeros((1, 1, 4, 4), np.float32))], 22, (),
             "p must be a positive number, got 0", kernel_shape=[2, 2], p=0)
    x4, g4 = np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 2, 2, 2), np.float32)
    _refused("GridSample", [("x", x4), ("g", g4)], 20, (),
             r"mode 'bilinear' is not one of linear, nearest, cubic \(opset 20\)",
             mode="bilinear")
    _refused("GridSample", [("x", x4), ("g", g4)], 16, (),
             "padding_mode 'wrap' is not zeros, border or reflection", padding_mode="wrap")
    _refused("GridSample", [("x", np.zeros((1, 1, 2, 4, 4), np.float32)),
                            ("g", np.zeros((1, 2, 2, 2, 3), np.float32))], 20, (),
             r"only 4-D input \(N, C, H, W\) is supported, got float32\[1, 1, 2, 4, 4\] "
             r"\(volumetric sampling is not\)")


def test_rnn_refusals_name_the_problem():
    ins = _rnn_inputs(3, 2, 4, 5, 1, h0=False)[:4]
    _refused("RNN", ins, 14, ("R", "B"), r"input W \('W'\) must be a constant")
    _refused("RNN", ins, 14, ("W", "R", "B"), r"activations \['Tanh', 'Relu'\] must name 1 "
             "functions per direction", activations=["Tanh", "Relu"])
    _refused("RNN", ins, 14, ("W", "R", "B"), "activation 'Gelu' is not supported",
             activations=["Gelu"])


def test_library_ops_check_their_arguments():
    import tensorlang as tl

    f = tl.placeholder((4,), dtype="float32", name="f")
    b = tl.placeholder((4,), dtype="bool", name="b")
    with pytest.raises(ValueError, match="left_shift: operands must be integer tensors, "
                                         "got float32"):
        O.left_shift(f, f)
    with pytest.raises(ValueError, match="cumprod: x must be numeric, got bool"):
        O.cumprod(b)
    with pytest.raises(ValueError, match="cumprod: exclusive must be a bool, got 1"):
        O.cumprod(f, 0, exclusive=1)
