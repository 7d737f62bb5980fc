"""The bounds proof (analysis/bounds.py) and the run-time index checks
(lower/passes/check_indices.py): an out-of-bounds read is refused at tl.lower, naming the read
and one offending index; a data-dependent index that cannot be proven fails the call with a
KernelError, never an unchecked load (issue 15)."""

import subprocess
import sys

import numpy as np
import pytest
from tl_testing import rand

import tensorlang as tl
from tensorlang import ops
from tensorlang.analysis.bounds import PROVEN, prove_op


def _lower(out, args):
    return tl.lower(tl.create_schedule(out), args)


def _build(out, args, vectorize=None):
    s = tl.create_schedule(out)
    if vectorize is not None:
        s[out].vectorize(out.op.axis[vectorize])
    return tl.build(s, args)


# ----------------------------------------------------------------------------- refused


@pytest.mark.parametrize("fcompute, pattern", [
    (lambda A: lambda i: A[i + 1],
     (r"compute C reads A\[i \+ 1\] out of bounds: A has shape \(16,\), and index i \+ 1 = 16 "
      r"is outside \[0, 16\) at i = 15")),
    (lambda A: lambda i: A[i - 1], r"reads A\[i - 1\] out of bounds.* i - 1 = -1 .*at i = 0"),
    (lambda A: lambda i: A[20], r"reads A\[20\] out of bounds.*index 20 is outside \[0, 16\)$"),
    (lambda A: lambda i: A[i] + A[16 - i], r"reads A\[16 - i\] out of bounds.* = 16 .*i = 0"),
])
def test_out_of_bounds_reads_are_refused_naming_the_index(fcompute, pattern):
    A = tl.placeholder((16,), name="A")
    C = tl.compute((16,), fcompute(A), name="C")
    with pytest.raises(tl.LoweringError, match=pattern):
        _lower(C, [A, C])


def test_a_select_the_ranges_decide_is_proven_as_its_branch():
    """buf[0, select(j < 0, like[j], j)] over a symbolic length s: j >= 0 decides the select,
    so the index is j, out of bounds once s > 10 (refused, naming the offending point). The
    data-dependent side, never taken, made it a run-time index that the run-time check, seeing
    the simplified affine j, left unchecked: a silent read past buf."""
    s = tl.var("s")
    buf = tl.placeholder((1, 10), name="buf", dtype="int64")
    like = tl.placeholder((s,), name="like", dtype="int64")
    out = tl.compute((s,), lambda j: buf[0, tl.select(j < 0, like[j], j)], name="out")
    with pytest.raises(tl.LoweringError, match=r"compute out reads buf\[0, select\(j < 0, "
                                               r"like\[j\], j\)\] out of bounds.*= 10 is "
                                               r"outside \[0, 10\)"):
        _lower(out, [buf, like, out])


def test_a_refused_read_names_its_dimension():
    A = tl.placeholder((4, 8), name="A")
    C = tl.compute((4, 8), lambda i, j: A[i, j * 2 % 9], name="C")
    with pytest.raises(tl.LoweringError, match=r"A\[i, j \* 2 % 9\].*dimension 1.* = 8 .*j = 4"):
        _lower(C, [A, C])


def test_reduce_axis_reads_are_checked_and_where_guards_them():
    A = tl.placeholder((16,), name="A")
    k = tl.reduce_axis((0, 16), name="k")
    bad = tl.compute((1,), lambda i: tl.sum(A[k - 1], axis=k), name="bad")
    with pytest.raises(tl.LoweringError, match=r"A\[k - 1\].*= -1 is outside \[0, 16\) at k = 0$"):
        _lower(bad, [A, bad])
    k2 = tl.reduce_axis((0, 16), name="k")
    ok = tl.compute((1,), lambda i: tl.sum(A[k2 - 1], axis=k2, where=k2 >= 1), name="ok")
    a = rand((16,))
    out = np.zeros(1, "float32")
    _build(ok, [A, ok])(a, out)
    np.testing.assert_allclose(out, a[:15].sum(keepdims=True), rtol=1e-5)


