"""ONNX import of onnxruntime's contrib operators (the ``com.microsoft`` domain): what
onnxruntime's transformer optimizer (``onnxruntime.transformers.optimizer.optimize_model``,
which optimum's ``--optimize`` runs) and its own graph optimizations
(``SessionOptions.optimized_model_filepath`` at ORT_ENABLE_BASIC / ORT_ENABLE_EXTENDED) write
into a model; registered into :data:`onnx_context.DOMAIN_CONVERTERS` when the importer loads.

Each operator is built from the graph's own ops with the semantics of onnxruntime's CPU
kernels (docs/ContribOperators.md in microsoft/onnxruntime; tests/graph/test_onnx_contrib.py
compares each with onnxruntime): the GELU family, the skip / embedding / RMS layer
normalizations, FusedMatMul, FusedConv and FusedGemm here, Attention and MultiHeadAttention in
onnx_attention.py.
Operators of the domain without a converter here (BiasSoftmax and BiasAdd have no CPU kernel
in onnxruntime, so no CPU-optimized model holds them) are listed as unsupported, named
``com.microsoft::Op``. The ``com.microsoft.nchwc`` operators are refused as a whole.
"""

from __future__ import annotations

import numpy as np

from ..ir import Value, freeze
from .onnx_context import CONVERTERS, REFUSED_DOMAINS, _conv_in, refuse

MS = "com.microsoft"

REFUSED_DOMAINS["com.microsoft.nchwc"] = (
    "onnxruntime's NCHWc blocked layout (written at ORT_ENABLE_ALL, optimize_model's "
    "opt_level 99), chosen for the CPU that optimized the model, which onnxruntime itself "
    "calls hardware specific; re-optimize the model at opt_level <= 2 "
    "(ORT_ENABLE_EXTENDED or lower) and import that")


# ---------------------------------------------------------------------------- helpers


def _opt(ins: list, i: int) -> Value | None:
    return ins[i] if len(ins) > i else None


def _scalar(c, value: float, dtype, what: str) -> Value:
    return c.b.const(np.asarray(value, dtype=dtype), name=f"{c.node_name}_{what}")


def _check_rank(c, v: Value | None, ranks: tuple[int, ...], what: str) -> None:
    if v is None:
        raise refuse(c, f"{what} is required")
    if len(v.shape) not in ranks:
        want = " or ".join(map(str, ranks))
        raise refuse(c, f"{what} must have rank {want}, got shape {list(v.shape)}")


def _check_vector(c, v: Value | None, size, what: str) -> None:
    """``v`` (when given) is 1-D with ``size`` entries: onnxruntime's kernels read it so."""
    if v is not None and (len(v.shape) != 1 or v.shape[0] != size):
        raise refuse(c, f"{what} must be 1-D of size {size} (the last axis of the input), got "
                        f"shape {list(v.shape)}")


def _required_int(c, a: dict, name: str, least: int = 1) -> int:
    if name not in a:
        raise refuse(c, f"the {name} attribute is required")
    v = a[name]
    if not isinstance(v, int) or v < least:
        raise refuse(c, f"{name} must be an integer >= {least}, got {v!r}")
    return v


def _plus_bias(c, x: Value, bias: Value | None) -> Value:
    if bias is None:
        return x
    _check_vector(c, bias, x.shape[-1], "bias")
    return c.op("add", [x, bias])


def _unread(c, index: int, why: str) -> None:
    """Refuse output ``index`` when the model reads it."""
    if len(c.outputs_read) > index and c.outputs_read[index]:
        raise refuse(c, f"output {index} ({c.node.output[index]!r}) is not supported: {why}")


# ---------------------------------------------------------------------------- activations


@_conv_in(MS, "Gelu", "BiasGelu", "FastGelu")
def _gelu(c, ins, a):
    """Gelu: erf's; BiasGelu: erf's of A + B (B required); FastGelu: tanh's of X (+ bias)."""
    if c.op_type == "BiasGelu" and _opt(ins, 1) is None:
        raise refuse(c, "input B (the bias) is required")
    x = _plus_bias(c, ins[0], _opt(ins, 1) if c.op_type != "Gelu" else None)
    return [c.op("gelu", [x], approximate="tanh" if c.op_type == "FastGelu" else "none")]


@_conv_in(MS, "QuickGelu")
def _quick_gelu(c, ins, a):
    """x * sigmoid(alpha * x) (what onnxruntime makes of SiLU / Swish with alpha 1)."""
    x = ins[0]
    alpha = float(a.get("alpha", 1.702))
    z = x if alpha == 1.0 else c.op("multiply", [x, _scalar(c, alpha, x.dtype, "alpha")])
    return [c.op("multiply", [x, c.op("sigmoid", [z])])]


