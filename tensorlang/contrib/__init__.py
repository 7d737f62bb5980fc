"""``tvm.contrib`` (``tensorlang.contrib``): the pieces of it TVM's CPU tutorials use.

``utils.tempdir()`` (a temporary folder with ``relpath``), ``cblas.matmul(A, B, transa,
transb)`` (a BLAS matmul as an extern op). Other ``tvm.contrib`` modules are not here; each one
that TVM's tutorials import is refused by name when it is imported
(``tensorlang.contrib.graph_executor``, ``tensorlang.contrib.cc``: tvm_names.REFUSED_IMPORTS)."""
