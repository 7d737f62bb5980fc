"""The definition of every library operator (see definition.py): compute, pattern kind,
internal stages, default schedule with its knobs, tuning template, numpy reference on a small
example. Adding an operator: its compute in elemwise/nn/reduce/transform.py, one ``define``
here (docs/operators.md)."""


from __future__ import annotations

import numpy as np

from . import conv_transpose as CT
from . import elemwise as E
from . import indexing as IX
from . import nn as N
from . import quant as Q
from . import reduce as R
from . import references as ref
from . import resize as RS
from . import rnn as RNN
from . import schedule as S
from . import sort as SO
from . import transform as T
from . import vision_misc as VM
from . import winograd as WG
from .definition import AnchorSchedule, CompositeSchedule, Example, define, knob
from .patterns import BROADCAST, ELEMWISE, INJECTIVE, OPAQUE, OUT_ELEMWISE_FUSABLE, REDUCE

F32 = "float32"


def ex(inputs, declare, reference, **opts) -> Example:
    """An example: inputs as shapes (float32) or (shape, dtype) pairs."""
    ins = tuple(i if isinstance(i[-1], str) else (tuple(i), F32) for i in inputs)
    return Example(ins, declare, reference, **opts)


# ----------------------------------------------------------------------------- schedules

MATMUL_SCHEDULE = AnchorSchedule(S.schedule_matmul, (
    knob("tile_m", int, 6, "rows of the register tile"),
    knob("tile_n", int, 64, "columns of the register tile (whole vectors)"),
    knob("lanes", int, S.LANES, "vector lanes"),
    knob("parallel", bool, True, "the outer loop on the thread pool"),
    knob("fit_rows", bool, True, "tile_m shrunk to a divisor of M"),
    knob("k_outer", bool, True, "the reduction outside the tile rows"),
    knob("unroll_rows", bool, True, "the tile's rows unrolled"),
    knob("rows_outer", bool, False, "row tiles outside the column panels"),
))
CONV_NCHWC_SCHEDULE = AnchorSchedule(S.schedule_conv2d_nchwc, (
    knob("reg_n", int, 14, "output columns of the register tile"),
    knob("unroll_kw", bool, True, "the kernel-width loop unrolled"),
    knob("oc_blocks", int, 2, "output-channel blocks of the register tile"),
    knob("oc_outer", (bool, type(None)), None, "oc blocks outside the rows (None: by weights)"),
    knob("parallel", bool, True, "tasks on the thread pool"),
    knob("chain", int, 256, "most terms one accumulator sums serially (0: all)"),
))
CONV_NCHW_SCHEDULE = AnchorSchedule(S.schedule_conv2d_nchw, (
    knob("tile_oc", int, 4, "output channels per tile (plain path)"),
    knob("tile_ow", int, 32, "output columns per tile (plain path)"),
    knob("oc_vectors", int, 2, "16-channel vectors of the register tile (blocked path)"),
    knob("reg_ow", int, 14, "output columns of the register tile (blocked path)"),
    knob("unroll_kw", bool, False, "the kernel-width loop unrolled (blocked path)"),
    knob("oc_outer", (bool, type(None)), None, "oc blocks outside the rows (None: by weights)"),
    knob("parallel", bool, True, "tasks on the thread pool"),
    knob("pixel_rows", int, 0, "output channels of the register tile (1x1 pixels path; "
         "0: by OC/groups)"),
    knob("pixel_vectors", int, 4, "16-pixel vectors of the register tile (1x1 pixels path)"),
    knob("chain", int, 32, "most terms one accumulator sums serially, in kernel rows "
         "(blocked path; 0: all)"),
))
CONV_WINOGRAD_SCHEDULE = AnchorSchedule(S.schedule_conv2d_winograd, (
    knob("reg_n", int, 14, "tile columns of the products' register tile"),
    knob("oc_blocks", int, 2, "output-channel blocks of the products' register tile"),
    knob("parallel", bool, True, "tasks on the thread pool"),
))
WINDOW_SCHEDULE = AnchorSchedule(S.schedule_spatial_window, (
    knob("parallel", bool, True, "the (n, channel) loop on the thread pool"),
    knob("row_lanes_max", int, 64, "rows up to this width are one vector"),
    knob("rows", int, 4, "output rows computed together"),
    knob("reg_ow", int, 14, "output columns computed together (NCHW[x]c)"),
))
SOFTMAX_SCHEDULE = CompositeSchedule(lambda s, out: S.schedule_softmax(s, out),
                                     keeps=("max", "exp", "sum"))
LAYER_NORM_SCHEDULE = CompositeSchedule(lambda s, out: S.schedule_layer_norm(s, out),
                                        keeps=("mean", "var"))


# ----------------------------------------------------------------------------- elementwise

_UNARY = {  # name: (function, numpy reference, input range)
    "relu": (E.relu, lambda a: np.maximum(a, 0), (-2, 2)),
    "sigmoid": (E.sigmoid, ref.sigmoid, (-4, 4)),
    "tanh": (E.tanh, np.tanh, (-3, 3)),
    "exp": (E.exp, np.exp, (-3, 3)),
    "log": (E.log, np.log, (0.1, 4)),
    "sqrt": (E.sqrt, np.sqrt, (0, 4)),
    "erf": (E.erf, ref.erf, (-3, 3)),
    "sin": (E.sin, np.sin, (-3, 3)),
    "cos": (E.cos, np.cos, (-3, 3)),
    "abs": (E.abs, np.abs, (-2, 2)),
    "negative": (E.negative, np.negative, (-2, 2)),
    "floor": (E.floor, np.floor, (-3, 3)),
    "ceil": (E.ceil, np.ceil, (-3, 3)),
    "tan": (E.tan, np.tan, (-1.5, 1.5)),
    "asin": (E.asin, np.arcsin, (-1, 1)),
    "acos": (E.acos, np.arccos, (-1, 1)),
    "atan": (E.atan, np.arctan, (-5, 5)),
    "sinh": (E.sinh, np.sinh, (-5, 5)),
    "cosh": (E.cosh, np.cosh, (-5, 5)),
    "asinh": (E.asinh, np.arcsinh, (-5, 5)),
    "acosh": (E.acosh, np.arccosh, (1, 5)),
    "atanh": (E.atanh, np.arctanh, (-0.99, 0.99)),
    "round": (E.round, np.round, (-4, 4)),
    "sign": (E.sign, np.sign, (-2, 2)),
    "mish": (E.mish, ref.mish, (-8, 8)),
}
_BINARY = {  # name: (function, numpy reference, input range)
    "add": (E.add, np.add, (-2, 2)),
    "subtract": (E.subtract, np.subtract, (-2, 2)),
    "multiply": (E.multiply, np.multiply, (-2, 2)),
    "divide": (E.divide, np.divide, (0.5, 2)),
    "power": (E.power, lambda a, b: np.power(a.astype(np.float64), b).astype(a.dtype), (0.5, 2)),
    "maximum": (E.maximum, np.maximum, (-2, 2)),
    "minimum": (E.minimum, np.minimum, (-2, 2)),
    "equal": (E.equal, np.equal, (-1, 1)),
    "not_equal": (E.not_equal, np.not_equal, (-1, 1)),
    "less": (E.less, np.less, (-1, 1)),
    "less_equal": (E.less_equal, np.less_equal, (-1, 1)),
    "greater": (E.greater, np.greater, (-1, 1)),
    "greater_equal": (E.greater_equal, np.greater_equal, (-1, 1)),
}

