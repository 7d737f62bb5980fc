"""Issue 15, runtime part: GraphModule.run from many threads at once gives exactly the serial
results, in both execution modes; a damaged model artifact is refused with ArtifactError naming
the file, never loaded into a crash or a wrong answer."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from tensorlang import graph, runtime

N_THREADS = 8
RUNS_PER_THREAD = 500


def _small_model():
    """Three kernels, two outputs (one written in place into the returned array, one read back
    from the arena), an input read where it lies: every path a run takes."""
    rng = np.random.default_rng(1)
    b = graph.Builder("small")
    x = b.input("x", (4, 32))
    w = b.const(rng.standard_normal((32, 16)).astype(np.float32), "w")
    h = b.relu(b.matmul(x, w))
    y = b.add(b.tanh(h), b.sigmoid(h))
    return b.build([y, h])


@pytest.fixture(scope="module")
def small_gm():
    return graph.build(_small_model())


@pytest.mark.parametrize("mode", ["graph", "interactive"])
def test_concurrent_runs_match_serial_runs(small_gm, mode):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 32)).astype(np.float32) for _ in range(32)]
    expected = [small_gm.run(mode=mode, x=x) for x in xs]
    y = small_gm.output_names[0]
    assert not np.array_equal(expected[0][y], expected[1][y])  # inputs tell runs apart
    start = threading.Barrier(N_THREADS)
    mismatches: list[tuple[int, int, str]] = []
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            start.wait()
            for r in range(RUNS_PER_THREAD):
                i = (t * 5 + r) % len(xs)
                out = small_gm.run(mode=mode, x=xs[i])
                for name, ref in expected[i].items():
                    if not np.array_equal(out[name], ref):
                        mismatches.append((t, r, name))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a run hung"
    assert not errors, errors[:3]
    assert not mismatches, f"{len(mismatches)} wrong outputs, first {mismatches[:5]}"


def test_stateful_api_sees_the_latest_run(small_gm):
    """After run(**inputs) (which works on a private buffer set), get_output returns its
    outputs and run() without inputs reruns on its inputs."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((4, 32)).astype(np.float32) for _ in range(2))
    y, h = small_gm.output_names
    out_a = small_gm.run(x=a)
    out_b = small_gm.run(x=b)
    np.testing.assert_array_equal(small_gm.get_output(y), out_b[y])
    small_gm.set_input(x=a)
    small_gm.run()
    np.testing.assert_array_equal(small_gm.get_output(0), out_a[y])
    small_gm.run(x=b)
    assert small_gm.run() is None
    np.testing.assert_array_equal(small_gm.get_output(1), out_b[h])
    np.testing.assert_array_equal(small_gm.run(mode="interactive", x=a)[h], out_a[h])


def test_a_run_interrupted_between_copying_its_inputs_copies_the_rest_next_time(monkeypatch):
    """run() without inputs first copies the last run(**inputs)'s inputs into the module's
    buffer; a Ctrl-C between two copies forgot the rest, and the next run() read the inputs
    before them without a word."""
    gb = graph.Builder("two")
    gm = graph.build(gb.build([gb.add(gb.input("x", (3,)), gb.input("y", (3,)))]))
    x, y = np.arange(3, dtype=np.float32), np.full(3, 10, np.float32)
    (want,) = gm.run(x=x, y=y).values()
    copies, copyto = [], np.copyto

    def interrupted_second(dst, src, **kw):
        copies.append(1)
        if len(copies) == 2:
            raise KeyboardInterrupt
        copyto(dst, src, **kw)

    monkeypatch.setattr(np, "copyto", interrupted_second)
    with pytest.raises(KeyboardInterrupt):
        gm.run()
    monkeypatch.setattr(np, "copyto", copyto)
    gm.run()
    np.testing.assert_array_equal(gm.get_output(0), want)


# -- damaged model artifacts ---------------------------------------------------------------

TESTS_RUNTIME = Path(__file__).resolve().parents[1] / "runtime"


def _redigest(art: Path) -> None:
    """Record the files' current sha256 in the manifest, as a deliberate edit would, so that
    the checks behind the digests are what refuses the artifact."""
    man = json.loads((art / "manifest.json").read_text())
    man["files"] = {f.relative_to(art).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
                    for f in sorted(art.rglob("*")) if f.is_file() and f.name != "manifest.json"}
    (art / "manifest.json").write_text(json.dumps(man))


def _edit_json(rel: str, edit, redigest: bool = True):
    def apply(art: Path) -> None:
        doc = json.loads((art / rel).read_text())
        doc = edit(doc) or doc
        (art / rel).write_text(json.dumps(doc))
        if redigest:
            _redigest(art)
    return apply


def _swap_kernels(redigest: bool):
    def apply(art: Path) -> None:
        a, b = sorted((art / "kernels").glob("*.tlm"))[:2]
        data_a = a.read_bytes()
        a.write_bytes(b.read_bytes())
        b.write_bytes(data_a)
        if redigest:
            _redigest(art)
    return apply


