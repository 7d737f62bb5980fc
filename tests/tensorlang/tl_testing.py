"""Shared helpers of the core's tests: random inputs, tolerances, build-and-run on numpy arrays."""

from __future__ import annotations

import numpy as np

import tensorlang as tl

# (rtol, atol) per dtype: float32 kernels may reassociate (rfactor, vector reductions) and use
# polynomial intrinsics, so a few ulps of slack; integer and bool results must be exact.
TOL = {
    "float16": (2e-3, 2e-3),
    "float32": (2e-5, 2e-5),
    "float64": (1e-12, 1e-12),
}


def tol(dtype: str) -> dict:
    rtol, atol = TOL.get(str(dtype), (0, 0))
    return {"rtol": rtol, "atol": atol}


def rand(shape, dtype="float32", lo=-2.0, hi=2.0, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = np.dtype(dtype)
    if d.kind == "f":
        return rng.uniform(lo, hi, size=shape).astype(d)
    if d.kind == "b":
        return rng.integers(0, 2, size=shape).astype(d)
    info = np.iinfo(d)
    return rng.integers(max(int(lo), info.min), min(int(hi), info.max) + 1, size=shape).astype(d)


def out_like(t: tl.te.Tensor, sizes: dict | None = None) -> np.ndarray:
    """A zero numpy array for tensor t (symbolic dims resolved with `sizes`: name -> int)."""
    shape = []
    for d in t.shape:
        v = tl.ir.expr.as_int(d)
        shape.append(v if v is not None else sizes[d.name])
    # fill with a sentinel so that an element the kernel forgets to write is noticed
    fill = 0 if np.dtype(t.dtype).kind in "biu" else np.nan
    return np.full(shape, fill, dtype=t.dtype)


def run(f, inputs: list, outputs: list, sizes: dict | None = None) -> list:
    """Call built module f on the input arrays plus fresh output arrays; return the outputs."""
    outs = [out_like(t, sizes) for t in outputs]
    f(*inputs, *outs)
    return outs


def build_run(s, ins: list, outs: list, arrays: list, name: str = "kernel") -> list:
    f = tl.build(s, list(ins) + list(outs), name=name)
    return run(f, arrays, outs)


def assert_close(got, want, dtype=None):
    d = str(dtype or got.dtype)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64 if d == "float16" else None),
                               want, **tol(d), equal_nan=False)
