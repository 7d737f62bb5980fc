"""Issue 15, runtime part: targets are checked before LLVM sees them (LLVM aborts the process on
an unknown or 32-bit CPU), and an artifact records every CPU feature its target implies, so that
code built for another CPU is refused at load instead of dying with SIGILL when called."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from tensorlang.runtime import _cpu

from tensorlang.codegen.target import Target, known_cpus, known_features


def _run(code: str, timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.mark.parametrize(
    "spec, match",
    [
        ("llvm -mcpu=bogus", r"unknown CPU 'bogus' .*LLVM knows these x86 CPUs: .*znver3"),
        ("llvm -mcpu=skylake-avx51", r"did you mean skylake-avx512"),
        ("llvm -mcpu=i386", r"-mcpu=i386 .* is a 32-bit x86 CPU"),
        ("llvm -mcpu=pentium4", r"is a 32-bit x86 CPU"),
        ("llvm -mtriple=i686-pc-linux-gnu", r"is 32-bit x86"),
        ("llvm -mattr=+foo", r"unknown CPU feature 'foo'.*known_features\(\)"),
        ("llvm -mcpu=haswell -mattr=+avx512fq", r"did you mean avx512f, avx512dq"),
        ("llvm -mattr=avx2", r"must be \+feature or -feature"),
        ("llvm -mcpu=haswell -mcpu=znver3", r"given twice"),
        ("llvm -mtriple=aarch64-unknown-linux-gnu -mcpu=x", r"known for x86_64 only"),
    ],
)
def test_bad_targets_are_value_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        Target.from_string(spec)


def test_bad_targets_never_reach_llvm():
    """What aborted the interpreter inside LLVM now raises before it (in a subprocess, so that a
    regression fails this test instead of killing the run)."""
    r = _run("""
        import tensorlang as tl
        A = tl.placeholder((8,), name="A")
        B = tl.compute((8,), lambda i: A[i] + 1, name="B")
        for target in ("llvm -mcpu=bogus", "llvm -mcpu=i386", "llvm -mattr=+foo"):
            try:
                tl.build(tl.create_schedule(B), [A, B], target=target)
            except ValueError as e:
                print("refused", target)
        """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("refused") == 3, r.stdout + r.stderr[-2000:]


def test_catalog_and_implied_features():
    host = Target.host()
    assert {"x86-64", "x86-64-v3", "znver3", "sapphirerapids", host.cpu} <= known_cpus()
    assert {"avx2", "avx512f", "avx512fp16", "fma"} <= known_features()
    spr = set(Target.from_string("llvm -mcpu=sapphirerapids").features.split(","))
    assert {"+avx512f", "+avx512fp16", "+avx512bw", "+f16c", "+fma"} <= spr
    zen3 = Target.from_string("llvm -mcpu=znver3 -mtriple=x86_64-unknown-linux-gnu")
    if zen3.cpu != host.cpu:  # else it is the host, with its detected features
        assert {"+avx2", "+fma"} <= set(zen3.features.split(","))
        assert "+avx512f" not in zen3.features.split(",") and zen3.vector_bits == 256
    v3 = Target.from_string("llvm -mcpu=x86-64-v3 -mattr=-fma")
    assert v3.has_feature("avx2") and not v3.has_feature("fma") and v3.vector_bits == 256
    assert "avx512_fp16" in _cpu.required_flags(
        Target.from_string("llvm -mcpu=sapphirerapids").features, host.triple)


def test_artifact_for_another_cpu_is_refused_at_load(tmp_path):
    """float16 vector code built for Sapphire Rapids: the artifact records avx512_fp16 & co.;
    on a CPU without them, calling the built module and loading the artifact raise ArtifactError
    (both in subprocesses: a regression is a SIGILL); on a CPU with them, it runs correctly:
    rounded as numpy rounds or, since a compute's arithmetic may contract into an FMA,
    rounded once (a 16-core Emerald Rapids with Python 3.12 printed `ran False`; the
    largest difference is printed now)."""
    path = tmp_path / "fp16.tlm"
    build = _run(f"""
        import numpy as np, tensorlang as tl
        n = 256
        A = tl.placeholder((n,), dtype="float16", name="A")
        B = tl.placeholder((n,), dtype="float16", name="B")
        C = tl.compute((n,), lambda i: A[i] * B[i] + A[i], name="C")
        s = tl.create_schedule(C)
        io, ii = s[C].split(C.op.axis[0], factor=32)
        s[C].vectorize(ii)
        f = tl.build(s, [A, B, C], target="llvm -mcpu=sapphirerapids", name="fp16_fma")
        f.save({str(path)!r})
        a = np.arange(n, dtype=np.float16) / 64
        c = np.zeros(n, np.float16)
        try:
            f(a, a, c)
            fused = (a.astype(np.float32) * a + a).astype(np.float16)
            same = np.array_equal(c, a * a + a) or np.array_equal(c, fused)
            print("ran", same, np.abs(c.astype(np.float32) - fused).max())
        except tl.TensorlangError as e:
            print("refused", type(e).__name__, e)
        """)
    assert build.returncode == 0, build.stderr[-3000:]
    load = _run(f"""
        import numpy as np
        from tensorlang.runtime import ArtifactError, load_module
        try:
            f = load_module({str(path)!r})
        except ArtifactError as e:
            print("refused", e)
        else:
            a = np.arange(256, dtype=np.float16) / 64
            c = np.zeros(256, np.float16)
            f(a, a, c)
            fused = (a.astype(np.float32) * a + a).astype(np.float16)
            same = np.array_equal(c, a * a + a) or np.array_equal(c, fused)
            print("ran", same, np.abs(c.astype(np.float32) - fused).max())
        """)
    assert load.returncode == 0, load.stderr[-3000:]
    missing = _cpu.missing_flags(["avx512_fp16", "avx512f", "avx512bw"])
    if missing:
        assert "refused ArtifactError" in build.stdout and "avx512_fp16" in build.stdout
        assert load.stdout.startswith("refused") and "CPU features this CPU lacks" in load.stdout
        assert "avx512_fp16" in load.stdout
    else:
        assert "ran True" in build.stdout and "ran True" in load.stdout


def test_damaged_target_caches_are_asked_again(tmp_path, monkeypatch):
    """The probe's answers and compiled objects are cached on disk; a damaged entry of either
    is a miss (recomputed and overwritten), never an exception."""
    import tensorlang.codegen.target as target_mod

    monkeypatch.setenv("TENSORLANG_CACHE_DIR", str(tmp_path))
    target_mod._llvm_x86_catalog.cache_clear()
    target_mod._cpu_profile.cache_clear()
    try:
        for what, damage in (("catalog", b"[1]"), ("cpu-haswell", b'{"implied": 5}')):
            path = target_mod._probe_cache_path(what)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(damage)
        hsw = Target.from_string("llvm -mcpu=haswell")
        assert {"+avx2", "+fma"} <= set(hsw.features.split(",")) and "bogus" not in known_cpus()
    finally:
        target_mod._llvm_x86_catalog.cache_clear()
        target_mod._cpu_profile.cache_clear()

    ir = "define i32 @f(i32 %x) {\n  %y = add i32 %x, 7\n  ret i32 %y\n}\n"
    first = target_mod.compile_ir(ir)
    entry = target_mod._disk_path(first.key)
    data = bytearray(entry.read_bytes())
    for pos in range(30, len(data) - 30, max(1, len(data) // 40)):
        damaged = bytearray(data)
        damaged[pos] ^= 0x55
        entry.write_bytes(bytes(damaged))
        target_mod._memory.clear()
        again = target_mod.compile_ir(ir)
        assert again.object_code == first.object_code
    entry.write_bytes(b"")
    target_mod._memory.clear()
    assert target_mod.compile_ir(ir).cache_hit is None
