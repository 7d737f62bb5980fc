"""Library ops over extents that are expressions of several sizes (a vision transformer's
sequence of h * w patches, SegFormer's keys (h // 8) * (w // 8)): built once, checked against
numpy at several sizes, and free of what made them 5-50x their static kernels: a run-time check
per vector load (an extent isl cannot read) and a parallel loop fused over a symbolic extent
(each index divided by it)."""

from __future__ import annotations

import numpy as np
import pytest
from tensorlang.runtime import KernelError

import tensorlang as tl
from tensorlang.ir import expr as E
from tensorlang.ir.checks import IndexCheck
from tensorlang.ir.functor import Visitor, collect_vars, contains

ops = tl.ops


def _hw():
    return tl.var("h"), tl.var("w")


def _walk(func):
    """(run-time index checks, divisions or remainders by a non-constant, parallel loops,
    shuffles) in a lowered kernel, not counting the kernel's entry checks."""
    found = {"checks": 0, "symbolic_div": 0, "parallel": [], "shuffles": 0}

    class _F(Visitor):
        def visit_For(self, s):
            if s.kind == "parallel":
                found["parallel"].append(s)
            self.generic(s)

        def visit_Load(self, e):
            found["checks"] += sum(contains(i, IndexCheck) for i in e.indices)
            self.generic(e)

        def visit_FloorDiv(self, e):
            found["symbolic_div"] += E.as_int(e.b) is None and not isinstance(e.b, E.Broadcast)
            self.generic(e)

        visit_FloorMod = visit_FloorDiv

        def visit_Shuffle(self, e):
            found["shuffles"] += 1
            self.generic(e)

    _F().visit(func.body)
    return found


def _build_and_check(ins, out, ref, sizes_list):
    s = ops.default_schedule([out])
    func = tl.lower(s, [*ins, out])
    f = tl.build(ops.default_schedule([out]), [*ins, out])
    rng = np.random.default_rng(0)
    names = {v.name for t in (*ins, out) for d in t.shape for v in collect_vars(d)}
    for h, w in sizes_list:
        env = {"h": h, "w": w}
        shape = [[int(tl.ir.simplify.simplify(_bind(d, env))) if E.as_int(d) is None
                  else E.as_int(d) for d in t.shape] for t in (*ins, out)]
        arrays = [rng.uniform(-2, 2, sh).astype("float32") for sh in shape[:-1]]
        got = np.full(shape[-1], np.nan, "float32")
        f(*arrays, got, **{k: v for k, v in env.items() if k in names})
        np.testing.assert_allclose(got, ref(*arrays), rtol=2e-5, atol=2e-5,
                                   err_msg=f"h={h}, w={w}")
    return func


def _bind(e, env):
    from tensorlang.ir.functor import Mutator

    class _Sub(Mutator):
        def visit_Var(self, v):
            return E.const(env[v.name], v.dtype) if v.name in env else v

    return _Sub().visit(e)


SIZES = [(1, 1), (4, 5), (16, 9), (33, 47)]


