"""Schedules: how a kernel computes (every primitive a recorded, replayable step)."""
from .schedule import Schedule, Step, Trace, create_schedule  # noqa: F401
from .stage import Stage  # noqa: F401
