"""Misuse, round 2: GraphModule's and Program's public API called the wrong way (as onnxruntime
and TVM graph-executor users would), ONNX loops with adversarial trip counts and nesting, and
the CLI with odd files, paths and environment variables. Each misuse is a clear TensorlangError,
TypeError or ValueError (CLI: one line, exit 2), never an internal exception, a hang or a
silently wrong result."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from forked_cli import ForkedCLI
from onnx import TensorProto, helper, numpy_helper
from tensorlang.graph.frontends import onnx_control_flow
from tensorlang.runtime.graph_module import InputError

import tensorlang as tl
from tensorlang import graph

F, B, I64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64
A = np.ones((4, 8), np.float32)


@pytest.fixture(scope="module")
def gm():
    gb = graph.Builder("fx")
    x, y = gb.input("x", (4, 8)), gb.input("y", (4, 8))
    z = gb.relu(gb.add(x, y))
    return graph.build(gb.build([z, gb.sigmoid(z)]))


def _fresh_fixed():
    gb = graph.Builder("fx1")
    return graph.build(gb.build([gb.relu(gb.input("x", (4, 8)))]))


def _dyn():
    gb = graph.Builder("dyn")
    x = gb.input("x", (tl.var("batch"), 16))
    return graph.build(gb.build([gb.relu(x)]))


# ---------------------------------------------------------------------------- GraphModule


def test_get_output_before_any_run_is_refused_not_zeros():
    m = _fresh_fixed()
    with pytest.raises(InputError, match=r"has not run yet"):
        m.get_output(0)
    m.set_input(x=A)  # inputs set, still no run
    with pytest.raises(InputError, match=r"has not run yet"):
        m.get_output(0)
    m.run()
    np.testing.assert_array_equal(m.get_output(0), A)


def test_get_output_index_misuse(gm):
    gm.run(x=A, y=A)
    with pytest.raises(InputError, match=r"output index 5 out of range \(2 outputs"):
        gm.get_output(5)
    with pytest.raises(InputError, match=r"output index -3 out of range"):
        gm.get_output(-3)
    with pytest.raises(InputError, match=r"no output named 'nope'"):
        gm.get_output("nope")
    for bad in (1.5, None, True):
        with pytest.raises(TypeError, match=r"picked by its name or position \(int\)"):
            gm.get_output(bad)
    np.testing.assert_array_equal(gm.get_output(np.int64(-2)), gm.get_output(0))


@pytest.mark.parametrize("model", ["gm", "program"])
def test_set_input_without_a_name_is_refused(model, request):
    # a value alone was ignored (run() then used the input set before: a silently wrong
    # result); an array given as the name failed as "unhashable type: 'numpy.ndarray'"
    m = request.getfixturevalue(model)
    x = np.ones((4, 8) if model == "gm" else (2, 3), np.float32)
    with pytest.raises(TypeError, match=r"set_input: a value without the input's name"):
        m.set_input(value=x)
    with pytest.raises(TypeError, match=r"set_input: the input's name must be a str, got "
                                        r"ndarray"):
        m.set_input(x)
    with pytest.raises(TypeError, match=r"set_input: input 'x' is given twice"):
        m.set_input("x", x, x=x)


def test_inputs_named_like_the_run_and_set_input_parameters():
    # an input named "mode" landed in run's mode ("mode must be one of ..."); an attention
    # block's "value" (or an input called "name") in set_input's own parameters
    m = _model([helper.make_node("Add", ["value", "mode"], ["t"]),
                helper.make_node("Mul", ["t", "name"], ["y"])],
               [_vi("value", [2]), _vi("mode", [2]), _vi("name", [2])], [_vi("y", [2])])
    gm = graph.build(graph.from_onnx(m))
    feeds = {"value": np.array([1, 2], np.float32), "mode": np.array([10, 20], np.float32),
             "name": np.array([2, 3], np.float32)}
    want = (feeds["value"] + feeds["mode"]) * feeds["name"]
    np.testing.assert_array_equal(gm.run(**feeds)["y"], want)
    np.testing.assert_array_equal(gm(**feeds)["y"], want)
    gm.set_input(**feeds)
    gm.run()
    np.testing.assert_array_equal(gm.get_output(0), want)


def test_run_with_a_positional_array_or_a_bad_mode(gm):
    with pytest.raises(TypeError, match=r"got ndarray; inputs are given by name"):
        gm.run(A)
    with pytest.raises(TypeError, match=r"got ndarray"):
        gm.benchmark(A)
    gm.mode = "fast"
    try:
        with pytest.raises(ValueError, match=r"mode must be one of .* got 'fast'"):
            gm.run(x=A, y=A)
    finally:
        gm.mode = "graph"


@pytest.mark.parametrize("call, match", [
    (lambda m: m.profile(number=0), r"number must be an int >= 1, got 0"),
    (lambda m: m.profile(repeat=0), r"repeat must be an int >= 1, got 0"),
    (lambda m: m.benchmark(number=0), r"number must be an int >= 1, got 0"),
    (lambda m: m.benchmark(number=-2), r"number must be an int >= 1, got -2"),
    (lambda m: m.step_times(runs=0), r"runs must be an int >= 1, got 0"),
    (lambda m: m.dispatch_overhead(number=0), r"number must be an int >= 1, got 0"),
    # (an int64 in the native loop: 2**64 calls were timed as 0, 1e-29 s per call)
    (lambda m: m.profile(number=2**64), r"number = 18446744073709551616 is too large"),
])
def test_measuring_counts_below_one_are_refused(gm, call, match):
    with pytest.raises(ValueError, match=match):  # was ZeroDivisionError / negative times
        call(gm)


def test_measuring_arguments_of_the_wrong_type(gm):
    with pytest.raises(TypeError, match=r"number must be an int >= 1, got str"):
        gm.profile(number="a")
    with pytest.raises(TypeError, match=r"kernels must map node names to Modules, got int"):
        gm.step_times(kernels=5)
    # a node no step runs (a typo) was ignored: the step's own kernel timed in its place
    node = gm.plan["steps"][0]["node"]
    kernel = gm.kernels[gm.plan["steps"][0]["kernel"]]
    with pytest.raises(ValueError, match=r"no step runs node\(s\) \['typo'\]; the steps' "
                                         r"nodes are \["):
        gm.step_times(runs=1, kernels={"typo": kernel})
    with pytest.raises(TypeError, match=f"got {{'{node}': 'str'}}"):
        gm.step_times(runs=1, kernels={node: "kernel.tlm"})


def test_step_times_of_a_model_with_shape_variables_before_any_run():
    m = _dyn()
    with pytest.raises(InputError, match=r"inputs \['x'\] are not set"):  # was AttributeError
        m.step_times(runs=1)
    m.set_input(x=np.ones((3, 16), np.float32))
    assert list(m.step_times(runs=2)) == ["relu"]


def test_memory_at_checks_its_sizes(gm):
    m = _dyn()
    for bad in (-1, 1.5, "a", True):
        with pytest.raises(InputError, match=r"sizes must be ints >= 0"):
            m.memory_at(batch=bad)
    with pytest.raises(InputError, match=r"needs a size for each of \[\], got \['N'\]"):
        gm.memory_at(N=3)


def test_a_variant_that_would_recurse_is_refused():
    m = _dyn()
    with pytest.raises(ValueError, match=r"another build with no variants of its own"):
        m.add_variant({"batch": 3}, m)  # a run at batch 3 was a RecursionError
    with pytest.raises(ValueError, match=r"as ints >= 0"):
        m.add_variant({"batch": True}, _dyn())


@pytest.mark.parametrize("how", [pickle.dumps, copy.deepcopy, copy.copy])
def test_pickle_and_copy_are_refused_clearly(gm, how):
    with pytest.raises(TypeError, match=r"GraphModule cannot be pickled or copied.*save"):
        how(gm)
    kernel = next(iter(gm.kernels.values()))
    with pytest.raises(TypeError, match=r"Module cannot be pickled or copied.*load_module"):
        how(kernel)


# forks this multi-threaded process on purpose (what users do); Python 3.12+ warns at each
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_model_runs_in_a_forked_child():
    m = _fresh_fixed()
    m.run(x=A)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its copy of the module's code and buffers
        try:
            ok = bool(np.array_equal(m.run(x=A * 2)[m.output_names[0]], A * 2))
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"1"
    np.testing.assert_array_equal(m.run(x=A)[m.output_names[0]], A)


# ---------------------------------------------------------------------------- Program and loops


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def program():
    then_b = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [_vi("t", [2, 3])])
    else_b = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [_vi("e", [2, 3])])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)],
               [_vi("x", [2, 3]), _vi("c", [], B)], [_vi("y", [2, 3])])
    return graph.build(graph.from_onnx(m))


def test_program_api_misuse(program):
    with pytest.raises(InputError, match=r"no output 0 yet"):
        program.get_output(0)
    x = np.ones((2, 3), np.float32)
    program.run(x=x, c=np.array(False))
    with pytest.raises(InputError, match=r"output index 5 out of range"):  # was IndexError
        program.get_output(5)
    with pytest.raises(TypeError, match=r"picked by its name or position"):
        program.get_output(1.5)
    with pytest.raises(TypeError, match=r"inputs are given by name"):
        program.run(x)
    with pytest.raises(ValueError, match=r"number must be an int >= 1, got 0"):
        program.benchmark(number=0)
    with pytest.raises(TypeError, match=r"Program cannot be pickled"):
        pickle.dumps(program)
    with pytest.raises(InputError, match=r"must have dtype bool, got float32"):
        program.run(x=x, c=np.array(1.0, np.float32))


def _acc_body(name, inner=None):
    """acc + 1 per iteration, or ``inner`` (a nested Loop over acc) as the body's node."""
    node = inner or helper.make_node("Add", ["acc_in", "one"], ["acc_out"])
    return helper.make_graph([node, helper.make_node("Identity", ["c"], ["cond_out"])], name,
                             [_vi("i", [], I64), _vi("c", [], B), _vi("acc_in", [3])],
                             [_vi("cond_out", [], B), _vi("acc_out", [3])])


