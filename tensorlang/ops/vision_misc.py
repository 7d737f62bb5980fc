"""Small vision operators of issue 18: space_to_depth (ONNX SpaceToDepth), group_norm (ONNX
GroupNormalization) and trilu (ONNX Trilu); grid_sample (ONNX GridSample)."""

from __future__ import annotations

from .. import te
from ..ir import dtype as dt
from ..ir.expr import const
from ..te.tensor import Tensor
from ._base import (
    INJECTIVE,
    OPAQUE,
    REDUCE,
    check_int,
    check_tensor,
    op_compute,
    static_shape,
)


def space_to_depth(x: Tensor, blocksize: int, mode: str = "DCR") -> Tensor:
    """ONNX SpaceToDepth of NCHW data: each blocksize x blocksize tile of pixels becomes
    channels, [N, C, H, W] -> [N, C * b * b, H / b, W / b]. Pixel (h * b + by, w * b + bx) of
    channel c goes to output channel (by * b + bx) * C + c in mode DCR (DepthToSpace's DCR
    inverse, the only order before opset 28), c * b * b + by * b + bx in mode CRD."""
    op = "space_to_depth"
    check_tensor(op, "x", x)
    b = check_int(op, "blocksize", blocksize, 1)
    if mode not in ("DCR", "CRD"):
        raise ValueError(f"{op}: mode must be 'DCR' or 'CRD', got {mode!r}")
    shp = static_shape(op, "x", x)
    if len(shp) != 4 or shp[2] % b or shp[3] % b:
        raise ValueError(f"{op}: x must be 4-D NCHW with H and W divisible by blocksize={b}, "
                         f"got {shp}")
    n, c, h, w = shp

    def f(i, oc, y, z):
        blk, ch = (oc // c, oc % c) if mode == "DCR" else (oc % (b * b), oc // (b * b))
        return x[i, ch, y * b + blk // b, z * b + blk % b]

    return op_compute(op, (n, c * b * b, h // b, w // b), f, INJECTIVE, blocksize=b, mode=mode)


def trilu(x: Tensor, k: int = 0, upper: bool = True) -> Tensor:
    """ONNX Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of each matrix in the
    last two axes, zeros elsewhere. Injective, not elementwise: the value depends on the
    position (a layout change must not move it)."""
    op = "trilu"
    check_tensor(op, "x", x)
    k = check_int(op, "k", k)
    if x.ndim < 2:
        raise ValueError(f"{op}: x must have rank >= 2, got {x.ndim}")
    zero = const(False, x.dtype) if dt.is_bool(x.dtype) else const(0, x.dtype)

    def f(*i):
        d = i[-1] - i[-2]
        keep = d >= k if upper else d <= k
        return te.select(keep, x[i], zero)

    return op_compute(op, x.shape, f, INJECTIVE, k=k, upper=bool(upper))


def _group_norm_args(op, x, num_groups, gamma, beta, epsilon, compute_dtype):
    check_tensor(op, "x", x)
    shp = static_shape(op, "x", x)
    g = check_int(op, "num_groups", num_groups, 1)
    if len(shp) < 2 or shp[1] % g:
        raise ValueError(f"{op}: x {shp} must have rank >= 2 and channels divisible by "
                         f"num_groups={g}")
    if not dt.is_float(x.dtype):
        raise ValueError(f"{op}: x must be a float tensor, got {x.dtype}")
    for name, t in (("gamma", gamma), ("beta", beta)):
        if t is not None and static_shape(op, name, check_tensor(op, name, t)) != (shp[1],):
            raise ValueError(f"{op}: {name} must have shape ({shp[1]},) (one per channel)")
    if not isinstance(epsilon, (int, float)) or epsilon < 0:
        raise ValueError(f"{op}: epsilon must be a non-negative number, got {epsilon!r}")
    cd = dt.canonical(compute_dtype or x.dtype)
    if not dt.is_float(cd):
        raise ValueError(f"{op}: compute_dtype must be a float type, got {cd}")
    return shp, g, cd


def group_norm(x: Tensor, num_groups: int, gamma: Tensor | None = None,
               beta: Tensor | None = None, epsilon: float = 1e-5,
               compute_dtype: str | None = None) -> Tensor:
    """ONNX GroupNormalization (opset 21 form): the channels of x [N, C, ...] in num_groups
    groups, each group of each sample normalized by its mean and variance, then * gamma[c] +
    beta[c]. compute_dtype: the type of the statistics and the normalization (ONNX's
    stash_type; default x's type)."""
    op = "group_norm"
    shp, g, cd = _group_norm_args(op, x, num_groups, gamma, beta, epsilon, compute_dtype)
    n, c, sp = shp[0], shp[1], shp[2:]
    cg = c // g
    count = cg
    for s in sp:
        count *= s
    inv = const(1.0 / count, cd)

    def xv(idx):
        v = x[idx]
        return v if v.dtype == cd else te.cast(v, cd)

    def axes():
        return [te.reduce_axis((0, cg), name="kc")] + [
            te.reduce_axis((0, s), name=f"k{d}") for d, s in enumerate(sp)]

    def at(i, gi, ks):
        return (i, gi * cg + ks[0].var) + tuple(k.var for k in ks[1:])

    k1 = axes()
    mean = op_compute(op + "_mean", (n, g), lambda i, gi: te.sum(xv(at(i, gi, k1)) * inv,
                                                                  axis=k1), REDUCE)
    k2 = axes()

    def var_f(i, gi):
        d = xv(at(i, gi, k2)) - mean[i, gi]
        return te.sum(d * d * inv, axis=k2)

    var = op_compute(op + "_var", (n, g), var_f, REDUCE)
    eps = const(float(epsilon), cd)

    def f(*i):
        grp = i[1] // cg
        v = (xv(i) - mean[i[0], grp]) * te.rsqrt(var[i[0], grp] + eps)
        if gamma is not None:
            v = v * te.cast(gamma[i[1]], cd)
        if beta is not None:
            v = v + te.cast(beta[i[1]], cd)
        return v if cd == x.dtype else te.cast(v, x.dtype)

    return op_compute(op, shp, f, OPAQUE, num_groups=g, epsilon=float(epsilon))


GRID_MODES = ("linear", "nearest", "cubic")
GRID_PADDING = ("zeros", "border", "reflection")
CUBIC_A = -0.75  # GridSample's cubic convolution constant (Keys)


def grid_sample(x: Tensor, grid: Tensor, mode: str = "linear", padding_mode: str = "zeros",
                align_corners: bool = False) -> Tensor:
    """ONNX GridSample of NCHW data: out[n, c, h, w] samples x[n, c] at grid[n, h, w] = (x, y)
    in [-1, 1] (the corners' centres with align_corners, else the corners' edges), by linear
    (2 x 2 taps), nearest (half to even) or cubic (4 x 4 taps, a = -0.75) interpolation. A
    coordinate outside the image is clamped (border) or mirrored (reflection) first; a tap
    outside it reads 0 (zeros), its clamped or its mirrored pixel."""
    op = "grid_sample"
    check_tensor(op, "x", x)
    check_tensor(op, "grid", grid)
    n, c, h_in, w_in = _grid_args(op, x, grid, mode, padding_mode)
    _, h_out, w_out, _ = static_shape(op, "grid", grid)
    cd = x.dtype
    sample = _GridSampler(x, cd, padding_mode, bool(align_corners), (h_in, w_in))

    # the pixel coordinates once per output position (a stage each), not once per channel
    # and tap: cubic reflection inlined into its 16 taps took seconds to compile
    def coordinates(axis: str, k: int, dim: int) -> Tensor:
        return op_compute(f"{op}_{axis}", (n, h_out, w_out), lambda i, oh, ow: sample.coordinate(
            te.cast(grid[i, oh, ow, k], cd), dim, mode), INJECTIVE)

    cy, cx = coordinates("y", 1, h_in), coordinates("x", 0, w_in)

    def f(i, ch, oh, ow):
        return sample.value(i, ch, cy[i, oh, ow], cx[i, oh, ow], mode)

    return op_compute(op, (n, c, h_out, w_out), f, OPAQUE, mode=mode,
                      padding_mode=padding_mode, align_corners=int(bool(align_corners)))


def _grid_args(op, x, grid, mode, padding_mode):
    if mode not in GRID_MODES:
        raise ValueError(f"{op}: mode must be one of {', '.join(GRID_MODES)}, got {mode!r}")
    if padding_mode not in GRID_PADDING:
        raise ValueError(f"{op}: padding_mode must be one of {', '.join(GRID_PADDING)}, got "
                         f"{padding_mode!r}")
    if not dt.is_float(x.dtype) or not dt.is_float(grid.dtype):
        raise ValueError(f"{op}: x and grid must be float tensors, got {x.dtype} and "
                         f"{grid.dtype}")
    xs, gs = static_shape(op, "x", x), static_shape(op, "grid", grid)
    if len(xs) != 4 or len(gs) != 4 or gs[0] != xs[0] or gs[3] != 2:
        raise ValueError(f"{op}: x must be [N, C, H, W] and grid [N, H_out, W_out, 2], got "
                         f"{list(xs)} and {list(gs)}")
    return xs


def schedule_grid_sample(s, out: Tensor) -> None:
    """The coordinate stages at the root with the injective schedule (vectorized); the samples
    with the outer loops in parallel and the taps scalar: their reads are gathers, and 16 cubic
    taps vectorized (or the coordinates inlined into each) took seconds to compile."""
    from .schedule import schedule_injective

    st = s[out]
    for t in st.op.input_tensors:
        if t.op.tag in ("grid_sample_y", "grid_sample_x"):
            schedule_injective(s, t)
    outer = st.fuse(*st.op.axis[:-1])
    st.parallel(outer)


class _GridSampler:
    """The coordinate arithmetic of one GridSample: denormalization, the padding mode's
    treatment of coordinates and of taps, and the interpolation's weights."""

    def __init__(self, x, cd: str, padding: str, align: bool, dims: tuple[int, int]) -> None:
        self.x, self.cd, self.padding, self.align, self.dims = x, cd, padding, align, dims

    def _f(self, v: float):
        return const(float(v), self.cd)

    def _bounds(self, dim: int) -> tuple[float, float]:
        return (0.0, dim - 1.0) if self.align else (-0.5, dim - 0.5)

    def coordinate(self, g, dim: int, mode: str):
        """The pixel coordinate of normalized g along an axis of `dim` pixels."""
        nearest, cubic = mode == "nearest", mode == "cubic"
        one = self._f(1)
        v = (g + one) * self._f((dim - 1) / 2) if self.align else             ((g + one) * self._f(dim) - one) * self._f(0.5)
        if nearest:
            v = te.nearbyint(v)
        lo, hi = self._bounds(dim)
        outside = (v < self._f(lo)) | (v > self._f(hi))
        if self.padding == "border" and not cubic:
            # (cubic taps are clamped one by one, as onnxruntime and torch do; onnx's
            # reference clamps the coordinate first)
            return te.select(outside, te.min(te.max(v, self._f(0)), self._f(dim - 1)), v)
        if self.padding == "reflection":
            return self._reflect(v, lo, hi)
        return v

    def _reflect(self, v, lo: float, hi: float):
        """v mirrored at lo and hi until inside [lo, hi] (an axis of one pixel: lo)."""
        if hi == lo:
            return self._f(lo)
        span = self._f(hi - lo)
        below, above = v < self._f(lo), v > self._f(hi)
        dist = te.select(below, self._f(lo) - v, v - self._f(hi))
        k = te.floor(dist / span)
        r = dist - k * span
        even = (k - self._f(2) * te.floor(k * self._f(0.5))) == self._f(0)
        mirrored = te.select(below == even, self._f(lo) + r, self._f(hi) - r)
        return te.select(below | above, mirrored, v)

    def _tap_reflect(self, v, lo: float, hi: float):
        """A tap's position mirrored into [lo, hi]: a tap is at most 2 past a coordinate inside,
        so where the span is at least 2 one mirror does (16 cubic taps each reflected in full
        made a kernel that took half a minute to compile)."""
        if hi - lo < 2:
            return self._reflect(v, lo, hi)
        low, high = self._f(lo), self._f(hi)
        return te.select(v < low, low + low - v, te.select(v > high, high + high - v, v))

    def pixel(self, i, ch, iy, ix):
        """x[i, ch] at integer coordinates (float expressions) under the padding mode."""
        h, w = self.dims
        idx = []
        for v, dim in ((iy, h), (ix, w)):
            if self.padding == "reflection":
                v = te.trunc(self._tap_reflect(v, *self._bounds(dim)))
            idx.append(v)
        inside = None
        if self.padding == "zeros":
            inside = ((idx[0] >= self._f(0)) & (idx[0] <= self._f(h - 1)) &
                      (idx[1] >= self._f(0)) & (idx[1] <= self._f(w - 1)))
        # every read in bounds: clamped (border, and the mirrored index's rounding)
        iy_, ix_ = (te.cast(te.min(te.max(v, self._f(0)), self._f(dim - 1)), "int64")
                    for v, dim in zip(idx, (h, w)))
        value = te.cast(self.x[i, ch, iy_, ix_], self.cd)
        return value if inside is None else te.select(inside, value, self._f(0))

    def value(self, i, ch, vy, vx, mode: str):
        """The sample at pixel coordinates (vy, vx) (coordinate()'s)."""
        if mode == "nearest":
            return self.pixel(i, ch, vy, vx)
        y0, x0 = te.floor(vy), te.floor(vx)
        ty, tx = vy - y0, vx - x0
        taps = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
        wy, wx = self._weights(ty, mode), self._weights(tx, mode)
        total = None
        for a, oy in enumerate(taps):
            row = None
            for b, ox in enumerate(taps):
                term = wx[b] * self.pixel(i, ch, y0 + self._f(oy), x0 + self._f(ox))
                row = term if row is None else row + term
            total = wy[a] * row if total is None else total + wy[a] * row
        return total

    def _weights(self, t, mode: str) -> list:
        one = self._f(1)
        if mode == "linear":
            return [one - t, t]
        a = self._f(CUBIC_A)

        def near(d):  # |d| <= 1
            return ((a + self._f(2)) * d - (a + self._f(3))) * d * d + one

        def far(d):  # 1 < |d| < 2
            return ((a * d - self._f(5) * a) * d + self._f(8) * a) * d - self._f(4) * a

        return [far(t + one), near(t), near(one - t), far(self._f(2) - t)]


__all__ = ["grid_sample", "group_norm", "schedule_grid_sample", "space_to_depth", "trilu"]
