"""Fused groups as typed sub-graphs (issue 17): ``fuse_ops`` makes them, lowering, kernel
selection, tuning and storage read them. Their JSON form on the node and the workload keys and
tuning-record arguments hashed from it are what they were when groups were untyped dicts, so a
tuning log written before still applies: data/prechange_tuning_log.jsonl was written at commit
90e915a (before the typed groups) by ``graph.extract_tasks`` + ``autotune.tune_tasks`` (2 random
trials a task) for model_zoo's small_cnn, inverted_residual and transformer_block; written again
at 479ddca, after relu's compute changed to propagate NaN (1bb4400: a record's compute hash is
of the unscheduled kernel's text, so a changed compute definition rightly stops its records
applying). A refactor must keep it applying; a change of a compute definition must write it
again (the same two calls) and say so."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from tensorlang.graph import fused_group as F
from tensorlang.graph import model_zoo
from tensorlang.graph import op_registry as R
from tensorlang.graph import tuning as T
from tensorlang.graph.ir import GraphError
from tensorlang.graph.lowering import lower
from tensorlang.graph.passes import run_passes
from tensorlang.graph.select_kernels import workload_key

from tensorlang import autotune, graph
from tensorlang.ops.definition import lookup_tag
from tensorlang.ops.patterns import OUT_ELEMWISE_FUSABLE, Pattern

PRECHANGE_LOG = Path(__file__).parent / "data" / "prechange_tuning_log.jsonl"


def _fused_nodes(name: str):
    g = run_passes(graph.from_onnx(getattr(model_zoo, name)()))
    return [n for n in g.nodes if n.op == F.FUSED]


def _types(n):
    return [(v.shape, v.dtype) for v in n.inputs], [(v.shape, v.dtype) for v in n.outputs]


def _key_before_typed_groups(n) -> str:
    """graph.workload_key as it was written for the untyped dicts (commit 90e915a)."""
    attrs = dict(n.attrs, body=[{k: v for k, v in m.items() if k != "name"}
                                for m in n.attrs["body"]])
    in_types, out_types = _types(n)
    text = json.dumps([n.op, attrs, [[list(s), t] for s, t in in_types],
                       [[list(s), t] for s, t in out_types]], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("model", ["small_cnn", "transformer_block"])
def test_a_group_is_its_nodes_anchor_kind_and_types(model):
    nodes = _fused_nodes(model)
    assert nodes
    for n in nodes:
        group = F.group_of(n)
        in_types, (out_type,) = _types(n)
        assert group.inputs == tuple((tuple(s), t) for s, t in in_types)
        assert group.output == (tuple(out_type[0]), out_type[1]) and group.root.name == n.name
        assert isinstance(group.pattern, Pattern) and len(group.members) >= 2
        for j, m in enumerate(group.members):  # each member reads inputs or earlier members
            assert all(k < (len(group.inputs) if src == "in" else j) for src, k in m.inputs)
        heavy = [j for j, m in enumerate(group.members) if m.kind in F.HEAVY]
        assert heavy == ([] if group.anchor is None else [group.anchor])
        if group.anchor is not None:
            assert group.pattern == group.anchor_member.kind
        # the node keeps the JSON form, and reading it back gives the same group
        assert json.dumps(group.to_attrs(), sort_keys=True) == json.dumps(n.attrs, sort_keys=True)
        assert F.FusedGroup.from_attrs(json.loads(json.dumps(n.attrs)), in_types) == group


def test_conv_group_anchor_and_label():
    n = next(n for n in _fused_nodes("small_cnn") if "conv" in F.group_of(n).ops)
    group = F.group_of(n)
    assert group.anchor_member.op == "conv" and group.pattern == OUT_ELEMWISE_FUSABLE
    assert group.label() == "fused_" + "_".join(group.ops[:4]) + (
        "_etc" if len(group.ops) > 4 else "")
    assert group.names_of("conv") == [group.anchor_member.name]
    assert T._convs_in(n) == group.names_of("conv") and T._anchor_op(n) == "conv"


@pytest.mark.parametrize("model", ["small_cnn", "inverted_residual", "transformer_block"])
def test_workload_keys_and_record_arguments_are_unchanged(model):
    for n in _fused_nodes(model):
        in_types, out_types = _types(n)
        assert workload_key(n.op, n.attrs, in_types, out_types) == _key_before_typed_groups(n)
        stripped = dict(n.attrs, body=[{k: v for k, v in m.items() if k != "name"}
                                       for m in n.attrs["body"]])
        assert T.template_args(n.op, n.attrs, in_types, out_types)[1] == json.dumps(
            stripped, sort_keys=True)


def _recorded_workloads() -> set[str]:
    return {json.loads(line)["workload"]["hash"]
            for line in PRECHANGE_LOG.read_text().splitlines()}


def test_every_kernel_of_the_old_log_finds_its_record():
    """The old log's records name the kernels of today's graphs: each tunable kernel of the
    three models has one (GraphTuning looks them up by template arguments), and each record
    is some kernel's."""
    tuning = T.GraphTuning(str(PRECHANGE_LOG))
    found = set()
    for name in ("small_cnn", "inverted_residual", "transformer_block"):
        for n in run_passes(graph.from_onnx(getattr(model_zoo, name)())).nodes:
            if n.op in ("reshape", "flatten"):
                continue
            args = T.template_args(n.op, n.attrs, *_types(n))
            if T.is_tunable(n.op, n.attrs, *_types(n)):
                assert tuning.config_for(n.op, n.attrs, *_types(n)) is not None, n.name
                found.add(autotune.task.workload_key(T.TEMPLATE, args))
    assert not tuning.untuned and len(found) == len(_recorded_workloads())