def test_a_guard_that_reads_data_cannot_prove_a_read():
    A = tl.placeholder((16,), name="A")
    M = tl.placeholder((16,), dtype="int32", name="M")
    C = tl.compute((16,), lambda i: tl.if_then_else(M[i] > 0, A[i - 1], 0.0), name="C")
    with pytest.raises(tl.LoweringError, match=r"reads A\[i - 1\] and it cannot be proven in "
                                                r"bounds.*at i = 0, unless.*the guard M\[i\] > "
                                                r".* is not affine \(it reads data\).*clamp"):
        _lower(C, [A, M, C])
    # clamped, it is proven
    D = tl.compute((16,), lambda i: tl.if_then_else(M[i] > 0, A[tl.max(i - 1, 0)], 0.0),
                   name="D")
    assert "checked(" not in str(_lower(D, [A, M, D]))


# ----------------------------------------------------------------------------- accepted


def test_guarded_padding_reads_are_accepted_and_run():
    A = tl.placeholder((16,), name="A")
    C = tl.compute((18,), lambda i: tl.if_then_else(tl.all(i >= 1, i <= 16), A[i - 1], 0.0),
                   name="C")
    D = tl.compute((16,), lambda i: tl.if_then_else(i < 1, 0.0, A[i - 1]), name="D")
    a = rand((16,))
    c, d = np.zeros(18, "float32"), np.zeros(16, "float32")
    _build(C, [A, C], vectorize=0)(a, c)
    _build(D, [A, D])(a, d)
    np.testing.assert_array_equal(c, np.pad(a, 1))
    np.testing.assert_array_equal(d, np.concatenate([[0], a[:15]]))


def test_padded_strided_conv_reads_are_proven():
    X = tl.placeholder((1, 3, 9, 9), name="X")
    W = tl.placeholder((4, 3, 3, 3), name="W")
    Y = ops.conv2d_nchw(X, W, stride=2, padding=1)
    s = ops.default_schedule(Y)
    x, w = rand((1, 3, 9, 9)), rand((4, 3, 3, 3))
    y = np.zeros([int(d.value) for d in Y.shape], "float32")
    tl.build(s, [X, W, Y])(x, w, y)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros_like(y)
    for oh in range(y.shape[2]):
        for ow in range(y.shape[3]):
            patch = xp[0, :, 2 * oh:2 * oh + 3, 2 * ow:2 * ow + 3]
            want[0, :, oh, ow] = np.tensordot(w, patch, axes=3)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    for st in s.stages:
        if isinstance(st.op, tl.te.ComputeOp):
            assert all(a.status == PROVEN for a in prove_op(st.op).accesses), st.op.name


def test_symbolic_shapes():
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    bad = tl.compute((n,), lambda i: A[i + 1], name="bad")
    with pytest.raises(tl.LoweringError, match=r"A\[i \+ 1\].*shape \(n,\).*outside \[0, n\) "
                                               r"at i = \d+ \(with n = \d+\)"):
        _lower(bad, [A, bad])
    ok = tl.compute((n - 1,), lambda i: A[i + 1] - A[i], name="ok")
    # no index is checked at run time; the one check is the entry's, that n - 1 >= 0
    checks = [ln.strip() for ln in str(_lower(ok, [A, ok])).splitlines() if "checked(" in ln]
    assert checks == [f"checked(n - 1, {2**63 - 1})"]
    diff = tl.compute((n,), lambda i: tl.if_then_else(i < n - 1, A[i + 1] - A[i], 0.0),
                      name="diff")
    rev = tl.compute((n,), lambda i: A[n - 1 - i], name="rev")
    a = rand((10,))
    d, r = np.zeros(10, "float32"), np.zeros(10, "float32")
    _build(diff, [A, diff])(a, d)
    _build(rev, [A, rev])(a, r)
    np.testing.assert_allclose(d, np.append(np.diff(a), 0), rtol=1e-6)
    np.testing.assert_array_equal(r, a[::-1])


def test_shape_variables_of_two_tensors_are_independent():
    n, m = tl.var("n"), tl.var("m")
    A = tl.placeholder((m,), name="A")
    C = tl.compute((n,), lambda i: A[i], name="C")
    with pytest.raises(tl.LoweringError, match=r"A\[i\].*outside \[0, m\)"):
        _lower(C, [A, C])


