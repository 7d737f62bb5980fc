"""The vision library ops of issue 18 as tensorlang ops (no graph): conv2d_transpose_nchw,
gather_nd / scatter_nd, space_to_depth, trilu, group_norm under the default and the naive
schedule against numpy references, run-time index errors, and bad arguments as ValueErrors
naming the op and the argument."""

from __future__ import annotations

import numpy as np
import pytest
from ops_helpers import check, rand, run

import tensorlang as tl
from tensorlang.ops import references as ref

O = tl.ops


@pytest.mark.parametrize("xs,ws,stride,pad,outp,dil,groups", [
    ((1, 4, 5, 6), (4, 3, 4, 4), 2, 1, 0, 1, 1),
    ((2, 6, 4, 3), (6, 2, 3, 2), (3, 2), (1, 0, 2, 1), (2, 1), (1, 2), 3),
    ((1, 3, 3, 3), (3, 2, 3, 3), 1, 0, 0, 1, 1),
])
def test_conv2d_transpose_matches_the_definition(xs, ws, stride, pad, outp, dil, groups):
    x, w = tl.placeholder(xs, name="x"), tl.placeholder(ws, name="w")
    a, b = rand(xs), rand(ws)
    y = O.conv2d_transpose_nchw(x, w, stride, pad, outp, dil, groups)
    st = stride if isinstance(stride, tuple) else (stride, stride)
    p = pad if isinstance(pad, tuple) else (pad,) * 4
    op_ = outp if isinstance(outp, tuple) else (outp, outp)
    d = dil if isinstance(dil, tuple) else (dil, dil)
    want = ref.conv_transpose(a, b, list(st), list(p), list(op_), list(d), groups)
    check(y, [x, w], [a, b], want, rtol=1e-4, atol=1e-4)


def test_gather_nd_index_out_of_range_is_a_kernel_error():
    x = tl.placeholder((3, 4), name="x")
    i = tl.placeholder((2, 2), dtype="int64", name="i")
    y = O.gather_nd(x, i)
    a = rand((3, 4))
    np.testing.assert_array_equal(run(y, [x, i], [a, np.array([[2, -1], [-3, 0]])]),
                                  a[[2, 0], [3, 0]])
    with pytest.raises(tl.runtime.KernelError, match="index out of bounds"):
        run(y, [x, i], [a, np.array([[0, 0], [0, 4]])])


@pytest.mark.parametrize("ds,ishp,axis", [((3, 4, 5), (3, 6, 5), 1), ((4, 37), (2, 37), 0),
                                            ((2, 3, 19), (1, 2, 40), -1)])
def test_gather_elements_matches_its_definition(ds, ishp, axis):
    x = tl.placeholder(ds, name="x")
    i = tl.placeholder(ishp, dtype="int64", name="i")
    a = rand(ds)
    idx = np.random.default_rng(3).integers(-ds[axis], ds[axis], ishp)
    want = ref.gather_elements(a, idx, axis % len(ds))
    if ishp[:axis % len(ds)] == ds[:axis % len(ds)]:  # torch.gather's own case, numpy's too
        np.testing.assert_array_equal(want, np.take_along_axis(a, idx % ds[axis], axis=axis))
    np.testing.assert_array_equal(run(O.gather_elements(x, i, axis), [x, i], [a, idx]), want)


def test_gather_elements_index_out_of_range_is_a_kernel_error():
    x = tl.placeholder((3, 4), name="x")
    i = tl.placeholder((3, 2), dtype="int64", name="i")
    y = O.gather_elements(x, i, 1)
    with pytest.raises(tl.runtime.KernelError, match="index out of bounds"):
        run(y, [x, i], [rand((3, 4)), np.array([[0, 1], [2, 3], [4, 0]])])
    with pytest.raises(tl.runtime.KernelError, match="index out of bounds"):
        run(y, [x, i], [rand((3, 4)), np.array([[0, 1], [-5, 3], [0, 0]])])


def test_scatter_nd_duplicates_with_reductions_combine_in_order():
    x = tl.placeholder((4, 2), name="x")
    i = tl.placeholder((3, 1), dtype="int64", name="i")
    u = tl.placeholder((3, 2), name="u")
    a, idx, upd = rand((4, 2)), np.array([[1], [-3], [3]]), rand((3, 2))
    for red in ("none", "add", "mul", "max", "min"):
        want = ref.scatter_nd(a, idx, upd, red)
        check(O.scatter_nd(x, i, u, red), [x, i, u], [a, idx, upd], want)


@pytest.mark.parametrize("build,match", [
    (lambda: O.conv2d_transpose_nchw(tl.placeholder((1, 3, 4, 4)),
                                     tl.placeholder((4, 2, 3, 3))), "w has 4 input channels"),
    (lambda: O.conv2d_transpose_nchw(tl.placeholder((1, 3, 2, 2)),
                                     tl.placeholder((3, 2, 3, 3)), padding=3),
     "the output would be empty"),
    (lambda: O.conv2d_transpose_nchw(tl.placeholder((1, 3, 4, 4)),
                                     tl.placeholder((3, 2, 3, 3)), padding=(1, 2, 3)),
     "padding must be an int"),
    (lambda: O.conv_transpose_weight(tl.placeholder((3, 2, 3, 3)), 2, 1, groups=2),
     "not divisible by groups=2"),
    (lambda: O.gather_nd(tl.placeholder((3, 4)), tl.placeholder((2, 3), dtype="int64")),
     "do not fit data"),
    (lambda: O.gather_nd(tl.placeholder((3, 4)), tl.placeholder((2, 1))),
     "indices must be an integer tensor"),
    (lambda: O.gather_nd(tl.placeholder((3, 4)), tl.placeholder((2, 1), dtype="int64"), 1),
     "batch axes of indices"),
    (lambda: O.gather_elements(tl.placeholder((3, 4)), tl.placeholder((3, 5), dtype="int64")),
     "do not fit data"),
    (lambda: O.gather_elements(tl.placeholder((3, 4)), tl.placeholder((3,), dtype="int64")),
     "do not fit data"),
    (lambda: O.gather_elements(tl.placeholder((3, 4)), tl.placeholder((3, 4), dtype="int64"),
                               2), "axis=2 is out of range"),
    (lambda: O.gather_elements(tl.placeholder((3, 4)), tl.placeholder((3, 4))),
     "indices must be an integer tensor"),
    (lambda: O.scatter_nd(tl.placeholder((3, 4)), tl.placeholder((2, 1), dtype="int64"),
                          tl.placeholder((2, 3))), "updates .* must have shape"),
    (lambda: O.scatter_nd(tl.placeholder((3, 4)), tl.placeholder((2, 1), dtype="int64"),
                          tl.placeholder((2, 4)), "sub"), "reduction must be one of"),
    (lambda: O.space_to_depth(tl.placeholder((1, 2, 5, 4)), 2), "divisible by blocksize=2"),
    (lambda: O.trilu(tl.placeholder((4,))), "rank >= 2"),
    (lambda: O.group_norm(tl.placeholder((1, 6, 4)), 4), "divisible by num_groups=4"),
    (lambda: O.group_norm(tl.placeholder((1, 6, 4)), 3, tl.placeholder((3,))),
     r"gamma must have shape \(6,\)"),
    (lambda: O.group_norm(tl.placeholder((1, 6, 4), dtype="int32"), 3), "must be a float"),
])
def test_bad_arguments_are_value_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()
