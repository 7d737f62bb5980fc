"""graph.build compiles a graph's kernels ahead on a few threads (each LLVM compile runs in a
child process, so one kernel's compile overlaps the next one's lowering): the same kernels and
bit-identical results as one thread, the same error for a kernel that does not build, and the
thread count read from TENSORLANG_BUILD_THREADS."""

import importlib
import threading

import numpy as np
import pytest
from tensorlang.graph import model_zoo

from tensorlang import graph

gselect = importlib.import_module("tensorlang.graph.select_kernels")


def _build(monkeypatch, tmp_path, threads: int, model):
    monkeypatch.setenv("TENSORLANG_CACHE_DIR", str(tmp_path / f"cache{threads}"))
    monkeypatch.setenv("TENSORLANG_BUILD_THREADS", str(threads))
    monkeypatch.setattr(gselect, "_KERNEL_CACHE", {})
    rep = graph.BuildReport()
    return graph.build(graph.from_onnx(model), report=rep), rep


def test_kernels_compiled_ahead_on_threads_equal_a_sequential_build(monkeypatch, tmp_path):
    model = model_zoo.small_cnn()
    where: list[str] = []
    real = gselect.build_kernel

    def noting(*args):
        where.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(gselect, "build_kernel", noting)
    gm1, rep1 = _build(monkeypatch, tmp_path, 1, model)
    assert where and not any(w.startswith("tensorlang-build") for w in where)
    where.clear()
    gm4, rep4 = _build(monkeypatch, tmp_path, 4, model)
    assert sum(w.startswith("tensorlang-build") for w in where) == len(rep4.kernels) > 1
    # what the report says is what a sequential build says: compiled here, the same schedules
    assert [(k.name, k.schedule, k.source) for k in rep4.kernels] == \
        [(k.name, k.schedule, k.source) for k in rep1.kernels]
    assert all(k.source is None for k in rep4.kernels)
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    out1, out4 = gm1.run(x=x), gm4.run(x=x)
    assert all(np.array_equal(out1[k], out4[k]) for k in out1)


def test_a_kernel_that_does_not_build_raises_as_in_a_sequential_build(monkeypatch, tmp_path):
    real = gselect._compile_kernel

    def refuse_max_pool(op, *args):
        if op == "max_pool":
            raise graph.BuildError("cannot compile max_pool: refused by the test")
        return real(op, *args)

    monkeypatch.setattr(gselect, "_compile_kernel", refuse_max_pool)
    for threads in (1, 4):
        with pytest.raises(graph.BuildError, match="cannot compile max_pool: refused by the test"):
            _build(monkeypatch, tmp_path, threads, model_zoo.small_cnn())


def test_a_thread_count_that_is_not_a_number_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORLANG_BUILD_THREADS", "two")
    monkeypatch.setattr(gselect, "_KERNEL_CACHE", {})
    monkeypatch.setenv("TENSORLANG_CACHE_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="TENSORLANG_BUILD_THREADS must be a whole number"):
        graph.build(graph.from_onnx(model_zoo.mlp()))
