"""Arrays for kernel arguments: numpy arrays whose data starts on a 64-byte boundary.

numpy only guarantees 16-byte alignment. Kernels run on any element-aligned array. An output
aligned to the vector width also lets the non-temporal store path write whole lines without
reading them first (``pragma(..., "nontemporal")``; it falls back to ordinary stores on a
misaligned array). ``tl.runtime.empty`` plays the role of ``tvm.nd.empty``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ALIGN = 64


def _aligned_bytes(nbytes: int, zero: bool) -> np.ndarray:
    return _aligned_bytes_at(nbytes, zero)[0]


def _aligned_bytes_at(nbytes: int, zero: bool = False) -> tuple[np.ndarray, int]:
    """64-byte aligned bytes and their address (the graph module's fresh outputs, every run:
    ``__array_interface__`` is read once, ``.ctypes`` would cost a microsecond each time)."""
    raw = (np.zeros if zero else np.empty)(nbytes + ALIGN, dtype=np.uint8)
    addr = raw.__array_interface__["data"][0]
    start = -addr % ALIGN
    return raw[start:start + nbytes], addr + start


def empty(shape: Any, dtype: Any = "float32") -> np.ndarray:
    """An uninitialized C-contiguous array of `shape` and `dtype`, 64-byte aligned."""
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"empty: shape {shape} has a negative dimension")
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    return _aligned_bytes(n, zero=False).view(dt).reshape(shape)


def array(a: Any, dtype: Any = None) -> np.ndarray:
    """A 64-byte aligned C-contiguous copy of `a`."""
    src = np.asarray(a, dtype=dtype)
    out = empty(src.shape, src.dtype)
    np.copyto(out, src)
    return out
