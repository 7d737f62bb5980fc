"""Issue 15: a tuning record with a malformed field is skipped with one warning (file, line
numbers, what was wrong); the rest of the log still deploys and inspects; the file is kept."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings

import pytest
from tensorlang.autotune.templates import matmul

from tensorlang import autotune

ARGS = (16, 16, 16, "float32")


def _good_lines(n: int = 2) -> list[str]:
    """n valid records of the 16^3 matmul (configs 0..n-1; the last is the fastest)."""
    task = autotune.create_task("matmul", ARGS)
    out = []
    for i in range(n):
        cfg = task.config(i)
        s, _ = task.instantiate(cfg)
        res = autotune.MeasureResult([1e-3 / (i + 1)], None, "", 0.1, 1.0, s.trace.dumps())
        out.append(autotune.record.make_record(autotune.MeasureInput(task, cfg), res).dumps())
    return out


def _with(line: str, path: list, value) -> str:
    d = json.loads(line)
    node = d
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return json.dumps(d)


MALFORMED = [
    (["target"], ["x"], "target must be a string"),
    (["result", "costs"], ["a"], "costs must be a list of seconds"),
    (["result", "costs"], 0.5, "costs must be a list of seconds"),
    (["result", "costs"], [-1.0], "costs must be a list of seconds"),
    (["result", "costs"], [math.inf], "costs must be a list of seconds"),
    (["result", "costs"], [True], "costs must be a list of seconds"),
    (["result", "error"], "bogus", "result error must be null or one of"),
    (["result", "all_cost"], "slow", "all_cost must be a number"),
    (["workload", "args"], [{"a": 1}], "workload args must be numbers"),
    (["workload", "args"], 16, "workload args must be a list"),
    (["workload", "name"], 3, "workload name must be a string"),
    (["workload", "hash"], None, "workload hash must be a string"),
    (["config", "entity"], ["x"], "config must be an object with an entity object"),
    (["config", "entity"], {"tile_i": {"a": 1}}, "config entity must map knob names"),
    (["config"], 7, "config must be an object"),
    (["trace"], "steps", "trace must be a list or null"),
    (["timestamp"], "noon", "timestamp must be a number"),
    (["version"], 1, "version must be a string"),
]


@pytest.mark.parametrize("path, value, why", MALFORMED,
                         ids=[f"{'.'.join(p)}={json.dumps(v)}" for p, v, _ in MALFORMED])
def test_malformed_field_is_skipped_with_one_warning(tmp_path, path, value, why):
    good = _good_lines()
    log = tmp_path / "log.jsonl"
    text = "\n".join([good[0], _with(good[0], path, value), good[1]]) + "\n"
    log.write_text(text)
    with pytest.warns(UserWarning) as w:
        recs = autotune.load_records(log)
    assert [r.line for r in recs] == [1, 3]
    msgs = [str(x.message) for x in w]
    assert len(msgs) == 1, msgs
    assert str(log) in msgs[0] and "(lines 2)" in msgs[0] and why in msgs[0], msgs[0]
    assert log.read_text() == text  # never rewritten: nothing lost
    # the rest of the log still deploys: the fastest valid record is applied
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with autotune.apply_history_best(log) as ctx:
            s, _ = matmul(*ARGS)
    assert ctx.untuned == []
    assert s.trace.to_json() == json.loads(good[1])["trace"]


def test_many_bad_lines_one_warning_listing_them(tmp_path):
    good = _good_lines(1)[0]
    bad = [_with(good, ["target"], ["x"]), "{not json", _with(good, ["result", "costs"], 0.5)]
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(bad * 4 + [good]) + "\n")
    with pytest.warns(UserWarning) as w:
        recs = autotune.load_records(log)
    assert len(recs) == 1 and recs[0].line == 13
    (msg,) = [str(x.message) for x in w]
    assert "skipped 12" in msg and "lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)" in msg
    assert "line 2: not JSON" in msg and "and 7 more" in msg


def test_knob_value_of_the_wrong_kind_is_not_applied(tmp_path):
    """A well-formed record whose knob holds a value of the wrong kind: refused when applied
    (the template decides what a knob's values are), with the reason, never a TypeError."""
    good = _good_lines(1)[0]
    knob = next(iter(json.loads(good)["config"]["entity"]))
    log = tmp_path / "log.jsonl"
    log.write_text(_with(good, ["config", "entity", knob], ["x", 1]) + "\n")
    with pytest.warns(UserWarning, match="not in the template's space"), \
            autotune.apply_history_best(log) as ctx:
        matmul(*ARGS)
    assert ctx.untuned


def test_inspect_reads_a_log_with_malformed_records(tmp_path):
    good = _good_lines()
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join([good[0], _with(good[1], ["result", "costs"], ["a"]),
                              _with(good[1], ["target"], ["x"]), good[1]]) + "\n")
    proc = subprocess.run([sys.executable, "-m", "tensorlang.cli", "inspect", str(log)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "2 records, 1 workload" in proc.stdout and "best:" in proc.stdout
    assert "skipped 2" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("value", [5, "ab", [1, "x"], None])
def test_split_value_of_the_wrong_type_is_a_value_error(value):
    import autotune_test_templates  # noqa: F401 - registers test_vadd (a split knob)

    space = autotune.create_task("test_vadd", (64,)).config_space
    entity = space.get(0).to_json()["entity"]
    with pytest.raises(ValueError, match="knob 'split'"):
        space.index_of({**entity, "split": value})
