"""Sketch rules and random fill: the roles the rules give the computes of a DAG, filled
sketches that are legal and match numpy once built, illegal fills refused (counted, never
built), oversized register tiles refused before lowering."""

from __future__ import annotations

import contextlib
import json
import math

import autotune_test_workloads as W
import numpy as np
import pytest
from tensorlang.autotune import sketch
from tensorlang.autotune.measure import ILLEGAL, MeasureInput, measure_batch
from tensorlang.autotune.sketch_fill import random_fill

import tensorlang as tl
from tensorlang import autotune


def _roles(tensors) -> dict:
    return {nd.op.name: nd.role for nd in sketch.analyze(tensors).nodes}


def test_roles_of_the_rules():
    assert _roles(W.bmm_nt_bias_relu(2, 8, 8, 4)) == {"C": sketch.TILE, "D": sketch.SINK}
    assert _roles(W.plain_conv2d(1, 3, 8, 8, 4, 3)) == {"P": sketch.CHOOSE, "Y": sketch.TILE}
    assert _roles(W.attention(1, 8, 4)) == {
        "S": sketch.TILE, "Mx": sketch.REDUCE, "E": sketch.CHOOSE, "Sm": sketch.REDUCE,
        "Pr": sketch.INLINE, "O": sketch.TILE}
    assert _roles(W.layer_norm(4, 16)) == {"total": sketch.REDUCE, "mean": sketch.INLINE,
                                           "sq": sketch.REDUCE, "Y": sketch.SPATIAL}
    assert _roles(W.stencil_chain(20)) == {"T0": sketch.CHOOSE, "T1": sketch.CHOOSE,
                                           "T2": sketch.SPATIAL}
    assert _roles(W.transpose(4, 8)) == {"Y": sketch.SPATIAL}


def test_knobs_are_named_by_position_not_by_tensor_name():
    space = autotune.create_task(W.bmm_nt_bias_relu, (2, 8, 16, 4)).config_space
    assert set(space.knobs) == {"s0.rule", "s0.S0", "s0.S1", "s0.S2", "s0.R0", "s0.par",
                                "s0.level", "s0.unroll", "s0.vec", "s0.pack", "s0.pack_at"}
    assert space.knobs["s0.rule"].entities[0].val == "fuse"


def test_a_space_with_many_loops_stays_countable():
    space = autotune.create_task(W.attention, (2, 32, 16)).config_space
    assert 0 < len(space) <= 1 << 60


def _check_builds(name: str, args: tuple, n_random: int, seed: int = 0) -> int:
    """The fallback and `n_random` random legal fills of a workload, built and compared with
    numpy; returns how many fills were refused on the way."""
    task = autotune.create_task(name, args)
    picked, refused = random_fill(task, n_random, np.random.default_rng(seed))
    assert len(picked) == n_random
    rng = np.random.default_rng(seed)
    for idx in [task.config_space.fallback_index(), *picked]:
        s, tensors = task.instantiate(task.config_space.get(idx))
        f = tl.build(s, tensors)
        n_in = len(tensors) - len(s.outputs)
        ins = [rng.random([int(d.value) for d in t.shape], dtype=np.float32) - 0.25
               for t in tensors[:n_in]]
        out = np.zeros([int(d.value) for d in tensors[-1].shape], np.float32)
        f(*ins, out)
        ref = W.reference(name, args, ins)
        np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-4 * np.abs(ref).max(),
                                   err_msg=f"{name} config {idx}")
    return refused


@pytest.mark.parametrize("name, args", [
    ("bmm_nt_bias_relu", (2, 12, 32, 8)),
    ("plain_conv2d", (1, 3, 10, 10, 8, 3, 2, 1)),
    ("layer_norm", (6, 64)),
    ("attention", (1, 16, 8)),
])
def test_filled_sketches_are_legal_and_match_numpy(name, args):
    assert _check_builds(name, args, 2) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name, args", [
    ("plain_matmul", (48, 64, 32)),
    ("grouped_conv2d", (1, 8, 8, 8, 8, 2)),
    ("dw_conv2d", (1, 4, 9, 9)),
    ("conv3d", (1, 2, 6, 6, 6, 4)),
    ("row_sum", (8, 256)),
    ("stencil_chain", (70,)),
    ("transpose", (32, 48)),
])
def test_filled_sketches_of_every_workload_match_numpy(name, args):
    assert _check_builds(name, args, 4) == 0


