"""A tuning script (no __main__ guard, template defined here) whose trials fail to build.

Usage: python failing_trials.py all|most LOG
  all:  every trial fails; prints the TuningError of tune() and of tune_tasks, one line each
  most: 6 of 8 trials fail; prints the TuningWarning (the progress bar says so on stderr)
"""

import sys
import warnings

import tensorlang as tl
from tensorlang import autotune

MODE, LOG = sys.argv[1], sys.argv[2]
FAILING = set(range(8)) if MODE == "all" else set(range(6))


@autotune.template("tvm_style/flaky")
def flaky(n):
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = tl.create_schedule(B)
    cfg = autotune.get_config()
    cfg.define_knob("variant", list(range(8)))
    # the fallback config (the runner's reference kernel) builds; a measured one may not
    measured = isinstance(cfg, autotune.ConfigEntity) and not cfg.is_fallback
    if measured and cfg["variant"].val in FAILING:
        raise RuntimeError(f"variant {cfg['variant'].val} does not build")
    return s, [A, B]


task = autotune.task.create("tvm_style/flaky", args=(64,), target="llvm")
option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2),
                                 runner=autotune.LocalRunner(number=1, repeat=1))
tuner = autotune.GridSearchTuner(task, batch_size=8)
if MODE == "all":
    try:
        tuner.tune(n_trial=8, measure_option=option,
                   callbacks=[autotune.callback.log_to_file(LOG)])
    except autotune.TuningError as e:
        print("tune:", e)
    try:
        autotune.tune_tasks([task], n_trial=8, log_file=LOG + ".tasks", tuner="grid",
                            measure_option=option, progress=False, batch_size=8)
    except autotune.TuningError as e:
        print("tune_tasks:", e)
else:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuner.tune(n_trial=8, measure_option=option,
                   callbacks=[autotune.callback.progress_bar(8, prefix="flaky"),
                              autotune.callback.log_to_file(LOG)])
    for w in caught:
        print(f"{w.category.__name__}: {w.message}")
    print(f"best {tuner.best_flops / 1e9:.3f} GFLOP/s")
option.close()
