"""tl.ops.resize as a library op (issue 18): resizes over several axes of 3-D and 5-D data,
float64 and integer data, against onnx's reference implementation, under the default and the
naive schedule; bad arguments are ValueErrors naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
from ops_helpers import check, rand

import tensorlang as tl

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator


def onnx_reference(x, sizes, **attrs):
    """onnx's Resize reference for sizes (one per axis)."""
    vi = helper.make_tensor_value_info
    dtype = helper.np_dtype_to_tensor_dtype(x.dtype)
    roi = attrs.pop("roi", None)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], **attrs)
    inits = [numpy_helper.from_array(np.asarray(roi if roi else [], np.float32), "roi"),
             numpy_helper.from_array(np.asarray(sizes, np.int64), "sizes")]
    g = helper.make_graph([node], "g", [vi("x", dtype, list(x.shape))], [vi("y", dtype, None)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(m).run(None, {"x": x})[0]


@pytest.mark.parametrize("shape,sizes,attrs", [
    ((2, 3, 4, 5, 6), (2, 3, 7, 3, 9), {"mode": "linear",
                                        "coordinate_transformation_mode": "align_corners"}),
    ((3, 4, 5), (5, 2, 8), {"mode": "nearest", "nearest_mode": "floor",
                            "coordinate_transformation_mode": "asymmetric"}),
    ((1, 2, 6, 6), (1, 2, 4, 9), {"mode": "cubic", "exclude_outside": 1,
                                  "cubic_coeff_a": -0.5}),
    ((1, 2, 9, 8), (1, 2, 4, 3), {"mode": "linear", "antialias": 1}),
    ((1, 2, 5, 5), (1, 2, 4, 6), {"mode": "linear", "extrapolation_value": -1.0,
                                  "coordinate_transformation_mode": "tf_crop_and_resize",
                                  "roi": [0, 0, -0.3, 0.1, 1, 1, 1.2, 0.8]}),
])
def test_resize_matches_onnx_reference(shape, sizes, attrs):
    a = rand(shape, "float64")
    x = tl.placeholder(shape, dtype="float64", name="x")
    kw = {k: v for k, v in attrs.items() if k != "roi"}
    roi = None if "roi" not in attrs else [float(np.float32(v)) for v in attrs["roi"]]
    y = tl.ops.resize(x, sizes, roi=roi, **kw)  # roi as ONNX holds it: float32
    # onnx's reference is about 1e-6 off for cubic at non-integer scales (ours agrees with a
    # direct evaluation of Keys' kernel to 1e-16: test_resize_cubic_is_keys_kernel) and
    # computes tf_crop_and_resize's roi arithmetic in float32 (numpy's float32 scalars)
    tol = 5e-6 if attrs["mode"] == "cubic" or "roi" in attrs else 1e-9
    check(y, [x], [a], onnx_reference(a, sizes, **attrs), rtol=tol, atol=tol)


def test_resize_cubic_is_keys_kernel():
    """Cubic half_pixel resize of a row, 6 -> 9, against the definition: sum over the 4 taps
    floor(x) - 1 .. floor(x) + 2 (clamped to the row) of kernel(tap - x) * value."""
    a = rand((1, 6), "float64")
    x = tl.placeholder(a.shape, dtype="float64", name="x")
    coef = -0.75

    def kernel(d):
        d = abs(d)
        if d <= 1:
            return (coef + 2) * d ** 3 - (coef + 3) * d ** 2 + 1
        return coef * d ** 3 - 5 * coef * d ** 2 + 8 * coef * d - 4 * coef if d < 2 else 0.0

    want = []
    for o in range(9):
        src = (o + 0.5) / 1.5 - 0.5
        f = int(np.floor(src))
        want.append(sum(kernel(f + j - src) * a[0, min(max(f + j, 0), 5)] for j in range(-1, 3)))
    y = tl.ops.resize(x, (1, 9), mode="cubic")
    check(y, [x], [a], np.array([want]), rtol=1e-12, atol=1e-12)


def test_resize_integer_data_rounds_half_to_even():
    """The mean of 1 and 2 (a linear tap halfway) is 1.5 -> 2, of 2 and 3 is 2.5 -> 2."""
    a = np.array([[1, 2, 3]], np.uint8)
    x = tl.placeholder((1, 3), dtype="uint8", name="x")
    y = tl.ops.resize(x, (1, 5), mode="linear", coordinate_transformation_mode="align_corners")
    check(y, [x], [a], np.array([[1, 2, 2, 2, 3]], np.uint8))


def test_resize_of_unchanged_shape_is_a_copy():
    a = rand((2, 3))
    x = tl.placeholder((2, 3), name="x")
    check(tl.ops.resize(x, (2, 3), mode="cubic"), [x], [a], a)


@pytest.mark.parametrize("kwargs,match", [
    ({"sizes": (1, 2, 3), "mode": "area"}, "mode must be one of nearest, linear, cubic"),
    ({"sizes": (1, 2, 3), "nearest_mode": "up"}, "nearest_mode must be one of"),
    ({"sizes": (1, 2, 3), "coordinate_transformation_mode": "x"},
     "coordinate_transformation_mode must be one of"),
    ({"sizes": (1, 2)}, "sizes must give a positive length for each of the 3 axes"),
    ({"sizes": (1, 0, 3)}, "sizes must give a positive length"),
    ({"sizes": (1, 2, 3), "scales": (1, 2)}, "scales must give a positive scale for each"),
    ({"sizes": (1, 2, 3), "coordinate_transformation_mode": "tf_crop_and_resize"},
     "tf_crop_and_resize needs roi with 6 entries"),
])
def test_resize_bad_arguments(kwargs, match):
    x = tl.placeholder((1, 2, 3), name="x")
    with pytest.raises(ValueError, match=match):
        tl.ops.resize(x, **kwargs)


def test_resize_of_bool_data_is_refused():
    x = tl.placeholder((2, 3), dtype="bool", name="x")
    with pytest.raises(ValueError, match="bool data cannot be interpolated"):
        tl.ops.resize(x, (4, 6))
