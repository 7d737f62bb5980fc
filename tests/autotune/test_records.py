"""Records: corrupt lines, resume after SIGKILL, apply_history_best and its refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import autotune_test_templates  # noqa: F401 - registers the test templates
import numpy as np
import pytest

import tensorlang as tl
from tensorlang import autotune

HERE = Path(__file__).resolve().parent


def _tune(log, n, args=(16, 16, 16, "float32"), tuner=autotune.RandomTuner, seed=0):
    task = autotune.create_task("matmul", args)
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=5))
    t = tuner(task, batch_size=4, seed=seed)
    try:
        t.tune(n, opt, callbacks=[autotune.log_to_file(log)])
    finally:
        opt.close()
    return t


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("log") / "mm.jsonl"
    _tune(log, 8)
    return log


def test_record_keys(small_log):
    lines = small_log.read_text().splitlines()
    assert len(lines) == 8
    d = json.loads(lines[0])
    assert set(d) == {"workload", "target", "config", "trace", "result", "timestamp",
                      "version"}
    assert set(d["workload"]) == {"name", "args", "hash"}
    assert set(d["result"]) >= {"costs", "error", "all_cost"}


def test_truncated_and_garbage_lines_are_skipped_with_line_numbers(small_log, tmp_path):
    lines = small_log.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines[:3] + ["this is not json", '{"workload": 1}'] + lines[3:-1]
                             + [lines[-1][: len(lines[-1]) // 2]]))
    with pytest.warns(UserWarning) as w:
        recs = autotune.load_records(bad)
    msgs = [str(x.message) for x in w]
    assert len(recs) == 7
    # one warning for the file, naming every skipped line (the last one is truncated)
    assert len(msgs) == 1 and f"(lines 4, 5, {len(lines) + 2})" in msgs[0]
    # appending after a truncated line starts a fresh line: the new record survives
    autotune.append_records(bad, recs[:1])
    with pytest.warns(UserWarning):
        assert len(autotune.load_records(bad)) == 8


def test_pick_best(small_log, tmp_path):
    out = tmp_path / "best.jsonl"
    assert autotune.pick_best(small_log, out) == 1
    (best,) = autotune.load_records(out)
    assert best.cost == min(r.cost for r in autotune.load_records(small_log))


def test_apply_history_best_replays_the_best_trace(small_log):
    from tensorlang.autotune.templates import matmul

    best = min(autotune.load_records(small_log), key=lambda r: r.cost)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # applying a matching record warns about nothing
        with autotune.apply_history_best(small_log) as ctx:
            s, args = matmul(16, 16, 16, "float32")
    assert s.trace.to_json() == best.trace
    assert ctx.untuned == []
    f = tl.build(s, args)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 16), dtype=np.float32) for _ in range(2))
    c = np.zeros((16, 16), np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _retarget(small_log, path, target_of):
    lines = [json.loads(x) for x in small_log.read_text().splitlines()]
    for i, d in enumerate(lines):
        d["target"] = target_of(i, d)
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return [autotune.load_records(path)[i] for i in range(len(lines))]


def test_records_of_an_llvm_target_with_mcpu_apply_to_llvm(small_log, tmp_path):
    """A template asks for "llvm": a log tuned with "llvm -mcpu=<this host>" applies (TVM
    matches by target kind); records tuned for another CPU apply only where no record for this
    host's CPU does, and the best record for this host's CPU wins over faster ones of another."""
    from tensorlang.autotune.templates import matmul

    from tensorlang.codegen.target import Target

    host = f"llvm -mcpu={Target.host().cpu}"
    other = "llvm -mcpu=" + ("skylake" if Target.host().cpu == "znver3" else "znver3")
    recs = _retarget(small_log, tmp_path / "host.jsonl", lambda i, d: host)
    best = min(recs, key=lambda r: r.cost)
    with autotune.apply_history_best(tmp_path / "host.jsonl") as ctx:
        s, _ = matmul(16, 16, 16, "float32")
    assert ctx.untuned == [] and s.trace.to_json() == best.trace
    # the fastest record is another CPU's: this host's best is applied instead
    fastest = min(range(len(recs)), key=lambda i: recs[i].cost)
    mixed = _retarget(small_log, tmp_path / "mixed.jsonl",
                      lambda i, d: other if i == fastest else host)
    mine = min((r for r in mixed if r.target == host), key=lambda r: r.cost)
    with autotune.apply_history_best(tmp_path / "mixed.jsonl"):
        s, _ = matmul(16, 16, 16, "float32")
    assert s.trace.to_json() == mine.trace
    _retarget(small_log, tmp_path / "other.jsonl", lambda i, d: other)
    with autotune.apply_history_best(tmp_path / "other.jsonl") as ctx:
        s, args = matmul(16, 16, 16, "float32")
    assert ctx.untuned == [] and s.trace.to_json() == best.trace
    f = tl.build(s, args)
    a, b = (np.random.default_rng(i).standard_normal((16, 16), dtype=np.float32)
            for i in range(2))
    c = np.zeros((16, 16), np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_untuned_workloads_reported_once(small_log):
    from tensorlang.autotune.templates import matmul

    ctx = autotune.apply_history_best(small_log)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with ctx:
            matmul(8, 8, 8, "float32")
            matmul(8, 8, 8, "float32")
            matmul(32, 32, 32, "float32")
            assert not w  # nothing while building: one report at the end
    assert [m for m in w if "2 workload(s)" in str(m.message) and "default config" in
            str(m.message)] == w
    assert len(w) == 1
    assert len(ctx.untuned) == 2


@pytest.mark.parametrize("field", ["version", "hash"])
def test_record_from_other_version_or_compute_is_not_applied(small_log, tmp_path, field):
    from tensorlang.autotune.templates import matmul

    other = tmp_path / "other.jsonl"
    out = []
    for line in small_log.read_text().splitlines():
        d = json.loads(line)
        if field == "version":
            d["version"] = "0.0.1"
        else:
            d["workload"]["hash"] = "0123456789abcdef"
        out.append(json.dumps(d))
    other.write_text("\n".join(out) + "\n")
    reason = "tensorlang 0.0.1" if field == "version" else "compute definition changed"
    with pytest.warns(UserWarning, match=reason), autotune.apply_history_best(other) as ctx:
        s, _ = matmul(16, 16, 16, "float32")
    assert ctx.untuned and reason.split()[0] in ctx.rejected[ctx.untuned[0]]
    fb, _ = autotune.create_task("matmul", (16, 16, 16, "float32")).instantiate(
        autotune.FallbackConfig())
    assert s.trace.dumps() == fb.trace.dumps()


def test_best_finds_the_applicable_record_and_reports_nothing(small_log, tmp_path):
    """``best`` (what graph.build compares layouts with) returns the record ``query`` would
    apply, skips the records ``query`` would refuse, and neither warns nor lists untuned."""
    recs = autotune.load_records(small_log)
    args = (16, 16, 16, "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctx = autotune.apply_history_best(small_log)
        assert ctx.best("llvm", "matmul", args).cost == min(r.cost for r in recs)
        assert ctx.best("llvm", "matmul", (8, 8, 8, "float32")) is None
    assert ctx.untuned == [] and ctx.applied == {}
    # the fastest record from another version is skipped for the next one
    lines = [json.loads(line) for line in small_log.read_text().splitlines()]
    fastest = min(range(len(lines)), key=lambda i: recs[i].cost)
    lines[fastest]["version"] = "0.0.1"
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(d) + "\n" for d in lines))
    second = sorted(r.cost for r in recs)[1]
    assert autotune.apply_history_best(other).best("llvm", "matmul", args).cost == second


JOB = textwrap.dedent("""
    import sys
    from tensorlang import autotune
    if __name__ == "__main__":
        task = autotune.create_task("matmul", (24, 32, 16, "float32"))
        opt = autotune.measure_option(autotune.LocalBuilder(2),
                                      autotune.LocalRunner(number=2, repeat=2, timeout=5))
        autotune.tune_tasks([task], n_trial=int(sys.argv[2]), log_file=sys.argv[1],
                            tuner="random", measure_option=opt, progress=False,
                            batch_size=4, seed=int(sys.argv[3]))
