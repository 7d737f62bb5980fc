"""``Module``: a compiled kernel, callable on numpy arrays, savable as a one-file artifact.

The kernel ABI (what ``tensorlang.codegen`` emits and this loader calls)::

    int32_t <symbol>(void *arg0, ..., void *argN-1, int64_t var0, ..., int64_t varM-1);

returning 0 on success and a nonzero error code otherwise. Array arguments come first, in the
manifest's order, then the scalar variables in ``manifest["vars"]`` order: shape variables and
integer scalars as int64 values, float scalar parameters (``manifest["var_dtypes"]``, e.g.
``{"bias": "float32"}``) as their IEEE-754 bit pattern in the low 16, 32 or 64 bits of the
int64 (:func:`scalar_bits`), so every scalar travels the same way. An object
that runs parallel loops also defines ``ptr @__tl_parallel_launch = null`` (external linkage):
the loader stores the thread pool's ``tl_parallel_launch`` address there before any call.

Loading never needs llvmlite when a linker exists: the object is linked with ``ld -shared``
into a content-addressed library in the cache directory and opened with ``ctypes.CDLL``.
Without a linker the object goes to llvmlite's ORC JIT instead.
"""

from __future__ import annotations

import copy
import ctypes
import math
import os
import struct
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tensorlang.errors import TensorlangError

from . import _cpu, _link, extern_c, packed, threadpool
from ._dims import DimExpr
from .arrays import NDArray
from .device import check_device
from .kernel_artifact import (
    check_built_for_here,
    read_module_artifact,
    why_not_runnable,
    write_module_artifact,
)
from .kernel_manifest import normalize_manifest
from .load_errors import ArtifactError, LoadError
from .timer import MAX_CALLS, TimingResult, call_timer, count, duration_ms

__all__ = [
    "LOADERS",
    "PARALLEL_LAUNCH_GLOBAL",
    "ArtifactError",
    "KernelError",
    "LoadError",
    "Module",
    "check_built_for_here",  # the model artifact (graph_module) checks the same things
    "load_module",
]

PARALLEL_LAUNCH_GLOBAL = "__tl_parallel_launch"
LOADERS = ("auto", "so", "jit")

_VOID_P = ctypes.c_void_p
_I64 = ctypes.c_int64
# the range of an int variable: ctypes would wrap a Python int outside it (2**64 + 2 as 2)
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
# A zero-length ctypes array type: ``from_buffer`` on it is the cheapest way to get a numpy
# array's data address (~0.15 us against ~0.8 us for ``arr.ctypes.data`` or
# ``__array_interface__``), and it fails exactly when the array is read-only or not
# C-contiguous, which the checked call has to detect anyway.
_ZERO_BYTES = ctypes.c_char * 0
_from_buffer = _ZERO_BYTES.from_buffer
_addressof = ctypes.addressof


class KernelError(TensorlangError, RuntimeError):
    """A kernel returned a nonzero error code."""

    def __init__(self, kernel: str, code: int, detail: str | None = None) -> None:
        msg = f"kernel {kernel!r} failed with error code {code}"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)
        self.kernel = kernel
        self.code = code


# ---------------------------------------------------------------------------------------------
# manifest


