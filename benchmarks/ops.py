"""Operator-library speed against numpy, onnxruntime (one-node ONNX models) and PyTorch eager
(optional: `pip install torch==2.13.0`, skipped when absent), default schedules, no tuning.

Each round times every contender (ours and each peer) as the median of `number` calls, after a
0.2 s pause: OpenBLAS, onnxruntime and OpenMP worker threads keep spinning for a while after a
call and would otherwise steal the two cores from whichever contender runs next. Rounds are
interleaved (ours, numpy, onnxruntime, torch, ours, ...; the order rotates every round) and the
median over rounds is reported. ratio = peer time / our time (> 1: we are faster); "best" is
against the fastest peer. GFLOP/s are also given as a fraction of the FMA peak measured by
benchmarks/peak.py in the same run.

OpenBLAS reads OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE when numpy loads it; this environment sets
Haswell, which slows numpy's peer on this AVX-512 CPU. The script re-executes itself without
them (the same as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`) unless --keep-openblas-env.

    python benchmarks/ops.py [--rounds 7] [--only matmul,softmax] [--threads 1]"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

import numpy as np

import tensorlang as tl

ops = tl.ops
_OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
PAUSE_S = 0.2
THREADS = 0  # --threads: 0 = one per core for every contender


def _ort(node_op, inputs, out_shape, attrs=None, extra_inits=None, bind_output=False):
    """A one-node ONNX model run by onnxruntime; returns a zero-argument callable or None.
    bind_output: into one preallocated output (IOBinding), as ours are timed; else sess.run,
    whose fresh output of a big op costs its page faults (a 36 MB softmax: half its time)."""
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
    for nm, arr in (extra_inits or {}).items():
        inits.append(onnx.numpy_helper.from_array(arr, nm))
        node_inputs.append(nm)
    node = helper.make_node(node_op, node_inputs, ["y"], **(attrs or {}))
    g = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, out_shape)], initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS  # 0: one per core
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = dict(zip(names, inputs))
    if not bind_output:
        return lambda: sess.run(None, feed)[0]
    out = np.empty(out_shape, np.float32)
    io = sess.io_binding()
    for name, a in feed.items():
        io.bind_cpu_input(name, a)
    io.bind_output("y", "cpu", element_type=np.float32, shape=out.shape,
                   buffer_ptr=out.ctypes.data)

    def run():
        sess.run_with_iobinding(io)
        return out

    return run


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS or os.cpu_count() or 1)
    return torch


def _ours(out, ins, arrays):
    s = ops.default_schedule(out)
    f = tl.build(s, ins + [out], name="bench")
    # 64-byte aligned, as tl.runtime.empty (tvm.nd.empty) allocates: the non-temporal store
    # path of big outputs needs it (numpy only aligns to 16)
    res = tl.runtime.empty(tuple(int(d.value) for d in out.shape), out.dtype)
    res[...] = 0

    def run():
        f(*arrays, res)
        return res

    return run


def _median_time(fn, number: int) -> float:
    """Median seconds of one call over `number` calls, after the pause (see the module doc)."""
    time.sleep(PAUSE_S)
    fn()
    times = []
    for _ in range(number):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _as_numpy(v) -> np.ndarray:
    if hasattr(v, "detach"):
        v = v.detach().numpy()
    return np.asarray(v)


def workloads(torch):
    """(name, flop, bytes moved, ours, {peer: fn or None}); each fn returns its result."""
    r = np.random.default_rng(0)
    F = torch.nn.functional if torch else None

    def f32(*s):
        return r.standard_normal(s).astype("float32")

    def tt(*arrays):
        return [torch.from_numpy(a) for a in arrays] if torch else [None] * len(arrays)

    for n in (512, 1024):
        a, b = f32(n, n), f32(n, n)
        ta, tb = tt(a, b)
        A, B = tl.placeholder(a.shape, name="A"), tl.placeholder(b.shape, name="B")
        yield (f"matmul {n}^3", 2 * n ** 3, 0, _ours(ops.matmul(A, B), [A, B], [a, b]),
               {"numpy": lambda a=a, b=b: a @ b, "ort": _ort("MatMul", [a, b], [n, n]),
                "torch": torch and (lambda ta=ta, tb=tb: torch.matmul(ta, tb))})
    yield from _gemv_rows(f32, tt, torch)
    for (c, hw, oc, k, pad) in ((64, 56, 64, 3, 1), (256, 14, 256, 3, 1), (256, 56, 64, 1, 0)):
        x, w = f32(1, c, hw, hw), f32(oc, c, k, k)
        tx, tw = tt(x, w)
        flops = 2 * oc * hw * hw * c * k * k
        peers = {"numpy": None,
                 "ort": _ort("Conv", [x], [1, oc, hw, hw], {"pads": [pad] * 4}, {"w": w}),
                 "torch": torch and (lambda tx=tx, tw=tw, pad=pad: F.conv2d(tx, tw, padding=pad))}
        # weights are constants: packed once, outside the timed call, as a graph folds them
        # (ort packs its initializer at session creation too)
        wp = w.reshape(oc // 16, 16, c, k, k).transpose(0, 2, 3, 4, 1).copy()
        WP = tl.placeholder(wp.shape, name="W")
        # NCHW in and out, like the peers: the direct conv reads the NCHW input as is and
        # writes NCHW from its register tile (no layout transforms)
        X = tl.placeholder(x.shape, name="X")
        yield (f"conv2d NCHW 1x{c}x{hw}^2->{oc} {k}x{k}", flops, 0,
               _ours(ops.conv2d_nchw(X, WP, padding=pad), [X, WP], [x, wp]), peers)
        wb = w.reshape(oc // 16, 16, c // 16, 16, k, k).transpose(0, 2, 4, 5, 3, 1).copy()
        WB = tl.placeholder(wb.shape, name="W")
        # the blocked kernel alone (what a graph that keeps activations in NCHW16c runs); the
        # peers still get NCHW
        xb = x.reshape(1, c // 16, 16, hw, hw).transpose(0, 1, 3, 4, 2).copy()
        XB = tl.placeholder(xb.shape, name="X")
        ours = _ours(ops.conv2d_nchwc(XB, WB, padding=pad), [XB, WB], [xb, wb])
        yield ("  same, NCHW16c in/out (no transform)", flops, 0, ours, dict(peers, check=False))
    yield from _grouped_conv_rows(f32, tt, torch)
    yield from _shuffle_rows(f32, tt, torch)
    yield from _topk_rows(f32, torch)
    x, w = f32(1, 256, 28, 28), f32(256, 1, 3, 3)
    tx, tw = tt(x, w)
    X, W = tl.placeholder(x.shape, name="X"), tl.placeholder(w.shape, name="W")
    yield ("depthwise NCHW 1x256x28^2 3x3", 2 * 256 * 28 * 28 * 9, 0,
           _ours(ops.depthwise_conv2d_nchw(X, W, padding=1), [X, W], [x, w]),
           {"numpy": None,
            "ort": _ort("Conv", [x], [1, 256, 28, 28], {"pads": [1] * 4, "group": 256},
                        {"w": w}),
            "torch": torch and (lambda: F.conv2d(tx, tw, padding=1, groups=256))})
    # layout transforms between NCHW and NCHW16c (a graph's boundaries): pure data movement
    x = f32(1, 64, 56, 56)
    xb = np.ascontiguousarray(x.reshape(1, 4, 16, 56, 56).transpose(0, 1, 3, 4, 2))
    tx, txb = tt(x, xb)
    for name, src, perm, dst, (sl, dl) in (
            ("layout NCHW->NCHW16c 1x64x56^2", x, (0, 1, 3, 4, 2), xb.shape, ("NCHW", "NCHW16c")),
            ("layout NCHW16c->NCHW 1x64x56^2", xb, (0, 1, 4, 2, 3), x.shape, ("NCHW16c", "NCHW"))):
        # numpy, onnxruntime and torch see the input as 5-D (a free view) and transpose it
        v5 = src.reshape(1, 4, 16, 56, 56) if src.ndim == 4 else src
        t5 = (tx.reshape(1, 4, 16, 56, 56) if src.ndim == 4 else txb) if torch else None
        out = np.empty(v5.transpose(perm).shape, np.float32)
        S = tl.placeholder(src.shape, name="S")
        yield (name, 0, 2 * src.nbytes, _ours(ops.layout_transform(S, sl, dl), [S], [src]),
               {"numpy": lambda v5=v5, perm=perm, out=out, d=dst: (
                   np.copyto(out, v5.transpose(perm)), out.reshape(d))[1],
                "ort": _ort("Transpose", [np.ascontiguousarray(v5)], list(out.shape),
                            {"perm": list(perm)}),
                "torch": torch and (lambda t5=t5, perm=perm, d=dst:
                                    t5.permute(*perm).contiguous().reshape(d))})
    x = f32(4096, 1024)
    (tx,) = tt(x)
    X = tl.placeholder(x.shape, name="X")

    def np_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    yield ("softmax 4096x1024", 0, 2 * x.nbytes, _ours(ops.softmax(X), [X], [x]),
           {"numpy": np_softmax, "ort": _ort("Softmax", [x], list(x.shape), {"axis": -1}),
            "torch": torch and (lambda: torch.softmax(tx, -1))})
    # an attention's softmax over whisper's 1500 tokens (6 heads): rows 64 does not divide,
    # 36 MB in and out
    xw = f32(9000, 1500)
    (txw,) = tt(xw)
    Xw = tl.placeholder(xw.shape, name="Xw")
    yield ("softmax 9000x1500", 0, 2 * xw.nbytes, _ours(ops.softmax(Xw), [Xw], [xw]),
           {"ort": _ort("Softmax", [xw], list(xw.shape), {"axis": -1}, bind_output=True),
            "torch": torch and (lambda: torch.softmax(txw, -1))})
    g, b = f32(1024), f32(1024)
    tg, tb = tt(g, b)
    G, Bt = tl.placeholder((1024,), name="G"), tl.placeholder((1024,), name="Bt")

    def np_ln():
        mu = x.mean(axis=1, keepdims=True)
        return (x - mu) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * g + b

    yield ("layer norm 4096x1024", 0, 2 * x.nbytes,
           _ours(ops.layer_norm(X, G, Bt), [X, G, Bt], [x, g, b]),
           {"numpy": np_ln,
            "ort": _ort("LayerNormalization", [x], list(x.shape), {"axis": -1},
                        {"g": g, "b": b}),
            "torch": torch and (lambda: F.layer_norm(tx, (1024,), tg, tb, 1e-5))})
    n = 1 << 24
    a, b2, c2 = f32(n), f32(n), f32(n)
    ta, tb2, tc2 = tt(a, b2, c2)
    dst = np.empty_like(a)
    tdst = torch.empty(n) if torch else None
    A, B, C = (tl.placeholder((n,), name=nm) for nm in "ABC")

    def np_copy():
        np.copyto(dst, a)
        return dst

    # the bandwidth reference for the elementwise row: a plain copy, both cores
    yield ("copy 16M (bandwidth reference)", 0, 2 * a.nbytes,
           _ours(tl.compute((n,), lambda i: A[i], name="copy"), [A], [a]),
           {"numpy": np_copy, "ort": None,
            "torch": torch and (lambda: tdst.copy_(ta))})
    yield ("relu(a*b+c) 16M", 0, 4 * a.nbytes,
           _ours(ops.relu(ops.add(ops.multiply(A, B), C)), [A, B, C], [a, b2, c2]),
           {"numpy": lambda: np.maximum(a * b2 + c2, 0), "ort": None,
            "torch": torch and (lambda: torch.relu(ta * tb2 + tc2))})
    x = f32(4096, 4096)
    (tx,) = tt(x)
    X = tl.placeholder(x.shape, name="X")
    yield ("row sum 4096x4096", 0, x.nbytes, _ours(ops.sum(X, axis=1), [X], [x]),
           {"numpy": lambda: x.sum(axis=1),
            "ort": _ort("ReduceSum", [x], [4096, 1], {"keepdims": 1},
                        {"axes": np.array([1], dtype="int64")}),
            "torch": torch and (lambda: tx.sum(1))})


def _gemv_rows(f32, tt, torch):
    """Batch-1 dense layers (memory-bound: one pass over the weight): a ResNet classifier (8 MB,
    cache-resident when repeated) and AlexNet's fc6 (151 MB, DRAM; compare its GB/s with the
    copy row). Ours reads the weight packed into the kernel's [N/16, K, 16] panels, as a graph
    packs a constant weight at build time (pack_dense_weights); numpy, onnxruntime (MatMul) and
    torch get [K, N]."""
    for k, n in ((2048, 1000), (9216, 4096)):
        x, w = f32(1, k), f32(k, n)
        tx, tw = tt(x, w)
        nb = -(-n // 16)
        wp = np.zeros((k, nb * 16), np.float32)
        wp[:, :n] = w
        wp = np.ascontiguousarray(wp.reshape(k, nb, 16).transpose(1, 0, 2))
        X, WP = tl.placeholder(x.shape, name="X"), tl.placeholder(wp.shape, name="W")
        yield (f"dense 1x{k}.{k}x{n}", 2 * k * n, w.nbytes,
               _ours(ops.matmul_prepacked(X, WP, n), [X, WP], [x, wp]),
               {"numpy": lambda x=x, w=w: x @ w, "ort": _ort("MatMul", [x, w], [1, n]),
                "torch": torch and (lambda tx=tx, tw=tw: torch.matmul(tx, tw))})


# grouped convs of real networks: (name, C, H=W, OC, kernel, groups, stride, pad)
GROUPED_CONVS = (
    ("AlexNet conv2", 96, 27, 256, 5, 2, 1, 2),
    ("AlexNet conv4", 384, 13, 384, 3, 2, 1, 1),
    ("ResNeXt50 32x4d", 128, 56, 128, 3, 32, 1, 1),
    ("RegNetX-400MF", 64, 28, 64, 3, 4, 1, 1),
    ("ShuffleNet g4 1x1", 136, 28, 136, 1, 4, 1, 0),
    ("ShuffleNet g3 1x1", 240, 28, 60, 1, 3, 1, 0),
    ("ShuffleNet g3 1x1", 60, 28, 240, 1, 3, 1, 0),
    ("ShuffleNet g4 1x1", 272, 28, 68, 1, 4, 1, 0),
    ("ShuffleNet g8 1x1", 384, 28, 96, 1, 8, 1, 0),
    ("ShuffleNet g2 1x1", 200, 28, 50, 1, 2, 1, 0),
    ("ShuffleNet g3 1x1", 480, 14, 120, 1, 3, 1, 0),
    ("ShuffleNet g3 1x1", 960, 7, 240, 1, 3, 1, 0),
    ("SqueezeNet conv10", 512, 13, 1000, 1, 1, 1, 0),
)


def _grouped_conv_rows(f32, tt, torch):
    """Grouped convolutions, NCHW in and out like the peers. Where 16 or 8 divides the output
    channels per group the weight is packed as a graph packs it (pack_conv_weights) for the
    oc-blocked kernel; ResNeXt's 4 per group runs the plain NCHW schedule. Every stride-1 1x1
    row (ShuffleNet's, and SqueezeNet's groups=1 conv to 1000 channels, which 16 does not
    divide) runs the pixels path (a matmul per group over the plane's pixels), packed weights
    or not."""
    F = torch.nn.functional if torch else None
    for name, c, hw, oc, k, g, stride, pad in GROUPED_CONVS:
        x, w = f32(1, c, hw, hw), f32(oc, c // g, k, k)
        tx, tw = tt(x, w)
        oh = (hw + 2 * pad - k) // stride + 1
        # as graph.passes.pack_conv_weights packs: groups=1 only in blocks of 16
        ob = ops.nn.grouped_conv_block(oc // g) if g > 1 else (16 if oc % 16 == 0 else 0)
        wo = (np.ascontiguousarray(w.reshape(oc // ob, ob, c // g, k, k).transpose(0, 2, 3, 4, 1))
              if ob else w)
        X, W = tl.placeholder(x.shape, name="X"), tl.placeholder(wo.shape, name="W")
        yield (f"grouped {name} {c}x{hw}^2->{oc} {k}x{k} g{g}",
               2 * oc * (c // g) * k * k * oh * oh, 0,
               _ours(ops.conv2d_nchw(X, W, stride, pad, groups=g), [X, W], [x, wo]),
               {"numpy": None,
                "ort": _ort("Conv", [x], [1, oc, oh, oh], {"pads": [pad] * 4, "group": g,
                                                           "strides": [stride] * 2}, {"w": w}),
                "torch": torch and (lambda tx=tx, tw=tw, s=stride, p=pad, g=g:
                                    F.conv2d(tx, tw, stride=s, padding=p, groups=g))})


# ShuffleNet's channel shuffles (groups, channels per group, H=W) and a residual add + relu on
# planes whose rows are not whole 16-lane vectors (masked constant tails)
SHUFFLES = ((4, 34, 28), (4, 68, 14), (4, 136, 7), (3, 40, 13))
TAIL_ADDS = ((272, 14), (1000, 13), (544, 7))


def _shuffle_rows(f32, tt, torch):
    """Reshape [N, g, C/g, H, W] -> transpose to [N, C/g, g, H, W]: rows of W contiguous on
    both sides; and x + y, relu on [1, C, H, W]: rows of W."""
    perm = (0, 2, 1, 3, 4)
    for g, cpg, hw in SHUFFLES:
        x = f32(1, g, cpg, hw, hw)
        (tx,) = tt(x)
        X = tl.placeholder(x.shape, name="X")
        yield (f"shuffle transpose 1x{g}x{cpg}x{hw}^2", 0, 2 * x.nbytes,
               _ours(ops.transpose(X, perm), [X], [x]),
               {"numpy": lambda x=x: np.ascontiguousarray(x.transpose(perm)),
                "ort": _ort("Transpose", [x], [1, cpg, g, hw, hw], {"perm": list(perm)}),
                "torch": torch and (lambda tx=tx: tx.permute(perm).contiguous())})
    for c, hw in TAIL_ADDS:
        a, b = f32(1, c, hw, hw), f32(1, c, hw, hw)
        ta, tb = tt(a, b)
        A, B = tl.placeholder(a.shape, name="A"), tl.placeholder(b.shape, name="B")
        yield (f"add+relu 1x{c}x{hw}^2", 0, 3 * a.nbytes,
               _ours(ops.relu(ops.add(A, B)), [A, B], [a, b]),
               {"numpy": lambda a=a, b=b: np.maximum(a + b, 0), "ort": None,
                "torch": torch and (lambda ta=ta, tb=tb: torch.relu(ta + tb))})


# TopK of classifier outputs and of detection heads (YOLO-style: 80 classes x 8400 anchors)
TOPKS = ((1, 1000, 1), (1, 1000, 5), (1, 1000, 100), (1, 1000, 1000), (80, 8400, 1),
         (80, 8400, 5), (80, 8400, 100), (80, 8400, 8400), (8, 8000, 300))


def _ort_topk(x, k):
    """onnxruntime's TopK (last axis, largest, sorted): a callable returning the indices."""
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], [
        helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("i", TensorProto.INT64, None)],
        initializer=[onnx.numpy_helper.from_array(np.array([k], np.int64), "k")])
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    sess = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid(
        "", 17)]).SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda: sess.run(["i"], {"x": x})[0]


