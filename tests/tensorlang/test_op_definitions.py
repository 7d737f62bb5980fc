"""Every registered operator definition: its compute against its numpy reference on each of its
small examples under its default schedule (a differential test of every library op), and the
definitions' own consistency (declared knobs match the schedule functions, computes carry their
definition, a knob a schedule does not declare is refused)."""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ops_helpers import rand

import tensorlang as tl
from tensorlang.ops import definition as D

ops = tl.ops
DEFS = ops.all_definitions()
CASES = [(d, i) for d in DEFS for i in range(len(d.examples))]


def _declare(example):
    ins = [tl.placeholder(shape, dtype=dtype, name=f"in{k}")
           for k, (shape, dtype) in enumerate(example.inputs)]
    out = example.declare(*ins)
    return ins, (list(out) if isinstance(out, (list, tuple)) else [out])


def _arrays(example, case: str):
    """The example's inputs, drawn from a generator of the case's own (adding an example to one
    op does not change another's inputs)."""
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    return [rand(shape, dtype, example.low, example.high, rng) for shape, dtype in example.inputs]


@pytest.mark.parametrize("d,i", CASES, ids=[f"{d.name}-{i}" for d, i in CASES])
def test_definition_matches_numpy_reference(d, i):
    example = d.examples[i]
    ins, outs = _declare(example)
    arrays = _arrays(example, f"{d.name}-{i}")
    f = tl.build(ops.default_schedule(outs), ins + outs, name="k")
    got = [np.zeros(tuple(int(x.value) for x in o.shape), dtype=o.dtype) for o in outs]
    f(*arrays, *got)
    want = example.reference(*arrays)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=example.rtol, atol=example.atol)
        else:
            np.testing.assert_array_equal(g, w.astype(g.dtype))


@pytest.mark.parametrize("d", DEFS, ids=[d.name for d in DEFS])
def test_computes_carry_their_definition(d):
    """The example's computes are tagged by the definition or its parts, each with the pattern
    it declares (a broadcast op's instance may be elemwise)."""
    _, outs = _declare(d.examples[0])
    seen, stack = set(), list(outs)
    names = {d.name} | {p.name for p in d.parts}
    found = set()
    while stack:
        t = stack.pop()
        if id(t.op) in seen or not isinstance(t.op, tl.te.tensor.ComputeOp):
            continue
        seen.add(id(t.op))
        stack.extend(t.op.input_tensors)
        owner = ops.definition_of(t)
        assert owner is not None and owner.name == t.op.tag
        kind = ops.pattern_of(t)
        assert kind == owner.pattern or (owner.pattern == "broadcast" and kind == "elemwise")
        found.add(owner.name)
    assert d.name in found or any(p.name in found for p in d.parts), (d.name, found)
    assert found & names


@pytest.mark.parametrize("d", [d for d in DEFS if d.anchor is not None],
                         ids=[d.name for d in DEFS if d.anchor is not None])
def test_declared_knobs_match_the_schedule_function(d):
    declared = {k.name: k.default for k in d.anchor.knobs}
    in_signature = {k.name: k.default for k in D.declared_knobs(d.anchor.function)}
    assert declared == in_signature
    for k in d.anchor.knobs:
        k.check(d.name, k.default)


def test_templates_name_registered_templates():
    from tensorlang import autotune

    named = [d for d in DEFS if d.template is not None]
    assert {d.name for d in named} >= {"matmul", "dense", "batch_matmul", "conv2d_nchwc"}
    for d in named:
        assert autotune.task.get_template(d.template).name == d.template


def test_pattern_kinds_are_defined_once():
    from tensorlang.graph import op_registry as R

    assert R.ELEMWISE is ops.Pattern.ELEMWISE and R.OPAQUE is ops.Pattern.OPAQUE
    assert [p.order for p in ops.Pattern] == list(range(len(ops.Pattern)))
    assert all(R.get_op(n).pattern in tuple(ops.Pattern) for n in R.OPS)


def test_unknown_knob_is_a_type_error_naming_op_and_knob():
    A = tl.placeholder((24, 32), name="A")
    B = tl.placeholder((32, 48), name="B")
    C = ops.matmul(A, B)
    with pytest.raises(TypeError, match=r"matmul: .*schedule_matmul has no knob 'tile_x'"):
        ops.default_schedule(C, knobs={"tile_x": 4})
    with pytest.raises(TypeError, match=r"matmul: knob 'tile_m' must be int, got bool"):
        ops.default_schedule(C, knobs={"tile_m": True})
    with pytest.raises(TypeError, match=r"knob 'k_outer' must be bool, got str"):
        ops.default_schedule(C, knobs={"k_outer": "yes"})
    s = ops.default_schedule(C, knobs={"tile_m": 4})  # a declared knob is applied
    assert "for i.inner in range(4)" in str(tl.lower(s, [A, B, C]))


def test_definition_lookup_errors():
    with pytest.raises(LookupError, match="no operator definition named 'nope'"):
        ops.get_definition("nope")
    with pytest.raises(LookupError, match="no operator definition declares computes tagged"):
        D.lookup_tag("not_an_op")
    with pytest.raises(D.DefinitionError, match="defined twice"):
        D.define("relu", ops.relu, "elemwise", [])
    with pytest.raises(ValueError, match="unknown pattern kind 'fusable'"):
        D.define("my_new_op", ops.relu, "fusable", [])


def test_user_computes_have_no_definition():
    A = tl.placeholder((4,), name="A")
    B = tl.compute((4,), lambda i: A[i] + 1, name="B", tag="pad")
    assert ops.definition_of(B) is None
    s = ops.default_schedule(B)  # the generic schedule, not pad's placement rules
    assert s[B].attach_type == "root"
