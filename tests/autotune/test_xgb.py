"""XGBTuner: legal, never repeated configs; the model learns; transfer from other workloads."""

from __future__ import annotations

import numpy as np

from tensorlang import autotune


def test_xgb_tuner_never_repeats_and_prunes_illegal(tmp_path):
    log = tmp_path / "x.jsonl"
    task = autotune.create_task("matmul", (32, 32, 32, "float32"))
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=5))
    tuner = autotune.XGBTuner(task, batch_size=8, seed=0)
    try:
        tuner.tune(24, opt, callbacks=[autotune.log_to_file(log)])
    finally:
        opt.close()
    recs = autotune.load_records(log)
    idx = [r.config["index"] for r in recs]
    assert len(idx) == 24 and len(set(idx)) == 24
    # the search refuses illegal configs before building: none reach the log
    assert not any(r.result["error"] == autotune.ILLEGAL for r in recs)
    assert task.config_space.fallback_index() in idx
    assert tuner._model is not None
    assert tuner.best_flops > 0 and len(tuner.curve) == 24
    assert all(b >= a for a, b in zip(tuner.curve, tuner.curve[1:]))

    # a fresh tuner on another size learns from this log (transfer) before measuring anything
    other = autotune.XGBTuner(autotune.create_task("matmul", (48, 32, 32, "float32")), seed=1)
    other.load_history(recs)
    assert other._model is not None and len(other._tx) > 0 and not other.visited
    batch = other.next_batch(8)
    assert len(set(batch)) == 8
    # the template's default comes first even so: the best record never loses to it
    assert batch[0] == other.space.fallback_index()
    # resuming the same workload: its configs are marked measured
    again = autotune.XGBTuner(task, seed=2)
    again.load_history(recs)
    assert set(idx) <= again.visited
    assert not set(again.next_batch(8)) & set(idx)
    assert np.isfinite(again.best_flops)


def test_xgb_tuner_exhausts_a_small_space():
    # the search must not spin when fewer configs are left than its population
    import autotune_test_templates  # noqa: F401

    task = autotune.create_task("test_vadd", (16,))
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=1, repeat=1, timeout=5))
    tuner = autotune.XGBTuner(task, batch_size=8, seed=0)
    try:
        tuner.tune(100, opt)
    finally:
        opt.close()
    assert tuner.trials == len(task.config_space) == len(tuner.visited)
