"""`tensorlang tune` and `tensorlang inspect`."""

from __future__ import annotations

from tensorlang.cli import main


def test_tune_then_inspect(tmp_path, capsys):
    log = tmp_path / "cli.jsonl"
    assert main(["tune", "matmul", "--args", "16,16,16,float32", "--trials", "4", "--log",
                 str(log), "--tuner", "random", "--seed", "0", "--n-parallel", "2"]) == 0
    assert len(log.read_text().splitlines()) == 4
    capsys.readouterr()
    assert main(["inspect", str(log)]) == 0
    out = capsys.readouterr().out
    assert "4 records, 1 workload" in out and "best:" in out and "GFLOP/s" in out


def test_tune_unknown_template(tmp_path, capsys):
    assert main(["tune", "nope", "--args", "4", "--log", str(tmp_path / "x.jsonl")]) == 2
    assert "no autotune template named 'nope'" in capsys.readouterr().err
