"""ONNX If, Loop and Scan, against onnxruntime: If whose condition folds at import (inlined), If
on a run-time condition (each branch a sub-plan, both execution modes, nested, save/load),
Loop and Scan with static trip counts (unrolled), and the refusals."""

import numpy as np
import pytest
from graph_testing import assert_close, ort_run
from onnx import TensorProto, helper, numpy_helper
from tensorlang.graph.frontends import onnx_control_flow
from tensorlang.runtime.program import Program

from tensorlang import graph, runtime

F, B, I64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64
RNG = np.random.default_rng(0)


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, opset=17, inits=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _check(m, feeds, mode="graph", **kw):
    gm = graph.build(graph.from_onnx(m, **kw), mode=mode)
    got, ref = gm.run(**feeds), ort_run(m, feeds)
    assert list(got) == list(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape, k
        assert_close(got[k], ref[k], rtol=1e-5)
    return gm


def _branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


# ---------------------------------------------------------------------------- If, folded


def _shape_if_model():
    """silero-vad's pattern: a condition from a shape comparison, which folds at import."""
    then_b = _branch("then", [helper.make_node("Relu", ["x"], ["t"])], [_vi("t", [2, 8])])
    else_b = _branch("else", [helper.make_node("Neg", ["x"], ["e"])], [_vi("e", [2, 8])])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["d"], axis=0),
             helper.make_node("Equal", ["d", "eight"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b),
             helper.make_node("Add", ["y", "x"], ["z"])]
    return _model(nodes, [_vi("x", [2, 8])], [_vi("z", [2, 8])],
                  inits=[_const("one", np.array(1, np.int64)),
                         _const("eight", np.array(8, np.int64))])


def test_if_on_a_shape_comparison_is_inlined():
    m = _shape_if_model()
    g = graph.from_onnx(m)
    assert g.op_counts() == {"add": 1, "relu": 1}  # the taken branch only, no if node
    _check(m, {"x": RNG.standard_normal((2, 8)).astype(np.float32)})


# ---------------------------------------------------------------------------- If, run time


