"""Detection / segmentation exports with a dynamic height and width: what their size
arithmetic needs at import. Each hand-made graph reproduces one thing a real export did
(torchvision's LRASPP, HF YOLOS and MaskFormer), built once without
sizes and checked against onnxruntime at several sizes, odd ones included."""

import numpy as np
import pytest
from dynamic_planes import check_planes, plane_model
from tensorlang.graph import symbolic as S
from tensorlang.runtime.graph_module import InputError

from tensorlang import graph

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper

RNG = np.random.default_rng(5)
pytestmark = pytest.mark.filterwarnings("ignore:.*generic schedules:UserWarning")


def _model(nodes, inits, channels=1, opset=17, width="w"):
    return plane_model(nodes, inits, channels, opset, width)


def _check(model, planes, channels=1):
    return check_planes(model, planes, channels, RNG)


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_patch_embedding_and_a_grid_from_shape_ops():
    """A ViT's (YOLOS) 16x16 stride-16 patch conv gives max(h, 16) // 16 rows (a size below one
    window is refused at run time), its position embeddings are resized to h // 16 from Shape
    ops: equal wherever the model runs. The import takes h as h_over16 + 16 (solve_offset)
    and the runtime refuses h < 16 naming the input, as onnxruntime fails the conv."""
    i64 = lambda *v: np.array(v, dtype=np.int64)
    nodes = [helper.make_node("Conv", ["x", "wp"], ["p"], kernel_shape=[16, 16], strides=[16, 16]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "two", "four"], ["hw"]),
             helper.make_node("Div", ["hw", "sixteen"], ["grid"]),
             helper.make_node("Concat", ["nc", "grid"], ["size"], axis=0),
             helper.make_node("Resize", ["pos", "", "", "size"], ["pe"], mode="linear"),
             helper.make_node("Add", ["p", "pe"], ["y"])]
    inits = {"wp": _w(4, 1, 16, 16), "two": i64(2), "four": i64(4), "sixteen": i64(16),
             "nc": i64(1, 4), "pos": _w(1, 4, 3, 3)}
    m = _model(nodes, inits)
    h = S.shape_var("h_over16")
    assert graph.from_onnx(m).inputs[0].shape[2] == S.dim(h + 16)
    gm = _check(m, [(32, 48), (47, 16), (16, 33)])
    with pytest.raises(InputError, match="h_over16"):
        gm.run(x=np.zeros((1, 1, 15, 32), np.float32))


def test_swin_pad_to_whole_windows_by_mod_of_sizes():
    """A Swin pads its plane to whole windows by (4 - h % 4) % 4 rows computed from Shape ops
    (Mod of sizes, folded at import: the pads were refused as computed at run time)."""
    i64 = lambda *v: np.array(v, dtype=np.int64)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "two", "four"], ["hw"]),
             helper.make_node("Mod", ["hw", "k"], ["r"]),
             helper.make_node("Sub", ["k", "r"], ["kr"]),
             helper.make_node("Mod", ["kr", "k"], ["pad"]),
             helper.make_node("Concat", ["zeros", "pad"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["xp"]),
             helper.make_node("Relu", ["xp"], ["y"])]
    inits = {"two": i64(2), "four": i64(4), "k": i64(4), "zeros": i64(0, 0, 0, 0, 0, 0)}
    _check(_model(nodes, inits), [(8, 12), (9, 6), (1, 3)])


def test_shape_values_read_a_variable_from_an_axis_linear_in_it():
    """A UNet's skip makes the input's rows h_div2 * 2; a size used as data (cast to float)
    is then computed at run time from that axis (it was refused: no input had h_div2 alone
    as a dimension)."""
    i64 = lambda *v: np.array(v, dtype=np.int64)
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Resize", ["p", "", "scales"], ["u"], mode="nearest"),
             helper.make_node("Add", ["x", "u"], ["a"]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "two"], ["hs"], axis=0),
             helper.make_node("Cast", ["hs"], ["hf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["a", "hf"], ["y"])]
    inits = {"scales": np.array([1, 1, 2, 2], np.float32), "two": i64(2)}
    m = _model(nodes, inits)
    assert graph.from_onnx(m).inputs[0].shape[2] == S.dim(S.shape_var("h_div2") * 2)
    _check(m, [(8, 12), (2, 6), (14, 10)])


def test_strided_depthwise_conv_after_a_stride_4_conv():
    """MobileNetV3's 5x5 stride-2 depthwise conv + ReLU over (h + 3) // 4 rows (LRASPP): its
    output rows' canonical form is (h + 7) // 8 (nested floor divisions flattened, as dynamo
    writes them), where the kernel derives ((h + 3) // 4 + 1) // 2; the kernel's last row was
    wrong with the two forms until loop_partition stopped splitting the kernel-row loop
    (d637f9f). A constant in a floor division is kept in [0, k): (h - 1) // 4 + 1 is
    (h + 3) // 4. The width is static: the rows are what matters (the kernel-row loop's last
    rows), and this test fails without d637f9f's fix as it is; over a symbolic width too the
    depthwise kernel took 39 s of LLVM (2.2 MB of IR), 1 s here."""
    h = S.shape_var("h")
    assert str(S.dim((h - 1) // 4 + 1)) == "(h + 3) // 4"
    assert str(S.dim(((h + 3) // 4 - 1) // 2 + 1)) == "(h + 7) // 8"
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], kernel_shape=[3, 3], strides=[4, 4],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w1"], ["b"], kernel_shape=[1, 1]),
             helper.make_node("Conv", ["b", "w2"], ["c"], group=16, kernel_shape=[5, 5],
                              strides=[2, 2], pads=[2, 2, 2, 2]),
             helper.make_node("Relu", ["c"], ["y"])]
    inits = {"w0": _w(8, 1, 3, 3), "w1": _w(16, 8, 1, 1), "w2": _w(16, 1, 5, 5)}
    _check(_model(nodes, inits, width=40), [(64, 40), (49, 40), (8, 40)])
