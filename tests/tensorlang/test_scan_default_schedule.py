"""default_schedule on a tl.scan: the time loop stays serial (the generic schedule would
parallelize it, which the scan's dependence refuses), a step's innermost state axis is
vectorized, and a body reduction runs as a vector of independent sums."""

from __future__ import annotations

import numpy as np

import tensorlang as tl
from tensorlang import ops


def _build(outs, args):
    s = ops.default_schedule(outs)
    return tl.build(s, args), tl.lower(s, args)


def test_row_cumsum_scan_builds_and_matches_numpy():
    m, n = 300, 24
    x = tl.placeholder((m, n), name="x")
    state = tl.placeholder((m, n), name="state")
    init = tl.compute((1, n), lambda _, i: x[0, i], name="init")
    update = tl.compute((m, n), lambda t, i: state[t - 1, i] + x[t, i], name="update")
    res = tl.scan(init, update, state, inputs=[x])
    f, text = _build(res, [x, res])
    a = np.random.default_rng(0).integers(-9, 9, (m, n)).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    f(a, out)
    np.testing.assert_array_equal(out, np.cumsum(a, 0))
    assert "parallel" not in str(text) and "ramp(" in str(text)


def test_body_reduction_per_step_is_vectorized():
    """s[t, i] = s[t-1, i] + sum_c w[c] * s[t-1, (i + c) % n]: a reduction in the body."""
    m, n, c = 50, 16, 3
    x = tl.placeholder((m, n), name="x")
    w = tl.placeholder((c,), name="w")
    state = tl.placeholder((m, n), name="state")
    r = tl.reduce_axis((0, c), name="r")
    mix = tl.compute((m, n), lambda t, i: tl.sum(w[r] * state[t - 1, (i + r) % n], axis=r),
                     name="mix")
    init = tl.compute((1, n), lambda _, i: x[0, i], name="init")
    update = tl.compute((m, n), lambda t, i: 0.5 * mix[t, i] + x[t, i], name="update")
    res = tl.scan(init, update, state, inputs=[x])
    f, text = _build(res, [x, w, res])
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, n)).astype(np.float32)
    wv = rng.standard_normal(c).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    f(a, wv, out)
    ref = np.zeros((m, n), np.float32)
    ref[0] = a[0]
    for t in range(1, m):
        mixed = sum(wv[k] * np.roll(ref[t - 1], -k) for k in range(c))
        ref[t] = 0.5 * mixed + a[t]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert "parallel" not in str(text) and "mix[ramp(0, 1, 16)]" in str(text)
