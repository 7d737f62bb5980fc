"""Structural checks that need no dependence analysis (placement of attached stages)."""

from __future__ import annotations

from ..errors import ScheduleError


def attach_path(stage) -> list:
    """[(host stage, loop), ...] from the innermost attach point outwards."""
    path = []
    st = stage
    seen = set()
    while st.attach_type == "scope":
        if id(st) in seen:
            raise ScheduleError(f"compute_at on stage {stage.name}: attachment forms a cycle")
        seen.add(id(st))
        path.append((st.attach_stage, st.attach_ivar))
        st = st.attach_stage
    return path


def is_inside(inner, host, loop) -> bool:
    """True when stage `inner` runs inside loop `loop` of stage `host` (or is host itself)."""
    if inner is host:
        return True
    for h, lp in attach_path(inner):
        if h is host:
            return host.leaf_iter_vars.index(lp) >= host.leaf_iter_vars.index(loop)
    return False


def check_structure(schedule, stage, step, note=None) -> None:
    """Raise ScheduleError for a stage computed at a loop that no longer exists, or inside a
    loop that one of its readers runs outside of. `note(producer, consumer)`, when given, adds
    text to the latter (the dependence analysis names the broken dependence there)."""
    # every attach loop first: is_inside below compares loop positions along attach paths,
    # which needs each loop on those paths to still be a loop of its host
    check_attach_loops(schedule, step)
    for st in schedule.stages:
        if st.attach_type != "scope":
            continue
        host, loop = st.attach_stage, st.attach_ivar
        for consumer in _effective_consumers(schedule, st):
            if not is_inside(consumer, host, loop):
                extra = note(st, consumer) if note is not None else ""
                raise ScheduleError(
                    f"{step.kind} on stage {step.stage}: stage {st.name} is computed inside loop "
                    f"{loop.name} of {host.name}, but stage {consumer.name} also reads it and "
                    f"runs outside that loop, where those values do not exist"
                    + (f": {extra}" if extra else ""))


def check_attach_loops(schedule, step) -> None:
    """Raise ScheduleError for a stage computed at a loop that is no longer a loop of its host
    (split or fused after the compute_at: no later primitive brings it back)."""
    for st in schedule.stages:
        if st.attach_type != "scope":
            continue
        host, loop = st.attach_stage, st.attach_ivar
        if loop not in host.leaf_iter_vars:
            raise ScheduleError(
                f"{step.kind} on stage {step.stage}: stage {st.name} is computed at loop "
                f"{loop.name} of {host.name}, which is no longer a loop of it "
                f"({host.loop_names()}); schedule {host.name}'s loops before compute_at")


def _effective_consumers(schedule, st) -> list:
    """Consumers, looking through inlined stages to the stages that really read the values."""
    out = []
    for c in schedule.consumers(st):
        if c.attach_type == "inline":
            out.extend(_effective_consumers(schedule, c))
        else:
            out.append(c)
    return out
