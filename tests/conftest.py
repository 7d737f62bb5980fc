"""Suite-wide test settings.

One kernel cache for the whole run: every cache of tensorlang (compiled kernels and libraries,
the thread pool, target probes, the graph kernel cache) lives under ``runtime._cache.cache_dir()``,
which is ``$TENSORLANG_CACHE_DIR`` when set. The suite sets it to a fresh temporary directory
before collection (test modules may build at import time), so it never writes into the user's
``~/.cache`` and its time and results do not depend on what is there. Subprocesses the tests
start (tuning workers, fresh-interpreter checks) inherit it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

_CACHE_ENV = "TENSORLANG_CACHE_DIR"
_saved: dict[str, str | None] = {}


def pytest_configure(config: pytest.Config) -> None:
    _saved["old"] = os.environ.get(_CACHE_ENV)
    _saved["dir"] = tempfile.mkdtemp(prefix="tl-test-cache-")
    os.environ[_CACHE_ENV] = _saved["dir"]


def pytest_unconfigure(config: pytest.Config) -> None:
    if "dir" not in _saved:
        return
    old = _saved.pop("old")
    if old is None:
        os.environ.pop(_CACHE_ENV, None)
    else:
        os.environ[_CACHE_ENV] = old
    shutil.rmtree(_saved.pop("dir"), ignore_errors=True)



@pytest.fixture(scope="module", autouse=True)
def _cpu_share_of_module(request: pytest.FixtureRequest):
    """Under pytest-xdist, a module marked ``cpus_to_itself`` runs alone: its tests hold an
    exclusive lock on one file of the run (taken once for the module: it waits for the test
    running in the other process to end, and a lock per test waited once per test), every
    other test a shared one (_cpu_share)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or not _marked(request.node):
        yield
        return
    with _cpu_lock(run, fcntl.LOCK_EX):
        yield


@pytest.fixture(autouse=True)
def _cpu_share(request: pytest.FixtureRequest):
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or _marked(request.node.getparent(pytest.Module)):
        yield  # not under xdist, or the module holds the exclusive lock
        return
    with _cpu_lock(run, fcntl.LOCK_EX if _marked(request.node) else fcntl.LOCK_SH):
        yield


def _marked(node) -> bool:
    return node is not None and node.get_closest_marker("cpus_to_itself") is not None


@contextlib.contextmanager
def _cpu_lock(run: str, how: int):
    with open(Path(tempfile.gettempdir()) / f"tl-test-cpus-{run}.lock", "a") as lock:
        fcntl.flock(lock, how)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
