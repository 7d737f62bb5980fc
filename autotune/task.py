"""Templates, tasks and dispatch contexts.

``@template(name)`` registers a function ``(*args) -> (schedule, tensors)`` that reads its knobs
from ``get_config()``. Calling the registered function asks the current dispatch context for a
config: the innermost ``apply_history_best`` / ``ApplyConfig`` context, else the template's
fallback config. A ``Task`` is a template applied to concrete arguments: its space, its FLOP count
and the hash of its compute definition (what a record must match to be replayed).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import inspect
import json
import sys
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from ..ir import stmt as S
from ..ir.expr import Var, as_int
from ..ir.functor import count_arith
from . import space
from .space import ConfigEntity, ConfigSpace, FallbackConfig
from .timelimit import alarm_handler, time_limit

# TVM's path to the config entities (`from tvm.autotvm.task.space import SplitEntity`, in
# templates' fallback configs): this module is not a package, so the name is registered here
sys.modules[f"{__name__}.space"] = space

# Templates shipped with tensorlang, imported on first lookup of a name they might define (so
# that importing tensorlang -- or even tensorlang.autotune -- registers nothing eagerly).
_BUILTIN_TEMPLATE_MODULES = ("tensorlang.autotune.templates",)

_local = threading.local()


class TemplateError(ValueError):
    """Unknown template, or a template used outside its contract."""


class Template:
    def __init__(self, name: str, func: Callable, reference: Callable | None,
                 flop: Callable | None):
        self.name = name
        self.func = func
        self.reference = reference
        self.flop = flop
        self.module = func.__module__
        self._importable: bool | None = None
        functools.update_wrapper(self, func)

    def worker_spec(self) -> str | bytes:
        """How a tuning worker process gets this template (:func:`load_template`). Workers never
        import the user's ``__main__`` (workers.py): a template registered by an importable
        module travels as that module's name (importing it registers the template); one
        defined in a script (``__main__``) or in a module no worker could import by name
        travels by value, pickled with cloudpickle (its code, and the globals it reads as they
        are now)."""
        if self._importable is None:
            self._importable = _importable_by_name(self.module)
        if self._importable:
            return self.module
        import io

        buf = io.BytesIO()
        try:
            _pickler_by_value()(buf).dump(self)
            return buf.getvalue()
        except Exception as e:  # noqa: BLE001 - whatever the pickler refuses, said once here
            raise TemplateError(
                f"template {self.name!r} (defined in {self.module}) cannot be sent to the "
                f"tuning worker processes: {type(e).__name__}: {e}. A template defined in a "
                "script travels by value; define it in an importable module instead, or keep "
                "objects that cannot be pickled (open files, locks) out of what it reads") \
                from None

    def flop_of(self, args: tuple) -> float:
        """flop(*args); where flop names a parameter the task's arguments leave to its default
        (matmul's flop takes dtype; create_task("matmul", (64, 64, 64)) does not give it), the
        template's default fills it in (flop raised TypeError once the first trial was run)."""
        try:
            inspect.signature(self.flop).bind(*args)
        except (TypeError, ValueError):  # (ValueError: a callable without a signature)
            try:
                bound = inspect.signature(self.func).bind(*args)
                bound.apply_defaults()
                args = bound.args
            except (TypeError, ValueError):
                pass  # flop raises its own error below
        return float(self.flop(*args))

    def __call__(self, *args):
        """Build (schedule, tensors) with the config the current dispatch context picks."""
        cfg = DispatchContext.current.query("llvm", self.name, args)
        return self.run_with(cfg, args)

    def run_with(self, cfg, args: tuple):
        prev = getattr(_local, "cfg", None)
        _local.cfg = cfg
        try:
            out = self.func(*args)
        finally:
            _local.cfg = prev
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TemplateError(f"template {self.name!r} must return (schedule, tensors)")
        if not isinstance(out[1], (list, tuple)):
            # (s, C) used to fail later, in the build, far from the template
            raise TemplateError(f"template {self.name!r} must return (schedule, tensors) with "
                                f"tensors a list of the kernel's arguments, got "
                                f"{type(out[1]).__name__}")
        return out


TEMPLATES: dict[str, Template] = {}


def template(name: str, reference: Callable | None = None, flop: Callable | None = None):
    """Register a tunable template under `name`.

    reference(*numpy inputs) -> the expected output(s) (the runner checks kernels against it;
    without it, against the fallback config's kernel); flop(*args) -> FLOPs of one call (without
    it, counted from the compute definition)."""
    if not isinstance(name, str) or not name:
        raise TemplateError("template name must be a non-empty string")

    def deco(func: Callable) -> Template:
        t = Template(name, func, reference, flop)
        TEMPLATES[name] = t
        return t

    return deco


def _importable_by_name(module: str) -> bool:
    """Whether another process finds `module` by importing its name (not ``__main__``, not a
    module created from a file path): asks the import system's finders, not sys.modules."""
    if module in ("__main__", "__mp_main__") or not module:
        return False
    top = module.partition(".")[0]
    if top in sys.builtin_module_names:
        return True
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is not None and find_spec(top, None) is not None:
            return True
    return False


def _pickler_by_value():
    """cloudpickle's pickler, which also sends modules of a ModuleType subclass (tensorlang's
    own package object is one) by name, as it does plain modules."""
    import types

    import cloudpickle

    class Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, obj):
            if isinstance(obj, types.ModuleType) and type(obj) is not types.ModuleType and \
                    _importable_by_name(obj.__name__):
                return importlib.import_module, (obj.__name__,)
            return super().reducer_override(obj)

    return Pickler


