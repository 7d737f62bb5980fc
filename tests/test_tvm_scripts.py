"""TVM scripts run as written (issue 16): the scripts in tests/tvm_scripts/ are our own versions
of TVM's tensor-expression tutorials and of its two CPU auto_scheduler tutorials (which tune a
few trials each), written as TVM users write them (top-level code, numpy checks), each run as
a script in a fresh interpreter. The tests below them check TVM's spellings
one by one, and the errors for the TVM names we do not have."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import te

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "tests" / "tvm_scripts").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_tvm_script_runs_as_written(script, tmp_path):
    # in a directory of its own: the auto_scheduler scripts write their logs where they run
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=300, check=False, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-4000:]
    assert r.stdout.rstrip().endswith("all results match numpy"), r.stdout[-2000:]


def test_the_scripts_are_there():
    assert {p.stem for p in SCRIPTS} >= {"getting_started", "schedule_primitives", "reduction",
                                         "tuple_inputs", "opt_gemm", "opt_gemm_write_cache",
                                         "te_schedule_idioms", "extern_tensor_functions",
                                         "scan", "auto_scheduler_matmul",
                                         "auto_scheduler_network", "import_swap_only",
                                         "extern_op_float_bias", "topi_x86_schedules",
                                         "te_unit_test_idioms"}


# ----------------------------------------------------------------------------- rfactor


def _row_sum(rows=5, cols=64):
    A = tl.placeholder((rows, cols), name="A")
    k = tl.reduce_axis((0, cols), name="k")
    B = tl.compute((rows,), lambda i: tl.sum(A[i, k], axis=k), name="B")
    return A, B, k


@pytest.mark.parametrize("factor_axis", [0, 1])
def test_rfactor_factor_axis_is_tvms_position_of_the_factored_dimension(factor_axis):
    A, B, k = _row_sum()
    s = tl.create_schedule(B)
    _, ki = s[B].split(k, factor=16)
    BF = s.rfactor(B, ki, factor_axis=factor_axis)
    assert tuple(int(d.value) for d in BF.shape) == ((16, 5) if factor_axis == 0 else (5, 16))
    s[BF].parallel(s[BF].op.axis[0])
    f = tl.build(s, [A, B], name=f"rf_axis_{factor_axis}")
    a = np.random.default_rng(0).random((5, 64), dtype=np.float32)
    b = np.zeros(5, np.float32)
    f(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)


def test_rfactor_positional_and_older_keyword_agree_with_factor_axis():
    _, B, k = _row_sum()
    shapes = []
    for call in (lambda s, ki: s.rfactor(B, ki, 1),
                 lambda s, ki: s.rfactor(B, ki, factor_index=1),
                 lambda s, ki: s.rfactor(B, axis=ki, factor_axis=1)):
        s = tl.create_schedule(B)
        _, ki = s[B].split(k, factor=16)
        shapes.append(tuple(int(d.value) for d in call(s, ki).shape))
    assert shapes == [(5, 16)] * 3


def test_rfactor_refuses_two_different_positions():
    _, B, k = _row_sum()
    s = tl.create_schedule(B)
    _, ki = s[B].split(k, factor=16)
    with pytest.raises(TypeError, match="factor_index=1 is the older name of factor_axis=2"):
        s.rfactor(B, ki, factor_axis=2, factor_index=1)
    with pytest.raises(ValueError, match=r"factor_axis must be in \[0, 1\].*got 2"):
        s.rfactor(B, ki, factor_axis=2)


@pytest.mark.parametrize("key", ["factor_axis", "factor_index"])
def test_rfactor_records_replay_under_both_names(key):
    _, B, _ = _row_sum()
    trace = tl.Trace.loads([
        {"kind": "split", "stage": "B", "loops": ["k"], "args": {"factor": 16, "nparts": None}},
        {"kind": "rfactor", "stage": "B", "loops": ["k.inner"], "args": {key: 1}}])
    s = tl.create_schedule(B).apply_trace(trace)
    rf = s.stage_by_name("B.rf")
    assert [int(d.value) for d in rf.op.output(0).shape] == [5, 16]
    assert s.trace.to_json()[-1]["args"] == {"factor_axis": 1}


# ----------------------------------------------------------------------------- comm_reducer


def _argmax_kernel(fcombine, name):
    argmax = tl.comm_reducer(fcombine, lambda t0, t1: (tl.const(-1, t0), tl.min_value(t1)),
                             name=name)
    idx = tl.placeholder((6, 9), name="idx", dtype="int32")
    val = tl.placeholder((6, 9), name="val", dtype="float32")
    k = tl.reduce_axis((0, 9), "k")
    T0, T1 = tl.compute((6,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    return tl.build(tl.create_schedule(T0.op), [idx, val, T0, T1], name=name)


def _first_max_tuples(x, y):
    pick_x = (x[1] > y[1]) | ((x[1] == y[1]) & (x[0] < y[0]))
    return tl.select(pick_x, x[0], y[0]), tl.select(pick_x, x[1], y[1])


def _first_max_flat(i0, v0, i1, v1):
    return _first_max_tuples((i0, v0), (i1, v1))


@pytest.mark.parametrize("fcombine", [_first_max_tuples, _first_max_flat], ids=["tvm", "flat"])
def test_comm_reducer_takes_tvms_tuple_combiner_and_the_flat_one(fcombine):
    f = _argmax_kernel(fcombine, "argmax_" + fcombine.__name__.rsplit("_", 1)[1])
    val = np.random.default_rng(1).integers(0, 4, (6, 9)).astype(np.float32)  # with ties
    idx = np.tile(np.arange(9, dtype=np.int32), (6, 1))
    t0, t1 = np.zeros(6, np.int32), np.zeros(6, np.float32)
    f(idx, val, t0, t1)
    np.testing.assert_array_equal(t0, val.argmax(axis=1))
    np.testing.assert_array_equal(t1, val.max(axis=1))


def test_comm_reducer_of_the_wrong_arity_is_refused_where_it_is_called():
    red = tl.comm_reducer(lambda a, b, c: a, lambda t0, t1: (tl.const(0, t0), tl.const(0, t1)),
                          name="odd")
    A = tl.placeholder((4, 4), name="A")
    k = tl.reduce_axis((0, 4), "k")
    with pytest.raises(TypeError, match=r"reducer odd: fcombine takes 3 positional arguments.*"
                                        r"fcombine\(x, y\).*fcombine\(x0, x1, y0, y1\)"):
        tl.compute((4,), lambda i: red((A[i, k], A[i, k]), axis=k), name="R")


def test_comm_reducer_returning_too_few_values_is_refused():
    red = tl.comm_reducer(lambda x, y: x[0], lambda t0, t1: (tl.const(0, t0), tl.const(0, t1)),
                          name="short")
    A = tl.placeholder((4, 4), name="A")
    k = tl.reduce_axis((0, 4), "k")
    R0, R1 = tl.compute((4,), lambda i: red((A[i, k], A[i, k]), axis=k), name="R")
    with pytest.raises(ValueError, match="reducer short: fcombine returned 1 values for a "
                                         "reduction of 2"):
        tl.build(tl.create_schedule(R0.op), [A, R0, R1])


# ----------------------------------------------------------------------------- small spellings


def test_tensor_call_is_indexing():
    A = tl.placeholder((3, 4), name="A")
    i, j = tl.var("i"), tl.var("j")
    assert str(A(i, j)) == str(A[i, j])
    with pytest.raises(ValueError, match="tensor A has 2 dimensions, indexed with 1"):
        A(i)


def test_lower_accepts_simple_mode():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] * 2, name="B")
    s = tl.create_schedule(B)
    assert str(tl.lower(s, [A, B], simple_mode=True)) == str(tl.lower(s, [A, B]))
    with pytest.raises(TypeError, match="simple_mode must be a bool"):
        tl.lower(s, [A, B], simple_mode="yes")


def test_te_namespace_has_tvms_te_names():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + te.const(1, "float32"), name="B")
    s = te.create_schedule(B.op)
    assert isinstance(s, tl.Schedule)
    assert te.size_var("n").name == "n"
    for name in ("extern", "scan"):  # the submodule of that name does not shadow the function
        importlib.import_module(f"tensorlang.te.{name}")
        assert callable(getattr(te, name)) and getattr(te, name) is getattr(tl, name)


# ----------------------------------------------------------------------------- time_evaluator


@pytest.fixture(scope="module")
def add():
    A = tl.placeholder((64,), name="A")
    B = tl.compute((64,), lambda i: A[i] + 1, name="B")
    return tl.build(tl.create_schedule(B), [A, B], name="add_one")


def test_time_evaluator_takes_tvms_call_form(add):
    a, b = np.ones(64, np.float32), np.zeros(64, np.float32)
    res = add.time_evaluator(add.entry_name, tl.cpu(0), number=4, repeat=3)(a, b)
    assert len(res.results) == 3 and res.number == 4 and res.mean > 0
    assert len(add.time_evaluator(add.entry_name, tl.device("llvm", 0))(a, b).results) == 1
    assert len(add.time_evaluator(2, 2)(a, b).results) == 2  # our positional form
    np.testing.assert_array_equal(b, a + 1)


def test_time_evaluator_tvm_form_errors(add):
    with pytest.raises(ValueError, match="one function, 'add_one' .*not 'main'"):
        add.time_evaluator("main", tl.cpu(0))
    with pytest.raises(TypeError, match="expected a device such as tl.cpu"):
        add.time_evaluator(add.entry_name, "cpu")
    with pytest.raises(TypeError, match=r"TVM's \['cooldown_interval_ms'\] are not supported"):
        add.time_evaluator(add.entry_name, tl.cpu(0), cooldown_interval_ms=5)
    # our own form refuses them the same way (it was `_timing_form() got an unexpected keyword`)
    with pytest.raises(TypeError, match=r"TVM's \['cache_flush_bytes'\] are not supported"):
        add.time_evaluator(number=2, cache_flush_bytes=1 << 20)


@pytest.mark.parametrize("kind,message", [
    ("cuda", "host CPU only .*no GPU"), ("opencl", "host CPU only"),
    ("tpu", "unknown device"), ("", "unknown device")])
def test_device_other_than_the_cpu_is_refused(kind, message):
    with pytest.raises(ValueError, match=message):
        tl.device(kind, 0)


def test_a_second_cpu_index_is_refused():
    with pytest.raises(ValueError, match="one CPU device, index 0"):
        tl.cpu(1)


# ----------------------------------------------------------------------------- TVM names


def test_gpu_only_stage_primitives_say_so():
    A = tl.placeholder((16,), name="A")
    B = tl.compute((16,), lambda i: A[i] + 1, name="B")
    s = tl.create_schedule(B)
    with pytest.raises(AttributeError, match=r"'Stage' object has no attribute 'bind': "
                                             r"Stage.bind.* GPU construct.*parallel"):
        s[B].bind(B.op.axis[0], None)
    with pytest.raises(AttributeError, match="set_scope is a GPU construct.*cache_write"):
        s[B].set_scope("shared")
    with pytest.raises(TypeError, match="tensorize on stage B: expected a tensor intrinsic"):
        s[B].tensorize(B.op.axis[0], None)  # a Stage primitive now (te/tensorize.py)
    with pytest.raises(AttributeError, match="^'Stage' object has no attribute 'no_such'$"):
        s[B].no_such  # noqa: B018
    with pytest.raises(AttributeError, match="create_group is not supported"):
        s.create_group(outputs=B, inputs=A)


def test_tvm_schedule_spellings_of_the_te_tests():
    A = tl.placeholder((40,), name="A")
    B = tl.compute((40,), lambda i: A[i] * 2, name="B")
    s = tl.create_schedule(B)
    (x,) = s[B].op.axis
    assert s[B].fuse(*s[B].op.axis) is x  # fuse of one loop is the loop (a 1-D stage)
    xo, xi = s[B].split(x, factor=8, disable_predication=True)
    xio, xii = s[B].split(xi, factor=4)
    s[B].pragma(xo, "unroll_explicit", False)
    s[B].pragma(xio, "unroll")
    s[B].pragma(xii, "vectorize")
    assert [v for v in s[B].iter_attrs.values()] == ["unroll", "vectorize"]
    with pytest.raises(RuntimeError, match="not adjacent") as refused:  # as TVM's errors
        s[B].fuse(xo, xii)
    assert isinstance(refused.value, tl.error.TVMError)
    with pytest.raises(ValueError, match="singleton loop of a 0-d stage is not supported"):
        s[B].fuse()
    f = tl.build(s, [A, B])
    a = np.arange(40, dtype="float32")
    b = np.zeros(40, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_runtime_convert_makes_constants_of_python_values():
    n = tl.runtime.convert(12)
    A = tl.compute((n, n), lambda i, j: (i * 12 + j).astype("float32"), name="A")
    B = tl.compute((n - 2,), lambda i: A[i + 1, i] * 2, name="B")
    s = tl.create_schedule(B)
    s[B].split(B.op.axis[0], factor=tl.runtime.convert(3))
    b = np.zeros(10, "float32")
    tl.build(s, [B])(b)
    np.testing.assert_array_equal(b, (np.arange(1, 11) * 12 + np.arange(10)) * 2)
    assert tl.runtime.convert([1, "x"])[1] == "x" and int(tl.runtime.convert((4,))[0]) == 4
    assert tl.convert is tl.runtime.convert  # tvm.convert before TVM 0.7


def test_normalize_returns_the_schedule():
    A = tl.placeholder((16,), name="A")
    B = tl.compute((16,), lambda i: A[i] + 1, name="B")
    s = tl.create_schedule(B)
    s[B].split(B.op.axis[0], factor=4)
    assert s.normalize() is s


@pytest.mark.parametrize("name,message", [
    ("thread_axis", "te.thread_axis is a GPU construct.*parallel"),
    ("cuda", r"tvm.cuda\(\) is a GPU construct.*tl.cpu\(0\)"),
    ("relay", r"tvm.relay \(Relay graphs\) is not in tensorlang.*graph.from_onnx"),
    ("topi", r"tvm.topi is not in tensorlang.*tensorlang.ops"),
    ("create_prim_func", "TensorIR.*tl.create_schedule"),
    ("autotvm", "from tensorlang import autotune"),
    ("hybrid", "te.hybrid .*not supported.*tl.compute"),
    ("gradient", "te.gradient .*not supported"),
    ("transform", r"tvm.transform .*fixed ordered list.*tl.build\(.*opt_level="),
    ("arith", r"tvm.arith \(the integer analyzer\) is not exposed"),
    ("context", r"tvm.context\(dev_type, index\) \(before TVM 0.8\): tl.device"),
    ("module", r"tvm.module.enabled is tl.runtime.enabled"),
    ("make", r"tvm.make.Select is tl.select"),
])
def test_tvm_module_names_we_lack_name_ours(name, message):
    with pytest.raises(AttributeError, match=f"module 'tensorlang' has no attribute '{name}': "
                                             f".*{message}"):
        getattr(tl, name)
    with pytest.raises(AttributeError, match=message):
        getattr(te, name)


def test_tvm_te_internals_say_what_to_use():
    with pytest.raises(AttributeError, match=r"tvm.te.schedule \(InferBound.*tl.lower\(s, args\)"):
        te.schedule  # noqa: B018
    with pytest.raises(AttributeError, match=r"save_json / load_json: a schedule is saved as its "
                                             r"trace \(s.trace.dumps\(\)"):
        tl.ir.save_json  # noqa: B018
    assert te.Schedule is tl.Schedule and te.Stage is tl.Stage
    state = te.placeholder((3, 2))
    res = te.scan(te.compute((1, 2), lambda _, i: i * 1.0),
                  te.compute((3, 2), lambda t, i: state[t - 1, i] * 2.0), state)
    assert isinstance(res.op, te.ScanOp)


def test_autotvm_config_entities_and_error_codes_under_tvms_paths():
    # TOPI-style templates: `from tvm.autotvm.task.space import SplitEntity` in a fallback
    # config; callbacks compare res.error_no with MeasureErrorNo.NO_ERROR
    from tensorlang.autotune.measure import MeasureErrorNo, MeasureResult
    from tensorlang.autotune.task.space import OtherOptionEntity, SplitEntity

    from tensorlang import autotune as autotvm

    assert autotvm.task.space.SplitEntity is SplitEntity
    assert OtherOptionEntity(3).val == 3
    assert MeasureResult(costs=[1e-3]).error_no == MeasureErrorNo.NO_ERROR == 0
    assert MeasureResult(error=autotvm.BUILD_ERROR).error_no == MeasureErrorNo.COMPILE_HOST
    assert MeasureResult(error=autotvm.TIMEOUT).error_no == MeasureErrorNo.RUN_TIMEOUT


@pytest.mark.parametrize("path, message", [
    ("RPCRunner", "no RPC measurement.*autotune.LocalRunner.*autotune.DaskRunner"),
    ("measure.request_remote", "no RPC measurement"),
    ("task.extract_from_program", r"graph.extract_tasks\(g, target\)"),
    ("register_topi_compute", r"tl.ops\) registers its own templates.*autotune.template"),
    ("register_topi_schedule", r"@autotune.template\(name\)"),
    ("tuner.DropletTuner", "XGBTuner, GATuner"),
    ("GLOBAL_SCOPE", "instantiated the same way when tuned and when applied"),
])
def test_autotvm_names_we_lack_name_ours(path, message):
    """docs/tvm_compat.md's AutoTVM rows marked "no" / "renamed", under the import swap
    `from tensorlang import autotune as autotvm` (they were Python's bare AttributeError)."""
    from tensorlang import autotune as autotvm

    owner, _, name = path.rpartition(".")
    module = getattr(autotvm, owner) if owner else autotvm
    with pytest.raises(AttributeError, match=f"has no attribute '{name}': autotvm.*{message}"):
        getattr(module, name)
    with pytest.raises(AttributeError, match=r"has no attribute 'nothing_at_all'$"):
        autotvm.nothing_at_all  # noqa: B018 - any other name: Python's message


def test_unknown_module_name_keeps_pythons_message():
    with pytest.raises(AttributeError, match="^module 'tensorlang' has no attribute 'nope'$"):
        tl.nope  # noqa: B018
    assert tl.BuildTimeoutError.__name__ == "BuildTimeoutError"


# ----------------------------------------------------------------------------- import swap only
# tvm.nd, tvm.testing, tvm.tir, tvm.target, tvm.contrib: names a TVM script reaches through the
# `tvm` module, so that changing its import lines is enough (tests/tvm_scripts/import_swap_only.py)


def test_nd_arrays_copy_as_tvms():
    a = tl.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3), tl.cpu(0))
    b = tl.nd.empty((2, 3), "float32", tl.cpu(0))
    assert b.copyfrom(a) is b and a.copyto(np.zeros((2, 3), np.float32)).sum() == 15
    c = a.copyto(tl.cpu(0))
    assert c is not a and type(c.numpy()) is np.ndarray
    np.testing.assert_array_equal(c, a)
    with pytest.raises(ValueError, match=r"copyto: target shape \(3, 2\) differs"):
        a.copyto(np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"copyfrom: source shape \(6,\) differs"):
        b.copyfrom(np.zeros(6, np.float32))
    with pytest.raises(TypeError, match="copyto: expected an array or a device"):
        a.copyto("cpu")
    with pytest.raises(AttributeError, match="tl.nd has array.*empty"):
        tl.nd.ones  # noqa: B018


