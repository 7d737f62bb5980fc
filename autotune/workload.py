"""Template-free tasks: ``@autotune.workload`` registers a function that declares a compute and
returns its argument tensors (inputs, then outputs), as Ansor's ``register_workload``;
``autotune.create_task(fn, args=(...), target="llvm")`` makes a task whose search space is
generated from the compute itself (sketch.py: the rules; sketch_fill.py: the decisions).

    @autotune.workload
    def matmul_relu(M, N, K):
        A = tl.placeholder((M, K), name="A"); B = tl.placeholder((K, N), name="B")
        k = tl.reduce_axis((0, K), name="k")
        C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
        return [A, B, tl.compute((M, N), lambda i, j: tl.max(C[i, j], 0.0), name="D")]

    task = autotune.create_task(matmul_relu, args=(512, 512, 512))

The task is an ordinary Task (its space is a ConfigSpace of generated knobs), so the tuners,
measurement, records, resume and apply_history_best work on it unchanged. What differs: its
records are keyed by the compute's *structural* hash (ops, shapes, dtypes and expressions up to
the names of tensors and loop variables), not by the printed kernel's text, so renaming a
tensor keeps its records valid while changing a shape or an expression invalidates them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from ..ir.expr import Call, Const, Node, Var
from ..ir.stmt import IterVar, Range
from .space import ConfigSpace
from .task import (
    TEMPLATES,
    Task,
    Template,
    TemplateError,
    count_flops,
    get_config,
    is_placeholder,
)


class WorkloadTemplate(Template):
    """A registered workload function seen as a template whose knobs the sketch rules
    generate from its compute (the function itself reads no config)."""

    template_free = True

    def __init__(self, name: str, func: Callable):
        super().__init__(name, _sketched(func, name), None, None)
        self.workload_func = func
        # where a worker process finds the function: the module that registered it
        self.module = func.__module__

    def declare(self, args: tuple) -> list:
        """The function's tensors for `args`, checked: a list of tensors, placeholders
        first, at least one compute."""
        return declare_tensors(self.workload_func, self.name, args)


def declare_tensors(func: Callable, name: str, args: tuple) -> list:
    from ..te.tensor import PlaceholderOp, Tensor

    try:
        out = func(*args)
    except TypeError as e:
        raise TemplateError(f"workload {name!r} called with args={list(args)}: {e}") from None
    if isinstance(out, Tensor):
        out = [out]
    if isinstance(out, (list, tuple)) and any(isinstance(t, Var) for t in out):
        names = ", ".join(t.name for t in out if isinstance(t, Var))
        raise TemplateError(f"workload {name!r} lists the scalar parameter(s) {names}: a "
                            "template-free workload takes tensors only; tune a kernel with "
                            "scalar parameters through an @autotune.template")
    if not isinstance(out, (list, tuple)) or not out or \
            not all(isinstance(t, Tensor) for t in out):
        raise TemplateError(f"workload {name!r} must return a list of tensors (its inputs, "
                            f"then its outputs), got {type(out).__name__}")
    if all(isinstance(t.op, PlaceholderOp) for t in out):
        raise TemplateError(f"workload {name!r} returned only placeholders: the list must end "
                            "with the computed output tensor(s)")
    return list(out)


def _sketched(func: Callable, name: str) -> Callable:
    """The template body of a workload: declare the compute once per task, then build the
    schedule the current config's decisions describe."""
    from . import sketch
    from .task import computes_once

    def run(*args):
        cfg = get_config()
        tensors = computes_once(lambda: declare_tensors(func, name, args))
        dag = sketch.analyze(tensors)
        sketch.declare_knobs(cfg, dag)
        if isinstance(cfg, ConfigSpace):
            # collecting the knobs: the first candidates need not form a legal schedule
            import tensorlang as tl

            return tl.create_schedule(dag.outputs), tensors
        return sketch.apply(cfg, dag), tensors

    run.__name__ = name
    run.__qualname__ = name
    run.__module__ = func.__module__
    return run


def workload(func: Callable | None = None, *, name: str | None = None):
    """Register a workload function (``@workload`` or ``@workload(name="...")``); the name
    defaults to the function's. A template of the same name is refused (records would mix)."""
    def deco(f: Callable) -> Callable:
        if not callable(f):
            raise TypeError(f"autotune.workload: expected a function, got {type(f).__name__}")
        key = name if name is not None else f.__name__
        if not isinstance(key, str) or not key:
            raise TemplateError("autotune.workload: the name must be a non-empty string")
        _builtin_templates()  # registered lazily: a later lookup must not replace this one
        old = TEMPLATES.get(key)
        if old is not None and not isinstance(old, WorkloadTemplate):
            raise TemplateError(f"autotune.workload: {key!r} is already a template's name")
        TEMPLATES[key] = WorkloadTemplate(key, f)
        f.workload_name = key
        return f

    return deco(func) if func is not None else deco


def _builtin_templates() -> None:
    import importlib

    from .task import _BUILTIN_TEMPLATE_MODULES

    for mod in _BUILTIN_TEMPLATE_MODULES:
        importlib.import_module(mod)


def workload_name(fn) -> str:
    """The registered name of a workload function or name; TemplateError when it is not one."""
    key = fn if isinstance(fn, str) else getattr(fn, "workload_name", None)
    if key is None or not isinstance(TEMPLATES.get(key), WorkloadTemplate):
        what = repr(fn) if isinstance(fn, str) else getattr(fn, "__name__", repr(fn))
        raise TemplateError(f"create_task: {what} is not a registered workload; decorate the "
                            "function with @autotune.workload first")
    if not isinstance(fn, str) and TEMPLATES[key].workload_func is not fn:
        raise TemplateError(f"create_task: function {fn.__name__} is not the one registered as "
                            f"workload {key!r}")
    return key


