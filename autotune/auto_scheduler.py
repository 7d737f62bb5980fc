"""TVM's auto_scheduler (Ansor) API, on tensorlang's template-free tuning: the task-level part.

The public namespace is ``tensorlang.auto_scheduler`` (graph/auto_scheduler.py), which adds
``extract_tasks`` for a whole graph to the names defined here; this module knows nothing of
graphs. What each Ansor name is here:

    register_workload      autotune.workload: the function's compute is the search space
    SearchTask             an autotune.WorkloadTask (its ``.task``), with TVM's methods
    ComputeDAG             the compute declarations of a workload, printable
    TuningOptions          trials, batch size, early stopping, builder, runner, callbacks
    LocalBuilder/Runner    autotune's, with Ansor's defaults (runner: number=3, repeat=1,
                           min_repeat_ms=100)
    RecordToFile           autotune.log_to_file (tensorlang's JSON-lines records)
    SketchPolicy           an autotune.EvolutionTuner (sketch rules, legality first,
                           evolutionary search on the cost model)
    XGBModel / RandomModel the tuner's xgboost model / none (random legal picks)
    PreloadMeasuredStates  the log's configs marked measured: never measured again
    ApplyHistoryBest       autotune.ApplyHistoryBest; also what graph.build compiles with
                           inside it
    TaskScheduler          autotune.TaskScheduler with evolutionary tuners

Resuming (TVM's tutorial: ``XGBModel().update_from_file(log)`` and ``SketchPolicy(task, model,
init_search_callbacks=[PreloadMeasuredStates(log)])``): the model is fitted to the log's
records of the workload (and, as transfer, of the same function at other arguments) before the
first search; the preload marks the log's configs measured, so none is measured again, and the
tuner's best starts as the log's; the evolutionary search's population is seeded with the
measured configs the model ranks best. Each half works alone (Tuner.learn_records /
Tuner.mark_measured). The tuner still measures first the sketch's structural variants (one per
tile rule, vector axis, packing) that the log does not hold, then what the search ranks.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from .arguments import check_int, list_of
from .callbacks import log_to_file
from .dask_measure import DaskBuilder, DaskRunner
from .evolution import EvolutionTuner
from .measure import LocalBuilder as _LocalBuilder
from .measure import LocalRunner as _LocalRunner
from .measure import MeasureInput, MeasureOption, MeasureResult
from .record import ApplyHistoryBest as _ApplyHistoryBest
from .record import Record, load_records, make_record
from .task import DispatchContext, TemplateError, count_flops, create_task, is_placeholder
from .task_scheduler import TaskScheduler as _TaskScheduler
from .workload import WorkloadTask, is_workload, workload

DEFAULT_LOG = "auto_scheduler_tuning.json"  # TVM's default file name for RecordToFile
_NEVER = -(1 << 63)  # the least early_stopping: any negative number means no early stop


# --------------------------------------------------------------------------------- workloads
def register_workload(func_name, f: Callable | None = None, override: bool = False):
    """TVM's ``@auto_scheduler.register_workload`` (or ``register_workload("name")``, or
    ``register_workload("name", f)``): a function returning its tensors (inputs, then
    outputs) becomes a workload whose schedules the sketch rules generate
    (``autotune.workload``). A name registered to another function is refused unless
    ``override=True``, as in TVM."""
    if callable(func_name) and f is None:
        return _register(func_name.__name__, func_name, override)
    if not isinstance(func_name, str):
        raise TypeError(f"register_workload: expected a function or a name, got "
                        f"{type(func_name).__name__}")
    if f is not None:
        return _register(func_name, f, override)
    return lambda func: _register(func_name, func, override)


def _register(name: str, func: Callable, override: bool) -> Callable:
    from .task import TEMPLATES
    from .workload import WorkloadTemplate

    old = TEMPLATES.get(name)
    # the same definition run again (a script or notebook cell executed twice) replaces it
    same = isinstance(old, WorkloadTemplate) and \
        (old.workload_func.__module__, old.workload_func.__qualname__) == \
        (func.__module__, func.__qualname__)
    if isinstance(old, WorkloadTemplate) and not same and not override:
        raise TemplateError(f"register_workload: {name!r} is already registered to "
                            f"{old.workload_func.__module__}.{old.workload_func.__qualname__}; "
                            "give another name, or override=True to replace it")
    return workload(func, name=name)


# --------------------------------------------------------------------------------- ComputeDAG
class ComputeDAG:
    """The compute declarations of a workload: its tensors' ops, producers first. ``print(dag)``
    shows one line per tensor (``out(i, j) = matmul[i, j] + C[i, j]``); ``flop_ct`` is the
    floating-point operations of one call."""

    def __init__(self, compute):
        from ..te.tensor import Tensor

        self.tensors = list_of(compute, lambda t: isinstance(t, Tensor),
                               f"ComputeDAG: expected a list of tensors, got "
                               f"{type(compute).__name__}",
                               lambda t: f"ComputeDAG: expected tensors, got {type(t).__name__}")
        if not self.tensors:
            raise ValueError("ComputeDAG: no tensors (give the workload's inputs and outputs)")
        self.ops = _ops_in_order(self.tensors)
        self._flop: float | None = None

    @property
    def flop_ct(self) -> float:
        if self._flop is None:
            import tensorlang as tl

            outs = [t for t in self.tensors if not is_placeholder(t)]
            func = tl.lower(tl.create_schedule(outs), self.tensors, name="dag")
            self._flop = count_flops(func)
        return self._flop

    def has_reduction(self) -> bool:
        """Whether some compute reduces (TVM's "complex" ops: a task without one is simple)."""
        return any(getattr(op, "reduce_axis", ()) for op in self.ops)

    def __str__(self) -> str:
        return "\n".join(line for op in self.ops for line in _op_lines(op))

    def __repr__(self) -> str:
        return f"ComputeDAG({', '.join(op.name for op in self.ops)})"


def _ops_in_order(tensors) -> list:
    """The ops the tensors reach, each after its producers (post-order from the outputs, as
    TVM prints a DAG; then inputs no output reads), without recursion."""
    order, seen = [], set()
    for t in sorted(tensors, key=is_placeholder):  # stable: the outputs first, in order
        stack = [(t.op, False)]
        while stack:
            op, done = stack.pop()
            if id(op) in seen:
                continue
            if done:
                seen.add(id(op))
                order.append(op)
                continue
            stack.append((op, True))
            stack.extend((i.op, False) for i in reversed(op.input_tensors))
    return order


def _op_lines(op) -> list[str]:
    from ..te.tensor import ComputeOp, PlaceholderOp

    if isinstance(op, PlaceholderOp):
        t = op.output(0)
        return [f"{t.name} = PLACEHOLDER [{', '.join(str(d) for d in t.shape)}] {t.dtype}"]
    if not isinstance(op, ComputeOp):
        inputs = ", ".join(t.name for t in op.input_tensors)
        return [f"{op.name} = {type(op).__name__}({inputs})"]
    axes = ", ".join(iv.var.name for iv in op.axis)
    ranges = ", ".join(f"{iv.var.name} in {_bounds(iv)}" for iv in op.reduce_axis)
    where = f"  ({ranges})" if ranges else ""
    return [f"{t.name}({axes}) = {body}{where}" for t, body in zip(op.outputs, op.body)]


def _bounds(iv) -> str:
    from ..ir.expr import as_int

    lo, extent = as_int(iv.dom.min), as_int(iv.dom.extent)
    if lo is not None and extent is not None:
        return f"[{lo}, {lo + extent})"
    return f"[{iv.dom.min}, {iv.dom.min} + {iv.dom.extent})"


# --------------------------------------------------------------------------------- targets
def target_string(target, who: str) -> str:
    """A target as the string tensorlang compiles for: "llvm" (also for None: the host CPU is
    the one target), a string, or a tensorlang Target."""
    from ..codegen.target import Target

    if target is None:
        return "llvm"
    if isinstance(target, Target):
        return str(target)
    if not isinstance(target, str):
        raise TypeError(f"{who}: target must be a string such as 'llvm' (tvm.target.Target("
                        f"'llvm ...') is the string itself here), got {type(target).__name__}")
    return target


def _check_host(who: str, target: str, target_host) -> None:
    if target_host is not None and target_string(target_host, who) != target:
        raise ValueError(f"{who}: target_host={target_host!r} differs from target={target!r}; "
                         "CPU kernels are their own host (leave target_host None)")


def refuse(who: str, name: str, value, supported, why: str) -> None:
    """ValueError for an Ansor option given a value other than the one supported here."""
    if value is not supported and value != supported:
        raise ValueError(f"{who}: {name}={value!r} is not supported ({why}); leave it "
                         f"{supported!r}")


# --------------------------------------------------------------------------------- SearchTask
class SearchTask:
    """A workload on concrete arguments for one target (TVM's SearchTask): ``func`` a function
    registered with ``register_workload`` (or its name) and ``args`` its arguments, or
    ``workload_key`` (``task.workload_key`` of another task). ``.task`` is the autotune
    WorkloadTask the tuners search; ``compute_dag``, ``workload_key``, ``target`` as TVM's."""

    def __init__(self, func=None, args=None, compute_dag=None, workload_key=None, target=None,
                 target_host=None, hardware_params=None, layout_rewrite_option=None,
                 task_inputs=None, task_inputs_overwrite=False, task_inputs_save_to_file=False,
                 desc=""):
        who = "SearchTask"
        refuse(who, "compute_dag", compute_dag, None,
               "a task is made from its workload function: register it with "
               "@auto_scheduler.register_workload and give func= and args=, which name its "
               "records")
        refuse(who, "hardware_params", hardware_params, None,
               "cores, vector width and caches are this machine's CPU's; a target string "
               "'llvm -mcpu=...' names another CPU")
        refuse(who, "layout_rewrite_option", layout_rewrite_option, None,
               "there is no layout rewrite; packing an operand is a decision of the sketch")
        refuse(who, "task_inputs", task_inputs, None,
               "candidates are checked and timed on random inputs")
        refuse(who, "task_inputs_overwrite", task_inputs_overwrite, False, "no task inputs")
        refuse(who, "task_inputs_save_to_file", task_inputs_save_to_file, False,
               "no task inputs")
        name, args = _workload_of(func, args, workload_key)
        target = target_string(target, who)
        _check_host(who, target, target_host)
        self.task = create_task(name, args, target)
        self.desc = desc or name
        self._dag: ComputeDAG | None = None

    @classmethod
    def of(cls, task: WorkloadTask, desc: str = "") -> SearchTask:
        """A SearchTask for an autotune WorkloadTask made elsewhere (a graph's kernels)."""
        if not isinstance(task, WorkloadTask):
            raise TypeError(f"SearchTask.of: expected an autotune WorkloadTask, got "
                            f"{type(task).__name__}")
        out = cls.__new__(cls)
        out.task, out.desc, out._dag = task, desc or task.name, None
        return out

    @property
    def compute_dag(self) -> ComputeDAG:
        if self._dag is None:
            self._dag = ComputeDAG(self.task.template.declare(self.task.args))
        return self._dag

    @property
    def workload_key(self) -> str:
        return self.task.key

    @property
    def target(self) -> str:
        return self.task.target

    target_host = None  # CPU kernels are their own host
    hardware_params = None  # this machine's CPU

    def __repr__(self) -> str:
        return f"SearchTask({self.workload_key}, target={self.target!r})"

    def tune(self, tuning_options: TuningOptions, search_policy: SketchPolicy | None = None,
             adaptive_training: bool = False) -> None:
        """Measure ``tuning_options.num_measure_trials`` new candidates with `search_policy`
        (default: a fresh ``SketchPolicy(self, XGBModel())``, which knows nothing of earlier
        runs: give a policy with PreloadMeasuredStates to resume)."""
        options = _checked_options("SearchTask.tune", tuning_options)
        refuse("SearchTask.tune", "adaptive_training", adaptive_training, False,
               "the model is refitted after every batch")
        if search_policy is None:
            search_policy = SketchPolicy(self, XGBModel(), verbose=options.verbose)
        if not isinstance(search_policy, SketchPolicy):
            raise TypeError(f"SearchTask.tune: search_policy must be an "
                            f"auto_scheduler.SketchPolicy, got {type(search_policy).__name__}")
        if search_policy.task.workload_key != self.workload_key or \
                search_policy.task.target != self.target:
            raise ValueError(f"SearchTask.tune: the search policy was made for "
                             f"{search_policy.task!r}, not {self!r}")
        search_policy.search(options)

    def apply_best(self, log_file, include_compatible: bool = False,
                   layout_rewrite_option=None) -> tuple:
        """(schedule, tensors) of the best record of this workload in `log_file`; ValueError
        naming why when there is none to apply."""
        refuse("apply_best", "include_compatible", include_compatible, False,
               "records apply to the workload they were tuned for: its function, arguments "
               "and compute")
        refuse("apply_best", "layout_rewrite_option", layout_rewrite_option, None,
               "there is no layout rewrite")
        return self._best(log_file)[0]

    def _best(self, log_file) -> tuple[tuple, Record]:
        history = ApplyHistoryBest(log_file)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # what was not applied is said by the error below
            cfg = history.query(self.target, self.task.name, self.task.args)
        rec = history.applied.get(self.workload_key)
        if rec is None:
            why = history.rejected.get(self.workload_key, "it holds no valid record of it")
            raise ValueError(f"{os.fspath(log_file)} has no schedule of {self.workload_key} to "
                             f"apply: {why} (tune the task with a RecordToFile callback first)")
        s, tensors = self.task.instantiate(cfg)
        return (s, list(tensors)), rec

    def print_best(self, log_file, print_mode: str = "schedule") -> str:
        """The best schedule of `log_file` as Python schedule code (TVM's print_mode
        "schedule"), returned; "cuda" is refused (a GPU target)."""
        if print_mode == "cuda":
            raise ValueError("print_best: print_mode='cuda' prints CUDA source, a GPU target; "
                             "the target here is the host CPU: print_mode='schedule' gives the "
                             "schedule as Python, and tl.build(*task.apply_best(log))"
                             ".get_source('asm') the machine code")
        if print_mode != "schedule":
            raise ValueError(f"print_best: print_mode must be 'schedule', got {print_mode!r}")
        import tensorlang as tl

        from .schedule_code import schedule_code

        (s, _), rec = self._best(log_file)
        outs = [t for t in self.task.template.declare(self.task.args) if not is_placeholder(t)]
        names = ", ".join(op.name for op in self.compute_dag.ops)
        speed = f"{rec.cost * 1e3:.4g} ms ({self.task.flop / rec.cost / 1e9:.4g} GFLOP/s)"
        first = f"# {self.workload_key}: the best record of {os.fspath(log_file)}, {speed}"
        second = (f"# s = tl.create_schedule([{', '.join(t.op.name for t in outs)}]), each "
                  f"tensor the variable named as its op ({names})")
        return "\n".join([first, second, schedule_code(tl.create_schedule(outs), s.trace)])


def _workload_of(func, args, key) -> tuple[str, tuple]:
    """(workload name, args) from SearchTask's func/args or workload_key."""
    if func is not None and key is not None:
        raise ValueError("SearchTask: give func= and args=, or workload_key=, not both")
    if key is not None:
        return _parse_key(key)
    if func is None:
        raise TypeError("SearchTask: give func= (a function registered with "
                        "@auto_scheduler.register_workload) and args=")
    if not is_workload(func):
        what = func if isinstance(func, str) else getattr(func, "__name__", repr(func))
        raise TemplateError(f"SearchTask: {what!r} is not a registered workload; decorate the "
                            "function with @auto_scheduler.register_workload")
    if args is None:
        raise TypeError("SearchTask: args= is required with func= (the workload function's "
                        "arguments, e.g. (N, L, M, 'float32'))")
    return (func if isinstance(func, str) else func.workload_name), args


def _parse_key(key) -> tuple[str, tuple]:
    """A workload key: ours, '["name", [args]]' (task.workload_key), or TVM's flat
    '["name", arg, ...]'."""
    try:
        data = json.loads(key)
    except (TypeError, json.JSONDecodeError):
        data = None
    if not (isinstance(data, list) and data and isinstance(data[0], str)):
        raise ValueError(f"SearchTask: workload_key must be a JSON list naming a workload and "
                         f"its arguments, such as task.workload_key, got {key!r}")
    name, rest = data[0], data[1:]
    args = rest[0] if len(rest) == 1 and isinstance(rest[0], list) else rest
    if not is_workload(name):
        raise TemplateError(f"SearchTask: {name!r} is not a registered workload; decorate the "
                            "function with @auto_scheduler.register_workload")
    return name, tuple(args)


# --------------------------------------------------------------------------------- options
class LocalBuilder(_LocalBuilder):
    """TVM's auto_scheduler.LocalBuilder: candidates compiled in `n_parallel` processes (default:
    one per CPU), each within `timeout` seconds (Ansor's default 15)."""

    def __init__(self, timeout: float = 15, n_parallel: int | None = None,
                 build_func: str = "default"):
        super().__init__(n_parallel=n_parallel, timeout=timeout, build_func=build_func)


class LocalRunner(_LocalRunner):
    """TVM's auto_scheduler.LocalRunner, with its defaults: each candidate checked against the
    reference, then timed in `repeat` repeats of `number` calls (each repeat at least
    `min_repeat_ms`), in a measuring process of its own; enable_cpu_cache_flush evicts the
    caches before each repeat (min_repeat_ms then does not apply)."""

    def __init__(self, timeout: float = 10, number: int = 3, repeat: int = 1,
                 min_repeat_ms: float = 100, cooldown_interval: float = 0.0,
                 enable_cpu_cache_flush: bool = False, device: int = 0):
        if device != 0:
            raise ValueError(f"LocalRunner: device={device!r}: there is one CPU device, index 0")
        super().__init__(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                         timeout=timeout, cooldown=cooldown_interval,
                         flush_cache=bool(enable_cpu_cache_flush))


class RecordToFile(log_to_file):
    """TVM's auto_scheduler.RecordToFile: each measured candidate's record appended to
    `filename` as it finishes (tensorlang's JSON-lines records, which TVM's logs are not)."""

    def __init__(self, filename=DEFAULT_LOG):
        super().__init__(filename)


class TuningOptions:
    """TVM's TuningOptions: num_measure_trials new candidates measured (0: none), in rounds of
    num_measures_per_round; early_stopping: stop after that many trials without improvement
    (None or negative: never); verbose 0 (silent), 1 (a line per round) or 2 (also a line per
    candidate); builder / runner: "local" (auto_scheduler.LocalBuilder() / LocalRunner()) or
    one of them (autotune's and its Dask ones also); measure_callbacks: RecordToFile(path) and
    callables cb(tuner, inputs, results), called after each round."""

    def __init__(self, num_measure_trials: int = 0, early_stopping: int | None = None,
                 num_measures_per_round: int = 64, verbose: int = 1, builder="local",
                 runner="local", measure_callbacks=None):
        who = "TuningOptions"
        self.num_measure_trials = check_int(who, "num_measure_trials", num_measure_trials, 0)
        if early_stopping is not None:  # TVM: None or a negative number is "never"
            early_stopping = check_int(who, "early_stopping", early_stopping, _NEVER)
        self.early_stopping = early_stopping if early_stopping and early_stopping > 0 else None
        self.num_measures_per_round = check_int(who, "num_measures_per_round",
                                                num_measures_per_round, 1)
        if verbose not in (0, 1, 2) or isinstance(verbose, bool):
            raise ValueError(f"{who}: verbose must be 0, 1 or 2, got {verbose!r}")
        self.verbose = verbose
        self.builder = _measurer(who, "builder", builder, LocalBuilder,
                                 (_LocalBuilder, DaskBuilder))
        self.runner = _measurer(who, "runner", runner, LocalRunner, (_LocalRunner, DaskRunner))
        self.measure_callbacks = _callbacks(who, measure_callbacks)

    def measure_option(self) -> MeasureOption:
        return MeasureOption(self.builder, self.runner)

    def record_files(self) -> list[str]:
        """The paths of the RecordToFile callbacks."""
        return [cb.path for cb in self.measure_callbacks if isinstance(cb, log_to_file)]


def _measurer(who: str, what: str, given, default: type, accepted: tuple):
    if isinstance(given, str):
        if given == "local":
            return default()
        raise ValueError(f"{who}: {what}={given!r}: only 'local' or an auto_scheduler."
                         f"{default.__name__}; there is no RPC measurement (TVM's RPCRunner, "
                         "LocalRPCMeasureContext): candidates are measured on this machine, in "
                         "a process of their own")
    if not isinstance(given, accepted):
        raise TypeError(f"{who}: {what} must be 'local' or an auto_scheduler."
                        f"{default.__name__}, got {type(given).__name__}")
    return given


def _callbacks(who: str, callbacks) -> list:
    if callbacks is None:
        return []
    if callable(callbacks):
        raise TypeError(f"{who}: measure_callbacks must be a list, got one "
                        f"{type(callbacks).__name__}; give [it]")
    return list_of(callbacks, callable,
                   f"{who}: measure_callbacks must be a list, got {type(callbacks).__name__}",
                   lambda cb: f"{who}: a measure callback is RecordToFile(path) or a callable "
                              f"cb(tuner, inputs, results), got {type(cb).__name__} (TVM's "
                              "MeasureCallback classes are not used here)")


def _checked_options(who: str, options) -> TuningOptions:
    if not isinstance(options, TuningOptions):
        raise TypeError(f"{who}: expected auto_scheduler.TuningOptions(...), got "
                        f"{type(options).__name__}")
    return options


class _Progress:
    """TuningOptions(verbose=1): a line per round; verbose=2: also a line per candidate."""

    def __init__(self, level: int, total: int, label: str):
        self.level, self.total, self.label = level, total, label
        self.trials0 = 0

    def start(self, tuner) -> None:  # Tuner.tune calls it first: trials count from here
        self.trials0 = tuner.trials

    def __call__(self, tuner, inputs, results) -> None:
        if self.level >= 2:
            for inp, res in zip(inputs, results):
                what = f"{res.cost * 1e3:.4g} ms" if res.valid else f"{res.error}"
                print(f"  config {inp.config.index}: {what}", flush=True)
        failed = sum(not r.valid for r in results)
        print(f"[{self.label}] trials {tuner.trials - self.trials0}/{self.total}: best "
              f"{tuner.best_flops / 1e9:.4g} GFLOP/s ({failed} of this round's "
              f"{len(results)} failed)", flush=True)


# --------------------------------------------------------------------------------- search
class XGBModel:
    """TVM's XGBModel: the xgboost cost model of a SketchPolicy's evolutionary search, refitted
    after every measured round. ``update_from_file(log)`` gives it a log's records to learn
    from before a search (the workload's, and the same function's at other arguments);
    num_warmup_sample: below this many measured candidates the search explores more (half its
    picks random); seed: the search's random generator (a SketchPolicy's seed wins)."""

    def __init__(self, verbose_eval: int = 25, num_warmup_sample: int = 100,
                 seed: int | None = None, model_file=None, adaptive_training: bool = False):
        check_int("XGBModel", "verbose_eval", verbose_eval, 0)  # TVM's log period: no log here
        self.num_warmup_sample = check_int("XGBModel", "num_warmup_sample",
                                           num_warmup_sample, 0)
        refuse("XGBModel", "model_file", model_file, None,
               "the model is refitted from the records: keep the log and update_from_file it")
        refuse("XGBModel", "adaptive_training", adaptive_training, False,
               "the model is refitted after every batch")
        self.seed = seed
        self.records: list[Record] = []

    def update_from_file(self, file_name, n_lines: int | None = None) -> None:
        """Learn from the records of a log (its first `n_lines` records when given)."""
        if n_lines is not None:
            n_lines = check_int("XGBModel.update_from_file", "n_lines", n_lines, 0)
        self.records.extend(_log_records("XGBModel.update_from_file", file_name)[:n_lines])

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measured candidates (a policy's rounds, as TVM's program measurer
        does): later policies made with this model start from them."""
        self.records.extend(make_record(i, r) for i, r in zip(inputs, results))


class RandomModel:
    """TVM's RandomModel, SketchPolicy's default as in TVM: no cost model, so after the
    sketch's structural variants the candidates are drawn at random among the legal configs
    whose schedules were not measured yet (a random fitness would rank them no better)."""


def _log_records(who: str, path) -> list[Record]:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{who}: expected a log's path, got {type(path).__name__}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{who}: no tuning log at {os.fspath(path)!r}")
    return load_records(path)


class _RandomFitnessTuner(EvolutionTuner):
    """EvolutionTuner with RandomModel: never fitted, so it plans as an XGB tuner does before
    its first fit (random legal configs, each checked and featurized, duplicates dropped)."""

    def _fit(self) -> None:
        self._model = None  # RandomModel: nothing is learned from the measurements


# TVM's SketchPolicy params -> EvolutionTuner's arguments
_POLICY_PARAMS = {"eps_greedy": "epsilon", "evolutionary_search_population": "population",
                  "evolutionary_search_mutation_prob": "mutation_prob"}


class SketchPolicy:
    """TVM's SketchPolicy: the task's space from the sketch rules, searched by an
    ``autotune.EvolutionTuner`` (``.tuner``) whose fitness is `program_cost_model` (XGBModel;
    RandomModel, the default, picks at random); `init_search_callbacks`: PreloadMeasuredStates(log) to
    resume; params: eps_greedy, evolutionary_search_population,
    evolutionary_search_mutation_prob; verbose >= 1: a line on the search after each tune."""

    def __init__(self, task: SearchTask, program_cost_model=None, params: dict | None = None,
                 seed: int | None = None, verbose: int = 1, init_search_callbacks=None):
        if not isinstance(task, SearchTask):
            raise TypeError(f"SketchPolicy: expected an auto_scheduler.SearchTask, got "
                            f"{type(task).__name__}")
        model = RandomModel() if program_cost_model is None else program_cost_model
        if not isinstance(model, (XGBModel, RandomModel)):
            raise TypeError(f"SketchPolicy: program_cost_model must be an auto_scheduler."
                            f"XGBModel or RandomModel, got {type(model).__name__}")
        self.task, self.model, self.verbose = task, model, verbose
        kwargs = _policy_kwargs(params)
        if isinstance(model, XGBModel):
            kwargs["warmup"] = model.num_warmup_sample
            seed = model.seed if seed is None else seed
            self.tuner = EvolutionTuner(task.task, seed=seed, **kwargs)
            if model.records:
                self.tuner.learn_records(model.records)
        else:
            self.tuner = _RandomFitnessTuner(task.task, seed=seed, **kwargs)
        for cb in _search_callbacks(init_search_callbacks):
            cb(self)

    def search(self, options: TuningOptions) -> None:
        """Measure options.num_measure_trials new candidates (SearchTask.tune)."""
        if not options.num_measure_trials:
            return
        tuner = self.tuner
        tuner.batch_size = options.num_measures_per_round
        callbacks = list(options.measure_callbacks)
        if isinstance(self.model, XGBModel):
            callbacks.append(lambda _tuner, inputs, results: self.model.update(inputs, results))
        if options.verbose:
            callbacks.append(_Progress(options.verbose, options.num_measure_trials,
                                       self.task.desc))
        option = options.measure_option()
        try:
            tuner.tune(options.num_measure_trials, option, callbacks,
                       early_stopping=options.early_stopping)
        finally:
            option.close()
        if self.verbose:
            stats = tuner.search_stats
            print(f"[{self.task.desc}] search: {tuner.trials} measured, "
                  f"{stats['refused']} candidates refused as illegal, "
                  f"{stats['duplicates']} duplicate schedules, {stats['generations']} "
                  f"generations; best {tuner.best_flops / 1e9:.4g} GFLOP/s", flush=True)


def _policy_kwargs(params) -> dict:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise TypeError(f"SketchPolicy: params must be a dict, got {type(params).__name__}")
    bad = sorted(set(params) - set(_POLICY_PARAMS))
    if bad:
        raise ValueError(f"SketchPolicy: params {bad} are not supported (the sketch rules and "
                         f"the evolutionary search are tensorlang's); supported: "
                         f"{sorted(_POLICY_PARAMS)}")
    return {_POLICY_PARAMS[k]: v for k, v in params.items()}


def _search_callbacks(callbacks) -> list:
    if callbacks is None:
        return []
    return list_of(callbacks, lambda cb: isinstance(cb, PreloadMeasuredStates),
                   f"SketchPolicy: init_search_callbacks must be a list, got "
                   f"{type(callbacks).__name__}",
                   lambda cb: f"SketchPolicy: init_search_callbacks take "
                              f"PreloadMeasuredStates(log), got {type(cb).__name__} (custom "
                              "sketch rules are not supported: the rules are autotune/sketch.py)")


class PreloadMeasuredStates:
    """TVM's PreloadMeasuredStates (a SketchPolicy's init_search_callbacks): the configs of
    the task in the log become measured: never measured again, and the best of them the
    policy's best. ``.loaded``: how many of the log's records were the task's."""

    def __init__(self, filename=DEFAULT_LOG):
        self.filename = filename
        self.loaded = 0

    def __call__(self, policy: SketchPolicy) -> None:
        records = _log_records("PreloadMeasuredStates", self.filename)
        task = policy.task.task
        self.loaded = sum(r.key == task.key and r.target == task.target for r in records)
        policy.tuner.mark_measured(records)
        if policy.verbose:
            print(f"PreloadMeasuredStates: {self.loaded} measured candidates of "
                  f"{policy.task.desc} loaded from {os.fspath(self.filename)} (not measured "
                  "again)", flush=True)


