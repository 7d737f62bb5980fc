"""Tutorial 01: declare a computation, schedule it, look at the loops, build, run and time it.

    python tutorials/01_compute_and_schedule.py [--size 256]

tensorlang separates *what* a kernel computes (a tensor expression) from *how* it computes it
(a schedule). The same declaration gives a naive triple loop or a tiled, vectorized, parallel
kernel depending on the schedule, and both compute the same numbers.
"""

from __future__ import annotations

import argparse

import numpy as np

import tensorlang as tl


def declare(M: int, N: int, K: int):
    """1. What: C[i, j] = sum_k A[i, k] * B[k, j]."""
    A = tl.placeholder((M, K), dtype="float32", name="A")
    B = tl.placeholder((K, N), dtype="float32", name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def schedule(C):
    """2. How: compute C in 8 x 32 tiles, accumulate each tile in a local buffer (cache_write)
    whose innermost loop runs as 16-wide vector operations, and spread the tile rows over the
    cores."""
    s = tl.create_schedule(C)
    CL = s.cache_write(C, "local")             # C.local accumulates, C gets the finished tile
    i, j = s[C].op.axis                        # s[C].op: the stage's op after cache_write
    io, jo, _ii, ji = s[C].tile(i, j, 8, 32)
    s[CL].compute_at(s[C], jo)                 # one 8 x 32 accumulator tile per (io, jo)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(ck, factor=4)
    cjo, cji = s[CL].split(cj, factor=16)
    s[CL].reorder(ko, ki, ci, cjo, cji)        # k outside the tile: the tile stays in registers
    s[CL].vectorize(cji)
    s[CL].unroll(ki)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s


def main(size: int = 256) -> None:
    M = N = K = size
    A, B, C = declare(M, N, K)

    # The default schedule: the loops in declaration order.
    s0 = tl.create_schedule(C)
    print("== default schedule ==")
    print(tl.lower(s0, [A, B, C], name="matmul_naive"))

    s = schedule(C)
    print("\n== the recorded steps (what a tuning record stores) ==")
    print(s.trace)
    print("\n== scheduled loop IR ==")
    print(tl.lower(s, [A, B, C], name="matmul"))

    # 3. Build: loop IR -> LLVM IR -> machine code for this CPU, wrapped in a checked call.
    naive = tl.build(s0, [A, B, C], name="matmul_naive")
    fast = tl.build(s, [A, B, C], name="matmul")

    # 4. Run on numpy arrays and check against numpy.
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype("float32")
    b = rng.uniform(-1, 1, (K, N)).astype("float32")
    c = np.zeros((M, N), "float32")
    fast(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    c0 = np.zeros((M, N), "float32")
    naive(a, b, c0)
    np.testing.assert_allclose(c0, c, rtol=1e-4, atol=1e-4)
    print("\nresults match numpy")

    # 5. Time them. numpy first: its OpenBLAS threads keep spinning for a while after a call,
    # so our kernels are timed after a pause (right after numpy they would share the cores).
    flops = 2.0 * M * N * K
    t_np = min(__import__("timeit").repeat(lambda: a @ b, number=3, repeat=3)) / 3
    __import__("time").sleep(0.2)
    for name, f in (("naive", naive), ("scheduled", fast)):
        t = f.time_evaluator(number=3, repeat=3)(a, b, c)
        print(f"{name:>9}: {t.median * 1e3:8.3f} ms  {flops / t.median / 1e9:7.2f} GFLOP/s")
    print(f"{'numpy':>9}: {t_np * 1e3:8.3f} ms  {flops / t_np / 1e9:7.2f} GFLOP/s")

    # The generated code can be inspected: fast.get_source("ll") / fast.get_source("asm").
    asm = fast.get_source("asm")
    print(f"\nthe kernel's assembly has {asm.count('zmm')} uses of 512-bit zmm registers"
          if "zmm" in asm else "\n(no AVX-512 on this CPU: narrower vectors were used)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    main(ap.parse_args().size)