def _replace(rel: str, source_rel: str):
    def apply(art: Path) -> None:
        (art / rel).write_bytes((art / source_rel).read_bytes())
        _redigest(art)
    return apply


def _weights(arrays):
    def apply(art: Path) -> None:
        np.savez(art / "weights.npz", **arrays)
        _redigest(art)
    return apply


def _first_kernel(art: Path) -> str:
    return "kernels/" + min((art / "kernels").glob("*.tlm")).name


def _set(*path_and_value):
    *path, value = path_and_value

    def edit(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


STRUCTURAL = {
    "kernel files swapped": _swap_kernels(redigest=False),
    "kernel files swapped, digests redone (signature check)": _swap_kernels(redigest=True),
    "driver replaced by a kernel": lambda art: _replace("driver.tlm", _first_kernel(art))(art),
    "a kernel replaced by the driver": lambda art: _replace(_first_kernel(art), "driver.tlm")(art),
    "plan is a JSON list": _edit_json("plan.json", lambda p: [p]),
    "negative dimension": _edit_json("plan.json", _set("values", "x", "shape", [-4, 32])),
    "value larger than its storage": _edit_json("plan.json", _set("values", "x", "shape",
                                                                  [400, 32])),
    "storage past the arena": _edit_json("plan.json", _set("storages", 0, "offset", 1 << 40)),
    "unknown storage": _edit_json("plan.json", _set("values", "x", "storage", 99)),
    # true is == 1 (storage 1 taken: wrong results in the interactive mode); a list as a name
    # raised TypeError (unhashable) from the check
    "storage id true": _edit_json("plan.json", _set("values", "x", "storage", True)),
    "input name a list": _edit_json("plan.json", _set("inputs", 0, "name", [])),
    "dtype changed": _edit_json("plan.json", _set("values", "x", "dtype", "float64")),
    "step reads an unknown value": _edit_json("plan.json", _set("steps", 0, "args", 0, "zz")),
    "step with n_out 0": _edit_json("plan.json", _set("steps", 0, "n_out", 0)),
    "step with an extra argument": _edit_json(
        "plan.json", lambda p: p["steps"][0]["args"].insert(0, "x")),
    "arena_bytes a string": _edit_json("plan.json", _set("arena_bytes", "1024")),
    "steps a dict": _edit_json("plan.json", _set("steps", {})),
    "weights index a dict": _edit_json("weights_index.json", lambda w: {"w": 1}),
    "weights index repeats a name": _edit_json("weights_index.json", lambda w: w + w),
    "weights index names a missing weight": _edit_json("weights_index.json",
                                                       lambda w: w + ["ghost"]),
    "weights pickled objects": _weights({"w0": np.array([object()], dtype=object)}),
    "weights too small": _weights({"w0": np.zeros(8, np.uint8)}),
    "weights missing": _weights({}),
    "manifest a JSON list": _edit_json("manifest.json", lambda m: [m], redigest=False),
    "manifest kernel path escapes": _edit_json("manifest.json", _set("kernels", ["../x"]),
                                               redigest=False),
    "manifest has_driver a string": _edit_json("manifest.json", _set("has_driver", "yes"),
                                               redigest=False),
    "manifest files a list": _edit_json("manifest.json", _set("files", []), redigest=False),
    "manifest variants a number": _edit_json("manifest.json", _set("variants", 1 << 62),
                                             redigest=False),
    "manifest required_features a string": _edit_json(
        "manifest.json", _set("required_features", "avx2"), redigest=False),
    "a file not listed": lambda art: (art / "extra.bin").write_bytes(b"x") or _edit_json(
        "manifest.json", lambda m: m["files"].update({"extra.bin": "0" * 64}), False)(art),
}


def test_damaged_model_artifacts_are_refused(small_gm, tmp_path):
    """Every file of a saved model damaged many ways (byte flips over the whole file,
    truncations, emptied, a directory, deleted) and 30 structural edits (kernels swapped, the
    plan inconsistent, weights wrong, manifests malformed): each is refused with ArtifactError
    or, where the damage changes nothing checked, loads and computes the same -- in a
    subprocess, so that a crash fails the test."""
    art = small_gm.save(tmp_path / "model.tlpkg")
    x = np.random.default_rng(5).standard_normal((4, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "expected.npz", **small_gm.run(x=x))
    cases = tmp_path / "cases"
    for i, (label, damage) in enumerate(STRUCTURAL.items()):
        case = cases / f"{i:02d}"
        shutil.copytree(art, case)
        damage(case)
        (cases / f"{i:02d}.label").write_text(label)
    script = textwrap.dedent(f"""
        import shutil, sys
        from pathlib import Path
        import numpy as np
        sys.path.insert(0, {str(TESTS_RUNTIME)!r})
        import tamper
        from tensorlang import runtime

        art, tmp = Path({str(art)!r}), Path({str(tmp_path)!r})
        x = np.load(tmp / "x.npy")
        with np.load(tmp / "expected.npz") as z:
            expected = {{k: z[k] for k in z.files}}

        def check(gm):
            return tamper.same_arrays(gm.run(x=x), expected) and tamper.same_arrays(
                gm.run(mode="interactive", x=x), expected)

        t = tamper.Tally()
        work = tmp / "work"
        shutil.copytree(art, work)
        for f in sorted(p for p in work.rglob("*") if p.is_file()):
            original = f.read_bytes()
            for label, damage in tamper.file_damage(f, 60):
                tamper.restore(f, original)
                damage()
                t.run(f"{{f.relative_to(work)}}: {{label}}", lambda: runtime.load(work), check)
            tamper.restore(f, original)
        for case in sorted(p for p in (tmp / "cases").iterdir() if p.is_dir()):
            label = case.with_suffix(".label").read_text()
            t.run(label, lambda: runtime.load(case), check)
        t.run("no such folder", lambda: runtime.load(tmp / "nope"), check)
        t.run("a file, not a folder", lambda: runtime.load(tmp / "x.npy"), check)
        t.run("intact", lambda: runtime.load(work), check)
        t.report()
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=600, check=False)
    last = [line for line in r.stderr.splitlines() if line.startswith("case: ")][-1:]
    assert r.returncode == 0, f"the process died (rc {r.returncode}) at {last}: {r.stderr[-2000:]}"
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["bad"] == [], "\n".join(result["bad"][:20])
    counts = result["counts"]
    assert counts["refused"] >= 400 + len(STRUCTURAL) and counts["identical"] >= 1, counts


@pytest.mark.parametrize("label, match", [
    ("kernel files swapped", r"kernels/.*\.tlm is corrupt or was replaced"),
    ("kernel files swapped, digests redone (signature check)",
     r"disagree: kernel '.*' takes 2 arrays, step 0 passes 3"),
    ("negative dimension", r"plan\.json: value 'x': shape \[-4, 32\] must be a list of ints"),
    ("value larger than its storage", r"value 'x' \(51200 bytes\) does not fit its storage"),
    ("weights pickled objects", r"weights\.npz: unreadable"),
    ("manifest a JSON list", r"manifest\.json: must hold a JSON object, got list"),
    ("manifest kernel path escapes", r"'kernels' must be a list of kernel names"),
])
def test_damaged_model_refusals_name_the_file(small_gm, tmp_path, label, match):
    art = small_gm.save(tmp_path / "model.tlpkg")
    STRUCTURAL[label](art)
    with pytest.raises(runtime.ArtifactError, match=match):
        runtime.load(art)


def test_model_built_for_another_cpu_is_saved_but_never_run(tmp_path):
    """A model cross-built for Sapphire Rapids: on a CPU without its features, running it (both
    modes) and loading its artifact raise ArtifactError; on one with them, it runs. In a
    subprocess: a regression is a SIGILL."""
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        from test_reliability_graph_runtime import _small_model
        from tensorlang import graph, runtime
        gm = graph.build(_small_model(), target="llvm -mcpu=sapphirerapids")
        x = np.zeros((4, 32), np.float32)
        for mode in ("graph", "interactive"):
            try:
                gm.run(mode=mode, x=x)
                print("ran", mode)
            except runtime.ArtifactError as e:
                print("refused", mode, e)
        path = gm.save({str(tmp_path / "spr.tlpkg")!r})
        try:
            runtime.load(path).run(x=x)
            print("loaded and ran")
        except runtime.ArtifactError as e:
            print("load refused", e)
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    from tensorlang.runtime import _cpu

    if _cpu.missing_flags(["avx512_fp16", "avx512f", "amx_tile"]):
        assert "refused graph this model cannot run here" in r.stdout, r.stdout
        assert "refused interactive" in r.stdout and "avx512_fp16" in r.stdout
        assert "load refused" in r.stdout and "CPU features this CPU lacks" in r.stdout
    else:
        assert "ran graph" in r.stdout and "loaded and ran" in r.stdout, r.stdout


def test_damaged_kernel_cache_entries_are_rebuilt(tmp_path):
    """A damaged entry of the on-disk kernel cache is a miss (rebuilt), never an exception."""
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        from test_reliability_graph_runtime import _small_model
        from tensorlang import graph
        x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(4, 32)
        out = graph.build(_small_model()).run(x=x)
        np.savez(sys.argv[1], **out)
        """)
    env = dict(os.environ, TENSORLANG_CACHE_DIR=str(tmp_path / "cache"))

    def build(out: Path) -> dict:
        r = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True,
                           text=True, timeout=300, env=env, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        with np.load(out) as z:
            return {k: z[k] for k in z.files}

    first = build(tmp_path / "first.npz")
    entries = sorted((tmp_path / "cache" / "graph").rglob("*.tlk"))
    assert entries
    for f in entries:
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0x55
        f.write_bytes(bytes(data))
    again = build(tmp_path / "again.npz")
    assert first.keys() == again.keys()
    assert all(np.array_equal(first[k], again[k]) for k in first)
