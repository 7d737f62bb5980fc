from __future__ import annotations

import numpy as np
import pytest
import rt_helpers as H
from tensorlang.runtime import KernelError, LoadError, Module, TimingResult

from tensorlang.errors import TensorlangError


@pytest.fixture(scope="module")
def add() -> Module:
    return H.build("add")


def _abc(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return a, b, np.zeros(n, np.float32)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 4099])
def test_add_matches_numpy(add, n):
    a, b, c = _abc(n)
    add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_module_metadata(add):
    assert add.name == "add" and add.entry_name == "add"
    assert add.arg_names == ("a", "b", "c") and add.vars == ("n",)
    m = add.manifest
    m["name"] = "changed"
    assert add.manifest["name"] == "add"  # a copy
    assert add.function_address > 0
    assert add.loaded_via.startswith("shared library ")
    assert "add(a: float32[n], b: float32[n], c: float32[n])" in repr(add)


def test_call_raw_and_prepare_args(add):
    a, b, c = _abc(64)
    raw = add.prepare_args(a, b, c)
    assert raw[:3] == [a.ctypes.data, b.ctypes.data, c.ctypes.data] and raw[3] == 64
    assert add.call_raw(*raw) == 0
    np.testing.assert_array_equal(c, a + b)


def test_mixed_dtypes():
    mix = H.build("mix")
    rng = np.random.default_rng(1)
    x = rng.standard_normal(100).astype(np.float16)
    m = rng.random(100) > 0.5
    y = np.zeros(100, np.float32)
    mix(x, m, y)
    np.testing.assert_array_equal(y, np.where(m, x.astype(np.float32), np.float32(-1)))


def test_read_only_input_is_accepted():
    check = H.build("check_positive")
    a = np.abs(np.random.default_rng(2).standard_normal(33)).astype(np.float32)
    a.flags.writeable = False
    check(a)


def test_kernel_error_code():
    check = H.build("check_positive")
    a = np.ones(10, np.float32)
    a[7] = -1
    with pytest.raises(KernelError, match="error code 42: negative input") as info:
        check(a)
    assert info.value.code == 42 and info.value.kernel == "check_positive"
    assert isinstance(info.value, TensorlangError) and isinstance(info.value, RuntimeError)


def test_keyword_var():
    scale = H.build("scale")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    scale(a, k=3)
    np.testing.assert_array_equal(a, 3 * np.arange(12, dtype=np.float32).reshape(3, 4))
    with pytest.raises(TypeError, match="cannot determine k"):
        scale(a)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        scale(a, k=1, z=2)
    with pytest.raises(TypeError, match="k must be an int"):
        scale(a, k=1.5)


def test_symbolic_binding_two_vars():
    nested = H.build("nested")
    out = np.zeros((3, 5), np.int32)
    nested(out)
    np.testing.assert_array_equal(out, np.ones((3, 5), np.int32))


# --- argument checking: every misuse gives a clear TypeError / ValueError ---------------------


def test_wrong_argument_count(add):
    a, b, _ = _abc(8)
    with pytest.raises(TypeError, match=r"add\(\) takes 3 array arguments .* got 2"):
        add(a, b)


def test_not_an_array(add):
    a, b, c = _abc(8)
    with pytest.raises(TypeError, match="argument 'b' must be a numpy.ndarray of float32"):
        add(a, list(b), c)


def test_wrong_dtype(add):
    a, b, c = _abc(8)
    with pytest.raises(TypeError, match="argument 'a' must have dtype float32, got float64"):
        add(a.astype(np.float64), b, c)
    with pytest.raises(TypeError, match="native byte order"):
        add(a.astype(">f4"), b, c)


def test_non_contiguous(add):
    a, b, c = _abc(16)
    with pytest.raises(ValueError, match="argument 'a' must be C-contiguous"):
        add(a[::2], b[:8], c[:8])
    with pytest.raises(ValueError, match="argument 'c' must be C-contiguous"):
        add(a[:8], b[:8], c[::2])


def test_fixed_shape_mismatch():
    pfill = H.build("pfill")
    with pytest.raises(ValueError, match=r"argument 'sync' must have shape \(3,\), got \(4,\)"):
        pfill(np.zeros(4, np.float32), np.zeros(2, np.int64), np.zeros(4, np.int32))


def test_rank_mismatch(add):
    a, b, c = _abc(8)
    with pytest.raises(ValueError, match="argument 'a' must have 1 dimensions"):
        add(a.reshape(2, 4), b, c)


def test_inconsistent_symbolic_dim(add):
    a, b, c = _abc(8)
    with pytest.raises(ValueError, match="argument 'b' has n=7 .* but n=8 elsewhere"):
        add(a, b[:7], c)


def test_read_only_output(add):
    a, b, c = _abc(8)
    c.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'c' is written by the kernel but .*read-only"):
        add(a, b, c)


def test_output_overlapping_input(add):
    a, b, _ = _abc(8)
    with pytest.raises(ValueError, match="output 'c' overlaps argument 'a'"):
        add(a, b, a)
    buf = np.zeros(12, np.float32)
    with pytest.raises(ValueError, match="output 'c' overlaps argument 'b'"):
        add(a, buf[:8], buf[4:])


def test_misaligned_array(add):
    raw = np.zeros(8 * 4 + 1, np.uint8)
    mis = raw[1:].view(np.float32)
    assert not mis.flags.aligned
    _, b, c = _abc(8)
    with pytest.raises(ValueError, match="argument 'a' is not aligned"):
        add(mis, b, c)


