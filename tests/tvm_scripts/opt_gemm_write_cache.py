# The last two steps of TVM's opt_gemm tutorial: a write cache (the block of C accumulated in a
# cache stage computed at C's block loop, then written out; C.op.axis still names s[C]'s loops
# after cache_write) and the parallel outer loop. Each kernel is checked against numpy and timed
# with TVM's time_evaluator call form; sizes are TVM's 1024 divided by 4.
import numpy as np

import tensorlang as tl
from tensorlang import te

M = K = N = 256
bn = 32
kfactor = 4
target = "llvm"
dev = tl.device(target, 0)

rng = np.random.default_rng(0)
a = rng.random((M, K), dtype=np.float32)
b = rng.random((K, N), dtype=np.float32)
answer = a @ b

k = te.reduce_axis((0, K), "k")
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
packedB = te.compute((N // bn, K, bn), lambda bigN, k, littleN: B[k, bigN * bn + littleN],
                     name="packedB")
C = te.compute((M, N), lambda m, n: te.sum(A[m, k] * packedB[n // bn, k, n % bn], axis=k),
               name="C")


def write_cache_schedule(parallel):
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    # C.op.axis still names the loops of s[C] (the copy-out stage) after cache_write
    mo, no, _, _ = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], no)
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kaxis, factor=kfactor)
    s[CC].reorder(ko, mc, ki, nc)
    s[CC].vectorize(nc)
    s[CC].unroll(ki)
    if parallel:
        s[C].parallel(mo)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    return s


for name, parallel in (("write_cache", False), ("parallel", True)):
    s = write_cache_schedule(parallel)
    text = str(tl.lower(s, [A, B, C], simple_mode=True))
    print(text)
    assert ("parallel for m.outer" in text) == parallel
    func = tl.build(s, [A, B, C], target=target, name=name)
    c = np.zeros((M, N), np.float32)
    func(a, b, c)
    np.testing.assert_allclose(c, answer, rtol=1e-5)
    mean = func.time_evaluator(func.entry_name, dev, number=3)(a, b, c).mean
    print(f"{name}: {mean * 1e3:.3f} ms, {2 * M * N * K / mean / 1e9:.1f} GFLOP/s")

print("all results match numpy")
