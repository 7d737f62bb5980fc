"""The node and model test cases shipped inside the onnx package (pytorch-converted and
pytorch-operator): every case whose operators are supported must match its reference output
(1e-4 relative, fp32); the others are listed with the reason. Run with -s to see the report."""

import glob
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tensorlang import graph

ROOT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
CASES = sorted(glob.glob(os.path.join(ROOT, "pytorch-converted", "*")) +
               glob.glob(os.path.join(ROOT, "pytorch-operator", "*")))


def _load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def run_case(case):
    """('pass' | 'unsupported' | 'fail', detail)."""
    model = onnx.load(os.path.join(case, "model.onnx"))
    try:
        g = graph.from_onnx(model)
    except graph.UnsupportedOperatorError as e:
        return "unsupported", ", ".join(sorted({u[0] for u in e.unsupported}))
    except graph.OnnxImportError as e:
        return "unsupported", str(e).splitlines()[0][:120]
    gm = graph.build(g)
    inits = {i.name for i in model.graph.initializer}
    in_names = [i.name for i in model.graph.input if i.name not in inits]
    out_names = [o.name for o in model.graph.output]
    for ds in sorted(glob.glob(os.path.join(case, "test_data_set_*"))):
        feeds = {n: _load_pb(os.path.join(ds, f"input_{i}.pb")) for i, n in enumerate(in_names)}
        out = gm.run(**feeds)  # inputs keep their exact ONNX names
        got = list(out.values())
        for i, name in enumerate(out_names):
            ref = _load_pb(os.path.join(ds, f"output_{i}.pb"))
            if got[i].shape != ref.shape:
                return "fail", f"output {name}: shape {got[i].shape} vs {ref.shape}"
            # NaN where the reference has NaN (sqrt or pow of negative numbers) is a match
            nan = np.isnan(ref)
            if not np.array_equal(np.isnan(got[i]), nan):
                return "fail", f"output {name}: NaN in different places"
            ok_ref, ok_got = ref[~nan], got[i][~nan].astype(np.float64)
            scale = max(float(np.abs(ok_ref).max(initial=0)), 1e-6)
            err = float(np.abs(ok_got - ok_ref).max(initial=0)) / scale
            if not err <= 1e-4:
                return "fail", f"output {name}: shape {got[i].shape} vs {ref.shape}, err {err:.1e}"
    return "pass", ""


@pytest.mark.slow
def test_onnx_backend_data_report():
    results = {}
    for case in CASES:
        try:
            results[case] = run_case(case)
        except Exception as e:  # noqa: BLE001 - report every case, fail at the end
            results[case] = ("fail", f"{type(e).__name__}: {str(e).splitlines()[0][:150]}")
    passed = [c for c, (s, _) in results.items() if s == "pass"]
    failed = {c: d for c, (s, d) in results.items() if s == "fail"}
    unsup = {c: d for c, (s, d) in results.items() if s == "unsupported"}
    supported = len(passed) + len(failed)
    print(f"\nonnx backend data: {len(passed)}/{supported} supported cases pass "
          f"({len(unsup)} unsupported of {len(results)})")
    for c, d in sorted(unsup.items()):
        print(f"  unsupported {os.path.basename(c)}: {d}")
    for c, d in sorted(failed.items()):
        print(f"  FAILED {os.path.basename(c)}: {d}")
    assert not failed
