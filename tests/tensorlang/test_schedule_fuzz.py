"""The differential schedule fuzzer (schedule_fuzz.py): a short run over every case (a long one
is marked slow), and tests that the fuzzer itself can fail: a wrong reference gives WRONG, a
worker killed by SIGSEGV gives CRASH, a stuck one HANG, and the pool goes on after both."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest
import schedule_fuzz as F
from schedule_fuzz_cases import CASES

import tensorlang as tl

ALL = sorted(CASES)


def _run(jobs, workers=2, timeout=60.0):
    with F.Pool(workers, timeout=timeout) as pool:
        return list(pool.run(jobs))


def _failures(results):
    return [f"{r['outcome']} {r['case']} seed {r['seed']}: {r.get('why')}\n"
            f"{F.format_trace(r)}\nrepro: {F.repro_command(r['case'], r['seed'])}"
            for r in results if r["outcome"] in F.FAILURES]


def _fuzz(n: int, seed: int):
    results = _run(F.jobs_for(ALL, n, seed))
    assert len(results) == n
    assert not _failures(results), "\n\n".join(_failures(results))
    outcomes = {r["outcome"] for r in results}
    # the draw must make schedules that build (not only refusals)
    assert sum(r["outcome"] == F.OK for r in results) > n // 2, outcomes
    built = {r["case"] for r in results if r["outcome"] == F.OK}
    assert len(built) >= len(ALL) - 2, sorted(set(ALL) - built)


def test_cases_cover_the_issue_list():
    assert len(CASES) >= 16
    for name in ("matmul_chain", "conv2d_padded_strided", "softmax", "layer_norm",
                 "stencil_symbolic", "gather_rows", "argmax_rows", "batch_matmul", "prefix_sum"):
        assert name in CASES
    dtypes = {t.dtype for mk in CASES.values() for t in mk().inputs}
    assert {"float32", "float16", "int32", "int16"} <= dtypes


def test_short_run_all_cases():
    _fuzz(64, seed=0)  # (suite time; the slow run below takes 2000)


@pytest.mark.slow
def test_long_run_all_cases():
    _fuzz(2000, seed=100_000)


def test_a_case_and_seed_replay_exactly():
    for case in ("softmax", "conv2d_padded_strided", "matmul_chain"):
        for seed in range(3):
            traces = {F.trace_of(case, seed) for _ in range(2)}
            assert len(traces) == 1
            (trace,) = traces
            _, s = F.replay(case, trace)  # the trace applies to freshly declared computes
            assert s.trace.dumps() == trace
    assert F.trace_of("softmax", 0) != F.trace_of("softmax", 1)


def test_checker_reports_a_wrong_reference_as_wrong():
    results = _run([{"case": "softmax", "seed": 3, "inject": "wrong"},
                    {"case": "int_matmul", "seed": 4, "inject": "wrong"}])
    assert [r["outcome"] for r in results] == [F.WRONG, F.WRONG], results
    assert all("elements differ" in r["why"] for r in results)


def test_checker_reports_a_segfault_as_crash_and_goes_on():
    jobs = [{"case": "prefix_sum", "seed": 1, "inject": "segv"},
            {"case": "prefix_sum", "seed": 2}, {"case": "softmax", "seed": 5}]
    by_seed = {(r["case"], r["seed"]): r for r in _run(jobs, workers=1)}
    crash = by_seed["prefix_sum", 1]
    assert crash["outcome"] == F.CRASH, crash
    assert signal.Signals.SIGSEGV.name in crash["why"]
    assert {by_seed["prefix_sum", 2]["outcome"], by_seed["softmax", 5]["outcome"]} <= \
        {F.OK, F.REFUSED}


def test_checker_reports_a_stuck_worker_as_hang_and_goes_on():
    # the injected hang never ends, and the pool starts a job's clock once its worker is ready
    # (tests/fuzz_pool.py): 1 s is as sure a HANG as 5; the other job has the pool's 60 s
    jobs = [{"case": "transpose_chain", "seed": 1, "inject": "hang", "timeout": 1.0},
            {"case": "transpose_chain", "seed": 2}]
    by_seed = {r["seed"]: r for r in _run(jobs, workers=1)}
    assert by_seed[1]["outcome"] == F.HANG and "killed" in by_seed[1]["why"]
    assert by_seed[2]["outcome"] in (F.OK, F.REFUSED)


def test_an_exception_in_the_pipeline_is_an_error_outcome():
    res = F.check_one("softmax", 0, trace=json.dumps([{"kind": "split", "stage": "nope",
                                                       "loops": ["i"], "args": {}}]))
    assert res["outcome"] == F.ERROR and "ScheduleError" in res["why"]


def test_minimize_keeps_only_the_steps_the_failure_needs():
    steps = json.loads(F.trace_of("conv2d_padded_strided", 7))
    assert len(steps) >= 3
    culprit = steps[len(steps) // 2]

    def fails_with_culprit(trial):  # a stand-in for a subprocess run: fails iff culprit is in
        return F.WRONG if culprit in trial else F.OK

    assert F.minimize("conv2d_padded_strided", 7, outcome_of=fails_with_culprit) == [culprit]


def test_compare_notices_unwritten_elements_and_tolerates_rounding():
    want = np.arange(6, dtype=np.float64).reshape(2, 3)
    got = want.astype(np.float32)
    assert F.compare(got, want, (1e-6, 1e-6)) is None
    got[1, 2] = np.nan  # the sentinel of an element the kernel never wrote
    assert "1/6 elements differ, first at (1, 2)" in F.compare(got, want, (1e-6, 1e-6))
    assert F.compare(want[:1], want, (0, 0)).startswith("shape")
    assert F.compare(np.array([3], np.int32), np.array([4]), (0, 0)) is not None


def test_refusal_kinds_drop_names_and_numbers():
    names = {"C", "D", "D.rf", "i.outer", "k.inner"}
    a = F.refusal_kind(tl.ScheduleError("split on stage C: loop i.outer is not a loop of C "
                                        "(loops ['i.outer', 'j'])"), names)
    b = F.refusal_kind(tl.ScheduleError("fuse on stage D.rf: loop k.inner is not a loop of D "
                                        "(loops ['k.outer'])"), names)
    assert a == b == "ScheduleError: loop _ is not a loop of _ _", (a, b)


# ----------------------------------------------------------------------------- found by the fuzzer


def test_split_of_a_loop_hosting_a_reader_of_an_attached_stage():
    """transpose_chain seed 1: P is computed inside Y's k loop and its reader T inside Y's j
    loop; splitting j raised a bare ValueError from the structural check (comparing loop
    positions along T's attach path before noticing that j was gone) and the step stayed
    applied. Now T moves to the split's inner loop (TVM's rule), and it lowers and runs."""
    X = tl.placeholder((3, 5, 7), name="X")
    P = tl.compute((3, 5, 7), lambda i, j, k: X[i, j, k] * X[i, j, k], name="P")
    T = tl.compute((7, 3, 5), lambda k, i, j: P[i, j, k], name="T")
    Y = tl.compute((7, 3, 5), lambda k, i, j: T[k, i, j] - X[i, j, k], name="Y")
    s = tl.create_schedule(Y)
    k, i, j = s[Y].op.axis
    s[T].compute_at(s[Y], i)
    s[P].compute_at(s[Y], k)
    s[T].compute_at(s[Y], j)
    _jo, ji = s[Y].split(j, factor=1)
    assert s[T].attach_ivar is ji and s[Y].loop_names() == ["k", "i", "j.outer", "j.inner"]
    x = np.random.default_rng(0).uniform(-1, 1, (3, 5, 7)).astype("float32")
    y = np.full((7, 3, 5), np.nan, "float32")
    tl.build(s, [X, Y], name="split_host")(x, y)
    np.testing.assert_allclose(y, np.transpose(x * x - x, (2, 0, 1)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("gather", [False, True])
def test_producer_of_a_stage_attached_inside_its_loop_is_sized_over_that_loop(gather):
    """gather_rows seed 50227: P at Y's row loop i, G (reading P) inside Y's column loop j and
    read by Y at columns j and n-1-j, so G's region is sized by j. P's region, relaxed over j,
    kept j in its extent (codegen: "variable j is used outside its scope")."""
    rows, n, m = 13, 7, 5
    T = tl.placeholder((rows, n), name="T")
    Ix = tl.placeholder((m,), dtype="int32", name="Ix")
    P = tl.compute((rows, n), lambda r, j: T[r, j] * 3 + 1, name="P")
    G = tl.compute((m, n), lambda i, j: P[Ix[i] if gather else i + 2, j], name="G")
    Y = tl.compute((m, n), lambda i, j: G[i, j] + G[i, n - 1 - j], name="Y")
    s = tl.create_schedule(Y)
    i, j = s[Y].op.axis
    s[G].compute_at(s[Y], j)
    s[P].compute_at(s[Y], i)
    f = tl.build(s, [T, Ix, Y] if gather else [T, Y], name="mirror_gather")
    rng = np.random.default_rng(0)
    t = rng.uniform(-2, 2, (rows, n)).astype("float32")
    ix = rng.integers(0, rows, m).astype("int32") if gather else np.arange(2, 2 + m)
    y = np.full((m, n), np.nan, "float32")
    f(*([t, ix, y] if gather else [t, y]))
    g = (t.astype(np.float64) * 3 + 1)[ix]
    np.testing.assert_allclose(y, g + g[:, ::-1], rtol=1e-5, atol=1e-5)


AVG_POOL_REORDERED = """
import numpy as np
import tensorlang as tl
c_, h, w = 3, 7, 13
X = tl.placeholder((c_, h, w), name="X")
ry = tl.reduce_axis((0, 2), name="ry")
rx = tl.reduce_axis((0, 2), name="rx")
S = tl.compute((c_, h // 2, w // 2), lambda c, y, x: tl.sum(
    X[c, y * 2 + ry, x * 2 + rx], axis=[ry, rx]), name="S")
