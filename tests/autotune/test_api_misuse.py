"""Misuse of the tuning API gets a clear exception up front, naming the argument: not a hang,
an internal error from deep inside, a silently empty run or lost records."""

from __future__ import annotations

import json
import math

import autotune_test_templates  # noqa: F401 - registers the test templates
import numpy as np
import pytest

import tensorlang as tl
from tensorlang import autotune


@pytest.fixture(scope="module")
def option():
    """One measure option for the module (a builder process and a measuring process, spawned
    and importing tensorlang once, not for every test that tunes)."""
    opt = autotune.measure_option(autotune.LocalBuilder(n_parallel=1, timeout=30),
                                  autotune.LocalRunner(number=1, repeat=1))
    yield opt
    opt.close()


def _task():
    return autotune.create_task("test_vadd", (16,))


# ------------------------------------------------------------------ tuner arguments
@pytest.mark.parametrize(("n_trial", "error", "match"), [
    (-1, ValueError, "n_trial must be >= 0, got -1"),  # before: tuned nothing, silently
    (2.5, TypeError, "n_trial must be an int, got float"),  # before: slice indices ...
    (None, TypeError, "n_trial must be an int, got NoneType"),
    ("3", TypeError, "n_trial must be an int, got str"),
])
def test_tune_refuses_a_bad_n_trial(option, n_trial, error, match):
    with pytest.raises(error, match=match):
        autotune.RandomTuner(_task()).tune(n_trial, option)


@pytest.mark.parametrize(("value", "error", "match"), [
    (0, ValueError, "early_stopping must be >= 1, got 0"),
    (-1, ValueError, "early_stopping must be >= 1, got -1"),
    ("2", TypeError, "early_stopping must be an int, got str"),
])
def test_tune_refuses_a_bad_early_stopping(option, value, error, match):
    with pytest.raises(error, match=match):
        autotune.RandomTuner(_task()).tune(2, option, early_stopping=value)


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (-1, ValueError),
                                              (1.5, TypeError), (None, TypeError)])
def test_tuners_refuse_a_bad_batch_size(value, error):
    # batch_size=0 used to run tune() without measuring anything, silently
    for cls in (autotune.RandomTuner, autotune.GridSearchTuner, autotune.GATuner):
        with pytest.raises(error, match="batch_size must be"):
            cls(_task(), batch_size=value)


@pytest.mark.parametrize("seed, error", [(-1, ValueError), (1.5, TypeError), ("7", TypeError)])
def test_a_bad_seed_is_refused_naming_it(seed, error):
    # numpy's generator refused -1 from deep inside: "expected non-negative integer"
    for cls in (autotune.RandomTuner, autotune.XGBTuner):
        with pytest.raises(error, match=f"{cls.__name__}: seed must be"):
            cls(_task(), seed=seed)
    with pytest.raises(error, match="TaskScheduler: seed must be"):
        autotune.TaskScheduler([_task()], seed=seed)
    assert autotune.RandomTuner(_task(), seed=np.int64(3)).rng.integers(10) == \
        np.random.default_rng(3).integers(10)


def test_tune_refuses_callbacks_that_are_not_a_list_of_callables(option, tmp_path):
    log = autotune.log_to_file(tmp_path / "t.log")
    with pytest.raises(TypeError, match="callbacks must be a list of callables, got one "
                                        "log_to_file; give"):
        autotune.RandomTuner(_task()).tune(2, option, callbacks=log)
    with pytest.raises(TypeError, match="each callback must be callable .* got str 'x'"):
        autotune.RandomTuner(_task()).tune(2, option, callbacks=[log, "x"])
    assert not (tmp_path / "t.log").exists()  # refused before measuring anything


def test_tuning_a_tuner_again_measures_n_trial_more(option, tmp_path):
    # before: the second call measured nothing (n_trial counted the first call's trials)
    log = tmp_path / "t.log"
    t = autotune.RandomTuner(_task(), seed=0)
    t.tune(2, option, callbacks=[autotune.log_to_file(log)])
    t.tune(2, option, callbacks=[autotune.log_to_file(log)])
    records = autotune.load_records(log)
    assert t.trials == 4 and len(records) == 4
    assert len({json.dumps(r.config["entity"], sort_keys=True) for r in records}) == 4


def test_tune_tasks_refuses_bad_arguments_before_tuning(tmp_path):
    log = tmp_path / "t.log"
    with pytest.raises(TypeError, match="tasks must be a list of Tasks, got one Task"):
        autotune.tune_tasks(_task(), 2, log)
    with pytest.raises(TypeError, match="n_trial must be an int, got NoneType"):
        autotune.tune_tasks([_task()], None, log)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        autotune.tune_tasks([_task()], 2, log, batch_size=0)
    assert not log.exists()