def test_testing_assert_allclose_checks_shapes():
    tl.testing.assert_allclose(np.ones(3), [1.0, 1.0, 1.0 + 1e-9])
    with pytest.raises(AssertionError, match=r"shapes differ: actual \(3,\), desired \(1,\)"):
        tl.testing.assert_allclose(np.ones(3), [1.0])
    with pytest.raises(AssertionError):
        tl.testing.assert_allclose(np.ones(3), np.ones(3) * 1.01, rtol=1e-3)
    with pytest.raises(AttributeError, match="test-suite helpers are not provided"):
        tl.testing.requires_gpu  # noqa: B018


def test_tir_expression_helpers_and_refusals():
    from tensorlang import tir

    assert str(tir.FloatImm("float32", 2)) == str(tl.const(2.0, "float32"))
    assert tir.IntImm("int32", 3).dtype == "int32"
    assert tir.Cast("float32", tl.var("i")).dtype == "float32"
    assert tir.Select is tl.select and tir.Var("k").name == "k"
    with pytest.raises(TypeError, match="FloatImm: dtype must be a float type"):
        tir.FloatImm("int32", 1)
    with pytest.raises(TypeError, match="IntImm: value must be an integer"):
        tir.IntImm("int32", 1.5)
    with pytest.raises(AttributeError, match="decl_buffer.*tl.decl_tensor_intrin"):
        tir.decl_buffer  # noqa: B018
    with pytest.raises(AttributeError, match="tvm.tir.Schedule: TensorIR is not in tensorlang"):
        tir.Schedule  # noqa: B018


