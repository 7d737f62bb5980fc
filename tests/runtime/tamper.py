"""Damage artifacts the ways files get damaged (and adversaries damage them), and classify what
loading them does. Used by the tamper tests, which run it in a subprocess: a damaged artifact
that crashes the interpreter then fails the test instead of killing the test run.

Every damaged artifact must either be refused with ArtifactError or load and compute exactly
what the intact one computes (a flipped byte in a zip timestamp changes nothing). Anything else
-- another exception type, a wrong result, a crash -- is a failure.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from tensorlang.runtime import ArtifactError


def flip_positions(size: int, count: int) -> list[int]:
    """About ``count`` byte positions spread over a file of ``size`` bytes, the first and last
    bytes included."""
    if size == 0:
        return []
    step = max(1, size // count)
    return sorted(set(range(0, size, step)) | {size - 1})


def truncation_points(size: int) -> list[int]:
    return sorted({0, 1, 10, size // 4, size // 2, max(0, size - 22), max(0, size - 1)})


def file_damage(path: Path, flips: int) -> Iterator[tuple[str, Callable[[], None]]]:
    """(label, action) pairs, each damaging file ``path`` one way; the caller restores it."""
    data = path.read_bytes()

    def write(blob: bytes) -> Callable[[], None]:
        return lambda: path.write_bytes(blob)

    for pos in flip_positions(len(data), flips):
        flipped = bytearray(data)
        flipped[pos] ^= 0x55
        yield f"{path.name}: byte {pos} flipped", write(bytes(flipped))
    for n in truncation_points(len(data)):
        yield f"{path.name}: truncated to {n} bytes", write(data[:n])

    def to_directory() -> None:
        path.unlink()
        path.mkdir()

    yield f"{path.name}: a directory instead", to_directory
    yield f"{path.name}: deleted", path.unlink


def restore(path: Path, original: bytes) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    path.write_bytes(original)


class Tally:
    """Outcomes by kind; ``bad`` lists every case that was neither refused nor identical."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.bad: list[str] = []

    def run(self, label: str, load: Callable[[], object], check: Callable[[object], bool]) -> None:
        # the label goes out first: if this case kills the process, the test shows which
        sys.stderr.write(f"case: {label}\n")
        sys.stderr.flush()
        try:
            loaded = load()
        except ArtifactError:
            self.counts["refused"] += 1
            return
        except Exception as e:  # noqa: BLE001 - this is what the test looks for
            self.bad.append(f"{label}: {type(e).__name__}: {e}")
            return
        try:
            same = check(loaded)
        except Exception as e:  # noqa: BLE001
            self.bad.append(f"{label}: loaded, then running raised {type(e).__name__}: {e}")
            return
        if same:
            self.counts["identical"] += 1
        else:
            self.bad.append(f"{label}: loaded and gave a WRONG result")

    def report(self) -> None:
        print(json.dumps({"counts": dict(self.counts), "bad": self.bad}))


def same_arrays(got: dict, expected: dict) -> bool:
    return got.keys() == expected.keys() and all(
        np.array_equal(got[k], expected[k]) for k in expected)
