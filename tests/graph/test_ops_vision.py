"""Issue 18, vision operators: Resize (and Upsample), ConvTranspose, GatherND / ScatterND,
SpaceToDepth / DepthToSpace, GroupNormalization, Trilu. Each against onnx's own backend node
cases (the reference outputs its test generators compute) and against onnxruntime on one-node
models over every mode and attribute; bad attributes and shapes are OnnxImportErrors naming the
node, the op and the opset."""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest
from graph_testing import ort_run

from tensorlang import graph

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper


def node_cases(module: str, op_type: str) -> list:
    """onnx's backend node cases of one operator: its test generator's models with inputs and
    reference outputs. The generator module (onnx.backend.test.case.node.<module>) runs its
    exports when its class is defined: (re)loaded here with the op as the target."""
    import sys

    import onnx.backend.test.case.node as cases

    saved, before = cases._TargetOpType, len(cases._NodeTestCases)
    names = dict(cases._existing_names)
    cases._TargetOpType = op_type
    cases._existing_names.clear()
    full = f"onnx.backend.test.case.node.{module}"
    try:
        if full in sys.modules:
            importlib.reload(sys.modules[full])
        else:
            importlib.import_module(full)
        found = cases._NodeTestCases[before:]
    finally:
        del cases._NodeTestCases[before:]
        cases._TargetOpType = saved
        cases._existing_names.clear()
        cases._existing_names.update(names)
    return [c for c in found if "_expanded" not in c.name]


def close(got, ref, rtol=1e-5, atol=0.0):
    """Relative to the reference's largest magnitude (elementwise relative error means nothing
    where the reference crosses zero)."""
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    if not np.issubdtype(ref.dtype, np.floating):
        diff = np.abs(got.astype(np.int64) - ref.astype(np.int64)).max(initial=0)
        assert diff <= atol, f"integers differ by up to {diff} (allowed {atol})"
        return
    scale = max(float(np.abs(ref).max(initial=0)), 1e-6)
    err = float(np.abs(got.astype(np.float64) - ref).max(initial=0))
    assert err <= rtol * scale + atol, f"max error {err:.3e} (scale {scale:.3e})"


# onnx's reference computes align_corners from the fractional output length a scale gives;
# the spec and onnxruntime from the output's (integer) length: these two cases follow them
ORT_OVER_REFERENCE = {"test_resize_downsample_scales_linear_align_corners",
                      "test_resize_downsample_scales_cubic_align_corners"}


