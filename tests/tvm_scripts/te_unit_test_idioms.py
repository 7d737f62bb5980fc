# What TVM's own te unit tests (test_te_schedule*, test_te_tensor, test_te_schedule_ops,
# bound inference) write, as a user script: schedules that legalize themselves (a split or fuse
# of the loop another stage is computed at), s = s.normalize(), TVM's pragma spellings, a scan
# whose body stage is inlined, a reducer called on values, rank-0 tensors, reduce extents that
# depend on the output index, symbolic fuse/split, and TVM's errors caught as TVMError. Every
# result is checked against numpy.
import numpy as np

import tensorlang as tvm
import tensorlang.testing
from tensorlang import te

rng = np.random.default_rng(0)


def run(s, args, inputs, out_shape, dtype="float32", *scalars):
    f = tvm.build(s, args)
    out = np.zeros(out_shape, dtype)
    f(*inputs, out, *scalars)
    return out


# --- the attach point is split, then fused (TVM legalizes both: test_legalize_invalid_attach)
A = te.compute((10, 10), lambda i, j: (i * 10 + j).astype("float32"), name="A")
B = te.compute((10, 10), lambda i, j: A[i][j] * 2, name="B")
s = te.create_schedule([B.op])
s[A].compute_at(s[B], B.op.axis[1])
s[B].split(B.op.axis[1], 2)
s = s.normalize()
expect = np.arange(100, dtype="float32").reshape(10, 10) * 2
tvm.testing.assert_allclose(run(s, [B], [], (10, 10)), expect)
s = te.create_schedule([B.op])
s[A].compute_at(s[B], B.op.axis[1])
s[B].parallel(s[B].fuse(B.op.axis[0], B.op.axis[1]))
tvm.testing.assert_allclose(run(s, [B], [], (10, 10)), expect)

# --- a refused schedule is a TVMError (a RuntimeError, as in TVM)
V = te.placeholder((128,), name="V")
ax = te.reduce_axis((0, 128), name="ax")
O = te.compute((1,), lambda _: te.sum(V[ax], axis=[ax]), name="O")
s = te.create_schedule(O.op)
try:
    s[O].vectorize(ax)
    raise AssertionError("a vectorized reduce loop was accepted")
except tvm.error.TVMError as err:
    assert isinstance(err, RuntimeError)
    print("refused:", str(err).splitlines()[0][:80])

# --- fuse with a symbolic split of the fused loop, the producer at the outer part
m, n, split = te.var("m"), te.var("n"), te.var("s")
X = te.placeholder((m, n), name="X")
X1 = te.compute((m, n), lambda i, j: X[i, j], name="X1")
X2 = te.compute((m, n), lambda i, j: X1[i, j] + 3, name="X2")
s = te.create_schedule(X2.op)
xo, xi = s[X2].split(s[X2].fuse(X2.op.axis[0], X2.op.axis[1]), split)
s[X1].compute_at(s[X2], xo)
f = tvm.build(s, [X, X2, split])
for shape, factor in (((5, 7), 3), ((3, 1), 2), ((1, 9), 40)):
    xv = rng.random(shape, dtype=np.float32)
    out = np.zeros(shape, "float32")
    f(xv, out, factor)
    tvm.testing.assert_allclose(out, xv + 3)

# --- split, tile and pragma spellings of the te schedule tests on a 1-D and a 2-D stage
T = te.compute((40,), lambda i: (i * 3).astype("float32"), name="T")
s = te.create_schedule(T.op)
(x,) = s[T].op.axis
fused = s[T].fuse(*s[T].op.axis)  # one loop: the loop itself
xo, xi = s[T].split(fused, factor=8, disable_predication=True)
xio, xii = s[T].split(xi, factor=4)
s[T].pragma(xo, "auto_unroll_max_step", 16)
s[T].pragma(xo, "unroll_explicit", True)
s[T].pragma(xio, "unroll")
s[T].pragma(xii, "vectorize")
tvm.testing.assert_allclose(run(s, [T], [], (40,)), np.arange(40, dtype="float32") * 3)

# --- a blur whose producer is computed at the innermost loop (bound inference: a 3x3 window)
nb = tvm.runtime.convert(12)
P = te.compute((nb, nb), lambda i, j: (i * 12 + j).astype("float32"), name="P")
blur = te.compute((nb - 2, nb - 2), lambda ii, jj: P[ii + 1][jj + 1] + P[ii][jj + 1]
                  + P[ii + 2][jj + 1] + P[ii + 1][jj + 2] + P[ii + 1][jj], name="blur")