def test_two_shape_variables_of_one_name_are_told_apart():
    A = tl.placeholder((tl.var("n"),), name="A")
    C = tl.compute((tl.var("n"),), lambda i: A[i], name="C")
    with pytest.raises(tl.LoweringError, match=r"2 different tl.var objects are named 'n'.*"
                                               r"declare it once and reuse it"):
        _lower(C, [A, C])


def test_the_proof_is_made_once_per_compute():
    A = tl.placeholder((8, 8), name="A")
    C = tl.compute((8, 8), lambda i, j: A[j, i] * 2.0, name="C")
    first = prove_op(C.op)
    s = tl.create_schedule(C)
    s[C].split(C.op.axis[0], factor=3)
    tl.lower(s, [A, C])
    assert prove_op(C.op) is first
    assert [a.status for a in first.accesses] == [PROVEN, PROVEN]


# ----------------------------------------------------------------------------- run time

_GATHER = """
import numpy as np, tensorlang as tl
A = tl.placeholder((16, 8), name="A")
Ix = tl.placeholder((5,), dtype="int64", name="Ix")
G = tl.compute((5, 8), lambda i, j: A[Ix[i], j] * 2.0, name="G")
s = tl.create_schedule(G)
{schedule}
f = tl.build(s, [A, Ix, G])
a = np.arange(128, dtype="float32").reshape(16, 8)
g = np.zeros((5, 8), "float32")
ix = np.array([0, 3, 15, 2, 7])
f(a, ix, g)
assert np.array_equal(g, a[ix] * 2)
for bad in (16, -1, 1 << 40, -(1 << 62)):
    ix[2] = bad
    try:
        f(a, ix, g)
        print("no error for", bad)
    except tl.runtime.KernelError as e:
        print("KernelError:", e)
"""


@pytest.mark.parametrize("schedule", ["", "s[G].vectorize(G.op.axis[1])",
                                      "s[G].parallel(G.op.axis[0])"])
def test_a_gather_out_of_range_raises_kernel_error(schedule):
    # in a subprocess: an unchecked load far out of range would kill the interpreter
    code = _GATHER.format(schedule=schedule)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 4, proc.stdout
    for line in lines:
        assert line.startswith("KernelError:"), line
        assert r"index out of bounds in A[Ix[i], j]: dimension 0's index is not in [0, 16)" \
            in line


def _vector_gather(guarded: bool):
    A = tl.placeholder((16,), name="A")
    Ix = tl.placeholder((32,), dtype="int64", name="Ix")
    if guarded:
        G = tl.compute((32,), lambda i: tl.if_then_else(Ix[i] >= 0, A[Ix[i]], -1.0), name="G")
    else:
        G = tl.compute((32,), lambda i: A[Ix[i]], name="G")
    return _build(G, [A, Ix, G], vectorize=0)


def test_each_lane_of_a_vector_gather_is_checked():
    f = _vector_gather(guarded=False)
    a, g = rand((16,)), np.zeros(32, "float32")
    ix = np.arange(32) % 16
    f(a, ix, g)
    np.testing.assert_array_equal(g, a[ix])
    for lane in (0, 5, 31):
        bad = ix.copy()
        bad[lane] = 16
        with pytest.raises(tl.runtime.KernelError, match=r"A\[Ix\[i\]\]: the index is not in \[0, 16\)"):
            f(a, bad, g)


def test_lanes_a_select_does_not_take_are_not_checked():
    f = _vector_gather(guarded=True)
    a, g = rand((16,)), np.zeros(32, "float32")
    ix = np.where(np.arange(32) % 3 == 0, -5, np.arange(32) % 16)
    f(a, ix, g)
    np.testing.assert_array_equal(g, np.where(ix >= 0, a[np.maximum(ix, 0)], -1.0))
    ix[4] = 99
    with pytest.raises(tl.runtime.KernelError, match="index out of bounds"):
        f(a, ix, g)


