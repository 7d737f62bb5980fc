"""Packed functions: named functions that compiled kernels call (the body of a ``tl.extern``).

    @tl.register_func("my.scale")            # TVM's tvm.register_func
    def scale(x, y, factor):                  # numpy arrays (views of the kernel's buffers)
        np.multiply(x, factor, out=y)

A kernel calls one through ``tl.call_packed("my.scale", ins[0], outs[0], 2.0)``. The generated
code fills an argument descriptor per argument and calls, through the global ``@__tl_packed_call``
(which the loader fills like the thread pool's launch slot), one ctypes callback: this module's
trampoline. It looks the name up in the registry *at each call* (a kernel saved and loaded in a
fresh process calls what that process registered under the name), wraps the buffers as numpy
arrays (inputs read-only, outputs writable) and calls the function.

Safety. The trampoline never lets an exception unwind into native frames: whatever the function
raises is kept under a fresh error code that the kernel returns, and ``Module`` raises a
KernelError chained to it (``raise ... from``). ctypes callbacks take the GIL themselves, from
any thread; kernels are called through ctypes with the GIL released, so a call from the calling
thread is correct. An extern never runs inside a parallel loop (an extern stage has no loops and
cannot be computed at another stage's loop; the code generator refuses a packed call inside a
parallel region as a backstop), so pool workers never run Python.

The arrays are views of the kernel's memory, valid only during the call: copy what you keep.

Descriptor layout (what the code generator writes; one per argument, ``DESC_SLOTS`` int64s):
``[kind, dtype index, value or data pointer, ndim, pointer to ndim int64 dims]``. This module
imports only numpy, ctypes and the standard library: deployed kernels load without the compiler.
"""

from __future__ import annotations

import ctypes
import inspect
import itertools
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from .arrays import NDArray

CALL_SLOT = "__tl_packed_call"
DESC_SLOTS = 5
KIND_INT, KIND_FLOAT, KIND_INPUT, KIND_OUTPUT = 0, 1, 2, 3
# dtype index in a descriptor -> numpy dtype name (the kernels' dtypes, in tensorlang's order)
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64")
# Codes a kernel returns for a failed packed call: above the allocation (1..999) and index-check
# (1000 + position) codes. UNBOUND: the loader never filled the call slot.
UNBOUND_CODE = 1 << 24
FIRST_ERROR_CODE, LAST_ERROR_CODE = UNBOUND_CODE + 1, (1 << 30) - 1
MAX_KEPT_ERRORS = 1024  # errors no KernelError collected (raw calls): the oldest are dropped

CALL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32, ctypes.c_void_p)


class PackedFunc:
    """A registered function: its name, the callable, and how many arguments it accepts."""

    def __init__(self, name: str, fn: Callable, check: Callable | None = None):
        self.name = name
        self.fn = fn
        # check(shapes, dtypes, scalars): raises ValueError for arguments the function cannot
        # take, called at build time with the shapes known there (ints, or None for symbolic)
        self.check = check
        # a C function (register_func(name, library=, symbol=)): kernels call it directly
        self.c_symbol: str | None = None
        self.c_library: str | None = None
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without a signature: any count
            self.signature = None

    def accepts(self, nargs: int) -> str | None:
        """None when fn can be called with `nargs` positional arguments, else why not."""
        if self.signature is None:
            return None
        try:
            self.signature.bind(*range(nargs))
        except TypeError:
            return f"{self.name!r} takes {_describe(self.signature)}, the call passes {nargs}"
        return None

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self) -> str:
        return f"PackedFunc({self.name!r})"


def _describe(sig: inspect.Signature) -> str:
    ps = list(sig.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in ps):
        return "any number of arguments"
    pos = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    need = sum(p.default is p.empty for p in pos)
    names = ", ".join(p.name for p in pos)
    count = f"{need}" if need == len(pos) else f"{need} to {len(pos)}"
    return f"{count} arguments ({names})"


_REGISTRY: dict[str, PackedFunc] = {}
_LOCK = threading.Lock()


