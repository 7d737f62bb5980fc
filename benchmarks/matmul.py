"""Matmul C = A @ B (float32) through the public API with a hand-written schedule, against numpy
(OpenBLAS) in the same process, interleaved rounds, both cores. Prints a ratio table.

    python benchmarks/matmul.py [--sizes 1024,512] [--rounds 7]

numpy's OpenBLAS picks its kernel from OPENBLAS_CORETYPE when set (this workplace sets it to an
older core type for safety): for a fair comparison run with
`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/matmul.py`; the table prints
which OpenBLAS kernel ran.

The schedule (what DESIGN.md §3 measured to reach OpenBLAS):
  - B is packed into panels PB[j // 64, k, j % 64] (contiguous 64-wide rows per k);
  - each (64-column panel, 6-row block) of C is accumulated in a 6 x 64 register tile
    (cache_write + compute_at: 6 rows x 4 zmm vectors = 24 accumulators), A broadcast per row;
  - the panel loop is parallel, the row-block loop inside it reuses the panel from L2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import tensorlang as tl

MR, NR, VEC = 6, 64, 16


def matmul_schedule(M: int, N: int, K: int, mr: int = MR, nr: int = NR):
    A = tl.placeholder((M, K), dtype="float32", name="A")
    B = tl.placeholder((K, N), dtype="float32", name="B")
    PB = tl.compute((N // nr, K, nr), lambda jo, k, ji: B[k, jo * nr + ji], name="PB")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * PB[j // nr, k, j % nr], axis=k),
                   name="C")
    s = tl.create_schedule(C)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=nr)
    io, ii = s[C].split(i, factor=mr)
    s[C].reorder(jo, io, ii, ji)
    s[C].vectorize(ji)
    s[C].parallel(jo)
    s[CC].compute_at(s[C], io)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    cjo, cji = s[CC].split(cj, factor=VEC)
    s[CC].reorder(ck, ci, cjo, cji)
    s[CC].unroll(ci)
    s[CC].unroll(cjo)
    s[CC].vectorize(cji)
    pjo, _, pji = s[PB].op.axis
    s[PB].vectorize(pji)
    s[PB].parallel(pjo)
    return s, [A, B, C]


def _median_time(fn, number: int) -> float:
    """Median seconds per call over `number` calls, after a pause: OpenBLAS's worker threads
    keep spinning for a while after each call and would otherwise steal the cores from whichever
    peer runs next."""
    time.sleep(0.2)
    fn()
    times = []
    for _ in range(number):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def openblas_kernel() -> str:
    try:
        from threadpoolctl import threadpool_info

        for info in threadpool_info():
            if info.get("internal_api") == "openblas":
                return f"{info.get('architecture')} x{info.get('num_threads')}"
    except ImportError:
        pass
    return f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"


def bench(n: int, rounds: int) -> dict:
    s, args = matmul_schedule(n, n, n)
    t0 = time.perf_counter()
    f = tl.build(s, args, name=f"matmul{n}")
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    f(a, b, c)
    ref = a @ b
    err = float(np.abs(c - ref).max() / np.abs(ref).max())
    number = max(5, int(4e10 / (2 * n**3)))  # about 0.1 s per peer per round
    ours, theirs = [], []
    for _ in range(rounds):  # interleaved: both see the same machine load
        ours.append(_median_time(lambda: f(a, b, c), number))
        theirs.append(_median_time(lambda: np.matmul(a, b), number))
    flop = 2.0 * n**3
    t_ours, t_np = statistics.median(ours), statistics.median(theirs)
    return {"n": n, "ours": flop / t_ours / 1e9, "numpy": flop / t_np / 1e9,
            "ratio": t_np / t_ours, "err": err, "build": build_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,512")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    print(f"tensorlang {tl.__version__}; threads {tl.runtime.get_num_threads()}; "
          f"numpy OpenBLAS {openblas_kernel()}")
    print(f"{'size':>6} | {'tensorlang GFLOP/s':>18} | {'numpy GFLOP/s':>13} | "
          f"{'ratio (numpy t / ours t)':>24} | {'rel err':>8} | build s")
    for n in (int(x) for x in a.sizes.split(",")):
        r = bench(n, a.rounds)
        print(f"{r['n']:>6} | {r['ours']:>18.1f} | {r['numpy']:>13.1f} | {r['ratio']:>24.2f} | "
              f"{r['err']:>8.1e} | {r['build']:.2f}")


if __name__ == "__main__":
    main()
