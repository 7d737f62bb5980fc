"""Plan lifetimes (runtime/_liveness.py): a saved model whose plan.json was edited so that two
values live at the same time share bytes (digests redone, as a deliberate edit or another tool
would) is refused at load with an ArtifactError naming the values, the storage and the steps;
it ran and returned wrong results. Every plan the planner makes loads and runs as built: in
place steps, reshapes (views), several outputs of one step, shape variables, run-time If."""

import copy
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tensorlang.runtime import ArtifactError
from tensorlang.runtime._plan import PlanError, check_plan

import tensorlang as tl
from tensorlang import graph, runtime

BATCH, SEQ = tl.var("batch"), tl.var("seq")
RNG = np.random.default_rng(1)


def _small_model():
    """x @ w -> relu -> h (an output, read by the next step), tanh(h) + sigmoid(h) -> y."""
    b = graph.Builder("small")
    x = b.input("x", (4, 32))
    w = b.const(RNG.standard_normal((32, 16)).astype(np.float32), "w")
    h = b.relu(b.matmul(x, w))
    y = b.add(b.tanh(h), b.sigmoid(h))
    return b.build([y, h])


def _views_and_in_place_model():
    """Unfused (opt_level 0): exp, then add writing over the dying exp in place; a reshape (a
    view) of the add's output read after it and returned, topk's two outputs."""
    b = graph.Builder("views")
    x = b.input("x", (8, 16))
    e = b.exp(x)
    s = b.add(e, b.sigmoid(x))  # e and the sigmoid die here: written in place
    v = b.reshape(s, shape=(16, 8))
    t = b.tanh(v)
    vals, idx = b.topk(s, axis=1, k=3)
    return b.build([t, v, vals, idx])


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    gm = graph.build(_small_model())
    return gm, gm.save(tmp_path_factory.mktemp("small") / "m.tlpkg")


def _redigest(art: Path) -> None:
    man = json.loads((art / "manifest.json").read_text())
    man["files"] = {f.relative_to(art).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
                    for f in sorted(art.rglob("*")) if f.is_file() and f.name != "manifest.json"}
    (art / "manifest.json").write_text(json.dumps(man))


def _edited(src: Path, dst: Path, edit) -> Path:
    """A copy of the artifact with its plan edited and its digests redone."""
    shutil.copytree(src, dst)
    plan = json.loads((dst / "plan.json").read_text())
    edit(plan)
    (dst / "plan.json").write_text(json.dumps(plan))
    _redigest(dst)
    return dst


def _value(plan: dict, prefix: str) -> str:
    return next(n for n in plan["values"] if n.startswith(prefix))


# -- refused ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["interactive", "graph"])
def test_a_live_value_moved_into_another_live_storage_is_refused_at_load(small, tmp_path,
                                                                          mode):
    """The reported case: the add's output given the relu's storage (both graph outputs, live
    to the end) ran and returned the relu's output off by up to 8."""
    gm, path = small
    add, relu = _value(gm.plan, "add"), _value(gm.plan, "relu")
    sid = gm.plan["values"][relu]["storage"]

    def edit(plan):
        plan["values"][add]["storage"] = sid

    bad = _edited(path, tmp_path / "bad.tlpkg", edit)
    with pytest.raises(ArtifactError, match=(
            rf"plan\.json: values '{relu}' \(written at step 0, live to the end of the run\) "
            rf"and '{add}' \(written at step 1, live to the end of the run\) share arena "
            rf"storage {sid} while both are live: their live ranges overlap from step 1 to "
            r"the end of the run")):
        runtime.load(bad, mode=mode)


def test_storages_placed_on_each_other_are_refused(small, tmp_path):
    gm, path = small
    relu = _value(gm.plan, "relu")
    sid = gm.plan["values"][relu]["storage"]
    x_sid = gm.plan["values"]["x"]["storage"]

    def edit(plan):
        plan["storages"][sid]["offset"] = plan["storages"][x_sid]["offset"]

    bad = _edited(path, tmp_path / "bad.tlpkg", edit)
    off = gm.plan["storages"][x_sid]["offset"]
    with pytest.raises(ArtifactError, match=(
            rf"arena storages {x_sid} \(bytes \[{off}, {off + 512}\)\) and {sid} \(bytes "
            rf"\[{off}, {off + 256}\)\) overlap while both are live: value 'x' \(a graph input, "
            rf"live to the end of the run\) and value '{relu}' .* are live together from step 0 "
            "to the end")):
        runtime.load(bad)