@pytest.fixture(scope="module")
def option():
    """One measure option (a builder process, a measuring process) for the module's two
    measurements, not one spawned for each."""
    opt = autotune.measure_option(autotune.LocalBuilder(1),
                                  autotune.LocalRunner(number=1, repeat=1, timeout=10))
    with contextlib.closing(opt):
        yield opt


def test_illegal_fills_are_refused_counted_and_never_built(option):
    # a reducer declared not commutative: factoring its reduction (rfactor) reorders the
    # combination, which the dependence analysis refuses
    task = autotune.create_task(W.first_nonzero_2d, (4, 8, 32))
    space = task.config_space
    ents = dict(space.get(space.fallback_index()).entities)
    assert ents["s0.rule"].val == "plain"  # the fallback is legal
    ents["s0.rule"] = next(e for e in space.knobs["s0.rule"].entities if e.val == "rf_lanes")
    bad = space.get(space.index_of(ents))
    with pytest.raises(tl.ScheduleError, match="rfactor"):
        task.instantiate(bad)
    picked, refused = random_fill(task, 8, np.random.default_rng(0))
    assert refused > 0 and len(picked) == 8
    for idx in picked:
        assert space.get(idx).entities["s0.rule"].val != "rf_lanes"
    # measuring it: an "illegal schedule" record, from the builder, with no module built
    res, = measure_batch(option, [MeasureInput(task, bad)])
    assert res.error == ILLEGAL and res.trace is None and not res.costs


def test_an_oversized_register_tile_is_refused_before_lowering():
    task = autotune.create_task(W.plain_matmul, (256, 256, 64))
    space = task.config_space
    ents = dict(space.get(space.fallback_index()).entities)
    ents["s0.S0"] = next(e for e in space.knobs["s0.S0"].entities if e.size[-1] == 16)
    ents["s0.S1"] = next(e for e in space.knobs["s0.S1"].entities if e.size[-1] == 64)
    cfg = space.get(space.index_of(ents))
    with pytest.raises(sketch.TileTooLarge, match="register tile of 1024 elements"):
        task.instantiate(cfg)


def _config(task, **vals):
    """The fallback config with some knobs set (`s0_pack=1` sets knob "s0.pack"; a list value
    picks the split candidate of those factors)."""
    space = task.config_space
    ents = dict(space.get(space.fallback_index()).entities)
    for key, want in vals.items():
        knob = space.knobs[key.replace("_", ".", 1)]
        ents[knob.name] = next(e for e in knob.entities
                               if (e.size if knob.kind == "split" else e.val) == want)
    return space.get(space.index_of(ents))


def _build_and_compare(name, args, task, cfg):
    return _run_against_numpy(name, args, *task.instantiate(cfg))


def _run_against_numpy(name, args, s, tensors):
    text = str(tl.lower(s, tensors))
    rng = np.random.default_rng(0)
    ins = [rng.random([int(d.value) for d in t.shape], dtype=np.float32) - 0.25
           for t in tensors[:-1]]
    out = np.zeros([int(d.value) for d in tensors[-1].shape], np.float32)
    tl.build(s, tensors)(*ins, out)
    ref = W.reference(name, args, ins)
    np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-4 * np.abs(ref).max())
    return text


def test_packable_operands_are_the_reused_inputs():
    task = autotune.create_task(W.plain_matmul, (48, 64, 32))
    assert [e.val for e in task.config_space.knobs["s0.pack"].entities] == [-1, 0, 1]
    task = autotune.create_task(W.plain_conv2d, (1, 8, 10, 10, 16, 3, 1, 1))
    # the padded input P is a computed stage, the weights the one reused placeholder
    assert [e.val for e in task.config_space.knobs["s1.pack"].entities] == [-1, 1]


@pytest.mark.parametrize("vals, buffers", [
    # B packed into [K, 16] panels inside the parallel tile loop (j the vector)
    ({"s0_pack": 1, "s0_S1": [-1, 1, 1, 16], "s0_vec": 1}, ["B.local: float32[32, 16]"]),
    # A packed per row block, transposed (i the vector: A[i, k] stored [k, i]), in the tile;
    # the accumulator stored with i innermost
    ({"s0_pack": 0, "s0_pack_at": "tile", "s0_S0": [-1, 1, 2, 8], "s0_vec": 0},
     ["A.local: float32[32, 16]", "C.local: float32[16, 16]"]),
    # once per column panel: the panel loop parallel, the row tiles inside it
    ({"s0_pack": 1, "s0_pack_at": "panel", "s0_S1": [-1, 1, 1, 16], "s0_vec": 1},
     ["parallel for j.outer.outer.outer in range(4):\n    allocate B.local: float32[32, 16]"]),
    # the tile rule without an accumulator packs too
    ({"s0_rule": "plain", "s0_pack": 1, "s0_pack_at": "panel", "s0_S1": [-1, 1, 1, 16]},
     ["parallel for j.outer.outer.outer in range(4):\n    allocate B.local: float32[32, 16]"]),
])
def test_packed_matmul_sketches_are_legal_and_match_numpy(vals, buffers):
    task = autotune.create_task(W.plain_matmul, (48, 64, 32))
    text = _build_and_compare("plain_matmul", (48, 64, 32), task, _config(task, **vals))
    for b in buffers:
        assert b in text


