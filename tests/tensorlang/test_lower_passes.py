"""Behaviour of individual lowering passes: float16 promotion, loop partitioning, masked loads
under a select, guards for padded reads and their hoisting."""

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.ir import stmt as S
from tensorlang.ir.functor import Visitor


def _loops(func) -> list:
    found = []

    class _F(Visitor):
        def visit_For(self, s):
            found.append(s)
            self.visit(s.body)

    _F().visit(func.body)
    return found


def _ifs(node) -> int:
    n = [0]

    class _F(Visitor):
        def visit_IfThenElse(self, s):
            n[0] += 1
            self.generic(s)

    _F().visit(node)
    return n[0]


def test_float16_is_computed_in_float32_and_rounded_once():
    n = 300
    A = tl.placeholder((n,), "float16", "A")
    B = tl.placeholder((n,), "float16", "B")
    C = tl.compute((n,), lambda i: A[i] * B[i] + A[i] * 3.0 - B[i], name="C")
    s = tl.create_schedule(C)
    _, i = s[C].split(C.op.axis[0], 16)
    s[C].vectorize(i)
    text = str(tl.lower(s, [A, B, C]))
    assert "float32x16(A[" in text and "float16x16(" in text
    f = tl.build(s, [A, B, C])
    rng = np.random.default_rng(0)
    a = (rng.random(n) * 100).astype("float16")
    b = (rng.random(n) * 100).astype("float16")
    c = np.zeros(n, "float16")
    f(a, b, c)
    a32, b32 = a.astype("float32"), b.astype("float32")
    np.testing.assert_array_equal(c, (a32 * b32 + a32 * 3 - b32).astype("float16"))


def test_explicit_cast_to_float16_still_rounds():
    A = tl.placeholder((64,), "float32", "A")
    C = tl.compute((64,), lambda i: A[i].astype("float16").astype("float32") * 2.0, name="C")
    f = tl.build(tl.create_schedule(C), [A, C])
    a = np.linspace(0.1, 7.3, 64).astype("float32")
    c = np.zeros(64, "float32")
    f(a, c)
    np.testing.assert_array_equal(c, a.astype("float16").astype("float32") * 2)


def test_loop_partition_removes_tail_guards_from_the_main_loop():
    n = 100
    A = tl.placeholder((n, 64), name="A")
    C = tl.compute((n, 64), lambda i, j: A[i, j] * 2.0, name="C")
    s = tl.create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=6)
    s[C].reorder(io, C.op.axis[1], ii)
    func = tl.lower(s, [A, C])
    outer = [lp for lp in _loops(func) if lp.loop_var.name == "i.outer"]
    # i.outer in [0, 16) with every guard proven away; the last block (rows 96..99) becomes a
    # loop of its own whose i.inner loop is itself cut to the 4 rows that exist
    assert [(int(lp.min.value), int(lp.extent.value)) for lp in outer] == [(0, 16)]
    assert _ifs(func.body) == 0
    assert sorted(int(lp.extent.value) for lp in _loops(func)
                  if lp.loop_var.name == "i.inner") == [4, 6]
    f = tl.build(s, [A, C])
    a = np.random.rand(n, 64).astype("float32")
    c = np.full((n, 64), np.nan, "float32")
    f(a, c)
    np.testing.assert_array_equal(c, a * 2)


def test_symbolic_cuts_leave_the_tail_pieces_inner_loops_guarded():
    """Two symbolic splits, rows outside columns: the rows' head gets its columns cut (main
    block and column tail), the rows' tail (the last partial row tile) keeps its column guard:
    three copies of the body, not four (nested cuts doubled the code per level)."""
    m, n = tl.var("m"), tl.var("n")
    A = tl.placeholder((m, n), name="A")
    C = tl.compute((m, n), lambda i, j: A[i, j] * 2.0, name="C")
    s = tl.create_schedule(C)
    s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    func = tl.lower(s, [A, C])
    stores = []

    class Stores(Visitor):
        def visit_Store(self, st):
            stores.append(st)

    Stores().visit(func.body)
    assert len(stores) == 3
    f = tl.build(s, [A, C])
    for shape in ((1, 1), (5, 9), (8, 16), (13, 7)):
        a = np.random.rand(*shape).astype("float32")
        c = np.full(shape, np.nan, "float32")
        f(a, c)
        np.testing.assert_array_equal(c, a * 2)


