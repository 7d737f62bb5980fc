"""Every version of every supported ONNX operator, against onnxruntime.

For each operator the importer supports and each version its schema history lists
(``onnx.defs.get_all_schemas_with_history()``), a one-node model at that opset (a version
older than :data:`MIN_OPSET` is the one in force at MIN_OPSET) with generated inputs, written in
that version's form (attributes that later became inputs, Softmax's 2-D coercion before 13,
...), imported, built and compared with onnxruntime (fp32 within 1e-5 of the output's largest
magnitude; the same dtype and shape). Where onnxruntime has no kernel for a version (several
opset-6 ones), onnx's reference evaluator is the reference; skipped only when both refuse. Operators whose versions are covered by their own test files are listed in
``COVERED_ELSEWHERE``; an operator in neither place fails ``test_every_operator_is_covered``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx.defs
import onnxruntime as ort
import pytest
from graph_testing import assert_close
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from tensorlang.graph.frontends.onnx import (
    CONVERTERS,
    operators_markdown,
    supported_versions,
)

from tensorlang import graph

ort.set_default_logger_severity(3)

# operators with subgraphs, or whose outputs this walk cannot compare (Dropout's mask differs
# from onnxruntime's by design), tested in files of their own; the modes of every operator
# are tested in its family's file (test_ops_vision.py, test_ops_misc.py, test_rnn.py...)
COVERED_ELSEWHERE = {
    "If": "tests/graph/test_control_flow.py", "Loop": "tests/graph/test_control_flow.py",
    "Scan": "tests/graph/test_control_flow.py",
    "Dropout": "tests/graph/test_onnx_import_pipeline.py",
    **{op: "tests/graph/test_quantized_ops.py" for op in (
        "QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "MatMulInteger",
        "ConvInteger", "DynamicQuantizeLinear")},
}

RNG = np.random.default_rng(7)


def _f(*shape, low=None):
    x = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(x) + 0.1 if low == "pos" else x


def _i(*vals):
    return np.array(vals, np.int64)


@dataclass
class Case:
    """A one-node model: ``inputs`` (name, array, is_constant), "" names an omitted optional
    input; ``attrs``; ``outputs`` its output count."""
    inputs: list
    attrs: dict = field(default_factory=dict)
    outputs: int = 1


def _x(arr, name="x"):
    return (name, arr, False)


def _c(arr, name):
    return (name, arr, True)


SKIP = ("", None, True)

# ---------------------------------------------------------------------------- the cases

_UNARY_POS = {"Log", "Sqrt", "Reciprocal", "Acosh"}
_UNARY_UNIT = {"Asin", "Acos", "Atanh"}  # defined on (-1, 1)
_UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Floor", "Ceil",
          "Reciprocal", "Erf", "Softplus", "Softsign", "HardSwish", "Sin", "Cos", "Tan",
          "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Round", "Sign",
          "Mish"]
_BITWISE = ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]
_BINARY = ["Add", "Sub", "Mul", "Div"]
_COMPARE = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]
_LOGICAL = ["And", "Or", "Xor"]
_NARY = ["Sum", "Mean", "Max", "Min"]
_REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def _unary(op, v):
    x = _f(2, 3, 4, low="pos" if op in _UNARY_POS else None)
    if op in _UNARY_UNIT:
        x = np.tanh(x)
    elif op == "Acosh":
        x = x + 1  # defined from 1
    elif op == "Round":
        x = np.round(x * 4) / 2  # halves: ties to even
    elif op == "Sign":
        x[0, 0, :2] = 0.0, -0.0
    return Case([_x(x)])


def _bitwise(op, v):
    def ints(*shape):
        return RNG.integers(-2**31, 2**31 - 1, size=shape, dtype=np.int64).astype(np.int32)

    if op == "BitwiseNot":
        return Case([_x(ints(2, 3, 4))])
    return Case([_x(ints(2, 3, 4)), _x(ints(3, 1), "y")])


def _binary(op, v):
    if v < 7:  # no multidirectional broadcasting: the legacy broadcast=1, axis=1 form
        return Case([_x(_f(2, 3, 4)), _x(_f(3), "y")], {"broadcast": 1, "axis": 1})
    return Case([_x(_f(2, 3, 4)), _x(_f(3, 1), "y")])


def _compare(op, v):
    a = np.round(_f(2, 3, 4))
    b = np.round(_f(3, 4)) if v >= 7 else np.round(_f(2, 3, 4))
    if op == "Equal" and v < 11:  # floats from 11
        a, b = a.astype(np.int32), b.astype(np.int32)
    return Case([_x(a), _x(b, "y")])


def _logical(op, v):
    a, b = RNG.random((2, 3, 4)) > 0.5, RNG.random((3, 4) if v >= 7 else (2, 3, 4)) > 0.5
    return Case([_x(a), _x(b, "y")])


def _nary(op, v):
    shapes = [(2, 3, 4)] * 3 if v < 8 else [(2, 3, 4), (3, 4), (1, 4)]
    return Case([_x(_f(*s), f"x{k}") for k, s in enumerate(shapes)])


def _reduce(op, v):
    x = _f(2, 3, 4, low="pos")
    if (op == "ReduceSum" and v >= 13) or v >= 18:
        return Case([_x(x), _c(_i(1, -1), "axes")], {"keepdims": 0})
    return Case([_x(x)], {"axes": [1, -1], "keepdims": 0})


def _clip(op, v):
    if v < 11:
        return Case([_x(_f(2, 3, 4))], {"min": -0.5, "max": 0.7})
    return Case([_x(_f(2, 3, 4)), _c(np.float32(-0.5), "lo"), _c(np.float32(0.7), "hi")])


def _conv(op, v):
    w = _f(4, 3, 3, 3)
    return Case([_x(_f(1, 3, 7, 7)), _c(w, "w"), _c(_f(4), "b")],
                {"strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2]})


def _gemm(op, v):
    attrs = {"alpha": 0.5, "beta": 2.0, "transB": 1}
    if v < 7:
        attrs["broadcast"] = 1
    return Case([_x(_f(3, 5)), _c(_f(4, 5), "w"), _c(_f(4), "b")], attrs)


def _pool(op, v):
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    if op == "AveragePool" and v >= 7:
        attrs["count_include_pad"] = 1
    if op == "AveragePool" and v < 7:
        # version 1 excludes the pads from the count (its spec); onnxruntime has no kernel
        # for it and onnx's reference evaluator counts them: compared without pads
        attrs["pads"] = [0, 0, 0, 0]
    if v >= 10:
        attrs["ceil_mode"] = 1
    if (op == "MaxPool" and v >= 10) or (op == "AveragePool" and v >= 19):
        attrs["dilations"] = [1, 2]
    return Case([_x(_f(1, 2, 8, 9))], attrs)


def _batch_norm(op, v):
    ins = [_x(_f(2, 3, 4, 5)), _c(_f(3), "s"), _c(_f(3), "b"), _c(_f(3), "m"),
           _c(_f(3, low="pos"), "var")]
    attrs = {"epsilon": 1e-3}
    if v < 7:
        attrs["is_test"] = 1
    return Case(ins, attrs)


def _softmax(op, v):
    return Case([_x(_f(2, 3, 4))], {"axis": 1})  # 2-D coercion before 13, one axis from 13


def _arg(op, v):
    x = np.round(_f(3, 4, 5))  # ties: first (or last) index
    attrs = {"axis": -1 if v >= 11 else 2, "keepdims": 0}
    if v >= 12:
        attrs["select_last_index"] = 1
    return Case([_x(x)], attrs)


def _reshape(op, v):
    attrs = {"allowzero": 0} if v >= 14 else {}
    return Case([_x(_f(2, 3, 4)), _c(_i(0, -1, 2), "shape")], attrs)


def _flatten(op, v):
    return Case([_x(_f(2, 3, 4))], {"axis": -1 if v >= 11 else 2})


def _squeeze(op, v):
    x = _f(2, 1, 4, 1)
    if v >= 13:
        return Case([_x(x), _c(_i(-1, 1), "axes")])
    return Case([_x(x)], {"axes": [3, 1] if v < 11 else [-1, 1]})


def _unsqueeze(op, v):
    x = _f(2, 4)
    if v >= 13:
        return Case([_x(x), _c(_i(-1, 1), "axes")])
    return Case([_x(x)], {"axes": [1, 3] if v < 11 else [1, -1]})


def _transpose(op, v):
    return Case([_x(_f(2, 3, 4))], {"perm": [1, 2, 0]})


def _concat(op, v):
    return Case([_x(_f(2, 3, 4)), _x(_f(2, 1, 4), "y")], {"axis": -2 if v >= 11 else 1})


def _split(op, v):
    x = _f(2, 7, 3)
    if v >= 18:
        return Case([_x(x)], {"axis": 1, "num_outputs": 3}, outputs=3)
    if v >= 13:
        return Case([_x(x), _c(_i(2, 4, 1), "split")], {"axis": 1}, outputs=3)
    return Case([_x(x)], {"axis": 1, "split": [2, 4, 1]}, outputs=3)


def _slice(op, v):
    x = _f(4, 6, 5)
    if v < 10:
        return Case([_x(x)], {"starts": [1, 0], "ends": [3, 100], "axes": [0, 2]})
    return Case([_x(x), _c(_i(1, -1), "st"), _c(_i(3, -6), "en"), _c(_i(0, 1), "ax"),
                 _c(_i(1, -2), "sp")])


def _pad(op, v):
    x = _f(2, 3, 4)
    if v < 2:
        return Case([_x(x)], {"paddings": [0, 1, 2, 0, 2, 1], "value": 0.5})
    if v < 11:
        return Case([_x(x)], {"pads": [0, 1, 2, 0, 2, 1], "mode": "reflect"})
    if v >= 18:
        return Case([_x(x), _c(_i(1, 2, 2, 1), "pads"), _c(np.float32(0.5), "cv"),
                     _c(_i(1, -1), "axes")])
    return Case([_x(x), _c(_i(0, 1, 2, 0, 2, 1), "pads")], {"mode": "edge"})


def _gather(op, v):
    idx = _i(2, 0, 1) if v < 11 else _i(-1, 0, 2, -3)  # negative indices from 11
    return Case([_x(_f(3, 4)), _c(idx, "idx")], {"axis": 0})


def _expand(op, v):
    return Case([_x(_f(3, 1)), _c(_i(2, 3, 4), "shape")])


def _tile(op, v):
    return Case([_x(_f(2, 3)), _c(_i(2, 1), "reps")])


def _d2s(op, v):
    attrs = {"blocksize": 2}
    if v >= 11:
        attrs["mode"] = "CRD"
    return Case([_x(_f(1, 8, 2, 3))], attrs)


def _shape(op, v):
    attrs = {"start": 1, "end": -1} if v >= 15 else {}
    return Case([_x(_f(2, 3, 4, 5))], attrs)


def _constant(op, v):
    if v >= 12:
        return Case([], {"value_floats": [1.5, -2.0, 3.0]})
    return Case([], {"value": numpy_helper.from_array(_f(2, 3), "v")})


def _const_of_shape(op, v):
    return Case([_c(_i(2, 3), "shape")],
                {"value": numpy_helper.from_array(np.array([1.5], np.float32), "v")})


def _range(op, v):
    return Case([_c(np.float32(1.0), "s"), _c(np.float32(4.0), "l"), _c(np.float32(0.5), "d")])


def _cast(op, v):
    return Case([_x(_f(2, 3) * 10)], {"to": onnx.TensorProto.INT32})


def _where(op, v):
    return Case([_x(RNG.random((3, 1)) > 0.5, "c"), _x(_f(3, 4)), _x(_f(1, 4), "y")])


def _prelu(op, v):
    slope = _f(3, 1, 1)  # per channel (onnxruntime refuses a (3,) slope: unidirectional)
    return Case([_x(_f(2, 3, 4, 5)), _c(slope, "slope")])


def _pow(op, v):
    if v < 7:
        return Case([_x(_f(2, 3, low="pos")), _x(_f(2, 3), "y")])
    return Case([_x(_f(2, 3, low="pos")), _x(_f(3), "y")])


def _matmul(op, v):
    return Case([_x(_f(2, 3, 4)), _x(_f(2, 4, 5), "y")])


def _layer_norm(op, v):
    return Case([_x(_f(2, 3, 4)), _c(_f(3, 4), "s"), _c(_f(3, 4), "b")], {"axis": -2})


def _instance_norm(op, v):
    return Case([_x(_f(2, 3, 4, 5)), _c(_f(3), "s"), _c(_f(3), "b")], {"epsilon": 1e-3})


def _lrn(op, v):
    return Case([_x(_f(1, 5, 3, 3))], {"size": 3, "alpha": 0.02, "beta": 0.6, "bias": 1.5})


def _attr_unary(attrs):
    return lambda op, v: Case([_x(_f(2, 3, 4))], attrs)


def _identity(op, v):
    return Case([_x(_f(2, 3))])


def _size(op, v):
    return Case([_x(_f(2, 3, 4))])


def _not(op, v):
    return Case([_x(RNG.random((2, 3)) > 0.5)])


def _is_nan_inf(op, v):
    x = _f(2, 5)
    x[0, 1], x[1, 2], x[1, 4] = np.nan, np.inf, -np.inf
    return Case([_x(x)], {"detect_negative": 0} if op == "IsInf" else {})


def _mod(op, v):
    return Case([_x(_f(2, 3) * 5), _c(np.array([1.5, -2.0, 3.0], np.float32), "d")],
                {"fmod": 1})


def _cumsum(op, v):
    return Case([_x(_f(3, 4)), _c(np.array(1, np.int64), "axis")], {"exclusive": 1,
                                                                     "reverse": 1})


def _rnn(op, v):
    gates, hidden = (4 if op == "LSTM" else 3), 5
    ins = [_x(_f(3, 2, 4)), _c(_f(1, gates * hidden, 4) * 0.5, "w"),
           _c(_f(1, gates * hidden, hidden) * 0.5, "r"), _c(_f(1, 2 * gates * hidden), "b")]
    attrs = {"hidden_size": hidden}
    if op == "GRU" and v >= 7:
        attrs["linear_before_reset"] = 1
    return Case(ins, attrs, outputs=2)


def _vanilla_rnn(op, v):
    ins = [_x(_f(4, 2, 3)), _c(_f(2, 5, 3) * 0.5, "w"), _c(_f(2, 5, 5) * 0.5, "r"),
           _c(_f(2, 10), "b")]
    return Case(ins, {"hidden_size": 5, "direction": "bidirectional",
                      "activations": ["Tanh", "Relu"]}, outputs=2)


def _scatter_elements(op, v):
    idx = _i(1, 0, -1, 2, 0, 3).reshape(2, 3)
    attrs = {"axis": 1} if v < 18 else {"axis": 1, "reduction": "max"}
    if 16 <= v < 18:
        attrs["reduction"] = "add"
    return Case([_x(_f(3, 4)), ("idx", idx, v >= 13), _x(_f(2, 3), "upd")], attrs)


def _one_hot(op, v):
    idx = _i(0, 3, -1, 5, -4, 2).reshape(2, 3)  # 5: out of range (a row of off values)
    return Case([_x(idx, "idx"), _c(np.array(4, np.int64), "depth"),
                 _c(np.array([-1.0, 2.5], np.float32), "values")], {"axis": 1})


def _bit_shift(op, v):
    dtype = np.uint16 if v < 28 else np.int16  # signed from 28
    x = RNG.integers(-300 if v >= 28 else 0, 300, size=(3, 4)).astype(dtype)
    y = RNG.integers(0, 18, size=(4,)).astype(dtype)
    return Case([_x(x), _x(y, "y")], {"direction": "RIGHT"})


def _lp_pool(op, v):
    attrs = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "p": 3}
    if v >= 18:
        attrs.update(ceil_mode=1, dilations=[1, 2])
    return Case([_x(_f(1, 2, 6, 7))], attrs)


def _topk(op, v):
    x = _f(3, 7)
    if v < 10:
        return Case([_x(x)], {"k": 3, "axis": 1}, outputs=2)
    attrs = {"axis": -1, "largest": 0, "sorted": 1} if v >= 11 else {"axis": 1}
    return Case([_x(x), _c(_i(3), "k")], attrs, outputs=2)


def _conv_transpose(op, v):
    return Case([_x(_f(1, 4, 5, 6)), _c(_f(4, 3, 3, 3), "w"), _c(_f(3), "b")],
                {"strides": [2, 1], "pads": [1, 0, 1, 1], "output_padding": [1, 0]})


def _upsample(op, v):
    if v < 7:
        return Case([_x(_f(1, 2, 3, 4))], {"height_scale": 2.0, "width_scale": 3.0})
    if v < 9:
        return Case([_x(_f(1, 2, 3, 4))], {"scales": [1.0, 1.0, 2.0, 3.0]})
    return Case([_x(_f(1, 2, 3, 4)), _c(np.array([1, 1, 2, 3], np.float32), "s")])


def _resize(op, v):
    x = _f(1, 2, 4, 5)
    scales = _c(np.array([1, 1, 1.5, 2], np.float32), "scales")
    if v < 11:
        return Case([_x(x), scales], {"mode": "linear"})
    roi = ("", None, True) if v >= 13 else _c(np.zeros(0, np.float32), "roi")
    return Case([_x(x), roi, scales], {"mode": "linear",
                                       "coordinate_transformation_mode": "half_pixel"})


def _gather_nd(op, v):
    idx = _i(1, 0, 2, 1, 0, 0).reshape(3, 2)
    return Case([_x(_f(3, 4, 2)), _c(idx, "idx")])


def _gather_elements(op, v):
    idx = _i(1, 0, 2, -1, 0, 3, 2, 2).reshape(2, 4)
    return Case([_x(_f(3, 4)), ("idx", idx, False)], {"axis": 1})  # run-time indices


def _scatter_nd(op, v):
    idx = _i(2, 0).reshape(2, 1)
    attrs = {"reduction": "add"} if v >= 16 else {}
    return Case([_x(_f(4, 3)), _c(idx, "idx"), _x(_f(2, 3), "upd")], attrs)


def _group_norm(op, v):
    return Case([_x(_f(2, 6, 3, 2)), _c(_f(6 if v >= 21 else 3), "s"),
                 _c(_f(6 if v >= 21 else 3), "b")], {"num_groups": 3, "epsilon": 1e-3})


CASES = {
    **{op: _unary for op in _UNARY}, **{op: _binary for op in _BINARY},
    **{op: _compare for op in _COMPARE}, **{op: _logical for op in _LOGICAL},
    **{op: _nary for op in _NARY}, **{op: _reduce for op in _REDUCE},
    "Clip": _clip, "Conv": _conv, "Gemm": _gemm, "MaxPool": _pool, "AveragePool": _pool,
    "GlobalAveragePool": lambda op, v: Case([_x(_f(1, 3, 4, 5))]),
    "GlobalMaxPool": lambda op, v: Case([_x(_f(1, 3, 4, 5))]),
    "BatchNormalization": _batch_norm, "Softmax": _softmax, "LogSoftmax": _softmax,
    "ArgMax": _arg, "ArgMin": _arg, "Reshape": _reshape, "Flatten": _flatten,
    "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Transpose": _transpose, "Concat": _concat,
    "Split": _split, "Slice": _slice, "Pad": _pad, "Gather": _gather, "Expand": _expand,
    "Tile": _tile, "DepthToSpace": _d2s, "Shape": _shape, "Size": _size,
    "Constant": _constant, "ConstantOfShape": _const_of_shape, "Range": _range, "Cast": _cast,
    "Where": _where, "PRelu": _prelu, "Pow": _pow, "MatMul": _matmul,
    "LayerNormalization": _layer_norm, "InstanceNormalization": _instance_norm, "LRN": _lrn,
    "LeakyRelu": _attr_unary({"alpha": 0.2}), "Elu": _attr_unary({"alpha": 0.7}),
    "Selu": _attr_unary({"alpha": 1.5, "gamma": 1.1}),
    "HardSigmoid": _attr_unary({"alpha": 0.3, "beta": 0.4}),
    "Gelu": _attr_unary({"approximate": "tanh"}), "Identity": _identity, "Not": _not,
    "IsNaN": _is_nan_inf, "IsInf": _is_nan_inf, "Mod": _mod, "CumSum": _cumsum,
    "LSTM": _rnn, "GRU": _rnn, "RNN": _vanilla_rnn, "TopK": _topk, "ConvTranspose": _conv_transpose,
    "Col2Im": lambda op, v: Case([_x(_f(1, 12, 4)), _c(np.array([5, 4], np.int64), "image"),
                                  _c(np.array([2, 2], np.int64), "block")],
                                 {"strides": [2, 2], "pads": [0, 0, 0, 1]}),
    "Einsum": lambda op, v: Case([_x(_f(2, 3, 4)), _x(_f(2, 4, 5), "y")],
                                 {"equation": "bij,bjk->bik"}),
    "Upsample": _upsample, "Resize": _resize, "GatherND": _gather_nd, "ScatterND": _scatter_nd,
    "GatherElements": _gather_elements,
    "SpaceToDepth": lambda op, v: Case([_x(_f(1, 2, 4, 6))], {"blocksize": 2}),
    "GroupNormalization": _group_norm,
    "Trilu": lambda op, v: Case([_x(_f(2, 4, 5)), _c(np.array(-1, np.int64), "k")],
                                {"upper": 0}),
    **{op: _bitwise for op in _BITWISE + ["BitwiseNot"]},
    "ThresholdedRelu": _attr_unary({"alpha": 0.3}),
    "Shrink": _attr_unary({"lambd": 0.4, "bias": 0.1}),
    "CastLike": lambda op, v: Case([_x(_f(2, 3) * 10), _c(np.zeros(1, np.int32), "like")]),
    "EyeLike": lambda op, v: Case([_x(_f(3, 4))], {"k": 1, "dtype": onnx.TensorProto.INT32}),
    "Hardmax": lambda op, v: Case([_x(_f(2, 3, 4))], {"axis": 1}),  # 2-D coercion before 13
    "LpNormalization": lambda op, v: Case([_x(_f(2, 3, 4))], {"axis": 1, "p": 1}),
    "MeanVarianceNormalization": lambda op, v: Case([_x(_f(2, 3, 4, 5))]),
    "ScatterElements": _scatter_elements, "Scatter": _scatter_elements, "OneHot": _one_hot,
    "BitShift": _bit_shift, "CumProd": _cumsum, "LpPool": _lp_pool,
    "GridSample": lambda op, v: Case([_x(_f(1, 2, 4, 5)), _x(_f(1, 3, 3, 2) * 0.8, "grid")],
                                     {"mode": "nearest" if v < 20 else "cubic",
                                      "padding_mode": "reflection", "align_corners": 1}),
}




@contextlib.contextmanager
def _schemas_listed_once():
    """supported_versions lists every schema of onnx's history for each operator it is asked
    about (onnx.defs.get_all_schemas_with_history(), 25-40 ms a call: ~4 s for the ~150
    operators, at every collection); the list is the same on every call, so inside this block
    it is made once."""
    schemas = onnx.defs.get_all_schemas_with_history()
    real = onnx.defs.get_all_schemas_with_history
    onnx.defs.get_all_schemas_with_history = lambda: schemas
    try:
        yield
    finally:
        onnx.defs.get_all_schemas_with_history = real


def _params():
    """(op, opset) for every version; the versions between an operator's oldest and newest
    are marked slow (the full walk takes about a minute, the ends about half of it)."""
    out = []
    with _schemas_listed_once():
        for op in sorted(CASES):
            if op not in CONVERTERS:
                continue
            versions = supported_versions(op)
            for v in versions:
                marks = [] if v in (versions[0], versions[-1]) else [pytest.mark.slow]
                out.append(pytest.param(op, v, marks=marks, id=f"{op}-{v}"))
    return out


PARAMS = _params()


def _model(op: str, opset: int, case: Case):
    names = [n for n, _, _ in case.inputs]
    outs = [f"out{k}" for k in range(case.outputs)]
    node = helper.make_node(op, names, outs, **case.attrs)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                            a.shape)
              for n, a, const in case.inputs if n and not const]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a, const in case.inputs
             if n and const]
    g = helper.make_graph([node], f"{op}_{opset}", inputs,
                          [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    return m


def _reference(m, feeds):
    """onnxruntime's outputs; where it has no kernel for this version (several opset-6
    versions), onnx's reference evaluator's; skipped when both refuse."""
    try:
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime's refusals (not implemented, invalid)
        refusal = str(e).splitlines()[0][:160]
    try:
        return ReferenceEvaluator(m).run(None, feeds)
    except Exception as e:  # noqa: BLE001 - the evaluator's refusals have no common base
        pytest.skip(f"onnxruntime refuses it ({refusal}), and onnx's reference evaluator "
                    f"too ({type(e).__name__}: {str(e)[:100]})")


@pytest.mark.parametrize(("op", "opset"), PARAMS)
def test_operator_version_matches_onnxruntime(op, opset):
    case = CASES[op](op, opset)
    m = _model(op, opset, case)
    feeds = {n: a for n, a, const in case.inputs if n and not const}
    ref = _reference(m, feeds)
    gm = graph.build(graph.from_onnx(m))
    if feeds:
        got = gm.run(**feeds)
    else:  # a model without inputs: run() alone returns nothing (TVM's style)
        gm.run()
        got = {name: gm.get_output(name) for name in gm.output_names}
    assert list(got) == [f"out{k}" for k in range(case.outputs)]
    for g_arr, r_arr in zip(got.values(), ref):
        assert g_arr.dtype == r_arr.dtype and g_arr.shape == r_arr.shape, \
            (g_arr.dtype, g_arr.shape, r_arr.dtype, r_arr.shape)
        if g_arr.dtype == np.bool_ or np.issubdtype(g_arr.dtype, np.integer):
            np.testing.assert_array_equal(g_arr, r_arr)
        else:
            assert_close(g_arr, r_arr, rtol=1e-5)


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
README_BEGIN = "<!-- onnx operators: generated by python tests/graph/test_onnx_opsets.py -->"
README_END = "<!-- end of onnx operators -->"


def test_every_operator_is_covered():
    """A supported operator has cases here or is named in COVERED_ELSEWHERE (whose test file
    exists)."""
    root = ROOT
    missing = sorted(op for op in CONVERTERS if op not in CASES and op not in COVERED_ELSEWHERE)
    assert not missing, f"operators without opset cases: {missing}"
    absent = {op: f for op, f in COVERED_ELSEWHERE.items()
              if op in CONVERTERS and not os.path.exists(os.path.join(root, f))}
    assert not absent, f"COVERED_ELSEWHERE names test files that do not exist: {absent}"


def _readme_section(text: str) -> str:
    begin, end = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    return text[begin:end].strip("\n") + "\n"


def test_readme_lists_the_supported_operators():
    """The README's operator list is the one the registry gives (regenerate it with
    ``python tests/graph/test_onnx_opsets.py`` after adding an operator)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = _readme_section(f.read())
    with _schemas_listed_once():
        markdown = operators_markdown()
    assert section == markdown, \
        "README.md's operator list is stale: run python tests/graph/test_onnx_opsets.py"


if __name__ == "__main__":  # rewrite the README's operator list from the registry
    path = os.path.join(ROOT, "README.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    begin, end = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:begin] + "\n" + operators_markdown() + text[end:])
    sys.stdout.write(f"{path}: operator list updated\n")
