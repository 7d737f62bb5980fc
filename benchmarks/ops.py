"""Operator-library speed against numpy and onnxruntime (one-node ONNX models), default
schedules, no tuning. Interleaved rounds (ours, numpy, onnxruntime, ours, ...), the median of each
is reported; ratio = peer time / our time (> 1: we are faster).

    python benchmarks/ops.py [--rounds 7] [--only matmul,softmax]"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tensorlang as tl

ops = tl.ops


def _ort(node_op, inputs, out_shape, attrs=None, extra_inits=None):
    """A one-node ONNX model run by onnxruntime; returns a zero-argument callable or None."""
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    names = [f"x{i}" for i in range(len(inputs))]
    vis = [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
           for n, a in zip(names, inputs)]
    inits = []
    node_inputs = list(names)
    for k, (nm, arr) in enumerate((extra_inits or {}).items()):
        inits.append(onnx.numpy_helper.from_array(arr, nm))
        node_inputs.append(nm)
    node = helper.make_node(node_op, node_inputs, ["y"], **(attrs or {}))
    g = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, out_shape)], initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 0
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = dict(zip(names, inputs))
    return lambda: sess.run(None, feed)


def _ours(out, ins, arrays):
    s = ops.default_schedule(out)
    f = tl.build(s, ins + [out], name="bench")
    res = np.zeros(tuple(int(d.value) for d in out.shape), out.dtype)
    return lambda: f(*arrays, res)


def _time(fn, min_s=0.05):
    fn()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_s:
            return t / n
        n *= 2


def workloads():
    r = np.random.default_rng(0)

    def f32(*s):
        return r.standard_normal(s).astype("float32")

    for n in (512, 1024):
        a, b = f32(n, n), f32(n, n)
        A, B = tl.placeholder(a.shape, name="A"), tl.placeholder(b.shape, name="B")
        yield (f"matmul {n}^3", 2 * n ** 3, 0, _ours(ops.matmul(A, B), [A, B], [a, b]),
               lambda a=a, b=b: a @ b, _ort("MatMul", [a, b], [n, n]))
    x, w = f32(1, 2048), f32(2048, 1000)
    X, W = tl.placeholder(x.shape, name="X"), tl.placeholder(w.shape, name="W")
    yield ("dense 1x2048.2048x1000", 2 * 2048 * 1000, 0, _ours(ops.matmul(X, W), [X, W], [x, w]),
           lambda: x @ w, _ort("MatMul", [x, w], [1, 1000]))
    for (c, hw, oc, k, pad) in ((64, 56, 64, 3, 1), (256, 14, 256, 3, 1), (256, 56, 64, 1, 0)):
        x, w = f32(1, c, hw, hw), f32(oc, c, k, k)
        flops = 2 * oc * hw * hw * c * k * k
        xb = x.reshape(1, c // 16, 16, hw, hw).transpose(0, 1, 3, 4, 2).copy()
        wb = w.reshape(oc // 16, 16, c // 16, 16, k, k).transpose(0, 2, 4, 5, 3, 1).copy()
        XB, WB = tl.placeholder(xb.shape, name="X"), tl.placeholder(wb.shape, name="W")
        ours = _ours(ops.conv2d_nchwc(XB, WB, padding=pad), [XB, WB], [xb, wb])
        yield (f"conv2d NCHW16c 1x{c}x{hw}^2->{oc} {k}x{k}", flops, 0, ours, None,
               _ort("Conv", [x], [1, oc, hw, hw], {"pads": [pad] * 4}, {"w": w}))
    x, w = f32(1, 256, 28, 28), f32(256, 1, 3, 3)
    X, W = tl.placeholder(x.shape, name="X"), tl.placeholder(w.shape, name="W")
    yield ("depthwise 1x256x28^2 3x3", 2 * 256 * 28 * 28 * 9, 0,
           _ours(ops.depthwise_conv2d_nchw(X, W, padding=1), [X, W], [x, w]), None,
           _ort("Conv", [x], [1, 256, 28, 28], {"pads": [1] * 4, "group": 256}, {"w": w}))
    x = f32(4096, 1024)
    X = tl.placeholder(x.shape, name="X")

    def np_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    yield ("softmax 4096x1024", 0, 2 * x.nbytes, _ours(ops.softmax(X), [X], [x]), np_softmax,
           _ort("Softmax", [x], list(x.shape), {"axis": -1}))
    g, b = f32(1024), f32(1024)
    G, Bt = tl.placeholder((1024,), name="G"), tl.placeholder((1024,), name="Bt")

    def np_ln():
        mu = x.mean(axis=1, keepdims=True)
        return (x - mu) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * g + b

    yield ("layer norm 4096x1024", 0, 2 * x.nbytes,
           _ours(ops.layer_norm(X, G, Bt), [X, G, Bt], [x, g, b]), np_ln,
           _ort("LayerNormalization", [x], list(x.shape), {"axis": -1},
                {"g": g, "b": b}))
    n = 1 << 24
    a, b2, c2 = f32(n), f32(n), f32(n)
    A, B, C = (tl.placeholder((n,), name=nm) for nm in "ABC")
    yield ("relu(a*b+c) 16M", 0, 4 * a.nbytes,
           _ours(ops.relu(ops.add(ops.multiply(A, B), C)), [A, B, C], [a, b2, c2]),
           lambda: np.maximum(a * b2 + c2, 0), None)
    x = f32(4096, 4096)
    X = tl.placeholder(x.shape, name="X")
    yield ("row sum 4096x4096", 0, x.nbytes, _ours(ops.sum(X, axis=1), [X], [x]),
           lambda: x.sum(axis=1), _ort("ReduceSum", [x], [4096, 1], {"keepdims": 1},
                                       {"axes": np.array([1], dtype="int64")}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w]
    print(f"{'workload':34s} {'ours ms':>9s} {'GFLOP/s':>8s} {'GB/s':>6s} {'numpy':>7s} {'ort':>7s}")
    for name, flops, nbytes, ours, np_fn, ort_fn in workloads():
        if only and not any(o in name for o in only):
            continue
        times = {"ours": [], "numpy": [], "ort": []}
        for _ in range(args.rounds):  # interleaved: the same machine state for every peer
            times["ours"].append(_time(ours))
            if np_fn is not None:
                times["numpy"].append(_time(np_fn))
            if ort_fn is not None:
                times["ort"].append(_time(ort_fn))
        med = {k: float(np.median(v)) for k, v in times.items() if v}
        t = med["ours"]
        gf = f"{flops / t / 1e9:8.1f}" if flops else f"{'':8s}"
        gb = f"{nbytes / t / 1e9:6.1f}" if nbytes else f"{'':6s}"
        ratios = [f"{med[k] / t:7.2f}" if k in med else f"{'-':>7s}" for k in ("numpy", "ort")]
        print(f"{name:34s} {t * 1e3:9.3f} {gf} {gb} {ratios[0]} {ratios[1]}", flush=True)


if __name__ == "__main__":
    main()
