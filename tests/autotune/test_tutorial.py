"""CI runs tutorial 02 with a tiny budget."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tutorial_02_runs_with_a_tiny_budget(tmp_path):
    env = dict(os.environ, TL_TUTORIAL_TRIALS="6", TL_TUTORIAL_SIZE="64")
    r = subprocess.run([sys.executable, str(ROOT / "tutorials/02_autotune_matmul.py"),
                        "--log", str(tmp_path / "t.jsonl")], env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "deployed kernel" in r.stdout
    assert "trial" in r.stderr  # the progress bar
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 6
