"""The code follows ruff's defaults at 100 columns (pyproject.toml); CI installs ruff with the
test extra."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_is_clean():
    proc = subprocess.run(["ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
