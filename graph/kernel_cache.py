"""The graph layer's on-disk kernel cache, keyed by workload, checked before any compiler work.

The compiler's own object cache (``tensorlang.codegen.target.compile_ir``) is keyed by LLVM IR
text, so a hit there still pays for declaring the computes, scheduling, lowering to loop IR and
emitting the IR: ~1 s per fused conv kernel, 29 s of a ResNet-50 "warm" build. This cache is
keyed by what decides the kernel before any of that runs:

- the workload (op, attributes, input and output types: ``build.workload_key``);
- the schedule variant: "default", or the tuned record's config;
- the target (CPU, features, triple) and the LLVM that compiles for it;
- the tensorlang version *and a fingerprint of the compiler's sources* (the version string does
  not change when an operator's schedule does, and a stale kernel would be a silent wrong or slow
  result, while a fingerprint miss only costs one cold build).

An entry holds what the graph executor needs to load the kernel without the compiler: the PIC
object, its manifest, the source texts (``Module.get_source``) and the name of the schedule that
built it. Entries are zip files written atomically in the shared cache directory; a damaged or
unreadable entry is a miss (the kernel is rebuilt and the entry rewritten).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import zipfile
from pathlib import Path

FORMAT = "tensorlang-graph-kernel-v1"

# The source files whose content decides a kernel's code for a given workload: the whole
# compiler package (IR, computes, schedules, legality, lowering, codegen, operator library),
# the graph's lowering to computes and op table, and the tuning template that replays records.
_GRAPH_SOURCES = ("lowering.py", "op_registry.py", "tuning.py", "kernel_cache.py")


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """A hash of the compiler's source files (read once per process, ~5 ms)."""
    import tensorlang

    h = hashlib.sha256()
    roots = [Path(tensorlang.__file__).parent]
    files = sorted(p for root in roots for p in root.rglob("*.py"))
    here = Path(__file__).parent
    files += [here / n for n in _GRAPH_SOURCES]
    for p in files:
        h.update(str(p.name).encode())
        h.update(b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()


def _llvm_version() -> str:
    try:
        import llvmlite

        return llvmlite.__version__
    except ImportError:  # a runtime-only install cannot compile: its keys never match a build's
        return "none"


def entry_key(workload: str, variant: str, target) -> str:
    """The cache key of one kernel: workload key, schedule variant ("default" or the tuned
    config), target, tensorlang version, LLVM and the compiler's source fingerprint."""
    from tensorlang.version import __version__

    parts = [FORMAT, __version__, compiler_fingerprint(), _llvm_version(), target.cpu,
             target.features, target.triple, workload, variant]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _path(key: str) -> Path:
    from tensorlang.runtime._cache import cache_dir

    return cache_dir() / "graph" / key[:2] / f"{key}.tlk"


# assembly is left out: Module.get_source("asm") produces it on demand from "ll"
_SOURCE_FORMATS = ("tir", "ll", "ll_unoptimized")


def load(key: str):
    """(runtime Module, metadata dict) for a cached kernel, or None on a miss."""
    from tensorlang.runtime import Module
    from tensorlang.runtime.module import LoadError

    try:
        with zipfile.ZipFile(_path(key)) as z:
            meta = json.loads(z.read("meta.json"))
            if meta.get("key") != key:
                return None
            obj = z.read("kernel.o")
            manifest = json.loads(z.read("manifest.json"))
            sources = {n[len("sources/"):]: z.read(n).decode("utf-8")
                       for n in z.namelist() if n.startswith("sources/")}
    except Exception:  # noqa: BLE001 - missing or damaged in any way (a flipped byte is a
        return None  # zlib.error): rebuild (and overwrite)
    try:
        mod = Module.from_object(obj, manifest, sources)
    except LoadError:
        return None  # e.g. the linker or the thread pool is unavailable now: rebuild
    return mod, meta


def store(key: str, mod, meta: dict) -> None:
    """Write ``mod`` (object, manifest, sources) and ``meta`` (schedule name, build time) under
    ``key``. A full or read-only disk does not fail the build: the cache is only a speed-up."""
    from tensorlang.runtime._cache import atomic_write

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("meta.json", json.dumps(dict(meta, key=key)))
        z.writestr("manifest.json", json.dumps(mod.manifest))
        z.writestr("kernel.o", mod.object_code)
        for fmt in _SOURCE_FORMATS:
            try:
                z.writestr(f"sources/{fmt}", mod.get_source(fmt))
            except ValueError:
                continue  # not stored by this builder
    try:
        atomic_write(_path(key), buf.getvalue())
    except OSError:
        pass
