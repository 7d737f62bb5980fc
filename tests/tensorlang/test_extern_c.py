"""Kernels that call C functions directly (tl.call_extern, TVM's tir.call_extern; tl.load_library;
tl.register_func(name, library=, symbol=)): a small C library compiled here with the system C
compiler, called per element inside parallel and vectorized loops and as the body of a
tl.extern, checked against numpy; a C error code as a KernelError; a missing symbol at build; a
saved kernel that reopens its library in a fresh process, or refuses to load without it; and a
C call that holds no GIL."""

import shutil
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from tensorlang.runtime import ArtifactError, KernelError, extern_c

import tensorlang as tl
from tensorlang import autotune

RNG = np.random.default_rng(11)

C_SOURCE = r"""
#include <stdint.h>
#include <time.h>

/* value calls: one per element */
float tlx_affine(float x, double a, int64_t k) { return (float)(x * a + (double)k); }
double tlx_cube(double x) { return x * x * x; }
int32_t tlx_imod(int32_t x, int32_t m) { int32_t r = x % m; return r < 0 ? r + m : r; }

/* status calls: the body of a tl.extern */
int32_t tlx_add_row(const float *A, const int64_t *A_shape, const float *b,
                    const int64_t *b_shape, float *C, const int64_t *C_shape, double alpha) {
    if (A_shape[1] != b_shape[0] || A_shape[0] != C_shape[0] || A_shape[1] != C_shape[1])
        return 3;
    for (int64_t i = 0; i < A_shape[0]; i++)
        for (int64_t j = 0; j < A_shape[1]; j++)
            C[i * A_shape[1] + j] = A[i * A_shape[1] + j] + (float)alpha * b[j];
    return 0;
}

int32_t tlx_fail(const float *A, const int64_t *A_shape, float *B, const int64_t *B_shape,
                 int64_t code) {
    B[0] = A[0];
    return (int32_t)code;
}

int32_t tlx_double(const float *A, const int64_t *A_shape, float *B, const int64_t *B_shape) {
    for (int64_t i = 0; i < A_shape[0]; i++) B[i] = 2.0f * A[i];
    return 0;
}

/* waits for tlx_set_flag, which Python can only call while the kernel holds no GIL */
static volatile int32_t tlx_flag = 0;
void tlx_set_flag(int32_t v) { __atomic_store_n(&tlx_flag, v, __ATOMIC_SEQ_CST); }
int32_t tlx_wait_flag(const float *A, const int64_t *A_shape, float *B,
                      const int64_t *B_shape) {
    struct timespec pause = {0, 1000000};
    for (int i = 0; i < 5000; i++) {
        if (__atomic_load_n(&tlx_flag, __ATOMIC_SEQ_CST)) { B[0] = A[0]; return 0; }
        nanosleep(&pause, 0);
    }
    return 9;
}
"""


SAVED_SOURCE = r"""
#include <stdint.h>
int32_t tlx_saved_double(const float *A, const int64_t *A_shape, float *B,
                         const int64_t *B_shape) {
    for (int64_t i = 0; i < A_shape[0]; i++) B[i] = 2.0f * A[i];
    return 0;
}
"""


def _compile(directory, name="libtlx.so", source=C_SOURCE):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH to build the test's C library")
    src = directory / (name + ".c")
    src.write_text(source)
    out = directory / name
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(src)], check=True,
                   capture_output=True)
    return out


@pytest.fixture(scope="module")
def clib(tmp_path_factory):
    return tl.load_library(_compile(tmp_path_factory.mktemp("clib")))


def test_value_call_in_parallel_vectorized_loops(clib):
    n = 1000  # not a multiple of 16: a vector body and a scalar tail
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n,), lambda i: tl.call_extern("float32", "tlx_affine", A[i], 1.5, 3) * 2.0,
                   name="B")
    s = tl.create_schedule(B)
    o, i = s[B].split(B.op.axis[0], factor=16)
    s[B].parallel(o)
    s[B].vectorize(i)
    assert "call_extern('float32x16', 'tlx_affine'" in str(tl.lower(s, [A, B]))
    f = tl.build(s, [A, B], name="affine")
    assert f.manifest["externs"] == [{"symbol": "tlx_affine", "library": clib.path}]
    a = RNG.standard_normal(n).astype("float32")
    b = np.zeros_like(a)
    f(a, b)
    # the C function computes in double and rounds once, as this reference does
    np.testing.assert_array_equal(b, (a.astype("float64") * 1.5 + 3).astype("float32") * 2)


