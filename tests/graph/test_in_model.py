"""graph.remeasure_in_model (issue 21, measurement fidelity): each tuned kernel's finalists timed
inside runs of the model, the fastest chosen and logged; graph.build then applies the choice."""

from __future__ import annotations

import json
import time
import warnings

import numpy as np
import pytest
from tensorlang.autotune.record import Record
from tensorlang.graph import in_model, model_zoo
from tensorlang.graph.build import run_graph_passes
from tensorlang.graph.tuning import GraphTuning, _types

import tensorlang as tl
from tensorlang import autotune, graph
from tensorlang.version import __version__


@pytest.fixture(scope="module")
def cnn():
    g = graph.from_onnx(model_zoo.small_cnn())
    convs = [t for t in graph.extract_tasks(g) if t.op == "conv" and len(t.config_space) > 8]
    return g, convs[:2]


def _record(task, index: int, cost: float, **flags) -> Record:
    result = {"costs": [cost], "error": None, "error_msg": "", "all_cost": 0.0, **flags}
    return Record(task.workload, task.target, task.config_space.get(index).to_json(), None,
                  result, time.time(), __version__)


def _indices(task) -> tuple[int, int, int]:
    """Three configs of the task that are not its default: (best, second, third) in the log."""
    fallback = task.config_space.fallback_index()
    return tuple(i for i in range(len(task.config_space)) if i != fallback)[:3]


def _log(path, tasks) -> None:
    """Per task: three tuned configs at 100, 200 and 300 us, and its default at 400 us."""
    recs = []
    for t in tasks:
        best, second, third = _indices(t)
        recs += [_record(t, best, 1e-4), _record(t, second, 2e-4), _record(t, third, 3e-4),
                 _record(t, t.config_space.fallback_index(), 4e-4)]
    autotune.record.append_records(path, recs)


def _entity(task, index: int) -> dict:
    return task.config_space.get(index).to_json()["entity"]


def _node(g, tuning, task):
    """The task's first node in the graph a build with ``tuning`` runs."""
    return next(n for n in run_graph_passes(g, 2, tuning, None).graph.nodes
                if n.name == task.nodes[0])


def _applied_entity(g, log, task) -> dict:
    """The config a build with the log gives the task's node."""
    tuning = GraphTuning(str(log))
    node = _node(g, tuning, task)
    return tuning.best_record(node.op, node.attrs, *_types(node)).config["entity"]


def test_the_fastest_in_the_model_is_chosen_unless_within_the_margin(cnn, tmp_path,
                                                                     monkeypatch):
    """Builds: 0 runs the log's best of every task, 1 the second, 2 each task's default. Task
    A's second runs 20% faster in the model: chosen. Task B's second is 0.5% faster (under
    REMEASURE_MARGIN): its incumbent stays. Every finalist gets an in-model record of the
    times it ran at, exactly one chosen per task; the build then applies the choice."""
    g, (a, b) = cnn
    log = tmp_path / "cnn.jsonl"
    _log(log, [a, b])
    in_model_us = {a.nodes[0]: [100.0, 80.0, 130.0], b.nodes[0]: [100.0, 99.5, 150.0]}

    def fake_timing(_g, logs, rounds, _opt):
        assert len(logs) == 3 and rounds == 2  # the best two and the default
        assert all(len(records) == 2 for records in logs)  # one per task
        return [{node: [us[i] * 1e-6] * 4 for node, us in in_model_us.items()}
                for i in range(len(logs))]

    monkeypatch.setattr(in_model, "_time_builds", fake_timing)
    choices = graph.remeasure_in_model(g, str(log), top=2, rounds=2)
    by_node = {c.nodes[0]: c for c in choices}
    assert set(by_node) == {a.nodes[0], b.nodes[0]}
    assert by_node[a.nodes[0]].chosen == 1 and by_node[b.nodes[0]].chosen == 0
    assert by_node[a.nodes[0]].times == pytest.approx((1e-4, 8e-5, 1.3e-4))
    assert by_node[a.nodes[0]].configs == tuple(
        _entity(a, i) for i in (_indices(a)[0], _indices(a)[1], a.config_space.fallback_index()))
    assert "chose finalist 1 (1.25x)" in by_node[a.nodes[0]].describe()
    assert "kept the log's best" in by_node[b.nodes[0]].describe()
    logged = [r for r in autotune.load_records(log) if r.in_model]
    assert len(logged) == 6 and all(r.remeasured and len(r.result["costs"]) == 4
                                    for r in logged)
    assert sorted(r.config["entity"] == _entity(a, _indices(a)[1])
                  for r in logged if r.chosen and r.key == a.key) == [True]
    assert sum(r.chosen for r in logged if r.key == b.key) == 1
    assert _applied_entity(g, log, a) == _entity(a, _indices(a)[1])
    assert _applied_entity(g, log, b) == _entity(b, _indices(b)[0])


