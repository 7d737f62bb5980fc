"""XGBTuner's search: candidates are featurized without the legality checks, the configs it
picks are checked (an illegal one is pruned and replaced, never measured), and a space whose
rest fits in the search budget is ranked whole."""

from __future__ import annotations

import autotune_test_templates  # noqa: F401
import numpy as np
import pytest
from tensorlang.autotune.features import config_features, extract_features, lower_for_features

import tensorlang as tl
from tensorlang import autotune


def _tuner_preferring(task, good: set, **kw) -> autotune.XGBTuner:
    """An XGBTuner whose model was fitted on every config, labelled high for those in `good`
    (no measuring: only the search's choices are under test)."""
    tuner = autotune.XGBTuner(task, batch_size=4, seed=0, feature_workers=0, epsilon=0.0,
                              warmup=0, **kw)
    idxs = range(len(task.config_space))
    tuner._x = [config_features(task, task.config_space.get(i)) for i in idxs]
    tuner._flops = [1.0 if i in good else 0.1 for i in idxs]
    tuner._fit()
    return tuner


def test_unchecked_features_equal_checked_ones_and_illegal_configs_get_features():
    task = autotune.create_task("test_par_reduce", (8, 16))
    space = task.config_space
    illegal = [i for i in range(len(space)) if not task.is_legal(space.get(i))]
    assert 0 < len(illegal) < len(space)
    for i in range(len(space)):
        f = config_features(task, space.get(i))
        assert f is not None  # the template refuses none: legality is decided later
        if i not in illegal:
            s, args = task.instantiate(space.get(i))
            assert s.check_legality
            ref = extract_features(lower_for_features(s, args))
            np.testing.assert_array_equal(f, ref)
    # without checks, a schedule is built through the illegal step
    with pytest.raises(tl.ScheduleError, match="carries a dependence"):
        task.instantiate(space.get(illegal[0]))
    s, _ = task.instantiate(space.get(illegal[0]), check=False)
    assert not s.check_legality


def test_search_never_picks_an_illegal_config_even_when_the_model_ranks_it_first():
    task = autotune.create_task("test_par_reduce", (8, 16))
    space = task.config_space
    illegal = {i for i in range(len(space)) if not task.is_legal(space.get(i))}
    tuner = _tuner_preferring(task, illegal)
    picked: list[int] = []
    while tuner.has_next():
        batch = tuner.next_batch(4)
        if not batch:
            break
        assert not set(batch) & illegal and not set(batch) & set(picked)
        picked += batch
        tuner.visited.update(batch)
    assert sorted(picked) == sorted(set(range(len(space))) - illegal)
    assert tuner.search_stats["illegal_pruned"] == len(illegal)


def test_a_space_whose_rest_fits_in_the_budget_is_ranked_whole(monkeypatch):
    task = autotune.create_task("test_par_reduce", (8, 16))
    space = task.config_space
    legal = [i for i in range(len(space)) if task.is_legal(space.get(i))]
    best = {legal[3], legal[7]}
    tuner = _tuner_preferring(task, best, include_fallback=False)
    tuner.visited.update(legal[8:])
    tuner.featurize(range(16))  # the cost per config is known; the 4 others take far less
    # than the search budget: all are featurized and ranked, no annealing

    def no_annealing(budget):
        raise AssertionError("annealed a space it could rank whole")

    monkeypatch.setattr(tuner, "_anneal", no_annealing)
    ranked = tuner._search(2)
    assert len(tuner._feat) == len(space)
    assert set(ranked) == {i for i in range(len(space)) if i not in tuner.visited}
    assert set(ranked[:2]) == best
    assert set(tuner.next_batch(2)) == best


def test_illegal_records_in_a_log_do_not_train_the_model():
    # features come from unchecked schedules: an illegal config has some, but it is no kernel
    # with a throughput of 0; the model learns from the other records only
    from tensorlang.autotune.measure import ILLEGAL, MeasureInput, MeasureResult
    from tensorlang.autotune.record import make_record

    task = autotune.create_task("test_par_reduce", (8, 16))
    space = task.config_space
    illegal = [i for i in range(len(space)) if not task.is_legal(space.get(i))]
    legal = [i for i in range(len(space)) if i not in illegal]
    recs = [make_record(MeasureInput(task, space.get(i)),
                        MeasureResult([1e-5 * (1 + k)], None, "", 0.1, 0.0, None))
            for k, i in enumerate(legal[:6])]
    recs += [make_record(MeasureInput(task, space.get(i)),
                         MeasureResult([], ILLEGAL, "refused", 0.0, 0.0, None))
             for i in illegal[:3]]
    tuner = autotune.XGBTuner(task, seed=0, feature_workers=0)
    tuner.load_history(recs)
    assert len(tuner._x) == 6 and tuner._model is not None
    assert set(illegal[:3]) <= tuner.visited
    assert tuner.search_stats["illegal_pruned"] == 3
