from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
import rt_helpers as H
from tensorlang.runtime import ArtifactError, load_module

HERE = Path(__file__).resolve().parent


def _rewrite(src: Path, dst: Path, edit) -> None:
    """Copy an artifact, passing its manifest through ``edit``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "manifest.json":
                meta = json.loads(data)
                edit(meta)
                data = json.dumps(meta).encode()
            zout.writestr(name, data)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("artifacts")
    out = {}
    for name in ("add", "pfill"):
        path = d / f"{name}.tlm"
        H.build(name).save(path)
        out[name] = path
    return out


def test_artifact_contents(saved):
    with zipfile.ZipFile(saved["pfill"]) as z:
        names = set(z.namelist())
        meta = json.loads(z.read("manifest.json"))
    assert {"manifest.json", "kernel.o", "kernel.so", "pool.so", "sources/ll"} <= names
    art = meta["artifact"]
    assert art["format"] == 1 and art["abi"] == 1 and art["arch"] == "x86_64"
    if "+avx512f" in meta["target"]["features"]:
        assert "avx512f" in art["required_features"]
    assert meta["symbol"] == "pfill" and meta["vars"] == ["n", "T"]


def test_round_trip_in_process(saved):
    m = load_module(saved["add"])
    a = np.arange(10, dtype=np.float32)
    c = np.zeros(10, np.float32)
    m(a, a, c)
    np.testing.assert_array_equal(c, 2 * a)
    assert m.get_source("tir").startswith("// hand-written kernel add")
    assert m.manifest["name"] == "add" and "artifact" not in m.manifest


def test_round_trip_in_fresh_process_without_llvm(saved, tmp_path):
    """A fresh process, an empty cache and no LLVM: everything comes from the artifact.

    ``llvmlite.binding`` (LLVM itself) is made unimportable. All of llvmlite cannot be: the
    ``tensorlang`` package imports the compiler, whose IR builder uses ``llvmlite.ir`` (pure
    Python); the runtime itself imports neither.
    """
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["llvmlite.binding"] = None  # any import of LLVM now fails
        sys.path.insert(0, {str(HERE)!r})
        import rt_bootstrap
        rt_bootstrap.ensure_importable()
        import numpy as np
        from tensorlang.runtime import load_module

        add = load_module({str(saved["add"])!r})
        a = np.arange(1000, dtype=np.float32)
        b = np.ones(1000, np.float32)
        c = np.zeros(1000, np.float32)
        add(a, b, c)
        assert np.array_equal(c, a + 1), c[:8]

        pfill = load_module({str(saved["pfill"])!r})
        out = np.zeros(999, np.float32)
        pfill(out, np.zeros(4, np.int64), np.zeros(3, np.int32))
        assert np.array_equal(out, 2 * np.arange(999, dtype=np.float32))
        print(pfill.time_evaluator(number=3, repeat=2)(out, np.zeros(4, np.int64),
                                                       np.zeros(3, np.int32)))
        print("OK", add.loaded_via)
        """
    )
    env = dict(os.environ, TENSORLANG_CACHE_DIR=str(tmp_path / "fresh-cache"))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK shared library" in proc.stdout
    assert "TimingResult(" in proc.stdout


def test_refuses_missing_cpu_feature(saved, tmp_path):
    bad = tmp_path / "fake-feature.tlm"
    _rewrite(
        saved["add"],
        bad,
        lambda m: m["artifact"]["required_features"].append("fakefeature123"),
    )
    with pytest.raises(ArtifactError, match="CPU features this CPU lacks: fakefeature123"):
        load_module(bad)


def test_refuses_other_major_version(saved, tmp_path):
    bad = tmp_path / "v99.tlm"
    _rewrite(saved["add"], bad, lambda m: m.update(version="99.0.0"))
    with pytest.raises(ArtifactError, match="major versions differ"):
        load_module(bad)


def test_refuses_other_arch(saved, tmp_path):
    bad = tmp_path / "arm.tlm"
    _rewrite(saved["add"], bad, lambda m: m["artifact"].update(arch="aarch64"))
    with pytest.raises(ArtifactError, match="built for aarch64"):
        load_module(bad)


