"""Suite-wide test settings.

One kernel cache for the whole run: every cache of tensorlang (compiled kernels and libraries,
the thread pool, target probes, the graph kernel cache) lives under ``runtime._cache.cache_dir()``,
which is ``$TENSORLANG_CACHE_DIR`` when set. The suite sets it to a fresh temporary directory
before collection (test modules may build at import time), so it never writes into the user's
``~/.cache`` and its time and results do not depend on what is there. Subprocesses the tests
start (tuning workers, fresh-interpreter checks) inherit it.
"""

from __future__ import annotations

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



@pytest.fixture(autouse=True)
def _cpu_share(request: pytest.FixtureRequest):
    """Under pytest-xdist, a test marked ``cpus_to_itself`` runs alone: every test holds a
    shared lock on one file of the run, such a test an exclusive one (it waits for the tests
    running in the other processes to end, and they wait for it)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        yield
        return
    exclusive = request.node.get_closest_marker("cpus_to_itself") is not None
    with open(Path(tempfile.gettempdir()) / f"tl-test-cpus-{run}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
