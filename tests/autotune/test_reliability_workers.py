"""Issue 15: the tuner's worker processes (builders, the measuring process, feature workers) die
with the tuning process, also when it is killed with SIGKILL or its tuner ran in a thread that
ended; Ctrl-C stops a tuning run with one line and exit status 130, keeping its log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# A long XGB tuning run: after its first batch it has 2 builders, the measuring process and 2
# feature workers (batch_size 16: the first batch's random configs are featurized in the pool).
TUNE = """
import json, sys, threading
sys.path.insert(0, {here!r})
from tensorlang import autotune

task = autotune.create_task("matmul", (48, 48, 48, "float32"))
opt = autotune.measure_option(autotune.LocalBuilder(2),
                              autotune.LocalRunner(number=1, repeat=1, timeout=10))

def tune(n):
    tuner = autotune.XGBTuner(task, batch_size=16, seed=0, feature_workers=2)
    tuner.tune(n, opt, callbacks=[autotune.log_to_file({log!r})])
    return tuner

if {in_thread!r}:
    # two tuners, each in a thread that ends: the pooled builders and the measuring process
    # that the first started must serve the second (not die with the first's thread)
    for _ in range(2):
        t = threading.Thread(target=lambda: tuners.append(tune(16)))
        tuners = []
        t.start(); t.join()
    with open({report!r}, "w") as f:
        json.dump({{"errors": tuners[0].errors, "restarts": opt.runner.restarts}}, f)
tune(10_000)
"""


def _children(pid: int) -> set[int]:
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for_workers(proc, n: int, seconds: float = 120) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        kids = _children(proc.pid)
        if len(kids) >= n:
            return kids
        if proc.poll() is not None:
            pytest.fail(f"the tuning run ended early: {proc.communicate()}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"the tuning run started {len(_children(proc.pid))} workers, expected {n}")


def _kill_group(proc) -> None:
    """Whatever is left of the run's process group (the run, and workers a regression left
    behind, which would hold its pipes open): the test fails instead of hanging."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _start(tmp_path, in_thread: bool):
    log = tmp_path / "run.jsonl"
    script = TUNE.format(here=str(HERE), log=str(log), in_thread=in_thread,
                         report=str(tmp_path / "report.json"))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    return proc, log


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("in_thread", [False, True], ids=["main-thread", "tuner-thread"])
def test_workers_die_with_a_sigkilled_tuning_run(tmp_path, in_thread):
    proc, log = _start(tmp_path, in_thread)
    try:
        # builders 2 + measuring process 1 + feature workers 2 (+ multiprocessing's tracker)
        workers = _wait_for_workers(proc, 5)
        while not log.exists():  # a batch went through: every worker kind was used
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        workers |= _children(proc.pid)
        if in_thread:
            report = tmp_path / "report.json"
            while not report.exists():
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.2)
            time.sleep(0.5)
            assert json.loads(report.read_text()) == {"errors": {}, "restarts": 0}
            workers = _wait_for_workers(proc, 5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in workers if _alive(p)]
        assert not left, f"workers outlived the SIGKILLed tuning run: {left}"
    finally:
        _kill_group(proc)
        proc.communicate()


@contextlib.contextmanager
def _sigint_not_ignored():
    # A shell without job control starts background commands (`pytest &`, nohup) with SIGINT
    # ignored, and a child inherits an ignored signal: Python then installs no KeyboardInterrupt
    # handler and the Ctrl-C this test sends would be lost. A handled signal is reset to the
    # default in the child, as in a terminal's foreground job.
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_stops_tune_with_one_line_and_keeps_the_log(tmp_path):
    log = tmp_path / "cli.jsonl"
    with _sigint_not_ignored():
        proc = subprocess.Popen(
            [sys.executable, "-m", "tensorlang.cli", "tune", "matmul", "--args",
             "48,48,48,float32", "--trials", "10000", "--log", str(log), "--number", "1",
             "--repeat", "1", "--n-parallel", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (log.exists() and log.read_text().count("\n") >= 16):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        workers = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
        out, err = proc.communicate(timeout=60)
    finally:
        _kill_group(proc)
    # all it saw, should it fail: one CI run (once in dozens) saw status 0 and an empty stderr
    seen = (f"pid {proc.pid}, status {proc.returncode}, {log.read_text().count(chr(10))} "
            f"records\nstdout: {out}\nstderr: {err}")
    assert proc.returncode == 130, seen
    lines = [x for x in err.splitlines() if x.strip() and "trial/s" not in x and "it/s" not in x]
    assert lines[-1] == "tensorlang tune: interrupted", seen
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, seen
    records = log.read_text().splitlines()
    assert len(records) >= 16 and all(json.loads(r)["workload"] for r in records)
    # a worker ends by its death signal once the run has exited: that takes a moment
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in workers if _alive(p)]
