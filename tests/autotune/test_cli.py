"""`tensorlang tune` and `tensorlang inspect`."""

from __future__ import annotations

import json

from tensorlang.cli import main


def test_tune_then_inspect(tmp_path, capsys):
    log = tmp_path / "cli.jsonl"
    assert main(["tune", "matmul", "--args", "16,16,16,float32", "--trials", "4", "--log",
                 str(log), "--tuner", "random", "--seed", "0", "--n-parallel", "2"]) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    # 4 trials, then the top 3 and the default re-measured (tune_tasks' default)
    assert sum(not r["result"].get("remeasured") for r in lines) == 4
    assert 3 <= sum(bool(r["result"].get("remeasured")) for r in lines) <= 4
    capsys.readouterr()
    assert main(["inspect", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"{len(lines)} records, 1 workload" in out and "best:" in out and "GFLOP/s" in out


def test_tune_unknown_template(tmp_path, capsys):
    assert main(["tune", "nope", "--args", "4", "--log", str(tmp_path / "x.jsonl")]) == 2
    assert "no autotune template named 'nope'" in capsys.readouterr().err


def test_model_kernels_are_measured_as_the_model_runs_them():
    """`tensorlang tune model.onnx` times each kernel from evicted caches, one call a repeat
    (a model's weights are not cached when its kernel runs); a template keeps back-to-back
    calls; --number / --repeat given by hand are kept either way."""
    import argparse

    from tensorlang.autotune.cli import measure_option_of

    from tensorlang.cli import _tune

    p = argparse.ArgumentParser()
    _tune(p)
    for argv, model, want in (
            ([], True, (1, 10, True, 0)),
            ([], False, (3, 3, False, 20)),
            (["--number", "2", "--repeat", "4"], True, (2, 4, True, 0))):
        a = p.parse_args(["x.onnx", "--log", "x.jsonl", *argv])
        r = measure_option_of(a, model=model).runner
        assert (r.number, r.repeat, r.flush_cache, r.min_repeat_ms) == want, (argv, model)
