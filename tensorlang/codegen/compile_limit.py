"""LLVM compilation under a time limit.

LLVM's optimizer cannot be interrupted from Python, and some legal IR makes it run without end
(the loop vectorizer once recursed for minutes on a max-reduction inside a parallel loop; see
VECTORIZER_CPU_BUDGET for the fallback when it does). So a compile with a time limit runs in a
forked child process, ended when it has used the limit's seconds of CPU (RLIMIT_CPU), or when it
uses none for STALL_SECONDS. A fork costs ~5 ms against the 20-200 ms of a typical compile, and
only a cache miss compiles (target.compile_ir caches results by a hash of the IR)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import pickle
import resource
import select
import signal
import threading
import time
import warnings

from tensorlang.build import DEFAULT_BUILD_TIMEOUT
from tensorlang.errors import TensorlangError
from tensorlang.runtime import _llvm

__all__ = ["DEFAULT_BUILD_TIMEOUT", "BuildTimeoutError", "CompileWarning", "check_timeout",
           "compile_ir_text"]

# DEFAULT_BUILD_TIMEOUT (seconds; the largest kernels the tuner builds compile in a few seconds
# at -O3) is defined with tl.build, which must not import this module with the package


class BuildTimeoutError(TensorlangError):
    """LLVM did not finish compiling a kernel within the build's time limit."""


def check_timeout(timeout) -> float | None:
    """The validated time limit in seconds (None: no limit)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not timeout > 0 or timeout == float("inf"):
        raise ValueError(f"timeout must be a positive number of seconds or None (no limit), "
                         f"got {timeout!r}")
    return float(timeout)


# LLVM's loop vectorizer has inputs on which it runs for hours (exponential in a chain of
# predicated updates: VPBlendRecipe::usesFirstLaneOnly, LLVM 22, seen with a guarded prefix-sum
# reduction of 16 steps that LLVM unrolled fully inside the loop it then vectorized). A kernel
# compiles in well under a second of CPU at -O3, the largest in a few seconds: past this CPU
# budget the compile is ended (RLIMIT_CPU counts CPU time, so a busy machine does not trigger
# it) and done again without the loop vectorizer, which our explicit vector code does not need.
VECTORIZER_CPU_BUDGET = 20  # seconds


@contextlib.contextmanager
def vectorizer_budget(seconds: float):
    """Compiles in this block give LLVM's loop vectorizer `seconds` of CPU before the fallback
    (the tuner's candidates: one pathological candidate cost a 64-trial matmul search 20 of its
    54 s, and a candidate that slow to compile is rarely the best)."""
    global VECTORIZER_CPU_BUDGET
    old, VECTORIZER_CPU_BUDGET = VECTORIZER_CPU_BUDGET, seconds
    try:
        yield
    finally:
        VECTORIZER_CPU_BUDGET = old


def compile_ir_text(ir_text: str, cpu: str, features: str, triple: str, opt_level: int,
                    want_asm: bool = False, timeout: float | None = None):
    """runtime._llvm.compile_ir_text, in a child process ended when it has used `timeout`
    seconds of CPU (in this process where there is no limit or no fork).

    CPU time, not wall time: the limit is there for LLVM's pathologies, which spend CPU without
    end, and a compile's CPU time is the same on a busy machine (on a wall clock, a 16 s
    symbolic depthwise conv timed out at load 10 on 2 cores, and a graph kernel then fell back
    to its naive schedule)."""
    timeout = check_timeout(timeout)
    args = (ir_text, cpu, features, triple, opt_level, want_asm)
    if timeout is None or not hasattr(os, "fork"):
        return _llvm.compile_ir_text(*args)
    budget = VECTORIZER_CPU_BUDGET if opt_level >= 2 else None
    if budget is not None and budget < timeout:
        data, used = _compile_in_child(args, budget)
        if data is None:
            warnings.warn(f"LLVM's loop vectorizer used up its {budget:g} s CPU budget on this "
                          "kernel (an LLVM pathology); built without it: loops the schedule "
                          "vectorized are explicit vector code and stay so", CompileWarning,
                          stacklevel=3)
            data, more = _compile_in_child((*args, False), timeout - used)
            used += more
    else:
        data, used = _compile_in_child(args, timeout)
    if data is _STALLED:
        raise BuildTimeoutError(f"the LLVM compile process used no CPU for {STALL_SECONDS} s "
                                "(blocked, not compiling); it was ended")
    if data is None or used > timeout:
        raise BuildTimeoutError(
            f"the build exceeded its time limit of {timeout:g} s of CPU in LLVM's optimizer "
            f"(opt_level={opt_level}); give a longer one with tl.build(..., timeout=<seconds>) "
            "or timeout=None for none, or build with a lower opt_level (1 compiles fastest "
            "of the optimizing levels)")
    return _unpack(data)


class CompileWarning(UserWarning):
    """A kernel was compiled differently from the requested pipeline (and said why)."""


# a child that uses no CPU for this long is blocked, not compiling (a lock copied held at the
# fork, say): ended, as a hang would otherwise be
STALL_SECONDS = 30
_STALLED = object()


def _compile_in_child(args, cpu_limit: float):
    """(the child's result, the CPU seconds it used); the result is None when the
    child used up `cpu_limit` (SIGXCPU) and _STALLED when it stopped using CPU (killed)."""
    # no other thread is inside LLVM while the process forks: the child's copy of LLVM's
    # state is consistent, and no lock in it is held by a thread the child does not have
    with _llvm.no_llvm_call_in_flight():  # (initializes LLVM once here, not in every child)
        die_with_parent = _parent_death_signal()
        parent = os.getpid()
        read_end, write_end = os.pipe()
        # Ctrl-C (SIGINT to the whole process group) must not raise KeyboardInterrupt in the
        # child before it is inside _child's try: it would unwind this process's copied stack
        # and run the parent's handlers in the child, which then held the parent's stdout and
        # stderr open. Blocked across the fork, it stays blocked in the child, which ends
        # with os._exit.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        pid = -1
        try:
            pid = _fork_quietly()
            if pid == 0:  # pragma: no cover (the child; checked through the parent)
                _child(write_end, args, read_end, parent, die_with_parent, cpu_limit)
        finally:
            if pid != 0:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_end)
    try:
        data = _read_result(read_end, pid, cpu_limit)
    finally:
        os.close(read_end)
    if data is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return _STALLED, 0.0
    if not data:
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
            return None, cpu_limit
        how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        raise TensorlangError(f"the LLVM compile process died ({how}) before returning a "
                              "result")
    # the child is reaped later: its exit (unmapping a copy of this process) takes as long
    # as the fork did, and the result is already here
    _exited.append(pid)
    _reap()
    return pickle.loads(data)


def _fork_quietly() -> int:
    """os.fork without Python 3.12+'s DeprecationWarning for a multi-threaded process (ours is,
    once the kernel pool has started). The warning is about a child that runs on into code
    whose locks other threads held at the fork; this child only compiles (no LLVM call was in
    flight, see no_llvm_call_in_flight), pickles and leaves through os._exit. Left alone, it
    reached users' warning summaries once per build, and under pytest.warns with warnings as
    errors it failed their tests. Forks are serialized by LLVM_LOCK, so no two of these
    catch_warnings blocks interleave."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"This process .* is multi-threaded, use of "
                                r"fork\(\) may lead to deadlocks", category=DeprecationWarning)
        return os.fork()


