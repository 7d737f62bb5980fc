"""1x1 convolutions on conv2d_nchw's pixels path (issue 18: ShuffleNet's grouped 1x1 convs,
SqueezeNet's 1000-channel classifier conv): stride 1, no padding, and a grouped conv or a
groups=1 conv whose output channels 16 does not divide, computed as a matmul per group over
the flattened pixels of a plane. Against numpy for output channels per group that are prime
(17), odd (25), small (1, 2) or blockable (16, 24, with OIHW and packed weights), pixel counts
that are not a whole number of vectors (7x7, 13x13, 5x3), batch 2, a fused bias + relu, every
register tile the knobs give (ragged row tiles included); the tile choice; and the convs that
keep their other paths."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ops_helpers import check, ph, rand

import tensorlang as tl
from tensorlang.ops.schedule import PIXEL_ACCUMULATORS, pixel_tile

ops = tl.ops
TOL = {"rtol": 2e-4, "atol": 2e-4}


def pointwise_ref(x, w, groups):
    """numpy: per group [OC/g, C/g] x [C/g, H*W] in float64."""
    n, c, h, wd = x.shape
    oc = w.shape[0]
    xs = x.astype(np.float64).reshape(n, groups, c // groups, h * wd)
    ws = w.astype(np.float64).reshape(groups, oc // groups, c // groups)
    return np.einsum("goc,ngcp->ngop", ws, xs).reshape(n, oc, h, wd).astype(np.float32)


def _stage_tags(out):
    return {t.op.tag for t in out.op.input_tensors}


# (batch, channels, out channels, groups, height, width)
CASES = [
    (1, 51, 68, 1, 7, 7),              # groups=1, 68 output channels: no 16-block
    (1, 68, 68, 4, 7, 7),              # ShuffleNet g4: 17 per group (prime), 49 pixels
    (2, 50, 50, 2, 5, 3),              # g2: 25 per group, 15 pixels (less than a vector)
    (1, 60, 60, 3, 13, 13),            # g3: 20 per group, 169 pixels
    (1, 24, 96, 8, 6, 8),              # g8: 3 in, 12 out per group
    (1, 12, 6, 6, 4, 9),               # 2 in, 1 out per group
    (1, 16, 48, 2, 6, 6),              # 24 per group: blockable, still the pixels path
]


@pytest.mark.parametrize("n,c,oc,g,h,w", CASES)
def test_pixels_path_matches_numpy(n, c, oc, g, h, w):
    x, wt = rand((n, c, h, w)), rand((oc, c // g, 1, 1))
    X, W = ph(x, "X"), ph(wt, "W")
    out = ops.conv2d_nchw(X, W, groups=g)
    assert "conv2d_nchw_pixels" in _stage_tags(out)
    check(out, [X, W], [x, wt], pointwise_ref(x, wt, g), **TOL)


@pytest.mark.parametrize("rows,vectors", [(4, 4), (6, 1), (17, 2), (1, 8), (3, 3)])
def test_every_register_tile_of_the_knobs(rows, vectors):
    # 17 rows per group: rows 4, 6 and 3 leave a ragged last row tile (guarded)
    x, wt = rand((1, 68, 9, 9)), rand((68, 17, 1, 1))
    X, W = ph(x, "X"), ph(wt, "W")
    out = ops.conv2d_nchw(X, W, groups=4)
    check(out, [X, W], [x, wt], pointwise_ref(x, wt, 4), **TOL, both=False,
          knobs={"pixel_rows": rows, "pixel_vectors": vectors})


def test_packed_weights_and_a_fused_bias_relu():
    c, oc, g, ob = 32, 64, 2, 16
    x, wt, b = rand((1, c, 7, 9)), rand((oc, c // g, 1, 1)), rand((oc,))
    wp = np.ascontiguousarray(wt.reshape(oc // ob, ob, c // g, 1, 1).transpose(0, 2, 3, 4, 1))
    X, WP, B = ph(x, "X"), ph(wp, "W"), ph(b, "B")
    conv = ops.conv2d_nchw(X, WP, groups=g)
    assert "conv2d_nchw_pixels" in _stage_tags(conv)
    y = ops.relu(ops.add(conv, ops.reshape(B, (oc, 1, 1))))
    ref = np.maximum(pointwise_ref(x, wt, g) + b.reshape(oc, 1, 1), 0)
    check(y, [X, WP, B], [x, wp, b], ref, **TOL)


def test_float64():
    x, wt = rand((1, 20, 5, 5), "float64"), rand((15, 4, 1, 1), "float64")
    X, W = ph(x, "X"), ph(wt, "W")
    out = ops.conv2d_nchw(X, W, groups=5)
    check(out, [X, W], [x, wt], pointwise_ref(x, wt, 5).astype(np.float64), rtol=1e-6,
          atol=1e-6, both=False)


@pytest.mark.parametrize("kw", [
    {"stride": 2},                       # strided 1x1: the blocked path (16 per group)
    {"padding": 1},                      # padded 1x1
    {"out_layout": "NCHW16c"},           # a blocked output stays on the blocked path
])
def test_other_1x1_convs_keep_their_paths(kw):
    x, wt = rand((1, 16, 6, 6)), rand((32, 8, 1, 1))
    X, W = ph(x, "X"), ph(wt, "W")
    out = ops.conv2d_nchw(X, W, groups=2, **kw)
    assert "conv2d_nchw_pixels" not in _stage_tags(out)


def test_groups_1_blockable_keeps_the_blocked_path():
    X, W = tl.placeholder((1, 32, 7, 7), name="X"), tl.placeholder((64, 32, 1, 1), name="W")
    assert "conv2d_nchw_pixels" not in _stage_tags(ops.conv2d_nchw(X, W))


def test_pixel_tile_takes_divisors_within_the_register_budget():
    assert [pixel_tile(o) for o in (17, 20, 25, 12, 1000, 1)] == [
        (17, 1), (5, 4), (5, 4), (6, 4), (5, 4), (1, 4)]
    for ocpg in range(1, 130):
        r, v = pixel_tile(ocpg)
        assert ocpg % r == 0 and r * v <= PIXEL_ACCUMULATORS and v >= 1, ocpg
    assert pixel_tile(17, rows=4) == (4, 4)  # a knob: ragged rows as the matmul takes them


def test_pixels_knobs_are_checked():
    X, W = tl.placeholder((1, 8, 5, 5), name="X"), tl.placeholder((6, 4, 1, 1), name="W")
    out = ops.conv2d_nchw(X, W, groups=2)
    with pytest.raises(TypeError, match="pixel_rows"):
        ops.default_schedule(out, knobs={"pixel_rows": 2.5})


def test_padded_plane_with_a_fused_tail():
    """169 pixels (SqueezeNet's 13x13): the stage is padded to 11 whole vectors (the pad a
    masked load of the plane's last vector), then read back through the bias + relu."""
    x, wt, b = rand((1, 40, 13, 13)), rand((24, 40, 1, 1)), rand((24,))
    X, W, B = ph(x, "X"), ph(wt, "W"), ph(b, "B")
    conv = ops.conv2d_nchw(X, W)
    pix = next(t for t in conv.op.input_tensors if t.op.tag == "conv2d_nchw_pixels")
    assert [int(d.value) for d in pix.shape] == [1, 24, 176]
    y = ops.relu(ops.add(conv, ops.reshape(B, (24, 1, 1))))
    ref = np.maximum(pointwise_ref(x, wt, 1) + b.reshape(24, 1, 1), 0)
    check(y, [X, W, B], [x, wt, b], ref, **TOL)


def test_which_planes_are_padded():
    from tensorlang.ops.nn import _padded_pixels

    assert [_padded_pixels(p) for p in (169, 15, 784, 196, 49, 81)] == [176, 16, 784, 196, 49, 81]