def register_func(name, f: Callable | None = None, override: bool = False,
                  check: Callable | None = None, *, library=None, symbol: str | None = None):
    """Register `f` under `name` for kernels to call (tl.call_packed); as a decorator too:
    ``@register_func("name")``. A name already registered needs override=True.

    ``register_func(name, library="libfoo.so", symbol="foo")`` registers a C function instead:
    a kernel's call_packed(name, ...) then calls ``foo`` directly, without Python (the C
    convention of tl.call_extern in a tl.extern, runtime/extern_c.py: each tensor as data and
    shape pointers, an int as int64_t, a float as double, an int32_t status returned).
    `symbol` defaults to `name`, `library` to the libraries opened with tl.load_library and
    the process; the symbol must be found now (LookupError, or LoadError for the library)."""
    if callable(name) and f is None:  # @register_func without a name: the function's own
        return register_func(name.__name__, name, override, check)
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_func: the name must be a non-empty str, got {name!r}")
    if "\0" in name or not name.isprintable():
        raise ValueError(f"register_func: name {name!r} must be printable text")
    if library is not None or symbol is not None:
        if f is not None or check is not None:
            raise TypeError(f"register_func({name!r}): a C function (library=/symbol=) takes "
                            "no Python callable nor check")
        return _register_c(name, symbol if symbol is not None else name, library, override)

    def do(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_func({name!r}): expected a callable, got "
                            f"{type(fn).__name__}")
        with _LOCK:
            if name in _REGISTRY and not override:
                raise ValueError(f"register_func: {name!r} is already registered; pass "
                                 "override=True to replace it")
            _REGISTRY[name] = PackedFunc(name, fn, check)
        return fn

    return do if f is None else do(f)


def _register_c(name: str, symbol: str, library, override: bool) -> PackedFunc:
    from . import extern_c

    extern_c.check_symbol(symbol)
    path = extern_c.find(symbol, None if library is None else library)
    fn = PackedFunc(name, _c_only(name, symbol))
    fn.c_symbol, fn.c_library = symbol, path
    with _LOCK:
        if name in _REGISTRY and not override:
            raise ValueError(f"register_func: {name!r} is already registered; pass "
                             "override=True to replace it")
        _REGISTRY[name] = fn
    return fn


