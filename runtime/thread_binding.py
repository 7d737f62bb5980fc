"""Pinning the pool's threads to CPUs (opt-in: ``bind_threads()`` or TENSORLANG_BIND_THREADS=1).

Worker i goes to the i-th allowed CPU and the launching thread to the first one (what
TVM_BIND_THREADS and OMP_PROC_BIND do). Each worker records its kernel thread id when it starts
(``tl_worker_tid``) so that ``os.sched_setaffinity`` can reach it. What was changed is kept so
that it can be undone (``unbind``) or forgotten in a fork child. The functions take the loaded
pool as an argument; ``threadpool`` holds the process's pool and the public wrappers.
"""

from __future__ import annotations

import ctypes
import os
import threading

from ._pool_ir import MAX_THREADS
from ._pool_loader import LoadedPool

# Task-function type for launching from Python (tests, benchmarks, the binding launch below).
TASK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)


class _Binding:
    """What bind changed, so that unbind (or a fork child) can undo it."""

    def __init__(self, caller_tid: int, caller_ident: int) -> None:
        self.caller_tid = caller_tid
        self.caller_ident = caller_ident  # pthread_self: the same in a fork child, unlike the tid
        self.saved: dict[int, set[int]] = {}  # kernel tid -> affinity before binding
        self.mapping: dict[int, int] = {}  # kernel tid -> CPU


_binding: _Binding | None = None
_bind_lock = threading.Lock()


@TASK_FN
def _noop_task(task: int, num_tasks: int, closure: int) -> int:
    return 0


def is_bound() -> bool:
    """Whether threads are pinned now (by bind, not undone since)."""
    return _binding is not None


def worker_tids(p: LoadedPool) -> list[int]:
    """Kernel thread ids of the started workers of ``p`` (slots 1.., the caller excluded)."""
    if p.worker_tid is None:
        return []
    tids = (p.worker_tid(i) for i in range(1, MAX_THREADS))
    return [t for t in tids if t != 0]


def _unbind_locked() -> None:
    global _binding
    b, _binding = _binding, None
    if b is None:
        return
    for tid, cpus in b.saved.items():
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass  # the thread has exited: nothing to restore


def _pin(targets: list[tuple[int, int]], b: _Binding) -> None:
    for tid, cpu in targets:
        try:
            before = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {cpu})
        except OSError:
            continue  # a CPU outside our cgroup/cpuset: leave that thread as it was
        b.saved[tid] = before
        b.mapping[tid] = cpu


def bind(p: LoadedPool, cpus: list[int] | None = None) -> dict[int, int]:
    """Pin the calling thread and the workers of ``p``; see ``threadpool.bind_threads``."""
    global _binding
    if not hasattr(os, "sched_setaffinity"):
        return {}
    with _bind_lock:
        _unbind_locked()  # so that the default CPU set is the one from before any binding
        try:
            allowed = sorted(os.sched_getaffinity(0)) if cpus is None else [int(c) for c in cpus]
        except OSError:
            return {}
        if len(allowed) < 2 or p.get_num_threads() < 2 or p.worker_tid is None:
            return {}
        # One launch over the whole pool creates every worker and, by the time it returns, each
        # has published its id (it takes part in the launch only after doing so).
        p.launch(ctypes.cast(_noop_task, ctypes.c_void_p).value, None, 0)
        caller = threading.get_native_id()
        b = _Binding(caller, threading.get_ident())
        targets = [(caller, allowed[0])]
        for i in range(1, p.get_num_threads()):
            tid = int(p.worker_tid(i))
            if tid:
                targets.append((tid, allowed[i % len(allowed)]))
        _pin(targets, b)
        _binding = b
        return dict(b.mapping)


def unbind() -> None:
    """Give every thread bind pinned the affinity it had before; no-op if none."""
    with _bind_lock:
        _unbind_locked()


def forget_in_fork_child() -> None:
    """In a fork child: drop the parent's binding, unpinning the forking thread if it was the
    pinned launcher."""
    global _binding
    b, _binding = _binding, None
    if b is not None and b.caller_tid in b.saved and threading.get_ident() == b.caller_ident:
        # The forking thread was the pinned launcher: left pinned, it would pin every worker
        # the child creates (threads inherit their creator's affinity) to the same CPU, i.e.
        # run the child's parallel regions serially. The other ids in the mapping are the
        # parent's threads and name nothing here.
        try:
            os.sched_setaffinity(0, b.saved[b.caller_tid])
        except OSError:
            pass