# ------------------------------------------------------------------ builder and runner
@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"n_parallel": 0}, ValueError, "n_parallel must be >= 1, got 0"),  # before: CPU count
    ({"n_parallel": 2.5}, TypeError, "n_parallel must be an int"),
    ({"timeout": 0}, ValueError, "timeout must be > 0"),  # before: no time limit at all
    ({"timeout": -1}, ValueError, "timeout must be > 0"),  # before: itimer_error
    ({"timeout": math.nan}, ValueError, "timeout must be > 0 .*nan"),
    ({"timeout": math.inf}, ValueError, "timeout must be > 0 .*inf"),  # before: OverflowError
])
def test_local_builder_refuses_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=f"LocalBuilder: {match}"):
        autotune.LocalBuilder(**kwargs)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"number": None}, TypeError, "number must be an int, got NoneType"),
    ({"repeat": 0}, ValueError, "number and repeat must be >= 1, got number=5, repeat=0"),
    ({"timeout": math.nan}, ValueError, "timeout must be > 0"),  # before: ValueError in poll
    ({"timeout": math.inf}, ValueError, "timeout must be > 0"),  # before: OverflowError
    ({"min_repeat_ms": -1}, ValueError, "min_repeat_ms must be >= 0"),  # every trial failed
    ({"cooldown": -1}, ValueError, "cooldown must be >= 0"),  # the loop died in time.sleep
    ({"rtol": -1e-3}, ValueError, "rtol must be >= 0"),
])
def test_local_runner_refuses_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=f"LocalRunner: {match}"):
        autotune.LocalRunner(**kwargs)


def test_waits_longer_than_a_week_are_a_week():
    # the runner's poll() takes its wait as an int of milliseconds: --timeout=1e10 ended a
    # tuning with "OverflowError: timeout is too large" (a bug?) at the first candidate
    from tensorlang.autotune.arguments import MAX_SECONDS

    runner = autotune.LocalRunner(timeout=1e10, cooldown=1e300, startup_margin=1e12)
    assert runner.timeout == runner.cooldown == runner.startup_margin == MAX_SECONDS
    assert autotune.LocalBuilder(timeout=1e10).timeout == MAX_SECONDS == 7 * 24 * 3600
    assert (MAX_SECONDS * 2 + 60) * 1000 < 2**31  # the longest poll() fits its C int


# ------------------------------------------------------------------ templates and tasks
@autotune.template("misuse_tensor_not_list")
def _tensor_not_list(n: int):
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n,), lambda i: A[i] + 1.0, name="C")
    return tl.create_schedule(C), C


@autotune.template("misuse_duplicate_knob")
def _duplicate_knob(n: int):
    autotune.get_config().define_knob("unroll", [0, 4, 4])
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n,), lambda i: A[i] + 1.0, name="C")
    return tl.create_schedule(C), [A, C]


def test_template_returning_one_tensor_not_a_list_is_a_template_error():
    # before: TypeError from the loop-nest builder when the task was tuned or built
    with pytest.raises(autotune.TemplateError, match="tensors a list of the kernel's "
                                                     "arguments, got Tensor"):
        autotune.create_task("misuse_tensor_not_list", (8,))


def test_knob_with_duplicate_candidates_is_refused():
    with pytest.raises(ValueError, match=r"define_knob\('unroll'\): candidates must be "
                                         "distinct, 4 given more than once"):
        autotune.create_task("misuse_duplicate_knob", (8,))


@pytest.mark.parametrize("index", [2.0, "1", None])
def test_config_index_must_be_an_int(index):
    with pytest.raises(TypeError, match="config index must be an int"):
        _task().config(index)


def test_config_index_may_be_a_numpy_int():
    assert _task().config(np.int64(3)).index == 3


def test_task_args_must_be_a_tuple():
    with pytest.raises(TypeError, match=r"must be a tuple or list, got int 16 \(one argument: "
                                        r"\(16,\)\)"):
        autotune.create_task("test_vadd", 16)


# ------------------------------------------------------------------ records
def _log(tmp_path, option):
    log = tmp_path / "t.log"
    autotune.RandomTuner(_task(), seed=0).tune(3, option, callbacks=[autotune.log_to_file(log)])
    return log


def test_records_given_as_bytes_or_non_records_are_refused(option, tmp_path):
    # before: a bytes path was iterated as ints and every entry dropped: nothing applied
    log = _log(tmp_path, option)
    with pytest.raises(TypeError, match="not bytes"):
        autotune.apply_history_best(bytes(log))
    with pytest.raises(TypeError, match="expected Records .* got str"):
        autotune.apply_history_best([str(log)])
    with pytest.raises(TypeError, match="expected a log's path or a list of Records, got "
                                        "NoneType"):
        autotune.load_records(None)
    records = autotune.load_records(log)
    assert autotune.load_records(records) == records


def test_pick_best_refuses_to_overwrite_its_input(option, tmp_path):
    # before: the log was replaced by its best records, the others lost
    log = _log(tmp_path, option)
    before = log.read_text()
    with pytest.raises(ValueError, match="pick_best: out_file .* is in_file"):
        autotune.pick_best(log, log)
    assert log.read_text() == before
    assert autotune.pick_best(log, tmp_path / "best.log") == 1


def test_a_task_that_leaves_the_dtype_to_its_default_counts_its_flops():
    """matmul's and dense's flop functions name the dtype, which create_task may leave to the
    template's default: tensorlang tune matmul --args 64,64,64 failed after its first trial
    (<lambda>() missing 1 required positional argument: 'dtype')."""
    for name in ("matmul", "dense"):
        task = autotune.create_task(name, (8, 8, 8))
        assert task.flop == 2.0 * 8 * 8 * 8
        assert task.workload["args"] == [8, 8, 8]