def _plan_edits(plan: dict) -> dict:
    """label -> (edit of the small model's plan, the message expected)."""
    add, relu = _value(plan, "add"), _value(plan, "relu")
    w_sid, add_sid = plan["values"]["w"]["storage"], plan["values"][add]["storage"]

    def setter(*path_and_value):
        *path, value = path_and_value

        def edit(p):
            for key in path[:-1]:
                p = p[key]
            p[path[-1]] = value
        return edit

    def add_view(p):  # a view of the add's storage, read by the add before it writes it
        p["values"]["v"] = dict(p["values"][add])
        p["steps"][1]["args"][0] = "v"

    return {
        "steps swapped": (lambda p: p["steps"].reverse(),
                          rf"step 0 reads value '{relu}', which step 1 writes"),
        "a step writes into a weight": (setter("values", add, "storage", w_sid),
                                        rf"step 1 writes value '{add}' into weight storage"),
        "an input stored in a weight": (setter("values", "x", "storage", w_sid),
                                        "graph input 'x' lives in weight storage"),
        "a value written twice": (setter("steps", 1, "args", 1, relu),
                                  rf"step 1 writes value '{relu}', already written by step 0"),
        "a view read before its storage is written": (
            add_view, (rf"value 'v' is read at step 1, but no step before writes its storage "
                       rf"{add_sid}")),
    }


def test_edited_plans_are_refused_naming_what_is_wrong(small):
    gm, _ = small
    for edit, message in _plan_edits(gm.plan).values():
        plan = copy.deepcopy(gm.plan)
        edit(plan)
        with pytest.raises(PlanError, match=message):
            check_plan(plan)


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    gm = graph.build(_views_and_in_place_model(), opt_level=0)
    return gm, gm.save(tmp_path_factory.mktemp("views") / "v.tlpkg")


def test_an_in_place_step_needs_its_mark(views):
    gm, _ = views
    i, st = next((i, st) for i, st in enumerate(gm.plan["steps"]) if st.get("inplace"))
    out = st["args"][-1]
    unmarked = copy.deepcopy(gm.plan)
    del unmarked["steps"][i]["inplace"]
    with pytest.raises(PlanError, match=rf"and '{out}' .* overlap at step {i} \(step {i} is "
                                        r"not an in-place step\)"):
        check_plan(unmarked)
    sid = gm.plan["values"][out]["storage"]
    other = next(a for a in st["args"][:-1] if gm.plan["values"][a]["storage"] != sid)
    foreign = copy.deepcopy(gm.plan)
    foreign["steps"][i]["inplace"] = other  # an input of the step, in another storage
    with pytest.raises(PlanError, match=rf"in place over '{other}', which lives in storage"):
        check_plan(foreign)


def test_a_view_read_after_an_in_place_write_over_it_is_refused():
    """A reshape of h read after a step wrote over h in place would read the new bytes."""
    plan = {
        "inputs": [{"name": "x", "shape": [4], "dtype": "float32"}],
        "outputs": [{"name": "o", "shape": [4], "dtype": "float32"}],
        "values": {n: {"storage": s, "shape": [4], "dtype": "float32"}
                   for n, s in (("x", 0), ("h", 1), ("hv", 1), ("g", 1), ("o", 2))},
        "storages": [{"id": s, "kind": "arena", "nbytes": 16, "offset": 64 * s}
                     for s in range(3)],
        "arena_bytes": 192,
        "steps": [{"kernel": "k", "args": ["x", "h"], "n_out": 1},
                  {"kernel": "k", "args": ["hv", "g"], "n_out": 1, "inplace": "hv"},
                  {"kernel": "k2", "args": ["g", "hv", "o"], "n_out": 1}],
    }
    with pytest.raises(PlanError, match=r"values 'h' \(written at step 0, last read at step 2 "
                                        r"through its view 'hv'\) and 'g' .* storage 1"):
        check_plan(plan)
    plan["steps"][2]["args"] = ["g", "g", "o"]  # the view dead at the in-place step: fine
    check_plan(plan)


