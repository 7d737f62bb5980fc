"""Stages whose body is not a loop nest the schedule can transform: a tl.extern (one call into a
registered function). As in TVM, it has no loops: every loop primitive on it, and placing it
anywhere but the root, is refused with the reason; its producers and consumers are scheduled
as usual."""

from __future__ import annotations

from ..errors import ScheduleError
from .stage import Stage


class ExternStage(Stage):
    """The stage of a tl.extern: its body is one call, at the root."""

    def what(self) -> str:
        return (f"stage {self.name} is a tl.extern: its body is one call into "
                f"{self.op.call.name!r}, with no loops")

    def refuse(self, primitive: str, hint: str = "") -> None:
        raise ScheduleError(f"{primitive} on stage {self.name}: {self.what()}"
                            + (f"; {hint}" if hint else ""))

    def _leaf(self, iv, primitive: str):
        self.refuse(primitive, "schedule the stages that produce or consume it instead")

    def compute_at(self, parent, iv) -> None:
        self.refuse("compute_at", "it reads its inputs and writes its outputs whole, at the "
                    "root")

    def compute_inline(self) -> None:
        self.refuse("compute_inline", "a call cannot be substituted into its readers; it "
                    "writes its outputs into buffers")


def stage_for(op, schedule) -> Stage:
    """The stage that schedules `op`."""
    from ..te.extern import ExternOp

    return ExternStage(op, schedule) if isinstance(op, ExternOp) else Stage(op, schedule)


__all__ = ["ExternStage", "stage_for"]
