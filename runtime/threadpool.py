"""A persistent worker pool, written in LLVM IR, that generated kernels launch parallel loops on.

Why LLVM IR rather than Python threads or OpenMP: it needs nothing but the process's libc
(``pthread_create``, ``syscall``), is compiled once per machine into a tiny shared library, and
launches an empty parallel region in well under a microsecond from native code, where Python
threads calling ctypes cost 17-60 us per launch.

C interface (the symbols of the library)::

    int32_t tl_parallel_launch(int32_t (*fn)(int32_t task_id, int32_t num_tasks, void *closure),
                               void *closure, int32_t num_tasks);
    void    tl_set_num_threads(int32_t n);     /* n <= 0: back to the default (online CPUs) */
    int32_t tl_get_num_threads(void);
    void    tl_set_spin_cycles(int64_t cycles); /* how long idle threads spin before sleeping */
    void    tl_pool_after_fork(void);          /* forget the parent's workers in a fork child */
    int64_t tl_worker_tid(int32_t i);          /* kernel tid of worker i >= 1; 0: not started */
    int32_t tl_time_calls(void *kernel, const int64_t *args, int32_t nargs, int64_t number,
                          int64_t *elapsed_ns);  /* native timing loop, see ir/timing.ll */
    int32_t tl_time_calls_woken(...);          /* the same, after an empty parallel region
                                                  that every worker takes (ir/threadpool.ll) */

Semantics of ``tl_parallel_launch``: runs ``fn(t, num_tasks, closure)`` exactly once for every
``t`` in ``[0, num_tasks)``; ``num_tasks <= 0`` means "the pool size". Task 0 runs on the calling
thread, the other tasks are handed out dynamically (an atomic counter) to the calling thread and
``min(pool size, num_tasks) - 1`` workers, so a worker descheduled on a busy machine cannot hold
the others up for more than the task it has taken. Returns 0, or the first nonzero value a task
returned. A launch that finds the pool busy -- a nested launch from inside a task, or a launch
from a second application thread -- runs all of its tasks serially on its own thread: no
deadlock, same results.

How the workers wait: each worker owns a 64-byte slot holding a generation counter, a
"sleeping" flag and a copy of the job (function, closure, task count), so one cache-line
transfer both wakes a spinning worker and hands it the job. A worker remembers the generation it
last served and waits for a new one in three phases: ~2 us of ``pause`` spinning, then
``sched_yield`` polling (so that on an oversubscribed machine the thread it shares a CPU with
gets to run) until a budget of ``DEFAULT_SPIN_CYCLES`` TSC cycles (~100 us) is spent, then it sets
"sleeping" and sleeps on the counter with ``futex(FUTEX_WAIT_PRIVATE)``. The launcher copies the
job into each participating worker's slot, bumps its generation and issues
``futex(FUTEX_WAKE_PRIVATE)`` only for workers that are asleep (Dekker-style: both sides store,
then load, with sequentially consistent atomics, so a wake-up is never lost). Workers beyond the
participants of a launch are never touched. The launcher waits for completion in the same three
phases, on the counter of workers still busy. Nothing ever spins unboundedly: on two shared
cores that would starve everything else.

The library is compiled once per machine (per pool IR version) for the architecture's baseline
CPU, linked with ``ld -shared`` and cached next to the kernels; it ships inside artifacts so that
loading one never needs llvmlite. A fork child resets the pool (``os.register_at_fork``) and
creates fresh workers at its first launch.

A worker never shares a CPU with its launcher for long: after the process has idled, the
kernel's scheduler tends to wake a sleeping worker on the CPU of the thread that wakes it, and
the two then take turns on one vCPU while the other idles, every parallel region at half speed
for milliseconds (measured: after 0.2 s pauses, 34-37 of 40 rounds of eight 512^3 matmul calls
ran at half speed, median call 1.13 ms). The launcher records its CPU (``sched_getcpu``) with
each job; a worker that starts the job on that CPU narrows its own CPU mask to exclude it,
which migrates it at once, and restores the mask (0 of 40 rounds, median 0.61-0.64 ms; about
15 ns more per launch).

Thread binding (opt-in: ``bind_threads()`` or ``TENSORLANG_BIND_THREADS=1``) pins worker i to
the i-th allowed CPU and the launching thread to the first one (``thread_binding``).

Where things are: the IR is in ``runtime/ir/*.ll`` (read by ``_pool_ir``), compiled and cached
by ``_pool_build``, loaded and bound with ctypes by ``_pool_loader``, configured from the
environment by ``_pool_env``; this module holds the process's pool, its fork handling and the
public functions.
"""

from __future__ import annotations

import ctypes
import os
import threading

from . import _pool_env, _pool_loader, thread_binding
from ._pool_ir import (
    DEFAULT_SPIN_CYCLES,
    MAX_THREADS,
    MAX_TIMED_ARGS,
    PURE_SPIN_CYCLES,
    machine,
    pool_ir,
)
from ._pool_loader import LoadedPool, PoolUnavailable
from .thread_binding import TASK_FN

__all__ = [
    "DEFAULT_SPIN_CYCLES",
    "MAX_THREADS",
    "MAX_TIMED_ARGS",
    "PURE_SPIN_CYCLES",
    "TASK_FN",
    "PoolUnavailable",
    "bind_threads",
    "get_num_threads",
    "get_spin_cycles",
    "launch_address",
    "machine",
    "parallel_launch",
    "pool",
    "pool_ir",
    "set_num_threads",
    "set_spin_cycles",
    "shared_library_bytes",
    "time_calls",
    "unbind_threads",
    "worker_tids",
]

