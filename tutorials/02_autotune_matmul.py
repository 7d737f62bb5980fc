"""Tutorial 02: auto-tune a matmul, then deploy from the tuning log.

    python tutorials/02_autotune_matmul.py [--size 512] [--trials 64]

(CI runs it with TL_TUTORIAL_TRIALS=6 and TL_TUTORIAL_SIZE=64: tests/autotune/test_tutorial.py.)

1. The template. `matmul` is registered under "matmul" in tensorlang.autotune.templates: it
   computes with tl.ops.matmul and schedules with the operator library's register-tile
   schedule, whose knobs are the tile (rows x columns), the reduction order, row unrolling,
   the loop order of row tiles and column panels, and parallelism; its fallback config is the
   library's default schedule. Your own template looks like this:

       @autotune.template("my_op")
       def my_op(n):
           cfg = autotune.get_config()
           ...
           cfg.define_split("tile", i, num_outputs=2)
           io, ii = cfg["tile"].apply(s, C, i)
           return s, [A, C]

2. A task is a template applied to concrete arguments; its space is the product of the knobs.
3. The XGBTuner measures batches of configs (built in parallel processes, each run in an isolated
   process), fits a cost model on them and picks the next batch by simulated annealing over the
   model's predictions. The progress bar shows trials, best GFLOP/s and errors; every
   measurement is appended to a JSON-lines log.
4. apply_history_best(log) makes the template build the best config of the log.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import tensorlang as tl
from tensorlang import autotune


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=int(os.environ.get("TL_TUTORIAL_SIZE", "512")))
    ap.add_argument("--trials", type=int,
                    default=int(os.environ.get("TL_TUTORIAL_TRIALS", "64")))
    ap.add_argument("--log", default=None, help="tuning log (default: a temporary file)")
    a = ap.parse_args()
    n = a.size
    log = a.log or os.path.join(tempfile.mkdtemp(), "matmul.jsonl")

    # 2. the task and its space
    task = autotune.create_task("matmul", args=(n, n, n, "float32"), target="llvm")
    print(task)
    print(task.config_space)

    # 3. tune: builds on 2 processes, runs isolated, progress bar, log appended per batch
    tuner = autotune.XGBTuner(task, batch_size=8, seed=0)
    option = autotune.measure_option(
        builder=autotune.LocalBuilder(n_parallel=2),
        runner=autotune.LocalRunner(number=3, repeat=3, min_repeat_ms=20, timeout=10))
    t0 = time.perf_counter()
    try:
        tuner.tune(n_trial=a.trials, measure_option=option,
                   callbacks=[autotune.progress_bar(), autotune.log_to_file(log)])
    finally:
        option.close()
    print(f"tuned {tuner.trials} configs in {time.perf_counter() - t0:.1f} s; best "
          f"{tuner.best_flops / 1e9:.1f} GFLOP/s: {tuner.best_config}; errors {tuner.errors}")
    print(f"log: {log}")

    # 4. deploy: the template, called under apply_history_best, replays the best config
    from tensorlang.autotune.templates import matmul

    with autotune.apply_history_best(log):
        s, args = matmul(n, n, n, "float32")
    f = tl.build(s, args, name="matmul_tuned")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n), dtype=np.float32)
    y = rng.standard_normal((n, n), dtype=np.float32)
    z = np.empty((n, n), dtype=np.float32)
    f(x, y, z)
    ref = x @ y
    err = float(np.abs(z - ref).max() / np.abs(ref).max())
    t0 = time.perf_counter()
    for _ in range(5):
        x @ y
    t_np = (time.perf_counter() - t0) / 5
    # numpy's OpenBLAS threads spin for a while after a call: time ours after a pause
    time.sleep(0.2)
    t = f.time_evaluator(number=3, repeat=5)(x, y, z).median
    print(f"deployed kernel: {2 * n**3 / t / 1e9:.1f} GFLOP/s (numpy {2 * n**3 / t_np / 1e9:.1f}),"
          f" max relative error {err:.1e}")
    if err > 1e-4:
        raise SystemExit("the deployed kernel does not match numpy")


if __name__ == "__main__":  # good style; not needed for tuning: its worker processes never
    # import this file (a script without the guard tunes the same)
    main()