def test_packed_conv_sketch_vectorizes_the_channels():
    args = (1, 8, 10, 10, 16, 3, 1, 1)
    task = autotune.create_task(W.plain_conv2d, args)
    cfg = _config(task, s1_pack=1, s1_vec=1, s1_S1=[-1, 1, 1, 8], s1_S3=[-1, 1, 1, 5])
    text = _build_and_compare("plain_conv2d", args, task, cfg)
    # weights packed [IC, KH, KW, 8 channels]; accumulator [n, y, x, 8 channels]
    assert "W.local: float32[8, 3, 3, 8]" in text
    assert "Y.local: float32[1, 2, 5, 8]" in text
    assert "Y.local[ramp(8, 1, 8)] = Y.local[ramp(8, 1, 8)] + " in text  # vector FMAs


def test_a_replayed_packing_record_reproduces_it(tmp_path, option):
    from tensorlang.autotune.record import append_records, make_record

    args = (48, 64, 32)
    task = autotune.create_task(W.plain_matmul, args)
    cfg = _config(task, s0_pack=1, s0_S1=[-1, 1, 1, 16])
    res, = measure_batch(option, [MeasureInput(task, cfg)])
    assert res.error is None, res.error_msg
    log = tmp_path / "mm.jsonl"
    append_records(log, [make_record(MeasureInput(task, cfg), res)])
    with autotune.apply_history_best(str(log)):
        s, tensors = task.instantiate()
    assert any(st["kind"] == "cache_read" for st in json.loads(s.trace.dumps()))
    want, _ = task.instantiate(cfg)
    assert s.trace.dumps() == want.trace.dumps()
    assert "B.local: float32[32, 16]" in _run_against_numpy("plain_matmul", args, s, tensors)


def test_an_expensive_stage_is_computed_by_default_where_inlining_would_recompute_it():
    from tensorlang.autotune.sketch_fill import structural_variants

    def node(dag, name):
        return next(nd for nd in dag.nodes if nd.op.name == name)

    # attention's exp, inlined through the normalization into P V, would be computed again
    # for every output column: computed by default, once per score
    dag = sketch.analyze(W.attention(1, 16, 8))
    assert sketch.inlining_recomputes(node(dag, "E"), dag)
    # a padding is cheap (inlined by default though every output channel reads it again)
    dag = sketch.analyze(W.plain_conv2d(1, 3, 8, 8, 4, 3))
    assert node(dag, "P").role == sketch.CHOOSE and not sketch.inlining_recomputes(
        node(dag, "P"), dag)
    # an exp read once per output element: nothing recomputed, inlined by default
    X = tl.placeholder((4, 8), name="X")
    E = tl.compute((4, 8), lambda i, j: tl.exp(X[i, j]), name="E")
    Y = tl.compute((8, 4), lambda j, i: E[i, j] * 2.0, name="Y")
    dag = sketch.analyze([X, Y])
    assert node(dag, "E").role == sketch.CHOOSE
    assert not sketch.inlining_recomputes(node(dag, "E"), dag)

    args = (1, 16, 8)
    task = autotune.create_task(W.attention, args)
    space = task.config_space
    fallback = space.get(space.fallback_index())
    assert fallback.entities["s2.inline"].val is False
    assert "allocate E" in _build_and_compare("attention", args, task, fallback)
    inlined = _config(task, s2_inline=True)
    assert "allocate E" not in _build_and_compare("attention", args, task, inlined)
    # the first batches measure both: whether to inline is a structural decision
    assert inlined.index in structural_variants(space)


