"""Shared helpers of the operator-library tests: build a composition with the default schedule
(and optionally the naive one) and compare with a numpy reference."""

from __future__ import annotations

import numpy as np

import tensorlang as tl

RNG = np.random.default_rng(0)


def rand(shape, dtype="float32", lo=-2.0, hi=2.0, rng=None):
    rng = RNG if rng is None else rng
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def shape_of(t) -> tuple:
    return tuple(int(d.value) for d in t.shape)


def run(out, inputs: list, arrays: list, schedule: str = "default", knobs: dict | None = None):
    """Build `out` (a tensor or list) over placeholders `inputs`, run it on `arrays`
    (`knobs`: for the default schedule's anchor)."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    s = (tl.ops.default_schedule(outs, knobs=knobs) if schedule == "default"
         else tl.create_schedule(outs))
    f = tl.build(s, list(inputs) + list(outs), name="k")
    res = [np.zeros(shape_of(o), dtype=o.dtype) for o in outs]
    f(*arrays, *res)
    return res if isinstance(out, (list, tuple)) else res[0]


def check(out, inputs, arrays, expected, rtol=1e-5, atol=1e-5, both=True, knobs=None):
    """Default schedule (and the naive one when `both`) against the numpy result."""
    for sched in (("default", "naive") if both else ("default",)):
        got = run(out, inputs, arrays, sched, knobs)
        exp = expected if isinstance(out, (list, tuple)) else [expected]
        got_l = got if isinstance(out, (list, tuple)) else [got]
        for g, e in zip(got_l, exp):
            e = np.asarray(e)
            assert g.shape == e.shape, (sched, g.shape, e.shape)
            assert g.dtype == e.dtype or (g.dtype.kind == e.dtype.kind), (g.dtype, e.dtype)
            if g.dtype.kind == "f":
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=sched)
            else:
                np.testing.assert_array_equal(g, e, err_msg=sched)


def ph(a, name):
    return tl.placeholder(a.shape, dtype=a.dtype.name, name=name)
