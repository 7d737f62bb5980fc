"""``tvm.testing`` (``import tensorlang.testing``): the helper TVM's tutorials check results with.

Only ``assert_allclose`` is here; TVM's test-suite machinery (``parameter``, ``requires_gpu``,
``uses_gpu``, ...) is not, and naming it says so."""

from __future__ import annotations

import numpy as np


def assert_allclose(actual, desired, rtol=1e-7, atol=1e-7):
    """TVM's ``tvm.testing.assert_allclose``: the shapes must be equal (numpy's own function
    broadcasts a scalar or a shape-(1,) array against the other) and every element within
    ``atol + rtol * abs(desired)``. Arrays here are numpy arrays (``tl.nd.array`` gives them
    ``.numpy()`` too)."""
    actual = np.asanyarray(actual)
    desired = np.asanyarray(desired)
    if actual.shape != desired.shape:
        raise AssertionError(f"assert_allclose: shapes differ: actual {actual.shape}, "
                             f"desired {desired.shape}")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(f"module 'tensorlang.testing' has no attribute {name!r}")
    raise AttributeError(f"module 'tensorlang.testing' has no attribute {name!r}: tvm.testing's "
                         "test-suite helpers are not provided (only assert_allclose); use "
                         "pytest's own (pytest.mark.parametrize, ...); the one device is "
                         "tl.cpu(0)")
