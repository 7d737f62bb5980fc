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
    with pytest.raises(ValueError, match=r"argument 'A' must have shape \(8 \* m,\), got "
                                         r"\(20,\): axis 0 is 20, expected 8 \* m"):
        scaled(np.zeros(20, "float32"), np.zeros(20, "float32"), np.zeros(5, "float32"))


def test_expression_source_is_python_with_floor_semantics():
    from tensorlang.runtime._dims import DimExpr

    e = DimExpr("-n // 3 + (m - 1) % 4 * 2", ("m", "n"))
    src = e.python_source({"n": "x", "m": "y"})
    for x in range(-7, 8):
        for y in range(-5, 6):
            assert eval(src, {"x": x, "y": y}) == e.evaluate({"n": x, "m": y})


# ------------------------------------------------------------------------ positional scalars


@pytest.fixture(scope="module")
def split_by_f():
    """B = A * 2 with B's loop split by a scalar f listed between the arrays: g(a, f, b)."""
    n, f = tl.var("n"), tl.var("f")
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = tl.create_schedule(B)
    s[B].split(B.op.axis[0], factor=f)
    return tl.build(s, [A, f, B], name="split_by_f")


def test_call_order_is_recorded(split_by_f):
    assert split_by_f.manifest["call_order"] == ["A", "f", "B"]


@pytest.mark.parametrize("size,factor", [(10, 1), (10, 3), (1, 4), (33, 8), (0, 2)])
def test_positional_scalar_matches_numpy_on_the_fast_path(split_by_f, size, factor):
    calls = _counting_general_path(split_by_f)
    a, b = _f32(size), np.zeros(size, "float32")
    split_by_f(a, factor, b)
    np.testing.assert_array_equal(b, a * 2)
    assert calls == []
    b2 = np.zeros(size, "float32")
    split_by_f(a, b2, f=factor)  # the keyword form still works
    np.testing.assert_array_equal(b2, a * 2)


def test_positional_scalar_refusals(split_by_f):
    a, b = _f32(10), np.zeros(10, "float32")
    split_by_f(a, np.int32(5), b)  # numpy ints are ints (the general path)
    np.testing.assert_array_equal(b, a * 2)
    with pytest.raises(TypeError, match=r"split_by_f\(\): f must be an int, got float"):
        split_by_f(a, 2.0, b)
    with pytest.raises(TypeError, match=r"split_by_f\(\): f must be an int, got bool"):
        split_by_f(a, True, b)
    with pytest.raises(TypeError, match=r"split_by_f\(\) got multiple values for 'f'"):
        split_by_f(a, 2, b, f=3)
    with pytest.raises(TypeError, match=r"split_by_f\(\) takes 3 arguments \(A: float32\[n\], "
                                        r"f: int, B: float32\[n\]\), or the 2 arrays with f by "
                                        r"keyword; got 4"):
        split_by_f(a, 2, b, b)
    with pytest.raises(TypeError, match=r"takes 3 arguments .* got 1"):
        split_by_f(a)
    with pytest.raises(TypeError, match="cannot determine f from the array shapes"):
        split_by_f(a, b)
    with pytest.raises(TypeError, match=r"argument 'B' must be a numpy.ndarray"):
        split_by_f(a, 2, 3)
    with pytest.raises(tl.runtime.KernelError, match="split factor f must be >= 1"):
        split_by_f(a, 0, b)
    # beyond int64, ctypes would pass 2**64 + 4 as 4 (a silently wrong value of a scalar)
    out_of_range = r"split_by_f\(\): f = -?\d+ is out of the kernel's int64 range"
    for huge in (2**64 + 4, -(2**63) - 1, np.uint64(2**64 - 1)):
        with pytest.raises(ValueError, match=out_of_range):
            split_by_f(a, huge, b)
        with pytest.raises(ValueError, match=out_of_range):
            split_by_f(a, b, f=huge)


def test_time_evaluator_takes_positional_scalars(split_by_f):
    a, b = _f32(64), np.zeros(64, "float32")
    result = split_by_f.time_evaluator(number=2, repeat=1)(a, 8, b)
    assert result.mean > 0
    np.testing.assert_array_equal(b, a * 2)


def test_manifest_without_call_order_takes_scalars_by_keyword(split_by_f, tmp_path):
    """An older manifest (no call_order) loads; its scalars stay keyword-only."""
    from tensorlang.runtime import Module

    manifest = split_by_f.manifest
    del manifest["call_order"]
    old = Module(split_by_f.object_code, manifest)
    a, b = _f32(10), np.zeros(10, "float32")
    old(a, b, f=3)
    np.testing.assert_array_equal(b, a * 2)
    with pytest.raises(TypeError, match=r"split_by_f\(\) takes 2 array arguments .* got 3"):
        old(a, 3, b)
    path = tmp_path / "g.tlm"
    split_by_f.save(path)
    loaded = tl.runtime.load_module(path)
    b3 = np.zeros(10, "float32")
    loaded(a, 4, b3)
    np.testing.assert_array_equal(b3, a * 2)


@pytest.mark.parametrize("order,why", [
    (["B", "f", "A"], "must list the arguments"),
    (["A", "f", "f", "B"], "duplicate names"),
    (["A", "g", "B"], "neither an argument nor in vars"),
    ("A f B", "must be a list of names"),
])
def test_malformed_call_order_is_refused(split_by_f, order, why):
    from tensorlang.runtime import Module

    manifest = split_by_f.manifest
    manifest["call_order"] = order
    with pytest.raises(ValueError, match=why):
        Module(split_by_f.object_code, manifest)
