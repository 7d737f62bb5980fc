# Schedule idioms of TVM's te tests and operator schedules, written as there: attaching stages
# to a loop of a stage that does not read them directly (x86 softmax), primitives in an order
# that is only legal once all are applied, an inlined stage still listed as a kernel argument,
# argument shapes that are expressions of a shape variable (the symbolic 2-D convolution of
# TVM's reduction tutorial) and a split by a symbolic factor. Every result is checked against
# numpy.
import numpy as np

import tensorlang as tl
from tensorlang import te

rng = np.random.default_rng(0)

# --- softmax, scheduled as TVM's x86 softmax schedule: the max, the exponentials and their sum
# are all computed inside the output's parallel row loop, though only exp reads the max and
# only the sum reads exp directly. exp is attached first, before the sum that hosts nothing.
m, n = te.var("m"), te.var("n")
x = te.placeholder((m, n), name="x")
k1 = te.reduce_axis((0, n), name="k1")
max_elem = te.compute((m,), lambda i: te.max(x[i, k1], axis=k1), name="max_elem")
expo = te.compute((m, n), lambda i, j: te.exp(x[i, j] - max_elem[i]), name="expo")
k2 = te.reduce_axis((0, n), name="k2")
expsum = te.compute((m,), lambda i: te.sum(expo[i, k2], axis=k2), name="expsum")
softmax = te.compute((m, n), lambda i, j: expo[i, j] / expsum[i], name="softmax")

s = te.create_schedule(softmax.op)
row = softmax.op.axis[0]
s[softmax].parallel(row)
s[expo].compute_at(s[softmax], row)
s[max_elem].compute_at(s[softmax], row)
s[expsum].compute_at(s[softmax], row)
print(tl.lower(s, [x, softmax], simple_mode=True))
f = tl.build(s, [x, softmax], name="softmax_x86")
xv = rng.standard_normal((13, 37)).astype(np.float32)
out = np.zeros_like(xv)
f(xv, out)
e = np.exp(xv - xv.max(axis=1, keepdims=True))
np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5)

# --- order of primitives: A1 is attached to C's outer loop before A2, which also reads A1, is
# inlined into C. After the compute_at alone, A2 (still at the root) reads A1 outside the loop
# that computes it; the inline makes the schedule legal, and that is what lowering checks.
N = 64
A = te.placeholder((N,), name="A")
A1 = te.compute((N,), lambda i: A[i] + 1, name="A1")
A2 = te.compute((N,), lambda i: A1[i] * 2, name="A2")
C = te.compute((N,), lambda i: A1[i] + A2[i], name="C")
s = te.create_schedule(C.op)
xo, xi = s[C].split(C.op.axis[0], factor=8)
s[A1].compute_at(s[C], xo)
s[A2].compute_inline()
f = tl.build(s, [A, C], name="order_of_primitives")
av = rng.random(N, dtype=np.float32)
cv = np.zeros(N, np.float32)
f(av, cv)
np.testing.assert_allclose(cv, (av + 1) + (av + 1) * 2, rtol=1e-6)

# The same schedule left half-way (A2 never inlined) is refused by lowering, naming A1 and A2.
s = te.create_schedule(C.op)
xo, xi = s[C].split(C.op.axis[0], factor=8)
s[A1].compute_at(s[C], xo)
try:
    tl.lower(s, [A, C])
except tl.ScheduleError as err:
    assert "A1" in str(err) and "A2" in str(err), err
    print("refused:", str(err).splitlines()[0])
else:
    raise AssertionError("a read of A1 outside the loop that computes it was accepted")

# --- an inlined stage listed among the kernel's arguments: an argument the kernel never uses
B = te.compute((N,), lambda i: A[i] + 1, name="B")
D = te.compute((N,), lambda i: B[i] * 2, name="D")
s = te.create_schedule(D.op)
s[B].compute_inline()
f = tl.build(s, [A, B, D], name="inlined_argument")
bv = np.full(N, -7, np.float32)
dv = np.zeros(N, np.float32)
f(av, bv, dv)
np.testing.assert_allclose(dv, (av + 1) * 2, rtol=1e-6)
assert (bv == -7).all()  # left untouched

# --- the symbolic 2-D convolution of TVM's reduction tutorial: the output is (n - 2, n - 2)
n = te.var("n")
Input = te.placeholder((n, n), name="Input")
Filter = te.placeholder((3, 3), name="Filter")
di = te.reduce_axis((0, 3), name="di")
dj = te.reduce_axis((0, 3), name="dj")
Output = te.compute(
    (n - 2, n - 2),
    lambda i, j: te.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
    name="Output",
)
s = te.create_schedule(Output.op)
print(tl.lower(s, [Input, Filter, Output], simple_mode=True))
f = tl.build(s, [Input, Filter, Output], name="conv2d_symbolic")
for size in (3, 10, 21):
    iv = rng.random((size, size), dtype=np.float32)
    wv = rng.random((3, 3), dtype=np.float32)
    ov = np.zeros((size - 2, size - 2), np.float32)
    f(iv, wv, ov)
    ref = sum(iv[y:y + size - 2, x_:x_ + size - 2] * wv[y, x_] for y in range(3) for x_ in range(3))
    np.testing.assert_allclose(ov, ref, rtol=1e-5)
# an output of the wrong size for the input is refused, naming the argument and the dimension
try:
    f(np.zeros((10, 10), np.float32), np.zeros((3, 3), np.float32), np.zeros((9, 9), np.float32))
except ValueError as err:
    assert "Output" in str(err) and "n - 2" in str(err), err
    print("refused:", str(err).splitlines()[0])
else:
    raise AssertionError("an output of the wrong size was accepted")

# --- a split by a symbolic factor, given at the call
n = te.var("n")
factor = te.var("factor")
A = te.placeholder((n,), name="A")
B = te.compute((n,), lambda i: A[i] * 2 + 1, name="B")
s = te.create_schedule(B.op)
xo, xi = s[B].split(B.op.axis[0], factor=factor)
s[B].parallel(xo)
f = tl.build(s, [A, B, factor], name="split_symbolic")
av = rng.random(23, dtype=np.float32)
for fv in (1, 4, 7, 30):
    bv = np.zeros(23, np.float32)
    f(av, bv, factor=fv)
    np.testing.assert_allclose(bv, av * 2 + 1, rtol=1e-6)

print("all results match numpy")