def _build_with_the_old_log(name: str, rng) -> int:
    g = graph.from_onnx(getattr(model_zoo, name)())
    rep = graph.BuildReport()
    gm = graph.build(g, tuning_log=str(PRECHANGE_LOG), report=rep)
    assert not rep.untuned and not rep.tuned_failures, name
    tuned = [k for k in rep.kernels if k.tuned]
    assert tuned and all(k.time_source == "tuning log" for k in tuned)
    feeds = {v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in g.inputs}
    ref = graph.build(g, opt_level=0).run(**feeds)
    for k, v in gm.run(**feeds).items():
        np.testing.assert_allclose(v, ref[k], rtol=1e-4, atol=1e-4)
    return len(tuned)


def test_a_tuning_log_written_before_still_applies():
    """small_cnn (conv, pooling, dense kernels) built with the old log: its 7 kernels tuned (no
    kernel untuned, no record refused), computing what the pass-free build computes."""
    assert _build_with_the_old_log("small_cnn", np.random.default_rng(0)) == 7


@pytest.mark.slow
def test_the_whole_old_log_applies():
    rng = np.random.default_rng(0)
    applied = sum(_build_with_the_old_log(name, rng)
                  for name in ("small_cnn", "inverted_residual", "transformer_block"))
    assert applied == len(_recorded_workloads())  # each recorded workload one distinct kernel


def test_a_fused_nodes_type_is_inferred_from_its_group():
    n = next(n for n in _fused_nodes("small_cnn") if "conv" in F.group_of(n).ops)
    in_types, out_types = _types(n)
    assert R.infer_types(n.op, in_types, n.attrs, n.name) == [
        (tuple(s), t) for s, t in out_types]
    assert n.attrs_text() == (f"{{ops={'+'.join(F.group_of(n).ops)}, "
                              f"pattern=out_elemwise_fusable}}")
    edited = json.loads(json.dumps(n.attrs))
    edited["body"][-1]["type"][0][1] += 1  # a hand-edited body: the root's channels
    shape = out_types[0][0]
    with pytest.raises(GraphError, match=rf"fused member {n.name} \({edited['body'][-1]['op']}\) "
                       rf"is recorded as float32\[1, {shape[1] + 1}, .* but its inputs give "
                       rf"float32\[1, {shape[1]}, "):
        R.infer_types(n.op, in_types, edited, n.name)