A = tl.compute((c_, h // 2, w // 2), lambda c, y, x: S[c, y, x] * 0.25, name="Avg")
s = tl.create_schedule(A)
c, y, x = s[S].op.axis
s[S].reorder(y, c)
x_ = np.random.default_rng(0).uniform(-2, 2, (c_, h, w)).astype("float32")
want = x_[:, :6, :12].reshape(c_, 3, 2, 6, 2).mean(axis=(2, 4))
for timeout in (60, None):  # the compile in a child process, and in this one
    out = np.full((c_, h // 2, w // 2), np.nan, "float32")
    tl.build(s, [X, A], name="avgpool", timeout=timeout)(x_, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
print("matched")
"""


def test_sum_pool_whose_slp_vectorized_ir_is_invalid_builds_and_matches(tmp_path):
    """avg_pool_min seed 1000639: after s[S].reorder(y, c), LLVM's SLP vectorizer at -O3 made
    IR that fails its own verifier ("Instruction does not dominate all uses") and the code
    generator aborted (SIGABRT; in the forked compile: "the LLVM compile process died"). The
    optimizer's output is verified now and the pipeline rerun without SLP. In a subprocess:
    a regression aborts the interpreter."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TENSORLANG_CACHE_DIR=str(tmp_path))  # compiled, not a cache hit
    p = subprocess.run([sys.executable, "-c", AVG_POOL_REORDERED], capture_output=True,
                       text=True, timeout=300, check=False, env=env)
    assert p.returncode == 0 and "matched" in p.stdout, (p.returncode, p.stderr[-2000:])
