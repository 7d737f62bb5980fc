"""Probe one ONNX file as a package ships it: import, build and run it with fixed shapes (size
A), then once more as shipped (its dynamic axes symbolic: one build run at sizes A and B),
each run against onnxruntime. Prints one JSON line; a stage that fails is named with its
exception's class and message, and the stages after it are skipped.

    python benchmarks/shipped_probe.py FILE.onnx '{"A": {"x": [1, 3, 320, 320]},
                                                  "B": {"x": [2, 3, 224, 416]}}'

Sizes: {"A": {input: shape}, "B": {...}} (B optional: fixed shapes only); inputs not named
take the file's static shape with 1 for each dynamic axis; "int": {input: value} feeds an
integer input that value (silero VAD's sample rate); "scale": float inputs are uniform in
[-scale, scale] (default 1). Errors are benchmarks/real_models.py's max_rel_error (max
|ours - ort| / max |ort|, the worst output; integer outputs must be equal).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_models import max_rel_error  # beside this file

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
          "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(uint8)": np.uint8,
          "tensor(bool)": np.bool_}


def feeds(sess, sizes: dict, which: str, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for i in sess.get_inputs():
        if i.type not in DTYPES:
            raise ValueError(f"input {i.name!r} is {i.type}; the probe feeds "
                             f"{', '.join(DTYPES)}")
        shape = sizes[which].get(i.name) or [d if isinstance(d, int) else 1 for d in i.shape]
        dt = DTYPES[i.type]
        if i.name in sizes.get("int", {}):
            out[i.name] = np.full(shape, sizes["int"][i.name], dt)
        elif np.issubdtype(dt, np.floating):
            out[i.name] = (sizes.get("scale", 1.0) * rng.uniform(-1, 1, shape)).astype(dt)
        elif dt == np.bool_:
            out[i.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            out[i.name] = rng.integers(0, 100, shape).astype(dt)
    return out


class _Failed(Exception):
    """A stage failed; its message is in the row already."""


def probe(path: str, sizes: dict) -> dict:
    import onnxruntime as ort

    from tensorlang import graph

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    row: dict = {"file": path}

    def stage(label: str, fn):
        t0 = time.perf_counter()
        try:
            got = fn()
        except Exception as e:  # a failure is the probe's finding: the row records it
            row[label] = f"{type(e).__name__}: {' '.join(str(e).split())[:400]}"
            raise _Failed from e
        row[f"{label}_s"] = round(time.perf_counter() - t0, 2)
        return got

    def compare(gm, f: dict) -> float:
        return max_rel_error(gm.run(**f), dict(zip(names, sess.run(None, f))))

    try:
        fa = feeds(sess, sizes, "A", 0)
        g = stage("static_import",
                  lambda: graph.from_onnx(path, shapes={k: v.shape for k, v in fa.items()}))
        gm = stage("static_build", lambda: graph.build(g))
        row["static_err"] = stage("static_run", lambda: compare(gm, fa))
        if "B" in sizes:
            g = stage("dynamic_import", lambda: graph.from_onnx(path))
            gm = stage("dynamic_build", lambda: graph.build(g))
            for which, seed in (("A", 1), ("B", 2)):
                f = feeds(sess, sizes, which, seed)
                row[f"dynamic_err_{which}"] = stage(f"dynamic_run_{which}",
                                                    lambda f=f: compare(gm, f))
    except _Failed:
        row["stopped"] = True
    return row


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: shipped_probe.py FILE.onnx SIZES_JSON", file=sys.stderr)
        return 2
    print(json.dumps(probe(argv[0], json.loads(argv[1]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
