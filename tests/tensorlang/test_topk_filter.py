"""topk through blocks (issue 18: TopK on 1000-class outputs and 80 x 8400 detection heads):
the k best lie among the elements of the k blocks whose best elements are best, so a block
pass and two shorter selections replace one selection over the whole axis. Against numpy's
stable argsort (ONNX's order: ties by the lower index) on many ties, the dtype's extreme
values (equal to the worst value), infinities, the largest and the smallest, a first, middle
and last axis, block sizes that are and are not multiples of the vector, a second level of
blocks inside the first, and the rule that picks the block."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.ops import sort as SO

RNG = np.random.default_rng(23)


@pytest.fixture(autouse=True)
def computed_ways(monkeypatch):
    """These tests are about the ways stated as computes; the radix sort kernel, which the
    rule now takes for many of these shapes, has its own tests (test_topk_radix.py)."""
    monkeypatch.setattr(SO, "FORCE_RADIX", False)


def reference(a, k, axis, largest):
    # dense ranks of the values: negating them cannot overflow as -a would at the int minimum
    key = np.unique(a, return_inverse=True)[1].reshape(a.shape)
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(a, idx, axis), idx


def stage_tags(outs):
    return [st.op.tag for st in tl.create_schedule(outs).stages]


def run_topk(a, k, axis, largest):
    X = tl.placeholder(a.shape, dtype=a.dtype.name, name="X")
    v, i = tl.ops.topk(X, k, axis, largest)
    f = tl.build(tl.ops.default_schedule([v, i]), [X, v, i])
    shape = tuple(int(d.value) for d in v.shape)
    gv, gi = np.zeros(shape, a.dtype), np.zeros(shape, np.int64)
    f(a, gv, gi)
    return (gv, gi), stage_tags([v, i])


# (shape, axis, k, dtype, largest): every case takes the block path (checked)
CASES = [
    ((6, 4000), 1, 5, "float32", True),     # blocks of 16+ on the last axis: the lane pass
    ((6, 4000), 1, 5, "float32", False),
    ((3, 1000), 1, 1, "float32", False),    # k = 1
    ((2, 3000), 1, 12, "int32", True),      # integers with their extremes, 3 rows
    ((2, 990), 1, 7, "int64", False),       # blocks that 8 does not divide: one reduction each
    pytest.param((1200, 3), 0, 6, "float32", True,  # the first axis (the middle one is
                 marks=pytest.mark.slow),             # the same path, faster to build)
    ((2, 1500, 3), 1, 4, "float32", False),  # a middle axis
    pytest.param((2, 24000), 1, 3, "float32", True,  # blocks of blocks: the candidates
                 marks=pytest.mark.slow),              # filtered again (7 s to build)
]


@pytest.mark.parametrize("shape,axis,k,dtype,largest", CASES)
def test_block_path_matches_numpy(shape, axis, k, dtype, largest):
    if np.dtype(dtype).kind == "f":
        a = RNG.integers(-6, 6, shape).astype(dtype)  # many ties
        a.reshape(-1)[::11] = -np.inf
        a.reshape(-1)[::13] = np.inf
    else:
        a = RNG.integers(-6, 6, shape).astype(dtype)
        a.reshape(-1)[::5] = np.iinfo(dtype).min
        a.reshape(-1)[::7] = np.iinfo(dtype).max
    (gv, gi), tags = run_topk(a, k, axis, largest)
    assert "topk_block_best" in tags
    if shape == (2, 24000):  # the 3 x 96 candidates are filtered by blocks again
        assert tags.count("topk_block_best") >= 2
    ev, ei = reference(a, k, axis, largest)
    np.testing.assert_array_equal(gi, ei)
    np.testing.assert_array_equal(gv, ev)


def test_random_floats_and_the_vector_block_pass():
    a = RNG.standard_normal((80, 840)).astype(np.float32)
    (gv, gi), tags = run_topk(a, 5, 1, True)
    assert "topk_block_lanes" in tags
    ev, ei = reference(a, 5, 1, True)
    np.testing.assert_array_equal(gi, ei)
    np.testing.assert_array_equal(gv, ev)


def test_nan_rows_give_valid_indices():
    """NaN has no rank (ONNX leaves its order unspecified), but every index must be a distinct
    position of the row, and the finite values must still be the best finite ones."""
    a = RNG.standard_normal((4, 2000)).astype(np.float32)
    a[0] = np.nan
    a[1, ::3] = np.nan
    (gv, gi), _ = run_topk(a, 6, 1, True)
    assert ((gi >= 0) & (gi < 2000)).all()
    assert all(len(set(row)) == 6 for row in gi.tolist())
    np.testing.assert_array_equal(gv, np.take_along_axis(a, gi, 1))
    np.testing.assert_array_equal(gi[2:], reference(a[2:], 6, 1, True)[1])


def test_filter_block_rule():
    # a divisor of n near sqrt(n / k), multiple of 8 when that is cheaper
    assert SO._filter_block(8400, 5, rows=80) == 40
    assert SO._filter_block(1000, 1) == 40
    assert SO._filter_block(1000, 1000) == 0   # k = n: no block saves anything
    assert SO._filter_block(997, 3) == 0       # a prime axis: no block divides it
    assert SO._filter_block(40, 30) == 0
    for n, k in [(8400, 5), (1000, 5), (4000, 50), (24000, 3)]:
        b = SO._filter_block(n, k)
        assert b and n % b == 0 and n // b >= 2 * k and 2 * k * b <= n


# (shape, k, dtype, largest): full ranks (an element's rank counted over the whole last axis)
RANK_CASES = [
    ((8, 256), 256, "float32", True),   # k = n
    ((3, 1000), 1000, "int32", False),  # integers with their extremes, a vector tail of 8
    ((2, 250), 100, "float32", False),  # k < n
]


@pytest.mark.parametrize("shape,k,dtype,largest", RANK_CASES)
def test_full_ranks_match_numpy(shape, k, dtype, largest):
    a = RNG.integers(-6, 6, shape).astype(dtype)  # many ties
    if dtype == "float32":
        a.reshape(-1)[::11] = -np.inf
        a.reshape(-1)[::13] = 0.0
        a.reshape(-1)[::17] = -0.0  # equal to +0: ties by index
    else:
        a.reshape(-1)[::5] = np.iinfo(dtype).min
        a.reshape(-1)[::7] = np.iinfo(dtype).max
    (gv, gi), tags = run_topk(a, k, 1, largest)
    assert "topk_full_rank" in tags
    ev, ei = reference(a, k, 1, largest)
    np.testing.assert_array_equal(gi, ei)
    np.testing.assert_array_equal(gv, ev)


def test_full_ranks_stay_a_permutation_with_nan():
    a = RNG.standard_normal((3, 256)).astype(np.float32)
    a[0] = np.nan
    a[1, ::4] = np.nan
    (gv, gi), tags = run_topk(a, 256, 1, True)
    assert "topk_full_rank" in tags
    for row in gi:
        assert sorted(row.tolist()) == list(range(256))
    np.testing.assert_array_equal(gi[2], reference(a[2:], 256, 1, True)[1][0])
    finite = ~np.isnan(a[1])
    np.testing.assert_array_equal(gv[1][np.isfinite(gv[1])], np.sort(a[1][finite])[::-1])
