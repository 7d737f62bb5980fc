"""ConvTranspose over a symbolic height and width (a UNet exported with dynamic sizes): the
output lengths are ONNX's stride * (n - 1) + (k - 1) * dilation + 1 - pads + output_padding
over the sizes, the phase convolution and interleave run over them, and a size whose output
would be empty is refused at run time naming the node. Each model is built once without sizes
and checked against onnxruntime at several sizes, odd ones included."""

import numpy as np
import pytest
from dynamic_planes import check_planes, plane_model
from tensorlang.runtime._plan import PlanError
from tensorlang.runtime.graph_module import InputError

from tensorlang import graph

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import helper

RNG = np.random.default_rng(11)
pytestmark = pytest.mark.filterwarnings("ignore:.*generic schedules:UserWarning")


def _model(nodes, channels, inits, opset=17):
    """inits: name -> shape, filled with normal samples."""
    arrays = {k: RNG.standard_normal(s).astype(np.float32) for k, s in inits.items()}
    return plane_model(nodes, arrays, channels, opset)


def _check(model, planes, channels):
    return check_planes(model, planes, channels, RNG)


def _ct(**attrs):
    return helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="ct", **attrs)


CASES = [  # (weight [C, OC/group, KH, KW], attributes, planes)
    # UNet's upsampling: 2x2 taps at stride 2, one phase kernel tap each
    ((4, 4, 2, 2), {"strides": [2, 2]}, [(1, 1), (5, 7), (12, 9)]),
    # grouped, dilated, strides (2, 3), asymmetric pads; pads past the kernel's reach on the
    # left (the conv computes the rows before and the interleave skips them)
    ((8, 3, 3, 2), {"strides": [2, 3], "dilations": [2, 1], "group": 2,
                    "pads": [0, 5, 3, 0], "output_padding": [1, 2]}, [(2, 2), (5, 4), (8, 9)]),
    # auto_pad SAME_UPPER at stride 2: the output is the input times the stride
    ((4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, [(1, 1), (4, 5), (9, 6)]),
]


@pytest.mark.parametrize("ws,attrs,planes", CASES)
def test_conv_transpose_over_a_symbolic_plane(ws, attrs, planes):
    oc = ws[1] * attrs.get("group", 1)
    _check(_model([_ct(**attrs)], ws[0], {"w": ws, "b": (oc,)}), planes, ws[0])


def test_padded_conv_transpose_refuses_a_plane_with_an_empty_output():
    """2x2 taps at stride 2 padded 1 on the height: its output 2 * h - 2 long, empty at h = 1
    where the phase conv still has a row (onnxruntime refuses it too); on the width unpadded
    with output_padding, 2 * w + 1."""
    m = _model([_ct(strides=[2, 2], pads=[1, 0, 1, 0], output_padding=[0, 1])], 4,
               {"w": (4, 3, 2, 2), "b": (3,)})
    gm = _check(m, [(2, 1), (3, 4), (6, 7)], 4)
    with pytest.raises(PlanError, match=r"node 'ct.*' \(conv_transpose_interleave\) .* "
                                        r"extent h \* 2 - 2 is 0 < 1 at h = 1, w = 5"):
        gm.run(x=np.ones((1, 4, 1, 5), np.float32))


def test_output_shape_over_a_symbolic_plane_is_refused_naming_the_node():
    m = _model([_ct(strides=[2, 2], output_shape=[10, 10])], 4, {"w": (4, 2, 3, 3), "b": (2,)})
    with pytest.raises(graph.OnnxImportError, match=r"'ct' \(ConvTranspose, opset 17\): "
                                                    r"output_shape \[10, 10\] over the symbolic"):
        graph.from_onnx(m)


def test_unet_skip_needs_a_multiple_of_the_pooling():
    """Pool by 2, ConvTranspose back, Concat with the skip: the skip's h == 2 * (h // 2) holds
    at even sizes only. The import takes the plane as multiples of 2 (h_div2 * 2), matches
    onnxruntime there and refuses an odd size naming the input (onnxruntime fails its Concat)."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("ConvTranspose", ["p", "w", "b"], ["u"], strides=[2, 2]),
             helper.make_node("Concat", ["u", "x"], ["y"], axis=1)]
    m = _model(nodes, 4, {"w": (4, 3, 2, 2), "b": (3,)})
    g = graph.from_onnx(m)
    assert [str(d) for d in g.inputs[0].shape[2:]] == ["h_div2 * 2", "w_div2 * 2"]
    gm = _check(m, [(2, 2), (6, 10), (14, 4)], 4)
    with pytest.raises(InputError, match=r"input 'x' axis 2 must be h_div2 \* 2 .*got 7"):
        gm.run(x=np.ones((1, 4, 7, 4), np.float32))
