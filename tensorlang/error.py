"""``tvm.error`` (``tl.error``): ``tvm.error.TVMError``, the base of the errors tensorlang raises
on purpose (``tl.TensorlangError``; a RuntimeError, as TVM's). Argument errors at a call are
the usual TypeError / ValueError, where TVM raises its TVMError too."""

from .errors import TVMError

__all__ = ["TVMError"]