def _gate_model(nested=False):
    """y = (x @ w1 + 1) if sum(x) > 0 else tanh(x * 2) * w2 (a weight read by one branch,
    the outer x captured by both); with nested: the else branch holds another If on
    max(x) > 1."""
    w1 = _const("w1", RNG.standard_normal((8, 8)).astype(np.float32))
    w2 = _const("w2", RNG.standard_normal((8,)).astype(np.float32))
    then_b = _branch("then", [helper.make_node("MatMul", ["x", "w1"], ["mm"]),
                              helper.make_node("Add", ["mm", "onef"], ["t"])],
                     [_vi("t", [2, 8])])
    plain_else = [helper.make_node("Mul", ["x", "two"], ["x2"]),
                  helper.make_node("Tanh", ["x2"], ["th"]),
                  helper.make_node("Mul", ["th", "w2"], ["e"])]
    if nested:
        inner_then = _branch("it", [helper.make_node("Sigmoid", ["x"], ["s"])],
                             [_vi("s", [2, 8])])
        inner_else = _branch("ie", plain_else, [_vi("e", [2, 8])])
        else_nodes = [helper.make_node("ReduceMax", ["x"], ["mx"], keepdims=0),
                      helper.make_node("Greater", ["mx", "onef"], ["c2"]),
                      helper.make_node("If", ["c2"], ["ee"], then_branch=inner_then,
                                       else_branch=inner_else)]
        else_b = _branch("else", else_nodes, [_vi("ee", [2, 8])])
    else:
        else_b = _branch("else", plain_else, [_vi("e", [2, 8])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
             helper.make_node("Greater", ["sx", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b),
             helper.make_node("Relu", ["y"], ["out"])]
    inits = [w1, w2, _const("zero", np.float32(0)), _const("onef", np.float32(1)),
             _const("two", np.float32(2))]
    return _model(nodes, [_vi("x", [2, 8])], [_vi("out", [2, 8])], inits=inits)


@pytest.mark.parametrize("mode", ["graph", "interactive"])
def test_if_on_a_run_time_condition_runs_the_branch_it_picks(mode):
    m = _gate_model()
    g = graph.from_onnx(m)
    assert g.op_counts()["if"] == 1
    gm = graph.build(g, mode=mode)
    assert isinstance(gm, Program) and len(gm.modules()) == 4  # before, then, else, after
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    for feed in (np.abs(x), -np.abs(x)):  # both branches
        ref = ort_run(m, {"x": feed})["out"]
        assert_close(gm.run(x=feed)["out"], ref, rtol=1e-5)


@pytest.mark.parametrize("mode", ["graph", "interactive"])
def test_nested_if_and_save_load(mode, tmp_path):
    m = _gate_model(nested=True)
    gm = graph.build(graph.from_onnx(m), mode=mode)
    path = gm.save(tmp_path / "nested.tlpkg")
    loaded = runtime.load(path, mode=mode)
    base = RNG.standard_normal((2, 8)).astype(np.float32)
    feeds = [np.abs(base) + 0.1, -np.abs(base) * 0.5, -np.abs(base) * 0.5]
    feeds[2][0, 0] = 3.0  # sum < 0 and max > 1: the inner then branch
    for feed in feeds:
        ref = ort_run(m, {"x": feed})["out"]
        assert_close(gm.run(x=feed)["out"], ref, rtol=1e-5)
        assert_close(loaded.run(x=feed)["out"], ref, rtol=1e-5)


def test_if_branch_returning_an_outer_value_and_a_constant():
    """A branch may return an outer value as it is (Identity), or a constant: each becomes a
    copy in the branch's own graph. The condition is a graph input."""
    then_b = _branch("then", [helper.make_node("Identity", ["x"], ["xi"])], [_vi("xi", [3])])
    else_b = _branch("else", [helper.make_node("Constant", [], ["k"], value=_const(
        "kv", np.array([1.0, 2.0, 3.0], np.float32)))], [_vi("k", [3])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)]
    m = _model(nodes, [_vi("c", [], B), _vi("x", [3])], [_vi("y", [3])])
    x = np.array([5.0, -1.0, 0.5], np.float32)
    for c in (True, False):
        gm = _check(m, {"c": np.array(c), "x": x})
        # a numpy scalar is the 0-d input it stands for, as in a GraphModule
        np.testing.assert_array_equal(gm.run(c=np.bool_(c), x=x)["y"], gm.run(c=c, x=x)["y"])


def test_if_with_branches_of_different_shapes_is_refused():
    then_b = _branch("then", [helper.make_node("Relu", ["x"], ["t"])], [_vi("t", [4])])
    else_b = _branch("else", [helper.make_node("Slice", ["x", "s0", "s2"], ["e"])],
                     [_vi("e", [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b,
                              name="gate")]
    m = _model(nodes, [_vi("c", [], B), _vi("x", [4])], [_vi("y", None)],
               inits=[_const("s0", np.array([0], np.int64)), _const("s2", np.array([2],
                                                                               np.int64))])
    with pytest.raises(graph.OnnxImportError,
                       match=r"node 'gate' \(If, opset 17\): output 0 is float32\[4\] in "
                             r"then_branch and float32\[2\] in else_branch"):
        graph.from_onnx(m)


def _sequence_branch(name, values, optional=False):
    """A branch returning a sequence of one constant tensor (onnx's case test_if_seq), or that
    sequence as an optional (test_if_opt)."""
    nodes = [helper.make_node("Constant", [], [f"{name}_x"], value=_const(f"{name}_v", values)),
             helper.make_node("SequenceConstruct", [f"{name}_x"], [f"{name}_seq"])]
    out = f"{name}_seq"
    if optional:
        nodes.append(helper.make_node("Optional", [out], [f"{name}_opt"]))
        out = f"{name}_opt"
    seq = helper.make_tensor_sequence_value_info(out, F, [5])
    if optional:
        seq = helper.make_value_info(out, helper.make_optional_type_proto(seq.type))
    return _branch(name, nodes, [seq])


@pytest.mark.parametrize("optional", [False, True])
@pytest.mark.parametrize("condition", ["input", "constant"])
def test_if_giving_a_sequence_or_an_optional_is_refused(optional, condition):
    """tensorlang's values are tensors: a SequenceConstruct of constants was folded by onnx's
    reference evaluator into one tensor, its elements stacked, and the model returned that."""
    one = np.arange(1, 6, dtype=np.float32)
    then_b, else_b = (_sequence_branch(n, one * k, optional) for n, k in (("then", 1), ("else", 2)))
    nodes = [helper.make_node("If", ["c"], ["res"], then_branch=then_b, else_branch=else_b)]
    if condition == "constant":
        nodes.insert(0, helper.make_node("Constant", [], ["c"], value=_const("cv", True)))
    m = _model(nodes, [_vi("c", [], B)] if condition == "input" else [],
               [helper.make_value_info("res", then_b.output[0].type)], opset=18)
    with pytest.raises(graph.UnsupportedOperatorError,
                       match=r"SequenceConstruct \(node '#1', opset 18\): it gives a sequence or "
                             r"an optional, and tensorlang's values are tensors"):
        graph.from_onnx(m)


# ---------------------------------------------------------------------------- Loop


def _loop_model(trip, carried_in="h0", with_cond=False, body_cond="cond_in"):
    """h = tanh(h @ w + x * i) for i < trip; scan output: h * 2 per iteration."""
    w = _const("w", (RNG.standard_normal((4, 4)) * 0.5).astype(np.float32))
    body_nodes = [helper.make_node("Cast", ["i"], ["fi"], to=F),
                  helper.make_node("Mul", ["x", "fi"], ["xi"]),
                  helper.make_node("MatMul", ["h_in", "w"], ["hw"]),
                  helper.make_node("Add", ["hw", "xi"], ["pre"]),
                  helper.make_node("Tanh", ["pre"], ["h_out"]),
                  helper.make_node("Mul", ["h_out", "two"], ["scan_out"]),
                  helper.make_node("Identity", [body_cond], ["cond_out"])]
    body = helper.make_graph(body_nodes, "body",
                             [_vi("i", [], I64), _vi("cond_in", [], B), _vi("h_in", [1, 4])],
                             [_vi("cond_out", [], B), _vi("h_out", [1, 4]),
                              _vi("scan_out", [1, 4])])
    cond = "keep" if with_cond else ""
    nodes = [helper.make_node("Loop", ["M", cond, carried_in], ["h", "hs"], body=body,
                              name="loop")]
    inits = [w, _const("M", np.array(trip, np.int64)), _const("two", np.float32(2)),
             _const("keep", np.array(True))]
    return _model(nodes, [_vi("x", [1, 4]), _vi("h0", [1, 4])],
                  [_vi("h", [1, 4]), _vi("hs", [trip, 1, 4])], inits=inits)


@pytest.mark.parametrize("with_cond", [False, True])
def test_loop_with_a_static_trip_count_is_unrolled(with_cond):
    m = _loop_model(5, with_cond=with_cond)
    g = graph.from_onnx(m)
    assert g.op_counts()["tanh"] == 5 and "if" not in g.op_counts()
    feeds = {"x": RNG.standard_normal((1, 4)).astype(np.float32),
             "h0": RNG.standard_normal((1, 4)).astype(np.float32)}
    _check(m, feeds)


def test_loop_while_condition_that_folds():
    """A while loop (no trip count) whose condition is computed from the iteration number:
    i < 3 folds each iteration, so the loop runs 4 times (the check comes after the body)."""
    body_nodes = [helper.make_node("Less", ["i", "three"], ["cond_out"]),
                  helper.make_node("Add", ["acc_in", "x"], ["acc_out"])]
    body = helper.make_graph(body_nodes, "body",
                             [_vi("i", [], I64), _vi("c", [], B), _vi("acc_in", [3])],
                             [_vi("cond_out", [], B), _vi("acc_out", [3])])
    nodes = [helper.make_node("Loop", ["", "keep", "x"], ["acc"], body=body)]
    m = _model(nodes, [_vi("x", [3])], [_vi("acc", [3])],
               inits=[_const("keep", np.array(True)), _const("three", np.array(3, np.int64))])
    assert graph.from_onnx(m).op_counts() == {"add": 4}
    _check(m, {"x": np.array([1.0, -2.0, 0.5], np.float32)})


def test_loop_with_a_run_time_condition_is_refused():
    m = _loop_model(3, with_cond=True, body_cond="dyn")
    body = m.graph.node[0].attribute[0].g
    body.node.insert(0, helper.make_node("ReduceSum", ["h_in"], ["s"], keepdims=0))
    body.node.insert(1, helper.make_node("Greater", ["s", "zero"], ["dyn"]))
    m.graph.initializer.append(_const("zero", np.float32(0)))
    with pytest.raises(graph.OnnxImportError,
                       match=r"node 'loop' \(Loop, opset 17\): the condition the body "
                             r"computes \(iteration 0\) depends on run-time values"):
        graph.from_onnx(m)


def test_loop_past_the_unroll_limit_is_refused(monkeypatch):
    monkeypatch.setattr(onnx_control_flow, "MAX_UNROLL_ITERATIONS", 4)
    with pytest.raises(graph.OnnxImportError, match=r"unrolling stops at 4 iterations"):
        graph.from_onnx(_loop_model(5))


def test_loop_trip_count_from_an_input_is_refused():
    m = _loop_model(3)
    m.graph.initializer.pop(1)  # M
    m.graph.input.append(_vi("M", [], I64))
    with pytest.raises(graph.OnnxImportError, match=r"the trip count M is computed at run time"):
        graph.from_onnx(m)


# ---------------------------------------------------------------------------- Scan


@pytest.mark.parametrize("directions", [(0, 0, 0), (1, 0, 1)])
def test_scan_cumulative_sum_and_a_second_sequence(directions):
    """Scan over axis 1 of a (2, 5, 3) sequence (reversed or not) and axis 0 of a (5, 3) one:
    a running sum (state) and a per-step product (scan output on axis 1, reversed or not)."""
    in_rev_a, in_rev_b, out_rev = directions
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "a_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "b_t"], ["p"])], "body",
        [_vi("s_in", [2, 3]), _vi("a_t", [2, 3]), _vi("b_t", [3])],
        [_vi("s_out", [2, 3]), _vi("p", [2, 3])])
    nodes = [helper.make_node("Scan", ["s0", "a", "b"], ["s", "ps"], body=body,
                              num_scan_inputs=2, scan_input_axes=[1, 0],
                              scan_input_directions=[in_rev_a, in_rev_b],
                              scan_output_axes=[1], scan_output_directions=[out_rev])]
    m = _model(nodes, [_vi("s0", [2, 3]), _vi("a", [2, 5, 3]), _vi("b", [5, 3])],
               [_vi("s", [2, 3]), _vi("ps", [2, 5, 3])])
    feeds = {"s0": RNG.standard_normal((2, 3)).astype(np.float32),
             "a": RNG.standard_normal((2, 5, 3)).astype(np.float32),
             "b": RNG.standard_normal((5, 3)).astype(np.float32)}
    _check(m, feeds)


def test_scan_8_is_refused():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "a_t"], ["s_out"])], "body",
                             [_vi("s_in", [3]), _vi("a_t", [3])], [_vi("s_out", [3])])
    nodes = [helper.make_node("Scan", ["", "s0", "a"], ["s"], body=body, num_scan_inputs=1,
                              name="scan")]
    m = _model(nodes, [_vi("s0", [1, 3]), _vi("a", [1, 4, 3])], [_vi("s", [1, 3])], opset=8)
    with pytest.raises(graph.OnnxImportError, match=r"node 'scan' \(Scan, opset 8\): Scan-8"):
        graph.from_onnx(m)