_exited: list = []
# builds in several threads reap at once: without the lock two of them waited for the same
# child, and the second (ChildProcessError, taken as reaped) failed in list.remove with
# ValueError, out of tl.build (graph.build then refused the kernel's default schedule)
_reap_lock = threading.Lock()


def _reap() -> None:
    with _reap_lock:
        for pid in list(_exited):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                _exited.remove(pid)


@functools.lru_cache(maxsize=1)
def _parent_death_signal():
    """A function the child calls so that it is killed when its parent dies (Linux's
    PR_SET_PDEATHSIG): a compile that never ends must not outlive a killed build."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return lambda: None
    pr_set_pdeathsig = 1
    return lambda: prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)


def _child(fd: int, args, read_end: int, parent: int, die_with_parent,
           cpu_limit: float) -> None:  # pragma: no cover (runs in the forked child)
    try:
        os.close(read_end)
        die_with_parent()
        if os.getppid() != parent:  # the parent died before that took effect
            os._exit(1)
        # SIGXCPU ends the child when its limit is spent (whole seconds; a shorter limit is
        # checked by the parent against the CPU time reported)
        resource.setrlimit(resource.RLIMIT_CPU,
                           (max(1, math.ceil(cpu_limit)), resource.RLIM_INFINITY))
        try:
            out = ("ok", _llvm.compile_ir_text(*args))
        except _llvm.LLVMCompileError as e:
            out = ("llvm", (e.stage, e.llvm_message))
        except BaseException as e:  # noqa: BLE001 (anything the parent must hear about)
            out = ("error", f"{type(e).__name__}: {e}")
        payload = pickle.dumps((out, time.process_time()))
        view = memoryview(len(payload).to_bytes(8, "little") + payload)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os._exit(0)


def _read_result(fd: int, pid: int, cpu_limit: float) -> bytes | None:
    """The child's result (a length, then that many bytes); b"" when the child died before
    writing all of it, None when it used no CPU for STALL_SECONDS (or, where its CPU time
    cannot be read, when `cpu_limit` seconds have passed)."""
    data = b""
    size = None
    start = progress_at = time.monotonic()
    used = -1.0
    while size is None or len(data) < size + 8:
        if not select.select([fd], [], [], 1.0)[0]:
            now = time.monotonic()
            cpu = _cpu_seconds(pid)
            if cpu is None:  # no /proc: the wall clock stands in for the child's CPU time
                if now - start > cpu_limit:
                    return None
            elif cpu > used:
                used, progress_at = cpu, now
            elif now - progress_at > STALL_SECONDS:
                return None
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b""
        data += chunk
        if size is None and len(data) >= 8:
            size = int.from_bytes(data[:8], "little")
    return data[8:]


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time process `pid` has used (Linux's /proc), None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _unpack(result: tuple):
    kind, value = result
    if kind == "ok":
        return value
    if kind == "llvm":
        raise _llvm.LLVMCompileError(*value)
    raise TensorlangError(f"LLVM compilation failed: {value}")
