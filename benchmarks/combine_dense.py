"""Does horizontal fusion of sibling dense layers pay on this machine? (issue 7: "horizontal
fusion of sibling ops reading the same input where it pays"; TVM's CombineParallelDense).

A transformer's Q, K and V projections read the same input: three [M, K] x [K, N] dense layers
(+ bias) or one [M, K] x [K, 3N] layer. Both are timed with the library's default schedule on
prepacked weights (what the graph runs), for several M (tokens).

    python benchmarks/combine_dense.py [--k 768] [--n 768] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

import tensorlang as tl

ops = tl.ops


def dense_time(m: int, k: int, n: int) -> float:
    """Median seconds of one [m, k] x [k, n] + bias with prepacked weights."""
    a_ph = tl.placeholder((m, k), name="A")
    bp_ph = tl.placeholder(((n + 15) // 16, k, 16), name="BP")
    bias_ph = tl.placeholder((n,), name="bias")
    y = ops.add(ops.matmul_prepacked(a_ph, bp_ph, n), bias_ph)
    f = tl.build(ops.default_schedule([y]), [a_ph, bp_ph, bias_ph, y])
    rng = np.random.default_rng(0)
    args = [tl.runtime.array(rng.standard_normal(s, dtype=np.float32))
            for s in ((m, k), ((n + 15) // 16, k, 16), (n,))]
    out = tl.runtime.empty((m, n))
    return f.time_evaluator(number=20, repeat=9)(*args, out).median


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--n", type=int, default=768)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    print(f"| M | 3 x [{a.k}, {a.n}] ms | 1 x [{a.k}, {3 * a.n}] ms | combined / separate |")
    print("|---|---|---|---|")
    for m in (1, 4, 16, 128):
        sep, comb = [], []
        for _ in range(a.rounds):  # interleaved: both see the same machine load
            sep.append(3 * dense_time(m, a.k, a.n))
            comb.append(dense_time(m, a.k, 3 * a.n))
        s, c = statistics.median(sep), statistics.median(comb)
        print(f"| {m} | {1e3 * s:.4f} | {1e3 * c:.4f} | {c / s:.2f} |")


if __name__ == "__main__":
    main()