def _nested_loops(outer, inner):
    inner_loop = helper.make_node("Loop", ["N", "", "acc_in"], ["acc_out"],
                                  body=_acc_body("inner_body"), name="inner")
    loop = helper.make_node("Loop", ["M", "", "x"], ["acc"],
                            body=_acc_body("outer_body", inner_loop), name="outer")
    inits = [numpy_helper.from_array(np.ones(3, np.float32), "one"),
             numpy_helper.from_array(np.array(outer, np.int64), "M"),
             numpy_helper.from_array(np.array(inner, np.int64), "N")]
    return _model([loop], [_vi("x", [3])], [_vi("acc", [3])], inits)


def test_nested_loops_share_the_unroll_limit(monkeypatch):
    """The limit on unrolled nodes held per loop: nested loops multiplied past it (4000 x 4000
    imported for ever)."""
    m = _nested_loops(3, 4)
    out = graph.build(graph.from_onnx(m)).run(x=np.zeros(3, np.float32))
    np.testing.assert_array_equal(out["acc"], np.full(3, 12, np.float32))
    monkeypatch.setattr(onnx_control_flow, "MAX_UNROLL_NODES", 100)
    with pytest.raises(graph.OnnxImportError, match=r"nested loops' counted together"):
        graph.from_onnx(_nested_loops(20, 20))  # 20 x 20 x 2 nodes, each loop alone under 100
    graph.from_onnx(_nested_loops(3, 4))  # and the count starts again for the next model