def test_divisors_of_large_extents_are_found_by_pairs():
    from tensorlang.autotune.sketch_fill import divisors, tile_candidates

    for n in [*range(1, 400), 1 << 20, (1 << 20) - 2, 524287, 3600]:
        small = [d for d in range(1, min(n, 4000) + 1) if n % d == 0]
        got = divisors(n)
        assert got == sorted(set(got)) and got[:len(small)] == small
        assert all(n % d == 0 for d in got) and got[-1] == n
        assert len(got) == 2 * sum(1 for d in small if d * d < n) + (math.isqrt(n) ** 2 == n)
    assert divisors(524287) == [1, 524287]  # a prime
    cands = tile_candidates((1 << 20) - 2, 3, True)
    assert [-1, 1, 2] in cands and all(((1 << 20) - 2) % math.prod(c[1:]) == 0 for c in cands)
    cands.append([0])  # callers get their own lists (the cache keeps tuples)
    assert [0] not in tile_candidates((1 << 20) - 2, 3, True)


# ------------------------------------------------------------------ ragged vector tiles
@autotune.workload
def softmax_rows(H: int, R: int, C: int):
    """softmax over the last axis, written as its four computes (max, exp, sum, divide)."""
    X = tl.placeholder((H, R, C), name="X")
    k1 = tl.reduce_axis((0, C), name="k1")
    M = tl.compute((H, R), lambda h, i: tl.max(X[h, i, k1], axis=k1), name="M")
    E = tl.compute((H, R, C), lambda h, i, j: tl.exp(X[h, i, j] - M[h, i]), name="E")
    k2 = tl.reduce_axis((0, C), name="k2")
    S = tl.compute((H, R), lambda h, i: tl.sum(E[h, i, k2], axis=k2), name="S")
    return [X, tl.compute((H, R, C), lambda h, i, j: E[h, i, j] / S[h, i], name="Y")]


