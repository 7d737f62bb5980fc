"""Library ops built once over symbolic extents vs the same op built at each constant size
(issue 19): GFLOP/s of both and the ratio static / symbolic time (> 1: the symbolic kernel is
slower; the target is <= 1.15x at every size).

Cases: dense 768x768 (+bias; the weight packed per call), dense_prepacked (the weight packed
at build time, as graph/passes/pack_dense_weights does), the int8 dense of quantized models
(dense_integer, vpdpbusd: "GFLOP/s" is G int8 ops per second) 384 -> 1536 and back, an attention's q . k^T and p . v
(batch x 12 heads x seq, head dim 64), its softmax [batch, 12, seq, seq], layer_norm over 768,
bias + gelu over 3072, a ResNet 3x3 conv 64 -> 64 on 56x56 (+relu) at batch 1-8, and 3x3 convs
in NCHW16c over a symbolic height and width (64 and 256 channels, +relu), and the NCHW <->
NCHW16c layout transforms over a symbolic plane. For the row ops (softmax, layer_norm,
bias_gelu) and the layout transforms the "GFLOP/s" column is G elements per second.
One symbolic kernel per op (default schedule); for each size a static kernel with the same
default schedule. Each round times the symbolic and the static kernel alternately (median of
`number` calls, 0.25 s pause before each: the machine is shared); the median over rounds is
reported. The CPU and the load average are printed with the table.

    python benchmarks/symbolic_ops.py [--rounds 5] [--only dense,batch_matmul,conv2d]
                                      [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import tensorlang as tl

ops = tl.ops
PAUSE_S = 0.25


def _dense(dims):
    m, k, n = dims
    x = tl.placeholder((m, k), name="x")
    w = tl.placeholder((n, k), name="w")
    b = tl.placeholder((n,), name="b")
    return [x, w, b], ops.dense(x, w, b)


def _dense_prepacked(dims):
    """The graph's dense with a constant weight: packed at build time (pack_dense_weights)."""
    m, k, n = dims
    x = tl.placeholder((m, k), name="x")
    wp = tl.placeholder((-(-n // 16), k, 16), name="wp")
    return [x, wp], ops.matmul_prepacked(x, wp, n)


def _dense_integer(dims):
    """The graph's int8 product (a QDQ or MatMulInteger model's, ops/quant.py): int8 rows
    times a weight packed for vpdpbusd, the zero point's shift compensated by column sums."""
    from tensorlang.ops import quant

    m, k, n = dims
    a = tl.placeholder((m, k), "int8", name="a")
    wp = tl.placeholder((-(-n // 16), -(-k // 4), 16, 4), "int8", name="wp")
    colsum = tl.placeholder((n,), "int32", name="colsum")
    return [a, wp, colsum], quant.dense_integer(a, wp, colsum, n)


def _bmm(dims):
    b, h, s, d = dims
    q = tl.placeholder((b, h, s, d), name="q")
    kt = tl.placeholder((b, h, d, s), name="kt")
    return [q, kt], ops.batch_matmul(q, kt)


def _bmm_v(dims):
    b, h, s, d = dims
    p = tl.placeholder((b, h, s, s), name="p")
    v = tl.placeholder((b, h, s, d), name="v")
    return [p, v], ops.batch_matmul(p, v)


def _softmax(dims):
    b, h, s = dims
    x = tl.placeholder((b, h, s, s), name="x")
    return [x], ops.softmax(x)


def _layer_norm(dims):
    b, s, c = dims
    x = tl.placeholder((b, s, c), name="x")
    g = tl.placeholder((c,), name="g")
    be = tl.placeholder((c,), name="be")
    return [x, g, be], ops.layer_norm(x, g, be)


def _bias_gelu(dims):
    b, s, c = dims
    x = tl.placeholder((b, s, c), name="x")
    bias = tl.placeholder((c,), name="bias")
    return [x, bias], ops.gelu(ops.add(x, bias))


def _conv(dims):
    n, c, hw, oc = dims
    x = tl.placeholder((n, c, hw, hw), name="x")
    w = tl.placeholder((oc, c, 3, 3), name="w")
    return [x, w], ops.relu(ops.conv2d_nchw(x, w, padding=1))


def _conv_plane(dims):
    c, h, w = dims  # a 3x3 conv in the blocked layout a CNN's chain runs in, over an H x W plane
    x = tl.placeholder((1, c // 16, h, w, 16), name="x")
    wt = tl.placeholder((c // 16, c // 16, 3, 3, 16, 16), name="w")
    return [x, wt], ops.relu(ops.conv2d_nchwc(x, wt, padding=1))


def _layout(dims, to_blocked):
    c, h, w = dims  # a graph's NCHW <-> NCHW16c transform (convert_layout) over an H x W plane
    if to_blocked:
        x = tl.placeholder((1, c, h, w), name="x")
        return [x], ops.layout_transform(x, "NCHW", "NCHW16c")
    x = tl.placeholder((1, c // 16, h, w, 16), name="x")
    return [x], ops.layout_transform(x, "NCHW16c", "NCHW")


def _planes(*hw):
    return [{"H": h, "W": w} for h, w in hw]


# name -> (declare(dims), symbolic dims (tl.var names in place), sizes: list of var bindings,
#          flops(bindings))
CASES = {
    "dense": (_dense, ("M", 768, 768), [{"M": m} for m in (8, 32, 128, 384, 1000, 4096)],
              lambda v: 2 * v["M"] * 768 * 768),
    "dense_prepacked": (_dense_prepacked, ("M", 768, 768),
                        [{"M": m} for m in (8, 32, 128, 384, 1000, 4096)],
                        lambda v: 2 * v["M"] * 768 * 768),
    # int8 (VNNI) over a symbolic row count: a Whisper encoder's MLP shapes (smart-turn), row
    # counts of one partial tile, prime (a ViT's 197 tokens) and whole tiles
    "dense_integer": (_dense_integer, ("M", 384, 1536),
                      [{"M": m} for m in (1, 7, 64, 197, 200, 1500)],
                      lambda v: 2 * v["M"] * 384 * 1536),
    "dense_integer_down": (_dense_integer, ("M", 1536, 384),
                           [{"M": m} for m in (1, 7, 64, 197, 200, 1500)],
                           lambda v: 2 * v["M"] * 1536 * 384),
    "batch_matmul_qk": (_bmm, ("B", 12, "S", 64), [{"B": 1, "S": s} for s in (8, 64, 128, 384)]
                        + [{"B": 4, "S": 128}], lambda v: 2 * v["B"] * 12 * v["S"] ** 2 * 64),
    "batch_matmul_pv": (_bmm_v, ("B", 12, "S", 64), [{"B": 1, "S": s} for s in (8, 64, 128, 384)]
                        + [{"B": 4, "S": 128}], lambda v: 2 * v["B"] * 12 * v["S"] ** 2 * 64),
    # row ops: "GFLOP/s" here is G elements per second
    "softmax": (_softmax, ("B", 12, "S"), [{"B": 1, "S": s} for s in (8, 64, 128, 384)],
                lambda v: v["B"] * 12 * v["S"] ** 2),
    "layer_norm": (_layer_norm, ("B", "S", 768), [{"B": 1, "S": s} for s in (8, 128, 512)]
                   + [{"B": 8, "S": 128}], lambda v: v["B"] * v["S"] * 768),
    "bias_gelu": (_bias_gelu, ("B", "S", 3072), [{"B": 1, "S": s} for s in (8, 128, 512)],
                  lambda v: v["B"] * v["S"] * 3072),
    "conv2d": (_conv, ("N", 64, 56, 64), [{"N": n} for n in (1, 2, 4, 8)],
               lambda v: 2 * v["N"] * 64 * 56 * 56 * 64 * 9),
    # over a symbolic height and width (a CNN exported with dynamic axes): row widths that are
    # whole register tiles (14 columns), one tile, ragged, and under one tile
    "conv2d_plane": (_conv_plane, (64, "H", "W"), _planes((56, 56), (28, 28), (14, 14),
                                                          (57, 61), (30, 20)),
                     lambda v: 2 * 64 * 64 * 9 * v["H"] * v["W"]),
    "conv2d_plane_256": (_conv_plane, (256, "H", "W"), _planes((28, 28), (14, 14), (7, 7),
                                                               (10, 8)),
                         lambda v: 2 * 256 * 256 * 9 * v["H"] * v["W"]),
    # planes of powers of two (UNets, SegFormer): every row ends in a ragged tile (16 = 14 + 2)
    "conv2d_plane_pow2": (_conv_plane, (64, "H", "W"), _planes((16, 16), (32, 32), (64, 64),
                                                               (128, 128)),
                          lambda v: 2 * 64 * 64 * 9 * v["H"] * v["W"]),
    # layout transforms: "GFLOP/s" is G elements per second; rows of whole 16-column tiles,
    # a ragged last tile, none, and a 3-channel input (its block zero-padded)
    "layout_to_blocked": (lambda d: _layout(d, True), (64, "H", "W"),
                          _planes((56, 56), (28, 28), (30, 20), (57, 61), (128, 128)),
                          lambda v: 64 * v["H"] * v["W"]),
    "layout_to_blocked_c3": (lambda d: _layout(d, True), (3, "H", "W"),
                             _planes((64, 96), (128, 128)), lambda v: 16 * v["H"] * v["W"]),
    "layout_from_blocked": (lambda d: _layout(d, False), (64, "H", "W"),
                            _planes((56, 56), (28, 28), (30, 20), (57, 61), (128, 128)),
                            lambda v: 64 * v["H"] * v["W"]),
}


def _concrete(dims, sizes):
    return tuple(sizes[d] if isinstance(d, str) else d for d in dims)


def _symbolic(dims):
    names = {d for d in dims if isinstance(d, str)}
    vs = {nm: tl.var(nm) for nm in sorted(names)}
    return tuple(vs[d] if isinstance(d, str) else d for d in dims)


def _build(declare, dims, name):
    ins, out = declare(dims)
    s = ops.default_schedule([out])
    return tl.build(s, [*ins, out], name=name), ins, out


def _arrays(ins, out, sizes):
    rng = np.random.default_rng(0)

    def extent(d):  # an extent at these sizes (an expression of them: a conv's output)
        from tensorlang.ir.functor import collect_vars, substitute

        bound = {v: tl.ir.expr.const(sizes[v.name], v.dtype) for v in collect_vars(d)}
        return int(tl.ir.expr.as_int(tl.ir.simplify.simplify(substitute(d, bound))))

    def shape(t):
        return tuple(extent(d) for d in t.shape)

    def values(t):  # integers over an integer type's range (int8's products), else [-1, 1)
        if np.issubdtype(np.dtype(t.dtype), np.integer):
            info = np.iinfo(t.dtype)
            lo, hi = max(info.min, -1000), min(info.max, 1000)
            return rng.integers(lo, hi + 1, shape(t)).astype(t.dtype)
        return rng.uniform(-1, 1, shape(t)).astype(t.dtype)

    args = [values(t) for t in ins]
    return args + [np.zeros(shape(out), out.dtype)]


def _median_call(f, args, number):
    timer = f.time_evaluator(number=number, repeat=1)
    time.sleep(PAUSE_S)
    return timer(*args).median


def run_case(name, rounds):
    declare, dims, sizes, flops = CASES[name]
    sym, ins, out = _build(declare, _symbolic(dims), f"sym_{name}")
    rows = []
    for v in sizes:
        stat, _, _ = _build(declare, _concrete(dims, v), f"static_{name}")
        args = _arrays(ins, out, v)
        want = np.zeros_like(args[-1])
        stat(*args[:-1], want)
        sym(*args)
        np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4)
        fl = flops(v)
        number = max(3, min(200, int(2e9 / fl)))
        ts, tc = [], []
        for _ in range(rounds):
            ts.append(_median_call(sym, args, number))
            tc.append(_median_call(stat, args, number))
        s, c = statistics.median(ts), statistics.median(tc)
        rows.append((name, v, fl / s / 1e9, fl / c / 1e9, s / c))
        print(f"{name:16s} {v!s:22s} symbolic {fl / s / 1e9:7.1f} GFLOP/s  "
              f"static {fl / c / 1e9:7.1f} GFLOP/s  sym/static time {s / c:5.2f}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    tl.runtime.set_num_threads(args.threads)
    import llvmlite.binding as llvm

    print(f"cpu {llvm.get_host_cpu_name()}, threads {args.threads}, load {os.getloadavg()}")
    for name in args.only.split(","):
        run_case(name, args.rounds)
    print(f"load after {os.getloadavg()}")


if __name__ == "__main__":
    main()
