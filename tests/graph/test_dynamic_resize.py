"""Resize and Upsample over symbolic lengths (a batch, a height, a width): constant scales give
output lengths floor(n * scale) as expressions, sizes computed from Shape ops (resize to another
tensor's size: the FPN / UNet / SegFormer decoder pattern) are the other tensor's lengths, and
the kernel computes output / input as onnxruntime does. Each model is built once without sizes
and checked against onnxruntime at several sizes (lengths of 1 included); what cannot be exact at
every size is refused at import naming the node."""

import numpy as np
import pytest
from tensorlang.runtime.module import KernelError

from tensorlang import graph

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(11)


def _model(nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _check(model, feeds_list):
    """One build without sizes, against onnxruntime at every feed (every output)."""
    gm = graph.build(graph.from_onnx(model))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for feeds in feeds_list:
        got = gm.run(**feeds)
        for name, want in zip(names, sess.run(None, feeds)):
            assert got[name].shape == want.shape, (name, want.shape)
            np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} at {feeds['x'].shape}")
    return gm


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _resize(x, y, scales=None, sizes=None, **attrs):
    ins = [x, "", scales or "", sizes or ""]
    return helper.make_node("Resize", ins[:3] if sizes is None else ins, [y], **attrs)


def test_resize_by_constant_scales_over_symbolic_batch_height_and_width():
    """PaddleOCR's detector upsamples 2x (nearest, asymmetric, floor); a decoder 2x bilinear;
    cubic downscaling by 0.5 gives h // 2 (at least 1: the sizes start at 2)."""
    nodes = [_resize("x", "near", "up", mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor"),
             _resize("x", "bilinear", "up", mode="linear"),
             _resize("x", "cubic", "down", mode="cubic",
                     coordinate_transformation_mode="align_corners")]
    inits = {"up": np.float32([1, 1, 2, 2]), "down": np.float32([1, 1, 0.5, 0.5])}
    m = _model(nodes, [("x", ["n", 4, "h", "w"])], ["near", "bilinear", "cubic"], inits)
    _check(m, [{"x": _x(*s)} for s in [(1, 4, 2, 3), (2, 4, 5, 8), (1, 4, 16, 9)]])


def _shape_part(src, lo, hi, out):
    return helper.make_node("Slice", [f"shape_{src}", lo, hi], [out])


def test_resize_to_the_size_of_another_tensor():
    """sizes = Concat(Shape(a)[:2], Shape(b)[2:]), added to b (an FPN's top-down path), in
    every coordinate mode; a plane of 1 row (pytorch_half_pixel and align_corners treat an
    output length of 1 apart); and Shape(b) / 2 (half the input's size)."""
    modes = [("linear", "half_pixel"), ("cubic", "pytorch_half_pixel")]
    nodes = [helper.make_node("Shape", ["x"], ["shape_x"]),
             helper.make_node("Shape", ["b"], ["shape_b"]),
             _shape_part("x", "zero", "two", "nc"), _shape_part("b", "two", "four", "hw"),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Div", ["shape_b", "halves"], ["half"]),
             _resize("b", "half_b", sizes="half")]
    for k, (mode, ctm) in enumerate(modes):
        nodes += [_resize("x", f"r{k}", sizes="sizes", mode=mode,
                          coordinate_transformation_mode=ctm),
                  helper.make_node("Add", [f"r{k}", "b"], [f"y{k}"])]
    inits = {"zero": np.int64([0]), "two": np.int64([2]), "four": np.int64([4]),
             "halves": np.int64([1, 1, 2, 2])}
    m = _model(nodes, [("x", ["n", 8, "h", "w"]), ("b", ["n", 8, "H", "W"])],
               [f"y{k}" for k in range(len(modes))] + ["half_b"], inits)
    sizes = [(1, 3, 4, 6, 8), (2, 5, 5, 9, 17), (1, 1, 1, 2, 3), (1, 8, 6, 2, 2)]
    gm = _check(m, [{"x": _x(n, 8, h, w), "b": _x(n, 8, hh, ww)} for n, h, w, hh, ww in sizes])
    # Shape(b) / 2 of a plane of 1 row has no row: refused before the kernel runs
    with pytest.raises(KernelError, match=r"output length H // 2 of axis 2 \(input length H\) "
                                          r"is less than 1"):
        gm.run(x=_x(1, 8, 2, 2), b=_x(1, 8, 1, 4))


def test_upsample_over_a_symbolic_plane():
    m = _model([helper.make_node("Upsample", ["x", "s"], ["y"], mode="linear")],
               [("x", [1, 2, "h", "w"])], ["y"], {"s": np.float32([1, 1, 2, 4])}, opset=9)
    _check(m, [{"x": _x(1, 2, h, w)} for h, w in [(1, 1), (3, 7), (12, 5)]])


def test_resize_of_symbolic_lengths_refuses_what_is_not_exact():
    """floor(n * 0.7) of onnxruntime's float32 product is no integer formula over every n; an
    aspect-ratio policy over symbolic sizes neither: import errors naming the node."""
    x = [("x", [1, 2, "h", "w"])]
    m = _model([_resize("x", "y", "s")], x, ["y"], {"s": np.float32([1, 1, 0.7, 2])})
    with pytest.raises(graph.OnnxImportError,
                       match=r"node 'Resize_0' \(Resize, opset 13\): scale 0\.7 over the symbolic length "
                             r"h: .*p / 2\*\*k"):
        graph.from_onnx(m)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             _resize("x", "y", sizes="s", keep_aspect_ratio_policy="not_larger")]
    with pytest.raises(graph.OnnxImportError,
                       match=r"\(Resize, opset 18\): keep_aspect_ratio_policy='not_larger' over "
                             r"symbolic lengths"):
        graph.from_onnx(_model(nodes, x, ["y"], {}, opset=18))