_LOADED_BY_VALUE: set[str] = set()  # digests of the pickled templates registered here


def load_template(spec: str | bytes) -> None:
    """Register, in a worker process, the template that :meth:`Template.worker_spec` described:
    import its module, or unpickle it (once per distinct pickle)."""
    if isinstance(spec, str):
        if _importable_by_name(spec):
            importlib.import_module(spec)
        return
    digest = hashlib.sha256(spec).hexdigest()
    if digest in _LOADED_BY_VALUE:
        return
    import cloudpickle

    t = cloudpickle.loads(spec)
    TEMPLATES[t.name] = t
    _LOADED_BY_VALUE.add(digest)


def get_template(name: str) -> Template:
    if name not in TEMPLATES:
        for mod in _BUILTIN_TEMPLATE_MODULES:
            importlib.import_module(mod)
            if name in TEMPLATES:
                break
    if name not in TEMPLATES:
        raise TemplateError(f"no autotune template named {name!r}; known: {sorted(TEMPLATES)}")
    return TEMPLATES[name]


def get_config():
    """The config of the template being run (call it inside a template)."""
    cfg = getattr(_local, "cfg", None)
    if cfg is None:
        raise TemplateError("autotune.get_config() called outside a template")
    return cfg


@contextlib.contextmanager
def instantiate_time_limit(seconds: float | None):
    """Inside (in this thread), Task.instantiate raises TemplateTimeout when a config takes
    longer than `seconds` (a template that loops forever for some knob values): the tuner
    instantiates under its builder's timeout."""
    prev = getattr(_local, "time_limit", None)
    _local.time_limit = seconds
    try:
        with alarm_handler():  # installed once here, not once per config
            yield
    finally:
        _local.time_limit = prev


def computes_once(declare: Callable[[], Any]) -> Any:
    """``declare()``: a template's placeholders and computes (no schedule, no config read),
    declared once per task. Inside ``Task.instantiate`` the first call's tensors are returned
    again for every config: a schedule changes its own stages, never the computes it
    schedules, so configs can share them (declaring a conv's computes is a third of
    instantiating one of its configs, which the cost model's search does by the thousand).
    Elsewhere (a template called under a dispatch context) it calls ``declare()``."""
    shared = getattr(_local, "computes", None)
    if shared is None:
        return declare()
    key = declare.__code__  # one declaration site of the task's template
    if key not in shared:
        shared[key] = declare()
    return shared[key]


# --------------------------------------------------------------------------------- workloads
def normalize_args(args) -> tuple:
    """Arguments as JSON-stable values (lists become tuples)."""
    if not isinstance(args, (list, tuple)):
        # create_task("matmul", 16) used to fail with "'int' object is not iterable"
        raise TypeError(f"template arguments must be a tuple or list, got "
                        f"{type(args).__name__} {args!r} (one argument: ({args!r},))")
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.append(normalize_args(a))
        elif isinstance(a, (bool, int, float, str)) or a is None:
            out.append(a)
        else:
            raise TypeError(f"template arguments must be ints, floats, strings or tuples of "
                            f"them (they name a workload), got {type(a).__name__} {a!r}")
    return tuple(out)