def run_case(case, constant=(), rtol=1e-5):
    """Build a backend case and compare with its reference outputs; the inputs at positions
    ``constant`` (a Resize's scales, ...) become initializers: the case feeds them at run time,
    a model has them as constants."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    (inputs, outputs), = case.data_sets
    if any(0 in getattr(v, "shape", ()) for v in inputs):
        pytest.skip("empty tensors are not supported")
    gi = model.graph.input
    feeds = {}
    for k, (vi, value) in reversed(list(enumerate(zip(list(gi), inputs)))):
        if k in constant:
            model.graph.initializer.append(numpy_helper.from_array(value, vi.name))
            gi.remove(vi)
        else:
            feeds[vi.name] = value
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    if case.name in ORT_OVER_REFERENCE:
        ref = ort_run(model, feeds)
        outputs = [ref[o.name] for o in model.graph.output]
    for name, ref in zip([o.name for o in model.graph.output], outputs):
        close(got[name], ref, rtol)


def one_node(op, inputs, attrs=None, opset=19, consts=(), out_dtype=TensorProto.FLOAT,
             n_out=1):
    """A one-node model: ``inputs`` are (name, array) pairs fed at run time, ``consts``
    (name, array) initializers (an empty name: an omitted optional input)."""
    vi = helper.make_tensor_value_info
    ins = [vi(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)) for n, a in inputs]
    names = [n for n, _ in inputs] + [n for n, _ in consts]
    inits = [numpy_helper.from_array(a, n) for n, a in consts if n]
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    g = helper.make_graph([node], "g", ins, [vi(o, out_dtype, None) for o in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check_vs_ort(model, feeds, rtol=1e-5, atol=0.0):
    ref = ort_run(model, feeds)
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    for k in ref:
        close(got[k], ref[k], rtol, atol)
    return got


def rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------------- Resize


# the axes and keep_aspect_ratio_policy cases are also checked against onnxruntime below
RESIZE_CASES = [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if any(
    w in c.name for w in ("_axes_", "not_larger", "not_smaller")) else [])
    for c in node_cases("resize", "Resize")]


@pytest.mark.parametrize("case", RESIZE_CASES)
def test_resize_onnx_backend_cases(case):
    run_case(case, constant=(1, 2, 3))


@pytest.mark.parametrize("case", node_cases("upsample", "Upsample"), ids=lambda c: c.name)
def test_upsample_onnx_backend_cases(case):
    run_case(case, constant=(1,))


def _resize_model(x, opset, attrs, scales=None, sizes=None, roi=None):
    consts = [("roi", np.asarray(roi if roi is not None else [], np.float32))]
    consts.append(("scales", np.asarray(scales, np.float32)) if scales is not None
                  else ("", None))
    if sizes is not None:
        consts.append(("sizes", np.asarray(sizes, np.int64)))
    if opset >= 13 and roi is None:
        consts[0] = ("", None)
    return one_node("Resize", [("x", x)], attrs, opset, consts)


COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]


# every mode with half_pixel in the quick suite, the rest marked slow
MODE_SWEEP = [pytest.param(m, c, marks=[] if c == "half_pixel" else
                           [pytest.mark.slow])
              for m, c in itertools.product(["nearest", "linear", "cubic"],
                                            COORDS + ["half_pixel_symmetric"])]


@pytest.mark.parametrize("mode,ctm", MODE_SWEEP)
def test_resize_modes_vs_onnxruntime(mode, ctm):
    x = rand((1, 2, 5, 7))
    for scales in ([1, 1, 2.0, 1.5], [1, 1, 0.6, 0.5], [1, 1, 1.7, 0.8]):
        m = _resize_model(x, 19, {"mode": mode, "coordinate_transformation_mode": ctm},
                          scales=scales)
        check_vs_ort(m, {"x": x})
    for sizes in ([1, 2, 9, 4], [1, 2, 1, 3]):
        m = _resize_model(x, 19, {"mode": mode, "coordinate_transformation_mode": ctm},
                          sizes=sizes)
        check_vs_ort(m, {"x": x})


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
def test_resize_nearest_modes_vs_onnxruntime(nearest_mode):
    x = rand((1, 3, 6, 5), 1)
    for ctm in COORDS:
        m = _resize_model(x, 13, {"mode": "nearest", "nearest_mode": nearest_mode,
                                  "coordinate_transformation_mode": ctm}, sizes=[1, 3, 9, 12])
        check_vs_ort(m, {"x": x})


def test_resize_cubic_attributes_and_tf_crop_vs_onnxruntime():
    x = rand((2, 3, 8, 6), 2)
    for a, excl in ((-0.5, 1), (-0.75, 0), (-0.6, 1)):
        m = _resize_model(x, 13, {"mode": "cubic", "cubic_coeff_a": a, "exclude_outside": excl},
                          scales=[1, 1, 0.7, 1.6])
        check_vs_ort(m, {"x": x})
    for mode in ("nearest", "linear", "cubic"):
        m = _resize_model(x, 13, {"mode": mode, "coordinate_transformation_mode":
                                  "tf_crop_and_resize", "extrapolation_value": 3.5},
                          sizes=[2, 3, 5, 7], roi=[0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4])
        check_vs_ort(m, {"x": x})


def test_resize_opset18_axes_antialias_and_aspect_ratio_vs_onnxruntime():
    x = rand((1, 2, 12, 10), 3)
    for mode in ("linear", "cubic"):
        m = _resize_model(x, 18, {"mode": mode, "antialias": 1}, scales=[1, 1, 0.45, 0.6])
        check_vs_ort(m, {"x": x})
    m = one_node("Resize", [("x", x)], {"mode": "linear", "axes": [3, 2]}, 18,
                 [("", None), ("scales", np.asarray([1.5, 0.5], np.float32))])
    check_vs_ort(m, {"x": x})
    for policy in ("not_larger", "not_smaller"):
        m = one_node("Resize", [("x", x)], {"mode": "nearest", "axes": [2, 3],
                                            "keep_aspect_ratio_policy": policy}, 18,
                     [("", None), ("", None), ("sizes", np.asarray([7, 9], np.int64))])
        check_vs_ort(m, {"x": x})


def test_resize_old_opsets_and_upsample_vs_onnxruntime():
    x = rand((1, 2, 5, 7), 4)
    for mode in ("nearest", "linear"):
        for scales in ([1, 1, 0.6, 1.5], [1, 1, 2, 3]):
            s = np.asarray(scales, np.float32)
            check_vs_ort(one_node("Resize", [("x", x)], {"mode": mode}, 10, [("s", s)]),
                         {"x": x})
            if min(scales) < 1:  # Upsample only enlarges
                m = one_node("Upsample", [("x", x)], {"mode": mode}, 9, [("s", s)])
                with pytest.raises(graph.OnnxImportError, match=r"\(Upsample, opset 9\): "
                                   r"Upsample scales .* must all be >= 1"):
                    graph.from_onnx(m)
                continue
            check_vs_ort(one_node("Upsample", [("x", x)], {"mode": mode}, 9, [("s", s)]),
                         {"x": x})
            attrs = {"mode": mode, "scales": [float(v) for v in scales]}
            check_vs_ort(one_node("Upsample", [("x", x)], attrs, 7), {"x": x})
    # Upsample-1 (opset 6; onnxruntime has no kernel for it): integer scales repeat pixels
    m = one_node("Upsample", [("x", x)], {"height_scale": 2.0, "width_scale": 3.0}, 6)
    got = graph.build(graph.from_onnx(m)).run(x=x)["y0"]
    close(got, x.repeat(2, axis=2).repeat(3, axis=3))
    m = _resize_model(x, 11, {"mode": "nearest", "coordinate_transformation_mode":
                              "tf_half_pixel_for_nn"}, scales=[1, 1, 1.5, 2.5])
    check_vs_ort(m, {"x": x})


def test_resize_integer_data_vs_reference_and_onnxruntime():
    """Interpolated integers are rounded to nearest, ties to even, as onnx's reference does
    (an exact tie x.5 of the math comes out as x.5 plus or minus rounding noise, so either
    side; onnxruntime truncates its uint8 interpolation: one less at most; its uint8 cubic
    fails to run)."""
    from onnx.reference import ReferenceEvaluator

    x = np.random.default_rng(5).integers(0, 255, (1, 3, 6, 7)).astype(np.uint8)
    for mode in ("nearest", "linear", "cubic"):
        m = _resize_model(x, 13, {"mode": mode}, scales=[1, 1, 1.5, 2])
        m.graph.output[0].type.tensor_type.elem_type = TensorProto.UINT8
        got = graph.build(graph.from_onnx(m)).run(x=x)
        close(got["y0"], ReferenceEvaluator(m).run(None, {"x": x})[0],
              atol=0 if mode == "nearest" else 1)
        if mode != "cubic":
            close(got["y0"], ort_run(m, {"x": x})["y0"], atol=0 if mode == "nearest" else 1)


def test_resize_linear_exclude_outside_vs_reference():
    """exclude_outside with linear (the spec allows it; onnxruntime refuses it unless
    antialiasing): against onnx's reference."""
    from onnx.reference import ReferenceEvaluator

    x = rand((1, 2, 6, 7), 7)
    for scales in ([1, 1, 1.7, 0.6], [1, 1, 0.5, 2.0]):
        m = _resize_model(x, 19, {"mode": "linear", "exclude_outside": 1}, scales=scales)
        got = graph.build(graph.from_onnx(m)).run(x=x)["y0"]
        close(got, ReferenceEvaluator(m).run(None, {"x": x})[0], rtol=1e-5)