def _c_only(name: str, symbol: str) -> Callable:
    def refuse(*_args):
        raise TypeError(f"{name!r} is the C function {symbol!r}: kernels call it directly "
                        "(rebuild a kernel built while the name held a Python function)")
    return refuse


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The function registered under `name` (TVM's tvm.get_global_func)."""
    got = _REGISTRY.get(name)
    if got is None and not allow_missing:
        raise ValueError(f"no packed function named {name!r} is registered (registered: "
                         f"{list_global_func_names()}); register it with tl.register_func")
    return got


def list_global_func_names() -> list[str]:
    return sorted(_REGISTRY)


def remove_global_func(name: str) -> None:
    with _LOCK:
        if _REGISTRY.pop(name, None) is None:
            raise ValueError(f"no packed function named {name!r} is registered")


# ----------------------------------------------------------------------------- errors

_ERRORS: OrderedDict = OrderedDict()  # code -> (function name, exception)
_CODES = itertools.cycle(range(FIRST_ERROR_CODE, LAST_ERROR_CODE + 1))


def _keep(name: str, exc: BaseException) -> int:
    with _LOCK:
        code = next(_CODES)
        _ERRORS[code] = (name, exc)
        while len(_ERRORS) > MAX_KEPT_ERRORS:
            _ERRORS.popitem(last=False)
    return code


def take_error(code: int) -> tuple[str, BaseException | None] | None:
    """(message, exception) for a code a kernel returned from a failed packed call (the
    exception is handed out once), or None for a code of another kind."""
    if code == UNBOUND_CODE:
        why = f"the kernel calls packed functions, but its loader did not bind @{CALL_SLOT}"
        return why, None
    if not FIRST_ERROR_CODE <= code <= LAST_ERROR_CODE:
        return None
    with _LOCK:
        got = _ERRORS.pop(code, None)
    if got is None:
        return "a packed function call failed (its exception was already reported)", None
    name, exc = got
    return f"packed function {name!r} raised {type(exc).__name__}: {exc}", exc


# ----------------------------------------------------------------------------- the trampoline


def _unpack(nargs: int, desc: int) -> list:
    raw = (ctypes.c_int64 * (DESC_SLOTS * nargs)).from_address(desc) if nargs else ()
    out = []
    for a in range(nargs):
        kind, dtype, value, ndim, dims = raw[DESC_SLOTS * a:DESC_SLOTS * (a + 1)]
        if kind == KIND_INT:
            out.append(int(value))
        elif kind == KIND_FLOAT:
            out.append(struct.unpack("=d", struct.pack("=q", value))[0])
        else:
            shape = tuple((ctypes.c_int64 * ndim).from_address(dims)) if ndim else ()
            out.append(_array(value, np.dtype(DTYPES[dtype]), shape, kind == KIND_OUTPUT))
    return out


def _array(ptr: int, dtype: np.dtype, shape: tuple, writable: bool) -> np.ndarray:
    n = 1
    for d in shape:
        n *= d
    mem = (ctypes.c_char * (n * dtype.itemsize)).from_address(ptr) if n else bytearray(0)
    # an NDArray (a numpy array with TVM's .numpy() / .copyto()): TVM's packed functions get
    # tvm.nd.NDArray arguments, and scripts written for it call those methods
    arr = np.frombuffer(mem, dtype=dtype).reshape(shape).view(NDArray)
    if not writable:
        arr.flags.writeable = False
    return arr


def _call(name_p: bytes, nargs: int, desc: int) -> int:
    name = "?"
    try:
        name = name_p.decode("utf-8", "replace")
        fn = _REGISTRY.get(name)
        if fn is None:
            raise LookupError(f"no packed function named {name!r} is registered in this "
                              "process (tl.register_func)")
        args = _unpack(nargs, desc)
        why = fn.accepts(len(args))
        if why is not None:
            raise TypeError(why)
        fn(*args)
        return 0
    except BaseException as e:  # noqa: BLE001 - nothing may unwind into the kernel's frames
        return _keep(name, e)


_TRAMPOLINE = CALL_TYPE(_call)


def trampoline_address() -> int:
    """What a kernel's ``@__tl_packed_call`` must hold."""
    return ctypes.cast(_TRAMPOLINE, ctypes.c_void_p).value


def bind_slot(slot_address: int | None) -> None:
    """Store the trampoline's address in a loaded kernel's call slot (if it has one)."""
    if slot_address:
        ctypes.c_void_p.from_address(slot_address).value = trampoline_address()


# ----------------------------------------------------------------------------- built-ins


def _matmul_operands(a, b, transa, transb):
    x = a.T if transa else a
    y = b.T if transb else b
    return x, y


def _check_matmul(shapes, dtypes, scalars) -> None:
    if len(shapes) != 3 or any(s is None or len(s) != 2 for s in shapes):
        raise ValueError("tl.cblas.matmul takes three 2-D buffers (A, B, C) then optional "
                         "transa, transb flags")
    if len(set(dtypes)) != 1 or dtypes[0] not in ("float32", "float64"):
        raise ValueError(f"tl.cblas.matmul needs A, B and C of one float32 or float64 dtype, "
                         f"got {', '.join(dtypes)}")
    transa, transb = (list(scalars) + [0, 0])[:2]
    m, k = shapes[0][::-1] if transa else shapes[0]
    k2, n = shapes[1][::-1] if transb else shapes[1]
    known = all(isinstance(d, int) for d in (m, k, k2, n, *shapes[2]))
    if known and (k != k2 or tuple(shapes[2]) != (m, n)):
        raise ValueError(f"tl.cblas.matmul: op(A) is {m}x{k}, op(B) is {k2}x{n} and C is "
                         f"{shapes[2][0]}x{shapes[2][1]}: need (m, k) x (k, n) -> (m, n)")


def cblas_matmul(a, b, c, transa=0, transb=0) -> None:
    """C = op(A) @ op(B), op transposing where the flag is set (numpy's BLAS sgemm/dgemm)."""
    x, y = _matmul_operands(a, b, transa, transb)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0] or \
            c.shape != (x.shape[0], y.shape[1]):
        raise ValueError(f"tl.cblas.matmul: op(A) {x.shape} x op(B) {y.shape} -> C {c.shape} "
                         "does not match")
    np.matmul(x, y, out=c)


register_func("tl.cblas.matmul", cblas_matmul, check=_check_matmul)
# TVM's name for it (its extern tutorial calls call_packed("tvm.contrib.cblas.matmul", ...))
register_func("tvm.contrib.cblas.matmul", cblas_matmul, check=_check_matmul)


__all__ = [
    "CALL_SLOT",
    "PackedFunc",
    "cblas_matmul",
    "get_global_func",
    "list_global_func_names",
    "register_func",
    "remove_global_func",
    "take_error",
    "trampoline_address",
]