@pytest.mark.parametrize("attrs, in_types, match", [
    ({"pattern": "injective"}, [], "non-empty 'body'"),
    ({"body": [], "pattern": "injective"}, [], "non-empty 'body'"),
    ({"body": [{"op": "relu", "attrs": {}, "inputs": [["in", 0]], "type": [[2], "float32"]}],
      "pattern": "fusable"}, [((2,), "float32")], "unknown pattern kind 'fusable'"),
    ({"body": [{"op": "relu", "inputs": [["in", 0]], "type": [[2], "float32"]}],
      "pattern": "elemwise"}, [((2,), "float32")], "keys op, attrs, inputs, type"),
    ({"body": [{"name": "r", "op": "relu", "attrs": {}, "inputs": [["in", 1]],
                "type": [[2], "float32"]}], "pattern": "elemwise"}, [((2,), "float32")],
     r"fused member r \(relu\): input \['in', 1\] is neither"),
    ({"body": [{"name": "r", "op": "relu", "attrs": {}, "inputs": [["node", 0]],
                "type": [[2], "float32"]}], "pattern": "elemwise"}, [((2,), "float32")],
     r"\['node', 0\] is neither .* j < 0"),
])
def test_malformed_groups_are_refused(attrs, in_types, match):
    with pytest.raises(GraphError, match=match):
        F.FusedGroup.from_attrs(attrs, in_types)


def test_tuned_knobs_come_from_the_anchor_definitions():
    for name, knobs in T.KNOBS.items():
        declared = lookup_tag(name).schedule
        for knob, values in knobs.items():
            assert values[0] == declared.knob(knob).default, (name, knob)
            assert len(set(map(repr, values))) == len(values)
    # the matmul family shares matmul's anchor schedule, so its tuned knobs
    assert T.KNOBS["dense"] == T.KNOBS["gemm"] == T.KNOBS["matmul"]


@pytest.mark.parametrize("table, match", [
    ({"relu": {"tile_m": [4]}}, "'relu' has no anchor schedule"),
    ({"matmul": {"tile_q": [4]}}, "declares no knob 'tile_q'"),
    ({"matmul": {"tile_m": [True]}}, "knob 'tile_m' must be int"),
])
def test_a_knob_table_the_definitions_refuse(monkeypatch, table, match):
    monkeypatch.setattr(T, "_OTHER_VALUES", table)
    with pytest.raises(TypeError, match=match):
        T._tuned_knobs()


def test_the_tuned_anchor_is_found_by_definition():
    """Each kernel's tuned anchor is the library op (or part) its lowering declares: graph
    dense lowers to the prepacked matmul, graph matmul to batch_matmul, avg_pool's anchor is
    its window-sum part; kernels without one are not tunable."""
    found = set()
    for model in ("small_cnn", "transformer_block"):
        for n in run_passes(graph.from_onnx(getattr(model_zoo, model)())).nodes:
            if n.op in ("reshape", "flatten"):
                continue
            _ins, outs = lower(n.op, n.attrs, *_types(n))
            anchor = T.tuned_anchor(outs)
            found.add((T._anchor_op(n), None if anchor is None else anchor.name))
            assert (anchor is not None) == T.is_tunable(n.op, n.attrs, *_types(n))
    assert found == {
        ("conv", "conv2d_nchw"), ("conv", "conv2d_nchwc"), ("max_pool", "max_pool2d"),
        ("avg_pool", "avg_pool2d_sum"), ("dense", "matmul"), ("matmul", "batch_matmul"),
        ("global_avg_pool", None), ("layout_transform", None), ("softmax", None),
        ("transpose", None), ("layer_norm", None)}
