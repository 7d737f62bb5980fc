"""Cold build time of whole models and where it goes: each model imported and built in a fresh
process with an empty kernel cache, the time of each pipeline part summed over its kernels.

    python benchmarks/build_time.py MODEL.onnx [MODEL.onnx ...] [--runs 2] [--threads 1]

Parts: the legality analysis (`analyze`, of which `definition_for` builds each compute
definition's dependences), each lowering pass, the LLVM IR emission (`emit_llvm_ir`), LLVM's
optimizer and code generation (`compile_ir`) and the manifest. To compare two checkouts, run
the script with each one's Python (their own editable installs) one after the other on a quiet
machine: no peer runs here, the figures are this checkout's own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import collections, importlib, json, sys, time
    parts = collections.Counter()

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                parts[name] += time.perf_counter() - t
        return wrapper

    lower = importlib.import_module("tensorlang.lower")
    lower.PASSES = tuple((n, timed(n, f)) for n, f in lower.PASSES)
    build = importlib.import_module("tensorlang.build")
    build.manifest_of = timed("manifest", build.manifest_of)
    llvm_ir = importlib.import_module("tensorlang.codegen.llvm_ir")
    llvm_ir.emit_llvm_ir = timed("emit_llvm_ir", llvm_ir.emit_llvm_ir)
    target = importlib.import_module("tensorlang.codegen.target")
    target.compile_ir = timed("compile_ir", target.compile_ir)
    legality = importlib.import_module("tensorlang.analysis.legality")
    legality.definition_for = timed("definition_for", legality.definition_for)
    legality.analyze = timed("analyze", legality.analyze)
    from tensorlang import graph
    t = time.perf_counter()
    g = graph.from_onnx(sys.argv[1])
    gm = graph.build(g)
    parts["total"] = time.perf_counter() - t
    print(json.dumps(dict(parts)))
""")


def build_once(model: str, threads: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="tl-build-time-") as cache:
        env = dict(os.environ, TENSORLANG_CACHE_DIR=cache,
                   TENSORLANG_NUM_THREADS=str(threads))
        out = subprocess.run([sys.executable, "-c", CHILD, model], env=env, check=True,
                             capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    for model in args.models:
        runs = [build_once(model, args.threads) for _ in range(args.runs)]
        names = sorted({k for r in runs for k in r}, key=lambda k: -runs[0].get(k, 0))
        print(f"{os.path.basename(model)}: median of {args.runs} cold builds, seconds")
        for name in names:
            print(f"  {name:22s} {statistics.median(r.get(name, 0.0) for r in runs):7.2f}")


if __name__ == "__main__":
    main()
