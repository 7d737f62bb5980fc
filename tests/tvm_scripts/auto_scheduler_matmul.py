# TVM's "Auto-scheduling Matrix Multiplication for CPU" tutorial as its readers write it, with
# `import tvm` / `from tvm import te, auto_scheduler` swapped for tensorlang: a workload
# registered without a template, a search task, a few trials logged to a file, the best
# schedule applied, lowered, built, checked against numpy and timed, printed as Python, and the
# search resumed from the log. Small sizes and few trials, so that it runs in seconds. The log
# is written to the working directory, as in TVM.
# (Written with the strings and calls tensorlang names first: "llvm" for tvm.target.Target("llvm")
# and tl.runtime.array / empty for tvm.nd.array / empty; TVM's spellings work too, see
# import_swap_only.py.)
import json

import numpy as np

import tensorlang as tl
from tensorlang import auto_scheduler, te


@auto_scheduler.register_workload  # Note the auto_scheduler decorator
def matmul_add(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    C = te.placeholder((N, M), name="C", dtype=dtype)

    k = te.reduce_axis((0, L), name="k")
    matmul = te.compute(
        (N, M),
        lambda i, j: te.sum(A[i, k] * B[k, j], axis=k),
        name="matmul",
        attrs={"layout_free_placeholders": [B]},  # enable automatic layout transform for B
    )
    out = te.compute((N, M), lambda i, j: matmul[i, j] + C[i, j], name="out")

    return [A, B, C, out]


target = "llvm"
N = L = M = 128
task = tl.auto_scheduler.SearchTask(func=matmul_add, args=(N, L, M, "float32"), target=target)

# Inspect the computational graph
print("Computational DAG:")
print(task.compute_dag)
assert "out(i, j) = matmul[i, j] + C[i, j]" in str(task.compute_dag)

log_file = "matmul.json"
tune_option = auto_scheduler.TuningOptions(
    num_measure_trials=8,  # the tutorial's 10, fewer here to keep the test short
    runner=auto_scheduler.LocalRunner(repeat=1, min_repeat_ms=50, timeout=20,
                                      enable_cpu_cache_flush=False),
    builder=auto_scheduler.LocalBuilder(),
    measure_callbacks=[auto_scheduler.RecordToFile(log_file)],
    verbose=2,
)

# Run auto-tuning (search)
task.tune(tune_option)
# Apply the best schedule
sch, args = task.apply_best(log_file)

print("Lowered TIR:")
print(tl.lower(sch, args, simple_mode=True))

func = tl.build(sch, args, target)
a_np = np.random.uniform(size=(N, L)).astype(np.float32)
b_np = np.random.uniform(size=(L, M)).astype(np.float32)
c_np = np.random.uniform(size=(N, M)).astype(np.float32)
out_np = a_np.dot(b_np) + c_np

dev = tl.cpu()
a_tl = tl.runtime.array(a_np, device=dev)
b_tl = tl.runtime.array(b_np, device=dev)
c_tl = tl.runtime.array(c_np, device=dev)
out_tl = tl.runtime.empty(out_np.shape, device=dev)
func(a_tl, b_tl, c_tl, out_tl)

# Check results
np.testing.assert_allclose(out_np, out_tl.numpy(), rtol=1e-3)

# Evaluate execution time.
evaluator = func.time_evaluator(func.entry_name, dev, min_repeat_ms=100)
print(
    "Execution time of this operator: %.3f ms"
    % (np.median(evaluator(a_tl, b_tl, c_tl, out_tl).results) * 1000)
)

print("Equivalent python schedule:")
code = task.print_best(log_file)
print(code)

# The printed schedule is code: run on a fresh schedule it gives the same kernel.
s = tl.create_schedule(args[-1].op)
names = {st.name: st.op.output(0) for st in s.stages}
names.update({t.op.name: t for t in args})
exec(code, {"s": s, **names})  # noqa: S102 - the code print_best printed above
again = np.zeros_like(out_np)
tl.build(s, args, target)(a_np, b_np, c_np, again)
np.testing.assert_allclose(again, out_np, rtol=1e-3)

try:
    task.print_best(log_file, print_mode="cuda")
except ValueError as e:
    print("print_mode='cuda' refused:", str(e)[:60], "...")
else:
    raise AssertionError("print_mode='cuda' was not refused")


def resume_search(task, log_file):
    print("Resume search:")
    cost_model = auto_scheduler.XGBModel()
    cost_model.update_from_file(log_file)
    search_policy = auto_scheduler.SketchPolicy(
        task, cost_model, init_search_callbacks=[auto_scheduler.PreloadMeasuredStates(log_file)]
    )
    tune_option = auto_scheduler.TuningOptions(
        num_measure_trials=5, measure_callbacks=[auto_scheduler.RecordToFile(log_file)]
    )
    task.tune(tune_option, search_policy=search_policy)


def measured_configs(log_file):
    with open(log_file) as f:
        return [json.dumps(json.loads(line)["config"]["entity"], sort_keys=True) for line in f]


before = measured_configs(log_file)
resume_search(task, log_file)
after = measured_configs(log_file)
# the resumed search measured 5 new candidates, none of them one the log already held
assert len(after) == len(before) + 5 and not set(after[len(before):]) & set(before)
print(f"resumed: {len(after) - len(before)} new candidates, none measured before")

sch, args = task.apply_best(log_file)
func = tl.build(sch, args, target)
out_tl = tl.runtime.empty(out_np.shape, device=dev)
func(a_tl, b_tl, c_tl, out_tl)
np.testing.assert_allclose(out_np, out_tl.numpy(), rtol=1e-3)
print("all results match numpy")