_pool: LoadedPool | None = None
_pool_lock = threading.Lock()
_spin_cycles = DEFAULT_SPIN_CYCLES  # the last set_spin_cycles (the library has no getter)


def _after_fork_in_child() -> None:
    if _pool is not None:
        _pool.after_fork()
    thread_binding.forget_in_fork_child()


def pool(shipped_library: bytes | None = None) -> LoadedPool:
    """The process's pool, loaded (and on first use on this machine, compiled) on demand.

    ``shipped_library`` is a pool library carried by an artifact, used when this machine has
    no cached copy so that loading an artifact never needs llvmlite.
    """
    global _pool
    if _pool is None:
        bind = False
        with _pool_lock:
            if _pool is None:
                bind = _pool_env.bind_from_env()  # first: a bad value must not half-load the pool
                from ._llvm import LLVMCompileError

                try:
                    p = _pool_loader.load(shipped_library)
                except (ImportError, OSError, RuntimeError, LLVMCompileError) as e:
                    raise PoolUnavailable(f"the tensorlang thread pool is unavailable: {e}") from e
                p.set_num_threads(_pool_env.default_num_threads())
                _pool = p
                if hasattr(os, "register_at_fork"):
                    # A fork child has no workers: without this its first launch would wait
                    # forever for the parent's.
                    os.register_at_fork(after_in_child=_after_fork_in_child)
        if bind:
            # outside the lock: binding launches on the pool
            bind_threads()
    return _pool


def launch_address() -> int:
    """Address of ``tl_parallel_launch``: what a kernel's ``@__tl_parallel_launch`` must hold."""
    return pool().addresses["tl_parallel_launch"]


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (the calling one included) for later parallel launches."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads expects an int, got {type(n).__name__}")
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"set_num_threads expects 1 <= n <= {MAX_THREADS}, got {n}")
    pool().set_num_threads(n)


def get_num_threads() -> int:
    """Number of threads (the calling one included) a parallel launch uses."""
    return int(pool().get_num_threads())


def set_spin_cycles(cycles: int) -> None:
    """How long (TSC cycles) idle threads spin before sleeping; 0 sleeps at once."""
    global _spin_cycles
    if cycles < 0:
        raise ValueError(f"spin cycles must be >= 0, got {cycles}")
    pool().set_spin_cycles(int(cycles))
    _spin_cycles = int(cycles)


def get_spin_cycles() -> int:
    """The idle threads' spin budget (TSC cycles) that set_spin_cycles last set, else the
    default."""
    return _spin_cycles


def shared_library_bytes() -> bytes | None:
    """The pool's linked library, for shipping inside an artifact (None if it was JIT-loaded)."""
    # the library actually loaded, not the cache path of now: the cache directory may have
    # changed or been emptied since (TENSORLANG_CACHE_DIR), and the loaded copy is what runs
    return pool().library_bytes


def time_calls(fn_address: int, args: list[int], number: int,
               woken: bool = False) -> tuple[float, int]:
    """Call the kernel at ``fn_address`` ``number`` times with ``args`` (pointers and i64s, as
    ints) in a native loop. Returns (elapsed seconds, first nonzero return code or 0).

    ``woken``: first, untimed, an empty parallel region that every worker of the pool takes,
    so that the timed calls find the workers on their CPUs as a kernel launched right after
    another finds them (what a measurement that evicts the caches before each call needs: see
    tl_time_calls_woken in ir/threadpool.ll). A pool library shipped by an older artifact lacks
    it; timing then starts without it."""
    if len(args) > MAX_TIMED_ARGS:
        raise ValueError(f"native timing supports at most {MAX_TIMED_ARGS} kernel arguments")
    arr = (ctypes.c_int64 * max(1, len(args)))(*[ctypes.c_int64(a).value for a in args])
    elapsed = ctypes.c_int64(0)
    p = pool()
    loop = p.time_calls_woken if woken and p.time_calls_woken is not None else p.time_calls
    rc = loop(fn_address, arr, len(args), number, ctypes.byref(elapsed))
    if rc == -1:
        raise RuntimeError("tl_time_calls refused the argument count")
    return elapsed.value * 1e-9, int(rc)


def parallel_launch(fn_address: int, closure: int, num_tasks: int) -> int:
    """Call ``tl_parallel_launch`` from Python; returns its result code."""
    return int(pool().launch(fn_address, closure, num_tasks))


def worker_tids() -> list[int]:
    """Kernel thread ids of the started workers (pool slots 1.., the caller excluded)."""
    return thread_binding.worker_tids(pool())


def bind_threads(cpus: list[int] | None = None) -> dict[int, int]:
    """Pin the calling thread to the first CPU of ``cpus`` and pool worker i (i = 1..n-1) to the
    i-th (0-based, wrapping if there are more workers than CPUs); ``cpus`` defaults to the
    calling thread's allowed set, in ascending order. Returns {kernel thread id: CPU}.

    Undo with unbind_threads(); a second call first undoes the first. Launch parallel regions
    from the thread that called this: another thread is not pinned and may share a worker's
    CPU. Workers created later (a larger set_num_threads) inherit the caller's CPU: call this
    again after growing the pool. A no-op returning {} where there is nothing to spread (one
    CPU, a one-thread pool) or no way to (no sched_setaffinity, a pool library without
    tl_worker_tid).
    """
    if not hasattr(os, "sched_setaffinity"):
        return {}
    return thread_binding.bind(pool(), cpus)


def unbind_threads() -> None:
    """Give every thread bind_threads pinned the affinity it had before; no-op if none."""
    thread_binding.unbind()
