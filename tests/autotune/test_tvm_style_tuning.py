"""Tuning scripts written the TVM way (issue 16): top-level code without a __main__ guard,
templates defined in the script, AutoTVM's names; a run whose trials all failed is an error,
one in which most failed says so."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tensorlang.autotune.task import _importable_by_name

from tensorlang import autotune

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _run_script(name: str, *args, cwd) -> subprocess.CompletedProcess:
    # from another directory: the script's own folder is on its sys.path, as for a user
    return subprocess.run([sys.executable, str(SCRIPTS / name), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


# ------------------------------------------------------------------ scripts run as subprocesses
def test_unguarded_autotvm_matmul_script_tunes_and_applies_the_best(tmp_path):
    log, side_effects = tmp_path / "matmul.log", tmp_path / "ran.txt"
    proc = _run_script("autotvm_matmul.py", log, side_effects, 16, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "the result matches numpy" in proc.stdout
    records = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(records) == 16
    # before: every trial 'builder process died: BrokenProcessPool'
    assert all(r["result"]["error"] is None and r["result"]["costs"] for r in records), \
        [r["result"]["error_msg"][:200] for r in records if r["result"]["error"]]
    # the script's top level ran once: no worker re-ran it
    assert side_effects.read_text().splitlines() == ["the script ran"]
    assert "[Task 1/1]" in proc.stderr  # the progress bar's prefix
    assert "flop 524288.0" in proc.stdout  # cfg.add_flop(2 * N * L * M)
    best = [json.loads(x) for x in (tmp_path / "matmul.log.best").read_text().splitlines()]
    assert len(best) == 1 and best[0]["result"]["costs"]


def test_script_templates_reach_feature_workers_and_the_measuring_process(tmp_path):
    proc = _run_script("by_value_workers.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "featurized 7 configs in the workers; measured 7" in proc.stdout


def test_a_run_whose_trials_all_failed_raises(tmp_path):
    proc = _run_script("failing_trials.py", "all", tmp_path / "f.log", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    message = ("all 8 trials of tvm_style/flaky [64] failed (build error 8; first: "
               "RuntimeError: variant 0 does not build)")
    assert proc.stdout.splitlines() == [f"tune: {message}", f"tune_tasks: {message}"]
    # the failed trials are logged all the same
    assert len((tmp_path / "f.log").read_text().splitlines()) == 8


def test_a_run_in_which_most_trials_failed_says_so(tmp_path):
    proc = _run_script("failing_trials.py", "most", tmp_path / "f.log", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    first = "first: RuntimeError: variant 0 does not build"
    assert (f"TuningWarning: 6 of 8 trials of tvm_style/flaky [64] failed (build error 6; "
            f"{first})") in proc.stdout
    assert "failed=6/8 - most trials failed" in proc.stderr  # the progress bar
    assert f"flaky: 6 of 8 trials failed (build error 6; {first})" in proc.stderr
    best = float(proc.stdout.split("best ")[1].split()[0])
    assert best > 0  # the two configs that built were measured


def test_resumed_log_whose_trials_all_failed_raises_from_tune_tasks(tmp_path):
    task = autotune.create_task("matmul", (16, 16, 16, "float32"))
    log = tmp_path / "t.jsonl"
    res = autotune.MeasureResult([], autotune.BUILD_ERROR, "LLVM ERROR: bad CPU\nTraceback "
                                 "(most recent call last): ...", 0.1, 1.0, None)
    rec = autotune.record.make_record(autotune.MeasureInput(task, task.config(0)), res)
    log.write_text(rec.dumps() + "\n")
    with pytest.raises(autotune.TuningError, match=r"all 1 trials of matmul \[16, 16, 16, "
                       r"'float32'\] failed \(build error 1\); first: LLVM ERROR: bad CPU$"):
        autotune.tune_tasks([task], n_trial=1, log_file=log, progress=False)


def test_cli_summary_line_says_most_trials_failed(tmp_path):
    from tensorlang.autotune.cli import _failed_share

    task = autotune.create_task("matmul", (16, 16, 16, "float32"))
    log = tmp_path / "t.jsonl"
    lines = []
    for i, (error, costs) in enumerate([(autotune.BUILD_ERROR, []), (autotune.TIMEOUT, []),
                                        (autotune.BUILD_ERROR, []), (None, [1e-5])]):
        res = autotune.MeasureResult(costs, error, "x" if error else "", 0.1, 1.0, None)
        lines.append(autotune.record.make_record(
            autotune.MeasureInput(task, task.config(i)), res).dumps())
    log.write_text("\n".join(lines) + "\n")
    assert _failed_share(str(log), task) == "; 3 of 4 trials failed (build error 2, timeout 1)"
    log.write_text("\n".join(lines[1:]) + "\n")  # 2 of 3 failed: still most
    assert _failed_share(str(log), task) == "; 2 of 3 trials failed (timeout 1, build error 1)"
    log.write_text("\n".join(lines[2:]) + "\n")  # 1 of 2: not most
    assert _failed_share(str(log), task) == ""


# ------------------------------------------------------------------ how templates travel
def test_templates_travel_by_module_name_or_by_value(tmp_path):
    import autotune_test_templates  # noqa: F401 - registers the test templates

    assert autotune.get_template("test_faults").worker_spec() == "autotune_test_templates"
    assert not _importable_by_name("__main__") and _importable_by_name("json")
    # a module made from a file path: no other process finds it by its name
    path = tmp_path / "made_from_path.py"
    path.write_text("X = 1\n")
    spec = importlib.util.spec_from_file_location("tl_made_from_path_xyz", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        assert not _importable_by_name("tl_made_from_path_xyz")
    finally:
        del sys.modules[spec.name]


def test_a_template_that_cannot_be_pickled_is_refused_by_name():
    import threading

    lock = threading.Lock()

    def body(n):
        with lock:  # a lock cannot travel to the workers
            return n

    body.__module__ = "__main__"
    t = autotune.task.Template("tvm_style/unpicklable", body, None, None)
    with pytest.raises(autotune.TemplateError, match="'tvm_style/unpicklable' .* cannot be "
                       "sent to the tuning worker processes: TypeError"):
        t.worker_spec()


# ------------------------------------------------------------------ AutoTVM's names
def test_measure_option_takes_tvms_spellings():
    opt = autotune.measure_option(builder="local", runner="local")
    assert isinstance(opt.builder, autotune.LocalBuilder)
    assert isinstance(opt.runner, autotune.LocalRunner)
    opt.close()
    with pytest.raises(ValueError, match="builder must be 'local' or a LocalBuilder, got 'rpc'"):
        autotune.measure_option(builder="rpc")
    with pytest.raises(TypeError, match="runner must be a LocalRunner"):
        autotune.measure_option(runner=autotune.LocalBuilder())


def test_local_runner_and_builder_take_tvms_arguments():
    r = autotune.LocalRunner(number=5, repeat=1, min_repeat_ms=150, enable_cpu_cache_flush=True,
                             cooldown_interval=0.25)
    assert (r.number, r.repeat, r.min_repeat_ms, r.flush_cache, r.cooldown) == \
        (5, 1, 150, True, 0.25)
    with pytest.raises(ValueError, match="TVM's module_loader=.* is not supported"):
        autotune.LocalRunner(module_loader=object())
    b = autotune.LocalBuilder(timeout=10, n_parallel=2, build_func="default", do_fork=False)
    assert (b.timeout, b.n_parallel) == (10.0, 2)
    b.close()
    with pytest.raises(ValueError, match="TVM's build_func='ndk' is not supported"):
        autotune.LocalBuilder(build_func="ndk")


def test_tvm_module_names_and_task_create():
    assert autotune.callback.progress_bar is autotune.progress_bar
    assert autotune.callback.log_to_file is autotune.log_to_file
    assert autotune.tuner.XGBTuner is autotune.XGBTuner
    assert autotune.record.pick_best is autotune.pick_best
    task = autotune.task.create("matmul", args=(16, 16, 16, "float32"), target="llvm")
    assert task.key == autotune.create_task("matmul", (16, 16, 16, "float32")).key
    with pytest.raises(ValueError, match="target_host='llvm -mcpu=x' differs from"):
        autotune.task.create("matmul", args=(16, 16, 16, "float32"), target="llvm",
                             target_host="llvm -mcpu=x")


def test_progress_bar_and_log_to_file_take_tvms_arguments(tmp_path):
    bar = autotune.callback.progress_bar(20, prefix="[Task 1/2] ")
    assert (bar.total, bar.desc, bar.si_prefix) == (20, "[Task 1/2]", "G")
    with pytest.raises(ValueError, match="si_prefix must be one of"):
        autotune.callback.progress_bar(20, si_prefix="X")
    with pytest.raises(ValueError, match="total must be a positive number of trials"):
        autotune.callback.progress_bar("matmul")
    with pytest.raises(ValueError, match="protocol must be 'json'"):
        autotune.callback.log_to_file(tmp_path / "x.log", protocol="pickle")


def test_xgb_tuner_takes_tvms_arguments():
    task = autotune.create_task("matmul", (16, 16, 16, "float32"))
    t = autotune.tuner.XGBTuner(task, loss_type="rank", plan_size=8, num_threads=1)
    assert (t.loss_type, t.batch_size, t.feature_workers) == ("rank", 8, 1)
    # the ranking objective fits and orders configs by the throughput it learnt
    rng = np.random.default_rng(0)
    x = rng.random((40, 6))
    t._x, t._flops = list(x), list(x[:, 0] * 1e9)
    t._fit()
    pred = t.predict(list(x))
    assert np.corrcoef(pred, x[:, 0])[0, 1] > 0.8
    for kwargs, match in [({"loss_type": "rank-binary"}, "loss_type must be one of"),
                          ({"feature_type": "knob"}, "TVM's feature_type='knob'"),
                          ({"optimizer": "ga"}, "TVM's optimizer='ga'")]:
        with pytest.raises(ValueError, match=match):
            autotune.XGBTuner(task, **kwargs)


def test_config_space_takes_tvms_policies_and_add_flop():
    cs = autotune.ConfigSpace()
    cs.define_split("v", 12, num_outputs=2, policy="verbose")
    # the divisors of 12 and the powers of two up to it
    assert [e.size[1] for e in cs.knobs["v"].entities] == [1, 2, 3, 4, 6, 8, 12]
    with pytest.raises(ValueError, match="policy 'bind_gpu' is for GPU schedules"):
        cs.define_annotate("a", [], policy="bind_gpu")
    with pytest.raises(ValueError, match="TVM's interval_all and interleave are not supported"):
        cs.define_reorder("r", [], policy="interleave")
    cs.add_flop(10)
    cs.add_flop(5)
    assert cs.flop == 15
    with pytest.raises(ValueError, match="add_flop: expected a finite number >= 0"):
        cs.add_flop(float("nan"))


def test_ga_tuner_breeds_unmeasured_configs_from_the_fastest():
    task = autotune.create_task("matmul", (64, 64, 64, "float32"))
    ga = autotune.GATuner(task, pop_size=8, elite_num=2, mutation_prob=0.1, seed=0)
    seen = set()
    for generation in range(3):
        batch = ga.next_batch(8)
        assert len(batch) == 8 and not seen & set(batch)  # never a config twice
        seen |= set(batch)
        ga.visited.update(batch)
        results = [autotune.MeasureResult([1e-3 / (1 + i)], None, "", 0, 0) for i in batch]
        ga.update([autotune.MeasureInput(task, task.config(i)) for i in batch], results)
        if generation:  # parents kept: the elites of the generation before
            assert len(ga._scores) >= 2
    with pytest.raises(ValueError, match="elite_num <= pop_size"):
        autotune.GATuner(task, pop_size=2, elite_num=3)
