"""Polyhedral legality analysis (the only package that imports islpy).

    deps = tl.analysis.dependences(s)     # printable: domains, accesses, RAW/WAR/WAW, time maps
    tl.analysis.check(s)                  # [] when legal, else the violations (Violation objects)

Every schedule primitive calls `check_step` on the state it produced (a refusal undoes the step),
and `tl.lower` calls `check_schedule` on the whole schedule. See model.py (dependences),
timemap.py (schedules as maps to time) and legality.py (the checks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ScheduleError
from .structural import check_structure

if TYPE_CHECKING:
    from .legality import Violation

# islpy is imported on the first check, not with tensorlang: `import tensorlang.runtime` (which
# imports this package's parent) must work where only deployed kernels run.


def analyze(schedule, exact: bool = False):
    from .legality import analyze as _analyze

    return _analyze(schedule, exact=exact)


def __getattr__(name: str):
    if name == "Violation":
        from .legality import Violation

        return Violation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _broken_dependence(schedule):
    """For a structural refusal: the dependence instance it breaks, in source terms."""

    def note(producer, consumer) -> str:
        for v in analyze(schedule):
            if v.kind in ("scope", "order") and v.src_stage == producer.name and \
                    v.sink_stage == consumer.name:
                return f"{v.dependence} ({v.reason}); e.g. {v.example}"
        return ""

    return note


def check_step(schedule, stage, step) -> None:
    """Called after every schedule primitive; raises ScheduleError for an illegal state."""
    # the structural checks first: their messages name the misplaced stage directly
    check_structure(schedule, stage, step, _broken_dependence(schedule))
    found = analyze(schedule)
    if found:
        raise ScheduleError(found[0].message(step.kind, step.stage))


def check_schedule(schedule) -> None:
    """Check a whole schedule (run by tl.lower); raises ScheduleError for the first violation."""

    class _Whole:
        kind, stage = "lower", "*"

    check_structure(schedule, None, _Whole, _broken_dependence(schedule))
    found = analyze(schedule)
    if found:
        raise ScheduleError(found[0].message("lower", found[0].stage))


def check(schedule, exact: bool = False) -> list[Violation]:
    """The dependences the schedule breaks (empty when it is legal). exact=True decides every
    dependence with isl instead of the structural fast path (same verdicts, slower)."""
    from ..schedule import Schedule

    if not isinstance(schedule, Schedule):
        raise TypeError(f"check: expected a Schedule, got {type(schedule).__name__}")
    return analyze(schedule, exact=exact)


def dependences(schedule):
    """The schedule's polyhedral model: statements and their domains, reads and writes, the RAW,
    WAR and WAW dependences (isl maps, source instance -> sink instance) and the current schedule
    as maps from instances to time. `print()` it to read them."""
    from ..schedule import Schedule
    from .report import Dependences

    if not isinstance(schedule, Schedule):
        raise TypeError(f"dependences: expected a Schedule, got {type(schedule).__name__}")
    from .legality import bind

    return Dependences(schedule, bind(schedule))


__all__ = ["ScheduleError", "Violation", "check", "check_schedule", "check_step", "dependences"]
