"""Saving after the kernel cache folder was deleted (a cleaned ~/.cache, a temporary cache dir):
a whole model, a single kernel and a model with a run-time If (a Program) built in one process,
the cache folder removed, then saved; a second process with another, empty cache loads each
artifact and must give bit-identical outputs. Each phase runs in a process of its own so that
the thread pool's library, too, comes from the deleted cache."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
X_CNN = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
X_GATE = np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)
GATE_FEEDS = (np.abs(X_GATE) + 0.1, -np.abs(X_GATE))  # both branches of the If
N = 96  # the kernel: C = A * 2 + B on N x N, outer loop parallel (it needs the thread pool)


def _kernel():
    import tensorlang as tl

    a = tl.placeholder((N, N), dtype="float32", name="A")
    b = tl.placeholder((N, N), dtype="float32", name="B")
    c = tl.compute((N, N), lambda i, j: a[i, j] * 2.0 + b[i, j], name="C")
    s = tl.create_schedule(c)
    s[c].parallel(s[c].op.axis[0])
    return tl.build(s, [a, b, c], name="twice_plus")


def _kernel_inputs():
    rng = np.random.default_rng(3)
    return [rng.standard_normal((N, N)).astype(np.float32) for _ in range(2)]


def _gate_model():
    """out = relu((x @ w + 1) if sum(x) > 0 else tanh(x))."""
    from onnx import TensorProto, helper, numpy_helper

    def vi(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 8])

    w = numpy_helper.from_array(np.random.default_rng(4).standard_normal((8, 8))
                                .astype(np.float32), "w")
    consts = [numpy_helper.from_array(np.float32(v), n) for n, v in (("zero", 0), ("one", 1))]
    then_b = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["mm"]),
                                helper.make_node("Add", ["mm", "one"], ["t"])],
                               "then", [], [vi("t")])
    else_b = helper.make_graph([helper.make_node("Tanh", ["x"], ["e"])], "else", [], [vi("e")])
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
             helper.make_node("Greater", ["sx", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b),
             helper.make_node("Relu", ["y"], ["out"])]
    g = helper.make_graph(nodes, "gate", [vi("x")], [vi("out")], initializer=[w, *consts])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def build_delete_cache_save(cache: str, out: str) -> None:
    """Phase 1 (its own process, TENSORLANG_CACHE_DIR=cache): build, run, delete the cache
    folder, save the three artifacts and the outputs seen before saving."""
    import shutil

    from tensorlang.graph import model_zoo
    from tensorlang.runtime.program import Program

    from tensorlang import graph

    out_dir = Path(out)
    gm = graph.build(graph.from_onnx(model_zoo.small_cnn()))
    kernel = _kernel()
    prog = graph.build(graph.from_onnx(_gate_model()))
    assert isinstance(prog, Program)
    refs = {"cnn": next(iter(gm.run(x=X_CNN).values()))}
    a, b = _kernel_inputs()
    c = np.empty_like(a)
    kernel(a, b, c)
    refs["kernel"] = c
    for k, feed in enumerate(GATE_FEEDS):
        refs[f"gate{k}"] = prog.run(x=feed)["out"]

    shutil.rmtree(cache)
    gm.save(out_dir / "cnn.tlpkg")
    kernel.save(out_dir / "kernel.tlm")
    prog.save(out_dir / "gate.tlpkg")
    np.savez(out_dir / "refs.npz", **refs)
    # saving relinks in a private folder: the deleted cache is not brought back
    (out_dir / "cache_after_save.json").write_text(json.dumps(os.path.exists(cache)))


def load_and_run(out: str) -> None:
    """Phase 2 (a fresh process with an empty cache): load each artifact and run it."""
    from tensorlang import runtime

    out_dir = Path(out)
    got = {"cnn": next(iter(runtime.load(out_dir / "cnn.tlpkg").run(x=X_CNN).values()))}
    a, b = _kernel_inputs()
    c = np.empty_like(a)
    runtime.load_module(out_dir / "kernel.tlm")(a, b, c)
    got["kernel"] = c
    prog = runtime.load(out_dir / "gate.tlpkg")
    for k, feed in enumerate(GATE_FEEDS):
        got[f"gate{k}"] = prog.run(x=feed)["out"]
    np.savez(out_dir / "got.npz", **got)


def _in_fresh_process(call: str, cache: Path) -> None:
    env = dict(os.environ, TENSORLANG_CACHE_DIR=str(cache))
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import test_save_without_cache as t; t.{call}"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    pytest.importorskip("onnx")
    root = tmp_path_factory.mktemp("save_without_cache")
    out = root / "out"
    out.mkdir()
    cache1 = root / "cache_of_the_build"
    _in_fresh_process(f"build_delete_cache_save({str(cache1)!r}, {str(out)!r})", cache1)
    _in_fresh_process(f"load_and_run({str(out)!r})", root / "empty_cache")
    with np.load(out / "refs.npz") as r, np.load(out / "got.npz") as g:
        return out, dict(r), dict(g)


def _members(tlm: Path) -> set[str]:
    with zipfile.ZipFile(tlm) as z:
        return set(z.namelist())


def test_whole_model_saved_after_the_cache_is_gone_runs_bit_identical(saved):
    out, refs, got = saved
    assert np.array_equal(got["cnn"], refs["cnn"])
    kernels = sorted((out / "cnn.tlpkg" / "kernels").glob("*.tlm"))
    assert kernels
    # every kernel ships its linked library again (relinked from the object kept in memory)
    assert all("kernel.so" in _members(k) for k in kernels)


def test_single_kernel_saved_after_the_cache_is_gone_runs_bit_identical(saved):
    out, refs, got = saved
    a, b = _kernel_inputs()
    assert np.array_equal(refs["kernel"], a * np.float32(2) + b)
    assert np.array_equal(got["kernel"], refs["kernel"])
    # a parallel kernel: the pool's library ships too, from the bytes read when it was loaded
    assert {"kernel.o", "kernel.so", "pool.so"} <= _members(out / "kernel.tlm")


def test_program_saved_after_the_cache_is_gone_runs_bit_identical(saved):
    out, refs, got = saved
    assert not np.array_equal(refs["gate0"], refs["gate1"])  # both branches were taken
    for k in range(len(GATE_FEEDS)):
        assert np.array_equal(got[f"gate{k}"], refs[f"gate{k}"])
    pieces = sorted((out / "gate.tlpkg").glob("m*/kernels/*.tlm"))
    assert pieces and all("kernel.so" in _members(k) for k in pieces)


def test_saving_does_not_recreate_the_deleted_cache(saved):
    out, _refs, _got = saved
    assert json.loads((out / "cache_after_save.json").read_text()) is False
