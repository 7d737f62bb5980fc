"""The AutoTVM matmul tutorial ("Writing Tunable Templates and Using the Auto-tuner"), written
as its readers write it: top-level code, no ``if __name__ == "__main__":`` guard, the template
defined in this script, a numpy check of the applied best.

Usage: python autotvm_matmul.py LOG SIDE_EFFECT_FILE [N_TRIAL]
The script appends one line to SIDE_EFFECT_FILE at top level: a worker that re-ran this
script would append another."""

import sys

import numpy as np

import tensorlang as tl
from tensorlang import autotune as autotvm

LOG, SIDE_EFFECTS = sys.argv[1], sys.argv[2]
N_TRIAL = int(sys.argv[3]) if len(sys.argv) > 3 else 12

with open(SIDE_EFFECTS, "a") as f:
    f.write("the script ran\n")


@autotvm.template("tutorial/matmul")
def matmul(N, L, M, dtype):
    A = tl.placeholder((N, L), name="A", dtype=dtype)
    B = tl.placeholder((L, M), name="B", dtype=dtype)

    k = tl.reduce_axis((0, L), name="k")
    C = tl.compute((N, M), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C)

    # schedule
    y, x = s[C].op.axis
    k = s[C].op.reduce_axis[0]

    ##### define space begin #####
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    ##### define space end #####

    # schedule according to config
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)

    s[C].reorder(yo, xo, k, yi, xi)
    cfg.add_flop(2 * N * L * M)

    return s, [A, B, C]


N, L, M = 64, 64, 64
task = autotvm.task.create("tutorial/matmul", args=(N, L, M, "float32"), target="llvm")
print(task.config_space)
print("flop", task.flop)

measure_option = autotvm.measure_option(
    builder="local",
    runner=autotvm.LocalRunner(number=5, repeat=1, min_repeat_ms=1, enable_cpu_cache_flush=True))

tuner = autotvm.tuner.XGBTuner(task, loss_type="rank")
tuner.tune(n_trial=N_TRIAL, measure_option=measure_option,
           callbacks=[autotvm.callback.progress_bar(N_TRIAL, prefix="[Task 1/1] "),
                      autotvm.callback.log_to_file(LOG)])

# keep the best record only, and apply it
autotvm.record.pick_best(LOG, LOG + ".best")
with autotvm.apply_history_best(LOG + ".best"):
    s, arg_bufs = matmul(N, L, M, "float32")
    func = tl.build(s, arg_bufs)

# check correctness
a_np = np.random.uniform(size=(N, L)).astype(np.float32)
b_np = np.random.uniform(size=(L, M)).astype(np.float32)
c_np = a_np.dot(b_np)

c_tl = np.empty(c_np.shape, dtype=np.float32)
func(a_np, b_np, c_tl)

np.testing.assert_allclose(c_np, c_tl, rtol=1e-4)
print("best config applied: the result matches numpy")
