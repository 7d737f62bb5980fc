"""int8 kernels (ops/quant_kernels.py, default schedules, no tuning) against onnxruntime's int8
operators on the same integers: dense vs MatMulInteger (uint8 x int8 -> int32, with the
activations' zero point), conv2d vs ConvInteger (uint8 NCHW x int8 OIHW -> int32), and conv2d
with the requantization to uint8 fused (schedule's out=) vs QLinearConv; depthwise likewise
with group = C.

Ours reads NCHW16c activations (NCHW4c for 3 input channels) and packed weights (a graph keeps
the blocked layout between convs and packs constant weights at build time): the layout
transform is not timed; onnxruntime gets NCHW. Every contender's result is checked equal (int32) before timing.

Each round times each contender as the median of `number` calls after a pause (worker threads of
either runtime spin for a while after a call); rounds alternate ours / onnxruntime, the order
rotating, and the median over rounds is reported with the best round. GOPS = 2 * multiply-adds
per second; % of the int8 VNNI peak that benchmarks/peak.py measures in the same run.

    python benchmarks/int8_ops.py [--rounds 7] [--threads 0] [--only dense,conv]
        [--target "llvm -mattr=-avx512vnni"]   # ours on the fallback (no VNNI)"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import tensorlang as tl
from tensorlang.ops import quant_kernels as qk

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peak

PAUSE_S = 0.25


def _session(nodes, inputs, inits, out_name="y", out_type=None, opset=13):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    types = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}
    vis = [helper.make_tensor_value_info(n, types[a.dtype.type], a.shape) for n, a in inputs]
    out = helper.make_tensor_value_info(out_name, out_type or TensorProto.INT32, None)
    g = helper.make_graph(nodes, "g", vis, [out],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = ARGS.threads
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = dict(inputs)
    return lambda: sess.run(None, feed)[0]


def dense_case(m, n, k, a_zero=7):
    from onnx import helper

    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    wp, colsum = qk.pack_dense_weight(w)
    A = tl.placeholder((m, k), "uint8", name="A")
    W = tl.placeholder(wp.shape, "int8", name="W")
    CS = tl.placeholder((n,), "int32", name="CS")
    Y = qk.dense_int8(A, W, n, a_zero, 0, CS)
    s = tl.create_schedule(Y)
    qk.schedule_dense_int8(s, Y, parallel=ARGS.threads != 1)
    f = tl.build(s, [A, W, CS, Y], target=ARGS.target)
    y = np.empty((m, n), np.int32)
    ours = lambda: f(a, wp, colsum, y)
    node = helper.make_node("MatMulInteger", ["a", "b", "za"], ["y"])
    ort = _session([node], [("a", a)], [("b", np.ascontiguousarray(w.T)),
                                        ("za", np.array(a_zero, np.uint8))])
    ours()
    assert np.array_equal(y, ort()), "dense: ours != MatMulInteger"
    return f"dense {m}x{n}x{k}", 2 * m * n * k, ours, {"MatMulInteger": ort}


def _blocked(x, cb=16):
    """NCHW -> NCHW[cb]c, channels zero padded."""
    n, c, h, w = x.shape
    cp = -(-c // cb) * cb
    xp = np.zeros((n, cp, h, w), x.dtype)
    xp[:, :c] = x
    return np.ascontiguousarray(xp.reshape(n, cp // cb, cb, h, w).transpose(0, 1, 3, 4, 2))


def _requantize(y, multiplier: float, zero: int):
    """QLinearConv's output step on our int32 result, as a fused tail: round half to even of
    acc * multiplier (float32), plus the zero point, saturated to uint8."""
    def f(*i):
        q = tl.round(y[i].astype("float32") * tl.const(multiplier, "float32")) + float(zero)
        return tl.max(tl.min(q, tl.const(255.0, "float32")), tl.const(0.0, "float32")) \
            .astype("uint8")

    return tl.compute(y.shape, f, name="requantize")


def _conv_kernel(xb, wp, sums_p, stride, pad, x_zero, depthwise, requant):
    """Ours: the conv (int32) or the conv with the requantization fused (uint8)."""
    X = tl.placeholder(xb.shape, "uint8", name="X")
    Wt = tl.placeholder(wp.shape, "int8", name="W")
    S = tl.placeholder(sums_p.shape, "int32", name="S")
    make = qk.depthwise_conv2d_int8_nchwc if depthwise else qk.conv2d_int8_nchwc
    Y = make(X, Wt, stride, pad, x_zero, S)
    out = _requantize(Y, QSCALE, QZERO) if requant else Y
    s = tl.create_schedule(out)
    (qk.schedule_depthwise_int8 if depthwise else qk.schedule_conv2d_int8)(
        s, Y, parallel=ARGS.threads != 1, out=out)
    f = tl.build(s, [X, Wt, S, out], target=ARGS.target)
    res = np.empty(tuple(int(d.value) for d in Y.shape), out.dtype)
    return (lambda: f(xb, wp, sums_p, res)), res


XS, WS, YS, QZERO = 0.02, 0.01, 0.5, 128
QSCALE = float(np.float32(XS) * np.float32(WS) / np.float32(YS))


def _from_blocked(y, c):
    return y.transpose(0, 1, 4, 2, 3).reshape(1, -1, *y.shape[2:4])[:, :c]


def conv_case(c, hw, oc, k, stride, depthwise=False, x_zero=3):
    """Two rows: ours (int32) vs ConvInteger, ours with the requantization fused (uint8) vs
    QLinearConv (both as the same integers, the second within 1 step: float rounding of the
    scale)."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(1)
    pad = k // 2
    x = rng.integers(0, 256, (1, c, hw, hw), dtype=np.uint8)
    w = rng.integers(-127, 128, (c, 1, k, k) if depthwise else (oc, c, k, k), dtype=np.int8)
    cb = 4 if c <= 4 and not depthwise else 16  # an image's 3 channels: blocks of 4
    wp, sums = qk.pack_depthwise_weight(w) if depthwise else qk.pack_conv_weight(w, cb)
    sums_p = np.zeros(-(-w.shape[0] // 16) * 16, np.int32)
    sums_p[:w.shape[0]] = sums
    xb = _blocked(x, cb)
    ours, y = _conv_kernel(xb, wp, sums_p, stride, pad, x_zero, depthwise, False)
    ours_q, yq = _conv_kernel(xb, wp, sums_p, stride, pad, x_zero, depthwise, True)
    attrs = {"strides": [stride] * 2, "pads": [pad] * 4, "group": c if depthwise else 1}
    conv = helper.make_node("ConvInteger", ["x", "w", "zx"], ["y"], **attrs)
    inits = [("w", w), ("zx", np.array(x_zero, np.uint8))]
    conv_int = _session([conv], [("x", x)], inits)
    ours()
    assert np.array_equal(_from_blocked(y, w.shape[0]), conv_int()), "ours != ConvInteger"
    q = helper.make_node("QLinearConv", ["x", "xs", "zx", "w", "ws", "zw", "ys", "zy"], ["y"],
                         **attrs)
    qinits = [("xs", np.array(XS, np.float32)), ("zx", np.array(x_zero, np.uint8)),
              ("w", w), ("ws", np.array(WS, np.float32)), ("zw", np.array(0, np.int8)),
              ("ys", np.array(YS, np.float32)), ("zy", np.array(QZERO, np.uint8))]
    qconv = _session([q], [("x", x)], qinits, out_type=TensorProto.UINT8)
    ours_q()
    diff = np.abs(_from_blocked(yq, w.shape[0]).astype(int) - qconv().astype(int))
    assert diff.max() <= 1, f"ours + requantize vs QLinearConv: {diff.max()} steps apart"
    what = f"{'depthwise' if depthwise else 'conv'} {c}x{hw}^2->{w.shape[0]} k{k} s{stride}"
    macs = (1 if depthwise else c) * y.shape[1] * 16 * y.shape[2] * y.shape[3] * k * k
    return [(what, 2 * macs, ours, {"ConvInteger": conv_int}),
            (f"{what} +requant", 2 * macs, ours_q, {"QLinearConv": qconv})]


def _median_time(fn, number: int) -> float:
    fn()
    times = []
    for _ in range(number):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name, ops, ours, peers, peak_gops):
    contenders = {"ours": ours, **peers}
    rounds = {c: [] for c in contenders}
    order = list(contenders)
    for r in range(ARGS.rounds):
        for c in order[r % len(order):] + order[:r % len(order)]:
            time.sleep(PAUSE_S)
            rounds[c].append(_median_time(contenders[c], ARGS.number))
    med = {c: statistics.median(v) for c, v in rounds.items()}
    best = {c: min(v) for c, v in rounds.items()}
    gops = ops / med["ours"] / 1e9
    row = (f"{name:40s} ours {med['ours'] * 1e3:8.3f} ms (best {best['ours'] * 1e3:7.3f}) "
           f"{gops:6.0f} GOPS {100 * gops / peak_gops:5.1f}% of peak")
    for p in peers:
        row += f" | {p} {med[p] * 1e3:8.3f} ms ratio {med[p] / med['ours']:5.2f}" \
               f" (best {best[p] / best['ours']:5.2f})"
    print(row, flush=True)


CASES = {
    "dense": [(128, 768, 768), (128, 3072, 768), (128, 768, 3072), (1, 768, 768)],
    "conv": [(64, 56, 64, 3, 1), (128, 28, 128, 3, 1), (256, 14, 256, 3, 1), (512, 7, 512, 3, 1),
             (256, 56, 64, 1, 1), (64, 56, 256, 1, 1), (3, 224, 64, 7, 2)],
    "depthwise": [(128, 56, 128, 3, 1), (256, 28, 256, 3, 2)],
}


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--number", type=int, default=20)
    p.add_argument("--threads", type=int, default=0, help="0: all cores (both runtimes)")
    p.add_argument("--only", default="dense,conv,depthwise")
    p.add_argument("--target", default="llvm",
                   help="ours' target: 'llvm -mattr=-avx512vnni' times the fallback")
    ARGS = p.parse_args()
    res = peak.measure_peak(kind="vnni")
    key = "1 core" if ARGS.threads == 1 else "all cores"
    print(f"CPU {res['cpu']}; int8 VNNI peak ({key}) best {res[key][0]:.0f} GOPS; "
          f"load {os.getloadavg()[0]:.1f}; threads {ARGS.threads or 'all'}; "
          f"ours built for {ARGS.target!r}; "
          f"{time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    for kind in ARGS.only.split(","):
        for args in CASES[kind]:
            if kind == "dense":
                cases = [dense_case(*args)]
            else:
                cases = conv_case(*args, depthwise=kind == "depthwise")
            for case in cases:
                measure(*case, res[key][0])
    print(f"load after {os.getloadavg()[0]:.1f}")


ARGS = None

if __name__ == "__main__":
    main()
