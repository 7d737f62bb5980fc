"""Compiling the thread pool (``_pool_ir``) into an object file and where its builds are cached.

The object is compiled once per machine and pool IR version, for the architecture's baseline
CPU, and cached next to the kernels (``_cache``); the linked library beside it is what the
loader (``_pool_loader``) opens. llvmlite is imported only to compile, on a machine that has no
cached copy.
"""

from __future__ import annotations

from pathlib import Path

from ._cache import atomic_write, cache_dir
from ._elf_check import is_whole_elf
from ._pool_ir import machine, pool_ir, pool_key


def object_path() -> Path:
    """Where this machine's compiled pool object is cached."""
    return cache_dir() / "lib" / f"tl_pool-{pool_key()}.o"


def library_path() -> Path:
    """Where this machine's linked pool library is cached."""
    return cache_dir() / "lib" / f"tl_pool-{pool_key()}.so"


def pool_object() -> bytes:
    """The pool compiled to a portable object file (cached on disk).

    Compiled for the architecture's baseline CPU, not the host's: the pool does no arithmetic
    worth specializing, and a baseline object can ship inside artifacts for any machine of the
    same architecture.
    """
    path = object_path()
    if is_whole_elf(path):  # (else missing, or cut short: compiled again)
        return path.read_bytes()
    from . import _llvm

    llvm = _llvm.binding()
    triple = llvm.get_process_triple()
    cpu = "x86-64" if machine() == "x86_64" else "generic"
    obj, _, _ = _llvm.compile_ir_text(pool_ir(), cpu, "", triple, opt_level=2)
    try:
        atomic_write(path, obj)
    except OSError:
        pass  # a cache directory that cannot take it (full, read-only): compiled again next time
    return obj
