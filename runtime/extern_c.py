"""C functions that kernels call directly (``tl.call_extern``; TVM's ``tir.call_extern``).

    lib = tl.load_library("./libmy.so")          # its symbols become callable by name
    Y = tl.compute((n,), lambda i: tl.call_extern("float32", "my_sigmoid", X[i]))
    Z = tl.extern((n,), [X], lambda ins, outs: tl.call_extern("int32", "my_fill",
                                                              ins[0], outs[0], 2.5))

No Python runs at the call: the generated code loads the function's address from a global slot
of the kernel, ``@__tl_extern.<symbol>``, which the loader fills once, when the kernel is loaded
(this module's :func:`bind`), and calls it. So a C call holds no GIL (kernels run with it
released) and may run inside parallel loops and in any thread; the function must be
thread-safe.

The C conventions (what the function must be declared as):

- a value call, in a ``tl.compute`` body: ``T f(T1 a1, T2 a2, ...)``, one call per element (any
  number of times, in any order, from any thread: it must be a pure function). T and the Ti
  are the C types of ``C_TYPES``: a typed expression passes as its dtype, a Python int as
  ``int64_t`` and a Python float as ``double``.
- a status call, the body of a ``tl.extern``: ``int32_t f(...)`` where each tensor argument
  passes as two parameters, ``T *data, const int64_t *shape`` (the buffer, C-contiguous, and
  its ``ndim`` dimensions; inputs must not be written), and each scalar as above. It returns 0
  on success; any other value makes the call fail with a ``KernelError`` naming the function
  and the value (reported as is in -32767..32767; others as out of that range: the kernel's
  32-bit return code holds 16 bits of it).

Where the symbol comes from: the library it was registered with (``tl.register_func(name,
library=, symbol=)``), else the first library opened with :func:`load_library` that defines it,
else the process itself (libc, libm, anything already loaded globally). The build records the
file that defines it in the kernel's manifest (``"externs"``); loading a kernel -- built here,
saved, or measured in a fresh tuning worker -- opens that library again (or the one loaded
under the same file name with :func:`load_library`) and fails with ArtifactError naming the
library or the symbol when it cannot, never at the call.

This module imports only ctypes and the standard library (deployed kernels load without the
compiler).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import sys
import threading
from collections.abc import Mapping, Sequence

from .load_errors import ArtifactError, LoadError

SLOT_PREFIX = "__tl_extern."
# The kernel's return code for a failed C call: ERROR_BASE + (index << 16) + the low 16 bits of
# the encoded code, index = the symbol's position in the manifest's sorted "externs". The codes
# below it belong to allocations (1..999), index checks (1000 + n) and packed calls (2^24..).
ERROR_BASE = 1 << 30
MAX_EXTERNS = 1 << 14
UNBOUND = 0  # encoded code: the slot was never filled (a loader other than ours)
OUT_OF_RANGE = -32768  # encoded code: the function's code does not fit in 16 bits
# dtype -> the C type a scalar argument or a value call's result has
C_TYPES = {"int32": "int32_t", "int64": "int64_t", "uint32": "uint32_t", "uint64": "uint64_t",
           "float32": "float", "float64": "double"}
# dtypes a tensor argument may have (passed as a pointer to its elements)
BUFFER_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64")
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = ("__tl", "tl_")  # the runtime's own symbols (the pool's, the slots)


def check_symbol(symbol) -> str:
    """The symbol, or ValueError/TypeError if it cannot name a C function."""
    if not isinstance(symbol, str):
        raise TypeError(f"a C function's symbol must be a str, got {type(symbol).__name__}")
    if not _SYMBOL.fullmatch(symbol) or len(symbol) > 200:
        raise ValueError(f"{symbol!r:.80} is not a C identifier (letters, digits, '_'; at most "
                         "200 characters)")
    if symbol.startswith(_RESERVED):
        raise ValueError(f"symbol {symbol!r} starts with a prefix reserved for tensorlang's "
                         f"runtime ({', '.join(_RESERVED)})")
    return symbol


def slot_name(symbol: str, library: str | None = None) -> str:
    """The kernel's global holding the function's address: per symbol and library, so that a
    kernel object shared by two modules (the loader's library cache is content-addressed) never
    has one slot bound to two libraries' functions of the same name."""
    if library is None:
        return SLOT_PREFIX + symbol
    return f"{SLOT_PREFIX}{symbol}.{hashlib.sha256(library.encode()).hexdigest()[:12]}"


# ----------------------------------------------------------------------------- libraries


class ExternLibrary:
    """A shared library opened for kernels to call into (see :func:`load_library`)."""

    def __init__(self, path: str, handle: ctypes.CDLL) -> None:
        self.path = path
        self.handle = handle

    def address(self, symbol: str) -> int | None:
        """The symbol's address in this library (dlsym), or None."""
        try:
            return ctypes.cast(self.handle[symbol], ctypes.c_void_p).value
        except AttributeError:
            return None

    def __contains__(self, symbol: str) -> bool:
        return self.address(symbol) is not None

    def __repr__(self) -> str:
        return f"ExternLibrary({self.path!r})"


_LIBRARIES: dict[str, ExternLibrary] = {}  # by real path, in load order
_LOCK = threading.Lock()


def load_library(path: str | os.PathLike) -> ExternLibrary:
    """Open the shared library at `path` so that kernels can call its functions by symbol
    (``tl.call_extern``): the role ``ctypes.CDLL(path, RTLD_GLOBAL)`` plays in TVM's extern
    tutorials. Opening the same file again returns the same library. LoadError (naming the
    file and the reason) when it cannot be opened."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_library: expected a path, got {type(path).__name__}")
    real = os.path.realpath(os.fspath(path))
    with _LOCK:
        got = _LIBRARIES.get(real)
        if got is not None:
            return got
        if not os.path.isfile(real):
            raise LoadError(f"load_library: no such file {os.fspath(path)!r}")
        try:
            handle = ctypes.CDLL(real)
        except OSError as e:
            raise LoadError(f"load_library: cannot open {os.fspath(path)!r}: {e}") from None
        lib = _LIBRARIES[real] = ExternLibrary(real, handle)
        return lib


def loaded_libraries() -> list[ExternLibrary]:
    """The libraries opened with load_library, in order."""
    with _LOCK:
        return list(_LIBRARIES.values())


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_PROCESS = ctypes.CDLL(None)  # dlopen(NULL): the program and every library loaded globally


def _process_address(symbol: str) -> int | None:
    try:
        return ctypes.cast(_PROCESS[symbol], ctypes.c_void_p).value
    except AttributeError:
        return None


def _defining_file(address: int) -> str | None:
    """The shared library that holds `address` (dladdr), or None for the program itself."""
    try:
        dladdr = _PROCESS.dladdr
    except AttributeError:  # pragma: no cover - a libc without dladdr
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    name = os.fsdecode(info.dli_fname)
    real = os.path.realpath(name) if os.sep in name else name
    if not os.path.isfile(real) or real == os.path.realpath(sys.executable):
        return None
    return real


def find(symbol: str, library: str | None = None) -> str | None:
    """Where the build takes `symbol` from: the real path of the library that defines it
    (`library` when given), or None for the program itself. LookupError naming the symbol and
    the libraries searched when none defines it."""
    check_symbol(symbol)
    if library is not None:
        lib = load_library(library)
        if symbol not in lib:
            raise LookupError(f"C function {symbol!r} is not defined in {lib.path}")
        return lib.path
    libs = loaded_libraries()
    for lib in libs:
        if symbol in lib:
            return lib.path
    address = _process_address(symbol)
    if address is None:
        searched = ", ".join(lib.path for lib in libs) or "none"
        raise LookupError(f"C function {symbol!r} is not defined in the libraries opened with "
                          f"tl.load_library ({searched}) nor in the process; open the library "
                          "that defines it with tl.load_library(path) before building")
    return _defining_file(address)


# ----------------------------------------------------------------------------- worker processes


def process_state() -> dict:
    """What a fresh worker process (the tuner's builders, measuring and feature processes)
    needs to build and load kernels that call C functions as this process does: the libraries
    opened with load_library and the names registered as C functions."""
    from . import packed

    funcs = [(name, fn.c_symbol, fn.c_library) for name in packed.list_global_func_names()
             if (fn := packed.get_global_func(name)).c_symbol is not None]
    return {"libraries": [lib.path for lib in loaded_libraries()], "c_functions": funcs}


def restore_process_state(state: Mapping | None) -> None:
    """Open the libraries and register the C functions of process_state() here. One that
    cannot be (a file since removed) is left out: building a kernel that needs it then names
    the missing symbol or library."""
    from . import packed

    if not state:
        return
    for path in state.get("libraries", ()):
        try:
            load_library(path)
        except LoadError:
            continue
    for name, symbol, library in state.get("c_functions", ()):
        try:
            packed.register_func(name, library=library, symbol=symbol, override=True)
        except (LookupError, LoadError, ValueError):
            continue


# ----------------------------------------------------------------------------- loading


def check_manifest(externs) -> list[dict]:
    """The manifest's "externs" entry, checked: a list of {"symbol", "library"} sorted by
    symbol (the order the error codes use). ValueError naming what is wrong."""
    if not isinstance(externs, list) or len(externs) > MAX_EXTERNS:
        raise ValueError(f"invalid kernel manifest: 'externs' must be a list of at most "
                         f"{MAX_EXTERNS} entries")
    out = []
    for e in externs:
        ok = isinstance(e, Mapping) and isinstance(e.get("symbol"), str) and \
            (e.get("library") is None or isinstance(e.get("library"), str))
        if not ok:
            raise ValueError(f"invalid kernel manifest: extern entry {e!r:.80} must be "
                             "{'symbol': str, 'library': str or None}")
        check_symbol(e["symbol"])
        out.append({"symbol": e["symbol"], "library": e.get("library")})
    if [e["symbol"] for e in out] != sorted({e["symbol"] for e in out}):
        raise ValueError("invalid kernel manifest: 'externs' must be sorted by symbol, each "
                         "once")
    return out


def _open_for_kernel(path: str, kernel: str, symbol: str) -> ExternLibrary:
    """The library a kernel recorded: the same file opened already, else one opened with
    load_library under the same file name, else the recorded path opened now."""
    libs = loaded_libraries()
    for lib in libs:
        if lib.path == path:
            return lib
    for lib in libs:
        if os.path.basename(lib.path) == os.path.basename(path):
            return lib
    try:
        return load_library(path)
    except LoadError as e:
        raise ArtifactError(f"kernel {kernel!r} calls C function {symbol!r} from library "
                            f"{path}, which cannot be loaded here ({e}); open it (or a copy "
                            "of the same file name) with tl.load_library(path) before loading "
                            "the kernel") from None


def addresses(externs: Sequence[Mapping], kernel: str) -> dict[str, int]:
    """Each extern symbol's address in this process, for a kernel's slots. ArtifactError
    naming the library or the symbol that is missing."""
    out = {}
    for e in externs:
        symbol, path = e["symbol"], e["library"]
        if path is None:
            address = _process_address(symbol)
            where = "the process"
        else:
            lib = _open_for_kernel(path, kernel, symbol)
            address, where = lib.address(symbol), lib.path
        if not address:
            raise ArtifactError(f"kernel {kernel!r} calls C function {symbol!r}, which "
                                f"{where} does not define")
        out[symbol] = address
    return out


def slot_names(externs: Sequence[Mapping]) -> dict[str, str]:
    """The slot of each of a kernel's extern symbols (its manifest's "externs")."""
    return {e["symbol"]: slot_name(e["symbol"], e["library"]) for e in externs}


def bind(externs: Sequence[Mapping], addresses: Mapping[str, int],
         slots: Mapping[str, int | None]) -> None:
    """Fill a loaded kernel's extern slots (`slots`: the address of each slot, by slot name)
    with the functions' addresses (from :func:`addresses`). A slot the object lacks is skipped:
    the optimizer removed every call through it."""
    names = slot_names(externs)
    for symbol, address in addresses.items():
        slot = slots.get(names[symbol])
        if slot:
            ctypes.c_void_p.from_address(slot).value = address


# ----------------------------------------------------------------------------- errors


def describe_error(code: int, externs: Sequence[Mapping] | None) -> str | None:
    """The message for a kernel return code that reports a failed C call, or None."""
    if not externs or not ERROR_BASE <= code < ERROR_BASE + (len(externs) << 16):
        return None
    index, raw = divmod(code - ERROR_BASE, 1 << 16)
    value = raw - (1 << 16) if raw >= 1 << 15 else raw
    symbol = externs[index]["symbol"]
    if value == UNBOUND:
        slot = slot_name(symbol, externs[index].get("library"))
        return (f"C function {symbol!r} was never bound: the kernel was loaded without "
                f"filling @{slot}")
    if value == OUT_OF_RANGE:
        return (f"C function {symbol!r} returned an error code outside -32767..32767 (the "
                "kernel reports 16 bits of it)")
    return f"C function {symbol!r} returned error code {value}"


__all__ = [
    "BUFFER_DTYPES",
    "C_TYPES",
    "ERROR_BASE",
    "SLOT_PREFIX",
    "ExternLibrary",
    "addresses",
    "bind",
    "check_manifest",
    "check_symbol",
    "describe_error",
    "find",
    "load_library",
    "loaded_libraries",
    "process_state",
    "restore_process_state",
    "slot_name",
    "slot_names",
]
