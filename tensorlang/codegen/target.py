"""The compilation target, and LLVM IR text -> machine code with llvmlite (LLVM's new pass
manager at -O3, position-independent code), cached in memory and on disk.

Compiling costs ~20 ms for a small kernel and ~0.8 s for 1.8k IR lines, and the tuner rebuilds
the same candidates across runs, so every result is cached by a hash of everything that
determines it: the IR text, the target (CPU, features, triple), the optimization level, and the
versions of tensorlang, llvmlite and LLVM.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import os
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from tensorlang.errors import TensorlangError
from tensorlang.runtime import _llvm
from tensorlang.runtime._cache import atomic_write, cache_dir
from tensorlang.version import __version__

__all__ = ["CodegenError", "CompiledObject", "Target", "compile_ir"]


class CodegenError(TensorlangError):
    """LLVM refused the IR (parse or verifier error); the message is LLVM's."""


# CPUs whose names alone (no -mattr) imply AVX-512 / AVX2, to size vectors for a target given
# as "llvm -mcpu=<name>" without a feature list.
_AVX512_CPUS = frozenset(
    {
        "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
        "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids",
        "graniterapids", "graniterapids-d", "diamondrapids", "knl", "knm", "znver4", "znver5",
        "x86-64-v4",
    }
)  # fmt: skip
_AVX2_CPUS = frozenset(
    {
        "haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake", "arrowlake",
        "arrowlake-s", "lunarlake", "gracemont", "sierraforest", "grandridge",
        "clearwaterforest", "pantherlake", "znver1", "znver2", "znver3", "bdver4", "x86-64-v3",
    }
)  # fmt: skip


def _feature_map(features: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for item in features.split(","):
        item = item.strip()
        if len(item) > 1 and item[0] in "+-":
            out[item[1:]] = item[0] == "+"
    return out


def _vector_bits(cpu: str, features: str, triple: str) -> int:
    arch = triple.split("-", 1)[0]
    if arch not in ("x86_64", "i386", "i686"):
        return 128  # NEON / baseline SIMD
    fm = _feature_map(features)
    if "avx512f" in fm:
        return 512 if fm["avx512f"] else (256 if fm.get("avx", False) else 128)
    if fm.get("avx2") or fm.get("avx"):
        return 256
    if cpu in _AVX512_CPUS:
        return 512
    if cpu in _AVX2_CPUS:
        return 256
    return 128


def _num_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Target:
    """An LLVM CPU target.

    ``features`` is LLVM's feature string ("+avx2,+avx512f,-amx-tile,..."); ``vector_bits`` the
    widest native vector (512 with AVX-512F, 256 with AVX, else 128) that vectorized schedules
    should fill; ``num_cores`` the cores this process may run on.
    """

    cpu: str
    features: str
    triple: str
    vector_bits: int
    num_cores: int

    @classmethod
    def host(cls) -> Target:
        """This machine (cached)."""
        return _host_target()

    @classmethod
    def from_string(cls, spec: str | Target) -> Target:
        """Parse "llvm", "llvm -mcpu=<cpu>", with optional "-mattr=+f,-g", "-mtriple=<t>".

        "llvm" and "-mcpu=native" (or the host's own CPU name) mean the host with its detected
        features, with any -mattr applied on top. Another CPU name gets LLVM's defaults for
        that CPU plus -mattr.
        """
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"target must be a string such as 'llvm', got {type(spec).__name__}")
        parts = spec.split()
        if not parts or parts[0] != "llvm":
            raise ValueError(f"unknown target {spec!r}: only 'llvm [-mcpu=...]' is supported")
        opts: dict[str, str] = {}
        for p in parts[1:]:
            key, eq, value = p.partition("=")
            if key not in ("-mcpu", "-mattr", "-mtriple") or not eq or not value:
                raise ValueError(
                    f"unknown target option {p!r} in {spec!r} (use -mcpu=, -mattr=, -mtriple=)"
                )
            opts[key] = value
        host = cls.host()
        triple = opts.get("-mtriple", host.triple)
        # Without -mcpu: the host CPU, or the baseline CPU of another triple.
        cpu = opts.get("-mcpu", "native" if triple == host.triple else "generic")
        if cpu in ("native", host.cpu) and triple == host.triple:
            fm = _feature_map(host.features)
            fm.update(_feature_map(opts.get("-mattr", "")))
            features = ",".join(f"{'+' if on else '-'}{name}" for name, on in fm.items())
            cpu = host.cpu
        else:
            if cpu == "native":
                raise ValueError(f"-mcpu=native cannot be combined with -mtriple={triple}")
            features = ",".join(
                f"{'+' if on else '-'}{n}" for n, on in _feature_map(opts.get("-mattr", "")).items()
            )
        return cls(cpu, features, triple, _vector_bits(cpu, features, triple), host.num_cores)

    def has_feature(self, name: str) -> bool:
        """Whether LLVM feature ``name`` (e.g. "avx512f", "fma") is enabled explicitly."""
        return _feature_map(self.features).get(name, False)

    def to_dict(self) -> dict[str, str]:
        """The fields a kernel manifest records."""
        return {"cpu": self.cpu, "features": self.features, "triple": self.triple}

    def __str__(self) -> str:
        return f"llvm -mcpu={self.cpu}"


