"""Exact schedule legality (tensorlang.analysis): illegal schedules are refused at the primitive
with the dependence they break; legal ones are accepted and compute what numpy computes; the
structural fast path agrees with the all-isl check; symbolic extents give the verdicts concrete
ones give. The brute-force oracle (legality_oracle.py) confirms each verdict independently."""

from __future__ import annotations

import numpy as np
import pytest
from legality_oracle import execute, verdict
from tl_testing import assert_close, build_run, rand

import tensorlang as tl


def _matmul(M=6, N=10, K=8, name="C"):
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name=name)
    return A, B, C, k


def _refused(fn, match):
    with pytest.raises(tl.ScheduleError, match=match) as info:
        fn()
    return str(info.value)


def _unchecked_twin(s, outs):
    """The same steps on a schedule without checks (to run the refused state in the oracle)."""
    t = tl.create_schedule(outs, check=False)
    t.apply_trace(s.trace.dumps())
    return t


def _both_verdicts(s):
    """The fast and the exact checks agree; returns the violations."""
    fast, exact = tl.analysis.check(s), tl.analysis.check(s, exact=True)
    assert [(v.kind, v.stage, v.loop) for v in fast] == [(v.kind, v.stage, v.loop) for v in exact]
    return fast


# ----------------------------------------------------------------------------- refused


def test_parallel_on_a_reduce_axis_names_the_accumulation():
    A, B, C, k = _matmul()
    s = tl.create_schedule(C)
    msg = _refused(lambda: s[C].parallel(k), r"^parallel on stage C: loop k ")
    assert "carries a dependence: C[i, j, k] -> C[i, j, k + 1] (reduce axis k carries the " \
           "accumulation)" in msg
    assert "e.g. C[0, 0, 0] -> C[0, 0, 1]" in msg
    # the refused step is undone: no annotation, nothing in the trace
    assert s[C].iter_attrs == {} and len(s.trace) == 0
    # and the oracle agrees: the updates of one element race
    t = tl.create_schedule(C, check=False)
    t[C].parallel(t[C].op.reduce_axis[0])
    ref, _ = execute(tl.create_schedule(C, check=False), [A, B, C], [rand((6, 8)),
                                                                      rand((8, 10), seed=1)])
    assert verdict(t, ref, [A, B, C], [rand((6, 8)), rand((8, 10), seed=1)]).startswith("race")
    assert _both_verdicts(t)[0].kind == "carried"


def test_vectorize_and_parallel_on_split_and_fused_reduce_loops():
    _A, _B, C, k = _matmul(K=12)
    s = tl.create_schedule(C)
    i, j = C.op.axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(i, j, ko, ki)
    _refused(lambda: s[C].vectorize(ki), r"vectorize on stage C: loop k.inner is a reduce loop: "
                                         r"it carries a dependence: C\[i, j, k\] -> C\[i, j, "
                                         r"k \+ 1\]")
    _refused(lambda: s[C].parallel(ko), r"parallel on stage C: loop k.outer .* C\[i, j, k\] -> "
                                        r"C\[i, j, k \+ 1\] .*e.g. C\[0, 0, 3\] -> C\[0, 0, 4\]")
    f = s[C].fuse(ko, ki)
    _refused(lambda: s[C].parallel(f), "loop k.outer.k.inner.fused is a reduce loop")


