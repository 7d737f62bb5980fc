"""Whole models built with onnx.helper, compiled in both modes, against onnxruntime."""

import numpy as np
import pytest
from graph_testing import assert_close, ort_run
from tensorlang.graph import model_zoo

from tensorlang import graph

CASES = {
    "mlp": lambda: model_zoo.mlp(),
    "small_cnn": lambda: model_zoo.small_cnn(),
    "depthwise_separable": lambda: model_zoo.depthwise_separable(),
    "inverted_residual": lambda: model_zoo.inverted_residual(),
    "transformer_block": lambda: model_zoo.transformer_block(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_matches_onnxruntime(name):
    model = CASES[name]()
    g = graph.from_onnx(model)
    gm = graph.build(g)
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ref = ort_run(model, {inp.name: x})
    for mode in ("graph", "interactive"):
        out = gm.run(mode=mode, x=x)
        assert set(out) == set(ref)
        for k in ref:
            assert_close(out[k], ref[k])
    rows = gm.profile(number=2, repeat=1)
    assert len(rows) == gm.num_steps and all(r["time_s"] > 0 for r in rows)


def test_set_input_run_get_output():
    model = model_zoo.mlp()
    gm = graph.build(graph.from_onnx(model))
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    gm.set_input("x", x)
    assert gm.run() is None
    ref = ort_run(model, {"x": x})
    assert_close(gm.get_output(0), next(iter(ref.values())))
    assert gm.get_num_outputs() == 1


def test_dispatch_overhead_is_measured():
    # opt_level 0: no fusion, so several tiny kernels (dispatch, not kernel time, dominates)
    gm = graph.build(graph.from_onnx(model_zoo.mlp()), opt_level=0)
    d = gm.dispatch_overhead(number=20, repeat=2)
    assert d["kernels"] == gm.num_steps
    # both are differences of timings (a run minus its kernels), which a loaded machine can
    # make negative or reorder: which mode dispatches faster is benchmarks/models.py's figure
    assert all(np.isfinite(d[k]) for k in ("graph_per_kernel_s", "interactive_per_kernel_s"))


def test_graph_mode_reads_inputs_in_place_and_keeps_run_semantics():
    """run(x=a) in graph mode reads `a` where it lies (no copy into the arena, as onnxruntime
    binds a numpy input); a later run() without inputs still computes on `a`, set_input
    supersedes it, and an input that a kernel overwrites in place is always copied."""
    model = model_zoo.small_cnn()
    gm = graph.build(graph.from_onnx(model))
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(2))
    assert gm._in_place_slots  # the CNN's input qualifies
    ref_a, ref_b = (next(iter(ort_run(model, {"x": v}).values())) for v in (a, b))
    a_before = a.copy()
    assert_close(next(iter(gm.run(x=a).values())), ref_a)
    assert np.array_equal(a, a_before)
    gm.run()  # the arena gets `a` now
    assert_close(gm.get_output(0), ref_a)
    assert_close(next(iter(gm.run(x=b).values())), ref_b)
    gm.set_input(x=a)
    gm.run()
    assert_close(gm.get_output(0), ref_a)
    # a strided view is copied as before
    wide = np.repeat(b, 2, axis=3)[:, :, :, ::2]
    assert_close(next(iter(gm.run(x=wide).values())), ref_b)

    # an input whose storage a kernel writes (in place), or that a graph output aliases, is
    # never read in place: the kernels would write through to (or return) the caller's array
    from tensorlang.runtime.graph_module import GraphModule

    def plan(step_args, n_out, outputs):
        values = {"x": {"storage": 0}, "x2": {"storage": 0}, "y": {"storage": 0},
                  "z": {"storage": 1}}
        return {"values": values, "inputs": [{"name": "x"}],
                "outputs": [{"name": o} for o in outputs],
                "steps": [{"args": step_args, "n_out": n_out}]}

    assert GraphModule._input_slots(plan(["x", "z"], 1, ["z"])) == {"x": [0]}
    assert GraphModule._input_slots(plan(["x", "y"], 1, ["y"])) == {}  # written in place
    assert GraphModule._input_slots(plan(["x", "z"], 1, ["x2"])) == {}  # an output alias


def test_graph_mode_writes_outputs_into_the_arrays_it_returns():
    """run(x=a) in graph mode returns fresh, 64-byte aligned arrays that the last kernel wrote
    (no copy out of the arena); each run gets its own; get_output returns that run's outputs
    until a run() on the arena replaces them. An output sharing its storage (an input, an
    alias, an in-place partner) is copied out as before."""
    model = model_zoo.small_cnn()
    gm = graph.build(graph.from_onnx(model))
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(2))
    ref_a, ref_b = (next(iter(ort_run(model, {"x": v}).values())) for v in (a, b))
    name = gm.output_names[0]
    assert list(gm._out_slots) == [name]
    out_a = gm.run(x=a)[name]
    assert out_a.ctypes.data % 64 == 0 and out_a.flags.c_contiguous
    assert_close(out_a, ref_a)
    out_b = gm.run(x=b)[name]
    assert out_b.ctypes.data != out_a.ctypes.data
    assert_close(out_a, ref_a)  # not overwritten by the second run
    assert_close(gm.get_output(0), ref_b)
    assert gm.get_output(0, copy=False) is out_b
    gm.set_input(x=a)
    gm.run()  # the arena's outputs again
    assert_close(gm.get_output(0), ref_a)
    assert_close(out_b, ref_b)
    assert_close(gm.run(mode="interactive", x=b)[name], ref_b)  # copied out of the arena

    from tensorlang.runtime.graph_module import GraphModule

    def plan(step_args, n_out, outputs, inputs=("x",)):
        values = {"x": {"storage": 0}, "x2": {"storage": 0}, "y": {"storage": 0},
                  "z": {"storage": 1}, "w": {"storage": 2}}
        return {"values": values, "inputs": [{"name": i} for i in inputs],
                "outputs": [{"name": o} for o in outputs],
                "steps": [{"args": step_args, "n_out": n_out}, {"args": ["z", "w"], "n_out": 1}]}

    assert GraphModule._output_slots(plan(["x", "z"], 1, ["z", "w"])) == {"z": [1, 2], "w": [3]}
    assert GraphModule._output_slots(plan(["x", "y"], 1, ["y"])) == {}  # in place on x
    assert GraphModule._output_slots(plan(["x", "z"], 1, ["x2"])) == {}  # an input alias
    assert GraphModule._output_slots(plan(["z", "x"], 1, ["x"], inputs=())) == {}  # shares x2

