"""Ctrl-C at any moment of a tune: one line and exit status 130, and no worker prints anything.

Two ways a Ctrl-C sent early in a run (while it imports, while its workers start) broke that,
each checked here without timing it (a Ctrl-C is sent at a moment made certain, not guessed):

- a worker spawned moments before the Ctrl-C was still starting its interpreter: it printed a
  KeyboardInterrupt traceback (or died by the signal), its ignoring of SIGINT not yet in place;
- a KeyboardInterrupt that went through code run from a string (dataclasses and namedtuple
  build theirs with exec: any import can be there) made CPython end ``python -m tensorlang.cli``
  by SIGINT (status -2) after main() had caught it and returned 130.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

# A worker gets SIGINT right after start() returns: it is still starting its interpreter (the
# parent's next statement comes well before the child's first import, let alone its run()).
WORKER = """
import os, signal, sys
from tensorlang.autotune.workers import CONTEXT

p = CONTEXT.Process(target=os.getpid)
p.start()
os.kill(p.pid, signal.SIGINT)
p.join(60)
print(p.exitcode)
"""

# The tune subcommand, replaced by one that is interrupted inside code run from a string.
INTERRUPTED_IN_EXEC = """
import tensorlang.cli as cli

def _configure(p):
    def run(a):
        exec("raise KeyboardInterrupt")
    return run

cli.COMMANDS["tune"] = ("", _configure, None)
raise SystemExit(cli.main(["tune"]))
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_a_worker_interrupted_while_it_starts_prints_nothing_and_runs():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(WORKER)], check=False,
                          capture_output=True, text=True, timeout=120, start_new_session=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0"], (proc.stdout, proc.stderr)  # the worker ran its job
    assert proc.stderr == ""


def test_ctrl_c_caught_inside_exec_code_still_exits_130(tmp_path):
    (tmp_path / "interrupted_in_exec.py").write_text(textwrap.dedent(INTERRUPTED_IN_EXEC))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]))
    # run with -m, as `python -m tensorlang.cli` is: only that path has CPython's quirk
    proc = subprocess.run([sys.executable, "-m", "interrupted_in_exec"], check=False,
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr == "tensorlang tune: interrupted\n"
