"""The differential graph fuzzer from the command line: random ONNX graphs of 3-25 nodes
(tests/graph/graph_fuzz_gen.py) imported, built (opt_level 2; every third seed also at
opt_level 0, every fourth also saved and loaded), run in a worker subprocess with a time limit,
and compared with onnxruntime.

    python benchmarks/fuzz_graphs.py --n 2000 [--seed S] [--workers 1] [--timeout 120]
        [--progress 100] [--minimize] [--verbose] [--save-failures DIR]

Prints the outcomes (ok, refused, invalid, WRONG, CRASH, HANG, ERROR), the refusals and
internal errors by kind, and each failure's seed with a command that replays it; --minimize
shrinks each failing graph (drops nodes and outputs while it fails the same way) and prints
it. Exits 1 on any WRONG, CRASH, HANG or ERROR."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "graph"))

import graph_fuzz as F
import onnx


class Tally:
    def __init__(self):
        self.outcomes: Counter = Counter()
        self.kinds: dict[str, Counter] = {F.REFUSED: Counter(), F.ERROR: Counter(),
                                          F.INVALID: Counter()}
        self.failures: list[dict] = []
        self.walls: list[float] = []
        self.example: dict[str, int] = {}  # kind -> the first seed of it

    def add(self, r: dict) -> None:
        self.outcomes[r["outcome"]] += 1
        if r["outcome"] in self.kinds:
            kind = r.get("kind") or r.get("why", "")[:100]
            self.kinds[r["outcome"]][kind] += 1
            self.example.setdefault(kind, r["seed"])
        if r["outcome"] in F.FAILURES:
            self.failures.append(r)
        if "wall_s" in r:
            self.walls.append(r["wall_s"])

    def table(self, elapsed: float) -> str:
        n = sum(self.outcomes.values())
        walls = self.walls or [0.0]
        head = (f"{n} graphs in {elapsed:.0f} s; per graph median "
                f"{statistics.median(walls):.2f} s, max {max(walls):.1f} s")
        lines = [head, "  ".join(f"{o}: {self.outcomes[o]}" for o in F.OUTCOMES)]
        for outcome, kinds in self.kinds.items():
            if kinds:
                lines.append(f"{outcome} by kind:")
                lines += [f"  {v:6d}  {k} (seed {self.example[k]})"
                          for k, v in kinds.most_common(20)]
        lines.append(f"failures: {len(self.failures)}")
        for r in self.failures:
            lines.append(f"  {r['outcome']:6s} seed {r['seed']}: {r.get('why', '')[:300]}")
            lines.append(f"         repro: {F.repro_command(r['seed'])}")
        return "\n".join(lines)


def report_failure(r: dict, a) -> None:
    print(f"[{r['outcome']}] seed {r['seed']}: {r.get('why', '')}", flush=True)
    if a.verbose and r.get("traceback"):
        print(r["traceback"], flush=True)
    if not (a.verbose or a.minimize or a.save_failures):
        return
    model, feeds = F.model_of(r["seed"])
    if a.verbose:
        print(F.describe(model, feeds), flush=True)
    if a.minimize:
        levels = F.variants(r["seed"])
        model, feeds = F.minimize(model, feeds, lambda m, f: F.outcome_in_subprocess(
            m, f, a.timeout, **levels))
        print(f"minimized ({len(model.graph.node)} nodes):\n{F.describe(model, feeds)}",
              flush=True)
    if a.save_failures:
        out = Path(a.save_failures)
        out.mkdir(parents=True, exist_ok=True)
        onnx.save(model, out / f"seed{r['seed']}.onnx")
        import numpy as np

        np.savez(out / f"seed{r['seed']}.npz", **feeds)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="graphs to check")
    ap.add_argument("--seed", type=int, default=0, help="first seed (graph i has seed S + i)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per graph")
    ap.add_argument("--progress", type=int, default=100, help="print the table every N")
    ap.add_argument("--minimize", action="store_true", help="shrink each failing graph")
    ap.add_argument("--verbose", action="store_true", help="print each failing graph")
    ap.add_argument("--save-failures", default="", help="write failing models (.onnx, .npz)")
    a = ap.parse_args(argv)
    tally, t0 = Tally(), time.perf_counter()
    print(f"fuzzing {a.n} graphs with {a.workers} worker(s), seeds {a.seed}..{a.seed + a.n - 1}",
          flush=True)
    jobs = [{"seed": a.seed + i} for i in range(a.n)]
    with F.Pool(a.workers, timeout=a.timeout) as pool:
        for r in pool.run(jobs):
            tally.add(r)
            if r["outcome"] in F.FAILURES:
                report_failure(r, a)
            if a.progress and sum(tally.outcomes.values()) % a.progress == 0:
                print(f"\n--- progress\n{tally.table(time.perf_counter() - t0)}\n", flush=True)
    print("\n" + tally.table(time.perf_counter() - t0), flush=True)
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