def test_conv_reduce_axes_fused_then_parallel_is_refused():
    X = tl.placeholder((1, 3, 8, 8), name="X")
    W = tl.placeholder((4, 3, 3, 3), name="W")
    rc = tl.reduce_axis((0, 3), name="rc")
    ry = tl.reduce_axis((0, 3), name="ry")
    rx = tl.reduce_axis((0, 3), name="rx")
    Y = tl.compute((1, 4, 6, 6), lambda n, f, y, x: tl.sum(
        X[n, rc, y + ry, x + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    s = tl.create_schedule(Y)
    r = s[Y].fuse(ry, rx)
    msg = _refused(lambda: s[Y].parallel(r), "loop ry.rx.fused is a reduce loop")
    assert "Y[n, f, y, x, rc, ry, rx] -> Y[n, f, y, x, rc, ry, rx + 1]" in msg
    assert "reduce axis rx carries the accumulation" in msg
    # the spatial loops are fine, and so is reordering the reduce loops (the sum commutes)
    s[Y].reorder(s[Y].op.axis[1], r, rc)
    s[Y].parallel(s[Y].op.axis[1])
    x, w = rand((1, 3, 8, 8)), rand((4, 3, 3, 3), seed=1)
    (y,) = build_run(s, [X, W], [Y], [x, w], name="conv_fused_reduce")
    want = np.zeros((1, 4, 6, 6), np.float32)
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("nchw,fc->nfhw", x[:, :, dy:dy + 6, dx:dx + 6], w[:, :, dy, dx])
    assert_close(y, want)


def test_rfactor_makes_the_factored_axis_parallel_but_not_the_rest():
    A = tl.placeholder((5, 64), name="A")
    k = tl.reduce_axis((0, 64), name="k")
    R = tl.compute((5,), lambda i: tl.sum(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R)
    _ko, ki = s[R].split(k, factor=8)
    RF = s.rfactor(R, ki)
    kf, _i = s[RF].op.axis
    (kr,) = s[RF].op.reduce_axis
    _refused(lambda: s[RF].parallel(kr), r"parallel on stage R.rf: loop k.outer is a reduce loop")
    _refused(lambda: s[R].parallel(s[R].op.reduce_axis[0]), "loop k.inner.v is a reduce loop")
    s[RF].parallel(kf)  # spatial now: every iteration has its own partial sum
    s[R].parallel(s[R].op.axis[0])
    a = rand((5, 64))
    (r,) = build_run(s, [A], [R], [a], name="rfactor_parallel")
    assert_close(r, a.sum(axis=1))


def test_multi_output_reduction_argmax():
    A = tl.placeholder((4, 9), name="A")
    k = tl.reduce_axis((0, 9), name="k")

    def combine(i0, v0, i1, v1):
        keep = v0 >= v1
        return tl.if_then_else(keep, i0, i1), tl.if_then_else(keep, v0, v1)

    def identity(t0, t1):
        return tl.const(-1, t0), tl.min_value(t1)

    argmax = tl.comm_reducer(combine, identity, name="argmax")
    I, V = tl.compute((4,), lambda i: argmax((k.var.astype("int32"), A[i, k]), axis=k),
                      name="T")
    s = tl.create_schedule([I, V])
    _ko, ki = s[I].split(k, factor=3)
    _refused(lambda: s[I].vectorize(ki), r"T\[i, k\] -> T\[i, k \+ 1\] \(reduce axis k")
    s[I].parallel(s[I].op.axis[0])
    a = rand((4, 9))
    f = tl.build(s, [A, I, V], name="argmax_par")
    i_out, v_out = np.zeros(4, np.int32), np.zeros(4, np.float32)
    f(a, i_out, v_out)
    np.testing.assert_array_equal(i_out, np.argmax(a, axis=1))


def test_prefix_sum_recurrence_parallel_over_outputs_only():
    """A scan written as a triangular reduction: the recurrence runs along k."""
    X = tl.placeholder((10,), name="X")
    k = tl.reduce_axis((0, 10), name="k")
    S = tl.compute((10,), lambda i: tl.sum(X[k], axis=k, where=k <= i), name="S")
    s = tl.create_schedule(S)
    _refused(lambda: s[S].parallel(k), r"S\[i, k\] -> S\[i, k \+ 1\]")
    s[S].parallel(s[S].op.axis[0])
    x = rand((10,))
    (out,) = build_run(s, [X], [S], [x], name="scan")
    assert_close(out, np.cumsum(x))


def test_a_reduce_loop_of_one_iteration_carries_nothing():
    """Exact, not syntactic: k.outer has one iteration (4 = 1 * 4), so it may be parallel."""
    A, B, C, k = _matmul(K=4)
    s = tl.create_schedule(C)
    ko, ki = s[C].split(k, factor=4)
    s[C].parallel(ko)
    _refused(lambda: s[C].parallel(ki), "loop k.inner is a reduce loop")
    a, b = rand((6, 4)), rand((4, 10), seed=1)
    (c,) = build_run(s, [A, B], [C], [a, b], name="one_iteration_reduce")
    assert_close(c, a @ b)


def _three_stage():
    A = tl.placeholder((8, 8), name="A")
    P = tl.compute((8, 8), lambda i, j: A[i, j] * 2, name="P")
    Q = tl.compute((8, 8), lambda i, j: P[i, j] + 1, name="Q")
    C = tl.compute((8, 8), lambda i, j: Q[i, j] * 3, name="C")
    return A, P, Q, C


def test_reorder_that_moves_a_reader_before_its_producer_is_refused():
    """P at loop i of C, its reader Q at loop j inside it; reorder(j, i) would make Q run at the
    top of j, before the i loop that computes P. A later compute_at could repair that, so the
    reorder is accepted and tl.lower refuses what is left, naming the reorder."""
    A, P, Q, C = _three_stage()
    s = tl.create_schedule(C)
    i, j = s[C].op.axis
    s[Q].compute_at(s[C], j)
    s[P].compute_at(s[C], i)
    s[C].reorder(j, i)
    msg = _refused(lambda: tl.lower(s, [A, C]), r"^lower on stage \*: stage P is computed inside "
                                                "loop i of C, but stage Q also reads it")
    assert msg.endswith("P[i, j] -> Q[i, j] (Q reads what P writes); e.g. P[0, 0] -> Q[0, 0]; "
                        "left so by s[C].reorder(j, i), which no later primitive repaired")
    t = _unchecked_twin(s, C)
    assert [v.kind for v in _both_verdicts(t)] == ["scope"]
    a = rand((8, 8))
    ref, _ = execute(tl.create_schedule(C, check=False), [A, C], [a])
    assert verdict(t, ref, [A, C], [a]) is not None


def test_compute_at_below_a_reader_computed_further_out_is_refused():
    A, P, Q, C = _three_stage()
    s = tl.create_schedule(C)
    i, j = s[C].op.axis
    s[Q].compute_at(s[C], i)
    s[P].compute_at(s[C], j)  # refused by tl.lower unless a later primitive repairs it
    msg = _refused(lambda: tl.lower(s, [A, C]), "stage Q also reads it and runs outside")
    assert "P[i, j] -> Q[i, j]" in msg
    assert msg.endswith("left so by s[P].compute_at(j, parent='C'), which no later primitive "
                        "repaired")
    s[P].compute_at(s[C], i)  # at the same loop, before Q: legal
    a = rand((8, 8))
    (c,) = build_run(s, [A], [C], [a], name="p_q_at_i")
    assert_close(c, (a * 2 + 1) * 3)


def test_compute_at_with_a_second_reader_outside_the_loop_is_refused():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] + 1, name="B")
    C = tl.compute((8,), lambda i: B[i] * 2, name="C")
    D = tl.compute((7,), lambda i: B[i + 1] * 3, name="D")
    s = tl.create_schedule([C, D])
    s[B].compute_at(s[C], C.op.axis[0])
    msg = _refused(lambda: tl.lower(s, [A, C, D]), "stage D also reads it")
    assert "B[i] -> D[i - 1]" in msg
    assert "left so by s[B].compute_at(i, parent='C')" in msg


def test_split_or_fuse_of_the_attach_loop_moves_the_stage_as_tvm_does():
    # TVM's LegalizeInvalidAttach: a split's inner loop, or the fused loop of a fuse whose
    # innermost loop it was, runs the attached stage as often as the loop it replaces
    A, P, Q, C = _three_stage()
    s = tl.create_schedule(C)
    s[Q].compute_at(s[C], s[C].op.axis[1])
    s[P].compute_at(s[C], s[C].op.axis[1])
    _jo, ji = s[C].split(s[C].op.axis[1], factor=2)
    assert s[Q].attach_ivar is ji and s[P].attach_ivar is ji
    fused = s[C].fuse(*s[C].leaf_iter_vars[1:])
    assert s[Q].attach_ivar is fused
    a = np.arange(64, dtype="float32").reshape(8, 8)
    out = np.zeros_like(a)
    tl.build(s, [A, C])(a, out)
    np.testing.assert_allclose(out, (a * 2 + 1) * 3)
    # at the outer loop of a fuse nothing runs it as often: refused, and undone
    t = tl.create_schedule(C)
    t[Q].compute_inline()
    t[P].compute_at(t[C], t[C].op.axis[0])
    _refused(lambda: t[C].fuse(*t[C].op.axis), "no longer a loop of it")
    assert t[C].loop_names() == ["i", "j"] and t[P].attach_ivar is t[C].op.axis[0]


def test_lower_checks_the_whole_schedule():
    A, B, C, k = _matmul()
    s = tl.create_schedule(C)
    s.check_legality = False  # e.g. a schedule edited by hand without the per-step checks
    s[C].parallel(k)
    s.check_legality = True
    with pytest.raises(tl.ScheduleError, match=r"^lower on stage C: loop k is a reduce loop: it "
                                               r"carries a dependence: C\[i, j, k\]"):
        tl.lower(s, [A, B, C])


# ----------------------------------------------------------------------------- accepted


def test_matmul_tiling_vectorize_parallel_unroll():
    A, B, C, k = _matmul(M=12, N=32, K=16)
    s = tl.create_schedule(C)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 16)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)
    s[C].reorder(io, jo, ki, ii, ko, ji)  # the reduce loops in either order: the sum commutes
    assert _both_verdicts(s) == []
    a, b = rand((12, 16)), rand((16, 32), seed=1)
    (c,) = build_run(s, [A, B], [C], [a, b], name="mm_tiled")
    assert_close(c, a @ b)


