"""tensorlang: a schedule-based tensor operator compiler (tensor expressions, schedules,
exact islpy legality, LLVM code generation, auto-tuning, a graph layer).

The compiler's names are imported on first use (PEP 562 ``__getattr__``), not with the package:
``import tensorlang.runtime`` runs this file, and a deployed kernel or model loads through it
with no compiler module imported (DESIGN.md §7). ``tl.compute`` and the rest behave as before;
only when their modules load has changed.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import sys as _sys
import types as _types

from .errors import LoweringError, ScheduleError, TensorlangError, TVMError  # noqa: F401
from .version import __version__  # noqa: F401

# name -> the module that defines it. The tensor-expression language's names (tl.compute,
# tl.placeholder, tl.sum, tl.exp, ...) are not listed: they are tensorlang.te's public names,
# looked up there, as `from .te import *` used to make them.
_NAMES = {
    "build": ".build",
    "lower": ".lower",
    "const": ".ir.expr",
    "cpu": ".runtime.device",
    "device": ".runtime.device",
    "Schedule": ".schedule",
    "Stage": ".schedule",
    "Trace": ".schedule",
    "create_schedule": ".schedule",
    "BuildTimeoutError": ".codegen.compile_limit",
    "extern": ".te.extern",
    "call_packed": ".te.extern",
    "call_extern": ".te.extern",
    "call_pure_extern": ".te.extern",
    "load_library": ".runtime.extern_c",
    "register_func": ".runtime.packed",
    "get_global_func": ".runtime.packed",
    "scan": ".te.scan",
    "convert": ".runtime.convert",  # tvm.convert before TVM 0.7, tvm.runtime.convert now
}


def _te_name(name: str):
    te = _importlib.import_module(".te", __name__)
    if name in vars(te):
        return vars(te)[name]
    if _importlib_util.find_spec(f"{te.__name__}.{name}") is not None:
        return _importlib.import_module(f"{te.__name__}.{name}")  # tl.intrin, tl.extern...
    raise AttributeError(name)


def __getattr__(name: str):
    if name in _NAMES:
        value = getattr(_importlib.import_module(_NAMES[name], __name__), name)
    elif name.startswith("_"):
        raise AttributeError(f"module 'tensorlang' has no attribute {name!r}")
    elif name in ("relay", "relax", "topi", "autotvm", "rpc", "script", "meta_schedule",
                  "hybrid"):
        # TVM modules we do not have: their stub modules refuse at import (for `from tensorlang
        # import relay`); the attribute is an AttributeError saying the same (tvm_names.py)
        from .tvm_names import MODULE_NAMES, missing

        raise missing("module 'tensorlang'", name, MODULE_NAMES)
    elif _importlib_util.find_spec(f"{__name__}.{name}") is not None:
        value = _importlib.import_module(f".{name}", __name__)  # a subpackage: tl.ops, tl.te...
    else:
        try:
            value = _te_name(name)
        except AttributeError:
            # a TVM name we spell differently or do not have: the error says which (tvm_names.py)
            from .tvm_names import MODULE_NAMES, missing

            raise missing("module 'tensorlang'", name, MODULE_NAMES) from None
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    te = _importlib.import_module(".te", __name__)
    public = {n for n in vars(te) if not n.startswith("_")}
    return sorted(set(globals()) | set(_NAMES) | public)


class _Package(_types.ModuleType):
    """tensorlang.build and tensorlang.lower are submodules named after the function each
    defines; tl.build / tl.lower are the functions (as when this file imported them eagerly), so
    importing such a submodule, which sets the package's attribute, sets the function."""

    def __setattr__(self, name: str, value) -> None:
        if name in ("build", "lower") and isinstance(value, _types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)

    def __reduce__(self):
        # a module pickles by name (cloudpickle, dask and multiprocessing send functions that
        # use tl): ModuleType's own rule does not reach a subclass
        return _importlib.import_module, (self.__name__,)


_sys.modules[__name__].__class__ = _Package
