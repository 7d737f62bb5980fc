"""Issue 15, runtime part: every malformed kernel artifact (.tlm) is an ArtifactError naming the
file -- flipped bytes anywhere, truncations, empty files, a directory, missing or swapped members,
manifests of the wrong structure -- never another exception, a wrong result or a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import rt_helpers as H
from tensorlang.runtime import ArtifactError, load_module

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tamper")
    out = {}
    for name in ("add", "pfill"):
        out[name] = d / f"{name}.tlm"
        H.build(name).save(out[name])
    return out


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def _zip(members: dict[str, bytes]) -> bytes:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    return buf.getvalue()


def _with_manifest(path: Path, edit, redigest: bool = True) -> bytes:
    """The artifact with its manifest passed through ``edit``; with ``redigest`` the manifest
    digest is recomputed, as a deliberate edit would, so that the structure checks behind it
    are what refuses the result."""
    from tensorlang.runtime.kernel_artifact import manifest_digest

    members = _members(path)
    meta = json.loads(members["manifest.json"])
    edit(meta)
    if redigest and isinstance(meta, dict) and isinstance(meta.get("artifact"), dict):
        meta["artifact"]["manifest_sha256"] = manifest_digest(meta)
    members["manifest.json"] = json.dumps(meta).encode()
    return _zip(members)


def _set(path: list, value):
    def edit(meta):
        target = meta
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def _structural_cases(saved) -> dict[str, bytes]:
    add = saved["add"]
    members = _members(add)
    other = _members(saved["pfill"])
    cases = {
        "manifest is a JSON list": _zip({**members, "manifest.json": b"[1, 2]"}),
        "manifest is not JSON": _zip({**members, "manifest.json": b"\xff\xfe{"}),
        "manifest is empty": _zip({**members, "manifest.json": b""}),
        "kernel.o missing": _zip({n: d for n, d in members.items() if n != "kernel.o"}),
        "kernel.so from another artifact": _zip({**members, "kernel.so": other["kernel.so"]}),
        "kernel.o from another artifact": _zip({**members, "kernel.o": other["kernel.o"]}),
        "an unlisted member": _zip({**members, "extra.bin": b"x"}),
        "manifest edited, digest kept": _with_manifest(add, _set(["name"], "x"), False),
        "artifact section missing": _with_manifest(add, lambda m: m.pop("artifact")),
        "artifact section a list": _with_manifest(add, _set(["artifact"], [1])),
        "members a list": _with_manifest(add, _set(["artifact", "members"], [])),
        "a member digest wrong": _with_manifest(
            add, _set(["artifact", "members", "kernel.o"], "0" * 64)),
        "required_features a string": _with_manifest(
            add, _set(["artifact", "required_features"], "avx2")),
        "version an int": _with_manifest(add, _set(["version"], 3)),
        "args not a list": _with_manifest(add, _set(["args"], "abc")),
        "an arg not a dict": _with_manifest(add, _set(["args", 0], 5)),
        "dtype object": _with_manifest(add, _set(["args", 0, "dtype"], "object")),
        "dtype missing": _with_manifest(add, lambda m: m["args"][0].pop("dtype")),
        "negative dimension": _with_manifest(add, _set(["args", 0, "shape"], [-1])),
        "shape a string": _with_manifest(add, _set(["args", 0, "shape"], "n")),
        "vars an int": _with_manifest(add, _set(["vars"], 5)),
        "symbol not an identifier": _with_manifest(add, _set(["symbol"], "a b")),
        "symbol of a Python attribute": _with_manifest(add, _set(["symbol"], "__class__")),
        "symbol not in the library": _with_manifest(add, _set(["symbol"], "pfill")),
        "error_messages a list": _with_manifest(add, _set(["error_messages"], [1])),
        "target a string": _with_manifest(add, _set(["target"], "llvm")),
    }
    return cases


def test_tampered_module_artifacts_are_refused(saved, tmp_path):
    cases_dir = tmp_path / "cases"
    cases_dir.mkdir()
    for i, (label, blob) in enumerate(_structural_cases(saved).items()):
        (cases_dir / f"{i}.tlm").write_bytes(blob)
        (cases_dir / f"{i}.label").write_text(label)
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        import numpy as np
        sys.path.insert(0, {str(HERE)!r})
        import tamper
        from tensorlang.runtime import load_module

        src, work, cases = Path({str(saved["add"])!r}), Path({str(tmp_path)!r}), \\
            Path({str(cases_dir)!r})
        a = np.arange(100, dtype=np.float32)
        b = np.full(100, 0.5, np.float32)

        def check(m):
            c = np.zeros(100, np.float32)
            m(a, b, c)
            return np.array_equal(c, a + b)

        t = tamper.Tally()
        p = work / "damaged.tlm"
        original = src.read_bytes()
        p.write_bytes(original)
        for label, damage in tamper.file_damage(p, 400):
            tamper.restore(p, original)
            damage()
            t.run(label, lambda: load_module(p), check)
        for case in sorted(cases.glob("*.tlm")):
            label = case.with_suffix(".label").read_text()
            t.run(label, lambda: load_module(case), check)
        t.run("no such file", lambda: load_module(work / "nope.tlm"), check)
        t.run("a directory", lambda: load_module(work), check)
        t.report()
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ), check=False)
    last = [line for line in r.stderr.splitlines() if line.startswith("case: ")][-1:]
    assert r.returncode == 0, f"the process died (rc {r.returncode}) at {last}: {r.stderr[-2000:]}"
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["bad"] == [], "\n".join(result["bad"][:20])
    # the flips and every structural case are refused; only bytes outside what is checked
    # (e.g. zip timestamps) may leave an artifact that loads, and then it computes the same
    assert result["counts"]["refused"] >= 300 + len(_structural_cases(saved)), result["counts"]


def test_refusals_name_the_file_and_the_problem(saved, tmp_path):
    bad = tmp_path / "bad.tlm"
    cases = _structural_cases(saved)
    for label, match in [
        ("manifest is a JSON list", "manifest.json must hold a JSON object, got list"),
        ("kernel.so from another artifact", "member 'kernel.so' is corrupt"),
        ("manifest edited, digest kept", "manifest.json was modified after save"),
        ("dtype object", "unknown dtype 'object'"),
        ("negative dimension", "dimension -1 must be a var name or an int >= 0"),
        ("symbol not in the library", "does not define 'pfill'"),
        ("required_features a string", "wrong type"),
    ]:
        bad.write_bytes(cases[label])
        with pytest.raises(ArtifactError, match=match) as info:
            load_module(bad)
        assert str(bad) in str(info.value), label
    data = saved["add"].read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match=r"bad\.tlm is not a tensorlang module artifact"):
        load_module(bad)


def test_cached_libraries_cut_short_are_made_again(tmp_path, monkeypatch):
    """A library or pool object in the cache directory that was cut short (an interrupted copy
    of the cache, a crash before its data reached the disk) is linked, written or compiled
    again, never opened as it is: dlopen maps segments past the end of such a file (SIGBUS at
    the first call) or refuses it on every later build."""
    import numpy as np
    from tensorlang.runtime import Module, _link, _pool_build
    from tensorlang.runtime._elf_check import is_whole_elf

    from tensorlang.codegen.target import Target, compile_ir

    monkeypatch.setenv("TENSORLANG_CACHE_DIR", str(tmp_path))
    # (compiled, not loaded: cutting a file this process has mapped would kill it)
    obj = compile_ir(H.IRS["add"], Target.host()).object_code
    linked = _link.cached_shared_library(obj)
    library = linked.read_bytes()
    shipped = _link.store_shared_library(library)
    _pool_build.pool_object()
    for path, make in ((linked, lambda: _link.cached_shared_library(obj)),
                       (shipped, lambda: _link.store_shared_library(library)),
                       (_pool_build.object_path(), _pool_build.pool_object)):
        whole = path.read_bytes()
        assert is_whole_elf(path)
        for size in (0, 64, len(whole) // 2, len(whole) - 1):
            path.write_bytes(whole[:size])
            assert not is_whole_elf(path)
            make()
            assert path.read_bytes() == whole, (path.name, size)
    linked.write_bytes(linked.read_bytes()[:4096])
    a = np.arange(5, dtype=np.float32)
    c = np.empty_like(a)
    Module.from_object(obj, H.MANIFESTS["add"])(a, a, c)  # (loaded as it was: SIGBUS)
    np.testing.assert_array_equal(c, 2 * a)


def test_the_cache_directory_setting_is_expanded_and_absolute(tmp_path, monkeypatch):
    # "~/x" (quoted in a shell) made a folder named "~" in the working directory; a relative
    # path named another folder after os.chdir
    from tensorlang.runtime._cache import cache_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TENSORLANG_CACHE_DIR", "~/tl-cache-probe")
    assert cache_dir() == tmp_path / "home" / "tl-cache-probe" and not (tmp_path / "~").exists()
    monkeypatch.setenv("TENSORLANG_CACHE_DIR", "rel-cache-probe")
    assert cache_dir() == tmp_path / "rel-cache-probe"
