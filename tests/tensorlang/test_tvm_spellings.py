"""TVM spellings that tutorial scripts use (the TVM-tutorial bug hunt): float extents, constant
shapes used as ints, multi-output cache_write, cache scopes, TVM's math and integer helpers,
bitwise operators, chained indexing and TVM's NDArray calls. Results are checked against
numpy."""

from __future__ import annotations

import numpy as np
import pytest
from tl_testing import assert_close, rand

import tensorlang as tl
from tensorlang import te


def _run(outs, ins, arrays, sched=None):
    s = tl.create_schedule([o.op for o in outs])
    if sched:
        sched(s)
    f = tl.build(s, ins + outs)
    res = [np.zeros([int(d) for d in o.shape], o.dtype) for o in outs]
    f(*arrays, *res)
    return res


# ----------------------------------------------------------------------------- shapes


def test_whole_float_extents_are_ints_and_fractional_ones_are_refused():
    N, bn = 64, 32
    B = tl.placeholder((16, N), name="B")
    packed = tl.compute((N / bn, 16, bn), lambda x, k, y: B[k, x * bn + y], name="packedB")
    assert [int(d) for d in packed.shape] == [2, 16, 32]
    b = rand((16, N))
    (got,) = _run([packed], [B], [b])
    assert_close(got, b.reshape(16, 2, 32).transpose(1, 0, 2))
    with pytest.raises(TypeError, match=r"shape\[0\] must be a whole number, got float 2.5"):
        tl.compute((5 / 2,), lambda i: B[0, i])


