# Getting started with tensor expressions, as a TVM user writes it: declare a vector add over a
# symbolic length, schedule it (default, parallel, split + parallel + vectorize), build each for
# the CPU, check against numpy and time it with TVM's time_evaluator call form.
import numpy as np

import tensorlang as tl
from tensorlang import te

tgt = "llvm"
dev = tl.device(tgt, 0)

n = te.var("n")
A = te.placeholder((n,), name="A")
B = te.placeholder((n,), name="B")
C = te.compute(A.shape, lambda i: A[i] + B(i), name="C")  # B(i): TVM's call syntax

s = te.create_schedule(C.op)
fadd = tl.build(s, [A, B, C], tgt, name="myadd")

size = 1024 + 3  # not a multiple of the vector width: the tails are exercised too
rng = np.random.default_rng(0)
a = rng.random(size, dtype=np.float32)
b = rng.random(size, dtype=np.float32)
c = np.zeros(size, dtype=C.dtype)
fadd(a, b, c)
np.testing.assert_allclose(c, a + b)


def evaluate_addition(func, log, name):
    timer = func.time_evaluator(func.entry_name, dev, number=10)
    mean_time = timer(a, b, c).mean
    print(f"{name}: {mean_time:.3e} s")
    log.append((name, mean_time))


log = []
evaluate_addition(fadd, log, "naive")

# Parallel: the one loop runs on the thread pool.
s[C].parallel(C.op.axis[0])
print(tl.lower(s, [A, B, C], simple_mode=True))
fadd_parallel = tl.build(s, [A, B, C], tgt, name="myadd_parallel")
c[:] = 0
fadd_parallel(a, b, c)
np.testing.assert_allclose(c, a + b)
evaluate_addition(fadd_parallel, log, "parallel")

# Split, parallelize the outer loop, vectorize the inner one.
s = te.create_schedule(C.op)
factor = 16
outer, inner = s[C].split(C.op.axis[0], factor=factor)
s[C].parallel(outer)
s[C].vectorize(inner)
text = str(tl.lower(s, [A, B, C], simple_mode=True))
print(text)
assert "parallel for" in text
fadd_vector = tl.build(s, [A, B, C], tgt, name="myadd_vector")
c[:] = 0
fadd_vector(a, b, c)
np.testing.assert_allclose(c, a + b)
evaluate_addition(fadd_vector, log, "vector")

for name, t in log:
    assert t > 0, name

# The generated code can be inspected as in TVM (get_source).
assert "define" in fadd_vector.get_source("ll")

# A second kernel in the same script, on a fixed shape: 2-D matrix add with a tiled schedule.
M, N = 37, 50
X = te.placeholder((M, N), name="X")
Y = te.placeholder((M, N), name="Y")
Z = te.compute((M, N), lambda i, j: X[i, j] * 2.0 + Y[i, j], name="Z")
s = te.create_schedule(Z.op)
xo, yo, xi, yi = s[Z].tile(Z.op.axis[0], Z.op.axis[1], x_factor=8, y_factor=16)
s[Z].parallel(xo)
s[Z].vectorize(yi)
f = tl.build(s, [X, Y, Z], target="llvm", name="axpy2d")
x = rng.random((M, N), dtype=np.float32)
y = rng.random((M, N), dtype=np.float32)
z = np.empty((M, N), np.float32)
f(x, y, z)
np.testing.assert_allclose(z, x * 2 + y, rtol=1e-6)

print("all results match numpy")