""")


def test_sigkill_mid_run_resumes_from_log(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    log = tmp_path / "job.jsonl"
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, str(script), str(log), "400", "0"], env=env,
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if log.exists() and len(log.read_text().splitlines()) >= 8:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the tuning job wrote no records")
    finally:
        # kill the whole session: the job and its builder / runner processes
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = log.read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a truncated last line is possible
        n_before = len(autotune.load_records(log))
    assert n_before >= 8
    total = n_before + 8
    subprocess.run([sys.executable, str(script), str(log), str(total), "1"], env=env,
                   check=True, timeout=300)
    assert log.read_text().startswith(before.rsplit("\n", 1)[0])  # nothing lost
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs = autotune.load_records(log)
    trials = [r for r in recs if not r.remeasured]  # tune_tasks' final re-measurement aside
    assert len(trials) == total
    idx = [r.config["index"] for r in trials]
    assert len(set(idx)) == len(idx)  # no config measured twice


def test_tune_tasks_skips_finished_tasks_and_featurizes_transfer_records_once(tmp_path,
                                                                             monkeypatch):
    """Resuming a finished log measures nothing and fits no model (the best comes from the
    log); transfer learning featurizes another workload's record once per process, not once
    for every later task."""
    from tensorlang.autotune import tuner as tuner_mod

    tasks = [autotune.create_task("matmul", (m, 32, 16, "float32")) for m in (24, 40)]
    log = tmp_path / "two.jsonl"
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=5))
    try:
        first = autotune.tune_tasks(tasks, n_trial=4, log_file=log, progress=False,
                                    batch_size=4, seed=0, measure_option=opt)
        recs = autotune.load_records(log)
        for t in tasks:  # the best: the fastest of the final re-measurement
            chosen = autotune.record.best_records(recs)[(t.key, t.target)]
            assert chosen.remeasured
            assert first[t.key] == pytest.approx(t.flop / chosen.cost / 1e9)

        def no_tuner(*a, **k):
            raise AssertionError("a finished task got a tuner")

        monkeypatch.setitem(autotune.tune.TUNERS, "xgb", no_tuner)
        assert autotune.tune_tasks(tasks, n_trial=4, log_file=log, progress=False,
                                   measure_option=opt) == first
    finally:
        opt.close()
    assert len(autotune.load_records(log)) == len(recs)

    calls = []
    real = tuner_mod.config_features
    monkeypatch.setattr(tuner_mod, "_TRANSFER_FEATURES", {})
    monkeypatch.setattr(tuner_mod, "config_features",
                        lambda task, cfg: calls.append(cfg.index) or real(task, cfg))
    target = autotune.create_task("matmul", (56, 32, 16, "float32"))
    for _ in range(2):  # two tuners (two later tasks) learning from the same records
        t = autotune.XGBTuner(target, seed=0, feature_workers=0)
        t.load_history(recs)
        assert len(t._tx) == len(recs)
    # once per config: a re-measured record's config is one of the trials'
    assert len(calls) == sum(not r.remeasured for r in recs)
