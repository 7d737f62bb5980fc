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
    assert d["graph_per_kernel_s"] < d["interactive_per_kernel_s"]
