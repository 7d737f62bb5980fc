"""Built-in tunable templates (registered when autotune first looks a template name up):
matmul, dense, batch_matmul (register-tile spaces) and conv2d_nchwc (the operator library's
blocked convolution schedule and its knobs).

matmul C[M, N] = A[M, K] @ B[K, N]. The space is built around the schedule that reaches
OpenBLAS speed (benchmarks/matmul.py, DESIGN.md §3), and its fallback config *is* that schedule:

    pack:     B packed into panels PB[j // nr, k, j % nr] (contiguous nr-wide rows per k), or not
    tile_j:   nr, the panel / register-tile width (a divisor of N)
    tile_i:   mr, the rows of the register tile (tail-guarded when it does not divide M)
    vec:      the vector width inside the register tile (a divisor of nr)
    order:    which of (panel, row-block) loops is outer (panel outer reuses it from L2)
    k_order:  k outside the tile rows (broadcast A, stream the panel) or inside
    unroll_i, unroll_j: unroll the tile's rows / vector columns (keeps the tile in registers)
    par:      parallel outer loop or not
"""

from __future__ import annotations

import tensorlang as tl

from .task import get_config, template


def _matmul_ref(a, b):
    return a @ b


@template("matmul", reference=_matmul_ref, flop=lambda M, N, K, dtype: 2.0 * M * N * K)
def matmul(M: int, N: int, K: int, dtype: str = "float32"):
    cfg = get_config()
    A = tl.placeholder((M, K), dtype=dtype, name="A")
    B = tl.placeholder((K, N), dtype=dtype, name="B")
    nr_default = 64 if N % 64 == 0 else max(d for d in range(1, min(N, 64) + 1) if N % d == 0)
    cfg.define_split("tile_j", N, num_outputs=2, policy="factors", max_factor=256,
                     filter=lambda e: e.size[1] >= min(8, N), default=[-1, nr_default])
    cfg.define_split("tile_i", M, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in range(1, min(M, 8) + 1)],
                     default=[-1, min(6, M)])
    cfg.define_knob("pack", [1, 0], default=1)
    nr = cfg["tile_j"].size[1]
    mr = cfg["tile_i"].size[1]
    # the default follows the default tile width (in collect mode nr is the first candidate)
    cfg.define_knob("vec", [4, 8, 16],
                    default=max([v for v in (4, 8, 16) if nr_default % v == 0] or [4]))
    cfg.define_knob("order", ["panel_outer", "rows_outer"], default="panel_outer")
    cfg.define_knob("k_order", ["k_outer", "k_inner"], default="k_outer")
    cfg.define_knob("unroll_i", [1, 0], default=1)
    cfg.define_knob("unroll_j", [1, 0], default=1)
    cfg.define_knob("par", [1, 0], default=1)
    vec = cfg["vec"].val
    if nr % vec:
        # The vector loop must tile the register tile exactly; a config that does not is
        # refused like any other illegal schedule (the tuner prunes it before building).
        raise tl.ScheduleError(f"matmul template: vec={vec} does not divide tile width {nr}")

    k = tl.reduce_axis((0, K), name="k")
    if cfg["pack"].val:
        PB = tl.compute((N // nr, K, nr), lambda jo, k, ji: B[k, jo * nr + ji], name="PB")
        C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * PB[j // nr, k, j % nr], axis=k),
                       name="C")
    else:
        PB = None
        C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=nr)
    io, ii = s[C].split(i, factor=mr)
    outer = (jo, io) if cfg["order"].val == "panel_outer" else (io, jo)
    s[C].reorder(*outer, ii, ji)
    s[C].vectorize(ji)
    if cfg["par"].val:
        s[C].parallel(outer[0])
    s[CC].compute_at(s[C], outer[1])
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    cjo, cji = s[CC].split(cj, factor=vec)
    if cfg["k_order"].val == "k_outer":
        s[CC].reorder(ck, ci, cjo, cji)
    else:
        s[CC].reorder(ci, ck, cjo, cji)
    if cfg["unroll_i"].val:
        s[CC].unroll(ci)
    if cfg["unroll_j"].val:
        s[CC].unroll(cjo)
    s[CC].vectorize(cji)
    if PB is not None:
        pjo, _, pji = s[PB].op.axis
        s[PB].vectorize(pji)
        if cfg["par"].val:
            s[PB].parallel(pjo)
    return s, [A, B, C]


def _dense_ref(x, w):
    return x @ w.T


@template("dense", reference=_dense_ref, flop=lambda M, N, K, dtype: 2.0 * M * N * K)
def dense(M: int, N: int, K: int, dtype: str = "float32"):
    """Y[M, N] = X[M, K] @ W[N, K]^T (a fully connected layer): W is packed into the same
    k-major panels as matmul's B, so the register-tile space is the same."""
    cfg = get_config()
    X = tl.placeholder((M, K), dtype=dtype, name="X")
    W = tl.placeholder((N, K), dtype=dtype, name="W")
    cfg.define_split("tile_j", N, num_outputs=2, policy="factors", max_factor=128,
                     filter=lambda e: e.size[1] >= min(8, N),
                     default=[-1, 64 if N % 64 == 0 else N if N <= 128 else 1])
    cfg.define_split("tile_i", M, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in range(1, min(M, 8) + 1)],
                     default=[-1, min(6, M)])
    cfg.define_knob("unroll_i", [1, 0], default=1)
    cfg.define_knob("par", [1, 0], default=1)
    nr = cfg["tile_j"].size[1]
    mr = cfg["tile_i"].size[1]
    vec = 16 if nr % 16 == 0 else 8 if nr % 8 == 0 else 1
    k = tl.reduce_axis((0, K), name="k")
    PW = tl.compute((N // nr, K, nr), lambda jo, k, ji: W[jo * nr + ji, k], name="PW")
    Y = tl.compute((M, N), lambda i, j: tl.sum(X[i, k] * PW[j // nr, k, j % nr], axis=k),
                   name="Y")
    s = tl.create_schedule(Y)
    YC = s.cache_write(Y, "local")
    i, j = s[Y].op.axis
    jo, ji = s[Y].split(j, factor=nr)
    io, ii = s[Y].split(i, factor=mr)
    s[Y].reorder(jo, io, ii, ji)
    s[Y].vectorize(ji)
    if cfg["par"].val:
        s[Y].parallel(jo)
    s[YC].compute_at(s[Y], io)
    ci, cj = s[YC].op.axis
    (ck,) = s[YC].op.reduce_axis
    cjo, cji = s[YC].split(cj, factor=vec)
    s[YC].reorder(ck, ci, cjo, cji)
    if cfg["unroll_i"].val:
        s[YC].unroll(ci)
    s[YC].unroll(cjo)
    s[YC].vectorize(cji)
    if cfg["par"].val:
        s[PW].parallel(s[PW].op.axis[0])
    return s, [X, W, Y]


__all__ = ["batch_matmul", "conv2d_nchwc", "dense", "matmul"]


def _batch_matmul_ref(a, b):
    return a @ b


@template("batch_matmul", reference=_batch_matmul_ref,
          flop=lambda B, M, N, K, dtype: 2.0 * B * M * N * K)
def batch_matmul(B: int, M: int, N: int, K: int, dtype: str = "float32"):
    """C[b] = A[b] @ B[b] for b < B: per batch the register-tile schedule of matmul (B packed
    into k-major panels, mr x nr tile accumulated in registers); the parallel loop is the fused
    (batch, panel) loop, so small matrices still feed both cores."""
    cfg = get_config()
    A = tl.placeholder((B, M, K), dtype=dtype, name="A")
    Bt = tl.placeholder((B, K, N), dtype=dtype, name="B")
    cfg.define_split("tile_j", N, num_outputs=2, policy="factors", max_factor=128,
                     filter=lambda e: e.size[1] >= min(8, N),
                     default=[-1, max(d for d in range(1, min(N, 64) + 1) if N % d == 0)])
    cfg.define_split("tile_i", M, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in range(1, min(M, 8) + 1)],
                     default=[-1, min(6, M)])
    cfg.define_knob("unroll_i", [1, 0], default=1)
    cfg.define_knob("par", [1, 0], default=1)
    nr = cfg["tile_j"].size[1]
    mr = cfg["tile_i"].size[1]
    vec = 16 if nr % 16 == 0 else 8 if nr % 8 == 0 else 4 if nr % 4 == 0 else 1
    k = tl.reduce_axis((0, K), name="k")
    PB = tl.compute((B, N // nr, K, nr), lambda b, jo, k, ji: Bt[b, k, jo * nr + ji],
                    name="PB")
    C = tl.compute((B, M, N),
                   lambda b, i, j: tl.sum(A[b, i, k] * PB[b, j // nr, k, j % nr], axis=k),
                   name="C")
    s = tl.create_schedule(C)
    CC = s.cache_write(C, "local")
    b, i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=nr)
    io, ii = s[C].split(i, factor=mr)
    s[C].reorder(b, jo, io, ii, ji)
    s[C].vectorize(ji)
    if cfg["par"].val:
        s[C].parallel(s[C].fuse(b, jo))
    s[CC].compute_at(s[C], io)
    _, ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    cjo, cji = s[CC].split(cj, factor=vec)
    s[CC].reorder(ck, ci, cjo, cji)
    if cfg["unroll_i"].val:
        s[CC].unroll(ci)
    s[CC].unroll(cjo)
    s[CC].vectorize(cji)
    pb, _, _, pji = s[PB].op.axis
    s[PB].vectorize(pji)
    if cfg["par"].val:
        s[PB].parallel(pb)
    return s, [A, Bt, C]


@template("conv2d_nchwc")
def conv2d_nchwc(N: int, C: int, H: int, W: int, OC: int, KH: int, KW: int, stride: int = 1,
                 padding: int = 0, block: int = 16, dtype: str = "float32"):
    """Blocked convolution (tensorlang.ops.conv2d_nchwc): x [N, C/b, H, W, b], w [OC/b, C/b, KH,
    KW, b, b] -> [N, OC/b, OH, OW, b]. Knobs of the operator library's schedule
    (ops.schedule.schedule_conv2d_nchwc): reg_n, the output columns of the register tile (a
    divisor of OW), unrolling the kernel-width loop, and the parallel outer loop. The fallback
    is the library's default (reg_n 14 or the largest divisor below it)."""
    from ..ops import conv2d_nchwc as conv
    from ..ops.schedule import schedule_conv2d_nchwc

    cfg = get_config()
    if C % block or OC % block:
        raise ValueError(f"conv2d_nchwc template: block {block} must divide C={C} and OC={OC}")
    x = tl.placeholder((N, C // block, H, W, block), dtype=dtype, name="x")
    w = tl.placeholder((OC // block, C // block, KH, KW, block, block), dtype=dtype, name="w")
    y = conv(x, w, stride=stride, padding=padding)
    ow = int(y.shape[3].value) if hasattr(y.shape[3], "value") else int(y.shape[3])
    divs = [d for d in range(1, min(ow, 32) + 1) if ow % d == 0]
    cfg.define_knob("reg_n", divs, default=max(d for d in divs if d <= 14))
    cfg.define_knob("unroll_kw", [1, 0], default=1)
    cfg.define_knob("parallel", [1, 0], default=1)
    s = tl.create_schedule(y)
    schedule_conv2d_nchwc(s, y, reg_n=cfg["reg_n"].val, unroll_kw=bool(cfg["unroll_kw"].val),
                          parallel=bool(cfg["parallel"].val))
    return s, [x, w, y]
