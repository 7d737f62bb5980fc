"""Saving a model as a folder: written whole beside its path, then moved into place, replacing
only what tensorlang saved there before.

A save replaces the folder whole, so anything else at the path (a user's folder, a file, the
ONNX model being compiled) would be lost: it is refused instead."""

from __future__ import annotations

import json
import os
import shutil
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
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def check_replaceable(path: str | os.PathLike) -> None:
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if path.is_dir() and not path.is_symlink():
        if not any(path.iterdir()) or saved_kind(path) in (GRAPH_KIND, PROGRAM_KIND):
            return
        what = "a folder that tensorlang did not save"
    else:
        what = "a file" if path.is_file() else "not a folder"
    raise FileExistsError(f"{path} is {what}: not replaced by the saved model (save to a new "
                          "path, or remove it first)")


def saved_kind(path: str | os.PathLike) -> str | None:
    """The manifest kind of a folder tensorlang saved; None for anything else."""
    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return manifest.get("kind") if isinstance(manifest, dict) else None
