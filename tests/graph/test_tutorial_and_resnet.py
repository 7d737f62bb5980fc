import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from graph_testing import assert_close, ort_run
from tensorlang.graph import model_zoo

from tensorlang import graph

ROOT = Path(__file__).resolve().parents[2]


def test_tutorial_03_runs():
    r = subprocess.run([sys.executable, str(ROOT / "tutorials/03_deploy_onnx_model.py")],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fresh-process outputs identical: True" in r.stdout


@pytest.mark.slow
def test_resnet50_both_modes_match_onnxruntime():
    model = model_zoo.resnet50()
    gm = graph.build(graph.from_onnx(model))
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    ref = next(iter(ort_run(model, {"x": x}).values()))
    g_out = next(iter(gm.run(mode="graph", x=x).values()))
    i_out = next(iter(gm.run(mode="interactive", x=x).values()))
    np.testing.assert_array_equal(g_out, i_out)
    assert_close(g_out, ref)
