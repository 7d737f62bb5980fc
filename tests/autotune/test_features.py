"""The cost model's features: the feature IR is tl.lower stopped after storage_flatten without
loop partitioning, and featurizing in worker processes gives the same vectors as in-process."""

from __future__ import annotations

import time

import numpy as np
from tensorlang.autotune.features import (
    N_FEATURES,
    FeaturePool,
    config_features,
    extract_features,
    lower_for_features,
)

import tensorlang as tl
from tensorlang import autotune


def test_feature_ir_is_the_partial_pipeline_and_only_guards_differ_from_partitioned():
    task = autotune.create_task("matmul", (100, 64, 32, "float32"))
    # 6 exact rows do not divide 100: a tail guard inside the row loop
    cfg = next(c for c in (task.config_space.get(i) for i in range(len(task.config_space)))
               if c["tile_m"].val == 6 and c["tile_n"].val == 32)
    s, args = task.instantiate(cfg)
    feat_ir = lower_for_features(s, args)
    assert str(feat_ir) == str(tl.lower(s, args, name="f", stop_after="simplify"))
    # the features flatten each access's indices themselves (unsimplified): for affine
    # indices the same features as from the storage-flattened IR (a floor-div/mod index may
    # be estimated differently, deterministically)
    flattened = tl.lower(s, args, name="f", stop_after="storage_flatten",
                         skip=("guard_padded_reads", "loop_partition", "simplify_partitioned",
                               "hoist_guards"))
    np.testing.assert_array_equal(extract_features(feat_ir), extract_features(flattened))
    with_partition = tl.lower(s, args, name="f", stop_after="storage_flatten")
    f_guard, f_part = extract_features(feat_ir), extract_features(with_partition)
    assert f_guard.shape == f_part.shape == (N_FEATURES,)
    # the documented difference: partitioning splits the guarded nest into a guard-free main
    # nest and a tail, so the guard flags vanish and the tail adds stores; the heaviest store's
    # loop extents and access strides are those of the main nest either way
    assert "if " in str(feat_ir) and not np.array_equal(f_guard, f_part)


def test_features_from_worker_processes_equal_in_process_ones():
    task = autotune.create_task("matmul", (64, 64, 64, "float32"))
    idxs = list(range(0, len(task.config_space), max(1, len(task.config_space) // 24)))
    pool = FeaturePool(task, 2)
    try:
        got = pool.map(idxs)
    finally:
        pool.close()
    for i, f in zip(idxs, got):
        ref = config_features(task, task.config_space.get(i))
        assert (f is None) == (ref is None), i
        if f is not None:
            np.testing.assert_array_equal(f, ref)


def test_xgb_search_featurizes_in_workers_and_matches_serial():
    task = autotune.create_task("matmul", (64, 64, 64, "float32"))
    par = autotune.XGBTuner(task, seed=3, feature_workers=2)
    ser = autotune.XGBTuner(task, seed=3, feature_workers=0)
    try:
        # 20 new configs: the workers are started, and featurize them here while they come up
        picked = par._legal_random(20)
        assert par._pool is not None and all(i in par._feat for i in picked)
        deadline = time.monotonic() + 60
        while not par._pool.ready():
            assert time.monotonic() < deadline, "feature workers did not come up in 60 s"
            time.sleep(0.01)
        more = [i for i in range(len(task.config_space)) if i not in par._feat][:20]
        calls = []
        real_map = par._pool.map
        par._pool.map = lambda idxs: calls.append(len(idxs)) or real_map(idxs)
        par.featurize(more)
        assert calls == [len(more)]  # the workers, now that they are up
        ser.featurize(picked + more)
        for i in picked + more:
            np.testing.assert_array_equal(par._feat[i], ser._feat[i])
    finally:
        par.close()
        ser.close()
    assert par._pool is None
