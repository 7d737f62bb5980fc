"""Tunable templates of the int8 kernels (issue 22; tensorlang/ops/quant_kernels.py): the
register tile of the tensorized products (rows x 16-wide column blocks for dense, output
columns x 16-channel blocks for conv2d, columns for depthwise) and the parallel loop. The
fallback config is each schedule's default. Registered when autotune/templates.py loads.

Tile candidates keep the accumulators within 24 of the 32 zmm registers (the broadcast input
and the weight vectors need the rest) and are written "rows x blocks" strings, so a record
reads as the tile it ran. Depthwise has no channel reduction for vpdpbusd: its knob is the
number of output columns whose 16-channel int32 accumulators stay in registers."""

from __future__ import annotations

import numpy as np

import tensorlang as tl

from .task import computes_once, get_config, template

_DENSE_TILES = ("4x4", "2x8", "4x6", "6x4", "8x2", "3x8", "1x16", "2x4", "4x2")
_CONV_TILES = ("8x2", "7x2", "14x1", "4x4", "16x1", "6x3", "4x3", "12x2", "4x2")
_DEPTHWISE_COLS = (8, 7, 14, 4, 16, 12, 2)


def _tile(text: str) -> tuple[int, int]:
    a, b = text.split("x")
    return int(a), int(b)


def _unpack_dense(wp: np.ndarray, n: int, k: int) -> np.ndarray:
    return wp.transpose(0, 2, 1, 3).reshape(wp.shape[0] * 16, wp.shape[1] * 4)[:n, :k]


def _dense_ref(a, wp):
    w = _unpack_dense(wp, wp.shape[0] * 16, a.shape[1])
    return (a.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)