def workload_key(name: str, args) -> str:
    return json.dumps([name, _jsonable(normalize_args(args))])


def _jsonable(x):
    return [_jsonable(v) for v in x] if isinstance(x, tuple) else x


def count_flops(func: S.PrimFunc, float_only: bool = True) -> float:
    """Floating-point operations of a lowered kernel: per store, the float arithmetic in its value
    times the trip count of its loops (run it on the unscheduled kernel: no tail guards)."""
    total = 0.0

    def walk(st, trips: float):
        nonlocal total
        if st is None:
            return
        if isinstance(st, S.For):
            walk(st.body, trips * (as_int(st.extent) or 1))
        elif isinstance(st, S.SeqStmt):
            for x in st.stmts:
                walk(x, trips)
        elif isinstance(st, S.Store):
            total += trips * count_arith(st.value, float_only)
        elif isinstance(st, S.IfThenElse):
            walk(st.then_case, trips)
            walk(st.else_case, trips)
        elif isinstance(st, (S.LetStmt, S.Allocate)):
            walk(st.body, trips)

    walk(func.body, 1.0)
    return total


class Task:
    """A template applied to concrete arguments, for one target."""

    def __init__(self, name: str, args, target: str = "llvm"):
        self.name = name
        self.template = get_template(name)
        self.args = normalize_args(args)
        from ..codegen.target import Target

        # a target the compiler refuses is refused here, not as a build error in every trial
        Target.from_string(target)
        self.target = str(target)
        space = ConfigSpace()
        self.template.run_with(space, self.args)
        self.config_space = space
        self._compute_hash: str | None = None
        self._flop: float | None = None
        self._computes: dict = {}  # computes_once's tensors, by declaration site

    @property
    def workload(self) -> dict:
        return {"name": self.name, "args": _jsonable(self.args), "hash": self.compute_hash}

    @property
    def key(self) -> str:
        return workload_key(self.name, self.args)

    def _default_func(self) -> S.PrimFunc:
        import tensorlang as tl

        _, tensors = self.template.run_with(FallbackConfig(), self.args)
        # the outputs: not the inputs, nor the scalar parameters (tl.var) listed among them
        outs = [t for t in tensors if not isinstance(t, Var) and not is_placeholder(t)]
        return tl.lower(tl.create_schedule(outs), list(tensors), name="workload")

    def _compute_def(self) -> None:
        func = self._default_func()
        # The unscheduled kernel's text names every op, shape, dtype and expression: its hash
        # changes exactly when the compute definition does (not when a schedule does).
        self._compute_hash = hashlib.sha256(str(func).encode()).hexdigest()[:16]
        # integer kernels have no FLOPs: count their arithmetic instead (throughput must stay
        # comparable between configs, and nonzero)
        if self.template.flop:
            self._flop = self.template.flop_of(self.args)
        elif self.config_space.flop > 0:  # the template's cfg.add_flop (TVM's way)
            self._flop = self.config_space.flop
        else:
            self._flop = count_flops(func) or count_flops(func, float_only=False) or 1.0

    @property
    def compute_hash(self) -> str:
        if self._compute_hash is None:
            self._compute_def()
        return self._compute_hash

    @property
    def flop(self) -> float:
        if self._flop is None:
            self._compute_def()
        return self._flop

    def config(self, index: int) -> ConfigEntity:
        return self.config_space.get(index)

    def instantiate(self, config: ConfigEntity | None = None, check: bool = True):
        """(schedule, tensors) for `config`, or under the current dispatch context when None.
        Raises tl.ScheduleError for an illegal config, TemplateTimeout past the time limit
        (instantiate_time_limit). check=False: the schedule's primitives
        skip their legality checks (only the template's own refusals raise); for the cost
        model's features, whose search checks the configs it picks before they are built."""
        if not check:
            from ..schedule.schedule import deferred_checks

            with deferred_checks():
                return self.instantiate(config)
        prev = getattr(_local, "computes", None)
        _local.computes = self._computes
        try:
            with time_limit(getattr(_local, "time_limit", None)):
                if config is None:
                    return self.template(*self.args)
                return self.template.run_with(config, self.args)
        finally:
            _local.computes = prev

    def reference_schedule(self):
        """(schedule, tensors) of the kernel a runner checks candidates against where the
        template has no numpy reference: the fallback config's (the template's default)."""
        from .space import FallbackConfig

        return self.instantiate(FallbackConfig())

    def is_legal(self, config: ConfigEntity) -> bool:
        """Whether `config` instantiates with every legality check passing."""
        from .. import ScheduleError
        from ..analysis import check_schedule

        try:
            s, _ = self.instantiate(config)
            # what the primitives left for tl.lower to refuse (a dependence between stages
            # that a later primitive could have repaired, and none did)
            check_schedule(s)
        except ScheduleError:
            return False
        return True

    def __repr__(self) -> str:
        return f"Task({self.name}, args={list(self.args)}, space={len(self.config_space)})"