def test_value_calls_of_other_types_in_a_2d_parallel_compute(clib):
    n, m = tl.var("n"), 24
    X = tl.placeholder((n, m), dtype="float64", name="X")
    K = tl.placeholder((n, m), dtype="int32", name="K")
    Y = tl.compute((n, m), lambda i, j: tl.call_extern("float64", "tlx_cube", X[i, j]) +
                   tl.call_extern("int32", "tlx_imod", K[i, j], tl.const(5, "int32"))
                   .astype("float64"), name="Y")
    s = tl.create_schedule(Y)
    s[Y].parallel(Y.op.axis[0])
    f = tl.build(s, [X, K, Y], name="cube_mod")
    for rows in (1, 37):
        x = RNG.standard_normal((rows, m))
        k = RNG.integers(-50, 50, (rows, m)).astype("int32")
        y = np.zeros_like(x)
        f(x, k, y)
        np.testing.assert_allclose(y, x ** 3 + np.mod(k, 5), rtol=1e-12)


def test_extern_body_fills_its_output_between_computes(clib):
    n, m = tl.var("n"), 16
    A = tl.placeholder((n, m), name="A")
    b = tl.placeholder((m,), name="b")
    R = tl.compute((n, m), lambda i, j: tl.max(A[i, j], tl.const(0.0, "float32")), name="R")
    C = tl.extern((n, m), [R, b],
                  lambda ins, outs: tl.call_extern("int32", "tlx_add_row", ins[0], ins[1],
                                                   outs[0], 0.5), name="C")
    D = tl.compute((n, m), lambda i, j: C[i, j] * 3.0, name="D")
    s = tl.create_schedule(D)
    s[R].parallel(R.op.axis[0])
    _jo, ji = s[D].split(D.op.axis[1], factor=8)
    s[D].vectorize(ji)
    s[D].parallel(D.op.axis[0])
    assert "call_extern('int32', 'tlx_add_row', R, b, C, 0.5)" in str(tl.lower(s, [A, b, D]))
    f = tl.build(s, [A, b, D], name="add_row")
    for rows in (2, 33):
        a = RNG.standard_normal((rows, m)).astype("float32")
        bb = RNG.standard_normal(m).astype("float32")
        d = np.zeros_like(a)
        f(a, bb, d)
        np.testing.assert_allclose(d, (np.maximum(a, 0) + 0.5 * bb) * 3.0, rtol=1e-6)


def _failing_kernel(code: int):
    X = tl.placeholder((4,), name="X")
    Y = tl.extern((4,), [X], lambda ins, outs: tl.call_extern("int32", "tlx_fail", ins[0],
                                                               outs[0], code), name="Y")
    return tl.build(tl.create_schedule(Y), [X, Y], name="fails")


@pytest.mark.parametrize("code, said", [
    (-7, "returned error code -7"),
    (5, "returned error code 5"),
    (32767, "returned error code 32767"),
    (40000, "returned an error code outside -32767..32767"),
])
def test_c_error_code_is_a_kernel_error(clib, code, said):
    f = _failing_kernel(code)
    with pytest.raises(KernelError, match=f"C function 'tlx_fail' {said}"):
        f(np.ones(4, "float32"), np.zeros(4, "float32"))
    ok = _failing_kernel(0)
    y = np.zeros(4, "float32")
    ok(np.full(4, 2.0, "float32"), y)
    assert y[0] == 2.0


def test_missing_symbol_is_a_build_error_naming_it(clib):
    A = tl.placeholder((8,), name="A")
    B = tl.compute((8,), lambda i: tl.call_extern("float32", "tlx_not_defined", A[i]), name="B")
    with pytest.raises(tl.LoweringError, match="'tlx_not_defined' is not defined in the "
                                               "libraries opened with tl.load_library"):
        tl.build(tl.create_schedule(B), [A, B])


def test_register_func_by_symbol_calls_c_directly(clib):
    tl.register_func("tlx.double", library=clib.path, symbol="tlx_double", override=True)
    A = tl.placeholder((tl.var("n"),), name="A")
    B = tl.extern((A.shape[0],), [A],
                  lambda ins, outs: tl.call_packed("tlx.double", ins[0], outs[0]), name="B")
    s = tl.create_schedule(B)
    assert "call_extern('int32', 'tlx_double', A, B)" in str(tl.lower(s, [A, B]))
    f = tl.build(s, [A, B], name="doubled")
    a = RNG.standard_normal(13).astype("float32")
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    with pytest.raises(LookupError, match="'tlx_missing' is not defined in"):
        tl.register_func("tlx.missing", library=clib.path, symbol="tlx_missing")
    with pytest.raises(TypeError, match="C function 'tlx_double': kernels call it directly"):
        tl.get_global_func("tlx.double")(a, b)


