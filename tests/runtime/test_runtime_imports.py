"""The deployed runtime imports no compiler module (DESIGN.md §7): a fresh process that loads and
runs a saved kernel and a saved model imports numpy, the runtime and tensorlang's dependency-free
errors/version modules, and neither islpy nor llvmlite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import graph

# what a deployment may import from tensorlang, besides tensorlang.runtime.*
ALLOWED = {"tensorlang", "tensorlang.errors", "tensorlang.version"}

LOAD_AND_RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    before = set(sys.modules)
    import tensorlang.runtime
    after_import = sorted(m for m in set(sys.modules) - before if m.startswith("tensorlang"))
    from tensorlang import runtime
    d = sys.argv[1]
    f = runtime.load_module(d + "/add.tlm")
    a, b = np.load(d + "/a.npy"), np.load(d + "/b.npy")
    c = np.empty_like(a)
    f(a, b, c)
    np.save(d + "/c.npy", c)
    gm = runtime.load(d + "/model.tlpkg")
    np.save(d + "/y.npy", next(iter(gm.run(x=a).values())))
    print(json.dumps({
        "after_import": after_import,
        "tensorlang": sorted(m for m in sys.modules if m.startswith("tensorlang")),
        "foreign": sorted(m for m in sys.modules
                          if m.split(".")[0] in ("islpy", "llvmlite", "xgboost")),
        "pool": runtime.threadpool.pool().how,
    }))
""")


def _save_kernel(d):
    n = 4096
    A = tl.placeholder((n,), name="A")
    B = tl.placeholder((n,), name="B")
    C = tl.compute((n,), lambda i: A[i] + B[i], name="C")
    s = tl.create_schedule(C)
    outer, _ = s[C].split(C.op.axis[0], factor=512)
    s[C].parallel(outer)  # so that running it needs the thread pool
    tl.build(s, [A, B, C], name="add").save(d / "add.tlm")


def _save_model(d, n):
    b = graph.Builder("deploy")
    x = b.input("x", (n,))
    bias = b.const(np.linspace(-1, 1, n, dtype=np.float32), name="bias")
    y = b.relu(b.add(x, bias))
    gm = graph.build(b.build(y))
    gm.save(d / "model.tlpkg")
    return gm


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    d = tmp_path_factory.mktemp("deployed")
    _save_kernel(d)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(4096).astype(np.float32)
    b = rng.standard_normal(4096).astype(np.float32)
    np.save(d / "a.npy", a)
    np.save(d / "b.npy", b)
    gm = _save_model(d, 4096)
    # an empty cache: the kernel and the pool must come from the artifacts themselves
    env = dict(os.environ, TENSORLANG_CACHE_DIR=str(d / "empty-cache"))
    r = subprocess.run([sys.executable, "-c", LOAD_AND_RUN, str(d)], capture_output=True,
                       text=True, timeout=120, env=env, check=False)
    assert r.returncode == 0, r.stderr
    return d, a, b, gm, json.loads(r.stdout.strip().splitlines()[-1])


def test_saved_kernel_and_model_run_in_a_fresh_process(deployed):
    d, a, b, gm, _ = deployed
    np.testing.assert_array_equal(np.load(d / "c.npy"), a + b)
    np.testing.assert_array_equal(np.load(d / "y.npy"), next(iter(gm.run(x=a).values())))
    np.testing.assert_allclose(np.load(d / "y.npy"),
                               np.maximum(a + np.linspace(-1, 1, 4096, dtype=np.float32), 0))


def test_no_compiler_module_is_imported(deployed):
    info = deployed[-1]
    compiler = [m for m in info["tensorlang"]
                if m not in ALLOWED and not m.startswith("tensorlang.runtime.")
                and m != "tensorlang.runtime"]
    assert compiler == []
    assert info["foreign"] == []  # no islpy, no llvmlite (the pool came with the artifact)
    assert info["pool"].startswith("shared library")
    assert set(info["after_import"]) <= set(info["tensorlang"])
    assert "tensorlang.runtime.module" in info["after_import"]


def test_lazy_package_names_resolve_as_before():
    code = textwrap.dedent("""
        import sys, tensorlang as tl
        assert "tensorlang.te" not in sys.modules and "tensorlang.build" not in sys.modules
        import tensorlang.build, tensorlang.lower   # the submodules must not shadow the functions
        assert callable(tl.build) and callable(tl.lower), (tl.build, tl.lower)
        assert tl.compute is sys.modules["tensorlang.te"].compute
        assert tl.sum.__module__.startswith("tensorlang.te")
        assert tl.create_schedule.__module__.startswith("tensorlang.schedule")
        assert tl.ops.__name__ == "tensorlang.ops" and tl.runtime.__name__ == "tensorlang.runtime"
        try:
            tl.thread_axis
        except AttributeError as e:
            assert "GPU" in str(e), e
        else:
            raise SystemExit("tl.thread_axis did not raise")
        try:
            tl.no_such_name
        except AttributeError as e:
            assert "no_such_name" in str(e), e
        else:
            raise SystemExit("tl.no_such_name did not raise")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
