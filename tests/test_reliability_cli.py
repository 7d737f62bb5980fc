"""Issue 15: CLI user errors are one line on stderr and exit status 2 (never a traceback, never
exit 0); --debug shows the traceback. Ctrl-C: tests/autotune/test_reliability_workers.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from forked_cli import ForkedCLI


def _cli(*argv, timeout=300):
    return subprocess.run([sys.executable, "-m", "tensorlang.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, check=False)


def _assert_one_line_error(proc, message: str) -> None:
    err = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    # a tuning run's progress bar may come first: the error is the last line, and one line
    assert message in err[-1] and "error" in err[-1], proc.stderr
    assert sum("error" in x for x in err) == 1, proc.stderr


@pytest.fixture
def files(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    model = tmp_path / "m.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(g), model)
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    np.savez(tmp_path / "x.npz", x=np.ones(2, np.float32))
    (tmp_path / "garbage.npy").write_bytes(b"\x93NUMPY garbage")
    return {"MODEL": str(model), "DIR": str(tmp_path), "LOG": str(tmp_path / "t.jsonl"),
            "ONNX_AS_INPUT": f"x={model}", "NPZ_INPUT": f"x={tmp_path / 'x.npz'}",
            "GARBAGE_INPUT": f"x={tmp_path / 'garbage.npy'}", "MISSING": str(tmp_path / "no")}


MM = ["tune", "matmul", "--args", "16,16,16,float32", "--log", "LOG"]
CASES = [
    ([*MM, "--trials", "-5"], "argument --trials: must be at least 1, got -5"),
    ([*MM, "--trials", "0"], "argument --trials: must be at least 1, got 0"),
    ([*MM, "--trials", "many"], "argument --trials: expected an integer"),
    ([*MM, "--target", "cuda"], "--target: unknown target 'cuda'"),
    ([*MM, "--number", "0"], "argument --number: must be at least 1"),
    ([*MM, "--repeat", "0"], "argument --repeat: must be at least 1"),
    ([*MM, "--timeout", "0"], "argument --timeout: must be greater than 0"),
    ([*MM, "--n-parallel", "0"], "argument --n-parallel: must be at least 1"),
    ([*MM, "--tuner", "annealing"], "--tuner must be one of"),
    (["tune", "matmul", "--args", "16,16,16,float32", "--log", "DIR"], "is a directory"),
    (["tune", "matmul", "--args", "16,16,16,float32", "--log", "MISSING/t.jsonl"],
     "no such directory"),
    (["tune", "nope", "--args", "4", "--log", "LOG"], "no autotune template named 'nope'"),
    (["tune", "matmul", "--log", "LOG"], "--args is required for a template"),
    (["tune", "MISSING.onnx", "--log", "LOG"], "no such model file"),
    (["tune", "MODEL", "--log", "LOG", "--shape", "x"], "--shape expects name=1,3,224,224"),
    (["inspect", "MISSING"], "no such tuning log file"),
    (["inspect", "DIR"], "is a directory, not a tuning log file"),
    (["compile", "MISSING.onnx", "-o", "MISSING"], "no such model file"),
    (["compile", "MODEL", "-o", "MISSING", "--target", "llvm -mfoo=1"], "--target:"),
    (["compile", "MODEL", "-o", "MISSING", "--log", "MISSING.jsonl"], "no such tuning log"),
    (["compile", "MODEL", "-o", "MODEL"], "-o MODEL is a file: not replaced"),
    (["compile", "MODEL", "-o", "DIR"], "is a folder that tensorlang did not save"),
    (["tune", "MODEL", "--log", "MODEL"], "is not a tuning log"),
    # --plot: checked before the tuning, never over a file that is not a PNG (savefig
    # replaced it), refused where it was ignored (a model's tuning, a model's inspect)
    ([*MM, "--plot", "MODEL"], "is a file that is not a PNG: not replaced"),
    # a model's options given to a template's tuning, and --args to a model's: were ignored
    ([*MM, "--shape", "x=1,2"], "--shape is for models (.onnx): a template's sizes are its"),
    ([*MM, "--tasks", "2"], "--tasks is for models (.onnx): a template is one task"),
    (["tune", "MODEL", "--log", "LOG", "--args", "1,2"], "--args is for a template"),
    (["tune", "MODEL", "--log", "LOG", "--plot", "DIR/c.png"], "--plot is for a template's"),
    (["inspect", "MODEL", "--plot", "DIR/c.png"], "--plot draws a tuning log's curve"),
    (["run", "MISSING", "--input", "ONNX_AS_INPUT"], "is not a NumPy .npy file"),
    (["run", "MISSING", "--input", "GARBAGE_INPUT"], "is not a NumPy .npy file"),
    (["run", "MISSING", "--input", "NPZ_INPUT"], "is a .npz archive"),
    (["run", "MISSING", "--input", "x"], "--input expects name=file.npy"),
    (["run", "MISSING"], "not a tensorlang model artifact"),
    (["run", "MISSING", "--repeat", "-1"], "argument --repeat: must be at least 0"),
    (["demo", "--trials", "0"], "argument --trials: must be at least 1"),
    (["demo", "--size", "0"], "argument --size: must be at least 1"),
    (["bogus"], "invalid choice: 'bogus'"),
    ([], "the following arguments are required"),
]


@pytest.fixture(scope="module")
def forked_cli():
    """The user-error cases run as forks of one process that imported the CLI (forked_cli.py:
    each still a process of its own, with its exit status, stdout and stderr), not 33
    interpreter starts and imports of up to 0.8 s each; the other tests of this file run
    python -m tensorlang.cli itself."""
    cli = ForkedCLI()
    try:
        yield cli
    finally:
        cli.close()


@pytest.mark.parametrize("argv, message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_user_error_is_one_line_exit_2(files, forked_cli, argv, message):
    argv = [next((v + a[len(k):] for k, v in files.items() if a.startswith(k)), a)
            for a in argv]
    message = message.replace("MODEL", files["MODEL"])
    model = Path(files["MODEL"]).read_bytes()
    _assert_one_line_error(forked_cli.run(*argv), message)
    assert Path(files["MODEL"]).read_bytes() == model  # -o or --log naming it left it whole


def test_debug_shows_the_traceback(files):
    proc = _cli("--debug", "inspect", files["DIR"])
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "is a directory" in \
        proc.stderr
    proc = _cli("inspect", files["DIR"], "--debug")  # after the subcommand too
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def _failed_record(task, index: int, msg: str) -> str:
    from tensorlang import autotune

    res = autotune.MeasureResult([], autotune.BUILD_ERROR, msg, 0.1, 1.0, None)
    return autotune.record.make_record(autotune.MeasureInput(task, task.config(index)),
                                       res).dumps()


def test_a_run_whose_trials_all_failed_exits_2(files):
    """(Resumed from a log whose 2 trials failed: nothing left to measure, still an error.)"""
    from tensorlang import autotune

    task = autotune.create_task("matmul", (16, 16, 16, "float32"))
    with open(files["LOG"], "w") as f:
        f.write(_failed_record(task, 0, "LLVM ERROR: bad CPU\nmore") + "\n")
        f.write(_failed_record(task, 1, "LLVM ERROR: bad CPU") + "\n")
    proc = _cli("tune", "matmul", "--args", "16,16,16,float32", "--trials", "2", "--log",
                files["LOG"])
    _assert_one_line_error(proc, "all 2 trials of matmul [16, 16, 16, 'float32'] failed "
                                 "(build error 2); first: LLVM ERROR: bad CPU more")
    assert "best 0.0" not in proc.stdout


def test_bogus_cpu_target_exits_2(files):
    """Refused up front once the target parser knows LLVM's CPUs, else every trial fails to
    build: either way one line and status 2, never "best 0.0 GFLOP/s" and 0."""
    proc = _cli("tune", "matmul", "--args", "16,16,16,float32", "--trials", "2", "--tuner",
                "random", "--log", files["LOG"], "--target", "llvm -mcpu=bogus")
    err = [x for x in proc.stderr.splitlines() if "error" in x]
    assert proc.returncode == 2 and len(err) == 1 and "Traceback" not in proc.stderr, \
        proc.stderr
    assert "--target" in err[0] or "all 2 trials of matmul" in err[0], err


def test_demo_with_a_log_of_its_own(tmp_path):
    """--trials is at least 1, so the demo's temporary log always exists when it deploys."""
    log = tmp_path / "demo.jsonl"
    proc = _cli("demo", "--size", "32", "--trials", "1", "--log", str(log))
    assert proc.returncode == 0, proc.stderr
    assert len(log.read_text().splitlines()) == 1
    assert json.loads(log.read_text())["workload"]["name"] == "matmul"
