"""EvolutionTuner: mutation and crossover over the sketch decisions, legality checked before
features, refusals counted, a real (small) tuning run that never measures a config twice."""

from __future__ import annotations

import contextlib
import json
import math

import autotune_test_workloads as W
import numpy as np
import pytest

from tensorlang import autotune


def _tuner(workload, args, seed=0, **kw):
    return autotune.EvolutionTuner(autotune.create_task(workload, args), seed=seed, **kw)


def _changed(space, a: int, b: int) -> list[str]:
    return [n for n, x, y in zip(space.knobs, space.point(a), space.point(b)) if x != y]


@pytest.fixture(scope="module")
def option():
    """One measure option (two builder processes, a measuring process) for the tuning runs of
    this file: each new one spawned its three processes again (about a second of CPU each).
    Repeats 2 of 1 call (the tests count records, not their costs)."""
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=1, repeat=2, timeout=10))
    with contextlib.closing(opt):
        yield opt


def test_mutation_changes_one_decision_and_moves_a_tile_factor_between_two_levels():
    t = _tuner(W.plain_matmul, (64, 128, 32))
    space = t.space
    idx = space.fallback_index()
    split_moves = 0
    for _ in range(200):
        child = t.mutate(idx)
        changed = _changed(space, idx, child)
        assert len(changed) == 1
        knob = space.knobs[changed[0]]
        if knob.kind == "split":
            old = space.get(idx).entities[knob.name].size
            new = space.get(child).entities[knob.name].size
            # the outer factor is the extent over the inner ones: it moves with their product
            levels_old = [math.prod(old[1:])] + old[1:]
            levels_new = [math.prod(new[1:])] + new[1:]
            assert sum(x != y for x, y in zip(levels_old, levels_new)) == 2
            split_moves += 1
    assert split_moves > 50


def test_crossover_takes_each_stage_from_one_parent():
    t = _tuner(W.layer_norm, (8, 64))
    space = t.space
    rng = np.random.default_rng(3)
    from tensorlang.autotune.sketch_fill import random_point

    a, b = random_point(space, rng), random_point(space, rng)
    stages = {n.split(".")[0] for n in space.knobs}
    assert len(stages) >= 3
    for _ in range(20):
        child = t.crossover(a, b)
        for stage in stages:
            names = [n for n in space.knobs if n.split(".")[0] == stage]
            pos = [list(space.knobs).index(n) for n in names]
            pc, pa, pb = space.point(child), space.point(a), space.point(b)
            assert all(pc[d] == pa[d] for d in pos) or all(pc[d] == pb[d] for d in pos)


def test_search_returns_only_legal_candidates_and_counts_the_refused():
    t = _tuner(W.first_nonzero_2d, (4, 8, 32), population=32, search_ratio=0.0)
    ranked = t._search(16)
    assert ranked
    assert t.refused > 0  # random fills that factor the non-commutative reduction
    dropped = [i for i, f in t._feat.items() if f is None]
    refused = [i for i in dropped
               if t.space.get(i).entities["s0.rule"].val in ("rf_lanes", "rf_par")]
    assert len(refused) == t.refused
    # the others gave a schedule an earlier config gave (decisions the sketch ignores)
    assert len(dropped) - len(refused) == t.search_stats["duplicates"]
    for i in dropped:  # never ranked, never to be measured
        assert i not in ranked and i in t.visited
    for i in ranked:
        assert t._legal.get(i) is True


def test_a_config_giving_an_already_seen_schedule_is_dropped_as_a_duplicate():
    t = _tuner(W.plain_matmul, (64, 128, 32))
    space = t.space
    ents = dict(space.get(space.fallback_index()).entities)
    ents["s0.rule"] = next(e for e in space.knobs["s0.rule"].entities if e.val == "plain")
    same = []
    for level in space.knobs["s0.level"].entities:  # no accumulator to place at a level
        ents["s0.level"] = level
        same.append(space.index_of(ents))
    assert len(set(same)) == 2
    t.featurize(same)
    assert t._feat[same[0]] is not None
    assert t._feat[same[1]] is None and same[1] in t.visited
    assert t.search_stats["duplicates"] == 1 and t.refused == 0


def test_the_first_batches_measure_every_structure_of_the_sketch():
    from tensorlang.autotune.sketch_fill import structural_variants

    t = _tuner(W.plain_matmul, (64, 128, 32))
    space = t.space
    variants = structural_variants(space)
    seen = {(e["s0.rule"].val, e["s0.vec"].val, e["s0.pack"].val, e["s0.pack_at"].val)
            for e in (space.get(i).entities for i in variants)}
    # 2 rules x 2 vector axes x (nothing packed, or A or B packed at one of 3 places)
    assert len(seen) == len(variants) == 28
    first = t.next_batch(16)
    assert first[0] == space.fallback_index()
    assert first[1:] == [i for i in variants if i != first[0]][:15]
    t.visited.update(first)  # as the tuning loop does once they are measured
    second = t.next_batch(16)
    assert set(variants) <= set(first) | set(second)


