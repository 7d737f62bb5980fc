"""cache_read / cache_write with a storage layout (a permutation of the tensor's dimensions):
the copy is stored in that order, the result is unchanged (against numpy), the layout is
recorded in the trace and replays, and a layout that is not a permutation is refused."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl


def _conv(oc=8, c=4, hw=6, k=3):
    X = tl.placeholder((1, c, hw + k - 1, hw + k - 1), name="X")
    W = tl.placeholder((oc, c, k, k), name="W")
    rc = tl.reduce_axis((0, c), name="rc")
    ry = tl.reduce_axis((0, k), name="ry")
    rx = tl.reduce_axis((0, k), name="rx")
    Y = tl.compute((1, oc, hw, hw), lambda n, o, y, x: tl.sum(
        X[n, rc, y + ry, x + rx] * W[o, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    return X, W, Y


def _channels_vectorized(s, X, W, Y):
    """Weights packed [c, kh, kw, o] per 8-channel block, the accumulator stored [n, y, x, o]:
    both read and written as vectors over the output channels."""
    YL = s.cache_write(Y, "local", layout=(0, 2, 3, 1))
    WL = s.cache_read(W, "local", [YL], layout=[1, 2, 3, 0])
    n, o, y, x = s[Y].op.axis
    oo, oi = s[Y].split(o, factor=8)
    s[Y].reorder(n, oo, y, x, oi)
    s[YL].compute_at(s[Y], x)
    s[WL].compute_at(s[Y], oo)
    s[WL].vectorize(s[WL].op.axis[-1])
    ln, ly, lx, lo = s[YL].op.axis
    s[YL].reorder(*s[YL].op.reduce_axis, ln, ly, lx, lo)
    s[YL].vectorize(lo)
    return YL, WL


def _run(s, X, W, Y):
    rng = np.random.default_rng(0)
    x = rng.standard_normal([int(d.value) for d in X.shape]).astype(np.float32)
    w = rng.standard_normal([int(d.value) for d in W.shape]).astype(np.float32)
    y = np.zeros([int(d.value) for d in Y.shape], np.float32)
    tl.build(s, [X, W, Y])(x, w, y)
    hw = y.shape[-1]
    k = w.shape[-1]
    ref = np.zeros(y.shape)
    for ry in range(k):
        for rx in range(k):
            ref += np.einsum("nchw,oc->nohw", x[:, :, ry:ry + hw, rx:rx + hw], w[:, :, ry, rx])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_layouts_store_the_copies_permuted_and_keep_the_result():
    X, W, Y = _conv()
    s = tl.create_schedule(Y)
    _channels_vectorized(s, X, W, Y)
    text = str(tl.lower(s, [X, W, Y]))
    assert "W.local: float32[4, 3, 3, 8]" in text  # one 8-channel block, channels innermost
    assert "Y.local: float32[1, 1, 1, 8]" in text
    _run(s, X, W, Y)


def test_a_layout_is_recorded_and_replays():
    X, W, Y = _conv()
    s = tl.create_schedule(Y)
    _channels_vectorized(s, X, W, Y)
    steps = s.trace.to_json()
    assert [st["args"].get("layout") for st in steps if st["kind"].startswith("cache")] == \
        [[0, 2, 3, 1], [1, 2, 3, 0]]
    X2, W2, Y2 = _conv()
    s2 = tl.create_schedule(Y2).apply_trace(s.trace.dumps())
    assert str(tl.lower(s2, [X2, W2, Y2])) == str(tl.lower(s, [X, W, Y]))
    _run(s2, X2, W2, Y2)


def test_no_layout_records_as_before():
    _, W, Y = _conv()
    s = tl.create_schedule(Y)
    s.cache_read(W, "local", [Y], layout=(0, 1, 2, 3))
    assert s.trace.to_json()[0]["args"] == {"scope": "local", "readers": ["Y"]}


@pytest.mark.parametrize("layout", [(0, 1, 2), (0, 1, 2, 2), (1, 2, 3, 4), "0123"])
def test_a_layout_that_is_not_a_permutation_is_refused(layout):
    _, W, Y = _conv()
    s = tl.create_schedule(Y)
    with pytest.raises(ValueError, match="layout must be a permutation of W's 4 dimensions"):
        s.cache_read(W, "local", [Y], layout=layout)
    with pytest.raises(ValueError, match="layout must be a permutation of Y's 4 dimensions"):
        s.cache_write(Y, "local", layout=layout)
