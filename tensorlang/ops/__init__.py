"""The operator library (TVM's TOPI): for each operator its compute, declared with numpy
semantics and its pattern kind (attrs["pattern"], tag = the operator's name), and default x86
schedules for any composition of library ops (`default_schedule`)."""

from . import schedule  # noqa: F401
from ._base import PATTERNS, pattern_of  # noqa: F401
from .elemwise import *
from .nn import *
from .reduce import argmax, argmin, max, mean, min, prod, sum  # noqa: F401
from .schedule import default_schedule  # noqa: F401
from .transform import *
