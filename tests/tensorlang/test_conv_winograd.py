"""Winograd F(4x4, 3x3) convolution (tensorlang/ops/winograd.py) against numpy's direct
convolution, with its default schedule: odd extents (tiles past the output), asymmetric
padding, narrow tile rows, a fused bias + relu tail; and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ops
from tensorlang.ops import winograd as WG

RNG = np.random.default_rng(418)


def _conv_numpy(x, w, pads):
    """Direct NCHW 3x3 stride-1 convolution in float64."""
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for ky in range(3):
        for kx in range(3):
            y += np.einsum("oc,nchw->nohw", w[:, :, ky, kx].astype(np.float64),
                           xp[:, :, ky:ky + oh, kx:kx + ow])
    return y


def _blocked(x):
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // 16, 16, h, w).transpose(0, 1, 3, 4, 2))


def _unblocked(y):
    n, cb, h, w, b = y.shape
    return y.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)


@pytest.mark.parametrize("n,c,oc,h,w,pads", [
    (1, 32, 48, 9, 10, (1, 1, 1, 1)),    # 3 x 3 tiles, the last row / column past the output
    (2, 16, 32, 7, 7, (1, 1, 1, 1)),     # batch 2; ResNet's last stage: 2 x 2 tiles of 8 x 8
    (1, 32, 32, 12, 29, (0, 1, 1, 0)),   # asymmetric padding: an 11 x 28 output
    (1, 16, 16, 5, 6, (0, 0, 0, 0)),     # no padding: a 3 x 4 output in one tile
])
def test_winograd_conv_matches_direct_conv(n, c, oc, h, w, pads):
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    k = (RNG.standard_normal((oc, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    bias = RNG.standard_normal(oc).astype(np.float32)
    X = tl.placeholder((n, c // 16, h, w, 16), name="X")
    U = tl.placeholder((6, 6, oc // 16, c // 16, 16, 16), name="U")
    B = tl.placeholder((oc // 16, 1, 1, 16), name="B")
    out = ops.relu(ops.add(WG.conv2d_winograd_nchwc(X, U, padding=pads), B))
    f = tl.build(ops.default_schedule(out), [X, U, B, out], name="winograd")
    got = np.zeros(tuple(int(d.value) for d in out.shape), np.float32)
    f(_blocked(x), WG.winograd_weight(k, 16, 16),
      np.ascontiguousarray(bias.reshape(oc // 16, 1, 1, 16)), got)
    want = np.maximum(_conv_numpy(x, k, pads) + bias[None, :, None, None], 0)
    assert got.shape[2:4] == want.shape[2:4]
    # F(4x4, 3x3) rounds a few times more than the direct sum (the transforms' 4, 5, 8)
    np.testing.assert_allclose(_unblocked(got), want, rtol=1e-4, atol=2e-5 * np.abs(want).max())


def test_winograd_weight_is_g_g_gt_per_channel_pair():
    k = RNG.standard_normal((32, 16, 3, 3)).astype(np.float32)
    u = WG.winograd_weight(k, 16, 16)
    assert u.shape == (6, 6, 2, 1, 16, 16) and u.dtype == np.float32
    g = np.array(WG.G, dtype=np.float64)
    o, i = 17, 5  # block 1, lane 1 of the output channels; block 0, lane 5 of the inputs
    np.testing.assert_allclose(u[:, :, 1, 0, i, 1], g @ k[o, i].astype(np.float64) @ g.T,
                               rtol=1e-6, atol=1e-6)


def test_winograd_refuses_what_it_cannot_compute():
    with pytest.raises(ValueError, match="3x3 kernel"):
        WG.winograd_weight(np.zeros((16, 16, 5, 5), np.float32), 16, 16)
    with pytest.raises(ValueError, match="must divide"):
        WG.winograd_weight(np.zeros((24, 16, 3, 3), np.float32), 16, 16)
    X = tl.placeholder((1, 2, 8, 8, 16), name="X")
    with pytest.raises(ValueError, match="input channel blocks"):
        WG.conv2d_winograd_nchwc(X, tl.placeholder((6, 6, 1, 1, 16, 16), name="U"))
    with pytest.raises(ValueError, match="6x6 transformed kernels"):
        WG.conv2d_winograd_nchwc(X, tl.placeholder((3, 3, 1, 2, 16, 16), name="U"))
    with pytest.raises(ValueError, match="no 3x3 window"):
        WG.conv2d_winograd_nchwc(tl.placeholder((1, 1, 1, 2, 16), name="Y"),
                                 tl.placeholder((6, 6, 1, 1, 16, 16), name="U"), padding=0)


def test_winograd_eligibility():
    yes = {"kernel": (3, 3), "stride": (1, 1), "dilation": (1, 1), "groups": 1}
    assert WG.winograd_eligible(256, 256, out_hw=(56, 56), **yes)   # VGG's conv3: 7 MB tiles
    assert WG.winograd_eligible(512, 512, out_hw=(7, 7), **yes)
    assert not WG.winograd_eligible(256, 256, out_hw=(112, 112), **yes)  # 58 MB of tiles
    assert not WG.winograd_eligible(512, 512, out_hw=(6, 6), **yes)
    assert not WG.winograd_eligible(16, 16, out_hw=(9, 9), **yes)  # 0.2 M MACs: too small
    assert not WG.winograd_eligible(128, 128, out_hw=(28, 28), **yes)  # early: its rounding grows
    assert not WG.winograd_eligible(256, 256, (3, 3), (2, 2), (1, 1), 1, (28, 28))
    assert not WG.winograd_eligible(256, 256, (1, 1), (1, 1), (1, 1), 1, (28, 28))
    assert not WG.winograd_eligible(256, 256, (3, 3), (1, 1), (2, 2), 1, (28, 28))
    assert not WG.winograd_eligible(256, 256, (3, 3), (1, 1), (1, 1), 2, (28, 28))


def test_winograd_pays_where_its_products_are_not_bound_by_reading_their_weights():
    # the Intel Xeon measured: 160 GFLOP/s over 23.4 GB/s = 6.8 FLOPs per byte, 7x7 1.40x slower
    assert not WG.winograd_pays((7, 7), 6.8)  # 49 output pixels < 8 x 6.8
    assert WG.winograd_pays((14, 14), 6.8)  # measured 0.63x the direct conv's time
    assert WG.winograd_pays((7, 7), 6.0)  # a machine with more bandwidth per FLOP: 49 >= 48
    assert WG.winograd_pays((7, 8), 7.0) and not WG.winograd_pays((7, 8), 7.01)  # 56 pixels
