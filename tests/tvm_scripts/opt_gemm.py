# How to optimize GEMM on CPU, the steps of TVM's opt_gemm tutorial: default, blocking,
# vectorization, loop permutation, array packing. Each step's kernel is checked against numpy
# and timed with TVM's time_evaluator call form. (The write-cache and parallel steps, which tile
# C.op.axis after cache_write, are opt_gemm_write_cache.py.) Sizes are TVM's 1024 divided by 4,
# so that the script runs in seconds.
import numpy as np

import tensorlang as tl
from tensorlang import te

M = K = N = 256
dtype = "float32"
target = "llvm"
dev = tl.device(target, 0)

rng = np.random.default_rng(0)
a = rng.random((M, K), dtype=np.float32)
b = rng.random((K, N), dtype=np.float32)
answer = a @ b

k = te.reduce_axis((0, K), "k")
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
C = te.compute((M, N), lambda m, n: te.sum(A[m, k] * B[k, n], axis=k), name="C")

bn = 32
kfactor = 4
timings = {}


def check(s, args, name):
    func = tl.build(s, args, target=target, name=name)
    c = np.zeros((M, N), dtype=dtype)
    func(a, b, c)
    np.testing.assert_allclose(c, answer, rtol=1e-5)
    evaluator = func.time_evaluator(func.entry_name, dev, number=3)
    timings[name] = evaluator(a, b, c).mean
    print(f"{name}: {timings[name] * 1e3:.3f} ms, "
          f"{2 * M * N * K / timings[name] / 1e9:.1f} GFLOP/s")
    return func


# Default schedule.
s = te.create_schedule(C.op)
check(s, [A, B, C], "default")

# Blocking: tile the output, split the reduction, order the loops.
s = te.create_schedule(C.op)
mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
(kaxis,) = s[C].op.reduce_axis
ko, ki = s[C].split(kaxis, factor=kfactor)
s[C].reorder(mo, no, ko, ki, mi, ni)
check(s, [A, B, C], "blocking")

# Vectorization of the innermost loop.
s = te.create_schedule(C.op)
mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
(kaxis,) = s[C].op.reduce_axis
ko, ki = s[C].split(kaxis, factor=kfactor)
s[C].reorder(mo, no, ko, ki, mi, ni)
s[C].vectorize(ni)
check(s, [A, B, C], "vectorization")

# Loop permutation: ki outside mi, so B's row is reused across the rows of the block.
s = te.create_schedule(C.op)
mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
(kaxis,) = s[C].op.reduce_axis
ko, ki = s[C].split(kaxis, factor=kfactor)
s[C].reorder(mo, no, ko, mi, ki, ni)
s[C].vectorize(ni)
print(tl.lower(s, [A, B, C], simple_mode=True))
check(s, [A, B, C], "loop_permutation")

# Array packing: B rearranged into panels of bn columns, read contiguously (`N / bn` is a
# float, as in the tutorial: te.compute takes whole floats as extents).
packedB = te.compute((N / bn, K, bn), lambda bigN, k, littleN: B[k, bigN * bn + littleN],
                     name="packedB")
C = te.compute((M, N), lambda m, n: te.sum(A[m, k] * packedB[n // bn, k, n % bn], axis=k),
               name="C")
s = te.create_schedule(C.op)
mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
(kaxis,) = s[C].op.reduce_axis
ko, ki = s[C].split(kaxis, factor=kfactor)
s[C].reorder(mo, no, ko, mi, ki, ni)
s[C].vectorize(ni)
bigN, _, littleN = s[packedB].op.axis
s[packedB].vectorize(littleN)
s[packedB].parallel(bigN)
print(tl.lower(s, [A, B, C], simple_mode=True))
check(s, [A, B, C], "array_packing")

assert set(timings) == {"default", "blocking", "vectorization", "loop_permutation",
                        "array_packing"}
print("all results match numpy")