@pytest.mark.parametrize("vector", [False, True])
def test_loads_under_a_select_stay_in_bounds(vector):
    # the padding reads X[i - 16] only where the select takes it; unmasked, lane i = 0 would
    # read 64 bytes before X
    n = 4096
    X = tl.placeholder((n,), name="X")
    P = tl.compute((n + 32,), lambda i: tl.if_then_else(tl.all(i >= 16, i < n + 16), X[i - 16],
                                                        -1.0), name="P")
    s = tl.create_schedule(P)
    if vector:
        _, ii = s[P].split(P.op.axis[0], factor=16)
        s[P].vectorize(ii)
    f = tl.build(s, [X, P])
    if vector:
        assert "llvm.masked.load" in f.get_source("ll_unoptimized")
    x = np.random.rand(n).astype("float32")
    p = np.zeros(n + 32, "float32")
    f(x, p)
    np.testing.assert_array_equal(p, np.pad(x, 16, constant_values=-1))


def _padded_row_sum(n=40, k=3, vector_rows=False):
    """out[i, j] = sum_r pad(X)[i + r - 1, j] over r < k: a reduction reading zero padding
    (rows -1 and n); j vectorized, and i as well when vector_rows (the guard then varies along
    the vector)."""
    X = tl.placeholder((n, 16), name="X")
    P = tl.compute((n + 2, 16), lambda i, j: tl.if_then_else(tl.all(i >= 1, i < n + 1),
                                                             X[i - 1, j], 0.0), name="P")
    r = tl.reduce_axis((0, k), name="r")
    O = tl.compute((n, 16), lambda i, j: tl.sum(P[i + r, j] * 2.0, axis=r), name="O")
    s = tl.create_schedule(O)
    s[P].compute_inline()
    i, j = s[O].op.axis
    if vector_rows:
        s[O].reorder(j, s[O].op.reduce_axis[0], i)
        s[O].vectorize(i)
    else:
        s[O].reorder(i, s[O].op.reduce_axis[0], j)
        s[O].vectorize(j)
    return s, [X, O]


def test_padded_reads_become_guards_cut_off_the_interior_and_match_numpy():
    from tensorlang.lower.passes.guard_padded_reads import guard_padded_reads

    s, args = _padded_row_sum()
    before = tl.lower(s, args, stop_after="simplify")
    assert "select(" in str(before) and _ifs(before.body) == 0
    guarded = guard_padded_reads(before.body)
    assert "select(" not in str(guarded) and _ifs(guarded) == 1
    # the row loop is cut where the guard starts to hold and where it stops, and in the two
    # border rows the reduction loop is cut to the rows that exist: no guard is left
    func = tl.lower(*_padded_row_sum())
    rows = sorted((int(lp.min.value), int(lp.extent.value)) for lp in _loops(func)
                  if lp.loop_var.name == "i")
    assert rows == [(1, 38)]
    assert sorted((int(lp.min.value), int(lp.extent.value)) for lp in _loops(func)
                  if lp.loop_var.name == "r") == [(0, 2), (0, 3), (1, 2)]
    assert _ifs(func.body) == 0
    x = np.random.rand(40, 16).astype("float32")
    out = np.full((40, 16), np.nan, "float32")
    tl.build(s, args)(x, out)
    xp = np.pad(x, ((1, 1), (0, 0)))
    np.testing.assert_allclose(out, 2 * (xp[:-2] + xp[1:-1] + xp[2:]), rtol=1e-6)


def test_padded_reads_along_the_vector_stay_selects():
    s, args = _padded_row_sum(n=16, vector_rows=True)
    func = tl.lower(s, args, stop_after="hoist_guards")
    assert "select(" in str(func) and _ifs(func.body) == 0
    x = np.random.rand(16, 16).astype("float32")
    out = np.zeros((16, 16), "float32")
    tl.build(s, args)(x, out)
    xp = np.pad(x, ((1, 1), (0, 0)))
    np.testing.assert_allclose(out, 2 * (xp[:-2] + xp[1:-1] + xp[2:]), rtol=1e-6)


