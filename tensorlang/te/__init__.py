"""The tensor expression language: what a kernel computes."""
from .intrin import *  # noqa: F401,F403
from .tensor import (CommReducer, ComputeOp, PlaceholderOp, Reduce, Tensor, TensorRead,  # noqa: F401
                     compute, placeholder, reduce_axis, var)