def _softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_softmax_over_a_product_of_sizes_has_no_run_time_checks():
    h, w = _hw()
    x = tl.placeholder((1, 1, h * w, (h // 2 + 1) * (w // 2 + 1)), name="x")
    func = _build_and_check([x], ops.softmax(x), _softmax, SIZES)
    got = _walk(func)
    assert got["checks"] == 0, func
    # one task per row: the unit axes above the rows are not the parallel loop
    (par,) = got["parallel"]
    assert E.as_int(par.extent) is None


def test_unit_batch_attention_scores_are_not_fused_over_a_symbolic_extent():
    h, w = _hw()
    q = tl.placeholder((1, 1, h * w, 32), name="q")
    kt = tl.placeholder((1, 1, 32, (h // 2 + 1) * (w // 2 + 1)), name="kt")
    scores = ops.multiply(ops.matmul(q, kt), 0.25)
    func = _build_and_check([q, kt], scores, lambda a, b: (a @ b) * 0.25, SIZES)
    got = _walk(func)
    assert got["symbolic_div"] == 0 and got["checks"] == 0, func


def test_transpose_of_a_symbolic_sequence_runs_in_register_tiles():
    h, w = _hw()
    x = tl.placeholder((1, h * w, 64), name="x")
    func = _build_and_check([x], ops.transpose(x, (0, 2, 1)),
                            lambda a: a.transpose(0, 2, 1).copy(), SIZES)
    got = _walk(func)
    assert got["shuffles"] > 0 and got["checks"] == 0, func


@pytest.mark.parametrize("channels, parallel_extent", [(128, 128), (8, None)])
def test_elementwise_over_a_symbolic_plane_takes_its_tasks_without_symbolic_division(
        channels, parallel_extent):
    """Many channels: they are the tasks; few: the rows are (the channels loop around them)."""
    h, w = _hw()
    x = tl.placeholder((1, channels, h, w), name="x")
    y = tl.placeholder((1, channels, h, w), name="y")
    out = ops.relu(ops.add(x, y))
    # the parallel split needs enough work: the symbolic extents count as 64 each
    func = _build_and_check([x, y], out, lambda a, b: np.maximum(a + b, 0), SIZES)
    got = _walk(func)
    assert got["symbolic_div"] == 0 and got["checks"] == 0, func
    (par,) = got["parallel"]
    assert E.as_int(par.extent) == parallel_extent


def test_a_gathered_index_is_still_checked_at_run_time():
    """An index loaded from memory stays unknown to the proof: checked, and a bad one refused."""
    n = tl.var("n")
    table = tl.placeholder((n, 4), name="table")
    idx = tl.placeholder((3,), "int64", name="idx")
    out = tl.compute((3, 4), lambda i, j: table[idx[i], j], name="out")
    s = tl.create_schedule(out)
    f = tl.build(s, [table, idx, out])
    t = np.arange(20, dtype="float32").reshape(5, 4)
    got = np.zeros((3, 4), "float32")
    f(t, np.array([4, 0, 2]), got)
    np.testing.assert_array_equal(got, t[[4, 0, 2]])
    with pytest.raises(KernelError, match="index out of bounds in table"):
        f(t, np.array([4, 5, 2]), got)


def test_a_split_product_of_sizes_is_proven_in_bounds():
    """The pass itself, on a hand schedule: a product of sizes split by 16 (whole vectors, then
    a guarded tail) needs no run-time check."""
    h, w = _hw()
    a = tl.placeholder((h * w,), name="a")
    b = tl.compute((h * w,), lambda i: a[i] * 2.0, name="b")
    s = tl.create_schedule(b)
    _, inner = s[b].split(b.op.axis[0], factor=16)
    s[b].vectorize(inner)
    assert _walk(tl.lower(s, [a, b]))["checks"] == 0


def test_a_strided_depthwise_conv_whose_output_rows_are_written_another_way():
    """A 5x5 stride-2 depthwise conv + relu over a plane of (h + 3) // 4 rows, its output rows
    given as (h + 7) // 8 (the same number, another form: a graph's canonical shapes).
    loop_partition's last-row piece split the kernel-row loop (guarded by the bottom padding,
    like a tile's columns) in two halves that each started the accumulator afresh and stored
    it: the last output row lost its first kernel rows' terms."""
    h = tl.var("h")  # (the width static: the rows are what matters; the build is 3x shorter)
    x = tl.placeholder((1, 1, (h + 3) // 4, 9, 16), name="x")
    k = tl.placeholder((1, 1, 5, 5, 16), name="k")
    out = ops.relu(ops.depthwise_conv2d_nchwc(x, k, 2, 2, out_hw=((h + 7) // 8, 5)))

    def ref(a, b):
        pad = np.pad(a[0, 0], ((2, 2), (2, 2), (0, 0)))
        oh, ow = (a.shape[2] + 1) // 2, (a.shape[3] + 1) // 2
        y = np.zeros((oh, ow, 16), "float64")
        for r in range(5):
            for c in range(5):
                y += pad[r:r + 2 * oh:2, c:c + 2 * ow:2] * b[0, 0, r, c]
        return np.maximum(y, 0)[None, None].astype("float32")

    _build_and_check([x, k], out, ref, [(64, 1), (49, 1), (8, 1), (33, 1)])
