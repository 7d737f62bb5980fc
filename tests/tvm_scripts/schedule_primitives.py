# Schedule primitives, one at a time, as TVM's tutorial shows them: split (factor, nparts),
# tile, fuse, reorder, bind (a GPU construct: refused on the CPU), compute_at, compute_inline,
# compute_root. Every schedule is built and checked against numpy on odd sizes.
import numpy as np

import tensorlang as tl
from tensorlang import te

n = te.var("n")
m = te.var("m")
rng = np.random.default_rng(0)
M_, N_ = 45, 29  # the sizes the symbolic kernels are called with
a2 = rng.random((M_, N_), dtype=np.float32)
b2 = rng.random((M_, N_), dtype=np.float32)


def run(s, args, inputs, out_shape, name):
    print(tl.lower(s, args, simple_mode=True))
    f = tl.build(s, args, target="llvm", name=name)
    out = np.zeros(out_shape, np.float32)
    f(*inputs, out)
    return out


# An elementwise product over a symbolic 2-D shape, the tutorial's first example.
A = te.placeholder((m, n), name="A")
B = te.placeholder((m, n), name="B")
C = te.compute((m, n), lambda i, j: A[i, j] * B[i, j], name="C")
s = te.create_schedule([C.op])
np.testing.assert_allclose(run(s, [A, B, C], (a2, b2), (M_, N_), "mul"), a2 * b2)

# split by factor
A1 = te.placeholder((m,), name="A")
B1 = te.compute((m,), lambda i: A1[i] * 2, name="B")
a1 = rng.random(M_, dtype=np.float32)
s = te.create_schedule(B1.op)
xo, xi = s[B1].split(B1.op.axis[0], factor=32)
np.testing.assert_allclose(run(s, [A1, B1], (a1,), (M_,), "split_factor"), a1 * 2)

# split by nparts
s = te.create_schedule(B1.op)
bx, tx = s[B1].split(B1.op.axis[0], nparts=32)
np.testing.assert_allclose(run(s, [A1, B1], (a1,), (M_,), "split_nparts"), a1 * 2)

# tile
B2 = te.compute((m, n), lambda i, j: A[i, j], name="B")
s = te.create_schedule(B2.op)
xo, yo, xi, yi = s[B2].tile(B2.op.axis[0], B2.op.axis[1], x_factor=10, y_factor=5)
np.testing.assert_allclose(run(s, [A, B2], (a2,), (M_, N_), "tile"), a2)

# fuse: the two inner loops of the tile become one
s = te.create_schedule(B2.op)
xo, yo, xi, yi = s[B2].tile(B2.op.axis[0], B2.op.axis[1], x_factor=10, y_factor=5)
fused = s[B2].fuse(xi, yi)
np.testing.assert_allclose(run(s, [A, B2], (a2,), (M_, N_), "fuse"), a2)

# reorder
s = te.create_schedule(B2.op)
xo, yo, xi, yi = s[B2].tile(B2.op.axis[0], B2.op.axis[1], x_factor=10, y_factor=5)
s[B2].reorder(xi, yo, xo, yi)
np.testing.assert_allclose(run(s, [A, B2], (a2,), (M_, N_), "reorder"), a2)

# bind: GPU threads; the CPU target has no such thing and says what to use instead
s = te.create_schedule(B1.op)
bx, tx = s[B1].split(B1.op.axis[0], factor=64)
try:
    s[B1].bind(bx, te.thread_axis("blockIdx.x"))
except AttributeError as e:
    assert "GPU construct" in str(e) and "parallel" in str(e), e
    print("bind:", e)
else:
    raise AssertionError("bind was accepted on the CPU target")
s[B1].parallel(bx)  # the CPU's way: threads over the outer loop
np.testing.assert_allclose(run(s, [A1, B1], (a1,), (M_,), "parallel_outer"), a1 * 2)

# compute_at: B is computed inside C's row loop, one row at a time
B3 = te.compute((m,), lambda i: A1[i] + 1, name="B")
C3 = te.compute((m,), lambda i: B3[i] * 2, name="C")
s = te.create_schedule(C3.op)
s[B3].compute_at(s[C3], C3.op.axis[0])
np.testing.assert_allclose(run(s, [A1, C3], (a1,), (M_,), "compute_at"), (a1 + 1) * 2,
                           rtol=1e-6)

# compute_inline: B disappears into C
s = te.create_schedule(C3.op)
s[B3].compute_inline()
np.testing.assert_allclose(run(s, [A1, C3], (a1,), (M_,), "compute_inline"), (a1 + 1) * 2,
                           rtol=1e-6)

# compute_root: undo a compute_at
s = te.create_schedule(C3.op)
s[B3].compute_at(s[C3], C3.op.axis[0])
s[B3].compute_root()
b3 = np.zeros(M_, np.float32)
c3 = run(s, [A1, B3, C3], (a1, b3), (M_,), "compute_root")
np.testing.assert_allclose(b3, a1 + 1, rtol=1e-6)
np.testing.assert_allclose(c3, (a1 + 1) * 2, rtol=1e-6)

print("all results match numpy")
