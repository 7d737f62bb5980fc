# TVM's tutorial idioms with ONLY the import lines changed (`import tvm` -> `import tensorlang
# as tvm`, `from tvm... import` -> `from tensorlang... import`): tvm.target.Target and its
# kind.name, tvm.nd.array / empty with .numpy() / .asnumpy() / copyto, tvm.testing.assert_allclose,
# tvm.tir.Select / const / if_then_else, te.scan's one-state list form, extern ops calling
# tvm.contrib.cblas.matmul and a registered Python function (given NDArrays, as in TVM),
# export_library into utils.tempdir() and tvm.runtime.load_module, build(target_host=),
# tvm.runtime.enabled. Checked against numpy.
import numpy as np

import tensorlang as tvm
import tensorlang.testing
from tensorlang import te
from tensorlang.contrib import cblas, utils

tgt = tvm.target.Target(target="llvm", host="llvm")
dev = tvm.device(tgt.kind.name, 0)
assert tvm.runtime.enabled("llvm")

# getting started: vector add over a symbolic length, saved and loaded again
n = te.var("n")
A = te.placeholder((n,), name="A")
B = te.placeholder((n,), name="B")
C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
s = te.create_schedule(C.op)
outer, inner = s[C].split(C.op.axis[0], factor=4)
s[C].parallel(outer)
s[C].vectorize(inner)
fadd = tvm.build(s, [A, B, C], tgt, name="myadd")
a = tvm.nd.array(np.random.uniform(size=1027).astype(A.dtype), dev)
b = tvm.nd.array(np.random.uniform(size=1027).astype(B.dtype), dev)
c = tvm.nd.array(np.zeros(1027, dtype=C.dtype), dev)
fadd(a, b, c)
tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
evaluator = fadd.time_evaluator(fadd.entry_name, dev, number=10, repeat=2, min_repeat_ms=1)
print(f"vector add: {evaluator(a, b, c).mean:f} s")

temp = utils.tempdir()
fadd.export_library(temp.relpath("myadd_pack.so"))
fadd2 = tvm.runtime.load_module(temp.relpath("myadd_pack.so"))
c2 = tvm.nd.empty((1027,), "float32", dev)
fadd2["myadd"](a, b, c2)
tvm.testing.assert_allclose(c2.asnumpy(), a.asnumpy() + b.asnumpy())

# tvm.tir helpers in a compute, built inside a target scope with TVM's target_host
m = te.size_var("m")
X = te.placeholder((m, 16), name="X")
R = te.compute(X.shape, lambda i, j: tvm.tir.Select(X[i, j] > 0, X[i, j],
                                                     tvm.tir.const(0, "float32")), name="R")
Y = te.compute(X.shape, lambda i, j: tvm.tir.if_then_else(
    tvm.tir.all(i > 0, j > 0), R[i - 1, j - 1], tvm.tir.FloatImm("float32", 0.5)), name="Y")
s = te.create_schedule(Y.op)
s[R].compute_inline()
with tvm.target.Target("llvm"):
    f = tvm.build(s, [X, Y], target_host="llvm")
x_np = np.random.uniform(-1, 1, size=(7, 16)).astype("float32")
y = tvm.nd.empty((7, 16), "float32")
f(tvm.nd.array(x_np), y)
ref = np.full((7, 16), 0.5, "float32")
ref[1:, 1:] = np.maximum(x_np, 0)[:-1, :-1]
tvm.testing.assert_allclose(y.numpy(), ref)

# te.scan with TVM's list arguments (one state)
m = te.var("m")
n = te.var("n")
X = te.placeholder((m, n), name="X")
s_state = te.placeholder((m, n))
s_init = te.compute((1, n), lambda _, i: X[0, i])
s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
s_scan = tvm.te.scan([s_init], [s_update], [s_state], inputs=[X])
s = te.create_schedule(s_scan.op)
fscan = tvm.build(s, [X, s_scan], "llvm", name="myscan")
x_np = np.random.uniform(size=(5, 33)).astype("float32")
out = tvm.nd.array(np.zeros((5, 33), "float32"), dev)
fscan(tvm.nd.array(x_np, dev), out)
tvm.testing.assert_allclose(out.numpy(), np.cumsum(x_np, axis=0), rtol=1e-5)

# extern ops: BLAS by TVM's packed-function name and by contrib.cblas, then a Python function
n, l, m = 16, 24, 8
A = te.placeholder((n, l), name="A")
B = te.placeholder((l, m), name="B")
C = te.extern((n, m), [A, B],
              lambda ins, outs: tvm.tir.call_packed("tvm.contrib.cblas.matmul", ins[0], ins[1],
                                                    outs[0], False, False), name="C")
D = te.compute(C.shape, lambda i, j: C[i, j] + 1.0, name="D")
a = tvm.nd.array(np.random.uniform(size=(n, l)).astype("float32"), dev)
b = tvm.nd.array(np.random.uniform(size=(l, m)).astype("float32"), dev)
d = tvm.nd.array(np.zeros((n, m), "float32"), dev)
tvm.build(te.create_schedule(D.op), [A, B, D], "llvm")(a, b, d)
tvm.testing.assert_allclose(d.numpy(), a.numpy() @ b.numpy() + 1, rtol=1e-5)
Bt = te.placeholder((m, l), name="Bt")
C = cblas.matmul(A, Bt, False, True)
c = tvm.nd.empty((n, m), "float32")
tvm.build(te.create_schedule(C.op), [A, Bt, C], "llvm")(a, tvm.nd.array(b.numpy().T), c)
tvm.testing.assert_allclose(c.numpy(), a.numpy() @ b.numpy(), rtol=1e-5)


@tvm.register_func("tvm.contrib.my_tvm_addone")
def my_tvm_addone(x, y):
    tvm.nd.array(x.numpy() + 1).copyto(y)


A = te.placeholder((10,), name="A")
B = te.extern(A.shape, [A], lambda ins, outs: tvm.tir.call_packed(
    "tvm.contrib.my_tvm_addone", ins[0], outs[0]), name="C")
f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
a = tvm.nd.array(np.random.uniform(size=(10,)).astype(A.dtype), dev)
b = tvm.nd.array(np.zeros((10,), dtype=B.dtype), dev)
f(a, b)
tvm.testing.assert_allclose(b.numpy(), a.numpy() + 1, rtol=1e-5)
print("all results match numpy")
