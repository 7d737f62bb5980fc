"""README.md's Python snippets, run as a user pastes them (at smaller sizes): the example, the
refused schedule and the tuning-then-deployment snippet. The ONNX one needs a model file and
is the flow of tutorials/03 (tests/graph/test_tutorial_and_resnet.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import tensorlang as tl

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def _shrunk(code: str, old: str, new: str) -> str:
    assert old in code, f"README's snippet changed: {old!r} is no longer in it"
    return code.replace(old, new)


def test_the_example_the_refused_schedule_and_tuning_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the snippets write mm.tlm and mm.jsonl
    example, refused, tuning = _blocks()[:3]
    ns: dict = {}
    exec(_shrunk(example, "M = N = K = 1024", "M = N = K = 128"), ns)  # noqa: S102
    np.testing.assert_allclose(ns["c"], ns["a"] @ ns["b"], rtol=1e-4, atol=1e-4)
    assert isinstance(ns["g"], tl.runtime.Module)
    try:
        exec(refused, ns)  # noqa: S102
    except tl.ScheduleError as e:
        assert "reduce axis k carries the accumulation" in str(e)
    else:
        raise AssertionError("README: s[C].parallel(ko) was not refused")
    tuning = _shrunk(tuning, "args=(1024, 1024, 1024,", "args=(64, 64, 64,")
    try:
        exec(_shrunk(tuning, "n_trial=64", "n_trial=4"), ns)  # noqa: S102
    finally:
        if "option" in ns:
            ns["option"].close()  # its builder and runner processes
    assert (tmp_path / "mm.jsonl").read_text().count("\n") >= 4
    f = tl.build(ns["s"], ns["args"])  # the best record, replayed
    a, b = (np.random.rand(64, 64).astype("float32") for _ in range(2))
    c = np.empty((64, 64), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
