"""graph.calibrate_flush and the runner's flush_bytes: the bytes written to evict the caches
before each timed call, chosen so that a model's kernels time alone as they run in it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tensorlang.graph import model_zoo

import tensorlang as tl
from tensorlang import autotune, graph

MIB = 1 << 20


def _small_cnn():
    return graph.from_onnx(model_zoo.small_cnn())


def test_calibration_times_the_heaviest_default_kernels_at_each_size():
    g = _small_cnn()
    tasks = graph.extract_tasks(g)
    found = graph.calibrate_flush(g, tasks, sizes=(MIB, 8 * MIB), top=2, runs=5, rounds=2)
    assert isinstance(found, graph.FlushCalibration)
    assert found.kernels == 2 and set(found.ratios) == {MIB, 8 * MIB}
    assert all(0 < r < math.inf for r in found.ratios.values())
    # the size whose records are nearest the kernels' time in runs, either way
    assert found.flush_bytes == min(found.ratios, key=lambda s: abs(math.log(found.ratios[s])))
    assert str(found).startswith(f"cache flush {found.flush_bytes >> 20} MiB: 2 default kernels")


def test_calibration_refuses_what_it_cannot_time():
    g = _small_cnn()
    with pytest.raises(ValueError, match="no tunable task to time"):
        graph.calibrate_flush(g, [], sizes=(MIB,))
    with pytest.raises(ValueError, match="sizes must not be empty"):
        graph.calibrate_flush(g, sizes=())
    b = graph.Builder("other")
    x = b.input("x", (1, 16, 8, 8))
    w = b.const(np.ones((16, 16, 3, 3), np.float32))
    other = graph.extract_tasks(b.build(b.conv(x, w, pads=1)))
    for t in other:
        t.nodes = ["not_a_node_of_the_cnn"]
    with pytest.raises(ValueError, match="no task's kernel is a step of the untuned build"):
        graph.calibrate_flush(g, other, sizes=(MIB,))


def test_calibration_refuses_shape_variables():
    b = graph.Builder("dyn")
    x = b.input("x", (tl.var("batch"), 16))
    g = b.build(b.relu(x))
    with pytest.raises(ValueError, match="fixed shapes"):
        graph.calibrate_flush(g)


class _Kernel:
    """Stands in for a built kernel in _cold_costs (its timings do not matter here)."""

    def _native_timer(self):
        return lambda raw, number, woken=False: (1e-6 * number, 0)

    def prepare_args(self, *bufs):
        return bufs


def test_a_cold_call_writes_every_cache_line_of_flush_bytes():
    from tensorlang.autotune import measure

    measure._cold_costs(_Kernel(), [np.zeros(4, np.float32)], 1, 3, 0.0, (), 4096)
    (junk,) = measure._junk.values()
    assert junk.size == 4096
    assert (junk[::64] == 3).all() and not junk[1::64].any()  # one write per line per call


def test_the_flush_is_done_before_each_timed_call_and_the_workers_woken_in_it():
    # a tiny kernel's record must be its time after a flush, not the flush's: at each timed
    # call every line of the eviction buffer has been written for this repeat already, and
    # the timer is asked to wake the pool's workers (untimed) before its clock starts
    from tensorlang.autotune import measure

    seen = []

    class Kernel(_Kernel):
        def _native_timer(self):
            def timer(raw, number, woken=False):
                (junk,) = measure._junk.values()
                seen.append((set(junk[::64].tolist()), woken))
                return 1e-6 * number, 0
            return timer

    measure._cold_costs(Kernel(), [np.zeros(4, np.float32)], 1, 3, 0.0, (0,), 8192)
    assert seen[-3:] == [({1}, True), ({2}, True), ({3}, True)]
    # before them at most the untimed call that first wakes a multi-threaded pool's workers
    assert seen[:-3] in ([], [({0}, False)])


@pytest.mark.parametrize("bad", [-1, 1.5, "64M", True])
def test_runner_refuses_a_bad_flush_size(bad):
    with pytest.raises(ValueError, match="flush_bytes must be an int >= 0"):
        autotune.LocalRunner(flush_cache=True, flush_bytes=bad)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"rounds": 0}, ValueError, "rounds must be >= 1, got 0"),  # was StatisticsError
    ({"top": 0}, ValueError, "top must be >= 1, got 0"),  # was "no tunable task"
    ({"sizes": [-5]}, ValueError, "each size must be >= 0, got -5"),  # was chosen: -1 MiB
    ({"sizes": [2.5]}, TypeError, "each size must be an int, got float"),
    ({"sizes": ()}, ValueError, "sizes must not be empty"),
])
def test_calibrate_flush_refuses_bad_arguments_before_building(kwargs, error, match):
    g = graph.from_onnx(model_zoo.mlp())
    with pytest.raises(error, match=f"calibrate_flush: {match}"):
        graph.calibrate_flush(g, **kwargs)
    with pytest.raises(TypeError, match="calibrate_flush: expected a Graph"):
        graph.calibrate_flush(None)