def test_tasks_of_a_model_with_a_run_time_if_come_from_its_branches():
    """graph.extract_tasks sees through the if node: the then branch's dense is a task."""
    tasks = graph.extract_tasks(graph.from_onnx(_gate_model()))
    assert [t.op for t in tasks] == ["dense"] and tasks[0].weight == 1


def test_a_branch_that_does_not_fit_the_shapes_refuses_when_taken():
    """silero-vad's pattern: a branch written for other input shapes (a Reshape to 3 x 3 of a
    4-element input) cannot import; the model builds, the other branch runs, and taking this
    one raises InputError naming the node and why."""
    then_b = _branch("then", [helper.make_node("Relu", ["x"], ["t"])], [_vi("t", [4])])
    else_b = _branch("else", [helper.make_node("Reshape", ["x", "s33"], ["r"], name="rs"),
                              helper.make_node("ReduceSum", ["r"], ["e"], keepdims=0,
                                               axes=[0])],
                     [_vi("e", [3])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b,
                              name="gate")]
    m = _model(nodes, [_vi("c", [], B), _vi("x", [4])], [_vi("y", None)], opset=13,
               inits=[_const("s33", np.array([3, 3], np.int64))])
    gm = graph.build(graph.from_onnx(m), mode="interactive")
    assert gm.mode == "interactive" and len(gm.modules()) == 1
    x = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
    np.testing.assert_array_equal(gm.run(c=np.array(True), x=x)["y"], np.maximum(x, 0))
    with pytest.raises(runtime.InputError, match=r"if node 'gate', else branch: .*'rs'"):
        gm.run(c=np.array(False), x=x)