def test_cache_write_compute_at_and_parallel():
    A, B, C, _k = _matmul(M=12, N=32, K=16)
    s = tl.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, _ii, ji = s[C].tile(i, j, 4, 16)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    s[CL].reorder(ck, ci, cj)
    s[CL].vectorize(cj)
    s[C].vectorize(ji)
    s[C].parallel(io)
    _refused(lambda: s[CL].parallel(ck), "parallel on stage C.local: loop k is a reduce loop")
    assert _both_verdicts(s) == []
    a, b = rand((12, 16)), rand((16, 32), seed=1)
    (c,) = build_run(s, [A, B], [C], [a, b], name="mm_cache_write")
    assert_close(c, a @ b)


@pytest.mark.parametrize("placement", ["inline", "compute_at"])
def test_conv_bias_relu_with_padding_stage(placement):
    X = tl.placeholder((1, 2, 6, 6), name="X")
    W = tl.placeholder((3, 2, 3, 3), name="W")
    Bias = tl.placeholder((3,), name="Bias")
    Xp = tl.compute((1, 2, 8, 8), lambda n, c, y, x: tl.if_then_else(
        tl.all(y >= 1, y < 7, x >= 1, x < 7), X[n, c, y - 1, x - 1], tl.const(0.0, "float32")),
        name="Xp")
    rc = tl.reduce_axis((0, 2), name="rc")
    ry = tl.reduce_axis((0, 3), name="ry")
    rx = tl.reduce_axis((0, 3), name="rx")
    Y = tl.compute((1, 3, 6, 6), lambda n, f, y, x: tl.sum(
        Xp[n, rc, y + ry, x + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    Z = tl.compute((1, 3, 6, 6), lambda n, f, y, x: tl.max(Y[n, f, y, x] + Bias[f], 0.0),
                   name="Z")
    s = tl.create_schedule(Z)
    _n, f, y, x = s[Z].op.axis
    yo, _yi = s[Z].split(y, factor=2)
    s[Y].compute_at(s[Z], yo)
    if placement == "inline":
        s[Xp].compute_inline()
    else:
        s[Xp].compute_at(s[Y], s[Y].op.axis[2])
    s[Z].parallel(f)
    s[Z].vectorize(x)
    s[Y].parallel(s[Y].op.axis[1])
    assert _both_verdicts(s) == []
    xv, wv, bv = rand((1, 2, 6, 6)), rand((3, 2, 3, 3), seed=1), rand((3,), seed=2)
    (z,) = build_run(s, [X, W, Bias], [Z], [xv, wv, bv], name=f"conv_{placement}")
    xp = np.pad(xv, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 3, 6, 6), np.float32)
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("nchw,fc->nfhw", xp[:, :, dy:dy + 6, dx:dx + 6], wv[:, :, dy, dx])
    assert_close(z, np.maximum(want + bv[None, :, None, None], 0))


def test_stage_chain_recomputed_per_iteration_may_run_in_parallel():
    """A chain of shifted stages (each reads its producer at i and i + 1) computed at the loop of
    the last one: every iteration recomputes its own window into its own buffers, so the loop
    carries nothing, and parallel and vectorized loops both give the right answer."""
    X = tl.placeholder((12,), name="X")
    S1 = tl.compute((11,), lambda i: X[i] + X[i + 1], name="S1")
    S2 = tl.compute((10,), lambda i: S1[i] * S1[i + 1], name="S2")
    S3 = tl.compute((9,), lambda i: S2[i] - S2[i + 1], name="S3")
    s = tl.create_schedule(S3)
    io, ii = s[S3].split(s[S3].op.axis[0], factor=4)
    s[S2].compute_at(s[S3], ii)
    s[S1].compute_at(s[S2], s[S2].op.axis[0])
    s[S3].parallel(io)
    s[S3].vectorize(ii)  # stays scalar (the body allocates), and is legal
    assert _both_verdicts(s) == []
    x = rand((12,))
    s1 = x[:-1] + x[1:]
    s2 = s1[:-1] * s1[1:]
    (out,) = build_run(s, [X], [S3], [x], name="chain")
    assert_close(out, s2[:-1] - s2[1:])
    ref, _ = execute(tl.create_schedule(S3, check=False), [X, S3], [x])
    assert verdict(s, ref, [X, S3], [x]) is None


# ----------------------------------------------------------------------------- model and API


def test_dependences_are_printable_and_classified():
    A = tl.placeholder((6, 4), name="A")
    P = tl.compute((6, 4), lambda i, k: A[i, k] + 1, name="P")
    k = tl.reduce_axis((0, 4), name="k")
    R = tl.compute((6,), lambda i: tl.sum(P[i, k], axis=k), name="R")
    s = tl.create_schedule(R)
    deps = tl.analysis.dependences(s)
    kinds = {(d.kind, d.src.id, d.sink.id, d.reduction) for d in deps.deps}
    assert ("RAW", "P", "R", False) in kinds  # the producer feeds every update
    assert ("RAW", "R_init", "R", False) in kinds  # the init comes before every update
    assert ("RAW", "R", "R", True) in kinds  # updates of one accumulator: a reduction
    assert ("WAW", "R", "R", True) in kinds
    text = str(deps)
    assert "RAW (read after write):" in text and "WAR (write after read):" in text
    assert "[reduction: any order, never concurrently]" in text
    assert "schedule (instance -> time):" in text and "R_init[i]" in text
    assert tl.analysis.check(s) == []


def test_non_affine_index_is_over_approximated():
    """A[i * i] has no affine form: the read spans the dimension (safe, never exact-wrong)."""
    A = tl.placeholder((16,), name="A")
    P = tl.compute((16,), lambda i: A[i] * 2, name="P")
    C = tl.compute((4,), lambda i: P[i * i], name="C")
    s = tl.create_schedule(C)
    deps = tl.analysis.dependences(s)
    (raw,) = [d for d in deps.deps if d.src.stage_name == "P"]
    assert raw.map.domain().count_val().to_python() == 16  # every P instance may feed C
    s[P].compute_at(s[C], s[C].op.axis[0])
    a = rand((16,))
    (c,) = build_run(s, [A], [C], [a], name="nonaffine")
    assert_close(c, a[np.arange(4) ** 2] * 2)


def test_check_rejects_non_schedules():
    with pytest.raises(TypeError, match="expected a Schedule"):
        tl.analysis.check("s")
    with pytest.raises(TypeError, match="expected a Schedule"):
        tl.analysis.dependences(None)


def test_the_model_follows_dataflow_changes():
    """cache_write and rfactor change bodies and add stages: the model is rebuilt."""
    _A, _B, C, _k = _matmul()
    s = tl.create_schedule(C)
    before = {d.sink.id for d in tl.analysis.dependences(s).deps}
    s.cache_write(C, "local")
    after = {d.sink.id for d in tl.analysis.dependences(s).deps}
    assert before == {"C"} and after == {"C_local", "C"}


# ----------------------------------------------------------------------------- symbolic shapes


def _schedules_on(n, m):
    """(name, schedule function) pairs, each applied to a fresh matmul-like reduction."""

    def make():
        A = tl.placeholder((n, m), name="A")
        k = tl.reduce_axis((0, m), name="k")
        R = tl.compute((n,), lambda i: tl.sum(A[i, k] * 2, axis=k), name="R")
        D = tl.compute((n,), lambda i: R[i] + 1, name="D")
        return R, D

    out = {}
    for name, steps in SYMBOLIC_CASES.items():
        R, D = make()
        s = tl.create_schedule(D)
        try:
            steps(s, R, D)
            out[name] = "accepted"
        except tl.ScheduleError:
            out[name] = "refused"
    return out


def _c1(s, R, D):
    _ko, ki = s[R].split(s[R].op.reduce_axis[0], factor=2)
    s[R].parallel(ki)


def _c2(s, R, D):
    ko, ki = s[R].split(s[R].op.reduce_axis[0], factor=2)
    s[R].reorder(ki, ko, s[R].op.axis[0])
    s[R].vectorize(s[R].op.axis[0])


def _c3(s, R, D):
    io, _ii = s[D].split(s[D].op.axis[0], factor=3)
    s[R].compute_at(s[D], io)
    s[D].parallel(io)
    s[R].parallel(s[R].op.axis[0])


def _c4(s, R, D):
    _io, ii = s[D].split(s[D].op.axis[0], nparts=2)
    s[R].compute_at(s[D], ii)
    s[R].parallel(s[R].op.reduce_axis[0])


def _c5(s, R, D):
    ko, _ki = s[R].split(s[R].op.reduce_axis[0], nparts=3)
    s[R].parallel(ko)


def _c6(s, R, D):
    io, ii = s[D].split(s[D].op.axis[0], factor=2)
    s[R].compute_at(s[D], ii)
    s[D].reorder(ii, io)


SYMBOLIC_CASES = {"split reduce, parallel inner": _c1, "reduce outer, vectorize spatial": _c2,
                  "compute_at, parallel": _c3, "parallel reduce at inner loop": _c4,
                  "nparts reduce, parallel outer": _c5, "compute_at then reorder host": _c6}


def test_symbolic_extents_give_the_concrete_verdicts():
    n, m = tl.var("n"), tl.var("m")
    symbolic = _schedules_on(n, m)
    concrete = _schedules_on(7, 9)
    assert symbolic == concrete
    assert sorted(set(symbolic.values())) == ["accepted", "refused"]


# ----------------------------------------------------------------------------- found by the oracle


def test_vectorized_strided_store_is_not_stored_contiguously():
    """The property test found it: vectorizing a loop whose store has stride 2 (P's loops
    reordered so the row index is innermost) stored the lanes contiguously. Legal schedule,
    wrong code: such a loop now stays scalar."""
    A = tl.placeholder((2, 3), name="A")
    P = tl.compute((2, 3), lambda i, j: A[i, j] + 3, name="P")
    k = tl.reduce_axis((0, 3), name="k")
    R = tl.compute((2,), lambda i: tl.sum(P[i, k], axis=k), name="R")
    s = tl.create_schedule(R)
    i, j = s[P].op.axis
    s[P].reorder(j, i)
    s[P].vectorize(i)
    a = rand((2, 3))
    (r,) = build_run(s, [A], [R], [a], name="strided_store")
    assert_close(r, (a + 3).sum(axis=1))