# --------------------------------------------------------------------------------- history
class ApplyHistoryBest(_ApplyHistoryBest):
    """TVM's ApplyHistoryBest(records): a context in which workloads use the best record of
    the log(s). Templates and tasks instantiated inside apply it (autotune.ApplyHistoryBest),
    and ``graph.build(g)`` inside it compiles with these records (as ``tuning_log=``).
    records: a log's path, a list of paths, or a list of records (tensorlang Records or
    (MeasureInput, MeasureResult) pairs); n_lines: only the first n records."""

    def __init__(self, records, n_lines: int | None = None, include_compatible: bool = False):
        refuse("ApplyHistoryBest", "include_compatible", include_compatible, False,
               "records apply to the workload they were tuned for: its function, arguments "
               "and compute")
        if n_lines is not None:
            n_lines = check_int("ApplyHistoryBest", "n_lines", n_lines, 0)
        # a log's path as given (graph.build opens it), else the records themselves
        self.log = _history_source(records, n_lines)
        super().__init__(self.log)


def _history_source(records, n_lines: int | None):
    if isinstance(records, (str, os.PathLike)):
        recs = _log_records("ApplyHistoryBest", records)
        return os.fspath(records) if n_lines is None else recs[:n_lines]
    if isinstance(records, (bytes, dict)) or not hasattr(records, "__iter__"):
        raise TypeError(f"ApplyHistoryBest: expected a log's path, a list of paths or a list "
                        f"of records, got {type(records).__name__}")
    out: list[Record] = []
    for item in records:
        if isinstance(item, (str, os.PathLike)):
            out += _log_records("ApplyHistoryBest", item)
        elif isinstance(item, Record):
            out.append(item)
        elif isinstance(item, tuple) and len(item) == 2 and \
                isinstance(item[0], MeasureInput) and isinstance(item[1], MeasureResult):
            out.append(make_record(*item))
        else:
            raise TypeError(f"ApplyHistoryBest: expected paths, Records or (MeasureInput, "
                            f"MeasureResult) pairs, got {type(item).__name__}")
    return out[:n_lines]


