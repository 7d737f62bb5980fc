"""Loading the thread pool's library and binding its C functions with ctypes.

Where the code comes from, in order: this machine's cached library; a library shipped inside an
artifact (so that loading one never needs llvmlite); else the pool is compiled here
(``_pool_build``) and linked with the system linker, or, without a linker, loaded into the ORC
JIT.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path
from typing import Any

from ._elf_check import is_whole_elf
from ._link import LinkError, link_shared, linker_command, store_shared_library
from ._pool_build import library_path, pool_object

EXPORTS = [
    "tl_parallel_launch",
    "tl_set_num_threads",
    "tl_get_num_threads",
    "tl_set_spin_cycles",
    "tl_pool_after_fork",
    "tl_time_calls",
]
OPTIONAL_EXPORTS = ["tl_worker_tid", "tl_time_calls_woken"]


class PoolUnavailable(RuntimeError):
    """The pool cannot be built or loaded here (unsupported architecture, no cached copy and
    no llvmlite to compile one, a linker or loader failure)."""


class LoadedPool:
    """The loaded pool: its C functions as ctypes callables, and what keeps the code mapped."""

    def __init__(self, addresses: dict[str, int], keepalive: Any, how: str) -> None:
        self.addresses = addresses
        self.keepalive = keepalive  # the CDLL or the JIT resource tracker: never released
        self.how = how
        self.library_path: Path | None = None  # the .so it was loaded from, if any
        # its bytes, read when loaded (~27 KB, once per process): artifacts ship them even after
        # the cache directory that held the file was emptied
        self.library_bytes: bytes | None = None
        proto = ctypes.CFUNCTYPE
        self.launch = proto(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)(
            addresses["tl_parallel_launch"]
        )
        self.set_num_threads = proto(None, ctypes.c_int32)(addresses["tl_set_num_threads"])
        self.get_num_threads = proto(ctypes.c_int32)(addresses["tl_get_num_threads"])
        self.set_spin_cycles = proto(None, ctypes.c_int64)(addresses["tl_set_spin_cycles"])
        self.after_fork = proto(None)(addresses["tl_pool_after_fork"])
        # Optional: a pool library shipped by an artifact of an older version lacks it, and is
        # still good for running kernels; binding is then unavailable (bind_threads: no-op).
        tid_addr = addresses.get("tl_worker_tid")
        self.worker_tid = proto(ctypes.c_int64, ctypes.c_int32)(tid_addr) if tid_addr else None
        timing = proto(
            ctypes.c_int32,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int32,
            ctypes.c_int64,
            ctypes.POINTER(ctypes.c_int64),
        )
        self.time_calls = timing(addresses["tl_time_calls"])
        # Optional too (older shipped libraries lack it): the same loop after an empty parallel
        # region that has every worker run first (threadpool.time_calls(woken=True))
        woken_addr = addresses.get("tl_time_calls_woken")
        self.time_calls_woken = timing(woken_addr) if woken_addr else None


def load_shared(path: Path) -> LoadedPool:
    """The pool in the shared library at ``path``, opened with ctypes."""
    lib = ctypes.CDLL(str(path))
    addrs = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in EXPORTS}
    for name in OPTIONAL_EXPORTS:
        if hasattr(lib, name):
            addrs[name] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    p = LoadedPool(addrs, lib, f"shared library {path}")  # type: ignore[arg-type]
    p.library_path = path
    p.library_bytes = path.read_bytes()
    return p


def load(shipped_library: bytes | None = None) -> LoadedPool:
    """Load the pool from the first source that works (see the module docstring)."""
    path = library_path()
    if is_whole_elf(path):  # (else missing, or cut short: rebuilt below)
        return load_shared(path)
    if shipped_library is not None:
        # An artifact carried a pool library: use it rather than needing llvmlite here. It is
        # stored under its own content hash, not this version's IR hash: it may come from
        # another (ABI-compatible) version of the pool.
        try:
            return load_shared(store_shared_library(shipped_library, prefix="tl_pool-shipped"))
        except (OSError, AttributeError):
            pass  # unusable here: build our own below
    obj = pool_object()
    if linker_command() is not None:
        try:
            link_shared(obj, path)
            return load_shared(path)
        except (OSError, LinkError, subprocess.SubprocessError):
            pass  # a cache directory that cannot take the library (full, read-only): the JIT
    from . import _llvm

    tracker, addrs = _llvm.jit_load_object(obj, EXPORTS + OPTIONAL_EXPORTS)
    return LoadedPool(addrs, tracker, "ORC JIT")