def test_program_stateful_api_benchmark_and_input_errors():
    gm = graph.build(graph.from_onnx(_gate_model()))
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    gm.set_input(x=x)
    assert gm.run() is None
    np.testing.assert_array_equal(gm.get_output(0), gm.run(x=x)["out"])
    assert gm.benchmark(number=2, repeat=1).mean > 0
    assert gm.num_kernels >= 4 and gm.num_steps >= 4 and "part0" in str(gm.build_report)
    with pytest.raises(runtime.InputError, match=r"unknown input\(s\) \['y'\]"):
        gm.run(y=x)
    with pytest.raises(runtime.InputError, match=r"must have shape \(2, 8\)"):
        gm.run(x=x[:1])


def test_run_time_if_inside_an_unrolled_loop():
    """Each iteration of the unrolled body holds its own run-time If (on the carried value's
    sum): 3 if nodes, each a pair of sub-plans."""
    then_b = _branch("then", [helper.make_node("Mul", ["h_in", "half"], ["t"])],
                     [_vi("t", [4])])
    else_b = _branch("else", [helper.make_node("Add", ["h_in", "onef"], ["e"])],
                     [_vi("e", [4])])
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["h_in"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["h_out"], then_branch=then_b, else_branch=else_b),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [_vi("i", [], I64), _vi("cond_in", [], B), _vi("h_in", [4])],
        [_vi("cond_out", [], B), _vi("h_out", [4])])
    nodes = [helper.make_node("Loop", ["M", "", "h0"], ["h"], body=body)]
    m = _model(nodes, [_vi("h0", [4])], [_vi("h", [4])],
               inits=[_const("M", np.array(3, np.int64)), _const("half", np.float32(0.5)),
                      _const("onef", np.float32(1)), _const("zero", np.float32(0))])
    assert graph.from_onnx(m).op_counts()["if"] == 3
    for h0 in ([3.0, -1.0, 0.5, 0.0], [-4.0, -1.0, 0.5, 0.0]):
        _check(m, {"h0": np.array(h0, np.float32)})


