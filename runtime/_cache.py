"""The on-disk cache directory shared by the kernel compiler and the runtime.

Kernel objects, linked shared libraries and the thread pool all live in one directory:
``$TENSORLANG_CACHE_DIR`` when set, else ``~/.cache/tensorlang/kernels``. Every file is written
atomically (temporary file in the same directory, then ``os.replace``) so that concurrent builder
processes, which the tuner runs, never see a half-written file. File names are content hashes,
so two processes racing to write the same entry write identical bytes.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
_resolved: dict[str, Path] = {}


def cache_dir() -> Path:
    """The cache directory, created on first use.

    When the configured directory cannot be created or written (read-only home, sandbox), a
    private temporary directory is used for the life of the process instead: the cache is a
    speed-up, never a reason to fail.
    """
    configured = os.environ.get("TENSORLANG_CACHE_DIR") or str(
        Path.home() / ".cache" / "tensorlang" / "kernels"
    )
    with _lock:
        found = _resolved.get(configured)
        if found is not None:
            return found
        # "~/x" (quoted in a shell) made a folder named "~" in the working directory, and a
        # relative path moved with os.chdir: the folder is resolved once, absolute
        path = Path(configured).expanduser().absolute()
        try:
            path.mkdir(parents=True, exist_ok=True)
            if not os.access(path, os.W_OK | os.X_OK):
                raise PermissionError(f"{path} is not writable")
        except OSError:
            path = Path(tempfile.mkdtemp(prefix="tensorlang-cache-"))
        _resolved[configured] = path
        return path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either nothing or the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
