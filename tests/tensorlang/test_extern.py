"""tl.extern and packed functions (TVM's te.extern, register_func, call_packed): calls into a
registered function inside a kernel's dataflow, checked against numpy; the errors a user can
make; and the legality model's view of the call (reads its inputs, writes its outputs, wholly)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tensorlang.runtime import KernelError, packed

import tensorlang as tl

RNG = np.random.default_rng(7)


def _matmul_graph(n=48, k=40, m=24, trans_b=False):
    """relu(A) @ B + bias, the matmul a call into numpy's BLAS."""
    A = tl.placeholder((n, k), name="A")
    B = tl.placeholder((m, k) if trans_b else (k, m), name="B")
    bias = tl.placeholder((m,), name="bias")
    R = tl.compute((n, k), lambda i, j: tl.max(A[i, j], tl.const(0.0, "float32")), name="R")
    C = tl.extern((n, m), [R, B],
                  lambda ins, outs: tl.call_packed("tl.cblas.matmul", ins[0], ins[1], outs[0],
                                                   False, trans_b),
                  name="C", dtype="float32")
    D = tl.compute((n, m), lambda i, j: C[i, j] + bias[j], name="D")
    return A, B, bias, R, C, D


def _inputs(A, B, bias):
    return [RNG.standard_normal([int(d.value) for d in t.shape]).astype("float32")
            for t in (A, B, bias)]


@pytest.mark.parametrize("trans_b", [False, True])
def test_cblas_matmul_between_computes(trans_b):
    A, B, bias, R, _C, D = _matmul_graph(trans_b=trans_b)
    s = tl.create_schedule(D)
    # the computes around the call are scheduled as usual: parallel, split, vectorize
    io, _ii = s[R].split(R.op.axis[0], factor=8)
    s[R].parallel(io)
    _jo, ji = s[D].split(D.op.axis[1], factor=8)
    s[D].vectorize(ji)
    s[D].parallel(D.op.axis[0])
    f = tl.build(s, [A, B, bias, D], name="mm_bias")
    a, b, bb = _inputs(A, B, bias)
    d = np.zeros((48, 24), "float32")
    f(a, b, bb, d)
    want = np.maximum(a, 0) @ (b.T if trans_b else b) + bb
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5)
    assert "call_packed('tl.cblas.matmul', R, B, C" in str(tl.lower(s, [A, B, bias, D]))


