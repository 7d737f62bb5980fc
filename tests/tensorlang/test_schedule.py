"""Schedule primitives: the loops they produce, where they put things in the lowered IR, and the
numbers the kernels compute (against numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from tl_testing import assert_close, build_run, rand

import tensorlang as tl


def _matmul(M=6, N=10, K=9):
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, k, rand((M, K)), rand((K, N), seed=1)


@pytest.mark.parametrize("order", ["k,i,j", "ko,i,ki,j", "i,ko,j,ki", "ko,ki,j,i"])
def test_reduction_init_placement_for_any_loop_order(order):
    """The accumulator init runs once per output element, before the first reduce loop, over the
    spatial loops nested inside that loop, whatever the order."""
    A, B, C, k, a, b = _matmul()
    s = tl.create_schedule(C)
    i, j = C.op.axis
    ko, ki = s[C].split(k, factor=4)  # 9 = 4 * 3 - 3: the reduce split has a tail too
    loops = {"i": i, "j": j, "k": k, "ko": ko, "ki": ki}
    if order == "k,i,j":
        s = tl.create_schedule(C)
    s[C].reorder(*[loops[x] for x in order.split(",")])
    text = str(tl.lower(s, [A, B, C]))
    (c,) = build_run(s, [A, B], [C], [a, b], name="init_" + order.replace(",", "_"))
    assert_close(c, a @ b)
    lines = text.splitlines()
    init = next(n for n, ln in enumerate(lines) if "= 0.0f" in ln)
    first_reduce = next(n for n, ln in enumerate(lines) if ln.strip().startswith("for k"))
    assert init < first_reduce
    # the init line is not inside any reduce loop: every loop above it at a smaller indentation
    # is spatial
    depth = len(lines[init]) - len(lines[init].lstrip())
    for ln in lines[:init]:
        d = len(ln) - len(ln.lstrip())
        if d < depth and ln.strip().startswith(("for", "parallel for")):
            assert " k" not in ln.split(" in ")[0]


def test_reduce_outermost_ir_text():
    A, B, C, k, a, b = _matmul(4, 4, 4)
    s = tl.create_schedule(C)
    s[C].reorder(k, *C.op.axis)
    assert str(tl.lower(s, [A, B, C], name="mm")).splitlines()[1:5] == [
        "  for i in range(4):",
        "    for j in range(4):",
        "      C[i * 4 + j] = 0.0f",
        "  for k in range(4):",
    ]
    (c,) = build_run(s, [A, B], [C], [a, b], name="mm_kouter")
    assert_close(c, a @ b)


def test_split_names_extents_and_nparts():
    A = tl.placeholder((10, 6), name="A")
    B = tl.compute((10, 6), lambda i, j: A[i, j] * 2, name="B")
    s = tl.create_schedule(B)
    i, j = B.op.axis
    _io, _ii = s[B].split(i, factor=4)
    _jo, _ji = s[B].split(j, nparts=4)
    assert s[B].loop_names() == ["i.outer", "i.inner", "j.outer", "j.inner"]
    text = str(tl.lower(s, [A, B]))
    # 4 parts of ceil(6 / 4) = 2: the 4th holds no element, and loop partitioning drops it
    assert "for j.outer in range(3)" in text and "for j.inner in range(2)" in text
    assert "for j.outer in range(4)" in str(tl.lower(s, [A, B], skip=("loop_partition",)))
    (out,) = build_run(s, [A], [B], [rand((10, 6))], name="split_np")
    assert_close(out, rand((10, 6)) * 2)


def test_fuse_then_split_then_vectorize_and_parallel():
    A = tl.placeholder((5, 7, 3), name="A")
    B = tl.compute((5, 7, 3), lambda x, y, z: A[x, y, z] + x, name="B")
    s = tl.create_schedule(B)
    f = s[B].fuse(*B.op.axis)
    assert f.name == "x.y.fused.z.fused" and s[B].loop_names() == [f.name]
    fo, fi = s[B].split(f, factor=16)
    s[B].vectorize(fi)
    s[B].parallel(fo)
    text = str(tl.lower(s, [A, B]))
    assert "parallel for" in text and "ramp(" in text
    a = rand((5, 7, 3))
    (out,) = build_run(s, [A], [B], [a], name="fuse_split")
    assert_close(out, a + np.arange(5)[:, None, None])


def test_compute_root_undoes_compute_at_and_inline():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] + 1, name="B")
    C = tl.compute((8,), lambda i: B[i] * 2, name="C")
    s = tl.create_schedule(C)
    default = str(tl.lower(s, [A, C]))
    s[B].compute_at(s[C], C.op.axis[0])
    assert str(tl.lower(s, [A, C])) != default
    s[B].compute_root()
    assert str(tl.lower(s, [A, C])) == default
    s[B].compute_inline()
    assert "allocate" not in str(tl.lower(s, [A, C]))
    s[B].compute_root()
    assert str(tl.lower(s, [A, C])) == default


def test_compute_at_region_is_what_one_iteration_needs():
    """A 3-point stencil producer computed per tile of 4 outputs holds 6 elements."""
    A = tl.placeholder((18,), name="A")
    B = tl.compute((18,), lambda i: A[i] * 3, name="B")
    C = tl.compute((16,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = tl.create_schedule(C)
    o, _ = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], o)
    text = str(tl.lower(s, [A, C]))
    assert "allocate B: float32[6] (stack)" in text
    a = rand((18,))
    (c,) = build_run(s, [A], [C], [a], name="stencil")
    assert_close(c, 3 * (a[:-2] + a[1:-1] + a[2:]))


def test_cache_read_copy_computed_at_reader():
    A, B, C, _k, a, b = _matmul()
    s = tl.create_schedule(C)
    BL = s.cache_read(B, "local", [C])
    assert BL.name == "B.local" and s[BL].name == "B.local"
    s[BL].compute_at(s[C], C.op.axis[0])
    text = str(tl.lower(s, [A, B, C]))
    assert "allocate B.local" in text
    (c,) = build_run(s, [A, B], [C], [a, b], name="cache_read")
    assert_close(c, a @ b)


def test_cache_write_stage_names_and_result():
    A, B, C, _k, a, b = _matmul()
    s = tl.create_schedule(C)
    CL = s.cache_write(C, "local")
    assert [st.name for st in s.stages] == ["C.local", "C"]
    assert s[CL].op.reduce_axis and not s[C].op.reduce_axis
    (c,) = build_run(s, [A, B], [C], [a, b], name="cache_write")
    assert_close(c, a @ b)


@pytest.mark.parametrize("factor_index", [0, 1])
def test_rfactor_with_factor_index_and_vectorized_partials(factor_index):
    M, K = 5, 64
    A = tl.placeholder((M, K), name="A")
    k = tl.reduce_axis((0, K), name="k")
    R = tl.compute((M,), lambda i: tl.sum(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R)
    _ko, ki = s[R].split(k, factor=16)
    RF = s.rfactor(R, ki, factor_index=factor_index)
    assert s[RF].op.axis[factor_index].var.name == "k.inner"
    if factor_index == 1:  # partial sums of a row are contiguous: vectorize them
        s[RF].reorder(s[RF].op.axis[0], s[RF].op.reduce_axis[0], s[RF].op.axis[1])
        s[RF].vectorize(s[RF].op.axis[1])
    a = rand((M, K))
    (r,) = build_run(s, [A], [R], [a], name=f"rfactor_{factor_index}")
    assert_close(r, a.sum(1))


def test_rfactor_of_the_whole_reduce_axis():
    A = tl.placeholder((4, 6), name="A")
    k = tl.reduce_axis((0, 6), name="k")
    R = tl.compute((4,), lambda i: tl.max(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R)
    RF = s.rfactor(R, k)
    assert s[RF].op.reduce_axis == ()
    a = rand((4, 6))
    (r,) = build_run(s, [A], [R], [a], name="rfactor_whole")
    assert_close(r, a.max(1))


def test_pragma_auto_unroll():
    A = tl.placeholder((4, 3), name="A")
    B = tl.compute((4, 3), lambda i, j: A[i, j] * 2, name="B")
    s = tl.create_schedule(B)
    s[B].pragma(B.op.axis[0], "auto_unroll_max_step", 3)
    text = str(tl.lower(s, [A, B]))
    assert "for j" not in text and "for i in range(4)" in text
    assert text.count("B[") == 3
    a = rand((4, 3))
    (out,) = build_run(s, [A], [B], [a], name="auto_unroll")
    assert_close(out, a * 2)


def test_pragma_auto_unroll_counts_a_loops_whole_trip_count():
    """A loop is unrolled when its extent times its body's steps is within the limit: an inner
    loop of 1024 under a limit of 64 stays a loop (it was unrolled whole, judged by its body's
    one step alone, and the vectorized reduction's 4096 unrolled statements then overflowed
    Python's recursion in the build)."""
    X = tl.placeholder((64, 1024), name="X")
    k = tl.reduce_axis((0, 1024), name="k")
    Y = tl.compute((64,), lambda i: tl.sum(X[i, k], axis=k), name="Y")
    s = tl.create_schedule(Y)
    io, ii = s[Y].split(Y.op.axis[0], factor=4)
    s[Y].reorder(io, k, ii)
    s[Y].vectorize(ii)
    s[Y].pragma(io, "auto_unroll_max_step", 64)
    assert "for k in range(1024)" in str(tl.lower(s, [X, Y]))
    x = rand((64, 1024))
    (y,) = build_run(s, [X], [Y], [x], name="auto_unroll_whole_trip")
    assert_close(y, x.sum(1))


@pytest.mark.parametrize("parallel", [False, True])
def test_pragma_nontemporal_streams_output_stores(parallel):
    """The output's vector stores bypass the caches where the address is aligned to the vector
    (an ordinary store otherwise), with a store fence after the loop (per task when parallel);
    the result is the same for an aligned and a misaligned output array."""
    A = tl.placeholder((8, 64), name="A")
    B = tl.compute((8, 64), lambda i, j: A[i, j] * 2 + 1, name="B")
    s = tl.create_schedule(B)
    i, j = B.op.axis
    s[B].vectorize(s[B].split(j, factor=16)[1])
    if parallel:
        s[B].parallel(i)
    s[B].pragma(i, "nontemporal")
    f = tl.build(s, [A, B], name="streamed")
    ll = f.get_source("ll")
    assert "!nontemporal" in ll and ll.count("llvm.x86.sse.sfence()") >= 1
    a = rand((8, 64))
    for offset in (0, 1):  # floats past a 64-byte boundary
        raw = tl.runtime.empty(8 * 64 + 16, "float32")
        out = raw[offset:offset + 8 * 64].reshape(8, 64)
        f(a, out)
        assert_close(out, a * 2 + 1)
    replayed = tl.create_schedule(B).apply_trace(s.trace.dumps())
    assert str(tl.lower(replayed, [A, B])) == str(tl.lower(s, [A, B]))


def test_pragma_nontemporal_needs_a_kernel_output():
    A = tl.placeholder((8, 64), name="A")
    B = tl.compute((8, 64), lambda i, j: A[i, j] * 2, name="B")
    C = tl.compute((8, 64), lambda i, j: B[i, j] + 1, name="C")
    s = tl.create_schedule(C)
    s[B].pragma(B.op.axis[0], "nontemporal")
    with pytest.raises(tl.LoweringError, match="only a stage whose output is a kernel argument"):
        tl.lower(s, [A, C])
    with pytest.raises(ValueError, match="pragma nontemporal takes no value"):
        s[C].pragma(C.op.axis[0], "nontemporal", 1)


def test_runtime_arrays_are_64_byte_aligned():
    for shape in [(3,), (5, 7), (2, 3, 4)]:
        e = tl.runtime.empty(shape, "float32")
        assert e.shape == shape and e.ctypes.data % 64 == 0 and e.flags.c_contiguous
    a = rand((5, 7))
    c = tl.runtime.array(a)
    assert c.ctypes.data % 64 == 0 and np.array_equal(c, a) and c is not a
    assert tl.runtime.empty((0, 3)).shape == (0, 3)
    with pytest.raises(ValueError, match="negative dimension"):
        tl.runtime.empty((-1, 4))
    with pytest.raises(TypeError):
        tl.runtime.empty((2, 2), "not a dtype")


def test_vectorize_with_tail_and_unroll():
    A = tl.placeholder((3, 21), name="A")
    B = tl.compute((3, 21), lambda i, j: tl.sqrt(tl.abs(A[i, j])) + 1, name="B")
    s = tl.create_schedule(B)
    _jo, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].vectorize(ji)
    s[B].unroll(B.op.axis[0])
    text = str(tl.lower(s, [A, B]))
    assert "ramp(" in text and "for i " not in text
    a = rand((3, 21))
    (out,) = build_run(s, [A], [B], [a], name="vec_tail")
    assert_close(out, np.sqrt(np.abs(a)) + 1)


def test_refused_step_leaves_trace_and_loops_unchanged():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] + 1, name="B")
    C = tl.compute((8,), lambda i: B[i] * 2, name="C")
    s = tl.create_schedule(C)
    xo, xi = s[C].split(C.op.axis[0], factor=2)
    s[B].compute_at(s[C], xo)
    before = (s.trace.dumps(), s[C].loop_names())
    with pytest.raises(tl.ScheduleError):
        s[C].fuse(xo, xi)  # B computed at the outer loop of the fuse: nothing runs it as often
    assert (s.trace.dumps(), s[C].loop_names()) == before
    assert s[B].attach_ivar is xo
