"""Checks of the tuning API's arguments, shared by its entry points: a bad value is refused
where it is given, naming the function and the argument, before anything is measured."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable


def check_int(who: str, name: str, value, least: int) -> int:
    """`value` as an int >= `least`, or TypeError / ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{who}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < least:
        raise ValueError(f"{who}: {name} must be >= {least}, got {value}")
    return int(value)


# the longest wait a timeout or cooldown asks for: the waits take it as a C time (poll(): an
# int of milliseconds, 24.8 days), which 1e10 s overflowed (OverflowError from deep inside a
# tuning); no measurement takes a week
MAX_SECONDS = 7 * 24 * 3600.0


def check_seconds(who: str, name: str, value, zero: bool = False) -> float:
    """check_number for a duration in seconds, capped at MAX_SECONDS."""
    return min(check_number(who, name, value, zero), MAX_SECONDS)


def check_seed(who: str, seed) -> int | None:
    """A random seed: None (fresh entropy) or an int >= 0 (numpy's generator refused a
    negative one from deep inside, naming no argument: "expected non-negative integer")."""
    if seed is None:
        return None
    return check_int(who, "seed", seed, 0)


def check_number(who: str, name: str, value, zero: bool = False) -> float:
    """`value` as a finite float > 0 (>= 0 with `zero`): NaN and inf used to reach the
    timers and pipes (OverflowError, ValueError from deep inside), 0 and negative
    timeouts the time limits (0 meant none)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{who}: {name} must be a number, got {type(value).__name__} "
                        f"{value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ValueError(f"{who}: {name} must be {bound} (a finite number), got {value!r}")
    return float(value)


def list_of(value, is_item: Callable[[object], bool], not_iterable: str,
            bad_item: Callable[[object], str]) -> list:
    """``value`` (an iterable) as a list whose every item ``is_item`` accepts; TypeError with
    ``not_iterable``, or ``bad_item(item)`` for the first item refused."""
    try:
        items = list(value)
    except TypeError:
        raise TypeError(not_iterable) from None
    for item in items:
        if not is_item(item):
            raise TypeError(bad_item(item))
    return items
