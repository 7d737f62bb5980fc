"""Conv and pooling over spatial axes of symbolic size (issue 19): the output extents are ONNX's
formulas over the sizes (floor((n + pads - dilation * (k - 1) - 1) / stride) + 1, ceil_mode's
variant), the kernels' loops run over them, and a size too small for one window is refused at
run time naming the node and the sizes. Every model is built once without sizes and checked
against onnxruntime at several sizes: extents of 1, and both sides of a stride's boundary."""

import numpy as np
import pytest
from tensorlang.runtime._plan import PlanError

from tensorlang import graph, runtime

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)
# every build here warns that its windows run on generic schedules (tested once, below)
pytestmark = pytest.mark.filterwarnings("ignore:.*generic schedules:UserWarning")


def _model(nodes, x_shape, inits, opset=17):
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _check(model, shapes, opt_level=2):
    """One build of ``model`` without sizes, against onnxruntime at every input shape."""
    gm = graph.build(graph.from_onnx(model), opt_level=opt_level)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in shapes:
        x = RNG.standard_normal(shape).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        got = gm.run(x=x)["y"]
        assert got.shape == want.shape, shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(shape))
    return gm


def _conv(**attrs):
    return helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)


# -- Conv1d: the speech and conv-text models' convs over the sequence --------------------------


CONV1D = [  # (weight [OC, C/g, K], attributes, input channels, lengths)
    # wav2vec2's first feature-extractor conv: 10 taps, stride 5 (one output at 10..14)
    ((8, 1, 10), {"strides": [5]}, 1, [10, 14, 15, 37]),
    # its positional conv embedding: grouped, padded by half the kernel
    ((8, 2, 5), {"pads": [2, 2], "group": 4}, 8, [1, 2, 9]),
    # ConvBERT's depthwise conv, Mamba's causal depthwise conv (pads k - 1 on both sides)
    ((6, 1, 9), {"pads": [4, 4], "group": 6}, 6, [1, 5, 17]),
    ((6, 1, 4), {"pads": [3, 3], "group": 6}, 6, [1, 2, 11]),
    # SqueezeBERT's 1x1 conv; strided, dilated, asymmetric pads
    ((16, 8, 1), {}, 8, [1, 3, 20]),
    ((4, 3, 3), {"strides": [2], "dilations": [2], "pads": [0, 1]}, 3, [4, 5, 6, 19]),
]


@pytest.mark.parametrize("ws,attrs,cin,lengths", CONV1D)
def test_conv1d_over_a_symbolic_length(ws, attrs, cin, lengths):
    m = _model([_conv(**attrs)], ["b", cin, "n"], {"w": _w(*ws), "b": _w(ws[0])})
    _check(m, [(1, cin, n) for n in lengths] + [(2, cin, lengths[-1])])


def test_conv1d_stack_as_wav2vec2_feature_extractor():
    """Convs, GELU and a transpose after them: the later convs' lengths are expressions of the
    earlier ones' ((n - 10) // 5 - 1) // 2 + 1 ...)."""
    gelu = [helper.make_node("Mul", ["h1", "half"], ["t"]), helper.make_node("Relu", ["t"], ["a"])]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["h0"], strides=[5]),
             helper.make_node("Conv", ["h0", "w1"], ["h1"], strides=[2]), *gelu,
             helper.make_node("Conv", ["a", "w2"], ["h2"], strides=[2]),
             helper.make_node("Transpose", ["h2"], ["y"], perm=[0, 2, 1])]
    m = _model(nodes, ["b", 1, "n"], {"w0": _w(16, 1, 10), "w1": _w(16, 16, 3),
                                      "w2": _w(16, 16, 2), "half": np.float32(0.5)})
    # 30 is the least length giving one output; 400 as in a short clip
    _check(m, [(1, 1, 30), (1, 1, 36), (2, 1, 400)])


# -- Conv2d over a symbolic height and width ---------------------------------------------------


