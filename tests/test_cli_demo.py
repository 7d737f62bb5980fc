"""The README's main job: `tensorlang demo` tunes, deploys from the log and checks the result."""

import subprocess
import sys


def test_demo_tunes_deploys_and_checks(tmp_path):
    log = tmp_path / "demo.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "tensorlang.cli", "demo", "--size", "64", "--trials", "4",
         "--log", str(log)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "deployed the best schedule" in proc.stdout
    assert "max relative error" in proc.stdout
    assert len(log.read_text().splitlines()) >= 4  # every trial was logged
