"""Integer kernels for quantized inference (issue 22): uint8 x int8 products accumulated exactly
in int32, in layouts that AVX-512 VNNI's vpdpbusd reads directly, with default schedules that
tensorize their innermost 16 x 4 block (te/tensorize.py; a CPU without VNNI runs the exact
widening fallback, chosen by codegen from the target).

What each kernel returns is the exact integer sum_k (a - a_zero) * (w - w_zero) in int32
(requantization, bias and activations are the graph's, graph/ and ops/quant.py):

    wp, colsum = pack_dense_weight(w)                      # numpy, at build time
    y = dense_int8(a, tl_const_or_placeholder(wp), n=w.shape[0], a_zero=za, w_zero=zw,
                   w_colsum=colsum_tensor)                 # [M, n] int32
    s = tl.create_schedule(y); schedule_dense_int8(s, y)

    xb = conv-input in NCHW16c (uint8 or int8), wp = pack_conv_weight(w) (OIHW[4i16o4i])
    y = conv2d_int8_nchwc(xb, wp, ...)                     # [N, OC/16, OH, OW, 16] int32

int8 activations are shifted into uint8 (a + 128, the zero point with them), since vpdpbusd
multiplies unsigned by signed bytes; the shift is compensated exactly with the weights' column
sums."""

from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import as_int
from ..te.tensor import Tensor
from ..te.tensorize import dot_u8s8_16x4

OB, IB = 16, 4  # outputs per vpdpbusd (int32 lanes), inputs summed per lane


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _static(op: str, arg: str, t: Tensor) -> tuple[int, ...]:
    shape = tuple(as_int(d) for d in t.shape)
    if None in shape:
        raise ValueError(f"{op}: {arg} needs a constant shape, got {t.shape}")
    return shape


def _check_dtype(op: str, arg: str, t: Tensor, allowed: tuple) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {arg} must be a tensor, got {type(t).__name__}")
    if t.dtype not in allowed:
        raise TypeError(f"{op}: {arg} must be {' or '.join(allowed)}, got {t.dtype}")


def _check_zero(op: str, arg: str, v, dtype: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}: {arg} must be an int (a per-tensor zero point), got {v!r}")
    lo, hi = dt.limits(dtype)
    if not lo <= int(v) <= hi:
        raise ValueError(f"{op}: {arg} {v} is outside {dtype}'s range [{lo}, {hi}]")
    return int(v)


# ----------------------------------------------------------------------------- weights