def test_constant_shapes_are_ints():
    A = tl.placeholder((5,), name="A")
    n = A.shape[0]
    assert int(n) == 5 and list(range(n)) == [0, 1, 2, 3, 4]
    assert np.zeros(A.shape).shape == (5,)
    doubled = n * 2
    assert isinstance(doubled, tl.ir.expr.Const) and int(doubled) == 10
    assert int(n - 7) == -2 and int(n // 2) == 2 and int(-7 % n) == 3 and int(3 + n) == 8
    with pytest.raises(TypeError, match="a float32 constant is not an integer"):
        int(tl.const(2.5, "float32"))
    with pytest.raises(ValueError, match="division by zero"):
        n // 0
    B = tl.compute((A.shape[0] * 2,), lambda i: A[i // 2], name="B")
    assert int(B.shape[0]) == 10

    def split(s):
        s[B].split(B.op.axis[0], factor=A.shape[0])

    a = rand((5,))
    (got,) = _run([B], [A], [a], split)
    assert_close(got, np.repeat(a, 2))


@pytest.mark.parametrize("factor", [np.int64(4), np.int32(3), tl.const(4)])
def test_split_takes_numpy_and_constant_factors(factor):
    A = tl.placeholder((7, 11), name="A")
    B = tl.compute((7, 11), lambda i, j: A[i, j] * 3 + 1, name="B")
    a = rand((7, 11))
    (got,) = _run([B], [A], [a], lambda s: s[B].split(B.op.axis[1], factor=factor))
    assert_close(got, a * 3 + 1)


def test_split_refuses_a_float_constant_factor():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i], name="B")
    s = tl.create_schedule(B.op)
    with pytest.raises(TypeError, match="factor/nparts must be an int"):
        s[B].split(B.op.axis[0], factor=tl.const(2.0, "float32"))


# ----------------------------------------------------------------------------- cache_write


def _two_outputs():
    A = tl.placeholder((7, 11), name="A")
    B1, B2 = tl.compute((7, 11), lambda i, j: (A[i, j] + 1, A[i, j] * 2), name="B")
    return A, B1, B2


def test_cache_write_of_a_multi_output_compute():
    a = rand((7, 11))
    for pick in ("list", "one"):
        A, B1, B2 = _two_outputs()
        s = tl.create_schedule(B1.op)
        if pick == "list":
            c2, c1 = s.cache_write([B2, B1], "local")
            assert c2.op is c1.op and c2.value_index == 1
        else:
            c1 = s.cache_write(B1, "local")
        assert c1.op.num_outputs == 2 and c1.op.name == "B.local"
        o, _ = s[B1].split(B1.op.axis[0], factor=2)
        s[c1.op].compute_at(s[B1], o)
        f = tl.build(s, [A, B1, B2])
        b1, b2 = np.zeros_like(a), np.zeros_like(a)
        f(a, b1, b2)
        assert_close(b1, a + 1)
        assert_close(b2, a * 2)


def test_cache_write_of_an_argmax_tuple_reduction():
    A = tl.placeholder((6, 9), name="A")
    k = tl.reduce_axis((0, 9), "k")

    def combine(x, y):
        take = (x[1] > y[1]) | ((x[1] == y[1]) & (x[0] < y[0]))
        return tl.select(take, x[0], y[0]), tl.select(take, x[1], y[1])

    argmax = tl.comm_reducer(combine, lambda t0, t1: (tl.const(-1, t0), tl.min_value(t1)))
    idx, val = tl.compute((6,), lambda i: argmax((k, A[i, k]), axis=k), name="R")
    s = tl.create_schedule(idx.op)
    s.cache_write([idx, val], "local")
    f = tl.build(s, [A, idx, val])
    a = rand((6, 9))
    got_i, got_v = np.zeros(6, "int64"), np.zeros(6, "float32")
    f(a, got_i, got_v)
    np.testing.assert_array_equal(got_i, a.argmax(1))
    assert_close(got_v, a.max(1))


def test_cache_scopes_and_lists_are_checked():
    A, B1, _ = _two_outputs()
    C = tl.compute((7, 11), lambda i, j: A[i, j] - 1, name="C")
    s = tl.create_schedule([B1.op, C.op])
    with pytest.raises(ValueError, match="unknown scope 'nonsense'; the CPU target has the "
                                         "scopes 'local', 'global'"):
        s.cache_write(C, "nonsense")
    with pytest.raises(ValueError, match="scope 'shared' is GPU memory"):
        s.cache_read(A, "shared", [C])
    with pytest.raises(tl.ScheduleError, match="must be outputs of one compute"):
        s.cache_write([B1, C], "local")
    with pytest.raises(TypeError, match="expected a tensor or a list of tensors, got str"):
        s.cache_write(["B"], "local")


# ----------------------------------------------------------------------------- math


_X = np.array([-7.5, -3.25, -1.0, -0.5, 0.0, 0.5, 1.5, 2.5, 3.0, 6.75, 100.0, np.nan],
              dtype="float32")
_Y = np.array([2.0, -1.5, 3.0, 0.75, 1.0, -2.0, 0.5, 2.0, -4.0, 2.5, 7.0, 1.0],
              dtype="float32")

_FLOAT_CASES = {
    "sin": (lambda x, y: te.sin(x), lambda x, y: np.sin(x)),
    "cos": (lambda x, y: te.cos(x), lambda x, y: np.cos(x)),
    "atan": (lambda x, y: te.atan(x), lambda x, y: np.arctan(x)),
    "tan": (lambda x, y: te.tan(x), lambda x, y: np.tan(x)),
    "asin": (lambda x, y: te.asin(x / 8), lambda x, y: np.arcsin(x / 8)),
    "acos": (lambda x, y: te.acos(x / 8), lambda x, y: np.arccos(x / 8)),
    "sinh": (lambda x, y: te.sinh(x), lambda x, y: np.sinh(x)),
    "cosh": (lambda x, y: te.cosh(x), lambda x, y: np.cosh(x)),
    "asinh": (lambda x, y: te.asinh(x), lambda x, y: np.arcsinh(x)),
    "acosh": (lambda x, y: te.acosh(x), lambda x, y: np.arccosh(x)),
    "atanh": (lambda x, y: te.atanh(x / 8), lambda x, y: np.arctanh(x / 8)),
    "log10": (lambda x, y: te.log10(te.abs(x) + 1), lambda x, y: np.log10(np.abs(x) + 1)),
    "power": (lambda x, y: te.power(te.abs(x), y), lambda x, y: np.power(np.abs(x), y)),
    "fmod": (lambda x, y: te.fmod(x, y), np.fmod),
    "nearbyint": (lambda x, y: te.nearbyint(x), lambda x, y: np.rint(x)),
    "fma": (lambda x, y: tl.fma(x, y, x), lambda x, y: x * y + x),
    "floordiv": (lambda x, y: te.floordiv(x, y), lambda x, y: np.floor(x / y)),
    "floormod": (lambda x, y: te.floormod(x, y), np.mod),
    "truncdiv": (lambda x, y: te.truncdiv(x, y), lambda x, y: np.trunc(x / y)),
    "truncmod": (lambda x, y: te.truncmod(x, y), np.fmod),
    "div": (lambda x, y: te.div(x, y), lambda x, y: x / y),
    "isnan": (lambda x, y: te.isnan(x).astype("float32"),
              lambda x, y: np.isnan(x).astype("float32")),
}


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("name", sorted(_FLOAT_CASES))
def test_float_math_matches_numpy(name, vector):
    fn, ref = _FLOAT_CASES[name]
    A, B = tl.placeholder((12,), name="A"), tl.placeholder((12,), name="B")
    C = tl.compute((12,), lambda i: fn(A[i], B[i]), name="C")
    s = tl.create_schedule(C.op)
    if vector:
        s[C].vectorize(s[C].split(C.op.axis[0], factor=4)[1])
    ins = [A, B] if B in C.op.input_tensors else [A]
    f = tl.build(s, ins + [C])
    out = np.zeros(12, "float32")
    f(*[_X, _Y][:len(ins)], out)
    with np.errstate(all="ignore"):
        want = ref(_X, _Y)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7)


