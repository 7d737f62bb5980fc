"""The tensor expression language: what a kernel computes."""
from ..ir.expr import const  # noqa: F401  (TVM's te.const)
from .extern import (  # noqa: F401  (TVM's te.extern, tir.call_extern / call_pure_extern)
                     ExternOp,
                     call_extern,
                     call_packed,
                     call_pure_extern,
                     extern,
)
from .intrin import *
from .scan import ScanOp, scan  # noqa: F401  (TVM's te.scan)
from .tag import tag_scope  # noqa: F401  (TVM's te.tag_scope)
from .tensor import (  # noqa: F401
                     CommReducer,
                     ComputeOp,
                     PlaceholderOp,
                     Reduce,
                     Tensor,
                     TensorRead,
                     TensorSlice,
                     compute,
                     placeholder,
                     reduce_axis,
                     size_var,
                     var,
)
from .tensorize import decl_tensor_intrin  # noqa: F401  (TVM's te.decl_tensor_intrin)


def __getattr__(name: str):
    # `from tensorlang import te` as TVM scripts write it: te.create_schedule is
    # tl.create_schedule (tensorlang.schedule imports this package, so it is looked up lazily;
    # te.extern and te.scan are imported above instead: a lazy name equal to a submodule's would be
    # shadowed by the submodule once something imports it)
    if name in ("create_schedule", "Schedule", "Stage"):
        from .. import schedule

        return getattr(schedule, name)
    from ..tvm_names import MODULE_NAMES, missing

    raise missing("module 'tensorlang.te'", name, MODULE_NAMES)
