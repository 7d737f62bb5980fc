"""Measurement fidelity of whole-model tuning (issue 21): a graph task is the kernel the graph
runs. The graph's kernel for each task is that task built with its record's config (the same
lowered code), and a task says which of its arguments the graph has in cache when it calls the
kernel (its non-constant inputs), which a runner with ``flush_cache`` keeps warm while it
evicts the weights before each timed call."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from tensorlang.autotune.measure import RUN_ERROR, MeasureInput, MeasureResult, measure_batch
from tensorlang.autotune.record import make_record

import tensorlang as tl
from tensorlang import autotune, graph


def _rand(*shape):
    return np.random.default_rng(len(shape)).uniform(-1, 1, shape).astype(np.float32)


def _conv_relu_then_residual_conv():
    """conv (16 -> 32) -> relu -> conv (32 -> 32) + the relu's output -> relu, 1x16x8x8."""
    b = graph.Builder("residual")
    x = b.input("x", (1, 16, 8, 8))
    y = b.relu(b.conv(x, b.const(_rand(32, 16, 3, 3), name="wa"), b.const(_rand(32), name="ba"),
                      pads=1))
    z = b.relu(b.add(b.conv(y, b.const(_rand(32, 32, 3, 3), name="wb"), pads=1), y))
    return b.build(z)


def _non_default_config(task):
    """The last config of the task's space that builds (not the fallback's)."""
    space = task.config_space
    for index in range(len(space) - 1, 0, -1):
        cfg = space.get(index)
        try:
            tl.build(*task.instantiate(cfg))
        except tl.ScheduleError:
            continue
        return cfg
    raise AssertionError(f"{task}: no config besides the default builds")


def _body(tir: str) -> str:
    """Lowered code without its function name (the graph names its kernels by workload)."""
    return re.sub(r"^def \w+\(", "def kernel(", tir, count=1)


def test_the_graphs_kernel_for_each_task_is_the_task_built_with_its_record(tmp_path):
    g = _conv_relu_then_residual_conv()
    tasks = graph.extract_tasks(g)
    assert len(tasks) == 2
    chosen = {t.key: _non_default_config(t) for t in tasks}
    log = tmp_path / "records.jsonl"
    autotune.append_records(log, [
        make_record(MeasureInput(t, chosen[t.key]), MeasureResult(costs=[1e-3]))
        for t in tasks])
    rep = graph.BuildReport()
    gm = graph.build(g, tuning_log=str(log), report=rep)
    assert not rep.untuned and not rep.tuned_failures
    kernel_of = {st["node"]: st["kernel"] for st in gm.plan["steps"]}
    for t in tasks:
        alone = tl.build(*t.instantiate(chosen[t.key]), name="alone")
        default = tl.build(*t.instantiate(autotune.FallbackConfig()), name="default")
        for node in t.nodes:
            in_graph = gm.kernels[kernel_of[node]].get_source("tir")
            assert _body(in_graph) == _body(alone.get_source("tir")), node
            # the chosen config changes the code: the comparison can tell them apart
            assert _body(in_graph) != _body(default.get_source("tir")), node
    x = _rand(1, 16, 8, 8)
    ref = graph.build(g, opt_level=0).run(x=x)
    for name, v in gm.run(x=x).items():
        np.testing.assert_allclose(v, ref[name], rtol=1e-4, atol=1e-4)


def test_a_graph_task_keeps_its_non_constant_inputs_warm():
    g = _conv_relu_then_residual_conv()
    by_op = {}
    for t in graph.extract_tasks(g):
        types = [tuple(sh) for sh, _ in json.loads(t.args[2])]
        by_op["add" in t.args[1]] = (t.warm_args, types)
    # the first conv reads the graph input (warm), its packed weight and its bias (cold)
    assert by_op[False] == ((0,), [(1, 16, 8, 8), (2, 16, 3, 3, 16), (32,)])
    # the residual conv reads the relu's output (as the conv's input and as the addend: one
    # argument) warm and its packed weight cold
    assert by_op[True] == ((0,), [(1, 2, 8, 8, 16), (2, 2, 3, 3, 16, 16)])


def _matmul_task(warm_args):
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), "llvm")
    task.warm_args = warm_args
    return task


def test_a_flushed_measurement_times_each_repeat_once_from_cold_caches():
    task = _matmul_task((0,))
    opt = autotune.measure_option(autotune.LocalBuilder(n_parallel=1),
                                  autotune.LocalRunner(number=1, repeat=4, flush_cache=True))
    try:
        cfg = task.config_space.get(0)
        good, bad = measure_batch(opt, [MeasureInput(task, cfg),
                                        MeasureInput(_matmul_task((0, 5)), cfg)])
    finally:
        opt.close()
    assert good.valid and len(good.costs) == 4 and all(c > 0 for c in good.costs)
    assert bad.error == RUN_ERROR
    assert "warm_args [0, 5]: the kernel has 3 arguments" in bad.error_msg


@pytest.mark.parametrize("warm", [(-1,), (1.5,)])
def test_bad_warm_args_are_refused(warm):
    from tensorlang.autotune.measure import _warm_args

    with pytest.raises(ValueError, match=r"warm_args .*: the kernel has 3 arguments"):
        _warm_args(warm, [np.zeros(1)] * 3)
