"""Hand-made ONNX graphs over an input of symbolic height and width (x: [1, c, "h", "w"], one
output y), built once without sizes and checked against onnxruntime at several planes."""

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tensorlang import graph


def plane_model(nodes, inits: dict, channels: int, opset: int = 17, width="w"):
    """The model of `nodes` with the arrays `inits` as initializers (`width`: the input's width,
    symbolic "w" unless given a number)."""
    consts = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, "h", width])],
        [helper.make_empty_tensor_value_info("y")], consts)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def check_planes(model, planes, channels: int, rng):
    """One build without sizes, against onnxruntime at every (h, w) of `planes`."""
    gm = graph.build(graph.from_onnx(model))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for hw in planes:
        x = rng.standard_normal((1, channels, *hw)).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        got = gm.run(x=x)["y"]
        assert got.shape == want.shape, hw
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(hw))
    return gm
