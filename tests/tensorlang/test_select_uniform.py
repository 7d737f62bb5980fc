"""A vector select whose condition is one scalar for all lanes (issue 18: segformer's channel
concat) branches to the side it takes instead of masking a load of each side: outputs vs numpy,
including sides whose loads would be out of bounds if they ran."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ops
from tensorlang.ops import schedule as S

RNG = np.random.default_rng(18)


def _rand(shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("sizes,rest", [((4, 4, 4, 4), (8, 32)), ((3, 5, 2), (7, 13)),
                                        ((1, 16), (2, 48))])
def test_channel_concat_matches_numpy(sizes, rest):
    xs = [tl.placeholder((1, c, *rest), dtype="float32", name=f"x{k}")
          for k, c in enumerate(sizes)]
    y = ops.concat(xs, 1)
    s = tl.create_schedule(y)
    S.schedule_injective(s, y)
    assert "select(broadcast(" in str(tl.lower(s, xs + [y]))  # the uniform select is there
    f = tl.build(s, xs + [y], name="cat")
    a = [_rand((1, c, *rest)) for c in sizes]
    out = np.full((1, sum(sizes), *rest), np.nan, np.float32)
    f(*a, out)
    np.testing.assert_array_equal(out, np.concatenate(a, 1))


def test_row_padding_reads_only_the_rows_it_selects():
    # rows 0 and H + 1 select the constant: X[h - 1] there would read before or past X
    h, w = 6, 32
    x = tl.placeholder((h, w), dtype="float32", name="x")
    y = tl.compute((h + 2, w), lambda i, j: tl.select(
        i < 1, tl.const(0.0, "float32"),
        tl.select(i > h, tl.const(0.0, "float32"), x[i - 1, j])), name="pad")
    s = tl.create_schedule(y)
    _, ji = s[y].split(y.op.axis[1], factor=16)
    s[y].vectorize(ji)
    assert "select(broadcast(" in str(tl.lower(s, [x, y]))
    f = tl.build(s, [x, y], name="pad_rows")
    a = _rand((h, w))
    out = np.full((h + 2, w), np.nan, np.float32)
    f(a, out)
    np.testing.assert_array_equal(out, np.pad(a, ((1, 1), (0, 0))))
