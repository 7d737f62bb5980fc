"""Polyhedral legality analysis (the only package that imports islpy).

    deps = tl.analysis.dependences(s)     # printable: domains, accesses, RAW/WAR/WAW, time maps
    tl.analysis.check(s)                  # [] when legal, else the violations (Violation objects)

Every schedule primitive calls `check_step` on the state it produced (a refusal undoes the step),
and `tl.lower` calls `check_schedule` on the whole schedule. A primitive is refused for what no
later primitive can repair; a dependence between two stages that a placement broke (a reader
outside the loop its producer is computed at, or run before it) may still be repaired by a
later compute_at, compute_inline or compute_root (TVM scripts attach a producer before inlining
the stage that also reads it), so it is refused by `tl.lower`, naming the primitive that left it. See model.py (dependences),
timemap.py (schedules as maps to time) and legality.py (the checks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ScheduleError
from .structural import check_attach_loops, check_structure

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


def _repairable(v) -> bool:
    """A broken dependence between two stages: a later compute_at, compute_inline or
    compute_root can still put the reader in reach of its producer's values."""
    return v.kind in ("scope", "order") and v.src_stage != v.sink_stage


def _key(kind: str, src: str, sink: str) -> tuple:
    return kind, src, sink


def check_step(schedule, stage, step) -> None:
    """Called after every schedule primitive; raises ScheduleError for an illegal state that no
    later primitive can make legal, and notes this step as the cause of the others."""
    check_attach_loops(schedule, step)
    found = analyze(schedule)
    for v in found:
        if not _repairable(v):
            raise ScheduleError(v.message(step.kind, step.stage))
    # the step that first left each broken dependence, for tl.lower's message
    causes = schedule.pending_causes
    schedule.pending_causes = {
        k: causes.get(k, str(step))
        for k in (_key(v.kind, v.src_stage, v.sink_stage) for v in found)}


def check_schedule(schedule) -> None:
    """Check a whole schedule (run by tl.lower); raises ScheduleError for the first violation,
    naming the primitive that left it where a primitive did."""

    class _Whole:
        kind, stage = "lower", "*"

    causes = getattr(schedule, "pending_causes", {})

    def left_by(key) -> str:
        cause = causes.get(key)
        return f"; left so by {cause}, which no later primitive repaired" if cause else ""

    broken = _broken_dependence(schedule)
    check_structure(schedule, None, _Whole,
                    lambda p, c: broken(p, c) + left_by(_key("scope", p.name, c.name)))
    found = analyze(schedule)
    if found:
        v = found[0]
        raise ScheduleError(v.message("lower", v.stage) +
                            left_by(_key(v.kind, v.src_stage, v.sink_stage)))


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
