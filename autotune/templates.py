"""Built-in tunable templates (registered when autotune first looks a template name up):
matmul, dense, batch_matmul (the operator library's register-tile schedule and its knobs),
conv2d_nchwc (the library's blocked convolution schedule, widened: register tile shape,
reduction order, parallel axis) and depthwise_conv2d (the library's spatial-window schedule and
its knobs). As in TVM's TOPI, each template computes with the library op and schedules with the
library's schedule function; its fallback config is that function's defaults, so an untuned
kernel is the library's default schedule (tests/autotune/test_space.py checks the loop nests).
Each template reads the definition of the op it tunes (tensorlang/ops/catalog.py: the one
declaring ``template=<its name>``): its compute, and the knobs its anchor schedule declares,
whose defaults are the fallback config's.
"""

from __future__ import annotations

import numpy as np

import tensorlang as tl

from .task import computes_once, get_config, template


def _tuned_op(name: str):
    """The operator definition that template ``name`` tunes (the one declaring ``template=name``
    in tensorlang/ops/catalog.py): the template computes with its compute and takes its
    defaults from the knobs its anchor schedule declares."""
    from ..ops.definition import all_definitions

    for d in all_definitions():
        if d.template == name:
            return d
    raise LookupError(f"no operator definition declares template={name!r}")


def _declared_first(schedule, knob: str, others) -> list:
    """Candidates of ``knob``: the default ``schedule`` declares for it, then ``others`` (the
    template's fallback config is the library's default schedule)."""
    default = schedule.knob(knob).default
    return [default, *(v for v in others if v != default)]

# Accumulator vectors of the matmul register tile: AVX-512 has 32 zmm registers, and the tile
# also needs the broadcast A value and a B vector; beyond this every FMA spills.
_MAX_MATMUL_TILE = 28


