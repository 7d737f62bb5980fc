"""What a deployment pays to start: import times and imported modules, each measured in fresh
processes (median of --runs), with numpy already imported (every case needs it).

    python benchmarks/import_time.py [--runs 7]

Rows: ``import tensorlang``; ``import tensorlang.runtime``; loading and running a saved kernel
(``runtime.load_module`` + one call, a parallel 1-D add: the thread pool loads too) and a saved
model (``runtime.load`` + one ``run``), each including the runtime's import. "modules" counts
every module the step imported, "tensorlang" those of tensorlang; "compiler" lists imported
modules a deployment must not need (tensorlang outside errors/version/runtime, islpy, llvmlite,
xgboost). The kernel cache is the one configured (TENSORLANG_CACHE_DIR or the default), warmed
by the first run, as on a machine that has run the model before.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    case, d = sys.argv[1], sys.argv[2]
    before = set(sys.modules)
    t0 = time.perf_counter()
    if case == "import tensorlang":
        import tensorlang
    elif case == "import tensorlang.runtime":
        import tensorlang.runtime
    elif case == "load + run kernel":
        from tensorlang import runtime
        f = runtime.load_module(d + "/add.tlm")
        a = np.ones(4096, np.float32)
        c = np.empty_like(a)
        f(a, a, c)
    else:
        from tensorlang import runtime
        gm = runtime.load(d + "/model.tlpkg")
        gm.run(x=np.ones(4096, np.float32))
    elapsed = time.perf_counter() - t0
    new = set(sys.modules) - before
    allowed = ("tensorlang", "tensorlang.errors", "tensorlang.version", "tensorlang.runtime")
    compiler = sorted(m for m in new if m.split(".")[0] in ("islpy", "llvmlite", "xgboost")
                      or (m.startswith("tensorlang") and m not in allowed
                          and not m.startswith("tensorlang.runtime.")))
    print(json.dumps({"s": elapsed, "modules": len(new),
                      "tensorlang": sum(m.startswith("tensorlang") for m in new),
                      "compiler": compiler}))
""")
CASES = ["import tensorlang", "import tensorlang.runtime", "load + run kernel", "load + run model"]


def _save_artifacts(d: Path) -> None:
    import tensorlang as tl
    from tensorlang import graph

    n = 4096
    A = tl.placeholder((n,), name="A")
    B = tl.placeholder((n,), name="B")
    C = tl.compute((n,), lambda i: A[i] + B[i], name="C")
    s = tl.create_schedule(C)
    outer, _ = s[C].split(C.op.axis[0], factor=512)
    s[C].parallel(outer)
    tl.build(s, [A, B, C], name="add").save(d / "add.tlm")
    b = graph.Builder("deploy")
    x = b.input("x", (n,))
    y = b.relu(b.add(x, b.const(np.linspace(-1, 1, n, dtype=np.float32), name="bias")))
    graph.build(b.build(y)).save(d / "model.tlpkg")


def _measure(case: str, d: Path, runs: int) -> dict:
    results = []
    for _ in range(runs + 1):  # the first run warms the file cache and the kernel cache
        r = subprocess.run([sys.executable, "-c", CHILD, case, str(d)], capture_output=True,
                           text=True, timeout=300, check=False)
        if r.returncode != 0:
            raise SystemExit(f"{case}: the child failed:\n{r.stderr}")
        results.append(json.loads(r.stdout.strip().splitlines()[-1]))
    timed = results[1:]
    last = timed[-1]
    return {"ms": 1e3 * statistics.median(x["s"] for x in timed), **last}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="fresh processes per row (median)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tl-import-time-") as tmp:
        d = Path(tmp)
        _save_artifacts(d)
        print(f"{'step':<28}{'median ms':>10}{'modules':>9}{'tensorlang':>12}  compiler modules")
        for case in CASES:
            row = _measure(case, d, args.runs)
            compiler = ", ".join(row["compiler"][:6]) or "none"
            more = len(row["compiler"]) - 6
            compiler += f" (+{more} more)" if more > 0 else ""
            print(f"{case:<28}{row['ms']:>10.1f}{row['modules']:>9}{row['tensorlang']:>12}  "
                  f"{compiler}")


if __name__ == "__main__":
    main()
