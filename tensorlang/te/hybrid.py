"""TVM's `tvm.te.hybrid` is not in tensorlang: importing this stub says what to use
(tensorlang/tvm_names.py, REFUSED_IMPORTS)."""

from tensorlang.tvm_names import refuse_import

raise refuse_import(__name__)