def _softmax_ref(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_a_prime_row_offers_ragged_vectors_and_others_keep_exact_tiles():
    from tensorlang.autotune.sketch_fill import ragged_vectors, structural_variants, tile_candidates

    # 197 (ViT's tokens) is prime: no vector divides it
    space = autotune.create_task(softmax_rows, (2, 3, 197)).config_space
    # s0 max, s1 exp, s2 sum, s3 the output: the vectorized levels take 16, 32, 8 lanes
    for name in ("s1.S2", "s3.S2"):
        assert [e.size for e in space.knobs[name].entities] == [
            [-1, 1, 1], [-1, 197, 1], [-1, 1, 16], [-1, 1, 32], [-1, 1, 8]]
    for red in ("s0", "s2"):
        assert [e.val for e in space.knobs[f"{red}.rule"].entities] == [
            "plain", "vec_spatial", "rf_lanes"]
        assert [e.val for e in space.knobs[f"{red}.lanes"].entities] == [1, 16, 32, 8]
    # the default (the reference kernel of every measurement) has no tail; the first batch
    # measures it and the structural variants also in their ragged form (16 lanes everywhere)
    fallback = space.get(space.fallback_index()).entities
    assert fallback["s0.rule"].val == "plain" and fallback["s3.S2"].size == [-1, 1, 1]
    seeded = [space.get(i).entities for i in structural_variants(space)]
    assert sum(v["s0.rule"].val == v["s2.rule"].val == "rf_lanes" and v["s2.lanes"].val == 16
               and v["s1.S2"].size == v["s3.S2"].size == [-1, 1, 16] for v in seeded) == 2
    assert any(v["s1.inline"].val is False and v["s3.S2"].size == [-1, 1, 16] for v in seeded)
    # an extent with a vector divisor keeps exactly its exact tiles (the space of the commit
    # before ragged tiles: 507227047723008 configs)
    space = autotune.create_task(softmax_rows, (2, 3, 192)).config_space
    assert len(space) == 507227047723008 and not hasattr(space, "ragged_seed")
    assert ragged_vectors(192) == ragged_vectors(61) == ragged_vectors(9) == []
    assert ragged_vectors(2 * 101) == [16, 32, 8] and ragged_vectors(20) == []
    assert tile_candidates(197, 3, True) == [[-1, 1, 1], [-1, 197, 1]]  # ragged: asked for
    # a DAG whose space must be thinned to stay countable gets no ragged tiles: its space,
    # cap and records stay those of the commit before them
    space = autotune.create_task(W.attention, (6, 197, 64)).config_space
    assert len(space) == 235653929134718976
    assert [e.val for e in space.knobs["s1.rule"].entities] == ["plain", "vec_spatial"]
    assert not hasattr(space, "ragged_seed")


@pytest.mark.parametrize("vals", [
    # exp and the output: 16-lane vectors, 4 whole ones and a 5-column tail; the max and the
    # sum factored into 16 (resp. 32) partial lanes whose last chunk is short
    {"s0_rule": "rf_lanes", "s0_lanes": 16, "s1_inline": False, "s1_S2": [-1, 1, 16],
     "s2_rule": "rf_lanes", "s2_lanes": 32, "s3_S2": [-1, 1, 16]},
    # the reductions computed inside the output's row loop, 8 and 32 lanes; the max by
    # vec_spatial, 16 of the 67 rows a vector
    {"s0_rule": "vec_spatial", "s0_V": [-1, 16], "s0_at": "consumer", "s1_inline": False,
     "s1_S2": [-1, 1, 8], "s2_rule": "rf_lanes", "s2_lanes": 8,
     "s2_at": "consumer", "s3_S2": [-1, 1, 32]},
])
def test_ragged_softmax_sketches_are_legal_and_match_numpy(vals):
    from tensorlang.analysis import check_schedule

    args = (1, 67, 67)  # a prime: no vector divides the rows nor the columns
    task = autotune.create_task(softmax_rows, args)
    s, tensors = task.instantiate(_config(task, **vals))
    check_schedule(s)
    text = str(tl.lower(s, tensors))
    lanes = vals["s3_S2"][-1]
    assert f", {lanes})]" in text  # the output's whole vectors
    x = np.random.default_rng(0).standard_normal(args).astype(np.float32) * 4
    out = np.full(args, np.nan, np.float32)
    tl.build(s, tensors)(x, out)
    # every column, the ragged tail's included
    np.testing.assert_allclose(out, _softmax_ref(x), rtol=2e-5, atol=1e-7)
    tail = 67 - 67 % lanes
    np.testing.assert_allclose(out[..., tail:], _softmax_ref(x)[..., tail:], rtol=2e-5)


def test_random_ragged_fills_of_a_prime_row_match_numpy():
    args = (1, 5, 131)
    task = autotune.create_task(softmax_rows, args)
    picked, refused = random_fill(task, 4, np.random.default_rng(3))
    assert refused == 0 and len(picked) == 4
    x = np.random.default_rng(1).standard_normal(args).astype(np.float32)
    for idx in picked:
        s, tensors = task.instantiate(task.config_space.get(idx))
        out = np.full(args, np.nan, np.float32)
        tl.build(s, tensors)(x, out)
        np.testing.assert_allclose(out, _softmax_ref(x), rtol=2e-5, atol=1e-7,
                                   err_msg=f"config {idx}")


@pytest.mark.parametrize("vals", [
    # a 16 x 16 register tile in the accumulator (cache_write) over 67 x 71: both last tiles
    # ragged (3 rows, 7 columns)
    {"s0_S0": [-1, 1, 1, 16], "s0_S1": [-1, 1, 1, 16]},
    # the rows the vector, B packed per column panel, 8 and 32 lanes
    {"s0_S0": [-1, 1, 1, 32], "s0_S1": [-1, 1, 1, 8], "s0_vec": 0, "s0_pack": 1,
     "s0_pack_at": "panel"},
])
def test_ragged_matmul_tiles_are_legal_and_match_numpy(vals):
    from tensorlang.analysis import check_schedule

    args = (67, 71, 16)
    task = autotune.create_task(W.plain_matmul, args)
    assert [e.size for e in task.config_space.knobs["s0.S1"].entities][-3:] == [
        [-1, 1, 1, 16], [-1, 1, 1, 32], [-1, 1, 1, 8]]
    cfg = _config(task, **vals)
    check_schedule(task.instantiate(cfg)[0])
    _build_and_compare("plain_matmul", args, task, cfg)


def test_records_of_exact_spaces_still_apply_and_ragged_ones_are_not_misapplied():
    # a record of the 197-column softmax made before ragged tiles: its values (lanes 1 was
    # the only lanes candidate) are all still candidates; the index it carries is ignored
    space = autotune.create_task(softmax_rows, (2, 3, 197)).config_space
    old = space.get(space.fallback_index()).to_json()
    old["entity"]["s0.lanes"] = old["entity"]["s2.lanes"] = 1
    old["index"] = 12345
    cfg = space.from_json(old)
    assert cfg.entities["s0.lanes"].val == 1 and cfg.to_json()["entity"] == old["entity"]
    # a ragged value in a space that does not offer it (thinned to stay countable): refused
    # (ApplyHistoryBest then skips the record and says why), never mapped to another tile
    space = autotune.create_task(W.attention, (6, 197, 64)).config_space
    rec = space.get(space.fallback_index()).to_json()
    rec["entity"]["s1.lanes"] = 16
    with pytest.raises(ValueError, match="s1.lanes.*not a candidate"):
        space.from_json(rec)