CONV2D = [  # (weight, attributes, input channels, (h, w) sizes)
    ((16, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, 3, [(1, 1), (2, 3), (9, 16)]),
    ((8, 4, 3, 2), {"dilations": [2, 1], "pads": [2, 0, 1, 1], "group": 2}, 8,
     [(3, 1), (4, 6), (11, 7)]),
    ((12, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 12}, 12, [(1, 1), (5, 2), (13, 17)]),
    ((16, 8, 1, 1), {}, 8, [(1, 1), (3, 5), (7, 7)]),
    # auto_pad at stride 1: the pads are the window less one, whatever the size
    ((4, 2, 4, 2), {"auto_pad": "SAME_UPPER"}, 2, [(1, 1), (4, 3), (9, 10)]),
    ((4, 2, 4, 3), {"auto_pad": "SAME_LOWER"}, 2, [(1, 2), (5, 5)]),
    ((4, 2, 3, 3), {"auto_pad": "VALID", "strides": [2, 1]}, 2, [(3, 3), (4, 3), (8, 9)]),
]


@pytest.mark.parametrize("ws,attrs,cin,sizes", CONV2D)
def test_conv2d_over_a_symbolic_plane(ws, attrs, cin, sizes):
    m = _model([_conv(**attrs)], ["b", cin, "h", "w"], {"w": _w(*ws), "b": _w(ws[0])})
    _check(m, [(1, cin, h, w) for h, w in sizes] + [(2, cin, *sizes[-1])])


def test_conv_pool_chain_without_passes():
    """opt_level 0 (one kernel per op, no layout passes) gives the same answers (opt_level 2:
    test_a_cnn_over_a_symbolic_plane_runs_the_blocked_library_kernels). 8 output channels: the
    16-channel (oc-blocked) NCHW conv over a symbolic plane builds in 8 s, and is tested as a
    kernel in tests/tensorlang/test_ops_symbolic.py (stem)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["p"], ["y"])]
    m = _model(nodes, [1, 3, "h", "w"], {"w": _w(8, 3, 3, 3), "b": _w(8)})
    _check(m, [(1, 3, 1, 1), (1, 3, 7, 12), (1, 3, 32, 24)], opt_level=0)


# -- pooling -----------------------------------------------------------------------------------


POOLS = [  # (op, attributes, (h, w) sizes)
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
     [(1, 1), (2, 3), (4, 5), (15, 16)]),
    ("MaxPool", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1},
     [(3, 2), (4, 3), (5, 4), (6, 7)]),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 1], "pads": [1, 0, 1, 1]},
     [(1, 1), (2, 2), (7, 5)]),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
     [(1, 1), (4, 5), (9, 8)]),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                     "count_include_pad": 1}, [(1, 1), (2, 3), (9, 8)]),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1,
                     "count_include_pad": 1, "pads": [1, 0, 1, 1]}, [(2, 1), (3, 2), (6, 7)]),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
     [(2, 2), (3, 3), (5, 8)]),
]


@pytest.mark.parametrize("op,attrs,sizes", POOLS)
def test_pool2d_over_a_symbolic_plane(op, attrs, sizes):
    m = _model([helper.make_node(op, ["x"], ["y"], **attrs)], ["b", 4, "h", "w"], {})
    _check(m, [(1, 4, h, w) for h, w in sizes] + [(2, 4, *sizes[-1])])


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2], "strides": [2], "ceil_mode": 1},  # Funnel's pooling of the sequence
    {"kernel_shape": [3], "strides": [1], "pads": [1, 1], "count_include_pad": 1},
])
def test_avg_pool1d_over_a_symbolic_length(attrs):
    m = _model([helper.make_node("AveragePool", ["x"], ["y"], **attrs)], ["b", 5, "n"], {})
    _check(m, [(1, 5, 1), (1, 5, 2), (1, 5, 3), (3, 5, 10)])


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_over_a_symbolic_plane(op):
    m = _model([helper.make_node(op, ["x"], ["y"])], ["b", 6, "h", "w"], {})
    _check(m, [(1, 6, 1, 1), (1, 6, 3, 5), (2, 6, 17, 9)])
    m1 = _model([helper.make_node(op, ["x"], ["y"])], ["b", 6, "n"], {})
    _check(m1, [(1, 6, 1), (2, 6, 33)])


# -- refusals and save/load --------------------------------------------------------------------


def test_a_size_too_small_for_one_window_is_refused_at_run_time():
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[5])], ["b", 1, "n"],
               {"w": _w(4, 1, 10)})
    gm = _check(m, [(1, 1, 10)])
    with pytest.raises(PlanError, match=r"node 'Conv_0' \(conv\) .* too small for one window: "
                                        r"the output extent n // 5 - 1 is 0 < 1 at "
                                        r"b = 1, n = 9"):
        gm.run(x=np.zeros((1, 1, 9), np.float32))
    with pytest.raises(PlanError, match=r"is -1 < 1 at b = 1, n = 4"):
        gm.run(x=np.zeros((1, 1, 4), np.float32))
    pool = _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3])],
                  [1, 2, "h", "w"], {})
    gm = _check(pool, [(1, 2, 3, 4)])
    with pytest.raises(PlanError, match=r"node .*MaxPool.* extent w - 2 is 0 < 1 at "
                                        r"h = 5, w = 2"):
        gm.run(x=np.zeros((1, 2, 5, 2), np.float32))


def test_same_pads_at_a_stride_over_a_symbolic_size_are_refused_naming_shapes():
    """SAME pads at stride 2 depend on the size modulo 2: the import says so (the pads are
    ints); with shapes= the model imports."""
    m = _model([_conv(auto_pad="SAME_UPPER", strides=[2, 2])], [1, 2, "h", "w"],
               {"w": _w(4, 2, 3, 3), "b": _w(4)})
    with pytest.raises(graph.GraphError, match=r"SAME_UPPER with stride 2 .* symbolic size h.*"
                                               r"shapes="):
        graph.from_onnx(m)
    gm = graph.build(graph.from_onnx(m, shapes={"x": (1, 2, 5, 6)}))
    assert gm.run(x=np.ones((1, 2, 5, 6), np.float32))["y"].shape == (1, 4, 3, 3)


def test_a_dynamic_conv_model_saves_and_loads(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[5]),
             helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2], strides=[2])]
    m = _model(nodes, ["b", 1, "n"], {"w": _w(8, 1, 10)})
    gm = _check(m, [(1, 1, 20), (2, 1, 64)])
    gm.save(tmp_path / "m.tlpkg")
    back = runtime.load(tmp_path / "m.tlpkg")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (20, 23, 101):
        x = RNG.standard_normal((1, 1, n)).astype(np.float32)
        np.testing.assert_allclose(back.run(x=x)["y"], sess.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-4)
    with pytest.raises(PlanError, match="too small for one window"):
        back.run(x=np.zeros((1, 1, 14), np.float32))


@pytest.mark.filterwarnings("error")
def test_a_build_says_once_that_windows_over_symbolic_sizes_run_on_generic_schedules():
    """1-D pooling (and 3-D windows) over a symbolic size run on the generic computes."""
    m = _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3], pads=[1, 1])],
               [1, 2, "n"], {})
    with pytest.warns(UserWarning, match=r"1 conv/pool node\(s\) slide their windows over "
                      r"spatial axes of symbolic size.*generic schedules.*shapes=.*specialize="):
        graph.build(graph.from_onnx(m))
    graph.build(graph.from_onnx(m, shapes={"x": (1, 2, 9)}))  # fixed sizes: no warning
    graph.build(graph.from_onnx(m), specialize={"n": [9]})  # the sizes chosen: no warning


def _cnn():
    """A CNN's shapes of layer: a 7x7 stride-2 stem from 3 channels, max pool, a residual
    3x3 conv with a bias, a strided depthwise conv, a 1x1 conv, average and global pools. (One
    3x3 conv in the residual branch, not a block of two: the other built the same blocked 3x3
    kernel with a fused ReLU, which the stem fuses too, for 10 s of the test's 30.)"""
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], strides=[2, 2], pads=[3, 3, 3, 3]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p0", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p0"], ["a2"]),
        helper.make_node("Conv", ["a2", "w3"], ["c3"], strides=[2, 2], pads=[1, 1, 1, 1],
                         group=16),
        helper.make_node("Conv", ["c3", "w4"], ["c4"]),
        helper.make_node("AveragePool", ["c4"], ["p4"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("GlobalAveragePool", ["p4"], ["y"]),
    ]
    inits = {"w0": _w(16, 3, 7, 7), "w2": _w(16, 16, 3, 3), "b2": _w(16), "w3": _w(16, 1, 3, 3),
             "w4": _w(32, 16, 1, 1)}
    return _model(nodes, ["b", 3, "h", "w"], inits)


@pytest.mark.filterwarnings("error")
def test_a_cnn_over_a_symbolic_plane_runs_the_blocked_library_kernels():
    """Every conv and pool of a CNN over a symbolic height and width runs the library's
    blocked NCHW16c kernels, as with fixed sizes (they were generic computes, a tiny ResNet
    at 224x224 about 300x slower), and matches onnxruntime at sizes with whole, ragged and
    one-column register tiles, the smallest plane with a whole window included."""
    gm = _check(_cnn(), [(1, 3, 9, 9), (1, 3, 33, 47), (2, 3, 64, 56), (1, 3, 121, 200)])
    layouts = {k["op"]: k["layout"] for k in gm.plan["kernels"].values()}
    assert all(k["layout"] == "NCHW16c" for k in gm.plan["kernels"].values()
               if "conv" in k["ops"] or {"max_pool", "avg_pool"} & set(k["ops"])), layouts
    with pytest.raises(PlanError, match=r"too small for one window"):
        gm.run(x=np.zeros((1, 3, 4, 9), np.float32))


@pytest.mark.filterwarnings("error")
def test_conv1d_over_a_symbolic_length_runs_as_the_2d_library_conv():
    """wav2vec2 / HuBERT's feature extractor over the audio length: conv1d_as_conv2d rewrites
    its convs over the symbolic length as 2-D convs of height 1 (the library's kernels)."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], strides=[5]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"], strides=[2]),
             helper.make_node("Relu", ["c1"], ["y"])]
    m = _model(nodes, ["b", 1, "n"], {"w0": _w(32, 1, 10), "w1": _w(32, 32, 3)})
    gm = _check(m, [(1, 1, 20), (1, 1, 400), (2, 1, 1001)])
    convs = [k for k in gm.plan["kernels"].values() if "conv" in k["ops"]]
    assert convs and all(k["layout"] == "NCHW16c" for k in convs), convs


def test_a_squeeze_excite_gate_over_a_symbolic_plane_is_not_fused_into_its_multiply():
    """MobileNetV3 / EfficientNet's squeeze-excite over a symbolic plane: the gate's conv on the
    pooled [1, C, 1, 1] is not fused into the multiply that broadcasts it over the map (it ran
    once per pixel; fuse_ops read a symbolic shape as no growth), as with fixed sizes. (A plane
    of symbolic height: one symbolic axis is what fuse_ops reads, and the test fails with the
    old reading so; the width symbolic too took 3.5 s to build where this takes 1.1 s.)"""
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c0"], ["p0"]),
        helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("HardSigmoid", ["c2"], ["s2"]),
        helper.make_node("Mul", ["c0", "s2"], ["y"]),
    ]
    inits = {"w0": _w(16, 3, 3, 3), "w1": _w(8, 16, 1, 1), "b1": _w(8), "w2": _w(16, 8, 1, 1),
             "b2": _w(16)}
    gm = _check(_model(nodes, [1, 3, "h", 24], inits), [(1, 3, 1, 24), (1, 3, 12, 24),
                                                        (1, 3, 17, 24)])
    for k in gm.plan["kernels"].values():
        assert not ("conv" in k["ops"] and "multiply" in k["ops"]), k