class _Arg:
    """One array argument, with what the checked call needs precomputed."""

    __slots__ = ("align", "dtype", "exprs", "fixed", "index", "name", "shape", "symbolic",
                 "written")

    def __init__(self, index: int, name: str, dtype: np.dtype, shape: tuple, written: bool,
                 vars_: tuple[str, ...] = ()):
        self.index = index
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.written = written
        self.fixed = shape if all(isinstance(d, int) for d in shape) else None
        # ints and plain variables bind per argument; expressions of variables ('n - 2') are
        # solved and checked once every argument has been seen
        self.symbolic = tuple((axis, d) for axis, d in enumerate(shape)
                              if isinstance(d, int) or d in vars_)
        self.exprs = tuple((axis, DimExpr(d, vars_)) for axis, d in enumerate(shape)
                           if isinstance(d, str) and d not in vars_)
        self.align = dtype.alignment

    def describe(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"{self.dtype.name}[{dims}]"


def scalar_bits(value: Any, dtype: np.dtype) -> int:
    """How the ABI passes a float scalar parameter: ``value`` rounded to ``dtype`` as numpy
    rounds (``np.float32(value)``), its bits as a signed int of the same width, as an int64."""
    with np.errstate(over="ignore"):  # a value past the dtype's range is inf, as in numpy
        x = dtype.type(value)
    return int(x.view(_SIGNED_OF_WIDTH[dtype.itemsize]))


_SIGNED_OF_WIDTH = {2: np.int16, 4: np.int32, 8: np.int64}
# struct's packing rounds a Python float as numpy does (round to nearest even) and raises
# OverflowError past the range, where the fast call falls back to scalar_bits
_FAST_BITS = {np.dtype(d): (struct.Struct(p).pack, struct.Struct(u).unpack)
              for d, p, u in (("float16", "<e", "<h"), ("float32", "<f", "<i"),
                              ("float64", "<d", "<q"))}


def _timing_form(number: int = 10, repeat: int = 3, min_repeat_ms: float = 0,
                 **tvm_only: Any) -> tuple[int, int, float]:
    """Module.time_evaluator's own call form (its arguments, with their defaults); TVM's other
    options are refused by name, as in its own form (not as this helper's unexpected keyword)."""
    if tvm_only:
        raise TypeError(f"time_evaluator: TVM's {sorted(tvm_only)} are not supported; this "
                        "timer takes number, repeat and min_repeat_ms")
    return number, repeat, min_repeat_ms


# ---------------------------------------------------------------------------------------------
# native loading


class _Native:
    """The loaded code: the entry point, and whatever keeps it mapped (never released)."""

    def __init__(self, address: int, slot_address: int | None, keepalive: Any, via: str) -> None:
        self.address = address
        self.slot_address = slot_address
        self.packed_slot: int | None = None  # @__tl_packed_call, where the kernel has one
        self.extern_slots: dict[str, int | None] = {}  # slot name -> its address (extern_c)
        self.keepalive = keepalive
        self.via = via


_libm_loaded = False


def _load_libm_globally() -> None:
    """Kernels may call libm (expf, tanhf, ...): make its symbols visible to the libraries we
    dlopen, which are linked without DT_NEEDED entries."""
    global _libm_loaded
    if not _libm_loaded:
        for name in ("libm.so.6", "libm.so"):
            try:
                ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError:
                continue
        _libm_loaded = True


def _open_shared(path: Path, symbol: str, externs: tuple[str, ...] = ()) -> _Native:
    _load_libm_globally()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise LoadError(f"cannot load kernel library {path}: {e}") from None
    try:
        fn = lib[symbol]  # dlsym, never a Python attribute of the CDLL object
    except AttributeError:
        raise LoadError(f"kernel library {path} does not define {symbol!r}") from None
    address = ctypes.cast(fn, _VOID_P).value
    try:
        slot = ctypes.addressof(_VOID_P.in_dll(lib, PARALLEL_LAUNCH_GLOBAL))
    except ValueError:
        slot = None  # a kernel without parallel loops need not define it
    native = _Native(address, slot, lib, f"shared library {path}")  # type: ignore[arg-type]
    try:
        native.packed_slot = ctypes.addressof(_VOID_P.in_dll(lib, packed.CALL_SLOT))
    except ValueError:
        pass  # a kernel without tl.extern calls
    for name in externs:
        try:
            native.extern_slots[name] = ctypes.addressof(_VOID_P.in_dll(lib, name))
        except ValueError:
            native.extern_slots[name] = None  # never called (optimized away)
    return native


def _open_jit(object_code: bytes, symbol: str, externs: tuple[str, ...] = ()) -> _Native:
    try:
        from . import _llvm
    except ImportError as e:  # pragma: no cover - _llvm itself imports nothing heavy
        raise LoadError(f"no linker and no llvmlite to load the kernel: {e}") from None
    # The symbol table holds the global's name when the object defines it.
    has_slot = PARALLEL_LAUNCH_GLOBAL.encode() in object_code
    exports = [symbol, PARALLEL_LAUNCH_GLOBAL] if has_slot else [symbol]
    if packed.CALL_SLOT.encode() in object_code:
        exports.append(packed.CALL_SLOT)
    exports += [n for n in externs if n.encode() in object_code]
    try:
        tracker, addrs = _llvm.jit_load_object(object_code, exports)
    except ImportError:
        raise LoadError("no linker (ld or cc) on PATH and llvmlite is not installed") from None
    except RuntimeError as e:
        raise LoadError(f"the JIT could not load the kernel object: {e}") from None
    if not addrs.get(symbol):
        raise LoadError(f"kernel object does not define {symbol!r}")
    native = _Native(addrs[symbol], addrs.get(PARALLEL_LAUNCH_GLOBAL) or None, tracker,
                     "ORC JIT")
    native.packed_slot = addrs.get(packed.CALL_SLOT) or None
    native.extern_slots = {n: addrs.get(n) or None for n in externs}
    return native


def _open(object_code: bytes, library: Path | None, symbol: str, loader: str,
          externs: tuple[str, ...] = ()) -> _Native:
    if loader not in LOADERS:
        raise ValueError(f"loader must be one of {LOADERS}, got {loader!r}")
    if loader in ("auto", "so"):
        if library is None:
            try:
                library = _link.cached_shared_library(object_code)
            except (_link.LinkError, OSError, subprocess.SubprocessError) as e:
                if loader == "so":
                    raise LoadError(f"cannot link the kernel object: {e}") from None
                library = None
        if library is not None:
            return _open_shared(library, symbol, externs)
        if loader == "so":
            raise LoadError("loader='so' needs a linker (ld or cc) on PATH")
    return _open_jit(object_code, symbol, externs)


# ---------------------------------------------------------------------------------------------
# Module


class Module:
    """A compiled kernel, callable on numpy arrays.

    Build one with :meth:`from_object` (what ``tl.build`` does) or :func:`load_module`. A call
    checks every argument -- ndarray, dtype, C-contiguity, alignment, shape, the binding of
    symbolic dimensions, writability of outputs, no overlap between an output and another
    argument -- then calls the native function and raises :class:`KernelError` on a nonzero
    return code.
    """

    def __init__(
        self,
        object_code: bytes,
        manifest: Mapping[str, Any],
        sources: Mapping[str, str] | None = None,
        *,
        library: Path | None = None,
        loader: str = "auto",
    ) -> None:
        if not isinstance(object_code, (bytes, bytearray, memoryview)):
            raise TypeError(f"object_code must be bytes, got {type(object_code).__name__}")
        self._object = bytes(object_code)
        self._manifest = normalize_manifest(manifest)
        m = self._manifest
        self._sources = {str(k): str(v) for k, v in (sources or {}).items()}
        self._name: str = m["name"]
        self._symbol: str = m["symbol"]
        self._vars: tuple[str, ...] = tuple(m["vars"])
        # the float scalar parameters' dtypes (the other vars are int64)
        self._var_dtypes: dict[str, np.dtype] = {
            v: np.dtype(d) for v, d in m.get("var_dtypes", {}).items() if d != "int64"}
        self._args = tuple(
            _Arg(i, a["name"], np.dtype(a["dtype"]), tuple(a["shape"]), a["written"], self._vars)
            for i, a in enumerate(m["args"])
        )
        self._with_exprs = tuple(a for a in self._args if a.exprs)
        self._nargs = len(self._args)
        self._set_call_order(m.get("call_order"))
        self._written = tuple(a for a in self._args if a.written)
        self._externs = extern_c.check_manifest(m.get("externs", []))
        self._required_flags = _cpu.required_flags(m["target"]["features"], m["target"]["triple"])
        argtypes = [_VOID_P] * self._nargs + [_I64] * len(self._vars)
        self._signature = ", ".join(f"{a.name}: {a.describe()}" for a in self._args)
        # Generated on the first call (compiling it costs ~0.15 ms, which a module only timed
        # by the tuner through prepare_args never needs to pay).
        self._fast_call: Callable[..., None] = self._first_fast_call
        # Code built for another CPU (a cross-compiled kernel, to be saved) is never loaded
        # here: its first vector instruction would kill the process with SIGILL. Every way of
        # running it raises this error instead; load_module refuses such artifacts at once.
        self._not_runnable = why_not_runnable(m["target"]["triple"], self._required_flags,
                                               what=self._name)
        if self._not_runnable is not None:
            self._native = None
            self._fn = self._refuse_to_run
            return
        # the C functions it calls (tl.call_extern), found before any code is loaded
        extern_addresses = extern_c.addresses(self._externs, self._name)
        self._native = _open(self._object, library, self._symbol, loader,
                             tuple(extern_c.slot_names(self._externs).values()))
        if self._native.slot_address is not None:
            # Every parallel loop in the kernel calls through this slot: it must hold the pool's
            # launcher before the first call.
            try:
                launch = threadpool.launch_address()
            except threadpool.PoolUnavailable as e:
                raise LoadError(f"{self._name} runs parallel loops, but {e}") from e
            _VOID_P.from_address(self._native.slot_address).value = launch
        packed.bind_slot(self._native.packed_slot)  # the tl.extern calls' trampoline
        extern_c.bind(self._externs, extern_addresses, self._native.extern_slots)
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(self._native.address)

    def _set_call_order(self, order: list[str] | None) -> None:
        """Where the positional call takes its scalars (tl.var arguments listed among the
        tensors, as TVM scripts pass them: g(a, b, 4)). Without them, or for a manifest that
        predates 'call_order', the call takes the arrays only, the variables by keyword."""
        names = {a.name for a in self._args}
        order = order or []
        self._scalar_at = tuple((pos, n) for pos, n in enumerate(order) if n not in names)
        self._array_at = tuple(pos for pos, n in enumerate(order) if n in names)
        self._arity = len(order) if self._scalar_at else self._nargs

    def _refuse_to_run(self, *_raw: int) -> int:
        raise ArtifactError(self._not_runnable)

    def _loaded(self) -> _Native:
        if self._native is None:
            raise ArtifactError(self._not_runnable)
        return self._native

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_object(
        cls,
        object_code: bytes,
        manifest: Mapping[str, Any],
        sources: Mapping[str, str] | None = None,
        *,
        loader: str = "auto",
    ) -> Module:
        """Load PIC object code that follows the kernel ABI.

        ``manifest``: ``{"name", "symbol", "args": [{"name", "shape", "dtype", "written"}],
        "vars", "target": {"cpu", "features", "triple"}, "version"}``, optionally
        ``"error_messages": {code: text}``, ``"call_order"`` and ``"var_dtypes"`` (the float
        scalar parameters' dtypes). ``sources``: texts for :meth:`get_source`, by
        format ("ll", "asm", "tir", ...). ``loader``: "so" (link and dlopen), "jit" (llvmlite
        ORC JIT) or "auto" (the first that works).
        """
        return cls(object_code, manifest, sources, loader=loader)

    # -- introspection --------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def entry_name(self) -> str:
        """The exported symbol of the kernel function."""
        return self._symbol

    @property
    def type_key(self) -> str:
        """TVM's ``mod.type_key``: "llvm", the kind of the one host module."""
        return "llvm"

    @property
    def imported_modules(self) -> list:
        """TVM's ``mod.imported_modules`` (a GPU module's device code): none, the kernel runs
        on the host (TVM's llvm module has none either)."""
        return []

    def get_function(self, name: str, query_imports: bool = False) -> Module:
        """TVM's ``mod.get_function(name)`` / ``mod[name]``: a module holds one kernel, so its
        function is the module itself, callable the same way."""
        if not isinstance(name, str):
            raise TypeError(f"get_function: name must be a str, got {type(name).__name__}")
        if name not in (self._symbol, self._name):
            raise AttributeError(f"module has one function, {self._symbol!r} (its "
                                 f"entry_name), not {name!r}")
        return self

    def __getitem__(self, name: str) -> Module:
        return self.get_function(name)

    @property
    def manifest(self) -> dict[str, Any]:
        """A copy of the manifest."""
        return copy.deepcopy(self._manifest)

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self._args)

    @property
    def vars(self) -> tuple[str, ...]:
        return self._vars

    @property
    def object_code(self) -> bytes:
        return self._object

    @property
    def function_address(self) -> int:
        """Address of the native entry point (for generated code that calls kernels directly).
        ArtifactError for code built for CPU features this machine lacks."""
        return self._loaded().address

    @property
    def not_runnable_reason(self) -> str | None:
        """Why this machine cannot run the code (built for another architecture or CPU
        features: it can still be saved), or None."""
        return self._not_runnable

    @property
    def loaded_via(self) -> str:
        """How the code was loaded: "shared library <path>" or "ORC JIT"."""
        if self._native is None:
            return f"not loaded: {self._not_runnable}"
        return self._native.via

    @property
    def raw_function(self) -> Callable[..., int]:
        """The ctypes function itself: ints in (pointers, then vars: a float scalar as its
        bits, :func:`scalar_bits`), error code out."""
        return self._fn

    def __reduce_ex__(self, protocol: int):
        # a loaded shared library and ctypes function pointers: pickle and deepcopy failed deep
        # in ctypes (AttributeError on a local class); say what works instead
        raise TypeError("a compiled Module cannot be pickled or copied (it holds loaded native "
                        "code); save it with f.save(path) and load it with "
                        "tensorlang.runtime.load_module(path)")

    def __repr__(self) -> str:
        vars_ = ", ".join(f"{v}: {self._var_dtypes[v].name}" if v in self._var_dtypes else v
                          for v in self._vars)
        vars_ = f"; vars {vars_}" if vars_ else ""
        return f"<tensorlang.runtime.Module {self._name}({self._signature}){vars_}>"

    # -- calling --------------------------------------------------------------------------

    def prepare_args(self, *args: Any, **var_values: int) -> list[int]:
        """Check arguments as a call does; return the raw ints that :meth:`call_raw` takes
        (a float scalar as its bits, :func:`scalar_bits`).

        The pointers are valid only while the arrays are alive and not resized.
        """
        if len(args) != self._nargs:
            args, var_values = self._split_scalars(args, var_values)
        raw: list[int] = []
        bound: dict[str, int] | None = None
        if var_values:
            bound = self._explicit_vars(var_values)
        ndarray = np.ndarray
        for spec, a in zip(self._args, args):
            if not isinstance(a, ndarray):
                raise TypeError(
                    f"{self._name}(): argument {spec.name!r} must be a numpy.ndarray of "
                    f"{spec.describe()}, got {type(a).__name__}"
                )
            dt = a.dtype
            if dt is not spec.dtype and dt != spec.dtype:
                raise TypeError(
                    f"{self._name}(): argument {spec.name!r} must have dtype {spec.dtype.name}"
                    f"{_byteorder_hint(dt)}, got {dt}"
                )
            shape = a.shape
            if spec.fixed is not None:
                if shape != spec.fixed:
                    raise ValueError(
                        f"{self._name}(): argument {spec.name!r} must have shape "
                        f"{spec.fixed}, got {shape}"
                    )
            else:
                bound = self._bind(spec, shape, bound)
            try:
                ptr = _addressof(_from_buffer(a))
            except (TypeError, ValueError, BufferError):
                # Read-only or not C-contiguous: find which, for the message.
                if not a.flags.c_contiguous:
                    raise ValueError(
                        f"{self._name}(): argument {spec.name!r} must be C-contiguous "
                        "(use numpy.ascontiguousarray)"
                    ) from None
                if spec.written:
                    raise ValueError(
                        f"{self._name}(): argument {spec.name!r} is written by the kernel but "
                        "the array is read-only"
                    ) from None
                ptr = a.__array_interface__["data"][0]
            if ptr % spec.align:
                raise ValueError(
                    f"{self._name}(): argument {spec.name!r} is not aligned to its dtype "
                    f"({spec.align} bytes)"
                )
            raw.append(ptr)
        if self._with_exprs:
            bound = self._bind_exprs(args, bound)
        if self._written:
            self._check_overlap(args, raw)
        if self._vars:
            if bound is None or len(bound) < len(self._vars):
                missing = [v for v in self._vars if bound is None or v not in bound]
                if any(v in self._var_dtypes for v in missing):
                    raise TypeError(self._missing_scalars_message(missing))
                raise TypeError(
                    f"{self._name}(): cannot determine {', '.join(missing)} from the array "
                    "shapes; pass them as keyword arguments"
                )
            raw.extend(bound[v] for v in self._vars)
        return raw

    def _missing_scalars_message(self, missing: list[str]) -> str:
        what = ", ".join(f"{v!r} ({self._scalar_type(v)})" for v in missing)
        where = (f"in its place, {self._name}({', '.join(self._call_names())}), "
                 if self._scalar_at else "")
        return (f"{self._name}() missing the scalar argument{'s' if len(missing) > 1 else ''} "
                f"{what}: pass {'it' if len(missing) == 1 else 'them'} {where}or by keyword")

    def _scalar_type(self, var: str) -> str:
        d = self._var_dtypes.get(var)
        return "int" if d is None else d.name

    def _split_scalars(self, args: tuple, var_values: Mapping[str, Any]
                       ) -> tuple[tuple, dict[str, Any]]:
        """(arrays, variables) of a positional call that passes its scalars in the listed
        order; TypeError for any other count, or a scalar also given by keyword."""
        if not self._scalar_at or len(args) != self._arity:
            raise TypeError(self._count_message(len(args)))
        values = dict(var_values)
        for pos, name in self._scalar_at:
            if name in values:
                raise TypeError(f"{self._name}() got multiple values for {name!r} (argument "
                                f"{pos + 1} and a keyword)")
            values[name] = args[pos]
        return tuple(args[pos] for pos in self._array_at), values

    def _count_message(self, got: int) -> str:
        if not self._scalar_at:
            return (f"{self._name}() takes {self._nargs} array arguments ({self._signature}), "
                    f"got {got}")
        specs = {a.name: f"{a.name}: {a.describe()}" for a in self._args}
        specs.update((n, f"{n}: {self._scalar_type(n)}") for _, n in self._scalar_at)
        ordered = [specs[n] for n in self._call_names()]
        scalars = ", ".join(n for _, n in self._scalar_at)
        return (f"{self._name}() takes {self._arity} arguments ({', '.join(ordered)}), or the "
                f"{self._nargs} arrays with {scalars} by keyword; got {got}")

    def _call_names(self) -> list[str]:
        names: list[str | None] = [None] * self._arity
        for pos, name in self._scalar_at:
            names[pos] = name
        for pos, a in zip(self._array_at, self._args):
            names[pos] = a.name
        return names  # type: ignore[return-value]

    def __call__(self, *args: Any, **var_values: int) -> None:
        """Run the kernel on numpy arrays (outputs are written in place); scalars listed among
        the kernel's arguments are passed in their place or by keyword."""
        if var_values or len(args) != self._arity:
            self._checked_call(args, var_values)
        else:
            self._fast_call(*args)

    def _checked_call(self, args: tuple, var_values: Mapping[str, int] | None) -> None:
        rc = self._fn(*self.prepare_args(*args, **(var_values or {})))
        if rc:
            raise self._kernel_error(rc)

    def _first_fast_call(self, *args: Any) -> None:
        self._fast_call = self._make_fast_call()
        self._fast_call(*args)

    def _make_fast_call(self) -> Callable[..., None]:
        """Generate a call path specialized to this kernel's signature.

        The general checks in :meth:`prepare_args` loop over argument specs and cost ~2.5 us
        for three arrays; straight-line code with the dtypes, ranks, fixed dimensions and the
        first binding of each shape variable baked in costs well under half of that;
        dimensions such as 'n - 2' or '8 * m' are solved and checked by generated arithmetic
        too (:meth:`_fast_expr_checks`). It only
        ever accepts what :meth:`prepare_args` accepts: anything unusual (a subclass, an equal
        but not identical dtype, a read-only input, any failed check) falls back to the general
        path, which then runs the call or raises the precise error.
        """
        env: dict[str, Any] = {
            "ndarray": np.ndarray,
            "NDArray": NDArray,  # tl.runtime.array's
            "fb": _from_buffer,
            "addr": _addressof,
            "fn": self._fn,
            "failed": self._kernel_error,
            "slow": self._checked_call,
        }
        params, body, var_expr = self._fast_params(env)
        size_expr: dict[int, str] = {}
        for a in self._args:
            i = a.index
            env[f"dt{i}"] = a.dtype
            body.append(f"if (type(a{i}) is not ndarray and type(a{i}) is not NDArray) or "
                        f"a{i}.dtype is not dt{i}: raise Slow")
            body.append(f"s{i} = a{i}.shape")
            if a.fixed is not None:
                env[f"shape{i}"] = a.fixed
                body.append(f"if s{i} != shape{i}: raise Slow")
            else:
                # Unpacking checks the rank (ValueError otherwise) and names every dimension.
                names = [f"d{i}_{axis}" for axis in range(len(a.shape))]
                body.append(f"({', '.join(names)},) = s{i}")
                for name, d in zip(names, a.shape):
                    if isinstance(d, int):
                        body.append(f"if {name} != {d}: raise Slow")
                    elif d not in self._vars:
                        continue  # an expression ('n - 2'): solved and checked below
                    elif d in var_expr:
                        body.append(f"if {name} != {var_expr[d]}: raise Slow")
                    else:
                        var_expr[d] = name
            body.append(f"p{i} = addr(fb(a{i}))")
            if a.align > 1:
                body.append(f"if p{i} % {a.align}: raise Slow")
            dims = [str(d) if isinstance(d, int) else f"d{i}_{axis}"
                    for axis, d in enumerate(a.shape)]
            size_expr[i] = "*".join([str(a.dtype.itemsize), *dims])
        body += self._fast_expr_checks(var_expr)
        for w in self._written:
            body.append(f"nb{w.index} = {size_expr[w.index]}")
        for w in self._written:
            for o in self._args:
                if o.index == w.index or (o.written and o.index < w.index):
                    continue  # the pair of two outputs is checked once
                nb_o = f"nb{o.index}" if o.written else f"({size_expr[o.index]})"
                # Conservative: an empty array "overlapping" only sends the call to the exact
                # check of the general path.
                body.append(
                    f"if p{o.index} < p{w.index} + nb{w.index} and "
                    f"p{w.index} < p{o.index} + {nb_o}: raise Slow"
                )
        if any(v not in var_expr for v in self._vars):
            # Some variable can only be passed by keyword: there is no fast path.
            return lambda *args: self._checked_call(args, None)
        call_args = [f"p{a.index}" for a in self._args] + [var_expr.get(v, "0") for v in self._vars]
        src = [f"def fast_call({params}):", "    try:"]
        src += [f"        {line}" for line in body]
        src += [
            "    except Exception:",
            f"        return slow(({params}{',' if self._arity == 1 else ''}), None)",
            f"    rc = fn({', '.join(call_args)})",
            "    if rc:",
            "        raise failed(rc)",
        ]

        class Slow(Exception):
            pass

        env["Slow"] = Slow
        # The source is built above from the manifest's numbers and generated identifiers only
        # (argument names never enter it), so there is nothing to inject.
        code = compile("\n".join(src), f"<tensorlang fast call of {self._name}>", "exec")
        exec(code, env)  # noqa: S102
        return env["fast_call"]

    def _fast_params(self, env: dict[str, Any]) -> tuple[str, list[str], dict[str, str]]:
        """The fast call's parameters (arrays a<index>, scalars x<position>, in call order),
        the checks of the scalars (a plain int; a plain float or int for a float scalar,
        whose bits are passed; else the general path), and their bindings."""
        if not self._scalar_at:
            return ", ".join(f"a{a.index}" for a in self._args), [], {}
        params = [f"a{a.index}" for a in self._args]
        body, var_expr = [], {}
        for pos, name in self._scalar_at:
            params.insert(pos, f"x{pos}")
            d = self._var_dtypes.get(name)
            if d is None:
                body.append(f"if type(x{pos}) is not int or not {_I64_MIN} <= x{pos} <= "
                            f"{_I64_MAX}: raise Slow")
                var_expr[name] = f"x{pos}"
            else:
                env[f"pack{pos}"], env[f"unpack{pos}"] = _FAST_BITS[d]
                body.append(f"if type(x{pos}) is not float and type(x{pos}) is not int: "
                            "raise Slow")
                body.append(f"(b{pos},) = unpack{pos}(pack{pos}(x{pos}))")
                var_expr[name] = f"b{pos}"
        return ", ".join(params), body, var_expr

    def _fast_expr_checks(self, var_expr: dict[str, str]) -> list[str]:
        """Straight-line code for the dimensions such as '8 * m' or 'n - 2': the variables
        they alone determine, solved in the order :meth:`_bind_exprs` solves them (which
        variables a step solves depends on the manifest only, so the order is fixed here),
        then a check of every expression against its dimension. `var_expr` gains the solved
        variables. Any failure (no integer solution, a mismatch, a division by zero) sends the
        call to the general path, which raises the exact error."""
        pending = [(spec.index, axis, e) for spec in self._with_exprs for axis, e in spec.exprs]
        lines: list[str] = []
        progress = True
        while progress:
            progress = False
            for i, axis, e in pending:
                if e.linear is None:
                    continue
                coefs, const = e.linear
                free = [v for v, c in coefs.items() if c and v not in var_expr]
                if len(free) != 1:
                    continue
                (var,) = free
                known = "".join(f" - ({c}) * {var_expr[v]}" for v, c in coefs.items()
                                if v != var and c)
                k = len(var_expr)
                lines.append(f"r{k} = d{i}_{axis} - ({const}){known}")
                lines.append(f"if r{k} % ({coefs[var]}): raise Slow")
                lines.append(f"v{k} = r{k} // ({coefs[var]})")
                var_expr[var] = f"v{k}"
                progress = True
        for i, axis, e in pending:
            if all(v in var_expr for v in e.vars):
                lines.append(f"if d{i}_{axis} != {e.python_source(var_expr)}: raise Slow")
        return lines

    def call_raw(self, *raw: int) -> int:
        """Unchecked call: data pointers (ints) then var values, exactly as the ABI orders them
        (a float scalar as its bits, :func:`scalar_bits`; :meth:`prepare_args` makes the
        list). Returns the kernel's code (0: success). Wrong pointers crash the process."""
        return self._fn(*raw)

    def _kernel_error(self, rc: int) -> KernelError:
        failed_c_call = extern_c.describe_error(rc, self._externs)
        if failed_c_call is not None:
            return KernelError(self._name, rc, failed_c_call)
        failed_call = packed.take_error(rc)  # a tl.extern's function raised: chain its error
        if failed_call is not None:
            err = KernelError(self._name, rc, failed_call[0])
            err.__cause__ = failed_call[1]
            return err
        return KernelError(self._name, rc, self._manifest["error_messages"].get(str(rc)))

    def _explicit_vars(self, var_values: Mapping[str, int]) -> dict[str, int]:
        bound = {}
        for k, v in var_values.items():
            if k not in self._vars:
                raise TypeError(f"{self._name}() got an unexpected keyword argument {k!r}")
            d = self._var_dtypes.get(k)
            if d is not None:
                bound[k] = self._float_scalar(k, v, d)
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{self._name}(): {k} must be an int, got {type(v).__name__}")
            if not _I64_MIN <= v <= _I64_MAX:
                raise ValueError(f"{self._name}(): {k} = {v} is out of the kernel's int64 "
                                 f"range [-2**63, 2**63 - 1]")
            bound[k] = int(v)
        return bound

    def _float_scalar(self, name: str, v: Any, d: np.dtype) -> int:
        """The bits of a float scalar parameter's value: a Python or numpy real number (an
        int too, converted as TVM does), never a bool, a string or an array."""
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                np.floating)):
            got = type(v).__name__
            if isinstance(v, np.ndarray):
                got = f"a numpy.ndarray of shape {v.shape} (pass a scalar: float(x), x.item())"
            raise TypeError(f"{self._name}(): scalar argument {name!r} must be a {d.name} "
                            f"number (a float, an int or a numpy scalar), got {got}")
        try:
            return scalar_bits(v, d)
        except OverflowError:  # an int too large even for a float64
            raise ValueError(f"{self._name}(): scalar argument {name!r} = {v!s:.30} is "
                             f"out of {d.name}'s range") from None

    def _bind(self, spec: _Arg, shape: tuple, bound: dict[str, int] | None) -> dict[str, int]:
        if len(shape) != len(spec.shape):
            raise ValueError(
                f"{self._name}(): argument {spec.name!r} must have {len(spec.shape)} "
                f"dimensions {tuple(spec.shape)}, got shape {shape}"
            )
        if bound is None:
            bound = {}
        for axis, want in spec.symbolic:
            got = shape[axis]
            if isinstance(want, int):
                if got != want:
                    raise ValueError(
                        f"{self._name}(): argument {spec.name!r} must have shape "
                        f"{tuple(spec.shape)}, got {shape} (axis {axis} is {got}, not {want})"
                    )
            else:
                prev = bound.get(want)
                if prev is None:
                    bound[want] = got
                elif prev != got:
                    raise ValueError(
                        f"{self._name}(): argument {spec.name!r} has {want}={got} on axis "
                        f"{axis} (shape {shape}), but {want}={prev} elsewhere"
                    )
        return bound

    def _bind_exprs(self, args: tuple, bound: dict[str, int] | None) -> dict[str, int]:
        """Bind the variables that only dimensions such as '8 * m' determine (a linear
        expression in one unbound variable, solved exactly), then check every expression
        dimension against its array. A variable no dimension determines is left unbound (the
        caller asks for it by keyword)."""
        bound = {} if bound is None else bound
        pending = [(spec, axis, e) for spec in self._with_exprs for axis, e in spec.exprs]
        progress = True
        while progress:
            progress = False
            for spec, axis, e in pending:
                got = args[spec.index].shape[axis]
                try:
                    solved = e.solve(got, bound)
                except ValueError as err:
                    raise self._dim_error(spec, args, axis, e, bound, str(err)) from None
                if solved is not None:
                    bound[solved[0]] = solved[1]
                    progress = True
        for spec, axis, e in pending:
            if any(v not in bound for v in e.vars):
                continue
            try:
                want = e.evaluate(bound)
            except ValueError as err:
                raise self._dim_error(spec, args, axis, e, bound, str(err)) from None
            if args[spec.index].shape[axis] != want:
                note = f": a negative size, {' or '.join(e.vars)} too small" if want < 0 else ""
                raise self._dim_error(spec, args, axis, e, bound, f"{e} = {want}", note)
        return bound

    def _dim_error(self, spec: _Arg, args: tuple, axis: int, e: DimExpr,
                   bound: Mapping[str, int], why: str, note: str = "") -> ValueError:
        shape = args[spec.index].shape
        values = ", ".join(f"{v}={bound[v]}" for v in e.vars if v in bound)
        with_vars = f" with {values}" if values else ""
        dims = ", ".join(map(str, spec.shape)) + ("," if len(spec.shape) == 1 else "")
        return ValueError(
            f"{self._name}(): argument {spec.name!r} must have shape ({dims}), got {shape}: "
            f"axis {axis} is {shape[axis]}, expected {why}{with_vars}{note}"
        )

    def _check_overlap(self, args: tuple, raw: list[int]) -> None:
        """A written buffer that overlaps another argument would make the result depend on the
        order of memory accesses (and contradicts the noalias the emitter may promise)."""
        for w in self._written:
            lo, hi = raw[w.index], raw[w.index] + args[w.index].nbytes
            if hi == lo:
                continue
            for other in self._args:
                if other.index == w.index:
                    continue
                olo = raw[other.index]
                ohi = olo + args[other.index].nbytes
                if olo < ohi and olo < hi and lo < ohi:
                    raise ValueError(
                        f"{self._name}(): output {w.name!r} overlaps argument {other.name!r} "
                        "in memory; pass distinct arrays"
                    )

    # -- timing ---------------------------------------------------------------------------

    def time_evaluator(self, *args: Any, **kwargs: Any) -> Callable[..., TimingResult]:
        """A function that times the kernel on given arguments. Two call forms:

            time_evaluator(number=10, repeat=3, min_repeat_ms=0)
            time_evaluator(func_name, dev, number=10, repeat=1, min_repeat_ms=0)   # TVM's

        In TVM's form, ``func_name`` is this kernel's :attr:`entry_name` and ``dev`` the CPU
        device (``tl.cpu(0)``); its defaults are TVM's.

        After one checked warm-up call, each of ``repeat`` measurements times ``number``
        back-to-back calls in a native loop (no Python between calls) and records the mean time
        per call. When a measurement takes less than ``min_repeat_ms``, ``number`` is raised and
        the measurement redone, as TVM does.
        """
        if args and isinstance(args[0], str):
            number, repeat, min_repeat_ms = self._tvm_timing_form(*args, **kwargs)
        else:
            number, repeat, min_repeat_ms = _timing_form(*args, **kwargs)
        number, repeat = count("number", number), count("repeat", repeat)
        min_repeat_ms = duration_ms("min_repeat_ms", min_repeat_ms)
        timer = self._native_timer()

        def evaluate(*args: Any, **var_values: int) -> TimingResult:
            raw = self.prepare_args(*args, **var_values)
            rc = self._fn(*raw)
            if rc:
                raise self._kernel_error(rc)
            n = number
            results = []
            for _ in range(repeat):
                while True:
                    elapsed, rc = timer(raw, n)
                    if rc:
                        raise self._kernel_error(rc)
                    if elapsed * 1e3 >= min_repeat_ms:
                        break
                    # Aim 10% past the minimum; at least double so tiny timings converge fast.
                    scale = min_repeat_ms / max(elapsed * 1e3, 1e-6) * 1.1
                    n = min(max(2 * n, math.ceil(n * scale)), MAX_CALLS)
                results.append(elapsed / n)
            return TimingResult.from_results(results, n)

        return evaluate

    def _tvm_timing_form(self, func_name: str, dev: Any, number: int = 10, repeat: int = 1,
                         min_repeat_ms: float = 0, **tvm_only: Any) -> tuple[int, int, float]:
        check_device(dev, "time_evaluator")
        if func_name not in (self._symbol, self._name):
            raise ValueError(f"time_evaluator: this module has one function, {self._symbol!r} "
                             f"(its entry_name), not {func_name!r}")
        if tvm_only:
            raise TypeError(f"time_evaluator: TVM's {sorted(tvm_only)} are not supported; "
                            "this timer takes number, repeat and min_repeat_ms")
        return number, repeat, min_repeat_ms

    def _native_timer(self) -> Callable[[list[int], int], tuple[float, int]]:
        return call_timer(self._loaded().address, self._fn, len(self._args) + len(self._vars))

    # -- sources and artifacts ------------------------------------------------------------

    def get_source(self, fmt: str = "ll") -> str:
        """Source text: "ll" (LLVM IR, as the builder stored it -- the optimized IR the object
        was generated from), "asm" (produced on demand from "ll" when not stored; needs
        llvmlite), "tir" (lowered loop IR), or any other format the builder stored."""
        if fmt in self._sources:
            return self._sources[fmt]
        if fmt in ("asm", "s") and "ll" in self._sources:
            try:
                from . import _llvm

                t = self._manifest["target"]
                asm = _llvm.assembly_of(self._sources["ll"], t["cpu"], t["features"], t["triple"])
            except ImportError:
                raise ValueError(
                    f"{self._name}: assembly was not stored and llvmlite is not installed to "
                    "produce it"
                ) from None
            self._sources["asm"] = asm
            return asm
        have = ", ".join(sorted(self._sources)) or "none"
        raise ValueError(f"{self._name}: no {fmt!r} source (available: {have})")

    def save(self, path: str | os.PathLike) -> None:
        """Write the module to one file (a zip: manifest.json, kernel.o, kernel.so when linked,
        the thread pool library, sources/*). Loads with :func:`load_module`, without llvmlite
        where the library is usable."""
        members = {"kernel.o": self._object}
        lib = self._library_bytes()
        if lib is not None:
            members["kernel.so"] = lib
        try:
            pool_lib = threadpool.shared_library_bytes()
        except threadpool.PoolUnavailable:  # the loading machine will build its own
            pool_lib = None
        if pool_lib is not None:
            members["pool.so"] = pool_lib
        write_module_artifact(Path(path), self.manifest, self._required_flags, members,
                              self._sources)

    def export_library(self, file_name: str | os.PathLike, fcompile: Any = None,
                       **kwargs: Any) -> None:
        """TVM's ``mod.export_library(path)``: :meth:`save` under that name. The file is
        tensorlang's module artifact (a zip holding the linked .so, the object and the
        manifest) whatever its suffix, and :func:`load_module` (``tl.runtime.load_module``)
        reads it; it is not a bare shared library to ``dlopen``. TVM's cross-compiler options
        (``fcompile``, ``cc``, ``options``, ...) are refused."""
        if fcompile is not None or kwargs:
            given = (["fcompile"] if fcompile is not None else []) + sorted(kwargs)
            raise TypeError(f"export_library: {given} are not supported: the module is "
                            "already compiled and linked for its target; export_library(path) "
                            "writes it, tl.runtime.load_module(path) loads it")
        self.save(file_name)

    def _library_bytes(self) -> bytes | None:
        """The linked library to ship: the one loaded, else one linked from the object.

        The loaded library lives in the cache directory, which its user may have emptied since
        the build (a cleaned ~/.cache, a temporary cache): the object is kept in memory, so the
        library is then relinked from it in a private folder (~3 ms with ld; the same object
        code, so the saved kernel computes exactly what this one does). No bytes are kept per
        module for this: the tuner builds thousands of modules that are never saved."""
        via = self._native.via if self._native is not None else ""
        if via.startswith("shared library "):
            try:
                return Path(via[len("shared library ") :]).read_bytes()
            except OSError:
                return _relinked_library(self._object)  # the cached copy is gone
        try:
            lib = _link.cached_shared_library(self._object)
        except (_link.LinkError, OSError, subprocess.SubprocessError):
            return None  # the artifact still carries the object
        return lib.read_bytes() if lib is not None else None