@template("dense_int8", reference=_dense_ref, flop=lambda M, N, K: 2.0 * M * N * K)
def dense_int8(M: int, N: int, K: int):
    """y [M, N] int32 = uint8 a [M, K] x int8 w [N, K] (packed), N a multiple of 16. Knobs:
    tile (rows x column blocks), parallel."""
    from tensorlang.ops import quant_kernels as qk

    cfg = get_config()

    def declare():
        a = tl.placeholder((M, K), "uint8", name="a")
        wp = tl.placeholder((-(-N // 16), -(-K // 4), 16, 4), "int8", name="w_packed")
        return [a, wp, qk.dense_int8(a, wp, N)]

    a, wp, y = computes_once(declare)
    cfg.define_knob("tile", list(_DENSE_TILES), default=_DENSE_TILES[0])
    cfg.define_knob("parallel", [1, 0], default=1)
    rows, blocks = _tile(cfg["tile"].val)
    s = tl.create_schedule(y)
    qk.schedule_dense_int8(s, y, rows=rows, blocks=blocks, parallel=bool(cfg["parallel"].val))
    return s, [a, wp, y]


def conv_int8_reference(x, wp, stride=1, padding=0):
    """x [N, C/16, H, W, 16] uint8, wp [OC/16, C/16, KH, KW, 4, 16, 4] -> int32 NCHW16c. Not
    the template's reference (which sees only the arrays, not stride and padding): the runner
    checks candidates against the fallback config's kernel instead."""
    ob, cb, kh, kw = wp.shape[:4]
    w = wp.transpose(0, 5, 1, 4, 6, 2, 3).reshape(ob * 16, cb * 16, kh, kw).astype(np.int64)
    n, _, h, wd, _ = x.shape
    xs = x.transpose(0, 1, 4, 2, 3).reshape(n, cb * 16, h, wd).astype(np.int64)
    xs = np.pad(xs, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, ob * 16, oh, ow), np.int64)
    for y in range(kh):
        for z in range(kw):
            patch = xs[:, :, y:y + stride * oh:stride, z:z + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, y, z])
    return out.reshape(n, ob, 16, oh, ow).transpose(0, 1, 3, 4, 2).astype(np.int32)


def _conv_flop(N, C, H, W, OC, KH, KW, stride=1, padding=0):
    oh = (H + 2 * padding - KH) // stride + 1
    ow = (W + 2 * padding - KW) // stride + 1
    return 2.0 * N * OC * C * KH * KW * oh * ow


@template("conv2d_int8_nchwc", flop=_conv_flop)
def conv2d_int8_nchwc(N: int, C: int, H: int, W: int, OC: int, KH: int, KW: int,
                      stride: int = 1, padding: int = 0):
    """y = conv2d_int8_nchwc(uint8 x NCHW16c, packed int8 w), zero points 0; C and OC
    multiples of 16. Knobs: tile (output columns x output-channel blocks), parallel."""
    from tensorlang.ops import quant_kernels as qk

    cfg = get_config()

    def declare():
        x = tl.placeholder((N, C // 16, H, W, 16), "uint8", name="x")
        wp = tl.placeholder((OC // 16, C // 16, KH, KW, 4, 16, 4), "int8", name="w_packed")
        return [x, wp, qk.conv2d_int8_nchwc(x, wp, stride, padding)]

    x, wp, y = computes_once(declare)
    cfg.define_knob("tile", list(_CONV_TILES), default=_CONV_TILES[0])
    cfg.define_knob("parallel", [1, 0], default=1)
    cols, blocks = _tile(cfg["tile"].val)
    s = tl.create_schedule(y)
    qk.schedule_conv2d_int8(s, y, cols=cols, blocks=blocks, parallel=bool(cfg["parallel"].val))
    return s, [x, wp, y]


def depthwise_int8_reference(x, wp, stride=1, padding=0):
    """x [N, C/16, H, W, 16] uint8, wp [C/16, KH, KW, 16] -> int32 NCHW16c (zero points 0)."""
    _, kh, kw, _ = wp.shape
    n, cb, h, wd, _ = x.shape
    xs = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (padding, padding), (padding, padding),
                                     (0, 0)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, cb, oh, ow, 16), np.int64)
    for y in range(kh):
        for z in range(kw):
            patch = xs[:, :, y:y + stride * oh:stride, z:z + stride * ow:stride, :]
            out += patch * wp[None, :, None, None, y, z, :].astype(np.int64)
    return out.astype(np.int32)


@template("depthwise_conv2d_int8_nchwc", flop=lambda N, C, H, W, KH, KW, stride=1, padding=0:
          2.0 * N * C * KH * KW * ((H + 2 * padding - KH) // stride + 1)
          * ((W + 2 * padding - KW) // stride + 1))
def depthwise_conv2d_int8_nchwc(N: int, C: int, H: int, W: int, KH: int, KW: int,
                                stride: int = 1, padding: int = 0):
    """y = depthwise_conv2d_int8_nchwc(uint8 x NCHW16c, packed int8 w), zero points 0; C a
    multiple of 16. Knobs: cols (output columns held in registers; a divisor of the output
    width is taken, as the default schedule does), parallel."""
    from tensorlang.ops import quant_kernels as qk

    cfg = get_config()

    def declare():
        x = tl.placeholder((N, C // 16, H, W, 16), "uint8", name="x")
        wp = tl.placeholder((C // 16, KH, KW, 16), "int8", name="w_packed")
        return [x, wp, qk.depthwise_conv2d_int8_nchwc(x, wp, stride, padding)]

    x, wp, y = computes_once(declare)
    cfg.define_knob("cols", list(_DEPTHWISE_COLS), default=_DEPTHWISE_COLS[0])
    cfg.define_knob("parallel", [1, 0], default=1)
    s = tl.create_schedule(y)
    qk.schedule_depthwise_int8(s, y, cols=cfg["cols"].val, parallel=bool(cfg["parallel"].val))
    return s, [x, wp, y]


__all__ = ["conv2d_int8_nchwc", "conv_int8_reference", "dense_int8",
           "depthwise_conv2d_int8_nchwc", "depthwise_int8_reference"]
