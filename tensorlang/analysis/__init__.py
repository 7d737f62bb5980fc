"""Polyhedral legality analysis (the only package that imports islpy)."""

from ..errors import ScheduleError


def check_step(schedule, stage, step) -> None:
    """Called after every schedule primitive; raises ScheduleError for an illegal state."""
    from .structural import check_structure

    check_structure(schedule, stage, step)


__all__ = ["check_step", "ScheduleError"]


def check_schedule(schedule) -> None:
    """Check a whole schedule (run by tl.lower); raises ScheduleError for the first violation."""
    from .structural import check_structure

    class _Whole:
        kind, stage = "lower", "*"

    check_structure(schedule, None, _Whole)