# an integer base (ONNX Pow) with negative exponents, results beyond 2**53 and past int32's range,
# and a float exponent with negative bases (NaN)
_INTEGER_POWER = [
    ex([((3, 37), "int64"), ((37,), "int32")], E.power, ref.power, low=-12, high=16),
    ex([((2, 17), "int32"), ((2, 17), "float32")], E.power, ref.power, low=-3, high=9)]


def _define_elemwise() -> None:
    for name, (fn, npf, (lo, hi)) in _UNARY.items():
        define(name, fn, ELEMWISE, [ex([(3, 37)], fn, npf, low=lo, high=hi, rtol=2e-5)],
               aliases=("neg",) if name == "negative" else ())
    define("leaky_relu", E.leaky_relu, ELEMWISE, [
        ex([(3, 37)], lambda x: E.leaky_relu(x, 0.2), lambda a: np.where(a >= 0, a, 0.2 * a))])
    define("clip", E.clip, ELEMWISE, [
        ex([(3, 37)], lambda x: E.clip(x, -0.5, 1.0), lambda a: np.clip(a, -0.5, 1.0))])
    define("gelu", E.gelu, ELEMWISE, [
        ex([(3, 37)], E.gelu, ref.gelu, rtol=1e-4, atol=1e-5),
        ex([(3, 37)], lambda x: E.gelu(x, "tanh"), lambda a: ref.gelu(a, "tanh"), rtol=1e-4)])
    define("hard_swish", E.hard_swish, ELEMWISE, [
        ex([(3, 37)], E.hard_swish, lambda a: a * np.clip(a / 6 + 0.5, 0, 1), low=-5, high=5,
           rtol=2e-5, atol=1e-6)])
    define("logical_not", E.logical_not, ELEMWISE, [
        ex([((3, 37), "bool")], E.logical_not, np.logical_not)])
    define("thresholded_relu", E.thresholded_relu, ELEMWISE, [
        ex([(3, 37)], lambda x: E.thresholded_relu(x, 0.3), lambda a: np.where(a > 0.3, a, 0))])
    define("shrink", E.shrink, ELEMWISE, [
        ex([(3, 37)], lambda x: E.shrink(x, 0.6, 0.25), lambda a: ref.shrink(a, 0.6, 0.25)),
        ex([((3, 37), "int32")], lambda x: E.shrink(x, 1.5, 1.0),
           lambda a: ref.shrink(a, 1.5, 1.0), low=-5, high=5)])
    define("bitwise_not", E.bitwise_not, ELEMWISE, [
        ex([((3, 37), "int16")], E.bitwise_not, np.invert, low=-300, high=300)])
    define("cast", E.cast, ELEMWISE, [
        ex([(3, 37)], lambda x: E.cast(x, "int32"), lambda a: a.astype(np.int32), low=-9,
           high=9)])
    for name, (fn, npf, (lo, hi)) in _BINARY.items():
        define(name, fn, BROADCAST, [
            ex([(3, 37), (37,)], fn, npf, low=lo, high=hi, rtol=2e-5),
            ex([(2, 17), (2, 17)], fn, npf, low=lo, high=hi, rtol=2e-5)]
            + (_INTEGER_POWER if name == "power" else []))
    for name, fn, npf in (("bitwise_and", E.bitwise_and, np.bitwise_and),
                          ("bitwise_or", E.bitwise_or, np.bitwise_or),
                          ("bitwise_xor", E.bitwise_xor, np.bitwise_xor)):
        define(name, fn, BROADCAST, [
            ex([((3, 37), "int32"), ((37,), "int32")], fn, npf, low=-1000, high=1000),
            ex([((2, 17), "uint8"), ((2, 17), "uint8")], fn, npf, low=0, high=255)])
    # counts past the width and negative ones: 0, or the sign for a signed right shift
    for name, fn, npf in (("left_shift", E.left_shift, np.left_shift),
                          ("right_shift", E.right_shift, np.right_shift)):
        define(name, fn, BROADCAST, [
            ex([((3, 37), "int16"), ((37,), "int16")], fn, npf, low=-20, high=20),
            ex([((2, 17), "uint32"), ((2, 17), "uint32")], fn, npf, low=0, high=40)])
    for name, fn, npf in (("logical_and", E.logical_and, np.logical_and),
                          ("logical_or", E.logical_or, np.logical_or)):
        define(name, fn, BROADCAST, [ex([((3, 37), "bool"), ((37,), "bool")], fn, npf)])
    define("where", E.where, BROADCAST, [
        ex([((3, 37), "bool"), (3, 37), (37,)], E.where, np.where)])


# ----------------------------------------------------------------------------- reductions


def _define_reduce() -> None:
    for name, fn, npf in (("sum", R.sum, np.sum), ("max", R.max, np.max),
                          ("min", R.min, np.min), ("mean", R.mean, np.mean)):
        define(name, fn, REDUCE, [
            ex([(4, 64)], lambda x, fn=fn: fn(x, axis=1),
               lambda a, npf=npf: npf(a.astype(np.float64), axis=1).astype(a.dtype), rtol=1e-4),
            ex([(5, 7)], lambda x, fn=fn: fn(x, axis=0, keepdims=True),
               lambda a, npf=npf: npf(a.astype(np.float64), axis=0, keepdims=True)
               .astype(a.dtype), rtol=1e-4)])
    define("prod", R.prod, REDUCE, [
        ex([(4, 6)], lambda x: R.prod(x, axis=1), lambda a: np.prod(a, axis=1), low=0.5,
           high=1.5, rtol=1e-5)])
    for name, fn, npf in (("argmax", R.argmax, np.argmax), ("argmin", R.argmin, np.argmin)):
        define(name, fn, REDUCE, [
            ex([(4, 21)], lambda x, fn=fn: fn(x, axis=1), lambda a, npf=npf: npf(a, axis=1)),
            ex([(4, 21)], fn, lambda a, npf=npf: np.array(npf(a)))],
            parts={"index": (name + "_index", ELEMWISE)})