def test_library_gather_wraps_negative_indices_and_refuses_out_of_range():
    x = rand((5, 4, 3))
    X = tl.placeholder(x.shape, name="X")
    I_ = tl.placeholder((2, 2), dtype="int64", name="I")
    for axis in (0, 1, 2):
        n = x.shape[axis]
        Y = ops.gather(X, I_, axis)
        f = tl.build(ops.default_schedule(Y), [X, I_, Y])
        y = np.zeros([int(d.value) for d in Y.shape], "float32")
        ix = np.array([[0, -1], [n - 1, -n]])
        f(x, ix, y)
        np.testing.assert_array_equal(y, np.take(x, ix, axis=axis))
        for bad in (n, -n - 1):
            ix[1, 0] = bad
            with pytest.raises(tl.runtime.KernelError, match=rf"index out of bounds in X\[.*not in "
                                                     rf"\[0, {n}\)"):
                f(x, ix, y)


def test_a_product_index_is_checked_unless_the_ranges_bound_it():
    A = tl.placeholder((16,), name="A")
    inside = tl.compute((4, 4), lambda i, j: A[i * j], name="inside")
    assert "checked(" not in str(_lower(inside, [A, inside]))
    n = tl.var("n")
    B = tl.placeholder((n,), name="B")
    C = tl.compute((4, 4), lambda i, j: B[i * j], name="C")
    assert "checked(" in str(_lower(C, [B, C]))
    f = _build(C, [B, C])
    b, c = rand((10,)), np.zeros((4, 4), "float32")
    f(b, c)  # i * j <= 9
    np.testing.assert_array_equal(c, b[np.outer(np.arange(4), np.arange(4))])
    with pytest.raises(tl.runtime.KernelError, match=r"B\[i \* j\]: the index is not in \[0, n\)"):
        f(b[:9], c)


def test_the_message_survives_save_and_load(tmp_path):
    A = tl.placeholder((16,), name="A")
    Ix = tl.placeholder((4,), dtype="int32", name="Ix")
    G = tl.compute((4,), lambda i: A[Ix[i]], name="G")
    path = str(tmp_path / "gather.tlm")
    _build(G, [A, Ix, G]).save(path)
    f = tl.runtime.load_module(path)
    a, g = rand((16,)), np.zeros(4, "float32")
    f(a, np.array([1, 2, 3, 4], "int32"), g)
    np.testing.assert_array_equal(g, a[1:5])
    with pytest.raises(tl.runtime.KernelError,
                       match=r"index out of bounds in A\[Ix\[i\]\]"):
        f(a, np.array([1, 2, 3, 16], "int32"), g)


_GRAPH_GATHER = """
import numpy as np
from tensorlang import graph, runtime
b = graph.Builder("emb")
x = b.input("x", (10, 4))
i = b.input("i", (3,), dtype="int64")
gm = graph.build(b.build(b.relu(b.gather(x, i, axis=0))))
xv = np.random.default_rng(0).random((10, 4), dtype=np.float32) - 0.5
iv = np.array([0, -1, -10])
out = next(iter(gm.run(x=xv, i=iv).values()))
assert np.array_equal(out, np.maximum(np.take(xv, iv, axis=0), 0))
for bad in (10, -11, 1 << 40):
    iv[1] = bad
    try:
        gm.run(x=xv, i=iv)
        print("no error for", bad)
    except runtime.KernelError as e:
        print("KernelError:", e)
"""


