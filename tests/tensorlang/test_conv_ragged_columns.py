"""Blocked NCHW convs over output widths with no divisor from 4 to 14 (issue 18: wav2vec2's
stride-2 1-D convs over 799 = 17 x 47 and the prime 199 columns had a 1-column register tile):
the register tile is ragged instead, its last tile peeled and bounded to the row. Against numpy
for prime and odd widths, strides 1 and 2, padding 0 and 1, grouped and not."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ops_helpers import check, ph, rand
from test_grouped_conv import grouped_ref

import tensorlang as tl
from tensorlang.ops.references import oihw_to_blocked, to_nchwc
from tensorlang.ops.schedule import _register_columns

ops = tl.ops
TOL = {"rtol": 2e-4, "atol": 2e-4}


def conv_ref(x, w, stride, pad, groups):
    """numpy (test_grouped_conv's reference, no dilation); pad is (rows, columns) on both
    sides."""
    return grouped_ref(x, w, stride, (pad[0], pad[1], pad[0], pad[1]), (1, 1), groups)


def _conv(x, w, stride, pad, groups, **kw):
    X, W = ph(x, "X"), ph(w, "W")
    y = ops.conv2d_nchw(X, W, stride=stride, padding=(pad[0], pad[1], pad[0], pad[1]),
                        groups=groups, **kw)
    return X, W, y


def _tile_columns(text: str) -> int:
    """The column extent of the conv block stage's register tile in the lowered text."""
    m = re.search(r"allocate conv2d_nchw_block\w*: float32\[\d+, \d+, \d+, (\d+), \d+\]", text)
    assert m, "the conv is blocked"
    return int(m.group(1))


# (in channels, out channels, groups, input rows, kernel, stride, padding (rows, cols),
# input width, output width)
CASES = [
    (8, 32, 1, 1, (1, 3), (1, 2), (0, 0), 399, 199),  # wav2vec2's 199 columns, as 1-D
    (8, 32, 1, 1, (1, 3), (1, 1), (0, 1), 53, 53),    # stride 1, pad 1
    (8, 32, 1, 1, (1, 3), (1, 2), (0, 1), 105, 53),   # stride 2, pad 1
    (8, 32, 1, 3, (3, 3), (2, 2), (1, 1), 93, 47),    # 2-D 3x3 with border rows
    (16, 32, 2, 1, (1, 3), (1, 1), (0, 0), 99, 97),   # 2 groups of 16
    (16, 64, 4, 1, (1, 2), (1, 2), (0, 0), 94, 47),   # 4 groups of 16 (8-channel blocks)
    (8, 32, 1, 3, (3, 3), (1, 1), (1, 1), 55, 55),    # 5 x 11: the divisor 11
]


@pytest.mark.parametrize("c,oc,g,h,k,stride,pad,width,ow", CASES)
def test_ragged_column_tiles_match_numpy(c, oc, g, h, k, stride, pad, width, ow):
    x, w = rand((1, c, h, width)), rand((oc, c // g) + k)
    X, W, y = _conv(x, w, stride, pad, g)
    assert int(y.shape[3].value) == ow
    check(y, [X, W], [x, w], conv_ref(x, w, stride, pad, g), **TOL, both=False)


def test_ragged_column_tiles_write_nchw16c():
    x, w = rand((1, 8, 1, 201)), rand((32, 8, 1, 3))
    X, W, y = _conv(x, w, (1, 2), (0, 1), 1, out_layout="NCHW16c")
    ref = conv_ref(x, w, (1, 2), (0, 1), 1)  # 1 x 32 x 1 x 101
    ref = np.ascontiguousarray(ref.reshape(1, 2, 16, 1, 101).transpose(0, 1, 3, 4, 2))
    check(y, [X, W], [x, w], ref, **TOL, both=False)


@pytest.mark.parametrize("ow,limit,cols", [(799, 14, 10), (199, 14, 10), (47, 14, 12),
                                           (56, 14, 14), (55, 14, 11), (13, 14, 13),
                                           (199, 2, 1), (199, 1, 1), (97, 8, 7)])
def test_register_columns(ow, limit, cols):
    assert _register_columns(ow, limit) == cols


@pytest.mark.parametrize("width,pad", [(399, 0), (1599, 0), (397, 1)])
def test_prime_widths_get_a_wide_guard_free_tile(width, pad):
    """799 and 199 columns (wav2vec2) get a 10-column tile, not 1; with no padding the interior
    tiles and the peeled last one carry no guard."""
    X = tl.placeholder((1, 16, 1, width), name="X")
    W = tl.placeholder((32, 16, 1, 3), name="W")
    y = ops.conv2d_nchw(X, W, stride=(1, 2), padding=(0, pad, 0, pad))
    assert int(y.shape[3].value) in (199, 799)
    text = str(tl.lower(ops.default_schedule(y), [X, W, y]))
    assert _tile_columns(text) == 10
    if pad == 0:
        assert " if " not in text and "select(" not in text


@pytest.mark.parametrize("stride,pad,width", [(2, 0, 399), (1, 1, 53), (2, 1, 95)])
def test_nchw16c_conv_over_prime_widths(stride, pad, width):
    """The blocked-layout conv (what the graph runs between blocked convs, wav2vec2's feature
    extractor) gets the same ragged tile: 199 and 53 columns 10 and 9; 48 keeps its 12."""
    x, w = rand((1, 32, 1, width)), rand((32, 32, 1, 3))
    xb, wb = to_nchwc(x, 16), oihw_to_blocked(w, 16, 16)
    X, W = ph(xb, "X"), ph(wb, "W")
    out = ops.conv2d_nchwc(X, W, stride=(1, stride), padding=(0, pad, 0, pad))
    ref = to_nchwc(conv_ref(x, w, (1, stride), (0, pad), 1), 16)
    check(out, [X, W], [xb, wb], ref, **TOL, both=False)
    text = str(tl.lower(ops.default_schedule(out), [X, W, out]))
    m = re.search(r"allocate conv2d_nchwc\.local: float32\[\d+, \d+, \d+, (\d+), 16\]", text)
    ow = int(out.shape[3].value)
    assert m and int(m.group(1)) == _register_columns(ow, 14) and int(m.group(1)) >= 4