# ----------------------------------------------------------------------------- data movement


def _define_transform() -> None:
    define("transpose", T.transpose, INJECTIVE, [
        ex([(3, 5, 7)], lambda x: T.transpose(x, (2, 0, 1)), lambda a: a.transpose(2, 0, 1))])
    define("reshape", T.reshape, INJECTIVE, [
        ex([(4, 6)], lambda x: T.reshape(x, (3, 8)), lambda a: a.reshape(3, 8)),
        ex([(2, 3, 5)], T.flatten, lambda a: a.reshape(2, 15))], aliases=("flatten",))
    define("squeeze", T.squeeze, INJECTIVE, [
        ex([(4, 1, 5)], lambda x: T.squeeze(x, 1), lambda a: a.squeeze(1))])
    define("unsqueeze", T.unsqueeze, INJECTIVE, [
        ex([(4, 5)], lambda x: T.unsqueeze(x, [0, 2]), lambda a: a[None, :, None])],
        aliases=("expand_dims",))
    define("concat", T.concat, INJECTIVE, [
        ex([(3, 5), (3, 2)], lambda a, b: T.concat([a, b], axis=1),
           lambda a, b: np.concatenate([a, b], axis=1))])
    define("slice", T.strided_slice, INJECTIVE, [
        ex([(6, 9)], lambda x: T.strided_slice(x, [1, 8], [5, 0], [2, -3]),
           lambda a: a[1:5:2, 8:0:-3])], aliases=("strided_slice", "slice_"))
    define("split", T.split, INJECTIVE, [
        ex([(4, 10)], lambda x: list(T.split(x, [3, 7], axis=1)),
           lambda a: np.split(a, [3, 7], axis=1))])
    define("pad", T.pad, INJECTIVE, [
        ex([(3, 5)], lambda x: T.pad(x, [(1, 2), (0, 3)], constant_value=1.5),
           lambda a: np.pad(a, [(1, 2), (0, 3)], constant_values=1.5)),
        ex([(3, 5)], lambda x: T.pad(x, 2, mode="reflect"),
           lambda a: np.pad(a, 2, mode="reflect"))])
    define("gather", T.gather, INJECTIVE, [
        ex([(4, 6), ((5,), "int64")], lambda x, i: T.gather(x, i, axis=1),
           lambda a, i: np.take(a, i, axis=1), low=0, high=5)], aliases=("take",))
    define("expand", T.expand, BROADCAST, [
        ex([(1, 7)], lambda x: T.expand(x, (3, 7)), lambda a: np.broadcast_to(a, (3, 7)))],
        aliases=("broadcast_to",))
    define("arange_like", T.arange_like, INJECTIVE, [
        ex([((9,), "int64")], lambda x: T.arange_like(x, 3, -2),
           lambda a: 3 - 2 * np.arange(9))])
    define("shape_values", T.shape_values, INJECTIVE, [
        ex([(3, 5)], lambda x: T.shape_values([x], [x.shape[0] * 2 + 1, 4]),
           lambda a: np.array([7, 4]))])
    define("layout_transform", T.layout_transform, INJECTIVE, [
        ex([(1, 32, 5, 8)], lambda x: T.layout_transform(x, "NCHW", "NCHW16c"),
           lambda a: ref.to_nchwc(a, 16)),
        ex([(1, 2, 5, 8, 16)], lambda x: T.layout_transform(x, "NCHW16c", "NCHW"),
           ref.from_nchwc)])
    define("kernel_layout_transform", T.kernel_layout_transform, INJECTIVE, [
        ex([(32, 16, 3, 3)], lambda w: T.kernel_layout_transform(w, 16, 16),
           lambda w: ref.oihw_to_blocked(w, 16, 16))])


# ----------------------------------------------------------------------------- nn


def _define_matmul_family() -> None:
    define("matmul", N.matmul, OUT_ELEMWISE_FUSABLE, [
        ex([(24, 40), (40, 48)], N.matmul, np.matmul, rtol=1e-4, atol=1e-4),
        ex([(3, 64), (64, 20)], N.matmul, np.matmul, rtol=1e-4, atol=1e-4),
        ex([(13, 24), (24, 40)], lambda a, b: N.matmul_prepacked(
            a, N.pack_matmul_weight(b), 40), np.matmul, rtol=1e-4, atol=1e-4)],
        schedule=MATMUL_SCHEDULE, parts={"pack": ("matmul_pack", INJECTIVE)},
        template="matmul", aliases=("matmul_prepacked",))
    define("matmul_weight_layout", N.pack_matmul_weight, INJECTIVE, [
        ex([(24, 40)], N.pack_matmul_weight, ref.pack_matmul_weight)],
        aliases=("pack_matmul_weight",))
    define("batch_matmul", N.batch_matmul, OUT_ELEMWISE_FUSABLE, [
        ex([(2, 13, 24), (2, 24, 40)], N.batch_matmul, np.matmul, rtol=1e-4, atol=1e-4),
        ex([(2, 13, 24), (1, 40, 24)], lambda a, b: N.batch_matmul(a, b, trans_b=True),
           lambda a, b: a @ b.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)],
        schedule=MATMUL_SCHEDULE, template="batch_matmul")
    define("dense", N.dense, OUT_ELEMWISE_FUSABLE, [
        ex([(16, 32), (40, 32), (40,)], N.dense, lambda x, w, b: x @ w.T + b, rtol=1e-4,
           atol=1e-4),
        ex([(2, 64), (20, 64)], N.dense, lambda x, w: x @ w.T, rtol=1e-4, atol=1e-4)],
        schedule=MATMUL_SCHEDULE, template="dense",
        parts={"pack": ("dense_pack", INJECTIVE), "bias": ("bias_add", BROADCAST)})
    define("gemm", N.gemm, OUT_ELEMWISE_FUSABLE, [
        ex([(32, 16), (24, 32), (24,)],
           lambda a, b, c: N.gemm(a, b, c, 0.5, 2.0, trans_a=True, trans_b=True),
           lambda a, b, c: 0.5 * (a.T @ b.T) + 2.0 * c, rtol=1e-4, atol=1e-4)],
        schedule=MATMUL_SCHEDULE,
        parts={"pack": ("gemm_pack", INJECTIVE), "epilogue": ("gemm_epilogue", BROADCAST)})


