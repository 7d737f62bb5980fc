"""CPU features without llvmlite: what an artifact requires, and what this CPU has.

An artifact records the instruction-set extensions its code may use, named as Linux's
``/proc/cpuinfo`` names them, so that loading can check them with a file read instead of asking
LLVM. Only extensions that change generated instructions are listed: system features that LLVM
also reports (xsave, shstk, rdpid, ...) never make a kernel fault, and requiring them would
refuse artifacts for no reason.
"""

from __future__ import annotations

import functools
import platform

# LLVM x86 feature name -> /proc/cpuinfo flag name.
X86_LLVM_TO_CPUINFO: dict[str, str] = {
    "sse": "sse",
    "sse2": "sse2",
    "sse3": "pni",
    "ssse3": "ssse3",
    "sse4.1": "sse4_1",
    "sse4.2": "sse4_2",
    "sse4a": "sse4a",
    "popcnt": "popcnt",
    "cx16": "cx16",
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "fma4": "fma4",
    "xop": "xop",
    "f16c": "f16c",
    "bmi": "bmi1",
    "bmi2": "bmi2",
    "lzcnt": "abm",
    "movbe": "movbe",
    "adx": "adx",
    "aes": "aes",
    "pclmul": "pclmulqdq",
    "vaes": "vaes",
    "vpclmulqdq": "vpclmulqdq",
    "gfni": "gfni",
    "sha": "sha_ni",
    "avx512f": "avx512f",
    "avx512cd": "avx512cd",
    "avx512dq": "avx512dq",
    "avx512bw": "avx512bw",
    "avx512vl": "avx512vl",
    "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi",
    "avx512vbmi2": "avx512_vbmi2",
    "avx512vnni": "avx512_vnni",
    "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16",
    "avx512vp2intersect": "avx512_vp2intersect",
    "avxvnni": "avx_vnni",
    "amx-tile": "amx_tile",
    "amx-int8": "amx_int8",
    "amx-bf16": "amx_bf16",
}


def machine() -> str:
    """This machine's architecture, normalized to LLVM's spelling (x86_64, aarch64)."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def triple_arch(triple: str) -> str:
    arch = triple.split("-", 1)[0].lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def required_flags(features: str, triple: str) -> list[str]:
    """The cpuinfo flags that code compiled with LLVM ``features`` (e.g. "+avx2,-avx512f") may
    use. Empty for non-x86 targets, whose cpuinfo names have no stable mapping here."""
    if triple_arch(triple) != "x86_64":
        return []
    out = set()
    for item in features.split(","):
        item = item.strip()
        if item.startswith("+") and item[1:] in X86_LLVM_TO_CPUINFO:
            out.add(X86_LLVM_TO_CPUINFO[item[1:]])
    return sorted(out)


@functools.lru_cache(maxsize=1)
def host_flags() -> frozenset[str] | None:
    """This CPU's feature flags, or None when they cannot be read cheaply.

    Reads /proc/cpuinfo (Linux); elsewhere asks llvmlite when it is installed.
    """
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    try:
        from . import _llvm

        llvm = _llvm.binding()
        feats = llvm.get_host_cpu_features().flatten()
    except (ImportError, OSError, RuntimeError):  # no llvmlite, or no answer from it
        return None
    return frozenset(required_flags(feats, f"{machine()}-unknown-unknown"))


def missing_flags(required: list[str]) -> list[str] | None:
    """Required flags this CPU lacks ([] when all present), or None if unknown."""
    have = host_flags()
    if have is None:
        return None
    return [f for f in required if f not in have]


@functools.lru_cache(maxsize=4)
def cache_bytes(level: int | None = None, default: int = 32 << 20,
                root: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """The size of one instance of this CPU's data (or unified) cache of ``level`` (Linux sysfs,
    CPU 0's caches; None: the highest level listed, e.g. a Zen 4 CCD's 32 MB L3), or
    ``default`` when it cannot be read."""
    from pathlib import Path

    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes: dict[int, int] = {}
    for d in sorted(Path(root).glob("index*")):
        try:
            found = int((d / "level").read_text())
            text = (d / "size").read_text().strip().upper()
            kind = (d / "type").read_text().strip() if (d / "type").exists() else "Unified"
            value = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
        except (OSError, ValueError, IndexError):
            continue
        if kind != "Instruction" and value > 0:
            sizes[found] = value
    if not sizes:
        return default
    return sizes.get(max(sizes) if level is None else level, default)


def last_level_cache_bytes(default: int = 32 << 20,
                           root: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """The size of one instance of this CPU's last-level cache, or ``default``."""
    return cache_bytes(None, default, root)
