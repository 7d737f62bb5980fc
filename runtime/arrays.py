"""Arrays for kernel arguments: numpy arrays whose data starts on a 64-byte boundary.

numpy only guarantees 16-byte alignment. Kernels run on any element-aligned array. An output
aligned to the vector width also lets the non-temporal store path write whole lines without
reading them first (``pragma(..., "nontemporal")``; it falls back to ordinary stores on a
misaligned array). ``tl.runtime.empty`` plays the role of ``tvm.nd.empty``.
"""

from __future__ import annotations

import mmap
import operator
from typing import Any

import numpy as np

ALIGN = 64
HUGE_PAGE = 2 << 20  # x86-64's 2 MiB pages, which Linux backs on request (transparent huge pages)


def _aligned_bytes(nbytes: int, zero: bool) -> np.ndarray:
    return _aligned_bytes_at(nbytes, zero)[0]


def _aligned_bytes_at(nbytes: int, zero: bool = False) -> tuple[np.ndarray, int]:
    """64-byte aligned bytes and their address (the graph module's fresh outputs, every run:
    ``__array_interface__`` is read once, ``.ctypes`` would cost a microsecond each time)."""
    raw = (np.zeros if zero else np.empty)(nbytes + ALIGN, dtype=np.uint8)
    addr = raw.__array_interface__["data"][0]
    start = -addr % ALIGN
    return raw[start:start + nbytes], addr + start


def huge_page_bytes(nbytes: int) -> np.ndarray:
    """Zeroed bytes, 64-byte aligned; from 2 MiB up, in memory the kernel is asked to back with
    2 MiB pages (madvise MADV_HUGEPAGE, which Linux honours when transparent huge pages are
    "always" or "madvise"; elsewhere these are ordinary pages). Why: a kernel that streams
    its weights from memory in several interleaved runs of addresses (a tuned conv's
    output-channel blocks) crosses a 4 KiB page every few hundred loads (TLB misses; the
    hardware prefetchers stop at page boundaries). Measured, ResNet-50-shaped 112x112 width
    32, one thread, Zen 4: a tuned late-stage conv took 345 us in a run on 4 KiB pages and
    226 on 2 MiB ones (its default schedule 224 on both); the tuner had timed it at 199, its
    numpy arrays on huge pages by chance. Whole untuned runs: 3.6% faster."""
    if nbytes < HUGE_PAGE or not hasattr(mmap, "MADV_HUGEPAGE"):
        return _aligned_bytes(nbytes, zero=True)
    # private and anonymous (mmap's default for -1 is a shared mapping, which is shmem and
    # not eligible): zero-filled, paged in on first use
    region = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        region.madvise(mmap.MADV_HUGEPAGE)
    except OSError:  # a kernel built without transparent huge pages: ordinary pages then
        pass
    raw = np.frombuffer(region, dtype=np.uint8)  # keeps the mapping alive
    start = -raw.__array_interface__["data"][0] % HUGE_PAGE
    return raw[start:start + nbytes]


def packed(nbytes: list[int]) -> list[np.ndarray]:
    """Byte buffers of these sizes, each 64-byte aligned, laid one after another in one
    ``huge_page_bytes`` region: a model's weights, or a measured kernel's arguments, in the
    same kind of memory (a 2 MiB page each would waste most of it on small buffers)."""
    offsets, end = [], 0
    for n in nbytes:
        offsets.append(end)
        end += -(-int(n) // ALIGN) * ALIGN
    region = huge_page_bytes(end)
    return [region[o:o + int(n)] for o, n in zip(offsets, nbytes)]


class NDArray(np.ndarray):
    """A numpy array with the methods of TVM's NDArray that tutorials call on kernel arguments
    and results: ``.numpy()`` / ``.asnumpy()`` (a copy, as a plain numpy array) and ``.device``.
    Everything else is numpy's; kernels take it as any other array."""

    def numpy(self) -> np.ndarray:
        return np.array(self)  # a copy, of the base class (np.array does not keep subclasses)

    asnumpy = numpy

    @property
    def device(self):
        from .device import cpu

        return cpu(0)

    def copyfrom(self, source: Any) -> NDArray:
        """TVM's ``arr.copyfrom(src)``: ``src``'s values into this array (same shape; cast to
        this dtype as numpy does); returns this array."""
        src = np.asarray(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: source shape {src.shape} differs from the array's "
                             f"{self.shape}")
        np.copyto(self, src, casting="same_kind")
        return self

    def copyto(self, target: Any) -> Any:
        """TVM's ``arr.copyto(target)``: into the array ``target`` (same shape), or, given
        the device (``tl.cpu(0)``), a new array on it; returns that array."""
        if isinstance(target, np.ndarray):
            if target.shape != self.shape:
                raise ValueError(f"copyto: target shape {target.shape} differs from the "
                                 f"array's {self.shape}")
            np.copyto(target, self, casting="same_kind")
            return target
        from .device import Device

        if not isinstance(target, Device):
            raise TypeError(f"copyto: expected an array or a device such as tl.cpu(0), got "
                            f"{type(target).__name__}")
        _device_or_dtype("copyto", target, None)
        return array(self)


def _device_or_dtype(fn: str, device, dtype):
    """TVM passes a device where tensorlang's older signature took the dtype: tell them
    apart (the one device is the CPU)."""
    from .device import Device

    if isinstance(device, Device):
        if device.device_type != "cpu" or device.device_id != 0:
            raise ValueError(f"{fn}: device {device} is not the host CPU, tensorlang's one "
                             "device (tl.cpu(0))")
        return dtype
    if device is not None and dtype is not None:
        raise TypeError(f"{fn}: expected a device such as tl.cpu(0), got "
                        f"{type(device).__name__} {device!r}")
    return device if device is not None else dtype


def empty(shape: Any, dtype: Any = "float32", device: Any = None) -> NDArray:
    """An uninitialized C-contiguous array of `shape` and `dtype`, 64-byte aligned
    (tvm.nd.empty(shape, dtype, dev)); the device is tl.cpu(0)."""
    _device_or_dtype("empty", device, None)
    shape = _dims("empty", shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"empty: shape {shape} has a negative dimension")
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    return _aligned_bytes(n, zero=False).view(dt).reshape(shape).view(NDArray)


def _dims(fn: str, shape: Any) -> tuple[int, ...]:
    """``shape`` (an int or a sequence of them, numpy's too) as a tuple of ints; int() took
    2.5 as 2 and "3" as 3 (numpy refuses both)."""
    dims = (shape,) if np.isscalar(shape) else shape
    try:
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"{fn}: shape must be an int or a sequence of ints, got "
                        f"{shape!r}") from None


def array(a: Any, device: Any = None, dtype: Any = None) -> NDArray:
    """A 64-byte aligned C-contiguous copy of `a` (tvm.nd.array(a, dev)). The second argument
    is a device (tl.cpu(0)) as in TVM, or, as before, the dtype."""
    dtype = _device_or_dtype("array", device, dtype)
    src = np.asarray(a, dtype=dtype)
    if src.dtype.kind not in "biuf":  # (np.empty of such a dtype says nothing to the point)
        raise TypeError(f"array: kernels take bool, int, uint and float arrays, got "
                        f"{src.dtype} from {type(a).__name__}")
    out = empty(src.shape, src.dtype)
    np.copyto(out, src)
    return out
