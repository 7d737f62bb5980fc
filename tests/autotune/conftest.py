from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# the test templates live in a plain module that the builder processes import by name
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session", autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """Keep the tests' compiled kernels out of the user's cache (builder processes inherit it)."""
    path = tmp_path_factory.mktemp("tl-cache")
    old = os.environ.get("TENSORLANG_CACHE_DIR")
    os.environ["TENSORLANG_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("TENSORLANG_CACHE_DIR", None)
    else:
        os.environ["TENSORLANG_CACHE_DIR"] = old