def _define_conv() -> None:
    define("conv2d_nchw", N.conv2d_nchw, OUT_ELEMWISE_FUSABLE, [
        ex([(1, 8, 10, 10), (32, 8, 3, 3)], lambda x, w: N.conv2d_nchw(x, w, padding=1),
           lambda x, w: ref.conv2d_nchw(x, w, padding=1), rtol=1e-4, atol=1e-4),
        ex([(1, 4, 9, 9), (6, 2, 3, 3)], lambda x, w: N.conv2d_nchw(x, w, 2, 1, groups=2),
           lambda x, w: ref.conv2d_nchw(x, w, 2, 1, groups=2), rtol=1e-4, atol=1e-4),
        # grouped on the oc-blocked path: 16 output channels per group (one block each)
        ex([(1, 8, 9, 11), (32, 4, 3, 3)], lambda x, w: N.conv2d_nchw(x, w, 1, 1, groups=2),
           lambda x, w: ref.conv2d_nchw(x, w, 1, 1, groups=2), rtol=1e-4, atol=1e-4),
        # 1x1 grouped, 5 output channels per group, 7x7 pixels: the pixels path with tails
        ex([(1, 6, 7, 7), (15, 2, 1, 1)], lambda x, w: N.conv2d_nchw(x, w, groups=3),
           lambda x, w: ref.conv2d_nchw(x, w, groups=3), rtol=1e-4, atol=1e-4)],
        schedule=CONV_NCHW_SCHEDULE,
        parts={"block": ("conv2d_nchw_block", OUT_ELEMWISE_FUSABLE),
               "pixels": ("conv2d_nchw_pixels", OUT_ELEMWISE_FUSABLE)})
    define("conv2d_weight_layout", N.pack_conv_weight, INJECTIVE, [
        ex([(32, 4, 3, 3)], N.pack_conv_weight, lambda w: ref.pack_conv_weight(w, 16))],
        aliases=("pack_conv_weight",))
    define("conv2d_nchwc", N.conv2d_nchwc, OUT_ELEMWISE_FUSABLE, [
        ex([(1, 2, 8, 8, 16), (2, 2, 3, 3, 16, 16)],
           lambda x, w: N.conv2d_nchwc(x, w, padding=1),
           lambda x, w: ref.to_nchwc(ref.conv2d_nchw(
               ref.from_nchwc(x), _unblock_oihw(w), padding=1), 16), rtol=1e-4, atol=1e-4)],
        schedule=CONV_NCHWC_SCHEDULE, template="conv2d_nchwc")
    define("conv2d_winograd_nchwc", WG.conv2d_winograd_nchwc, OUT_ELEMWISE_FUSABLE, [
        ex([(1, 2, 9, 10, 16), (6, 6, 3, 2, 16, 16)],
           lambda x, u: WG.conv2d_winograd_nchwc(x, u, padding=1),
           # outputs of random transformed kernels reach ~6500: atol is 1.5e-7 of that
           _winograd_reference, low=-1.0, high=1.0, rtol=1e-4, atol=1e-3)],
        schedule=CONV_WINOGRAD_SCHEDULE,
        parts={role: (role, INJECTIVE if role != "winograd_product" else REDUCE)
               for role in S.WINOGRAD_PARTS})
    define("depthwise_conv2d_nchw", N.depthwise_conv2d_nchw, OUT_ELEMWISE_FUSABLE, [
        ex([(1, 8, 12, 12), (8, 1, 3, 3)],
           lambda x, w: N.depthwise_conv2d_nchw(x, w, padding=1),
           lambda x, w: ref.conv2d_nchw(x, w, padding=1, groups=8), rtol=1e-4, atol=1e-4),
        ex([(1, 8, 12, 12), (8, 1, 3, 3)],
           lambda x, w: N.depthwise_conv2d_nchw(x, w, stride=2, padding=1),
           lambda x, w: ref.conv2d_nchw(x, w, 2, 1, groups=8), rtol=1e-4, atol=1e-4)],
        schedule=WINDOW_SCHEDULE, template="depthwise_conv2d")
    define("depthwise_conv2d_nchwc", N.depthwise_conv2d_nchwc, OUT_ELEMWISE_FUSABLE, [
        ex([(1, 2, 9, 9, 16), (2, 1, 3, 3, 16)],
           lambda x, w: N.depthwise_conv2d_nchwc(x, w, padding=1),
           lambda x, w: ref.to_nchwc(ref.conv2d_nchw(
               ref.from_nchwc(x), ref.from_nchwc(w).reshape(32, 1, 3, 3), padding=1,
               groups=32), 16), rtol=1e-4, atol=1e-4)],
        schedule=WINDOW_SCHEDULE)


