"""The exception hierarchy. Every error tensorlang raises on purpose derives from TensorlangError,
except argument errors at a call site, which are the usual TypeError / ValueError."""


class TensorlangError(RuntimeError):
    """Base class of tensorlang's own errors. A RuntimeError, as TVM's TVMError is: TVM scripts
    catch a refused schedule with `except RuntimeError` or `except tvm.error.TVMError`."""


TVMError = TensorlangError  # tvm.error.TVMError, tvm.TVMError


class ScheduleError(TensorlangError):
    """A schedule primitive was refused: misuse, or a legality (dependence) violation."""


class LoweringError(TensorlangError):
    """A schedule could not be lowered to loop IR (e.g. an unbounded region)."""
