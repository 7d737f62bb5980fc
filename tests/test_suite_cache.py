"""The suite compiles into its own temporary kernel cache (tests/conftest.py), never the user's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tensorlang.runtime._cache import cache_dir


def test_the_kernel_cache_is_the_suites_temporary_directory():
    configured = Path(os.environ["TENSORLANG_CACHE_DIR"])
    assert configured.name.startswith("tl-test-cache-")
    assert cache_dir() == configured
    assert Path.home() / ".cache" not in configured.parents


def test_subprocesses_inherit_it():
    code = "from tensorlang.runtime._cache import cache_dir; print(cache_dir())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, check=True)
    assert r.stdout.strip() == os.environ["TENSORLANG_CACHE_DIR"]
