"""The differential graph fuzzer (graph_fuzz.py): a short run against onnxruntime in the default
suite (a long one is marked slow), the generator's guarantees, and tests that the fuzzer itself
can fail: a wrong reference gives WRONG, a worker killed by SIGSEGV gives CRASH, a stuck one
HANG, and the pool goes on after both."""

from __future__ import annotations

import signal
from collections import Counter

import graph_fuzz as F
import numpy as np
import onnx
import pytest
from graph_fuzz_gen import generate
from onnx import helper

# the operators the issue lists (Gelu as exporters write it below opset 20: Erf in a chain)
REQUIRED_OPS = {
    "Add", "Sub", "Mul", "Div", "Where", "Cast", "Relu", "Sigmoid", "Tanh", "Erf", "Exp",
    "Log", "Clip", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "Softmax",
    "LogSoftmax", "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
    "BatchNormalization", "LayerNormalization", "Transpose", "Reshape", "Flatten", "Squeeze",
    "Unsqueeze", "Slice", "Concat", "Split", "Gather", "Expand", "Pad", "Resize", "Identity",
    "Constant"}


def _run(jobs, workers=2, timeout=120.0):
    with F.Pool(workers, timeout=timeout) as pool:
        return list(pool.run(jobs))


def _fuzz(seeds):
    results = _run([{"seed": s} for s in seeds])
    assert len(results) == len(seeds)
    failures = [f"{r['outcome']} seed {r['seed']}: {r.get('why')}\n{r.get('traceback', '')}\n"
                f"repro: {F.repro_command(r['seed'])}"
                for r in results if r["outcome"] in F.FAILURES + (F.INVALID,)]
    assert not failures, "\n\n".join(failures)
    # the graphs must mostly build and run (not only refusals)
    assert sum(r["outcome"] == F.OK for r in results) >= 0.8 * len(seeds), Counter(
        r["outcome"] for r in results)


def test_short_run():
    _fuzz(range(12))  # (suite time: about 1.4 s a graph on a loaded 2-core machine)


@pytest.mark.slow
def test_long_run():
    _fuzz(range(100_000, 100_400))


def test_generator_is_deterministic_valid_and_covers_the_operators():
    ops: Counter = Counter()
    for seed in range(60):
        model, feeds = generate(seed)
        again, feeds2 = generate(seed)
        assert model.SerializeToString() == again.SerializeToString()
        assert all(np.array_equal(feeds[k], feeds2[k]) for k in feeds)
        onnx.checker.check_model(model, full_check=True)
        assert 3 <= sum(n.op_type != "Constant" for n in model.graph.node) or \
            len(model.graph.node) >= 3
        ops.update(n.op_type for n in model.graph.node)
    assert REQUIRED_OPS <= set(ops), sorted(REQUIRED_OPS - set(ops))
    assert generate(0)[0].SerializeToString() != generate(1)[0].SerializeToString()


def test_graphs_have_shared_values_and_outputs_read_inside():
    shared = inner_outputs = 0
    for seed in range(40):
        model, _ = generate(seed)
        reads = Counter(i for n in model.graph.node for i in n.input)
        shared += any(c > 1 for c in reads.values())
        inner_outputs += any(reads[o.name] for o in model.graph.output)
    assert shared >= 20 and inner_outputs >= 5, (shared, inner_outputs)


def test_checker_reports_a_wrong_reference_as_wrong():
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])]),
        opset_imports=[helper.make_opsetid("", 18)])
    feeds = {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}
    assert F.check_model(model, feeds)["outcome"] == F.OK
    res = F.check_model(model, feeds, inject="wrong")
    assert res["outcome"] == F.WRONG and "6/6 elements differ" in res["why"], res


def test_checker_reports_a_crash_and_a_hang_and_goes_on():
    # the injected hang never ends, and the pool starts a job's clock once its worker is ready
    # (tests/fuzz_pool.py): 1 s is as sure a HANG as 3; the others have the pool's 120 s
    jobs = [{"seed": 2, "inject": "segv"}, {"seed": 3, "inject": "hang", "timeout": 1.0},
            {"seed": 4}]
    by_seed = {r["seed"]: r for r in _run(jobs, workers=1)}
    assert by_seed[2]["outcome"] == F.CRASH, by_seed[2]
    assert signal.Signals.SIGSEGV.name in by_seed[2]["why"]
    assert by_seed[3]["outcome"] == F.HANG and "killed" in by_seed[3]["why"], by_seed[3]
    assert by_seed[4]["outcome"] == F.OK, by_seed[4]


def test_compare_tolerates_rounding_and_flags_differences():
    want = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    assert F.compare(want * np.float32(1 + 1e-6), want) is None
    bad = want.copy()
    bad[1, 2] += 0.1
    assert "1/12 elements differ, first at (1, 2)" in F.compare(bad, want)
    assert F.compare(np.full_like(want, -np.inf), np.full_like(want, -3e38)) is not None
    assert F.compare(want.astype(np.float64), want).startswith("dtype")
    assert F.compare(want[:1], want).startswith("shape")
    assert F.compare(np.array([1, 2]), np.array([1, 3])) is not None


def test_minimize_keeps_what_the_failure_needs():
    model, feeds = generate(0)
    culprit = next(n for n in model.graph.node if n.op_type not in ("Constant", "Identity"))

    def fails_with_culprit(m, _feeds):  # a stand-in for a subprocess run
        return F.WRONG if any(n.op_type == culprit.op_type and list(n.attribute)
                              == list(culprit.attribute) for n in m.graph.node) else F.OK

    small, small_feeds = F.minimize(model, feeds, fails_with_culprit)
    assert [n.op_type for n in small.graph.node] == [culprit.op_type]
    assert F.ort_run(small, small_feeds)  # still a model onnxruntime runs


def test_a_graph_without_inputs_is_checked():
    """Seed 40138 (a graph of constants only) was an ERROR of the checker itself: run() with
    no inputs returns None, the outputs are read with get_output."""
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Neg", ["c"], ["y"])], "consts", [],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])],
        [onnx.numpy_helper.from_array(np.arange(3, dtype=np.float32), "c")]),
        opset_imports=[helper.make_opsetid("", 18)])
    assert F.check_model(model, {}, levels=(2, 0), save_load=True)["outcome"] == F.OK
