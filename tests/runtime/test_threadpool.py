from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import rt_helpers as H
from tensorlang.runtime import KernelError, get_num_threads, set_num_threads, threadpool

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(
    threadpool.machine() != "x86_64", reason="test kernels use x86 intrinsics"
)


@pytest.fixture(scope="module")
def pfill():
    return H.build("pfill")


@pytest.fixture
def restore_threads():
    before = get_num_threads()
    yield
    set_num_threads(before)
    threadpool.set_spin_cycles(threadpool.DEFAULT_SPIN_CYCLES)


def _run_pfill(pfill, n, tasks, rendezvous=False, fail_task=None):
    out = np.zeros(n, np.float32)
    tids = np.zeros(tasks, np.int64)
    sync = np.array([0, int(rendezvous), 0 if fail_task is None else fail_task + 1], np.int32)
    pfill(out, tids, sync)
    np.testing.assert_array_equal(out, 2 * np.arange(n, dtype=np.float32))
    return tids


def test_default_size_is_affinity():
    if os.environ.get("TENSORLANG_NUM_THREADS"):
        pytest.skip("TENSORLANG_NUM_THREADS overrides the default")
    assert get_num_threads() == len(os.sched_getaffinity(0))


def test_launch_address_is_stable():
    assert threadpool.launch_address() == threadpool.launch_address() > 0


def test_every_task_runs_once(pfill):
    for tasks in (1, 2, 3, 7, 64):
        tids = _run_pfill(pfill, 1000, tasks)
        assert (tids != 0).all()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_two_threads_run_tasks(pfill, restore_threads):
    set_num_threads(2)
    # With the rendezvous, task 0 (on the calling thread) waits until a second task has
    # started: only a worker thread can start it.
    tids = _run_pfill(pfill, 1000, 2, rendezvous=True)
    assert len(set(tids.tolist())) == 2


def test_task_zero_runs_on_calling_thread(pfill):
    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_uint64
    tids = _run_pfill(pfill, 100, 2)
    assert tids[0] == libc.pthread_self()


def test_serial_when_one_thread(pfill, restore_threads):
    set_num_threads(1)
    assert get_num_threads() == 1
    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_uint64
    tids = _run_pfill(pfill, 1000, 5)
    assert set(tids.tolist()) == {libc.pthread_self()}


def test_set_num_threads_checks():
    with pytest.raises(ValueError, match="1 <= n <= 256"):
        set_num_threads(0)
    with pytest.raises(TypeError, match="expects an int"):
        set_num_threads(2.0)


def test_task_error_propagates(pfill):
    for tasks in (1, 2, 5):
        for fail in range(tasks):
            with pytest.raises(KernelError, match="error code 7: task asked to fail"):
                _run_pfill(pfill, 100, tasks, fail_task=fail)
    _run_pfill(pfill, 100, 3)  # the pool is fine afterwards


# 20000 launches each meet the other pool thread: with a test of the other xdist process on
# the other CPU, each waits for a time slice (0.07 s alone, 64 s so in one CI run)
@pytest.mark.cpus_to_itself
def test_many_launches(pfill):
    out = np.zeros(257, np.float32)
    tids = np.zeros(2, np.int64)
    sync = np.zeros(3, np.int32)
    for _ in range(20000):
        pfill(out, tids, sync)
    np.testing.assert_array_equal(out, 2 * np.arange(257, dtype=np.float32))


def test_the_spin_budget_reads_back_what_was_set(restore_threads):
    assert threadpool.get_spin_cycles() == threadpool.DEFAULT_SPIN_CYCLES
    threadpool.set_spin_cycles(777)
    assert threadpool.get_spin_cycles() == 777
    with pytest.raises(ValueError, match="spin cycles must be >= 0, got -1"):
        threadpool.set_spin_cycles(-1)
    assert threadpool.get_spin_cycles() == 777


def test_launches_after_workers_sleep(pfill, restore_threads):
    # No spinning: every launch must wake sleeping workers through the futex.
    threadpool.set_spin_cycles(0)
    for i in range(2000):
        _run_pfill(pfill, 64, 2)
        if i % 500 == 0:
            time.sleep(0.01)
    threadpool.set_spin_cycles(threadpool.DEFAULT_SPIN_CYCLES)
    time.sleep(0.01)  # workers go back to sleep after their spin budget
    _run_pfill(pfill, 64, 2)


def test_nested_launch_runs_serially_without_deadlock():
    nested = H.build("nested")
    for shape in ((1, 1), (2, 3), (4, 16), (16, 4)):
        out = np.zeros(shape, np.int32)
        nested(out)
        np.testing.assert_array_equal(out, np.ones(shape, np.int32))


def test_concurrent_launches_from_python_threads(pfill):
    errors = []

    def work():
        try:
            for _ in range(300):
                _run_pfill(pfill, 500, 3)
        except (AssertionError, KernelError) as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "concurrent launches hung"
    assert not errors, errors


