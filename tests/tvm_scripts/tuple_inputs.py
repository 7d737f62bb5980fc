# Tuple inputs and outputs as TVM's tutorial writes them: a compute with two outputs, a reducer
# over (index, value) pairs with TVM's tuple combiner fcombine(x, y), and a schedule attaching a
# two-output stage at its consumer. Every result is checked against numpy.
import numpy as np

import tensorlang as tl
from tensorlang import te

n = te.var("n")
m = te.var("m")
rng = np.random.default_rng(0)
M_, N_ = 11, 23

# Two outputs of one compute.
A0 = te.placeholder((m, n), name="A0")
A1 = te.placeholder((m, n), name="A1")
B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A1[i, j] * 3), name="B")
s = te.create_schedule(B0.op)
print(tl.lower(s, [A0, A1, B0, B1], simple_mode=True))
f = tl.build(s, [A0, A1, B0, B1], name="two_outputs")
a0 = rng.random((M_, N_), dtype=np.float32)
a1 = rng.random((M_, N_), dtype=np.float32)
b0 = np.zeros((M_, N_), np.float32)
b1 = np.zeros((M_, N_), np.float32)
f(a0, a1, b0, b1)
np.testing.assert_allclose(b0, a0 + 2, rtol=1e-6)
np.testing.assert_allclose(b1, a1 * 3, rtol=1e-6)


# A reducer over tuples: argmax, written with TVM's tuple combiner. On a tie it keeps x, the
# value reduced so far: with the reduce loop in order that is numpy's first index.
def fcombine(x, y):
    lhs = tl.select((x[1] >= y[1]), x[0], y[0])
    rhs = tl.select((x[1] >= y[1]), x[1], y[1])
    return lhs, rhs


def fidentity(t0, t1):
    return tl.const(-1, t0), te.min_value(t1)


argmax = te.comm_reducer(fcombine, fidentity, name="argmax")

idx = te.placeholder((m, n), name="idx", dtype="int32")
val = te.placeholder((m, n), name="val", dtype="int32")
k = te.reduce_axis((0, n), "k")
T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
s = te.create_schedule(T0.op)
print(tl.lower(s, [idx, val, T0, T1], simple_mode=True))
f = tl.build(s, [idx, val, T0, T1], name="argmax")
vals = rng.integers(-5, 5, (M_, N_)).astype(np.int32)  # small range: many ties
idxs = np.tile(np.arange(N_, dtype=np.int32), (M_, 1))
t0 = np.zeros(M_, np.int32)
t1 = np.zeros(M_, np.int32)
f(idxs, vals, t0, t1)
np.testing.assert_array_equal(t0, vals.argmax(axis=1))
np.testing.assert_array_equal(t1, vals.max(axis=1))


# The same with ties broken by the lower index: commutative, so schedules that reorder the
# reduction (here rfactor with its partial results in parallel) keep numpy's answer.
def first_max(x, y):
    take_x = (x[1] > y[1]) | ((x[1] == y[1]) & (x[0] < y[0]))
    return tl.select(take_x, x[0], y[0]), tl.select(take_x, x[1], y[1])


argmax_first = te.comm_reducer(first_max, lambda t0, t1: (te.max_value(t0), te.min_value(t1)),
                               name="argmax_first")
k2 = te.reduce_axis((0, n), "k")
R0, R1 = te.compute((m,), lambda i: argmax_first((idx[i, k2], val[i, k2]), axis=k2), name="R")
s = te.create_schedule(R0.op)
ko, ki = s[R0].split(k2, factor=4)
RF = s.rfactor(R0, ki)
s[RF[0]].parallel(RF[0].op.axis[0])
f = tl.build(s, [idx, val, R0, R1], name="argmax_rfactor")
r0 = np.zeros(M_, np.int32)
r1 = np.zeros(M_, np.int32)
f(idxs, vals, r0, r1)
np.testing.assert_array_equal(r0, vals.argmax(axis=1))
np.testing.assert_array_equal(r1, vals.max(axis=1))

# A two-output stage computed at its consumer's row loop.
C = te.compute((m, n), lambda i, j: A0[i, j] + B0[i, j], name="C")
s = te.create_schedule(C.op)
s[B0].compute_at(s[C], C.op.axis[0])
print(tl.lower(s, [A0, A1, C], simple_mode=True))
f = tl.build(s, [A0, A1, C], name="tuple_compute_at")
c = np.zeros((M_, N_), np.float32)
f(a0, a1, c)
np.testing.assert_allclose(c, a0 + (a0 + 2), rtol=1e-6)

print("all results match numpy")
