"""Symbolic shapes: a kernel declared over tl.var extents is built once and run for several
sizes, including sizes smaller than and not divisible by the split factors (tail guards)."""

from __future__ import annotations

import numpy as np
import pytest
from tl_testing import assert_close, rand, run

import tensorlang as tl

SIZES = [1, 3, 8, 17, 64, 67]


def test_elementwise_split_vectorize_parallel():
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    B = tl.placeholder((n,), name="B")
    C = tl.compute((n,), lambda i: A[i] * B[i] + tl.sqrt(tl.abs(A[i])), name="C")
    s = tl.create_schedule(C)
    o, i = s[C].split(C.op.axis[0], factor=16)
    s[C].vectorize(i)
    s[C].parallel(o)
    f = tl.build(s, [A, B, C], name="sym_ew")
    for m in SIZES:
        a, b = rand((m,)), rand((m,), seed=1)
        (c,) = run(f, [a, b], [C], {"n": m})
        assert_close(c, a * b + np.sqrt(np.abs(a)))


def test_elementwise_zero_size():
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n,), lambda i: A[i] + 1, name="C")
    f = tl.build(tl.create_schedule(C), [A, C], name="sym_zero")
    c = np.zeros(0, "float32")
    f(np.zeros(0, "float32"), c)
    assert c.shape == (0,)


@pytest.mark.parametrize("sched", ["default", "split_reduce", "reduce_outer", "rfactor"])
def test_row_sum_symbolic_both_axes(sched):
    m, n = tl.var("m"), tl.var("n")
    A = tl.placeholder((m, n), name="A")
    k = tl.reduce_axis((0, n), name="k")
    R = tl.compute((m,), lambda i: tl.sum(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R)
    if sched == "split_reduce":
        ko, ki = s[R].split(k, factor=4)
        io, ii = s[R].split(R.op.axis[0], factor=3)
        s[R].reorder(io, ko, ii, ki)
    elif sched == "reduce_outer":
        s[R].reorder(k, R.op.axis[0])
    elif sched == "rfactor":
        ko, ki = s[R].split(k, factor=4)
        RF = s.rfactor(R, ki)
        s[RF].parallel(s[RF].op.axis[0])
    f = tl.build(s, [A, R], name=f"sym_rowsum_{sched}")
    for mm, nn in [(1, 1), (3, 5), (8, 16), (7, 33)]:
        a = rand((mm, nn))
        (r,) = run(f, [a], [R], {"m": mm, "n": nn})
        assert_close(r, a.sum(1))


@pytest.mark.parametrize("sched", ["default", "tiled", "cache_write"])
def test_matmul_symbolic(sched):
    M, N, K = tl.var("M"), tl.var("N"), tl.var("K")
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C)
    if sched == "tiled":
        i, j = C.op.axis
        io, jo, ii, ji = s[C].tile(i, j, 4, 16)
        ko, ki = s[C].split(k, factor=4)
        s[C].reorder(io, jo, ko, ii, ki, ji)
        s[C].vectorize(ji)
        s[C].parallel(io)
    elif sched == "cache_write":
        CL = s.cache_write(C, "local")
        i, j = s[C].op.axis
        io, jo, ii, ji = s[C].tile(i, j, 4, 16)
        s[CL].compute_at(s[C], jo)
        s[C].vectorize(ji)
    f = tl.build(s, [A, B, C], name=f"sym_mm_{sched}")
    for mm, nn, kk in [(1, 1, 1), (5, 17, 3), (16, 32, 8), (9, 35, 13)]:
        a, b = rand((mm, kk)), rand((kk, nn), seed=1)
        (c,) = run(f, [a, b], [C], {"M": mm, "N": nn, "K": kk})
        assert_close(c, a @ b)


def test_softmax_symbolic_with_compute_at():
    m, n = tl.var("m"), tl.var("n")
    X = tl.placeholder((m, n), name="X")
    k1 = tl.reduce_axis((0, n), name="k1")
    mx = tl.compute((m,), lambda i: tl.max(X[i, k1], axis=k1), name="mx")
    E = tl.compute((m, n), lambda i, j: tl.exp(X[i, j] - mx[i]), name="E")
    k2 = tl.reduce_axis((0, n), name="k2")
    sm = tl.compute((m,), lambda i: tl.sum(E[i, k2], axis=k2), name="sm")
    Y = tl.compute((m, n), lambda i, j: E[i, j] / sm[i], name="Y")
    s = tl.create_schedule(Y)
    i, j = Y.op.axis
    s[sm].compute_at(s[Y], i)
    s[E].compute_at(s[Y], i)
    s[mx].compute_at(s[E], E.op.axis[0])  # mx's reader is E, so it goes inside E's row
    _jo, ji = s[Y].split(j, factor=8)
    s[Y].vectorize(ji)
    f = tl.build(s, [X, Y], name="sym_softmax")
    for mm, nn in [(1, 1), (2, 9), (4, 40)]:
        x = rand((mm, nn), lo=-5, hi=5)
        (y,) = run(f, [x], [Y], {"m": mm, "n": nn})
        e = np.exp(x - x.max(1, keepdims=True))
        assert_close(y, e / e.sum(1, keepdims=True))


def test_symbolic_and_fixed_dims_mixed_and_shape_check():
    """A fixed dimension stays checked at call time; a symbolic one must agree across args."""
    n = tl.var("n")
    A = tl.placeholder((n, 4), name="A")
    B = tl.compute((n, 4), lambda i, j: A[i, j] * 3, name="B")
    f = tl.build(tl.create_schedule(B), [A, B], name="sym_mixed")
    a = rand((5, 4))
    (b,) = run(f, [a], [B], {"n": 5})
    assert_close(b, a * 3)
    with pytest.raises(ValueError, match="n=6"):
        f(a, np.zeros((6, 4), "float32"))
    with pytest.raises(ValueError, match="axis 1"):
        f(np.zeros((5, 3), "float32"), np.zeros((5, 3), "float32"))


def test_symbolic_reduce_axis_and_expression_extent():
    """A reduce axis over a symbolic extent, and an intermediate of extent n + 2 (a heap buffer
    sized at run time). (Kernel arguments themselves must have int or plain tl.var extents.)"""
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    P = tl.compute((n + 2,), lambda i: tl.if_then_else(tl.all(i >= 1, i < n + 1), A[i - 1], 0.0),
                   name="P")
    Y = tl.compute((n,), lambda i: P[i] + P[i + 2], name="Y")
    k = tl.reduce_axis((0, n), name="k")
    S = tl.compute((1,), lambda z: tl.sum(A[k] * A[k], axis=k), name="S")
    s = tl.create_schedule([Y, S])
    _o, i = s[P].split(P.op.axis[0], factor=4)
    s[P].vectorize(i)
    f = tl.build(s, [A, Y, S], name="sym_expr")
    for m in [1, 2, 9]:
        a = rand((m,))
        y, sq = run(f, [a], [Y, S], {"n": m})
        p = np.pad(a, 1)
        assert_close(y, p[:-2] + p[2:])
        assert_close(sq, [(a * a).sum()])
