"""Differential tests of the operator library's elementwise, broadcast, reduction and data
movement operators against numpy, under the default schedule and the naive one."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ops_helpers import check, ph, rand

import tensorlang as tl
from tensorlang.ops.references import power as power_ref

ops = tl.ops

try:
    from scipy.special import erf as _erf
except ImportError:  # pragma: no cover
    _erf = np.vectorize(math.erf)


UNARY = [
    ("relu", lambda x: ops.relu(x), lambda a: np.maximum(a, 0)),
    ("leaky_relu", lambda x: ops.leaky_relu(x, 0.2), lambda a: np.where(a >= 0, a, 0.2 * a)),
    ("clip", lambda x: ops.clip(x, -0.5, 1.0), lambda a: np.clip(a, -0.5, 1.0)),
    ("clip_min_only", lambda x: ops.clip(x, a_min=0.25), lambda a: np.maximum(a, 0.25)),
    ("sigmoid", lambda x: ops.sigmoid(x), lambda a: 1 / (1 + np.exp(-a))),
    ("tanh", lambda x: ops.tanh(x), np.tanh),
    ("gelu", lambda x: ops.gelu(x), lambda a: 0.5 * a * (1 + _erf(a / np.sqrt(2)))),
    ("gelu_tanh", lambda x: ops.gelu(x, approximate="tanh"),
     lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))),
    ("exp", lambda x: ops.exp(x), np.exp),
    ("log", lambda x: ops.log(ops.abs(x)), lambda a: np.log(np.abs(a))),
    ("sqrt", lambda x: ops.sqrt(ops.abs(x)), lambda a: np.sqrt(np.abs(a))),
    ("abs", lambda x: ops.abs(x), np.abs),
    ("neg", lambda x: ops.negative(x), np.negative),
    ("erf", lambda x: ops.erf(x), _erf),
    ("floor", lambda x: ops.floor(x), np.floor),
    ("ceil", lambda x: ops.ceil(x), np.ceil),
]


@pytest.mark.parametrize("name,op,ref", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, op, ref):
    a = rand((3, 37))  # 37: a vector body plus a scalar tail
    A = ph(a, "A")
    check(op(A), [A], [a], ref(a).astype("float32"), rtol=2e-5, atol=2e-6)


def test_logical_not_and_cast():
    a = rand((4, 9), "int32", -2, 2)
    A = ph(a, "A")
    check(ops.logical_not(A), [A], [a], np.logical_not(a))
    check(ops.cast(A, "bool"), [A], [a], a.astype(bool))
    f = rand((2, 5), lo=-3, hi=3)
    F = ph(f, "F")
    check(ops.cast(F, "int32"), [F], [f], f.astype("int32"))
    check(ops.cast(F, "float64"), [F], [f], f.astype("float64"))


BINARY = [
    ("add", ops.add, np.add), ("subtract", ops.subtract, np.subtract),
    ("multiply", ops.multiply, np.multiply), ("divide", ops.divide, np.divide),
    ("maximum", ops.maximum, np.maximum), ("minimum", ops.minimum, np.minimum),
    ("equal", ops.equal, np.equal), ("not_equal", ops.not_equal, np.not_equal),
    ("less", ops.less, np.less), ("less_equal", ops.less_equal, np.less_equal),
    ("greater", ops.greater, np.greater), ("greater_equal", ops.greater_equal, np.greater_equal),
]

# broadcasting corners: same shape, trailing 1, leading missing dims, both sides broadcast
SHAPES = [((4, 5), (4, 5)), ((4, 5), (4, 1)), ((2, 3, 5), (5,)), ((3, 1), (1, 7)),
          ((1,), (2, 3))]


@pytest.mark.parametrize("name,op,ref", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_broadcast(name, op, ref, sa, sb):
    a, b = rand(sa), rand(sb)
    # values on a coarse grid: comparisons see ties, division never sees a zero divisor
    a, b = np.round(a * 2) / 2, np.round(b * 2) / 2
    b[b == 0] = 1.0
    A, B = ph(a, "A"), ph(b, "B")
    check(op(A, B), [A, B], [a, b], ref(a, b), both=(sa, sb) == SHAPES[1])


def test_binary_scalars_power_and_int_division():
    a = rand((3, 20), lo=0.5, hi=2)
    A = ph(a, "A")
    check(ops.power(A, 1.5), [A], [a], np.power(a, np.float32(1.5)), rtol=1e-5)
    check(ops.subtract(2.0, A), [A], [a], (2.0 - a).astype("float32"))
    i, j = rand((5, 6), "int32", -9, 9), rand((6,), "int32", 1, 4)
    I, J = ph(i, "I"), ph(j, "J")
    check(ops.divide(I, J), [I, J], [i, j], i // j)
    check(ops.maximum(I, J), [I, J], [i, j], np.maximum(i, j))
    x, y = rand((3, 4), "float32"), rand((3, 4), "float64")
    X, Y = ph(x, "X"), ph(y, "Y")
    check(ops.add(X, Y), [X, Y], [x, y], x + y)  # numpy promotion: float64


def test_power_of_an_integer_tensor_keeps_its_dtype():
    """Any numeric exponent; C's pow in float64 truncated (references.power, onnxruntime's)."""
    i, j = rand((3, 20), "int64", -9, 12), rand((20,), "int32", -2, 15)
    I, J = ph(i, "I"), ph(j, "J")
    check(ops.power(I, J), [I, J], [i, j], power_ref(i, j))
    check(ops.power(I, 0.5), [I], [i], power_ref(i, np.float64(0.5)))
    with pytest.raises(ValueError, match="exponent of an integer base must be a numeric tensor "
                                         "or number, got bool"):
        ops.power(I, tl.placeholder((20,), dtype="bool"))
    with pytest.raises(ValueError, match="power: operands must be float tensors, got int64"):
        ops.power(2, I)  # a Python base: numpy's float semantics only


def test_maximum_propagates_nan():
    a = rand((2, 16))
    b = rand((2, 16))
    a[0, 3] = np.nan
    b[1, 5] = np.nan
    A, B = ph(a, "A"), ph(b, "B")
    check(ops.maximum(A, B), [A, B], [a, b], np.maximum(a, b))


def test_logical_and_or_where():
    c = rand((3, 1, 5), "bool")
    x, y = rand((4, 5)), rand((3, 4, 1))
    C, X, Y = ph(c, "C"), ph(x, "X"), ph(y, "Y")
    check(ops.where(C, X, Y), [C, X, Y], [c, x, y], np.where(c, x, y))
    check(ops.where(C, X, 0.0), [C, X], [c, x], np.where(c, x, np.float32(0)))
    d = rand((3, 4, 5), "bool")
    D = ph(d, "D")
    check(ops.logical_and(C, D), [C, D], [c, d], np.logical_and(c, d))
    check(ops.logical_or(C, D), [C, D], [c, d], np.logical_or(c, d))


REDUCTIONS = [("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min),
              ("prod", np.prod)]


@pytest.mark.parametrize("name,ref", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (-1, False), (0, True),
                                           ((0, 2), False), ((1, -1), True)])
def test_reductions(name, ref, axis, keepdims):
    a = rand((3, 5, 66), lo=0.5, hi=1.5)  # 66: not a multiple of the rfactor lanes
    A = ph(a, "A")
    out = getattr(ops, name)(A, axis=axis, keepdims=keepdims)
    check(out, [A], [a], ref(a, axis=axis, keepdims=keepdims), rtol=1e-4,
          both=axis == -1)


def test_row_sum_vectorized_path():
    a = rand((7, 256))
    A = ph(a, "A")
    check(ops.sum(A, axis=1), [A], [a], a.sum(1), rtol=1e-4, atol=1e-4)
    i = rand((4, 6), "int32", -5, 5)
    I_ = ph(i, "I")
    check(ops.sum(I_, axis=0), [I_], [i], i.sum(0))  # int32 sums in int64, like numpy


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (-1, True), (0, False)])
def test_argmax_argmin(fn, axis, keepdims):
    a = rand((4, 6, 5), "int32", 0, 3)  # many ties: the first index must win
    A = ph(a, "A")
    ref = getattr(np, fn)(a, axis=axis, keepdims=keepdims)
    check(getattr(ops, fn)(A, axis=axis, keepdims=keepdims), [A], [a], ref, both=False)


def test_argmax_nan_and_all_minus_inf():
    a = np.full((2, 5), -np.inf, dtype="float32")
    a[1, 3] = np.nan
    a[1, 4] = np.nan
    A = ph(a, "A")
    check(ops.argmax(A, axis=1), [A], [a], np.argmax(a, axis=1))


def test_transpose_reshape_flatten():
    a = rand((2, 3, 4))
    A = ph(a, "A")
    check(ops.transpose(A), [A], [a], a.T)
    check(ops.transpose(A, (1, -1, 0)), [A], [a], np.transpose(a, (1, 2, 0)))
    check(ops.reshape(A, (4, -1)), [A], [a], a.reshape(4, -1))
    check(ops.reshape(A, (24,)), [A], [a], a.reshape(24))
    check(ops.flatten(A), [A], [a], a.reshape(2, 12))
    check(ops.flatten(A, 0), [A], [a], a.reshape(1, 24))
    check(ops.flatten(A, -1), [A], [a], a.reshape(6, 4))


def test_squeeze_unsqueeze_expand():
    a = rand((1, 3, 1, 4))
    A = ph(a, "A")
    check(ops.squeeze(A), [A], [a], np.squeeze(a))
    check(ops.squeeze(A, -2), [A], [a], np.squeeze(a, -2))
    check(ops.unsqueeze(A, (0, -1)), [A], [a], np.expand_dims(a, (0, -1)))
    b = rand((3, 1))
    B = ph(b, "B")
    check(ops.expand(B, (2, 1, 5)), [B], [b], np.broadcast_to(b, (2, 3, 5)))


def test_concat_split():
    a, b, c = rand((2, 3, 4)), rand((2, 5, 4)), rand((2, 1, 4))
    A, B, C = ph(a, "A"), ph(b, "B"), ph(c, "C")
    check(ops.concat([A, B, C], axis=-2), [A, B, C], [a, b, c],
          np.concatenate([a, b, c], axis=-2))
    x = rand((4, 9))
    X = ph(x, "X")
    check(list(ops.split(X, 3, axis=1)), [X], [x], np.split(x, 3, axis=1))
    check(list(ops.split(X, [1, 3], axis=0)), [X], [x], np.split(x, [1, 3], axis=0))


@pytest.mark.parametrize("begin,end,steps,axes,ref", [
    ([1], [5], [2], [1], lambda a: a[:, 1:5:2]),
    ([-1], [-100], [-3], [0], lambda a: a[-1:-100:-3]),
    ([0, 2], [100, -1], [1, 1], [-1, 0], lambda a: a[2:-1, 0:100]),
    ([7, 1], [0, 4], [-2, 1], None, lambda a: a[7:0:-2, 1:4]),
])
def test_strided_slice(begin, end, steps, axes, ref):
    a = rand((9, 8))
    A = ph(a, "A")
    check(ops.strided_slice(A, begin, end, steps, axes), [A], [a], ref(a))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(mode):
    a = rand((3, 4))
    A = ph(a, "A")
    pw = ((2, 1), (3, 5))  # the reflect pad of 5 on an axis of 4 wraps more than once
    kw = {"constant_values": 1.5} if mode == "constant" else {}
    exp = np.pad(a, pw, mode=mode, **kw)
    out = ops.pad(A, pw, mode, 1.5) if mode == "constant" else ops.pad(A, pw, mode)
    check(out, [A], [a], exp)


def test_gather():
    x = rand((5, 4, 3))
    i = np.array([[0, -1], [4, 2]], dtype="int64")
    X, I_ = ph(x, "X"), ph(i, "I")
    for axis in (0, 1, -1):
        ii = np.clip(i, -x.shape[axis], x.shape[axis] - 1)
        check(ops.gather(X, I_, axis), [X, I_], [x, ii], np.take(x, ii, axis=axis))


def test_layout_transform_roundtrip():
    a = rand((2, 20, 3, 5))  # 20 channels: the last block of 16 is zero-padded
    A = ph(a, "A")
    blocked = ops.layout_transform(A, "NCHW", "NCHW16c")
    exp = np.zeros((2, 2, 3, 5, 16), "float32")
    for c in range(20):
        exp[:, c // 16, :, :, c % 16] = a[:, c]
    check(blocked, [A], [a], exp)
    check(ops.layout_transform(blocked, "NCHW16c", "NCHW"), [A], [a],
          np.concatenate([a, np.zeros((2, 12, 3, 5), "float32")], axis=1))
    check(ops.layout_transform(blocked, "NCHW16c", "NCHW8c"), [A], [a],
          exp.reshape(2, 2, 3, 5, 2, 8).transpose(0, 1, 4, 2, 3, 5).reshape(2, 4, 3, 5, 8))


def test_layout_transform_schedule_transposes_tiles_in_registers():
    """One task per (n, row, channel block); inside it, tiles of 16, 8 or 4 columns x the
    block's channels are read as contiguous vectors and transposed in registers (the
    transpose_gathers pass), never as strided loads. A row no tile divides gets tiles of 16,
    the last one ragged (its columns past the row dropped); a row under 4 columns walks the
    row with plain strides (no division chain per vector), one strided load per vector."""
    a = rand((1, 32, 6, 20))
    A = ph(a, "A")
    blocked = ops.layout_transform(A, "NCHW", "NCHW16c")
    text = str(tl.lower(ops.default_schedule(blocked), [A, blocked]))
    assert "parallel for a.y.fused.co.fused in range(12):\n    for z.outer in range(5):" in text
    assert "shuffle(" in text and ", 120, 16)]" not in text  # 16 channels 120 floats apart
    exp = a.reshape(1, 2, 16, 6, 20).transpose(0, 1, 3, 4, 2)
    check(blocked, [A], [a], exp)
    B = ph(exp, "B")
    back = ops.layout_transform(B, "NCHW16c", "NCHW")
    text = str(tl.lower(ops.default_schedule(back), [B, back]))
    assert "shuffle(" in text and ", 16, 4)]" not in text
    check(back, [B], [np.ascontiguousarray(exp)], a)
    # 13 columns: one tile of 16, ragged
    for w in (13,):
        a = rand((1, 32, 3, w))
        A = ph(a, "A")
        blocked = ops.layout_transform(A, "NCHW", "NCHW16c")
        text = str(tl.lower(ops.default_schedule(blocked), [A, blocked]))
        assert "shuffle(" in text and f"z, {3 * w}, 16)]" not in text
        exp = a.reshape(1, 2, 16, 3, w).transpose(0, 1, 3, 4, 2)
        check(blocked, [A], [a], exp)
        B = ph(exp, "B")
        back = ops.layout_transform(B, "NCHW16c", "NCHW")
        text = str(tl.lower(ops.default_schedule(back), [B, back]))
        assert "shuffle(" in text and f", 16, {w})]" not in text
        check(back, [B], [np.ascontiguousarray(exp)], a)
    # 3 columns: no tile
    a = rand((1, 32, 2, 3))
    A = ph(a, "A")
    blocked = ops.layout_transform(A, "NCHW", "NCHW16c")
    text = str(tl.lower(ops.default_schedule(blocked), [A, blocked]))
    assert "for z in range(3):" in text and "z, 6, 16)]" in text and "shuffle(" not in text
    check(blocked, [A], [a], a.reshape(1, 2, 16, 2, 3).transpose(0, 1, 3, 4, 2))


def test_patterns_are_declared():
    A = tl.placeholder((4, 5), name="A")
    B = tl.placeholder((5,), name="B")
    assert ops.pattern_of(ops.relu(A)) == "elemwise"
    assert ops.pattern_of(ops.add(A, B)) == "broadcast"
    assert ops.pattern_of(ops.transpose(A)) == "injective"
    assert ops.pattern_of(ops.sum(A, 1)) == "reduce"
    assert ops.pattern_of(ops.matmul(A, tl.placeholder((5, 3)))) == "out_elemwise_fusable"
    assert ops.pattern_of(ops.softmax(A)) == "opaque"
    assert ops.relu(A).op.tag == "relu"


@pytest.mark.parametrize("call,words", [
    (lambda A, B: ops.add(A, B), ("add", "broadcast")),
    (lambda A, B: ops.sum(A, axis=3), ("sum", "axis")),
    (lambda A, B: ops.reshape(A, (7, -1)), ("reshape", "reshape")),
    (lambda A, B: ops.transpose(A, (0, 0)), ("transpose", "axes")),
    (lambda A, B: ops.leaky_relu(A, float("nan")), ("leaky_relu", "alpha")),
    (lambda A, B: ops.gelu(A, approximate="fast"), ("gelu", "approximate")),
    (lambda A, B: ops.strided_slice(A, [0], [3], [0]), ("slice", "steps")),
    (lambda A, B: ops.pad(A, 1, mode="wrap"), ("pad", "mode")),
    (lambda A, B: ops.split(A, 3, axis=1), ("split", "divide")),
    (lambda A, B: ops.squeeze(A, 0), ("squeeze", "axis")),
    (lambda A, B: ops.concat([A, B], axis=0), ("concat", "tensors[1]")),
    (lambda A, B: ops.layout_transform(A, "NCHW", "NHWC"), ("layout_transform", "dst_layout")),
])
def test_bad_attributes_raise_value_error(call, words):
    A = tl.placeholder((4, 5), name="A")
    B = tl.placeholder((3, 4), name="B")
    with pytest.raises(ValueError) as e:
        call(A, B)
    for w in words:
        assert w in str(e.value)


def test_exp_vector_scalef_path_special_values_and_accuracy():
    """exp on 16-float vectors scales by 2^n with vscalefps on AVX-512 hosts (codegen); its
    results must match the reference to the polynomial's accuracy everywhere: NaN stays NaN,
    overflow gives inf, underflow gives correctly rounded denormals and then 0."""
    rng = np.random.default_rng(3)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.7, 88.73, 89.0, 95.0, -87.3,
                        -100.0, -103.9, -104.0, -150.0, 1e-30, -1e-30, 1.0, -1.0], "float32")
    bits = rng.integers(0, 2 ** 32, 4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([special, rng.uniform(-110, 95, 8192).astype("float32"), bits])
    x = np.resize(x, (len(x) + 15) // 16 * 16)  # whole vectors: the vector path everywhere
    X = ph(x, "X")
    out = ops.exp(X)
    s = ops.default_schedule(out)
    f = tl.build(s, [X, out])
    from tensorlang.codegen.target import Target

    if Target.host().has_feature("avx512f"):
        assert "vscalefps" in f.get_source("asm")
    got = np.zeros_like(x)
    f(x, got)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        ref = np.exp(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    fin = ~np.isnan(ref)
    assert np.array_equal(got[fin & np.isinf(ref)], ref[fin & np.isinf(ref)])
    ok = fin & ~np.isinf(ref)
    ulp = np.abs(got[ok].view(np.int32).astype(np.int64) - ref[ok].view(np.int32))
    assert ulp.max() <= 2