def test_evolution_tuner_rejects_bad_arguments():
    task = autotune.create_task(W.plain_matmul, (16, 16, 16))
    with pytest.raises(ValueError, match="crossover_prob and mutation_prob must be in"):
        autotune.EvolutionTuner(task, crossover_prob=1.5)
    with pytest.raises(ValueError, match="population must be >= 2"):
        autotune.EvolutionTuner(task, population=1)


@pytest.mark.slow  # ~15 s idle, builds 12 kernels (test_workload.py's fixture tunes 4)
def test_tuning_a_workload_logs_distinct_configs_and_resumes(tmp_path, option):
    log = tmp_path / "ln.jsonl"
    task = autotune.create_task(W.layer_norm, (16, 64))
    t = autotune.EvolutionTuner(task, batch_size=4, seed=0, search_ratio=0.0)
    t.tune(8, option, callbacks=[autotune.log_to_file(log)])
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(recs) == 8 and t.best_flops > 0
    configs = {json.dumps(r["config"]["entity"], sort_keys=True) for r in recs}
    assert len(configs) == 8
    again = autotune.EvolutionTuner(task, batch_size=4, seed=1, search_ratio=0.0)
    again.load_history(autotune.load_records(log))
    again.tune(4, option, callbacks=[autotune.log_to_file(log)])
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    configs = {json.dumps(r["config"]["entity"], sort_keys=True) for r in recs}
    assert len(recs) == 12 and len(configs) == 12


def test_records_of_the_same_workload_at_other_sizes_train_the_model():
    from tensorlang.autotune.sketch_fill import random_fill

    from tensorlang.version import __version__

    other = autotune.create_task(W.layer_norm, (32, 64))
    picked, _ = random_fill(other, 8, np.random.default_rng(0))
    recs = [autotune.Record(other.workload, other.target, other.config_space.get(i).to_json(),
                            None, {"costs": [1e-5 * (k + 1)], "error": None},
                            0.0, __version__) for k, i in enumerate(picked)]
    t = _tuner(W.layer_norm, (16, 64))
    t.load_history(recs)
    assert len(t._tx) == 8 and not t._x  # other sizes: transfer rows, none of its own
    assert t._model is not None
    assert max(t._ty) == 1.0  # throughput normalized to the other workload's best


def test_a_spent_space_stops_the_search_early_and_says_so(tmp_path, caplog, option):
    # row sums of one 32-element row: 48 configs, 25 distinct schedules (the lanes of the
    # plain rule, and every decision but the parts of rf_par, change nothing there)
    task = autotune.create_task(W.row_sum, (1, 32))
    assert len(task.config_space) == 48
    log = tmp_path / "rs.jsonl"
    t = autotune.EvolutionTuner(task, batch_size=16, seed=0)
    with caplog.at_level("WARNING", logger="tensorlang.autotune.evolution"):
        t.tune(64, option, callbacks=[autotune.log_to_file(log)])
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    assert t.trials == len(recs) == t.distinct_schedules == 25
    assert len({json.dumps(r["trace"]) for r in recs}) == 25
    assert t.search_stats["duplicates"] == 48 - 25
    assert "the search space is spent after 25 of 64 trials" in t.stop_reason
    assert "48 configs give 25 distinct schedules" in t.stop_reason
    assert t.stop_reason in caplog.text
    # asked for fewer trials than the space holds: no early stop, nothing said
    t2 = autotune.EvolutionTuner(task, batch_size=8, seed=0)
    t2.tune(8, option)
    assert t2.trials == 8 and t2.stop_reason is None


def test_tune_tasks_runs_the_evolution_tuner_and_its_final_remeasurement(tmp_path, option):
    # tune_tasks passes remeasure_top / remeasure_rounds to every tuner's tune()
    task = autotune.create_task(W.row_sum, (4, 64))
    log = tmp_path / "rs.jsonl"
    autotune.tune_tasks([task], n_trial=4, log_file=log, tuner="evolution",
                        measure_option=option, remeasure_top=2, remeasure_rounds=2)
    recs = autotune.load_records(log)
    assert sum(not r.remeasured for r in recs) == 4
    assert sum(r.remeasured for r in recs) >= 2  # the top configs (and the default) again