def _topk_rows(f32, torch):
    """TopK (values and indices, the indices compared), built when its row runs (a build
    takes seconds). numpy's peer: argpartition, then a sort of the k."""
    for rows, n, k in TOPKS:
        x = f32(rows, n)

        def build(x=x, k=k):
            X = tl.placeholder(x.shape, name="X")
            v, i = ops.topk(X, k)
            f = tl.build(ops.default_schedule([v, i]), [X, v, i], name="bench")
            rv, ri = tl.runtime.empty(x.shape[:1] + (k,), "float32"), \
                tl.runtime.empty(x.shape[:1] + (k,), "int64")
            return lambda: (f(x, rv, ri), ri)[1]

        def numpy_topk(x=x, k=k):
            part = np.argpartition(-x, k - 1, axis=1)[:, :k] if k < x.shape[1] else \
                np.broadcast_to(np.arange(x.shape[1]), x.shape)
            order = np.argsort(-np.take_along_axis(x, part, 1), axis=1, kind="stable")
            return np.take_along_axis(part, order, 1)

        def torch_topk(x=x, k=k):
            return torch.topk(torch.from_numpy(x), k, dim=1).indices

        yield (f"topk [{rows},{n}] k={k}", 0, x.nbytes, _lazy(build),
               {"numpy": numpy_topk, "ort": _ort_topk(x, k), "torch": torch and torch_topk})


