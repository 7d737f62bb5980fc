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
    """The last config of the task's space that lowers, so builds (not the fallback's: a
    ScheduleError is raised by the lowering; the graph's build compiles the config)."""
    space = task.config_space
    for index in range(len(space) - 1, 0, -1):
        cfg = space.get(index)
        try:
            tl.lower(*task.instantiate(cfg))
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
        # a module's "tir" source is its tl.lower text (tl.build lowers with the name it is
        # given): lowered here, not compiled (the graph's build compiled the chosen config)
        alone = str(tl.lower(*t.instantiate(chosen[t.key]), name="alone"))
        default = str(tl.lower(*t.instantiate(autotune.FallbackConfig()), name="default"))
        for node in t.nodes:
            in_graph = gm.kernels[kernel_of[node]].get_source("tir")
            assert _body(in_graph) == _body(alone), node
            # the chosen config changes the code: the comparison can tell them apart
            assert _body(in_graph) != _body(default), node
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


class _KernelThatRecordsTheSpinBudget:
    """Stands in for a built kernel in _cold_costs: its timer records (calls per timing, the
    pool's spin budget at the call, whether the workers were to be woken first)."""

    def __init__(self):
        self.calls = []

    def _native_timer(self):
        from tensorlang.runtime import threadpool

        def timer(raw, number, woken=False):
            self.calls.append((number, threadpool.get_spin_cycles(), woken))
            return 1e-6 * number, 0
        return timer

    def prepare_args(self, *bufs):
        return bufs


@pytest.fixture
def two_threads_and_a_users_spin_budget():
    from tensorlang.runtime import threadpool

    before = threadpool.get_num_threads()
    threadpool.set_num_threads(2)
    threadpool.set_spin_cycles(12345)
    yield
    threadpool.set_num_threads(before)
    threadpool.set_spin_cycles(threadpool.DEFAULT_SPIN_CYCLES)


def test_a_flushed_measurement_keeps_the_pools_workers_awake_then_restores_their_budget(
        two_threads_and_a_users_spin_budget):
    # between two kernels of a model run the workers spin; after a flush they would sleep and
    # each timed call would pay their wake-up: woken by an untimed call, kept spinning
    from tensorlang.autotune.measure import _MEASURE_SPIN_CYCLES, _cold_costs
    from tensorlang.runtime import threadpool

    kernel = _KernelThatRecordsTheSpinBudget()
    costs = _cold_costs(kernel, [np.zeros(4, np.float32)], 2, 3, 0.0, (0,))
    assert costs == [1e-6] * 3
    # every timed call after the flush: the workers made to run first (untimed), so that a
    # worker that yielded its CPU through the flush is not waited for inside the timing
    assert kernel.calls == ([(1, _MEASURE_SPIN_CYCLES, False)]
                            + [(2, _MEASURE_SPIN_CYCLES, True)] * 3)
    assert threadpool.get_spin_cycles() == 12345


def test_a_one_thread_measurement_leaves_the_spin_budget_alone(
        two_threads_and_a_users_spin_budget):
    from tensorlang.autotune.measure import _cold_costs
    from tensorlang.runtime import threadpool

    threadpool.set_num_threads(1)
    kernel = _KernelThatRecordsTheSpinBudget()
    _cold_costs(kernel, [np.zeros(4, np.float32)], 1, 2, 0.0)
    assert kernel.calls == [(1, 12345, True)] * 2
    assert threadpool.get_spin_cycles() == 12345
