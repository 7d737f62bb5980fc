"""AutoTVM's convolution tuning tutorials ("Tuning High Performance Convolution",
tune_conv2d_x86-style templates) on the CPU, written as their readers write them: a template
with split policies and a filter, an annotate knob applied with TVM's unroll limit, add_flop and
the is_fallback idiom; task.config_space printed; three tuners with TVM's arguments, a progress
bar and a log; load_from_file, pick_best, query(target, workload) and the applied best checked
with numpy.

Usage: python autotvm_conv2d.py LOG"""

import sys

import numpy as np
from tensorlang.autotune.space import SplitEntity

import tensorlang as tvm
from tensorlang import autotune as autotvm
from tensorlang import te

LOG = sys.argv[1]


@autotvm.template("tutorial/conv2d_no_batching")
def conv2d_no_batching(N, H, W, CO, CI, KH, KW, stride, padding):
    assert N == 1, "Only consider batch_size = 1 in this template"
    data = te.placeholder((N, CI, H, W), name="data")
    kernel = te.placeholder((CO, CI, KH, KW), name="kernel")
    p = padding
    pad = te.compute((N, CI, H + 2 * p, W + 2 * p), lambda n, c, y, x: tvm.if_then_else(
        tvm.all(y >= p, y < H + p, x >= p, x < W + p), data[n, c, y - p, x - p],
        tvm.const(0.0, "float32")), name="pad")
    OH = (H + 2 * p - KH) // stride + 1
    OW = (W + 2 * p - KW) // stride + 1
    rc = te.reduce_axis((0, CI), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    conv = te.compute((N, CO, OH, OW), lambda n, f, y, x: te.sum(
        pad[n, rc, y * stride + ry, x * stride + rx] * kernel[f, rc, ry, rx],
        axis=[rc, ry, rx]), name="conv")
    s = te.create_schedule([conv.op])
    s[pad].compute_inline()

    ##### space definition begin #####
    cfg = autotvm.get_config()
    n, f, y, x = s[conv].op.axis
    rc, ry, rx = s[conv].op.reduce_axis
    cfg.define_split("tile_f", f, num_outputs=2, policy="factors")
    cfg.define_split("tile_y", y, num_outputs=2, policy="power2")
    cfg.define_split("tile_x", x, num_outputs=2, policy="verbose",
                     filter=lambda e: e.size[-1] <= 4)
    cfg.define_split("tile_ic", rc, num_outputs=2)
    cfg.define_annotate("ann_reduce", [ry, rx], policy="try_unroll")
    cfg.define_knob("auto_unroll_max_step", [0, 16])
    cfg.add_flop(2 * N * CO * OH * OW * CI * KH * KW)
    ##### space definition end #####

    if cfg.is_fallback:  # TVM's x86 templates set their defaults this way
        cfg["tile_ic"] = SplitEntity([-1, 2])
        cfg.fallback_split("tile_f", [-1, 4])

    fo, fi = cfg["tile_f"].apply(s, conv, f)
    yo, yi = cfg["tile_y"].apply(s, conv, y)
    xo, xi = cfg["tile_x"].apply(s, conv, x)
    rco, rci = cfg["tile_ic"].apply(s, conv, rc)
    s[conv].reorder(n, fo, yo, xo, rco, ry, rx, rci, fi, yi, xi)
    cfg["ann_reduce"].apply(s, conv, [ry, rx], axis_lens=[KH, KW], max_unroll=16, cfg=cfg)
    s[conv].pragma(fo, "auto_unroll_max_step", cfg["auto_unroll_max_step"].val)
    return s, [data, kernel, conv]


N, H, W, CO, CI, KH, KW, strides, padding = 1, 8, 8, 8, 4, 3, 3, 1, 1
task = autotvm.task.create("tutorial/conv2d_no_batching",
                           args=(N, H, W, CO, CI, KH, KW, strides, padding), target="llvm")
print(task.config_space)
print("space", len(task.config_space), "flop", task.flop)

measure_option = autotvm.measure_option(
    builder=autotvm.LocalBuilder(),
    runner=autotvm.LocalRunner(number=2, repeat=1, min_repeat_ms=0, enable_cpu_cache_flush=True))

n_trial = 3
tuners = [("ga", autotvm.tuner.GATuner(task, pop_size=4, elite_num=1, mutation_prob=0.1)),
          ("gridsearch", autotvm.tuner.GridSearchTuner(task, range_idx=(0, 63))),
          ("random", autotvm.tuner.RandomTuner(task))]
for i, (name, tuner) in enumerate(tuners):
    tuner.tune(n_trial=min(n_trial, len(task.config_space)), early_stopping=8,
               measure_option=measure_option,
               callbacks=[autotvm.callback.progress_bar(n_trial,
                                                        prefix=f"[Task {i + 1}/3 {name}] "),
                          autotvm.callback.log_to_file(LOG)])

pairs = list(autotvm.record.load_from_file(LOG))
for inp, res in pairs:
    print(inp.config, res.costs)
print("loaded", len(pairs), "records")

autotvm.record.pick_best(LOG, LOG + ".best")
dispatch_context = autotvm.apply_history_best(LOG)
best_config = dispatch_context.query(task.target, task.workload)
print("Best config:", best_config)
assert best_config == min((p for p in pairs if p[1].valid), key=lambda p: p[1].cost)[0].config

with autotvm.apply_history_best(LOG + ".best"):
    s, arg_bufs = conv2d_no_batching(N, H, W, CO, CI, KH, KW, strides, padding)
    func = tvm.build(s, arg_bufs)
assert isinstance(autotvm.DispatchContext.current, autotvm.FallbackContext)

rng = np.random.default_rng(0)
a = rng.random((N, CI, H, W), dtype=np.float32)
w = rng.random((CO, CI, KH, KW), dtype=np.float32)
ap = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
ref = np.zeros((N, CO, H, W), np.float32)
for yy in range(H):
    for xx in range(W):
        ref[0, :, yy, xx] = np.einsum("fcij,cij->f", w, ap[0, :, yy:yy + KH, xx:xx + KW])
c = np.zeros_like(ref)
func(a, w, c)
np.testing.assert_allclose(c, ref, rtol=1e-4)

with autotvm.FallbackContext():  # the template's defaults, as with no log
    s, arg_bufs = conv2d_no_batching(N, H, W, CO, CI, KH, KW, strides, padding)
    c = np.zeros_like(ref)
    tvm.build(s, arg_bufs)(a, w, c)
np.testing.assert_allclose(c, ref, rtol=1e-4)
print("best and fallback configs applied: the results match numpy")
