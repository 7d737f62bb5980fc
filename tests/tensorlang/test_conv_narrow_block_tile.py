"""The register tile of NCHW8c convolutions (issue 18): oc blocks and output columns chosen
together (schedule._narrow_block_tile), and the convs whose tile changed computed right."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ops_helpers import check, ph, rand

import tensorlang as tl
from tensorlang.ops import schedule
from tensorlang.ops.references import conv2d_nchw, oihw_to_blocked, to_nchwc

ops = tl.ops
TOL = {"rtol": 2e-4, "atol": 2e-4}


@pytest.mark.parametrize("blocks,ow,max_blocks,tile", [
    (125, 13, 5, (1, 13)),  # SqueezeNet's 512 -> 1000 at 13x13 (was 5 blocks x 1 column)
    (3, 56, 3, (3, 8)),  # 144 -> 24 at 56x56: the measured best
    (5, 28, 5, (5, 4)),  # 240 -> 40 at 28x28: the measured best
    (5, 13, 1, (1, 13)),  # the oc_blocks knob bounds the blocks
    (7, 1, 7, (7, 1)),  # one column: as many blocks as fit
])
def test_narrow_block_tile(blocks, ow, max_blocks, tile):
    assert schedule._narrow_block_tile(blocks, ow, max_blocks, 14) == tile
    nb, rn = tile
    assert blocks % nb == 0 and ow % rn == 0 and nb * rn <= 28


@pytest.mark.parametrize("k,pad", [(1, 0), (3, 1)])
def test_nchw8c_conv_with_prime_width_matches_numpy(k, pad):
    # 40 output channels = 5 blocks of 8 at 13 wide: the 1 x 13 tile
    x, w = rand((1, 32, 6, 13)), rand((40, 32, k, k))
    xb, wb = to_nchwc(x, 16), oihw_to_blocked(w, 16, 8)
    X, W = ph(xb, "X"), ph(wb, "W")
    out = ops.conv2d_nchwc(X, W, stride=1, padding=pad)
    check(out, [X, W], [xb, wb], to_nchwc(conv2d_nchw(x, w, 1, pad), 8), **TOL)
    text = str(tl.lower(ops.default_schedule(out), [X, W, out]))
    # the accumulator tile: one block of 8 channels x the 13 columns (was 5 blocks x 1)
    assert "conv2d_nchwc.local: float32[1, 1, 1, 13, 8]" in text

