"""Resize (ONNX Resize, every opset's modes): nearest (four rounding rules), linear and cubic
interpolation (cubic_coeff_a, exclude_outside), an antialiasing filter when downscaling, and every
coordinate transformation (half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners,
asymmetric, tf_crop_and_resize with its region of interest and extrapolation value).

Interpolation is separable: one pass per resized axis, each a sum of a few taps read around the
source coordinate of the output index. The source coordinate is computed in float64 from the
output index with the arithmetic of ONNX's reference implementation (onnx.reference), so that a
nearest pixel chosen at a rounding tie is the same; the taps' weights are cast to the compute
type (float32, or float64 for float64 data). Integer data is interpolated in float64 and rounded
half to even, saturated to its type. Indices are clamped to the axis (ONNX's edge padding), so
every read is in bounds by construction.

Any axis may have a symbolic length (tl.var expressions: a model exported with a dynamic batch,
height or width), its output length too (an expression of the same variables): the lengths and
a scale given as None (output / input, computed in the kernel's arithmetic as onnxruntime does
from the sizes) enter the tables' arithmetic as expressions; only the antialiasing filter and
Resize-10's 'simple' rounding need a constant scale."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.expr import const
from ..ir.functor import collect_vars
from ..ir.simplify import Analyzer, simplify
from ..te.tensor import Tensor
from ._base import OPAQUE, as_int, check_tensor, dims_of, is_symbolic, op_compute

MODES = ("nearest", "linear", "cubic")
# tf_half_pixel_for_nn: opset 11 only
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn")
# simple: Resize-10 and Upsample as onnxruntime runs them: floor on an axis that is upscaled,
# ceil on one that is downscaled
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
F64 = "float64"
F32 = "float32"
OUTSIDE = -(1 << 40)  # an index table's entry where tf_crop_and_resize extrapolates
INLINE_TAPS = 1  # a pass with at most this many taps is computed inside the next one


@dataclass(frozen=True)
class ResizeMode:
    """How every axis is interpolated (ONNX Resize's attributes)."""

    mode: str = "nearest"
    coordinate_transformation_mode: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_coeff_a: float = -0.75
    exclude_outside: bool = False
    extrapolation_value: float = 0.0
    antialias: bool = False

    def check(self) -> None:
        for arg, value, allowed in (("mode", self.mode, MODES),
                                    ("coordinate_transformation_mode",
                                     self.coordinate_transformation_mode, COORDINATE_MODES),
                                    ("nearest_mode", self.nearest_mode, NEAREST_MODES)):
            if value not in allowed:
                raise ValueError(f"resize: {arg} must be one of {', '.join(allowed)}; got "
                                 f"{value!r}")


@dataclass(frozen=True)
class AxisResize:
    """One resized axis: input and output lengths (ints or expressions of shape variables), the
    scale (None: output / input, computed in the kernel where a length is symbolic) and the
    region of interest (tf_crop_and_resize only)."""

    axis: int
    in_len: object
    out_len: object
    scale: float | None
    roi: tuple[float, float] = (0.0, 1.0)


def _length(n, t: str):
    """An axis length (an int or an int64 expression) as a value of float type ``t``; an int
    rounded as onnxruntime's float arithmetic rounds it."""
    v = as_int(n)
    if v is None:
        return te.cast(n, t)
    return const(float(np.float32(v)) if t == F32 else float(v), t)


def _scale(ax: AxisResize, t: str):
    """The axis's scale as a value of type ``t``: the given one rounded to it, or output /
    input in ``t`` (onnxruntime: float(output) / float(input))."""
    if ax.scale is not None:
        return const(float(np.float32(ax.scale)) if t == F32 else float(ax.scale), t)
    return _length(ax.out_len, t) / _length(ax.in_len, t)


def _unless_one(m, x, t: str):
    """``x``, or 0 where the output length ``m`` is 1 (align_corners, pytorch_half_pixel and
    tf_crop_and_resize treat a length of 1 apart; a symbolic length is tested in the kernel)."""
    v = as_int(m)
    if v is not None:
        return const(0.0, t) if v == 1 else x
    return te.select(m > 1, x, const(0.0, t))


def _between_ends(m, t: str):
    """(m - 1) as a divisor: at least 1, where _unless_one sets a length of 1 apart."""
    v = as_int(m)
    return _length(v - 1, t) if v is not None else te.cast(te.max(m - 1, 1), t)


def _source_coordinate(o, ax: AxisResize, how: str, cd: str = F32):
    """The source coordinate of output index ``o`` along ``ax`` (a float64 expression).

    For float16/32 data it holds a float32 value computed as onnxruntime does (float32, its
    order of operations), so that a nearest pixel chosen at a rounding tie is the same; for
    float64 and integer data (``cd`` float64) it is computed in float64 as onnx's reference
    does (an integer result at a tie x.5 rounds as the reference's). align_corners,
    tf_crop_and_resize and pytorch_half_pixel use the output's (integer) length, as the spec
    and onnxruntime do (where a scale gives a fractional length, onnx's reference uses the
    fraction: its two align_corners downscale cases disagree with both)."""
    t = F32 if cd != F64 else F64
    c = lambda v: const(float(np.float32(v)) if t == F32 else float(v), t)
    of = te.cast(o, t)
    n, m, s = ax.in_len, ax.out_len, _scale(ax, t)
    if how == "align_corners":
        x = _unless_one(m, of * _length(n - 1, t) / _between_ends(m, t), t)
    elif how == "asymmetric":
        x = of / s
    elif how == "tf_crop_and_resize":
        x = _crop_coordinate(of, ax, t, c)
    elif how == "pytorch_half_pixel":
        x = _unless_one(m, (of + c(0.5)) / s - c(0.5), t)
    elif how == "tf_half_pixel_for_nn":
        x = (of + c(0.5)) / s
    elif how == "half_pixel_symmetric":
        x = _half_pixel_symmetric(o, n, m, s, t)
    else:
        x = (of + c(0.5)) / s - c(0.5)
    return te.cast(x, F64)


def _crop_coordinate(of, ax: AxisResize, t: str, c):
    """tf_crop_and_resize: the output spread over the roi; an output of length 1 at the roi's
    centre (onnxruntime computes that one in double)."""
    r0, r1 = ax.roi
    n, m = ax.in_len, ax.out_len
    span = _length(n - 1, t)
    x = c(r0) * span + of * (c(r1) - c(r0)) * span / _between_ends(m, t)
    half = 0.5 * (r0 + r1)
    if as_int(n) is not None:
        centre = c(half * (as_int(n) - 1))
    else:
        centre = te.cast(const(half, F64) * te.cast(n - 1, F64), t)
    if as_int(m) is not None:
        return centre if as_int(m) == 1 else x
    return te.select(m > 1, x, centre)


def _half_pixel_symmetric(o, n, m, s, t: str):
    """onnxruntime: the offset in float32, the rest in double, rounded to float32."""
    ow = s * _length(n, t)
    offset = (_length(n, t) / const(2.0, t)) * (const(1.0, t) - _length(m, t) / ow)
    d = (te.cast(o, F64) + const(0.5, F64)) / te.cast(s, F64) - const(0.5, F64)
    return te.cast(te.cast(offset, F64) + d, t)


def _int64(n):
    """An axis length (or one less) as an int64 value: a constant or the expression."""
    v = as_int(n)
    return const(v, "int64") if v is not None else te.cast(n, "int64")


def _clamped_index(v, n):
    """An int64 index from a float64 expression, clamped to [0, n): ONNX's edge padding (the
    float clamp first keeps the conversion defined for any coordinate)."""
    v = te.max(te.min(v, _length(n, F64)), const(-1.0, F64))
    i = te.cast(v, "int64")
    return te.max(te.min(i, _int64(n - 1)), const(0, "int64"))


def _nearest_index(x, rule: str, scale: float):
    if rule == "simple":
        rule = "floor" if scale >= 1 else "ceil"
    if rule == "round_prefer_floor":
        return te.ceil(x - const(0.5, F64))
    if rule == "round_prefer_ceil":
        return te.floor(x + const(0.5, F64))
    return te.floor(x) if rule == "floor" else te.ceil(x)


def _cubic(a_coef: float, d):
    """Keys' cubic convolution kernel at distance |d| (float64 expression)."""
    a = const(a_coef, F64)
    d = te.abs(d)
    d2 = d * d
    d3 = d2 * d
    near = (a + const(2.0, F64)) * d3 - (a + const(3.0, F64)) * d2 + const(1.0, F64)
    far = a * d3 - const(5.0, F64) * a * d2 + const(8.0, F64) * a * d - const(4.0, F64) * a
    zero = const(0.0, F64)
    return te.select(d <= const(1.0, F64), near, te.select(d < const(2.0, F64), far, zero))


def _taps(ax: AxisResize, how: ResizeMode) -> tuple[int, int, float]:
    """(first tap offset from floor(x), number of taps, filter scale) of linear and cubic: the
    filter is stretched by 1/scale when antialiasing a downscale."""
    if how.mode == "nearest":
        return 0, 1, 1.0
    fs = min(ax.scale, 1.0) if how.antialias else 1.0
    if how.mode == "linear":
        first = math.floor(-1 / fs) + 1 if how.antialias else 0
    else:
        first = math.floor(-2 / fs) + 1 if how.antialias else -1
    return first, 2 - 2 * first, fs


def _floor_index(x, ax: AxisResize, count: int):
    """floor(x) as int64, kept within reach of the axis (the taps are clamped to it anyway)."""
    lo = const(-3.0 - count, F64)
    return te.cast(te.max(te.min(te.floor(x), _length(ax.in_len, F64)), lo), "int64")


def _index_table(ax: AxisResize, how: ResizeMode, cd: str) -> Tensor:
    """Per output index of the axis: the nearest source index (nearest) or floor of the source
    coordinate (linear, cubic); OUTSIDE where tf_crop_and_resize extrapolates."""
    _, count, _ = _taps(ax, how)

    def f(o):
        x = _source_coordinate(o, ax, how.coordinate_transformation_mode, cd)
        if how.mode == "nearest":
            i = _clamped_index(_nearest_index(x, how.nearest_mode, ax.scale), ax.in_len)
        else:
            i = _floor_index(x, ax, count)
        if how.coordinate_transformation_mode == "tf_crop_and_resize":
            out = te.any(x < const(0.0, F64), x > _length(ax.in_len - 1, F64))
            i = te.select(out, const(OUTSIDE, "int64"), i)
        return i

    return op_compute("resize_index", (ax.out_len,), f, OPAQUE, name=f"resize_index{ax.axis}",
                      axis=ax.axis, **_requires(ax))


def _tap_weight(j, ratio, fs: float, how: ResizeMode):
    """The filter's weight (float64) of the tap at floor(x) + j (j an int or an expression)."""
    d = (te.cast(j, F64) - ratio) * const(fs, F64)
    if how.mode == "linear":
        return te.max(const(1.0, F64) - te.abs(d), const(0.0, F64))
    return _cubic(how.cubic_coeff_a, d)


def _weight_table(ax: AxisResize, how: ResizeMode, cd: str) -> Tensor:
    """Per output index and tap: the tap's weight, normalized as ONNX's reference does
    (antialias: by the filter's sum; exclude_outside: over the taps inside the axis)."""
    first, count, fs = _taps(ax, how)

    def weight(j, ratio, base):
        w = _tap_weight(j, ratio, fs, how)
        if how.exclude_outside:
            inside = te.all(base + j >= 0, base + j < ax.in_len)
            w = te.select(inside, w, const(0.0, F64))
        return w

    def f(o, t):
        x = _source_coordinate(o, ax, how.coordinate_transformation_mode, cd)
        ratio = x - te.floor(x)
        base = _floor_index(x, ax, count)
        w = weight(t + first, ratio, base)
        if how.antialias or how.exclude_outside:
            total = weight(first, ratio, base)
            for j in range(first + 1, first + count):
                total = total + weight(j, ratio, base)
            w = w / te.select(total == const(0.0, F64), const(1.0, F64), total)
        return te.cast(w, cd)

    return op_compute("resize_weights", (count, ax.out_len), lambda t, o: f(o, t), OPAQUE,
                      name=f"resize_weights{ax.axis}", axis=ax.axis)


def _axis_pass(cur: Tensor, ax: AxisResize, how: ResizeMode, cd: str, tag: str) -> Tensor:
    """``cur`` resized along one axis (values in the compute dtype ``cd``): a sum of taps read
    at the indices of the index table, weighted by the weight table."""
    shape = list(cur.shape)
    shape[ax.axis] = ax.out_len
    first, count, _ = _taps(ax, how)
    index = _index_table(ax, how, cd)
    weights = None if how.mode == "nearest" else _weight_table(ax, how, cd)
    last = _int64(ax.in_len - 1)
    zero = const(0, "int64")

    def read(i, k):
        idx = list(i)
        idx[ax.axis] = te.max(te.min(k, last), zero)
        v = cur[tuple(idx)]
        return v if v.dtype == cd else te.cast(v, cd)

    def f(*i):
        o = i[ax.axis]
        k = index[o]
        if weights is None:
            v = read(i, k)
        else:
            v = None
            for t in range(count):
                term = read(i, k + (first + t)) * weights[t, o]
                v = term if v is None else v + term
        if how.coordinate_transformation_mode == "tf_crop_and_resize":
            v = te.select(k == const(OUTSIDE, "int64"), const(how.extrapolation_value, cd), v)
        return v

    return op_compute(tag, shape, f, OPAQUE, axis=ax.axis, out_len=ax.out_len, taps=count)


def _compute_dtype(x: Tensor, how: ResizeMode) -> str:
    """float32 for float16/32 data, float64 for float64 and for integers (whose interpolated
    values are rounded to nearest: in float64 as onnx's reference computes them)."""
    if how.mode == "nearest" and how.coordinate_transformation_mode != "tf_crop_and_resize":
        return x.dtype  # a pure copy of the nearest element
    return "float32" if x.dtype in ("float16", "float32") else F64


def _round_half_even(v):
    """numpy.round: to nearest, ties to even (the interpolation of two integers is often a
    tie)."""
    fl = te.floor(v)
    d = v - fl
    half = const(0.5, v.dtype)
    even = fl - const(2.0, v.dtype) * te.floor(fl * half) == const(0.0, v.dtype)
    up = fl + const(1.0, v.dtype)
    return te.select(d > half, up, te.select(d < half, fl, te.select(even, fl, up)))


def _to_dtype(y: Tensor, d: str) -> Tensor:
    """The interpolated values in the input's dtype (the op's output stage): integers rounded
    half to even and saturated (ONNX's reference rounds and clips)."""
    if dt.is_float(d):
        return op_compute("resize", y.shape, lambda *i: te.cast(y[i], d), OPAQUE)
    lo, hi = dt.limits(d)

    def f(*i):
        v = _round_half_even(y[i])
        v = te.max(te.min(v, const(float(hi), y.dtype)), const(float(lo), y.dtype))
        return te.cast(v, d)

    return op_compute("resize", y.shape, f, OPAQUE)


def _same_length(n, m) -> bool:
    """Whether two lengths are the same int or the same expression (a graph writes equal
    symbolic lengths in one canonical form)."""
    if is_symbolic(n) or is_symbolic(m):
        return is_symbolic(n) and is_symbolic(m) and E.structural_equal(n, m)
    return as_int(n) == as_int(m)


def _axis_scale(n, m, given):
    """The scale of an axis: the given one, else output / input (None where a length is
    symbolic: computed in the kernel)."""
    if given is not None:
        return float(given)
    return None if is_symbolic(n) or is_symbolic(m) else as_int(m) / as_int(n)


def plan_axes(in_shape, sizes, scales, roi) -> list[AxisResize]:
    """The axes a resize changes (an axis of scale 1, same length and the whole roi is left
    alone, as ONNX's reference does)."""
    out = []
    for a, (n, m) in enumerate(zip(in_shape, sizes)):
        s = _axis_scale(n, m, scales[a] if scales is not None else None)
        r = (float(roi[a]), float(roi[len(in_shape) + a])) if roi is not None else (0.0, 1.0)
        if (s is None or math.isclose(s, 1.0)) and _same_length(n, m) and \
                math.isclose(r[0], 0.0) and math.isclose(r[1], 1.0):
            continue
        out.append(AxisResize(a, n, m, s, r))
    return out


def _enlarged(ax: AxisResize) -> bool:
    """Whether the axis gets longer: from its scale, or its lengths where the variables
    (each at least 1) decide it."""
    if ax.scale is not None:
        return ax.scale > 1
    diff = simplify(ax.out_len - ax.in_len)
    ranges = {v: (1, float("inf")) for v in collect_vars(diff)}
    return Analyzer(ranges).bound(diff)[0] >= 1


def _pass_order(axes: list, rank: int, how: ResizeMode) -> list:
    """The innermost axis's pass gathers (its taps move along the vectorized loop); the other
    passes read whole rows. An enlarged innermost axis goes first, so that it gathers from the
    smaller tensor and the big output pass reads rows (2x bilinear of 1x256x32x32: 1.82 ->
    0.38 ms; onnxruntime 1.47)."""
    if how.mode != "nearest" and axes and axes[-1].axis == rank - 1 and _enlarged(axes[-1]):
        return [axes[-1]] + axes[:-1]
    return axes


def _check_args(x, sizes, scales, roi, how):
    check_tensor("resize", "x", x)
    shp = dims_of("resize", "x", x)
    how.check()
    sizes = [v if is_symbolic(v) else as_int(v) for v in sizes]
    if len(sizes) != len(shp) or any(not is_symbolic(v) and v < 1 for v in sizes):
        raise ValueError(f"resize: sizes must give a positive length for each of the {len(shp)} "
                         f"axes of x {shp}; got {sizes}")
    if scales is not None and (len(scales) != len(shp) or any(
            s is not None and not float(s) > 0 for s in scales)):
        raise ValueError(f"resize: scales must give a positive scale for each of the "
                         f"{len(shp)} axes (None: sizes / input); got {list(scales)}")
    if how.coordinate_transformation_mode == "tf_crop_and_resize" and (
            roi is None or len(roi) != 2 * len(shp)):
        raise ValueError(f"resize: tf_crop_and_resize needs roi with {2 * len(shp)} entries "
                         f"(starts then ends, one per axis); got {roi!r}")
    if dt.is_bool(x.dtype):
        raise ValueError("resize: bool data cannot be interpolated")
    return shp, sizes


def _check_constant_scales(axes: list, how: ResizeMode) -> None:
    """The antialiasing filter's width and Resize-10's 'simple' rounding depend on the scale:
    it must be a number, given or from constant lengths."""
    needs = "antialias" if how.antialias else "nearest_mode 'simple'" if \
        how.mode == "nearest" and how.nearest_mode == "simple" else None
    for ax in axes:
        if needs and ax.scale is None:
            raise ValueError(f"resize: {needs} needs a constant scale; axis {ax.axis} goes "
                             f"from {ax.in_len} to {ax.out_len}, symbolic lengths: give scales")


def _requires(ax: AxisResize) -> dict:
    """A symbolic output length must be at least 1 (floor(n * scale) is 0 for a small n):
    checked at the kernel's entry (the ``requires`` attribute, see lower/entry_checks.py)."""
    if not is_symbolic(ax.out_len):
        return {}
    why = (f"resize: the output length {ax.out_len} of axis {ax.axis} (input length "
           f"{ax.in_len}) is less than 1")
    return {"requires": ((ax.out_len - 1, why),)}


def resize(x: Tensor, sizes, scales=None, mode: str = "nearest",
           coordinate_transformation_mode: str = "half_pixel",
           nearest_mode: str = "round_prefer_floor", cubic_coeff_a: float = -0.75,
           exclude_outside: bool = False, extrapolation_value: float = 0.0, roi=None,
           antialias: bool = False) -> Tensor:
    """ONNX Resize of ``x`` to ``sizes`` (one length per axis). ``scales`` (one per axis,
    default sizes / input shape) are the scales the coordinate transformation divides by, as
    ONNX passes them; ``roi``: starts then ends per axis, normalized, for tf_crop_and_resize."""
    how = ResizeMode(mode, coordinate_transformation_mode, nearest_mode, float(cubic_coeff_a),
                     bool(exclude_outside), float(extrapolation_value), bool(antialias))
    shp, sizes = _check_args(x, sizes, scales, roi, how)
    axes = plan_axes(shp, sizes, scales, roi if how.coordinate_transformation_mode ==
                     "tf_crop_and_resize" else None)
    _check_constant_scales(axes, how)
    cd = _compute_dtype(x, how)
    if not axes:
        return op_compute("resize", x.shape, lambda *i: x[i], OPAQUE)
    cur = x
    for k, ax in enumerate(_pass_order(axes, len(shp), how)):
        last = k == len(axes) - 1 and cd == x.dtype
        cur = _axis_pass(cur, ax, how, cd, "resize" if last else "resize_axis")
    return cur if cur.dtype == x.dtype else _to_dtype(cur, x.dtype)


def schedule_resize(s, out: Tensor) -> None:
    """Index and weight tables computed once at the root (a few values per output index; the
    weights [tap, index], so that a vectorized pass loads them as vectors); a nearest pass (one
    tap) computed inside the pass that reads it (one kernel gathering the input); linear,
    cubic and antialias passes each at the root, separable (taps per axis add instead of
    multiplying, and a pass over an outer axis reads whole rows as vectors); each root stage
    with the injective schedule (outer loops in parallel, the inner one vectorized). 1x256x32x32
    upscaled 2x, 2-core machine: nearest 0.38 ms (onnxruntime 0.70), linear 0.38 ms (1.47;
    inlined into one kernel it was 5.4), cubic 0.92 ms (164); _pass_order says which pass
    goes first."""
    from .definition import Part, definition_of
    from .schedule import schedule_injective

    stages, todo = [], [s[out]]
    while todo:
        st = todo.pop()
        for t in st.op.input_tensors:
            p = s.stage_map.get(t.op)
            d = definition_of(p.op) if p is not None else None
            if isinstance(d, Part) and d.owner == "resize" and p not in stages:
                stages.append(p)
                todo.append(p)
    for st in stages:
        if st.op.attrs.get("taps", INLINE_TAPS + 1) <= INLINE_TAPS:
            st.compute_inline()
    for st in stages:
        if st.attach_type == "root":
            schedule_injective(s, st.op.output(0))
    schedule_injective(s, out)


__all__ = ["resize"]
