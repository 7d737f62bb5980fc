"""The intermediate representation shared by every stage of the pipeline."""

# TVM's tvm.ir.register_op_attr / register_intrin_lowering: importable, refused when called
from ..tvm_names import register_intrin_lowering, register_op_attr  # noqa: F401
