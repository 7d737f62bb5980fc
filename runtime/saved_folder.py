"""Saving a model as a folder: written whole beside its path, then moved into place, replacing
only what tensorlang saved there before.

A save replaces the folder whole, so anything else at the path (a user's folder, a file, the
ONNX model being compiled) would be lost: it is refused instead."""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

# the manifest kinds of GraphModule.save and Program.save
GRAPH_KIND, PROGRAM_KIND = "tensorlang-graph", "tensorlang-program"


def write_folder(path: str | os.PathLike, fill: Callable[[Path], None]) -> Path:
    """fill(folder) writes the saved model into a new folder, which then replaces ``path``;
    returns the path. Refused (FileExistsError, before anything is written) where ``path`` is
    anything but a folder saved by tensorlang or an empty folder."""
    path = Path(path)
    check_replaceable(path)
    # one name per process and thread: saves to one path from several threads shared a folder
    # (one save's files removed under another: FileNotFoundError, ENOTEMPTY; no model left)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    if tmp.exists():  # left by a killed save
        shutil.rmtree(tmp)
    try:
        tmp.mkdir(parents=True)
    except OSError as e:  # named by the path asked for, not the temporary one beside it
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        fill(tmp)
        _move_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _move_into_place(tmp: Path, path: Path) -> None:
    """``os.replace(tmp, path)``; a folder saved at ``path`` before is first renamed aside
    (atomic), then removed. Was rmtree then replace: two saves at once removed the same folder
    or replaced into one the other had just moved there (OSError, ENOTEMPTY); now the last
    save to move its folder in wins and each of them returns."""
    aside = path.with_name(f"{path.name}.old-{os.getpid()}-{threading.get_ident()}")
    for _ in range(1000):
        try:
            os.replace(tmp, path)  # path absent (or an empty folder): done
            return
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if aside.exists():
            shutil.rmtree(aside)
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            continue  # another save moved it aside first
        shutil.rmtree(aside, ignore_errors=True)
    raise OSError(f"{path}: could not replace it (other saves kept replacing it)")


def check_replaceable(path: str | os.PathLike) -> None:
    path = Path(path)
    # a save at the same path from another thread or process swaps the folder under this
    # look (renamed aside, then the new one moved in): a folder gone, or its manifest
    # unreadable, for a moment refused the save as if the user's. Refused only when it says so
    # again after that moment.
    for attempt in range(4):
        what = _not_replaceable(path)
        if what is None:
            return
        time.sleep(0.005 * attempt)
    raise FileExistsError(f"{path} is {what}: not replaced by the saved model (save to a new "
                          "path, or remove it first)")


def _not_replaceable(path: Path) -> str | None:
    """What ``path`` is, when it is something a save must not replace; else None."""
    try:
        if not path.exists() and not path.is_symlink():
            return None
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()) or saved_kind(path) in (GRAPH_KIND, PROGRAM_KIND):
                return None
            return "a folder that tensorlang did not save"
    except FileNotFoundError:  # gone while looked at
        return None
    return "a file" if path.is_file() else "not a folder"


def saved_kind(path: str | os.PathLike) -> str | None:
    """The manifest kind of a folder tensorlang saved; None for anything else."""
    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return manifest.get("kind") if isinstance(manifest, dict) else None
