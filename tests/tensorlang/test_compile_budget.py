"""Issue 15 (hangs): LLVM's loop vectorizer has inputs on which it runs for hours. A compile
that uses up its CPU budget is redone without the loop vectorizer (with a warning), inside the
build's time limit; the schedule fuzzer found a prefix sum that hung it (seed 7005581)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tensorlang.runtime import _llvm

import tensorlang as tl
from tensorlang.codegen import compile_limit


def _vector_add(n=67):
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return tl.create_schedule(B), [A, B]


def _check_vector_add(f, n: int) -> None:
    a = np.arange(n, dtype="float32")
    b = np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


def test_a_compile_past_the_cpu_budget_is_redone_without_the_loop_vectorizer(monkeypatch):
    real = _llvm.compile_ir_text

    def spins_with_the_vectorizer(*args):
        loop_vectorize = args[6] if len(args) > 6 else True
        while loop_vectorize:  # the pathology: CPU spent without end
            pass
        return real(*args)

    monkeypatch.setattr(_llvm, "compile_ir_text", spins_with_the_vectorizer)
    monkeypatch.setattr(compile_limit, "VECTORIZER_CPU_BUDGET", 1)
    s, args = _vector_add()
    with pytest.warns(compile_limit.CompileWarning, match="used up its 1 s CPU budget"):
        f = tl.build(s, args, name="budget_spin", timeout=60)
    _check_vector_add(f, 67)


def test_the_tuners_candidates_get_a_smaller_budget(monkeypatch):
    """vectorizer_budget (the autotune builder's, 4 s) applies inside its block only."""
    real = _llvm.compile_ir_text

    def spins_with_the_vectorizer(*args):
        while args[6] if len(args) > 6 else True:
            pass
        return real(*args)

    monkeypatch.setattr(_llvm, "compile_ir_text", spins_with_the_vectorizer)
    s, args = _vector_add(69)
    with compile_limit.vectorizer_budget(1), \
            pytest.warns(compile_limit.CompileWarning, match="used up its 1 s CPU budget"):
        f = tl.build(s, args, name="budget_block", timeout=60)
    _check_vector_add(f, 69)
    assert compile_limit.VECTORIZER_CPU_BUDGET == 20
    from tensorlang.autotune import measure

    assert measure.CANDIDATE_VECTORIZER_BUDGET < compile_limit.VECTORIZER_CPU_BUDGET


def test_a_compile_within_the_budget_keeps_the_vectorizer(monkeypatch):
    monkeypatch.setattr(compile_limit, "VECTORIZER_CPU_BUDGET", 30)
    s, args = _vector_add(71)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compile_limit.CompileWarning)
        f = tl.build(s, args, name="budget_fine", timeout=60)
    _check_vector_add(f, 71)


def test_the_prefix_sum_that_hung_llvms_loop_vectorizer_builds(monkeypatch):
    """(Before: no answer after 60 s, LLVM inside VPBlendRecipe::usesFirstLaneOnly. A fixed
    LLVM builds it at once; a broken budget makes this a BuildTimeoutError.)"""
    monkeypatch.setattr(compile_limit, "VECTORIZER_CPU_BUDGET", 2)
    m, n = 5, 17
    X = tl.placeholder((m, n), name="X")
    k = tl.reduce_axis((0, n), name="k")
    S = tl.compute((m, n), lambda i, j: tl.sum(X[i, k], axis=k, where=k <= j), name="S")
    Y = tl.compute((m, n), lambda i, j: S[i, j] * 0.5, name="Y")
    s = tl.create_schedule(Y)
    i, j = s[Y].op.axis
    si, sj = s[S].op.axis
    s[S].unroll(si)
    s[S].reorder(sj, si, s[S].op.reduce_axis[0])
    s[Y].reorder(j, i)
    s[S].compute_at(s[Y], j)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", compile_limit.CompileWarning)
        f = tl.build(s, [X, Y], name="prefix_sum_unrolled", timeout=120)
    x = np.random.default_rng(0).random((m, n), dtype=np.float32)
    y = np.zeros((m, n), "float32")
    f(x, y)
    np.testing.assert_allclose(y, np.cumsum(x, axis=1) * 0.5, rtol=1e-5)


_IR = "define i32 @f(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n"


def _compile(timeout):
    from tensorlang.codegen.target import Target

    tgt = Target.host()
    return compile_limit.compile_ir_text(_IR, tgt.cpu, tgt.features, tgt.triple, 1,
                                         timeout=timeout)


def test_the_time_limit_counts_the_compiles_cpu_not_the_wall_clock(monkeypatch):
    """A compile that waits (as one does on a busy machine, its CPU taken by others) is not
    ended at its limit: at load 10 on 2 cores a 16 s symbolic depthwise conv passed a 60 s
    wall-clock limit, and a graph kernel fell back to its naive schedule."""
    import time

    real = _llvm.compile_ir_text

    def waits_then_compiles(*args):
        time.sleep(2.5)
        return real(*args)

    monkeypatch.setattr(_llvm, "compile_ir_text", waits_then_compiles)
    obj, _ir, _asm = _compile(timeout=1)
    assert obj


def test_a_compile_that_spins_past_its_limit_is_ended(monkeypatch):
    def spins(*args):
        while True:
            pass

    monkeypatch.setattr(_llvm, "compile_ir_text", spins)
    with pytest.raises(tl.BuildTimeoutError, match=r"time limit of 1 s of CPU"):
        _compile(timeout=1)


def test_a_compile_child_that_uses_no_cpu_is_ended(monkeypatch):
    """Blocked (a lock copied held at the fork, say): no CPU time for STALL_SECONDS."""
    import time

    monkeypatch.setattr(_llvm, "compile_ir_text", lambda *args: time.sleep(60))
    monkeypatch.setattr(compile_limit, "STALL_SECONDS", 1)
    t0 = time.monotonic()
    with pytest.raises(tl.BuildTimeoutError, match=r"used no CPU for 1 s \(blocked"):
        _compile(timeout=30)
    assert time.monotonic() - t0 < 10
