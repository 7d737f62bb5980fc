# External tensor functions, as TVM's tutorial uses them: an operator whose body is a call into a
# library (a BLAS matmul), followed by an ordinary compute that reads its result, and an
# operator whose body is a Python function registered by the script. Checked against numpy.
import numpy as np

import tensorlang as tl
from tensorlang import te

n, l, m = 64, 128, 48
A = te.placeholder((n, l), name="A")
B = te.placeholder((l, m), name="B")
C = te.extern(
    (n, m),
    [A, B],
    lambda ins, outs: tl.call_packed("tl.cblas.matmul", ins[0], ins[1], outs[0], False, False),
    name="C",
)
bias = te.placeholder((m,), name="bias")
D = te.compute(C.shape, lambda i, j: C[i, j] + bias[j], name="D")
s = te.create_schedule(D.op)
print(tl.lower(s, [A, B, bias, D], simple_mode=True))
f = tl.build(s, [A, B, bias, D], "llvm", name="matmul_bias")

rng = np.random.default_rng(0)
a = rng.random((n, l), dtype=np.float32)
b = rng.random((l, m), dtype=np.float32)
bv = rng.random(m, dtype=np.float32)
d = np.zeros((n, m), np.float32)
f(a, b, bv, d)
np.testing.assert_allclose(d, a @ b + bv, rtol=1e-5)

# The consumer of the library call is scheduled as usual.
s = te.create_schedule(D.op)
io, ii = s[D].split(D.op.axis[0], factor=8)
s[D].parallel(io)
s[D].vectorize(D.op.axis[1])
f = tl.build(s, [A, B, bias, D], "llvm", name="matmul_bias_parallel")
d[:] = 0
f(a, b, bv, d)
np.testing.assert_allclose(d, a @ b + bv, rtol=1e-5)

# A Python function registered by the script and called from the kernel.
calls = []


@tl.register_func("tvm.contrib.my_tvm_addone")
def my_tvm_addone(x, y):
    calls.append((type(x).__name__, type(y).__name__))
    y[:] = x + 1


X = te.placeholder((n,), name="X")
Y = te.extern(X.shape, [X],
              lambda ins, outs: tl.call_packed("tvm.contrib.my_tvm_addone", ins[0], outs[0]),
              name="Y")
s = te.create_schedule(Y.op)
f = tl.build(s, [X, Y], "llvm", name="addone")
x = rng.random(n, dtype=np.float32)
y = np.zeros(n, np.float32)
f(x, y)
np.testing.assert_allclose(y, x + 1)
assert calls == [("NDArray", "NDArray")], calls  # numpy arrays with TVM's .numpy()

print("all results match numpy")