def _lazy(build):
    """A contender built on its first call."""
    fn = []

    def run():
        if not fn:
            fn.append(build())
        return fn[0]()

    return run


def openblas_kernel() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    for info in threadpool_info():
        if info.get("internal_api") == "openblas":
            return f"{info.get('architecture')} x{info.get('num_threads')} threads"
    return "not found"


def _peak() -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peak import measure_peak

    return measure_peak()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="")
    ap.add_argument("--target-s", type=float, default=0.1,
                    help="about this many seconds of calls per contender per round")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for every contender (tensorlang's pool, OpenBLAS, onnxruntime, "
                         "torch); 0 = one per core. 1 compares single-core code when other "
                         "processes load the shared cores")
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="do not re-execute without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE")
    args = ap.parse_args()
    if not args.keep_openblas_env and any(v in os.environ for v in _OPENBLAS_VARS):
        env = {k: v for k, v in os.environ.items() if k not in _OPENBLAS_VARS}
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    only = [w for w in args.only.split(",") if w]
    global THREADS
    THREADS = args.threads
    if THREADS:
        tl.runtime.set_num_threads(THREADS)
        try:
            from threadpoolctl import threadpool_limits

            _blas_limit = threadpool_limits(THREADS)  # the limit holds while this lives
        except ImportError:
            print("threadpoolctl not installed: numpy's OpenBLAS keeps its own thread count")
    torch = _torch()
    peak = _peak()
    best_peak = max(peak["1 core"][0], peak["all cores"][0] / 2) * (THREADS or os.cpu_count() or 1)
    import onnxruntime

    print(f"date {datetime.date.today()}; CPU {peak['cpu']}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"FMA peak: 1 core {peak['1 core'][0]:.1f} GFLOP/s, all cores measured "
          f"{peak['all cores'][0]:.1f} (the %peak column uses {best_peak:.0f} = cores x the "
          f"best per-core figure)")
    print(f"numpy {np.__version__} OpenBLAS {openblas_kernel()}; onnxruntime "
          f"{onnxruntime.__version__}; torch "
          f"{f'{torch.__version__} x{torch.get_num_threads()} threads' if torch else 'absent'}; "
          f"tensorlang {tl.__version__} x{tl.runtime.get_num_threads()} threads")
    peers = ("numpy", "ort", "torch")
    print(f"{'workload':38s} {'ours ms':>8s} {'GFLOP/s':>7s} {'%peak':>5s} {'GB/s':>5s} "
          + " ".join(f"{p:>6s}" for p in peers) + f" {'best':>6s}")
    copy_gbs = None
    for name, flops, nbytes, ours, peer_fns in workloads(torch):
        if only and not any(o in name for o in only):
            continue
        check = peer_fns.pop("check", True)
        fns = {"ours": ours, **{p: f for p, f in peer_fns.items() if f}}
        got = ours().copy()
        if check:
            for p in peers:
                if fns.get(p) is not None:
                    ref = _as_numpy(fns[p]()).reshape(got.shape)
                    err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
                    if err > 1e-3:
                        print(f"  {name}: MISMATCH against {p}: max relative error {err:.1e}")
        number = {}
        for k, f in fns.items():  # about target_s of calls per contender per round
            t0 = time.perf_counter()
            f()
            number[k] = max(3, min(200, int(args.target_s / max(time.perf_counter() - t0,
                                                                   1e-6))))
        times = {k: [] for k in fns}
        order = list(fns)
        for rnd in range(args.rounds):
            for k in order[rnd % len(order):] + order[:rnd % len(order)]:
                times[k].append(_median_time(fns[k], number[k]))
        med = {k: statistics.median(v) for k, v in times.items()}
        t = med["ours"]
        gf = f"{flops / t / 1e9:7.1f}" if flops else f"{'':7s}"
        pk = f"{100 * flops / t / 1e9 / best_peak:4.0f}%" if flops else f"{'':5s}"
        gb = f"{nbytes / t / 1e9:5.1f}" if nbytes else f"{'':5s}"
        ratios = [f"{med[p] / t:6.2f}" if p in med else f"{'-':>6s}" for p in peers]
        peer_t = [med[p] for p in peers if p in med]
        best = f"{min(peer_t) / t:6.2f}" if peer_t else f"{'-':>6s}"
        note = ""
        if name.startswith("copy"):
            copy_gbs = nbytes / t / 1e9
        elif name.startswith("relu") and copy_gbs:
            note = f"  ({nbytes / t / 1e9 / copy_gbs:.2f} of copy GB/s)"
        print(f"{name:38s} {t * 1e3:8.3f} {gf} {pk} {gb} {' '.join(ratios)} {best}{note}",
              flush=True)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