class WorkloadTask(Task):
    """A template-free task: the space comes from the sketch rules; records are keyed by
    the structural hash of the compute."""

    template_free = True

    def _compute_def(self) -> None:
        import tensorlang as tl

        tensors = self.template.declare(self.args)
        self._compute_hash = structural_hash(tensors)
        outs = [t for t in tensors if not is_placeholder(t)]
        func = tl.lower(tl.create_schedule(outs), tensors, name="workload")
        self._flop = count_flops(func) or count_flops(func, float_only=False) or 1.0

    def reference_schedule(self):
        """The compute as declared, without schedule decisions: a sketch's fallback point can
        be one the rules refuse (a conv's fallback register tile of 1024 elements raised
        TileTooLarge and stopped the tuning before its first trial)."""
        import tensorlang as tl

        tensors = self.template.declare(self.args)
        return tl.create_schedule([t for t in tensors if not is_placeholder(t)]), tensors


def is_workload(name) -> bool:
    return isinstance(name, str) and isinstance(TEMPLATES.get(name), WorkloadTemplate) or \
        (callable(name) and hasattr(name, "workload_name"))


# --------------------------------------------------------------------------------- hashing
def structural_hash(tensors) -> str:
    """A hash of the compute DAG of `tensors` (the workload's argument list): for each op in
    order, its kind, shapes, dtypes and body expressions, with tensors named by position and
    loop variables by role; names and tags never enter it."""
    h = hashlib.sha256()
    for item in _Canon(tensors).items():
        h.update(repr(item).encode())
    return h.hexdigest()[:16]


class _Canon:
    def __init__(self, tensors):
        self.args = list(tensors)
        self.ops: dict[int, int] = {}  # id(op) -> position
        self.order: list = []
        for t in self.args:
            self._visit(t.op)

    def _visit(self, op) -> None:
        stack = [(op, False)]
        while stack:  # post-order without recursion: producers get the lower numbers
            cur, done = stack.pop()
            if id(cur) in self.ops:
                continue
            if done:
                self.ops[id(cur)] = len(self.order)
                self.order.append(cur)
                continue
            stack.append((cur, True))
            for t in reversed(cur.input_tensors):
                stack.append((t.op, False))

    def items(self):
        yield ("args", tuple((self.ops[id(t.op)], t.value_index) for t in self.args))
        for op in self.order:
            yield self._op(op)

    def _op(self, op):
        from ..te.tensor import PlaceholderOp

        if isinstance(op, PlaceholderOp):
            t = op.output(0)
            return ("placeholder", t.dtype, tuple(self._expr(s, {}) for s in t.shape))
        names = {}
        for n, iv in enumerate(op.axis):
            names[id(iv.var)] = f"a{n}"
        for n, iv in enumerate(op.reduce_axis):
            names[id(iv.var)] = f"r{n}"
        axes = tuple(self._expr(iv, names) for iv in (*op.axis, *op.reduce_axis))
        body = getattr(op, "body", None)
        if body is None:
            raise TemplateError(f"workload: op {op.name} ({type(op).__name__}) is not a "
                                "compute; template-free tuning handles placeholders and "
                                "computes")
        return ("compute", axes, tuple(self._expr(b, names) for b in body))

    def _expr(self, e, names: dict):
        from ..te.tensor import Reduce, TensorRead

        if isinstance(e, Var):
            return ("var", names.setdefault(id(e), f"v{len(names)}"), e.dtype)
        if isinstance(e, Const):
            return ("const", e.dtype, repr(e.value))
        if isinstance(e, TensorRead):
            return ("read", self.ops[id(e.tensor.op)], e.tensor.value_index,
                    tuple(self._expr(i, names) for i in e.indices))
        if isinstance(e, Reduce):
            return ("reduce", self._reducer(e), tuple(self._expr(s, names) for s in e.source),
                    tuple(self._expr(a, names) for a in e.axis),
                    self._expr(e.condition, names), e.value_index)
        if isinstance(e, IterVar):
            return ("iv", e.kind, self._expr(e.var, names), self._expr(e.dom, names))
        if isinstance(e, Range):
            return ("range", self._expr(e.min, names), self._expr(e.extent, names))
        if isinstance(e, Call):
            return ("call", e.name, e.dtype, tuple(self._expr(a, names) for a in e.args))
        if isinstance(e, Node):
            return (type(e).__name__,
                    *(self._expr(getattr(e, f), names) for f in e.fields()))
        if isinstance(e, tuple):
            return tuple(self._expr(x, names) for x in e)
        return e  # None, a string field (dtype), a number

    def _reducer(self, red) -> tuple:
        """A reducer by what it computes: its combine on fresh variables and its identity."""
        dtypes = tuple(s.dtype for s in red.source)
        lhs = tuple(Var(f"x{i}", d) for i, d in enumerate(dtypes))
        rhs = tuple(Var(f"y{i}", d) for i, d in enumerate(dtypes))
        names = {id(v): f"x{i}" for i, v in enumerate(lhs)}
        names.update({id(v): f"y{i}" for i, v in enumerate(rhs)})
        return (tuple(self._expr(c, names) for c in red.combiner.combine(lhs, rhs)),
                tuple(self._expr(c, names) for c in red.combiner.identity(dtypes)),
                red.combiner.commutative)
