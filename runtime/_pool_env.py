"""The thread pool's configuration from the environment, read when the pool is first loaded.

``TENSORLANG_NUM_THREADS`` (a positive integer; default: the CPUs this process may run on) and
``TENSORLANG_BIND_THREADS`` (0/1; pin workers to CPUs, see ``thread_binding``). A bad value
raises ValueError naming the variable, before anything is loaded.
"""

from __future__ import annotations

import os

from ._pool_ir import MAX_THREADS


def default_num_threads() -> int:
    """The pool size to start with: TENSORLANG_NUM_THREADS, else the CPUs we may run on."""
    env = os.environ.get("TENSORLANG_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"TENSORLANG_NUM_THREADS must be a positive integer, got {env!r}")
        return min(n, MAX_THREADS)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))


def bind_from_env() -> bool:
    """Whether TENSORLANG_BIND_THREADS asks for pinned threads."""
    env = os.environ.get("TENSORLANG_BIND_THREADS", "").strip().lower()
    if env in ("", "0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"TENSORLANG_BIND_THREADS must be 0 or 1, got {env!r}")
