"""Misuse gets a clear error naming the stage and loops: tl.ScheduleError for a refused schedule
primitive, TypeError / ValueError for bad arguments (declarations, build, calls). A refused
primitive leaves the schedule as it was."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl


@pytest.fixture
def two_outputs():
    A = tl.placeholder((8, 8), name="A")
    B = tl.compute((8, 8), lambda i, j: A[i, j] + 1, name="B")
    C = tl.compute((8, 8), lambda i, j: B[i, j] * 2, name="C")
    D = tl.compute((8, 8), lambda p, q: A[p, q] * 3, name="D")
    return A, B, C, D, tl.create_schedule([C, D])


@pytest.fixture
def reduction():
    A = tl.placeholder((8, 8), name="A")
    k = tl.reduce_axis((0, 8), name="k")
    R = tl.compute((8,), lambda i: tl.sum(A[i, k], axis=k), name="R")
    return A, k, R, tl.create_schedule(R)


# ----------------------------------------------------------------------------- schedule misuse

def test_loop_not_in_stage(two_outputs):
    _A, _B, C, D, s = two_outputs
    with pytest.raises(tl.ScheduleError, match=r"split on stage C: loop p is not a loop of this "
                                               r"stage; its loops are \['i', 'j'\]"):
        s[C].split(D.op.axis[0], factor=2)


def test_loop_already_split(two_outputs):
    _A, _B, C, _D, s = two_outputs
    i, j = C.op.axis
    s[C].split(i, factor=2)
    with pytest.raises(tl.ScheduleError, match="loop i was already split or fused"):
        s[C].reorder(j, i)


def test_axis_after_cache_write_names_the_copy_loop(two_outputs):
    """As in TVM, C.op.axis (the op before cache_write) names s[C]'s loops afterwards (issue
    16); an axis split since is refused as any split loop is."""
    _A, _B, C, _D, s = two_outputs
    s.cache_write(C, "local")
    s[C].split(C.op.axis[0], factor=2)
    assert s[C].loop_names()[:2] == ["i.outer", "i.inner"]
    with pytest.raises(tl.ScheduleError, match="loop i was already split"):
        s[C].split(C.op.axis[0], factor=2)


def test_reorder_with_repeated_loop(two_outputs):
    _A, _B, C, _D, s = two_outputs
    i, j = C.op.axis
    with pytest.raises(tl.ScheduleError, match=r"reorder on stage C: loop repeated in \['i', "
                                               r"'j', 'i'\]"):
        s[C].reorder(i, j, i)


def test_fuse_non_adjacent_and_out_of_order(two_outputs):
    _A, _B, C, _D, s = two_outputs
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=2)
    with pytest.raises(tl.ScheduleError, match=r"fuse on stage C: loops \['i.outer', 'j'\] are "
                                               "not adjacent"):
        s[C].fuse(io, j)
    with pytest.raises(tl.ScheduleError, match="not adjacent and in order"):
        s[C].fuse(ii, io)
    assert s[C].fuse(io) is io  # as TVM: the fusion of one loop is the loop
    with pytest.raises(ValueError, match="no loops given"):
        s[C].fuse()


def test_fuse_reduce_with_spatial(reduction):
    _A, k, R, s = reduction
    with pytest.raises(tl.ScheduleError, match="cannot fuse a reduce loop with a spatial loop"):
        s[R].fuse(R.op.axis[0], k)


def test_vectorize_non_innermost(two_outputs):
    _A, _B, C, _D, s = two_outputs
    i, _j = C.op.axis
    with pytest.raises(tl.ScheduleError, match=r"vectorize on stage C: loop i is not the "
                                               "innermost loop"):
        s[C].vectorize(i)


def test_conflicting_annotations(two_outputs):
    _A, _B, C, _D, s = two_outputs
    _i, j = C.op.axis
    s[C].unroll(j)
    with pytest.raises(tl.ScheduleError, match="loop j is already marked unroll"):
        s[C].vectorize(j)


def test_parallel_reduce_loop_refused(reduction):
    _A, k, R, s = reduction
    with pytest.raises(tl.ScheduleError, match="parallel on stage R: loop k is a reduce loop"):
        s[R].parallel(k)
    assert s[R].iter_attrs == {}


def test_compute_at_into_a_stage_that_does_not_consume_it(two_outputs):
    # accepted at the step (TVM attaches in any order: a stage attached later may read it
    # there); lowering refuses the end state, naming the reader left outside the loop
    A, B, C, D, s = two_outputs
    s[B].compute_at(s[D], D.op.axis[0])
    with pytest.raises(tl.ScheduleError, match="stage B is computed inside loop p of D, but "
                                               "stage C also reads it and runs outside"):
        tl.lower(s, [A, C, D])


def test_compute_at_loop_of_other_stage(two_outputs):
    _A, B, C, D, s = two_outputs
    with pytest.raises(tl.ScheduleError, match=r"compute_at\(B\) on stage C: loop p is not a "
                                               "loop of this stage"):
        s[B].compute_at(s[C], D.op.axis[0])


def test_compute_at_of_outputs_self_and_non_stage(two_outputs):
    _A, B, C, D, s = two_outputs
    with pytest.raises(tl.ScheduleError, match="an output stage must stay at the root"):
        s[D].compute_at(s[C], C.op.axis[0])
    with pytest.raises(tl.ScheduleError, match="at its own loop"):
        s[B].compute_at(s[B], B.op.axis[0])
    with pytest.raises(TypeError, match=r"parent must be a stage \(s\[T\]\), got Tensor"):
        s[B].compute_at(C, C.op.axis[0])


def test_compute_at_then_host_loop_fuse_is_refused(two_outputs):
    _A, B, C, _D, s = two_outputs
    i, j = C.op.axis
    s[B].compute_at(s[C], i)
    # a split would move B to the inner loop (TVM's rule); a fuse of its loop with an inner
    # one leaves no loop that runs it as often
    with pytest.raises(tl.ScheduleError, match="stage B is computed at loop i of C, which is no "
                                               "longer a loop of it"):
        s[C].fuse(i, j)
    # the refused fuse was undone: the loops and the trace are as before
    assert s[C].loop_names() == ["i", "j"]
    assert [st.kind for st in s.trace] == ["compute_at"]


def test_compute_at_with_a_reader_outside_the_loop():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] + 1, name="B")
    C = tl.compute((8,), lambda i: B[i] * 2, name="C")
    D = tl.compute((8,), lambda i: B[i] * 3, name="D")
    s = tl.create_schedule([C, D])
    s[B].compute_at(s[C], C.op.axis[0])  # a later primitive could still repair it
    with pytest.raises(tl.ScheduleError, match="stage D also reads it and runs outside that "
                                               "loop"):
        tl.lower(s, [A, C, D])


@pytest.mark.parametrize("kwargs,exc,msg", [
    ({"factor": 0}, ValueError, "must be positive, got 0"),
    ({"nparts": -2}, ValueError, "must be positive, got -2"),
    ({"factor": 2.0}, TypeError, "must be an int, got float"),
    ({"factor": True}, TypeError, "must be an int, got bool"),
    ({"factor": 2, "nparts": 2}, ValueError, "exactly one of factor= or nparts="),
    ({}, ValueError, "exactly one of factor= or nparts="),
])
def test_split_bad_factor(two_outputs, kwargs, exc, msg):
    _A, _B, C, _D, s = two_outputs
    with pytest.raises(exc, match=msg):
        s[C].split(C.op.axis[0], **kwargs)
    assert s.trace == []


def test_split_of_non_loop(two_outputs):
    _A, _B, C, _D, s = two_outputs
    with pytest.raises(TypeError, match="expected a loop"):
        s[C].split("i", factor=2)


def test_cache_write_after_transforms(two_outputs):
    _A, _B, C, _D, s = two_outputs
    s[C].split(C.op.axis[0], factor=2)
    with pytest.raises(tl.ScheduleError, match="cache_write on stage C: the stage was already "
                                               "transformed"):
        s.cache_write(C, "local")


def test_cache_read_by_non_reader(two_outputs):
    A, B, C, _D, s = two_outputs
    with pytest.raises(tl.ScheduleError, match="stage C does not read A"):
        s.cache_read(A, "local", [C])
    with pytest.raises(TypeError, match="scope must be a string"):
        s.cache_read(A, 3, [B])


def test_inline_misuse(two_outputs, reduction):
    _A, _B, C, _D, s = two_outputs
    with pytest.raises(tl.ScheduleError, match="compute_inline on stage C: an output cannot be "
                                               "inlined"):
        s[C].compute_inline()
    _A2, _k, R, _s2 = reduction
    X = tl.compute((8,), lambda i: R[i] + 1, name="X")
    s3 = tl.create_schedule(X)
    with pytest.raises(tl.ScheduleError, match="a reduction cannot be inlined"):
        s3[R].compute_inline()


def test_rfactor_misuse(reduction):
    _A, k, R, s = reduction
    with pytest.raises(tl.ScheduleError, match="rfactor on stage R: loop i is not a reduce loop"):
        s.rfactor(R, R.op.axis[0])
    _ko, ki = s[R].split(k, factor=2)
    with pytest.raises(ValueError, match="factor_index must be in"):
        s.rfactor(R, ki, factor_index=5)


def test_placeholder_has_no_stage(two_outputs):
    A, _B, _C, _D, s = two_outputs
    with pytest.raises(tl.ScheduleError, match="A is a placeholder"):
        s[A]
    with pytest.raises(ValueError, match="is a placeholder, not a compute"):
        tl.create_schedule(A)


def test_pragma_misuse(two_outputs):
    _A, _B, C, _D, s = two_outputs
    with pytest.raises(ValueError, match="unknown pragma 'foo'"):
        s[C].pragma(C.op.axis[0], "foo", 1)
    with pytest.raises(ValueError, match="needs a non-negative int"):
        s[C].pragma(C.op.axis[0], "auto_unroll_max_step", -1)


def test_unroll_of_symbolic_extent_fails_at_lowering():
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n,), lambda i: A[i] + 1, name="B")
    s = tl.create_schedule(B)
    s[B].unroll(B.op.axis[0])
    with pytest.raises(tl.LoweringError, match="non-constant extent"):
        tl.lower(s, [A, B])


def test_errors_derive_from_tensorlang_error():
    assert issubclass(tl.ScheduleError, tl.TensorlangError)
    assert issubclass(tl.LoweringError, tl.TensorlangError)


# ----------------------------------------------------------------------------- declarations

def test_declaration_errors():
    A = tl.placeholder((8, 8), name="A")
    k = tl.reduce_axis((0, 8), name="k")
    with pytest.raises(ValueError, match="must be the whole body of a compute"):
        tl.compute((8,), lambda i: tl.sum(A[i, k], axis=k) + 1, name="X")
    with pytest.raises(ValueError, match="tensor A has 2 dimensions, indexed with 1"):
        tl.compute((8,), lambda i: A[i])
    with pytest.raises(ValueError, match="tensor A has 2 dimensions, indexed with 1"):
        tl.compute((8,), lambda i: A[i] * 2)
    with pytest.raises(ValueError, match="tensor A has 2 dimensions, indexed with 3"):
        A[1][2, 3]
    with pytest.raises(ValueError, match="takes 1 index arguments but the shape has 2"):
        tl.compute((8, 8), lambda i: A[i, i])
    with pytest.raises(TypeError, match="sum: axis must be reduce axes"):
        tl.compute((8,), lambda i: tl.sum(A[i, 0], axis=i))
    with pytest.raises(ValueError, match="must be positive, got -1"):
        tl.placeholder((-1,))
    with pytest.raises(TypeError, match="must be a whole number, got float 2.5"):
        tl.placeholder((2.5,))
    with pytest.raises(TypeError, match="must be an int or a tl.var, got str"):
        tl.placeholder(("8",))
    with pytest.raises(TypeError, match="unknown dtype 'complex64'"):
        tl.placeholder((2,), dtype="complex64")
    with pytest.raises(ValueError, match="empty range"):
        tl.reduce_axis((4, 4))
    with pytest.raises(TypeError, match="tl.exp needs a float argument, got int32"):
        tl.exp(tl.placeholder((2,), "int32")[0])
    with pytest.raises(TypeError, match="condition must be boolean"):
        tl.if_then_else(A[0, 0], 1.0, 2.0)
    with pytest.raises(TypeError, match="dtype must be an integer type"):
        tl.size_var("n", "float32")
    with pytest.raises(TypeError, match="dtype must be an integer type or one of float16"):
        tl.var("n", "bool")


# ----------------------------------------------------------------------------- build and calls

@pytest.fixture(scope="module")
def kernel():
    A = tl.placeholder((4, 6), name="A")
    B = tl.compute((4, 6), lambda i, j: A[i, j] * 3, name="B")
    return A, B, tl.build(tl.create_schedule(B), [A, B], name="triple")


def _arrays():
    return np.ones((4, 6), "float32"), np.zeros((4, 6), "float32")


def test_call_ok(kernel):
    a, b = _arrays()
    kernel[2](a, b)
    np.testing.assert_array_equal(b, 3 * a)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_call_wrong_count(kernel, n):
    a, b = _arrays()
    with pytest.raises(TypeError, match=rf"triple\(\) takes 2 array arguments .*got {n}"):
        kernel[2](*([a, b, b][:n]))


def test_call_wrong_dtype(kernel):
    a, b = _arrays()
    with pytest.raises(TypeError, match="argument 'A' must have dtype float32, got float64"):
        kernel[2](a.astype("float64"), b)


@pytest.mark.parametrize("shape", [(4, 7), (24,), (4, 6, 1)])
def test_call_wrong_shape(kernel, shape):
    a, _b = _arrays()
    with pytest.raises(ValueError, match=r"argument 'B' must have shape \(4, 6\)"):
        kernel[2](a, np.zeros(shape, "float32"))


def test_call_non_contiguous(kernel):
    a, b = _arrays()
    with pytest.raises(ValueError, match="argument 'A' must be C-contiguous"):
        kernel[2](np.ones((4, 12), "float32")[:, ::2], b)
    with pytest.raises(ValueError, match="argument 'B' must be C-contiguous"):
        kernel[2](a, np.asfortranarray(b))


def test_call_read_only_output(kernel):
    a, b = _arrays()
    b.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'B' is written by the kernel but the array "
                                         "is read-only"):
        kernel[2](a, b)
    a.flags.writeable = False  # a read-only input is fine
    kernel[2](a, np.zeros((4, 6), "float32"))


def test_call_not_an_array_and_aliasing(kernel):
    a, b = _arrays()
    with pytest.raises(TypeError, match="argument 'A' must be a numpy.ndarray"):
        kernel[2](a.tolist(), b)
    with pytest.raises(ValueError, match="output 'B' overlaps argument 'A'"):
        kernel[2](a, a)


def test_build_and_lower_argument_errors(kernel):
    A, B, _ = kernel
    s = tl.create_schedule(B)
    with pytest.raises(TypeError, match="give the kernel's argument tensors"):
        tl.build(s)
    with pytest.raises(ValueError, match="output B is missing from the argument list"):
        tl.build(s, [A])
    with pytest.raises(ValueError, match="input A is read but missing"):
        tl.build(s, [B])
    with pytest.raises(ValueError, match="tensor A appears twice"):
        tl.build(s, [A, B, A])
    with pytest.raises(ValueError, match="kernel name must be an identifier"):
        tl.lower(s, [A, B], name="a b")
    with pytest.raises(TypeError, match="expected a Schedule"):
        tl.build("not a schedule", [A, B])
    other = tl.placeholder((4, 6), name="O")
    with pytest.raises(ValueError, match="argument O is not part of this schedule"):
        tl.build(s, [A, B, other])


def test_inlined_intermediate_argument_is_unused_but_checked():
    """As in TVM, an inlined stage listed as an argument is an unused argument: its array is
    left untouched, and its shape is still checked at the call."""
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] + 1, name="B")
    C = tl.compute((8,), lambda i: B[i] * 2, name="C")
    s = tl.create_schedule(C)
    s[B].compute_inline()
    f = tl.build(s, [A, B, C])
    a, b, c = np.arange(8, dtype="float32"), np.full(8, 7, "float32"), np.zeros(8, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, (a + 1) * 2)
    np.testing.assert_array_equal(b, np.full(8, 7, "float32"))
    with pytest.raises(ValueError, match="argument 'B' must have shape"):
        f(a, np.zeros(3, "float32"), c)
