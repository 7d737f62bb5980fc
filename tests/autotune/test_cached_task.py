"""The tuner's cache of other workloads' tasks (transfer learning from a log): arguments the
template refuses are warned about once and skipped; a bug in a template is not swallowed."""

import pytest
from tensorlang.autotune import tuner as tuner_mod

import tensorlang as tl
from tensorlang import autotune


@autotune.template("h5_cached_task_probe")
def _probe(n: int):
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if n == 13:
        raise AttributeError("a bug inside the template")
    A = tl.placeholder((n + 1,), name="A")
    B = tl.compute((n + 1,), lambda i: A[i] * 2.0, name="B")
    s = tl.create_schedule(B)
    cfg = autotune.get_config()
    cfg.define_knob("unroll", [0, 1])
    return s, [A, B]


def test_refused_arguments_warn_once_and_are_skipped(monkeypatch):
    monkeypatch.setattr(tuner_mod, "_TASKS", {})
    with pytest.warns(UserWarning, match=r"h5_cached_task_probe\(-1,\).*ValueError: n must"):
        assert tuner_mod._cached_task("h5_cached_task_probe", [-1], "llvm") is None
    assert tuner_mod._cached_task("h5_cached_task_probe", [-1], "llvm") is None  # cached
    task = tuner_mod._cached_task("h5_cached_task_probe", [3], "llvm")
    assert task is not None and len(task.config_space) == 2


def test_template_bug_propagates(monkeypatch):
    monkeypatch.setattr(tuner_mod, "_TASKS", {})
    with pytest.raises(AttributeError, match="a bug inside the template"):
        tuner_mod._cached_task("h5_cached_task_probe", [13], "llvm")
