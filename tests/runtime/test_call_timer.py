"""runtime.timer.call_timer: the one timing loop of Module.time_evaluator and GraphModule's
profile (a native loop, else Python's when the thread pool library is unavailable)."""

import pytest
from tensorlang.runtime import threadpool
from tensorlang.runtime.timer import call_timer


def _unavailable():
    raise threadpool.PoolUnavailable("no pool library in this test")


def test_python_loop_when_pool_unavailable_reports_first_error(monkeypatch):
    monkeypatch.setattr(threadpool, "pool", _unavailable)
    codes = iter([0, 7, 0, 9, 0])
    calls = []

    def fn(*raw):
        calls.append(raw)
        return next(codes)

    elapsed, rc = call_timer(0, fn, 2)([1, 2], 5)
    assert (rc, len(calls), calls[0]) == (7, 5, (1, 2))
    assert elapsed >= 0.0


def test_too_many_arguments_for_native_loop_time_from_python(monkeypatch):
    def refuse(*_a):
        raise AssertionError("the native loop must not be used past MAX_TIMED_ARGS")

    monkeypatch.setattr(threadpool, "time_calls", refuse)
    n = threadpool.MAX_TIMED_ARGS + 1
    elapsed, rc = call_timer(0, lambda *raw: 0, n)(list(range(n)), 3)
    assert rc == 0 and elapsed >= 0.0


def test_pool_errors_other_than_unavailable_are_not_swallowed(monkeypatch):
    def broken():
        raise RuntimeError("a bug in the pool loader")

    monkeypatch.setattr(threadpool, "pool", broken)
    with pytest.raises(RuntimeError, match="a bug in the pool loader"):
        call_timer(0, lambda: 0, 0)
