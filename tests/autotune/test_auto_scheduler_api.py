"""tensorlang.auto_scheduler, TVM's Ansor API (the tutorials themselves run as scripts in
tests/test_tvm_scripts.py): each piece and its misuse. Records are made here without measuring
(chosen configs, chosen times), so that what is applied and resumed is known exactly."""

from __future__ import annotations

import json
import time
import warnings

import numpy as np
import pytest
from tensorlang.autotune.measure import MeasureInput, MeasureResult
from tensorlang.autotune.record import append_records, make_record
from tensorlang.autotune.sketch_fill import structural_variants

import tensorlang as tl
from tensorlang import auto_scheduler, autotune, graph, te

N = L = M = 32


@auto_scheduler.register_workload
def as_matmul_add(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    C = te.placeholder((N, M), name="C", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")
    out = te.compute((N, M), lambda i, j: matmul[i, j] + C[i, j], name="out")
    return [A, B, C, out]


@pytest.fixture(scope="module")
def task():
    return auto_scheduler.SearchTask(func=as_matmul_add, args=(N, L, M, "float32"),
                                     target="llvm")


@pytest.fixture(scope="module")
def legal(task):
    """Six configs that pass the legality checks."""
    space = task.task.config_space
    return [i for i in structural_variants(space) if task.task.is_legal(space.get(i))][:6]


def _records(search_task, picks):
    """Records of (config index, seconds) pairs, as a measured run logs them."""
    out = []
    for idx, cost in picks:
        cfg = search_task.task.config_space.get(idx)
        s, _ = search_task.task.instantiate(cfg)
        res = MeasureResult([cost], None, "", 0.1, time.time(), s.trace.dumps())
        out.append(make_record(MeasureInput(search_task.task, cfg), res))
    return out


@pytest.fixture(scope="module")
def log(task, legal, tmp_path_factory):
    """A log of six configs; legal[2] is the fastest."""
    path = tmp_path_factory.mktemp("as") / "matmul.json"
    costs = [3e-5, 2e-5, 1e-6, 4e-5, 5e-5, 6e-5]
    append_records(path, _records(task, list(zip(legal, costs))))
    return str(path)


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    a, b, c = (rng.random((n, m), dtype=np.float32) for n, m in ((N, L), (L, M), (N, M)))
    return a, b, c, a @ b + c


# ----------------------------------------------------------------------------- the namespace
def test_every_spelling_of_the_module_is_one_module():
    import tensorlang.graph.auto_scheduler as defined

    import tensorlang.auto_scheduler as by_import

    assert tl.auto_scheduler is auto_scheduler is by_import is defined
    assert set(auto_scheduler.__all__) <= set(dir(auto_scheduler))


@pytest.mark.parametrize("name,message", [
    ("RPCRunner", "there is no RPC measurement.*auto_scheduler.LocalRunner"),
    ("LocalRPCMeasureContext", "GPU construct.*no RPC measurement"),
    ("measure_record", "autotune.load_records.*task.print_best"),
    ("load_records", "tensorlang's JSON lines"),
    ("HardwareParams", "this machine's CPU"),
    ("PreloadCustomSketchRule", "custom sketch rules are not supported"),
    ("auto_schedule", r"task.tune\(tuning_options, search_policy\)"),
])
def test_ansor_names_we_lack_say_what_to_use(name, message):
    with pytest.raises(AttributeError, match=f"module 'tensorlang.auto_scheduler' has no "
                                             f"attribute '{name}': .*{message}"):
        getattr(auto_scheduler, name)


def test_an_unknown_name_keeps_pythons_message():
    with pytest.raises(AttributeError, match="^module 'tensorlang.auto_scheduler' has no "
                                             "attribute 'nope'$"):
        auto_scheduler.nope  # noqa: B018


# ----------------------------------------------------------------------------- workloads
def test_register_workload_forms_and_a_name_taken_by_another_function():
    def f(n):
        A = te.placeholder((n,), name="A")
        return [A, te.compute((n,), lambda i: A[i] * 2.0, name="B")]

    def g(n):
        return f(n)

    assert auto_scheduler.register_workload(f) is f and f.workload_name == "f"
    assert auto_scheduler.register_workload("as_named")(f).workload_name == "as_named"
    assert auto_scheduler.register_workload("as_named_2", f).workload_name == "as_named_2"
    auto_scheduler.register_workload("as_named")(f)  # the same definition again: fine
    with pytest.raises(autotune.TemplateError, match="'as_named' is already registered to "
                                                     ".*f; give another name, or override=True"):
        auto_scheduler.register_workload("as_named")(g)
    auto_scheduler.register_workload("as_named", g, override=True)
    assert auto_scheduler.SearchTask(func="as_named", args=(4,)).task.template.workload_func is g
    with pytest.raises(TypeError, match="expected a function or a name, got int"):
        auto_scheduler.register_workload(3)


# ----------------------------------------------------------------------------- SearchTask
def test_search_task_spellings_name_one_workload(task):
    assert task.task.template_free and task.target == "llvm" and task.desc == "as_matmul_add"
    assert task.workload_key == autotune.create_task(as_matmul_add, (N, L, M, "float32")).key
    by_key = auto_scheduler.SearchTask(workload_key=task.workload_key, target="llvm")
    tvm_key = json.dumps(["as_matmul_add", N, L, M, "float32"])  # TVM's flat form
    by_tvm_key = auto_scheduler.SearchTask(workload_key=tvm_key)  # target None: llvm
    by_name = auto_scheduler.SearchTask(func="as_matmul_add", args=[N, L, M, "float32"])
    assert by_key.workload_key == by_tvm_key.workload_key == by_name.workload_key == \
        task.workload_key
    from tensorlang.codegen.target import Target

    host = auto_scheduler.SearchTask(func=as_matmul_add, args=(N, L, M, "float32"),
                                     target=Target.from_string("llvm"))
    assert host.target.startswith("llvm -mcpu=")


def test_compute_dag_prints_the_declarations_and_counts_flops(task):
    dag = task.compute_dag
    assert str(dag).splitlines() == [
        "A = PLACEHOLDER [32, 32] float32",
        "B = PLACEHOLDER [32, 32] float32",
        "matmul(i, j) = sum(A[i, k] * B[k, j], axis=[k])  (k in [0, 32))",
        "C = PLACEHOLDER [32, 32] float32",
        "out(i, j) = matmul[i, j] + C[i, j]"]
    assert dag.flop_ct == 2 * N * L * M + N * M and dag.has_reduction()
    with pytest.raises(TypeError, match="ComputeDAG: expected tensors, got int"):
        auto_scheduler.ComputeDAG([1])
    with pytest.raises(ValueError, match="no tensors"):
        auto_scheduler.ComputeDAG([])


@pytest.mark.parametrize("kwargs,error,message", [
    ({"func": lambda n: n, "args": (4,)}, autotune.TemplateError,
     "not a registered workload; decorate the function with @auto_scheduler.register_workload"),
    ({"func": as_matmul_add}, TypeError, "args= is required with func="),
    ({}, TypeError, "give func="),
    ({"func": as_matmul_add, "args": (4, 4, 4, "float32"), "workload_key": "[]"}, ValueError,
     "not both"),
    ({"workload_key": "matmul"}, ValueError, "workload_key must be a JSON list"),
    ({"workload_key": '["no_such", 4]'}, autotune.TemplateError, "'no_such' is not a registered"),
    ({"compute_dag": "dag", "func": as_matmul_add, "args": (4, 4, 4, "float32")}, ValueError,
     r"compute_dag='dag' is not supported \(a task is made from its workload function"),
    ({"hardware_params": 1, "func": as_matmul_add, "args": (4, 4, 4, "float32")}, ValueError,
     "this machine's CPU"),
    ({"task_inputs": {"x": 1}, "func": as_matmul_add, "args": (4, 4, 4, "float32")},
     ValueError, "random inputs"),
    ({"func": as_matmul_add, "args": (4, 4, 4, "float32"), "target": "cuda"}, ValueError,
     "only 'llvm"),
    ({"func": as_matmul_add, "args": (4, 4, 4, "float32"), "target": 3}, TypeError,
     "target must be a string such as 'llvm'"),
    ({"func": as_matmul_add, "args": (4, 4, 4, "float32"), "target_host": "llvm -mcpu=x"},
     ValueError, "CPU kernels are their own host"),
])
def test_search_task_misuse_is_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        auto_scheduler.SearchTask(**kwargs)


# ----------------------------------------------------------------------------- options
def test_tuning_options_defaults_are_ansors():
    opts = auto_scheduler.TuningOptions()
    assert opts.num_measure_trials == 0 and opts.num_measures_per_round == 64
    assert isinstance(opts.runner, auto_scheduler.LocalRunner)
    assert (opts.runner.number, opts.runner.repeat, opts.runner.min_repeat_ms) == (3, 1, 100)
    assert opts.builder.timeout == 15 and opts.early_stopping is None
    assert auto_scheduler.TuningOptions(early_stopping=-1).early_stopping is None
    r = auto_scheduler.LocalRunner(repeat=10, enable_cpu_cache_flush=True, cooldown_interval=0.1)
    assert r.flush_cache and r.repeat == 10 and r.cooldown == 0.1
    opts = auto_scheduler.TuningOptions(runner=autotune.LocalRunner(number=2),
                                        measure_callbacks=[auto_scheduler.RecordToFile("x.json")])
    assert opts.runner.number == 2 and opts.record_files() == ["x.json"]


@pytest.mark.parametrize("kwargs,error,message", [
    ({"runner": "rpc"}, ValueError, "runner='rpc'.*no RPC measurement"),
    ({"builder": object()}, TypeError, "builder must be 'local' or an .*LocalBuilder, got object"),
    ({"num_measure_trials": -1}, ValueError, "num_measure_trials must be >= 0"),
    ({"num_measures_per_round": 0}, ValueError, "num_measures_per_round must be >= 1"),
    ({"verbose": 3}, ValueError, "verbose must be 0, 1 or 2"),
    ({"measure_callbacks": print}, TypeError, "must be a list, got one"),
    ({"measure_callbacks": [3]}, TypeError, "RecordToFile.*got int"),
])
def test_tuning_options_misuse_is_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        auto_scheduler.TuningOptions(**kwargs)


def test_runner_and_record_file_misuse_is_refused(tmp_path):
    with pytest.raises(ValueError, match="one CPU device, index 0"):
        auto_scheduler.LocalRunner(device=1)
    with pytest.raises(ValueError, match=r"TVM's build_func='ndk' is not supported"):
        auto_scheduler.LocalBuilder(build_func="ndk")
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x08\x07\x00binary")
    with pytest.raises(ValueError, match="is not a tuning log"):
        auto_scheduler.RecordToFile(model)


# ----------------------------------------------------------------------------- apply / print
def test_apply_best_applies_the_fastest_record(task, legal, log):
    sch, args = task.apply_best(log)
    best, _ = task.task.instantiate(task.task.config_space.get(legal[2]))
    assert sch.trace.to_json() == best.trace.to_json()
    a, b, c, ref = _arrays()
    out = np.zeros_like(ref)
    tl.build(sch, args, "llvm")(a, b, c, out)
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_print_best_is_code_that_rebuilds_the_schedule(task, log):
    code = task.print_best(log)
    assert code.startswith(f"# {task.workload_key}: the best record of {log}, 0.001 ms")
    sch, args = task.apply_best(log)
    s = tl.create_schedule(args[-1].op)
    names = {st.name: st.op.output(0) for st in s.stages}
    exec(code, {"s": s, **names, **{t.op.name: t for t in args}})  # noqa: S102 - under test
    assert s.trace.to_json() == sch.trace.to_json()
    with pytest.raises(ValueError, match="print_mode='cuda' prints CUDA source, a GPU target"):
        task.print_best(log, print_mode="cuda")
    with pytest.raises(ValueError, match="print_mode must be 'schedule', got 'tir'"):
        task.print_best(log, print_mode="tir")


def test_apply_best_without_an_applicable_record_says_why(task, legal, tmp_path):
    other = auto_scheduler.SearchTask(func=as_matmul_add, args=(16, 16, 16, "float32"))
    with pytest.raises(ValueError, match=r"has no schedule of \[\"as_matmul_add\", \[16, .*it "
                                         "holds no valid record of it"):
        other.apply_best(_log_of(task, legal, tmp_path))  # only the 32^3 workload's record
    changed = tmp_path / "changed.json"
    rec = _records(task, [(legal[0], 1e-5)])[0]
    rec.workload = dict(rec.workload, hash="0" * 16)
    append_records(changed, [rec])
    with pytest.raises(ValueError, match="compute definition changed"):
        task.apply_best(changed)
    with pytest.raises(FileNotFoundError, match="no tuning log at"):
        task.apply_best(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="include_compatible=True is not supported"):
        task.apply_best(changed, include_compatible=True)


def _log_of(task, legal, tmp_path):
    path = tmp_path / "one.json"
    append_records(path, _records(task, [(legal[0], 1e-5)]))
    return path


# ----------------------------------------------------------------------------- resuming
def _logged(task, log):
    space = task.task.config_space
    return {space.index_of(r.config["entity"]) for r in autotune.load_records(log)}


def test_the_model_alone_learns_the_log_but_marks_nothing_measured(task, log):
    model = auto_scheduler.XGBModel(seed=0)
    model.update_from_file(log)
    policy = auto_scheduler.SketchPolicy(task, model, verbose=0)
    assert len(policy.tuner._x) == 6 and policy.tuner._model is not None
    assert not policy.tuner.visited & _logged(task, log) and policy.tuner.best_flops == 0
    short = auto_scheduler.XGBModel()
    short.update_from_file(log, n_lines=2)
    assert len(short.records) == 2


def test_preloading_alone_marks_the_log_measured_without_learning(task, legal, log, capsys):
    preload = auto_scheduler.PreloadMeasuredStates(log)
    policy = auto_scheduler.SketchPolicy(task, auto_scheduler.XGBModel(),
                                         init_search_callbacks=[preload])
    assert preload.loaded == 6 and "6 measured candidates of as_matmul_add" in \
        capsys.readouterr().out
    assert _logged(task, log) <= policy.tuner.visited and not policy.tuner._x
    assert policy.tuner.best_config.index == legal[2]
    assert policy.tuner.best_flops == pytest.approx(task.task.flop / 1e-6)


def test_resuming_with_both_never_proposes_a_logged_config(task, log):
    model = auto_scheduler.XGBModel(seed=1)
    model.update_from_file(log)
    policy = auto_scheduler.SketchPolicy(
        task, model, verbose=0,
        init_search_callbacks=[auto_scheduler.PreloadMeasuredStates(log)])
    assert len(policy.tuner._x) == 6 and _logged(task, log) <= policy.tuner.visited
    batch = policy.tuner.next_batch(8)
    assert len(batch) == 8 and not set(batch) & _logged(task, log)


def test_a_random_model_never_fits(task, legal):
    policy = auto_scheduler.SketchPolicy(task, auto_scheduler.RandomModel(), seed=0, verbose=0)
    recs = _records(task, [(i, 1e-5 * (n + 1)) for n, i in enumerate(legal)])
    policy.tuner.learn_records(recs)
    assert len(policy.tuner._x) == 6 and policy.tuner._model is None


def test_sketch_policy_params_and_misuse(task, tmp_path):
    policy = auto_scheduler.SketchPolicy(task, params={"eps_greedy": 0.2}, verbose=0)
    assert policy.tuner.epsilon == 0.2
    with pytest.raises(ValueError, match=r"params \['max_innermost_split_factor'\] are not "
                                         "supported.*eps_greedy"):
        auto_scheduler.SketchPolicy(task, params={"max_innermost_split_factor": 64})
    with pytest.raises(TypeError, match="expected an auto_scheduler.SearchTask, got WorkloadTask"):
        auto_scheduler.SketchPolicy(task.task)
    with pytest.raises(TypeError, match="program_cost_model must be an auto_scheduler.XGBModel"):
        auto_scheduler.SketchPolicy(task, "xgb")
    with pytest.raises(TypeError, match="init_search_callbacks take PreloadMeasuredStates"):
        auto_scheduler.SketchPolicy(task, init_search_callbacks=[print])
    with pytest.raises(FileNotFoundError, match="PreloadMeasuredStates: no tuning log at"):
        auto_scheduler.SketchPolicy(task, init_search_callbacks=[
            auto_scheduler.PreloadMeasuredStates(tmp_path / "none.json")])
    with pytest.raises(ValueError, match="model_file='m.xgb' is not supported"):
        auto_scheduler.XGBModel(model_file="m.xgb")
    with pytest.raises(FileNotFoundError, match="update_from_file: no tuning log"):
        auto_scheduler.XGBModel().update_from_file(tmp_path / "none.json")


def test_tune_refuses_another_tasks_policy_and_bad_options(task):
    other = auto_scheduler.SearchTask(func=as_matmul_add, args=(16, 16, 16, "float32"))
    opts = auto_scheduler.TuningOptions(num_measure_trials=0)
    task.tune(opts)  # no trials: nothing measured, nothing started
    with pytest.raises(ValueError, match="the search policy was made for SearchTask"):
        task.tune(opts, search_policy=auto_scheduler.SketchPolicy(other, verbose=0))
    with pytest.raises(TypeError, match="expected auto_scheduler.TuningOptions"):
        task.tune({"num_measure_trials": 4})
    with pytest.raises(TypeError, match="search_policy must be an auto_scheduler.SketchPolicy"):
        task.tune(opts, search_policy="sketch.xgb")
    with pytest.raises(ValueError, match="adaptive_training=True is not supported"):
        task.tune(opts, adaptive_training=True)


# ----------------------------------------------------------------------------- history
def test_apply_history_best_is_a_dispatch_context(task, legal, log):
    assert auto_scheduler.history_in_context() is None
    with auto_scheduler.ApplyHistoryBest(log) as ctx:
        assert auto_scheduler.history_in_context() == log
        s, _ = task.task.instantiate()
    assert ctx.applied[task.workload_key].config["index"] == legal[2]
    best, _ = task.task.instantiate(task.task.config_space.get(legal[2]))
    assert s.trace.to_json() == best.trace.to_json()
    assert auto_scheduler.history_in_context() is None


def test_apply_history_best_takes_tvms_record_sources(task, legal, log):
    recs = autotune.load_records(log)
    pairs = [(MeasureInput(task.task, task.task.config_space.from_json(r.config)),
              MeasureResult(r.result["costs"])) for r in recs]
    for source, n in ((recs, 6), ([log, log], 12), (pairs, 6)):
        assert len(auto_scheduler.ApplyHistoryBest(source).log) == n
    first = auto_scheduler.ApplyHistoryBest(log, n_lines=2)
    assert len(first.log) == 2 and first.best("llvm", task.task.name, task.task.args).config[
        "index"] == legal[1]  # the faster of the first two
    with pytest.raises(TypeError, match="expected a log's path, a list of paths or a list of "
                                        "records, got int"):
        auto_scheduler.ApplyHistoryBest(3)
    with pytest.raises(TypeError, match=r"expected paths, Records or \(MeasureInput, "
                                        "MeasureResult\\) pairs, got int"):
        auto_scheduler.ApplyHistoryBest([3])
    with pytest.raises(ValueError, match="include_compatible=True is not supported"):
        auto_scheduler.ApplyHistoryBest(log, include_compatible=True)


# ----------------------------------------------------------------------------- graphs
def _graph():
    b = graph.Builder("as_net")
    x = b.input("x", (8, 64))
    return b.build(b.softmax(b.relu(x), axes=[1]))


def _softmax_ref(x):
    r = np.maximum(x, 0.0)
    e = np.exp(r - r.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_extract_tasks_leaves_out_simple_tasks_unless_asked(tmp_path):
    g = _graph()
    tasks, weights = auto_scheduler.extract_tasks(g, None, "llvm")
    assert [t.desc for t in tasks] == ["softmax"] and weights == [1]
    assert isinstance(tasks[0], auto_scheduler.SearchTask) and tasks[0].task.template_free
    dump = tmp_path / "dags.json"
    every, _ = auto_scheduler.extract_tasks(g, {}, "llvm", include_simple_tasks=True,
                                            dump_workload_to_dag_log=str(dump))
    assert [t.desc for t in every] == ["relu", "softmax"]
    assert json.loads(dump.read_text()) == {t.workload_key: str(t.compute_dag) for t in every}


class IRModule:  # what a TVM script would pass
    __module__ = "tvm.ir.module"


@pytest.mark.parametrize("mod,params,message", [
    (IRModule(), None, "got a Relay IRModule; .*graph.from_onnx"),
    ("model.onnx", None, "a model not imported yet: g = graph.from_onnx"),
    (3, None, "expected a tensorlang graph.Graph"),
])
def test_extract_tasks_refuses_what_is_not_a_graph(mod, params, message):
    with pytest.raises(TypeError, match=message):
        auto_scheduler.extract_tasks(mod, params, "llvm")


def test_extract_tasks_refuses_params_and_other_targets():
    with pytest.raises(ValueError, match="the graph holds its weights"):
        auto_scheduler.extract_tasks(_graph(), {"w": np.zeros(3)}, "llvm")
    with pytest.raises(ValueError, match="other_targets=.* is not supported"):
        auto_scheduler.extract_tasks(_graph(), None, "llvm", other_targets=["c"])


def test_graph_build_inside_apply_history_best_uses_the_log(tmp_path):
    g = _graph()
    (task,), _ = auto_scheduler.extract_tasks(g, None, "llvm")
    space = task.task.config_space
    idx = next(i for i in structural_variants(space) if task.task.is_legal(space.get(i)))
    recs = _records(task, [(idx, 1e-9)])
    log = tmp_path / "net.json"
    append_records(log, recs)
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    for source in (str(log), recs):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no kernel of the log is reported untuned
            with auto_scheduler.ApplyHistoryBest(source):
                gm = graph.build(g, target="llvm")
        assert {k["op"]: k["tuned"] for k in gm.plan["kernels"].values()} == {
            "relu": False, "softmax": True}
        (out,) = gm.run(x=x).values()
        np.testing.assert_allclose(out, _softmax_ref(x), rtol=1e-5, atol=1e-7)
    plain = graph.build(g, target="llvm")  # outside the context: the defaults
    assert not any(k["tuned"] for k in plain.plan["kernels"].values())


# ----------------------------------------------------------------------------- scheduler
@pytest.mark.parametrize("kwargs,message", [
    ({"objective_func": sum}, "objective_func=.* is not supported"),
    ({"strategy": "round-robin"}, "strategy='round-robin' is not supported"),
    ({"gamma": 0.9}, "gamma=0.9 is not supported"),
    ({"load_model_file": "m"}, "load_model_file='m' is not supported"),
    ({"callbacks": [print]}, "callbacks=.* is not supported"),
])
def test_task_scheduler_refuses_what_it_does_not_do(task, kwargs, message):
    with pytest.raises(ValueError, match=message):
        auto_scheduler.TaskScheduler([task], **kwargs)


def test_task_scheduler_needs_one_record_file(task, tmp_path):
    with pytest.raises(TypeError, match="tasks must be auto_scheduler.SearchTasks, got "
                                        "WorkloadTask"):
        auto_scheduler.TaskScheduler([task.task])
    sched = auto_scheduler.TaskScheduler([task], load_log_file=tmp_path / "other.json")
    for callbacks in ([], [auto_scheduler.RecordToFile(tmp_path / "a.json"), print]):
        with pytest.raises(ValueError, match="measure_callbacks must be one "
                                             r"\[auto_scheduler.RecordToFile\(path\)\]"):
            sched.tune(auto_scheduler.TuningOptions(measure_callbacks=callbacks))
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=4, measure_callbacks=[auto_scheduler.RecordToFile(tmp_path / "a.json")])
    with pytest.raises(ValueError, match="load_log_file=.*other.json' is not the RecordToFile"):
        sched.tune(opts)
    sched = auto_scheduler.TaskScheduler([task])
    with pytest.raises(ValueError, match="search_policy must be one of"):
        sched.tune(opts, search_policy="sketch.ga")
    with pytest.raises(ValueError, match="per_task_early_stopping=5 is not supported"):
        sched.tune(opts, per_task_early_stopping=5)
    zero = auto_scheduler.TuningOptions(
        measure_callbacks=[auto_scheduler.RecordToFile(tmp_path / "a.json")])
    sched.tune(zero)  # no trials: nothing measured
    assert np.isinf(sched.best_costs).all() and not (tmp_path / "a.json").exists()
