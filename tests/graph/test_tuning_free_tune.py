"""Tuning a template-free task through the ordinary entry points (tune_tasks, TaskScheduler,
a tuner with log_to_file) logs the kernel's default schedule once per log, so that the build's
rule "apply a searched record only if faster than the default" always has its baseline
(issue 20)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
from graph_testing import log_with_costs
from tensorlang.graph.tuning_free import BASELINE, WORKLOAD, FreeGraphTask

from tensorlang import autotune, graph, runtime


def _graph():
    b = graph.Builder("free_tune")
    x = b.input("x", (16, 128))
    return b.build(b.softmax(b.relu(x), axes=[1]))


def _softmax_task(g) -> FreeGraphTask:
    (task,) = [t for t in graph.extract_tasks(g, template_free=True)
               if isinstance(t, FreeGraphTask) and t.op == "softmax"]
    return task


@pytest.fixture(scope="module")
def option():
    """One measure option (two builder processes, a measuring process) for the tuning runs of
    this file: each new one spawned its three processes again (about a second of CPU each)."""
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=10))
    with contextlib.closing(opt):
        yield opt


def _records(log: str, name: str) -> list:
    return [r for r in autotune.load_records(log) if r.workload["name"] == name]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, option):
    """The softmax's template-free task tuned 2 trials by tune_tasks into a fresh log, then
    resumed to 4 trials, without transfer (the log's copy after each run)."""
    g = _graph()
    task = _softmax_task(g)
    root = tmp_path_factory.mktemp("free_tune")
    log = root / "log.jsonl"
    autotune.tune_tasks([task], 2, log, tuner="random", measure_option=option, progress=False,
                        seed=0, remeasure_top=0)
    first = (root / "first.jsonl")
    first.write_text(log.read_text())
    autotune.tune_tasks([task], 4, log, tuner="random", measure_option=option, progress=False,
                        seed=0, remeasure_top=0, transfer=False)
    return g, task, str(first), str(log)


def test_tune_tasks_logs_the_default_schedule_once(tuned):
    _g, task, first, _log = tuned
    (base,) = _records(first, BASELINE)
    assert base.key == task.baseline().key and base.target == task.target
    # a time, not a flag: positive, and short even on a loaded 2-core host (10-19 ms seen)
    assert base.valid and 0 < base.cost < 1.0
    # the baseline is not a trial: the 2 trials asked for are all searched configs
    assert len(_records(first, WORKLOAD)) == 2


def test_resume_does_not_measure_the_baseline_again(tuned):
    _g, _task, first, log = tuned
    (base,) = _records(log, BASELINE)
    assert base.cost == _records(first, BASELINE)[0].cost
    assert len(_records(log, WORKLOAD)) == 4


@pytest.mark.parametrize("searched, default, applied", [(3e-6, 1e-6, False),
                                                        (1e-6, 3e-6, True)])
def test_build_applies_a_tuned_record_only_when_faster_than_the_logged_default(
        tuned, tmp_path, searched, default, applied):
    g, _task, _first, log = tuned
    gm = graph.build(g, target="llvm",
                     tuning_log=log_with_costs(log, tmp_path / "log.jsonl", searched, default))
    (softmax,) = [k for k in gm.plan["kernels"].values() if k["op"] == "softmax"]
    assert softmax["tuned"] is applied
    x = np.random.default_rng(2).standard_normal((16, 128)).astype(np.float32)
    (out,) = gm.run(x=x).values()
    r = np.maximum(x, 0.0)
    e = np.exp(r - r.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_task_scheduler_logs_the_baseline_once_over_its_rounds(tmp_path, option):
    task = _softmax_task(_graph())
    log = str(tmp_path / "log.jsonl")
    sched = autotune.TaskScheduler([task], log_file=log, measure_option=option,
                                   tuner="random", round_trials=1, progress=False, seed=0)
    sched.tune(n_trial=3)
    assert sum(not r.remeasured for r in _records(log, WORKLOAD)) == 3  # and re-measured ones
    (base,) = _records(log, BASELINE)
    assert base.valid


def test_a_tuner_with_history_holding_the_baseline_does_not_measure_it(tmp_path, option):
    task = _softmax_task(_graph())
    log = str(tmp_path / "log.jsonl")
    tuner = autotune.RandomTuner(task, batch_size=1, seed=0)
    tuner.tune(1, option, callbacks=[autotune.log_to_file(log)])
    again = autotune.RandomTuner(task, batch_size=1, seed=1)
    again.load_history(autotune.load_records(log))
    assert again.baseline_logged
    again.tune(2, option, callbacks=[autotune.log_to_file(log)])
    assert len(_records(log, BASELINE)) == 1
    assert len(_records(log, WORKLOAD)) == 3


def _softmax_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 128])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 128])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"], axis=1)]
    model = helper.make_model(helper.make_graph(nodes, "free_cli", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)
    return path


def test_cli_tune_template_free_tunes_and_baselines_the_untemplated_kernels(tmp_path, capsys):
    from tensorlang.cli import main

    model = _softmax_onnx(tmp_path / "free.onnx")
    log = tmp_path / "free.jsonl"
    assert main(["tune", str(model), "--trials", "2", "--log", str(log), "--tuner", "random",
                 "--seed", "0", "--tasks", "1", "--template-free"]) == 0
    assert "tuning 1 x 2 trials" in capsys.readouterr().out
    searched = _records(str(log), WORKLOAD)
    assert sum(not r.remeasured for r in searched) == 2
    (base,) = _records(str(log), BASELINE)
    assert base.valid and base.workload["args"] == searched[0].workload["args"]
    # without the flag the model has no tunable kernel: nothing is tuned
    other = tmp_path / "plain.jsonl"
    assert main(["tune", str(model), "--trials", "2", "--log", str(other)]) == 0
    assert "0 tunable workloads" in capsys.readouterr().out
    assert not other.exists() or not other.read_text()


def test_cli_refuses_template_free_for_a_template(tmp_path, capsys):
    from tensorlang.cli import main

    assert main(["tune", "matmul", "--args", "16,16,16,float32", "--template-free",
                 "--log", str(tmp_path / "x.jsonl")]) == 2
    assert "--template-free is for models (.onnx)" in capsys.readouterr().err


def test_cli_no_templates_tunes_every_kernel_template_free_and_deploys(tmp_path, capsys):
    import onnx
    from tensorlang.graph import model_zoo

    from tensorlang.cli import main

    model = tmp_path / "cnn.onnx"
    onnx.save(model_zoo.small_cnn(), model)
    log, pkg = tmp_path / "all.jsonl", tmp_path / "all.tlpkg"
    assert main(["tune", str(model), "--trials", "2", "--log", str(log), "--tuner", "random",
                 "--seed", "0", "--tasks", "2", "--no-templates", "--in-model-top", "0",
                 "--flush-mib", "4"]) == 0
    out = capsys.readouterr().out
    # the two heaviest kernels are the convs: template-free tasks, each with its baseline
    assert out.count("  fused ") + out.count("  conv ") == 2
    names = [r.workload["name"] for r in autotune.load_records(str(log))]
    assert "graph_kernel" not in names
    assert names.count(BASELINE) == 2 and names.count(WORKLOAD) >= 4
    with pytest.warns(UserWarning, match="have no record"):  # the kernels not tuned
        assert main(["compile", str(model), "-o", str(pkg), "--log", str(log)]) == 0
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    got = runtime.load(str(pkg)).run(x=x)
    ref = graph.build(graph.from_onnx(str(model)), opt_level=0).run(x=x)
    for k, v in ref.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("argv, message", [
    (["tune", "matmul", "--args", "16,16,16,float32", "--no-templates"],
     "--no-templates is for models"),
    (["tune", "MODEL", "--no-templates", "--blocks", "16"],
     "with --no-templates no kernel is tuned by its template"),
])
def test_cli_no_templates_refusals(tmp_path, capsys, argv, message):
    import onnx
    from tensorlang.graph import model_zoo

    from tensorlang.cli import main

    model = tmp_path / "cnn.onnx"
    onnx.save(model_zoo.small_cnn(), model)
    argv = [str(model) if a == "MODEL" else a for a in argv]
    assert main([*argv, "--log", str(tmp_path / "x.jsonl"), "--trials", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
