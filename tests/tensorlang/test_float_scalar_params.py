"""Float scalar kernel parameters, as TVM scripts declare them: ``tl.var("bias",
dtype="float32")`` used in a compute body, listed in tl.build's arguments and passed as a
Python float or numpy scalar at the call. The ABI passes it through an int64 as its bits
(runtime.module.scalar_bits); the manifest records its dtype (var_dtypes)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from tensorlang.runtime import load_module
from tensorlang.runtime.module import scalar_bits

import tensorlang as tl
from tensorlang import autotune

RNG = np.random.default_rng(0)


def _vec_par(C, factor=16):
    """A vectorized inner loop under a parallel outer one."""
    s = tl.create_schedule(C)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    return s


@pytest.fixture(scope="module")
def add_bias():
    """C = A + bias over a symbolic length (a ragged last tile at n = 100)."""
    n = tl.var("n")
    bias = tl.var("bias", dtype="float32")
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n,), lambda i: A[i] + bias, name="C")
    return tl.build(_vec_par(C), [A, bias, C], name="add_bias")


def test_add_and_mul_by_a_float_scalar_vectorized_and_parallel(add_bias):
    a = RNG.standard_normal(100).astype(np.float32)
    c = np.empty_like(a)
    add_bias(a, 3.5, c)
    np.testing.assert_array_equal(c, a + np.float32(3.5))
    add_bias(a, 0.1, c)  # rounded to float32 as numpy rounds it
    np.testing.assert_array_equal(c, a + np.float32(0.1))
    add_bias(a, c, bias=-1.25)  # by keyword, as the arrays-only call takes it
    np.testing.assert_array_equal(c, a - np.float32(1.25))

    A = tl.placeholder((1000, 64), name="A")
    alpha = tl.var("alpha", dtype="float32")
    B = tl.compute(A.shape, lambda i, j: A[i, j] * alpha, name="B")
    s = tl.create_schedule(B)
    s[B].vectorize(B.op.axis[1])
    s[B].parallel(B.op.axis[0])
    f = tl.build(s, [A, B, alpha], name="scale")
    a = RNG.standard_normal((1000, 64)).astype(np.float32)
    b = np.empty_like(a)
    f(a, b, -2.75)
    np.testing.assert_array_equal(b, a * np.float32(-2.75))


def test_numpy_scalars_and_ints_are_accepted_and_converted(add_bias):
    a = RNG.standard_normal(37).astype(np.float32)
    c = np.empty_like(a)
    for value in (np.float32(1.5), np.float64(0.1), np.float16(2.5), 2, np.int64(-3)):
        add_bias(a, value, c)  # an int for a float parameter is converted, as TVM does
        np.testing.assert_array_equal(c, a + np.float32(value))
    with np.errstate(over="ignore"):
        big = np.float32(1e300)  # inf, as numpy rounds it (the fast call's struct would raise)
    add_bias(a, 1e300, c)
    np.testing.assert_array_equal(c, a + big)


def test_float64_and_float16_scalars():
    n = tl.var("n")
    A = tl.placeholder((n,), dtype="float64", name="A")
    b64 = tl.var("b", dtype="float64")
    C = tl.compute((n,), lambda i: A[i] * b64 + 1.0, name="C")
    f = tl.build(_vec_par(C, 8), [A, b64, C], name="f64")
    a = RNG.standard_normal(53)
    c = np.empty_like(a)
    f(a, 0.1, c)  # 0.1 exactly as a double: a float32 round trip would change it
    np.testing.assert_allclose(c, a * 0.1 + 1.0, rtol=1e-15)

    H = tl.placeholder((n,), dtype="float16", name="H")
    h = tl.var("h", dtype="float16")
    G = tl.compute((n,), lambda i: H[i] * h, name="G")
    f = tl.build(_vec_par(G, 32), [H, h, G], name="f16")
    x = RNG.standard_normal(77).astype(np.float16)
    g = np.empty_like(x)
    f(x, 1.7, g)
    np.testing.assert_array_equal(g, x * np.float16(1.7))
    assert "h: float16" in str(tl.lower(_vec_par(G, 32), [H, h, G]))


def test_two_scalars_in_the_argument_order_given():
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    scale = tl.var("scale", dtype="float32")
    shift = tl.var("shift", dtype="float32")
    C = tl.compute((n,), lambda i: A[i] * scale + shift, name="C")
    f = tl.build(_vec_par(C), [shift, A, C, scale], name="affine")
    a = RNG.standard_normal(90).astype(np.float32)
    c = np.empty_like(a)
    f(0.5, a, c, 3.0)
    np.testing.assert_allclose(c, a * 3 + 0.5, rtol=1e-6)
    f(a, c, scale=-1.0, shift=2.0)
    np.testing.assert_allclose(c, 2 - a, rtol=1e-6)
    assert f.manifest["var_dtypes"] == {"shift": "float32", "scale": "float32"}


def test_scalars_in_a_reductions_condition_and_select():
    m, n = tl.var("m"), tl.var("n")
    X = tl.placeholder((m, n), name="X")
    th = tl.var("th", dtype="float32")
    lo = tl.var("lo", dtype="float32")
    k = tl.reduce_axis((0, n), name="k")
    R = tl.compute((m,), lambda i: tl.sum(tl.if_then_else(X[i, k] > th, X[i, k], lo), axis=k),
                   name="R")
    k2 = tl.reduce_axis((0, n), name="k2")
    M = tl.compute((m,), lambda i: tl.max(X[i, k2], axis=k2, where=X[i, k2] < th), name="M")
    s = tl.create_schedule([R, M])
    s[R].parallel(R.op.axis[0])
    f = tl.build(s, [X, th, lo, R, M], name="thresholds")
    x = RNG.standard_normal((6, 21)).astype(np.float32)
    r, mx = np.empty(6, np.float32), np.empty(6, np.float32)
    f(x, 0.5, -7.0, r, mx)
    np.testing.assert_allclose(r, np.where(x > 0.5, x, -7).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(mx, np.where(x < 0.5, x, -np.inf).max(1))


def test_save_load_then_call(add_bias, tmp_path):
    path = tmp_path / "add_bias.tlm"
    add_bias.save(path)
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read("manifest.json"))
    assert meta["var_dtypes"] == {"bias": "float32"}
    assert meta["artifact"]["abi"] == 2  # a runtime reading ABI 1 only refuses it
    g = load_module(path)
    a = RNG.standard_normal(40).astype(np.float32)
    c = np.empty_like(a)
    g(a, 1.5, c)
    np.testing.assert_array_equal(c, a + np.float32(1.5))
    with pytest.raises(TypeError, match="scalar argument 'bias' must be a float32 number"):
        g(a, "1.5", c)


def test_modules_without_float_scalars_keep_abi_1_and_no_var_dtypes(tmp_path):
    n = tl.var("n")
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n,), lambda i: A[i] * 2.0, name="C")
    f = tl.build(tl.create_schedule(C), [A, C], name="twice")
    assert "var_dtypes" not in f.manifest
    f.save(tmp_path / "twice.tlm")
    with zipfile.ZipFile(tmp_path / "twice.tlm") as z:
        assert json.loads(z.read("manifest.json"))["artifact"]["abi"] == 1
    a = np.arange(5, dtype=np.float32)
    c = np.empty_like(a)
    load_module(tmp_path / "twice.tlm")(a, c)
    np.testing.assert_array_equal(c, a * 2)


def test_time_evaluator_and_raw_calls(add_bias):
    a = RNG.standard_normal(64).astype(np.float32)
    c = np.empty_like(a)
    r = add_bias.time_evaluator(number=3, repeat=2)(a, 2.0, c)
    assert len(r.results) == 2 and r.mean > 0
    np.testing.assert_array_equal(c, a + 2)
    r = add_bias.time_evaluator(add_bias.entry_name, tl.cpu(0), number=2)(a, c, bias=4.0)
    np.testing.assert_array_equal(c, a + 4)
    raw = add_bias.prepare_args(a, -0.5, c)
    assert raw[-1] == scalar_bits(-0.5, np.dtype("float32"))  # vars after the pointers
    assert add_bias.call_raw(*raw) == 0
    np.testing.assert_array_equal(c, a - 0.5)


def test_float_var_as_a_shape_extent_or_factor_is_refused_naming_it():
    bias = tl.var("bias", dtype="float32")
    with pytest.raises(TypeError, match=r"shape\[0\] must be an integer expression.*\(bias: a "
                                        "float tl.var is a scalar parameter"):
        tl.placeholder((bias,), name="A")
    A = tl.placeholder((8,), name="A")
    with pytest.raises(TypeError, match=r"compute C shape\[0\].*\(bias: a float tl.var"):
        tl.compute((bias * 2,), lambda i: A[i], name="C")
    with pytest.raises(TypeError, match=r"reduce_axis k upper bound.*\(bias: a float tl.var"):
        tl.reduce_axis((0, bias), name="k")
    with pytest.raises(TypeError, match=r"index of A must be an integer.*\(bias: a float"):
        tl.compute((8,), lambda i: A[bias], name="C")
    C = tl.compute((8,), lambda i: A[i] * bias, name="C")
    s = tl.create_schedule(C)
    with pytest.raises(TypeError, match="factor/nparts bias is a float32 tl.var"):
        s[C].split(C.op.axis[0], factor=bias)
    with pytest.raises(TypeError, match="size_var s: dtype must be an integer type"):
        tl.size_var("s", dtype="float32")
    with pytest.raises(TypeError, match="dtype must be an integer type or one of float16, "
                                        "float32, float64, got float32x4"):
        tl.var("v", dtype="float32x4")


def test_a_scalar_missing_from_the_build_arguments():
    A = tl.placeholder((8,), name="A")
    bias = tl.var("bias", dtype="float32")
    C = tl.compute((8,), lambda i: A[i] + bias, name="C")
    with pytest.raises(ValueError, match="stage C uses the float scalar bias, which is not "
                                         "among the kernel's arguments"):
        tl.build(tl.create_schedule(C), [A, C])


def test_call_misuse_names_the_parameter_and_what_it_expects(add_bias):
    a = np.ones(16, np.float32)
    c = np.empty_like(a)
    with pytest.raises(TypeError, match=r"missing the scalar argument 'bias' \(float32\): pass "
                                        r"it in its place, add_bias\(A, bias, C\), or by "
                                        "keyword"):
        add_bias(a, c)
    with pytest.raises(TypeError, match="scalar argument 'bias' must be a float32 number .*, "
                                        "got str"):
        add_bias(a, "3.5", c)
    with pytest.raises(TypeError, match=r"scalar argument 'bias' must be a float32 number .*"
                                        r"got a numpy.ndarray of shape \(1,\)"):
        add_bias(a, np.ones(1, np.float32), c)
    with pytest.raises(TypeError, match="must be a float32 number .*, got bool"):
        add_bias(a, True, c)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A: float32\[n\], bias: float32, "
                                        r"C: float32\[n\]\)"):
        add_bias(a, 1.0, c, c)
    with pytest.raises(TypeError, match="must be a float32 number"):
        add_bias.time_evaluator(number=1, repeat=1)(a, [1.0], c)


def _scaled_ref(a, alpha):
    return a * alpha + 1


@autotune.template("test_float_scalar_scale", reference=_scaled_ref)
def _scaled(n: int):
    cfg = autotune.get_config()
    A = tl.placeholder((n,), name="A")
    alpha = tl.var("alpha", dtype="float32")
    C = tl.compute((n,), lambda i: A[i] * alpha + 1.0, name="C")
    s = tl.create_schedule(C)
    (i,) = s[C].op.axis
    cfg.define_split("split", i, num_outputs=2, policy="factors")
    cfg["split"].apply(s, C, i)
    return s, [A, alpha, C]


def test_the_tuner_measures_a_template_with_a_float_scalar():
    """The runner gives the scalar a value, passes it to the kernel and the timer, and the
    template's numpy reference gets it in argument order (a kernel that ignored it would be a
    wrong answer)."""
    task = autotune.create_task("test_float_scalar_scale", (256,))
    opt = autotune.measure_option(autotune.LocalBuilder(n_parallel=1),
                                  autotune.LocalRunner(number=2, repeat=1, timeout=10))
    try:
        results = autotune.measure_batch(
            opt, [autotune.MeasureInput(task, task.config(k)) for k in (0, 3)])
    finally:
        opt.close()
    assert [r.error for r in results] == [None, None], [r.error_msg for r in results]
    s, args = task.instantiate(task.config(3))
    f = tl.build(s, args, name="scaled")
    a = np.arange(256, dtype=np.float32)
    c = np.empty_like(a)
    f(a, 0.5, c)
    np.testing.assert_array_equal(c, a * 0.5 + 1)


def test_a_template_free_workload_refuses_a_scalar_parameter_naming_it():
    @autotune.workload
    def float_scalar_workload(n):
        A = tl.placeholder((n,), name="A")
        b = tl.var("b", dtype="float32")
        return [A, b, tl.compute((n,), lambda i: A[i] * b, name="C")]

    with pytest.raises(autotune.TemplateError, match="lists the scalar parameter.* b: a "
                                                     "template-free workload takes tensors"):
        autotune.create_task(float_scalar_workload, (64,))
