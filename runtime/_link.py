"""Linking object code into a shared library that ``ctypes.CDLL`` loads without llvmlite.

``ld -shared`` takes ~3 ms, ``cc -shared`` ~46 ms; either gives a library that loads in ~0.3 ms.
Libraries are content-addressed in the cache directory, so relinking the same object is free
and concurrent processes agree on the file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ._cache import cache_dir
from ._elf_check import is_whole_elf

_linker_cmd: list[str] | None | bool = False  # False: not looked up yet


class LinkError(RuntimeError):
    """The system linker refused an object file."""


def linker_command() -> list[str] | None:
    """The command prefix that links objects into a shared library, or None without a linker."""
    global _linker_cmd
    if _linker_cmd is False:
        ld = shutil.which("ld")
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if ld:
            # -Bsymbolic binds a library's references to its own definitions (its
            # __tl_parallel_launch slot, its helper functions), so libraries loaded earlier
            # can never interpose on them.
            _linker_cmd = [ld, "-shared", "-Bsymbolic", "-z", "noexecstack"]
        elif cc:
            _linker_cmd = [cc, "-shared", "-Wl,-Bsymbolic", "-Wl,-z,noexecstack"]
        else:
            _linker_cmd = None
    return _linker_cmd  # type: ignore[return-value]


def link_shared(object_code: bytes, out: Path) -> None:
    """Link ``object_code`` into the shared library ``out`` (written atomically)."""
    cmd = linker_command()
    if cmd is None:
        raise LinkError("no linker (ld or cc) found on PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tl-link-") as tmp:
        obj = os.path.join(tmp, "kernel.o")
        so = os.path.join(tmp, "kernel.so")
        with open(obj, "wb") as f:
            f.write(object_code)
        proc = subprocess.run(
            [*cmd, "-o", so, obj], capture_output=True, text=True, timeout=120, check=False
        )
        if proc.returncode != 0:
            raise LinkError(
                f"linking with {' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}"
            )
        fd, staged = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
        os.close(fd)
        shutil.copyfile(so, staged)
        os.replace(staged, out)


def cached_shared_library(object_code: bytes, prefix: str = "k") -> Path | None:
    """The cached shared library made from ``object_code``, linking it on first use.

    Returns None when there is no linker (the caller then falls back to the JIT).
    """
    if linker_command() is None:
        return None
    digest = hashlib.sha256(object_code).hexdigest()[:40]
    path = cache_dir() / "lib" / f"{prefix}-{digest}.so"
    if not is_whole_elf(path):  # missing, or cut short: (re)link
        link_shared(object_code, path)
    return path


def store_shared_library(so_bytes: bytes, prefix: str = "a") -> Path:
    """Put an already-linked library (from an artifact) in the cache; returns its path."""
    from ._cache import atomic_write

    digest = hashlib.sha256(so_bytes).hexdigest()[:40]
    path = cache_dir() / "lib" / f"{prefix}-{digest}.so"
    if not is_whole_elf(path):  # missing, or cut short: (re)write
        atomic_write(path, so_bytes)
    return path
