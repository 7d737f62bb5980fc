"""graph.build in named steps (issue 17): the report of each step, the typed plan and its JSON,
the driver made with llvmlite's IR builder, and what happens when a tuned record fails."""

import importlib
import json
import uuid

import numpy as np
import pytest
from graph_testing import ort_run
from llvmlite import binding as llvm
from tensorlang.graph import model_zoo
from tensorlang.graph.driver import driver_ir
from tensorlang.graph.tuning import GraphTuning
from tensorlang.runtime._plan import ExecutionPlan, PlanError

import tensorlang as tl
from tensorlang import graph, runtime

gselect = importlib.import_module("tensorlang.graph.select_kernels")

STEPS = ["passes", "select kernels", "assign storage", "plan memory", "emit driver", "make plan"]


@pytest.fixture(scope="module")
def mlp_build():
    model = model_zoo.mlp()
    rep = graph.BuildReport()
    return model, graph.build(graph.from_onnx(model), report=rep), rep


def test_report_names_each_step_with_its_decision_and_time(mlp_build):
    _model, gm, rep = mlp_build
    assert [s.name for s in rep.steps] == STEPS
    assert all(s.time_s >= 0.0 and s.decided for s in rep.steps)
    assert rep.step("select kernels").decided.startswith(f"{len(rep.kernels)} kernels for ")
    assert f"{gm.num_steps} steps" in rep.step("assign storage").decided
    assert rep.driver_s == rep.step("emit driver").time_s
    assert "steps:" in str(rep) and "select kernels" in str(rep)


def test_typed_plan_round_trips_the_json(mlp_build, tmp_path):
    _model, gm, _rep = mlp_build
    plan = ExecutionPlan.from_json(gm.plan)
    assert plan.to_json() == gm.plan
    assert [s.kernel for s in plan.steps] == [s["kernel"] for s in gm.plan["steps"]]
    # an artifact's plan.json reads back the same (the format is unchanged)
    path = gm.save(tmp_path / "mlp.tlpkg")
    saved = json.loads((path / "plan.json").read_text())
    assert ExecutionPlan.from_json(saved).to_json() == gm.plan
    assert runtime.load(path).plan == gm.plan


def test_typed_plan_refuses_other_format_and_malformed_json(mlp_build):
    _model, gm, _rep = mlp_build
    with pytest.raises(PlanError, match="plan format 2 is not 1"):
        ExecutionPlan.from_json(dict(gm.plan, format=2))
    with pytest.raises(PlanError, match=r"plan\['steps'\] must be a list"):
        ExecutionPlan.from_json(dict(gm.plan, steps={}))


@pytest.mark.parametrize("steps", [[], [(0, 1)], [(1, 2), (0, 1), (1, 3)]])
def test_driver_ir_parses_and_calls_each_step_in_order(steps):
    mod = llvm.parse_assembly(driver_ir(steps))
    mod.verify()
    fn = mod.get_function("tl_graph_run")
    blocks = list(fn.blocks)
    assert len(blocks) == 1 + 2 * len(steps)  # entry, then fail/ok per step
    calls = [i for b in blocks for i in b.instructions if i.opcode == "call"]
    assert [len(list(c.operands)) - 1 for c in calls] == [n for _, n in steps]
    rets = [str(i).strip() for b in blocks for i in b.instructions if i.opcode == "ret"]
    assert rets == [f"ret i32 {k + 1}" for k in range(len(steps))] + ["ret i32 0"]


def _fake_record(monkeypatch, failure):
    """Every tunable kernel 'has' a tuning record whose replay raises ``failure``."""
    config = json.dumps({"probe": uuid.uuid4().hex})  # a fresh cache key for each test

    def config_for(self, op, attrs, in_types, out_types):
        self.last_untuned = False
        return ((op, len(in_types)), None, config)

    def schedule_of(found):
        raise failure

    monkeypatch.setattr(GraphTuning, "config_for", config_for)
    monkeypatch.setattr(GraphTuning, "schedule_of", staticmethod(schedule_of))
    monkeypatch.setattr(GraphTuning, "best_record", lambda self, *a: None)


@pytest.fixture
def empty_log(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORLANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(gselect, "_KERNEL_CACHE", {})
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    return str(log)


def test_refused_tuned_record_is_reported_and_default_used(monkeypatch, empty_log):
    _fake_record(monkeypatch, tl.ScheduleError("split factor 7 does not fit"))
    model = model_zoo.mlp()
    rep = graph.BuildReport()
    with pytest.warns(UserWarning, match=r"tuning record \(workload .*failed to build, so it "
                                         r"uses the default schedule: ScheduleError: split"):
        gm = graph.build(graph.from_onnx(model), tuning_log=empty_log, report=rep)
    assert len(rep.tuned_failures) == gm.num_steps
    f = rep.tuned_failures[0]
    assert f.error == "ScheduleError: split factor 7 does not fit" and "probe" in f.config
    assert f.kernel in gm.kernels
    assert all(k.schedule == "default" and not k.tuned for k in rep.kernels)
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    ref = ort_run(model, {"x": x})
    got = gm.run(x=x)
    for name, r in ref.items():
        np.testing.assert_allclose(got[name], r, rtol=1e-4, atol=1e-6)
    assert "tuned record not used" in str(rep)


def test_bug_while_building_tuned_record_is_raised_not_hidden(monkeypatch, empty_log):
    _fake_record(monkeypatch, AttributeError("'NoneType' object has no attribute 'axis'"))
    with pytest.raises(AttributeError, match="has no attribute 'axis'") as info:
        graph.build(graph.from_onnx(model_zoo.mlp()), tuning_log=empty_log)
    note = "\n".join(getattr(info.value, "__notes__", []))
    assert "with the tuned schedule of the tuning record for workload" in note
    assert "probe" in note
