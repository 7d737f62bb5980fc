"""Templates for the autotune tests (imported by name in the builder processes)."""

from __future__ import annotations

from tensorlang.autotune.measure import BuildResult

import tensorlang as tl
from tensorlang import autotune


def _double(a):
    return a * 2


@autotune.template("test_faults", reference=_double)
def faults(n: int):
    """One good kernel, one that divides by zero at run time (numpy's semantics: 0, so it is
    right, where it used to kill the process with SIGFPE), one that hangs, one that computes a
    wrong answer."""
    cfg = autotune.get_config()
    # "hang" right after "ok": it runs in a warm measuring process, so the test waits only the
    # runner's timeout, not the start-up margin of a fresh process
    cfg.define_knob("mode", ["ok", "hang", "div0", "wrong"])
    mode = cfg["mode"].val
    A = tl.placeholder((n,), dtype="int32", name="A")
    if mode == "ok":
        C = tl.compute((n,), lambda i: A[i] * 2, name="C")
    elif mode == "div0":
        # inputs are in [0, 8): A[i] // 8 is 0 at run time, unknown at compile time
        C = tl.compute((n,), lambda i: A[i] * 2 + A[i] // (A[i] // 8), name="C")
    elif mode == "hang":
        # 2^48 iterations of a sum the compiler cannot close-form (it reads a varying element)
        k1 = tl.reduce_axis((0, 1 << 16), name="k1")
        k2 = tl.reduce_axis((0, 1 << 16), name="k2")
        k3 = tl.reduce_axis((0, 1 << 16), name="k3")
        C = tl.compute((n,), lambda i: tl.sum(A[(i + k1 + k2 + k3) % n], axis=[k1, k2, k3]),
                       name="C")
    else:
        C = tl.compute((n,), lambda i: A[i] * 3, name="C")
    s = tl.create_schedule(C)
    return s, [A, C]


@autotune.template("test_vadd")
def vadd(n: int):
    """A small space (split x annotation): small enough to enumerate whole. No numpy reference:
    the runner checks against the fallback config's kernel."""
    cfg = autotune.get_config()
    A = tl.placeholder((n,), name="A")
    B = tl.placeholder((n,), name="B")
    C = tl.compute((n,), lambda i: A[i] * B[i] + 1.0, name="C")
    s = tl.create_schedule(C)
    (i,) = s[C].op.axis
    cfg.define_split("split", i, num_outputs=2, policy="factors")
    io, ii = cfg["split"].apply(s, C, i)
    cfg.define_annotate("ann", [io, ii], policy="try_unroll_vec")
    cfg["ann"].apply(s, C, [io, ii])
    return s, [A, B, C]


@autotune.template("test_par_reduce")
def par_reduce(n: int, m: int):
    """Row sums with the reduction split and one loop made parallel: a parallel reduce loop of
    more than one iteration breaks the accumulation's dependence, so part of this space is
    illegal (refused by the legality checks, not by the template)."""
    cfg = autotune.get_config()
    A = tl.placeholder((n, m), name="A")
    k = tl.reduce_axis((0, m), name="k")
    C = tl.compute((n,), lambda i: tl.sum(A[i, k], axis=k), name="C")
    s = tl.create_schedule(C)
    (i,) = s[C].op.axis
    cfg.define_knob("factor", [d for d in range(1, m + 1) if m % d == 0])
    cfg.define_knob("parallel", ["none", "i", "k.outer", "k.inner"])
    ko, ki = s[C].split(k, factor=cfg["factor"].val)
    loop = {"i": i, "k.outer": ko, "k.inner": ki}.get(cfg["parallel"].val)
    if loop is not None:
        s[C].parallel(loop)
    return s, [A, C]


@autotune.template("test_hang_instantiate", reference=_double)
def hang_instantiate(n: int, how: str):
    """Twelve configs: eleven plain kernels and one whose instantiation never ends (`how`:
    "spin", a Python loop, "sleep", a blocking call, or "masked", a loop no SIGALRM reaches,
    standing for a hang inside a C extension), as a template with a bug would."""
    import signal
    import time

    cfg = autotune.get_config()
    cfg.define_knob("mode", [f"ok{i}" for i in range(11)] + ["hang"])
    if cfg["mode"].val == "hang" and not isinstance(cfg, autotune.ConfigSpace):
        if how == "sleep":
            time.sleep(3600)
        if how == "masked":
            # ignored, not blocked in this thread: Python 3.12+ runs the handler in the main
            # thread for a signal another thread (OpenBLAS's) took, 3.11 only late or never
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            pass
    A = tl.placeholder((n,), dtype="int32", name="A")
    C = tl.compute((n,), lambda i: A[i] * 2, name="C")
    return tl.create_schedule(C), [A, C]


def _crash(a):
    import os
    import signal

    os.kill(os.getpid(), signal.SIGSEGV)


@autotune.template("test_crash", reference=_crash)
def crash(n: int):
    """A workload whose reference kills the measuring process (it runs there): SIGSEGV."""
    A = tl.placeholder((n,), dtype="int32", name="A")
    C = tl.compute((n,), lambda i: A[i] * 2, name="C")
    return tl.create_schedule(C), [A, C]


@autotune.template("test_fake_knob")
def fake_knob(n: int, size: int):
    """`size` configs of one knob, for the tests whose fake runner decides what each costs
    (the task scheduler's, the re-measurement's); the default (fallback) config is index 0."""
    cfg = autotune.get_config()
    cfg.define_knob("k", list(range(size)))
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n,), lambda i: A[i] * 2.0, name="C")
    return tl.create_schedule(C), [A, C]


class FakeBuilder:
    """Builds nothing: the 'module path' is the config's index (read by the fake runners)."""

    timeout = 10.0

    def build(self, inputs):
        return [BuildResult(str(i.config.index), None, None, "", 0.0) for i in inputs]

    def close(self):
        pass