def test_an_onnx_gather_in_a_graph_wraps_negatives_and_raises_out_of_range():
    proc = subprocess.run([sys.executable, "-c", _GRAPH_GATHER], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 3, proc.stdout
    for line in lines:
        assert line.startswith("KernelError:") and "index out of bounds in" in line, line
        assert "dimension 0's index is not in [0, 10)" in line, line


def test_an_extent_isl_cannot_read_leaves_the_check_to_run_time():
    n, m = tl.var("n"), tl.var("m")
    A = tl.placeholder((n, m), name="A")
    flat = tl.compute((n * m,), lambda i: A[i // m, i % m] * 2.0, name="flat")
    back = tl.compute((n, m), lambda i, j: flat[i * m + j], name="back")
    a, out = rand((3, 5)), np.zeros((3, 5), "float32")
    _build(back, [A, back])(a, out)
    np.testing.assert_array_equal(out, a * 2)
    # flat[i] over range(n * m) is proven; flat[i + 1] reads one past the end at the last i
    ahead = tl.compute((n * m,), lambda i: flat[i + 1], name="ahead")
    again = tl.compute((n, m), lambda i, j: ahead[i * m + j], name="again")
    assert [a.status for a in prove_op(ahead.op).accesses] == ["runtime"]
    with pytest.raises(tl.runtime.KernelError, match=r"flat\[i \+ 1\]: the index is not in "
                                                     r"\[0, n \* m\)"):
        _build(again, [A, again])(a, out)


# ----------------------------------------------------------------------------- sizes of 0

# in a subprocess: a regression would read out of bounds
_SIZE_ZERO = """
import numpy as np, tensorlang as tl
n, m = tl.var("n"), tl.var("m")
A = tl.placeholder((n,), name="A")
B = tl.compute((1,), lambda i: A[n - 1] * 2.0, name="B")
f = tl.build(tl.create_schedule(B), [A, B])
b = np.zeros(1, "float32")
f(np.arange(3, dtype="float32"), b)
assert b[0] == 4.0, b
f.save({path!r})
M = tl.placeholder((n, m), name="M")
C = tl.compute((1,), lambda i: M[n - 1, m - 1], name="C")
g = tl.build(tl.create_schedule(C), [M, C])
Ix = tl.placeholder((2,), dtype="int64", name="Ix")
G = tl.compute((2,), lambda i: A[Ix[i]], name="G")
h = tl.build(tl.create_schedule(G), [A, Ix, G])
calls = [
    lambda: f(np.zeros(0, "float32"), b),
    lambda: tl.runtime.load_module({path!r})(np.zeros(0, "float32"), b),
    lambda: g(np.zeros((3, 0), "float32"), b),
    lambda: g(np.zeros((0, 3), "float32"), b),
    lambda: h(np.zeros(0, "float32"), np.zeros(2, "int64"), np.zeros(2, "float32")),
]
for call in calls:
    try:
        call()
        print("no error")
    except tl.runtime.KernelError as e:
        print("KernelError:", e)
"""


def test_a_read_that_needs_a_size_of_at_least_1_refuses_0_at_the_call(tmp_path):
    code = _SIZE_ZERO.format(path=str(tmp_path / "last.tlm"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 5, proc.stdout
    last = ("n must be at least 1: compute B reads A[n - 1], out of bounds when n = 0 "
            "(A has shape (n,))")
    assert lines[0].endswith(last) and lines[1].endswith(last), lines  # saved and loaded too
    assert lines[2].endswith("m must be at least 1: compute C reads M[n - 1, m - 1], out of "
                             "bounds when m = 0 (M has shape (n, m))"), lines[2]
    assert "n must be at least 1: compute C reads M[n - 1, m - 1]" in lines[3], lines[3]
    # a data-dependent index is checked when it runs, against the extent 0
    assert "index out of bounds in A[Ix[i]]: the index is not in [0, n)" in lines[4], lines[4]


def test_the_proof_says_which_sizes_a_read_needs_at_least_1():
    n, m = tl.var("n"), tl.var("m")
    A = tl.placeholder((n, m), name="A")
    first = tl.compute((1,), lambda i: A[n - 1, 0], name="first")
    # A[n - 1, 0] needs n >= 1 for dimension 0 and m >= 1 for dimension 1
    assert [a.needs for a in prove_op(first.op).accesses] == [(n,), (m,)]
    assert set(prove_op(first.op).needs) == {n, m}
    # reads inside loops over n are not made at n = 0: nothing needed, no check at the entry
    k = tl.reduce_axis((0, m), name="k")
    rows = tl.compute((n,), lambda i: tl.sum(A[n - 1 - i, k], axis=k), name="rows")
    assert prove_op(rows.op).needs == {}
    assert "checked(" not in str(_lower(rows, [A, rows]))
    assert "checked(n - 1, " in str(_lower(first, [A, first]))


def test_zero_size_elementwise_runs_without_any_check():
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="C")
    assert "checked(" not in str(_lower(C, [A, C]))
    f = _build(C, [A, C], vectorize=0)
    for size in (0, 1, 17):
        a, c = rand((size,)), np.full(size, 7.0, "float32")
        f(a, c)
        np.testing.assert_array_equal(c, a * 2 + 1)


@pytest.mark.parametrize("schedule", ["default", "rfactor"])
def test_a_reduction_over_an_empty_axis_gives_the_identity(schedule):
    m, n = tl.var("m"), tl.var("n")
    A = tl.placeholder((m, n), name="A")
    k = tl.reduce_axis((0, n), name="k")
    S = tl.compute((m,), lambda i: tl.sum(A[i, k], axis=k), name="S")
    prod = tl.comm_reducer(lambda x, y: x * y, lambda t: tl.const(1, t), name="prod")
    k2 = tl.reduce_axis((0, n), name="k2")
    P = tl.compute((m,), lambda i: prod(A[i, k2], axis=k2), name="P")
    built = []
    for out, red in ((S, k), (P, k2)):
        s = tl.create_schedule(out)
        if schedule == "rfactor":
            _, ki = s[out].split(red, factor=4)
            s.rfactor(out, ki)
        built.append(tl.build(s, [A, out]))
    for shape in ((3, 0), (0, 0), (0, 5), (3, 5)):
        a = rand(shape)
        got_s, got_p = np.full(shape[0], 9.0, "float32"), np.full(shape[0], 9.0, "float32")
        built[0](a, got_s)
        built[1](a, got_p)
        np.testing.assert_allclose(got_s, a.sum(axis=1), rtol=1e-5)
        np.testing.assert_allclose(got_p, a.prod(axis=1), rtol=1e-5)


def test_an_argument_of_negative_extent_is_refused_at_the_call():
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n - 2,), lambda i: A[i + 2] - A[i], name="C")
    f = _build(C, [A, C])
    for size in (1, 0):
        with pytest.raises(ValueError, match=rf"argument 'C' must have shape \(n - 2,\), got "
                                             rf"\(0,\): axis 0 is 0, expected n - 2 = "
                                             rf"{size - 2} with n={size}: a negative size, n "
                                             r"too small$"):
            f(rand((size,)), np.zeros(0, "float32"))
    for size in (2, 6):  # n - 2 = 0 is an empty output
        a, c = rand((size,)), np.zeros(size - 2, "float32")
        f(a, c)
        np.testing.assert_array_equal(c, a[2:] - a[:-2])


def test_an_intermediate_of_negative_extent_is_refused_at_the_kernel_entry():
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    T = tl.compute((n - 2,), lambda i: A[i + 2] * 2.0, name="T")
    Y = tl.compute((n,), lambda i: tl.if_then_else(i < n - 2, T[tl.min(i, n - 3)], 1.0),
                   name="Y")
    f = _build(Y, [A, Y])
    for size in (1, 0):
        with pytest.raises(tl.runtime.KernelError,
                           match=r"n must be at least 2: tensor T of shape \(n - 2,\) would "
                                 r"have a negative extent n - 2 \(axis 0\)"):
            f(rand((size,)), np.zeros(size, "float32"))
    for size in (2, 3, 9):
        a, y = rand((size,)), np.zeros(size, "float32")
        f(a, y)
        np.testing.assert_array_equal(y, np.concatenate([a[2:] * 2, np.ones(min(size, 2))]))


def test_a_negative_size_passed_by_keyword_is_refused():
    n = tl.var("n")
    A = tl.placeholder((n // 2 + 1,), name="A")
    C = tl.compute((n // 2 + 1,), lambda i: A[i] * 3.0, name="C")
    f = _build(C, [A, C])
    a, c = rand((4,)), np.zeros(4, "float32")
    f(a, c, n=7)
    np.testing.assert_array_equal(c, a * 3)
    with pytest.raises(tl.runtime.KernelError, match=r"n must be at least 0: it is a size"):
        f(np.zeros(0, "float32"), np.zeros(0, "float32"), n=-1)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_a_gather_check_names_the_access_as_written(dtype):
    # (lowering widens a narrower index to int64: the message shows the compute's index)
    from tensorlang.ir.checks import error_messages

    A = tl.placeholder((16, 8), name="A")
    Ix = tl.placeholder((4,), dtype=dtype, name="Ix")
    G = tl.compute((4, 8), lambda i, j: A[Ix[i], j], name="G")
    messages = error_messages(tl.lower(tl.create_schedule(G), [A, Ix, G]).body)
    assert "index out of bounds in A[Ix[i], j]: dimension 0's index is not in [0, 16)" in \
        messages.values(), messages
