"""The intermediate representation shared by every stage of the pipeline."""

# TVM's tvm.ir.register_op_attr / register_intrin_lowering: importable, refused when called
from ..tvm_names import register_intrin_lowering, register_op_attr  # noqa: F401


def __getattr__(name: str):
    # a TVM name we do not have (tvm.ir.save_json, ...): the error says what to use
    from ..tvm_names import MODULE_NAMES, missing

    raise missing("module 'tensorlang.ir'", name, MODULE_NAMES)
