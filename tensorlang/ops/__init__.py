"""The operator library (TVM's TOPI): for each operator its compute, declared with numpy
semantics, and its typed definition (definition.py; all of them in catalog.py): pattern kind,
internal stages, default schedule with its declared knobs, tuning template, numpy reference.
Each library compute carries its definition (attrs["definition"]); `default_schedule` gives a
fast x86 schedule to any composition of library ops by reading them. docs/operators.md says
how to add an operator."""

from . import (
    catalog,  # noqa: F401 - declares every op
    schedule,  # noqa: F401
)
from ._base import PATTERNS, pattern_of  # noqa: F401
from .conv_transpose import *
from .definition import (  # noqa: F401
    AnchorSchedule,
    CompositeSchedule,
    Knob,
    OpDefinition,
    Part,
    all_definitions,
    definition_of,
    get_definition,
)
from .elemwise import *
from .indexing import *
from .nn import *
from .patterns import Pattern  # noqa: F401
from .quant import (  # noqa: F401
    dense_integer,
    dequantize_linear,
    per_axis_shape,
    qlinear_conv2d,
    quantize_linear,
    requantize,
)
from .reduce import argmax, argmin, cumprod, cumsum, max, mean, min, prod, sum  # noqa: F401
from .resize import resize  # noqa: F401
from .rnn import rnn_recurrence  # noqa: F401
from .schedule import default_schedule  # noqa: F401
from .sort import topk  # noqa: F401
from .transform import *
from .vision_misc import *
from .winograd import conv2d_winograd_nchwc, winograd_weight  # noqa: F401