def test_refuses_other_format(saved, tmp_path):
    bad = tmp_path / "fmt.tlm"
    _rewrite(saved["add"], bad, lambda m: m["artifact"].update(format=2))
    with pytest.raises(ArtifactError, match="format 2"):
        load_module(bad)


def test_refuses_non_artifacts(tmp_path):
    junk = tmp_path / "junk.tlm"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ArtifactError, match="not a tensorlang module artifact"):
        load_module(junk)
    empty = tmp_path / "empty.tlm"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(ArtifactError, match="no manifest"):
        load_module(empty)


def test_object_only_artifact_is_relinked(saved, tmp_path):
    stripped = tmp_path / "no-so.tlm"
    with zipfile.ZipFile(saved["add"]) as zin, zipfile.ZipFile(stripped, "w") as zout:
        for name in zin.namelist():
            if name != "kernel.so":
                zout.writestr(name, zin.read(name))
    m = load_module(stripped)
    a = np.arange(5, dtype=np.float32)
    c = np.zeros(5, np.float32)
    m(a, a, c)
    np.testing.assert_array_equal(c, 2 * a)


def test_jit_load_of_artifact(saved):
    m = load_module(saved["pfill"], loader="jit")
    assert m.loaded_via == "ORC JIT"
    out = np.zeros(50, np.float32)
    m(out, np.zeros(3, np.int64), np.zeros(3, np.int32))
    np.testing.assert_array_equal(out, 2 * np.arange(50, dtype=np.float32))


def test_module_refuses_target_this_cpu_lacks():
    compiled = H.compile_ir(H.ADD_IR)
    manifest = dict(H.MANIFESTS["add"])
    manifest["target"] = {**manifest["target"], "triple": "aarch64-unknown-linux-gnu"}
    # built elsewhere (to be saved): never loaded here, and every way of running it refuses
    m = H.Module.from_object(compiled.object_code, manifest)
    assert m.loaded_via.startswith("not loaded: add was compiled for aarch64")
    a, c = np.zeros(4, np.float32), np.zeros(4, np.float32)
    for run in (lambda: m(a, a, c), lambda: m.call_raw(0, 0, 0, 4),
                lambda: m.function_address, lambda: m.time_evaluator()(a, a, c)):
        with pytest.raises(ArtifactError, match="compiled for aarch64"):
            run()


def test_last_level_cache_size_from_sysfs(tmp_path):
    """The streaming-store threshold reads the host's last-level cache: the highest level
    listed, sizes in K/M; unreadable or malformed entries are skipped, none left: the
    default."""
    from tensorlang.runtime._cpu import last_level_cache_bytes

    for name, level, size in (("index0", "1", "48K"), ("index2", "2", "1024K"),
                              ("index3", "3", "32768K"), ("index4", "x", "9M")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "level").write_text(level + "\n")
        (tmp_path / name / "size").write_text(size + "\n")
    assert last_level_cache_bytes(7, str(tmp_path)) == 32 << 20
    assert last_level_cache_bytes(7, str(tmp_path / "none")) == 7


def test_cache_size_of_a_level_skips_instruction_caches(tmp_path):
    """The matmul's rows-outside bound reads the host's L2; an instruction cache of the same
    level as a data cache does not count; a level not listed: the default."""
    from tensorlang.runtime._cpu import cache_bytes

    for name, level, kind, size in (("index0", "1", "Data", "48K"),
                                    ("index1", "1", "Instruction", "32K"),
                                    ("index2", "2", "Unified", "2M"),
                                    ("index3", "3", "Unified", "96M")):
        (tmp_path / name).mkdir()
        for f, v in (("level", level), ("type", kind), ("size", size)):
            (tmp_path / name / f).write_text(v + "\n")
    root = str(tmp_path)
    assert [cache_bytes(k, 7, root) for k in (1, 2, 3, None, 4)] == [
        48 << 10, 2 << 20, 96 << 20, 96 << 20, 7]