@pytest.mark.parametrize("attrs,ins,match", [
    ({"mode": "area"}, {"scales": [1, 1, 2, 2]}, "mode='area' is not one of"),
    ({"coordinate_transformation_mode": "half_pixel_symmetric"}, {"scales": [1, 1, 2, 2],
                                                                  "opset": 18},
     "coordinate_transformation_mode='half_pixel_symmetric' is not one of"),
    ({"nearest_mode": "up"}, {"scales": [1, 1, 2, 2]}, "nearest_mode='up'"),
    ({}, {"scales": [1, 1, 2]}, r"scales \[1.0, 1.0, 2.0\] must have one entry per resized axis"),
    ({}, {"scales": [1, 1, 2, 2], "sizes": [1, 2, 8, 8]}, "exactly one of scales and sizes"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, {"scales": [1, 1, 2, 2]},
     "tf_crop_and_resize needs roi with 8 entries"),
    ({"antialias": 1}, {"scales": [1, 1, 0.5, 0.5], "opset": 13}, "antialias needs opset 18"),
    ({"antialias": 1, "mode": "nearest"}, {"scales": [1, 1, 0.5, 0.5]},
     "antialias applies to linear and cubic, not nearest"),
    ({"axes": [2, 2]}, {"scales": [2, 2], "opset": 18}, "must be distinct axes"),
    ({}, {"scales": [1, 1, 0.1, 1]}, "give an empty output"),
])
def test_resize_bad_attributes_are_refused(attrs, ins, match):
    x = rand((1, 2, 4, 4))
    opset = ins.get("opset", 19)
    consts = [("", None), ("scales", np.asarray(ins["scales"], np.float32))]
    if "sizes" in ins:
        consts.append(("sizes", np.asarray(ins["sizes"], np.int64)))
    m = one_node("Resize", [("x", x)], dict(attrs), opset, consts)
    m.graph.node[0].name = "rs"
    with pytest.raises(graph.OnnxImportError, match=rf"'rs' \(Resize, opset {opset}\).*{match}"):
        graph.from_onnx(m)


