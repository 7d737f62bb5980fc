"""Library ops over symbolic extents (issue 19): each op is declared on placeholders with tl.var
dimensions (batch, sequence, rows), built once under its default schedule and run at several
sizes (1, 2, 15, 16, 17, 100: below, at and past the schedules' vector and tile widths) against
numpy; a dimension an op cannot take symbolic is refused with an error naming the op and the
dimension."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl

ops = tl.ops
SIZES = (1, 2, 15, 16, 17, 100)


def _dims(t, sizes: dict) -> tuple:
    return tuple(tl.ir.expr.as_int(d) if tl.ir.expr.as_int(d) is not None
                 else int(tl.ir.expr.as_int(tl.ir.simplify.simplify(_bind(d, sizes))))
                 for d in t.shape)


def _bind(e, sizes: dict):
    from tensorlang.ir.functor import Mutator

    class _Sub(Mutator):
        def visit_Var(self, v):
            return tl.ir.expr.const(sizes[v.name], v.dtype) if v.name in sizes else v

    return _Sub().visit(e)


def _rand(shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 3, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


def check_sizes(ins, out, ref, sizes_list, rtol=2e-5, atol=2e-5, inputs=None):
    """Build `out` over `ins` once (default schedule) and compare with ref(*arrays) at each
    binding of sizes_list (dicts: var name -> int)."""
    f = tl.build(ops.default_schedule([out]), [*ins, out], name="sym_op")
    for sizes in sizes_list:
        arrays = (inputs(sizes) if inputs else
                  [_rand(_dims(t, sizes), t.dtype, seed=i) for i, t in enumerate(ins)])
        # a sentinel, so that an element the kernel does not write is noticed
        got = np.full(_dims(out, sizes), np.nan if out.dtype.startswith("float") else -12345,
                      out.dtype)
        f(*arrays, got)
        np.testing.assert_allclose(got, ref(*arrays), rtol=rtol, atol=atol,
                                   err_msg=f"sizes {sizes}")
    return f


def each(name="n", sizes=SIZES):
    return [{name: v} for v in sizes]


# ----------------------------------------------------------------------------- matmul family


def test_dense_symbolic_rows_with_bias():
    n = tl.var("n")
    x = tl.placeholder((n, 64), name="x")
    w = tl.placeholder((48, 64), name="w")
    b = tl.placeholder((48,), name="b")
    check_sizes([x, w, b], ops.dense(x, w, b), lambda x, w, b: x @ w.T + b, each(),
                rtol=1e-4, atol=1e-4)


def test_dense_symbolic_rows_fused_gelu():
    n = tl.var("n")
    x = tl.placeholder((n, 32), name="x")
    w = tl.placeholder((40, 32), name="w")
    from math import erf

    verf = np.vectorize(erf)

    def ref(x, w):
        y = (x @ w.T).astype(np.float64)
        return 0.5 * y * (1 + verf(y / np.sqrt(2)))

    check_sizes([x, w], ops.gelu(ops.dense(x, w)), ref, each(), rtol=1e-4, atol=1e-4)


def test_dense_refuses_symbolic_in_features():
    n, k = tl.var("n"), tl.var("k")
    x = tl.placeholder((n, k), name="x")
    w = tl.placeholder((8, 16), name="w")
    with pytest.raises(ValueError, match=r"dense: dimension 1 of x must be a constant "
                                         r"\(in_features.*symbolic extent k"):
        ops.dense(x, w)


def test_matmul_symbolic_rows_and_k():
    m, k = tl.var("m"), tl.var("k")
    a = tl.placeholder((m, k), name="a")
    b = tl.placeholder((k, 40), name="b")
    sizes = [{"m": v, "k": kk} for v, kk in ((1, 3), (2, 16), (15, 17), (17, 64), (100, 5))]
    check_sizes([a, b], ops.matmul(a, b), np.matmul, sizes, rtol=1e-4, atol=1e-4)


def test_matmul_mismatched_symbolic_inner_dimension():
    m, k, j = tl.var("m"), tl.var("k"), tl.var("j")
    a = tl.placeholder((m, k), name="a")
    b = tl.placeholder((j, 8), name="b")
    with pytest.raises(ValueError, match="matmul: .* mismatched inner dimensions"):
        ops.matmul(a, b)


def test_batch_matmul_attention_shapes():
    """q . k^T and p . v of an attention: batch and sequence symbolic, the head dim constant;
    p . v reduces over the symbolic sequence."""
    bs, s = tl.var("batch"), tl.var("seq")
    q = tl.placeholder((bs, 2, s, 8), name="q")
    kt = tl.placeholder((bs, 2, 8, s), name="kt")
    v = tl.placeholder((bs, 2, s, 8), name="v")
    sizes = [{"batch": b, "seq": q_} for b, q_ in ((1, 1), (2, 2), (1, 15), (2, 17), (1, 100))]
    check_sizes([q, kt], ops.batch_matmul(q, kt), np.matmul, sizes, rtol=1e-4, atol=1e-4)
    p = tl.placeholder((bs, 2, s, s), name="p")
    check_sizes([p, v], ops.batch_matmul(p, v), np.matmul, sizes, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_batch_matmul_transposed_broadcast_batch():
    s = tl.var("seq")
    a = tl.placeholder((3, 8, s), name="a")
    b = tl.placeholder((1, s, 8), name="b")
    check_sizes([a, b], ops.batch_matmul(a, b, trans_a=True, trans_b=True),
                lambda a, b: np.matmul(a.transpose(0, 2, 1), b.transpose(0, 2, 1)),
                each("seq", (1, 2, 15, 16, 17, 100)), rtol=1e-4, atol=1e-4)


def test_gemm_symbolic_rows():
    n = tl.var("n")
    a = tl.placeholder((n, 24), name="a")
    b = tl.placeholder((20, 24), name="b")
    c = tl.placeholder((20,), name="c")
    check_sizes([a, b, c], ops.gemm(a, b, c, alpha=0.5, trans_b=True),
                lambda a, b, c: 0.5 * a @ b.T + c, each(), rtol=1e-4, atol=1e-4)


def test_symbolic_row_tile_is_partitioned():
    """The register tile's guarded rows over a symbolic M are split off into a tail loop: the
    main loop's k loop has no guard (a guard per row there halved the speed), and the tail's
    copies have constant rows (a run-time row count kept the accumulators in memory)."""
    n = tl.var("n")
    x = tl.placeholder((n, 64), name="x")
    w = tl.placeholder((48, 64), name="w")
    out = ops.dense(x, w)
    text = str(tl.lower(ops.default_schedule([out]), [x, w, out]))
    main = text.split("parallel for")[1]
    assert "max(n // 4, 0)" in main and "if " not in main, text
    # the last tile is copied for each count of rows left (1-3), each copy with its rows
    # constant (no guard, no row loop of run-time extent); the tail is that one tile, so the
    # copy for one row is the last else (no copy of the body as it was)
    tail = text.split("parallel for")[2]
    copies = tail.split("else:")
    assert len(copies) == 3, text
    for k, copy in zip((2, 3), copies[:2]):
        assert f"if n - i.outer * 4 == {k}:" in copy and "min(" not in copy, text
    assert "min(" not in copies[2] and "if " not in copies[2] and "n - " not in copies[2], text
    f = tl.build(ops.default_schedule([out]), [x, w, out])
    for rows in (1, 2, 3, 4, 5, 6, 7, 9):
        a, b = _rand((rows, 64)), _rand((48, 64), seed=1)
        got = np.full((rows, 48), np.nan, np.float32)
        f(a, b, got)
        np.testing.assert_allclose(got, a @ b.T, rtol=1e-4, atol=1e-4, err_msg=f"{rows} rows")


def test_row_tile_over_a_product_of_sizes_is_copied_per_rows_left():
    """A dense over batch * seq rows (a transformer's, or a MatMulInteger's flattened rows):
    its last row tile is copied per count of rows left, as over one shape variable, with
    `batch * seq` replaced by its value in each copy (the generic tail kept its accumulators in
    memory: an int8 dense at 7 rows 0.045 ms against 0.018 over a plain m)."""
    b, s = tl.var("batch"), tl.var("seq")
    x = tl.placeholder((b * s, 64), name="x")
    w = tl.placeholder((48, 64), name="w")
    out = ops.dense(x, w)
    text = str(tl.lower(ops.default_schedule([out]), [x, w, out]))
    tail = text.split("parallel for")[2]
    assert "if batch * seq - i.outer * 4 == 2:" in tail, text
    assert "if batch * seq - i.outer * 4 == 3:" in tail, text
    f = tl.build(ops.default_schedule([out]), [x, w, out])
    for batch, seq in ((1, 1), (1, 2), (3, 1), (1, 5), (2, 3), (7, 1), (3, 3), (2, 4)):
        a, wt = _rand((batch * seq, 64)), _rand((48, 64), seed=1)
        got = np.full((batch * seq, 48), np.nan, np.float32)
        f(a, wt, got, batch=batch, seq=seq)
        np.testing.assert_allclose(got, a @ wt.T, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{batch} x {seq} rows")


# ----------------------------------------------------------------------------- data movement


def test_reshape_split_and_merge_symbolic_rows():
    n = tl.var("n")
    x = tl.placeholder((n, 64), name="x")
    check_sizes([x], ops.reshape(x, (n, 4, 16)), lambda a: a.reshape(-1, 4, 16), each())
    check_sizes([x], ops.reshape(x, (-1, 16)), lambda a: a.reshape(-1, 16), each())
    b, s = tl.var("batch"), tl.var("seq")
    y = tl.placeholder((b, s, 24), name="y")
    sizes = [{"batch": bb, "seq": ss} for bb, ss in ((1, 1), (2, 15), (3, 17))]
    check_sizes([y], ops.reshape(y, (b * s, 24)), lambda a: a.reshape(-1, 24), sizes)
    check_sizes([y], ops.reshape(y, (b, s, 2, 12)), lambda a: a.reshape(a.shape[:2] + (2, 12)),
                sizes)
    z = tl.placeholder((b * s, 24), name="z")
    for v in sizes:
        check_sizes([z], ops.reshape(z, (b, s, 24)), lambda a, v=v: a.reshape(
            v["batch"], v["seq"], 24), [v], inputs=lambda v: [_rand((v["batch"] * v["seq"], 24))])


def test_reshape_refusals_with_symbolic_extents():
    n = tl.var("n")
    x = tl.placeholder((n, 6), name="x")
    with pytest.raises(ValueError, match=r"reshape: cannot infer -1 .* symbolic size"):
        ops.reshape(x, (-1, 4))
    with pytest.raises(ValueError, match="reshape: cannot reshape"):
        ops.reshape(x, (n, 3))


def test_flatten_transpose_expand_dims_symbolic_batch():
    n = tl.var("n")
    x = tl.placeholder((n, 3, 4, 5), name="x")
    check_sizes([x], ops.flatten(x), lambda a: a.reshape(a.shape[0], -1), each())
    check_sizes([x], ops.transpose(x, (0, 2, 1, 3)), lambda a: a.transpose(0, 2, 1, 3), each())
    check_sizes([x], ops.expand_dims(x, 1), lambda a: a[:, None], each())
    check_sizes([x], ops.squeeze(ops.expand_dims(x, 0), 0), lambda a: a, each())


def test_concat_on_and_off_the_symbolic_axis():
    n, m = tl.var("n"), tl.var("m")
    x = tl.placeholder((n, 16), name="x")
    y = tl.placeholder((n, 5), name="y")
    check_sizes([x, y], ops.concat([x, y], 1), lambda a, b: np.concatenate([a, b], 1), each())
    z = tl.placeholder((m, 16), name="z")
    c = tl.placeholder((3, 16), name="c")
    sizes = [{"n": a, "m": b} for a, b in ((1, 1), (2, 15), (17, 16), (100, 3))]
    check_sizes([x, c, z], ops.concat([x, c, z], 0),
                lambda a, b, d: np.concatenate([a, b, d], 0), sizes)


def test_concat_refuses_mismatched_symbolic_extent():
    n, m = tl.var("n"), tl.var("m")
    x = tl.placeholder((n, 16), name="x")
    y = tl.placeholder((m, 5), name="y")
    with pytest.raises(ValueError, match="concat: tensors\\[1\\] has shape .* off axis 1"):
        ops.concat([x, y], 1)


def test_slice_symbolic_axes():
    n = tl.var("n")
    x = tl.placeholder((n, 20), name="x")
    # the batch axis untouched, the constant axis clamped as numpy does
    check_sizes([x], ops.strided_slice(x, [2], [100], [3], axes=[1]), lambda a: a[:, 2:100:3],
                each())
    # the first token of each sequence (BERT's pooler), the last rows, to the end
    s = tl.var("seq")
    y = tl.placeholder((2, s, 8), name="y")
    sizes = each("seq", (2, 15, 16, 17, 100))
    check_sizes([y], ops.strided_slice(y, [0], [1], axes=[1]), lambda a: a[:, 0:1], sizes)
    check_sizes([y], ops.strided_slice(y, [2], [1 << 62], axes=[1]), lambda a: a[:, 2:],
                sizes)
    check_sizes([y], ops.strided_slice(y, [1], [-1], [2], axes=[1]), lambda a: a[:, 1:-1:2],
                sizes)


def test_slice_refuses_what_needs_the_extent_of_a_symbolic_axis():
    n = tl.var("n")
    x = tl.placeholder((n, 4), name="x")
    with pytest.raises(ValueError, match=r"slice: a negative step on axis 0 needs a constant "
                                         r"extent, got the symbolic extent n"):
        ops.strided_slice(x, [-1], [-100], [-1], axes=[0])
    with pytest.raises(ValueError, match=r"slice: a negative begin on axis 0 needs a constant "
                                         r"extent, got the symbolic extent n"):
        ops.strided_slice(x, [-2], [1 << 62], axes=[0])


def test_pad_and_gather_with_symbolic_rows():
    n = tl.var("n")
    x = tl.placeholder((n, 6), name="x")
    check_sizes([x], ops.pad(x, [(0, 0), (1, 2)]), lambda a: np.pad(a, [(0, 0), (1, 2)]), each())
    # the symbolic axis padded too, with a constant or its edge (MobileBERT's trigrams over a
    # dynamic sequence); reflect needs the extent
    for mode in ("constant", "edge"):
        check_sizes([x], ops.pad(x, [(1, 2), (0, 1)], mode),
                    lambda a, m=mode: np.pad(a, [(1, 2), (0, 1)], m), each())
    with pytest.raises(ValueError, match=r"pad: dimension 0 of x must be a constant "
                                         r"\(a reflected axis\)"):
        ops.pad(x, [(1, 0), (0, 0)], "reflect")
    # an embedding lookup: the token ids' extents symbolic, the table constant
    table = tl.placeholder((30, 8), name="table")
    ids = tl.placeholder((n,), dtype="int64", name="ids")
    check_sizes([table, ids], ops.gather(table, ids, 0), lambda t, i: t[i], each(),
                inputs=lambda v: [_rand((30, 8)), np.arange(v["n"], dtype="int64") % 30 - 7])


# ----------------------------------------------------------------------------- rows and reductions


def _softmax(a, axis=-1):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_softmax_symbolic_rows_and_row_length():
    """An attention's softmax: rows (batch * heads * seq) and the row length (seq) symbolic;
    the row is reduced in whole 64-lane groups, then a guarded tail."""
    b, s = tl.var("batch"), tl.var("seq")
    x = tl.placeholder((b, 2, s, s), name="x")
    sizes = [{"batch": bb, "seq": ss} for bb, ss in ((1, 1), (2, 2), (1, 15), (1, 16), (2, 17),
                                                      (1, 100), (1, 129))]
    check_sizes([x], ops.softmax(x), _softmax, sizes)


def test_softmax_over_a_middle_axis_symbolic_and_static():
    """YOLOv8's DFL: a softmax over the 16 bins of [batch, 16, 4, anchors]: max and sum over
    a middle axis, in 16-lane vectors of the anchors (symbolic, or static past 4 vectors,
    ragged or whole), the last one masked; also a plain max over a middle axis."""
    b, a = tl.var("batch"), tl.var("anchors")
    x = tl.placeholder((b, 16, 4, a), name="x")
    sizes = [{"batch": bb, "anchors": aa} for bb, aa in ((1, 1), (2, 15), (1, 17), (1, 100))]
    check_sizes([x], ops.softmax(x, axis=1), lambda v: _softmax(v, 1), sizes)
    for n in (70, 96):  # a ragged and a whole number of vectors, past 4 of them
        y = tl.placeholder((2, 16, 4, n), name="y")
        check_sizes([y], ops.softmax(y, axis=1), lambda v: _softmax(v, 1), [{}])
    check_sizes([x], ops.max(x, axis=1), lambda v: v.max(1), sizes)


def test_softmax_with_mask_add_symbolic():
    b, s = tl.var("batch"), tl.var("seq")
    x = tl.placeholder((b, 2, s, s), name="x")
    mask = tl.placeholder((b, 1, 1, s), name="mask")
    sizes = [{"batch": bb, "seq": ss} for bb, ss in ((1, 1), (2, 15), (1, 17), (2, 100))]
    check_sizes([x, mask], ops.softmax(ops.add(x, mask)), lambda a, m: _softmax(a + m), sizes)


def test_layer_norm_symbolic_rows_and_normalized_axis():
    b, s = tl.var("batch"), tl.var("seq")
    x = tl.placeholder((b, s, 48), name="x")
    g = tl.placeholder((48,), name="g")
    be = tl.placeholder((48,), name="be")

    def ref(a, g, be, axes=(-1,)):
        m = a.mean(axes, keepdims=True)
        v = ((a - m) ** 2).mean(axes, keepdims=True)
        return (a - m) / np.sqrt(v + 1e-5) * g + be

    sizes = [{"batch": bb, "seq": ss} for bb, ss in ((1, 1), (2, 2), (1, 15), (2, 17), (1, 100))]
    check_sizes([x, g, be], ops.layer_norm(x, g, be), ref, sizes, rtol=1e-4, atol=1e-4)
    y = tl.placeholder((3, s), name="y")
    check_sizes([y], ops.layer_norm(y), lambda a: ref(a, 1, 0), each("seq", (1, 2, 15, 16, 17,
                                                                            100, 129)),
                rtol=1e-4, atol=1e-4)


def test_mean_over_symbolic_and_constant_axes():
    n = tl.var("n")
    x = tl.placeholder((4, n), name="x")
    check_sizes([x], ops.mean(x, axis=-1, keepdims=True), lambda a: a.mean(-1, keepdims=True),
                each(), rtol=1e-5, atol=1e-6)
    y = tl.placeholder((n, 3, 40), name="y")
    check_sizes([y], ops.mean(y, axis=(0, 2)), lambda a: a.mean((0, 2)), each(), rtol=1e-5,
                atol=1e-6)
    check_sizes([y], ops.sum(y, axis=-1), lambda a: a.sum(-1), each(), rtol=1e-5, atol=1e-5)


def test_elementwise_broadcast_gelu_erf_symbolic():
    b, s = tl.var("batch"), tl.var("seq")
    x = tl.placeholder((b, s, 40), name="x")
    bias = tl.placeholder((40,), name="bias")
    from math import erf

    verf = np.vectorize(erf)
    sizes = [{"batch": bb, "seq": ss} for bb, ss in ((1, 1), (2, 2), (1, 15), (2, 17), (1, 100))]
    check_sizes([x, bias], ops.gelu(ops.add(x, bias)),
                lambda a, c: 0.5 * (a + c) * (1 + verf((a + c) / np.sqrt(2))), sizes,
                rtol=1e-5, atol=1e-5)
    check_sizes([x], ops.erf(x), verf, sizes, rtol=1e-5, atol=1e-5)
    col = tl.placeholder((b, s, 1), name="col")
    check_sizes([x, col], ops.multiply(ops.subtract(x, col), col),
                lambda a, c: (a - c) * c, sizes)
    row = tl.placeholder((s,), name="row")  # the symbolic axis innermost: vector + tail
    check_sizes([row], ops.tanh(row), np.tanh, each("seq"), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- CNN ops, symbolic batch

BATCHES = each("n", (1, 2, 3))


def _conv_case(x_shape, w_shape, stride=1, padding=0, groups=1, relu=False):
    from tensorlang.ops import references as ref

    n = tl.var("n")
    x = tl.placeholder((n, *x_shape), name="x")
    w = tl.placeholder(w_shape, name="w")
    out = ops.conv2d_nchw(x, w, stride=stride, padding=padding, groups=groups)

    def want(a, b):
        y = ref.conv2d_nchw(a, b, stride, padding, groups=groups)
        return np.maximum(y, 0) if relu else y

    check_sizes([x, w], ops.relu(out) if relu else out, want, BATCHES, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape,w_shape,stride,padding,groups,relu", [
    ((16, 6, 6), (32, 16, 3, 3), 1, 1, 1, True),  # the oc-blocked path, relu fused
    ((3, 9, 9), (16, 3, 3, 3), 2, 1, 1, False),  # a stem conv
    ((8, 5, 5), (12, 4, 3, 3), 1, 1, 2, False),  # plain grouped
    ((16, 5, 5), (16, 1, 3, 3), 1, 1, 16, False),  # depthwise
], ids=["blocked_relu", "stem_stride2", "grouped", "depthwise"])
def test_conv2d_nchw_symbolic_batch(x_shape, w_shape, stride, padding, groups, relu):
    _conv_case(x_shape, w_shape, stride, padding, groups, relu)


def test_conv2d_nchwc_and_depthwise_nchwc_symbolic_batch():
    from tensorlang.ops import references as ref

    n = tl.var("n")
    x = tl.placeholder((n, 1, 6, 6, 16), name="x")
    w = tl.placeholder((2, 1, 3, 3, 16, 16), name="w")
    check_sizes([x, w], ops.conv2d_nchwc(x, w, padding=1), (
        lambda a, b: ref.to_nchwc(ref.conv2d_nchw(ref.from_nchwc(a), _unblock_w(b), 1, 1), 16)),
        BATCHES, rtol=1e-4, atol=1e-4)
    wd = tl.placeholder((1, 1, 3, 3, 16), name="wd")
    check_sizes([x, wd], ops.depthwise_conv2d_nchwc(x, wd, padding=1),
                lambda a, b: ref.to_nchwc(ref.conv2d_nchw(
                    ref.from_nchwc(a), b.transpose(0, 4, 1, 2, 3).reshape(16, 1, 3, 3), 1, 1,
                    groups=16), 16), BATCHES, rtol=1e-4, atol=1e-4)


def _unblock_w(b):
    """[O/ob, I/ib, KH, KW, ib, ob] -> OIHW."""
    obn, ibn, kh, kw, ib, ob = b.shape
    return b.transpose(0, 5, 1, 4, 2, 3).reshape(obn * ob, ibn * ib, kh, kw)


def test_pooling_and_batch_norm_symbolic_batch():
    from tensorlang.ops import references as ref

    n = tl.var("n")
    x = tl.placeholder((n, 16, 7, 7), name="x")
    check_sizes([x], ops.max_pool2d(x, 3, 2, 1), lambda a: ref.pool2d(a, 3, 2, 1, "max"),
                BATCHES)
    check_sizes([x], ops.avg_pool2d(x, 2, 2), lambda a: ref.pool2d(a, 2, 2, 0, "avg"), BATCHES)
    check_sizes([x], ops.global_avg_pool2d(x), lambda a: a.mean((2, 3), keepdims=True), BATCHES)
    check_sizes([x], ops.global_max_pool2d(x), lambda a: a.max((2, 3), keepdims=True), BATCHES)
    xb = tl.placeholder((n, 1, 7, 7, 16), name="xb")  # blocked NCHW16c
    check_sizes([xb], ops.max_pool2d(xb, 3, 2, 1), lambda a: ref.to_nchwc(
        ref.pool2d(ref.from_nchwc(a), 3, 2, 1, "max"), 16), BATCHES)
    check_sizes([xb], ops.global_avg_pool2d(xb), lambda a: a.mean((2, 3), keepdims=True),
                BATCHES)
    g, b, m, v = (tl.placeholder((16,), name=nm) for nm in "gbmv")
    check_sizes([x, g, b, m, v], ops.batch_norm(x, g, b, m, v),
                lambda a, g, b, m, v: ref.batch_norm(a, g, b, m, v), BATCHES, rtol=1e-4,
                atol=1e-4, inputs=lambda s: [_rand((s["n"], 16, 7, 7))] + [
                    _rand((16,), seed=i) for i in range(3)] + [
                    np.abs(_rand((16,), seed=4)) + 0.1])


def test_cnn_ops_refuse_symbolic_channels():
    n, c = tl.var("n"), tl.var("c")
    w = tl.placeholder((16, 8, 3, 3), name="w")
    with pytest.raises(ValueError, match=r"conv2d_nchw: dimension 1 of x must be a constant "
                                         r"\(channels\), got the symbolic extent c"):
        ops.conv2d_nchw(tl.placeholder((n, c, 8, 8), name="x"), w)
    with pytest.raises(ValueError, match=r"max_pool2d: dimension 1 of x must be a constant"):
        ops.max_pool2d(tl.placeholder((n, c, 8, 8), name="x"), 2)
    with pytest.raises(ValueError, match=r"global_avg_pool2d: dimension 1 of x must be a "
                                         r"constant"):
        ops.global_avg_pool2d(tl.placeholder((n, c, 8, 8), name="x"))


# ----------------------------------------------------------------------------- CNN ops, symbolic plane

# planes below, at and past the register tiles' widths (14 columns, 16-column segments), with
# ragged last tiles, and of one tile's width
PLANES = [{"h": h, "w": w} for h, w in ((3, 3), (7, 9), (14, 14), (16, 29), (30, 57))]


def _plane(c, name="x"):
    return tl.placeholder((1, c, tl.var("h"), tl.var("w")), name=name)


@pytest.mark.parametrize("c,w_shape,stride,padding,groups", [
    (3, (16, 3, 7, 7), 2, 3, 1),  # a stem conv: the oc-blocked path
    (8, (12, 4, 3, 3), 1, 1, 2),  # plain grouped
    (16, (16, 1, 3, 3), 2, 1, 16),  # depthwise, strided
    (8, (12, 8, 1, 1), 1, 0, 1),  # a 1x1 off the blocked path (12 channels)
    (8, (16, 8, 3, 1), 1, 1, 1),  # a 3x1 window (every column one tap)
], ids=["stem", "grouped", "depthwise", "pointwise", "tall_window"])
def test_conv2d_nchw_over_a_symbolic_plane(c, w_shape, stride, padding, groups):
    from tensorlang.ops import references as ref

    x, w = _plane(c), tl.placeholder(w_shape, name="w")
    out = ops.relu(ops.conv2d_nchw(x, w, stride=stride, padding=padding, groups=groups))
    check_sizes([x, w], out, lambda a, b: np.maximum(
        ref.conv2d_nchw(a, b, stride, padding, groups=groups), 0), PLANES, rtol=1e-4, atol=1e-4)


def test_blocked_convs_over_a_symbolic_plane():
    """The NCHW16c kernels a CNN's chain runs in: the blocked conv and the blocked depthwise
    conv (the NCHW-in conv writing NCHW16c and the blocked pools run in
    tests/graph/test_dynamic_conv.py's CNN, against onnxruntime)."""
    from tensorlang.ops import references as ref

    h, w = tl.var("h"), tl.var("w")
    x = tl.placeholder((1, 2, h, w, 16), name="x")
    wb = tl.placeholder((2, 2, 3, 3, 16, 16), name="wb")
    check_sizes([x, wb], ops.conv2d_nchwc(x, wb, padding=1), lambda a, b: ref.to_nchwc(
        ref.conv2d_nchw(ref.from_nchwc(a), _unblock_w(b), 1, 1), 16), PLANES, rtol=1e-4,
        atol=1e-4)
    wd = tl.placeholder((2, 1, 3, 3, 16), name="wd")
    check_sizes([x, wd], ops.depthwise_conv2d_nchwc(x, wd, stride=2, padding=1),
                lambda a, b: ref.to_nchwc(ref.conv2d_nchw(
                    ref.from_nchwc(a), b.transpose(0, 4, 1, 2, 3).reshape(32, 1, 3, 3), 2, 1,
                    groups=32), 16), PLANES, rtol=1e-4, atol=1e-4)


def test_pooling_over_a_symbolic_plane():
    from tensorlang.ops import references as ref

    x = _plane(16)
    check_sizes([x], ops.max_pool2d(x, 3, 2, 1), lambda a: ref.pool2d(a, 3, 2, 1, "max"),
                PLANES)
    box = np.full((16, 1, 3, 3), 1 / 9, np.float32)  # every window counts its 9 taps
    check_sizes([x], ops.avg_pool2d(x, 3, 2, 1, count_include_pad=True),
                lambda a: ref.conv2d_nchw(a, box, 2, 1, groups=16), PLANES)
    check_sizes([x], ops.avg_pool2d(x, 2, 2), lambda a: ref.pool2d(a, 2, 2, 0, "avg"), PLANES)
    check_sizes([x], ops.global_max_pool2d(x), lambda a: a.max((2, 3), keepdims=True), PLANES)


def test_conv_tiles_over_a_symbolic_plane_are_partitioned():
    """A 3x3 conv over a symbolic plane lowers as a static one does, in pieces: a row's first
    column tile (the left padding), the guard-free interior tiles from column tile 1, and the
    last tile; the first and last have a copy for whole tiles, without the right padding's
    guards where the row goes on past the tile and with the row's width a constant where it
    ends at it (guards folded per column). The last tile, where partial, is computed in half
    tiles, the second shifted inwards to end at the row's end (columns w - 7 .. w - 1). The
    task loop is the rows
    alone (`h * 2`: the entry checks make h >= 1, so the output height max(h - 1, 0) + 1 is
    h): no index is divided by a symbolic extent, so none is checked at run time."""
    h, w = tl.var("h"), tl.var("w")
    x = tl.placeholder((1, 4, h, w, 16), name="x")
    wt = tl.placeholder((4, 4, 3, 3, 16, 16), name="wt")
    y = ops.conv2d_nchwc(x, wt, padding=1)
    text = str(tl.lower(ops.default_schedule([y]), [x, wt, y]))
    entry, loops = text.split("  parallel for", 1)
    # the kernel's entry checks one whole window per axis, and nothing else is checked
    assert entry.count("checked(") == 2 and "checked(" not in loops, text
    assert "parallel for y.oco.outer.fused in range(h * 2):" in text, text
    assert "for z.outer in range(1, " in text, text  # the interior
    first, last = text.split("for z.outer in range(1, ")[0], text.split("for z.outer in ")[-1]
    assert "if w > 14:" in first and "if w == 14:" in first, text
    assert "if w - z.outer * 14 > 14:" in last and "if w - z.outer * 14 == 14:" in last, text
    # the shifted half tile's stores start at column w - 7 (16 floats a column)
    assert "w * 16 + z.inner * 16 - 112" in last, text


# rows whose last column tile is partial: past the row's first tile (15 = 14 + 1, ..., 43 = 3 *
# 14 + 1) its columns past a half tile, or all of them where fewer, are a half tile shifted
# inwards to end at the row's end (loop_partition._half_tiles), recomputing some; in a row of
# one tile (8 = 7 + 1, 10, 13) they stay guarded
SHIFTED = [{"h": 5, "w": w} for w in (8, 10, 13, 15, 16, 20, 27, 29, 43)]


def test_last_partial_column_tiles_are_shifted_inwards_and_match_numpy():
    from tensorlang.ops import references as ref

    h, w = tl.var("h"), tl.var("w")
    x = tl.placeholder((1, 2, h, w, 16), name="x")
    wb = tl.placeholder((2, 2, 3, 3, 16, 16), name="wb")
    y = ops.relu(ops.conv2d_nchwc(x, wb, padding=1))
    text = str(tl.lower(ops.default_schedule([y]), [x, wb, y], stop_after="simplify_partitioned"))
    assert "w + i3.inner - 7, i4]" in text, text
    check_sizes([x, wb], y, lambda a, b: np.maximum(ref.to_nchwc(ref.conv2d_nchw(
        ref.from_nchwc(a), _unblock_w(b), 1, 1), 16), 0), SHIFTED, rtol=1e-4, atol=1e-4)
    # (3x3: a 5x5 depthwise kernel over a symbolic plane takes 16 s of CPU to build, 3x3 4.5 s;
    # the stem below has the wider padding, 3)
    wd = tl.placeholder((2, 1, 3, 3, 16), name="wd")
    check_sizes([x, wd], ops.depthwise_conv2d_nchwc(x, wd, padding=1),
                lambda a, b: ref.to_nchwc(ref.conv2d_nchw(
                    ref.from_nchwc(a), b.transpose(0, 4, 1, 2, 3).reshape(32, 1, 3, 3), 1, 1,
                    groups=32), 16), SHIFTED, rtol=1e-4, atol=1e-4)
    xs, ws = _plane(3), tl.placeholder((16, 3, 7, 7), name="ws")
    wide = [{"h": 9, "w": 2 * d["w"]} for d in SHIFTED]  # output rows of 8 .. 43 columns
    check_sizes([xs, ws], ops.conv2d_nchw(xs, ws, stride=2, padding=3),
                lambda a, b: ref.conv2d_nchw(a, b, 2, 3), wide, rtol=1e-4, atol=1e-4)
    xp = _plane(16)
    check_sizes([xp], ops.max_pool2d(xp, 3, 1, 1), lambda a: ref.pool2d(a, 3, 1, 1, "max"),
                SHIFTED)


def test_a_tile_that_sums_into_its_output_is_not_recomputed():
    """A row sum whose column tiles add into the output element (a reduction over the split
    axis, its tile of inputs computed per tile): recomputing the last tile shifted inwards
    would add the columns it shares with the tile before twice, so it keeps its guards."""
    m, n = tl.var("m"), tl.var("n")
    a = tl.placeholder((m, n), name="a")
    b = tl.compute((m, n), lambda i, j: a[i, j] * 2.0, name="b")
    k = tl.reduce_axis((0, n), name="k")
    c = tl.compute((m,), lambda i: tl.sum(b[i, k], axis=k), name="c")
    s = tl.create_schedule(c)
    ko, ki = s[c].split(c.op.reduce_axis[0], factor=8)
    s[c].unroll(ki)
    s[b].compute_at(s[c], ko)
    from tensorlang.ir.functor import collect_vars
    from tensorlang.ir.simplify import Analyzer
    from tensorlang.lower.passes import loop_partition as lp

    body = tl.lower(s, [a, c], stop_after="guard_padded_reads").body
    loop = next(x for x in lp._loops(body) if x.loop_var.name == "k.outer")
    inside = lp._defined_inside(loop.body)
    assert collect_vars(loop.body) & inside and not lp._recomputable(loop.body)
    assert lp._shift_inwards(loop.body, loop.loop_var, Analyzer(), inside, []) is None
    f = tl.build(s, [a, c])
    for cols in (7, 13, 21, 8):
        x = _rand((3, cols))
        got = np.full(3, np.nan, np.float32)
        f(x, got)
        np.testing.assert_allclose(got, (x * 2).sum(1), rtol=1e-5, err_msg=f"{cols} columns")


def test_a_plane_without_a_whole_window_is_refused_by_the_kernel():
    # the conv's input of a symbolic height and a static width: its height is checked (a
    # symbolic width as well made it a 5.4 s build); the pool's plane is symbolic
    x, w = tl.placeholder((1, 16, tl.var("h"), 5), name="x"), tl.placeholder((16, 16, 3, 3),
                                                                              name="w")
    f = tl.build(ops.default_schedule([y := ops.conv2d_nchw(x, w)]), [x, w, y])
    out = np.zeros((1, 16, 1, 3), np.float32)
    f(np.ones((1, 16, 3, 5), np.float32), np.ones((16, 16, 3, 3), np.float32), out)
    assert (out == 144).all()
    with pytest.raises(tl.runtime.KernelError, match=r"conv2d_nchw: the input height h with padding "
                                             r"0 \+ 0 is smaller than the window \(3"):
        f(np.ones((1, 16, 2, 5), np.float32), np.ones((16, 16, 3, 3), np.float32), out)
    x = _plane(16)
    p = ops.max_pool2d(x, 2, 2)
    fp = tl.build(ops.default_schedule([p]), [x, p])
    with pytest.raises(tl.runtime.KernelError, match=r"max_pool2d: the input width w with padding"):
        fp(np.ones((1, 16, 4, 1), np.float32), np.zeros((1, 16, 2, 1), np.float32))


def test_window_ops_over_a_symbolic_plane_misuse():
    x, w = _plane(16), tl.placeholder((16, 16, 3, 3), name="w")
    with pytest.raises(ValueError, match=r"ceil_mode over the symbolic height h"):
        ops.max_pool2d(x, 3, 2, ceil_mode=True)
    with pytest.raises(ValueError, match=r"out_hw must be \(height, width\)"):
        ops.conv2d_nchw(x, w, out_hw=(tl.var("a"),))
    xs = tl.placeholder((1, 16, 8, 8), name="xs")
    with pytest.raises(ValueError, match=r"out_hw gives the height 7, the window gives 6"):
        ops.conv2d_nchw(xs, w, out_hw=(7, 6))


def test_matmul_prepacked_symbolic_rows():
    """The graph's dense with a constant weight packed at build time (pack_dense_weights)."""
    from tensorlang.ops import references as ref

    n = tl.var("n")
    a = tl.placeholder((n, 32), name="a")
    bp = tl.placeholder((3, 32, 16), name="bp")  # B [32, 40] in panels of 16 columns
    b = _rand((32, 40), seed=7)
    check_sizes([a, bp], ops.matmul_prepacked(a, bp, 40), lambda x, _p: x @ b, each(),
                rtol=1e-4, atol=1e-4,
                inputs=lambda v: [_rand((v["n"], 32)), ref.pack_matmul_weight(b)])
    with pytest.raises(ValueError, match=r"matmul_prepacked: dimension 1 of a must be a "
                                         r"constant \(K, the packed weight's\)"):
        ops.matmul_prepacked(tl.placeholder((n, tl.var("k")), name="a2"), bp, 40)


def test_narrow_dense_symbolic_rows():
    """Fewer output columns than a vector (a classifier's 10): the unpacked weight takes the
    k-vectorized dot products at any rows, the prepacked one a 2-row tile whose guarded last
    tile is short; both exact at every size."""
    from tensorlang.ops import references as ref
    from tensorlang.ops import schedule as S

    n = tl.var("n")
    x = tl.placeholder((n, 64), name="x")
    w = tl.placeholder((10, 64), name="w")
    out = ops.dense(x, w)
    assert S.matmul_takes_row_reduction(out.op)
    assert not S.matmul_takes_row_reduction(ops.dense(x, tl.placeholder((16, 64))).op)
    check_sizes([x, w], out, lambda x, w: x @ w.T, each(), rtol=1e-4, atol=1e-4)
    bp = tl.placeholder((1, 64, 16), name="bp")
    b = _rand((64, 10), seed=3)
    check_sizes([x, bp], ops.matmul_prepacked(x, bp, 10), lambda x, _p: x @ b, each(),
                rtol=1e-4, atol=1e-4,
                inputs=lambda v: [_rand((v["n"], 64)), ref.pack_matmul_weight(b)])


@pytest.mark.parametrize("knobs", [
    {"fit_rows": False},
    pytest.param({"tile_m": 6, "tile_n": 32}, marks=pytest.mark.slow),
    pytest.param({"rows_outer": True}, marks=pytest.mark.slow),
    pytest.param({"k_outer": False}, marks=pytest.mark.slow)])
def test_dense_symbolic_rows_under_the_schedule_knobs(knobs):
    n = tl.var("n")
    x = tl.placeholder((n, 32), name="x")
    w = tl.placeholder((40, 32), name="w")
    out = ops.dense(x, w)
    f = tl.build(ops.default_schedule([out], knobs=knobs), [x, w, out], name="sym_knobs")
    for m in (1, 7, 17):
        a, b = _rand((m, 32)), _rand((40, 32), seed=1)
        got = np.full((m, 40), np.nan, "float32")
        f(a, b, got)
        np.testing.assert_allclose(got, a @ b.T, rtol=1e-4, atol=1e-4, err_msg=f"{knobs} {m}")


# ----------------------------------------------------------------------------- masked vector tails


def test_runtime_tail_is_one_masked_vector_and_writes_nothing_past_the_end():
    n = tl.var("n")
    x = tl.placeholder((n,), name="x")
    out = ops.tanh(x)
    s = ops.default_schedule([out])
    text = str(tl.lower(s, [x, out]))
    assert "select(" in text and "for i0.inner" not in text, text  # no scalar tail loop
    f = tl.build(s, [x, out], name="masked_tail")
    for m in SIZES:
        a = _rand((m + 16,))
        buf = np.full(m + 16, 7.0, "float32")
        f(a[:m], buf[:m])
        np.testing.assert_allclose(buf[:m], np.tanh(a[:m]), rtol=1e-5, atol=1e-6)
        assert (buf[m:] == 7.0).all(), m


def test_integer_division_keeps_the_scalar_tail():
    """A masked-off lane would divide by the 0 its masked load gives (a trap on x86)."""
    n = tl.var("n")
    a = tl.placeholder((n,), dtype="int32", name="a")
    b = tl.placeholder((n,), dtype="int32", name="b")
    out = ops.mod(a, b)
    assert "for i0.inner" in str(tl.lower(ops.default_schedule([out]), [a, b, out]))
    check_sizes([a, b], out, np.mod, each(), inputs=lambda v: [
        np.arange(v["n"], dtype="int32") * 7 - 20, np.arange(v["n"], dtype="int32") % 5 + 1])


def test_attention_scores_small_sequence_uses_masked_panels():
    """q . k^T at a sequence shorter than a vector: the last column panel is masked vectors."""
    b, s = tl.var("batch"), tl.var("seq")
    q = tl.placeholder((b, 2, s, 16), name="q")
    kt = tl.placeholder((b, 2, 16, s), name="kt")
    out = ops.batch_matmul(q, kt)
    text = str(tl.lower(ops.default_schedule([out]), [q, kt, out]))
    assert "select(" in text, text
    check_sizes([q, kt], out, np.matmul, [{"batch": 1, "seq": v} for v in (1, 3, 8, 31)],
                rtol=1e-4, atol=1e-4)


def test_arange_like_symbolic_length_and_misuse():
    """ONNX Range up to a symbolic limit: start + delta * i over the length of x."""
    n = tl.var("n")
    x = tl.placeholder((n,), "int32", name="x")
    check_sizes([x], ops.arange_like(x, 5, 3), lambda a: (5 + 3 * np.arange(len(a))).astype(
        "int32"), each())
    with pytest.raises(ValueError, match=r"arange_like: x must be 1-D, got 2-D"):
        ops.arange_like(tl.placeholder((n, 2), "int32"))
    with pytest.raises(ValueError, match=r"arange_like: x must have an integer dtype, got "
                                         r"float32"):
        ops.arange_like(tl.placeholder((n,)))
    with pytest.raises(TypeError, match=r"arange_like: delta must be an int, got 0.5"):
        ops.arange_like(x, 0, 0.5)


def test_blocked_broadcast_multiply_over_a_symbolic_plane_fuses_rows_not_columns():
    """A squeeze-excite gate [1, C/8, 1, 1, 8] times a blocked map [1, C/8, h, w, 8]: the
    injective schedule's parallel loop fuses the axes above the row (the lanes are the
    innermost axis, the row w its outer's last); fusing w too divided every vector's index by w
    and h, with run-time checks (13x the static kernel's time)."""
    h, w = tl.var("h"), tl.var("w")
    x = tl.placeholder((1, 3, h, w, 8), name="x")
    g = tl.placeholder((1, 3, 1, 1, 8), name="g")
    out = ops.multiply(x, g)
    text = str(tl.lower(ops.default_schedule([out]), [x, g, out]))
    assert "// w" not in text and "% w" not in text, text
    check_sizes([x, g], out, lambda a, b: a * b, PLANES + [{"h": 1, "w": 1}])
