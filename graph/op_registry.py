"""Graph operators: for each op name, its pattern kind, shape/dtype inference, a numpy reference
(used to fold constant subgraphs at build time) and its lowering to tensor-expression computes.

Why a registry of its own instead of calling ``tensorlang.ops`` directly: the operator library was
being written at the same time as this layer, so every graph op here lowers through
:mod:`tensorlang.graph.lowering`, which holds small self-contained computes. Op names follow the
library's vocabulary (conv2d-like ops are ``conv``, ``dense``/``matmul``, ``max_pool``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorlang.ops import references as lib_ref
from tensorlang.ops.definition import OpDefinition, get_definition
from tensorlang.ops.patterns import (  # the one definition of the kinds; fusion reads them
    BROADCAST,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OUT_ELEMWISE_FUSABLE,
    REDUCE,
    Pattern,
    as_pattern,
)
from tensorlang.ops.transform import BLOCKED_LAYOUT, SLICE_TO_END

from . import symbolic as S
from .ir import GraphError
from .symbolic import broadcast, is_static, num_elements, parse_shape, shape_of

# Graph ops named as a library op but fused differently from the library compute's kind, and
# why (every other such op has the library definition's kind: register() checks it).
PATTERN_OVERRIDES = {
    # the square-sum window reads across channels: one kernel, nothing fused into it
    "lrn": OPAQUE,
    # values computed from sizes, whose compute reads its argument under a false condition
    # (only to have its sizes): a kernel of its own, so that a gather reading the values as
    # indices loads them and checks them at run time (inlined, the condition simplifies away
    # and the index looks affine, proven only for sizes that fit: a build error)
    "arange_like": OPAQUE,
    "shape_values": OPAQUE,
}

Type = tuple[tuple[int, ...], str]  # (shape, dtype)


@dataclass(frozen=True)
class OpDef:
    name: str
    pattern: Pattern
    num_inputs: tuple[int, int]  # (min, max); max -1: variadic
    infer: Callable[[Sequence[Type], dict], list[Type]]
    ref: Callable[[Sequence[np.ndarray], dict], list[np.ndarray]] | None
    # An alias op produces a view of its input's bytes: no kernel, no copy at run time.
    alias: bool = False
    # the library operator of the same name (tensorlang.ops), when there is one
    definition: OpDefinition | None = None


OPS: dict[str, OpDef] = {}


def _library_definition(name: str) -> OpDefinition | None:
    try:
        return get_definition(name)
    except LookupError:
        return None


def register(name, pattern, num_inputs, infer, ref=None, alias=False) -> None:
    """Register graph op ``name``. A graph op named as a library op has that op's pattern kind
    (or its entry in PATTERN_OVERRIDES): a mismatch is a GraphError when the module loads."""
    if isinstance(num_inputs, int):
        num_inputs = (num_inputs, num_inputs)
    kind = as_pattern(pattern)
    lib = _library_definition(name)
    if lib is not None and kind != PATTERN_OVERRIDES.get(name, lib.pattern):
        raise GraphError(f"graph op {name!r} is registered {kind} but the library op of that "
                         f"name is {lib.pattern}: fix one, or list it in PATTERN_OVERRIDES")
    OPS[name] = OpDef(name, kind, num_inputs, infer, ref, alias, lib)


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(
            f"unknown graph operator {name!r}; known: {', '.join(sorted(OPS))}"
        ) from None


def infer_types(op: str, in_types: Sequence[Type], attrs: dict, node: str = "?") -> list[Type]:
    d = get_op(op)
    lo, hi = d.num_inputs
    if len(in_types) < lo or (hi >= 0 and len(in_types) > hi):
        want = f"{lo}" if lo == hi else f"{lo} to {'any' if hi < 0 else hi}"
        raise GraphError(f"{op} node {node!r} takes {want} inputs, got {len(in_types)}")
    try:
        return [(shape_of(s), np.dtype(t).name) for s, t in d.infer(in_types, attrs)]
    except S.UnprovenEqual as e:  # (keeps the equation for from_onnx to solve)
        raise e.reworded(f"{op} node {node!r}: {e}") from None
    except GraphError as e:
        raise GraphError(f"{op} node {node!r}: {e}") from None
    except (ValueError, IndexError, KeyError, TypeError) as e:
        shapes = ", ".join(f"{t}{list(s)}" for s, t in in_types)
        raise GraphError(f"{op} node {node!r} with inputs ({shapes}) and attributes {attrs}: "
                         f"{e}") from None


# ---------------------------------------------------------------------------- helpers


def _same(types, attrs):
    return [types[0]]


def _bcast_shape(*shapes) -> tuple[int, ...]:
    if not all(is_static(s) for s in shapes):
        return broadcast(*shapes)
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise GraphError(f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast") \
            from None


def _bcast(types, attrs):
    dtypes = {t for _, t in types}
    if len(dtypes) != 1:
        raise GraphError(f"operand dtypes differ: {sorted(dtypes)}")
    return [(_bcast_shape(*[s for s, _ in types]), types[0][1])]


def _compare(types, attrs):
    return [(_bcast(types, attrs)[0][0], "bool")]


def norm_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise GraphError(f"axis {axis} is out of range for rank {ndim}")
    return axis % max(ndim, 1)


# ---------------------------------------------------------------------------- elementwise


def _gelu_ref(x, approximate="none"):
    from math import erf, pi, sqrt

    x64 = x.astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1 + np.tanh(sqrt(2 / pi) * (x64 + 0.044715 * x64**3)))
    else:
        y = 0.5 * x64 * (1 + np.vectorize(erf)(x64 / sqrt(2)))
    return y.astype(x.dtype)


def _sigmoid(x):
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def _quiet(fn):
    """A unary reference: fn, which outside its domain gives NaN (or inf) without numpy's
    warning, as the kernels do."""
    def ref(x, a):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return fn(x).astype(x.dtype)

    return ref


UNARY_REFS: dict[str, Callable[[np.ndarray, dict], np.ndarray]] = {
    "relu": lambda x, a: np.maximum(x, 0).astype(x.dtype),
    "sigmoid": lambda x, a: _sigmoid(x),
    "tanh": lambda x, a: np.tanh(x),
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "sqrt": lambda x, a: np.sqrt(x),
    "negative": lambda x, a: -x,
    "abs": lambda x, a: np.abs(x),
    "floor": lambda x, a: np.floor(x),
    "ceil": lambda x, a: np.ceil(x),
    "reciprocal": lambda x, a: (1 / x).astype(x.dtype),
    "sin": lambda x, a: np.sin(x),
    "cos": lambda x, a: np.cos(x),
    **{name: _quiet(fn) for name, fn in (
        ("tan", np.tan), ("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan),
        ("sinh", np.sinh), ("cosh", np.cosh), ("asinh", np.arcsinh), ("acosh", np.arccosh),
        ("atanh", np.arctanh))},
    "round": lambda x, a: np.round(x),
    "sign": lambda x, a: np.sign(x),
    "thresholded_relu": lambda x, a: np.where(x > a.get("alpha", 1.0), x, 0).astype(x.dtype),
    "shrink": lambda x, a: lib_ref.shrink(x, a.get("lambd", 0.5), a.get("bias", 0.0)),
    "mish": lambda x, a: lib_ref.mish(x),
    "bitwise_not": lambda x, a: np.invert(x),
    "erf": lambda x, a: np.vectorize(__import__("math").erf)(x.astype(np.float64)).astype(x.dtype),
    "gelu": lambda x, a: _gelu_ref(x, a.get("approximate", "none")),
    "leaky_relu": lambda x, a: np.where(x >= 0, x, x * a.get("alpha", 0.01)).astype(x.dtype),
    "elu": lambda x, a: np.where(x > 0, x, a.get("alpha", 1.0) * (np.exp(x) - 1)).astype(x.dtype),
    "selu": lambda x, a: (
        a.get("gamma", 1.0507) * np.where(x > 0, x, a.get("alpha", 1.67326) * (np.exp(x) - 1))
    ).astype(x.dtype),
    "hard_sigmoid": lambda x, a: np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)
    .astype(x.dtype),
    "hard_swish": lambda x, a: (x * np.clip(x / 6 + 0.5, 0, 1)).astype(x.dtype),
    "softplus": lambda x, a: np.log1p(np.exp(x)).astype(x.dtype),
    "softsign": lambda x, a: (x / (1 + np.abs(x))).astype(x.dtype),
    "clip": lambda x, a: np.clip(x, a.get("min", -np.inf), a.get("max", np.inf)).astype(x.dtype),
    "logical_not": lambda x, a: np.logical_not(x),
    "copy": lambda x, a: x.copy(),
}

def _unary_ref(fn):
    return lambda xs, a: [fn(xs[0], a)]


def _binary_ref(fn):
    return lambda xs, a: [fn(xs[0], xs[1])]


def _reduce_ref(fn):
    return lambda xs, a: [
        fn(xs[0], axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1))).astype(xs[0].dtype)
    ]


for _name, _fn in UNARY_REFS.items():
    register(_name, ELEMWISE, 1, _same, _unary_ref(_fn))


def _cast_infer(types, attrs):
    return [(types[0][0], np.dtype(attrs["dtype"]).name)]


register("cast", ELEMWISE, 1, _cast_infer, lambda xs, a: [xs[0].astype(a["dtype"])])


def _np_div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        # ONNX integer Div truncates toward zero (C semantics), numpy floors.
        return (np.trunc(a / b)).astype(a.dtype)
    return (a / b).astype(a.dtype)


BINARY_REFS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": _np_div,
    "power": lib_ref.power,  # an integer base as onnxruntime computes it (see the kernel)
    "maximum": np.maximum,
    "minimum": np.minimum,
    "prelu": lambda x, s: np.where(x >= 0, x, x * s).astype(x.dtype),
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,  # (numpy's counts past the width: ONNX BitShift-28's rule)
    "right_shift": np.right_shift,
}
COMPARE_REFS = {
    "equal": np.equal,
    "less": np.less,
    "greater": np.greater,
    "less_equal": np.less_equal,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}
for _name, _fn in BINARY_REFS.items():
    register(_name, BROADCAST, 2, _bcast, _binary_ref(_fn))
for _name, _fn in COMPARE_REFS.items():
    register(_name, BROADCAST, 2, _compare, _binary_ref(_fn))


def _power_infer(types, attrs):
    """ONNX Pow: an integer base takes an exponent of any numeric dtype and keeps its dtype."""
    (xs, xd), (ys, yd) = types
    if np.dtype(xd).kind in "iu" and np.dtype(yd).kind in "iuf":
        return [(_bcast_shape(xs, ys), xd)]
    return _bcast(types, attrs)


register("power", BROADCAST, 2, _power_infer, _binary_ref(lib_ref.power))  # over the loop's


def _where_infer(types, attrs):
    if types[0][1] != "bool":
        raise GraphError(f"the condition must be bool, got {types[0][1]}")
    s = _bcast_shape(*[t[0] for t in types])
    if types[1][1] != types[2][1]:
        raise GraphError(f"the two branches differ in dtype: {types[1][1]} vs {types[2][1]}")
    return [(s, types[1][1])]


register("where", BROADCAST, 3, _where_infer, lambda xs, a: [np.where(xs[0], xs[1], xs[2])])

NARY_REFS = {"sum_n": np.add, "max_n": np.maximum, "min_n": np.minimum}


def _nary_ref(name):
    def ref(xs, a):
        if name == "mean_n":
            acc = xs[0]
            for x in xs[1:]:
                acc = acc + x
            return [(acc / len(xs)).astype(xs[0].dtype)]
        fn = NARY_REFS[name]
        acc = xs[0]
        for x in xs[1:]:
            acc = fn(acc, x)
        return [acc.astype(xs[0].dtype)]

    return ref


for _name in ("sum_n", "mean_n", "max_n", "min_n"):
    register(_name, BROADCAST, (1, -1), _bcast, _nary_ref(_name))


# ---------------------------------------------------------------------------- conv / dense


def conv_out_dim(size, k, stride, pad_lo, pad_hi, dilation, clamp=True):
    if stride < 1 or dilation < 1 or k < 1:  # (the importers check first; other callers too)
        raise GraphError(f"stride {stride}, dilation {dilation} and kernel {k} must be positive")
    span = size + pad_lo + pad_hi - dilation * (k - 1) - 1
    if S.is_symbolic(size):
        # ONNX's floor formula over the size, the span clamped at 0 so that shape inference
        # knows the extent is >= 1 (a slice of it by -1 is then extent - 1, not max(.., 0));
        # a size too small for one window is refused at run time before any kernel runs, by
        # the unclamped formula (window_needs). Written (span + stride) // stride, one term: a
        # reshape's -1 divides by it exactly (T // (b * L * 16) with L one atom, not a sum)
        return _one_term_windows(S.smax(span, 0) if clamp else span, stride)
    out = span // stride + 1
    if out <= 0:
        raise GraphError(f"the output would be empty (input {size}, kernel {k}, stride {stride}, "
                         f"pads {pad_lo}+{pad_hi}, dilation {dilation})")
    return out


def _one_term_windows(span, stride: int):
    """span // stride + 1 as the one floor division (span + stride) // stride (the same)."""
    return S.dim((span + stride) // stride)


# ops that slide a window over spatial axes: an output extent of symbolic size must be at least
# 1 at run time (graph/storage.py records window_needs, runtime/_plan.py checks them per shape)
WINDOW_OPS = ("conv", "max_pool", "avg_pool", "conv_transpose_interleave")


def window_needs(op: str, attrs: dict, x_shape, w_shape=None) -> list:
    """The unclamped output extents of a conv or pool over symbolic sizes of NCHW ``x_shape``
    (ONNX's formulas, < 1 where the size holds no whole window), which must be >= 1 at run
    time; [] for a static plane. The inferred shape holds them clamped (conv_out_dim). A
    blocked x (NCHW[x]c) is read as its NCHW shape, a packed weight by its kernel extents
    (axes 2 and 3 in every packing)."""
    if op not in WINDOW_OPS:
        return []
    x_shape = unblocked_shape(x_shape, attrs.get("layout"))
    nsp = len(x_shape) - 2
    if not symbolic_spatial(x_shape):
        return []
    if op == "conv_transpose_interleave":
        return _ct_interleave_needs(x_shape, attrs)
    pads, dil = attrs["pads"], attrs.get("dilations", [1] * nsp)
    k = list(w_shape[2:2 + nsp]) if op == "conv" else attrs["kernel"]
    out = []
    for d in range(nsp):
        n = x_shape[2 + d]
        if not S.is_symbolic(n):
            continue
        if op == "conv":
            out.append(conv_out_dim(n, k[d], attrs["strides"][d], pads[d], pads[nsp + d],
                                    dil[d], clamp=False))
        else:
            out.append(_symbolic_pool_dim(n, k[d], attrs["strides"][d], pads[d], pads[nsp + d],
                                          dil[d], attrs.get("ceil_mode", 0), clamp=False))
    return out


def symbolic_spatial(shape) -> bool:
    """True when an N C spatial... shape has a spatial axis of symbolic size (the convs and
    pools over it run on the generic computes of graph/lowering_window.py)."""
    return not S.is_static(tuple(shape)[2:])


def channel_block(layout: str | None) -> int | None:
    """The block of a blocked activation layout ("NCHW16c" -> 16), None for NCHW / unset."""
    m = BLOCKED_LAYOUT.match(layout or "")
    return int(m.group(1)) if m else None


def unblocked_shape(shape, layout: str | None) -> tuple:
    """The NCHW shape of a value stored in ``layout`` (NCHW[x]c: [N, C/x, H, W, x])."""
    if channel_block(layout) is None:
        return tuple(shape)
    if len(shape) != 5 or shape[4] != channel_block(layout):
        raise GraphError(f"shape {list(shape)} is not in layout {layout!r}")
    return (shape[0], shape[1] * shape[4], *shape[2:4])


def blocked_shape(shape, block: int) -> tuple:
    """NCHW [N, C, H, W] -> NCHW[block]c [N, C/block, H, W, block] (C a multiple of block)."""
    if len(shape) != 4 or shape[1] % block:
        raise GraphError(f"shape {list(shape)} cannot be blocked by {block} channels")
    return (shape[0], shape[1] // block, shape[2], shape[3], block)


WINOGRAD_LAYOUT_PREFIX = "WINOGRAD4x4_"  # transformed 3x3 weights (tensorlang.ops.winograd)


def _conv_infer(types, attrs):
    (xs, xt), (ws, _) = types[0], types[1]
    layout = attrs.get("weight_layout")
    block = channel_block(attrs.get("layout"))
    if block is not None and attrs.get("groups", 1) > 1:
        # the blocked depthwise conv: x NCHW[b]c, w [C/b, 1, KH, KW, b], groups = C
        if layout != f"OIHW{block}o" or len(ws) != 5 or ws[4] != block or ws[1] != 1:
            raise GraphError(f"a blocked depthwise conv (layout {attrs['layout']!r}) needs "
                             f"weight_layout 'OIHW{block}o' [C/{block}, 1, KH, KW, {block}], "
                             f"got {layout!r} {list(ws)}")
        xs = unblocked_shape(xs, attrs["layout"])
        ws = (ws[0] * ws[4], 1, ws[2], ws[3])
        if attrs["groups"] != xs[1]:
            raise GraphError(f"a blocked conv with groups={attrs['groups']} must be depthwise "
                             f"(groups = channels = {xs[1]})")
    elif block is not None and str(layout).startswith(WINOGRAD_LAYOUT_PREFIX):
        # the Winograd conv (convert_layout pass): w [6, 6, OC/o, C/b, b, o], 3x3 kernels
        if layout != f"{WINOGRAD_LAYOUT_PREFIX}OIHW{block}i{ws[-1]}o" or len(ws) != 6 or \
                tuple(ws[:2]) != (6, 6) or ws[4] != block:
            raise GraphError(f"weight {list(ws)} is not in weight_layout {layout!r}")
        xs = unblocked_shape(xs, attrs["layout"])
        ws = (ws[2] * ws[5], ws[3] * ws[4], 3, 3)
    elif block is not None:
        # the blocked conv (convert_layout pass): x NCHW[b]c, w [OC/o, C/b, KH, KW, b, o]
        if layout != f"OIHW{block}i{ws[-1]}o" or len(ws) != 6 or ws[4] != block:
            raise GraphError(f"layout {attrs['layout']!r} needs weight_layout "
                             f"'OIHW{block}i<o>o' [OC/o, C/{block}, KH, KW, {block}, o], got "
                             f"{layout!r} {list(ws)}")
        xs = unblocked_shape(xs, attrs["layout"])
        ws = (ws[0] * ws[5], ws[1] * ws[4], ws[2], ws[3])
    elif layout is not None:
        # packed by the pack_conv_weights pass: [OC/b, C, KH, KW, b] is OIHW with OC = OC/b * b
        if len(ws) != 5 or layout != f"OIHW{ws[4]}o":
            raise GraphError(f"weight {list(ws)} is not in weight_layout {layout!r}")
        ws = (ws[0] * ws[4], *ws[1:4])
    nsp = len(xs) - 2
    if nsp < 1 or len(ws) != len(xs):
        raise GraphError(f"input rank {len(xs)} and weight rank {len(ws)} must be equal and >= 3")
    groups = attrs.get("groups", 1)
    if xs[1] != ws[1] * groups or ws[0] % groups:
        raise GraphError(f"input has {xs[1]} channels, weight {list(ws)} with groups={groups} "
                         f"expects {ws[1] * groups}")
    if len(types) > 2 and tuple(types[2][0]) != (ws[0],):
        raise GraphError(f"bias shape {list(types[2][0])} must be [{ws[0]}]")
    strides, dil, pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    out = [xs[0], ws[0]]
    for d in range(nsp):
        out.append(conv_out_dim(xs[2 + d], ws[2 + d], strides[d], pads[d], pads[nsp + d], dil[d]))
    out_block = channel_block(attrs.get("out_layout"))
    if attrs.get("out_layout") is not None:
        # NCHW in, NCHW[b]c out (convert_layout's first conv): the packed OIHW[b]o weight
        if block is not None or out_block is None or layout != f"OIHW{out_block}o":
            raise GraphError(f"out_layout {attrs['out_layout']!r} needs an NCHW input and "
                             f"weight_layout 'OIHW<b>o' with b the block of NCHW<b>c, got "
                             f"layout {attrs.get('layout')!r}, weight_layout {layout!r}")
        out = blocked_shape(out, out_block)
    if block is not None:
        out = blocked_shape(out, types[1][0][-1])
    return [(tuple(out), xt)]


register("conv", OUT_ELEMWISE_FUSABLE, (2, 3), _conv_infer, None)


def _matmul_infer(types, attrs):
    (a, at), (b, bt) = types
    if at != bt:
        raise GraphError(f"operand dtypes differ: {at} vs {bt}")
    if len(a) == 0 or len(b) == 0:
        raise GraphError("matmul operands must have rank >= 1")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    S.require_equal(a2[-1], b2[-2], f"inner dimensions differ: {list(a)} @ {list(b)}")
    batch = _bcast_shape(a2[:-2], b2[:-2])
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return [(out, at)]


register("matmul", OUT_ELEMWISE_FUSABLE, 2, _matmul_infer,
         lambda xs, a: [np.matmul(xs[0], xs[1])])


def _dense_infer(types, attrs):
    """dense(x[M, K], w[K, N], bias[N]?) -> [M, N]: the weight is stored K-major so that the
    kernel's inner loop reads it contiguously; with weight_layout "NK16n" (the
    pack_dense_weights pass) it is [ceil(N/16), K, 16] panels and attrs["units"] is N."""
    (x, xt), (w, _) = types[0], types[1]
    if attrs.get("weight_layout") is not None:
        units = attrs.get("units")
        if attrs["weight_layout"] != "NK16n" or len(w) != 3 or w[2] != 16 or \
                not isinstance(units, int) or w[0] != -(-units // 16):
            raise GraphError(f"weight {list(w)} with weight_layout "
                             f"{attrs['weight_layout']!r} and units {units!r} is not "
                             "'NK16n' panels [ceil(units/16), K, 16]")
        w = (w[1], units)
    if len(x) != 2 or len(w) != 2 or x[1] != w[0]:
        raise GraphError(f"expects x[M, K] and w[K, N], got {list(x)} and {list(w)}")
    if len(types) > 2:
        _bcast_shape(types[2][0], (x[0], w[1]))
    return [((x[0], w[1]), xt)]


def _dense_ref(xs, a):
    y = xs[0] @ xs[1]
    if len(xs) > 2:
        y = y + xs[2]
    return [y.astype(xs[0].dtype)]


register("dense", OUT_ELEMWISE_FUSABLE, (2, 3), _dense_infer, _dense_ref)


# ---------------------------------------------------------------------------- pooling / norm


def _pool_infer(types, attrs):
    xs, xt = types[0]
    block = channel_block(attrs.get("layout"))
    if block is not None:  # pooling of NCHW[b]c: the block rides along
        (nchw, _), = _pool_infer([(unblocked_shape(xs, attrs["layout"]), xt)],
                                 {k: v for k, v in attrs.items() if k != "layout"})
        return [(blocked_shape(nchw, block), xt)]
    nsp = len(xs) - 2
    k, st, pads = attrs["kernel"], attrs["strides"], attrs["pads"]
    dil = attrs.get("dilations", [1] * nsp)
    out = list(xs[:2])
    if min(st, default=1) < 1 or min(dil, default=1) < 1:
        raise GraphError(f"strides {st} and dilations {dil} must be positive")
    for d in range(nsp):
        if S.is_symbolic(xs[2 + d]):
            out.append(_symbolic_pool_dim(xs[2 + d], k[d], st[d], pads[d], pads[nsp + d], dil[d],
                                          attrs.get("ceil_mode", 0)))
            continue
        eff = dil[d] * (k[d] - 1) + 1
        span = xs[2 + d] + pads[d] + pads[nsp + d] - eff
        # ONNX's (span / stride) + 1, truncated toward zero, is 1 here; an average counting
        # the padding then divides by the whole window in onnxruntime (taps past the padding
        # too), which the library's count does not do: refused below
        if -st[d] < span < 0 and not attrs.get("count_include_pad", 0):
            out.append(1)
            continue
        if span < 0:
            raise GraphError(f"kernel {k} larger than the padded input {list(xs)}")
        if attrs.get("ceil_mode", 0):
            o = -(-span // st[d]) + 1
            # the last window must start inside the input or the left padding
            if (o - 1) * st[d] >= xs[2 + d] + pads[d]:
                o -= 1
        else:
            o = span // st[d] + 1
        out.append(o)
    return [(tuple(out), xt)]


def _symbolic_pool_dim(n, k, stride, lo, hi, dil, ceil_mode, clamp=True):
    """A pooled extent of symbolic size ``n``: ONNX's floor formula, or with ceil_mode
    c = ceil(span / stride) windows past the first, less the last one when it would start past
    the input and its leading padding (c * stride >= n + lo), as the static rule: min(c + 1,
    max(c, ceil((n + lo) / stride))). A window longer than the padded input gives < 1, refused
    at run time (onnxruntime's truncated formula gives 1 where the excess is under the stride:
    stricter here, never a wrong read). ``clamp``: the span clamped at 0, as conv_out_dim."""
    span = n + lo + hi - dil * (k - 1) - 1
    if clamp:
        span = S.smax(span, 0)
    if not ceil_mode:
        return _one_term_windows(span, stride)
    c = S.dim((span + stride - 1) // stride)
    starts = S.dim((n + lo + stride - 1) // stride)
    return S.smin(S.dim(c + 1), S.smax(c, starts))


register("max_pool", OUT_ELEMWISE_FUSABLE, 1, _pool_infer, None)
register("avg_pool", OUT_ELEMWISE_FUSABLE, 1, _pool_infer, None)


def _global_pool_infer(types, attrs):
    xs, xt = types[0]
    if channel_block(attrs.get("layout")) is not None:
        return [((*xs[:2], 1, 1, xs[4]), xt)]
    return [(tuple(xs[:2]) + (1,) * (len(xs) - 2), xt)]


register("global_avg_pool", REDUCE, 1, _global_pool_infer,
         lambda xs, a: [xs[0].mean(axis=tuple(range(2, xs[0].ndim)), keepdims=True)])
register("global_max_pool", REDUCE, 1, _global_pool_infer,
         lambda xs, a: [xs[0].max(axis=tuple(range(2, xs[0].ndim)), keepdims=True)])


def _bn_infer(types, attrs):
    xs, _ = types[0]
    for s, _ in types[1:]:
        if tuple(s) != (xs[1],):
            raise GraphError(f"scale/bias/mean/var must have shape [{xs[1]}], got {list(s)}")
    return [types[0]]


def _bn_ref(xs, a):
    x, g, b, m, v = xs
    shp = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - m.reshape(shp)) / np.sqrt(v.reshape(shp) + a["epsilon"]) * g.reshape(shp)
    return [(y + b.reshape(shp)).astype(x.dtype)]


register("batch_norm", BROADCAST, 5, _bn_infer, _bn_ref)
register("instance_norm", OPAQUE, 3, _bn_infer, None)
register("lrn", OPAQUE, 1, _same, None)


def _layer_norm_infer(types, attrs):
    xs, _ = types[0]
    axis = norm_axis(attrs["axis"], len(xs))
    for s, _ in types[1:]:
        _bcast_shape(s, xs[axis:])
    return [types[0]]


register("layer_norm", OPAQUE, (1, 3), _layer_norm_infer, None)


def _softmax_ref(xs, a):
    x = xs[0].astype(np.float64)
    axes = tuple(a["axes"])
    m = x.max(axis=axes, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=axes, keepdims=True)
    if a.get("log"):
        return [(x - m - np.log(s)).astype(xs[0].dtype)]
    return [(e / s).astype(xs[0].dtype)]


register("softmax", OPAQUE, 1, _same, _softmax_ref)


# ---------------------------------------------------------------------------- reductions

REDUCE_REFS = {
    "reduce_sum": np.sum,
    "reduce_mean": np.mean,
    "reduce_max": np.max,
    "reduce_min": np.min,
    "reduce_prod": np.prod,
}


def _reduce_infer(types, attrs):
    xs, xt = types[0]
    axes = sorted({norm_axis(a, len(xs)) for a in attrs["axes"]})
    if attrs.get("keepdims", 1):
        out = tuple(1 if d in axes else n for d, n in enumerate(xs))
    else:
        out = tuple(n for d, n in enumerate(xs) if d not in axes)
    return [(out, xt)]


for _name, _fn in REDUCE_REFS.items():
    register(_name, REDUCE, 1, _reduce_infer, _reduce_ref(_fn))


def _arg_infer(types, attrs):
    xs, _ = types[0]
    axis = norm_axis(attrs["axis"], len(xs))
    if attrs.get("keepdims", 1):
        out = tuple(1 if d == axis else n for d, n in enumerate(xs))
    else:
        out = tuple(n for d, n in enumerate(xs) if d != axis)
    return [(out, "int64")]


def _arg_ref(fn):
    def ref(xs, a):
        x = xs[0]
        axis = a["axis"]
        if a.get("select_last_index", 0):
            flipped = np.flip(x, axis=axis)
            r = x.shape[axis] - 1 - fn(flipped, axis=axis)
        else:
            r = fn(x, axis=axis)
        if a.get("keepdims", 1):
            r = np.expand_dims(r, axis)
        return [r.astype(np.int64)]

    return ref


register("argmax", REDUCE, 1, _arg_infer, _arg_ref(np.argmax))
register("argmin", REDUCE, 1, _arg_infer, _arg_ref(np.argmin))


# ---------------------------------------------------------------------------- layout / injective


def _reshape_infer(types, attrs):
    xs, xt = types[0]
    shape = parse_shape(attrs["shape"])  # symbolic dimensions are written as their text
    S.require_equal(num_elements(shape), num_elements(xs),
                    f"cannot reshape {list(xs)} into {list(shape)}")
    return [(shape, xt)]


register("reshape", INJECTIVE, 1, _reshape_infer,
         lambda xs, a: [xs[0].reshape(a["shape"])], alias=True)


def _transpose_infer(types, attrs):
    xs, xt = types[0]
    perm = attrs["perm"]
    if sorted(perm) != list(range(len(xs))):
        raise GraphError(f"perm {perm} is not a permutation of the {len(xs)} axes")
    return [(tuple(xs[p] for p in perm), xt)]


# a C-ordered copy (np.ascontiguousarray would turn a 0-d array into shape (1,))
register("transpose", INJECTIVE, 1, _transpose_infer,
         lambda xs, a: [np.transpose(xs[0], a["perm"]).copy(order="C")])


def _concat_infer(types, attrs):
    first, xt = types[0]
    axis = norm_axis(attrs["axis"], len(first))
    dtypes = [t for _, t in types]
    if len(set(dtypes)) > 1:
        raise GraphError(f"input dtypes differ: {', '.join(dtypes)} (concat needs one dtype)")
    total = 0
    why = f"inputs {[list(x[0]) for x in types]} do not concatenate on axis {axis}"
    for s, t in types:
        if t != xt or len(s) != len(first):
            raise GraphError(why)
        for d in range(len(s)):
            if d != axis:
                S.require_equal(s[d], first[d], why)
        total += s[axis]
    out = list(first)
    out[axis] = total
    return [(tuple(out), xt)]


register("concat", INJECTIVE, (1, -1), _concat_infer,
         lambda xs, a: [np.concatenate(xs, axis=a["axis"])])


def slice_params(shape, attrs):
    """Normalised (start, step, length) per axis for slice attributes (ONNX semantics: clamp,
    negative indices from the end, negative steps)."""
    nd = len(shape)
    starts = [0] * nd
    steps = [1] * nd
    lens = list(shape)
    axes = attrs.get("axes") or list(range(len(attrs["starts"])))
    stepv = attrs.get("steps") or [1] * len(axes)
    for a, st, en, sp in zip(axes, attrs["starts"], attrs["ends"], stepv):
        a = norm_axis(a, nd)
        n = shape[a]
        if sp == 0:
            raise GraphError("slice step 0")
        if not isinstance(n, int):
            starts[a], steps[a], lens[a] = _symbolic_slice(a, st, en, sp, n)
            continue
        if st < 0:
            st += n
        if en < 0:
            en += n
        if sp > 0:
            st = min(max(st, 0), n)
            en = min(max(en, 0), n)
            ln = max(0, -(-(en - st) // sp))
        else:  # ONNX clamps a negative step's start to [0, n - 1] (numpy: [-1, n - 1])
            st = min(max(st, 0), n - 1)
            en = min(max(en, -1), n - 1)
            ln = max(0, -(-(st - en) // -sp))
        starts[a], steps[a], lens[a] = st, sp, ln
    return starts, steps, lens


def _symbolic_slice(axis: int, st: int, en: int, sp: int, n) -> tuple:
    """(first index, step, length) of st:en:sp on an axis of symbolic size ``n`` with ONNX's
    clamping (symbolic.clamped_slice): the length holds max/min of the sizes where they decide
    it (x[:, 2:] is max(n - 2, 0) long, empty at n <= 2). A bound beyond SLICE_TO_END in size
    is the axis' end on its side (exporters write INT64_MAX and INT64_MIN)."""
    def bound(v, low, high):
        if v >= SLICE_TO_END:
            return high
        if v <= -SLICE_TO_END:
            return low
        return S.dim(n + v) if v < 0 else v

    low, high = (0, n) if sp > 0 else (-1, S.dim(n - 1))
    first, length = S.clamped_slice(n, bound(st, low, high), bound(en, low, high), sp)
    return first, sp, length


def _slice_infer(types, attrs):
    xs, xt = types[0]
    _, _, lens = slice_params(xs, attrs)
    return [(tuple(lens), xt)]


def _slice_ref(xs, a):
    starts, steps, lens = slice_params(xs[0].shape, a)
    idx = tuple(
        np.arange(lens[d]) * steps[d] + starts[d] for d in range(xs[0].ndim)
    )
    return [xs[0][np.ix_(*idx)] if xs[0].ndim else xs[0].copy()]


register("slice", INJECTIVE, 1, _slice_infer, _slice_ref)


def _pad_infer(types, attrs):
    xs, xt = types[0]
    p = [S.parse(v) for v in attrs["pads"]]  # widths of symbolic size are written as text
    nd = len(xs)
    if len(p) != 2 * nd:
        raise GraphError(f"pads must have {2 * nd} entries, got {len(p)}")
    if not all(isinstance(v, int) for v in p) and attrs.get("mode", "constant") != "constant":
        raise GraphError(f"pads {attrs['pads']} of symbolic size need mode 'constant', got "
                         f"{attrs['mode']!r}")
    out = tuple(S.dim(xs[d] + p[d] + p[nd + d]) for d in range(nd))
    if any(isinstance(o, int) and o <= 0 for o in out):
        raise GraphError(f"padding {p} leaves an empty tensor")
    return [(out, xt)]


def _pad_ref(xs, a):
    x = xs[0]
    nd = x.ndim
    p = a["pads"]
    # negative pads crop
    crop = tuple(slice(max(0, -p[d]), x.shape[d] - max(0, -p[nd + d])) for d in range(nd))
    x = x[crop]
    width = [(max(0, p[d]), max(0, p[nd + d])) for d in range(nd)]
    mode = a.get("mode", "constant")
    if mode == "constant":
        return [np.pad(x, width, mode="constant", constant_values=a.get("value", 0.0))]
    return [np.pad(x, width, mode={"reflect": "reflect", "edge": "edge"}[mode])]


register("pad", INJECTIVE, 1, _pad_infer, _pad_ref)


def _gather_infer(types, attrs):
    (xs, xt), (ids, it) = types
    if not np.issubdtype(np.dtype(it), np.integer):
        raise GraphError(f"indices must be integers, got {it}")
    axis = norm_axis(attrs["axis"], len(xs))
    return [(xs[:axis] + tuple(ids) + xs[axis + 1:], xt)]


def _gather_ref(xs, a):
    x, ids = xs
    axis = a["axis"] % x.ndim
    ids = np.where(ids < 0, ids + x.shape[axis], ids)
    return [np.take(x, ids, axis=axis)]


register("gather", INJECTIVE, 2, _gather_infer, _gather_ref)


def _expand_infer(types, attrs):
    xs, xt = types[0]
    return [(_bcast_shape(xs, parse_shape(attrs["shape"])), xt)]


register("expand", BROADCAST, 1, _expand_infer,
         lambda xs, a: [np.broadcast_to(xs[0], _bcast_shape(xs[0].shape, a["shape"])).copy()])


def _tile_infer(types, attrs):
    xs, xt = types[0]
    r = attrs["repeats"]
    if len(r) != len(xs):
        raise GraphError(f"repeats {r} must have one entry per axis of {list(xs)}")
    return [(tuple(a * b for a, b in zip(xs, r)), xt)]


register("tile", INJECTIVE, 1, _tile_infer, lambda xs, a: [np.tile(xs[0], a["repeats"])])


def _arange_like_infer(types, attrs):
    xs, xt = types[0]
    if len(xs) != 1:
        raise GraphError(f"arange_like needs a 1-D input, got {list(xs)}")
    return [(xs, xt)]


register("arange_like", OPAQUE, 1, _arange_like_infer, lambda xs, a: [
    (a["start"] + a["delta"] * np.arange(xs[0].shape[0])).astype(xs[0].dtype)])


def _shape_values_infer(types, attrs):
    values = attrs["values"]
    if not values or len(values) != int(np.prod(attrs["shape"], dtype=np.int64)):
        raise GraphError(f"shape_values: {len(values)} values for shape {attrs['shape']}")
    return [(tuple(attrs["shape"]), attrs["dtype"])]


def _shape_values_ref(xs, a):
    from .symbolic import evaluate, parse

    env = {}
    for var, i, axis, *form in a["var_dims"]:  # (form: the axis's dim, linear in var alone)
        n = xs[i].shape[axis]
        if form:
            low, step = (evaluate(parse(form[0]), {var: k}) for k in (0, 1))
            n = (n - low) // (step - low)
        env[var] = n
    flat = [evaluate(parse(t), env) for t in a["values"]]
    return [np.array(flat, dtype=a["dtype"]).reshape(a["shape"])]


# the values of a shape tensor that holds symbolic dimensions, computed at run time from the
# sizes of the inputs that carry its variables (Builder._shape_values)
register("shape_values", OPAQUE, (1, 64), _shape_values_infer, _shape_values_ref)


def _depth_to_space_infer(types, attrs):
    (n, c, h, w), xt = types[0]
    b = attrs["blocksize"]
    if c % (b * b):
        raise GraphError(f"channels {c} not divisible by blocksize^2 = {b * b}")
    return [((n, c // (b * b), h * b, w * b), xt)]


def _depth_to_space_ref(xs, a):
    x = xs[0]
    n, c, h, w = x.shape
    b = a["blocksize"]
    if a.get("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))]


register("depth_to_space", INJECTIVE, 1, _depth_to_space_infer, _depth_to_space_ref)


def _layout_transform_infer(types, attrs):
    xs, xt = types[0]
    src, dst = attrs["src_layout"], attrs["dst_layout"]
    for lay in (src, dst):
        if lay != "NCHW" and channel_block(lay) is None:
            raise GraphError(f"layout {lay!r} is not NCHW or NCHW<x>c")
    nchw = unblocked_shape(xs, src)
    if len(nchw) != 4:
        raise GraphError(f"input {list(xs)} is not 4-D {src}")
    block = channel_block(dst)
    return [(nchw if block is None else blocked_shape(nchw, block), xt)]


def _layout_transform_ref(xs, a):
    x = xs[0]
    if channel_block(a["src_layout"]) is not None:
        x = x.transpose(0, 1, 4, 2, 3).reshape(unblocked_shape(x.shape, a["src_layout"]))
    b = channel_block(a["dst_layout"])
    if b is not None:
        n, c, h, w = x.shape
        x = x.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2)
    return [np.ascontiguousarray(x)]


register("layout_transform", INJECTIVE, 1, _layout_transform_infer, _layout_transform_ref)


# ---------------------------------------------------------------------------- vision (issue 18)


def _resize_infer(types, attrs):
    xs, xt = types[0]
    sizes = parse_shape(attrs["sizes"])  # symbolic lengths are written as their text
    if len(sizes) != len(xs) or min((v for v in sizes if isinstance(v, int)), default=1) < 1:
        raise GraphError(f"sizes {list(sizes)} must give a positive length for each of the "
                         f"{len(xs)} axes of {list(xs)}")
    if xt == "bool":
        raise GraphError("bool data cannot be resized")
    return [(sizes, xt)]


register("resize", OPAQUE, 1, _resize_infer, None)


def _ct_weight_infer(types, attrs):
    (ws, wt), = types
    nsp = len(ws) - 2
    st, dil, g = attrs["strides"], attrs["dilations"], attrs["groups"]
    if nsp < 1 or len(st) != nsp or len(dil) != nsp or ws[0] % g:
        raise GraphError(f"weight {list(ws)} with strides {st}, dilations {dil}, groups {g}: "
                         "expected [C, OC/groups, K...] with C divisible by groups")
    taps = [((k - 1) * d) // s + 1 for k, s, d in zip(ws[2:], st, dil)]
    return [((g * int(np.prod(st)) * ws[1], ws[0] // g, *taps), wt)]


def _ct_weight_ref(xs, a):
    from tensorlang.ops.conv_transpose import conv_transpose_weight_numpy

    return [conv_transpose_weight_numpy(xs[0], a["strides"], a["dilations"], a["groups"])]


register("conv_transpose_weight", INJECTIVE, 1, _ct_weight_infer, _ct_weight_ref)


def _ct_interleave_lens(ys, attrs) -> list:
    """The output lengths, stride * conv_len - shift - end (tensorlang.ops.conv_transpose's
    AxisGeometry): expressions of the sizes over a symbolic plane."""
    return [S.dim(s * n - sh - e)
            for s, n, sh, e in zip(attrs["strides"], ys[2:], attrs["shifts"], attrs["ends"])]


def _ct_interleave_needs(ys, attrs) -> list:
    """Output lengths that may be < 1 at some size (shift + end >= stride: ONNX's length is then
    < 1 where the conv before has one row), for the runtime to refuse those sizes."""
    return [n for n, s, sh, e, y in zip(_ct_interleave_lens(ys, attrs), attrs["strides"],
                                        attrs["shifts"], attrs["ends"], ys[2:])
            if S.is_symbolic(y) and sh + e >= s]


def _ct_interleave_infer(types, attrs):
    (ys, yt), = types
    st, g = attrs["strides"], attrs["groups"]
    phases = int(np.prod(st))
    if len(ys) != len(st) + 2 or ys[1] % (g * phases):
        raise GraphError(f"input {list(ys)} does not hold {g} groups of {phases} phases")
    outs = _ct_interleave_lens(ys, attrs)
    if any(not S.is_symbolic(n) and n < 1 for n in outs):
        raise GraphError(f"input {list(ys)} with shifts {attrs['shifts']} and ends "
                         f"{attrs['ends']}: the output would be empty ({outs})")
    return [((ys[0], ys[1] // phases, *outs), yt)]


def _ct_interleave_ref(xs, a):
    y = xs[0]
    g, st, shifts = a["groups"], a["strides"], a["shifts"]
    outs = _ct_interleave_lens(y.shape, a)
    nsp = len(st)
    ocg = y.shape[1] // (g * int(np.prod(st)))
    yp = y.reshape(y.shape[0], g, *st, ocg, *y.shape[2:])
    # [N, g, ocg, phases..., q...]: the gathered axes adjacent, last
    yp = yp.transpose(0, 1, 2 + nsp, *range(2, 2 + nsp), *range(3 + nsp, 3 + 2 * nsp))
    grids = np.meshgrid(*[np.arange(n) + sh for n, sh in zip(outs, shifts)], indexing="ij")
    out = yp[(Ellipsis, *[gr % s for gr, s in zip(grids, st)],
              *[gr // s for gr, s in zip(grids, st)])]
    return [np.ascontiguousarray(out.reshape(y.shape[0], g * ocg, *outs))]


register("conv_transpose_interleave", INJECTIVE, 1, _ct_interleave_infer, _ct_interleave_ref)


def _gather_elements_infer(types, attrs):
    (ds, dt_), (ishp, it) = types
    if not np.issubdtype(np.dtype(it), np.integer):
        raise GraphError(f"indices must be integers, got {it}")
    ax = attrs.get("axis", 0)
    if len(ishp) != len(ds) or not -len(ds) <= ax < len(ds) or any(
            isinstance(i, int) and isinstance(d, int) and i > d
            for j, (i, d) in enumerate(zip(ishp, ds)) if j != ax % len(ds)):
        raise GraphError(f"indices {list(ishp)} do not fit data {list(ds)} along axis {ax} (the "
                         "same rank, at most data's extent on every other axis)")
    return [(tuple(ishp), dt_)]


def _gather_elements_ref(xs, a):
    from tensorlang.ops.references import gather_elements

    data, idx = xs
    ax = a.get("axis", 0) % data.ndim
    if ((idx < -data.shape[ax]) | (idx >= data.shape[ax])).any():
        raise IndexError("GatherElements index out of range")
    return [gather_elements(data, idx, ax)]


register("gather_elements", INJECTIVE, 2, _gather_elements_infer, _gather_elements_ref)


def _gather_nd_infer(types, attrs):
    (ds, dt_), (ishp, it) = types
    if not np.issubdtype(np.dtype(it), np.integer):
        raise GraphError(f"indices must be integers, got {it}")
    b = attrs.get("batch_dims", 0)
    k = ishp[-1] if ishp else 0
    if not ishp or b >= min(len(ishp), len(ds)) or not 1 <= k <= len(ds) - b or \
            tuple(ishp[:b]) != tuple(ds[:b]):
        raise GraphError(f"indices {list(ishp)} with batch_dims={b} do not fit data {list(ds)}")
    return [(tuple(ishp[:-1]) + tuple(ds[b + k:]), dt_)]


def _gather_nd_ref(xs, a):
    from tensorlang.ops.references import gather_nd

    data, idx = xs
    b, k = a.get("batch_dims", 0), idx.shape[-1]
    wrapped = np.where(idx < 0, idx + np.array(data.shape[b:b + k]), idx)
    if ((wrapped < 0) | (wrapped >= np.array(data.shape[b:b + k]))).any():
        raise IndexError("GatherND index out of range")
    return [gather_nd(data, wrapped, b)]


register("gather_nd", INJECTIVE, 2, _gather_nd_infer, _gather_nd_ref)


def _scatter_nd_infer(types, attrs):
    (ds, dt_), (ishp, it), (us, ut) = types
    if not np.issubdtype(np.dtype(it), np.integer) or ut != dt_:
        raise GraphError(f"indices must be integers and updates {ut} of the data's type {dt_}")
    k = ishp[-1] if ishp else 0
    if not 1 <= k <= len(ds) or tuple(us) != tuple(ishp[:-1]) + tuple(ds[k:]):
        raise GraphError(f"updates {list(us)} must have shape indices.shape[:-1] + "
                         f"data.shape[k:] for indices {list(ishp)} and data {list(ds)}")
    return [(tuple(ds), dt_)]


def _scatter_nd_ref(xs, a):
    from tensorlang.ops.references import scatter_nd

    data, idx, upd = xs
    k = idx.shape[-1]
    wrapped = np.where(idx < 0, idx + np.array(data.shape[:k]), idx)
    if ((wrapped < 0) | (wrapped >= np.array(data.shape[:k]))).any():
        raise IndexError("ScatterND index out of range")
    return [scatter_nd(data, wrapped, upd, a.get("reduction", "none"))]


register("scatter_nd", OPAQUE, 3, _scatter_nd_infer, _scatter_nd_ref)


def _scatter_nd_planned_infer(types, attrs):
    (ds, dt_), (ps, pt), (us, ut) = types
    k = len(ps) - 1
    if not np.issubdtype(np.dtype(pt), np.integer) or ut != dt_ or k < 1 or \
            tuple(ps[:-1]) != tuple(ds[:k]) or tuple(us[1:]) != tuple(ds[k:]):
        raise GraphError(f"plan {list(ps)} and updates {list(us)} do not fit data {list(ds)}")
    return [(tuple(ds), dt_)]


def _scatter_nd_planned_ref(xs, a):
    from tensorlang.ops.references import scatter_nd_planned

    return [scatter_nd_planned(*xs, a.get("reduction", "none"))]


register("scatter_nd_planned", INJECTIVE, 3, _scatter_nd_planned_infer,
         _scatter_nd_planned_ref)


def _scatter_nd_boxed_infer(types, attrs):
    (ds, dt_), (us, ut) = types
    st, sp = attrs["starts"], attrs["steps"]
    k = len(st)
    if ut != dt_ or len(sp) != k or tuple(us[k:]) != tuple(ds[k:]) or any(
            s < 1 or lo < 0 or lo + s * (g - 1) >= n for lo, s, g, n in zip(st, sp, us, ds)):
        raise GraphError(f"updates {list(us)} at starts {st}, steps {sp} do not fit data "
                         f"{list(ds)}")
    return [(tuple(ds), dt_)]


def _scatter_nd_boxed_ref(xs, a):
    from tensorlang.ops.references import scatter_nd_boxed

    return [scatter_nd_boxed(*xs, a["starts"], a["steps"], a.get("reduction", "none"))]


register("scatter_nd_boxed", INJECTIVE, 2, _scatter_nd_boxed_infer, _scatter_nd_boxed_ref)


def _grid_sample_infer(types, attrs):
    (xs, xt), (gs, _) = types
    if len(xs) != 4 or len(gs) != 4 or gs[3] != 2 or not S.same(xs[0], gs[0]):
        raise GraphError(f"grid_sample needs x [N, C, H, W] and grid [N, H_out, W_out, 2], got "
                         f"{list(xs)} and {list(gs)}")
    return [((xs[0], xs[1], gs[1], gs[2]), xt)]


def _grid_sample_ref(xs, a):
    from tensorlang.ops.references import grid_sample

    return [grid_sample(xs[0], xs[1], a["mode"], a["padding_mode"], bool(a["align_corners"]))]


register("grid_sample", OPAQUE, 2, _grid_sample_infer, _grid_sample_ref)


def _space_to_depth_infer(types, attrs):
    xs, xt = types[0]
    b = attrs["blocksize"]
    if len(xs) != 4 or b < 1 or xs[2] % b or xs[3] % b:
        raise GraphError(f"input {list(xs)} must be 4-D with H and W divisible by blocksize {b}")
    return [((xs[0], xs[1] * b * b, xs[2] // b, xs[3] // b), xt)]


def _space_to_depth_ref(xs, a):
    from tensorlang.ops.references import space_to_depth

    return [space_to_depth(xs[0], a["blocksize"], a.get("mode", "DCR"))]


register("space_to_depth", INJECTIVE, 1, _space_to_depth_infer, _space_to_depth_ref)


def _trilu_infer(types, attrs):
    if len(types[0][0]) < 2:
        raise GraphError(f"input {list(types[0][0])} must have rank >= 2")
    return [types[0]]


def _trilu_ref(xs, a):
    fn = np.triu if a.get("upper", 1) else np.tril
    return [fn(xs[0], a.get("k", 0))]


register("trilu", INJECTIVE, 1, _trilu_infer, _trilu_ref)


def _group_norm_infer(types, attrs):
    xs = types[0][0]
    g = attrs["num_groups"]
    if len(xs) < 2 or g < 1 or xs[1] % g:
        raise GraphError(f"input {list(xs)} must have rank >= 2 and channels divisible by "
                         f"num_groups={g}")
    for s, _ in types[1:]:
        if tuple(s) != (xs[1],):
            raise GraphError(f"scale and bias must have shape [{xs[1]}], got {list(s)}")
    return [types[0]]


def _group_norm_ref(xs, a):
    from tensorlang.ops.references import group_norm

    return [group_norm(xs[0], a["num_groups"], *xs[1:3], a["epsilon"])]


register("group_norm", OPAQUE, (1, 3), _group_norm_infer, _group_norm_ref)


# ---------------------------------------------------------------------------- issue 18: float
# classes, remainder, cumulative sum, selection (ONNX IsNaN, IsInf, Mod, CumSum, TopK)


def _bool_like(types, attrs):
    return [(types[0][0], "bool")]


def _isinf_ref(xs, a):
    x = xs[0]
    if not np.issubdtype(x.dtype, np.floating):
        return [np.zeros(x.shape, bool)]
    pos = np.isposinf(x) if a.get("detect_positive", 1) else np.zeros(x.shape, bool)
    neg = np.isneginf(x) if a.get("detect_negative", 1) else np.zeros(x.shape, bool)
    return [pos | neg]


def _mod_infer(types, attrs):
    (out,) = _bcast(types, attrs)
    if out[1] == "bool":
        raise GraphError("Mod needs numbers, got bool")
    return [out]


def _mod_ref(xs, a):
    fn = np.fmod if a.get("fmod", 0) else np.mod
    return [fn(xs[0], xs[1]).astype(xs[0].dtype)]


def _cumsum_infer(types, attrs):
    norm_axis(attrs["axis"], len(types[0][0]))
    if types[0][1] == "bool":
        raise GraphError("CumSum and CumProd need numbers, got bool")
    return [types[0]]


def _cumulative_ref(fn, identity: int):
    """numpy's cumsum / cumprod with ONNX's reverse and exclusive (the identity first, the
    last element dropped: no subtraction or division of x)."""
    def ref(xs, a):
        x = xs[0]
        ax = a["axis"] % x.ndim
        if a.get("reverse", 0):
            x = np.flip(x, ax)
        if a.get("exclusive", 0):
            first = np.full_like(np.take(x, [0], axis=ax), identity)
            x = np.concatenate([first, np.take(x, np.arange(x.shape[ax] - 1), axis=ax)], ax)
        y = fn(x, axis=ax, dtype=x.dtype)
        return [np.flip(y, ax) if a.get("reverse", 0) else y]

    return ref


def _topk_infer(types, attrs):
    xs, xt = types[0]
    ax = norm_axis(attrs["axis"], len(xs))
    k = attrs["k"]
    if not 0 <= k <= xs[ax]:
        raise GraphError(f"k={k} is not in [0, {xs[ax]}] (the extent of axis {ax})")
    if xt == "bool":
        raise GraphError("TopK needs numbers, got bool")
    out = tuple(k if d == ax else n for d, n in enumerate(xs))
    return [(out, xt), (out, "int64")]


def _topk_ref(xs, a):
    x = xs[0]
    ax = a["axis"] % x.ndim
    order = np.argsort(-x if a.get("largest", 1) else x, axis=ax, kind="stable")
    idx = np.take(order, np.arange(a["k"]), axis=ax)
    return [np.take_along_axis(x, idx, ax), idx.astype(np.int64)]


register("isnan", ELEMWISE, 1, _bool_like, lambda xs, a: [np.isnan(xs[0])])
register("isinf", ELEMWISE, 1, _bool_like, _isinf_ref)
register("mod", BROADCAST, 2, _mod_infer, _mod_ref)
register("cumsum", OPAQUE, 1, _cumsum_infer, _cumulative_ref(np.cumsum, 0))
register("cumprod", OPAQUE, 1, _cumsum_infer, _cumulative_ref(np.cumprod, 1))
register("topk", OPAQUE, 1, _topk_infer, _topk_ref)


# LSTM / GRU / RNN recurrence (issue 18): xw [T, B, D*G*H], R^T packed [D, H/U, H, G*U], h0
# [D, B, H], and c0 [D, B, H] (lstm) or Rb_h [D, H] (gru; an rnn has neither) -> Y
# [T, D, B, H], h_n [D, B, H] (+ c_n for lstm)


def _rnn_recurrence_infer(types, attrs):
    (xs, xt), (rs, _) = types[0], types[1]
    if len(xs) != 3 or len(rs) != 4:
        raise GraphError(f"rnn_recurrence: xw must be [T, B, D*G*H] and R^T [D, H/U, H, G*U], "
                         f"got {list(xs)} and {list(rs)}")
    (T, B, _), (D, _, H, _) = xs, rs
    states = 2 if attrs["cell"] == "lstm" else 1
    return [((T, D, B, H), xt)] + [((D, B, H), xt)] * states


def _rnn_recurrence_ref(xs, a):
    from tensorlang.ops.rnn import reference, split_inputs

    *ins, lens = split_inputs(xs, a["cell"])
    return reference(*ins, a["cell"], a["direction"], a["activations"], a.get("clip"),
                     bool(a.get("linear_before_reset", 0)), lens)


# a last input: sequence_lens [B] (integers)
register("rnn_recurrence", OPAQUE, (3, 5), _rnn_recurrence_infer, _rnn_recurrence_ref)


# ---------------------------------------------------------------------------- issue 22: quantized
# x, scale, zero point (scale and zero point shaped to broadcast along their axis at import)


def _quant_infer(types, attrs):
    shape = _bcast_shape(*[s for s, _ in types])
    if len(shape) != len(types[0][0]):
        raise GraphError(f"scale/zero point shapes {[list(s) for s, _ in types[1:]]} widen "
                         f"the data's rank {len(types[0][0])}")
    return [(shape, attrs["dtype"])]


def _dequant_infer(types, attrs):
    return _quant_infer(types, {"dtype": types[1][1]})


def _quant_ref(xs, a):
    from tensorlang.ops.quant import quantize_ref

    return [quantize_ref(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a["dtype"])]


def _dequant_ref(xs, a):
    from tensorlang.ops.quant import dequantize_ref

    return [dequantize_ref(xs[0], xs[1], xs[2] if len(xs) > 2 else None)]


def _requant_ref(xs, a):
    from tensorlang.ops.quant import requantize_ref

    return [requantize_ref(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a["dtype"],
                           bool(a.get("relu", False)))]


def _dense_integer_infer(types, attrs):
    (a, at), (w, wt) = types[0], types[1]
    if len(a) != 2 or at not in ("uint8", "int8") or wt != "int8":
        raise GraphError(f"dense_integer needs a 2-D uint8/int8 a and a packed int8 weight, "
                         f"got {at}{list(a)} and {wt}{list(w)}")
    return [((a[0], attrs["n"]), "int32")]


def _dense_integer_ref(xs, a):
    from tensorlang.ops.quant import dense_integer_ref

    return [dense_integer_ref(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a["n"],
                              xs[3] if len(xs) > 3 else None)]


# a [M, K] u8/s8 x pack_dense_weight(w) (+ its column sums when a zero point or int8 a needs
# them, a's run-time zero point): the library's VNNI int8 product (ONNX MatMulInteger with a
# constant int8 weight); its elementwise tail (dequantization, bias, activation) fuses in
register("dense_integer", OUT_ELEMWISE_FUSABLE, (2, 4), _dense_integer_infer,
         _dense_integer_ref)
def _qlinear_conv_infer(types, attrs):
    (x, xt), (w, _) = types[0], types[1]
    p, (sh, sw) = attrs["pads"], attrs["strides"]
    x = unblocked_shape(x, attrs.get("layout"))  # NCHW16c in (convert_layout), else NCHW
    if len(x) != 4 or xt not in ("uint8", "int8") or len(w) != 7:
        raise GraphError(f"qlinear_conv2d needs an NCHW uint8/int8 x and a packed weight, got "
                         f"{xt}{list(x)} and {list(w)}")
    oh = (x[2] + p[0] + p[2] - w[2]) // sh + 1
    ow = (x[3] + p[1] + p[3] - w[3]) // sw + 1
    oc = attrs["oc"]
    if attrs.get("out_layout"):
        return [((x[0], oc // 16, oh, ow, 16), attrs["dtype"])]
    return [((x[0], oc, oh, ow), attrs["dtype"])]


def _qlinear_conv_ref(xs, a):
    from tensorlang.ops.quant import qlinear_conv2d_ref

    sums, bias = qlinear_conv_extras(xs, a)
    return [qlinear_conv2d_ref(xs[0], xs[1], sums, bias, xs[2], xs[3], a["oc"],
                               tuple(a["strides"]), tuple(a["pads"]), a["x_zero"], a["dtype"],
                               bool(a.get("relu", False)), bool(a.get("layout")),
                               bool(a.get("out_layout")))]


def qlinear_conv_extras(ins: list, a: dict) -> tuple:
    """(weight sums or None, bias or None) of a qlinear_conv2d node's inputs: x, packed weight,
    multiplier [OC], y zero point, then the sums when attrs["sums"] (a nonzero effective x
    zero point), then the int32 bias when attrs["bias"] (a kernel has no unused inputs)."""
    rest = list(ins[4:])
    sums = rest.pop(0) if a.get("sums") else None
    return sums, (rest.pop(0) if a.get("bias") else None)


# a QLinearConv (or a QDQ conv folded by fold_qdq) as one kernel on the VNNI product
register("qlinear_conv2d", OPAQUE, (4, 6), _qlinear_conv_infer, _qlinear_conv_ref)
QUANT_OPS = ("quantize_linear", "dequantize_linear", "requantize")
register("quantize_linear", BROADCAST, (2, 3), _quant_infer, _quant_ref)
register("dequantize_linear", BROADCAST, (2, 3), _dequant_infer, _dequant_ref)
register("requantize", BROADCAST, (2, 3), _quant_infer, _requant_ref)


def evaluate(op: str, arrays: Sequence[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    """Evaluate ``op`` with its numpy reference (constant folding). Raises KeyError when the op
    has none."""
    d = get_op(op)
    if d.ref is None:
        raise KeyError(op)
    with np.errstate(all="ignore"):
        return [np.array(r, order="C") for r in d.ref(list(arrays), attrs)]


# ---------------------------------------------------------------------------- fused groups


def _fused_infer(types, attrs):
    """Re-infer every member of a fused group (the ``fuse_ops`` pass builds them) from the
    group's inputs: a hand-edited body whose recorded types disagree is an error."""
    from .fused_group import FusedGroup  # (it imports this module)

    group = FusedGroup.from_attrs(attrs, types)
    vals: list[Type] = []
    for m in group.members:
        ins = [group.inputs[k] if src == "in" else vals[k] for src, k in m.inputs]
        (shape, dtype), = infer_types(m.op, ins, m.attrs, m.name)
        if (tuple(shape), dtype) != m.type:
            raise GraphError(f"fused member {m.name} ({m.op}) is recorded as "
                             f"{m.type[1]}{list(m.type[0])} but its inputs give "
                             f"{dtype}{list(shape)}")
        vals.append((shape, dtype))
    return [vals[-1]]


# A fused node's own pattern kind is its group's (fused_group.group_of(n).pattern); the registry
# entry only says that nothing fuses into a fused node again.
register("fused", OPAQUE, (0, -1), _fused_infer, None)