def test_the_latest_choice_in_a_model_outranks_older_ones_and_the_tuner_s(cnn):
    """A later in-model choice wins over an earlier one even where the earlier figure is
    lower (each is a run of its own), and any in-model choice over a re-measurement's."""
    _g, (a, _b) = cnn
    best, second, third = _indices(a)
    tuner_choice = _record(a, best, 1e-5, remeasured=True, chosen=True)
    older = _record(a, second, 5e-5, remeasured=True, in_model=True, chosen=True)
    time.sleep(0.01)
    newer = _record(a, third, 9e-5, remeasured=True, in_model=True, chosen=True)
    timed_only = _record(a, best, 1e-6, remeasured=True, in_model=True)
    got = autotune.best_records([tuner_choice, older, newer, timed_only])
    assert got[(a.key, a.target)] is newer
    assert autotune.best_records([tuner_choice, older])[(a.key, a.target)] is older
    assert autotune.best_records([tuner_choice, timed_only])[(a.key, a.target)] is tuner_choice


def test_layouts_are_compared_by_the_kernels_timed_alone(cnn, tmp_path):
    """An in-model choice's figure is a time inside the model in one layout: conv blocks are
    chosen by the tuner's figures (GraphTuning.cost_alone), as before the choice."""
    g, (a, _b) = cnn
    best, second, _third = _indices(a)
    log = tmp_path / "a.jsonl"
    autotune.record.append_records(log, [
        _record(a, best, 1e-4, remeasured=True, chosen=True),
        _record(a, second, 3e-4, remeasured=True, in_model=True, chosen=True)])
    tuning = GraphTuning(str(log))
    node = _node(g, tuning, a)
    rec = tuning.best_record(node.op, node.attrs, *_types(node))
    assert rec.in_model and rec.cost == pytest.approx(3e-4)
    assert tuning.cost_alone(rec) == pytest.approx(1e-4)


def test_a_log_line_with_a_bad_in_model_flag_is_skipped(cnn, tmp_path):
    _g, (a, _b) = cnn
    line = json.loads(_record(a, 0, 1e-4).dumps())
    line["result"]["in_model"] = "yes"
    log = tmp_path / "bad.jsonl"
    log.write_text(json.dumps(line) + "\n")
    with pytest.warns(UserWarning, match="result in_model must be true or false"):
        assert autotune.load_records(log) == []


@pytest.mark.parametrize("tuner", ["random", "xgb"])
def test_tuners_do_not_learn_from_in_model_times(cnn, tuner):
    """An in-model record is a per-call time inside a model, not a trial: its config's own
    trial is in the log. A tuner neither marks it measured nor fits its cost model on it."""
    _g, (a, _b) = cnn
    t = autotune.RandomTuner(a, seed=0) if tuner == "random" else autotune.XGBTuner(a, seed=0)
    t.load_history([_record(a, _indices(a)[0], 1e-4, remeasured=True, in_model=True)])
    assert t.visited == set() and t.best_config is None
    if tuner == "xgb":
        assert t._x == []
        t.close()


def test_finalists_are_timed_inside_runs_and_the_model_stays_correct(cnn, tmp_path):
    """Timed for real: one record per finalist of each task, one chosen; the model built with
    the log computes what the untuned build does."""
    g, (a, b) = cnn
    log = tmp_path / "cnn.jsonl"
    _log(log, [a, b])
    choices = graph.remeasure_in_model(g, str(log), top=2, rounds=1)
    assert sorted(c.nodes[0] for c in choices) == sorted([a.nodes[0], b.nodes[0]])
    assert all(len(c.times) == 3 and min(c.times) > 0 for c in choices)
    logged = [r for r in autotune.load_records(log) if r.in_model]
    assert len(logged) == 6
    assert all(len(r.result["costs"]) == in_model.RUNS_PER_ROUND for r in logged)
    assert all(sum(r.chosen for r in logged if r.key == t.key) == 1 for t in (a, b))
    x = np.random.default_rng(0).standard_normal(g.inputs[0].shape).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the other tasks have no record
        tuned = graph.build(g, tuning_log=str(log)).run(x=x)
    untuned = graph.build(g).run(x=x)
    for name, v in untuned.items():
        np.testing.assert_allclose(tuned[name], v, rtol=1e-4, atol=1e-5)


