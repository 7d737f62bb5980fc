"""Devices, for scripts written against TVM's runtime (``dev = tvm.cpu(0)``,
``f.time_evaluator(f.entry_name, dev, number=10)``).

Kernels run on the host CPU, synchronously, on numpy arrays: a device only names where a kernel
runs, so the CPU is the one there is. A GPU device is refused by name, not accepted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

# TVM's names of the host CPU: its device kind and the target it builds for.
CPU_NAMES = ("cpu", "llvm", "c")
# TVM's GPU and accelerator device kinds, refused with a message saying what runs here instead.
ACCELERATOR_NAMES = ("cuda", "gpu", "rocm", "opencl", "cl", "vulkan", "metal", "vpi", "ext_dev",
                     "hexagon", "webgpu", "nvptx")


@dataclass(frozen=True)
class Device:
    """The host CPU (``index`` is accepted for TVM's ``tvm.cpu(0)``: one CPU device, 0)."""

    device_type: str = "cpu"
    device_id: int = 0

    @property
    def exist(self) -> bool:
        return True

    def sync(self) -> None:
        """Wait for the device's work to finish: a kernel call returns when it has finished,
        so there is nothing to wait for."""

    def __str__(self) -> str:
        return f"{self.device_type}({self.device_id})"


def device(kind: str = "cpu", index: int = 0) -> Device:
    """The device of a TVM device or target name: "cpu" or "llvm" (the host CPU)."""
    if not isinstance(kind, str):
        raise TypeError(f"device: kind must be a str such as 'cpu', got {type(kind).__name__}")
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"device: index must be an int, got {type(index).__name__}")
    name = kind.split()[0].lower() if kind.strip() else kind
    if name in ACCELERATOR_NAMES:
        raise ValueError(f"device {kind!r}: tensorlang compiles for the host CPU only (target "
                         "'llvm'); there is no GPU or accelerator device. Use tl.cpu(0), and "
                         "parallel/vectorize where a GPU schedule would bind threads")
    if name not in CPU_NAMES:
        raise ValueError(f"device {kind!r}: unknown device; the one device is the host CPU, "
                         f"named {' or '.join(map(repr, CPU_NAMES[:2]))}")
    if index != 0:
        raise ValueError(f"device {kind!r} {index}: there is one CPU device, index 0 (the "
                         "kernel's parallel loops use all cores through the thread pool)")
    return Device("cpu", 0)


def cpu(index: int = 0) -> Device:
    """The host CPU (TVM's ``tvm.cpu(0)``)."""
    return device("cpu", index)


def enabled(target: str) -> bool:
    """TVM's ``tvm.runtime.enabled(target)``: whether kernels for this target or device kind
    build and run here: True for the host CPU ("llvm", "cpu"), False for GPU and other kinds."""
    if not isinstance(target, str):
        raise TypeError(f"enabled: expected a target or device name such as 'llvm', got "
                        f"{type(target).__name__}")
    name = target.split()[0].lower() if target.strip() else ""
    return name in ("cpu", "llvm")


def check_device(dev, what: str) -> None:
    """Refuse anything but the CPU device where a TVM call form takes one."""
    if not isinstance(dev, Device):
        raise TypeError(f"{what}: expected a device such as tl.cpu(0), got "
                        f"{type(dev).__name__} {dev!r:.60}")
