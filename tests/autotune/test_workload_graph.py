"""graph.extract_tasks(template_free=True): a template-free task for each kernel no template
tunes; graph.build(tuning_log=...) replays their records (issue 20)."""

from __future__ import annotations

import contextlib
import json
import warnings

import numpy as np
import pytest
from tensorlang.autotune.sketch import TileTooLarge

from tensorlang import autotune, graph


def _graph():
    b = graph.Builder("free")
    x = b.input("x", (32, 256))
    return b.build(b.softmax(b.relu(x), axes=[1]))


def test_untemplated_kernels_get_template_free_tasks():
    g = _graph()
    assert graph.extract_tasks(g) == []  # no template tunes softmax
    tasks = graph.extract_tasks(g, template_free=True)
    assert [t.op for t in tasks] == ["relu", "softmax"]  # softmax is opaque: not fused
    for t in tasks:
        assert isinstance(t, autotune.WorkloadTask) and t.name == "graph_kernel_free"
        assert t.weight == 1 and len(t.config_space) > 1
        # its input is in cache when the graph calls it (just written), as measured with a
        # flushing runner
        assert t.warm_args == (0,)


@pytest.fixture(scope="module")
def option():
    """One measure option (two builder processes, a measuring process) for the tuning runs of
    this file: each new one spawned its three processes again (about a second of CPU each)."""
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=20))
    with contextlib.closing(opt):
        yield opt


def _tune_free(task, log, costs: float, option):
    """Two random trials of ``task`` into ``log`` (with its default's baseline); ``costs``:
    the searched records' figures set to it afterwards (the tests choose who wins)."""
    autotune.RandomTuner(task, batch_size=2, seed=0).tune(
        2, option, callbacks=[autotune.log_to_file(log)])
    _with_costs(task, log, log, costs)


def _with_costs(task, src, dst, costs: float):
    """``src``'s records into ``dst``, the searched ones' figures set to ``costs``."""
    recs = [json.loads(line) for line in src.read_text().splitlines()]
    searched = [r for r in recs
                if r["workload"]["name"] == task.name and r["result"]["error"] is None]
    assert searched, f"no valid searched record in {[r['result'] for r in recs]}"
    for r in searched:
        r["result"]["costs"] = [costs, costs]
    dst.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_build_replays_the_template_free_record(tmp_path, option):
    g = _graph()
    task = graph.extract_tasks(g, template_free=True)[1]  # the softmax
    log = tmp_path / "free.jsonl"
    # the searched records made faster than the graph default the tuner logged beside them, so
    # the build applies the best (one slower than the default would be left out)
    # (set, not scaled: a searched trial's repeat can take 12 ms when a thread wakes late, and
    # a thousandth of that lost to the default's 2 us in CI)
    _tune_free(task, log, 1e-9, option)
    gm = graph.build(g, target="llvm", tuning_log=str(log))
    tuned = {k["op"]: k["tuned"] for k in gm.plan["kernels"].values()}
    assert tuned == {"relu": False, "softmax": True}
    x = np.random.default_rng(0).standard_normal((32, 256)).astype(np.float32)
    (out,) = gm.run(x=x).values()
    r = np.maximum(x, 0.0)
    e = np.exp(r - r.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def _conv_graph():
    rng = np.random.default_rng(1)
    b = graph.Builder("conv_free")
    x = b.input("x", (1, 16, 12, 12))
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    return b.build(b.relu(b.conv(x, b.const(w, name="w"), pads=1))), w


def test_every_kernel_template_free_replaces_the_template_tasks():
    g, _ = _conv_graph()
    (templated,) = graph.extract_tasks(g)
    assert templated.name == "graph_kernel"
    tasks = graph.extract_tasks(g, template_free="all")  # as Ansor: no template task
    # every kernel: the conv (relu fused) and the layout transform back to NCHW
    assert [t.op for t in tasks] == ["conv", "layout_transform"]
    assert all(t.name == "graph_kernel_free" for t in tasks)
    free = tasks[0]
    # the same kernel (args) as the template task: the build finds either record by it
    assert free.args == templated.args and free.layout == templated.layout
    assert free.baseline() is not None


@pytest.mark.parametrize("value", ["every", 1, None])
def test_extract_tasks_refuses_an_unknown_template_free(value):
    g, _ = _conv_graph()
    with pytest.raises(ValueError, match="template_free must be False, True or 'all'"):
        graph.extract_tasks(g, template_free=value)


def test_template_free_all_refuses_conv_blocks():
    g, _ = _conv_graph()
    with pytest.raises(ValueError, match="no template task is made"):
        graph.extract_tasks(g, template_free="all", blocks=(16,))


def test_build_applies_a_template_free_conv_record_unless_the_default_wins(tmp_path,
                                                                           option):
    g, w = _conv_graph()
    task = graph.extract_tasks(g, template_free="all")[0]  # the conv
    x = np.random.default_rng(2).standard_normal((1, 16, 12, 12)).astype(np.float32)
    pad = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(pad, (3, 3), axis=(1, 2))
    ref = np.maximum(np.einsum("chwij,ocij->ohw", win, w), 0.0)[None]
    tuned_log = tmp_path / "all.jsonl"
    _tune_free(task, tuned_log, 1.0, option)  # tuned once; each case sets the searched figures
    for costs, tuned in ((1e-9, True), (1.0, False)):  # searched faster / slower than default
        log = tmp_path / f"all_{costs}.jsonl"
        _with_costs(task, tuned_log, log, costs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a kept default is not an untuned kernel
            gm = graph.build(g, target="llvm", tuning_log=str(log))
        assert {k["op"]: k["tuned"] for k in gm.plan["kernels"].values()} == {
            "fused": tuned, "layout_transform": False}
        (out,) = gm.run(x=x).values()
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_a_sketch_fallback_the_rules_refuse_does_not_stop_the_tuning(tmp_path, option):
    # a 4x4 output in 16-channel blocks: the sketch's fallback register tile has 1024 elements
    rng = np.random.default_rng(3)
    b = graph.Builder("small_conv")
    x = b.input("x", (1, 16, 4, 4))
    w = b.const(rng.standard_normal((64, 16, 3, 3)).astype(np.float32), name="w")
    g = b.build(b.conv(x, w, pads=1))
    task = graph.extract_tasks(g, template_free="all")[0]
    with pytest.raises(TileTooLarge, match="register tile of 1024 elements"):
        task.instantiate(autotune.FallbackConfig())
    # candidates are checked against the compute as declared instead: no schedule primitive
    sched, _ = task.reference_schedule()
    assert json.loads(sched.trace.dumps()) == []
    log = tmp_path / "small.jsonl"
    autotune.tune_tasks([task], n_trial=3, log_file=str(log), tuner="evolution",
                        measure_option=option, progress=False, seed=0)
    recs = [r for r in autotune.load_records(str(log)) if r.key == task.key]
    assert len([r for r in recs if not r.remeasured]) == 3
    assert all(r.valid for r in recs), [r.result for r in recs if not r.valid]
