"""``tvm.nd`` (``tl.nd``): arrays for kernel arguments, as TVM's tutorials make them.

``tl.nd.array(x, dev)`` and ``tl.nd.empty(shape, dtype, dev)`` are ``tl.runtime.array`` /
``tl.runtime.empty``: 64-byte aligned numpy arrays (``NDArray``, a numpy subclass) with TVM's
``.numpy()`` / ``.asnumpy()`` / ``.copyto()`` / ``.copyfrom()`` / ``.device``. The one device
is the host CPU (``tl.cpu(0)``); kernels take these or any numpy array and write outputs into
the array passed."""

from __future__ import annotations

from .runtime.arrays import NDArray, array, empty

__all__ = ["NDArray", "array", "empty"]


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(f"module 'tensorlang.nd' has no attribute {name!r}")
    hint = {"from_dlpack": "use numpy.from_dlpack(x) then tl.nd.array(...)",
            "NDArray": "", "numpyasarray": "kernels take numpy arrays as they are"}.get(name)
    raise AttributeError(f"module 'tensorlang.nd' has no attribute {name!r}"
                         + (f": tvm.nd.{name}: {hint}" if hint else
                            ": tl.nd has array(x, dev), empty(shape, dtype, dev) and NDArray"))