def test_a_log_with_one_config_per_task_has_nothing_to_choose(cnn, tmp_path):
    g, (a, _b) = cnn
    log = tmp_path / "one.jsonl"
    autotune.record.append_records(log, [_record(a, a.config_space.fallback_index(), 1e-4)])
    assert graph.remeasure_in_model(g, str(log)) == []
    assert not any(r.in_model for r in autotune.load_records(log))


@pytest.mark.parametrize("kw, message", [
    ({"top": 0}, "top must be an int >= 1, got 0"),
    ({"rounds": "3"}, "rounds must be an int >= 1, got '3'"),
    ({"top": True}, "top must be an int >= 1, got True"),
])
def test_bad_arguments_are_refused(cnn, tmp_path, kw, message):
    g, (a, b) = cnn
    log = tmp_path / "cnn.jsonl"
    _log(log, [a, b])
    with pytest.raises(ValueError, match=message):
        graph.remeasure_in_model(g, str(log), **kw)


def test_a_missing_log_is_refused(cnn, tmp_path):
    with pytest.raises(graph.BuildError, match="does not exist"):
        graph.remeasure_in_model(cnn[0], str(tmp_path / "none.jsonl"))


def test_a_model_with_shape_variables_is_refused(tmp_path):
    b = graph.Builder("dyn")
    x = b.input("x", (tl.var("batch"), 16))
    g = b.build(b.relu(x))
    log = tmp_path / "dyn.jsonl"
    log.write_text("")
    with pytest.raises(ValueError, match=r"inputs \['x'\] have shape variables"):
        graph.remeasure_in_model(g, str(log))


def test_step_times_time_every_step_in_each_run(cnn):
    g, _tasks = cnn
    gm = graph.build(g)
    times = gm.step_times(runs=3)
    assert list(times) == list(dict.fromkeys(st["node"] for st in gm.plan["steps"]))
    assert all(len(v) == 3 and min(v) > 0 for v in times.values())


def test_step_times_wake_the_pools_workers_before_each_timed_step(cnn, monkeypatch):
    # as a whole run launches a kernel right after the one before, its workers spinning: each
    # step's timing asks for the workers to run first (untimed), not to be found yielding
    from tensorlang.runtime import threadpool

    g, _tasks = cnn
    gm = graph.build(g)
    real, asked = threadpool.time_calls, []

    def time_calls(address, raw, number, woken=False):
        asked.append(woken)
        return real(address, raw, number, woken)

    monkeypatch.setattr(threadpool, "time_calls", time_calls)
    gm.step_times(runs=2)
    assert asked == [True] * (2 * len(gm.plan["steps"]))


def _kernel_at(gm, node: str):
    return next(gm.kernels[st["kernel"]] for st in gm.plan["steps"] if st["node"] == node)


def test_step_times_can_run_another_build_s_kernel_in_a_step(cnn, tmp_path):
    """A tuned build's kernel run in the untuned build's step (the same buffers and weights):
    timed there, and the outputs are still right; a kernel of another workload is refused."""
    g, (a, b) = cnn
    log = tmp_path / "a.jsonl"
    autotune.record.append_records(log, [_record(a, _indices(a)[0], 1e-4)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tuned = graph.build(g, tuning_log=str(log))
    plain = graph.build(g)
    x = np.random.default_rng(1).standard_normal(g.inputs[0].shape).astype(np.float32)
    want = plain.run(x=x)
    swapped = _kernel_at(tuned, a.nodes[0])
    assert swapped is not _kernel_at(plain, a.nodes[0])
    plain.set_input(x=x)
    times = plain.step_times(2, {a.nodes[0]: swapped})
    assert len(times[a.nodes[0]]) == 2
    for n, name in enumerate(plain.output_names):
        np.testing.assert_allclose(plain.get_output(n), want[name], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=f"node {b.nodes[0]!r} takes other arguments"):
        plain.step_times(1, {b.nodes[0]: swapped})
