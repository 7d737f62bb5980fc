"""The record's figure (median of repeats) and the final re-measurement of a tuning (issue 21):
the log's best is the best of the finalists and the default re-measured together, so that a
config timed fast once by luck is not named best. Measurements are fake (a builder and a runner
that return a time per config and per call, chosen by the test): deterministic and fast."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from autotune_test_templates import FakeBuilder
from tensorlang.autotune.measure import MeasureOption, MeasureResult
from tensorlang.autotune.record import best_records, load_records, make_record

from tensorlang import autotune

SIZE = 8  # configs of the fake task's one knob; the default (fallback) config is index 0


class FakeRunner:
    """cost(index, call number of that index) -> seconds; `measured` lists every index timed,
    in order. Three repeats per run, the first one slower by `first_slow` (as measured on a
    shared 2-core Zen 4)."""

    check_correctness = False

    def __init__(self, cost, first_slow: float = 1.0):
        self.cost = cost
        self.first_slow = first_slow
        self.measured: list[int] = []

    def run_one(self, task, path):
        idx = int(path)
        calls = self.measured.count(idx)
        self.measured.append(idx)
        c = self.cost(idx, calls)
        return None, "", [c * self.first_slow, c, c]

    def close(self):
        pass


def _tune(log, cost, **kw):
    runner = FakeRunner(cost, kw.pop("first_slow", 1.0))
    task = autotune.create_task("test_fake_knob", (64, SIZE))
    best = autotune.tune_tasks([task], SIZE, log, tuner="grid", progress=False,
                               measure_option=MeasureOption(FakeBuilder(), runner), **kw)
    return task, runner, best


def _applied_index(task, log) -> int:
    rec = autotune.apply_history_best(str(log)).best(task.target, task.name, task.args)
    return task.config_space.from_json(rec.config).index


def _lucky(fast_config: int, later: float, others: dict):
    """A cost function: `fast_config` measures 0.5 s the first time, `later` after; the other
    configs cost others.get(index, 1.5) every time."""
    def cost(idx, calls):
        if idx == fast_config:
            return 0.5 if calls == 0 else later
        return others.get(idx, 1.5)
    return cost


def test_a_lucky_config_loses_to_the_truly_faster_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "log.jsonl"
    task, _, best = _tune(log, _lucky(5, 2.0, {3: 0.9, 0: 1.0}))
    assert _applied_index(task, log) == 3
    assert best[task.key] == pytest.approx(task.flop / 0.9 / 1e9)
    remeasured = [r for r in load_records(log) if r.remeasured]
    # the top three by their tuning figure (5, 3 and the default 0), 5 rounds of 3 repeats
    assert sorted(task.config_space.from_json(r.config).index for r in remeasured) == [0, 3, 5]
    assert all(len(r.result["costs"]) == 15 for r in remeasured)
    # without it, the log's best is the lucky one (what the fidelity check caught)
    plain = tmp_path / "plain.jsonl"
    _tune(plain, _lucky(5, 2.0, {3: 0.9, 0: 1.0}), remeasure_top=0)
    assert _applied_index(task, plain) == 5


def test_the_default_wins_when_nothing_is_measurably_faster(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "log.jsonl"
    task, _, best = _tune(log, _lucky(6, 1.2, {0: 1.0, 2: 1.1}))
    assert _applied_index(task, log) == 0
    assert best[task.key] == pytest.approx(task.flop / 1.0 / 1e9)


def test_the_default_stays_unless_a_finalist_is_faster_by_the_margin(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    margin = autotune.tuner.REMEASURE_MARGIN
    for speedup, winner in ((margin / 2, 0), (margin * 2, 3)):
        log = tmp_path / f"log{winner}.jsonl"
        task, _, best = _tune(log, _lucky(5, 2.0, {3: 1.0 - speedup, 0: 1.0}))
        assert _applied_index(task, log) == winner
        chosen = [r for r in load_records(log) if r.chosen]
        assert len(chosen) == 1 and chosen[0].remeasured
        assert best[task.key] == pytest.approx(task.flop / chosen[0].cost / 1e9)


def test_the_finalists_are_measured_in_interleaved_rounds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, runner, _ = _tune(tmp_path / "log.jsonl", _lucky(5, 2.0, {3: 0.9, 0: 1.0}),
                         remeasure_top=2, remeasure_rounds=3)
    tail = runner.measured[SIZE:]  # after the 8 trials
    assert Counter(tail) == {5: 3, 3: 3, 0: 3}  # top 2 (5, 3) and the default, 3 rounds each
    rounds = [tail[i:i + 3] for i in range(0, 9, 3)]
    assert rounds[1] == rounds[0][::-1] and rounds[2] == rounds[0]


def test_one_slow_first_repeat_does_not_drag_a_record_down(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "log.jsonl"
    # every first repeat 25% slower (the mean would read 1.083x the true time)
    task, _, _ = _tune(log, _lucky(5, 2.0, {3: 0.9, 0: 1.0}), first_slow=1.25)
    best = autotune.apply_history_best(str(log)).best(task.target, task.name, task.args)
    assert best.cost == pytest.approx(0.9)
    res = MeasureResult([1.25, 1.0, 1.0])
    assert res.cost == pytest.approx(1.0) and res.mean_cost == pytest.approx(3.25 / 3)


def test_a_resumed_tuning_neither_retunes_nor_remeasures_again(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "log.jsonl"
    _tune(log, _lucky(5, 2.0, {3: 0.9, 0: 1.0}))
    task, runner, best = _tune(log, _lucky(5, 2.0, {3: 0.9, 0: 1.0}))
    assert runner.measured == []  # the re-measured records are not trials
    assert best[task.key] == pytest.approx(task.flop / 0.9 / 1e9)


def test_a_log_tuned_without_remeasurement_is_remeasured_on_resume(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "log.jsonl"
    _tune(log, _lucky(5, 2.0, {3: 0.9, 0: 1.0}), remeasure_top=0)
    task, runner, _ = _tune(log, _lucky(5, 2.0, {3: 0.9, 0: 1.0}), remeasure_rounds=2)
    assert Counter(runner.measured) == {5: 2, 3: 2, 0: 2}
    assert _applied_index(task, log) == 3


def test_records_written_before_still_load_and_rank_after_remeasured_ones(tmp_path):
    task = autotune.create_task("test_fake_knob", (64, SIZE))
    old = make_record(autotune.MeasureInput(task, task.config_space.get(5)),
                      MeasureResult([0.5, 0.7, 0.6], timestamp=1.0)).to_json()
    assert "remeasured" not in old["result"]  # an ordinary trial's line is unchanged
    new = make_record(autotune.MeasureInput(task, task.config_space.get(3)),
                      MeasureResult([0.9, 0.8, 1.0], timestamp=2.0, remeasured=True)).to_json()
    assert new["result"]["remeasured"] is True
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(old) + "\n" + json.dumps(new) + "\n")
    recs = load_records(log)
    assert [r.remeasured for r in recs] == [False, True]
    assert recs[0].cost == pytest.approx(0.6)  # the median, not the mean
    best = best_records(recs)[(task.key, task.target)]
    assert best.remeasured and best.cost == pytest.approx(0.9)


def test_a_malformed_remeasured_flag_is_skipped_with_a_warning(tmp_path):
    task = autotune.create_task("test_fake_knob", (64, SIZE))
    rec = make_record(autotune.MeasureInput(task, task.config_space.get(1)),
                      MeasureResult([1.0])).to_json()
    rec["result"]["remeasured"] = "yes"
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(rec) + "\n")
    with pytest.warns(UserWarning, match="remeasured must be true or false"):
        assert load_records(log) == []


@pytest.mark.parametrize(("kw", "error", "match"), [
    ({"remeasure_top": -1}, ValueError, "remeasure_top must be >= 0, got -1"),
    ({"remeasure_rounds": 0}, ValueError, "remeasure_rounds must be >= 1, got 0"),
    ({"remeasure_top": 1.5}, TypeError, "remeasure_top must be an int, got float"),
    ({"remeasure_rounds": True}, TypeError, "remeasure_rounds must be an int, got bool"),
])
def test_bad_remeasure_options_are_refused(tmp_path, kw, error, match):
    task = autotune.create_task("test_fake_knob", (64, SIZE))
    option = MeasureOption(FakeBuilder(), FakeRunner(lambda i, c: 1.0))
    with pytest.raises(error, match=match):
        autotune.tune_tasks([task], SIZE, tmp_path / "log.jsonl", progress=False,
                            measure_option=option, **kw)
    tuner = autotune.GridSearchTuner(task)
    with pytest.raises(error, match=match):
        tuner.tune(SIZE, option, **kw)
    assert not (tmp_path / "log.jsonl").exists()