def test_extern_output_is_a_kernel_output_and_symbolic_shapes():
    n = tl.var("n")
    A = tl.placeholder((n, 8), name="A")
    B = tl.placeholder((8, 8), name="B")
    C = tl.extern((n, 8), [A, B],
                  lambda ins, outs: tl.call_packed("tl.cblas.matmul", ins[0], ins[1], outs[0]),
                  name="C")
    s = tl.create_schedule(C)
    f = tl.build(s, [A, B, C])
    for rows in (3, 17):
        a = RNG.standard_normal((rows, 8)).astype("float32")
        b = RNG.standard_normal((8, 8)).astype("float32")
        c = np.zeros((rows, 8), "float32")
        f(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_user_registered_function_with_scalars_and_two_outputs():
    name = "test_extern.scale_and_shift"

    @tl.register_func(name)
    def scale_and_shift(x, y, z, factor, offset):
        assert not x.flags.writeable and y.flags.writeable  # inputs are read-only views
        np.multiply(x, factor, out=y)
        np.add(x, offset, out=z)

    try:
        X = tl.placeholder((5, 7), dtype="float64", name="X")
        Xs = tl.compute((5, 7), lambda i, j: X[i, j] * 3, name="Xs")
        Y, Z = tl.extern([(5, 7), (5, 7)], [Xs],
                         lambda ins, outs: tl.call_packed(name, ins[0], outs[0], outs[1], 0.5, 2),
                         name="YZ", dtype="float64")
        W = tl.compute((5, 7), lambda i, j: Y[i, j] - Z[i, j], name="W")
        s = tl.create_schedule(W)
        f = tl.build(s, [X, W])
        x = RNG.standard_normal((5, 7))
        w = np.zeros((5, 7))
        f(x, w)
        np.testing.assert_allclose(w, (3 * x) * 0.5 - (3 * x + 2))
        assert tl.get_global_func(name).fn is scale_and_shift
    finally:
        packed.remove_global_func(name)


def test_unknown_name_is_refused_at_build():
    A = tl.placeholder((4,), name="A")
    C = tl.extern((4,), [A], lambda ins, outs: tl.call_packed("no.such.func", ins[0], outs[0]),
                  name="C")
    s = tl.create_schedule(C)
    with pytest.raises(tl.LoweringError, match="no packed function named 'no.such.func'"):
        tl.build(s, [A, C])


def test_wrong_argument_count_is_refused_at_build():
    A = tl.placeholder((4, 4), name="A")
    C = tl.extern((4, 4), [A], lambda ins, outs: tl.call_packed("tl.cblas.matmul", ins[0],
                                                                   outs[0]), name="C")
    s = tl.create_schedule(C)
    with pytest.raises(tl.LoweringError, match=r"'tl.cblas.matmul' takes 3 to 5 arguments "
                                               r"\(a, b, c, transa, transb\), the call passes 2"):
        tl.build(s, [A, C])


def test_matmul_shape_mismatch_is_refused_at_build():
    A = tl.placeholder((4, 5), name="A")
    B = tl.placeholder((6, 3), name="B")
    C = tl.extern((4, 3), [A, B], lambda ins, outs: tl.call_packed(
        "tl.cblas.matmul", ins[0], ins[1], outs[0]), name="C")
    with pytest.raises(tl.LoweringError, match=r"op\(A\) is 4x5, op\(B\) is 6x3"):
        tl.build(tl.create_schedule(C), [A, B, C])


def test_bad_extern_declarations():
    A = tl.placeholder((4,), name="A")
    other = tl.placeholder((4,), name="other")
    with pytest.raises(TypeError, match="must return a tl.call_packed"):
        tl.extern((4,), [A], lambda ins, outs: ins[0][0], name="C")
    with pytest.raises(ValueError, match="passes tensor other, which is neither"):
        tl.extern((4,), [A], lambda ins, outs: tl.call_packed("f", other, outs[0]), name="C")
    with pytest.raises(ValueError, match="output C is never passed"):
        tl.extern((4,), [A], lambda ins, outs: tl.call_packed("f", ins[0]), name="C")
    with pytest.raises(TypeError, match="argument 1 must be a tensor .* got str"):
        tl.extern((4,), [A], lambda ins, outs: tl.call_packed("f", outs[0], "x"), name="C")
    with pytest.raises(ValueError, match="already registered"):
        tl.register_func("tl.cblas.matmul", lambda *a: None)
    with pytest.raises(AttributeError, match=r"'data': Buffer.data: in TVM, an extern's "
                                             r"fcompute\(ins, outs\) gets Buffers.*pass them "
                                             r"whole"):
        tl.extern((4,), [A], lambda ins, outs: tl.call_packed("f", ins[0].data, outs[0].data))


def test_exception_in_the_function_is_a_chained_kernel_error():
    # in a fresh interpreter: a wrong trampoline would crash it, not fail the test
    script = textwrap.dedent("""
        import numpy as np, tensorlang as tl
        from tensorlang.runtime import KernelError

        calls = []

        @tl.register_func("test_extern.fails")
        def fails(x, y):
            calls.append(1)
            raise ZeroDivisionError("deliberate")

        @tl.register_func("test_extern.writes_input")
        def writes_input(x, y):
            x[0] = 1.0

        for fname in ("test_extern.fails", "test_extern.writes_input"):
            A = tl.placeholder((8,), name="A")
            P = tl.compute((8,), lambda i: A[i] + 1, name="P")
            C = tl.extern((8,), [P], lambda ins, outs: tl.call_packed(fname, ins[0], outs[0]),
                          name="C")
            D = tl.compute((8,), lambda i: C[i] * 2, name="D")
            s = tl.create_schedule(D)
            s[D].parallel(D.op.axis[0])
            f = tl.build(s, [A, D])
            for attempt in range(3):  # the kernel stays usable after a failed call
                try:
                    f(np.zeros(8, "float32"), np.zeros(8, "float32"))
                except KernelError as e:
                    print(type(e.__cause__).__name__, "|", e)
        print("calls", len(calls))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "calls 3"
    fails = [ln for ln in lines if ln.startswith("ZeroDivisionError |")]
    assert len(fails) == 3
    assert "packed function 'test_extern.fails' raised ZeroDivisionError: deliberate" in fails[0]
    ro = [ln for ln in lines if ln.startswith("ValueError |")]
    assert len(ro) == 3 and "read-only" in ro[0]


def test_function_removed_after_build_fails_at_the_call():
    name = "test_extern.removed"
    tl.register_func(name, lambda x, y: np.copyto(y, x))
    A = tl.placeholder((3,), name="A")
    C = tl.extern((3,), [A], lambda ins, outs: tl.call_packed(name, ins[0], outs[0]), name="C")
    f = tl.build(tl.create_schedule(C), [A, C])
    a, c = np.arange(3, dtype="float32"), np.zeros(3, "float32")
    f(a, c)
    np.testing.assert_array_equal(c, a)
    packed.remove_global_func(name)
    with pytest.raises(KernelError, match=f"no packed function named '{name}' is registered"):
        f(a, c)


def test_saved_kernel_calls_the_function_after_loading(tmp_path):
    A, B, bias, _R, _C, D = _matmul_graph(n=8, k=8, m=8)
    f = tl.build(tl.create_schedule(D), [A, B, bias, D])
    f.save(tmp_path / "mm.tlm")
    g = tl.runtime.load_module(tmp_path / "mm.tlm")
    a, b, bb = _inputs(A, B, bias)
    d = np.zeros((8, 8), "float32")
    g(a, b, bb, d)
    np.testing.assert_allclose(d, np.maximum(a, 0) @ b + bb, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- legality


def _extern_between():
    """P feeds the extern E and Q; D reads both."""
    A = tl.placeholder((16, 16), name="A")
    P = tl.compute((16, 16), lambda i, j: A[i, j] * 2, name="P")
    E = tl.extern((16, 16), [P], lambda ins, outs: tl.call_packed(
        "tl.cblas.matmul", ins[0], ins[0], outs[0]), name="E")
    Q = tl.compute((16, 16), lambda i, j: P[i, j] + 1, name="Q")
    D = tl.compute((16, 16), lambda i, j: E[i, j] + Q[i, j], name="D")
    return A, P, E, Q, D


def test_extern_reads_its_input_wholly():
    A, P, _E, Q, D = _extern_between()
    s = tl.create_schedule(D)
    # P computed inside Q's row loop: E (at the root) would read rows that do not exist there
    s[P].compute_at(s[Q], Q.op.axis[0])
    with pytest.raises(tl.ScheduleError, match=r"stage E also reads it .*P\[i, j\] -> E\[\] "
                                               r"\(E reads what P writes\)"):
        tl.lower(s, [A, D])
    s[P].compute_root()  # repaired: legal again
    a = RNG.standard_normal((16, 16)).astype("float32")
    d = np.zeros((16, 16), "float32")
    tl.build(s, [A, D])(a, d)
    np.testing.assert_allclose(d, (2 * a) @ (2 * a) + 2 * a + 1, rtol=1e-4, atol=1e-4)


def test_inlining_into_an_extern_is_refused():
    _A, P, E, _Q, D = _extern_between()
    s = tl.create_schedule(D)
    with pytest.raises(tl.ScheduleError, match="stage P is inlined, but extern stage E .* "
                                               "takes it whole"):
        s[P].compute_inline()
    with pytest.raises(tl.ScheduleError, match="compute_inline on stage E: stage E is a "
                                               "tl.extern"):
        s[E].compute_inline()
    assert s[P].attach_type == "root" and s[E].attach_type == "root"


@pytest.mark.parametrize("primitive", ["split", "parallel", "compute_at", "cache_write",
                                       "cache_read", "host"])
def test_loop_primitives_on_an_extern_are_refused(primitive):
    _A, P, E, _Q, D = _extern_between()
    s = tl.create_schedule(D)
    fake = D.op.axis[0]
    calls = {
        "split": lambda: s[E].split(fake, factor=4),
        "parallel": lambda: s[E].parallel(fake),
        "compute_at": lambda: s[E].compute_at(s[D], fake),
        "cache_write": lambda: s.cache_write(E, "local"),
        "cache_read": lambda: s.cache_read(P, "local", [E]),
        "host": lambda: s[P].compute_at(s[E], fake),  # E has no loop to host P in
    }
    with pytest.raises(tl.ScheduleError, match=r"stage E is a tl.extern: its body is one call "
                                               r"into 'tl.cblas.matmul', with no loops"):
        calls[primitive]()
    assert len(s.trace) == 0


def test_dependences_show_the_call():
    _A, _P, _E, _Q, D = _extern_between()
    text = str(tl.analysis.dependences(tl.create_schedule(D)))
    assert "{ E[] }" in text
    assert "E[] -> D[i, j]" in text and "P[i, j] -> E[]" in text