def test_subclass_and_equal_dtype_take_general_path(add):
    class Sub(np.ndarray):
        pass

    a, b, c = _abc(8)
    add(a.view(Sub), b, c)
    np.testing.assert_array_equal(c, a + b)
    dt = np.dtype("float32", metadata={"x": 1})  # equal to float32, not the same object
    c[:] = 0
    add(a.view(dt), b, c)
    np.testing.assert_array_equal(c, a + b)


def test_fast_and_general_paths_agree(add):
    """The generated fast path and prepare_args accept and refuse the same calls."""
    a, b, c = _abc(8)
    ro = a.copy()
    ro.flags.writeable = False
    cases = [
        (a, b, c),
        (ro, b, c),
        (a, b, a),
        (a[:4], b[:4], c[4:]),
        (a, b[:7], c),
        (a.astype(np.float64), b, c),
        (a.reshape(2, 4), b, c),
        (a[::2], b[::2], c[::2]),
        (np.zeros(0, np.float32), np.zeros(0, np.float32), np.zeros(0, np.float32)),
    ]
    for args in cases:
        try:
            add.prepare_args(*args)
            general = None
        except (TypeError, ValueError) as e:
            general = type(e)
        try:
            add._fast_call(*args)
            fast = None
        except (TypeError, ValueError) as e:
            fast = type(e)
        assert fast == general, args


def test_bad_manifest():
    obj = H.compile_ir(H.ADD_IR).object_code
    good = H.MANIFESTS["add"]
    with pytest.raises(ValueError, match="dimension 'm' is not in vars"):
        Module.from_object(obj, {**good, "args": [H.arg("a", ["m"], "float32")]})
    with pytest.raises(ValueError, match="unknown dtype 'float99'"):
        Module.from_object(obj, {**good, "args": [H.arg("a", ["n"], "float99")]})
    with pytest.raises(ValueError, match="duplicate argument name 'a'"):
        Module.from_object(obj, {**good, "args": [H.arg("a", [1], "int8")] * 2})
    with pytest.raises(LoadError, match="does not define 'nope'"):
        Module.from_object(obj, {**good, "symbol": "nope"})
    with pytest.raises(TypeError, match="object_code must be bytes"):
        Module.from_object("not bytes", good)


def test_jit_loader():
    add = H.build("add", loader="jit")
    assert add.loaded_via == "ORC JIT"
    a, b, c = _abc(100)
    add(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    pfill = H.build("pfill", loader="jit")
    out = np.zeros(1000, np.float32)
    pfill(out, np.zeros(4, np.int64), np.zeros(3, np.int32))
    np.testing.assert_array_equal(out, 2 * np.arange(1000, dtype=np.float32))


def test_bad_loader_name():
    with pytest.raises(ValueError, match="loader must be one of"):
        H.build("add", loader="magic")


# --- timing and sources -----------------------------------------------------------------------


def test_time_evaluator(add):
    a, b, c = _abc(256)
    res = add.time_evaluator(number=5, repeat=4)(a, b, c)
    assert isinstance(res, TimingResult)
    assert len(res.results) == 4 and res.number == 5
    assert all(t > 0 for t in res.results)
    assert res.min <= res.median <= res.max and res.min <= res.mean <= res.max
    assert res.std >= 0
    text = repr(res)
    assert text.startswith("TimingResult(mean=") and "repeat=4" in text and "number=5" in text
    np.testing.assert_array_equal(c, a + b)


def test_time_evaluator_min_repeat_ms(add):
    a, b, c = _abc(64)
    res = add.time_evaluator(number=1, repeat=2, min_repeat_ms=5)(a, b, c)
    assert res.number > 1
    assert res.results[-1] * res.number >= 5e-3


def test_time_evaluator_checks(add):
    with pytest.raises(ValueError, match="number"):
        add.time_evaluator(number=0)
    with pytest.raises(ValueError, match="repeat"):
        add.time_evaluator(repeat=0)
    # 2**64 calls went to the native loop's int64 as 0 (a time per call of 1e-29 s); an
    # infinite minimum raised OverflowError from the loop that raises number
    with pytest.raises(ValueError, match=r"number = 18446744073709551616 is too large"):
        add.time_evaluator(number=2**64)
    with pytest.raises(ValueError, match=r"min_repeat_ms must be a finite number .* got inf"):
        add.time_evaluator(min_repeat_ms=float("inf"))
    with pytest.raises(TypeError, match=r"min_repeat_ms must be a number .* got str"):
        add.time_evaluator(min_repeat_ms="5")
    assert add.time_evaluator(number=np.int64(2))(*_abc(8)).number == 2  # numpy ints count
    a, b, c = _abc(8)
    with pytest.raises(TypeError, match="dtype"):
        add.time_evaluator()(a.astype(np.float64), b, c)
    check = H.build("check_positive")
    with pytest.raises(KernelError, match="42"):
        check.time_evaluator()(-np.ones(4, np.float32))


def test_get_source(add):
    assert "define" in add.get_source("ll")
    assert add.get_source("tir").startswith("// hand-written kernel add")
    asm = add.get_source("asm")  # produced on demand from the optimized IR
    assert "add:" in asm
    with pytest.raises(ValueError, match=r"no 'cuda' source \(available: asm, ll, tir\)"):
        add.get_source("cuda")


def test_stored_asm_is_returned():
    m = H.build("add", want_asm=True)
    assert m.get_source("asm") == m._sources["asm"]
