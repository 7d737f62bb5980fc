"""The tensor expression language: what a kernel computes."""
from .intrin import *
from .tensor import (  # noqa: F401
                     CommReducer,
                     ComputeOp,
                     PlaceholderOp,
                     Reduce,
                     Tensor,
                     TensorRead,
                     compute,
                     placeholder,
                     reduce_axis,
                     var,
)