@functools.lru_cache(maxsize=1)
def _host_target() -> Target:
    llvm = _llvm.binding()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    triple = llvm.get_process_triple()
    return Target(cpu, features, triple, _vector_bits(cpu, features, triple), _num_cores())


@dataclass(frozen=True)
class CompiledObject:
    """Machine code for one IR module: a PIC ELF object, the IR after optimization, and the
    assembly when asked for. ``cache_hit`` says where it came from: None (just compiled),
    "memory" or "disk"."""

    object_code: bytes
    optimized_ir: str
    asm: str | None = None
    key: str = field(default="", compare=False)
    cache_hit: str | None = field(default=None, compare=False)


_MEMORY_LIMIT = 256  # entries; an autotuning process compiles thousands of candidates
_memory: OrderedDict[str, CompiledObject] = OrderedDict()
_memory_lock = threading.Lock()


def _cache_key(ir_text: str, target: Target, opt_level: int) -> str:
    import llvmlite

    llvm = _llvm.binding()
    parts = [
        "tensorlang-compile-v1",
        __version__,
        llvmlite.__version__,
        ".".join(map(str, llvm.llvm_version_info)),
        target.cpu,
        target.features,
        target.triple,
        str(opt_level),
        ir_text,
    ]
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _disk_path(key: str) -> Path:
    return cache_dir() / "obj" / key[:2] / f"{key}.tlo"


def _read_disk(key: str) -> CompiledObject | None:
    try:
        with zipfile.ZipFile(_disk_path(key)) as z:
            names = set(z.namelist())
            meta = json.loads(z.read("meta.json"))
            if meta.get("key") != key:
                return None
            asm = z.read("asm.s").decode("utf-8") if "asm.s" in names else None
            return CompiledObject(
                z.read("object.o"), z.read("optimized.ll").decode("utf-8"), asm, key, "disk"
            )
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None  # missing or damaged: recompile (and overwrite)


def _write_disk(obj: CompiledObject) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("meta.json", json.dumps({"key": obj.key}))
        z.writestr("object.o", obj.object_code)
        z.writestr("optimized.ll", obj.optimized_ir)
        if obj.asm is not None:
            z.writestr("asm.s", obj.asm)
    try:
        atomic_write(_disk_path(obj.key), buf.getvalue())
    except OSError:
        pass  # a full or read-only disk must not fail a build: the cache is only a speed-up


def _remember(obj: CompiledObject) -> None:
    with _memory_lock:
        _memory[obj.key] = obj
        _memory.move_to_end(obj.key)
        while len(_memory) > _MEMORY_LIMIT:
            _memory.popitem(last=False)


def compile_ir(
    ir_text: str,
    target: Target | str | None = None,
    opt_level: int = 3,
    want_asm: bool = False,
    *,
    cache: bool = True,
) -> CompiledObject:
    """Compile LLVM IR text for ``target`` (default: the host) into a PIC object.

    The module is verified before anything else (LLVM's optimizer may crash on invalid IR
    instead of reporting it); parse and verifier errors raise :class:`CodegenError` with LLVM's
    message. The triple and data layout are set from the target. ``cache=False`` neither reads
    nor writes the memory and disk caches (always a fresh compile).
    """
    if not isinstance(ir_text, str):
        raise TypeError(f"ir_text must be a str, got {type(ir_text).__name__}")
    if isinstance(opt_level, bool) or opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    tgt = Target.host() if target is None else Target.from_string(target)
    key = _cache_key(ir_text, tgt, opt_level)
    if cache:
        with _memory_lock:
            hit = _memory.get(key)
            if hit is not None:
                _memory.move_to_end(key)
                hit = dataclasses.replace(hit, cache_hit="memory")
        if hit is None:
            hit = _read_disk(key)
            if hit is not None:
                _remember(hit)
        if hit is not None:
            if want_asm and hit.asm is None:
                asm = _llvm.assembly_of(
                    hit.optimized_ir, tgt.cpu, tgt.features, tgt.triple, opt_level
                )
                hit = dataclasses.replace(hit, asm=asm)
                _remember(hit)
                _write_disk(hit)
            return hit
    try:
        obj, optimized, asm = _llvm.compile_ir_text(
            ir_text, tgt.cpu, tgt.features, tgt.triple, opt_level, want_asm=want_asm
        )
    except _llvm.LLVMCompileError as e:
        raise CodegenError(f"invalid LLVM IR ({e.stage}): {e.llvm_message}") from None
    result = CompiledObject(obj, optimized, asm, key, None)
    if cache:
        _remember(result)
        _write_disk(result)
    return result
