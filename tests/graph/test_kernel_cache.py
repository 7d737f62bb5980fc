"""The graph kernel cache: keyed by workload before any compiler work, loaded without the
compiler, invalidated by a change of the compiler's sources, robust to damaged entries."""

import importlib

import numpy as np
import pytest
from tensorlang.graph import kernel_cache, model_zoo

from tensorlang import graph

# the module (graph.build is also the function)
gselect = importlib.import_module("tensorlang.graph.select_kernels")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache directory and an empty in-process kernel cache (restored after)."""
    monkeypatch.setenv("TENSORLANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gselect, "_KERNEL_CACHE", {})
    return tmp_path


def _build(model):
    rep = graph.BuildReport()
    gm = graph.build(graph.from_onnx(model), report=rep)
    return gm, rep


def _forbid_compiling(monkeypatch):
    import tensorlang as tl

    def refuse(*a, **k):
        raise AssertionError("a warm build must not compile kernels")

    monkeypatch.setattr(tl, "build", refuse)


def test_warm_build_loads_every_kernel_from_disk(fresh_cache, monkeypatch):
    model = model_zoo.small_cnn()
    gm, rep = _build(model)
    assert all(k.source is None for k in rep.kernels)
    assert list((fresh_cache / "graph").rglob("*.tlk"))
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    ref = next(iter(gm.run(x=x).values()))

    # a new process has an empty in-process cache: every kernel comes from disk, no compiling
    monkeypatch.setattr(gselect, "_KERNEL_CACHE", {})
    _forbid_compiling(monkeypatch)
    gm2, rep2 = _build(model)
    assert [k.source for k in rep2.kernels] == ["disk"] * len(rep.kernels)
    assert [k.schedule for k in rep2.kernels] == [k.schedule for k in rep.kernels]
    assert np.array_equal(next(iter(gm2.run(x=x).values())), ref)
    k = gm2.kernels[rep2.kernels[0].name]
    assert "define" in k.get_source("ll") and k.get_source("tir")

    # the same graph again in the same process: the in-process cache
    _gm3, rep3 = _build(model)
    assert {k.source for k in rep3.kernels} == {"memory"}


def test_compiler_change_or_damage_is_a_miss(fresh_cache, monkeypatch):
    model = model_zoo.mlp()
    _build(model)
    entries = sorted((fresh_cache / "graph").rglob("*.tlk"))
    entries[0].write_bytes(b"not a zip")
    monkeypatch.setattr(gselect, "_KERNEL_CACHE", {})
    _gm, rep = _build(model)
    assert sorted(k.source or "compiled" for k in rep.kernels).count("compiled") == 1

    # another compiler (an edited schedule, say) must not load these kernels
    monkeypatch.setattr(kernel_cache, "compiler_fingerprint", lambda: "another compiler")
    monkeypatch.setattr(gselect, "_KERNEL_CACHE", {})
    _gm, rep = _build(model)
    assert all(k.source is None for k in rep.kernels)


def test_keys_separate_variants_and_targets():
    from tensorlang.codegen.target import Target

    host = Target.host()
    other = Target(host.cpu, host.features + ",+fake", host.triple, host.vector_bits,
                   host.num_cores)
    keys = {kernel_cache.entry_key("w", "default", host),
            kernel_cache.entry_key("w", "tuned:{}", host),
            kernel_cache.entry_key("w", "default", other),
            kernel_cache.entry_key("w2", "default", host)}
    assert len(keys) == 4
