"""The generated fast call path of kernels whose argument shapes are expressions of shape
variables ('n - 2', '8 * m', 'n // 2 + 1'): it takes every valid call itself, hands every
invalid one to the general path (which raises the exact error), and computes what numpy does."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl


def _counting_general_path(mod):
    """Route the module's general path through a counter, before the fast path is generated
    (the fast path captures the general path when it is made)."""
    calls = []
    general = mod._checked_call

    def counted(args, var_values):
        calls.append(len(args))
        return general(args, var_values)

    mod._checked_call = counted
    mod._fast_call = mod._first_fast_call
    return calls


def _error_of(fn, *args):
    try:
        fn(*args)
    except (TypeError, ValueError) as e:
        return type(e), str(e)
    return None


@pytest.fixture(scope="module")
def shifted():
    """B[i] = A[i + 2] * 2 over A (n,), B (n - 2,), and a (n // 2 + 1,) output C."""
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n - 2,), lambda i: A[i + 2] * 2.0, name="B")
    C = tl.compute((n // 2 + 1,), lambda i: A[i * 0] + i.astype("float32"), name="C")
    return tl.build(tl.create_schedule([B, C]), [A, B, C], name="shifted")


@pytest.fixture(scope="module")
def scaled():
    """Y (8 * m,) = A * 2 over A (8 * m,): m is solved from a dimension; Z (3 * m - 1,)."""
    m = tl.var("m")
    A = tl.placeholder((8 * m,), name="A")
    Y = tl.compute((8 * m,), lambda i: A[i] * 2.0, name="Y")
    Z = tl.compute((3 * m - 1,), lambda i: A[i] + 1.0, name="Z")
    return tl.build(tl.create_schedule([Y, Z]), [A, Y, Z], name="scaled")


def _f32(*shape):
    return np.random.default_rng(sum(shape) + 1).standard_normal(shape).astype("float32")


def test_affine_fast_path_matches_numpy_without_the_general_path(shifted):
    calls = _counting_general_path(shifted)
    for n in (2, 3, 4, 9, 16):
        a = _f32(n)
        b, c = np.zeros(n - 2, "float32"), np.zeros(n // 2 + 1, "float32")
        shifted(a, b, c)
        np.testing.assert_array_equal(b, a[2:] * 2)
        np.testing.assert_array_equal(c, a[0] + np.arange(n // 2 + 1, dtype="float32"))
    assert calls == []
    assert shifted._fast_call.__name__ == "fast_call"


def test_solved_variable_fast_path_matches_numpy(scaled):
    calls = _counting_general_path(scaled)
    for m in (1, 2, 5):
        a = _f32(8 * m)
        y, z = np.zeros(8 * m, "float32"), np.zeros(3 * m - 1, "float32")
        scaled(a, y, z)
        np.testing.assert_array_equal(y, a * 2)
        np.testing.assert_array_equal(z, a[: 3 * m - 1] + 1)
    assert calls == []


@pytest.mark.parametrize("shapes", [
    ((10,), (7,), (6,)),    # n - 2 wrong
    ((10,), (8,), (5,)),    # n // 2 + 1 wrong
    ((1,), (0,), (1,)),     # n - 2 = -1: no array has that
    ((10, 1), (8,), (6,)),  # rank
])
def test_affine_refusals_match_the_general_path(shifted, shapes):
    calls = _counting_general_path(shifted)
    args = [np.zeros(s, "float32") for s in shapes]
    fast = _error_of(shifted, *args)
    general = _error_of(lambda *a: shifted.prepare_args(*a), *args)
    assert fast is not None and fast == general
    assert calls == [3]


@pytest.mark.parametrize("sizes", [(20, 20, 5), (16, 24, 5), (16, 16, 4), (0, 0, 0)])
def test_solved_refusals_match_the_general_path(scaled, sizes):
    """20 is no 8 * m; Y disagrees with A's m; Z is not 3 * m - 1; m = 0 gives Z -1."""
    calls = _counting_general_path(scaled)
    args = [np.zeros(s, "float32") for s in sizes]
    fast = _error_of(scaled, *args)
    general = _error_of(lambda *a: scaled.prepare_args(*a), *args)
    assert fast is not None and fast == general
    assert calls == [3]


def test_scaled_refusal_message(scaled):
    with pytest.raises(ValueError, match=r"argument 'A' must have shape \(8 \* m\), got "
                                         r"\(20,\): axis 0 is 20, expected 8 \* m"):
        scaled(np.zeros(20, "float32"), np.zeros(20, "float32"), np.zeros(5, "float32"))


def test_expression_source_is_python_with_floor_semantics():
    from tensorlang.runtime._dims import DimExpr

    e = DimExpr("-n // 3 + (m - 1) % 4 * 2", ("m", "n"))
    src = e.python_source({"n": "x", "m": "y"})
    for x in range(-7, 8):
        for y in range(-5, 6):
            assert eval(src, {"x": x, "y": y}) == e.evaluate({"n": x, "m": y})
