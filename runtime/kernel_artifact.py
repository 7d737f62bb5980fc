"""The kernel artifact (``.tlm``): one zip file that a kernel loads from without the compiler.

Members: ``manifest.json`` (the kernel's manifest, ``kernel_manifest``, plus an ``artifact``
section: format, kernel ABI, arch, required CPU features, the version that made it, the sha256 of
every member and of the manifest itself), ``kernel.o`` (PIC object code), ``kernel.so`` (the
linked library, where a linker existed), ``pool.so`` (the thread pool's library, so that loading
needs no llvmlite) and ``sources/<format>`` (texts for ``get_source``). Reading checks all of it
-- structure, digests, format and ABI, major version, architecture, CPU features -- before any
code is loaded, and refuses with ArtifactError naming the file and the problem.
"""

from __future__ import annotations

import hashlib
import io
import json
import stat
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tensorlang.version import __version__, version_major

from . import _cpu
from ._cache import atomic_write
from .load_errors import ArtifactError

ABI_VERSION = 1
# A kernel with float scalar parameters (manifest "var_dtypes") is saved as ABI 2: the same
# signature, but those int64 arguments carry a float's bits, which a runtime reading only ABI 1
# would take for integers; this runtime reads both.
FLOAT_SCALARS_ABI = 2
READ_ABIS = (ABI_VERSION, FLOAT_SCALARS_ABI)
ARTIFACT_FORMAT = 1
SOURCE_PREFIX = "sources/"


def write_module_artifact(path: Path, manifest: dict[str, Any], required_flags: list[str],
                          members: dict[str, bytes], sources: Mapping[str, str]) -> None:
    """Write the artifact of a kernel: ``members`` (kernel.o, and kernel.so / pool.so where
    there are) and ``sources`` beside ``manifest`` with its artifact section."""
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder: a kernel saves to one file, e.g. "
                                f"{path / 'kernel.tlm'}")
    what = _not_replaceable(path)
    if what is not None:
        raise FileExistsError(f"{path} is {what}: not replaced by the saved kernel (save to "
                              "a new path, or remove it first)")
    meta = manifest
    meta["artifact"] = {
        "format": ARTIFACT_FORMAT,
        "abi": FLOAT_SCALARS_ABI if meta.get("var_dtypes") else ABI_VERSION,
        "arch": _cpu.triple_arch(meta["target"]["triple"]) or _cpu.machine(),
        "required_features": list(required_flags),
        "created_by": __version__,
    }
    members = dict(members)
    for fmt, text in sorted(sources.items()):
        members[SOURCE_PREFIX + _safe_source_name(fmt)] = text.encode("utf-8")
    # checked at load: a flipped byte or a member from another artifact is refused before
    # any of it is loaded (the zip's CRC does not cover a member swapped whole)
    meta["artifact"]["members"] = {n: _sha256(b) for n, b in members.items()}
    # the manifest describes the kernel's arguments: one edited by accident would make the
    # checked call pass the kernel arrays it does not expect
    meta["artifact"]["manifest_sha256"] = manifest_digest(meta)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(meta, indent=2, sort_keys=True))
        for name, data in members.items():
            z.writestr(name, data)
    atomic_write(Path(path), buf.getvalue())


