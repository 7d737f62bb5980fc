"""LSTM and GRU (speech size: seq 50, batch 1, input 64, hidden 128) imported from one-node
ONNX models, tensorlang vs onnxruntime with default schedules, both on the same thread count,
alternating with a pause so neither side's spinning threads slow the other.

    python benchmarks/rnn.py [--threads 2] [--seq 50] [--hidden 128]

--corpus: the recurrent models of the real-model corpus (benchmarks/real_models.py's cache)
each built twice, the layers as one recurrence kernel (now) and unrolled per time step (as
before: graph/frontends/onnx_rnn.py's one_kernel replaced), timed against onnxruntime in
alternation (median of --rounds); plan steps and max relative error vs onnxruntime.

    python benchmarks/rnn.py --corpus [--threads 1] [--models pt_gru_tagger,pt_kws_lstm]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from tensorlang import graph, runtime

CORPUS = "pt_gru_tagger.ts,pt_gru_tagger.dynamo,pt_kws_lstm.ts,pt_kws_lstm.dynamo"


def rnn_model(op: str, direction: str, seq: int, batch: int, inp: int, hidden: int):
    rng = np.random.default_rng(0)
    gates = 4 if op == "LSTM" else 3
    dirs = 2 if direction == "bidirectional" else 1
    inits = [onnx.numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
             for n, s in (("W", (dirs, gates * hidden, inp)),
                          ("R", (dirs, gates * hidden, hidden)),
                          ("B", (dirs, 2 * gates * hidden)))]
    node = helper.make_node(op, ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=hidden,
                            direction=direction)
    g = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, (seq, batch, inp))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (seq, dirs, batch, hidden)),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, (dirs, batch, hidden))],
        initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


def best_of(fn, number: int, repeat: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def corpus(names: list[str], threads: int, rounds: int, pause: float) -> None:
    import statistics
    from pathlib import Path

    import real_models as rm  # beside this file
    from tensorlang.graph.frontends import onnx_rnn

    rm.THREADS = threads
    cache = Path(rm.export_models.DEFAULT_CACHE).expanduser()
    one_kernel = onnx_rnn.one_kernel
    print(f"{'model':22s} {'form':9s} {'steps':>6s} {'ours ms':>8s} {'ort ms':>7s} "
          f"{'ratio':>6s} {'max rel err':>11s}")
    for name in names:
        path = cache / f"{name}.onnx"
        feed = rm._load_feed(cache, {"inputs": f"{name}.inputs.npz"})
        sess = rm._ort_session(path)
        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
        built = {}
        for form, choose in (("kernel", one_kernel), ("unrolled", lambda rnn: False)):
            onnx_rnn.one_kernel = choose
            try:
                built[form] = graph.build(rm._import(path, feed))
            finally:
                onnx_rnn.one_kernel = one_kernel
        peers = {f: (lambda gm=gm, feed=feed: gm.run(**feed)) for f, gm in built.items()}
        peers["ort"] = lambda sess=sess, feed=feed: sess.run(None, feed)
        t = rm.alternate(peers, rounds, pause)
        ort = t["ort"]
        for form, gm in built.items():
            err = rm.max_rel_error(gm.run(**feed), ref)
            ratio = statistics.median(x / y for x, y in zip(t[form], ort))
            print(f"{name:22s} {form:9s} {gm.num_steps:6d} "
                  f"{statistics.median(t[form]) * 1e3:8.3f} {statistics.median(ort) * 1e3:7.3f} "
                  f"{ratio:6.2f} {err:11.1e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="store_true", help="the corpus's recurrent models")
    ap.add_argument("--models", default=CORPUS, help="with --corpus: comma-separated names")
    ap.add_argument("--pause", type=float, default=0.25)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=50)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--input", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    runtime.set_num_threads(args.threads)
    if args.corpus:
        corpus(args.models.split(","), args.threads, args.rounds, args.pause)
        return
    print(f"{'model':24s} {'build s':>8s} {'ours us':>9s} {'ort us':>9s} {'ratio':>6s} "
          f"{'max rel err':>11s}")
    for op, direction in (("LSTM", "forward"), ("GRU", "forward"), ("LSTM", "bidirectional")):
        m = rnn_model(op, direction, args.seq, args.batch, args.input, args.hidden)
        t0 = time.perf_counter()
        gm = graph.build(graph.from_onnx(m))
        build_s = time.perf_counter() - t0
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        sess = ort.InferenceSession(m.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        x = np.random.default_rng(1).standard_normal(
            (args.seq, args.batch, args.input)).astype(np.float32)
        ref = dict(zip(["Y", "Y_h"], sess.run(None, {"X": x})))
        got = gm.run(X=x)
        err = max(float(np.abs(got[k] - r).max() / np.abs(r).max()) for k, r in ref.items())
        ours, theirs = [], []
        run_ours = lambda gm=gm, x=x: gm.run(X=x)
        run_ort = lambda sess=sess, x=x: sess.run(None, {"X": x})
        for _ in range(args.rounds):
            ours.append(best_of(run_ours, 100))
            time.sleep(0.1)
            theirs.append(best_of(run_ort, 100))
            time.sleep(0.1)
        o, t = min(ours), min(theirs)
        print(f"{op + ' ' + direction:24s} {build_s:8.2f} {o * 1e6:9.0f} {t * 1e6:9.0f} "
              f"{o / t:6.2f} {err:11.1e}")


if __name__ == "__main__":
    main()
