"""AutoTVM round 2: the convolution tuning tutorials' idioms (TVM's AnnotateEntity.apply
limits, cfg.raise_error, the fallback idioms cfg[name] = SplitEntity(...) and fallback_split,
DispatchContext.current as an attribute, FallbackContext, query(target, task.workload),
record.load_from_file, the index-based tuners' range_idx), and the whole tutorial as a script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tensorlang.autotune.space import (
    AnnotateEntity,
    ConfigSpace,
    FallbackConfig,
    SplitEntity,
)

import tensorlang as tl
from tensorlang import autotune as autotvm

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@autotvm.template("tvm_round2/unroll")
def unroll_template(n: int, max_unroll: int):
    A = tl.placeholder((n, 8), name="A")
    k = tl.reduce_axis((0, 8), name="k")
    B = tl.compute((n,), lambda i: tl.sum(A[i, k] * 2, axis=k), name="B")
    s = tl.create_schedule(B)
    cfg = autotvm.get_config()
    (i,) = s[B].op.axis
    cfg.define_split("tile_i", i, num_outputs=2, policy="power2",
                     filter=lambda e: e.size[-1] <= 8)
    cfg.define_annotate("ann", [k], policy="try_unroll")
    if cfg.is_fallback:
        cfg.fallback_split("tile_i", [-1, 4])
    io, ii = cfg["tile_i"].apply(s, B, i)
    s[B].reorder(io, k, ii)
    cfg["ann"].apply(s, B, [k], axis_lens=[8], max_unroll=max_unroll, cfg=cfg)
    return s, [A, B]


def test_conv2d_tutorial_script_tunes_loads_and_applies(tmp_path):
    log = tmp_path / "conv2d.log"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "autotvm_conv2d.py"), str(log)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "ConfigSpace (len=1152)" in proc.stdout  # verbose + filter: 3 tile_x candidates
    assert "loaded 9 records" in proc.stdout and "Best config: Config#" in proc.stdout
    assert "the results match numpy" in proc.stdout
    assert "[Task 3/3 random]" in proc.stderr  # the progress bar's prefix
    assert len((tmp_path / "conv2d.log.best").read_text().splitlines()) == 1


def test_annotate_apply_takes_tvms_limits():
    task = autotvm.task.create("tvm_round2/unroll", args=(16, 4), target="llvm")
    space = task.config_space
    assert [e.size for e in space.knobs["tile_i"].entities] == [[-1, 1], [-1, 2], [-1, 4],
                                                                [-1, 8]]
    unrolled = next(i for i in range(len(space)) if space.get(i)["ann"].anns == ["unroll"])
    # the loop of 8 is longer than max_unroll=4: the config is invalid, an illegal schedule
    with pytest.raises(tl.ScheduleError, match=r"invalid config: unroll of loop k: extent 8 > "
                                               r"max_unroll=4"):
        task.instantiate(space.get(unrolled))
    assert not task.is_legal(space.get(unrolled))
    assert task.is_legal(space.get(0))
    ok = autotvm.task.create("tvm_round2/unroll", args=(16, 8), target="llvm")
    assert ok.is_legal(ok.config_space.get(unrolled))
    s = tl.create_schedule(tl.compute((8,), lambda i: tl.placeholder((8,), name="X")[i],
                                      name="Y"))
    stage = s.stages[-1]
    with pytest.raises(tl.ScheduleError, match=r"vectorize of loop .*: extent 8 not in "
                                               r"vec_size=\[4\]"):
        AnnotateEntity(["vec"]).apply(s, stage, stage.leaf_iter_vars, vec_size=[4])
    with pytest.raises(ValueError, match="source= places caches for TVM's 'locate_cache'"):
        AnnotateEntity(["none"]).apply(s, stage, stage.leaf_iter_vars, source=[[stage]])


def test_raise_error_fails_a_measured_config_and_is_recorded_elsewhere():
    space = ConfigSpace()
    space.define_knob("x", [1, 2])
    space.raise_error("collecting")  # TVM records, the space is still usable
    assert not space.valid() and space.errors == ["collecting"]
    with pytest.raises(tl.ScheduleError, match="invalid config: too big"):
        space.get(1).raise_error("too big")
    fallback = FallbackConfig()
    fallback.raise_error("default")
    assert not fallback.valid()


def test_fallback_idioms_set_the_default_config():
    cfg = FallbackConfig()
    cfg.define_split("t", 48, num_outputs=3)
    cfg.fallback_split("t", [-1, 4, 8])  # TVM: innermost first, the largest divisor that fits
    assert cfg["t"].size == [-1, 3, 8]
    cfg["u"] = SplitEntity([-1, 2])
    assert cfg.define_split("u", 16).size == [-1, 2]  # the value set first is kept
    with pytest.raises(TypeError, match=r"cfg\['v'\] = ...: expected a SplitEntity"):
        cfg["v"] = [-1, 2]
    with pytest.raises(ValueError, match=r"fallback_split\('w'\): define_split\('w', ...\) "
                                         r"first"):
        cfg.fallback_split("w", [-1, 2])
    with pytest.raises(ValueError, match="2 constraints for a split into 3"):
        cfg.fallback_split("t", [-1, 2])
    # in a template, under no dispatch context
    s, (_, B) = unroll_template(16, 8)
    assert [int(lv.dom.extent) for lv in s[B].leaf_iter_vars] == [4, 8, 4]


def test_dispatch_context_current_and_query_with_a_workload(tmp_path):
    assert isinstance(autotvm.DispatchContext.current, autotvm.FallbackContext)
    task = autotvm.task.create("tvm_round2/unroll", args=(16, 8), target="llvm")
    cfg = task.config_space.get(5)
    with autotvm.task.ApplyConfig(cfg) as ctx:
        assert autotvm.DispatchContext.current is ctx
        assert ctx.query(task.target, task.workload) is cfg
        with autotvm.FallbackContext() as fb:
            assert autotvm.DispatchContext.current is fb
            assert fb.query("llvm", ("tvm_round2/unroll", 16, 8)).is_fallback
        with pytest.raises(TypeError, match="query: expected a workload"):
            ctx.query("llvm", 42)
    rec = {"workload": task.workload, "target": "llvm", "config": cfg.to_json(), "trace": None,
           "result": {"costs": [1e-6], "error": None, "error_msg": "", "all_cost": 0.1},
           "timestamp": 1.0, "version": tl.__version__}
    log = tmp_path / "one.log"
    log.write_text(json.dumps(rec) + "\n")
    with autotvm.apply_history_best(str(log)) as best:
        assert best.query(task.target, task.workload) == cfg
        assert best.query("llvm", "tvm_round2/unroll", (16, 8)) == cfg  # our form
    (inp, res), = autotvm.record.load_from_file(str(log))
    assert inp.config == cfg and inp.task.key == task.key
    assert res.costs == [1e-6] and res.valid and res.timestamp == 1.0


def test_index_tuners_take_range_idx():
    task = autotvm.task.create("tvm_round2/unroll", args=(16, 8), target="llvm")
    grid = autotvm.tuner.GridSearchTuner(task, range_idx=(2, 5))
    assert grid.next_batch(3) == [2, 3, 4] and grid.next_batch(3) == [5]
    assert not grid.has_next()
    rnd = autotvm.tuner.RandomTuner(task, range_idx=(1, 3))
    got = rnd.next_batch(8)
    assert sorted(got) == [1, 2, 3]
    rnd.visited.update(got)
    assert not rnd.has_next()
    with pytest.raises(ValueError, match=r"range_idx must be \(first, last\) with 0 <= first "
                                         r"<= last < 8"):
        autotvm.tuner.GridSearchTuner(task, range_idx=(0, 8))