def test_hoist_guards_moves_invariant_conjuncts_out_and_keeps_the_rest():
    from tensorlang.ir import expr as E
    from tensorlang.lower.passes.hoist_guards import hoist_guards

    buf = S.Buffer("B", "float32", (E.const(8),))
    a, b = E.Var("a", "int64"), E.Var("b", "int64")
    store = S.Store(buf, (b,), E.const(1.0, "float32"))
    cond = E.And(E.GE(a, E.const(1)), E.LT(b, E.const(5)))
    inner = S.For(b, E.const(0), E.const(8), "serial", S.IfThenElse(cond, store))
    out = hoist_guards(S.For(a, E.const(0), E.const(4), "serial", inner))
    # a >= 1 leaves the b loop (not the a loop: it mentions a); b < 5 stays inside
    assert isinstance(out, S.For) and isinstance(out.body, S.IfThenElse)
    assert str(out.body.condition) == "a >= 1"
    assert isinstance(out.body.then_case, S.For)
    assert str(out.body.then_case.body.condition) == "b < 5"
    # in a serial loop, conjuncts that bound the loop's own variable become its bounds
    rows = E.Var("ry", "int64")
    kernel_row = E.And(E.GE(E.Add(a, rows), E.const(1)), E.LT(E.Add(a, rows), E.const(5)))
    loop = S.For(rows, E.const(0), E.const(3), "serial",
                 S.IfThenElse(kernel_row, S.Store(buf, (rows,), E.const(1.0, "float32"))))
    clipped = hoist_guards(loop)
    assert isinstance(clipped, S.For) and isinstance(clipped.body, S.Store)
    assert str(clipped.min) == "max(0, 1 - a)" and "5 - a)" in str(clipped.extent)
    # not in an unrolled or vectorized one (their trip counts must stay constant)
    kept = hoist_guards(loop.replace(kind="unrolled"))
    assert isinstance(kept.body, S.IfThenElse)