s = te.create_schedule(blur.op)
s[P].compute_at(s[blur], blur.op.axis[1])
pv = np.arange(144, dtype="float32").reshape(12, 12)
expect = pv[1:-1, 1:-1] + pv[:-2, 1:-1] + pv[2:, 1:-1] + pv[1:-1, 2:] + pv[1:-1, :-2]
tvm.testing.assert_allclose(run(s.normalize(), [blur], [], (10, 10)), expect)

# --- a scan whose body stage (between the state and the update) is inlined
m, n = te.var("m"), te.var("n")
X = te.placeholder((m, n), name="X")
state = te.placeholder((m, n), name="state")
init = te.compute((1, n), lambda _, i: X[0, i], name="init")
x1 = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="x1")
update = te.compute((m, n), lambda t, i: x1[t, i] * 0.5, name="update")
res = tvm.te.scan(init, update, state, inputs=[X])
assert isinstance(res.op, te.ScanOp)
s = te.create_schedule(res.op)
s[x1].compute_inline()
xv = rng.random((6, 4), dtype=np.float32)
expect = xv.astype("float64").copy()
for t in range(1, 6):
    expect[t] = (expect[t - 1] + xv[t]) * 0.5
tvm.testing.assert_allclose(run(s, [X, res], [xv], (6, 4)), expect, rtol=1e-5)

# --- a reducer called on values, and a two-value reducer with a where= condition
mysum = te.comm_reducer(lambda x, y: x + y, lambda t: tvm.tir.const(0, dtype=t), name="mysum")
Y = te.placeholder((5,), name="Y")
Z = te.compute((5,), lambda i: mysum(Y[i], Y[i], 1.0), name="Z")
yv = rng.random(5, dtype=np.float32)
tvm.testing.assert_allclose(run(te.create_schedule(Z.op), [Y, Z], [yv], (5,)), 2 * yv + 1)
pair_sum = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1]),
                           lambda t0, t1: (tvm.tir.const(0, t0), tvm.tir.const(1, t1)),
                           name="pair_sum")
idx = te.placeholder((4, 7), name="idx", dtype="int32")
val = te.placeholder((4, 7), name="val", dtype="int32")
k = te.reduce_axis((0, 7), "k")
T0, T1 = te.compute((4,), lambda i: pair_sum((idx[i, k], val[i, k]), axis=k,
                                             where=te.floormod(k, 2) == 0), name="T")
f = tvm.build(te.create_schedule(T0.op), [idx, val, T0, T1])
iv = rng.integers(0, 10, (4, 7)).astype("int32")
vv = rng.integers(0, 10, (4, 7)).astype("int32")
o0, o1 = np.zeros(4, "int32"), np.zeros(4, "int32")
f(iv, vv, o0, o1)
np.testing.assert_array_equal(o0, iv[:, ::2].sum(1))
np.testing.assert_array_equal(o1, 1 + vv[:, ::2].sum(1))

# --- rank 0: a scale given as a 0-d tensor, a sum into a 0-d result
m = te.var("m")
A = te.placeholder((m,), name="A")
scale = te.placeholder((), name="scale")
k = te.reduce_axis((0, m), name="k")
total = te.compute((), lambda: te.sum(A[k] * scale(), axis=k), name="total")
av = rng.random(9, dtype=np.float32)
out = run(te.create_schedule(total.op), [A, scale, total], [av, np.array(2.5, "float32")], ())
tvm.testing.assert_allclose(out, av.sum() * 2.5, rtol=1e-5)

# --- a reduce extent that depends on the output index (an exclusive prefix sum), and a read of
# an intermediate at rv + 1
Xs = te.placeholder((10,), name="Xs")


def exclusive_prefix(n):
    rv = te.reduce_axis((0, n), name="rv")
    return te.sum(Xs[rv], axis=rv)


prefix = te.compute((10,), exclusive_prefix, name="prefix")
xv = rng.random(10, dtype=np.float32)
expect = np.concatenate([[0], np.cumsum(xv)[:-1]])
tvm.testing.assert_allclose(run(te.create_schedule(prefix.op), [Xs, prefix], [xv], (10,)),
                            expect, rtol=1e-5)
L, R = te.placeholder((3, 6), name="L"), te.placeholder((4, 6), name="R")
prod = te.compute((3, 4, 6), lambda i, j, k: L[i, k] * R[j, k], name="prod")
rv = te.reduce_axis((0, L.shape[1] - 1), "rv")
shifted = te.compute((3, 4), lambda i, j: te.sum(prod(i, j, rv + 1), axis=rv), name="shifted")
lv, rv_ = rng.random((3, 6), dtype=np.float32), rng.random((4, 6), dtype=np.float32)
out = run(te.create_schedule(shifted.op), [L, R, shifted], [lv, rv_], (3, 4))
tvm.testing.assert_allclose(out, lv[:, 1:] @ rv_[:, 1:].T, rtol=1e-5)

print("all results match numpy")
