"""What the legality check (tensorlang.analysis) costs the tuner: conv2d + bias + relu (3 stages),
random candidate schedules from a tuner-like space (tile sizes, reduce split and order, where the
conv is computed, bias inlined or not, parallel / vectorize / unroll choices, a few illegal ones).

    python benchmarks/legality.py [--candidates 300] [--seed 0]

Rows (median and p90 over candidates, microseconds):
  cold model        the first check of a compute definition: domains, accesses, compute_flow
  new candidate     the template re-declared (new ops) and a loop structure never seen before:
                    what a tuner pays per candidate (the model comes from the cache, keyed by
                    its isl text, the verdict is computed)
  same candidate    check() again on the same schedule (the verdict cache)
  per primitive     the extra time of building the candidate with the per-step checks on,
                    divided by its number of primitives
  exact (all isl)   check(s, exact=True), every dependence mapped to time with isl (reference)
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import tensorlang as tl
from tensorlang.analysis import legality, model


def declare(N=1, C=64, H=56, W=56, F=64, K=3):
    X = tl.placeholder((N, C, H + K - 1, W + K - 1), name="X")  # padded input
    Wt = tl.placeholder((F, C, K, K), name="W")
    Bs = tl.placeholder((F,), name="bias")
    rc = tl.reduce_axis((0, C), name="rc")
    ry = tl.reduce_axis((0, K), name="ry")
    rx = tl.reduce_axis((0, K), name="rx")
    Y = tl.compute((N, F, H, W), lambda n, f, y, x: tl.sum(
        X[n, rc, y + ry, x + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="conv")
    Bz = tl.compute((N, F, H, W), lambda n, f, y, x: Y[n, f, y, x] + Bs[f], name="bias_add")
    Z = tl.compute((N, F, H, W), lambda n, f, y, x: tl.max(Bz[n, f, y, x], 0.0), name="relu")
    return Y, Bz, Z


def random_config(rng: random.Random) -> dict:
    return {
        "tf": rng.choice([1, 2, 4, 8, 16]), "ty": rng.choice([1, 2, 4, 7, 8, 14]),
        "tx": rng.choice([4, 7, 8, 14, 16, 28]), "trc": rng.choice([1, 2, 4, 8, 16]),
        "rorder": rng.randrange(4), "attach": rng.choice(["root", "fo", "yo", "xo"]),
        "bias": rng.choice(["inline", "at"]), "unroll": rng.random() < 0.5,
        "par_reduce": rng.random() < 0.1,  # an illegal candidate now and then
    }


def apply(cfg: dict, check: bool):
    """Build the candidate; returns (schedule, number of primitives, refused?)."""
    Y, Bz, Z = declare()
    s = tl.create_schedule(Z, check=check)
    steps = 0
    try:
        n, f, y, x = s[Z].op.axis
        fo, fi = s[Z].split(f, factor=cfg["tf"])
        yo, yi = s[Z].split(y, factor=cfg["ty"])
        xo, xi = s[Z].split(x, factor=cfg["tx"])
        s[Z].reorder(n, fo, yo, xo, fi, yi, xi)
        s[Z].parallel(fo)
        s[Z].vectorize(xi)
        steps += 7
        if cfg["bias"] == "inline":
            s[Bz].compute_inline()
        else:
            s[Bz].compute_at(s[Z], xo)
        steps += 1
        if cfg["attach"] != "root":
            s[Y].compute_at(s[Z], {"fo": fo, "yo": yo, "xo": xo}[cfg["attach"]])
            steps += 1
        cn, cf, cy, cx = s[Y].op.axis
        rc, ry, rx = s[Y].op.reduce_axis
        rco, rci = s[Y].split(rc, factor=cfg["trc"])
        red = [[rco, ry, rx, rci], [ry, rx, rco, rci], [rco, rci, ry, rx],
               [rci, rco, rx, ry]][cfg["rorder"]]
        s[Y].reorder(cn, cf, cy, *red, cx)
        s[Y].vectorize(cx)
        steps += 3
        if cfg["unroll"]:
            s[Y].unroll(red[-1])
            steps += 1
        if cfg["par_reduce"]:
            steps += 1
            s[Y].parallel(red[0])
    except tl.ScheduleError:
        return s, steps, True
    return s, steps, False


def us(xs) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"| {statistics.median(xs) * 1e6:10.1f} | {p90 * 1e6:10.1f} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    configs, seen = [], set()
    while len(configs) < args.candidates:
        cfg = random_config(rng)
        key = tuple(sorted(cfg.items()))
        if key not in seen:  # every candidate a loop structure never checked before
            seen.add(key)
            configs.append(cfg)

    # cold: the first check of the definition (caches emptied each time)
    cold = []
    for cfg in configs[:5]:
        s, _, _ = apply(cfg, check=False)
        model._CACHE.clear()
        legality._VERDICTS.clear()
        t = time.perf_counter()
        tl.analysis.check(s)
        cold.append(time.perf_counter() - t)

    fresh, again, exact, per_step = [], [], [], []
    illegal = 0
    for cfg in configs:
        s, steps, _ = apply(cfg, check=False)
        t = time.perf_counter()
        found = tl.analysis.check(s)
        fresh.append(time.perf_counter() - t)
        illegal += bool(found)
        t = time.perf_counter()
        tl.analysis.check(s)
        again.append(time.perf_counter() - t)
        t = time.perf_counter()
        exact_found = tl.analysis.check(s, exact=True)
        exact.append(time.perf_counter() - t)
        assert [v.kind for v in exact_found] == [v.kind for v in found]
    for cfg in configs:
        # per primitive: the same candidate built with and without the per-step checks
        # (a structure new to the step caches only the first time: measure that first time)
        legality._VERDICTS.clear()
        legality._CARRIED.clear()
        t = time.perf_counter()
        _, steps, _ = apply(cfg, check=True)
        on = time.perf_counter() - t
        t = time.perf_counter()
        apply(cfg, check=False)
        off = time.perf_counter() - t
        per_step.append(max(on - off, 0.0) / max(steps, 1))

    print(f"legality check, conv2d+bias+relu (3 stages), {len(configs)} distinct candidates "
          f"({illegal} illegal), seed {args.seed}")
    print("|                  | median us  |    p90 us  |")
    print("|---|---|---|")
    print(f"| cold model       {us(cold)}")
    print(f"| new candidate    {us(fresh)}")
    print(f"| same candidate   {us(again)}")
    print(f"| per primitive    {us(per_step)}")
    print(f"| exact (all isl)  {us(exact)}")


if __name__ == "__main__":
    main()
