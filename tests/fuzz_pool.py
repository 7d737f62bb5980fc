"""The fuzzers' worker processes (tests/tensorlang/schedule_fuzz.py, tests/graph/graph_fuzz.py).

Each worker is a fresh interpreter that imports a fuzzer module and runs its ``worker_main``:
jobs go in as JSON lines on stdin, each answered by one JSON line on stdout after a first
``{"ready": true}`` (a job's clock starts then, not while the worker imports). A worker that
dies is a CRASH, one that runs past the time limit (the pool's, or the job's own "timeout") a
HANG; either is killed and replaced, and the run goes on. A worker is also replaced every
``recycle`` jobs: each kernel it built stays loaded in its process.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Self

CRASH, HANG = "CRASH", "HANG"
STARTUP_S = 120  # a worker's imports, on top of the time limit of its first job


def serve(answer: Callable[[dict], dict], imports: Callable[[], None]) -> None:
    """A worker's main: read jobs (JSON lines) on stdin, answer each with ``answer(job)`` as one
    JSON line on the original stdout. Anything else the process prints (C code included) goes
    to stderr. ``imports`` runs before the first job's clock starts (the "ready" line)."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    imports()
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        out.write(json.dumps(answer(json.loads(line))) + "\n")
        out.flush()


class _Worker:
    def __init__(self, env: dict, module: Path):
        # the worker's stderr (read back when it dies), closed in kill()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115
        code = (f"import sys; sys.path.insert(0, {str(module.parent)!r}); "
                f"import {module.stem}; {module.stem}.worker_main()")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.job: dict | None = None
        self.ready = False
        self.started = 0.0
        self.done = 0
        self.buf = b""

    def send(self, job: dict) -> None:
        self.job, self.started = job, time.monotonic()
        if self.ready:
            self._write(job)

    def _write(self, job: dict) -> None:
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()
        self.started = time.monotonic()

    def on_ready(self) -> None:
        self.ready = True
        if self.job is not None:
            self._write(self.job)

    def stderr_tail(self, n: int = 600) -> str:
        self.log.seek(0, os.SEEK_END)
        self.log.seek(max(0, self.log.tell() - n))
        return self.log.read().decode(errors="replace")

    def died(self) -> str:
        rc = self.proc.wait()
        sig = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
        return f"worker died ({sig}); stderr: {self.stderr_tail()!r}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


class Pool:
    """Workers running ``module``'s ``worker_main``; ``lost(job, outcome, why)``: the result
    recorded for a job whose worker crashed or hung (the fuzzer's own fields)."""

    def __init__(self, module: Path, lost: Callable[[dict, str, str], dict], workers: int,
                 timeout: float, recycle: int, cache_prefix: str):
        self.module, self.lost = module, lost
        self.n, self.timeout, self.recycle = workers, timeout, recycle
        self.cache = tempfile.TemporaryDirectory(prefix=cache_prefix)
        # one kernel cache for the run, none of a past run
        self.env = dict(os.environ, TENSORLANG_CACHE_DIR=self.cache.name,
                        OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.workers: list[_Worker] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for w in self.workers:
            w.kill()
        self.workers = []
        self.cache.cleanup()

    def run(self, jobs: Iterable[dict]) -> Iterator[dict]:
        """Outcomes of the jobs, in completion order."""
        pending = list(jobs)[::-1]
        while len(self.workers) < self.n:
            self.workers.append(_Worker(self.env, self.module))
        while pending or any(w.job for w in self.workers):
            for i, w in enumerate(self.workers):
                if w.job is None and pending:
                    if w.done >= self.recycle:
                        w.kill()
                        w = self.workers[i] = _Worker(self.env, self.module)
                    w.send(pending.pop())
            yield from self._collect()

    def _collect(self) -> Iterator[dict]:
        busy = [w for w in self.workers if w.job]
        ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], 0.2)
        now = time.monotonic()
        for i, w in enumerate(self.workers):
            if w.job is None:
                continue
            if w.proc.stdout in ready:
                chunk = os.read(w.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    yield self._replace(i, CRASH, w.died())
                    continue
                w.buf += chunk
                yield from self._answers(w, now)
            elif now - w.started > w.job.get("timeout", self.timeout) + \
                    (0 if w.ready else STARTUP_S):
                limit = w.job.get("timeout", self.timeout)
                yield self._replace(i, HANG, f"no answer after {limit:.0f} s (killed)")

    @staticmethod
    def _answers(w: _Worker, now: float) -> Iterator[dict]:
        while b"\n" in w.buf and w.job is not None:
            line, w.buf = w.buf.split(b"\n", 1)
            res = json.loads(line)
            if res.get("ready"):
                w.on_ready()
                continue
            res.setdefault("wall_s", now - w.started)
            w.job, w.done = None, w.done + 1
            yield res

    def _replace(self, i: int, outcome: str, why: str) -> dict:
        w = self.workers[i]
        res = self.lost(w.job, outcome, why) | {"wall_s": time.monotonic() - w.started}
        w.kill()
        self.workers[i] = _Worker(self.env, self.module)
        return res