def pack_dense_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w [N, K] int8 -> (packed [ceil(N/16), ceil(K/4), 16, 4] int8, zero padded, the layout
    of dot_u8s8_16x4's B; column sums [N] int32 = sum_k w[j, k], for the zero-point
    compensation)."""
    w = np.asarray(w)
    if w.ndim != 2 or w.dtype != np.int8:
        raise ValueError(f"pack_dense_weight: w must be a 2-D int8 array, got {w.ndim}-D "
                         f"{w.dtype}")
    n, k = w.shape
    padded = np.zeros((_ceil(n, OB) * OB, _ceil(k, IB) * IB), np.int8)
    padded[:n, :k] = w
    packed = padded.reshape(-1, OB, padded.shape[1] // IB, IB).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(packed), w.astype(np.int32).sum(axis=1).astype(np.int32)


def _as_uint8(op: str, a: Tensor, kp: int, a_zero: int) -> tuple[Tensor, int]:
    """a as uint8 with its reduction axis padded to kp (zeros: they add nothing, the zero
    point's compensation counts the real K only) and the zero point that goes with it."""
    *lead, k = _static(op, "a", a)
    if a.dtype == "uint8" and k == kp:
        return a, a_zero
    shift = 128 if a.dtype == "int8" else 0

    def f(*idx):
        v = (a[idx].astype("int32") + shift).astype("uint8")
        return te.if_then_else(idx[-1] < k, v, te.const(0, "uint8")) if kp != k else v

    # reading a[.., k >= K] is guarded: out of the select's taken branch, proven in bounds
    return te.compute((*lead, kp), f, name=f"{a.name}_u8"), a_zero + shift


# ----------------------------------------------------------------------------- dense


def dense_int8(a: Tensor, w_packed: Tensor, n: int, a_zero: int = 0, w_zero: int = 0,
               w_colsum: Tensor | None = None, name: str = "dense_int8") -> Tensor:
    """y[i, j] = sum_k (a[i, k] - a_zero) * (w[j, k] - w_zero), int32, exact.

    a: [M, K] uint8 or int8; w_packed: pack_dense_weight(w)[0] as a tensor [ceil(n/16),
    ceil(K/4), 16, 4] int8; n: w's rows; w_colsum: [n] int32 (pack_dense_weight(w)[1]),
    needed when the effective a zero point is not 0 (always for int8 a, shifted by 128).
    Stages: a's uint8 copy (int8 a or K % 4 != 0 only), `name`.acc (the tensorized
    products, [M, ceil(n/16), 16]), a's row sums (w_zero != 0 only), `name` (the
    compensation). Schedule with schedule_dense_int8."""
    op = "dense_int8"
    _check_dtype(op, "a", a, ("uint8", "int8"))
    _check_dtype(op, "w_packed", w_packed, ("int8",))
    m, k = _static(op, "a", a)
    nb, kb, ob, ib = _static(op, "w_packed", w_packed)
    if (ob, ib) != (OB, IB) or kb != _ceil(k, IB) or not (isinstance(n, int) and
                                                          0 < n <= nb * OB and nb == _ceil(n, OB)):
        raise ValueError(f"{op}: w_packed {(nb, kb, ob, ib)} is not pack_dense_weight's layout "
                         f"for n={n}, K={k} (expected {(_ceil(n, OB) if isinstance(n, int) else '?', _ceil(k, IB), OB, IB)})")
    a_zero = _check_zero(op, "a_zero", a_zero, a.dtype)
    w_zero = _check_zero(op, "w_zero", w_zero, "int8")
    au, za = _as_uint8(op, a, kb * IB, a_zero)
    if za != 0:
        if w_colsum is None:
            raise ValueError(f"{op}: a zero point of a ({za} once shifted into uint8) needs "
                             "w_colsum (pack_dense_weight's column sums)")
        _check_dtype(op, "w_colsum", w_colsum, ("int32",))
        if _static(op, "w_colsum", w_colsum) != (n,):
            raise ValueError(f"{op}: w_colsum must have shape ({n},), got {w_colsum.shape}")
    ko = te.reduce_axis((0, kb), name="ko")
    ki = te.reduce_axis((0, IB), name="ki")
    acc = te.compute((m, nb, OB), lambda i, jo, ji: te.sum(
        au[i, ko * IB + ki].astype("int32") * w_packed[jo, ko, ji, ki].astype("int32"),
        axis=[ko, ki]), name=f"{name}.acc")
    rows = None
    if w_zero:
        rk = te.reduce_axis((0, kb * IB), name="rk")
        rows = te.compute((m,), lambda i: te.sum(au[i, rk].astype("int32"), axis=rk),
                          name=f"{name}.rowsum")

    def out(i, j):
        v = acc[i, j // OB, j % OB]
        if za:
            v = v - za * w_colsum[j]
        if w_zero:
            v = v - w_zero * rows[i] + k * za * w_zero
        return v

    return te.compute((m, n), out, name=name)


def _stages_before(y: Tensor) -> dict[str, Tensor]:
    """The stages of a quant kernel by role (the suffix of their names), found from y."""
    found, todo = {}, [y]
    while todo:
        t = todo.pop()
        for u in getattr(t.op, "input_tensors", ()):
            if hasattr(u.op, "body"):
                found[u.op.name.rsplit(".", 1)[-1] if "." in u.op.name else "input"] = u
                todo.append(u)
    return found


def schedule_dense_int8(s, y: Tensor, rows: int = 4, blocks: int = 4, k_block: int = 64,
                        parallel: bool = True) -> None:
    """The default schedule: the products in tiles of `rows` x `blocks` 16-wide column blocks
    (rows * blocks zmm accumulators, kept in registers over k_block groups of 4 inputs), the
    innermost 16 x 4 block one vpdpbusd. Loop order: column tiles, reduction chunks, row
    tiles: a chunk of the packed weights (blocks * k_block * 64 bytes, 16 KB by default)
    stays in L1 while every row tile reads it. The compensation and copies vectorized."""
    parts = _stages_before(y)
    acc = parts["acc"]
    st = s[acc]
    i, jo, ji = st.op.axis
    ko, ki = st.op.reduce_axis
    m, nb, kb = as_int(acc.shape[0]), as_int(acc.shape[1]), as_int(ko.dom.extent)
    rows, blocks, k_block = _divisor(m, rows), _divisor(nb, blocks), _divisor(kb, k_block)
    io, ii = st.split(i, rows)
    joo, joi = st.split(jo, blocks)
    koo, koi = st.split(ko, k_block)
    st.reorder(joo, koo, io, koi, ii, joi, ji, ki)
    st.unroll(ii)
    st.unroll(joi)
    st.tensorize(ji, dot_u8s8_16x4())
    if parallel:
        st.parallel(joo)
    for role, t in parts.items():
        if role in ("acc",):
            continue
        _vectorize_last(s, t)
    _vectorize_last(s, y, parallel=parallel)


def _divisor(n: int, want: int) -> int:
    """The largest divisor of n that is at most want (a tile that leaves no tail)."""
    return max(d for d in range(1, min(n, want) + 1) if n % d == 0)


def _vectorize_last(s, t: Tensor, parallel: bool = False) -> None:
    st = s[t]
    if t.op.reduce_axis:
        return
    axes = list(st.op.axis)
    last = as_int(t.shape[-1])
    if last >= 16:
        _, inner = st.split(axes[-1], 16)
        st.vectorize(inner)
    if parallel and len(axes) > 1:
        st.parallel(axes[0])


__all__ = ["dense_int8", "pack_dense_weight", "schedule_dense_int8"]
