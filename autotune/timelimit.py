"""A time limit on instantiating a template's config (Python code the user wrote, which may loop
forever for some knob values).

The tuner instantiates configs in its own process (the cost model's features, legality checks)
thousands of times, ~0.2 ms each: a process round trip per config would cost more than the work.
So the limit is enforced in the calling thread:

- in the main thread (the usual case, also in every worker process), by SIGALRM: an interval
  timer whose handler raises. It interrupts Python loops and blocking calls such as sleep;
- in another thread (signals only reach the main thread), by a watchdog thread that raises the
  exception asynchronously in the late thread (PyThreadState_SetAsyncExc): Python code only.

Code stuck inside a C extension that never returns to the interpreter is not interrupted; in the
builder and feature worker processes, their pools' own deadlines catch that case (the process is
killed).
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time

from ..errors import TensorlangError


class TemplateTimeout(TensorlangError):
    """Instantiating a template's config took longer than the time limit. (Not an OSError
    such as TimeoutError: code that tolerates I/O errors must not swallow it.)"""


_active = threading.local()  # .on: a limit is being enforced in this thread (limits don't nest)


class time_limit:
    """``with time_limit(seconds, what):`` raise TemplateTimeout in this thread if the body
    runs longer than `seconds` (None: no limit). Inside another limit, the outer one applies.
    A class, not a generator: the tuner enters one per config (~6 us in the main thread inside
    :func:`alarm_handler`, which saves installing the signal handler each time)."""

    __slots__ = ("_how", "_restore", "seconds", "what")

    def __init__(self, seconds: float | None, what: str = "instantiating the template"):
        self.seconds, self.what = seconds, what
        self._how = None

    def message(self) -> str:
        return f"{self.what} took longer than {self.seconds:g} s (the builder's timeout)"

    def __enter__(self):
        if self.seconds is None or getattr(_active, "on", False):
            return self
        _active.on = True
        if _alarm_usable():
            # (signal.signal and getsignal cost ~6 us each: skipped inside alarm_handler)
            self._restore = None if _handler_installed else \
                signal.signal(signal.SIGALRM, _on_alarm)
            global _armed
            _armed = self
            self._how = "alarm"
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        else:
            self._how = "watchdog"
            _WATCHDOG.arm(self.seconds)
        return self

    def __exit__(self, exc_type, exc, tb):
        how, self._how = self._how, None
        if how is None:
            return False
        _active.on = False
        if how == "alarm":
            global _armed
            _armed = None  # first: an alarm from here on is too late to matter (body done)
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
            finally:
                if self._restore is not None:
                    signal.signal(signal.SIGALRM, self._restore)
            return False
        late = _WATCHDOG.disarm()
        if exc_type is TemplateTimeout or late:
            # the asynchronous exception carries no message; or the body ended after its
            # deadline, before the exception reached it
            raise TemplateTimeout(self.message()) from None
        return False


_armed: time_limit | None = None  # the main thread's limit that SIGALRM ends


def _on_alarm(signum, frame):
    if _armed is not None:  # (a stray alarm between limits changes nothing)
        raise TemplateTimeout(_armed.message())


class alarm_handler:
    """Keep time_limit's SIGALRM handler installed inside (main thread, when SIGALRM has no
    handler of its own): the limits entered inside then only set the timer."""

    def __enter__(self):
        global _handler_installed
        self._restore = None
        if not _handler_installed and _alarm_usable() and \
                signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None):
            self._restore = signal.signal(signal.SIGALRM, _on_alarm)
            _handler_installed = True
        return self

    def __exit__(self, *exc):
        global _handler_installed
        if self._restore is not None:
            signal.signal(signal.SIGALRM, self._restore)
            _handler_installed = False
        return False


_handler_installed = False  # _on_alarm is SIGALRM's handler, for an alarm_handler block


def _alarm_usable() -> bool:
    """SIGALRM can time this thread: the main thread, and nobody else's timer running (ours
    is not running outside a limit)."""
    return (_HAS_ITIMER and threading.current_thread() is threading.main_thread()
            and (_handler_installed or signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)))


_HAS_ITIMER = hasattr(signal, "setitimer")


class _Watchdog:
    """Raises TemplateTimeout in threads whose limit passed (one daemon thread per process)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._deadlines: dict[int, float] = {}  # thread id -> deadline (monotonic seconds)
        self._fired: set[int] = set()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> None:
        tid = threading.get_ident()
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, daemon=True,
                                                name="tensorlang-template-watchdog")
                self._thread.start()
            if tid in self._fired:  # left over from a limit that ended abnormally
                self._fired.discard(tid)
                _set_async_exc(tid, None)
            self._deadlines[tid] = time.monotonic() + seconds
            self._cond.notify()

    def disarm(self) -> bool:
        """Whether this thread's limit fired (a pending exception is cancelled)."""
        tid = threading.get_ident()
        with self._cond:
            self._deadlines.pop(tid, None)
            fired = tid in self._fired
            if fired:
                self._fired.discard(tid)
                _set_async_exc(tid, None)
        return fired

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for tid, deadline in list(self._deadlines.items()):
                    if deadline <= now and tid not in self._fired:
                        self._fired.add(tid)
                        _set_async_exc(tid, TemplateTimeout)
                pending = [d for t, d in self._deadlines.items() if t not in self._fired]
                self._cond.wait(max(0.0, min(pending) - now) if pending else None)


def _set_async_exc(tid: int, exc) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid),
                                               ctypes.py_object(exc) if exc else None)


_WATCHDOG = _Watchdog()
