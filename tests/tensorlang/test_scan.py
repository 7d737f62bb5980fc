"""tl.scan (TVM's te.scan): recurrences over a time axis, checked against numpy; the scan
dependence in the legality analysis (the time loop stays serial and in order; the state's
other axes are free); declaration errors."""

import numpy as np
import pytest

import tensorlang as tl

RNG = np.random.default_rng(11)


def _cumsum(m=7, n=9):
    X = tl.placeholder((m, n), name="X")
    s_state = tl.placeholder((m, n), name="s_state")
    s_init = tl.compute((1, n), lambda _, i: X[0, i], name="s_init")
    s_update = tl.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
    res = tl.scan(s_init, s_update, s_state, inputs=[X], name="res")
    return X, s_update, res


def _run_cumsum(s, X, res, m=7, n=9):
    x = RNG.standard_normal((m, n)).astype("float32")
    out = np.zeros((m, n), "float32")
    tl.build(s, [X, res])(x, out)
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("schedule", ["default", "parallel_i", "split_vectorize_i",
                                      "reorder"])
def test_cumsum(schedule):
    X, s_update, res = _cumsum()
    s = tl.create_schedule(res.op)
    t, i = s_update.op.axis
    if schedule == "parallel_i":
        s[s_update].parallel(i)  # the state's spatial axis: no dependence across it
    elif schedule == "split_vectorize_i":
        _io, ii = s[s_update].split(i, factor=4)
        s[s_update].vectorize(ii)
    elif schedule == "reorder":
        s[s_update].reorder(i, t)  # legal here: step t of column i reads only column i
    _run_cumsum(s, X, res)


def test_cumsum_with_a_symbolic_number_of_steps():
    m = tl.var("m")
    X = tl.placeholder((m, 4), name="X")
    s_state = tl.placeholder((m, 4), name="s_state")
    s_init = tl.compute((1, 4), lambda _, i: X[0, i], name="s_init")
    s_update = tl.compute((m, 4), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
    res = tl.scan(s_init, s_update, s_state, name="res")
    f = tl.build(tl.create_schedule(res.op), [X, res])
    for steps in (2, 11):
        x = RNG.standard_normal((steps, 4)).astype("float32")
        out = np.zeros((steps, 4), "float32")
        f(x, out)
        np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)


def test_parallel_time_loop_is_refused_naming_the_scan():
    _X, s_update, res = _cumsum()
    s = tl.create_schedule(res.op)
    with pytest.raises(tl.ScheduleError, match=r"parallel on stage s_update: loop t carries a "
                                               r"dependence: s_update\[t, i\] -> "
                                               r"s_update\[t \+ 1, i\] .*state of tl.scan res"):
        s[s_update].parallel(s_update.op.axis[0])
    to, ti = s[s_update].split(s_update.op.axis[0], factor=2)
    s[s_update].reorder(s_update.op.axis[1], to, ti)
    with pytest.raises(tl.ScheduleError, match="time axis of tl.scan res"):
        s[s_update].vectorize(ti)


def _rnn(T=6, H=8, D=5):
    """h[t] = tanh(h[t-1] @ W + x[t] @ U), h[0] = h0."""
    X = tl.placeholder((T, D), name="X")
    W = tl.placeholder((H, H), name="W")
    U = tl.placeholder((D, H), name="U")
    h0 = tl.placeholder((H,), name="h0")
    k = tl.reduce_axis((0, H), name="k")
    d = tl.reduce_axis((0, D), name="d")
    xu = tl.compute((T, H), lambda t, j: tl.sum(X[t, d] * U[d, j], axis=d), name="xu")
    state = tl.placeholder((T, H), name="state")
    init = tl.compute((1, H), lambda _, j: h0[j], name="init")
    hw = tl.compute((T, H), lambda t, j: tl.sum(state[t - 1, k] * W[k, j], axis=k), name="hw")
    upd = tl.compute((T, H), lambda t, j: tl.tanh(hw[t, j] + xu[t, j]), name="upd")
    h = tl.scan(init, upd, state, inputs=[X], name="h")
    return (X, W, U, h0), xu, hw, upd, h


def _rnn_reference(x, w, u, h0):
    out = np.zeros((x.shape[0], w.shape[0]), "float64")
    out[0] = h0
    for t in range(1, x.shape[0]):
        out[t] = np.tanh(out[t - 1] @ w + x[t] @ u)
    return out


@pytest.mark.parametrize("schedule", ["default", "parallel_j", "hw_at_j", "vectorize_j"])
def test_rnn_cell(schedule):
    ins, xu, hw, upd, h = _rnn()
    s = tl.create_schedule(h.op)
    _t, j = upd.op.axis
    if schedule == "parallel_j":
        s[upd].parallel(j)
        s[xu].parallel(xu.op.axis[0])  # not part of the recurrence: every step at once
    elif schedule == "hw_at_j":
        s[hw].compute_at(s[upd], j)  # one element of h[t-1] @ W per (t, j)
    elif schedule == "vectorize_j":
        _jo, ji = s[upd].split(j, factor=4)
        s[upd].vectorize(ji)
    f = tl.build(s, [*ins, h])
    x = RNG.standard_normal((6, 5)).astype("float32")
    w = (0.4 * RNG.standard_normal((8, 8))).astype("float32")
    u = RNG.standard_normal((5, 8)).astype("float32")
    h0 = RNG.standard_normal(8).astype("float32")
    out = np.zeros((6, 8), "float32")
    f(x, w, u, h0, out)
    np.testing.assert_allclose(out, _rnn_reference(x, w, u, h0), rtol=1e-5, atol=1e-5)