def _relinked_library(object_code: bytes) -> bytes | None:
    """``object_code`` linked into a shared library, as bytes, in a private folder (never the
    cache directory); None without a linker or when it refuses (the artifact still carries the
    object, which the loading machine links or JITs)."""
    if _link.linker_command() is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tl-relink-") as tmp:
        out = Path(tmp) / "kernel.so"
        try:
            _link.link_shared(object_code, out)
            return out.read_bytes()
        except (_link.LinkError, OSError, subprocess.SubprocessError):
            return None


def _byteorder_hint(dt: np.dtype) -> str:
    return " in native byte order" if dt.byteorder not in ("=", "|") else ""


def load_module(path: str | os.PathLike, *, loader: str = "auto") -> Module:
    """Load a module saved with :meth:`Module.save`.

    Refuses (:class:`ArtifactError`, naming the file and what is wrong) anything malformed --
    not a zip, a corrupt or missing member, a member whose sha256 differs from the one recorded
    at save, a manifest of the wrong structure -- and an artifact of another format or ABI,
    another major version, another architecture, or one that needs CPU features this machine
    lacks. Uses the shipped library (no llvmlite needed); relinks the object if the library
    does not load.
    """
    if loader not in LOADERS:
        raise ValueError(f"loader must be one of {LOADERS}, got {loader!r}")
    path = Path(path)
    meta, members, sources = read_module_artifact(path)
    try:
        return _module_from_members(meta, members, sources, loader)
    except ArtifactError as e:
        raise ArtifactError(f"{path}: {e}") from None
    except (LoadError, ValueError, TypeError) as e:  # a manifest the Module refuses, bad text
        raise ArtifactError(f"{path}: {e}") from None


def _module_from_members(meta: dict, members: Mapping[str, bytes], sources: dict[str, str],
                         loader: str) -> Module:
    obj, so, pool_lib = members["kernel.o"], members.get("kernel.so"), members.get("pool.so")
    if pool_lib is not None and PARALLEL_LAUNCH_GLOBAL.encode() in obj:
        threadpool.pool(shipped_library=pool_lib)
    library = None
    if so is not None and loader in ("auto", "so"):
        library = _link.store_shared_library(so, prefix="a")
    try:
        return Module(obj, meta, sources, library=library, loader=loader)
    except LoadError:
        if library is None or loader != "auto":
            raise
        # The shipped library did not load here (e.g. an older libc): link the object afresh.
        return Module(obj, meta, sources, loader=loader)