def _activation(c, y: Value, name: str, params: list[float]) -> Value:
    """FusedConv / FusedGemm's ``activation`` with its parameters, applied to ``y``."""
    def param(i: int, default: float) -> float:
        return float(params[i]) if len(params) > i else default

    if name in ("", "Identity"):
        return y
    if name in ("Relu", "Tanh", "Sigmoid"):
        return c.op(name.lower(), [y])
    if name == "LeakyRelu":
        return c.op("leaky_relu", [y], alpha=param(0, 0.01))
    if name == "HardSigmoid":
        return c.op("hard_sigmoid", [y], alpha=param(0, 0.2), beta=param(1, 0.5))
    if name == "Clip":
        return c.op("clip", [y], min=param(0, float("-inf")), max=param(1, float("inf")))
    raise refuse(c, f"activation {name!r} is not supported (supported: Relu, Tanh, Sigmoid, "
                    "LeakyRelu, HardSigmoid, Clip)")


@_conv_in(MS, "FusedConv")
def _fused_conv(c, ins, a):
    """Conv (+ Z, the sum input) then the activation, as onnxruntime fuses them."""
    conv_attrs = {k: v for k, v in a.items() if k not in ("activation", "activation_params")}
    y = CONVERTERS["Conv"](c, ins[:3], conv_attrs)[0]
    z = _opt(ins, 3)
    if z is not None:
        y = c.op("add", [y, z])
    return [_activation(c, y, a.get("activation", ""), list(a.get("activation_params", [])))]


@_conv_in(MS, "FusedGemm")
def _fused_gemm(c, ins, a):
    gemm_attrs = {k: v for k, v in a.items() if not k.startswith("activation")}
    y = CONVERTERS["Gemm"](c, ins[:3], gemm_attrs)[0]
    params = [a[k] for k in ("activation_alpha", "activation_beta") if k in a]
    return [_activation(c, y, a.get("activation", ""), params)]


@_conv_in(MS, "FusedMatMul")
def _fused_matmul(c, ins, a):
    """alpha * (A or A^T) @ (B or B^T), transposing the last two axes."""
    A, B = ins[0], ins[1]
    if a.get("transBatchA", 0) or a.get("transBatchB", 0):
        raise refuse(c, "transBatchA / transBatchB are not supported (onnxruntime's optimizer "
                        "writes them only for training graphs)")
    A = _swap_last(c, A, "A") if a.get("transA", 0) else A
    B = _swap_last(c, B, "B") if a.get("transB", 0) else B
    y = CONVERTERS["MatMul"](c, [A, B], {})[0]
    alpha = float(a.get("alpha", 1.0))
    return [y if alpha == 1.0 else c.op("multiply", [y, _scalar(c, alpha, y.dtype, "alpha")])]


def _swap_last(c, v: Value, what: str) -> Value:
    nd = len(v.shape)
    if nd < 2:
        raise refuse(c, f"{what} must have rank >= 2 to be transposed, got {list(v.shape)}")
    if v.is_constant:  # a weight: transposed once, here
        return c.b.const(freeze(np.swapaxes(v.data, -1, -2).copy()), name=f"{v.name}_t")
    return c.op("transpose", [v], perm=list(range(nd - 2)) + [nd - 1, nd - 2])


# ---------------------------------------------------------------------------- normalizations


def layer_norm_stats(c, x: Value, axis: int, epsilon: float) -> tuple[Value, Value]:
    """The mean and 1 / sqrt(variance + epsilon) over axes ``axis``.. of ``x``, kept as
    size-1 axes (LayerNormalization's training outputs, which onnxruntime also gives)."""
    axes = list(range(axis % len(x.shape), len(x.shape)))
    mean = c.op("reduce_mean", [x], axes=axes, keepdims=1)
    d = c.op("subtract", [x, mean])
    var = c.op("reduce_mean", [c.op("multiply", [d, d])], axes=axes, keepdims=1)
    return mean, _inv_root(c, var, epsilon)


def _inv_root(c, v: Value, epsilon: float) -> Value:
    eps = _scalar(c, epsilon, v.dtype, "epsilon")
    return c.op("reciprocal", [c.op("sqrt", [c.op("add", [v, eps])])])


def _rms_norm(c, x: Value, scale: Value, axis: int, epsilon: float) -> tuple[Value, Value]:
    """x / sqrt(mean(x^2) + epsilon) * scale over axes ``axis``.., and the inverse root."""
    axes = list(range(axis % len(x.shape), len(x.shape)))
    ms = c.op("reduce_mean", [c.op("multiply", [x, x])], axes=axes, keepdims=1)
    inv = _inv_root(c, ms, epsilon)
    return c.op("multiply", [c.op("multiply", [x, inv]), scale]), inv


def _layer_norm(c, x: Value, gamma: Value, beta: Value | None, epsilon: float) -> Value:
    inputs = [x, gamma] + ([beta] if beta is not None else [])
    return c.op("layer_norm", inputs, axis=-1, epsilon=epsilon)