def _not_replaceable(path: Path) -> str | None:
    """What the file at ``path`` is, when a save must not replace it (the replace swaps the
    name: an ONNX model or an .npy saved over was lost, /dev/null replaced by a zip); None for
    nothing there, an empty file or a kernel saved before (as a model's save refuses all but a
    model folder: saved_folder.check_replaceable)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size == 0:
        return None
    try:
        with zipfile.ZipFile(path) as z:
            meta = json.loads(z.read("manifest.json"))
        if isinstance(meta, dict) and isinstance(meta.get("artifact"), dict):
            return None
    except (OSError, ValueError, KeyError, RecursionError, zipfile.BadZipFile):
        pass
    return "a file that tensorlang did not save"


def _safe_source_name(fmt: str) -> str:
    if not fmt or "/" in fmt or "\\" in fmt or fmt.startswith("."):
        raise ValueError(f"source format name {fmt!r} cannot be stored")
    return fmt


def why_not_runnable(triple: str, required: list[str], what: str) -> str | None:
    """Why code for ``triple`` using CPU flags ``required`` cannot run here (None: it can)."""
    arch = _cpu.triple_arch(triple) if triple else _cpu.machine()
    if arch != _cpu.machine():
        return f"{what} was compiled for {arch}, but this machine is {_cpu.machine()}"
    missing = _cpu.missing_flags(required)
    if missing:
        return (f"{what} was compiled for CPU features this CPU lacks: {', '.join(missing)}; "
                "rebuild it for this machine (target='llvm')")
    return None


def check_built_for_here(path, made_by, arch, required_features) -> None:
    """Raise ArtifactError unless an artifact made by tensorlang `made_by` for `arch` with
    `required_features` runs here: the same major version, machine and CPU features (kernel
    modules and whole models check the same things)."""
    made_by = str(made_by or "?")
    try:
        same_major = version_major(made_by) == version_major(__version__)
    except ValueError:
        same_major = False
    if not same_major:
        raise ArtifactError(f"{path} was built by tensorlang {made_by}; this is {__version__} "
                            "(major versions differ): rebuild it")
    arch = arch or _cpu.machine()
    if arch != _cpu.machine():
        raise ArtifactError(f"{path} was built for {arch}, this machine is {_cpu.machine()}")
    missing = _cpu.missing_flags(list(required_features))
    if missing:
        raise ArtifactError(f"{path} was built for CPU features this CPU lacks: "
                            f"{', '.join(missing)}; rebuild it for this machine")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _optional_member(name: str) -> bool:
    return name in ("kernel.so", "pool.so") or name.startswith(SOURCE_PREFIX)


def read_module_artifact(path: Path) -> tuple[dict, dict[str, bytes], dict[str, str]]:
    """(manifest without its artifact section, members by name, sources by format) of a
    ``.tlm`` file, checked:
    ArtifactError naming the file for anything malformed or not runnable here."""
    if not path.is_file():
        what = "no such file" if not path.exists() else "not a file"
        raise ArtifactError(f"{path} is not a tensorlang module artifact ({what})")
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if "manifest.json" not in names or "kernel.o" not in names:
                raise ArtifactError(f"{path} is not a tensorlang module artifact "
                                    "(no manifest/object)")
            meta = json.loads(z.read("manifest.json"))
            members = {n: z.read(n) for n in names if n != "manifest.json"}
    except ArtifactError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure to parse the file is a corrupt artifact
        raise ArtifactError(f"{path} is not a tensorlang module artifact (unreadable: "
                            f"{type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise ArtifactError(f"{path}: manifest.json must hold a JSON object, got "
                            f"{type(meta).__name__}")
    art = meta.pop("artifact", None)
    if not isinstance(art, dict):
        raise ArtifactError(f"{path}: manifest has no artifact section")
    if art.get("format") != ARTIFACT_FORMAT or art.get("abi") not in READ_ABIS:
        raise ArtifactError(
            f"{path}: artifact format {art.get('format')} / kernel ABI {art.get('abi')} is "
            f"not supported (this runtime reads format {ARTIFACT_FORMAT}, ABI "
            f"{' or '.join(map(str, READ_ABIS))})"
        )
    if art.get("abi") == ABI_VERSION and meta.get("var_dtypes"):
        raise ArtifactError(f"{path}: a kernel with float scalar parameters must be saved "
                            f"as ABI {FLOAT_SCALARS_ABI}, not {ABI_VERSION}")
    # without its library or sources a module still loads (relinked from the object)
    _checked_build_info(path, meta, art)
    check_member_digests(path, art.get("members"), members, optional=_optional_member)
    digest = art.get("manifest_sha256")  # None: saved before it was recorded
    if digest is not None and digest != manifest_digest(meta):
        raise ArtifactError(f"{path}: manifest.json was modified after save (its sha256 "
                            "differs from the one recorded)")
    try:
        sources = {n[len(SOURCE_PREFIX):]: data.decode("utf-8") for n, data in members.items()
                   if n.startswith(SOURCE_PREFIX) and len(n) > len(SOURCE_PREFIX)}
    except UnicodeDecodeError as e:
        raise ArtifactError(f"{path}: {e}") from None
    return meta, members, sources


def manifest_digest(meta: Mapping[str, Any]) -> str:
    """sha256 of the manifest without its artifact section, in a canonical JSON form."""
    body = {k: v for k, v in meta.items() if k != "artifact"}
    return _sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def check_member_digests(path, digests: Any, members: Mapping[str, bytes],
                         optional=lambda name: False) -> None:
    """Every member listed with its sha256 and matching it; a listed member may be absent only
    when ``optional(name)`` (None: an artifact saved before digests were recorded, checked by
    the zip's CRCs only)."""
    if digests is None:
        return
    if not isinstance(digests, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in digests.items()):
        raise ArtifactError(f"{path}: the artifact's member digests must map names to sha256")
    for name in sorted(set(members) | set(digests)):
        if name not in digests:
            raise ArtifactError(f"{path}: member {name!r} is not listed in the manifest")
        if name not in members:
            if optional(name):
                continue
            raise ArtifactError(f"{path}: member {name!r} is missing")
        if _sha256(members[name]) != digests[name]:
            raise ArtifactError(f"{path}: member {name!r} is corrupt (its sha256 differs from "
                                "the one recorded at save)")


def _checked_build_info(path, meta: dict, art: dict) -> None:
    version, arch, required = meta.get("version"), art.get("arch"), art.get("required_features", [])
    if not isinstance(version, str) or not isinstance(arch, (str, type(None))) or not (
            isinstance(required, list) and all(isinstance(f, str) for f in required)):
        raise ArtifactError(f"{path}: the manifest's version, arch or required_features has "
                            "the wrong type (expected a string, a string, a list of strings)")
    check_built_for_here(path, version, arch, required)