# ----------------------------------------------------------------------------- ConvTranspose


@pytest.mark.parametrize("case", node_cases("convtranspose", "ConvTranspose"),
                         ids=lambda c: c.name)
def test_conv_transpose_onnx_backend_cases(case):
    run_case(case, constant=(1, 2), rtol=1e-5)


CT_CASES = [  # (x shape, w shape, attributes)
    ((1, 4, 5, 6), (4, 3, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 4, 5, 6), (4, 2, 3, 3), {"strides": [2, 3], "pads": [0, 1, 2, 0],
                                  "output_padding": [1, 2]}),
    ((1, 6, 5, 4), (6, 2, 3, 2), {"strides": [2, 2], "dilations": [2, 3], "group": 3}),
    ((1, 6, 4, 4), (6, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 6}),
    ((1, 3, 4, 4), (3, 2, 2, 2), {"strides": [3, 3], "pads": [3, 4, 5, 3]}),
    ((1, 3, 5, 5), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [12, 11]}),
    ((1, 3, 5, 5), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 5, 5), (3, 2, 4, 3), {"strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 5, 5), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "VALID"}),
    ((2, 3, 7), (3, 4, 3), {"strides": [3], "pads": [1, 2], "dilations": [2]}),
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 0, 1, 0, 1]}),
]


CT_QUICK = (0, 2, 5, 6, 9)  # the others are marked slow


@pytest.mark.parametrize("xs,ws,attrs", [
    pytest.param(*c, id=str(i), marks=[] if i in CT_QUICK else [pytest.mark.slow])
    for i, c in enumerate(CT_CASES)])
def test_conv_transpose_vs_onnxruntime(xs, ws, attrs):
    x, w = rand(xs, 1), rand(ws, 2)
    b = rand((ws[1] * attrs.get("group", 1),), 3)
    check_vs_ort(one_node("ConvTranspose", [("x", x)], attrs, 11, [("w", w), ("b", b)]),
                 {"x": x}, rtol=1e-5)
    check_vs_ort(one_node("ConvTranspose", [("x", x)], attrs, 22, [("w", w)]), {"x": x},
                 rtol=1e-5)


def test_conv_transpose_with_run_time_weight_and_bias():
    x, w, b = rand((1, 4, 5, 6), 1), rand((4, 3, 4, 4), 2), rand((3,), 3)
    m = one_node("ConvTranspose", [("x", x), ("w", w), ("b", b)],
                 {"strides": [2, 2], "pads": [1, 1, 1, 1]}, 11)
    check_vs_ort(m, {"x": x, "w": w, "b": b}, rtol=1e-5)


