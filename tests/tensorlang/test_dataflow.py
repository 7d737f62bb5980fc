"""The dependences built in closed form (analysis/dataflow.py) equal isl's compute_flow on the
definitions of the operator library, of schedules that add stages (cache_write, rfactor) and of
reductions with a where= condition; a tl.scan is left to compute_flow."""

import pytest

import tensorlang as tl
from tensorlang.analysis import dataflow
from tensorlang.analysis.model import Definition, build_spec


def _matmul_cache_write():
    A, B = tl.placeholder((6, 8), name="A"), tl.placeholder((8, 10), name="B")
    k = tl.reduce_axis((0, 8), name="k")
    C = tl.compute((6, 10), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C)
    s.cache_write(C, "local")
    return s


def _rfactor():
    A = tl.placeholder((64,), name="A")
    k = tl.reduce_axis((0, 64), name="k")
    S = tl.compute((1,), lambda _: tl.sum(A[k], axis=k), name="S")
    s = tl.create_schedule(S)
    ko, _ = s[S].split(k, factor=8)
    s.rfactor(S, ko)
    return s


def _prefix_sum_where():
    n = tl.var("n")
    X = tl.placeholder((n,), name="X")
    k = tl.reduce_axis((0, n), name="k")
    S = tl.compute((n,), lambda i: tl.sum(X[k], axis=k, where=k <= i), name="S")
    return tl.create_schedule(S)


def _argmax():
    X = tl.placeholder((5, 12), name="X")
    return tl.create_schedule(tl.ops.argmax(X, axis=1))


def _sum_of_all():  # an accumulator of no axes: S_init[] -> S[k0, k1]
    X = tl.placeholder((5, 12), name="X")
    return tl.ops.default_schedule(tl.ops.sum(X))


def _default(make):
    def build():
        return tl.ops.default_schedule(make())
    return build


CASES = {
    "conv2d_blocked": _default(lambda: tl.ops.conv2d_nchw(
        tl.placeholder((1, 32, 14, 14), name="x"), tl.placeholder((64, 32, 3, 3), name="w"),
        stride=1, padding=1)),
    "depthwise_relu": _default(lambda: tl.ops.relu(tl.ops.depthwise_conv2d_nchw(
        tl.placeholder((1, 16, 15, 15), name="x"), tl.placeholder((16, 1, 3, 3), name="w"),
        stride=2, padding=1))),
    "softmax": _default(lambda: tl.ops.softmax(tl.placeholder((4, 33), name="x"), axis=-1)),
    "layer_norm": _default(lambda: tl.ops.layer_norm(
        tl.placeholder((3, 40), name="x"), tl.placeholder((40,), name="g"),
        tl.placeholder((40,), name="b"), axis=-1)),
    "matmul_cache_write": _matmul_cache_write,
    "rfactor": _rfactor,
    "prefix_sum_where": _prefix_sum_where,
    "argmax": _argmax,
    "sum_of_all": _sum_of_all,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_closed_forms_equal_compute_flow(case):
    spec, _ = build_spec(CASES[case]())
    model = Definition(spec)
    got = dataflow._by_stage(model.statements, model.decl, model.reads, model.must_writes,
                             model.may_writes)
    assert got is not None, "this definition has the shape the closed forms cover"
    want = dataflow.compute_flows(model.reads, model.must_writes, model.may_writes,
                                  model.order)
    for kind, a, b in zip(("RAW", "WAR", "WAW"), got, want):
        assert a.is_equal(b), (kind, str(a), str(b))
    assert any(not m.is_empty() for m in dataflow.maps_of(got[0]))


def test_a_scan_is_left_to_compute_flow():
    X = tl.placeholder((7, 9), name="X")
    state = tl.placeholder((7, 9), name="state")
    init = tl.compute((1, 9), lambda _, i: X[0, i], name="init")
    update = tl.compute((7, 9), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    res = tl.scan(init, update, state, inputs=[X], name="res")
    spec, _ = build_spec(tl.create_schedule(res))
    model = Definition(spec)
    assert dataflow._by_stage(model.statements, model.decl, model.reads, model.must_writes,
                              model.may_writes) is None
    # the scan dependence (step t reads step t - 1) is there, from compute_flow
    assert any(d.kind == "RAW" and d.src.stage_name == "update" and
               d.sink.stage_name == "update" for d in model.deps)


def test_the_comparison_mode_names_a_difference(monkeypatch):
    s = _matmul_cache_write()
    spec, _ = build_spec(s)
    real = dataflow._by_stage

    def drop_war(*args):
        raw, war, waw = real(*args)
        return raw, war.subtract(war), waw

    monkeypatch.setattr(dataflow, "_by_stage", drop_war)
    monkeypatch.setenv("TENSORLANG_CHECK_DATAFLOW", "1")
    with pytest.raises(AssertionError, match="closed-form WAR differs from compute_flow's"):
        Definition(spec)
