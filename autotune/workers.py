"""The tuner's worker processes (builders, the measuring process, feature workers) die with the
process that started them.

A tuning run killed with SIGKILL runs no cleanup: its workers would live on, re-parented,
holding pipes and cores. Every worker is started from ``CONTEXT`` (spawn), whose processes ask
the kernel, first thing in the child, for SIGKILL when their parent dies (Linux
``prctl(PR_SET_PDEATHSIG)``; elsewhere a thread that polls the parent's pid). Two pitfalls:

- the death signal fires when the *thread* that started the child exits, not the process: a
  tuner run in a short-lived thread would take its (pooled, reused) workers with it. So
  processes are started from the main thread or from one long-lived daemon thread;
- the parent may die between the fork and the prctl: the child checks it still has the parent
  it was started by, right after asking.

Workers also ignore SIGINT: a Ctrl-C at the terminal reaches the whole process group, and the
parent stops its workers itself (they would otherwise each print a KeyboardInterrupt traceback).
A worker cannot ignore it before its own code runs, and a spawned worker first starts an
interpreter and imports (a second or more on a busy machine): a Ctrl-C then printed a traceback
per starting worker, or killed it. So a worker starts with SIGINT blocked (the signal mask, unlike
a handler, is inherited through fork and exec; multiprocessing's resource tracker is started so
too), and unblocks it once it ignores it, which discards a Ctrl-C that came meanwhile. The
starting thread blocks SIGINT only while it forks: a Ctrl-C then reaches it right after.

Workers never import the user's ``__main__``. A spawned child normally re-imports the parent's
main script first (so that functions defined there unpickle); a tuning script written as every
AutoTVM tutorial is, without an ``if __name__ == "__main__":`` guard, then ran again in every
worker -- its side effects too -- and started tuning there, which multiprocessing refuses: each
worker died and every trial was recorded as "builder process died: BrokenProcessPool". The jobs
sent to workers name only importable functions, and a template defined in a script travels by
value (``task.Template.worker_spec``), so nothing needs the user's main module.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import multiprocessing.context as mpc
import multiprocessing.spawn as mp_spawn
import os
import queue
import signal
import sys
import threading
import time
from multiprocessing import resource_tracker

from tensorlang.runtime import extern_c

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_HAS_SIGMASK = hasattr(signal, "pthread_sigmask")
_POLL_SECONDS = 1.0  # the fallback watcher's period (not Linux)


def die_with_parent(parent_pid: int) -> None:
    """Called first in a worker process: end it when process `parent_pid` (its parent) ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # discards a Ctrl-C pending since the start
    if _HAS_SIGMASK:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if not (sys.platform.startswith("linux") and _set_death_signal()):
        threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True,
                         name="tensorlang-parent-watch").start()
    if os.getppid() != parent_pid:  # the parent died before we asked: nobody would tell us
        os._exit(1)


def _set_death_signal() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_POLL_SECONDS)
    os._exit(1)


class _Starter:
    """One daemon thread that starts processes for threads that may end before them."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, fn) -> None:
        if threading.current_thread() is threading.main_thread():
            fn()  # the main thread outlives every other (the interpreter joins them first)
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name="tensorlang-process-starter")
                self._thread.start()
        done: cf.Future = cf.Future()
        self._jobs.put((fn, done))
        done.result()

    def _serve(self) -> None:
        while True:
            fn, done = self._jobs.get()
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - handed to the thread that asked
                done.set_exception(e)
            else:
                done.set_result(None)


_STARTER = _Starter()


# Set while this thread starts a worker: its preparation data then leaves out the main module.
# multiprocessing reads that data through a module-level function, the one hook there is: it is
# wrapped once, and the wrapper changes nothing for processes started by anyone else.
_starting_worker = threading.local()


def _without_main(get_preparation_data):
    def preparation_data(name):
        data = get_preparation_data(name)
        if getattr(_starting_worker, "on", False):
            data.pop("init_main_from_name", None)
            data.pop("init_main_from_path", None)
        return data

    preparation_data.tensorlang_wrapped = get_preparation_data
    return preparation_data


if not hasattr(mp_spawn.get_preparation_data, "tensorlang_wrapped"):
    mp_spawn.get_preparation_data = _without_main(mp_spawn.get_preparation_data)


class WorkerProcess(mpc.SpawnProcess):
    """A spawned process that dies with its parent and never imports the user's ``__main__``
    (see the module doc)."""

    def start(self) -> None:
        # the C libraries and C functions the parent opened (tl.load_library, register_func by
        # symbol): the worker builds and loads kernels that call them (runtime/extern_c.py)
        self._tl_extern_state = extern_c.process_state()
        _STARTER.run(self._start_without_main)

    def _start_without_main(self) -> None:
        _starting_worker.on = True
        old = None
        if _HAS_SIGMASK:
            # started first: starting it (spawn's start does, once) unblocks SIGINT on its way
            # out, whatever the mask was
            resource_tracker.ensure_running()
            # the child inherits the mask: SIGINT stays blocked there until die_with_parent
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            super().start()
        finally:
            _starting_worker.on = False
            if old is not None and signal.SIGINT not in old:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def run(self) -> None:
        die_with_parent(self._parent_pid)
        extern_c.restore_process_state(getattr(self, "_tl_extern_state", None))
        super().run()


class _WorkerContext(mpc.SpawnContext):
    Process = WorkerProcess


# the start method of every tuning worker: spawn, not fork (the parent may hold xgboost's and
# the kernel thread pool's threads, and a forked child of a multi-threaded process can deadlock
# on a lock another thread held)
CONTEXT = _WorkerContext()


def kill_pool(pool: cf.ProcessPoolExecutor | None) -> None:
    """Stop a process pool now, also when a worker hangs (shutdown alone would wait for it)."""
    if pool is None:
        return
    processes = getattr(pool, "_processes", None) or {}
    for p in list(processes.values()):
        if p.is_alive():
            p.kill()
    pool.shutdown(wait=False, cancel_futures=True)
