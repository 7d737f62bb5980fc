"""Builds from several threads of one process: each compile under a time limit runs in a
forked child (codegen/compile_limit); a fork made while another thread was inside llvmlite
left the child waiting forever for llvmlite's lock, and reaping those children raced."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from pathlib import Path

from tensorlang.codegen import compile_limit
from tensorlang.codegen.target import Target

_IR = "define i32 @f(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n"


def test_a_compile_child_is_not_forked_while_another_thread_is_inside_llvmlite():
    """Another thread inside an llvmlite call (one that LLVM_LOCK does not cover: disposing
    a module as Python frees it, asking for the host CPU) holds llvmlite's own lock; a child
    forked then inherited it held and hung until the time limit (BuildTimeoutError; in
    graph.build, the kernel fell back to the naive schedule after 60 s). The fork now waits
    for that call to end."""
    from llvmlite.binding import ffi

    tgt = Target.host()
    in_call, done = threading.Event(), threading.Event()

    def inside_llvmlite() -> None:
        with ffi.lib._lock:  # as any llvmlite call holds it
            in_call.set()
            done.wait(0.3)

    t = threading.Thread(target=inside_llvmlite)
    t.start()
    in_call.wait()
    try:
        obj, _ir, _asm = compile_limit.compile_ir_text(_IR, tgt.cpu, tgt.features, tgt.triple,
                                                       1, timeout=5)
    finally:
        done.set()
        t.join()
    assert obj


def test_compile_children_are_reaped_once_when_threads_reap_at_once(monkeypatch):
    """Two threads reaping the same exited child: the second one's waitpid fails
    (ChildProcessError, taken as reaped) and its list.remove raised ValueError."""
    pid = compile_limit._fork_quietly()  # a child as the compiles fork theirs
    if pid == 0:  # pragma: no cover (the child)
        os._exit(0)
    time.sleep(0.05)
    real_waitpid = os.waitpid

    def slow_waitpid(*args):  # both threads take their snapshot of _exited first
        time.sleep(0.05)
        return real_waitpid(*args)

    monkeypatch.setattr(compile_limit.os, "waitpid", slow_waitpid)
    monkeypatch.setattr(compile_limit, "_exited", [pid])
    errors: list[BaseException] = []

    def reap() -> None:
        try:
            compile_limit._reap()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reap) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert compile_limit._exited == []


def test_a_compile_child_runs_with_sigint_blocked(monkeypatch):
    """A Ctrl-C reaches the whole process group: in a compile child forked a moment before,
    it must not raise KeyboardInterrupt and run this process's handlers in the child. The
    child reports its signal mask (read in the child through the compile function it runs)."""
    from tensorlang.runtime import _llvm

    def report_mask(*_args):
        status = Path("/proc/self/status").read_text()
        blocked = next(line for line in status.splitlines() if line.startswith("SigBlk:"))
        return blocked.split()[1].encode(), "", None

    monkeypatch.setattr(_llvm, "compile_ir_text", report_mask)
    tgt = Target.host()
    mask, _ir, _asm = compile_limit.compile_ir_text(_IR, tgt.cpu, tgt.features, tgt.triple, 1,
                                                    timeout=5)
    assert int(mask, 16) & (1 << (signal.SIGINT - 1)), mask
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # ours: as before


def test_a_compile_child_forks_without_pythons_multithreaded_fork_warning(monkeypatch):
    """Python 3.12+ warns at every os.fork of a multi-threaded process (ours is, once the kernel
    pool has started): the warning reached users' warning summaries once per build, and
    pytest.warns under warnings-as-errors re-raised it. The compile child may fork (it only
    compiles and exits), so the fork is made with that one warning filtered. Here os.fork
    emits it as 3.12's does, on any Python; another DeprecationWarning still shows."""
    real_fork = os.fork

    def fork_as_312_does(message="This process (pid=1) is multi-threaded, use of fork() may "
                                 "lead to deadlocks in the child."):
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return real_fork()

    monkeypatch.setattr(compile_limit.os, "fork", fork_as_312_does)
    tgt = Target.host()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        obj, _ir, _asm = compile_limit.compile_ir_text(_IR, tgt.cpu, tgt.features, tgt.triple,
                                                       1, timeout=5)
        assert obj and not [w for w in seen if "multi-threaded" in str(w.message)]
        monkeypatch.setattr(compile_limit.os, "fork",
                            lambda: fork_as_312_does("another deprecation"))
        compile_limit.compile_ir_text(_IR + "\n", tgt.cpu, tgt.features, tgt.triple, 1,
                                      timeout=5)
    assert [str(w.message) for w in seen] == ["another deprecation"]
