"""graph.extract_tasks(template_free=True): a template-free task for each kernel no template
tunes; graph.build(tuning_log=...) replays their records (issue 20)."""

from __future__ import annotations

import json

import numpy as np

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


def test_build_replays_the_template_free_record(tmp_path):
    g = _graph()
    task = graph.extract_tasks(g, template_free=True)[1]  # the softmax
    log = tmp_path / "free.jsonl"
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=10))
    try:
        autotune.RandomTuner(task, batch_size=2, seed=0).tune(
            2, opt, callbacks=[autotune.log_to_file(log)])
    finally:
        opt.close()
    # the searched records made faster than the graph default the tuner logged beside them, so
    # the build applies the best (one slower than the default would be left out)
    # (set, not scaled: a searched trial's repeat can take 12 ms when a thread wakes late, and
    # a thousandth of that lost to the default's 2 us in CI)
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    searched = [r for r in recs
                if r["workload"]["name"] == task.name and r["result"]["error"] is None]
    assert searched, f"no valid searched record in {[r['result'] for r in recs]}"
    for r in searched:
        r["result"]["costs"] = [1e-9, 1e-9]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    gm = graph.build(g, target="llvm", tuning_log=str(log))
    tuned = {k["op"]: k["tuned"] for k in gm.plan["kernels"].values()}
    assert tuned == {"relu": False, "softmax": True}
    x = np.random.default_rng(0).standard_normal((32, 256)).astype(np.float32)
    (out,) = gm.run(x=x).values()
    r = np.maximum(x, 0.0)
    e = np.exp(r - r.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
