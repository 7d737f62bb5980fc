"""tensorlang: a schedule-based tensor operator compiler (tensor expressions, schedules,
exact islpy legality, LLVM code generation, auto-tuning, a graph layer)."""

from . import (
    analysis,  # noqa: F401
    ops,  # noqa: F401
    runtime,  # noqa: F401
)
from .build import build  # noqa: F401
from .errors import LoweringError, ScheduleError, TensorlangError  # noqa: F401
from .ir.expr import const  # noqa: F401
from .lower import lower  # noqa: F401
from .runtime.device import cpu, device  # noqa: F401
from .runtime.packed import get_global_func, register_func  # noqa: F401
from .schedule import Schedule, Stage, Trace, create_schedule  # noqa: F401
from .te import *
from .te import compute, placeholder, reduce_axis, var  # noqa: F401
from .te.extern import call_packed, extern  # noqa: F401
from .version import __version__  # noqa: F401


def __getattr__(name: str):
    # tl.BuildTimeoutError without importing the code generator with the package: a deployed
    # model loads through tensorlang.runtime with no compiler module imported (DESIGN.md §7)
    if name == "BuildTimeoutError":
        from .codegen.compile_limit import BuildTimeoutError

        return BuildTimeoutError
    # a TVM name we spell differently or do not have: the error says which (tvm_names.py)
    from .tvm_names import MODULE_NAMES, missing

    raise missing("module 'tensorlang'", name, MODULE_NAMES)
