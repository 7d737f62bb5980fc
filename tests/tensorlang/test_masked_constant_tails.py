"""Masked vector tails for loops of constant length (issue 18): a row of 13, 14 or 28 elements
runs as 16-lane vectors with the last one masked instead of a scalar loop (or 4-lane vectors),
where the stores go to memory; a register tile's tail (stores to a stack accumulator) keeps the
scalar loop. Against numpy, exactly (the ops move or add values, no reassociation)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ops

RNG = np.random.default_rng(18)


def _build(out, args):
    s = ops.default_schedule(out)
    return str(tl.lower(s, args)), tl.build(s, args)


def _add_relu(shape):
    x = tl.placeholder(shape, name="X")
    y = tl.placeholder(shape, name="Y")
    return ops.relu(ops.add(x, y)), [x, y]


def _rand(shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(2, 5, 14, 14), (1, 40, 13, 13), (1, 3, 28, 28),
                                   (1, 2, 9), (3, 7, 7), (1, 1, 17)])
def test_rows_with_constant_tails_match_numpy(shape):
    out, args = _add_relu(shape)
    _, f = _build(out, [*args, out])
    x, y = _rand(shape), _rand(shape)
    got = np.full(shape, np.nan, np.float32)
    f(x, y, got)
    np.testing.assert_array_equal(got, np.maximum(x + y, 0))


@pytest.mark.parametrize("shape", [(1, 4, 6, 14, 14), (1, 3, 5, 13, 13), (1, 4, 3, 28, 28),
                                   (1, 4, 5, 7, 7)])
def test_transposed_planes_with_constant_tails_match_numpy(shape):
    x = tl.placeholder(shape, name="X")
    out = ops.transpose(x, (0, 2, 1, 3, 4))  # ShuffleNet's channel shuffle
    _, f = _build(out, [x, out])
    a = _rand(shape)
    got = np.full([shape[i] for i in (0, 2, 1, 3, 4)], np.nan, np.float32)
    f(a, got)
    np.testing.assert_array_equal(got, a.transpose(0, 2, 1, 3, 4))


def test_a_14_wide_row_is_one_masked_vector():
    out, args = _add_relu((1, 8, 14, 14))
    text, _ = _build(out, [*args, out])
    assert re.search(r"relu\[(?!ramp)", text) is None  # no scalar store
    assert "if ramp(0, 1, 16) < broadcast(14, 16)" in text  # a store under the lanes' mask


def test_rows_of_eight_or_fewer_keep_their_loop():
    out, args = _add_relu((1, 8, 7, 7))
    text, _ = _build(out, [*args, out])
    assert "range(7)" in text and "ramp(" not in text  # LLVM's to vectorize or unroll


def test_register_tile_tail_and_its_copy_out_stay_scalar():
    """A 1x1 conv on a 7x7 plane (pixels path): 49 pixels are 3 vectors and a 1-pixel tail.
    The tail of its accumulator (a stack buffer) and of the copy out of it stay guarded
    scalar loops (measured faster than masked vectors there)."""
    x = tl.placeholder((1, 12, 7, 7), name="X")
    w = tl.placeholder((12, 4, 1, 1), name="W")
    out = ops.conv2d_nchw(x, w, groups=3)
    text, f = _build(out, [x, w, out])
    assert "if p.inner < 1:" in text and "select(" not in text
    a, b = _rand((1, 12, 7, 7)), _rand((12, 4, 1, 1))
    got = np.full((1, 12, 7, 7), np.nan, np.float32)
    f(a, b, got)
    ref = np.einsum("gocs,ngcs->ngos", b.reshape(3, 4, 4, 1), a.reshape(1, 3, 4, 49))
    np.testing.assert_allclose(got.reshape(1, 3, 4, 49), ref, rtol=1e-5, atol=1e-5)
