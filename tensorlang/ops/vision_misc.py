"""Small vision operators of issue 18: space_to_depth (ONNX SpaceToDepth), group_norm (ONNX
GroupNormalization) and trilu (ONNX Trilu)."""

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


__all__ = ["group_norm", "space_to_depth", "trilu"]