def _run_script(code: str, env: dict | None = None, timeout: float = 120) -> str:
    prelude = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(HERE)!r})
        import rt_bootstrap
        rt_bootstrap.ensure_importable()
        """
    )
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_env_sets_default_size():
    out = _run_script(
        "from tensorlang.runtime import get_num_threads\nprint(get_num_threads())",
        env={"TENSORLANG_NUM_THREADS": "3"},
    )
    assert out.strip() == "3"


def test_bad_env_is_reported():
    code = textwrap.dedent(
        """
        from tensorlang.runtime import get_num_threads
        try:
            get_num_threads()
        except ValueError as e:
            print("ERR", e)
        """
    )
    out = _run_script(code, env={"TENSORLANG_NUM_THREADS": "lots"})
    assert "ERR TENSORLANG_NUM_THREADS must be a positive integer" in out


def test_a_cache_directory_that_cannot_take_the_pool_falls_back_to_the_jit(tmp_path):
    # the cache is a speed-up: a full or unwritable one (here lib/ is a file) made the pool
    # unavailable, every parallel kernel a LoadError and `tensorlang compile` "a bug?"
    (tmp_path / "lib").write_bytes(b"")
    code = """
        import numpy as np
        import rt_helpers as H
        from tensorlang.runtime import threadpool
        out, tids, sync = np.zeros(1000, np.float32), np.zeros(4, np.int64), np.zeros(3, np.int32)
        H.build("pfill")(out, tids, sync)
        print(threadpool.pool().how, bool((out == 2 * np.arange(1000)).all()))
        """
    assert _run_script(code, env={"TENSORLANG_CACHE_DIR": str(tmp_path)}).split() == [
        "ORC", "JIT", "True"]


# forks this multi-threaded process on purpose (what users do); Python 3.12+ warns at each
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_fork_child_gets_a_working_pool(pfill):
    _run_pfill(pfill, 100, 2)  # the parent's workers exist
    pid = os.fork()
    if pid == 0:  # child: the parent's workers do not exist here
        code = 1
        try:
            _run_pfill(pfill, 1000, 4)
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("parallel launch in a fork child hung")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0
    _run_pfill(pfill, 100, 2)  # and the parent's pool still works


def test_launch_from_python_with_callback():
    """tl_parallel_launch is callable from Python with a ctypes callback (tests, tools)."""
    seen = []
    lock = threading.Lock()

    @threadpool.TASK_FN
    def task(t, n, closure):
        with lock:
            seen.append((t, n))
        return 0

    addr = ctypes.cast(task, ctypes.c_void_p).value
    assert threadpool.parallel_launch(addr, 0, 6) == 0
    assert sorted(seen) == [(t, 6) for t in range(6)]
    seen.clear()
    assert threadpool.parallel_launch(addr, 0, 0) == 0  # 0 tasks means "pool size"
    assert sorted(seen) == [(t, get_num_threads()) for t in range(get_num_threads())]


def test_time_calls_native_loop(pfill):
    out = np.zeros(10, np.float32)
    raw = pfill.prepare_args(out, np.zeros(2, np.int64), np.zeros(3, np.int32))
    elapsed, rc = threadpool.time_calls(pfill.function_address, raw, 100)
    assert rc == 0 and elapsed > 0
    with pytest.raises(ValueError, match="at most"):
        threadpool.time_calls(pfill.function_address, [0] * 40, 1)


def _switched_in(tid: int) -> int:
    """How many times the kernel has put thread ``tid`` of this process on a CPU (schedstat's
    third field): it grows only when the thread runs, so a sleeping worker's count stays."""
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[2])


def _asleep(tid: int) -> bool:
    with open(f"/proc/self/task/{tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "S"


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs Linux schedstat")
def test_time_calls_woken_has_the_workers_run_before_the_kernel_is_called(restore_threads):
    # A flushed measurement times a kernel milliseconds after the last launch; on a shared
    # machine its workers, yielding all that time, were off their CPUs when it launched, and
    # the launch, which waits for every worker it hands the job to, took 1-7 ms for a 1.5 us
    # kernel. The woken loop has every worker take an empty job first, outside the timing.
    set_num_threads(2)
    threadpool.set_spin_cycles(0)  # a worker sleeps as soon as it has served a job

    @threadpool.TASK_FN
    def nothing(t, n, closure):
        return 0

    assert threadpool.parallel_launch(ctypes.cast(nothing, ctypes.c_void_p).value, 0, 2) == 0
    # slot 1, the one worker of a 2-thread pool (a pool started larger, as at
    # TENSORLANG_NUM_THREADS=16, keeps its other workers, idle: seen on a 16-core machine)
    worker = threadpool.worker_tids()[0]
    seen = []

    @ctypes.CFUNCTYPE(ctypes.c_int32)
    def kernel():  # what the timing loop calls: the worker's count when the kernel starts
        seen.append(_switched_in(worker))
        return 0

    address = ctypes.cast(kernel, ctypes.c_void_p).value
    for woken, ran in ((False, False), (True, True)):
        deadline = time.monotonic() + 5
        while not _asleep(worker) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert _asleep(worker)
        before = _switched_in(worker)
        seen.clear()
        elapsed, rc = threadpool.time_calls(address, [], 2, woken=woken)
        assert rc == 0 and elapsed > 0 and len(seen) == 2
        # woken: the worker ran (took the empty job) before the first timed call, not during
        assert (seen[0] > before) is ran, (woken, before, seen)


def test_time_calls_woken_with_a_pool_library_that_lacks_it(pfill, monkeypatch):
    # a pool library shipped by an older artifact has no tl_time_calls_woken: timing still works
    monkeypatch.setattr(threadpool.pool(), "time_calls_woken", None)
    out = np.zeros(10, np.float32)
    raw = pfill.prepare_args(out, np.zeros(2, np.int64), np.zeros(3, np.int32))
    elapsed, rc = threadpool.time_calls(pfill.function_address, raw, 3, woken=True)
    assert rc == 0 and elapsed > 0
    np.testing.assert_array_equal(out, 2 * np.arange(10, dtype=np.float32))