def history_in_context():
    """The log (a path, or a list of Records) of the auto_scheduler.ApplyHistoryBest context
    entered innermost, or None: what graph.build compiles with when given no tuning_log."""
    ctx = DispatchContext.current
    return ctx.log if isinstance(ctx, ApplyHistoryBest) else None


# --------------------------------------------------------------------------------- scheduler
# TVM's TaskScheduler.tune search_policy -> the autotune tuner of each task
_SCHEDULER_POLICIES = {"default": "evolution", "sketch.xgb": "evolution",
                       "sketch.random": "random"}


class TaskScheduler:
    """TVM's TaskScheduler: tune several tasks (a model's) under one trial budget, each round
    to the task expected to shorten the model's weighted latency most (autotune.TaskScheduler,
    whose module doc has the rule; alpha, beta and backward_window_size are its alpha, beta
    and window). The log of the tuning options' RecordToFile is where it resumes from: trials
    already there count toward num_measure_trials and are not measured again (TVM does this
    with load_log_file=; here always). ``best_costs``: each task's best seconds after tune."""

    def __init__(self, tasks, task_weights=None, objective_func=None, strategy="gradient",
                 load_model_file=None, load_log_file=None, alpha=0.2, beta=2, gamma=0.5,
                 backward_window_size=3, callbacks=None):
        who = "TaskScheduler"
        self.tasks = list_of(tasks, lambda t: isinstance(t, SearchTask),
                             f"{who}: tasks must be a list, got {type(tasks).__name__}",
                             lambda t: f"{who}: tasks must be auto_scheduler.SearchTasks, got "
                                       f"{type(t).__name__}")
        self.task_weights = None if task_weights is None else list(task_weights)
        refuse(who, "objective_func", objective_func, None,
               "the objective is the weighted sum of the tasks' times")
        refuse(who, "strategy", strategy, "gradient", "the rounds go by the gradient")
        refuse(who, "load_model_file", load_model_file, None,
               "each task's model is refitted from the log")
        refuse(who, "gamma", gamma, 0.5, "the gradient here has alpha, beta and the window")
        refuse(who, "callbacks", callbacks, None, "the scheduler prints a line per round and "
               "writes the latency curve to <log>.curve.jsonl")
        self.load_log_file = None if load_log_file is None else os.fspath(load_log_file)
        self.alpha, self.beta = alpha, beta
        self.window = check_int(who, "backward_window_size", backward_window_size, 1)
        self.scheduler: _TaskScheduler | None = None  # the last tune()'s

    def tune(self, tune_option: TuningOptions, search_policy: str = "default",
             search_policy_params=None, adaptive_training: bool = False,
             per_task_early_stopping=None) -> None:
        who = "TaskScheduler.tune"
        options = _checked_options(who, tune_option)
        if search_policy not in _SCHEDULER_POLICIES:
            raise ValueError(f"{who}: search_policy must be one of "
                             f"{sorted(_SCHEDULER_POLICIES)}, got {search_policy!r}")
        refuse(who, "search_policy_params", search_policy_params, None,
               "each task's tuner takes the scheduler's defaults")
        refuse(who, "adaptive_training", adaptive_training, False, "models refit every round")
        refuse(who, "per_task_early_stopping", per_task_early_stopping, None,
               "a task stops when its best flattens over its last rounds")
        refuse(who, "tune_option.early_stopping", options.early_stopping, None,
               "a task stops when its best flattens over its last rounds")
        log = self._log_of(options)
        if not options.num_measure_trials:
            return
        per_round = max(1, min(options.num_measures_per_round,
                               options.num_measure_trials // len(self.tasks)))
        option = options.measure_option()
        self.scheduler = _TaskScheduler(
            [t.task for t in self.tasks], self.task_weights, log_file=log, measure_option=option,
            tuner=_SCHEDULER_POLICIES[search_policy], round_trials=per_round,
            progress=options.verbose >= 1, alpha=self.alpha, beta=self.beta,
            window=self.window)
        try:
            self.scheduler.tune(n_trial=options.num_measure_trials)
        finally:
            option.close()

    def _log_of(self, options: TuningOptions) -> str:
        """The one log the scheduler tunes into: its RecordToFile's path."""
        files = options.record_files()
        if len(files) != 1 or len(options.measure_callbacks) != 1:
            raise ValueError("TaskScheduler.tune: tune_option.measure_callbacks must be one "
                             "[auto_scheduler.RecordToFile(path)]: the scheduler resumes from "
                             f"and accounts in that log (got {options.measure_callbacks!r})")
        if self.load_log_file is not None and not _same_path(self.load_log_file, files[0]):
            raise ValueError(f"TaskScheduler: load_log_file={self.load_log_file!r} is not the "
                             f"RecordToFile log {files[0]!r}; the scheduler resumes from the "
                             "log it writes: give both the same path")
        return files[0]

    @property
    def best_costs(self) -> np.ndarray:
        """Seconds of each task's best record after tune (inf: none valid)."""
        if self.scheduler is None:
            return np.full(len(self.tasks), math.inf)
        return np.array([s.best for s in self.scheduler.states])


def _same_path(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


__all__ = ["ApplyHistoryBest", "ComputeDAG", "LocalBuilder", "LocalRunner",
           "PreloadMeasuredStates", "RandomModel", "RecordToFile", "SearchTask", "SketchPolicy",
           "TaskScheduler", "TuningOptions", "XGBModel", "history_in_context",
           "register_workload"]
