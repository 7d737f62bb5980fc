"""tensorlang: a schedule-based tensor operator compiler (tensor expressions, schedules,
exact islpy legality, LLVM code generation, auto-tuning, a graph layer)."""

from .version import __version__  # noqa: F401

from .errors import LoweringError, ScheduleError, TensorlangError  # noqa: F401
from .ir.expr import const  # noqa: F401
from .te import *  # noqa: F401,F403
from .te import placeholder, compute, reduce_axis, var  # noqa: F401
from .schedule import Schedule, Stage, Trace, create_schedule  # noqa: F401
from .lower import lower  # noqa: F401
from .build import build  # noqa: F401,E402
from . import runtime  # noqa: F401,E402
from . import analysis  # noqa: F401,E402
from . import ops  # noqa: F401,E402
