"""Timing results, as ``Module.time_evaluator`` returns them."""

from __future__ import annotations

import math
import numbers
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# the most calls one native timing loop makes: it counts them in an int64, and ctypes would
# wrap a larger count (2**70 calls timed as 0, a time per call of 1e-29 s)
MAX_CALLS = 2**63 - 1


def count(what: str, value: Any) -> int:
    """``value`` as a count of runs or calls: an int (numpy's too) in [1, MAX_CALLS] (0 divided
    by zero, a negative one gave negative times, a float failed in ctypes)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int >= 1, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{what} must be an int >= 1, got {value}")
    if value > MAX_CALLS:
        raise ValueError(f"{what} = {value} is too large: at most 2**63 - 1 (an int64 count)")
    return int(value)


def duration_ms(what: str, value: Any) -> float:
    """``value`` as a number of milliseconds: a finite real >= 0 (infinity never ends a
    measurement)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number of milliseconds >= 0, got "
                        f"{type(value).__name__}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{what} must be a finite number of milliseconds >= 0, got {value!r}")
    return float(value)


def _fmt_seconds(t: float) -> str:
    if not math.isfinite(t):
        return str(t)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(t) >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-9:.4g} ns"


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call: one entry of ``results`` per repeat, each the mean over ``number`` calls.

    ``number`` is the number of calls per repeat actually used (it may have been raised to reach
    ``min_repeat_ms``).
    """

    results: tuple[float, ...]
    number: int

    def __post_init__(self) -> None:
        if not self.results:
            raise ValueError("a TimingResult needs at least one repeat")

    @classmethod
    def from_results(cls, results: Sequence[float], number: int) -> TimingResult:
        return cls(tuple(float(r) for r in results), int(number))

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        """Population standard deviation of the per-repeat means (0 for a single repeat)."""
        return statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    def __repr__(self) -> str:
        return (
            f"TimingResult(mean={_fmt_seconds(self.mean)}, median={_fmt_seconds(self.median)}, "
            f"min={_fmt_seconds(self.min)}, max={_fmt_seconds(self.max)}, "
            f"std={_fmt_seconds(self.std)}, repeat={len(self.results)}, number={self.number})"
        )


def call_timer(address: int, fn: Callable[..., int], n_args: int
               ) -> Callable[..., tuple[float, int]]:
    """``timer(raw, n, woken=False)`` -> (seconds for n calls, first nonzero return code or 0)
    of the function at ``address`` with raw arguments: a native loop (the thread pool library's
    tl_time_calls; ``woken``: tl_time_calls_woken, the pool's workers made to run just before,
    untimed) where that library loads and the arity is within its loops, else a Python loop
    over ``fn`` (the same function through ctypes; ``woken`` has no effect there)."""
    from . import threadpool

    native_ok = n_args <= threadpool.MAX_TIMED_ARGS
    if native_ok:
        try:
            threadpool.pool()
        except threadpool.PoolUnavailable:
            native_ok = False  # time from Python instead
    if native_ok:

        def native(raw: list[int], n: int, woken: bool = False) -> tuple[float, int]:
            return threadpool.time_calls(address, raw, n, woken)

        return native

    def python_loop(raw: list[int], n: int, woken: bool = False) -> tuple[float, int]:
        # no pool: no workers to wake; over MAX_TIMED_ARGS arguments the workers are timed as
        # found, since a wake from Python leaves them microseconds to start yielding again
        del woken
        err = 0
        t0 = time.perf_counter()
        for _ in range(n):
            rc = fn(*raw)
            if rc and not err:
                err = rc
        return time.perf_counter() - t0, err

    return python_loop
