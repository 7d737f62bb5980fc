"""Helpers shared by the graph tests (a plain module: a `from conftest import` would resolve to
whichever tests/*/conftest.py was imported first)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def assert_close(got, ref, rtol=1e-4):
    """Relative to the reference's largest magnitude (1e-4, fp32): elementwise relative error is
    meaningless where the reference crosses zero."""
    assert got.shape == ref.shape, (got.shape, ref.shape)
    scale = max(float(np.abs(ref).max()), 1e-6)
    err = float(np.abs(got.astype(np.float64) - ref).max()) / scale
    assert err <= rtol, f"max relative error {err:.2e} > {rtol}"