def test_build_report_of_a_program_holds_every_piece():
    """graph.build(report=) of a model with a run-time If: every piece's build steps, named
    '<piece>/<step>' (branches as '<if node>.<then|else>/...'), and every kernel."""
    rep = graph.BuildReport()
    gm = graph.build(graph.from_onnx(_gate_model(nested=True)), report=rep)
    steps = ["passes", "select kernels", "assign storage", "plan memory", "emit driver",
             "make plan"]
    pieces = ["m_part0", "If_2.then/If_2_then_part0", "If_2.else/If_2_else_part0",
              "If_2.else/If_2.then/If_2_then_part0", "If_2.else/If_2.else/If_2_else_part0",
              "m_part2"]
    assert [st.name for st in rep.steps] == [f"{p}/{s}" for p in pieces for s in steps]
    assert len(rep.kernels) == gm.num_kernels and rep.total_s > 0
    assert str(gm.build_report).startswith("[m_part0]\nsteps:")


def test_template_free_tasks_of_a_model_with_a_run_time_if_come_from_its_branches():
    """template_free reaches the branches too: the else branch's tanh group gets a
    template-free task; with 'all' the then branch's dense does as well, and no template task
    is made."""
    g = graph.from_onnx(_gate_model())
    free = graph.extract_tasks(g, template_free=True)
    assert [t.name for t in free if t.op == "dense"] == ["graph_kernel"]
    names = {t.name for t in free if t.op != "dense"}
    assert names == {"graph_kernel_free"} and len(free) > 1
    every = graph.extract_tasks(g, template_free="all")
    assert {t.name for t in every} == {"graph_kernel_free"}
    assert "dense" in [t.op for t in every]