@_conv_in(MS, "SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
def _skip_layer_norm(c, ins, a):
    """LayerNorm (RMS for the simplified one) of input + skip (+ bias) over the last axis;
    outputs: the result, the mean (not for RMS) and inverse deviation, the sum."""
    simplified = c.op_type == "SkipSimplifiedLayerNormalization"
    x, skip, gamma = ins[0], _opt(ins, 1), _opt(ins, 2)
    beta, bias = (None, _opt(ins, 3)) if simplified else (_opt(ins, 3), _opt(ins, 4))
    _check_rank(c, x, (2, 3), "input")
    _check_rank(c, skip, (2, 3), "skip")
    if skip.shape[-1] != x.shape[-1] or len(skip.shape) > len(x.shape):
        raise refuse(c, f"skip {list(skip.shape)} must be the input's shape {list(x.shape)} "
                        "or its trailing [sequence, hidden] with a batch of 1")
    hidden = x.shape[-1]
    _check_rank(c, gamma, (1,), "gamma")
    for v, what in ((gamma, "gamma"), (beta, "beta"), (bias, "bias")):
        _check_vector(c, v, hidden, what)
    eps = float(a.get("epsilon", 1e-12))
    total = _plus_bias(c, c.op("add", [x, skip]), bias)
    if simplified:
        _unread(c, 1, "RMS normalization has no mean (onnxruntime leaves it unwritten)")
        y, inv = _rms_norm(c, total, gamma, -1, eps)
        return [y, None, inv, total]
    y = _layer_norm(c, total, gamma, beta, eps)
    if not any(c.outputs_read[1:3]):
        return [y, None, None, total]
    mean, inv = layer_norm_stats(c, total, -1, eps)
    return [y, mean, inv, total]


@_conv_in("", "SimplifiedLayerNormalization")
def _simplified_layer_norm(c, ins, a):
    """RMS normalization (onnxruntime registers it in the default domain, where its
    optimizers write it)."""
    x, scale = ins[0], _opt(ins, 1)
    if scale is None:
        raise refuse(c, "input scale is required")
    axis = int(a.get("axis", -1))
    if not -len(x.shape) <= axis < len(x.shape):
        raise refuse(c, f"axis {axis} is out of range for an input of rank {len(x.shape)}")
    y, inv = _rms_norm(c, x, scale, axis, float(a.get("epsilon", 1e-5)))
    return [y, inv]


@_conv_in(MS, "EmbedLayerNormalization")
def _embed_layer_norm(c, ins, a):
    """LayerNorm(word[ids] + position[position_ids or 0..S-1] (+ segment[segment_ids]));
    outputs: that, the mask index (the count of ones in each mask row; zeros without a
    mask) and the sum before the normalization."""
    ids, seg, word, pos, seg_table, gamma, beta = (list(ins) + [None] * 9)[:7]
    mask, pos_ids = _opt(ins, 7), _opt(ins, 8)
    _check_rank(c, ids, (2,), "input_ids")
    _check_rank(c, word, (2,), "word_embedding")
    _check_rank(c, pos, (2,), "position_embedding")
    if (seg is None) != (seg_table is None):
        raise refuse(c, "segment_ids and segment_embedding go together: give both or neither")
    if beta is None:
        raise refuse(c, "gamma and beta are required")
    hidden = word.shape[1]
    for v, what in ((gamma, "gamma"), (beta, "beta")):
        _check_vector(c, v, hidden, what)
    total = c.op("add", [_lookup(c, word, ids), _positions(c, pos, ids, pos_ids)])
    if seg is not None:
        total = c.op("add", [total, _lookup(c, seg_table, seg)])
    y = _layer_norm(c, total, gamma, beta, float(a.get("epsilon", 1e-12)))
    return [y, _mask_count(c, ids, mask), total]


def _lookup(c, table: Value, ids: Value) -> Value:
    return c.op("gather", [table, ids], axis=0)


def _positions(c, table: Value, ids: Value, pos_ids: Value | None) -> Value:
    if pos_ids is not None:
        return _lookup(c, table, pos_ids)
    seq = ids.shape[1]
    if isinstance(seq, int):
        if seq > table.shape[0]:
            raise refuse(c, f"the sequence ({seq}) is longer than the position table "
                            f"({table.shape[0]} rows)")
        return c.op("slice", [table], starts=[0], ends=[seq], axes=[0])
    first = c.op("slice", [ids], starts=[0], ends=[1], axes=[0])  # [1, S]: 0..S-1 from it
    row = c.op("reshape", [first], shape=[seq])
    return _lookup(c, table, c.op("arange_like", [row], start=0, delta=1))


def _mask_count(c, ids: Value, mask: Value | None) -> Value:
    if mask is None:
        return c.b.const(np.zeros(ids.shape[:1], np.int32), name=f"{c.node_name}_mask_index")
    if mask.shape != ids.shape:
        raise refuse(c, f"mask {list(mask.shape)} must have input_ids' shape {list(ids.shape)}")
    ones = c.op("equal", [mask, _scalar(c, 1, mask.dtype, "one")])
    return c.op("reduce_sum", [c.op("cast", [ones], dtype="int32")], axes=[1], keepdims=0)