def _matmul_family(c):
    """Knobs of ops.schedule.schedule_matmul for the matmul-family tensor `c` (rows M, columns N
    are its last two axes), and its schedule under the current config:

        tile_m       rows of the register tile (the first candidate is the library's choice
                     for this M; the others are exact, with a guarded last row tile)
        tile_n       columns of the register tile, whole zmm vectors (the library's 64 first)
        k_outer      reduction outside the tile rows (A broadcast, B streamed) or inside
        unroll_rows  the tile's rows unrolled (each accumulator a named register)
        rows_outer   row tiles outside the column panels (B packed once at the root)
        parallel     the outer loop parallel or not

    A product the library computes as row dot products (few rows, both operands contiguous
    along k: schedule_matmul's row-reduction path) has no register tile and no knobs."""
    from ..ops import schedule as S
    from ..ops.definition import anchor_schedule

    cfg = get_config()
    if S.matmul_takes_row_reduction(c.op):
        return tl.ops.default_schedule(c)
    declared = anchor_schedule(c)  # the matmul family's anchor schedule and its knobs
    m, n = (int(d.value) for d in c.shape[-2:])
    tm0 = S.matmul_row_tile(m, declared.knob("tile_m").default)
    cfg.define_knob("tile_m", [tm0] + [r for r in range(1, min(m, 8) + 1) if r != tm0],
                    default=tm0)
    widths = _declared_first(declared, "tile_n", (16, 32, 48, 80, 96, 128))
    cols = list(dict.fromkeys(S.matmul_col_tile(n, w) for w in widths))
    cfg.define_knob("tile_n", cols, default=cols[0])
    for knob in ("k_outer", "unroll_rows", "rows_outer", "parallel"):
        values = _declared_first(declared, knob, (True, False))
        cfg.define_knob(knob, values, default=values[0])
    knobs = {k: cfg[k].val for k in ("tile_m", "tile_n", "k_outer", "unroll_rows",
                                     "rows_outer", "parallel")}
    tile = knobs["tile_m"] * -(-knobs["tile_n"] // S.LANES)
    if tile > _MAX_MATMUL_TILE:
        # far beyond the registers: every FMA spills, and unrolled it takes LLVM long to
        # compile; refused like an illegal schedule, so the tuner prunes it before building
        raise tl.ScheduleError(f"matmul template: register tile {knobs['tile_m']}x"
                               f"{knobs['tile_n']} has {tile} accumulator vectors (more than "
                               f"{_MAX_MATMUL_TILE})")
    # tile_m is exact: its candidates already went through the library's rule
    return tl.ops.default_schedule(c, knobs=dict(knobs, fit_rows=False))


def _matmul_family_kernel(op, a: tuple, b: tuple, dtype: str):
    """(schedule, tensors) of the matmul-family template computing op(A, B) for A and B given
    as (shape, name)."""
    def declare():
        ta, tb = (tl.placeholder(shape, dtype=dtype, name=name) for shape, name in (a, b))
        return [ta, tb, op(ta, tb)]

    tensors = computes_once(declare)
    return _matmul_family(tensors[-1]), tensors


def _matmul_ref(a, b):
    return a @ b


@template("matmul", reference=_matmul_ref, flop=lambda M, N, K, dtype: 2.0 * M * N * K)
def matmul(M: int, N: int, K: int, dtype: str = "float32"):
    """C[M, N] = A[M, K] @ B[K, N] (tl.ops.matmul: B packed into [N/16, K, 16] panels)."""
    return _matmul_family_kernel(tl.ops.matmul, ((M, K), "A"), ((K, N), "B"), dtype)


def _dense_ref(x, w):
    return x @ w.T


@template("dense", reference=_dense_ref, flop=lambda M, N, K, dtype: 2.0 * M * N * K)
def dense(M: int, N: int, K: int, dtype: str = "float32"):
    """Y[M, N] = X[M, K] @ W[N, K]^T (tl.ops.dense, a fully connected layer)."""
    return _matmul_family_kernel(tl.ops.dense, ((M, K), "X"), ((N, K), "W"), dtype)


def _batch_matmul_ref(a, b):
    return a @ b


@template("batch_matmul", reference=_batch_matmul_ref,
          flop=lambda B, M, N, K, dtype: 2.0 * B * M * N * K)
def batch_matmul(B: int, M: int, N: int, K: int, dtype: str = "float32"):
    """C[b] = A[b] @ B[b] for b < B (tl.ops.batch_matmul): per batch the matmul register tile;
    the parallel loop is the fused (batch, panel) loop, so small matrices still feed both
    cores."""
    return _matmul_family_kernel(tl.ops.batch_matmul, ((B, M, K), "A"), ((B, K, N), "B"),
                                 dtype)


def _conv_flop(N, C, H, W, OC, KH, KW, stride=1, padding=0, block=16, dtype="float32"):
    oh = (H + 2 * padding - KH) // stride + 1
    ow = (W + 2 * padding - KW) // stride + 1
    return 2.0 * N * OC * oh * ow * C * KH * KW


# The register tile of the blocked conv is oc_vec x rows x reg_n accumulator vectors. AVX-512 has
# 32 zmm registers: a tile far beyond them spills every accumulator on each FMA and, fully
# unrolled, takes LLVM seconds to compile -- such configs are refused (pruned before building).
_MAX_CONV_TILE = 48


@template("conv2d_nchwc", flop=_conv_flop)
def conv2d_nchwc(N: int, C: int, H: int, W: int, OC: int, KH: int, KW: int, stride: int = 1,
                 padding: int = 0, block: int = 16, dtype: str = "float32"):
    """Blocked convolution (tensorlang.ops.conv2d_nchwc): x [N, C/b, H, W, b], w [OC/b, C/b, KH,
    KW, b, b] -> [N, OC/b, OH, OW, b]. The schedule of ops.schedule.schedule_conv2d_nchwc (a
    register tile of output columns x one vector of b output channels, accumulated in a local
    buffer computed at the tile loop; the input value broadcast, the weight vector loaded once
    per column), widened along the axes that library schedule fixes:

        reg_n     output columns in the tile (a divisor of OW up to 32)
        oc_vec    output-channel blocks (vectors) in the tile: more independent FMA chains and
                  each broadcast input value used oc_vec times
        rows      output rows in the tile (the rows' windows overlap: input rows reused)
        red_order reduction order: ic blocks outside the window (rco, ry, rx, rci) or inside it
                  (ry, rx, rco, rci)
        unroll_kw unroll the kernel-width loop
        parallel  the parallel loop: fused (n, row blocks, oc blocks) ("rows_outer": a thread
                  computes the same rows of every channel, as the layers around it do), fused
                  (n, oc blocks, row blocks) ("rows"), (n, oc blocks), or none

    The fallback is the library's default (ops.schedule.schedule_conv2d_nchwc, the same loop
    nest): reg_n 14 or the largest divisor below it, two vectors, one row, ic blocks outside,
    kw unrolled, rows outside the oc blocks when the packed weights fit in 256 KB of L2, else
    inside."""
    from ..ops.schedule import inline_pad_input, tile_sums_at

    op = _tuned_op("conv2d_nchwc")
    cfg = get_config()
    if C % block or OC % block:
        raise ValueError(f"conv2d_nchwc template: block {block} must divide C={C} and OC={OC}")

    def declare():
        x = tl.placeholder((N, C // block, H, W, block), dtype=dtype, name="x")
        w = tl.placeholder((OC // block, C // block, KH, KW, block, block), dtype=dtype,
                           name="w")
        return [x, w, op.compute(x, w, stride=stride, padding=padding)]

    x, w, y = computes_once(declare)
    declared = op.anchor  # the library schedule's knobs: its defaults are the fallback's
    _, obn, oh_n, ow_n, _ = (int(d.value) for d in y.shape)
    divs = [d for d in range(1, min(ow_n, 32) + 1) if ow_n % d == 0]
    cfg.define_knob("reg_n", divs,
                    default=max(d for d in divs if d <= declared.knob("reg_n").default))
    oc_vecs = [v for v in (1, 2, 4) if obn % v == 0]
    cfg.define_knob("oc_vec", oc_vecs,
                    default=max(v for v in oc_vecs if v <= declared.knob("oc_blocks").default))
    cfg.define_knob("rows", [r for r in (1, 2, 4) if oh_n % r == 0], default=1)
    cfg.define_knob("red_order", ["ic_outer", "ic_inner"], default="ic_outer")
    unroll = _declared_first(declared, "unroll_kw", (True, False))
    cfg.define_knob("unroll_kw", [int(u) for u in unroll], default=int(unroll[0]))
    small_weights = OC * C * KH * KW * 4 <= 256 * 1024  # as schedule_conv2d_nchwc decides
    cfg.define_knob("parallel", ["rows_outer", "rows", "blocks", "none"],
                    default="rows_outer" if small_weights else "rows")
    rn, ov, rows = cfg["reg_n"].val, cfg["oc_vec"].val, cfg["rows"].val
    if rn * ov * rows > _MAX_CONV_TILE:
        raise tl.ScheduleError(f"conv2d_nchwc template: register tile {ov}x{rows}x{rn} has "
                               f"more than {_MAX_CONV_TILE} accumulator vectors")

    s = tl.create_schedule(y)
    acc = s.cache_write(y, "local")
    o = s[y]
    n, oco, oh, ow, oci = o.op.axis
    oc_o, oc_i = o.split(oco, factor=ov)
    oh_o, oh_i = o.split(oh, factor=rows)
    ow_o, ow_i = o.split(ow, factor=rn)
    par = cfg["parallel"].val
    outer = (n, oh_o, oc_o) if par == "rows_outer" else (n, oc_o, oh_o)
    o.reorder(*outer, ow_o, oc_i, oh_i, ow_i, oci)
    o.vectorize(oci)
    # the library's chunked sums (its chain: an accuracy bound, not a tuning knob)
    cs = tile_sums_at(s, acc, s[acc].op.reduce_axis[0], declared.knob("chain").default, o,
                       ow_o)
    _, c_oc, c_h, c_w, c_c = cs.op.axis[:5]
    rco, ry, rx, rci = cs.op.reduce_axis
    red = (rco, ry, rx, rci) if cfg["red_order"].val == "ic_outer" else (ry, rx, rco, rci)
    # as the library: a broadcast input feeds oc_vec FMAs
    cs.reorder(*cs.op.axis[5:], *red, c_h, c_w, c_oc, c_c)
    # the tile's loops unrolled: each accumulator is a named register, not a stack slot
    for lp in (c_oc, c_h, c_w):
        cs.unroll(lp)
    cs.vectorize(c_c)
    if cfg["unroll_kw"].val:
        cs.unroll(rx)
    inline_pad_input(s, cs)
    if par in ("rows", "rows_outer"):
        o.parallel(o.fuse(*outer))
    elif par == "blocks":
        o.parallel(o.fuse(n, oc_o))
    return s, [x, w, y]


def _depthwise_ref(x, w, stride=1, padding=0):
    """numpy depthwise conv (multiplier 1), NCHW."""
    n, c, h, wd = x.shape
    _, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    y = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            y += win * w[None, :, 0, i, j, None, None]
    return y


def _depthwise_flop(N, C, H, W, KH, KW, stride=1, padding=0, dtype="float32"):
    oh = (H + 2 * padding - KH) // stride + 1
    ow = (W + 2 * padding - KW) // stride + 1
    return 2.0 * N * C * oh * ow * KH * KW


# no reference=: the runner's reference gets only the input arrays, not stride / padding, so it
# checks candidates against the fallback config's kernel (the tests check that against numpy)
@template("depthwise_conv2d", flop=_depthwise_flop)
def depthwise_conv2d(N: int, C: int, H: int, W: int, KH: int, KW: int, stride: int = 1,
                     padding: int = 0, dtype: str = "float32"):
    """Depthwise conv (tensorlang.ops.depthwise_conv2d_nchw, multiplier 1): x [N, C, H, W],
    w [C, 1, KH, KW] -> [N, C, OH, OW]. Knobs of the operator library's spatial-window schedule
    (ops.schedule.schedule_spatial_window):

        rows           output rows computed together (independent FMA chains; the largest
                       divisor of OH not above the knob)
        row_lanes_max  rows up to this width are one vector of the row's width (LLVM splits it
                       into zmm/ymm/xmm pieces), wider ones are split into 16-lane vectors
        parallel       the fused (n, channel) loop parallel or not

    The fallback is the library's default (4 rows, whole rows up to 64 lanes, parallel)."""
    op = _tuned_op("depthwise_conv2d")
    cfg = get_config()

    def declare():
        x = tl.placeholder((N, C, H, W), dtype=dtype, name="x")
        w = tl.placeholder((C, 1, KH, KW), dtype=dtype, name="w")
        return [x, w, op.compute(x, w, stride=stride, padding=padding)]

    x, w, y = computes_once(declare)
    declared = op.anchor  # the library schedule's knobs: its defaults are the fallback's
    oh_n = int(y.shape[2].value)
    cfg.define_knob("rows", [r for r in (1, 2, 3, 4, 6, 7, 8) if r <= oh_n],
                    default=min(declared.knob("rows").default, oh_n))
    lanes = _declared_first(declared, "row_lanes_max", (64, 16))
    cfg.define_knob("row_lanes_max", lanes, default=lanes[0])
    parallel = [int(p) for p in _declared_first(declared, "parallel", (True, False))]
    cfg.define_knob("parallel", parallel, default=parallel[0])
    s = tl.create_schedule(y)
    declared.apply(op.name, s, y, None, {"parallel": bool(cfg["parallel"].val),
                                         "row_lanes_max": cfg["row_lanes_max"].val,
                                         "rows": cfg["rows"].val})
    return s, [x, w, y]


# the int8 kernels' templates (dense_int8, conv2d_int8_nchwc) register with these
from . import int8_templates  # noqa: F401

__all__ = ["batch_matmul", "conv2d_nchwc", "dense", "depthwise_conv2d", "matmul"]
