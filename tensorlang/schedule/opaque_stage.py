"""Stages whose dataflow is fixed by their operation.

* a tl.extern (one call into a registered function) and a tl.scan's result (written by its init
  and update stages): as in TVM they have no loops; every loop primitive on them, and placing
  them anywhere but the root, is refused with the reason;
* the stages of a scan's init and body: their loops are scheduled as usual, but they share one
  buffer with the scan's result, so the primitives that replace their op (cache_read into them,
  cache_write, rfactor) are refused, and so are inlining or moving the init or the update (the
  writers of that buffer). A body stage between the state and the update is computed one step
  at a time, so it may be inlined into its readers (TVM's scan-inline tests do so)."""

from __future__ import annotations

from ..errors import ScheduleError
from .stage import Stage


class FixedStage(Stage):
    """A stage whose op no primitive may replace; `what()` says why."""

    def what(self) -> str:
        raise NotImplementedError

    def refuse(self, primitive: str, hint: str = "") -> None:
        raise ScheduleError(f"{primitive} on stage {self.name}: {self.what()}"
                            + (f"; {hint}" if hint else ""))


class ExternStage(FixedStage):
    """The stage of a tl.extern: its body is one call, at the root."""

    def what(self) -> str:
        return (f"stage {self.name} is a tl.extern: its body is one call into "
                f"{self.op.call.name!r}, with no loops")

    def _leaf(self, iv, primitive: str):
        self.refuse(primitive, "schedule the stages that produce or consume it instead")

    def compute_at(self, parent, iv) -> None:
        self.refuse("compute_at", "it reads its inputs and writes its outputs whole, at the "
                    "root")

    def compute_inline(self) -> None:
        self.refuse("compute_inline", "a call cannot be substituted into its readers; it "
                    "writes its outputs into buffers")


class ScanStage(FixedStage):
    """The stage of a tl.scan's result: its init and update stages write its buffer."""

    def what(self) -> str:
        return (f"stage {self.name} is a tl.scan's result, written by its init "
                f"{self.op.init.op.name} and its update {self.op.update.op.name}; it has no "
                "loops")

    def _leaf(self, iv, primitive: str):
        self.refuse(primitive, f"schedule s[{self.op.update.op.name}] (its first loop is the "
                    "time loop) and its body stages")

    def compute_at(self, parent, iv) -> None:
        self.refuse("compute_at", "the scan runs at the root")

    def compute_inline(self) -> None:
        self.refuse("compute_inline", "its steps are computed one after the other, into a "
                    "buffer")


class ScanBodyStage(FixedStage):
    """The init, the update or a body stage of a tl.scan."""

    def what(self) -> str:
        from ..te.scan import scan_of

        scan = scan_of(self.origin_op)
        role = scan.role(self.origin_op)
        return f"stage {self.name} is the {role} of tl.scan {scan.name}" + (
            ", and writes its buffer" if role in ("init", "update") else "")

    def _writer(self) -> bool:
        from ..te.scan import scan_of

        return scan_of(self.origin_op).role(self.origin_op) in ("init", "update")

    def compute_at(self, parent, iv) -> None:
        if self._writer():
            self.refuse("compute_at", "it runs at the root")
        super().compute_at(parent, iv)

    def compute_root(self) -> None:
        if self._writer():
            self.refuse("compute_root", "it runs at the root")
        super().compute_root()

    def compute_inline(self) -> None:
        if self._writer():
            self.refuse("compute_inline", "a step's values are kept for the steps after it")
        super().compute_inline()


def stage_for(op, schedule) -> Stage:
    """The stage that schedules `op`."""
    from ..te.extern import ExternOp
    from ..te.scan import ScanOp, scan_of

    if isinstance(op, ExternOp):
        return ExternStage(op, schedule)
    if isinstance(op, ScanOp):
        return ScanStage(op, schedule)
    if scan_of(op) is not None:
        return ScanBodyStage(op, schedule)
    return Stage(op, schedule)


def attach_scan_bodies(schedule) -> None:
    """The default placement of every scan's body (not recorded: a fresh schedule's state, as
    the root is for other stages): each body stage computed at the update's time loop, one
    step at a time. The declared ops (s_update.op, what the user holds) name their stages."""
    from ..te.scan import ScanOp

    for st in schedule.stages:
        if not isinstance(st.op, ScanOp):
            continue
        update = schedule.stage_map[st.op.update.op]
        for body in st.op.body_ops:
            declared = body.declared_op
            if declared in schedule.stage_map and schedule.stage_map[declared].op is declared:
                raise ScheduleError(f"stage {schedule.stage_map[declared].name} is the "
                                    f"declared {declared.name} of tl.scan {st.name}, read "
                                    "outside the scan: read the scan's result instead")
            body_stage = schedule.stage_map[body]
            schedule.stage_map[declared] = body_stage
            if body is not st.op.update.op:
                body_stage._compute_at(update.leaf_iter_vars[0], update)


FIXED_DATAFLOW = FixedStage

__all__ = ["ExternStage", "FixedStage", "ScanBodyStage", "ScanStage", "attach_scan_bodies",
           "stage_for"]
