"""tl.decl_tensor_intrin / Stage.tensorize: the exact match of a loop nest against an intrinsic
(accepted and refused cases) and the VNNI dot product with its fallback, against numpy."""

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.te.tensorize import dot_u8s8_16x4

M, N, K = 4, 32, 64


def _dense(a_dtype="uint8", w_index=None, kb=4):
    """C[i, jo, ji] = sum A[i, k] * W[jo, k // kb, ji, k % kb] with k = ko * kb + ki."""
    A = tl.placeholder((M, K), a_dtype, name="A")
    W = tl.placeholder((N // 16, K // kb, 16, kb), "int8", name="W")
    ko = tl.reduce_axis((0, K // kb), name="ko")
    ki = tl.reduce_axis((0, kb), name="ki")
    w_index = w_index or (lambda jo, ji: W[jo, ko, ji, ki])
    C = tl.compute((M, N // 16, 16), lambda i, jo, ji: tl.sum(
        A[i, ko * kb + ki].astype("int32") * w_index(jo, ji).astype("int32"), axis=[ko, ki]),
        name="C")
    s = tl.create_schedule(C)
    i, jo, ji = s[C].op.axis
    s[C].reorder(i, jo, ko, ji, ki)
    return s, (A, W, C), ji, (ko, ki)


def _run(s, args, target="llvm"):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (M, K), dtype=np.uint8)
    w = rng.integers(-128, 128, (N, K), dtype=np.int8)
    a[0, :] = 255  # the extremes: sums that overflow int16 (vpmaddubsw would saturate)
    w[0, :] = -128
    w[1, :] = 127
    wp = np.ascontiguousarray(w.reshape(N // 16, 16, K // 4, 4).transpose(0, 2, 1, 3))
    f = tl.build(s, list(args), target=target)
    c = np.empty((M, N // 16, 16), np.int32)
    f(a, wp, c)
    ref = a.astype(np.int32) @ w.astype(np.int32).T
    np.testing.assert_array_equal(c.reshape(M, N), ref)
    return f


@pytest.mark.parametrize("target,instr", [("llvm", "vpdpbusd"),
                                          ("llvm -mattr=-avx512vnni", "vpmaddwd")])
def test_dense_vnni_and_fallback(target, instr):
    from tensorlang.codegen.target import Target

    s, args, ji, _ = _dense()
    s[args[2]].tensorize(ji, dot_u8s8_16x4())
    if instr == "vpdpbusd" and not Target.from_string(target).has_feature("avx512vnni"):
        pytest.skip("host without AVX-512 VNNI")
    if instr == "vpmaddwd" and not Target.from_string(target).has_feature("avx512bw"):
        instr = ""  # still correct, other instructions
    f = _run(s, args, target)
    asm = f.get_source("asm")
    assert instr in asm
    if "-avx512vnni" in target:
        assert "vpdpbusd" not in asm


def test_lowered_text_is_one_call_per_step():
    s, args, ji, _ = _dense()
    s[args[2]].tensorize(ji, dot_u8s8_16x4())
    text = str(tl.lower(s, list(args)))
    assert text.count("tl.dot_u8s8x4_i32x16") == 1
    assert "for ki" not in text


def test_replayed_trace_tensorizes():
    from tensorlang.schedule.schedule import Step

    s, args, ji, _ = _dense()
    s[args[2]].tensorize(ji, dot_u8s8_16x4())
    steps = [st.to_json() for st in s.trace]
    assert steps[-1]["kind"] == "tensorize" and steps[-1]["args"] == {"intrin": "dot_u8s8_16x4"}
    _, args2, _, _ = _dense()
    s2 = tl.create_schedule(args2[2])
    for st in steps:
        s2.apply_step(Step.from_json(st))
    _run(s2, args2)
    assert "tl.dot_u8s8x4_i32x16" in str(tl.lower(s2, list(args2)))


def test_refused_wrong_extent():
    s, args, ji, _ = _dense(kb=8)  # 8 bytes of the reduction per step: the intrinsic takes 4
    with pytest.raises(tl.ScheduleError, match=r"loop ki has extent 8, the intrinsic's k has 4"
                       r"(.|\n)*loop nest:(.|\n)*intrinsic:"):
        s[args[2]].tensorize(ji, dot_u8s8_16x4())


def test_refused_wrong_dtype():
    s, args, ji, _ = _dense(a_dtype="int8")
    with pytest.raises(tl.ScheduleError, match=r"is uint8, the nest's A\[.*\] is int8"):
        s[args[2]].tensorize(ji, dot_u8s8_16x4())


def test_refused_wrong_access_order():
    # W laid out [.., 4 inputs, 16 outputs]: the 16 outputs are not 4 bytes apart
    s, args, ji, (ko, ki) = _dense()
    W2 = tl.placeholder((N // 16, K // 4, 4, 16), "int8", name="W2")
    A = args[0]
    C = tl.compute((M, N // 16, 16), lambda i, jo, ji: tl.sum(
        A[i, ko * 4 + ki].astype("int32") * W2[jo, ko, ki, ji].astype("int32"),
        axis=[ko, ki]), name="C2")
    s = tl.create_schedule(C)
    i, jo, ji = s[C].op.axis
    s[C].reorder(i, jo, ko, ji, ki)
    with pytest.raises(tl.ScheduleError, match=r"W2\[.*\] moves by \(1, 16\) elements per step"
                       r" of the loops, the intrinsic's b\[j, k\] by \(4, 1\)"):
        s[C].tensorize(ji, dot_u8s8_16x4())


def test_refused_loop_order():
    s, args, ji, (_ko, ki) = _dense()
    C = args[2]
    s[C].reorder(ki, ji)
    with pytest.raises(tl.ScheduleError, match="loop ki is reduce, the intrinsic's j is spatial"):
        s[C].tensorize(ki, dot_u8s8_16x4())


def test_refused_non_unit_stride():
    # A read with stride 2 inside the group of four
    A2 = tl.placeholder((M, 2 * K), "uint8", name="A2")
    W = tl.placeholder((N // 16, K // 4, 16, 4), "int8", name="W")
    ko = tl.reduce_axis((0, K // 4), name="ko")
    ki = tl.reduce_axis((0, 4), name="ki")
    C = tl.compute((M, N // 16, 16), lambda i, jo, ji: tl.sum(
        A2[i, 8 * ko + 2 * ki].astype("int32") * W[jo, ko, ji, ki].astype("int32"),
        axis=[ko, ki]), name="C")
    s = tl.create_schedule(C)
    i, jo, ji = s[C].op.axis
    s[C].reorder(i, jo, ko, ji, ki)
    with pytest.raises(tl.ScheduleError, match=r"A2\[.*\] moves by \(0, 2\) elements per step"):
        s[C].tensorize(ji, dot_u8s8_16x4())


def test_refused_tail_guard_and_annotation():
    A = tl.placeholder((M, K), "uint8", name="A")
    W = tl.placeholder((2, K // 4, 16, 4), "int8", name="W")
    ko = tl.reduce_axis((0, K // 4), name="ko")
    ki = tl.reduce_axis((0, 4), name="ki")
    C = tl.compute((M, 20), lambda i, j: tl.sum(
        A[i, ko * 4 + ki].astype("int32") * W[j // 16, ko, j % 16, ki].astype("int32"),
        axis=[ko, ki]), name="C")
    s = tl.create_schedule(C)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, 16)
    s[C].reorder(i, jo, ko, ji, ki)
    with pytest.raises(tl.ScheduleError, match="tail guard|not affine"):
        s[C].tensorize(ji, dot_u8s8_16x4())
    s2, args, ji2, _ = _dense()
    s2[args[2]].unroll(ji2)
    with pytest.raises(tl.ScheduleError, match="loop ji is annotated"):
        s2[args[2]].tensorize(ji2, dot_u8s8_16x4())


def test_refused_non_intrinsic():
    s, args, ji, _ = _dense()
    with pytest.raises(TypeError, match="expected a tensor intrinsic"):
        s[args[2]].tensorize(ji, "vpdpbusd")
    with pytest.raises(ValueError, match="vpdpbusd multiplies uint8 by int8"):
        dot_u8s8_16x4("int8")


def test_user_declared_intrinsic():
    """A user intrinsic (a float 8-lane add) through decl_tensor_intrin, matched and run."""
    from tensorlang.ir import expr as E
    from tensorlang.ir import stmt as S

    x = tl.placeholder((8,), "float32", name="x")
    y = tl.placeholder((8,), "float32", name="y")
    z = tl.compute((8,), lambda i: x[i] + y[i], name="z")

    def impl(ins, outs):
        (a, b), (c,) = ins, outs
        ramp = [E.Ramp(r.base, E.const(1, r.base.dtype), 8) for r in (a, b, c)]
        return S.Store(c.buffer, (ramp[2],), E.Load(a.buffer, (ramp[0],)) +
                       E.Load(b.buffer, (ramp[1],)))

    add8 = tl.decl_tensor_intrin(z, impl, name="test_add8")
    P = tl.placeholder((4, 16), "float32", name="P")
    Q = tl.placeholder((4, 16), "float32", name="Q")
    R = tl.compute((4, 16), lambda i, j: P[i, j] + Q[i, j], name="R")
    s = tl.create_schedule(R)
    _jo, ji = s[R].split(s[R].op.axis[1], 8)
    s[R].tensorize(ji, add8)
    f = tl.build(s, [P, Q, R])
    p, q = np.random.rand(4, 16).astype("float32"), np.random.rand(4, 16).astype("float32")
    r = np.empty_like(p)
    f(p, q, r)
    np.testing.assert_array_equal(r, p + q)
    R2 = tl.compute((4, 16), lambda i, j: P[i, j] * Q[i, j], name="R2")
    s2 = tl.create_schedule(R2)
    _jo, ji = s2[R2].split(s2[R2].op.axis[1], 8)
    with pytest.raises(tl.ScheduleError, match="is a Add, the nest has"):
        s2[R2].tensorize(ji, add8)


def _flat_nest(b_index):
    """The flattened loop IR of C[j] += int32(A[k]) * int32(B[b_index(j, k)]) over j < 16,
    k < 4, the j loop marked for dot_u8s8_16x4 (what the tensorize pass sees)."""
    from tensorlang.ir import expr as E
    from tensorlang.ir import stmt as S

    A = S.Buffer("A", (4,), "uint8")
    B = S.Buffer("B", (64,), "int8")
    C = S.Buffer("C", (16,), "int32")
    j, k = E.Var("j", "int64"), E.Var("k", "int64")
    value = E.Load(C, (j,)) + E.Cast("int32", E.Load(A, (k,))) * \
        E.Cast("int32", E.Load(B, (b_index(j, k),)))
    inner = S.For(k, E.const(0), E.const(4), "serial", S.Store(C, (j,), value))
    return S.For(j, E.const(0), E.const(16), "serial", inner,
                 (("tensorize", "dot_u8s8_16x4"),))


def test_lowering_pass_rechecks_flat_addresses():
    """The pass matches again on the real buffers: B laid out [4 inputs, 16 outputs] is
    refused there, showing the nest; [16, 4] becomes one call with the bases at 0."""
    from tensorlang.lower.passes.tensorize import tensorize_loops

    with pytest.raises(tl.ScheduleError, match=r"B\[k \* 16 \+ j\] moves by \(1, 16\) elements"
                       r"(.|\n)*loop nest:(.|\n)*intrinsic:"):
        tensorize_loops(_flat_nest(lambda j, k: k * 16 + j))
    out = tensorize_loops(_flat_nest(lambda j, k: j * 4 + k))
    assert "tl.dot_u8s8x4_i32x16" in repr(out) and "for" not in repr(out)


def test_tensorized_region_is_frozen():
    s, args, ji, (ko, ki) = _dense()
    C = args[2]
    s[C].tensorize(ji, dot_u8s8_16x4())
    with pytest.raises(tl.ScheduleError, match=r"split on stage C: loop ki is in the region "
                       r"tensorized as dot_u8s8_16x4 \(from loop ji inwards\)"):
        s[C].split(ki, 2)
    with pytest.raises(tl.ScheduleError, match="unroll on stage C: loop ji is in the region"):
        s[C].unroll(ji)
    s[C].unroll(ko)  # outside the region: fine
    _run(s, args)


def test_rfactor_after_tensorize_is_refused():
    """rfactor replaces the stage's computation: the tensorized region matched against the old
    one would be dropped silently (the kernel then ran without the intrinsic)."""
    s, args, ji, (ko, _ki) = _dense()
    C = args[2]
    s[C].tensorize(ji, dot_u8s8_16x4())
    with pytest.raises(tl.ScheduleError, match=r"rfactor on stage C: the stage is tensorized as "
                       r"dot_u8s8_16x4 \(from loop ji inwards\), and rfactor replaces its "
                       r"computation; call rfactor first, then tensorize"):
        s.rfactor(C, ko)
    _run(s, args)  # the schedule is as it was: tensorized, exact


def _gemv_intrin(impl, **kw):
    a = tl.placeholder((64,), name="a")
    b = tl.placeholder((16, 64), name="b")
    k = tl.reduce_axis((0, 64), name="k")
    c = tl.compute((16,), lambda i: tl.sum(a[k] * b[i, k], axis=k), name="c")
    return tl.decl_tensor_intrin(c.op, impl, **kw)


def test_tvm_style_gemv_intrinsic_is_refused_clearly():
    # TVM's tensorize tutorial: no name, a region holding the whole reduction (TVM splits the
    # intrinsic into reduce_init / reduce_update), a body calling C on access_ptr()s
    intrin = _gemv_intrin(lambda ins, outs: ins[0].access_ptr("r"),
                          default_buffer_params={"offset_factor": 1})
    assert intrin.name == "c"
    A = tl.placeholder((8, 64), name="A")
    B = tl.placeholder((32, 64), name="B")
    k = tl.reduce_axis((0, 64), name="k")
    C = tl.compute((8, 32), lambda i, j: tl.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = tl.create_schedule(C)
    jo, ji = s[C].split(C.op.axis[1], factor=16)
    with pytest.raises(tl.ScheduleError, match=r"initialisation would run inside the region, "
                                               r"before loop k .* ko, ki = s\[C\].split\(k, "
                                               r"factor=64\)"):
        s[C].tensorize(ji, intrin)
    ko, ki = s[C].split(k, factor=64)
    s[C].reorder(C.op.axis[0], jo, ko, ji, ki)
    s[C].tensorize(ji, intrin)
    with pytest.raises(AttributeError, match="TVM's Buffer.access_ptr; here impl"):
        tl.lower(s, [A, B, C])
    with pytest.raises(TypeError, match=r"binds= \(TVM's tvm.tir.decl_buffer"):
        _gemv_intrin(lambda ins, outs: None, binds={})
