"""CI runs the tutorials: each must finish quickly and check its own results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tutorial_01_compute_and_schedule():
    r = subprocess.run([sys.executable, str(ROOT / "tutorials/01_compute_and_schedule.py"),
                        "--size", "96"], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    out = r.stdout
    assert "results match numpy" in out
    assert "parallel for i.outer" in out and "ramp(" in out  # the scheduled IR was printed
    assert "s[C.local].compute_at" in out  # and the recorded steps
    assert "GFLOP/s" in out
