"""What ``graph.build`` decided and how long each step took: :class:`BuildReport`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tensorlang.errors import TensorlangError


class BuildError(TensorlangError):
    """A node could not be compiled with any schedule."""


@dataclass
class KernelInfo:
    name: str
    op: str
    workload: str
    schedule: str
    tuned: bool
    build_s: float
    cache_hit: bool
    ops: list[str] = field(default_factory=list)  # the graph ops the kernel holds, in order
    layout: str = ""
    source: str | None = None  # None: compiled by this build; "memory" / "disk": from a cache
    flops: float = 0.0  # floating-point operations of one call (its computes, counted)
    bytes: float = 0.0  # bytes of its arguments
    time_s: float = 0.0  # one call: the tuning record's measured time, else the roofline's
    time_source: str = "roofline estimate"  # or "tuning log"; gm.profile(): "profile"


@dataclass(frozen=True)
class TunedRecordFailure:
    """A tuning record the build could not use: the kernel got its default schedule instead."""

    kernel: str  # the kernel's name in the model
    workload: str  # the record's workload key (template args hashed, as in the log)
    config: str  # the record's config, as JSON
    error: str  # "ErrorType: message"

    def describe(self) -> str:
        return (f"kernel {self.kernel}: the tuning record (workload {self.workload}, config "
                f"{self.config}) failed to build, so it uses the default schedule: {self.error}")


@dataclass(frozen=True)
class StepReport:
    """One step of the build: its name, what it decided (one line), its time."""

    name: str
    decided: str
    time_s: float


@dataclass
class BuildReport:
    steps: list[StepReport] = field(default_factory=list)
    passes: list = field(default_factory=list)
    kernels: list[KernelInfo] = field(default_factory=list)
    untuned: list[str] = field(default_factory=list)
    tuned_failures: list[TunedRecordFailure] = field(default_factory=list)
    kernels_before_fusion: int | None = None  # kernel nodes before / after the fuse_ops pass
    kernels_after_fusion: int | None = None
    blocks: dict[str, int] = field(default_factory=dict)  # conv -> block chosen from the log
    memory: Any = None
    driver_s: float = 0.0
    total_s: float = 0.0

    def step(self, name: str) -> StepReport | None:
        return next((s for s in self.steps if s.name == name), None)

    def __str__(self) -> str:
        lines = ["steps:"]
        lines += [f"  {s.name:16s} {s.time_s * 1e3:9.1f} ms  {s.decided}" for s in self.steps]
        lines.append("passes:")
        lines += [f"  {n:24s} {t * 1e3:8.2f} ms  {c} nodes" for n, t, c in self.passes]
        mem = sum(k.source == "memory" for k in self.kernels)
        disk = sum(k.source == "disk" for k in self.kernels)
        lines.append(f"kernels: {len(self.kernels)} distinct ({mem} from the in-process cache, "
                     f"{disk} from the disk cache)"
                     f"; kernel nodes {self.kernels_before_fusion} before fusion, "
                     f"{self.kernels_after_fusion} after")
        for k in self.kernels:
            lines.append(f"  {k.name:32s} {k.schedule:20s} {'tuned' if k.tuned else 'default'}"
                         f" {k.build_s * 1e3:8.1f} ms build, {k.time_s * 1e6:9.1f} us per call"
                         f" ({k.time_source})")
        lines += [f"  tuned record not used: {f.describe()}" for f in self.tuned_failures]
        if self.blocks:
            lines.append("conv blocks from the tuning log: " + ", ".join(
                f"{c} {b}" for c, b in sorted(self.blocks.items())))
        if self.memory is not None:
            lines.append(f"memory: {self.memory.describe()}")
        lines.append(f"driver: {self.driver_s * 1e3:.1f} ms; total {self.total_s:.2f} s")
        return "\n".join(lines)