def test_c_call_holds_no_gil(clib):
    """tlx_wait_flag returns 0 only once Python has called tlx_set_flag, which needs the GIL
    while the kernel runs; a kernel holding it would time out with code 9."""
    X = tl.placeholder((1,), name="X")
    Y = tl.extern((1,), [X], lambda ins, outs: tl.call_extern("int32", "tlx_wait_flag",
                                                               ins[0], outs[0]), name="Y")
    f = tl.build(tl.create_schedule(Y), [X, Y], name="waits")
    clib.handle.tlx_set_flag(0)
    x, y = np.full(1, 4.0, "float32"), np.zeros(1, "float32")
    errors = []

    def run():
        try:
            f(x, y)
        except KernelError as e:  # pragma: no cover - the failure being tested for
            errors.append(e)

    t = threading.Thread(target=run)
    start = time.perf_counter()
    t.start()
    time.sleep(0.05)
    clib.handle.tlx_set_flag(1)
    t.join()
    assert not errors and y[0] == 4.0
    assert time.perf_counter() - start < 4


def test_declaration_errors(clib):
    A = tl.placeholder((8,), name="A")
    with pytest.raises(TypeError, match="passes whole tensors .A.: that is the body of a "
                                        "tl.extern"):
        tl.compute((8,), lambda i: tl.call_extern("float32", "tlx_affine", A), name="B")
    with pytest.raises(TypeError, match="returns one of int32, int64.*got float16"):
        tl.call_extern("float16", "tlx_affine", A[0])
    with pytest.raises(TypeError, match="argument 0 has dtype int8, which no C type"):
        tl.call_extern("int32", "tlx_imod", tl.const(1, "int8"))
    with pytest.raises(ValueError, match="is not a C identifier"):
        tl.call_extern("int32", "tlx-imod", 1)
    with pytest.raises(ValueError, match="reserved for tensorlang's runtime"):
        tl.call_extern("int32", "__tl_parallel_launch", 1)
    with pytest.raises(TypeError, match="returns an int32 status .0: success., not float32"):
        tl.extern((8,), [A], lambda ins, outs: tl.call_extern("float32", "tlx_double", ins[0],
                                                              outs[0]), name="E")
    with pytest.raises(ValueError, match="output E is never passed to call_extern"):
        tl.extern((8,), [A], lambda ins, outs: tl.call_extern("int32", "tlx_double", ins[0]),
                  name="E")


def test_manifest_externs_are_checked(clib):
    f = _failing_kernel(1)
    m = f.manifest
    m["externs"] = [{"symbol": "tlx fail", "library": None}]
    with pytest.raises(ValueError, match="is not a C identifier"):
        tl.runtime.Module.from_object(f.object_code, m)
    m["externs"] = [{"symbol": "tlx_fail", "library": clib.path}] * 2
    with pytest.raises(ValueError, match="sorted by symbol, each once"):
        tl.runtime.Module.from_object(f.object_code, m)
    m["externs"] = [{"symbol": "tlx_nowhere", "library": clib.path}]
    with pytest.raises(ArtifactError, match="'tlx_nowhere', which .*libtlx.so does not define"):
        tl.runtime.Module.from_object(f.object_code, m)


FRESH_PROCESS = textwrap.dedent("""
    import sys
    import numpy as np
    from tensorlang import runtime
    path, library = sys.argv[1], sys.argv[2]
    if library != "-":
        runtime.load_library(library)
    try:
        f = runtime.load_module(path)
    except runtime.ArtifactError as e:
        print("ArtifactError:", e)
        raise SystemExit(0)
    x = np.arange(4, dtype="float32")
    y = np.zeros(4, "float32")
    f(x, y)
    print("ran", y.tolist(), sorted(m for m in sys.modules if m.split(".")[0] in
                                    ("llvmlite", "islpy")))
""")


def _fresh(path, library="-") -> str:
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(path), str(library)],
                         check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_saved_kernel_reopens_its_library_or_refuses_to_load(tmp_path):
    lib = tl.load_library(_compile(tmp_path, "libtlx_saved.so", SAVED_SOURCE))
    X = tl.placeholder((4,), name="X")
    Y = tl.extern((4,), [X], lambda ins, outs: tl.call_extern("int32", "tlx_saved_double",
                                                               ins[0], outs[0]), name="Y")
    path = tmp_path / "doubled.tlm"
    tl.build(tl.create_schedule(Y), [X, Y], name="doubled_saved").save(path)
    # a fresh process opens the recorded library itself, with no compiler module
    assert _fresh(path) == "ran [0.0, 2.0, 4.0, 6.0] []"
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (tmp_path / "libtlx_saved.so").rename(moved / "libtlx_saved.so")
    said = _fresh(path)
    assert said.startswith("ArtifactError:") and "'tlx_saved_double'" in said and \
        f"library {lib.path}, which cannot be loaded here" in said, said
    # a library of the same file name opened first stands for the recorded one
    assert _fresh(path, moved / "libtlx_saved.so") == "ran [0.0, 2.0, 4.0, 6.0] []"