_I = np.array([-9, -8, -7, -3, -1, 0, 1, 3, 7, 8, 9, 2**30], dtype="int32")
_J = np.array([4, -3, 2, 5, -1, 3, 0, -2, 3, 1, -4, 7], dtype="int32")

_INT_CASES = {
    "&": (lambda x, y: x & y, np.bitwise_and),
    "|": (lambda x, y: x | y, np.bitwise_or),
    "^": (lambda x, y: x ^ y, np.bitwise_xor),
    "~": (lambda x, y: ~x, lambda x, y: np.invert(x)),
    "<<": (lambda x, y: x << (y & 7), lambda x, y: np.left_shift(x, y & 7)),
    ">>": (lambda x, y: x >> (y & 7), lambda x, y: np.right_shift(x, y & 7)),
    "shift_out": (lambda x, y: te.shift_left(x, 40) + te.shift_right(x, 33),
                  lambda x, y: np.where(x < 0, -1, 0).astype("int32")),
    "1 << x": (lambda x, y: 1 << (y & 3), lambda x, y: np.left_shift(1, y & 3)),
    "popcount": (lambda x, y: te.popcount(x), lambda x, y: np.array(
        [(int(v) & 0xFFFFFFFF).bit_count() for v in x], dtype="int32")),
    "floordiv": (lambda x, y: te.indexdiv(x, y), lambda x, y: _safe(np.floor_divide, x, y)),
    "floormod": (lambda x, y: te.indexmod(x, y), lambda x, y: _safe(np.mod, x, y)),
    "truncdiv": (lambda x, y: te.truncdiv(x, y), lambda x, y: _safe(
        lambda a, b: np.trunc(a / b).astype("int32"), x, y)),
    "truncmod": (lambda x, y: te.truncmod(x, y), lambda x, y: _safe(np.fmod, x, y)),
    "div": (lambda x, y: te.div(x, y), lambda x, y: _safe(
        lambda a, b: np.trunc(a / b).astype("int32"), x, y)),
    "fmod": (lambda x, y: te.fmod(x, y), lambda x, y: _safe(np.fmod, x, y)),
    "fma": (lambda x, y: tl.fma(x, y, 1), lambda x, y: x * y + 1),
    "isnan": (lambda x, y: (te.isnan(x) | (x == 0)).astype("int32"),
              lambda x, y: (x == 0).astype("int32")),
}