@pytest.mark.parametrize("attrs,ws,match", [
    ({"output_padding": [2, 0], "strides": [2, 2]}, (3, 2, 3, 3),
     "output_padding .* must be smaller than the stride or the dilation"),
    ({"auto_pad": "SAME"}, (3, 2, 3, 3), "auto_pad='SAME' is not one of"),
    ({"kernel_shape": [2, 2]}, (3, 2, 3, 3), r"kernel_shape \[2, 2\] does not match"),
    ({"group": 2}, (3, 2, 3, 3), "input has 3 channels"),
    ({"pads": [3, 3, 3, 3]}, (3, 2, 3, 3), "the output would be empty"),
    ({}, (4, 2, 3, 3), "input has 3 channels, weight .* expects 4"),
])
def test_conv_transpose_bad_attributes_are_refused(attrs, ws, match):
    x = rand((1, 3, 2, 2))
    m = one_node("ConvTranspose", [("x", x)], attrs, 11, [("w", rand(ws))])
    m.graph.node[0].name = "ct"
    with pytest.raises(graph.OnnxImportError, match=rf"'ct' \(ConvTranspose, opset 11\).*{match}"):
        graph.from_onnx(m)


# ----------------------------------------------------------------------------- GatherND, ScatterND


@pytest.mark.parametrize("case", node_cases("gathernd", "GatherND") +
                         node_cases("gatherelements", "GatherElements") +
                         node_cases("scatternd", "ScatterND"), ids=lambda c: c.name)
def test_gather_scatter_nd_onnx_backend_cases(case):
    run_case(case)