def test_rnn_reorder_past_the_state_is_refused():
    ins, _xu, hw, upd, h = _rnn()
    s = tl.create_schedule(h.op)
    # hw (computed at the time loop) of step t reads all of h[t-1]: with the time loop inside
    # the state's loop j, it would run before the later columns of h[t-1] exist
    s[upd].reorder(upd.op.axis[1], upd.op.axis[0])
    with pytest.raises(tl.ScheduleError, match=r"upd\[t, j\] -> hw\[t \+ 1, j', k\] \(hw reads "
                                               r"what upd writes: the state of tl.scan h"):
        tl.lower(s, [*ins, h])
    s = tl.create_schedule(h.op)
    s[hw].compute_root()  # the whole body first: it would read steps not yet computed
    with pytest.raises(tl.ScheduleError, match="stage hw would run before stage upd"):
        tl.lower(s, [*ins, h])
    s = tl.create_schedule(h.op)
    with pytest.raises(tl.ScheduleError, match="parallel on stage upd: loop t carries"):
        s[upd].parallel(upd.op.axis[0])


def test_primitives_that_break_the_scan_are_refused():
    X, s_update, res = _cumsum()
    s = tl.create_schedule(res.op)
    with pytest.raises(tl.ScheduleError, match="stage res is a tl.scan's result"):
        s[res].split(s_update.op.axis[1], factor=2)
    with pytest.raises(tl.ScheduleError, match="compute_inline on stage s_update: stage "
                                               "s_update is the update of tl.scan res"):
        s[s_update].compute_inline()
    with pytest.raises(tl.ScheduleError, match="cache_write on stage s_update"):
        s.cache_write(s_update, "local")
    with pytest.raises(tl.ScheduleError, match=r"cache_read on stage s_update: stage s_update "
                                               r"is the update .* a reader of a copy of X "
                                               r"would replace its op"):
        s.cache_read(X, "local", [s_update])
    with pytest.raises(ValueError, match="argument s_update is the update of tl.scan res"):
        tl.lower(s, [X, s_update, res])
    _run_cumsum(s, X, res)  # nothing refused was applied


def test_a_body_stage_between_the_state_and_the_update_may_be_inlined():
    # TVM's scan-inline tests: x1 is computed one step at a time, so inlining it is legal
    X = tl.placeholder((5, 3), name="X")
    state = tl.placeholder((5, 3), name="state")
    init = tl.compute((1, 3), lambda _, i: X[0, i], name="init")
    x1 = tl.compute((5, 3), lambda t, i: state[t - 1, i] + X[t, i], name="x1")
    upd = tl.compute((5, 3), lambda t, i: x1[t, i] * 2 + state[t - 1, i], name="upd")
    res = tl.scan(init, upd, state, name="res")
    s = tl.create_schedule(res.op)
    s[x1].compute_inline()
    x = RNG.standard_normal((5, 3)).astype("float32")
    out = np.zeros((5, 3), "float32")
    tl.build(s, [X, res])(x, out)
    ref = x.astype("float64").copy()
    for t in range(1, 5):
        ref[t] = (ref[t - 1] + x[t]) * 2 + ref[t - 1]
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_bad_scan_declarations():
    X = tl.placeholder((5, 3), name="X")
    st = tl.placeholder((5, 3), name="st")
    init = tl.compute((1, 3), lambda _, i: X[0, i], name="init")
    now = tl.compute((5, 3), lambda t, i: st[t, i] + X[t, i], name="now")
    with pytest.raises(ValueError, match=r"reads the state at step t; a step reads the state "
                                         r"at earlier steps only"):
        tl.scan(init, now, st)
    no_state = tl.compute((5, 3), lambda t, i: X[t, i], name="no_state")
    with pytest.raises(ValueError, match="update does not read the state st"):
        tl.scan(init, no_state, st)
    bad_init = tl.compute((1, 3), lambda _, i: st[0, i], name="bad_init")
    upd = tl.compute((5, 3), lambda t, i: st[t - 1, i] * 2, name="upd")
    with pytest.raises(ValueError, match="init reads the state st"):
        tl.scan(bad_init, upd, st)
    wide = tl.compute((1, 4), lambda _, i: i.astype("float32"), name="wide")
    with pytest.raises(ValueError, match="dimension 1 differs"):
        tl.scan(wide, upd, st)
    with pytest.raises(TypeError, match="state_placeholder must be a tl.placeholder"):
        tl.scan(init, upd, upd)
