"""`python -m tensorlang.cli ARGV` for tests that run the CLI many times, without an interpreter
start and the imports for every run (0.3-0.8 s each, most of a user error's run).

A server process imports tensorlang.cli and the modules its subcommands import, once; each
run is then a fork of it: a process of its own that ends as `python -m tensorlang.cli` does
(``sys.exit(main(argv))``, atexit handlers, buffers flushed), with the caller's environment and
working directory, stdin from /dev/null, and its own exit status, stdout and stderr (what the
imports printed included, as each fresh interpreter would print it). Tests of the entry point
itself (``-m``, the interpreter's own traceback) keep starting ``python -m tensorlang.cli``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

_SERVER = r"""
import json, os, shutil, sys, tempfile

tmp = tempfile.mkdtemp()
channel = os.fdopen(os.dup(1), "w")


def redirected(k):
    # fds 1 and 2 to files of their own; the fds they were, to restore them
    saved = []
    for fd, name in ((1, "out"), (2, "err")):
        saved.append(os.dup(fd))
        to = os.open(os.path.join(tmp, f"{k}.{name}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(to, fd)
        os.close(to)
    return saved


def said(k):
    texts = []
    for name in ("out", "err"):
        with open(os.path.join(tmp, f"{k}.{name}")) as f:
            texts.append(f.read())
        os.unlink(os.path.join(tmp, f"{k}.{name}"))
    return texts


saved = redirected("import")
from tensorlang.cli import main
# and what its subcommands import when they run
import onnx, tensorlang.autotune.cli, tensorlang.graph.frontends.onnx, tensorlang.runtime
sys.stdout.flush()
sys.stderr.flush()
for fd, old in zip((1, 2), saved):
    os.dup2(old, fd)
    os.close(old)
at_import = said("import")
channel.write("ready\n")
channel.flush()
for k, line in enumerate(sys.stdin):
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.clear()
        os.environ.update(job["env"])
        os.chdir(job["cwd"])
        redirected(k)
        sys.argv = ["tensorlang", *job["argv"]]
        sys.exit(main(job["argv"]))  # the process ends here, as the real one does
    _, status = os.waitpid(pid, 0)
    out, err = said(k)
    channel.write(json.dumps([os.waitstatus_to_exitcode(status), at_import[0] + out,
                              at_import[1] + err]) + "\n")
    channel.flush()
shutil.rmtree(tmp)
"""


class ForkedCLI:
    """Runs the CLI as forks of one server process (started on the first run)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None

    def _start(self, timeout: float) -> None:
        self._proc = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True,
                                      start_new_session=True)
        self._readline(timeout, ["(server start)"])

    def _readline(self, timeout: float, argv) -> str:
        deadline = time.monotonic() + timeout
        out = self._proc.stdout
        while not select.select([out], [], [], max(0.0, deadline - time.monotonic()))[0]:
            if time.monotonic() >= deadline:
                self.close()
                raise subprocess.TimeoutExpired(["tensorlang", *argv], timeout)
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            self._proc = None
            raise RuntimeError(f"the forked CLI server ended (status {code})")
        return line

    def run(self, *argv: str, env: dict | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """As ``subprocess.run([sys.executable, "-m", "tensorlang.cli", *argv],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **env})``."""
        if self._proc is None:
            self._start(timeout)
        job = {"argv": list(argv), "env": {**os.environ, **(env or {})}, "cwd": os.getcwd()}
        self._proc.stdin.write(json.dumps(job) + "\n")
        self._proc.stdin.flush()
        code, out, err = json.loads(self._readline(timeout, argv))
        return subprocess.CompletedProcess(["tensorlang", *argv], code, out, err)

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._proc.wait()
        self._proc.stdin.close()
        self._proc.stdout.close()
        self._proc = None