def _safe(op, x, y):
    """numpy's result where y != 0, and 0 where it is (the kernels' integer division by 0)."""
    with np.errstate(all="ignore"):
        out = op(x, np.where(y == 0, 1, y))
    return np.where(y == 0, 0, out).astype("int32")


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("name", sorted(_INT_CASES))
def test_integer_operators_match_numpy(name, vector):
    fn, ref = _INT_CASES[name]
    A = tl.placeholder((12,), name="A", dtype="int32")
    B = tl.placeholder((12,), name="B", dtype="int32")
    C = tl.compute((12,), lambda i: fn(A[i], B[i]).astype("int32"), name="C")
    s = tl.create_schedule(C.op)
    if vector:
        s[C].vectorize(s[C].split(C.op.axis[0], factor=4)[1])
    ins = [(t, v) for t, v in ((A, _I), (B, _J)) if t in C.op.input_tensors]
    f = tl.build(s, [t for t, _ in ins] + [C])
    out = np.zeros(12, "int32")
    f(*[v for _, v in ins], out)
    np.testing.assert_array_equal(out, ref(_I, _J))


def test_logical_operators_stay_logical_on_conditions():
    A = tl.placeholder((8,), name="A", dtype="int32")
    conds = tl.compute((8,), lambda i: tl.select(((A[i] > 0) & (A[i] < 5)) | ~(A[i] > -2)
                                                 ^ (A[i] == 3), 1, 0), name="C")
    a = np.arange(-3, 5, dtype="int32")
    (got,) = _run([conds], [A], [a])
    want = ((a > 0) & (a < 5)) | (~(a > -2) ^ (a == 3))
    np.testing.assert_array_equal(got, want.astype(got.dtype))


def test_bitwise_and_math_refusals():
    A = tl.placeholder((4,), name="A")
    N = tl.placeholder((4,), name="N", dtype="int32")
    with pytest.raises(TypeError, match="bitwise_and needs integer operands, got float32"):
        A[0] & A[1]
    with pytest.raises(TypeError, match="shift_left needs integer operands"):
        A[0] << 1
    with pytest.raises(TypeError, match="~ needs a boolean or integer expression"):
        ~A[0]
    with pytest.raises(TypeError, match="logical operators need boolean operands"):
        (N[0] > 0) & N[1]
    with pytest.raises(TypeError, match="tl.sin needs a float argument"):
        te.sin(N[0])
    with pytest.raises(TypeError, match="tl.popcount needs an integer argument"):
        te.popcount(A[0])
    # a float te.var is a scalar parameter (tests/tensorlang/test_float_scalar_params.py);
    # a size is an integer
    with pytest.raises(TypeError, match=r"size_var alpha: dtype must be an integer type \(a size"):
        te.size_var("alpha", dtype="float32")


