"""tensorlang: a schedule-based tensor operator compiler (tensor expressions, schedules,
exact islpy legality, LLVM code generation, auto-tuning, a graph layer)."""

from . import (
    analysis,  # noqa: F401
    ops,  # noqa: F401
    runtime,  # noqa: F401
)
from .build import build  # noqa: F401
from .codegen.compile_limit import BuildTimeoutError  # noqa: F401
from .errors import LoweringError, ScheduleError, TensorlangError  # noqa: F401
from .ir.expr import const  # noqa: F401
from .lower import lower  # noqa: F401
from .schedule import Schedule, Stage, Trace, create_schedule  # noqa: F401
from .te import *
from .te import compute, placeholder, reduce_axis, var  # noqa: F401
from .version import __version__  # noqa: F401
