"""The operator library (TVM's TOPI): for each operator its compute, declared with numpy
semantics and its pattern kind (attrs["pattern"], tag = the operator's name), and default x86
schedules for any composition of library ops (`default_schedule`)."""

from ._base import PATTERNS, pattern_of  # noqa: F401
from .elemwise import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .reduce import argmax, argmin, max, mean, min, prod, sum  # noqa: F401,A004
from .transform import *  # noqa: F401,F403
from . import schedule  # noqa: E402
from .schedule import default_schedule  # noqa: E402
