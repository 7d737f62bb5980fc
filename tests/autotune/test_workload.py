"""Template-free tasks: @autotune.workload, create_task on a function, the structural hash,
records that replay through apply_history_best, resume from the log, and misuse."""

from __future__ import annotations

import json
import warnings

import autotune_test_workloads as W
import numpy as np
import pytest

import tensorlang as tl
from tensorlang import autotune


def _mm_relu(M, N, K, names=("A", "B", "C", "D"), shift=0.0):
    A = tl.placeholder((M, K), name=names[0])
    B = tl.placeholder((K, N), name=names[1])
    k = tl.reduce_axis((0, K), name="kk" if names[0] != "A" else "k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name=names[2])
    D = tl.compute((M, N), lambda x, y: tl.max(C[x, y] + shift, 0.0), name=names[3])
    return [A, B, D]


def _inputs(tensors, rng):
    from tensorlang.autotune.task import is_placeholder

    ins = [rng.random([int(d.value) for d in t.shape], dtype=np.float32) - 0.5
           for t in tensors if is_placeholder(t)]
    outs = [np.zeros([int(d.value) for d in t.shape], np.float32)
            for t in tensors if not is_placeholder(t)]
    return ins, outs


def test_create_task_on_a_registered_function_is_template_free():
    task = autotune.create_task(W.plain_matmul, args=(32, 16, 8), target="llvm")
    assert isinstance(task, autotune.WorkloadTask) and task.template_free
    assert task.name == "plain_matmul" and task.args == (32, 16, 8)
    assert task.flop == 2 * 32 * 16 * 8
    # by name too (what a worker process and apply_history_best do)
    same = autotune.create_task("plain_matmul", (32, 16, 8))
    assert same.compute_hash == task.compute_hash
    assert same.config_space.dims == task.config_space.dims


def test_structural_hash_ignores_names_and_sees_shapes_and_expressions():
    base = autotune.structural_hash(_mm_relu(16, 8, 4))
    assert autotune.structural_hash(_mm_relu(16, 8, 4, names=("P", "Q", "R", "S"))) == base
    assert autotune.structural_hash(_mm_relu(16, 8, 8)) != base  # a shape
    assert autotune.structural_hash(_mm_relu(16, 8, 4, shift=1.0)) != base  # an expression
    a = tl.placeholder((4,), dtype="float32", name="A")
    b = tl.placeholder((4,), dtype="float64", name="A")
    f32 = autotune.structural_hash([a, tl.compute((4,), lambda i: a[i] * 2.0, name="C")])
    f64 = autotune.structural_hash([b, tl.compute((4,), lambda i: b[i] * 2.0, name="C")])
    assert f32 != f64  # a dtype


def test_create_task_refuses_an_unregistered_function():
    def not_registered(n):
        return []

    with pytest.raises(autotune.TemplateError, match="not a registered workload"):
        autotune.create_task(not_registered, args=(4,))


def test_create_task_refuses_wrong_args():
    with pytest.raises(autotune.TemplateError, match=r"workload 'plain_matmul' called with "
                                                    r"args=\[4\]"):
        autotune.create_task(W.plain_matmul, args=(4,))
    with pytest.raises(TypeError, match="template arguments must be ints"):
        autotune.create_task(W.plain_matmul, args=(4, 4, object()))


def test_workload_must_return_tensors_and_cannot_take_a_template_name():
    @autotune.workload(name="t20_returns_int")
    def returns_int(n):
        return n

    with pytest.raises(autotune.TemplateError, match="must return a list of tensors"):
        autotune.create_task(returns_int, args=(4,))

    @autotune.workload(name="t20_only_inputs")
    def only_inputs(n):
        return [tl.placeholder((n,), name="A")]

    with pytest.raises(autotune.TemplateError, match="returned only placeholders"):
        autotune.create_task(only_inputs, args=(4,))
    with pytest.raises(autotune.TemplateError, match="'dense' is already a template's name"):
        autotune.workload(name="dense")(returns_int)
    with pytest.raises(autotune.TemplateError, match="is not the one registered"):
        _mm_relu.workload_name = "plain_matmul"
        try:
            autotune.create_task(_mm_relu, args=(4, 4, 4))
        finally:
            del _mm_relu.workload_name


def _tune(log, task, n, seed=0):
    opt = autotune.measure_option(autotune.LocalBuilder(2),
                                  autotune.LocalRunner(number=2, repeat=2, timeout=10))
    # the XGBTuner entry point on a template-free task (its first batch: the fallback config
    # and random ones); RandomTuner resumes from its log below
    t = autotune.XGBTuner(task, batch_size=4, seed=seed, feature_workers=0)
    try:
        t.tune(n, opt, callbacks=[autotune.log_to_file(log)])
    finally:
        opt.close()
    return t


@pytest.fixture(scope="module")
def mm_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("wl") / "bmm.jsonl"
    task = autotune.create_task(W.bmm_nt_bias_relu, args=(2, 16, 32, 8))
    tuner = _tune(log, task, 4)
    return log, task, tuner


def test_records_hold_the_trace_and_the_structural_hash(mm_log):
    log, task, _ = mm_log
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(recs) == 4
    for r in recs:
        assert r["workload"] == {"name": "bmm_nt_bias_relu", "args": [2, 16, 32, 8],
                                 "hash": task.compute_hash}
        assert set(r["config"]["entity"]) == set(task.config_space.knobs)
    ok = [r for r in recs if r["result"]["error"] is None]
    assert ok and all(r["trace"] for r in ok)
    assert {s["kind"] for r in ok for s in r["trace"]} >= {"split", "reorder"}


def test_apply_history_best_replays_the_best_trace(mm_log):
    log, task, _ = mm_log
    best = min((r for r in autotune.load_records(log) if r.valid), key=lambda r: r.cost)
    with autotune.apply_history_best(log) as ctx:
        s, tensors = task.instantiate()
    assert ctx.applied[task.key].config == best.config
    assert json.loads(s.trace.dumps()) == best.trace
    f = tl.build(s, tensors)
    ins, outs = _inputs(tensors, np.random.default_rng(0))
    f(*ins, *outs)
    np.testing.assert_allclose(outs[0], W.reference("bmm_nt_bias_relu", task.args, ins),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:.*had no applicable tuning record")
def test_records_survive_renaming_but_not_a_changed_compute(mm_log, tmp_path):
    log, task, _ = mm_log

    def renamed(Bt, M, N, K):
        X = tl.placeholder((Bt, M, K), name="X")
        Y = tl.placeholder((Bt, N, K), name="Y")
        bb = tl.placeholder((N,), name="b")
        r = tl.reduce_axis((0, K), name="r")
        P = tl.compute((Bt, M, N), lambda a, i, j: tl.sum(X[a, i, r] * Y[a, j, r], axis=r),
                       name="prod")
        return [X, Y, bb, tl.compute((Bt, M, N), lambda a, i, j: tl.max(P[a, i, j] + bb[j],
                                                                          0.0), name="out")]

    def changed(Bt, M, N, K):
        out = renamed(Bt, M, N, K)
        return out[:3] + [tl.compute(out[3].shape, lambda a, i, j: out[3][a, i, j] * 2.0,
                                     name="twice")]

    try:
        autotune.workload(name="bmm_nt_bias_relu")(renamed)
        t2 = autotune.create_task("bmm_nt_bias_relu", task.args)
        assert t2.compute_hash == task.compute_hash
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with autotune.apply_history_best(log) as ctx:
                t2.instantiate()
        assert task.key in ctx.applied
        autotune.workload(name="bmm_nt_bias_relu")(changed)
        t3 = autotune.create_task("bmm_nt_bias_relu", task.args)
        assert t3.compute_hash != task.compute_hash
        with pytest.warns(UserWarning, match="compute definition changed"), \
                autotune.apply_history_best(log):
            t3.instantiate()
    finally:
        autotune.workload(W.bmm_nt_bias_relu)  # the module's definition again


def test_resume_from_the_log_measures_nothing_twice(mm_log, tmp_path):
    log, task, first = mm_log
    resumed = autotune.RandomTuner(task, batch_size=4, seed=0)
    resumed.load_history(autotune.load_records(log))
    done = {task.config_space.index_of(r.config["entity"]) for r in autotune.load_records(log)}
    assert done <= resumed.visited
    assert resumed.best_flops == pytest.approx(first.best_flops)
    nxt = resumed.next_batch(4)
    assert nxt and not set(nxt) & done
