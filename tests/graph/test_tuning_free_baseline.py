"""A template-free record is applied only when it beats the kernel's default schedule, when
the log measured that default (graph.tuning_free.measure_baselines; issue 20)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from graph_testing import log_with_costs
from tensorlang.graph.tuning_free import BASELINE, FreeGraphTask, measure_baselines

from tensorlang import autotune, graph


def _graph():
    b = graph.Builder("free_baseline")
    x = b.input("x", (32, 256))
    return b.build(b.softmax(b.relu(x), axes=[1]))


@pytest.fixture(scope="module")
def tuned_log(tmp_path_factory):
    """The softmax's template-free task tuned 2 trials, then its default kernel measured."""
    g = _graph()
    tasks = graph.extract_tasks(g, template_free=True)
    log = str(tmp_path_factory.mktemp("baseline") / "log.jsonl")
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=10))
    try:
        autotune.RandomTuner(tasks[1], batch_size=2, seed=0).tune(
            2, opt, callbacks=[autotune.log_to_file(log)])
        base = measure_baselines(tasks, opt, log)
    finally:
        opt.close()
    return g, tasks, log, base


def test_measure_baselines_times_each_template_free_kernel(tuned_log):
    _g, tasks, log, base = tuned_log
    assert all(isinstance(t, FreeGraphTask) for t in tasks)
    assert set(base) == {t.key for t in tasks}
    recs = {r.key: r for r in autotune.load_records(log) if r.workload["name"] == BASELINE}
    for t in tasks:
        # one valid record of the one-config default task, the time measure_baselines returns
        rec = recs[t.baseline().key]
        assert rec.valid and rec.cost == base[t.key] and 0 < rec.cost < 1.0  # loaded host: ms
        assert len(t.baseline().config_space) == 1


@pytest.mark.parametrize("searched, default, softmax_tuned", [(1e-6, 2e-6, True),
                                                              (2e-6, 1e-6, False),
                                                              (1e-6, 1e-6, False)])
def test_build_keeps_the_default_when_it_was_measured_faster(tuned_log, tmp_path, searched,
                                                             default, softmax_tuned):
    g, _tasks, log, _base = tuned_log
    gm = graph.build(g, target="llvm",
                     tuning_log=log_with_costs(log, tmp_path / "log.jsonl", searched, default))
    tuned = {k["op"]: k["tuned"] for k in gm.plan["kernels"].values()}
    assert tuned == {"relu": False, "softmax": softmax_tuned}
    (softmax,) = [k for k in gm.plan["kernels"].values() if k["op"] == "softmax"]
    # a replayed record's measured time is the kernel's time, as for a template's record
    if softmax_tuned:
        assert softmax["time_source"] == "tuning log" and softmax["time_s"] == searched
    else:
        assert softmax["time_source"] == "roofline estimate"
    x = np.random.default_rng(1).standard_normal((32, 256)).astype(np.float32)
    (out,) = gm.run(x=x).values()
    r = np.maximum(x, 0.0)
    e = np.exp(r - r.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_without_a_baseline_the_searched_record_is_applied(tuned_log, tmp_path):
    g, _tasks, log, _base = tuned_log
    only_searched = tmp_path / "searched.jsonl"
    only_searched.write_text("".join(line for line in Path(log).read_text().splitlines(keepends=True)
                                     if BASELINE not in line))
    gm = graph.build(g, target="llvm", tuning_log=str(only_searched))
    assert {k["op"]: k["tuned"] for k in gm.plan["kernels"].values()} == \
        {"relu": False, "softmax": True}
