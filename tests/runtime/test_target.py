from __future__ import annotations

import pytest
import rt_helpers as H

import tensorlang.codegen.target as target_mod
from tensorlang.codegen.target import CodegenError, CompiledObject, Target, compile_ir
from tensorlang.errors import TensorlangError


def test_host_target_fields():
    t = Target.host()
    assert t is Target.host()  # cached
    assert t.cpu and t.triple.startswith(("x86_64", "aarch64"))
    assert t.num_cores >= 1
    if t.has_feature("avx512f"):
        assert t.vector_bits == 512
    elif t.has_feature("avx"):
        assert t.vector_bits == 256
    assert t.to_dict() == {"cpu": t.cpu, "features": t.features, "triple": t.triple}
    assert str(t) == f"llvm -mcpu={t.cpu}"


def test_from_string():
    host = Target.host()
    assert Target.from_string("llvm") == host
    assert Target.from_string(f"llvm -mcpu={host.cpu}") == host
    assert Target.from_string("llvm -mcpu=native") == host
    skx = Target.from_string("llvm -mcpu=skylake-avx512")
    assert skx.cpu == "skylake-avx512" and skx.vector_bits == 512
    # the features LLVM implies for the CPU are written out, so that artifacts record them
    assert {"+avx512f", "+avx512bw", "+fma"} <= set(skx.features.split(","))
    assert "+avx512fp16" not in skx.features.split(",")
    hsw = Target.from_string("llvm -mcpu=haswell")
    assert hsw.vector_bits == 256
    arm = Target.from_string("llvm -mtriple=aarch64-unknown-linux-gnu")
    assert arm.cpu == "generic" and arm.vector_bits == 128
    with pytest.raises(ValueError, match="native cannot be combined"):
        Target.from_string("llvm -mcpu=native -mtriple=aarch64-unknown-linux-gnu")
    no512 = Target.from_string("llvm -mattr=-avx512f")
    assert not no512.has_feature("avx512f")
    if host.has_feature("avx2"):
        assert no512.vector_bits == 256


@pytest.mark.parametrize(
    "spec, match",
    [
        ("cuda", "only 'llvm"),
        ("llvm -mfoo=bar", "unknown target option"),
        ("llvm -mcpu", "unknown target option"),
    ],
)
def test_from_string_rejects(spec, match):
    with pytest.raises(ValueError, match=match):
        Target.from_string(spec)


def test_compile_produces_object_ir_and_asm():
    res = compile_ir(H.ADD_IR, Target.host(), want_asm=True, cache=False)
    assert isinstance(res, CompiledObject)
    assert res.object_code[:4] == b"\x7fELF"
    assert "define" in res.optimized_ir and "@add" in res.optimized_ir
    assert res.asm is not None and "add:" in res.asm
    assert res.cache_hit is None
    if Target.host().has_feature("avx512f"):
        # prefer-vector-width=512 + AVX-512 features: the loop is vectorized with zmm registers.
        assert "zmm" in res.asm


def test_compile_opt_levels():
    o0 = compile_ir(H.ADD_IR, opt_level=0, cache=False)
    o3 = compile_ir(H.ADD_IR, opt_level=3, cache=False)
    assert "<16 x float>" not in o0.optimized_ir
    assert o0.object_code != o3.object_code
    with pytest.raises(ValueError, match="opt_level"):
        compile_ir(H.ADD_IR, opt_level=4)


def test_verifier_error_is_codegen_error():
    bad = "define i32 @f(i32 %x) {\n  %y = add i64 %x, 1\n  ret i32 %y\n}\n"
    with pytest.raises(CodegenError, match="invalid LLVM IR") as info:
        compile_ir(bad, cache=False)
    assert isinstance(info.value, TensorlangError)

    # Verifier (not parser) error: a block without terminator.
    unterminated = "define i32 @g() {\nentry:\n  %x = add i32 1, 2\n}\n"
    with pytest.raises(CodegenError):
        compile_ir(unterminated, cache=False)

    # Structurally well-formed but invalid: use before def in the same block.
    dominance = (
        "define i32 @h(i32 %a) {\nentry:\n  %y = add i32 %x, 1\n  %x = add i32 %a, 1\n"
        "  ret i32 %y\n}\n"
    )
    with pytest.raises(CodegenError, match="verify|dominate"):
        compile_ir(dominance, cache=False)


def test_disk_and_memory_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORLANG_CACHE_DIR", str(tmp_path))
    ir = H.ADD_IR + "\n; cache test\n"
    first = compile_ir(ir)
    assert first.cache_hit is None
    assert any(tmp_path.glob("obj/*/*.tlo"))
    assert compile_ir(ir).cache_hit == "memory"

    target_mod._memory.clear()
    from_disk = compile_ir(ir)
    assert from_disk.cache_hit == "disk"
    assert from_disk == first  # same object code and IR

    # Asking for assembly on a cached entry adds it.
    with_asm = compile_ir(ir, want_asm=True)
    assert with_asm.asm and with_asm.object_code == first.object_code

    # Different opt level: different key.
    assert compile_ir(ir, opt_level=2).cache_hit is None
    # cache=False always compiles.
    assert compile_ir(ir, cache=False).cache_hit is None


def test_damaged_disk_entry_is_recompiled(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORLANG_CACHE_DIR", str(tmp_path))
    ir = H.ADD_IR + "\n; damaged cache test\n"
    first = compile_ir(ir)
    (entry,) = tmp_path.glob("obj/*/*.tlo")
    entry.write_bytes(b"garbage")
    target_mod._memory.clear()
    again = compile_ir(ir)
    assert again.cache_hit is None and again.object_code == first.object_code
