"""Bad input (unsupported ops, malformed files, wrong names/shapes/dtypes), IR basics, and the
save/load round trip in a fresh process."""

import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from graph_testing import ort_run
from onnx import TensorProto, helper
from tensorlang.graph import model_zoo

from tensorlang import graph, runtime


def test_unsupported_operators_listed_together():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("NonMaxSuppression", ["a"], ["b"], name="nms"),
             helper.make_node("RoiAlign", ["b"], ["c"], name="roi")]
    g = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       [2])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(graph.UnsupportedOperatorError) as e:
        graph.from_onnx(m)
    msg = str(e.value)
    assert "NonMaxSuppression (node 'nms', opset 13)" in msg
    assert "RoiAlign (node 'roi', opset 13)" in msg
    assert [u[0] for u in e.value.unsupported] == ["NonMaxSuppression", "RoiAlign"]


def test_malformed_file(tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"\x08\x07garbage that is not a protobuf \xff\xff\xff")
    with pytest.raises(graph.OnnxImportError, match="not a valid ONNX model"):
        graph.from_onnx(str(p))
    with pytest.raises(FileNotFoundError):
        graph.from_onnx(str(tmp_path / "missing.onnx"))


def test_build_of_an_onnx_model_says_to_import_it_first(tmp_path):
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]))
    for given in (model, str(tmp_path / "model.onnx")):
        with pytest.raises(TypeError, match=r"got (ModelProto|str); import an ONNX model "
                                            r"first: graph\.build\(graph\.from_onnx\(model\)\)"):
            graph.build(given)
    with pytest.raises(TypeError, match=r"expects a graph.Graph, got int$"):
        graph.build(3)


def test_wrong_inputs_are_clear_errors():
    gm = graph.build(graph.from_onnx(model_zoo.mlp()))
    x = np.zeros((4, 64), np.float32)
    with pytest.raises(runtime.InputError, match="unknown input.*'y'"):
        gm.run(y=x)
    with pytest.raises(runtime.InputError, match="unknown input 'y'; the model's inputs are x"):
        gm.set_input("y", x)  # a name with no buffer was a bare KeyError
    with pytest.raises(runtime.InputError, match="missing input"):
        graph.build(graph.from_onnx(model_zoo.mlp())).run()
    with pytest.raises(runtime.InputError, match=r"shape \(4, 64\), got \(4, 63\)"):
        gm.run(x=np.zeros((4, 63), np.float32))
    with pytest.raises(runtime.InputError, match="dtype float32, got float64"):
        gm.run(x=np.zeros((4, 64)))
    with pytest.raises(runtime.InputError, match="dtype float32 in native byte order, got >f4"):
        gm.run(x=np.zeros((4, 64), ">f4"))  # was "must have dtype float32, got float32"


def _scale_model(dim):
    """y = x * s, s a 0-d input (as Clip's min/max or Dropout's ratio in ONNX's own tests)."""
    nodes = [helper.make_node("Mul", ["x", "s"], ["y"])]
    g = helper.make_graph(nodes, "scale", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim]),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("dim", [3, "n"])
@pytest.mark.parametrize("mode", ["graph", "interactive"])
def test_a_numpy_scalar_is_a_0d_input(dim, mode):
    m = _scale_model(dim)
    gm = graph.build(graph.from_onnx(m), mode=mode)
    x = np.array([1.5, -2.0, 4.0], np.float32)
    ref = ort_run(m, {"x": x, "s": np.array(0.5, np.float32)})["y"]
    np.testing.assert_array_equal(gm.run(x=x, s=np.float32(0.5))["y"], ref)
    gm.set_input(x=x, s=x[0])  # indexing an array gives a numpy scalar too
    gm.run()
    np.testing.assert_array_equal(gm.get_output(0), x * x[0])
    with pytest.raises(runtime.InputError, match="'s' must have dtype float32, got float64"):
        gm.run(x=x, s=np.float64(0.5))
    with pytest.raises(runtime.InputError, match="'s' must be a numpy array, got str"):
        gm.run(x=x, s="0.5")
    with pytest.raises(runtime.InputError, match=r"'x' must have shape \(3,\), got \(\)"
                       if dim == 3 else "'x'"):
        gm.run(x=np.float32(1), s=np.float32(0.5))


def test_builder_printer_dot_and_shape_errors():
    b = graph.Builder("t")
    x = b.input("x", (1, 3, 8, 8))
    w = b.const(np.ones((4, 3, 3, 3), np.float32), name="w")
    y = b.relu(b.conv(x, w, pads=1))
    g = b.build(y)
    assert y.shape == (1, 4, 8, 8)
    text = str(g)
    assert "conv(%x, %w)" in text and "relu" in text
    assert g.to_dot().startswith('digraph "t"')
    with pytest.raises(graph.GraphError, match="do not broadcast"):
        b.add(x, b.input("z", (2, 5)))