def _fill_source(value: float) -> str:
    return ("#include <stdint.h>\n"
            "int32_t tlx_same_fill(float *B, const int64_t *B_shape) {\n"
            f"    for (int64_t i = 0; i < B_shape[0]; i++) B[i] = {value}f;\n"
            "    return 0;\n}\n")


def test_one_symbol_from_two_libraries_in_one_process(tmp_path):
    """Two kernels alike but for the library their C function comes from: each calls its own
    (the loader's library cache shares one object between identical kernels; their slots are
    named after the library, so the objects differ)."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    lib1 = _compile(one, "libtlx_same.so", _fill_source(1.0))
    lib2 = _compile(two, "libtlx_same.so", _fill_source(2.0))
    tl.register_func("tlx.fill_one", library=lib1, symbol="tlx_same_fill", override=True)
    tl.register_func("tlx.fill_two", library=lib2, symbol="tlx_same_fill", override=True)
    kernels = []
    for name in ("tlx.fill_one", "tlx.fill_two"):
        Y = tl.extern((5,), [], lambda ins, outs, name=name: tl.call_packed(name, outs[0]),
                      name="Y", dtype="float32")
        kernels.append(tl.build(tl.create_schedule(Y), [Y], name="same_fill"))
    for f, want in zip(kernels, (1.0, 2.0)):
        y = np.zeros(5, "float32")
        f(y)
        np.testing.assert_array_equal(y, np.full(5, want, "float32"))


def test_extern_error_codes_do_not_collide_with_other_codes():
    assert extern_c.ERROR_BASE > tl.runtime.packed.LAST_ERROR_CODE
    assert extern_c.ERROR_BASE + ((extern_c.MAX_EXTERNS - 1) << 16) + 0xFFFF == 2 ** 31 - 1
    assert extern_c.describe_error(extern_c.ERROR_BASE + (1 << 16) + 0xFFF9,
                                   [{"symbol": "a"}, {"symbol": "b"}]) == \
        "C function 'b' returned error code -7"
    assert extern_c.describe_error(extern_c.ERROR_BASE, [{"symbol": "a"}]).startswith(
        "C function 'a' was never bound")
    assert extern_c.describe_error(7, [{"symbol": "a"}]) is None


def _affine_reference(a):
    return (a.astype("float64") * 1.5 + 3).astype("float32")


@autotune.template("test_extern_c_affine", reference=_affine_reference)
def affine_template(n: int):
    """A tunable elementwise C call: the split and the vectorization of its inner loop."""
    cfg = autotune.get_config()
    A = tl.placeholder((n,), name="A")
    B = tl.compute((n,), lambda i: tl.call_extern("float32", "tlx_affine", A[i], 1.5, 3),
                   name="B")
    s = tl.create_schedule(B)
    cfg.define_split("split", B.op.axis[0], num_outputs=2, policy="factors")
    outer, inner = cfg["split"].apply(s, B, B.op.axis[0])
    cfg.define_knob("vectorize", [0, 1])
    if cfg["vectorize"].val:
        s[B].vectorize(inner)
    s[B].parallel(outer)
    return s, [A, B]


def test_tuning_workers_build_and_measure_c_calls(clib, tmp_path):
    """The library was opened in this process only: the builder and measuring processes open
    it themselves (workers.py hands them the opened libraries), and every trial is valid."""
    log = tmp_path / "affine.jsonl"
    task = autotune.create_task("test_extern_c_affine", (96,))
    opt = autotune.measure_option(autotune.LocalBuilder(n_parallel=1),
                                  autotune.LocalRunner(number=1, repeat=1, timeout=10))
    try:
        autotune.GridSearchTuner(task, batch_size=4).tune(4, opt,
                                                          callbacks=[autotune.log_to_file(log)])
    finally:
        opt.close()
    records = autotune.load_records(log)
    assert len(records) == 4 and all(r.valid for r in records), \
        [r.result.get("error_msg") for r in records]
    with autotune.apply_history_best(log):
        s, args = affine_template(96)
    f = tl.build(s, args)
    a = RNG.standard_normal(96).astype("float32")
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_array_equal(b, _affine_reference(a))
