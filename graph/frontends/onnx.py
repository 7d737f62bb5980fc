"""ONNX import: ``graph.from_onnx(path_or_model, shapes=None)``.

Supported: the default domain at opsets 6 to 28 (9 to 28 is what is tested against onnxruntime
or, where it lacks a version, onnx's reference; opsets 6-8 come with the onnx package's own
pytorch test models, their legacy attributes are handled). Most versions from 23 on only add
types (float4, float8, int2...); the attributes they add are handled or refused. An operator
without a converter imports through its ONNX function body where the specification gives one
(onnx_functions.py). Initializers become constants (also when they are listed as graph inputs:
then they are weights, not inputs). Every node whose inputs are all constants is folded with
numpy as it is imported, and ``Shape``/``Size`` of statically shaped values are constants, so the
Shape -> Gather -> Concat -> Reshape chains of exported models vanish. Before anything is built,
every unsupported operator is listed in one :class:`UnsupportedOperatorError`. onnxruntime's
contrib operators (``com.microsoft``: what its optimizers write) import through
onnx_contrib.py; the operators of other domains are listed as unsupported, named domain::op.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorlang.ir.dtype import SCALAR_DTYPES

from .. import symbolic as S
from ..builder import Builder
from ..ir import Graph, GraphError, Value, freeze
from .onnx_context import (
    CONVERTERS,
    DOMAIN_CONVERTERS,
    REFUSED_DOMAINS,
    REFUSED_VERSIONS,
    UNKNOWN,
    Converter,
    OnnxImportError,
    UnsupportedOperatorError,
    _conv,
    _Ctx,
    _input_origin,
    _np_dtype,
    _sanitize,
    _Scope,
    converter_for,
    is_default_domain,
    op_label,
    refuse,
)
from .onnx_functions import expand_function
from .onnx_unify import (
    UnprovenEqualityError,
    next_substitution,
    substituted,
    wild_axis_equation,
)

MIN_OPSET, MAX_OPSET = 6, 28


# ---------------------------------------------------------------------------- elementwise

_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
          "Sqrt": "sqrt", "Neg": "negative", "Abs": "abs", "Floor": "floor", "Ceil": "ceil",
          "Reciprocal": "reciprocal", "Erf": "erf", "Softplus": "softplus",
          "Softsign": "softsign", "HardSwish": "hard_swish", "Not": "logical_not", "Sin": "sin",
          "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
          "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
          "Round": "round", "Sign": "sign", "Mish": "mish", "BitwiseNot": "bitwise_not"}


def _make_unary(op: str) -> Converter:
    return lambda c, ins, a: [c.op(op, ins[:1])]


for _k, _v in _UNARY.items():
    CONVERTERS[_k] = _make_unary(_v)


@_conv("LeakyRelu")
def _leaky(c, ins, a):
    return [c.op("leaky_relu", ins[:1], alpha=float(a.get("alpha", 0.01)))]


@_conv("Elu")
def _elu(c, ins, a):
    return [c.op("elu", ins[:1], alpha=float(a.get("alpha", 1.0)))]


@_conv("Selu")
def _selu(c, ins, a):
    return [c.op("selu", ins[:1], alpha=float(a.get("alpha", 1.67326319217681884765625)),
                 gamma=float(a.get("gamma", 1.05070102214813232421875)))]


@_conv("HardSigmoid")
def _hsig(c, ins, a):
    return [c.op("hard_sigmoid", ins[:1], alpha=float(a.get("alpha", 0.2)),
                 beta=float(a.get("beta", 0.5)))]


@_conv("ThresholdedRelu")
def _thresholded_relu(c, ins, a):
    return [c.op("thresholded_relu", ins[:1], alpha=float(a.get("alpha", 1.0)))]


@_conv("Shrink")
def _shrink(c, ins, a):
    return [c.op("shrink", ins[:1], lambd=float(a.get("lambd", 0.5)),
                 bias=float(a.get("bias", 0.0)))]


@_conv("Gelu")
def _gelu(c, ins, a):
    return [c.op("gelu", ins[:1], approximate=a.get("approximate", "none"))]


@_conv("Clip")
def _clip(c, ins, a):
    if c.opset < 11:
        return [c.op("clip", ins[:1], min=a.get("min"), max=a.get("max"))]
    lo, hi = (ins[i] if len(ins) > i else None for i in (1, 2))
    if all(v is None or v.is_constant for v in (lo, hi)):
        lo, hi = (None if v is None else float(v.data) for v in (lo, hi))
        return [c.op("clip", ins[:1], min=lo, max=hi)]
    # a bound computed at run time (a log-mel spectrogram's floor, its maximum - 80 dB:
    # openwakeword's melspectrogram): max(x, min), then min(., max), as onnxruntime clamps
    # (which gives max where min > max)
    y = ins[0]
    for v, what, op in ((lo, "min", "max_n"), (hi, "max", "min_n")):
        if v is not None:
            if v.size != 1:
                raise refuse(c, f"Clip {what} must be a scalar, got shape {list(v.shape)}")
            y = c.op(op, [y, c.op("reshape", [v], shape=[])])
    return [y]


@_conv("Cast", "CastLike")
def _cast(c, ins, a):
    """Cast to attribute ``to``; CastLike to the dtype of its second input (saturate only
    matters for float8 targets, which have no dtype here)."""
    to = np.dtype(ins[1].dtype if c.op_type == "CastLike" else _np_dtype(a["to"])).name
    if to not in SCALAR_DTYPES:
        raise refuse(c, f"casting to {to} is not supported (supported: "
                        f"{', '.join(SCALAR_DTYPES)})")
    return [c.op("cast", ins[:1], dtype=to)]


@_conv("Identity")
def _identity(c, ins, a):
    return [ins[0]]


@_conv("Dropout")
def _dropout(c, ins, a):
    """Inference: the identity, and a mask that keeps everything (all true; before opset 10
    the mask has the data's type), made only when something reads it."""
    x = ins[0]
    training = c.const_array(ins[2], "Dropout training_mode") if len(ins) > 2 and \
        ins[2] is not None else None
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        raise OnnxImportError(f"node {c.node_name!r} (Dropout, opset {c.opset}): training mode "
                              "(random dropping) is not supported; export the model for "
                              "inference")
    if len(c.outputs_read) < 2 or not c.outputs_read[1]:
        return [x]
    mask_dtype = x.dtype if c.opset < 10 else np.bool_
    return [x, c.b.const(np.ones(x.shape, dtype=mask_dtype), name=f"{c.node_name}_mask")]


_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power",
           "PRelu": "prelu", "Equal": "equal", "Less": "less", "Greater": "greater",
           "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal", "And": "logical_and",
           "Or": "logical_or", "Xor": "logical_xor", "BitwiseAnd": "bitwise_and",
           "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


def _legacy_broadcast(c, x: Value, y: Value, a: dict) -> Value:
    """Opsets < 7: with broadcast=1 and axis=k, y's dims align with x's dims starting at k."""
    if c.opset < 7 and a.get("broadcast") and "axis" in a:
        axis = a["axis"] % len(x.shape)
        trailing = len(x.shape) - axis - len(y.shape)
        if trailing > 0:
            return c.op("reshape", [y], shape=list(y.shape) + [1] * trailing)
    return y


def _make_binary(op: str) -> Converter:
    def conv(c, ins, a):
        x, y = ins[0], _legacy_broadcast(c, ins[0], ins[1], a)
        if op == "prelu" and len(y.shape) == 1 and len(x.shape) > 2 and y.shape[0] == x.shape[1]:
            # PRelu's slope per channel (a legal unidirectional broadcast in old exporters)
            y = c.op("reshape", [y], shape=[y.shape[0]] + [1] * (len(x.shape) - 2))
        if op == "power" and y.dtype != x.dtype and np.dtype(x.dtype).kind == "f":
            # (an integer base reads its exponent as it is: a cast would truncate 4 ** 0.5)
            y = c.op("cast", [y], dtype=x.dtype)
        return [c.op(op, [x, y])]

    return conv


for _k, _v in _BINARY.items():
    CONVERTERS[_k] = _make_binary(_v)


@_conv("Sum", "Mean", "Max", "Min")
def _nary(c, ins, a):
    return [c.op({"Sum": "sum_n", "Mean": "mean_n", "Max": "max_n", "Min": "min_n"}[c.op_type],
                 [v for v in ins if v is not None])]


@_conv("Where")
def _where(c, ins, a):
    return [c.op("where", ins)]


# ---------------------------------------------------------------------------- conv / gemm


_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _int_list(c, a: dict, name: str, n: int, default: int | None, least: int) -> list[int]:
    """Attribute ``name``: n ints, each >= least (ONNX: strides, dilations and kernel sizes are
    positive, pads not negative); ``default`` n times when absent (None: it is required)."""
    if name not in a and default is None:
        raise refuse(c, f"attribute {name} is missing")
    v = a.get(name, [default] * n)
    per = "a begin and an end per spatial axis" if name == "pads" else "one per spatial axis"
    if not isinstance(v, list) or len(v) != n or not all(isinstance(t, int) for t in v):
        raise refuse(c, f"{name} must be {n} ints ({per}), got {v!r}")
    if min(v, default=least) < least:
        raise refuse(c, f"{name} {v} must be " + ("positive" if least else "non-negative"))
    return v


def _window(c, a: dict, x: Value, kernel: list[int]) -> tuple[list, list, list]:
    """(strides, dilations, pads begin + end) of a Conv or pooling node over ``x``, checked."""
    nsp = len(kernel)
    strides = _int_list(c, a, "strides", nsp, 1, 1)
    dil = _int_list(c, a, "dilations", nsp, 1, 1)
    mode = a.get("auto_pad", "NOTSET")
    if mode not in _AUTO_PADS + ("",):
        raise refuse(c, f"auto_pad={mode!r} is not one of {', '.join(_AUTO_PADS)}")
    if mode in ("NOTSET", ""):
        _int_list(c, a, "pads", 2 * nsp, 0, 0)
    return strides, dil, _auto_pads(a, x.shape[2:], kernel, strides, dil)


def _auto_pads(a: dict, in_spatial, kernel, strides, dilations) -> list[int]:
    nsp = len(kernel)
    mode = a.get("auto_pad", "NOTSET")
    if mode in ("NOTSET", ""):
        p = a.get("pads", [0] * 2 * nsp)
        return list(p)
    if mode == "VALID":
        return [0] * 2 * nsp
    lo, hi = [], []
    for d in range(nsp):
        eff = dilations[d] * (kernel[d] - 1) + 1
        if S.is_symbolic(in_spatial[d]):
            _same_pads_fixed(in_spatial[d], strides[d], mode)
            total = eff - 1  # (stride 1: the output keeps the size)
        else:
            out = -(-in_spatial[d] // strides[d])
            total = max(0, (out - 1) * strides[d] + eff - in_spatial[d])
        small, big = total // 2, total - total // 2
        if mode == "SAME_UPPER":
            lo.append(small)
            hi.append(big)
        else:
            lo.append(big)
            hi.append(small)
    return lo + hi


def _same_pads_fixed(n, stride: int, mode: str) -> None:
    """SAME_* pads over an axis of symbolic size ``n``: at stride 1 they are the window's extent
    less one, whatever n (what follows then computes with ints); at a larger stride they depend
    on n modulo the stride, which the pads (ints) cannot say: refused naming shapes=."""
    if stride != 1:
        raise GraphError(f"auto_pad {mode} with stride {stride} over a spatial axis of symbolic "
                         f"size {S.dim_text(n)}: its pads depend on the size modulo the stride "
                         "(give the inputs' sizes, shapes=)")


def _conv_group(c, a: dict, x: Value, w: Value) -> int:
    """Conv's group, checked against the channels (ONNX: C = group * the weight's C/group, and
    group divides the output channels M)."""
    g = a.get("group", 1)
    if not isinstance(g, int) or g < 1:
        raise refuse(c, f"group must be a positive int, got {g!r}")
    cin, cout, per = x.shape[1], w.shape[0], w.shape[1]
    if isinstance(cout, int) and cout % g:
        raise refuse(c, f"group={g} does not divide the weight's {cout} output channels "
                        f"(weight {list(w.shape)})")
    if isinstance(cin, int) and isinstance(per, int) and cin != g * per:
        raise refuse(c, f"the input has {cin} channels; the weight {list(w.shape)} with "
                        f"group={g} expects {g * per} ({per} per group)")
    return g


@_conv("Conv")
def _conv_op(c, ins, a):
    x, w = ins[0], ins[1]
    nsp = len(x.shape) - 2
    if nsp < 1 or len(w.shape) != len(x.shape):
        raise refuse(c, f"input {list(x.shape)} and weight {list(w.shape)} must have the same "
                        "rank, at least 3")
    kernel = list(w.shape[2:])
    if "kernel_shape" in a and a["kernel_shape"] != kernel:
        raise refuse(c, f"kernel_shape {a['kernel_shape']!r} does not match the weight's "
                        f"spatial shape {kernel} (weight {list(w.shape)})")
    strides, dil, pads = _window(c, a, x, kernel)
    inputs = [x, w] + ([ins[2]] if len(ins) > 2 and ins[2] is not None else [])
    return [c.op("conv", inputs, strides=strides, dilations=dil, pads=pads,
                 groups=_conv_group(c, a, x, w))]


def _transposed(w: np.ndarray, rows: int = 16) -> np.ndarray:
    """``w.T`` as a new C-contiguous array, copied a strip of ``rows`` rows at a time: each
    strip's reads are ``rows`` sequential streams and its writes fill whole cache lines, where
    numpy's plain transposing copy misses the cache on every element of a large matrix.
    Measured on VGG19's fc6 weight (4096 x 25088 fp32, 411 MB), CPU time on a loaded 2-core
    machine: 0.19-0.25 s against 0.60-0.90 s for np.ascontiguousarray(w.T); strips of 8 rows
    0.22-0.28 s, of 32-128 rows 0.28-0.39 s, 64x64 / 256x256 tiles 0.29-0.35 s."""
    n, k = w.shape
    out = np.empty((k, n), w.dtype)
    for i in range(0, n, rows):
        out[:, i:i + rows] = w[i:i + rows].T
    return out


@_conv("Gemm")
def _gemm(c, ins, a):
    A, B = ins[0], ins[1]
    C = ins[2] if len(ins) > 2 else None
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    if a.get("transA", 0):
        A = c.op("transpose", [A], perm=[1, 0])
    if B.is_constant:
        wb = _transposed(B.data) if a.get("transB", 0) else B.data
        if alpha != 1.0:
            wb = wb * np.asarray(alpha, dtype=wb.dtype)
        W = c.b.const(wb if wb is B.data else freeze(wb), name=f"{B.name}_kn")
    else:
        W = c.op("transpose", [B], perm=[1, 0]) if a.get("transB", 0) else B
        if alpha != 1.0:
            W = c.op("multiply", [W, c.b.const(np.asarray(alpha, dtype=B.dtype))])
    if C is not None and beta != 0.0:
        if beta != 1.0:
            C = c.op("multiply", [C, c.b.const(np.asarray(beta, dtype=C.dtype))])
        return [c.op("dense", [A, W, C])]
    return [c.op("dense", [A, W])]


@_conv("MatMul")
def _matmul(c, ins, a):
    A, B = ins
    if B.is_constant and len(B.shape) == 2 and len(A.shape) >= 2:
        # a (batched) activation times a weight matrix: one dense over the flattened rows
        lead = A.shape[:-1]
        rows = S.num_elements(lead)
        A2 = c.op("reshape", [A], shape=[rows, A.shape[-1]]) if len(A.shape) != 2 else A
        y = c.op("dense", [A2, B])
        return [c.op("reshape", [y], shape=list(lead) + [B.shape[1]])
                if len(A.shape) != 2 else y]
    return [c.op("matmul", [A, B])]


# ---------------------------------------------------------------------------- pooling / norm


def _pool(op: str):
    def conv(c, ins, a):
        x = ins[0]
        if len(x.shape) < 3:
            raise refuse(c, f"the input {list(x.shape)} must have rank >= 3 (N, C, spatial)")
        kernel = _int_list(c, a, "kernel_shape", len(x.shape) - 2, None, 1)
        strides, dil, pads = _window(c, a, x, kernel)
        given = a.get("pads", []) if a.get("auto_pad", "NOTSET") in ("NOTSET", "") else []
        if any(p >= kernel[d % len(kernel)] for d, p in enumerate(given)):
            # windows over padding alone (onnxruntime refuses these pads: "Pad should be
            # smaller than kernel"; auto_pad's, dilated, may be larger)
            raise refuse(c, f"pads {pads} must be smaller than kernel_shape {kernel}")
        extra = {"count_include_pad": int(a.get("count_include_pad", 0))} \
            if op == "avg_pool" else {}
        return [c.op(op, [x], kernel=kernel, strides=strides, dilations=dil, pads=pads,
                     ceil_mode=int(a.get("ceil_mode", 0)), **extra)]

    return conv


CONVERTERS["MaxPool"] = _pool("max_pool")
CONVERTERS["AveragePool"] = _pool("avg_pool")


@_conv("LpPool")
def _lp_pool(c, ins, a):
    """(sum of |x|^p over the window)^(1/p), the padding contributing 0: the average pool of
    |x|^p with the pads counted, times the window's size. ceil_mode's last, partial windows
    get end pads of their own, so that every window counts all its taps."""
    x = ins[0]
    if not np.issubdtype(np.dtype(x.dtype), np.floating) or len(x.shape) < 3:
        raise refuse(c, f"the input must be a float tensor of rank >= 3 (N, C, spatial), got "
                        f"{x.dtype}{list(x.shape)}")
    p = a.get("p", 2)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < float("inf"):
        raise refuse(c, f"p must be a positive number, got {p!r}")
    kernel = _int_list(c, a, "kernel_shape", len(x.shape) - 2, None, 1)
    strides, dil, pads = _window(c, a, x, kernel)
    if a.get("ceil_mode", 0):
        pads = _ceil_pads(c, x, kernel, strides, dil, pads)
    powered = c.op("multiply", [x, x]) if p == 2 else c.op("abs", [x])
    if p not in (1, 2):
        powered = c.op("power", [powered, c.b.const(np.asarray(p, x.dtype), name="p")])
    mean = c.op("avg_pool", [powered], kernel=kernel, strides=strides, dilations=dil,
                pads=pads, ceil_mode=0, count_include_pad=1)
    size = c.b.const(np.asarray(np.prod(kernel), x.dtype), name="window_size")
    total = c.op("multiply", [mean, size])
    if p == 1:
        return [total]
    if p == 2:
        return [c.op("sqrt", [total])]
    return [c.op("power", [total, c.b.const(np.asarray(1.0 / p, x.dtype), name="root")])]


def _ceil_pads(c, x, kernel, strides, dil, pads) -> list[int]:
    """pads with the end ones widened to cover ceil_mode's last windows (a window starts
    inside the input or the begin padding)."""
    nsp = len(kernel)
    if not all(isinstance(d, int) for d in x.shape[2:]):
        raise refuse(c, f"ceil_mode needs fixed spatial sizes, got {list(x.shape)}")
    pads = list(pads)
    for d in range(nsp):
        n, eff = x.shape[2 + d], dil[d] * (kernel[d] - 1) + 1
        span = n + pads[d] + pads[nsp + d] - eff
        out = -(-span // strides[d]) + 1
        if (out - 1) * strides[d] >= n + pads[d]:
            out -= 1
        pads[nsp + d] = max(pads[nsp + d], (out - 1) * strides[d] + eff - n - pads[d])
    return pads


@_conv("GlobalAveragePool", "GlobalMaxPool")
def _gpool(c, ins, a):
    return [c.op("global_avg_pool" if c.op_type == "GlobalAveragePool" else "global_max_pool",
                 ins[:1])]


@_conv("BatchNormalization")
def _bn(c, ins, a):
    if a.get("training_mode", 0):
        return _bn_batch_statistics(c, ins, a)
    if c.opset < 9 and not a.get("spatial", 1):
        raise OnnxImportError(f"node {c.node_name!r} (BatchNormalization, opset {c.opset}): "
                              "spatial=0 (statistics per element, not per channel) is not "
                              "supported")
    return [c.op("batch_norm", ins[:5], epsilon=float(a.get("epsilon", 1e-5)))]


def _bn_batch_statistics(c, ins, a):
    """training_mode=1: normalize by the batch's own per-channel mean and (population)
    variance; outputs 1 and 2 are the running statistics updated with momentum. Weight
    standardization (timm's NF-Nets, BiT) exports its per-filter normalization of a weight this
    way, so the statistics are usually of a constant and fold away."""
    x, scale, bias, mean_in, var_in = ins[:5]
    axes = [0, *range(2, len(x.shape))]
    mean_kept = c.op("reduce_mean", [x], axes=axes, keepdims=1)
    d = c.op("subtract", [x, mean_kept])
    var = c.op("reduce_mean", [c.op("multiply", [d, d])], axes=axes, keepdims=0)
    mean = c.op("reduce_mean", [x], axes=axes, keepdims=0)
    y = c.op("batch_norm", [x, scale, bias, mean, var], epsilon=float(a.get("epsilon", 1e-5)))
    if not any(c.outputs_read[1:]):
        return [y]
    momentum = float(a.get("momentum", 0.9))
    keep, take = (c.b.const(np.asarray(v, x.dtype), name=n)
                  for v, n in ((momentum, "momentum"), (1.0 - momentum, "one_minus_momentum")))

    def running(old, now):
        return c.op("add", [c.op("multiply", [old, keep]), c.op("multiply", [now, take])])

    return [y, running(mean_in, mean), running(var_in, var)]


@_conv("InstanceNormalization")
def _in(c, ins, a):
    return [c.op("instance_norm", ins[:3], epsilon=float(a.get("epsilon", 1e-5)))]


@_conv("LayerNormalization")
def _ln(c, ins, a):
    if any(c.outputs_read[1:]):
        # the mean and inverse standard deviation too (training's outputs): the operator's
        # ONNX function body computes all three; below opset 17 (onnxruntime's optimizers
        # write LayerNormalization there, onnxruntime runs it) it has none
        outs = expand_function(c, c.node, ins)
        return outs if outs is not None else _ln_with_stats(c, ins, a)
    inputs = [v for v in ins[:3] if v is not None]
    return [c.op("layer_norm", inputs, axis=int(a.get("axis", -1)),
                 epsilon=float(a.get("epsilon", 1e-5)))]


def _ln_with_stats(c, ins, a):
    from .onnx_contrib import layer_norm_stats

    x = ins[0]
    if int(a.get("stash_type", 1)) != 1 and x.dtype != "float32":
        raise refuse(c, "stash_type other than 1 (float32 statistics) is not supported")
    axis, eps = int(a.get("axis", -1)), float(a.get("epsilon", 1e-5))
    y = c.op("layer_norm", [v for v in ins[:3] if v is not None], axis=axis, epsilon=eps)
    return [y, *layer_norm_stats(c, x, axis, eps)]


@_conv("LRN")
def _lrn(c, ins, a):
    return [c.op("lrn", ins[:1], size=int(a["size"]), alpha=float(a.get("alpha", 1e-4)),
                 beta=float(a.get("beta", 0.75)), bias=float(a.get("bias", 1.0)))]


@_conv("Softmax", "LogSoftmax")
def _softmax(c, ins, a):
    x = ins[0]
    nd = len(x.shape)
    axis = _axis(c, a.get("axis", 1 if c.opset < 13 else -1), nd)
    # before opset 13 the input is coerced to 2D at `axis`: normalize over all later axes
    axes = list(range(axis, nd)) if c.opset < 13 else [axis]
    return [c.op("softmax", [x], axes=axes, log=int(c.op_type == "LogSoftmax"))]


# ---------------------------------------------------------------------------- reductions


def _reduce_axes(c, ins, a) -> list[int] | None:
    """The axes a Reduce* node reduces (all when none are given); None for a no-op (empty axes
    with noop_with_empty_axes)."""
    axes_from_input = (c.op_type == "ReduceSum" and c.opset >= 13) or c.opset >= 18
    if axes_from_input:
        arr = c.const_array(ins[1], "axes") if len(ins) > 1 and ins[1] is not None else None
        axes = None if arr is None or arr.size == 0 else [int(v) for v in arr.reshape(-1)]
    else:
        axes = a.get("axes")
    if axes is None:
        return None if a.get("noop_with_empty_axes", 0) else list(range(len(ins[0].shape)))
    return list(axes)


@_conv("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd")
def _reduce(c, ins, a):
    x = ins[0]
    axes = _reduce_axes(c, ins, a)
    if axes is None:
        return [x]
    op = {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max",
          "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod"}[c.op_type]
    return [c.op(op, [x], axes=axes, keepdims=int(a.get("keepdims", 1)))]


@_conv("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
def _reduce_composite(c, ins, a):
    """The reductions that are a sum between elementwise steps (norms, log-sum-exp)."""
    x = ins[0]
    axes = _reduce_axes(c, ins, a)
    if axes is None:
        raise refuse(c, "noop_with_empty_axes=1 with no axes is not supported")
    if c.op_type in ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp") and \
            not np.issubdtype(np.dtype(x.dtype), np.floating):
        raise refuse(c, f"{x.dtype} input: only float inputs are supported")
    keep = int(a.get("keepdims", 1))
    if c.op_type == "ReduceLogSumExp":  # max-shifted: no overflow in exp
        peak = c.op("reduce_max", [x], axes=axes, keepdims=1)
        e = c.op("exp", [c.op("subtract", [x, peak])])
        s = c.op("log", [c.op("reduce_sum", [e], axes=axes, keepdims=keep)])
        top = peak if keep else c.op("reduce_max", [x], axes=axes, keepdims=0)
        return [c.op("add", [s, top])]
    pre = {"ReduceL1": lambda: c.op("abs", [x]), "ReduceLogSum": lambda: x}.get(
        c.op_type, lambda: c.op("multiply", [x, x]))()
    s = c.op("reduce_sum", [pre], axes=axes, keepdims=keep)
    post = {"ReduceL2": "sqrt", "ReduceLogSum": "log"}.get(c.op_type)
    return [c.op(post, [s]) if post else s]


@_conv("ArgMax", "ArgMin")
def _arg(c, ins, a):
    return [c.op("argmax" if c.op_type == "ArgMax" else "argmin", ins[:1],
                 axis=int(a.get("axis", 0)), keepdims=int(a.get("keepdims", 1)),
                 select_last_index=int(a.get("select_last_index", 0)))]


# ---------------------------------------------------------------------------- shapes


@_conv("Reshape")
def _reshape(c, ins, a):
    x = ins[0]
    shape = [S.dim(v) for v in c.const_array(ins[1], "the target shape of Reshape")]
    allowzero = a.get("allowzero", 0)
    wild = [i for i, s in enumerate(shape) if _is(s, -1)]
    if len(wild) > 1 or any(isinstance(s, int) and s < -1 for s in shape):
        raise refuse(c, f"the target shape {shape} may hold at most one -1 (the dimension "
                        "inferred) and no other negative value")
    if not allowzero and any(_is(s, 0) for s in shape[len(x.shape):]):
        raise refuse(c, f"the target shape {shape} copies (0) a dimension beyond the input's "
                        f"rank {len(x.shape)}")
    out = []
    for i, s in enumerate(shape):
        out.append(x.shape[i] if _is(s, 0) and not allowzero else s)
    if wild:
        known = S.num_elements([s for i, s in enumerate(out) if i != wild[0]])
        out[wild[0]] = S.quotient(x.size, known) if not _is(known, 0) else 0
        wild_axis_equation(x.shape, out, wild[0])
    return [c.op("reshape", [x], shape=out)]


def _ints(c, arr: np.ndarray, what: str) -> list:
    """The ints of a constant that must be numbers at import: a shape tensor still holding
    symbolic dimensions is refused naming the node (its size would vary at run time)."""
    flat = arr.reshape(-1).tolist()
    if arr.dtype == object and not all(isinstance(v, int) for v in flat):
        raise OnnxImportError(
            f"node {c.node_name!r} ({c.op_type}): {what} depends on symbolic dimensions "
            f"({', '.join(map(str, flat))}), which is not supported; give the inputs' sizes "
            "(from_onnx(model, shapes=...))")
    return [int(v) for v in flat]


def _is(d, k: int) -> bool:
    """A dimension that is the int k (a symbolic one never is)."""
    return isinstance(d, int) and d == k


def _axis(c, axis: int, rank: int, end: bool = False, of: str = "") -> int:
    """``axis`` in [-rank, rank) (with ``end``, [-rank, rank]: Flatten's split point) made
    non-negative; out of range, refused (numpy's wrapping would pick another axis). ``of``:
    whose rank it is when not the input's."""
    if not -rank <= axis < rank + int(end):
        extra = f" (expected [{-rank}, {rank}])" if end else ""
        raise refuse(c, f"axis {axis} is out of range for {of}rank {rank}{extra}")
    return axis + rank if axis < 0 else axis


def _distinct_axes(c, axes: list[int], rank: int, of: str = "") -> list[int]:
    """``axes`` of a tensor of rank ``rank`` made non-negative; a repeated axis refused."""
    out = [_axis(c, ax, rank, of=of) for ax in axes]
    if len(set(out)) != len(out):
        raise refuse(c, f"axes {axes} name an axis more than once")
    return out


@_conv("Flatten")
def _flatten(c, ins, a):
    x = ins[0]
    axis = _axis(c, a.get("axis", 1), len(x.shape), end=True)
    lead = S.num_elements(x.shape[:axis])
    rest = S.num_elements(x.shape[axis:])
    return [c.op("reshape", [x], shape=[lead, rest])]


def _axes(c, ins, a, what: str):
    if c.opset >= 13:
        arr = c.const_array(ins[1], f"{what} axes") if len(ins) > 1 and ins[1] is not None \
            else None
        return None if arr is None else [int(v) for v in arr.reshape(-1)]
    return a.get("axes")


@_conv("Squeeze")
def _squeeze(c, ins, a):
    x = ins[0]
    axes = _axes(c, ins, a, "Squeeze")
    if axes is None:
        axes = [i for i, s in enumerate(x.shape) if s == 1]
    else:
        # a repeated axis is squeezed once (as onnxruntime does)
        axes = [_axis(c, ax, len(x.shape)) for ax in axes]
    wide = [(ax, x.shape[ax]) for ax in axes if isinstance(x.shape[ax], int) and
            x.shape[ax] != 1]
    if wide:
        raise refuse(c, f"Squeeze removes axes of extent 1; the input {list(x.shape)} has "
                        f"extents {[n for _, n in wide]} at axes {[ax for ax, _ in wide]}")
    return [c.op("reshape", [x], shape=[s for i, s in enumerate(x.shape) if i not in axes])]


@_conv("Unsqueeze")
def _unsqueeze(c, ins, a):
    x = ins[0]
    axes = _axes(c, ins, a, "Unsqueeze")
    if axes is None:
        raise refuse(c, "the axes to insert are missing")
    # the axes index the output, of rank len(x.shape) + len(axes)
    axes = sorted(_distinct_axes(c, list(axes), len(x.shape) + len(axes), "the output's "))
    shape = list(x.shape)
    for ax in axes:
        shape.insert(ax, 1)
    return [c.op("reshape", [x], shape=shape)]


@_conv("Transpose")
def _transpose(c, ins, a):
    x = ins[0]
    perm = a.get("perm", list(range(len(x.shape)))[::-1])
    return [c.op("transpose", [x], perm=list(perm))]


@_conv("Concat")
def _concat(c, ins, a):
    vals = [v for v in ins if v is not None and not _is(v.size, 0)] or [ins[0]]
    return [c.op("concat", vals, axis=int(a["axis"]))]


@_conv("Split")
def _split(c, ins, a):
    x = ins[0]
    axis = _axis(c, a.get("axis", 0), len(x.shape))
    outs, start = [], 0
    for s in _split_sizes(c, ins, a, x.shape[axis], axis):
        if s == 0:  # an empty part (RotaryEmbedding's unrotated rest): a Concat drops it
            shape = list(x.shape)
            shape[axis] = 0
            if all(isinstance(d, int) for d in shape):
                outs.append(c.b.const(np.zeros(shape, x.dtype), name="empty"))
            else:  # no array holds symbolic sizes: a value of no node, which only a Concat
                # (dropping it) or a Shape may read; any other node is refused by the builder
                outs.append(Value(c.b._fresh(f"{c.node_name}_empty"), shape, x.dtype))
            continue
        outs.append(c.op("slice", [x], starts=[start], ends=[start + s], axes=[axis], steps=[1]))
        start += s
    return outs


def _split_sizes(c, ins, a, n, axis: int) -> list[int]:
    """The lengths of Split's outputs along ``axis`` of extent n. ONNX: given sizes sum to n;
    without them equal parts, which before opset 18 must divide n (from 18 on, the last part
    is smaller)."""
    if c.opset >= 13 and len(ins) > 1 and ins[1] is not None:
        sizes = _ints(c, c.const_array(ins[1], "Split sizes"), "Split's sizes")
    else:
        sizes = a.get("split")
    if "num_outputs" in a and a["num_outputs"] != c.num_outputs:
        raise refuse(c, f"num_outputs={a['num_outputs']} but the node has {c.num_outputs} "
                        "outputs")
    if sizes is not None:
        return _checked_sizes(c, list(sizes), n, axis)
    if not isinstance(n, int):
        raise refuse(c, f"equal parts of a symbolic axis are not supported{_symbolic_note(ins)}")
    parts = c.num_outputs
    if c.opset < 18 and n % parts:
        raise refuse(c, f"axis {axis} of extent {n} does not split into {parts} equal parts "
                        "(before opset 18, Split without sizes needs them)")
    chunk = -(-n // parts)
    sizes = [min(chunk, n - i * chunk) for i in range(parts)]
    if min(sizes) < 1:
        raise refuse(c, f"axis {axis} of extent {n} in {parts} parts of {chunk} leaves the last "
                        f"{sum(s < 1 for s in sizes)} empty; empty tensors are not supported")
    return sizes


def _checked_sizes(c, sizes: list[int], n, axis: int) -> list[int]:
    if len(sizes) != c.num_outputs:
        raise refuse(c, f"split sizes {sizes} are {len(sizes)} for {c.num_outputs} outputs")
    if min(sizes, default=0) < 0:
        raise refuse(c, f"split sizes {sizes} must not be negative")
    if isinstance(n, int) and sum(sizes) != n:
        raise refuse(c, f"split sizes {sizes} sum to {sum(sizes)}, not to the extent {n} of "
                        f"axis {axis}")
    return sizes


@_conv("Slice")
def _slice(c, ins, a):
    x = ins[0]
    if c.opset < 10:
        starts, ends = a["starts"], a["ends"]
        axes = a.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        def arr(i, what):
            if len(ins) > i and ins[i] is not None:
                return _ints(c, c.const_array(ins[i], f"Slice {what}"), f"Slice's {what}")
            return None

        bounds = [c.const_array(ins[i], f"Slice {what}").reshape(-1)
                  for i, what in ((1, "starts"), (2, "ends"))]
        axes = arr(3, "axes") or list(range(len(bounds[0])))
        steps = arr(4, "steps") or [1] * len(bounds[0])
        if any(b.dtype == object for b in bounds) and len(bounds[0]) == len(bounds[1]) == \
                len(axes) == len(steps):
            return [_slice_at_symbolic_positions(c, x, *bounds, axes, steps)]
        starts, ends = (_ints(c, b, f"Slice's {what}") for b, what in zip(bounds, ("starts",
                                                                                 "ends")))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise refuse(c, f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must "
                        "have one entry each per sliced axis")
    axes = _distinct_axes(c, list(axes), len(x.shape))
    starts = [_past_any_extent(x, ax, s) for ax, s in zip(axes, starts)]
    ends = [_past_any_extent(x, ax, e) for ax, e in zip(axes, ends)]
    return [c.op("slice", [x], starts=starts, ends=ends, axes=list(axes), steps=steps)]


SLICE_SENTINEL = 2**62  # INT64_MAX-like: clamps without overflowing the arithmetic
MAX_TENSOR_BYTES = 2**48  # more than any machine can address (x86-64 and AArch64: 2**48)


def _past_any_extent(x: Value, ax: int, v: int) -> int:
    """Slice bound ``v`` of axis ``ax``, as +-SLICE_SENTINEL where it lies past the end (or
    before the beginning) of that axis at every size a tensor can have. tf2onnx writes 1e9 for
    "to the end" (magika's x[:, :, :]): on a symbolic axis n it reads min(n, 1e9), which
    equals n only where the sizes say so; n * (the other axes' elements) * itemsize is at most
    MAX_TENSOR_BYTES, so an axis n of a tensor that exists is shorter than |v| when
    |v| * (the rest) * itemsize >= MAX_TENSOR_BYTES, and ONNX clamps v to the axis' end."""
    v = int(v)
    rest = np.dtype(str(x.dtype)).itemsize
    for i, d in enumerate(x.shape):
        if i != ax and isinstance(d, int):
            rest *= d
    if abs(v) >= SLICE_SENTINEL or (rest and abs(v) * rest >= MAX_TENSOR_BYTES):
        return SLICE_SENTINEL if v > 0 else -SLICE_SENTINEL
    return v


def _slice_at_symbolic_positions(c, x, starts, ends, axes, steps):
    """Slice whose bounds depend on the sizes (BERT's position_ids[:, :seq], OPT's
    positions[:, past:], x[:, :seq - 1], x[seq::-2], MPT's alibi[..., 2048 - seq:]): on each
    such axis a gather of the positions computed at run time, ONNX's clamping in their first
    one and their number (symbolic.clamped_slice). A bound of a sign the sizes decide is read
    exactly (symbolic.onnx_bound), or, where the model needs its evident case, taken in that
    case and checked at run time (_bound_case). An end (of a positive step) that is a size not
    evidently inside the axis is taken as inside: the model's other shapes need it unclamped
    (BERT adds position_ids[:, :seq] to the seq token embeddings) and the gather refuses a
    position past the axis at run time (onnxruntime clamps it, and the model then fails to
    broadcast)."""
    axes = _distinct_axes(c, list(axes), len(x.shape))
    for ax, s, e, step in zip(axes, starts, ends, steps):
        if isinstance(s, (int, np.integer)) and isinstance(e, (int, np.integer)):
            x = c.op("slice", [x], starts=[int(s)], ends=[int(e)], axes=[ax], steps=[int(step)])
            continue
        if step == 0:
            raise refuse(c, "a slice step of 0")
        n = x.shape[ax]
        (start, checks), (end, end_checks) = (_slice_bound(c, x, ax, v, step, which)
                                              for v, which in ((s, "start"), (e, "end")))
        within = step > 0 and not isinstance(end, int) and not S.same(S.smin(end, n), end)
        first, count = S.clamped_slice(n, start, end, int(step), within=within,
                                       start_inside=bool(checks))
        zero = _checked_zero(c, checks + end_checks)
        x = c.op("gather", [x, _positions(c, first, int(step), count, "int64", zero)], axis=ax)
    return x


def _slice_bound(c, x, ax: int, v, step: int, which: str) -> tuple[Any, list]:
    """A Slice bound counted from the axis' beginning, and the (name, size) checks that must
    hold at run time (size >= 0) for it: a size as it is, minus a size plus the extent; an int
    as ONNX reads it (INT64_MAX/MIN-like: the axis' end on that side)."""
    n = x.shape[ax]
    if isinstance(v, (int, np.integer)):
        v = int(v)
        if abs(v) >= 2**61:
            return ((n if step > 0 else S.dim(n - 1)) if v > 0 else (0 if step > 0 else -1)), []
        return (S.dim(n + v) if v < 0 else v), []
    v = S.dim(v)
    case = _bound_case(n, v, which) if step > 0 else None
    if case is not None:
        if c.take_bound_cases:
            return case
        c.bound_cases_found.append(c.node_name)
    low, high = S.lower_bound(v), S.lower_bound(S.dim(0 - v))
    if low is not None and low >= 0:
        return v, []
    if high is not None and high >= 1:
        return S.dim(n + v), []
    # (clamped to n here: an end read exactly is not one that the model needs unclamped)
    return (S.onnx_bound(v, n) if which == "start" else S.smin(S.onnx_bound(v, n), n)), []


def _bound_case(n, v, which: str) -> tuple[Any, list] | None:
    """The evident case of bound ``v`` on an axis of extent n, as (bound, checks): a bound
    inside [0, n] at every size where the checks (size >= 0) hold: max(w, k) taken as w (w >=
    k), min(w, k) as w (w <= k), a bound of either sign read from the beginning (v >= 0, where
    v <= n evidently: MPT's 2048 - seq of a 2048 axis) or from the end (v < 0, where v + n >= 0
    evidently: 3 - seq of a seq axis); None when there is none. The exact reading (onnx_bound)
    differs from it only at the sizes the checks refuse."""
    if isinstance(v, (S.E.Max, S.E.Min)) and isinstance(S.dim(v.b), int):
        w, k = S.dim(v.a), S.dim(v.b)  # (canonical: the int operand last)
        # (an end past the axis is refused by the gather at run time: inside is not needed)
        taken = _bound_case(n, w, which) or _inside(n, w) or (
            (w, []) if which == "end" and (S.lower_bound(w) or 0) >= 0 and
            S.lower_bound(w) is not None else None)
        if taken is None:
            return None
        kind = "max" if isinstance(v, S.E.Max) else "min"
        gap = S.dim(w - k) if kind == "max" else S.dim(k - w)
        return taken[0], [(f"slice_{which}_{kind}_is_its_size_operand", gap)] + taken[1]
    low, high = S.lower_bound(v), S.lower_bound(S.dim(0 - v))
    if (low is not None and low >= 0) or (high is not None and high >= 1):
        return None  # (its sign is known: no case to take)
    inside = S.lower_bound(S.dim(n - v))
    if inside is not None and inside >= 0:
        return v, [(f"slice_{which}_not_negative", v)]
    inside = S.lower_bound(S.dim(n + v))
    if inside is not None and inside >= 0:
        return S.dim(n + v), [(f"slice_{which}_negative", S.dim(-1 - v))]
    return None


def _inside(n, v) -> tuple[Any, list] | None:
    """(v, no checks) where 0 <= v <= n at every size evidently, else None."""
    low, room = S.lower_bound(v), S.lower_bound(S.dim(n - v))
    return (v, []) if low is not None and low >= 0 and room is not None and room >= 0 else None


def _checked_zero(c, checks: list):
    """A [1] tensor of 0 that depends on a value of extent ``size`` for each (name, size) of
    ``checks``: a negative extent is refused at run time naming the node, the value (its name
    says which bound's case failed), the extent and the sizes (runtime/_plan.py). None when
    there is no check. (arange_like is opaque: its input stays a value of the plan, whose
    extents the runtime checks; its pad by one 0 gives the element read.)"""
    if not checks:
        return None
    zero = c.b.const(np.zeros(1, np.int64), name="zero")
    seen: list = []
    for name, size in checks:
        if any(S.same(size, d) for d in seen):
            continue
        seen.append(size)
        probe = c.b.op("expand", [zero], name=c.node_name, outputs=[name], shape=[size])
        probe = c.op("arange_like", [probe], start=0, delta=0)
        probe = c.op("pad", [probe], pads=[1, 0], mode="constant", value=0.0)
        zero = c.op("gather", [probe, c.b.const(np.zeros(1, np.int64), name="first")], axis=0)
    return zero


@_conv("Pad")
def _pad(c, ins, a):
    x = ins[0]
    mode = a.get("mode", "constant")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if c.opset < 11:
        pads = list(a.get("pads", a.get("paddings", [])))
        value = float(a.get("value", 0.0))
    else:
        pads = _pad_widths(c, c.const_array(ins[1], "Pad pads"), mode)
        value = 0.0
        if len(ins) > 2 and ins[2] is not None and ins[2].size:
            value = float(c.const_array(ins[2], "Pad constant_value").reshape(-1)[0])
        if len(ins) > 3 and ins[3] is not None:
            axes = _distinct_axes(c, [int(v) for v in c.const_array(ins[3], "Pad axes")],
                                  len(x.shape))
            if len(pads) != 2 * len(axes):
                raise refuse(c, f"pads {pads} must have 2 entries per axis of {axes}")
            full = [0] * (2 * len(x.shape))
            for i, ax in enumerate(axes):
                full[ax] = pads[i]
                full[len(x.shape) + ax] = pads[len(axes) + i]
            pads = full
    if mode not in ("constant", "reflect", "edge"):
        raise OnnxImportError(f"node {c.node_name!r}: Pad mode {mode!r} is not supported")
    if mode == "reflect":
        _check_reflect(c, x.shape, pads)
    if mode != "constant" and len(pads) == 2 * len(x.shape) and min(pads, default=0) >= 0:
        x, pads = _mirror_symbolic_axes(c, x, pads, mode)
        if not any(pads):
            return [x]
    return [c.op("pad", [x], pads=pads, mode=mode, value=value)]


def _mirror_symbolic_axes(c, x: Value, pads: list[int], mode: str) -> tuple[Value, list]:
    """Reflect or edge padding of the axes of symbolic extent n, as gathers of the positions
    they repeat, concatenated around x (the pad kernel needs a constant extent to mirror:
    silero VAD's STFT reflects 64 samples past the end of a chunk of any length); the pads
    left for the static axes. Reflect reads b..1 before and n-2..n-1-e after, and needs n > b
    and n > e (checked at run time, as onnxruntime refuses it); edge repeats 0 and n-1."""
    nd, left = len(x.shape), list(pads)
    for ax, n in enumerate(x.shape):
        before, after = pads[ax], pads[nd + ax]
        if isinstance(n, int) or not (before or after):
            continue
        left[ax] = left[nd + ax] = 0
        step = -1 if mode == "reflect" else 0
        zero = _checked_zero(c, [("reflect_pad_is_shorter_than_the_axis",
                                  S.dim(n - 1 - max(before, after)))]) if step else None
        first = {"before": before if step else 0, "after": S.dim(n - 2) if step else
                 S.dim(n - 1)}
        parts = [x]
        for side, count in (("before", before), ("after", after)):
            if count:
                where = _positions(c, first[side], step, count, "int64", zero)
                part = c.op("gather", [x, where], axis=ax)
                parts.insert(0 if side == "before" else len(parts), part)
        x = c.op("concat", parts, axis=ax)
    return x, left


def _pad_widths(c, arr: np.ndarray, mode) -> list:
    """Pad's widths: ints, or in mode 'constant' expressions of the sizes (T5's mask padded to
    past + new length: 0, 0, 0, p + s - t), which may be negative at run time (a crop)."""
    if arr.dtype != object or mode != "constant":
        return _ints(c, arr, "Pad's pads")
    return [_as_dim(v) for v in arr.reshape(-1)]


def _check_reflect(c, shape, pads: list[int]) -> None:
    """Reflect padding mirrors an axis without its edge element: at most extent - 1 per side
    (the extent left after negative pads crop). onnxruntime refuses more; numpy would wrap."""
    nd = len(shape)
    if len(pads) != 2 * nd:
        return  # the graph op says how many there must be
    for d, n in enumerate(shape):
        if not isinstance(n, int):
            continue
        kept = n - max(0, -pads[d]) - max(0, -pads[nd + d])
        if max(pads[d], pads[nd + d]) > kept - 1:
            raise refuse(c, f"mode 'reflect' pads {pads}: axis {d} (extent {kept}) can be "
                            f"mirrored by at most {kept - 1} per side")


@_conv("Gather")
def _gather(c, ins, a):
    return [c.op("gather", ins[:2], axis=int(a.get("axis", 0)))]


@_conv("Expand")
def _expand(c, ins, a):
    shape = [S.dim(v) for v in c.const_array(ins[1], "the shape of Expand")]
    return [c.op("expand", ins[:1], shape=shape)]


@_conv("Tile")
def _tile(c, ins, a):
    arr = c.const_array(ins[1], "the repeats of Tile")
    if arr.dtype == object:  # repeats that are sizes (Whisper's positions repeated per batch)
        return [_symbolic_tile(c, ins[0], [_as_dim(v) for v in arr.reshape(-1)])]
    reps = _ints(c, arr, "the repeats of Tile")
    return [c.op("tile", ins[:1], repeats=reps)]


def _symbolic_tile(c, x, reps: list):
    """Tile by repeats that are expressions of the sizes, as the graph's own ops: x [s0, s1]
    reshaped to [1, s0, 1, s1], expanded to [r0, s0, r1, s1], reshaped to [r0 s0, r1 s1]
    (what the tile op's lowering does with int repeats)."""
    if len(reps) != len(x.shape):
        raise refuse(c, f"repeats {reps} must have one entry per axis of {x.type_str()}")
    inter = [v for s in x.shape for v in (1, s)]
    big = [v for s, r in zip(x.shape, reps) for v in (r, s)]
    y = c.op("expand", [c.op("reshape", [x], shape=inter)], shape=big)
    return c.op("reshape", [y], shape=[S.dim(s * r) for s, r in zip(x.shape, reps)])


@_conv("DepthToSpace")
def _d2s(c, ins, a):
    mode = a.get("mode", "DCR")
    return [c.op("depth_to_space", ins[:1], blocksize=int(a["blocksize"]),
                 mode=mode.decode() if isinstance(mode, bytes) else mode)]


@_conv("Shape")
def _shape(c, ins, a):
    # symbolic dimensions make a shape tensor of expressions, folded on through Gather,
    # Concat, Unsqueeze, arithmetic... into the ops that read shapes (symbolic.fold_symbolic)
    shape = _shape_tensor(ins[0].shape)
    start, end = a.get("start", 0), a.get("end", None)
    return [c.b.const(shape[start:end], name="shape")]


@_conv("Size")
def _size(c, ins, a):
    return [c.b.const(_shape_tensor([ins[0].size]).reshape(()), name="size")]


def _shape_tensor(dims) -> np.ndarray:
    if all(isinstance(d, int) for d in dims):
        return np.array(dims, dtype=np.int64)
    out = np.empty(len(dims), dtype=object)
    out[:] = list(dims)
    return out


@_conv("Constant")
def _constant(c, ins, a):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in a:
            v = a[key]
            if key == "value":
                from onnx import numpy_helper

                arr = numpy_helper.to_array(v)
                if arr.dtype == object:  # (numpy's type for ONNX strings)
                    raise refuse(c, "its value is a string tensor, which is not supported")
            elif key.startswith("value_float"):
                arr = np.array(v, dtype=np.float32)
            else:
                arr = np.array(v, dtype=np.int64)
            return [c.b.const(freeze(arr), name="const")]  # ours alone: no copy
    raise OnnxImportError(f"node {c.node_name!r}: Constant with attributes {sorted(a)} is not "
                          "supported")


@_conv("ConstantOfShape")
def _const_of_shape(c, ins, a):
    from onnx import numpy_helper

    arr = c.const_array(ins[0], "the shape of ConstantOfShape").reshape(-1)
    value = numpy_helper.to_array(a["value"]).reshape(-1) if "value" in a else \
        np.zeros(1, np.float32)
    if arr.dtype != object:
        return [c.b.const(np.full([int(v) for v in arr], value[0], dtype=value.dtype),
                          name="const")]
    # a shape of symbolic dimensions (a mask or zeros the size of the input): the value
    # broadcast to it at run time
    one = c.b.const(np.full((1,) * len(arr), value[0], dtype=value.dtype), name="fill")
    return [c.op("expand", [one], shape=[S.dim(v) for v in arr])]


@_conv("Range")
def _range(c, ins, a):
    s, l, d = (_range_bound(c, v) for v in ins[:3])
    if object not in (s.dtype, l.dtype, d.dtype):
        _ints(c, np.concatenate([a.reshape(-1) for a in (s, l, d)]), "Range's bounds")
        if d.item() == 0:
            raise refuse(c, "delta 0 makes an endless range")
        return [c.b.const(np.arange(s.item(), l.item(), d.item()).astype(s.dtype),
                          name="range")]
    if np.dtype(str(ins[0].dtype)).kind == "f":
        # YOLOv8's anchor points, Range(0.0, float(w), 1.0) + 0.5 over a feature map of
        # symbolic width: the integers start + k * delta, exact in floats
        s, l, d = (_integral(c, v, what) for v, what in ((s, "start"), (l, "limit"),
                                                          (d, "delta")))
        ints = _symbolic_range(c, s, l, d, "int64")
        return [c.op("cast", [ints], dtype=str(ins[0].dtype))]
    return [_symbolic_range(c, s, l, d, ins[0].dtype)]


def _range_bound(c, v: Value) -> np.ndarray:
    """A Range bound's value at import: a constant's data, or the symbolic sizes that a float
    Cast of a shape holds (the builder computes such a cast at run time: floats of
    expressions do not fold)."""
    if not v.is_constant and v.producer is not None and v.producer.op == "cast":
        held = v.producer.inputs[0].producer
        if held is not None and held.op == "shape_values":
            sizes = [S.parse(t) for t in held.attrs["values"]]
            return np.array(sizes, dtype=object).reshape(held.attrs["shape"])
    return c.const_array(v, "Range bounds")


def _integral(c, v: np.ndarray, what: str) -> np.ndarray:
    """A float Range bound as the integer it must be where the limit is symbolic."""
    if v.dtype == object:
        return v
    if v.size != 1 or float(v.reshape(-1)[0]) != int(v.reshape(-1)[0]):
        raise refuse(c, f"a float Range whose bounds depend on symbolic sizes needs an "
                        f"integer {what}, got {v.reshape(-1).tolist()}")
    return np.array(int(v.reshape(-1)[0]), dtype=np.int64)


def _symbolic_range(c, s: np.ndarray, l: np.ndarray, d: np.ndarray, dtype):
    """Range with symbolic bounds (position ids past_len .. past_len + seq - 1): its length is
    max(0, ceil((limit - start) / delta)), an expression of the shape variables (empty at the
    sizes where the limit is not past the start, as onnxruntime's), and a symbolic start is
    added at run time (the builder computes it with a shape_values kernel). A symbolic delta
    is refused (its sign decides the length's form)."""
    (delta,) = _ints(c, d.reshape(-1), "Range's delta")
    if delta == 0:
        raise refuse(c, "delta 0 makes an endless range")
    start, limit = (_as_dim(v.reshape(-1)[0]) for v in (s, l))
    span = S.dim(limit - start) if delta > 0 else S.dim(start - limit)
    k = abs(delta)
    n = S.smax(0, span if k == 1 else S.dim((span + (k - 1)) // k))
    return _positions(c, start, delta, n, dtype)


def _positions(c, start, step: int, n, dtype, zero=None):
    """start, start + step, ... (n of them) as a tensor: n and start may be expressions of the
    sizes (a symbolic start is added at run time). ``zero``: the [1] zero to expand (one that
    carries run-time checks: _checked_zero)."""
    zero = c.b.const(np.zeros(1, dtype), name="zero") if zero is None else zero
    like = c.op("expand", [zero], shape=[n])
    if isinstance(start, int):
        return c.op("arange_like", [like], start=start, delta=step)
    steps = c.op("arange_like", [like], start=0, delta=step)
    first = np.empty((), dtype=object)
    first[()] = start
    return c.op("add", [steps, c.b.const(first, name="start", dtype=str(dtype))])


def _as_dim(x):
    return int(x) if isinstance(x, (int, np.integer)) else S.dim(x)


# ---------------------------------------------------------------------------- driver


def _attrs(node) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for at in node.attribute:
        v = helper.get_attribute_value(at)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        out[at.name] = v
    return out


def _load(model) -> Any:
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no ONNX model at {path!r}")
        try:
            m = onnx.load(path)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends: corrupt
            raise OnnxImportError(f"{path} is not a valid ONNX model: {type(e).__name__}: "
                                  f"{e}") from None
        if not m.graph.node and not m.graph.output:
            raise OnnxImportError(f"{path} is not a valid ONNX model (no graph)")
        return m
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(model))
        except Exception as e:  # noqa: BLE001 - protobuf decode errors have no common base
            raise OnnxImportError(f"not a valid ONNX model: {type(e).__name__}: {e}") from None
    raise TypeError(f"from_onnx expects a path, bytes or onnx.ModelProto, got "
                    f"{type(model).__name__}")


def _check_names(gp) -> None:
    """Every name in the graph is text (a damaged file can hold bytes that are not UTF-8,
    which protobuf hands back as bytes)."""
    named = [("graph input", v.name) for v in gp.input]
    named += [("graph output", v.name) for v in gp.output]
    named += [("initializer", t.name) for t in gp.initializer]
    for i, n in enumerate(gp.node):
        where = f"node #{i}"
        named += [(where, n.name), (where, n.op_type), (where, n.domain)]
        named += [(f"{where} input", x) for x in n.input]
        named += [(f"{where} output", x) for x in n.output]
        named += [(f"{where} attribute", a.name) for a in n.attribute]
    for what, name in named:
        if not isinstance(name, str):
            raise OnnxImportError(f"{what}: name {name!r} is not UTF-8 text (a damaged file?)")


def supported_versions(op: str) -> list[int]:
    """The opsets in MIN_OPSET..MAX_OPSET at which ONNX operator ``op`` has a version of its
    own (its schema history; a version older than MIN_OPSET is the one in force there)."""
    import onnx.defs

    since = {s.since_version for s in onnx.defs.get_all_schemas_with_history()
             if s.name == op and s.domain == ""}
    refused = REFUSED_VERSIONS.get(op, {})
    return sorted({max(v, MIN_OPSET) for v in since if v <= MAX_OPSET} - set(refused))


def operators_markdown() -> str:
    """The README's list of supported operators and their versions, generated from
    CONVERTERS (tests/graph/test_onnx_opsets.py checks that the README holds this text)."""
    items = [f"`{op}` {', '.join(map(str, supported_versions(op)))}" for op in sorted(CONVERTERS)]
    lines, line = [], ""
    for item in items:
        if line and len(line) + len(item) + 3 > 98:
            lines.append(line + " ·")
            line = ""
        line = f"{line} · {item}" if line else item
    lines.append(line)
    tail = textwrap.fill(
        "Without a converter of their own, imported through the function bodies the ONNX "
        "specification gives them (graph/frontends/onnx_functions.py; each body's operators "
        "must import): " + ", ".join(f"`{op}`" for op in function_operators()) + " (not "
        + ", ".join(f"{op}: {why}" for op, why in _BODY_NEVER_IMPORTS.items()) + ").", 98)
    contrib = textwrap.fill(
        "onnxruntime's contrib operators, as its transformer optimizer and its saved "
        "ORT_ENABLE_EXTENDED models write them (graph/frontends/onnx_contrib.py, checked "
        "against onnxruntime by tests/graph/test_onnx_contrib.py): " + ", ".join(
            f"`{op_label(d, op)}`" + (" (default domain)" if not d else "")
            for d, op in sorted(DOMAIN_CONVERTERS)) + "; the `com.microsoft.nchwc` operators "
        "are refused (re-optimize at opt_level <= 2).", 98)
    head = textwrap.fill(
        f"{len(items)} operators of the default domain, opsets {MIN_OPSET} to {MAX_OPSET}, each "
        "with the opsets where its version changed (tests/graph/test_onnx_opsets.py checks "
        "each against onnxruntime, or names the test file that does):", 98)
    return head + "\n\n" + "\n".join(lines) + "\n\n" + tail + "\n\n" + contrib + "\n"


# function-bodied operators whose bodies need what tensorlang has no value for
_BODY_NEVER_IMPORTS = {"Bernoulli": "random numbers", "SequenceMap": "sequences"}


def function_operators() -> list[str]:
    """The operators of the default domain without a converter whose schema, at some opset up
    to MAX_OPSET, has a function body (fixed or built per node) that can import."""
    import onnx.defs

    return sorted({s.name for s in onnx.defs.get_all_schemas_with_history()
                   if s.domain == "" and s.since_version <= MAX_OPSET and s.name not in CONVERTERS
                   and (s.has_function or s.has_context_dependent_function)}
                  - set(_BODY_NEVER_IMPORTS))


def _model_opset(m) -> int:
    opset = None
    for imp in m.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = imp.version
    if opset is None:
        raise OnnxImportError("the model imports no version of the default ONNX domain")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise OnnxImportError(f"opset {opset} is not supported (supported: {MIN_OPSET} to "
                              f"{MAX_OPSET})")
    return opset


def from_onnx(model, shapes: dict[str, tuple] | None = None, name: str | None = None) -> Graph:
    """Import an ONNX model (path, bytes or ``onnx.ModelProto``) as a graph.

    The nodes are imported in order, folding as they go: a node whose inputs are all constants
    becomes a constant (with the graph op's numpy reference, or onnx's reference evaluator for
    an operator tensorlang lacks), an ``If`` whose condition folds is its taken branch, a
    ``Loop``/``Scan`` with a static trip count is unrolled. What cannot be imported after that is
    listed, every node of it, in one :class:`UnsupportedOperatorError`.

    Inputs with symbolic dimensions (``dim_param``, or unnamed dynamic ones) keep them as shape
    variables: the graph is built once and runs at any sizes (issue 19). ``shapes``: input
    name -> shape, to fix them instead (ints; a name makes that axis the variable of that
    name; a ``dim_param`` given a size is that size in every input that has it); it must have
    the declared rank and keep the declared fixed sizes (ValueError;
    TypeError for entries that are neither ints nor names), and an input that declares no
    shape needs one. Two variables that a node needs equal (a mask's length ``t`` added to
    scores of length ``p + s``) become one: the model is imported again with the solved one
    replaced in the inputs' shapes (``t := p + s``), which the runtime checks
    (onnx_unify.py). Raises :class:`OnnxImportError` for malformed models."""
    m = _load(model)
    opset = _model_opset(m)
    _check_names(m.graph)
    unified: dict[str, Any] = {}  # variable -> the dimension it is replaced by
    take_cases = False  # Slice bounds taken in their evident case (_slice_bound)
    while True:
        ctx, scope = _import_graph(m, opset, shapes, name, unified, take_cases)
        solved = next_substitution(ctx.refused, ctx.b._inputs)
        if solved is not None:
            unified = substituted(unified, *solved)
        elif ctx.refused and ctx.bound_cases_found and not take_cases:
            # the exact extents of slices whose bounds' case the sizes decide may not match
            # the rest of the model (MPT's alibi[..., 2048 - seq:] against seq x seq scores):
            # again, taking the evident case, which the run time checks
            take_cases = True
        else:
            break
    if ctx.refused and not ctx.unsupported and len(ctx.refused) == 1:
        raise ctx.refused[0][3]  # one refusal: its own error, as it was raised
    if ctx.unsupported or ctx.refused:
        raise UnsupportedOperatorError(ctx.unsupported, ctx.refused, ctx.unsupported_why)
    return ctx.b.build(_graph_outputs(ctx.b, m.graph, scope))


def _import_graph(m, opset: int, shapes: dict | None, name: str | None,
                  unified: dict[str, Any], take_cases: bool = False) -> tuple[_Ctx, _Scope]:
    """One import of the model's nodes, the inputs' shape variables ``unified`` replaced;
    ``take_cases``: Slice bounds in their evident case (_slice_bound)."""
    gp = m.graph
    b = Builder(name or _sanitize(gp.name or "onnx_model"), fold=True)
    scope = _Scope()
    init_names = {init.name for init in gp.initializer}
    _add_inputs(b, gp, init_names, dict(shapes or {}), scope.local, unified)
    names = _internal_names(b, gp)
    for init in gp.initializer:
        data = _initializer_array(init)
        scope.set(init.name, Value(names[init.name], data.shape, data.dtype, data=data))
    ctx = _Ctx(b, opset, scope, names, [])
    ctx.take_bound_cases = take_cases
    ctx.output_names = {o.name for o in gp.output}
    ctx.bound = {id(v) for v in scope.local.values()}
    import_nodes(ctx, gp.node)
    return ctx, scope


def import_nodes(ctx: _Ctx, nodes) -> None:
    """Import ``nodes`` in order into ``ctx``'s builder, binding their outputs in its scope."""
    for i, n in enumerate(nodes):
        _import_node(ctx, i, n)


def import_body(ctx: _Ctx, body) -> None:
    """Import subgraph ``body`` (an If branch, a Loop or Scan body) into ``ctx``: its own
    initializers first (the spec allows them in subgraphs, and the exporter of openwakeword's
    silero VAD keeps each branch's constants there), bound in its scope, then its nodes."""
    for init in body.initializer:
        ctx.scope.set(init.name, ctx.b.const(_initializer_array(init), name=_sanitize(init.name)))
    import_nodes(ctx, body.node)


def _read_inputs(ctx: _Ctx, n) -> list:
    ins = []
    for v in n.input:
        if not v:
            ins.append(None)
        elif v not in ctx.scope:
            raise OnnxImportError(f"node {ctx.node_name!r} ({n.op_type}) reads {v!r}, which no "
                                  "earlier node, input or initializer defines")
        else:
            ins.append(ctx.scope.get(v))
    return ins


def _is_default_domain(n) -> bool:
    return is_default_domain(n.domain)


def _import_node(ctx: _Ctx, i: int, n) -> None:
    ctx.node = n
    ctx.node_name = _sanitize(n.name or f"{n.op_type}_{i}")
    ctx.op_type = n.op_type
    ctx.op_label = op_label(n.domain, n.op_type)
    ctx.num_outputs = len(n.output)
    ctx.outputs_read = [bool(o) for o in n.output]
    ins = _read_inputs(ctx, n)
    supported = converter_for(n.domain, n.op_type) is not None
    if any(v is UNKNOWN for v in ins):
        # downstream of an unsupported node: nothing to import, but its own operator (and the
        # operators of its subgraphs) may be unsupported too: list them now, not one per try
        if not supported:
            _record_unsupported(ctx, n, i, REFUSED_DOMAINS.get(
                n.domain, "downstream of another unsupported node"))
        _record_unsupported_subgraphs(ctx, n)
        _bind(ctx, n, [UNKNOWN] * len(n.output))
        return
    if not supported:
        # an operator without a converter: folded when its inputs are constants, else its
        # ONNX function body when the specification gives it one
        outs = _fold_by_reference(ctx, n, ins)
        if outs is None and _is_default_domain(n) and not _subgraphs(n):
            outs = _or_refused(ctx, n, i, lambda: expand_function(ctx, n, ins))
        if outs is None:
            _record_unsupported(ctx, n, i, _why_not_folded(n, ins))
            _record_unsupported_subgraphs(ctx, n)
            outs = [UNKNOWN] * len(n.output)
        _bind(ctx, n, outs)
        return
    _bind(ctx, n, _or_refused(ctx, n, i, lambda: _convert(ctx, n, ins)))


def _or_refused(ctx: _Ctx, n, i: int, imported: Callable[[], list | None]) -> list | None:
    """``imported()``; when it refuses the node, the refusal is kept to be listed with the
    others (or raised at once where the context lists none) and the outputs are UNKNOWN."""
    try:
        return imported()
    except OnnxImportError as e:
        if ctx.refused is None:
            raise
        ctx.refused.append((n.op_type, n.name or f"#{i}", ctx.opset, e))
        return [UNKNOWN] * len(n.output)


def _symbolic_note(ins: list) -> str:
    """For a converter that failed on inputs with symbolic dimensions (issue 19): which, and the
    way out."""
    sym = [v for v in ins if isinstance(v, Value) and not v.is_static]
    if not sym:
        return ""
    shapes = ", ".join(f"{v.name}: {v.type_str()}" for v in sym)
    return (f" (its inputs have symbolic dimensions, {shapes}; if this operator cannot take "
            "them, give the inputs' sizes: from_onnx(model, shapes={...}))")


def _convert(ctx: _Ctx, n, ins: list) -> list:
    """The node's converter, its errors as OnnxImportError naming the node."""
    try:
        outs = converter_for(n.domain, n.op_type)(ctx, ins, _attrs(n))
    # (ArithmeticError: a converter folding constants, 1 / 0 or int(inf))
    except (GraphError, KeyError, IndexError, ValueError, TypeError, ArithmeticError) as e:
        if type(e) is OnnxImportError and "shapes=" not in str(e) and _symbolic_note(ins):
            # a converter's own refusal of symbolic inputs (silero VAD's LSTM given the rank
            # of a branch taken for other sizes) says the way out too
            raise OnnxImportError(f"{e}{_symbolic_note(ins)}") from None
        if isinstance(e, OnnxImportError):
            raise
        why = f"node {ctx.node_name!r} ({ctx.op_label}, opset {ctx.opset}): {e}"
        if isinstance(e, S.UnprovenEqual):  # (from_onnx may solve it: see onnx_unify.py)
            raise UnprovenEqualityError(f"{why}{_symbolic_note(ins)}", e.a, e.b) from None
        raise OnnxImportError(f"{why}{_symbolic_note(ins)}") from None
    used = [o for o in n.output if o]
    if len(outs) < len(used):
        needed = [o for o in n.output[len(outs):] if o]
        raise OnnxImportError(f"node {ctx.node_name!r} ({ctx.op_label}, opset {ctx.opset}): "
                              f"outputs {needed} are not supported")
    return outs


def _bind(ctx: _Ctx, n, outs: list) -> None:
    """Bind a node's ONNX output names to its values. A value the node made takes the name
    reserved for its ONNX name (the top graph) or a fresh one (a subgraph's, which may be
    imported several times: an unrolled loop body)."""
    b = ctx.b
    for oname, v in zip(n.output, outs):
        if not oname:
            continue
        reserved = ctx.names.get(oname)
        if isinstance(v, Value) and (id(v) not in ctx.bound or (
                reserved is not None and id(v) in ctx.sub_named)):
            # new, or named inside an inlined subgraph (a branch or loop body's output that
            # is this node's output): it takes this name
            b._names.discard(v.name)
            v.name = reserved if reserved is not None else b._fresh(_sanitize(oname))
            if v.is_constant and reserved == oname:
                # a folded graph output: the output's copy (_graph_outputs) takes the name
                v.name = b._fresh(_sanitize(oname))
            ctx.bound.add(id(v))
            (ctx.sub_named.discard if reserved is not None else ctx.sub_named.add)(id(v))
        elif (reserved == oname and oname in ctx.output_names and isinstance(v, Value) and
              v.producer is not None and v.name not in ctx.output_names):
            # an Identity passing a computed value on to a graph output: the value takes the
            # output's name (no copy kernel for it)
            b._names.discard(v.name)
            v.name = oname
        ctx.scope.set(oname, v)


def _record_unsupported(ctx: _Ctx, n, i: int, why: str = "") -> None:
    op = op_label(n.domain, n.op_type)
    entry = (op, n.name or f"#{i}", ctx.opset)
    if entry not in ctx.unsupported:  # a loop body unrolled, or one branch graph twice
        ctx.unsupported.append(entry)
        if why:
            ctx.unsupported_why[entry] = why


def _why_not_folded(n, ins: list) -> str:
    """Why a node of an operator tensorlang lacks was not folded into a constant."""
    if n.domain in REFUSED_DOMAINS:
        return REFUSED_DOMAINS[n.domain]
    if _gives_no_tensor(n):
        return "it gives a sequence or an optional, and tensorlang's values are tensors"
    run_time = [v for v in ins if v is not None and not v.is_constant]
    if run_time:
        origin = sorted({name for v in run_time for name in _input_origin(v)})
        return (f"reads values computed at run time (from input(s) {origin})" if origin else
                "reads values computed at run time")
    if not _is_default_domain(n):
        return f"domain {n.domain!r}"
    return "its inputs are constants, but onnx's reference evaluator cannot fold it"


def _gives_no_tensor(n) -> bool:
    """Whether an output of the node's operator is never a tensor (SequenceConstruct, Optional,
    SplitToSequence: a sequence, an optional or a map)."""
    from onnx import defs

    try:
        outputs = defs.get_schema(n.op_type, n.domain).outputs
    except defs.SchemaError:
        return False
    return any(o.types and not any(t.startswith("tensor(") for t in o.types) for o in outputs)


def _record_unsupported_subgraphs(ctx: _Ctx, n) -> None:
    """The unsupported operators inside a node's subgraphs (a branch or loop body that is not
    imported because its node is not), listed with the rest."""
    for sub in _subgraphs(n):
        for j, inner in enumerate(sub.node):
            if converter_for(inner.domain, inner.op_type) is None:
                _record_unsupported(ctx, inner, j)
            _record_unsupported_subgraphs(ctx, inner)


def _subgraphs(n) -> list:
    from onnx import AttributeProto

    out = []
    for a in n.attribute:
        if a.type == AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def _fold_by_reference(ctx: _Ctx, n, ins: list) -> list | None:
    """A node of an operator tensorlang lacks, with constant inputs, evaluated by onnx's
    reference evaluator into constants; None when it cannot be (a run-time input, a subgraph,
    another domain, or the evaluator refuses it)."""
    if not _is_default_domain(n) or _subgraphs(n):
        return None
    if not all(v is None or v.is_constant for v in ins):
        return None
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    in_names = ["" if v is None else f"in{k}" for k, v in enumerate(ins)]
    out_names = [f"out{k}" if o else "" for k, o in enumerate(n.output)]
    node = helper.make_node(n.op_type, in_names, out_names)
    node.attribute.extend(n.attribute)
    try:
        inputs = [helper.make_tensor_value_info(
            nm, helper.np_dtype_to_tensor_dtype(v.data.dtype), v.shape)
            for nm, v in zip(in_names, ins) if v is not None]
        outputs = [helper.make_empty_tensor_value_info(nm) for nm in out_names if nm]
        model = helper.make_model(helper.make_graph([node], "fold", inputs, outputs),
                                  opset_imports=[helper.make_opsetid("", ctx.opset)])
        feeds = {nm: np.asarray(v.data) for nm, v in zip(in_names, ins) if v is not None}
        arrays = ReferenceEvaluator(model).run(None, feeds)
    except Exception:  # noqa: BLE001 - the evaluator's refusals have no common base
        return None
    if not all(isinstance(v, (np.ndarray, np.generic)) for v in arrays):
        return None  # a sequence (a list), an empty optional (None): np.asarray would stack it
    arrays = iter(arrays)
    return [ctx.b.const(np.asarray(next(arrays)), name=ctx.node_name) if o else None
            for o in n.output]


def _graph_outputs(b: Builder, gp, scope: _Scope) -> list[Value]:
    b.fold = False  # the copies below must stay nodes
    outputs = []
    taken: set[int] = set()
    for o in gp.output:
        if o.name not in scope:
            raise OnnxImportError(f"graph output {o.name!r} is not computed by any node")
        v = scope.get(o.name)
        if v is not UNKNOWN and any(isinstance(d, int) and d == 0 for d in v.shape):
            raise OnnxImportError(f"graph output {o.name!r} is an empty tensor (shape "
                                  f"{list(v.shape)}); empty tensors are not supported")
        if v.name != o.name or id(v) in taken:
            # a constant, or a value that another name holds (an input passed through, another
            # output): a copy carries the output's name. An output that *is* a graph input
            # (same name) is that input itself: an identity.
            b._names.discard(o.name)
            v = b.op("copy", [v], name=f"{_sanitize(o.name)}_copy", outputs=[o.name])
        taken.add(id(v))
        outputs.append(v)
    return outputs


def _add_inputs(b: Builder, gp, init_names: set, shapes: dict, env: dict,
                unified: dict[str, Any]) -> None:
    """The graph inputs (not initializers) under their exact ONNX names: what users pass to
    ``run(**inputs)``; the shape variables named in ``unified`` replaced by their dimension."""
    params: dict = {}  # dim_param -> (size, input) given with shapes=
    given: dict = {}  # input -> its shape given with shapes=, read first: it sizes dim_params
    for inp in gp.input:
        tt = inp.type.tensor_type
        if inp.name in shapes and inp.name not in init_names and inp.name not in given:
            declared = _input_shape(inp.name, tt.shape.dim) if tt.HasField("shape") else None
            given[inp.name] = _given_shape(inp.name, shapes.pop(inp.name), declared,
                                           tt.shape.dim, params)
    for inp in gp.input:
        if inp.name in init_names:
            continue  # an initializer listed as input: a weight
        if inp.name in env:
            raise OnnxImportError(f"the graph declares input {inp.name!r} twice")
        tt = inp.type.tensor_type
        if not tt.HasField("elem_type"):
            raise OnnxImportError(f"input {inp.name!r} is not a tensor")
        declared = _input_shape(inp.name, tt.shape.dim) if tt.HasField("shape") else None
        if inp.name in given:
            shape = given.pop(inp.name)
        elif declared is None:
            raise OnnxImportError(f"input {inp.name!r} declares no shape (not even its rank); "
                                  f"give it: from_onnx(model, shapes={{{inp.name!r}: (...)}})")
        else:  # a dim_param sized by another input's shapes= entry has that size here too
            shape = tuple(params[d.dim_param][0] if _dim_param(d) in params else size
                          for d, size in zip(tt.shape.dim, declared))
        try:
            dtype = _np_dtype(tt.elem_type)
        except OnnxImportError as e:
            raise OnnxImportError(f"input {inp.name!r}: {e}") from None
        if dtype.name not in SCALAR_DTYPES:  # a string, complex or 8-bit float tensor
            raise OnnxImportError(f"input {inp.name!r} is a {_type_name(tt.elem_type)} "
                                  f"tensor, which is not supported (tensors of "
                                  f"{', '.join(SCALAR_DTYPES)} are)")
        env[inp.name] = b.input(inp.name, tuple(S.substitute(d, unified) for d in shape), dtype)
    if shapes:
        raise OnnxImportError(f"shapes given for unknown inputs {sorted(shapes)}")


def _type_name(elem_type: int) -> str:
    """ONNX's name of an element type: ``string`` for TensorProto.STRING."""
    from onnx import helper

    return helper.tensor_dtype_to_string(elem_type).rpartition(".")[2].lower()


def _input_shape(name: str, dims) -> tuple:
    """An input's declared shape: a ``dim_param`` is the shape variable of that name (issue 19:
    the graph is built once for every size), an unnamed dynamic dimension the variable
    ``<input>_<axis>``. Names that are not identifiers are made so (``batch size`` ->
    ``batch_size``). A negative size is a dynamic one too, as onnxruntime reads it: paddle2onnx
    writes -1 for a dynamic axis (the direction classifier shipped in rapidocr's wheel). A
    ``dim_param`` of "?" is its unknown marker, not a name: two "?" axes (that classifier's
    height and width) are two variables."""
    out = []
    for k, d in enumerate(dims):
        if d.HasField("dim_value") and d.dim_value > 0:
            out.append(int(d.dim_value))
        else:
            out.append(S.shape_var(_var_name(_dim_param(d) or f"{name}_{k}")))
    return tuple(out)


def _dim_param(d) -> str:
    """A dimension's name; "" for none, and for "?" (paddle2onnx's mark of an unknown size)."""
    return "" if d.dim_param == "?" else d.dim_param


def _var_name(text: str) -> str:
    name = re.sub(r"\W", "_", text)
    return name if name.isidentifier() else f"d_{name}"


def _given_shape(name: str, given, declared: tuple | None, dims, params: dict) -> tuple:
    """The shape given for input ``name`` with ``shapes=``, checked against the one the model
    declares (None: none): the same rank, and the same size where the model fixes one; a
    dynamic dimension may take any size or name, the same size wherever its dim_param is
    (``params``: dim_param -> (size, input) given so far)."""
    if isinstance(given, (str, bytes)) or not hasattr(given, "__iter__"):
        raise TypeError(f"shapes[{name!r}] must be a sequence of ints (or names), got "
                        f"{type(given).__name__} {given!r}")
    shape = tuple(_given_dim(name, d) for d in given)
    if declared is None:
        return shape
    shown = f"[{', '.join(map(str, declared))}]"
    if len(shape) != len(declared):
        raise ValueError(f"shapes[{name!r}] = {list(given)} has rank {len(shape)}, but input "
                         f"{name!r} is declared {shown} (rank {len(declared)})")
    for k, (d, g) in enumerate(zip(dims, given)):
        fixed = d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
        if fixed is not None and g != fixed:
            raise ValueError(f"shapes[{name!r}] = {list(given)} sets dimension {k} to {g!r}, but "
                             f"input {name!r} is declared {shown}: only its dynamic "
                             "dimensions may be given")
        if _dim_param(d) and isinstance(g, (int, np.integer)):
            size, other = params.setdefault(d.dim_param, (g, name))
            if size != g:
                raise ValueError(f"shapes[{name!r}] = {list(given)} sets {d.dim_param!r} "
                                 f"(dimension {k}) to {g}, but shapes[{other!r}] sets it to "
                                 f"{size}")
    return shape


def _given_dim(name: str, d):
    """A dimension given with ``shapes=``: an int fixes it (specialises the build), a name
    makes it that shape variable."""
    if isinstance(d, str):
        return S.shape_var(_var_name(d))
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
        raise TypeError(f"shapes[{name!r}]: dimension {d!r} is a {type(d).__name__}, not an "
                        "int (or a name)")
    if d < 1:
        raise ValueError(f"shapes[{name!r}]: dimension {d} must be positive")
    return int(d)


def _internal_names(b: Builder, gp) -> dict[str, str]:
    """Graph value names for the ONNX values: computed graph outputs keep their exact names
    (the keys of ``run``'s result); other values get their names sanitized, made unique
    ("in a" and "in_a" may both be ONNX names). Reserved before any node is added, so that the
    names the builder generates never take one."""
    out_names = {o.name for o in gp.output}
    b._names |= out_names
    # constants are never outputs themselves (an output that is one is a copy of it)
    names = {init.name: b._fresh(_sanitize(init.name)) for init in gp.initializer}
    for v in (o for n in gp.node for o in n.output):
        if v and v not in names:
            names[v] = v if v in out_names else b._fresh(_sanitize(v))
    return names


def _initializer_array(init) -> np.ndarray:
    """An initializer's data, or OnnxImportError naming it (data that does not match its dims,
    an unknown data type, external data that is missing)."""
    from onnx import numpy_helper

    try:
        data = numpy_helper.to_array(init)
    except Exception as e:  # noqa: BLE001 - onnx raises ValueError, TypeError, OSError, ...
        raise OnnxImportError(f"initializer {init.name!r} (dims {list(init.dims)}) cannot be "
                              f"read: {' '.join(str(e).split())}") from None
    if tuple(data.shape) != tuple(init.dims):
        raise OnnxImportError(f"initializer {init.name!r}: data of shape {list(data.shape)} "
                              f"does not match its dims {list(init.dims)}")
    if data.dtype == object:  # (numpy's type for ONNX strings)
        raise OnnxImportError(f"initializer {init.name!r} is a string tensor, which is not "
                              f"supported")
    # ours alone (a view of the bytes onnx read, or a fresh array): the graph's constant
    # takes it without a copy
    return freeze(data)


# the converters of other modules register themselves into CONVERTERS when imported (each
# imports this module): If, Loop, Scan; IsNaN, IsInf, Mod, CumSum, CumProd, TopK, Einsum,
# OneHot, BitShift; LSTM, GRU, RNN; the vision operators of issue 18, ScatterElements; and
# into DOMAIN_CONVERTERS onnxruntime's contrib operators (onnx_contrib, onnx_attention,
# onnx_contrib_quant)
from . import (  # noqa: F401
    onnx_attention,
    onnx_contrib,
    onnx_contrib_quant,
    onnx_control_flow,
    onnx_misc,
    onnx_quant,
    onnx_rnn,
    onnx_vision,
)