def _winograd_reference(x, u, padding=1):
    """conv2d_winograd_nchwc in numpy, float64: per 4x4 output tile, A^T [sum over input
    channels of (B^T d B) * U] A (a random U is not the transform of a 3x3 kernel, so the
    reference is the algorithm itself; tests/ops compare with the direct conv too)."""
    bt, at = np.array(WG.B_T, np.float64), np.array(WG.A_T, np.float64)
    n, cbn, h, w, cb = x.shape
    xc = ref.from_nchwc(x).astype(np.float64)
    oh, ow = h + 2 * padding - 2, w + 2 * padding - 2
    th, tw = -(-oh // 4), -(-ow // 4)
    xp = np.pad(xc, ((0, 0), (0, 0), (padding, th * 4 + 2 - h - padding),
                     (padding, tw * 4 + 2 - w - padding)))
    uu = u.astype(np.float64).transpose(0, 1, 3, 4, 2, 5).reshape(6, 6, cbn * cb, -1)
    y = np.zeros((n, uu.shape[3], th * 4, tw * 4))
    for ty in range(th):
        for tx in range(tw):
            d = xp[:, :, ty * 4:ty * 4 + 6, tx * 4:tx * 4 + 6]
            v = np.einsum("ai,ncij,bj->abnc", bt, d, bt)
            m = np.einsum("abnc,abco->abno", v, uu)
            y[:, :, ty * 4:ty * 4 + 4, tx * 4:tx * 4 + 4] = np.einsum("pa,abno,qb->nopq", at, m,
                                                                       at)
    return ref.to_nchwc(y[:, :, :oh, :ow].astype(np.float32), cb)


def _unblock_oihw(w):
    """[O/ob, I/ib, KH, KW, ib, ob] -> OIHW."""
    obn, ibn, kh, kw, ib, ob = w.shape
    return np.ascontiguousarray(w.transpose(0, 5, 1, 4, 2, 3).reshape(obn * ob, ibn * ib, kh, kw))


def _define_pool_norm() -> None:
    define("max_pool2d", N.max_pool2d, OUT_ELEMWISE_FUSABLE, [
        ex([(1, 4, 11, 11)], lambda x: N.max_pool2d(x, 3, 2, 1),
           lambda a: ref.pool2d(a, 3, 2, 1, "max"))], schedule=WINDOW_SCHEDULE)
    define("avg_pool2d", N.avg_pool2d, ELEMWISE, [
        ex([(1, 4, 11, 11)], lambda x: N.avg_pool2d(x, 3, 1, 1),
           lambda a: ref.pool2d(a, 3, 1, 1, "avg"), rtol=1e-5)],
        parts={"sum": ("avg_pool2d_sum", REDUCE, WINDOW_SCHEDULE)})
    define("global_avg_pool2d", N.global_avg_pool2d, REDUCE, [
        ex([(1, 4, 7, 9)], N.global_avg_pool2d,
           lambda a: a.mean(axis=(2, 3), keepdims=True), rtol=1e-5)])
    define("global_max_pool2d", N.global_max_pool2d, REDUCE, [
        ex([(1, 4, 7, 9)], N.global_max_pool2d, lambda a: a.max(axis=(2, 3), keepdims=True))])
    define("batch_norm", N.batch_norm, BROADCAST, [
        ex([(1, 4, 5, 6), (4,), (4,), (4,), (4,)], N.batch_norm, ref.batch_norm, low=0.5,
           high=2.0, rtol=1e-5)])
    define("lrn", N.lrn, OPAQUE, [
        ex([(1, 6, 4, 5)], lambda x: N.lrn(x, 3, 0.1), lambda a: ref.lrn(a, 3, 0.1),
           rtol=1e-5),
        ex([(2, 19, 3, 37)], lambda x: N.lrn(x, 5, 1e-2, 0.75, 2.0),
           lambda a: ref.lrn(a, 5, 1e-2, 0.75, 2.0), rtol=1e-5),
        ex([(3, 21)], lambda x: N.lrn(x, 4, 0.5, 0.6), lambda a: ref.lrn(a, 4, 0.5, 0.6),
           rtol=1e-5)],
        schedule=CompositeSchedule(S.schedule_lrn, keeps=("sqsum",)),
        parts={"sqsum": ("lrn_sqsum", REDUCE)})
    define("softmax", N.softmax, OPAQUE, [
        ex([(4, 64)], N.softmax, ref.softmax, rtol=1e-5),
        ex([(5, 7)], lambda x: N.softmax(x, axis=0), lambda a: ref.softmax(a, 0), rtol=1e-5)],
        schedule=SOFTMAX_SCHEDULE, parts={"max": ("softmax_max", REDUCE),
                                          "exp": ("softmax_exp", BROADCAST),
                                          "sum": ("softmax_sum", REDUCE)})
    define("log_softmax", N.log_softmax, OPAQUE, [
        ex([(4, 64)], N.log_softmax, lambda a: ref.softmax(a, log=True), rtol=1e-5,
           atol=1e-5)],
        schedule=SOFTMAX_SCHEDULE, parts={"max": ("log_softmax_max", REDUCE),
                                          "exp": ("log_softmax_exp", BROADCAST),
                                          "sum": ("log_softmax_sum", REDUCE)})
    define("layer_norm", N.layer_norm, OPAQUE, [
        ex([(4, 64), (64,), (64,)], N.layer_norm, ref.layer_norm, rtol=1e-4, atol=1e-4),
        ex([(3, 37)], N.layer_norm, ref.layer_norm, rtol=1e-4, atol=1e-4)],
        schedule=LAYER_NORM_SCHEDULE, parts={"mean": ("layer_norm_mean", REDUCE),
                                             "var": ("layer_norm_var", REDUCE)})


# ----------------------------------------------------------------------------- vision (issue 18)


def _define_vision() -> None:
    define("resize", RS.resize, OPAQUE, [
        ex([(1, 2, 3, 4)], lambda x: RS.resize(x, (1, 2, 6, 8), mode="nearest",
                                               coordinate_transformation_mode="asymmetric"),
           lambda a: a.repeat(2, axis=2).repeat(2, axis=3)),
        ex([(2, 5)], lambda x: RS.resize(x, (2, 9), mode="linear",
                                         coordinate_transformation_mode="align_corners"),
           lambda a: np.stack([np.interp(np.linspace(0, 4, 9), np.arange(5), r) for r in a])
           .astype(a.dtype))],
        schedule=CompositeSchedule(RS.schedule_resize, keeps=("axis", "index", "weights")),
        parts={"axis": ("resize_axis", OPAQUE), "index": ("resize_index", OPAQUE),
               "weights": ("resize_weights", OPAQUE)})
    define("conv2d_transpose_nchw", CT.conv2d_transpose_nchw, INJECTIVE, [
        ex([(1, 4, 5, 6), (4, 3, 4, 4)],
           lambda x, w: CT.conv2d_transpose_nchw(x, w, 2, 1),
           lambda x, w: ref.conv_transpose(x, w, [2, 2], [1, 1, 1, 1]), rtol=1e-4, atol=1e-4),
        ex([(2, 4, 5, 6), (4, 2, 3, 2)],
           lambda x, w: CT.conv2d_transpose_nchw(x, w, (2, 3), (0, 1, 2, 0), (1, 2), (2, 1), 2),
           lambda x, w: ref.conv_transpose(x, w, [2, 3], [0, 1, 2, 0], [1, 2], [2, 1], 2),
           rtol=1e-4, atol=1e-4)])
    define("gather_elements", IX.gather_elements, INJECTIVE, [
        ex([(3, 4, 5), ((3, 6, 5), "int64")], lambda d, i: IX.gather_elements(d, i, 1),
           lambda d, i: ref.gather_elements(d, i, 1), low=-4, high=3),
        ex([(4, 37), ((2, 37), "int64")], IX.gather_elements, ref.gather_elements, low=-4,
           high=3)])
    define("gather_nd", IX.gather_nd, INJECTIVE, [
        ex([(3, 4, 5), ((2, 3, 2), "int64")], IX.gather_nd, ref.gather_nd, low=-3, high=2),
        ex([(2, 4, 5), ((2, 3, 1), "int64")], lambda d, i: IX.gather_nd(d, i, 1),
           lambda d, i: ref.gather_nd(d, i, 1), low=-4, high=3)])
    define("scatter_nd", IX.scatter_nd, OPAQUE, [
        ex([(5, 4), ((3, 1), "int64"), (3, 4)], IX.scatter_nd, ref.scatter_nd, low=-5, high=4),
        ex([(4, 3), ((6, 2), "int64"), (6,)], lambda d, i, u: IX.scatter_nd(d, i, u, "add"),
           lambda d, i, u: ref.scatter_nd(d, i, u, "add"), low=-3, high=2)],
        parts={"cells": ("scatter_nd_cells", OPAQUE), "target": ("scatter_nd_target", OPAQUE),
               "owner": ("scatter_nd_owner", REDUCE),
               "combine": ("scatter_nd_combine", REDUCE)})
    define("scatter_nd_boxed", IX.scatter_nd_boxed, INJECTIVE, [
        ex([(6, 7, 3), (2, 3, 3)], lambda d, u: IX.scatter_nd_boxed(d, u, [1, 2], [3, 2]),
           lambda d, u: ref.scatter_nd_boxed(d, u, [1, 2], [3, 2])),
        ex([(5, 4), (5, 2)], lambda d, u: IX.scatter_nd_boxed(d, u, [0, 2], [1, 1], "add"),
           lambda d, u: ref.scatter_nd_boxed(d, u, [0, 2], [1, 1], "add"))])
    define("scatter_nd_planned", IX.scatter_nd_planned, INJECTIVE, [
        ex([(5, 4), ((5, 1), "int64"), (3, 4)], IX.scatter_nd_planned, ref.scatter_nd_planned,
           low=-1, high=2),
        ex([(4, 3), ((4, 3, 2), "int64"), (3,)],
           lambda d, p, u: IX.scatter_nd_planned(d, p, u, "max"),
           lambda d, p, u: ref.scatter_nd_planned(d, p, u, "max"), low=-1, high=2)])
    define("space_to_depth", VM.space_to_depth, INJECTIVE, [
        ex([(2, 3, 4, 6)], lambda x: VM.space_to_depth(x, 2),
           lambda a: ref.space_to_depth(a, 2))])
    define("grid_sample", VM.grid_sample, OPAQUE, [
        ex([(1, 2, 5, 6), (1, 3, 4, 2)],
           lambda x, g: VM.grid_sample(x, g, "linear", "zeros", False),
           lambda a, g: ref.grid_sample(a, g, "linear", "zeros", False), low=-1.2, high=1.2),
        ex([(2, 1, 4, 3), (2, 2, 5, 2)],
           lambda x, g: VM.grid_sample(x, g, "cubic", "reflection", True),
           lambda a, g: ref.grid_sample(a, g, "cubic", "reflection", True), low=-1.5,
           high=1.5)],
        schedule=CompositeSchedule(VM.schedule_grid_sample, keeps=("y", "x")),
        parts={"y": ("grid_sample_y", INJECTIVE), "x": ("grid_sample_x", INJECTIVE)})
    define("trilu", VM.trilu, INJECTIVE, [
        ex([(2, 5, 7)], lambda x: VM.trilu(x, 1), lambda a: np.triu(a, 1)),
        ex([(4, 3)], lambda x: VM.trilu(x, -1, upper=False), lambda a: np.tril(a, -1))])
    define("group_norm", VM.group_norm, OPAQUE, [
        ex([(2, 6, 4, 5), (6,), (6,)], lambda x, g, b: VM.group_norm(x, 3, g, b),
           lambda x, g, b: ref.group_norm(x, 3, g, b), rtol=1e-4, atol=1e-4),
        ex([(1, 4, 7)], lambda x: VM.group_norm(x, 4, compute_dtype="float64"),
           lambda x: ref.group_norm(x, 4), rtol=1e-5, atol=1e-5)],
        parts={"mean": ("group_norm_mean", REDUCE), "var": ("group_norm_var", REDUCE)})
    define("conv_transpose_weight", CT.conv_transpose_weight, INJECTIVE, [
        ex([(4, 3, 3, 4)], lambda w: CT.conv_transpose_weight(w, (2, 3), (1, 2), 2),
           lambda w: CT.conv_transpose_weight_numpy(w, (2, 3), (1, 2), 2))])
    define("conv_transpose_interleave", CT.conv_transpose_interleave, INJECTIVE, [
        ex([(1, 12, 3, 3)], lambda y: CT.conv_transpose_interleave(
            y, [CT.transpose_geometry(3, 2, 1, 1, 1), CT.transpose_geometry(2, 3, 1, 0, -2)]),
           ref.conv_transpose_interleave)])



# ----------------------------------------------------------------------------- issue 18: float
# classes, remainder, cumulative sum, selection (ONNX IsNaN, IsInf, Mod, CumSum, TopK)


def _define_onnx_misc() -> None:
    # NaN and +-inf made at run time (log of negatives, exp overflow): what the checks must see
    define("isnan", E.isnan, ELEMWISE, [
        ex([(3, 37)], lambda x: E.isnan(E.log(x)), _quiet(lambda a: np.isnan(np.log(a))))])
    define("isinf", E.isinf, ELEMWISE, [
        ex([(3, 37)], lambda x: E.isinf(_overflowing(x)), lambda a: np.isinf(_np_overflowing(a))),
        ex([(3, 37)], lambda x: E.isinf(_overflowing(x), detect_positive=False),
           lambda a: np.isneginf(_np_overflowing(a)))])
    define("mod", E.mod, BROADCAST, [
        ex([((3, 37), "int32"), ((37,), "int32")], E.mod, _quiet(np.mod), low=-20, high=20),
        ex([((3, 37), "int32"), ((37,), "int32")], lambda a, b: E.mod(a, b, fmod=True),
           _quiet(np.fmod), low=-20, high=20),
        ex([(3, 37), (37,)], lambda a, b: E.mod(a, b, fmod=True), np.fmod, low=-5, high=5)])
    define("cumsum", R.cumsum, OPAQUE, [
        ex([(4, 21)], lambda x: R.cumsum(x, axis=1), lambda a: np.cumsum(a, axis=1),
           rtol=1e-5, atol=1e-5),
        ex([(5, 3)], lambda x: R.cumsum(x, 0, exclusive=True, reverse=True),
           lambda a: np.flip(np.cumsum(np.flip(a, 0), 0), 0) - a, rtol=1e-5, atol=1e-5),
        ex([(3, 300)], lambda x: R.cumsum(x, 1, reverse=True),
           lambda a: np.flip(np.cumsum(np.flip(a, 1), 1), 1), rtol=1e-4, atol=1e-4)],
        parts={"init": ("cumsum_init", OPAQUE), "step": ("cumsum_step", OPAQUE)})
    # values near 1 so that long products stay finite; an exclusive product starts from 1
    define("cumprod", R.cumprod, OPAQUE, [
        ex([(4, 21)], lambda x: R.cumprod(x, axis=1), lambda a: np.cumprod(a, 1),
           low=0.7, high=1.3, rtol=1e-5, atol=1e-5),
        ex([((5, 3), "int32")], lambda x: R.cumprod(x, 0, exclusive=True, reverse=True),
           lambda a: np.flip(np.cumprod(np.concatenate([np.ones((1, 3), a.dtype),
                                                        np.flip(a, 0)[:-1]]), 0), 0),
           low=-3, high=3)],
        parts={"init": ("cumprod_init", OPAQUE), "step": ("cumprod_step", OPAQUE)})
    define("topk", SO.topk, OPAQUE, [
        ex([(4, 21)], lambda x: list(SO.topk(x, 5)),
           lambda a: [np.take_along_axis(a, np.argsort(-a, 1, "stable")[:, :5], 1),
                      np.argsort(-a, 1, "stable")[:, :5]]),
        # the running list: two rows, a 300-long axis, ties (integers), the smallest
        ex([((2, 300), "int32")], lambda x: list(SO.topk(x, 4, largest=False)),
           lambda a: [np.take_along_axis(a, np.argsort(a, 1, "stable")[:, :4], 1),
                      np.argsort(a, 1, "stable")[:, :4]], low=-30, high=30),
        # two rows and k > 4: by ranks (blocks, candidates), ties, the largest
        ex([((2, 300), "int32")], lambda x: list(SO.topk(x, 40)),
           lambda a: [np.take_along_axis(a, np.argsort(-a, 1, "stable")[:, :40], 1),
                      np.argsort(-a, 1, "stable")[:, :40]], low=-30, high=30)],
        parts={"block_rank": ("topk_block_rank", REDUCE, AnchorSchedule(S.schedule_topk_part)),
               "candidate": ("topk_candidate", REDUCE, AnchorSchedule(S.schedule_topk_part)),
               "candidate_index": ("topk_candidate_index", OPAQUE),
               "candidate_value": ("topk_candidate_value", OPAQUE),
               "rank": ("topk_rank", REDUCE, AnchorSchedule(S.schedule_topk_part)),
               "index": ("topk_index", REDUCE, AnchorSchedule(S.schedule_topk_part)),
               "list_init": ("topk_list_init", OPAQUE), "list_step": ("topk_list_step", OPAQUE),
               "list_place": ("topk_list_place", REDUCE), "list": ("topk_list", OPAQUE),
               "block_lanes": ("topk_block_lanes", REDUCE,
                               AnchorSchedule(S.schedule_topk_block_lanes)),
               "block_best": ("topk_block_best", REDUCE, AnchorSchedule(S.schedule_topk_part)),
               "block_order": ("topk_block_order", REDUCE,
                               AnchorSchedule(S.schedule_topk_part)),
               "blocks": ("topk_blocks", REDUCE, AnchorSchedule(S.schedule_topk_part)),
               "filtered": ("topk_filtered", OPAQUE),
               "filtered_index": ("topk_filtered_index", OPAQUE),
               "full_rank": ("topk_full_rank", REDUCE, AnchorSchedule(S.schedule_topk_full)),
               "full_index": ("topk_full_index", REDUCE, AnchorSchedule(S.schedule_topk_full)),
               "full": ("topk_full", OPAQUE), "full_key": ("topk_full_key", OPAQUE)})
    _SIG_TANH = [("Sigmoid", 0.0, 0.0), ("Tanh", 0.0, 0.0)]
    _RNN_ACTS = [("Tanh", 0.0, 0.0), ("LeakyRelu", 0.1, 0.0)]
    define("rnn_recurrence", RNN.rnn_recurrence, OPAQUE, [
        # a bidirectional LSTM (inputs: projection, packed R^T, h0, c0), then a GRU of each
        # reset kind (hidden 16, 32: one unit block)
        ex([(5, 2, 2 * 4 * 8), (2, 1, 8, 4 * 8), (2, 2, 8), (2, 2, 8)],
           lambda *a: RNN.rnn_recurrence(*a, "lstm", "bidirectional", (_SIG_TANH + [
               ("Tanh", 0.0, 0.0)]) * 2),
           lambda *a: RNN.reference(*a, "lstm", "bidirectional", (_SIG_TANH + [
               ("Tanh", 0.0, 0.0)]) * 2), rtol=1e-5, atol=1e-5),
        ex([(6, 1, 3 * 16), (1, 1, 16, 3 * 16), (1, 1, 16), (1, 16)],
           lambda *a: RNN.rnn_recurrence(*a, "gru", "reverse", _SIG_TANH, 0.7, True),
           lambda *a: RNN.reference(*a, "gru", "reverse", _SIG_TANH, 0.7, True),
           rtol=1e-5, atol=1e-5),
        ex([(6, 3, 3 * 32), (1, 1, 32, 3 * 32), (1, 3, 32), (1, 32)],
           lambda *a: RNN.rnn_recurrence(*a, "gru", "forward", _SIG_TANH),
           lambda *a: RNN.reference(*a, "gru", "forward", _SIG_TANH), rtol=1e-5, atol=1e-5),
        # a bidirectional RNN (one gate, no extra input), a different activation per direction
        ex([(5, 2, 2 * 16), (2, 1, 16, 16), (2, 2, 16)],
           lambda *a: RNN.rnn_recurrence(*a, None, "rnn", "bidirectional", _RNN_ACTS, 0.9),
           lambda *a: RNN.reference(*a, None, "rnn", "bidirectional", _RNN_ACTS, 0.9),
           rtol=1e-5, atol=1e-5)],
        parts={"state": ("rnn_recurrence_state", OPAQUE)})


def _define_quant() -> None:
    # scales made positive from the random inputs (|s| + 0.01: small enough to saturate some)
    def pos(s):
        return E.add(E.abs(s), 0.01)

    def np_pos(s):
        return np.abs(s) + np.float32(0.01)

    define("quantize_linear", Q.quantize_linear, BROADCAST, [
        ex([(3, 37), (37,), ((37,), "int8")],
           lambda x, s, z: Q.quantize_linear(x, pos(s), z),
           lambda x, s, z: Q.quantize_ref(x, np_pos(s), z)),
        ex([(2, 5, 3, 7), (5, 1, 1)], lambda x, s: Q.quantize_linear(x, pos(s), dtype="uint8"),
           lambda x, s: Q.quantize_ref(x, np_pos(s), dtype="uint8"), low=-3, high=3)])
    define("dequantize_linear", Q.dequantize_linear, BROADCAST, [
        ex([((2, 5, 3, 7), "uint8"), (5, 1, 1), ((5, 1, 1), "uint8")],
           lambda x, s, z: Q.dequantize_linear(x, pos(s), z),
           lambda x, s, z: Q.dequantize_ref(x, np_pos(s), z)),
        ex([((3, 37), "int32"), (1,)], lambda x, s: Q.dequantize_linear(x, pos(s)),
           lambda x, s: Q.dequantize_ref(x, np_pos(s)), low=-1000, high=1000)])
    define("requantize", Q.requantize, BROADCAST, [
        ex([((2, 5, 3, 7), "int32"), (5, 1, 1), ((1,), "int8")],
           lambda a, m, z: Q.requantize(a, E.multiply(pos(m), 0.001), z),
           lambda a, m, z: Q.requantize_ref(a, np_pos(m) * np.float32(0.001), z),
           low=-300, high=300),
        ex([((3, 37), "int32"), (1,), ((1,), "uint8")],
           lambda a, m, z: Q.requantize(a, E.multiply(pos(m), 0.001), z, relu=True),
           lambda a, m, z: Q.requantize_ref(a, np_pos(m) * np.float32(0.001), z, relu=True),
           low=-300, high=300)])
    # a [5, 40] uint8 times a packed [20, 40] weight: 2 column blocks, 10 groups of 4
    define("dense_integer", Q.dense_integer, OUT_ELEMWISE_FUSABLE, [
        ex([((5, 40), "uint8"), ((2, 10, 16, 4), "int8"), ((20,), "int32"), ((1,), "uint8")],
           lambda a, w, c, z: Q.dense_integer(a, w, c, 20, z),
           lambda a, w, c, z: Q.dense_integer_ref(a, w, c, 20, z), low=0, high=120),
        # int8 a (shifted into uint8), K = 38 (padded to 40), no zero point
        ex([((3, 38), "int8"), ((1, 10, 16, 4), "int8"), ((9,), "int32")],
           lambda a, w, c: Q.dense_integer(a, w, c, 9),
           lambda a, w, c: Q.dense_integer_ref(a, w, c, 9), low=-120, high=120)],
        schedule=AnchorSchedule(Q.schedule_dense_integer, (
            knob("rows", int, 4, "rows of the register tile"),
            knob("blocks", int, 4, "16-column blocks of the register tile"),
            knob("parallel", bool, True, "column tiles on the thread pool"))),
        parts={"acc": ("dense_integer_acc", OPAQUE), "u8": ("dense_integer_u8", OPAQUE)})
    # 5 input channels in one block of 8 (3 zero-point channels), 20 outputs (2 blocks); int8
    # x strided with asymmetric pads and relu, no bias
    define("qlinear_conv2d", Q.qlinear_conv2d, OPAQUE, [
        ex([((1, 5, 6, 7), "uint8"), ((2, 1, 3, 3, 2, 16, 4), "int8"), ((32,), "int32"),
            ((20,), "int32"), (20,), ((1,), "uint8")],
           lambda x, w, ws, b, m, z: Q.qlinear_conv2d(x, w, ws, b, _small(m), z, 20, 1, 1, 60),
           lambda x, w, ws, b, m, z: Q.qlinear_conv2d_ref(x, w, ws, b, _np_small(m), z, 20, 1,
                                                          1, 60), low=0, high=120),
        ex([((1, 16, 7, 8), "int8"), ((1, 1, 3, 3, 4, 16, 4), "int8"), ((16,), "int32"),
            (16,), ((1,), "int8")],
           lambda x, w, ws, m, z: Q.qlinear_conv2d(x, w, ws, None, _small(m), z, 16, 2,
                                                   (0, 1, 2, 1), -3, "int8", relu=True),
           lambda x, w, ws, m, z: Q.qlinear_conv2d_ref(x, w, ws, None, _np_small(m), z, 16, 2,
                                                       (0, 1, 2, 1), -3, "int8", relu=True),
           low=-100, high=100),
        # NCHW16c in and out (the graph's blocked values), int8 x padded, 32 outputs
        ex([((1, 1, 5, 6, 16), "int8"), ((2, 1, 3, 3, 4, 16, 4), "int8"), ((32,), "int32"),
            (32,), ((1,), "uint8")],
           lambda x, w, ws, m, z: Q.qlinear_conv2d(x, w, ws, None, _small(m), z, 32, 1, 1, 5,
                                                   blocked_in=True, blocked_out=True),
           lambda x, w, ws, m, z: Q.qlinear_conv2d_ref(x, w, ws, None, _np_small(m), z, 32, 1,
                                                       1, 5, blocked_in=True, blocked_out=True),
           low=-100, high=100)],
        schedule=CompositeSchedule(Q.schedule_qlinear_conv2d, keeps=("acc", "pad")),
        parts={"acc": ("qlinear_conv2d_acc", OPAQUE), "pad": ("qlinear_conv2d_pad", OPAQUE)})


def _small(m):
    """|m| * 1e-5: a requantization multiplier from a random input."""
    return E.multiply(E.abs(m), 1e-5)


def _np_small(m):
    return np.abs(m) * np.float32(1e-5)


def _quiet(f):
    """f with numpy's floating-point warnings off (the examples make NaN, inf, x % 0 on
    purpose)."""
    def g(*a):
        with np.errstate(all="ignore"):
            return f(*a)
    return g


def _overflowing(x):
    """exp(100 x) - exp(-100 x): +inf where x > 0.89, -inf where x < -0.89 (float32)."""
    return E.subtract(E.exp(E.multiply(x, 100.0)), E.exp(E.multiply(x, -100.0)))


def _np_overflowing(a):
    return _quiet(lambda v: np.exp(v * np.float32(100)) - np.exp(v * np.float32(-100)))(a)


_define_elemwise()
_define_reduce()
_define_transform()
_define_matmul_family()
_define_conv()
_define_pool_norm()
_define_vision()
_define_onnx_misc()
_define_quant()