def test_symbolic_lifetimes_shorter_than_the_values_are_refused():
    gb = graph.Builder("dyn")
    x = gb.input("x", (BATCH, 16))
    z = gb.relu(gb.exp(x))
    gm = graph.build(gb.build([gb.sigmoid(z), z]))
    plan = copy.deepcopy(gm.plan)
    sid = plan["values"][z.name]["storage"]
    first = plan["lifetimes"][str(sid)][0]
    plan["lifetimes"][str(sid)] = [first, first]
    with pytest.raises(PlanError, match=rf"storage {sid}: plan\['lifetimes'\] gives steps "
                                        rf"{first}-{first}, but its values are live at steps "
                                        rf"{first}-{len(plan['steps'])}"):
        check_plan(plan)


# -- accepted ---------------------------------------------------------------------------------


def _gate_model():
    """If on a run-time condition: each branch a plan of its own."""
    def vi(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    then_b = helper.make_graph([helper.make_node("Exp", ["x"], ["t"])], "then", [],
                               [vi("t", [2, 8])])
    else_b = helper.make_graph([helper.make_node("Tanh", ["x"], ["e"])], "else", [],
                               [vi("e", [2, 8])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
             helper.make_node("Greater", ["sx", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b),
             helper.make_node("Relu", ["y"], ["out"])]
    g = helper.make_graph(nodes, "gate", [vi("x", [2, 8])], [vi("out", [2, 8])],
                          initializer=[numpy_helper.from_array(np.float32(0), "zero")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _dynamic_model():
    gb = graph.Builder("dyn")
    x = gb.input("x", (BATCH, SEQ, 16))
    y = gb.input("y", (BATCH, 1, 16))
    z = gb.relu(gb.add(gb.exp(x), y))
    return gb.build([gb.sigmoid(z), gb.reshape(z, shape=(BATCH, SEQ * 16))])


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k, got in a.items():
        np.testing.assert_array_equal(got, b[k])


def test_plans_the_planner_makes_load_and_run_as_built(views, tmp_path):
    """In place steps, views read after their value and returned, two outputs of one step;
    shape variables; a run-time If (one plan per branch): saved, loaded in both modes, the
    same outputs bit for bit."""
    gm, path = views
    assert any(st.get("inplace") for st in gm.plan["steps"])
    written = {a for st in gm.plan["steps"] for a in st["args"][-st["n_out"]:]}
    assert set(gm.plan["values"]) - written - {"x"}  # a view: a value no step writes
    assert any(st["n_out"] == 2 for st in gm.plan["steps"])
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    cases = [(gm, path, [{"x": x}])]
    dyn = graph.build(_dynamic_model())
    feeds = [{"x": RNG.standard_normal((b, s, 16)).astype(np.float32),
              "y": RNG.standard_normal((b, 1, 16)).astype(np.float32)} for b, s in ((1, 3),
                                                                                    (4, 9))]
    cases.append((dyn, dyn.save(tmp_path / "dyn.tlpkg"), feeds))
    gate = graph.build(graph.from_onnx(_gate_model()))
    base = RNG.standard_normal((2, 8)).astype(np.float32)
    cases.append((gate, gate.save(tmp_path / "gate.tlpkg"),
                  [{"x": np.abs(base)}, {"x": -np.abs(base)}]))
    for built, saved, runs in cases:
        for mode in ("graph", "interactive"):
            loaded = runtime.load(saved, mode=mode)
            for f in runs:
                _same(loaded.run(**f), built.run(**f))


def test_the_planner_options_make_plans_that_pass():
    """Unfused (in-place steps), and with neither reuse nor in-place: graph.build checks each
    plan (GraphModule does), and so does this, for the record."""
    for kw in ({"opt_level": 0}, {"memory_reuse": False, "inplace": False}):
        check_plan(graph.build(_views_and_in_place_model(), **kw).plan)
