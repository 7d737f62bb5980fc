"""The differential schedule fuzzer from the command line: random schedules of 20 computes
(tests/tensorlang/schedule_fuzz_cases.py), each accepted one built (LLVM O3), run in a worker
subprocess with a time limit, and compared with numpy.

    python benchmarks/fuzz_schedules.py --n 10000 --workers 2 [--seed S] [--cases a,b]
        [--timeout 60] [--progress 500] [--minimize] [--verbose]

Prints a table per case (accepted, refused, wrong, crash, hang, error), the legality check's
time per schedule (median, p99: every per-step check plus the check at tl.lower), the build and
run times, the refusals by kind, and each failure's (case, seed) with a command that replays it.
Every --progress schedules it prints the table so far (a long run can be read while it goes).
Exits 1 on any WRONG, CRASH, HANG or ERROR."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "tensorlang"))

import schedule_fuzz as F
from schedule_fuzz_cases import CASES

COLUMNS = ("ok", "refused", "WRONG", "CRASH", "HANG", "ERROR")


def pct(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def ms(x: float) -> str:
    return f"{x * 1e3:8.1f}"


class Tally:
    def __init__(self):
        self.by_case: dict[str, Counter] = defaultdict(Counter)
        self.refusals: Counter = Counter()  # at a primitive, by kind
        self.lower_refusals: Counter = Counter()
        self.times: dict[str, list] = defaultdict(list)
        self.failures: list[dict] = []
        self.n = 0

    def add(self, r: dict) -> None:
        self.n += 1
        self.by_case[r["case"]][r["outcome"]] += 1
        self.refusals.update(r.get("refusals") or [])
        if r["outcome"] == F.REFUSED:
            self.lower_refusals[r["why"]] += 1
        self.times["legality_call_s"] += r.get("legality_calls") or []
        if r["outcome"] == F.OK:
            for k in ("legality_s", "lower_s", "build_s", "run_s", "wall_s"):
                self.times[k].append(r[k])
        if r["outcome"] in F.FAILURES:
            self.failures.append(r)

    def table(self, elapsed: float) -> str:
        lines = [f"{'case':24s}" + "".join(f"{c:>9s}" for c in COLUMNS)]
        total = Counter()
        for case in sorted(self.by_case):
            row = self.by_case[case]
            total.update(row)
            lines.append(f"{case:24s}" + "".join(f"{row[c]:9d}" for c in COLUMNS))
        lines.append(f"{'total':24s}" + "".join(f"{total[c]:9d}" for c in COLUMNS))
        acc = len(self.times["legality_s"])
        lines.append(f"\n{self.n} schedules in {elapsed:.0f} s ({self.n / max(elapsed, 1e-9):.1f}"
                     f"/s); per accepted schedule ({acc}), ms:      median      p99")
        for key, label in (("legality_s", "legality check (all steps + at lower)"),
                           ("legality_call_s", "  one check (a step or at lower; all jobs)"),
                           ("lower_s", "tl.lower (legality check included)"),
                           ("build_s", "build (LLVM O3)"), ("run_s", "run"),
                           ("wall_s", "whole job (draw to compare)")):
            xs = self.times[key]
            lines.append(f"  {label:44s}{ms(statistics.median(xs) if xs else float('nan'))}"
                         f" {ms(pct(xs, 0.99))}")
        lines.append("\nrefused at a primitive (skipped, the draw goes on), top kinds:")
        lines += [f"  {v:7d}  {k}" for k, v in self.refusals.most_common(12)]
        lines.append("refused at tl.lower (the whole schedule), by kind:")
        lines += [f"  {v:7d}  {k}" for k, v in self.lower_refusals.most_common(12)]
        lines.append(f"failures: {len(self.failures)}")
        for r in self.failures:
            lines.append(f"  {r['outcome']:6s} {r['case']} seed {r['seed']}: {r.get('why')}")
            lines.append(f"         repro: {F.repro_command(r['case'], r['seed'])}")
        return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="schedules to check")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="first seed (job i has seed S + i)")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schedule")
    ap.add_argument("--progress", type=int, default=500, help="print the table every N")
    ap.add_argument("--minimize", action="store_true", help="shorten each failing trace")
    ap.add_argument("--verbose", action="store_true", help="print every schedule's trace")
    a = ap.parse_args(argv)
    cases = [c for c in a.cases.split(",") if c] or sorted(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case {unknown[0]!r}; cases: {', '.join(sorted(CASES))}")
    tally, t0 = Tally(), time.perf_counter()
    print(f"fuzzing {a.n} schedules of {len(cases)} cases with {a.workers} worker(s), seeds "
          f"{a.seed}..{a.seed + a.n - 1}", flush=True)
    with F.Pool(a.workers, timeout=a.timeout) as pool:
        for r in pool.run(F.jobs_for(cases, a.n, a.seed)):
            tally.add(r)
            if a.verbose or r["outcome"] in F.FAILURES:
                print(f"[{r['outcome']}] {r['case']} seed {r['seed']}: {r.get('why', '')}\n"
                      f"{F.format_trace(r)}", flush=True)
            if a.progress and tally.n % a.progress == 0 and tally.n < a.n:
                print(f"\n--- progress: {tally.n}/{a.n}\n"
                      f"{tally.table(time.perf_counter() - t0)}\n", flush=True)
    print("\n" + tally.table(time.perf_counter() - t0), flush=True)
    if a.minimize:
        for r in tally.failures:
            steps = F.minimize(r["case"], r["seed"], a.timeout)
            print(f"\nminimal trace of {r['case']} seed {r['seed']} ({r['outcome']}):\n"
                  f"{F.format_steps(steps)}", flush=True)
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