def test_tvm_tir_reducers_and_binary_helpers():
    # tvm.tir.max / min / sum are te's reducers (binary max / min too), ceildiv rounds up
    A = tl.placeholder((12,), name="A", dtype="int32")
    k = te.reduce_axis((0, 12), name="k")
    B = tl.compute((12,), lambda i: tl.tir.ceildiv(A[i], 4) + tl.tir.max(A[i], 0) * 100
                   + tl.tir.Min(A[i], 2) * 10000 + (A[i] << 1), name="B")
    S = tl.compute((1,), lambda i: tl.tir.sum(A[k], axis=k), name="S")
    M = tl.compute((1,), lambda i: tl.tir.max(A[k], axis=k, where=tl.tir.likely(k < 11)),
                   name="M")
    a = np.arange(-6, 6, dtype="int32")
    got_b, got_s, got_m = _run([B, S, M], [A], [a])
    want = -(-a // 4) + np.maximum(a, 0) * 100 + np.minimum(a, 2) * 10000 + (a << 1)
    np.testing.assert_array_equal(got_b, want)
    assert (got_s[0], got_m[0]) == (a.sum(), a[:11].max())
    assert tl.tir.ceildiv(7, 2) == 4 and tl.tir.shift_left is te.shift_left


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_tvm_isinf_and_isfinite(dtype):
    A = tl.placeholder((8,), name="A", dtype=dtype)
    B = tl.compute((8,), lambda i: tl.tir.isinf(A[i]), name="B")
    C = tl.compute((8,), lambda i: tl.tir.if_then_else(tl.tir.isfinite(A[i]), A[i],
                                                       tl.const(0, dtype)), name="C")
    a = np.array([1, np.inf, -np.inf, np.nan, 0, -2, 6e4, -0.0], dtype)
    got_b, got_c = _run([B, C], [A], [a], lambda s: s[C].vectorize(C.op.axis[0]))
    np.testing.assert_array_equal(got_b, np.isinf(a))
    np.testing.assert_array_equal(got_c, np.where(np.isfinite(a), a, 0))
    n = tl.var("n")
    assert tl.tir.isinf(n).value is False and tl.tir.isfinite(n).value is True


def test_tvm_atan2_hypot_copysign_log1p():
    A, B = tl.placeholder((12,), name="A"), tl.placeholder((12,), name="B")
    C = tl.compute((12,), lambda i: tl.tir.atan2(A[i], B[i]) + tl.tir.hypot(A[i], B[i])
                   + tl.tir.copysign(A[i], B[i]) + tl.tir.log1p(tl.abs(A[i])), name="C")
    (got,) = _run([C], [A, B], [_X, _Y], lambda s: s[C].vectorize(
        s[C].split(C.op.axis[0], factor=4)[1]))
    want = np.arctan2(_X, _Y) + np.hypot(_X, _Y) + np.copysign(_X, _Y) + np.log1p(np.abs(_X))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert str(tl.tir.call_intrin("float32", "tir.atan2", A[0], 1.0)) == "atan2(A[0], 1.0f)"
    with pytest.raises(TypeError, match="tl.hypot needs float operands, got int32"):
        tl.tir.hypot(tl.var("n").astype("int32"), 2)


def test_a_reducer_called_on_values_combines_them():
    # TVM's second use of a comm_reducer: mysum(a, b, c) is fcombine folded over the values
    mysum = te.comm_reducer(lambda x, y: x + y, lambda t: tl.const(0, t), name="mysum")
    A = tl.placeholder((5,), name="A")
    B = tl.compute((5,), lambda i: mysum(A[i], 2.0, A[i]) + mysum(A[i], 1.0), name="B")
    a = rand((5,))
    assert_close(_run([B], [A], [a])[0], a * 3 + 3)
    with pytest.raises(TypeError, match="sum: axis must be reduce axes"):
        te.sum(A[0], axis=None)
    with pytest.raises(TypeError, match="mysum: axis must be reduce axes"):
        tl.compute((5,), lambda i: mysum(A[i], axis=i))


def test_tag_scope_tags_the_computes_declared_in_it():
    @te.tag_scope(tag="elemwise")
    def relu(x):
        return te.compute(x.shape, lambda *i: tl.tir.max(x(*i), tl.const(0, x.dtype)))

    A = tl.placeholder((6,), name="A")
    B = relu(A)
    with te.tag_scope("broadcast"):
        C = te.compute((6,), lambda i: B[i] * 2, name="C")
    D = te.compute((6,), lambda i: C[i] + 1, name="D")
    assert (B.op.tag, C.op.tag, D.op.tag) == ("elemwise", "broadcast", "")
    a = rand((6,)) - 0.5
    assert_close(_run([D], [A], [a])[0], np.maximum(a, 0) * 2 + 1)
    with pytest.raises(ValueError, match=r"tag='own' inside te.tag_scope\('broadcast'\)"), \
            te.tag_scope("broadcast"):
        te.compute((6,), lambda i: A[i], tag="own")
    with pytest.raises(ValueError, match="tag scopes do not nest"), te.tag_scope("a"):
        relu(A)
    assert te.compute((6,), lambda i: A[i]).op.tag == ""  # each scope closed on the error


def test_whole_tensor_arithmetic_names_the_ops():
    # TVM's `A + B` on tensors is topi's overload (tvm.topi is refused here)
    A = tl.placeholder((4,), name="A")
    B = tl.placeholder((4,), name="B")
    with pytest.raises(TypeError, match=r"A \+ \.\.\. on whole tensors .*tl.ops.add\(a, b\)"):
        A + B
    with pytest.raises(TypeError, match=r"A \* \.\.\. on whole tensors .*tl.ops.multiply"):
        2 * A


def test_chained_indexing():
    A = tl.placeholder((4, 5, 3), name="A")
    B = tl.compute((4, 5, 3), lambda i, j, k: A[i][j][k] * 2 + A[i, j][k], name="B")
    a = rand((4, 5, 3))
    (got,) = _run([B], [A], [a])
    assert_close(got, a * 3)


# ----------------------------------------------------------------------------- runtime


def test_runtime_arrays_take_tvms_device_and_have_numpy():
    dev = tl.cpu(0)
    A = tl.placeholder((64,), name="A")
    B = tl.compute((64,), lambda i: A[i] + 1, name="B")
    f = tl.build(tl.create_schedule(B.op), [A, B], name="addone")
    a = rand((64,))
    x = tl.runtime.array(a, dev)
    y = tl.runtime.empty((64,), "float32", dev)
    for call in (f, f["addone"], f.get_function("addone")):
        y[:] = 0
        call(x, y)
        out = y.numpy()
        assert type(out) is np.ndarray and out is not y
        assert_close(out, a + 1)
        assert_close(y.asnumpy(), a + 1)
    assert tl.runtime.array(a, dtype="float64").dtype == np.float64
    assert tl.runtime.array([1, 2], "int32").dtype == np.int32  # the older dtype position
    assert tl.runtime.empty((2, 2)).device == dev
    with pytest.raises(AttributeError, match="one function, 'addone'"):
        f.get_function("nope")
    assert f.type_key == "llvm" and f.imported_modules == []  # no device module on the CPU
    with pytest.raises(TypeError, match="expected a device such as tl.cpu"):
        tl.runtime.array(a, "float32", "float32")


def test_runtime_arrays_refuse_what_numpy_refuses():
    # int() took a shape of 2.5 as 2 and "3" as 3; object and string arrays failed in np.empty
    for shape in (2.5, (2.7, 3), "3", None):
        with pytest.raises(TypeError, match="empty: shape must be an int or a sequence of ints"):
            tl.runtime.empty(shape)
    assert tl.runtime.empty((np.int32(2), 3)).shape == (2, 3)
    for value, got in (("abc", "<U3"), (None, "object"), ([1 + 2j], "complex128")):
        with pytest.raises(TypeError, match=f"kernels take bool, int, uint and float arrays, "
                                            f"got {got}"):
            tl.runtime.array(value)


# ----------------------------------------------------------------------------- intrinsics


def test_call_pure_extern_calls_the_c_function_per_element():
    # TVM's "Intrinsics and Math Functions": tir.call_pure_extern("float32", "expf", A[i]),
    # here in a parallel, vectorized loop (no Python at the call)
    A = te.placeholder((37,), name="A")
    B = te.compute(A.shape, lambda i: tl.call_pure_extern("float32", "expf", A[i]), name="B")
    D = tl.placeholder((9,), name="D", dtype="float64")
    E = te.compute(D.shape, lambda i: te.call_pure_extern("float64", "log1p", D[i]), name="E")

    def sched(s):
        xo, xi = s[B].split(B.op.axis[0], factor=8)
        s[B].parallel(xo)
        s[B].vectorize(xi)

    a, d = rand((37,)), np.linspace(0.5, 4.0, 9)
    got_b, got_e = _run([B, E], [A, D], [a, d], sched)
    np.testing.assert_allclose(got_b, np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(got_e, np.log1p(d), rtol=1e-15)


def test_call_pure_extern_refuses_whole_tensors():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match=r"call_pure_extern\('fill'\) passes whole tensors "
                                        r"\(A, extern\): a pure function writes no output.*"
                                        r"tl.call_extern"):
        te.extern((4,), [A], lambda ins, outs: tl.call_pure_extern("int32", "fill", ins[0],
                                                                     outs[0]))


def test_call_intrin_names_the_math_functions():
    A = te.placeholder((16,), name="A")
    B = te.compute(A.shape, lambda i: tl.call_intrin("float32", "tir.exp", A[i])
                   + te.call_pure_intrin("float32", "sqrt", A[i])
                   + tl.call_intrin("float32", "tir.fabs", A[i] - 0.5), name="B")
    a = np.abs(rand((16,))) + 0.1
    (got,) = _run([B], [A], [a])
    np.testing.assert_allclose(got, np.exp(a) + np.sqrt(a) + np.abs(a - 0.5), rtol=1e-6)
    with pytest.raises(ValueError, match=r"call_intrin\('float32', 'tir.mylog'\): no intrinsic "
                                         r"of that name.*register_intrin_lowering\) is not "
                                         r"supported.*tl.call_pure_extern"):
        tl.call_intrin("float32", "tir.mylog", A[0])
    with pytest.raises(TypeError, match="the result is float32, not float64"):
        tl.call_intrin("float64", "tir.exp", A[0])


def test_registering_an_intrinsic_is_refused_where_it_is_called():
    # the tutorial's import line runs; the registration says what to do instead
    from tensorlang.ir import register_intrin_lowering, register_op_attr

    with pytest.raises(NotImplementedError, match=r"register_op_attr\('tir.mylog', "
                                                  r"'TCallEffectKind'\): adding an intrinsic.*"
                                                  r"tl.call_pure_extern"):
        register_op_attr("tir.mylog", "TCallEffectKind", 1)
    with pytest.raises(NotImplementedError, match=r"register_intrin_lowering\('tir.exp', "
                                                  r"target='llvm'\): adding an intrinsic"):
        register_intrin_lowering("tir.exp", target="llvm", f=lambda op: op, level=99)
    with pytest.raises(AttributeError, match="call_llvm_pure_intrin.*not supported.*tl.exp"):
        tl.call_llvm_pure_intrin  # noqa: B018
    # tvm.tir's expression helpers answer under TVM's names (d4854ad; it was refused before)
    x = tl.placeholder((4,), name="x")
    assert str(tl.tir.call_intrin("float32", "tir.exp", x[0])) == "exp(x[0])"


# ----------------------------------------------------------------------------- reducers


def test_reducers_take_lists_from_fcombine_and_fidentity():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return [tl.select(keep, x[0], y[0]), tl.select(keep, x[1], y[1])]

    argmax = te.comm_reducer(fcombine, lambda t0, t1: [tl.const(-1, t0), te.min_value(t1)],
                             name="argmax_lists")
    A = te.placeholder((5, 7), name="A")
    k = te.reduce_axis((0, 7), "k")
    T0, T1 = te.compute((5,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    a = rand((5, 7))
    got0, got1 = _run([T0, T1], [A], [a])
    np.testing.assert_array_equal(got0, a.argmax(axis=1))
    np.testing.assert_array_equal(got1, a.max(axis=1))


def test_three_value_reducer_and_tvm_te_limits():
    minmaxcount = te.comm_reducer(
        lambda x, y: (te.min(x[0], y[0]), te.max(x[1], y[1]), x[2] + y[2]),
        lambda t0, t1, t2: (tl.te.max_value(t0), tl.te.min_value(t1), tl.const(0, t2)),
        name="minmaxcount")
    A = te.placeholder((4, 6), name="A", dtype="int32")
    k = te.reduce_axis((0, 6), "k")
    R = te.compute((4,), lambda i: minmaxcount((A[i, k], A[i, k], tl.const(1, "int32")),
                                               axis=k, where=A[i, k] != 0), name="R")
    a = np.random.default_rng(3).integers(-4, 4, (4, 6)).astype(np.int32)
    lo, hi, count = _run(list(R), [A], [a])
    masked = np.ma.masked_equal(a, 0)
    np.testing.assert_array_equal(lo, masked.min(axis=1).filled(2**31 - 1))
    np.testing.assert_array_equal(hi, masked.max(axis=1).filled(-2**31))
    np.testing.assert_array_equal(count, (a != 0).sum(axis=1))
    assert int(te.min_value("int8").value) == -128 and int(te.max_value("uint16").value) == 65535


@pytest.mark.parametrize("reducer", ["sum", "max", "user"])
def test_reduction_init_is_refused_not_ignored(reducer):
    # init= was accepted by user reducers and dropped: the result lacked the initial value
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    red = {"sum": te.sum, "max": te.max,
           "user": te.comm_reducer(lambda x, y: x * y, lambda t: tl.const(1, t), name="user")}
    name = {"sum": "sum", "max": "max", "user": "user"}[reducer]
    with pytest.raises(NotImplementedError, match=rf"{name}\(..., init=...\): TVM's initial "
                                                  r"value of a reduction is not supported; "
                                                  r"reduce in one compute"):
        te.compute((4,), lambda i: red[reducer](A[i, k], axis=k, init=tl.const(1.0)))