def _ints(shape, lo, hi, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(np.int64)


@pytest.mark.parametrize("ds,ishp,b,lo,hi", [
    ((3, 4, 5), (2, 3, 2), 0, -3, 3),
    ((3, 4, 5), (6, 3), 0, -3, 3),
    ((2, 4, 5), (2, 3, 1), 1, -4, 4),
    ((2, 3, 4, 5), (2, 3, 7, 1), 2, 0, 4),
])
def test_gather_nd_vs_onnxruntime(ds, ishp, b, lo, hi):
    x, idx = rand(ds), _ints(ishp, lo, hi)
    check_vs_ort(one_node("GatherND", [("x", x), ("i", idx)], {"batch_dims": b}, 13),
                 {"x": x, "i": idx})


@pytest.mark.parametrize("ds,ishp,axis,opset", [
    ((3, 4, 5), (3, 6, 5), 1, 13),
    ((2, 128), (2, 128), 1, 11),  # RoBERTa's position ids: one index per token
    ((2, 3, 19), (1, 2, 40), -1, 13),  # smaller on the other axes, longer on the gathered one
    ((5, 4), (7, 4), 0, 13),
])
def test_gather_elements_vs_onnxruntime(ds, ishp, axis, opset):
    x, idx = rand(ds), _ints(ishp, -ds[axis], ds[axis])
    check_vs_ort(one_node("GatherElements", [("x", x), ("i", idx)], {"axis": axis}, opset),
                 {"x": x, "i": idx})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_vs_onnxruntime(reduction):
    x = rand((5, 4, 3))
    cases = [(_ints((3, 1), -5, 5, 1), rand((3, 4, 3), 2)),
             (np.array([[0, 1], [4, 3], [0, 1], [-1, -1]], np.int64), rand((4, 3), 3)),
             (_ints((2, 2, 3), 0, 3, 4), rand((2, 2), 5))]
    for idx, upd in cases:
        if reduction == "none":  # ONNX leaves duplicates undefined for none: distinct ones
            idx = np.unique(idx.reshape(-1, idx.shape[-1]) % [5, 4, 3][:idx.shape[-1]], axis=0)
            upd = rand(idx.shape[:-1] + x.shape[idx.shape[-1]:], 6)
        m = one_node("ScatterND", [("x", x), ("i", idx), ("u", upd)],
                     {"reduction": reduction}, 18)
        check_vs_ort(m, {"x": x, "i": idx, "u": upd})


def test_out_of_range_indices_raise_kernel_errors():
    """A run-time index outside [-n, n) fails the kernel (never a read or write out of
    bounds), for GatherND and ScatterND, in every position of the index tuple, and for
    GatherElements."""
    from tensorlang.runtime import KernelError

    x = rand((3, 4, 5))
    gm = graph.build(graph.from_onnx(one_node(
        "GatherND", [("x", x), ("i", _ints((2, 2), 0, 3))], {}, 13)))
    for bad in ([[0, 4], [1, 1]], [[-4, 0], [0, 0]], [[1, 1], [3, 0]]):
        with pytest.raises(KernelError, match="index out of bounds"):
            gm.run(x=x, i=np.array(bad, np.int64))
    ok = np.array([[-3, -4], [2, 3]], np.int64)
    close(gm.run(x=x, i=ok)["y0"], x[[0, 2], [0, 3]])
    gm = graph.build(graph.from_onnx(one_node(
        "GatherElements", [("x", x), ("i", _ints((3, 2, 5), 0, 4))], {"axis": 1}, 13)))
    for bad in (4, -5):
        idx = _ints((3, 2, 5), 0, 4)
        idx[2, 1, 3] = bad
        with pytest.raises(KernelError, match="index out of bounds"):
            gm.run(x=x, i=idx)
    for red in ("none", "add"):
        gm = graph.build(graph.from_onnx(one_node(
            "ScatterND", [("x", x), ("i", _ints((2, 2), 0, 3)), ("u", rand((2, 5)))],
            {"reduction": red}, 18)))
        for bad in ([[0, 4], [1, 1]], [[-4, 0], [0, 0]], [[1, 1], [3, 0]]):
            with pytest.raises(KernelError, match="index out of bounds"):
                gm.run(x=x, i=np.array(bad, np.int64), u=rand((2, 5)))


@pytest.mark.parametrize("op,attrs,shapes,match,opset", [
    ("GatherElements", {"axis": 1}, [(3, 4), (4, 2)], "do not fit data", 13),
    ("GatherElements", {"axis": 2}, [(3, 4), (3, 2)], "do not fit data", 13),
    ("GatherElements", {}, [(3, 4), (3,)], "do not fit data", 13),
    ("GatherND", {"batch_dims": 1}, [(3, 4), (2, 1)], "do not fit data", 13),
    ("GatherND", {}, [(3, 4), (2, 3)], "do not fit data", 13),
    ("GatherND", {"batch_dims": 1}, [(3, 4), (3, 1)], "batch_dims needs opset 12", 11),
    ("ScatterND", {"reduction": "max"}, [(3, 4), (2, 1), (2, 4)], "reduction='max' is not one",
     16),
    ("ScatterND", {"reduction": "add"}, [(3, 4), (2, 1), (2, 4)], "reduction='add' is not one",
     13),
    ("ScatterND", {}, [(3, 4), (2, 1), (2, 3)], "updates .* must have shape", 13),
])
def test_gather_scatter_nd_bad_inputs_are_refused(op, attrs, shapes, match, opset):
    ins = [("x", rand(shapes[0])), ("i", _ints(shapes[1], 0, 2))]
    ins += [("u", rand(shapes[2]))] if len(shapes) > 2 else []
    m = one_node(op, ins, attrs, opset)
    m.graph.node[0].name = "nd"
    with pytest.raises(graph.OnnxImportError, match=rf"'nd' \({op}, opset {opset}\).*{match}"):
        graph.from_onnx(m)


# ----------------------------------------------------------------------------- SpaceToDepth,
# DepthToSpace, GroupNormalization, Trilu


@pytest.mark.parametrize("case", node_cases("spacetodepth", "SpaceToDepth") +
                         node_cases("depthtospace", "DepthToSpace") +
                         node_cases("groupnormalization", "GroupNormalization") +
                         node_cases("trilu", "Trilu"), ids=lambda c: c.name)
def test_small_vision_ops_onnx_backend_cases(case):
    run_case(case, constant=(1,) if case.name.startswith("test_tril") else (1, 2),
             rtol=1e-5)


@pytest.mark.parametrize("opset", [1, 13])
def test_space_to_depth_and_depth_to_space_vs_onnxruntime(opset):
    x = rand((2, 3, 6, 8))
    check_vs_ort(one_node("SpaceToDepth", [("x", x)], {"blocksize": 2}, max(opset, 6)),
                 {"x": x})
    y = rand((2, 18, 2, 3))
    for mode in ("DCR", "CRD"):
        if mode == "CRD" and opset < 11:
            continue
        attrs = {"blocksize": 3, "mode": mode} if opset >= 11 else {"blocksize": 3}
        check_vs_ort(one_node("DepthToSpace", [("x", y)], attrs, max(opset, 6)), {"x": y})
    # SpaceToDepth then DepthToSpace in the same mode is the identity (SpaceToDepth's mode is an
    # attribute from opset 28 on)
    for mode, s2d_opset in (("DCR", 13), ("DCR", 28), ("CRD", 28)):
        attrs = {"blocksize": 2} if s2d_opset < 28 else {"blocksize": 2, "mode": mode}
        m = one_node("SpaceToDepth", [("x", x)], attrs, s2d_opset)
        s2d = graph.build(graph.from_onnx(m)).run(x=x)["y0"]
        m = one_node("DepthToSpace", [("x", s2d)], {"blocksize": 2, "mode": mode}, 13)
        close(graph.build(graph.from_onnx(m)).run(x=s2d)["y0"], x)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_vs_onnxruntime(opset):
    """Scale and bias per group at opset 18, per channel at 21; constant or fed at run time."""
    x = rand((2, 6, 5, 4)) * 3 + 1
    for g, eps in ((3, 1e-5), (1, 1e-3), (6, 1e-5)):
        n = g if opset == 18 else 6
        scale, bias = rand((n,), 1), rand((n,), 2)
        m = one_node("GroupNormalization", [("x", x)], {"num_groups": g, "epsilon": eps},
                     opset, [("s", scale), ("b", bias)])
        check_vs_ort(m, {"x": x}, rtol=1e-5)
    n = 3 if opset == 18 else 6
    feeds = {"x": x, "s": rand((n,), 1), "b": rand((n,), 2)}
    m = one_node("GroupNormalization", list(feeds.items()), {"num_groups": 3}, opset)
    check_vs_ort(m, feeds, rtol=1e-5)
    # a group per channel (wav2vec2's [N, C, T]) runs as instance_norm
    x3 = rand((1, 8, 50)) * 2 - 1
    m = one_node("GroupNormalization", [("x", x3)], {"num_groups": 8}, opset,
                 [("s", rand((8,), 1)), ("b", rand((8,), 2))])
    assert [n.op for n in graph.from_onnx(m).nodes] == ["instance_norm"]
    check_vs_ort(m, {"x": x3}, rtol=1e-5)


def test_group_normalization_float16_stash_type():
    x = (rand((1, 4, 8, 8)) * 4 + 2).astype(np.float16)
    s, b = rand((4,), 1).astype(np.float16), rand((4,), 2).astype(np.float16)
    m = one_node("GroupNormalization", [("x", x)], {"num_groups": 2, "stash_type": 1}, 21,
                 [("s", s), ("b", b)], out_dtype=TensorProto.FLOAT16)
    check_vs_ort(m, {"x": x}, rtol=2e-3)


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_vs_onnxruntime(upper):
    x = rand((2, 5, 7))
    for k in (None, 0, 2, -3, 9, -9):
        consts = [] if k is None else [("k", np.array(k, np.int64))]
        check_vs_ort(one_node("Trilu", [("x", x)], {"upper": upper}, 14, consts), {"x": x})
    xi = np.arange(12, dtype=np.int32).reshape(3, 4)
    m = one_node("Trilu", [("x", xi)], {"upper": upper}, 14, [("k", np.array(1, np.int64))],
                 out_dtype=TensorProto.INT32)
    check_vs_ort(m, {"x": xi})


@pytest.mark.parametrize("op,attrs,shape,consts,match,opset", [
    ("SpaceToDepth", {"blocksize": 4}, (1, 2, 6, 8), [], "blocksize=4 must be >= 1 and divide",
     13),
    ("Trilu", {"upper": 2}, (3, 4), [], "upper=2 must be 0 or 1", 14),
    ("Trilu", {}, (3,), [], r"must have rank >= 2", 14),
    ("SpaceToDepth", {"blocksize": 2, "mode": "RDC"}, (1, 2, 4, 4), [],
     "mode must be 'DCR' or 'CRD', got 'RDC'", 28),
    ("Trilu", {}, (3, 4), [("k", np.array([1, 2], np.int64))], "k must be one integer", 14),
    ("GroupNormalization", {"num_groups": 4}, (1, 6, 2, 2),
     [("s", np.ones(4, np.float32)), ("b", np.ones(4, np.float32))], "num_groups=4 must", 18),
    ("GroupNormalization", {"num_groups": 2}, (1, 6, 2, 2),
     [("s", np.ones(2, np.float32)), ("b", np.ones(2, np.float32))],
     r"scale \[2\] must have shape \[6\] \(one per channel at opset 21\)", 21),
    ("GroupNormalization", {"num_groups": 2, "stash_type": 10}, (1, 6, 2, 2),
     [("s", np.ones(6, np.float32)), ("b", np.ones(6, np.float32))], "stash_type=10", 21),
])
def test_small_vision_ops_bad_inputs_are_refused(op, attrs, shape, consts, match, opset):
    m = one_node(op, [("x", rand(shape))], attrs, opset, consts)
    m.graph.node[0].name = "v"
    with pytest.raises(graph.OnnxImportError, match=rf"'v' \({op}, opset {opset}\).*{match}"):
        graph.from_onnx(m)


def test_trilu_k_computed_at_run_time_is_refused():
    x = rand((3, 4))
    m = one_node("Trilu", [("x", x), ("k", np.array(1, np.int64))], {}, 14)
    with pytest.raises(graph.OnnxImportError, match="Trilu k must be known at compile time"):
        graph.from_onnx(m)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_with_constant_indices_vs_onnxruntime(reduction):
    """Indices known at build time take the planned path (each output element reads its own
    updates): rows, single elements with duplicates, and an exported slice assignment
    y[..., 0:2] = u (every element of the slice one index tuple)."""
    x = rand((5, 4, 3))
    dup = np.array([[0, 1], [4, 3], [0, 1], [-1, -1]], np.int64)
    cases = [(np.array([[3], [0], [-1]], np.int64), (3, 4, 3)),
             (dup[[0, 1, 3]] if reduction == "none" else dup, None)]
    for idx, ushape in cases:
        upd = rand(ushape or idx.shape[:-1] + x.shape[idx.shape[-1]:], 2)
        m = one_node("ScatterND", [("x", x), ("u", upd)], {"reduction": reduction}, 18,
                     [("i", idx)])
        m.graph.node[0].input[:] = ["x", "i", "u"]
        check_vs_ort(m, {"x": x, "u": upd})
    d = rand((1, 3, 20, 20, 8))
    grid = np.stack(np.meshgrid(*[np.arange(n) for n in (1, 3, 20, 20, 2)], indexing="ij"), -1)
    upd = rand(grid.shape[:-1], 3)
    m = one_node("ScatterND", [("x", d), ("u", upd)], {"reduction": reduction}, 18,
                 [("i", grid.astype(np.int64))])
    m.graph.node[0].input[:] = ["x", "i", "u"]
    check_vs_ort(m, {"x": d, "u": upd})


def test_scatter_nd_constant_index_out_of_range_is_refused_at_import():
    x = rand((3, 4))
    m = one_node("ScatterND", [("x", x), ("u", rand((2, 4)))], {}, 13,
                 [("i", np.array([[1], [3]], np.int64))])
    m.graph.node[0].input[:] = ["x", "i", "u"]
    m.graph.node[0].name = "sc"
    with pytest.raises(graph.OnnxImportError, match=r"'sc' \(ScatterND, opset 13\): scatter_nd: "
                       r"update 1 has index \[3\], outside the data's \[3\]"):
        graph.from_onnx(m)


def test_scatter_nd_paths_by_indices():
    """Run-time indices: the general scatter_nd; constant ones forming a regular grid (a
    strided slice assignment): scatter_nd_boxed; other constant ones: scatter_nd_planned.
    Each matches onnxruntime."""
    x = rand((6, 5, 4))
    grid = np.stack(np.meshgrid(np.arange(1, 6, 2), np.arange(-4, 0), indexing="ij"), -1)
    for idx, path in ((grid, "scatter_nd_boxed"), (grid[::-1], "scatter_nd_planned"),
                      (np.array([[2], [3], [4]]), "scatter_nd_boxed")):
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        upd = rand(idx.shape[:-1] + x.shape[idx.shape[-1]:], 1)
        m = one_node("ScatterND", [("x", x), ("u", upd)], {"reduction": "add"}, 18,
                     [("i", idx)])
        m.graph.node[0].input[:] = ["x", "i", "u"]
        assert path in [n.op for n in graph.from_onnx(m).nodes]
        check_vs_ort(m, {"x": x, "u": upd})
    m = one_node("ScatterND", [("x", x), ("i", grid.astype(np.int64)), ("u", rand((3, 4, 4)))],
                 {}, 13)
    assert "scatter_nd" in [n.op for n in graph.from_onnx(m).nodes]
