"""The compilation target, and LLVM IR text -> machine code with llvmlite (LLVM's new pass
manager at -O3, position-independent code), cached in memory and on disk.

Compiling costs ~20 ms for a small kernel and ~0.8 s for 1.8k IR lines, and the tuner rebuilds
the same candidates across runs, so every result is cached by a hash of everything that
determines it: the IR text, the target (CPU, features, triple), the optimization level, and the
versions of tensorlang, llvmlite and LLVM.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import io
import json
import os
import subprocess
import sys
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from tensorlang.codegen import compile_limit
from tensorlang.errors import TensorlangError
from tensorlang.runtime import _llvm
from tensorlang.runtime._cache import atomic_write, cache_dir
from tensorlang.version import __version__

__all__ = ["CodegenError", "CompiledObject", "Target", "compile_ir", "known_cpus", "known_features"]


class CodegenError(TensorlangError):
    """LLVM refused the IR (parse or verifier error); the message is LLVM's."""


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
        features, with any -mattr applied on top. Another x86-64 CPU name gets the features LLVM
        implies for that CPU, written out (so that an artifact records every feature its code
        may use), plus -mattr. Everything is checked before LLVM sees it -- LLVM aborts the
        process on a CPU it does not know or one without 64-bit mode: an unknown CPU or
        feature, a 32-bit CPU or triple raise ValueError naming the valid choices
        (:func:`known_cpus`, :func:`known_features`).
        """
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"target must be a string such as 'llvm', got {type(spec).__name__}")
        opts = _parse_target_options(spec)
        host = cls.host()
        triple = opts.get("-mtriple", host.triple)
        x86 = _check_triple(triple, spec)
        mattr = _feature_map(_checked_mattr(opts.get("-mattr", ""), x86, spec))
        # Without -mcpu: the host CPU, or the baseline CPU of another triple.
        cpu = opts.get("-mcpu", "native" if triple == host.triple else "generic")
        if cpu in ("native", host.cpu) and triple == host.triple:
            fm = _feature_map(host.features)
            cpu = host.cpu
        elif cpu == "native":
            raise ValueError(f"-mcpu=native cannot be combined with -mtriple={triple}")
        elif x86:
            fm = dict.fromkeys(_implied_features(cpu, spec), True)
        elif cpu != "generic":
            raise ValueError(f"-mcpu={cpu} in {spec!r}: CPU names are known for x86_64 only; "
                             f"leave -mcpu out for {triple}")
        else:
            fm = {}
        fm.update(mattr)
        features = ",".join(f"{'+' if on else '-'}{name}" for name, on in fm.items())
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


# -- checking targets before LLVM sees them ----------------------------------------------------

_TARGET_OPTIONS = ("-mcpu", "-mattr", "-mtriple")
_PROBE_SCRIPT = Path(__file__).with_name("_cpu_probe.py")
_PROBE_PREFIX = "TLPROBE "
_PROBE_TIMEOUT_S = 120


def _parse_target_options(spec: str) -> dict[str, str]:
    parts = spec.split()
    if not parts or parts[0] != "llvm":
        raise ValueError(f"unknown target {spec!r}: only 'llvm [-mcpu=...]' is supported")
    opts: dict[str, str] = {}
    for p in parts[1:]:
        key, eq, value = p.partition("=")
        if key not in _TARGET_OPTIONS or not eq or not value:
            raise ValueError(
                f"unknown target option {p!r} in {spec!r} (use -mcpu=, -mattr=, -mtriple=)"
            )
        if key in opts:
            raise ValueError(f"target option {key} given twice in {spec!r}")
        opts[key] = value
    return opts


def _check_triple(triple: str, spec: str) -> bool:
    """True for an x86-64 triple; refuses 32-bit x86 (the runtime calls 64-bit code only)."""
    arch = triple.split("-", 1)[0].lower()
    if arch in ("i386", "i486", "i586", "i686", "x86"):
        raise ValueError(f"-mtriple={triple} in {spec!r} is 32-bit x86; tensorlang generates "
                         "64-bit code only (x86_64-...)")
    return arch == "x86_64"


def _checked_mattr(mattr: str, x86: bool, spec: str) -> str:
    """-mattr as given, once every item is "+name" or "-name" with a name LLVM knows (for x86:
    LLVM only warns about unknown names and ignores them)."""
    if not mattr:
        return mattr
    for item in mattr.split(","):
        item = item.strip()
        if len(item) < 2 or item[0] not in "+-":
            raise ValueError(f"-mattr item {item!r} in {spec!r} must be +feature or -feature "
                             "(e.g. -mattr=+avx2,-avx512f)")
        if x86 and item[1:] not in known_features():
            raise ValueError(f"unknown CPU feature {item[1:]!r} in {spec!r}"
                             f"{_did_you_mean(item[1:], known_features())}; "
                             "tensorlang.codegen.target.known_features() lists LLVM's x86 "
                             "features")
    return mattr


def _did_you_mean(name: str, choices) -> str:
    close = difflib.get_close_matches(name, sorted(choices), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _implied_features(cpu: str, spec: str) -> list[str]:
    """The instruction-set features (those an artifact records) that x86 CPU ``cpu`` implies;
    ValueError for a CPU LLVM does not know or one without 64-bit mode."""
    if cpu not in known_cpus():
        raise ValueError(f"unknown CPU {cpu!r} in {spec!r}{_did_you_mean(cpu, known_cpus())}; "
                         f"LLVM knows these x86 CPUs: {', '.join(sorted(known_cpus()))}")
    implied, x86_64 = _cpu_profile(cpu)
    if not x86_64:
        raise ValueError(f"-mcpu={cpu} in {spec!r} is a 32-bit x86 CPU; tensorlang generates "
                         "x86-64 code only (e.g. -mcpu=x86-64, x86-64-v3, haswell, znver3)")
    return list(implied)


def known_cpus() -> frozenset[str]:
    """The x86 CPU names this LLVM accepts for -mcpu (32-bit ones included, which
    Target.from_string refuses)."""
    return frozenset(_llvm_x86_catalog()["cpus"])


def known_features() -> frozenset[str]:
    """The x86 feature names this LLVM accepts for -mattr."""
    return frozenset(_llvm_x86_catalog()["features"])


def _probe_cache_path(what: str) -> Path:
    """Probe answers are cached on disk per LLVM and probe version (a throw-away process each
    costs ~0.5 s)."""
    llvm = _llvm.binding()
    key = hashlib.sha256(
        "\0".join([".".join(map(str, llvm.llvm_version_info)), _PROBE_SCRIPT.read_text(),
                    ",".join(_probed_features())]).encode()
    ).hexdigest()[:16]
    return cache_dir() / "targets" / key / f"{what}.json"


def _probed_features() -> list[str]:
    from tensorlang.runtime._cpu import X86_LLVM_TO_CPUINFO

    return sorted(X86_LLVM_TO_CPUINFO)


def _run_probe(args: list[str]) -> tuple[int, str, list[dict]]:
    """Run the probe script in a fresh interpreter: (exit status, what it printed on stdout and
    stderr -- LLVM prints its lists on the latter --, its JSON answers)."""
    try:
        proc = subprocess.run([sys.executable, str(_PROBE_SCRIPT), *args], capture_output=True,
                              text=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        raise CodegenError(f"could not ask LLVM about x86 CPUs ({' '.join(args)}): {e}") from None
    answers = [json.loads(line[len(_PROBE_PREFIX):]) for line in proc.stdout.splitlines()
               if line.startswith(_PROBE_PREFIX)]
    return proc.returncode, proc.stdout + proc.stderr, answers


def _names(x) -> bool:
    return isinstance(x, list) and all(isinstance(n, str) for n in x)


def _cached_probe(what: str, compute, valid):
    """``compute()``'s answer, kept on disk; a cached answer that ``valid`` refuses (a damaged
    file) is computed again."""
    path = _probe_cache_path(what)
    try:
        answer = json.loads(path.read_text())
        if valid(answer):
            return answer
    except (OSError, ValueError):
        pass  # missing or damaged: ask again (and overwrite)
    answer = compute()
    try:
        atomic_write(path, json.dumps(answer).encode())
    except OSError:
        pass  # the cache is only a speed-up
    return answer


@functools.lru_cache(maxsize=1)
def _llvm_x86_catalog() -> dict[str, list[str]]:
    def compute() -> dict[str, list[str]]:
        rc, out, answers = _run_probe(["list"])
        sections = {"cpus": "Available CPUs for this target:",
                    "features": "Available features for this target:"}
        found: dict[str, list[str]] = {"cpus": [], "features": []}
        current = None
        for line in out.splitlines():
            heads = [k for k, head in sections.items() if line.startswith(head)]
            if heads:
                current = heads[0]
            elif current and line.startswith("  ") and " - " in line:
                found[current].append(line.split()[0])
        if rc != 0 or not answers or not found["cpus"] or not found["features"]:
            raise CodegenError(f"could not list LLVM's x86 CPUs (probe exit status {rc})")
        return found

    return _cached_probe("catalog", compute, lambda a: isinstance(a, dict) and _names(
        a.get("cpus")) and _names(a.get("features")))


@functools.cache
def _cpu_profile(cpu: str) -> tuple[tuple[str, ...], bool]:
    """(features among those an artifact records that ``cpu`` implies, has 64-bit mode)."""

    def compute() -> dict:
        rc, _, answers = _run_probe(["cpu", cpu, ",".join(_probed_features())])
        merged = {k: v for a in answers for k, v in a.items()}
        if "implied" not in merged:
            raise CodegenError(f"could not ask LLVM about -mcpu={cpu} (exit status {rc})")
        # The 64-bit check aborts the probe for a CPU without 64-bit mode.
        return {"implied": merged["implied"], "x86_64": bool(merged.get("x86_64"))}

    answer = _cached_probe(f"cpu-{cpu}", compute, lambda a: isinstance(a, dict) and _names(
        a.get("implied")) and isinstance(a.get("x86_64"), bool))
    return tuple(answer["implied"]), answer["x86_64"]


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
    except Exception:  # noqa: BLE001 - missing or damaged in any way: recompile (and overwrite)
        return None


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
    timeout: float | None = None,
) -> CompiledObject:
    """Compile LLVM IR text for ``target`` (default: the host) into a PIC object.

    The module is verified before anything else (LLVM's optimizer may crash on invalid IR
    instead of reporting it); parse and verifier errors raise :class:`CodegenError` with LLVM's
    message. The triple and data layout are set from the target. ``cache=False`` neither reads
    nor writes the memory and disk caches (always a fresh compile). ``timeout``: seconds the
    compile may take (it then runs in a child process, see compile_limit), else
    :class:`~tensorlang.codegen.compile_limit.BuildTimeoutError`; None: no limit.
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
        obj, optimized, asm = compile_limit.compile_ir_text(
            ir_text, tgt.cpu, tgt.features, tgt.triple, opt_level, want_asm, timeout
        )
    except _llvm.LLVMCompileError as e:
        raise CodegenError(f"invalid LLVM IR ({e.stage}): {e.llvm_message}") from None
    result = CompiledObject(obj, optimized, asm, key, None)
    if cache:
        _remember(result)
        _write_disk(result)
    return result
