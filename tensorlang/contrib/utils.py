"""``tvm.contrib.utils``: ``tempdir()``, a temporary folder for exported modules."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Self

__all__ = ["TempDirectory", "tempdir"]


class TempDirectory:
    """A temporary folder, removed when the object goes (or on ``remove()``), as TVM's."""

    def __init__(self, custom_path: str | os.PathLike | None = None, keep_for_debug=False):
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(os.fspath(custom_path))
            self._owned = False
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="tensorlang-")
            self._owned = not keep_for_debug

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the folder."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        """The names of the files in the folder."""
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        """Delete the folder now (only one this object made)."""
        if self._owned and self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter shutdown
            self.remove()


def tempdir(custom_path=None, keep_for_debug=None) -> TempDirectory:
    """TVM's ``tvm.contrib.utils.tempdir()``."""
    return TempDirectory(custom_path, keep_for_debug=bool(keep_for_debug))