@pytest.mark.parametrize("m, shown", [(np.zeros(0, np.int64), r"int64\[0\]"),
                                      (np.array(2.7, np.float32), r"float32\[\]"),
                                      (np.array([2, 3], np.int64), r"int64\[2\]"),
                                      (np.array(True), r"bool\[\]")])
def test_a_trip_count_that_is_not_one_integer_is_refused(m, shown):
    loop = helper.make_node("Loop", ["M", "", "x"], ["acc"], body=_acc_body("b"), name="loop")
    model = _model([loop], [_vi("x", [3])], [_vi("acc", [3])],
                   [numpy_helper.from_array(np.ones(3, np.float32), "one"),
                    numpy_helper.from_array(m, "M")])
    with pytest.raises(graph.OnnxImportError, match=rf"trip count M must be one integer, got "
                                                    rf"{shown}"):
        graph.from_onnx(model)


def test_a_loop_condition_that_is_not_bool_is_refused():
    loop = helper.make_node("Loop", ["", "keep", "x"], ["acc"], body=_acc_body("b"),
                            name="loop")
    model = _model([loop], [_vi("x", [3])], [_vi("acc", [3])],
                   [numpy_helper.from_array(np.ones(3, np.float32), "one"),
                    numpy_helper.from_array(np.array(0.5, np.float32), "keep")])
    with pytest.raises(graph.OnnxImportError, match=r"the condition must be a bool, got float32"):
        graph.from_onnx(model)