def is_placeholder(t) -> bool:
    from ..te.tensor import PlaceholderOp

    return isinstance(t.op, PlaceholderOp)


def create_task(name, args, target: str = "llvm") -> Task:
    """The tuning task of template `name` on `args` (e.g. (1024, 1024, 1024, "float32")), or,
    for a function registered with ``@autotune.workload`` (or its name), a template-free task
    whose space the sketch rules generate from its compute (workload.py)."""
    from .workload import WorkloadTask, is_workload, workload_name

    if is_workload(name) or (callable(name) and not isinstance(name, Template)):
        return WorkloadTask(workload_name(name), args, target)
    return Task(name, args, target)


def create(task_name: str, args, target: str = "llvm", target_host=None) -> Task:
    """TVM's ``autotvm.task.create``: :func:`create_task`. The kernels run on this CPU, which is
    their host: target_host may only be None or the target itself."""
    if target_host is not None and str(target_host) != str(target):
        raise ValueError(f"autotune.task.create: target_host={target_host!r} differs from "
                         f"target={target!r}; CPU kernels are their own host (leave it None)")
    return create_task(task_name, args, target)


# --------------------------------------------------------------------------------- dispatch
class _Current:
    """``DispatchContext.current``, an attribute as in TVM: the innermost context entered, else
    the fallback context."""

    def __get__(self, obj, cls) -> DispatchContext:
        return DispatchContext._stack[-1] if DispatchContext._stack else _FALLBACK


def split_workload(workload, args) -> tuple[str, Any]:
    """(template name, args) of a query: ours, query(target, name, args), or TVM's,
    query(target, workload) with task.workload (a dict here) or a tuple (name, *args)."""
    if args is not None:
        return workload, args
    if isinstance(workload, dict) and {"name", "args"} <= set(workload):
        return workload["name"], workload["args"]
    if isinstance(workload, (tuple, list)) and workload and isinstance(workload[0], str):
        return workload[0], tuple(workload[1:])
    raise TypeError(f"query: expected a workload (task.workload, or a tuple (name, *args)) or "
                    f"a template name and its args, got {workload!r}")


class DispatchContext:
    """Answers "which config for this workload?"; contexts nest (innermost wins)."""

    _stack: ClassVar[list[DispatchContext]] = []
    current = _Current()

    def query(self, target: str, name, args=None) -> ConfigEntity:
        """The config to use for a workload; each context kind (fallback, history) says.
        query(target, task.workload) is TVM's form; query(target, name, args) ours."""
        raise NotImplementedError(f"{type(self).__name__} must implement query()")

    def __enter__(self):
        DispatchContext._stack.append(self)
        return self

    def __exit__(self, *exc):
        DispatchContext._stack.remove(self)
        return False


class FallbackContext(DispatchContext):
    """Every template gets its fallback config (TVM's FallbackContext): the context in force
    when no other is entered, and one a script may enter to ignore the contexts around it."""

    silent = False  # TVM's switch for its fallback warning; this context warns of nothing

    def query(self, target, name, args=None):
        split_workload(name, args)  # a malformed workload is refused here as elsewhere
        return FallbackConfig()


_FALLBACK = FallbackContext()


class ApplyConfig(DispatchContext):
    """Use one given config for every template call inside the context."""

    def __init__(self, config: ConfigEntity):
        self.config = config

    def query(self, target, name, args=None):
        split_workload(name, args)
        return self.config


def __getattr__(name: str):
    # an AutoTVM name we do not have: the error says what to use (tensorlang/tvm_names.py)
    from tensorlang.tvm_names import AUTOTVM_NAMES, missing

    raise missing("module 'tensorlang.autotune.task'", name, AUTOTVM_NAMES)