def test_shape_subgraph_is_folded():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write a flatten
    c = helper.make_tensor("c", TensorProto.INT64, [1], [-1])
    i0 = helper.make_tensor("i0", TensorProto.INT64, [], [0])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "c"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    ax = helper.make_tensor("ax", TensorProto.INT64, [1], [0])
    g = helper.make_graph(nodes, "f", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])],
                          [c, i0, ax])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    gr = graph.from_onnx(m)
    assert [n.op for n in gr.nodes] == ["reshape"]
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(graph.build(gr).run(x=x)["y"], x.reshape(2, 12))


def test_save_load_fresh_process(tmp_path):
    model = model_zoo.small_cnn()
    gm = graph.build(graph.from_onnx(model))
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    expected = next(iter(gm.run(x=x).values()))
    path = gm.save(tmp_path / "cnn.tlpkg")
    np.save(tmp_path / "x.npy", x)
    code = textwrap.dedent(f"""
        import sys, time, json
        import numpy as np
        t0 = time.perf_counter()
        from tensorlang import runtime
        gm = runtime.load({str(path)!r})
        t_load = time.perf_counter() - t0
        out = next(iter(gm.run(x=np.load({str(tmp_path / 'x.npy')!r})).values()))
        np.save({str(tmp_path / 'out.npy')!r}, out)
        bad = [m for m in ("llvmlite.binding", "tensorlang.codegen", "tensorlang.graph")
               if m in sys.modules]
        print(json.dumps({{"load_s": t_load, "compiler_modules": bad}}))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["compiler_modules"] == []
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)
    ref = ort_run(model, {"x": x})
    assert np.allclose(expected, next(iter(ref.values())), rtol=1e-4, atol=1e-6)


def test_artifact_refusals(tmp_path):
    gm = graph.build(graph.from_onnx(model_zoo.mlp()))
    path = gm.save(tmp_path / "m.tlpkg")
    man = json.loads((path / "manifest.json").read_text())
    man["required_features"] = man["required_features"] + ["no_such_cpu_feature"]
    (path / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(runtime.ArtifactError, match="no_such_cpu_feature"):
        runtime.load(path)
    man["required_features"].remove("no_such_cpu_feature")
    man["version"] = "99.0.0"
    (path / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(runtime.ArtifactError, match="major versions differ"):
        runtime.load(path)
    with pytest.raises(runtime.ArtifactError, match="not a tensorlang model"):
        runtime.load(tmp_path)


def test_extract_tasks_dedups_by_workload():
    tasks = graph.extract_tasks(graph.from_onnx(model_zoo.small_cnn()))
    convs = [t for t in tasks if t.op == "conv"]
    # after fusion a task is a conv with its tail: conv+relu twice differs in shape, the third
    # conv also holds the residual add (dedup across equal groups: tests/graph/test_passes.py)
    assert sum(t.weight for t in convs) == 4 and len(convs) == 4
    _s, args = convs[0].instantiate(convs[0].config(0))
    assert len(args) >= 3


def test_cli_tunes_a_model_then_compiles_and_runs_it(tmp_path, capsys):
    """`tensorlang tune model.onnx` (tvmc's flow): every tunable kernel of the model, heaviest
    first, into one log; `compile --log` builds with it; `run` gives the model's outputs."""
    import onnx

    from tensorlang.cli import main

    model = tmp_path / "cnn.onnx"
    onnx.save(model_zoo.small_cnn(), model)
    log, pkg = tmp_path / "cnn.jsonl", tmp_path / "cnn.tlpkg"
    assert main(["tune", str(model), "--trials", "2", "--log", str(log), "--tuner", "random",
                 "--seed", "0", "--tasks", "2", "--blocks", "16,8",
                 "--in-model-top", "0"]) == 0  # tested in autotune/test_task_scheduler.py
    out = capsys.readouterr().out
    n_tasks = len(graph.extract_tasks(graph.from_onnx(model), blocks=(16, 8)))
    assert f"{n_tasks} tunable workloads; tuning 2 x 2 trials" in out
    # the runner's cache flush calibrated against runs of the model here, before tuning
    assert re.search(r"cache flush \d+ MiB: 2 default kernels timed alone at [\d.]+x", out)
    assert "deploy with: tensorlang compile" in out
    assert len({json.loads(line)["workload"]["args"][1] for line in
                log.read_text().splitlines()}) == 2
    with pytest.warns(UserWarning, match="have no record"):  # the tasks not tuned
        assert main(["compile", str(model), "-o", str(pkg), "--log", str(log)]) == 0
    assert " tuned " in capsys.readouterr().out
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(pkg), "--input", f"x={tmp_path / 'x.npy'}",
                 "--output", str(tmp_path / "y.npz")]) == 0
    got = np.load(tmp_path / "y.npz")
    ref = graph.build(graph.from_onnx(model), opt_level=0).run(x=x)
    for k, v in ref.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("argv, message", [
    (["tune", "matmul"], "--args is required for a template"),
    (["tune", "MODEL", "--blocks", "16,x"], "--blocks must be comma-separated integers"),
    (["tune", "MODEL", "--tasks", "0"], "--tasks: must be at least 1"),
    (["tune", "MODEL", "--tuner", "annealing"], "--tuner must be one of"),
    (["tune", "MODEL", "--blocks", "4"], r"block 4 is not one of \(16, 8\)"),
    (["tune", "MODEL", "--flush-mib", "-1"], "--flush-mib: must be at least 0"),
    (["tune", "matmul", "--args", "16,16,16,float32", "--flush-mib", "8"],
     "--flush-mib is for models"),
])
def test_cli_tune_refusals(tmp_path, capsys, argv, message):
    import re

    import onnx

    from tensorlang.cli import main

    model = tmp_path / "cnn.onnx"
    onnx.save(model_zoo.small_cnn(), model)
    argv = [str(model) if a == "MODEL" else a for a in argv]
    try:  # a CLI user error: one line on stderr, exit status 2 (argparse's own exit, or main's)
        code = main([*argv, "--log", str(tmp_path / "x.jsonl"), "--trials", "1"])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and re.search(message, err) and len(err.strip().splitlines()) == 1, err