# ---------------------------------------------------------------------------- CLI


def _cli(*argv, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "tensorlang.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def forked_cli():
    """The CLI runs of the tests below (their `_cli`: this run method) as forks of one process
    that imported the CLI (tests/forked_cli.py: each still a process of its own, with the
    given environment, its exit status, stdout and stderr), not an interpreter start and
    imports for each of the 12; the fixture's compile runs python -m tensorlang.cli itself."""
    cli = ForkedCLI()
    try:
        yield cli.run
    finally:
        cli.close()


def _one_line_error(proc, message):
    err = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "a bug?" not in proc.stderr, proc.stderr
    assert len(err) == 1 and message in err[0], proc.stderr


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    import onnx

    d = tmp_path_factory.mktemp("cli")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "d", [_vi("x", ["n", 3])],
                          [_vi("y", ["n", 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
              d / "dyn.onnx")
    proc = _cli("compile", str(d / "dyn.onnx"), "-o", str(d / "dyn.tlpkg"))
    assert proc.returncode == 0, proc.stderr
    np.save(d / "x.npy", np.ones((2, 3), np.float32))
    np.save(d / "x0.npy", np.ones((0, 3), np.float32))
    os.mkfifo(d / "fifo.npy")
    return d


def test_cli_fifos_are_refused_not_read_for_ever(artifact, forked_cli):
    _cli = forked_cli
    d = artifact
    _one_line_error(_cli("run", str(d / "dyn.tlpkg"), "--input", f"x={d / 'fifo.npy'}"),
                    "is not a regular file; give a input file")
    _one_line_error(_cli("compile", str(d / "fifo.npy"), "-o", str(d / "f.tlpkg")),
                    "is not a regular file; give a model file")
    _one_line_error(_cli("inspect", str(d / "fifo.npy")), "is not a regular file")


def test_cli_run_odd_inputs_and_outputs(artifact, forked_cli):
    _cli = forked_cli
    d, pkg, x = artifact, str(artifact / "dyn.tlpkg"), f"x={artifact / 'x.npy'}"
    _one_line_error(_cli("run", pkg, "--input", x, "--input", x), "--input x is given twice")
    _one_line_error(_cli("run", pkg, "--input", x, "--output", str(d)),
                    "is a directory; give a file name (.npz)")
    _one_line_error(_cli("run", pkg, "--input", x, "--output", str(d / "nope" / "o.npz")),
                    "no such directory")
    proc = _cli("run", pkg, "--input", f"x={d / 'x0.npy'}", "--output", str(d / "o.npz"))
    assert proc.returncode == 0, proc.stderr  # a zero-size batch: no max to print
    assert "y: float32[0, 3] (empty)" in proc.stdout
    assert np.load(d / "o.npz")["y"].shape == (0, 3)


def test_cli_run_whose_reader_went_away_still_writes_its_output_file(artifact):
    # `tensorlang run ... --output o.npz | head -1`: the first print's BrokenPipeError ended
    # the run before np.savez (no file) with "error: [Errno 32] Broken pipe"
    out = artifact / "piped.npz"
    proc = subprocess.Popen([sys.executable, "-m", "tensorlang.cli", "run",
                             str(artifact / "dyn.tlpkg"), "--input", f"x={artifact / 'x.npy'}",
                             "--output", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == "", err  # quiet, as a tool SIGPIPE ends
    assert np.load(out)["y"].shape == (2, 3)


def test_a_model_without_inputs_runs_from_the_cli_and_when_called(tmp_path, forked_cli):
    # its run() returns None (TVM's stateful style): `tensorlang run` failed with
    # "AttributeError: 'NoneType' object has no attribute 'items' (a bug?)", gm() gave None
    gb = graph.Builder("noin")
    gm = graph.build(gb.build([gb.relu(gb.const(np.array([-1, 0, 2], np.float32), name="c"))]))
    (y,) = gm().values()
    np.testing.assert_array_equal(y, [0, 0, 2])
    with pytest.raises(InputError, match=r"unknown input\(s\) \['x'\]; the model's inputs "
                                         r"are none \(it takes no inputs\)$"):  # were ''
        gm.run(x=y)
    gm.save(tmp_path / "noin.tlpkg")
    proc = forked_cli("run", str(tmp_path / "noin.tlpkg"))
    assert proc.returncode == 0 and "float32[3] mean=0.666667 max=2" in proc.stdout, proc.stderr


def test_calling_a_model_after_set_input_returns_its_outputs(gm, program):
    x = np.ones((4, 8), np.float32)
    gm.set_input(x=x, y=x)
    assert sorted(gm()) == sorted(gm.output_names)  # was None
    program.set_input(x=np.ones((2, 3), np.float32), c=np.array(True))
    np.testing.assert_array_equal(program()["y"], np.ones((2, 3)))


def test_cli_run_writes_outputs_named_like_savez_arguments(tmp_path, forked_cli):
    # np.savez(path, **outputs): an output named "file" failed after the run ("got multiple
    # values for argument 'file'"), one named "allow_pickle" was silently left out
    import onnx

    m = _model([helper.make_node("Relu", ["x"], ["file"]),
                helper.make_node("Neg", ["x"], ["allow_pickle"])],
               [_vi("x", [3])], [_vi("file", [3]), _vi("allow_pickle", [3])])
    graph.build(graph.from_onnx(m)).save(tmp_path / "m.tlpkg")
    x = np.array([-1, 0, 2], np.float32)
    np.save(tmp_path / "x.npy", x)
    run = ("run", str(tmp_path / "m.tlpkg"), "--input", f"x={tmp_path / 'x.npy'}", "--output")
    proc = forked_cli(*run, str(tmp_path / "o.npz"))
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp_path / "o.npz") as z:
        assert sorted(z) == ["allow_pickle", "file"]
        np.testing.assert_array_equal(z["allow_pickle"], -x)
    # nor over a file that is not an .npz (was replaced)
    onnx.save(m, tmp_path / "m.npz")
    before = (tmp_path / "m.npz").read_bytes()
    _one_line_error(forked_cli(*run, str(tmp_path / "m.npz")), "is a file that is not an .npz")
    assert (tmp_path / "m.npz").read_bytes() == before


def test_cli_a_broken_pipe_other_than_stdout_is_a_one_line_error(monkeypatch, capsys):
    # (a measuring worker's pipe, say: only a reader of stdout going away is quiet)
    from tensorlang import cli

    def broken():
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "_check_environment", broken)
    assert cli.main(["inspect", "log.jsonl"]) == 2
    assert capsys.readouterr().err == "tensorlang inspect: error: [Errno 32] Broken pipe\n"


def test_cli_checks_the_thread_variables_for_every_command(artifact, forked_cli):
    _cli = forked_cli
    pkg, x = str(artifact / "dyn.tlpkg"), f"x={artifact / 'x.npy'}"
    for value in ("0", "-1", "abc"):
        _one_line_error(_cli("run", pkg, "--input", x, env={"TENSORLANG_NUM_THREADS": value}),
                        f"TENSORLANG_NUM_THREADS must be a positive integer, got '{value}'")
    _one_line_error(_cli("run", pkg, "--input", x, env={"TENSORLANG_BIND_THREADS": "maybe"}),
                    "TENSORLANG_BIND_THREADS must be 0 or 1")


def test_cli_a_model_too_big_for_memory_is_a_user_error(artifact, forked_cli):
    _cli = forked_cli
    d = artifact
    # 10**15 rows: past any address space, so refused on every machine
    _one_line_error(_cli("compile", str(d / "dyn.onnx"), "-o", str(d / "big.tlpkg"),
                         "--shape", "x=1000000000000000,3"), "cannot be allocated here")
