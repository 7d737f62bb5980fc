# Reductions as TVM's tutorial writes them: a row sum over symbolic sizes, scheduled by
# splitting the reduce and row axes, rfactor (factor_axis as TVM defines it) to parallelize a
# reduction, and user reducers from comm_reducer. Each result is checked against numpy.
import numpy as np

import tensorlang as tl
from tensorlang import te

n = te.var("n")
m = te.var("m")
A = te.placeholder((n, m), name="A")
k = te.reduce_axis((0, m), "k")
B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")

rng = np.random.default_rng(0)
N_, M_ = 37, 83
a = rng.random((N_, M_), dtype=np.float32)
ref = a.sum(axis=1)


def check(s, args, name):
    print(tl.lower(s, args, simple_mode=True))
    f = tl.build(s, args, target="llvm", name=name)
    b = np.zeros(N_, np.float32)
    f(a, b)
    np.testing.assert_allclose(b, ref, rtol=1e-5)


s = te.create_schedule(B.op)
check(s, [A, B], "rowsum")

# split the reduce axis and the row axis
s = te.create_schedule(B.op)
ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
xo, xi = s[B].split(B.op.axis[0], factor=32)
check(s, [A, B], "rowsum_split")

# parallel on a reduce loop is refused: the iterations update the same accumulator
s = te.create_schedule(B.op)
try:
    s[B].parallel(B.op.reduce_axis[0])
except tl.ScheduleError as e:
    assert "k" in str(e), e
    print("refused:", str(e).splitlines()[0])
else:
    raise AssertionError("a parallel reduce loop was accepted")

# rfactor: the partial sums over ki become a stage of their own, whose new axis (position
# factor_axis of its shape) can run in parallel
s = te.create_schedule(B.op)
ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
BF = s.rfactor(B, ki)
assert len(BF.shape) == 2 and BF.shape[0].value == 16  # factor_axis=0: the factored dim first
print(tl.lower(s, [A, B], simple_mode=True))
s[BF].parallel(BF.op.axis[0])
check(s, [A, B], "rowsum_rfactor")

s = te.create_schedule(B.op)
ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
BF = s.rfactor(B, ki, factor_axis=1)  # the factored dim last: a row's partial sums contiguous
assert BF.shape[1].value == 16
s[BF].reorder(BF.op.axis[0], BF.op.reduce_axis[0], BF.op.axis[1])
s[BF].vectorize(BF.op.axis[1])
check(s, [A, B], "rowsum_rfactor_last")

# rfactor of the whole reduction into a 1-element result, the factored loop outermost and
# parallel (the tutorial's cross-thread reduction, here with threads of the CPU)
L = 1000
X = te.placeholder((L,), name="X")
r = te.reduce_axis((0, L), "r")
S = te.compute((1,), lambda i: te.sum(X[r], axis=r), name="S")
s = te.create_schedule(S.op)
ro, ri = s[S].split(r, nparts=8)
SF = s.rfactor(S, ro)
s[SF].parallel(SF.op.axis[0])
f = tl.build(s, [X, S], name="total")
x = rng.random(L, dtype=np.float32)
out = np.zeros(1, np.float32)
f(x, out)
np.testing.assert_allclose(out[0], x.sum(), rtol=1e-5)

# user-defined reducers
product = te.comm_reducer(lambda x, y: x * y, lambda t: tl.const(1, dtype=t), name="product")
P = te.compute((n,), lambda i: product(A[i, k], axis=k), name="P")
s = te.create_schedule(P.op)
f = tl.build(s, [A, P], name="rowprod")
small = (1 + rng.random((N_, M_)).astype(np.float32) * 0.01)
p = np.zeros(N_, np.float32)
f(small, p)
np.testing.assert_allclose(p, small.prod(axis=1), rtol=1e-4)

mymax = te.comm_reducer(lambda x, y: te.max(x, y), lambda t: te.min_value(t), name="mymax")
Mx = te.compute((n,), lambda i: mymax(A[i, k], axis=k), name="Mx")
s = te.create_schedule(Mx.op)
ko, ki = s[Mx].split(k, factor=8)
f = tl.build(s, [A, Mx], name="rowmax")
mx = np.zeros(N_, np.float32)
f(a, mx)
np.testing.assert_array_equal(mx, a.max(axis=1))

print("all results match numpy")
