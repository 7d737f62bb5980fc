"""The default schedule of a transpose that swaps the innermost axis (alone or with a fused
elementwise tail): square tiles of the two swapped axes, read as contiguous input rows and
turned around in registers (issue 18). Differential against numpy, exactly for the moves."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ops
from tensorlang.ops import schedule as sched

RNG = np.random.default_rng(1818)


def _build(out, args):
    s = ops.default_schedule(out)
    return str(tl.lower(s, args)), tl.build(s, args)


def _run(shape, perm, tail=None):
    x = tl.placeholder(shape, name="X")
    out = ops.transpose(x, perm)
    if tail is not None:
        out = tail(out)
    text, f = _build(out, [x, out])
    a = RNG.standard_normal(shape).astype(np.float32)
    got = np.full([shape[p] for p in perm], np.nan, np.float32)
    f(a, got)
    return text, a, got


@pytest.mark.parametrize("shape,perm", [
    ((1, 64, 128), (0, 2, 1)),
    ((1, 64, 197), (0, 2, 1)),        # ragged row: 12 tiles + a tail of 5
    ((1, 49, 197), (0, 2, 1)),        # both sides ragged
    ((3, 20, 37), (0, 2, 1)),
    ((2, 3, 20, 37), (0, 3, 1, 2)),   # the input's row goes to a middle axis
    ((2, 12, 19, 8), (0, 1, 3, 2)),   # attention's k^T with a row of 8 (a masked 16-lane tile)
    ((5, 7, 4), (2, 0, 1)),
    ((1500, 6), (1, 0)),
    ((2, 6, 5, 4), (3, 2, 1, 0)),
    ((1, 40, 37, 1), (0, 2, 1, 3)),   # a unit innermost axis: the row is the one before it
    ((1, 33, 1, 20), (0, 3, 2, 1)),
    ((3, 1, 20, 1), (2, 3, 0, 1)),    # one long axis: nothing to turn around
])
def test_transposes_match_numpy(shape, perm):
    _, a, got = _run(shape, perm)
    np.testing.assert_array_equal(got, a.transpose(perm))


@pytest.mark.parametrize("shape,perm", [((1, 128, 96), (0, 2, 1)), ((1, 40, 197), (0, 2, 1)),
                                        ((2, 3, 20, 37), (0, 3, 1, 2))])
def test_transposes_with_a_fused_tail_match_numpy(shape, perm):
    bias = RNG.standard_normal(shape[perm[-1]]).astype(np.float32)
    x = tl.placeholder(shape, name="X")
    b = tl.placeholder(bias.shape, name="B")
    out = ops.relu(ops.add(ops.transpose(x, perm), b))
    text, f = _build(out, [x, b, out])
    assert "shuffle(" in text  # the tail reads the tile turned around in registers
    a = RNG.standard_normal(shape).astype(np.float32)
    got = np.full([shape[p] for p in perm], np.nan, np.float32)
    f(a, bias, got)
    np.testing.assert_array_equal(got, np.maximum(a.transpose(perm) + bias, 0))


def test_a_transpose_with_gelu_matches_numpy():
    from math import erf

    text, a, got = _run((1, 48, 70), (0, 2, 1), ops.gelu)
    t = a.transpose(0, 2, 1).astype(np.float64)
    exp = 0.5 * t * (1 + np.vectorize(erf)(t / np.sqrt(2)))
    np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)
    assert "shuffle(" in text


def test_the_transpose_is_blocked_and_reads_input_rows():
    """16 x 16 tiles: the vector along the output row, the other tile axis unrolled into 16
    contiguous input rows and shuffles; no strided vector load in the guard-free tiles (the
    generic schedule's vector reads the input 128 floats apart, a gather per vector)."""
    x = tl.placeholder((1, 64, 128), name="X")
    out = ops.transpose(x, (0, 2, 1))
    text, _ = _build(out, [x, out])
    assert "for i1.outer in range(8):\n    for i2.outer in range(4):" in text
    assert "X[ramp(i2.outer * 2048 + i1.outer * 16 + 1920, 1, 16)]" in text
    assert "shuffle(" in text and ", 128, 16)]" not in text


def test_a_transpose_past_a_unit_innermost_axis_is_tiled():
    """tf2onnx's [N, L, C, 1] -> [N, C, L, 1] before a conv: the row is L, not the unit axis
    (which kept the generic schedule: a strided copy of one-element rows, 8x slower)."""
    x = tl.placeholder((1, 64, 128, 1), name="X")
    out = ops.transpose(x, (0, 2, 1, 3))
    s = ops.default_schedule(out)
    assert sched._transposed_axis(s, s[out]) == (1, 2)
    assert "shuffle(" in str(tl.lower(s, [x, out]))


def test_a_big_transpose_runs_its_outer_tiles_on_the_thread_pool():
    x = tl.placeholder((1, 64, 4096), name="X")
    out = ops.gelu(ops.transpose(x, (0, 2, 1)))
    text, _ = _build(out, [x, out])
    assert "parallel for i0.i1.outer.fused in range(256):" in text
    assert "shuffle(" in text


def test_a_transpose_that_keeps_the_row_innermost_keeps_the_generic_schedule():
    """[1, 197, 12, 64] -> [1, 12, 197, 64] copies whole rows: nothing to turn around."""
    x = tl.placeholder((1, 197, 12, 64), name="X")
    out = ops.transpose(x, (0, 2, 1, 3))
    s = ops.default_schedule(out)
    assert sched._transposed_axis(s, s[out]) is None
    text = str(tl.lower(s, [x, out]))
    assert "shuffle(" not in text


def test_a_symbolic_batch_and_other_element_types_match_numpy():
    x = tl.placeholder((tl.var("B"), 20, 37), name="X")
    out = ops.transpose(x, (0, 2, 1))
    text, f = _build(out, [x, out])
    assert "shuffle(" in text
    a = RNG.standard_normal((3, 20, 37)).astype(np.float32)
    got = np.full((3, 37, 20), np.nan, np.float32)
    f(a, got)
    np.testing.assert_array_equal(got, a.transpose(0, 2, 1))
    for dtype in ("int8", "float16", "int32"):
        x = tl.placeholder((2, 33, 40), name="X", dtype=dtype)
        out = ops.transpose(x, (0, 2, 1))
        _, f = _build(out, [x, out])
        a = RNG.integers(-100, 100, (2, 33, 40)).astype(dtype)
        got = np.zeros((2, 40, 33), dtype)
        f(a, got)
        np.testing.assert_array_equal(got, a.transpose(0, 2, 1))
