"""Measurement: crash, hang and wrong answer each become a typed error and tuning goes on."""

from __future__ import annotations

import autotune_test_templates  # noqa: F401 - registers the test templates

from tensorlang import autotune


def test_crash_hang_wrong_answer_are_recorded_and_tuning_completes(tmp_path):
    log = tmp_path / "faults.jsonl"
    task = autotune.create_task("test_faults", (64,))
    opt = autotune.measure_option(
        autotune.LocalBuilder(n_parallel=2),
        autotune.LocalRunner(number=2, repeat=2, timeout=1.0, startup_margin=20.0))
    tuner = autotune.GridSearchTuner(task, batch_size=4)
    try:
        tuner.tune(4, opt, callbacks=[autotune.log_to_file(log)])
    finally:
        opt.close()
    recs = autotune.load_records(log)
    by_mode = {r.config["entity"]["mode"]: r for r in recs}
    assert set(by_mode) == {"ok", "div0", "hang", "wrong"}
    assert by_mode["ok"].valid and by_mode["ok"].result["error"] is None
    assert by_mode["div0"].valid  # integer // 0 is 0 (numpy), never SIGFPE
    assert by_mode["hang"].result["error"] == autotune.TIMEOUT
    assert by_mode["wrong"].result["error"] == autotune.WRONG_ANSWER
    assert tuner.trials == 4
    assert tuner.best_config["mode"].val in ("ok", "div0")
    assert tuner.errors == {autotune.TIMEOUT: 1, autotune.WRONG_ANSWER: 1}


def test_crash_of_the_measuring_process_is_a_run_error_and_it_restarts():
    task = autotune.create_task("test_crash", (64,))
    ok = autotune.create_task("test_faults", (64,))
    opt = autotune.measure_option(autotune.LocalBuilder(1),
                                  autotune.LocalRunner(number=1, repeat=1, timeout=5))
    try:
        (res,) = autotune.measure_batch(opt, [autotune.MeasureInput(task, task.config(0))])
        (after,) = autotune.measure_batch(opt, [autotune.MeasureInput(ok, ok.config(0))])
    finally:
        opt.close()
    assert res.error == autotune.RUN_ERROR and "SIGSEGV" in res.error_msg
    assert after.valid  # a fresh measuring process took over


def test_illegal_schedule_is_recorded_without_building():
    # an 8 x 128 register tile (64 accumulator vectors) would spill: the template refuses it
    # like an illegal step
    task = autotune.create_task("matmul", (16, 128, 8, "float32"))
    space = task.config_space
    bad = next(space.get(i) for i in range(len(space))
               if space.get(i)["tile_m"].val == 8 and space.get(i)["tile_n"].val == 128)
    opt = autotune.measure_option(autotune.LocalBuilder(1), autotune.LocalRunner(timeout=5))
    try:
        (res,) = autotune.measure_batch(opt, [autotune.MeasureInput(task, bad)])
    finally:
        opt.close()
    assert res.error == autotune.ILLEGAL
    assert "accumulator vectors" in res.error_msg


def test_measuring_process_runs_blas_on_one_thread(monkeypatch):
    """The runner's numpy references must not leave BLAS threads spinning beside the timed
    kernels: its process starts with OPENBLAS/OMP/MKL_NUM_THREADS=1, and ours is untouched."""
    import os
    import time
    from pathlib import Path

    import pytest

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    runner = autotune.LocalRunner()
    try:
        runner._start()
        proc = Path(f"/proc/{runner._proc.pid}")
        if not proc.exists():
            pytest.skip("needs /proc")
        # until the spawned interpreter is exec'd, /proc shows the forked copy of this process
        deadline = time.monotonic() + 30
        while b"--multiprocessing-fork" not in (proc / "cmdline").read_bytes():
            assert time.monotonic() < deadline, "the measuring process did not start"
            time.sleep(0.01)
        environ = (proc / "environ").read_text()
        child = dict(kv.split("=", 1) for kv in environ.split("\0") if "=" in kv)
    finally:
        runner.close()
    assert {k: child.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                      "MKL_NUM_THREADS")} == dict.fromkeys(
        ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1")
    assert os.environ["OPENBLAS_NUM_THREADS"] == "7" and "OMP_NUM_THREADS" not in os.environ


def test_a_kernel_with_small_integer_outputs_is_measured(tmp_path):
    """The outputs are poisoned before the checked call (a kernel that skips elements must
    not pass on stale values): with values that fit their dtype and differ from the answer.
    123456789 in a uint8 output raised OverflowError: every trial of a requantized conv, or
    of any int8, uint8 or int16 output, was a run error."""
    import numpy as np
    from tensorlang.autotune.measure import _run_job
    from tensorlang.runtime import load_module

    import tensorlang as tl

    a = tl.placeholder((64,), "uint8", name="A")
    b = tl.compute((64,), lambda i: a[i] + tl.const(250, "uint8"), name="B")  # (wraps)
    path = str(tmp_path / "k.tlm")
    tl.build(tl.create_schedule(b), [a, b], name="add250").save(path)
    job = {"path": path, "key": "add250", "reference": ("kernel", path), "rtol": 1e-3,
           "flush_cache": False, "number": 1, "repeat": 1, "min_repeat_ms": 0}
    cache: dict = {}
    assert _run_job(job, cache, load_module)["error"] is None
    inputs, _, (want,) = cache["add250"]
    np.testing.assert_array_equal(want, inputs[0] + np.uint8(250))


def test_integer_outputs_are_compared_exactly():
    """A candidate's integer or bool output must equal the reference: with the float
    tolerance (relative to the largest value) an int8 matmul's int32 sums of ~50000 passed
    when off by 49, a whole missing uint8 x int8 product."""
    import numpy as np
    from tensorlang.autotune.measure import _compare

    ref = np.array([50176, 3], np.int64)
    assert _compare([np.array([50176, 3], np.int32)], [ref], 1e-3) == ""
    assert "1 of 2 elements differ" in _compare([np.array([50127, 3], np.int32)], [ref], 1e-3)
    floats = np.array([50176.0, 3.0], np.float32)  # floats keep their tolerance
    assert _compare([floats + np.float32(1)], [floats], 1e-3) == ""