def test_target_is_the_target_string():
    tgt = tl.target.Target(target="llvm", host="llvm")
    assert tgt == "llvm" and tgt.kind.name == "llvm" and tl.device(tgt.kind.name, 0) == tl.cpu(0)
    assert tl.target.Target("llvm  -mcpu=haswell").attrs == {"mcpu": "haswell"}
    for spec, message in (("cuda", "cuda is a GPU target.*use 'llvm'"),
                          ("c", "C source backend is not supported"),
                          ("x86", "unknown target kind 'x86'")):
        with pytest.raises(ValueError, match=message):
            tl.target.Target(spec)
    with pytest.raises(ValueError, match="unknown host kind"):
        tl.target.Target("llvm", host="arm")
    with pytest.raises(TypeError, match="a dict target is not supported"):
        tl.target.Target({"kind": "llvm"})


def test_build_in_a_target_scope_and_target_host():
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: A[i] + 1, name="B")
    s = tl.create_schedule(B)
    with tl.target.Target("llvm -mcpu=haswell"):
        assert tl.target.Target.current() == "llvm -mcpu=haswell"
        f = tl.build(s, [A, B], name="scoped")
    assert f.manifest["target"]["cpu"] == "haswell" and tl.target.Target.current() is None
    g = tl.build(s, [A, B], "llvm", name="hosted", target_host="llvm")
    b = np.zeros(8, np.float32)
    g(np.ones(8, np.float32), b)
    np.testing.assert_array_equal(b, 2)
    with pytest.raises(ValueError, match="target_host='cuda'.*not supported"):
        tl.build(s, [A, B], "llvm", target_host="cuda")


