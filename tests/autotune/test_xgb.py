"""XGBTuner: legal, never repeated configs; the model learns; transfer from other workloads."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from tensorlang import autotune


@pytest.fixture(scope="module")
def option():
    """One measure option (two builder processes, a measuring process) for the module's three
    tuning runs, not one spawned for each."""
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=5))
    with contextlib.closing(opt):
        yield opt


def test_xgb_tuner_never_repeats_and_prunes_illegal(tmp_path, option):
    log = tmp_path / "x.jsonl"
    task = autotune.create_task("matmul", (32, 32, 32, "float32"))
    tuner = autotune.XGBTuner(task, batch_size=8, seed=0)
    tuner.tune(24, option, callbacks=[autotune.log_to_file(log)])
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
    # (it and the resuming tuner below featurize here: a pool of feature workers, which they
    # would start for their first 8 configs, computes the same features, test_features.py)
    other = autotune.XGBTuner(autotune.create_task("matmul", (48, 32, 32, "float32")), seed=1,
                              feature_workers=0)
    other.load_history(recs)
    assert other._model is not None and len(other._tx) > 0 and not other.visited
    batch = other.next_batch(8)
    assert len(set(batch)) == 8
    # the template's default comes first even so: the best record never loses to it
    assert batch[0] == other.space.fallback_index()
    # resuming the same workload: its configs are marked measured
    again = autotune.XGBTuner(task, seed=2, feature_workers=0)
    again.load_history(recs)
    assert set(idx) <= again.visited
    assert not set(again.next_batch(8)) & set(idx)
    assert np.isfinite(again.best_flops)


def test_xgb_tuner_exhausts_a_small_space(option):
    # the search must not spin when fewer configs are left than its population
    import autotune_test_templates  # noqa: F401

    task = autotune.create_task("test_vadd", (16,))
    tuner = autotune.XGBTuner(task, batch_size=8, seed=0)
    tuner.tune(100, option)
    assert tuner.trials == len(task.config_space) == len(tuner.visited)


def test_a_plan_spreads_its_random_picks_over_every_prefix(monkeypatch):
    """A TaskScheduler measures a plan over rounds of a few trials: every prefix of the plan
    holds its share of the random picks (they used to come last, after the model's)."""
    from tensorlang.autotune.tuner import _spread

    assert _spread([1, 2, 3, 4], [10, 20, 30, 40]) == [1, 10, 2, 20, 3, 30, 4, 40]
    merged = _spread(list(range(6)), [10, 20])
    assert sorted(merged) == [0, 1, 2, 3, 4, 5, 10, 20] and merged[0] == 0
    assert sum(m >= 10 for m in merged[:4]) == 1
    assert _spread([], [5, 6]) == [5, 6] and _spread([1, 2], []) == [1, 2]

    task = autotune.create_task("matmul", (32, 32, 32, "float32"))
    tuner = autotune.XGBTuner(task, seed=0)
    tuner._model = object()  # _search below ranks; half random while few were measured
    fallback = tuner.space.fallback_index()
    ranked = [i for i in range(len(tuner.space)) if i != fallback]
    monkeypatch.setattr(tuner, "_search", lambda n: ranked[:n])
    monkeypatch.setattr(tuner, "_is_legal", lambda i: True)
    randoms = iter(ranked[::-1])
    monkeypatch.setattr(tuner, "_legal_random",
                        lambda n, exclude=None: [next(randoms) for _ in range(n)])
    plan = tuner._plan(9)
    assert plan == [fallback, ranked[0], ranked[-1], ranked[1], ranked[-2], ranked[2],
                    ranked[-3], ranked[3], ranked[-4]]


def test_relearning_the_transfer_records_renormalizes_them_and_drops_the_plan(tmp_path,
                                                                           option):
    """TaskScheduler rounds grow the log between one task's rounds: its tuner learns the
    other workloads' records anew, labels normalized by each workload's best so far."""
    log = tmp_path / "x.jsonl"
    task = autotune.create_task("matmul", (32, 32, 32, "float32"))
    autotune.XGBTuner(task, batch_size=4, seed=0).tune(
        8, option, callbacks=[autotune.log_to_file(log)])
    recs = autotune.load_records(log)
    other = autotune.XGBTuner(autotune.create_task("matmul", (48, 32, 32, "float32")), seed=1)
    other.load_history(recs[:4])
    assert len(other._tx) == 4 and max(other._ty) == 1.0
    other._planned = [1, 2, 3]
    other.relearn_transfer(recs)
    assert len(other._tx) == 8 and other._planned == [] and not other.visited
    flops = [task.flop / r.cost for r in recs]
    np.testing.assert_allclose(other._ty, [f / max(flops) for f in flops], rtol=1e-12)
    assert other._model is not None
