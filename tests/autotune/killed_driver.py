"""A tuning driver killed mid-run, as a crash or `kill -9` would: shared by the resume tests
of the task scheduler and of the dask measurement (records are streamed per candidate)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path


def kill_after_first_record(cmd: list[str], log: Path, seconds: float = 90) -> str:
    """Start `cmd`, SIGKILL it as soon as its log holds one whole record; the log's text."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_text().count("\n") >= 1:
            break
        time.sleep(0.005)
    assert proc.poll() is None, proc.communicate()[0].decode()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return log.read_text()
