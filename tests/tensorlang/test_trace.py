"""Schedules are recorded steps: apply a schedule, serialize its trace to JSON, replay it onto a
freshly declared identical compute, and the lowered IR text must be identical."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_codegen_differential import CASES, SCHEDULES
from tl_testing import assert_close, build_run

import tensorlang as tl


def _fresh_schedule(case_name):
    t = CASES[case_name][0]()
    return t, tl.create_schedule(t.out)


@pytest.mark.parametrize("case_name,sched_name",
                         [(c, sn) for c, (_, scheds) in CASES.items() for sn in scheds
                          if sn != "default"])
def test_round_trip_gives_identical_ir(case_name, sched_name):
    t1, s1 = _fresh_schedule(case_name)
    SCHEDULES[sched_name](s1, t1)
    text = s1.trace.dumps()
    assert json.loads(text) == s1.trace.to_json()
    want = str(tl.lower(s1, t1.ins + [t1.out]))

    t2, s2 = _fresh_schedule(case_name)
    s2.apply_trace(tl.Trace.loads(text))
    assert str(tl.lower(s2, t2.ins + [t2.out])) == want
    # the replayed schedule records the same steps again
    assert s2.trace.dumps() == text


def test_trace_contents_and_text():
    A = tl.placeholder((16, 16), name="A")
    k = tl.reduce_axis((0, 16), name="k")
    C = tl.compute((16,), lambda i: tl.sum(A[i, k], axis=k), name="C")
    s = tl.create_schedule(C)
    (i,) = C.op.axis
    io, ii = s[C].split(i, factor=4)
    s[C].reorder(io, k, ii)
    s[C].vectorize(ii)
    s[C].parallel(io)
    s[C].pragma(io, "auto_unroll_max_step", 16)
    assert [st.kind for st in s.trace] == ["split", "reorder", "vectorize", "parallel", "pragma"]
    assert s.trace[0].to_json() == {"kind": "split", "stage": "C", "loops": ["i"],
                                    "args": {"factor": 4, "nparts": None}}
    assert str(s.trace).splitlines() == [
        "s[C].split(i, factor=4)",
        "s[C].reorder(i.outer, k, i.inner)",
        "s[C].vectorize(i.inner)",
        "s[C].parallel(i.outer)",
        "s[C].pragma(i.outer, key='auto_unroll_max_step', value=16)",
    ]


def test_tile_is_recorded_as_its_primitives():
    A = tl.placeholder((8, 8), name="A")
    B = tl.compute((8, 8), lambda i, j: A[i, j] + 1, name="B")
    s = tl.create_schedule(B)
    s[B].tile(*B.op.axis, 4, 2)
    assert [st.kind for st in s.trace] == ["split", "split", "reorder"]


def test_round_trip_of_dataflow_steps_and_replayed_kernel_runs():
    """cache_read, cache_write, compute_at, compute_inline and rfactor replay too, and the
    replayed schedule builds a kernel that computes the same thing."""
    def declare():
        A = tl.placeholder((12, 10), name="A")
        B = tl.compute((12, 10), lambda i, j: A[i, j] * 2, name="B")
        k = tl.reduce_axis((0, 10), name="k")
        C = tl.compute((12,), lambda i: tl.sum(B[i, k] + A[i, k], axis=k), name="C")
        return A, B, C

    A, B, C = declare()
    s = tl.create_schedule(C)
    AL = s.cache_read(A, "local", [C])
    s[B].compute_inline()
    _ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    CF = s.rfactor(C, ki)
    s[AL].compute_at(s[CF], s[CF].op.axis[0])
    CL = s.cache_write(C, "local")
    s[CL].compute_at(s[C], s[C].op.axis[0])
    text = s.trace.dumps()
    kinds = [st["kind"] for st in json.loads(text)]
    assert kinds == ["cache_read", "compute_inline", "split", "rfactor", "compute_at",
                     "cache_write", "compute_at"]
    want = str(tl.lower(s, [A, C]))

    A2, _B2, C2 = declare()
    s2 = tl.create_schedule(C2).apply_trace(text)
    assert str(tl.lower(s2, [A2, C2])) == want
    a = np.random.default_rng(0).uniform(-1, 1, (12, 10)).astype("float32")
    (c,) = build_run(s2, [A2], [C2], [a], name="replayed")
    assert_close(c, (a * 3).sum(1))


def test_replay_onto_a_different_compute_fails_clearly():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] + 1, name="B")
    s = tl.create_schedule(B)
    s[B].split(B.op.axis[0], factor=2)
    text = s.trace.dumps()
    C = tl.compute((8,), lambda x: A[x] + 1, name="B")  # same stage name, other loop name
    with pytest.raises(tl.ScheduleError, match="no loop named 'i'"):
        tl.create_schedule(C).apply_trace(text)
    with pytest.raises(ValueError, match="not a schedule step"):
        tl.Trace.loads('[{"kind": "explode", "stage": "B"}]')
