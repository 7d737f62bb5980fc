"""NCHW <-> NCHW[x]c layout transforms over a symbolic height and width (a model exported with
dynamic h/w) against numpy, at several planes each from one kernel: rows that are whole tiles
of 16 columns, a ragged last tile, rows under one tile, one column. The default schedule
transposes tiles in registers over the symbolic plane too, the ragged tile's rows read masked
(transpose_gathers), so the gathers lane by lane are gone from the main tiles and the tail."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl

ops = tl.ops
PLANES = [(56, 56), (28, 28), (30, 20), (5, 61), (3, 7), (1, 1), (2, 16)]


def _blocked(a: np.ndarray, block: int) -> np.ndarray:
    n, c, h, w = a.shape
    nb = -(-c // block)
    pad = np.zeros((n, nb * block, h, w), a.dtype)
    pad[:, :c] = a
    return np.ascontiguousarray(pad.reshape(n, nb, block, h, w).transpose(0, 1, 3, 4, 2))


def _kernel(src, dst, shape):
    x = tl.placeholder(shape, name="x")
    y = ops.layout_transform(x, src, dst)
    s = ops.default_schedule([y])
    return tl.build(s, [x, y]), str(tl.lower(s, [x, y]))


@pytest.mark.parametrize("c,block", [(64, 16), (17, 16), (8, 8)])
def test_to_blocked_over_symbolic_plane(c, block):
    h, w = tl.var("h"), tl.var("w")
    f, text = _kernel("NCHW", f"NCHW{block}c", (1, c, h, w))
    if c % block == 0:
        assert "shuffle(" in text and "select(broadcast(z.outer" in text  # masked tail rows
    rng = np.random.default_rng(0)
    for hh, ww in PLANES:
        a = rng.standard_normal((1, c, hh, ww)).astype("float32")
        out = np.full((1, -(-c // block), hh, ww, block), np.nan, "float32")
        f(a, out)
        np.testing.assert_array_equal(out, _blocked(a, block), err_msg=f"{hh}x{ww}")


@pytest.mark.parametrize("c,block", [(64, 16), (32, 8)])
def test_from_blocked_over_symbolic_plane(c, block):
    h, w = tl.var("h"), tl.var("w")
    f, text = _kernel(f"NCHW{block}c", "NCHW", (1, c // block, h, w, block))
    assert "shuffle(" in text
    rng = np.random.default_rng(1)
    for hh, ww in PLANES:
        a = rng.standard_normal((1, c, hh, ww)).astype("float32")
        out = np.full(a.shape, np.nan, "float32")
        f(_blocked(a, block), out)
        np.testing.assert_array_equal(out, a, err_msg=f"{hh}x{ww}")


def test_symbolic_stride_gathers_become_rows():
    """The channels of an NCHW tensor over a symbolic plane are H * W apart: the vectorize
    pass makes such an access a ramp of that stride, and transpose_gathers reads the tile's 16
    channel rows contiguously (no vector index multiplied by broadcast(h))."""
    h, w = tl.var("h"), tl.var("w")
    _, text = _kernel("NCHW", "NCHW16c", (2, 32, h, w))
    assert "* broadcast(h, 16)" not in text
    assert "+ h * w * 15, 1, 16)]" in text