def test_export_library_saves_and_refuses_compiler_options(add, tmp_path):
    path = tmp_path / "add.so"
    add.export_library(str(path))
    loaded = tl.runtime.load_module(path)
    b = np.zeros(64, np.float32)
    loaded.get_function("add_one")(np.ones(64, np.float32), b)
    np.testing.assert_array_equal(b, 2)
    with pytest.raises(TypeError, match=r"export_library: \['fcompile'\] are not supported"):
        add.export_library(str(path), fcompile=lambda *a: None)


def test_runtime_enabled():
    assert tl.runtime.enabled("llvm") and tl.runtime.enabled("llvm -mcpu=haswell")
    assert not tl.runtime.enabled("cuda")
    with pytest.raises(TypeError, match="expected a target or device name"):
        tl.runtime.enabled(None)


@pytest.mark.parametrize("module,message", [
    ("tensorlang.relay", "Relay graphs.*graph.from_onnx.*graph.build"),
    ("tensorlang.relax", "graph.from_onnx"),
    ("tensorlang.topi", "tensorlang.ops"),
    ("tensorlang.contrib.graph_executor", "runtime.GraphModule"),
    ("tensorlang.contrib.cc", "export_library"),
    ("tensorlang.contrib.clang", "tl.load_library"),
    ("tensorlang.contrib.tedd", r"print\(tl.lower\(s, args\)\)"),
    ("tensorlang.contrib.dlpack", "kernels take numpy arrays"),
    ("tensorlang.autotvm", "from tensorlang import autotune"),
    ("tensorlang.rpc", "kernels run on this machine"),
    ("tensorlang.script", r"TVMScript, @T.prim_func\) is not in tensorlang"),
    ("tensorlang.meta_schedule", "tensorlang.auto_scheduler"),
    ("tensorlang.te.hybrid", r"te.hybrid \(Python-like loop scripts\)"),
])
def test_tvm_modules_we_lack_refuse_at_import(module, message):
    with pytest.raises(ImportError, match=f"No module '{module}': .*{message}"):
        importlib.import_module(module)


def test_from_import_of_a_refused_module_keeps_the_message():
    with pytest.raises(ImportError, match="graph.from_onnx"):
        exec("from tensorlang import relay", {})  # noqa: S102
    with pytest.raises(ImportError, match="from tensorlang import autotune"):
        exec("from tensorlang import autotvm", {})  # noqa: S102


def test_scan_of_several_states_is_refused():
    X = tl.placeholder((5, 4), name="X")
    st1, st2 = tl.placeholder((5, 4)), tl.placeholder((5, 4))
    i1 = tl.compute((1, 4), lambda _, i: X[0, i])
    i2 = tl.compute((1, 4), lambda _, i: X[0, i] * 2)
    u1 = tl.compute((5, 4), lambda t, i: st1[t - 1, i] + X[t, i])
    u2 = tl.compute((5, 4), lambda t, i: st2[t - 1, i] + st1[t - 1, i])
    with pytest.raises(NotImplementedError, match="scan of several states .*not supported"):
        tl.scan([i1, i2], [u1, u2], [st1, st2])
    with pytest.raises(TypeError, match="must be all tensors or all lists"):
        tl.scan([i1], u1, st1)