@pytest.mark.parametrize("stride,pad,hw", [(1, 1, 56), (2, 1, 15), (1, 2, 9), (2, 3, 13)])
def test_blocked_conv_reads_its_padding_in_place(stride, pad, hw):
    """No padded copy of the input: the border tiles are guarded, the interior is not, and the
    result equals numpy's."""
    c, oc, b = 32, 32, 16
    x = tl.placeholder((1, c // b, hw, hw, b), name="x")
    w = tl.placeholder((oc // b, c // b, 3, 3, b, b), name="w")
    y = tl.ops.conv2d_nchwc(x, w, stride=stride, padding=pad)
    s = tl.ops.default_schedule(y)
    func = tl.lower(s, [x, w, y])
    assert "pad" not in {st.op.tag for st in s.stages if st.attach_type == "root"}
    assert "allocate pad" not in str(func)
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((1, c // b, hw, hw, b)).astype("float32")
    wa = rng.standard_normal((oc // b, c // b, 3, 3, b, b)).astype("float32")
    ya = np.full([int(d.value) for d in y.shape], np.nan, "float32")
    tl.build(s, [x, w, y])(xa, wa, ya)
    xn = xa.transpose(0, 1, 4, 2, 3).reshape(1, c, hw, hw)
    wn = wa.transpose(0, 5, 1, 4, 2, 3).reshape(oc, c, 3, 3)
    xp = np.pad(xn, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (hw + 2 * pad - 3) // stride + 1
    ref = np.zeros((1, oc, oh, oh), np.float32)
    for ky in range(3):
        for kx in range(3):
            win = xp[:, :, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (oh - 1) + 1:stride]
            ref += np.einsum("oi,nihw->nohw", wn[:, :, ky, kx], win)
    np.testing.assert_allclose(ya.transpose(0, 1, 4, 2, 3).reshape(1, oc, oh, oh), ref,
                               rtol=1e-4, atol=1e-4)


def test_pass_list_is_ordered_and_named():
    from tensorlang.lower import PASSES

    names = [n for n, _ in PASSES]
    assert names.index("storage_flatten") < names.index("vectorize") < names.index("unroll")
    assert names.index("simplify") < names.index("guard_padded_reads") < \
        names.index("loop_partition") < names.index("hoist_guards") < names.index("vectorize")
    assert names[-3:] == ["simplify_final", "hoist_guards_final", "transpose_gathers"]
    assert all(callable(fn) for _, fn in PASSES)
    assert S.For  # the passes work on loop IR statements


def test_partial_lowering_stops_after_a_named_pass_and_skips_named_passes():
    n = 100
    A = tl.placeholder((n, 64), name="A")
    C = tl.compute((n, 64), lambda i, j: A[i, j] * 2.0, name="C")
    s = tl.create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=6)
    s[C].reorder(io, ii, C.op.axis[1])
    s[C].vectorize(C.op.axis[1])
    # stopped after flattening: the vectorized loops are still loops (vectorize did not run);
    # loop_partition ran: the main block and the 4-row tail are two nests without guards
    flat = tl.lower(s, [A, C], stop_after="storage_flatten")
    assert [lp.kind for lp in _loops(flat)].count("vectorized") == 2
    assert _ifs(flat.body) == 0
    # without loop_partition and hoist_guards the tail guard of i.inner stays (one guard, one
    # loop nest); hoist_guards alone makes it the bound of the serial i.inner loop
    guarded = tl.lower(s, [A, C], stop_after="storage_flatten",
                       skip=("loop_partition", "simplify_partitioned", "hoist_guards"))
    assert _ifs(guarded.body) == 1
    assert [lp.kind for lp in _loops(guarded)].count("vectorized") == 1
    bounded = tl.lower(s, [A, C], stop_after="storage_flatten",
                       skip=("loop_partition", "simplify_partitioned"))
    assert _ifs(bounded.body) == 0
    inner = next(lp for lp in _loops(bounded) if lp.loop_var.name == "i.inner")
    assert "min(" in str(inner.extent)
    # the full pipeline is what stop_after=<last pass> gives
    assert str(tl.lower(s, [A, C], stop_after="transpose_gathers")) == str(tl.lower(s, [A, C]))
    with pytest.raises(ValueError, match="unknown pass 'flatten'"):
        tl.lower(s, [A, C], stop_after="flatten")
    with pytest.raises(ValueError, match="unknown pass 'nope'"):
        tl.lower(s, [A, C], skip=("nope",))


def test_stage_sized_by_a_loop_variable_survives_one_iteration_loops():
    # R computed at a fused-and-split loop: its buffer's size depends on that loop's variable;
    # loop partitioning leaves a one-iteration tail that simplify removes by substitution,
    # which must reach the buffer's shape too (it used to leave the variable dangling)
    A = tl.placeholder((2, 3), name="A")
    k = tl.reduce_axis((0, 3), "k")
    R = tl.compute((2,), lambda i: tl.sum(A[i, k], axis=k), name="R")
    D = tl.compute((2, 3), lambda i, j: A[i, j] - R[i], name="D")
    s = tl.create_schedule(D)
    fo, _ = s[D].split(s[D].fuse(*s[D].op.axis), 2)
    s[D].parallel(fo)
    s[R].compute_at(s[D], fo)
    f = tl.build(s, [A, D])
    a = np.random.rand(2, 3).astype("float32")
    d = np.full((2, 3), np.nan, "float32")
    f(a, d)
    np.testing.assert_allclose(d, a - a.sum(1, keepdims=True), rtol=1e-6)


def _transpose_schedule(n: int, m: int, masked: bool = False):
    """B[j, i] = A[i, j] for A [n, m]: the vector along i (stride m in A), j unrolled: m
    gathers of n lanes that together read all of A."""
    A = tl.placeholder((n, m), name="A")
    if masked:
        B = tl.compute((m, n), lambda j, i: tl.select(i > 1, A[i, j], 0.0), name="B")
    else:
        B = tl.compute((m, n), lambda j, i: A[i, j], name="B")
    s = tl.create_schedule(B)
    s[B].unroll(B.op.axis[0])
    s[B].vectorize(B.op.axis[1])
    return s, A, B


@pytest.mark.parametrize("n,m", [(16, 16), (8, 8), (4, 4), (8, 16), (16, 8), (4, 16), (16, 4)])
def test_transpose_gathers_turns_a_block_of_gathers_into_loads_and_shuffles(n, m):
    s, A, B = _transpose_schedule(n, m)
    text = str(tl.lower(s, [A, B]))
    t = min(n, m)
    # max(n, m) / t squares of t rows, log2(t) rounds of t shuffles each, and the stacked
    # pieces of each column concatenated
    squares = max(n, m) // t
    concat = m * (n // t - 1)
    assert text.count("A[ramp(") == squares * t
    assert all(f", 1, {t})]" in ln for ln in text.splitlines() if "A[ramp(" in ln)
    assert text.count("shuffle(") == squares * t * (t.bit_length() - 1) + concat
    a = np.arange(n * m, dtype="float32").reshape(n, m)
    b = np.zeros((m, n), "float32")
    tl.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, a.T)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int8", "int32", "uint8", "bool"])
def test_transpose_gathers_any_element_type(dtype):
    A = tl.placeholder((8, 8), dtype, name="A")
    B = tl.compute((8, 8), lambda j, i: A[i, j], name="B")
    s = tl.create_schedule(B)
    s[B].unroll(B.op.axis[0])
    s[B].vectorize(B.op.axis[1])
    assert "shuffle(" in str(tl.lower(s, [A, B]))
    a = (np.arange(64) % 7 > 2 if dtype == "bool" else np.arange(64) % 100).astype(dtype)
    a = a.reshape(8, 8)
    b = np.zeros((8, 8), dtype)
    tl.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, a.T)


def test_transpose_gathers_masks_conditional_gathers_and_leaves_written_buffers_alone():
    # gathers all under one lane mask (select(i > 1, A[i, j], 0)): row i of the block is read
    # only where lane i is, here rows 0 and 1 never (a ragged tile's rows past the end)
    s, A, B = _transpose_schedule(16, 16, masked=True)
    text = str(tl.lower(s, [A, B]))
    assert "shuffle(" in text and ", 16, 16)]" not in text
    assert "A[ramp(0, 1, 16)]" not in text and "A[ramp(16, 1, 16)]" not in text
    assert "A[ramp(32, 1, 16)]" in text
    a = np.arange(256, dtype="float32").reshape(16, 16)
    b = np.zeros((16, 16), "float32")
    tl.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, np.where(np.arange(16) > 1, a.T, 0))
    # a store into the gathered buffer between the gathers: reading the block up front would
    # see the old value, so the group is left as it is
    from tensorlang.ir import expr as E
    from tensorlang.ir.functor import post_order
    from tensorlang.lower.passes.transpose_gathers import transpose_gathers

    s, A, B = _transpose_schedule(4, 4)
    body = tl.lower(s, [A, B]).body
    gathered = tl.lower(s, [A, B], skip=("transpose_gathers",)).body
    assert str(body) != str(gathered)

    stores, loads = [], []
    post_order(gathered, lambda x: stores.append(x) if type(x) is S.Store else None)
    post_order(stores[0].value, lambda x: loads.append(x) if type(x) is E.Load else None)
    clobber = S.Store(loads[0].buffer, (E.const(0),), E.const(1.0, "float32"))
    mixed = S.seq(stores[0], clobber, *stores[1:])
    assert str(transpose_gathers(mixed)) == str(mixed)
    assert "shuffle(" in str(transpose_gathers(S.seq(*stores)))



@pytest.mark.parametrize("config", range(0, 756, 97))
def test_one_iteration_loops_simplify_as_if_substituted_first(monkeypatch, config):
    # the simplify pass substitutes a one-iteration loop's index on the fly (no substituted
    # copy of the body); the result must be the same as substituting first
    import importlib

    from tensorlang import autotune
    from tensorlang.lower import build_loop_nest, infer_bounds, inline_bodies

    passes = importlib.import_module("tensorlang.lower.passes.simplify")
    task = autotune.create_task("conv2d_nchwc", (1, 32, 14, 14, 32, 3, 3, 1, 1, 16, "float32"))
    try:
        s, args = task.instantiate(task.config_space.get(config % len(task.config_space)))
    except tl.ScheduleError:
        pytest.skip("an illegal config")
    bodies = inline_bodies(s)
    body = build_loop_nest(s, bodies, infer_bounds(s, bodies), args, "f").body
    fused = passes.simplify_stmt(body)
    monkeypatch.setattr(passes, "_substitutes_in_exprs_only", lambda body, mapping: False)
    assert str(fused) == str(passes.simplify_stmt(body))


def test_simplify_memo_tells_zero_from_negative_zero():
    # x + -0.0 is x, x + 0.0 is not (x = -0.0): the shared memo must not hand one's result to
    # the other, in either order
    from tensorlang.ir import expr as E
    from tensorlang.ir.simplify import simplify

    x = E.Var("x", "float32")
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        for c in (first, second):
            out = simplify(E.Add(x, E.const(c, "float32")))
            assert (out is x) == (c == 0.0 and str(c).startswith("-"))


def test_heap_buffers_are_allocated_once_per_task_not_per_iteration():
    """A stage of symbolic size computed at a serial loop is allocated outside that loop (its
    iterations each write it before reading it), but inside the parallel loop: each task
    needs its own."""
    n = tl.var("n")
    A = tl.placeholder((4, 3, n), name="A")
    B = tl.compute((4, 3, n), lambda i, j, k: A[i, j, k] * 2.0, name="B")
    C = tl.compute((4, 3, n), lambda i, j, k: B[i, j, k] + B[i, j, n - 1 - k], name="C")
    s = tl.create_schedule(C)
    s[C].parallel(C.op.axis[0])
    s[B].compute_at(s[C], C.op.axis[1])
    func = tl.lower(s, [A, C])
    par = next(lp for lp in _loops(func) if lp.kind == "parallel")
    assert isinstance(par.body, S.Allocate) and par.body.buffer.name == "B"
    assert par.body.buffer.scope == "heap"
    assert isinstance(par.body.body, S.For) and par.body.body.loop_var.name == "j"
    f = tl.build(s, [A, C])
    for size in (1, 5, 33):
        a = np.random.default_rng(size).standard_normal((4, 3, size)).astype("float32")
        c = np.zeros_like(a)
        f(a, c)
        np.testing.assert_allclose(c, 2 * a + 2 * a[:, :, ::-1], rtol=1e-6)
