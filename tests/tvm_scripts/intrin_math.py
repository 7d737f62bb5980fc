# TVM's "Intrinsics and Math Functions" tutorial on the CPU: a C math function called by name
# (tir.call_pure_extern), the same through the math function te.exp and through
# call_intrin's op name, and the tutorial's custom intrinsic (register_op_attr /
# register_intrin_lowering), which is refused with the way to do it here. Checked with numpy.
import numpy as np

import tensorlang as tvm
from tensorlang import te
from tensorlang.ir import register_intrin_lowering, register_op_attr

n = te.var("n")
A = te.placeholder((n,), name="A")
B = te.compute(A.shape, lambda i: tvm.call_pure_extern("float32", "expf", A[i]), name="B")
s = te.create_schedule(B.op)
num_thread = 8  # the tutorial binds threads; on the CPU: parallel outer, vectorized inner
bx, tx = s[B].split(B.op.axis[0], factor=num_thread)
s[B].parallel(bx)
s[B].vectorize(tx)
f = tvm.build(s, [A, B], "llvm", name="myexp")
print(tvm.lower(s, [A, B], simple_mode=True))

a = np.random.default_rng(0).uniform(-2, 2, 53).astype("float32")
b = np.zeros_like(a)
f(a, b)
np.testing.assert_allclose(b, np.exp(a), rtol=1e-6)

# the unified intrinsic: te.exp, lowered to LLVM's exp
B = te.compute(A.shape, lambda i: te.exp(A[i]), name="B")
s = te.create_schedule(B.op)
f = tvm.build(s, [A, B], "llvm", name="myexp")
f(a, b)
np.testing.assert_allclose(b, np.exp(a), rtol=1e-6)

# the intrinsic by its op name
B = te.compute(A.shape, lambda i: tvm.call_intrin("float32", "tir.log", A[i] * A[i] + 1.0),
               name="B")
s = te.create_schedule(B.op)
f = tvm.build(s, [A, B], "llvm", name="mylog")
f(a, b)
np.testing.assert_allclose(b, np.log(a * a + 1), rtol=1e-6)


# the tutorial's new intrinsic "tir.mylog" and its lowering rule: not supported here
def my_cuda_mylog_rule(op):
    return tvm.call_pure_extern("float32", "logf", op.args[0])


for register in (lambda: register_op_attr("tir.mylog", "TCallEffectKind", 1),
                 lambda: register_intrin_lowering("tir.mylog", target="llvm",
                                                  f=my_cuda_mylog_rule, level=99)):
    try:
        register()
    except NotImplementedError as e:
        assert "tl.call_pure_extern" in str(e), e
        print("refused:", e)
    else:
        raise AssertionError("registering an intrinsic was accepted")

# what to write instead: the C function, per element
B = te.compute(A.shape, lambda i: tvm.call_pure_extern("float32", "logf", A[i] * A[i] + 1.0),
               name="B")
s = te.create_schedule(B.op)
f = tvm.build(s, [A, B], "llvm", name="mylog")
f(a, b)
np.testing.assert_allclose(b, np.log(a * a + 1), rtol=1e-6)
print("all results match numpy")