def test_cli_on_a_model_with_shape_variables(tmp_path, capsys):
    """`inspect` summarizes a model whose inputs have shape variables (it once ended in
    extract_tasks' error), `tune` asks for --shape (not for extract_tasks' sizes=, a Python
    argument), and the deploy line it prints repeats the --shape options that were tuned."""
    import onnx

    from tensorlang.cli import main

    model = tmp_path / "mlp.onnx"
    onnx.save(model_zoo.mlp(batch="batch"), model)
    assert main(["inspect", str(model)]) == 0
    out = capsys.readouterr().out
    assert "inputs with shape variables (x: float32[batch, 64])" in out and "--shape" in out
    log = tmp_path / "mlp.jsonl"
    assert main(["tune", str(model), "--log", str(log), "--trials", "1"]) == 2
    err = capsys.readouterr().err
    assert "shape variables (x: float32[batch, 64])" in err and "--shape NAME=" in err
    assert "sizes=" not in err and len(err.strip().splitlines()) == 1, err
    assert main(["tune", str(model), "--log", str(log), "--shape", "x=4,64", "--trials", "1",
                 "--tasks", "1", "--tuner", "random", "--seed", "0", "--flush-mib", "0",
                 "--in-model-top", "0"]) == 0
    assert f"tensorlang compile {model} -o model.tlpkg --log {log} --shape x=4,64" in \
        capsys.readouterr().out


def test_cli_tune_flush_mib_sets_the_runners_eviction(tmp_path, capsys, monkeypatch):
    import onnx
    from tensorlang.autotune import measure

    from tensorlang.cli import main

    sizes = []

    class Recorded(measure.LocalRunner):
        def __init__(self, *args, **kw):
            sizes.append(kw.get("flush_bytes"))
            super().__init__(*args, **kw)

    monkeypatch.setattr(measure, "LocalRunner", Recorded)
    model = tmp_path / "cnn.onnx"
    onnx.save(model_zoo.small_cnn(), model)
    assert main(["tune", str(model), "--trials", "2", "--log", str(tmp_path / "x.jsonl"),
                 "--tuner", "random", "--seed", "0", "--tasks", "1", "--in-model-top", "0",
                 "--flush-mib", "8"]) == 0
    assert "cache flush: 8 MiB (--flush-mib)" in capsys.readouterr().out
    assert sizes == [8 << 20]  # not calibrated: the size given


def test_a_model_too_big_for_memory_is_a_memory_error_saying_how_big():
    """2^70 floats: more than an address space holds (the element count was once an int64
    that wrapped around to 0, and numpy's reshape of an empty arena failed)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1 << 40, 1 << 30])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MemoryError, match=r"the model's activations need 8.8e\+12 GiB \(its "
                                          r"plan's arena\), which cannot be allocated here"):
        graph.build(graph.from_onnx(model))
