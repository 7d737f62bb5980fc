"""TVM schedule and argument idioms, written as TVM users write them (issue 16): the op's axes
after cache_write / rfactor, intermediate stages listed as arguments, argument shapes that are
affine in shape variables, split by a symbolic factor. Every result is checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from tl_testing import assert_close, rand

import tensorlang as tl

# ----------------------------------------------------------------------------- cache_write axes


def test_opt_gemm_write_cache_step():
    """TVM's opt_gemm "write cache" step, verbatim but for te -> tl: C.op.axis tiles s[C] after
    the cache_write, and the cache is computed at the output's tile."""
    M = N = K = 64
    bn = 16
    k = tl.reduce_axis((0, K), "k")
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    packedB = tl.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = tl.compute((M, N), lambda x, y: tl.sum(A[x, k] * packedB[y // bn, k, y % bn], axis=k),
                   name="C")
    s = tl.create_schedule(C)
    CC = s.cache_write(C, "global")
    xo, yo, _xi, _yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    x, _y, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    s[C].parallel(xo)
    f = tl.build(s, [A, B, C], name="mmult")
    a, b = rand((M, K)), rand((K, N), seed=1)
    c = np.zeros((M, N), "float32")
    f(a, b, c)
    assert_close(c, a @ b)


def test_cache_write_old_axes_name_the_copy_stage_loops():
    A = tl.placeholder((32, 24), name="A")
    C = tl.compute((32, 24), lambda i, j: A[i, j] * 2.0, name="C")
    s = tl.create_schedule(C)
    s.cache_write(C, "local")
    i, j = C.op.axis
    xo, xi = s[C].split(i, factor=8)
    s[C].reorder(j, xo, xi)
    assert s[C].loop_names() == ["j", "i.outer", "i.inner"]
    a = rand((32, 24))
    c = np.zeros((32, 24), "float32")
    tl.build(s, [A, C])(a, c)
    assert_close(c, a * 2)
    # once split, the old axis stands for a loop that no longer exists
    with pytest.raises(tl.ScheduleError, match="loop i was already split"):
        s[C].split(i, factor=2)


def test_cache_write_old_reduce_axis_is_refused_naming_the_cache_stage():
    A = tl.placeholder((16, 16), name="A")
    k = tl.reduce_axis((0, 16), "k")
    C = tl.compute((16,), lambda i: tl.sum(A[i, k], axis=k), name="C")
    s = tl.create_schedule(C)
    s.cache_write(C, "local")
    with pytest.raises(tl.ScheduleError, match=r"loop k .*cache_write moved the reduction to "
                                               r"stage C\.local"):
        s[C].split(k, factor=4)


def test_cache_write_schedule_replays_by_name():
    def declare():
        A = tl.placeholder((32, 32), name="A")
        k = tl.reduce_axis((0, 32), "k")
        C = tl.compute((32, 32), lambda i, j: tl.sum(A[i, k] * A[k, j], axis=k), name="C")
        return A, C

    A, C = declare()
    s = tl.create_schedule(C)
    CC = s.cache_write(C, "local")
    _xo, yo, _xi, _yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[CC].compute_at(s[C], yo)
    A2, C2 = declare()
    s2 = tl.create_schedule(C2).apply_trace(s.trace.dumps())
    assert str(tl.lower(s2, [A2, C2])) == str(tl.lower(s, [A, C]))
    a = rand((32, 32))
    c = np.zeros((32, 32), "float32")
    tl.build(s2, [A2, C2])(a, c)
    assert_close(c, a @ a)


# ----------------------------------------------------------------------------- rfactor axes


def test_rfactor_old_spatial_axis_names_the_final_stage_loop():
    A = tl.placeholder((16, 64), name="A")
    k = tl.reduce_axis((0, 64), "k")
    C = tl.compute((16,), lambda i: tl.sum(A[i, k], axis=k), name="C")
    s = tl.create_schedule(C)
    _ko, ki = s[C].split(k, factor=8)
    CF = s.rfactor(C, ki)
    io, _ii = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(io)
    s[CF].compute_at(s[C], io)
    a = rand((16, 64))
    c = np.zeros(16, "float32")
    tl.build(s, [A, C])(a, c)
    assert_close(c, a.sum(axis=1))
    with pytest.raises(tl.ScheduleError, match=r"loop k .*rfactor moved the reduction over it "
                                               r"to stage C\.rf"):
        s[C].split(k, factor=2)
    with pytest.raises(tl.ScheduleError, match=r"loop k\.inner .*rfactor moved"):
        s[C].unroll(ki)


def test_rfactor_after_the_spatial_loops_were_split():
    """TVM's te test_rfactor splits the output axis before rfactor: the split, its parallel
    annotation and the user's loop handles carry over to the final stage (it was refused:
    'split the spatial loops after rfactor')."""
    A = tl.placeholder((37, 70), name="A")
    k = tl.reduce_axis((0, 70), "k")
    C = tl.compute((37,), lambda i: tl.sum(A[i, k], axis=k), name="C")
    s = tl.create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=8)
    s[C].parallel(io)
    _ko, ki = s[C].split(k, factor=16)
    CF = s.rfactor(C, ki)
    assert s[C].loop_names() == ["i.outer", "i.inner", "k.inner.v"]
    s[CF].compute_at(s[C], ii)
    a = rand((37, 70))
    c = np.zeros(37, "float32")
    tl.build(s, [A, C])(a, c)
    assert_close(c, a.sum(axis=1))
    t = tl.create_schedule(C)
    t.apply_trace(s.trace)
    assert "parallel for i.outer" in str(tl.lower(t, [A, C]))


def test_rfactor_of_a_data_dependent_where_with_a_tail():
    """The factored stage reads the where= condition's data only inside the split's tail
    guard: `guard && where` read A[i, 79] of a 70-wide row, and lowering refused it as out of
    bounds."""
    A = tl.placeholder((5, 70), name="A")
    k = tl.reduce_axis((0, 70), "k")
    C = tl.compute((5,), lambda i: tl.sum(A[i, k], axis=k, where=A[i, k] > 0.5), name="C")
    s = tl.create_schedule(C)
    _ko, ki = s[C].split(k, factor=16)
    CF = s.rfactor(C, ki)
    s[CF].parallel(CF.op.axis[0])
    a = rand((5, 70))
    c = np.zeros(5, "float32")
    tl.build(s, [A, C])(a, c)
    assert_close(c, np.where(a > 0.5, a, 0).sum(axis=1))


# ----------------------------------------------------------------------------- unused arguments


def test_producers_attached_before_the_stages_that_read_them():
    """TVM takes compute_at calls in any order: P attached to R's loop while only Q (still at
    the root) reads it, then Q; lowering checks the end state (P inside the loop Q runs in)."""
    A = tl.placeholder((8, 8), name="A")
    P = tl.compute((8, 8), lambda i, j: A[i, j] + 1, name="P")
    Q = tl.compute((8, 8), lambda i, j: P[i, j] * 2, name="Q")
    R = tl.compute((8, 8), lambda i, j: Q[i, j] - 1, name="R")
    s = tl.create_schedule(R)
    s[P].compute_at(s[R], R.op.axis[0])
    s[Q].compute_at(s[R], R.op.axis[1])
    a = rand((8, 8))
    r = np.zeros_like(a)
    tl.build(s, [A, R])(a, r)
    assert_close(r, (a + 1) * 2 - 1)
    s = tl.create_schedule(R)
    s[P].compute_at(s[R], R.op.axis[0])
    with pytest.raises(tl.ScheduleError, match="stage P is computed inside loop i of R, but "
                                               "stage Q also reads it and runs outside"):
        tl.lower(s, [A, R])


def test_stages_attached_before_cache_write_follow_the_replaced_loops():
    """P computed at B's row loop, then s.cache_write(B): P stays at that loop of the new B
    (it was left at a loop of the old op, refused as 'no longer a loop of it'); the cache stage
    that now reads P goes to the same loop."""
    A = tl.placeholder((8, 16), name="A")
    P = tl.compute((8, 16), lambda i, k: A[i, k] * 2, name="P")
    k = tl.reduce_axis((0, 16), name="k")
    B = tl.compute((8,), lambda i: tl.sum(P[i, k], axis=k), name="B")
    s = tl.create_schedule(B)
    s[P].compute_at(s[B], B.op.axis[0])
    BB = s.cache_write(B, "local")
    with pytest.raises(tl.ScheduleError, match="stage P is computed inside loop i of B, but "
                                               "stage B.local also reads it"):
        tl.lower(s, [A, B])
    s[BB].compute_at(s[B], B.op.axis[0])
    a = rand((8, 16))
    b = np.zeros(8, "float32")
    tl.build(s, [A, B])(a, b)
    assert_close(b, (a * 2).sum(1))


def test_stage_computed_at_another_is_an_unused_argument():
    """tvm.lower(s, [A, B, C]) with B computed at C's loop: B's array is left untouched."""
    A = tl.placeholder((16,), name="A")
    B = tl.compute((16,), lambda i: A[i] + 1, name="B")
    C = tl.compute((16,), lambda i: B[i] * 2, name="C")
    s = tl.create_schedule(C)
    xo, _xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    f = tl.build(s, [A, B, C])
    a = rand((16,))
    b = np.full(16, 7, "float32")
    b.flags.writeable = False  # never written: a read-only array is accepted
    c = np.zeros(16, "float32")
    f(a, b, c)
    assert_close(c, (a + 1) * 2)
    assert (b == 7).all()
    with pytest.raises(TypeError, match="argument 'B' must have dtype float32"):
        f(a, b.astype("float64"), c)


# ----------------------------------------------------------------------------- affine shapes


def _conv_reference(a, w):
    out = a.shape[0] - 2
    return sum(a[y:y + out, x:x + out] * w[y, x] for y in range(3) for x in range(3))


def test_reduction_tutorial_symbolic_conv():
    """TVM's reduction tutorial: a 2-D convolution over an n x n input, output (n-2, n-2)."""
    n = tl.var("n")
    Input = tl.placeholder((n, n), name="Input")
    Filter = tl.placeholder((3, 3), name="Filter")
    di = tl.reduce_axis((0, 3), name="di")
    dj = tl.reduce_axis((0, 3), name="dj")
    Output = tl.compute((n - 2, n - 2),
                        lambda i, j: tl.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
                        name="Output")
    s = tl.create_schedule(Output)
    f = tl.build(s, [Input, Filter, Output])
    w = rand((3, 3), seed=2)
    for size in (2, 3, 10, 17):
        a = rand((size, size))
        out = np.zeros((size - 2, size - 2), "float32")
        f(a, w, out)
        assert_close(out, _conv_reference(a, w))
    with pytest.raises(ValueError, match=r"argument 'Output' must have shape \(n - 2, n - 2\), "
                                         r"got \(8, 7\): axis 1 is 7, expected n - 2 = 8 with "
                                         r"n=10"):
        f(rand((10, 10)), w, np.zeros((8, 7), "float32"))
    # the output alone binds n (n - 2 is solved), and the input is checked against it
    with pytest.raises(ValueError, match=r"argument 'Input' has n=9 on axis 1"):
        f(np.zeros((10, 9), "float32"), w, np.zeros((8, 8), "float32"))
    with pytest.raises(ValueError, match=r"axis 0 is 7, expected n - 2 = 8 with n=10"):
        f(rand((10, 10)), w, np.zeros((7, 7), "float32"))


def test_scaled_dimension_binds_its_variable():
    """A (8 * m,) input summed in groups of 8 into a (m,) output, and scaled into an (8 * m,)
    one: m is bound by B's plain dimension, or solved from 8 * m when no array has one."""
    m = tl.var("m")
    A = tl.placeholder((8 * m,), name="A")
    r = tl.reduce_axis((0, 8), name="r")
    B = tl.compute((m,), lambda i: tl.sum(A[i * 8 + r], axis=r), name="B")
    Y = tl.compute((8 * m,), lambda i: A[i] * 2.0, name="Y")
    f = tl.build(tl.create_schedule([B, Y]), [A, B, Y])
    a = rand((24,))
    b, y = np.zeros(3, "float32"), np.zeros(24, "float32")
    f(a, b, y)
    assert_close(b, a.reshape(3, 8).sum(axis=1))
    assert_close(y, a * 2)
    with pytest.raises(ValueError, match=r"argument 'A' must have shape \(8 \* m,\), got "
                                         r"\(20,\): axis 0 is 20, expected 8 \* m = 16 with m=2"):
        f(rand((20,)), np.zeros(2, "float32"), np.zeros(20, "float32"))
    with pytest.raises(ValueError, match=r"argument 'Y' .* axis 0 is 16, expected 8 \* m = 24 "
                                         r"with m=3"):
        f(a, b, np.zeros(16, "float32"))
    g = tl.build(tl.create_schedule(Y), [A, Y])
    g(a, y)
    assert_close(y, a * 2)
    with pytest.raises(ValueError, match=r"argument 'A' must have shape \(8 \* m,\), got "
                                         r"\(20,\): axis 0 is 20, expected 8 \* m for an "
                                         r"integer m \(none gives 20\)"):
        g(rand((20,)), np.zeros(20, "float32"))


def test_floor_division_dimension_checked_and_keyword_when_unsolvable():
    n = tl.var("n")
    A = tl.placeholder((n // 2 + 1,), name="A")
    B = tl.compute((n // 2 + 1,), lambda i: A[i] + 1.0, name="B")
    f = tl.build(tl.create_schedule(B), [A, B])
    a = rand((4,))
    b = np.zeros(4, "float32")
    # n // 2 + 1 = 4 holds for n = 6 and n = 7: n is not determined by the arrays
    with pytest.raises(TypeError, match="cannot determine n from the array shapes"):
        f(a, b)
    f(a, b, n=7)
    assert_close(b, a + 1)
    with pytest.raises(ValueError, match=r"axis 0 is 4, expected n // 2 \+ 1 = 5 with n=8"):
        f(a, b, n=8)


def test_affine_shape_module_saves_and_loads(tmp_path):
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n - 1,), lambda i: A[i + 1] - A[i], name="B")
    f = tl.build(tl.create_schedule(B), [A, B], name="diff")
    assert [a["shape"] for a in f._manifest["args"]] == [["n"], ["n - 1"]]
    f.save(str(tmp_path / "diff.tlm"))
    g = tl.runtime.load_module(str(tmp_path / "diff.tlm"))
    a = rand((9,))
    b = np.zeros(8, "float32")
    g(a, b)
    assert_close(b, np.diff(a))
    with pytest.raises(ValueError, match=r"expected n - 1 = 8 with n=9"):
        g(a, np.zeros(9, "float32"))


@pytest.mark.parametrize("dim", ["__import__('os')", "n ** 2", "n.real", "q + 1", "1.5 * n",
                                 "f(n)", "n if n else 1", ""])
def test_manifest_dimension_expressions_are_parsed_not_evaluated(dim):
    manifest = {"name": "k", "symbol": "k", "vars": ["n"],
                "args": [{"name": "A", "shape": [dim], "dtype": "float32"}]}
    with pytest.raises(ValueError, match="invalid kernel manifest: argument 'A': dimension"):
        tl.runtime.Module(b"not an object", manifest)


def test_affine_shapes_keep_the_bounds_proof():
    n = tl.var("n")
    A = tl.placeholder((n - 2,), name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
    with pytest.raises(tl.LoweringError, match="reads A\\[i\\] out of bounds"):
        tl.lower(tl.create_schedule(B), [A, B])
    # a gather isl cannot express is checked when the kernel runs
    Ix = tl.placeholder((n - 2,), name="Ix", dtype="int32")
    G = tl.compute((n - 2,), lambda i: A[Ix[i]] + 1.0, name="G")
    f = tl.build(tl.create_schedule(G), [A, Ix, G])
    a = rand((5,))
    g = np.zeros(5, "float32")
    f(a, np.array([4, 0, 1, 2, 3], "int32"), g)
    assert_close(g, a[[4, 0, 1, 2, 3]] + 1)
    with pytest.raises(tl.runtime.KernelError, match="index out of bounds"):
        f(a, np.array([5, 0, 1, 2, 3], "int32"), g)


# ----------------------------------------------------------------------------- symbolic split


def test_split_by_a_variable_passed_as_an_argument():
    n, f = tl.var("n"), tl.var("f")
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = tl.create_schedule(B)
    xo, _xi = s[B].split(B.op.axis[0], factor=f)
    s[B].parallel(xo)
    g = tl.build(s, [A, B, f])
    for size, factor in ((10, 1), (10, 3), (10, 10), (10, 16), (1, 4), (33, 8)):
        a = rand((size,), seed=size + factor)
        b = np.zeros(size, "float32")
        g(a, b, f=factor)
        assert_close(b, a * 2)
    b = np.full(10, 7, "float32")
    with pytest.raises(tl.runtime.KernelError, match="split factor f must be >= 1"):
        g(rand((10,)), b, f=0)
    assert (b == 7).all()  # refused before any iteration
    with pytest.raises(tl.runtime.KernelError, match="split factor f must be >= 1"):
        g(rand((10,)), b, f=-3)
    with pytest.raises(TypeError, match="cannot determine f from the array shapes"):
        g(rand((10,)), b)
    with pytest.raises(ValueError, match="stage B is split by f, which is neither a shape "
                                         "variable of the kernel's arguments nor one of them"):
        tl.lower(s, [A, B])


def test_split_by_nparts_variable_and_by_a_shape_variable():
    n, p = tl.var("n"), tl.var("p")
    A = tl.placeholder((n, 6), name="A")
    B = tl.compute((n, 6), lambda i, j: A[i, j] + 1.0, name="B")
    s = tl.create_schedule(B)
    o, _i = s[B].split(B.op.axis[0], nparts=p)
    s[B].parallel(o)
    _jo, _ji = s[B].split(B.op.axis[1], factor=n)  # a shape variable as the factor
    g = tl.build(s, [A, B, p])
    for size, parts in ((10, 3), (1, 4), (17, 17), (5, 1), (4, 9)):
        a = rand((size, 6), seed=size)
        b = np.zeros((size, 6), "float32")
        g(a, b, p=parts)
        assert_close(b, a + 1)


def test_symbolic_split_schedule_replays_by_variable_name():
    def declare():
        n = tl.var("n")
        A = tl.placeholder((n, 4), name="A")
        return n, A, tl.compute((n, 4), lambda i, j: A[i, j] * 3.0, name="B")

    n, A, B = declare()
    s = tl.create_schedule(B)
    s[B].split(B.op.axis[0], factor=n)
    assert s.trace.to_json()[0]["args"]["factor"] == {"var": "n"}
    _n2, A2, B2 = declare()
    s2 = tl.create_schedule(B2).apply_trace(s.trace.dumps())
    assert str(tl.lower(s2, [A2, B2])) == str(tl.lower(s, [A, B]))
    # a variable that only an argument list names cannot be found again by a record
    f = tl.var("f")
    s3 = tl.create_schedule(B)
    s3[B].split(B.op.axis[1], factor=f)
    with pytest.raises(tl.ScheduleError, match="split factor 'f' is not a shape variable"):
        tl.create_schedule(B2).apply_trace(s3.trace.dumps())


def test_symbolic_split_legality_stays_sound():
    """The loops of a split by f are opaque functions of the split axis to the dependence
    analysis (isl cannot express i = io * f + ii for unknown f): what they may break is still
    refused with the dependence named; what is legal for every f builds and matches numpy."""
    M = 24
    f = tl.var("f")
    A = tl.placeholder((M, M), name="A")
    k = tl.reduce_axis((0, M), name="k")
    C = tl.compute((M, M), lambda i, j: tl.sum(A[i, k] * A[k, j], axis=k), name="C")
    s = tl.create_schedule(C)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=f)
    ko, ki = s[C].split(k, factor=f)
    with pytest.raises(tl.ScheduleError, match=r"parallel on stage C: loop k\.outer .*carries "
                                               r"a dependence: C\[i, j, k\] -> C\[i, j, k \+ 1\]"):
        s[C].parallel(ko)
    s[C].reorder(io, ko, ii, j, ki)
    s[C].parallel(io)
    g = tl.build(s, [A, C, f])
    a = rand((M, M))
    for factor in (1, 5, 24, 30):
        c = np.zeros((M, M), "float32")
        g(a, c, f=factor)
        assert_close(c, a @ a)


def test_compute_at_a_symbolic_split_loop():
    """A producer computed at the outer loop of a split by f: its region (f + 1 values of a
    3-point stencil's input) is sized at run time."""
    M = 24
    f = tl.var("f")
    A = tl.placeholder((M + 2,), name="A")
    P = tl.compute((M + 2,), lambda i: A[i] + 1.0, name="P")
    C = tl.compute((M,), lambda i: P[i] + P[i + 1] + P[i + 2], name="C")
    s = tl.create_schedule(C)
    xo, _xi = s[C].split(C.op.axis[0], factor=f)
    s[P].compute_at(s[C], xo)
    g = tl.build(s, [A, C, f])
    a = rand((M + 2,))
    p = a + 1
    for factor in (1, 5, 7, 24, 40):
        c = np.zeros(M, "float32")
        g(a, c, f=factor)
        assert_close(c, p[:-2] + p[1:-1] + p[2:])


def test_symbolic_split_argument_errors():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = tl.create_schedule(B)
    f = tl.var("f")
    with pytest.raises(TypeError, match=r"factor/nparts must be an int, got FloorDiv .* \(or "
                                        r"a tl\.var for a symbolic one\)"):
        s[B].split(B.op.axis[0], factor=f // 2)
    _xo, xi = s[B].split(B.op.axis[0], factor=f)
    s[B].unroll(xi)
    with pytest.raises(tl.LoweringError, match="unroll: loop i.inner has a non-constant extent"):
        tl.lower(s, [A, B, f])
