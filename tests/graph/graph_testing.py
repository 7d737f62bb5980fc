"""Helpers shared by the graph tests (a plain module: a `from conftest import` would resolve to
whichever tests/*/conftest.py was imported first)."""

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def assert_close(got, ref, rtol=1e-4):
    """Relative to the reference's largest magnitude (1e-4, fp32): elementwise relative error is
    meaningless where the reference crosses zero."""
    assert got.shape == ref.shape, (got.shape, ref.shape)
    scale = max(float(np.abs(ref).max()), 1e-6)
    err = float(np.abs(got.astype(np.float64) - ref).max()) / scale
    assert err <= rtol, f"max relative error {err:.2e} > {rtol}"


def onnx_model(nodes, inputs, outputs, opset, inits=()):
    """A one-graph ONNX model: `inputs` / `outputs` are (name, elem_type, shape) triples."""
    h = onnx.helper
    g = h.make_graph(nodes, "m", [h.make_tensor_value_info(*i) for i in inputs],
                     [h.make_tensor_value_info(*o) for o in outputs], initializer=list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def int64s(name, values):
    """An int64 initializer holding `values`."""
    return onnx.helper.make_tensor(name, onnx.TensorProto.INT64, [len(values)], values)


def check_against_ort(model, feeds_list, rtol=1e-4):
    """One build of `model`, run on each feed dict and compared with onnxruntime's outputs."""
    from tensorlang import graph

    gm = graph.build(graph.from_onnx(model))
    for feeds in feeds_list:
        got, ref = gm.run(**feeds), ort_run(model, feeds)
        for name, r in ref.items():
            assert np.asarray(got[name]).shape == r.shape, name
            if r.size:  # (assert_close takes the maximum of the arrays)
                assert_close(np.asarray(got[name]), r, rtol)


def log_with_costs(log, out, searched: float, default: float) -> str:
    """The tuning log ``log`` written to ``out`` with every valid template-free record's time
    set to ``searched`` and every logged graph default's to ``default`` (seconds per call)."""
    from tensorlang.graph.tuning_free import BASELINE, WORKLOAD

    lines = []
    for line in Path(log).read_text().splitlines():
        rec = json.loads(line)
        name = rec["workload"]["name"]
        if rec["result"]["error"] is None and name in (WORKLOAD, BASELINE):
            rec["result"]["costs"] = [searched if name == WORKLOAD else default] * 3
        lines.append(json.dumps(rec))
    Path(out).write_text("\n".join(lines) + "\n")
    return str(out)


def onnx_node_cases(modules, name_pattern):
    """The onnx package's backend node cases (``onnx.backend.test.case.node``) whose name
    ``name_pattern`` (a compiled regex) matches, sorted by name, made by importing only the case
    modules named in ``modules``: ``collect_testcases(None)`` imports all ~190 of them and runs
    their reference implementations (~8 s in every test process that collects the suite). Each
    export is seeded (``np.random.seed(0)``) by the case machinery, so the cases are the same as
    those of the full collection; the module list is the one that yields every matching case
    (tests/graph/test_onnx_node_cases_all.py imports them all)."""
    import importlib

    from onnx.backend.test.case import node

    node._TargetOpType = None
    for m in modules:
        importlib.import_module(f"onnx.backend.test.case.node.{m}")
    return sorted((c for c in node._NodeTestCases if name_pattern.match(c.name)),
                  key=lambda c: c.name)
