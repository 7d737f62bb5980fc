"""Tutorial 03: deploy an ONNX model -- import, list its tuning tasks, build, save, load, run.

    python tutorials/03_deploy_onnx_model.py            # a small CNN, seconds
    python tutorials/03_deploy_onnx_model.py --resnet50 # the ResNet-50-shaped model

The model is built with onnx.helper (random weights) so the tutorial needs no download.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from tensorlang.graph import model_zoo

from tensorlang import graph, runtime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--resnet50", action="store_true")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tl-tutorial-03-"))

    # 1. an ONNX file, as a user would bring one
    model = model_zoo.resnet50() if a.resnet50 else model_zoo.small_cnn()
    onnx.save(model, work / "model.onnx")

    # 2. import: initializers become constants, shapes are inferred, static Shape chains fold
    g = graph.from_onnx(work / "model.onnx")
    print(f"imported {len(g.nodes)} nodes; operators: {g.op_counts()}")

    # 3. tuning: the tasks a tuner would work on (deduplicated, weighted by use count)
    tasks = graph.extract_tasks(g)
    for t in tasks[:3]:
        print("  task", t)
    # tuning them is one call, autotune.tune_tasks(tasks, n_trial=32, log_file="model.jsonl"),
    # after which graph.build(g, tuning_log="model.jsonl") uses the best records (the command
    # line: `tensorlang tune model.onnx --log model.jsonl`); here the default schedules are used

    # 4. build: every node lowered to a kernel; one native driver runs them all
    t0 = time.perf_counter()
    gm = graph.build(g, mode="graph")
    print(f"built in {time.perf_counter() - t0:.2f} s: {gm}")
    print(gm.build_report.memory.describe())

    x = np.random.default_rng(0).standard_normal(gm.input_info()["x"][0]).astype(np.float32)
    out = gm.run(x=x)
    name = gm.output_names[0]
    print(f"output {name}: {out[name].shape}, graph-mode latency "
          f"{gm.benchmark(number=3, repeat=2).min * 1e3:.2f} ms")
    for row in sorted(gm.profile(number=3, repeat=1), key=lambda r: -r["time_s"])[:3]:
        print(f"  slowest: {row['node']:24s} {row['op']:12s} {row['time_s'] * 1e6:9.1f} us")

    # 5. save, then load in a fresh process (no compiler, no tuning) and compare
    path = gm.save(work / "model.tlpkg")
    np.save(work / "x.npy", x)
    code = (f"import numpy as np; from tensorlang import runtime; "
            f"gm = runtime.load({str(path)!r}); "
            f"np.save({str(work / 'y.npy')!r}, gm.run(x=np.load({str(work / 'x.npy')!r}))"
            f"[{name!r}])")
    subprocess.run([sys.executable, "-c", code], check=True)
    same = np.array_equal(np.load(work / "y.npy"), out[name])
    print(f"fresh-process outputs identical: {same}")
    t0 = time.perf_counter()
    runtime.load(path)
    print(f"load time in this process: {(time.perf_counter() - t0) * 1e3:.1f} ms")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
