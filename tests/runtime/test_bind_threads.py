"""Opt-in thread binding: worker thread ids, bind_threads / unbind_threads, the env var."""

from __future__ import annotations

import os
import threading
import time

import pytest
import rt_helpers as H
from tensorlang.runtime import (
    bind_threads,
    get_num_threads,
    set_num_threads,
    thread_binding,
    threadpool,
)
from test_threadpool import _run_pfill, _run_script

pytestmark = [
    pytest.mark.skipif(threadpool.machine() != "x86_64", reason="test kernels use x86 intrinsics"),
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity"),
    pytest.mark.cpus_to_itself,  # where a worker wakes depends on the other CPU being idle
]
TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")


@pytest.fixture(scope="module")
def pfill():
    return H.build("pfill")


@pytest.fixture
def unbound():
    """Every test leaves the process unbound and the pool at its size, whatever it asserted."""
    size = get_num_threads()
    yield
    threadpool.unbind_threads()
    set_num_threads(size)


def _affinities() -> dict[int, set[int]]:
    tids = [threading.get_native_id(), *threadpool.worker_tids()]
    return {t: os.sched_getaffinity(t) for t in tids}


@TWO_CPUS
def test_worker_tids_distinct_and_nonzero(pfill, unbound):
    set_num_threads(2)
    _run_pfill(pfill, 1000, 8)
    tids = threadpool.worker_tids()
    assert len(tids) >= 1 and all(t > 0 for t in tids)
    assert len(set(tids)) == len(tids)
    assert threading.get_native_id() not in tids
    # they are threads of this process
    assert set(tids) <= {int(t) for t in os.listdir("/proc/self/task")}
    lib = threadpool.pool()
    assert lib.worker_tid(0) == 0 and lib.worker_tid(-1) == 0
    assert lib.worker_tid(threadpool.MAX_THREADS) == 0


@TWO_CPUS
def test_bind_then_unbind_restores_affinity(pfill, unbound):
    _run_pfill(pfill, 100, 2)
    before = _affinities()
    allowed = sorted(os.sched_getaffinity(0))
    mapping = bind_threads()
    me = threading.get_native_id()
    workers = [threadpool.pool().worker_tid(i) for i in range(1, get_num_threads())]
    assert mapping[me] == allowed[0]
    for i, tid in enumerate(workers, start=1):
        assert mapping[tid] == allowed[i % len(allowed)]
    for tid, cpu in mapping.items():
        assert os.sched_getaffinity(tid) == {cpu}
    assert bind_threads() == mapping  # binding again re-derives from the unbound CPU set
    threadpool.unbind_threads()
    assert _affinities() == before
    threadpool.unbind_threads()  # a second unbind is a no-op
    assert _affinities() == before


@TWO_CPUS
def test_bind_explicit_cpus(unbound):
    allowed = sorted(os.sched_getaffinity(0))
    cpus = [allowed[1], allowed[0]]
    mapping = bind_threads(cpus)
    assert mapping[threading.get_native_id()] == cpus[0]
    assert os.sched_getaffinity(0) == {cpus[0]}


def test_bind_is_noop_with_one_cpu_or_thread(unbound):
    before = os.sched_getaffinity(0)
    assert bind_threads([min(before)]) == {}
    assert os.sched_getaffinity(0) == before
    set_num_threads(1)
    assert bind_threads() == {}
    assert os.sched_getaffinity(0) == before


@TWO_CPUS
def test_parallel_results_correct_after_binding(pfill, unbound):
    set_num_threads(2)
    bind_threads()
    for tasks in (1, 2, 7, 64):
        _run_pfill(pfill, 10_000, tasks)
    # both threads still take part (rendezvous needs two threads running at once)
    tids = _run_pfill(pfill, 1000, 2, rendezvous=True)
    assert len(set(tids.tolist())) == 2
    threadpool.set_spin_cycles(0)  # the workers sleep between launches
    try:
        for _ in range(3):
            time.sleep(0.01)
            _run_pfill(pfill, 1000, 4)
    finally:
        threadpool.set_spin_cycles(threadpool.DEFAULT_SPIN_CYCLES)


# forks this multi-threaded process on purpose (what users do); Python 3.12+ warns at each
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@TWO_CPUS
def test_fork_child_is_not_left_pinned(pfill, unbound):
    before = os.sched_getaffinity(0)
    bind_threads()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the launcher's pin must be gone, and the pool must work
        code = 1
        try:
            os.close(r)
            ok = os.sched_getaffinity(0) == before and not thread_binding.is_bound()
            _run_pfill(pfill, 1000, 4)
            ok = ok and len(threadpool.worker_tids()) >= 1
            os.write(w, b"1" if ok else b"0")
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    got = os.read(r, 1)
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0 and got == b"1"
    assert os.sched_getaffinity(0) == {min(before)}  # the parent is still bound


@TWO_CPUS
def test_env_var_binds_on_load():
    code = """
        import os, threading
        from tensorlang.runtime import get_num_threads, threadpool
        n = get_num_threads()          # loads the pool, which binds
        me = os.sched_getaffinity(0)
        workers = [os.sched_getaffinity(t) for t in threadpool.worker_tids()]
        print(len(me), sorted(me)[0], [sorted(a) for a in workers], n)
    """
    out = _run_script(code, env={"TENSORLANG_BIND_THREADS": "1"}).split(maxsplit=2)
    allowed = sorted(os.sched_getaffinity(0))
    assert out[0] == "1" and int(out[1]) == allowed[0]
    assert f"[{allowed[1]}]" in out[2]
    out = _run_script(code, env={"TENSORLANG_BIND_THREADS": "0"}).split(maxsplit=2)
    assert int(out[0]) == len(allowed)  # default: nothing pinned


def test_bad_env_var_is_reported():
    code = """
        from tensorlang.runtime import get_num_threads
        try:
            get_num_threads()
        except ValueError as e:
            print("ERR", e)
    """
    out = _run_script(code, env={"TENSORLANG_BIND_THREADS": "maybe"})
    assert "ERR TENSORLANG_BIND_THREADS must be 0 or 1" in out


def _last_cpu(tid: int) -> int:
    """The CPU a thread of this process last ran on (/proc/self/task/<tid>/stat, field 39)."""
    with open(f"/proc/self/task/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


@TWO_CPUS
def test_a_worker_woken_on_the_launchers_cpu_moves_off(pfill, unbound):
    """After an idle pause the kernel may wake a worker on the CPU of the thread that launches
    the job, and the two then take turns on one CPU while another idles. The worker leaves
    that CPU itself when it starts the job there. Forced here: the worker is put on the
    launcher's CPU while it sleeps and allowed everywhere again before the launch wakes it."""
    set_num_threads(2)
    _run_pfill(pfill, 1000, 2, rendezvous=True)
    worker = threadpool.worker_tids()[0]
    mine, theirs = os.sched_getaffinity(0), os.sched_getaffinity(worker)
    home = min(mine)
    try:
        os.sched_setaffinity(0, {home})
        for _ in range(5):
            os.sched_setaffinity(worker, {home})
            time.sleep(0.05)  # past the spin budget: the worker sleeps, last seen on `home`
            os.sched_setaffinity(worker, theirs)
            tids = _run_pfill(pfill, 1000, 2, rendezvous=True)  # both threads take a task
            assert len(set(tids.tolist())) == 2
            assert _last_cpu(worker) != home
            assert os.sched_getaffinity(worker) == theirs  # its mask is restored
    finally:
        os.sched_setaffinity(0, mine)
        os.sched_setaffinity(worker, theirs)
