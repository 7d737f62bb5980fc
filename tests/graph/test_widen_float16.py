"""widen_float16: a float16 model computes in float32 from its inputs to its outputs (as
onnxruntime's CPU kernels do), its outputs float16 under their names; an explicit cast to
float16 still rounds."""

from __future__ import annotations

import numpy as np
import onnx
from graph_testing import ort_run
from onnx import TensorProto, helper, numpy_helper
from tensorlang.graph.passes import run_passes

from tensorlang import graph

DEPTH, WIDTH = 12, 64


def _deep_mlp(dtype) -> onnx.ModelProto:
    """DEPTH x (MatMul, Add, Tanh) of WIDTH, its output also read by a last Mul: one output
    that is an interior value too."""
    rng = np.random.default_rng(0)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes, inits, x = [], [], "x"
    for i in range(DEPTH):
        w = (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH) * 1.5).astype(np.float16)
        b = rng.standard_normal(WIDTH).astype(np.float16) * np.float16(0.1)
        inits += [numpy_helper.from_array(w.astype(dtype), f"w{i}"),
                  numpy_helper.from_array(b.astype(dtype), f"b{i}")]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
                  helper.make_node("Tanh", [f"a{i}"], [f"h{i}"])]
        x = f"h{i}"
    nodes.append(helper.make_node("Mul", [x, x], ["sq"]))
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", elem, [4, WIDTH])],
                          [helper.make_tensor_value_info(x, elem, [4, WIDTH]),
                           helper.make_tensor_value_info("sq", elem, [4, WIDTH])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_float16_model_computes_in_float32_between_its_inputs_and_outputs():
    x = np.random.default_rng(1).standard_normal((4, WIDTH)).astype(np.float16)
    out = f"h{DEPTH - 1}"
    got = graph.build(graph.from_onnx(_deep_mlp(np.float16))).run(x=x)
    assert list(got) == [out, "sq"] and all(v.dtype == np.float16 for v in got.values())
    # the same weights and input in float32, rounded to float16 once at the end
    ref = graph.build(graph.from_onnx(_deep_mlp(np.float32))).run(x=x.astype(np.float32))
    for name in got:
        np.testing.assert_array_equal(got[name], ref[name].astype(np.float16))
    ort = ort_run(_deep_mlp(np.float16), {"x": x})
    for name in got:  # onnxruntime's float16: within an ulp or two
        np.testing.assert_allclose(got[name].astype(np.float32),
                                   ort[name].astype(np.float32), atol=2e-3, rtol=2e-3)


def test_every_op_but_an_explicit_cast_makes_float32():
    g = run_passes(graph.from_onnx(_deep_mlp(np.float16)), opt_level=0)
    half = [n.op for n in g.nodes if any(v.dtype == "float16" for v in n.outputs)]
    assert half == ["cast", "cast"]  # the two outputs, cast back at the end
    assert [v.name for v in g.outputs] == [f"h{DEPTH - 1}", "sq"]


def test_an_explicit_cast_to_float16_still_rounds():
    """x (float32) -> Cast to float16 -> Mul by 3 -> Cast to float32: the product of the
    rounded x, as ONNX defines Cast (onnxruntime drops the pair of casts and gives x * 3:
    3.000732 for 1 + 2^-12, where the rounded x gives 3), in float32 (65000 -> 64992 -> 194976,
    where a float16 product would overflow)."""
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Mul", ["h", "three"], ["p"]),
             helper.make_node("Cast", ["p"], ["y"], to=TensorProto.FLOAT)]
    three = numpy_helper.from_array(np.array(3, np.float16), "three")
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])], [three])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([1 + 2 ** -12, 0.1, 1000.3, -2.7, 65000.0], np.float32)
    y = graph.build(graph.from_onnx(model)).run(x=x)["y"]
    np.testing.assert_array_equal(y, x.astype(np.float16).astype(np.float32) * 3)
