"""``GraphModule``: runs a compiled model, op by op from Python or as one native call.

What a GraphModule holds (all made by ``tensorlang.graph.build``; this file imports nothing from
the compiler so that deployed models run without it):

- ``plan``: JSON-able dict: values (name -> storage, shape, dtype), storages (an arena offset or
  a constant), the ordered steps (kernel name + argument value names), inputs, outputs.
- ``kernels``: name -> :class:`Module`, one per distinct workload.
- ``driver``: a :class:`Module` whose function ``int32 drv(i64 *fns, i64 *args, i64 *status)``
  calls every step's kernel in order through the function-pointer table ``fns`` with the
  argument addresses in ``args`` -- the whole graph in one native call, no Python between
  kernels. On a nonzero kernel code it stops and writes (step, code) to ``status``.
- ``constants``: name -> numpy array (the weights).

Artifacts (:meth:`GraphModule.save`, :func:`load`) are a folder: ``manifest.json`` (format,
version, target CPU and required features, the sha256 of every other file), ``plan.json``,
``weights.npz`` with ``weights_index.json``, ``kernels/*.tlm`` (each a :class:`Module`
artifact: PIC object + linked .so + sources), ``driver.tlm``. Loading checks every file against
its digest and the plan against its kernels (``_plan``) before any native code runs.

Concurrency: ``run(**inputs)`` given every input runs on a buffer set of its own (see
:class:`GraphModule`), so any number of threads may call it at once.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import statistics
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tensorlang.errors import TensorlangError
from tensorlang.version import __version__

from . import _cpu, _plan
from .arrays import _aligned_bytes_at, huge_page_bytes, packed
from .module import ArtifactError, KernelError, Module, check_built_for_here, load_module
from .saved_folder import GRAPH_KIND, write_folder
from .timer import TimingResult, call_timer, count

GRAPH_ARTIFACT_FORMAT = 1
MODES = ("graph", "interactive")


class InputError(TensorlangError, ValueError):
    """Inputs that do not match the model: unknown or missing names, wrong shape or dtype."""


class _Buffers:
    """The memory one run writes, and the tables that point into it: the arena (activations and
    inputs copied in), the driver's argument table and status words, and each step's raw
    arguments for the interactive mode. Weights are shared, read-only, by every set."""

    __slots__ = ("addr", "arena", "args", "driver_raw", "plan", "sizes", "status", "steps",
                 "views")

    def __init__(self, gm: GraphModule, plan: dict | None = None,
                 env: Mapping[str, int] | None = None) -> None:
        # a model with shape variables: ``plan`` is the plan at the sizes ``env``
        p = self.plan = gm.plan if plan is None else plan
        env = env or {}
        self.sizes = np.array([env[v] for v in gm._vars] or [0], dtype=np.int64)
        self.arena = _arena(int(p["arena_bytes"]))
        base = self.arena.ctypes.data
        storage_addr: dict[int, int] = {}
        storage_arr: dict[int, np.ndarray] = {}
        for st in p["storages"]:
            sid = int(st["id"])
            if st["kind"] == "const":
                buf = gm._const_arrays[st["const"]]
                storage_addr[sid] = buf.ctypes.data
                storage_arr[sid] = buf
            else:
                off = int(st["offset"])
                storage_addr[sid] = base + off
                storage_arr[sid] = self.arena[off:off + int(st["nbytes"])]
        self.views: dict[str, np.ndarray] = {}
        self.addr: dict[str, int] = {}
        for name, v in p["values"].items():
            sid = int(v["storage"])
            dt = np.dtype(v["dtype"])
            shape = tuple(v["shape"])
            n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            self.views[name] = storage_arr[sid][:n].view(dt).reshape(shape)
            self.addr[name] = storage_addr[sid]
        # interactive: (ctypes function, raw args, step, module) per step
        self.steps = []
        for st in p["steps"]:
            k = gm.kernels[st["kernel"]]
            raw = tuple(self.addr[a] for a in st["args"]) + tuple(env[v] for v in k.vars)
            self.steps.append((k.raw_function, raw, st, k))
        # graph: the argument table the driver reads (function table shared: read-only)
        flat = [self.addr[a] for st in p["steps"] for a in st["args"]]
        self.args = np.array(flat or [0], dtype=np.int64)
        self.status = np.zeros(2, dtype=np.int64)
        self.driver_raw = None
        if gm.driver is not None:
            tables = (gm._fns.ctypes.data, self.args.ctypes.data, self.status.ctypes.data)
            if gm._vars:
                tables += (self.sizes.ctypes.data,)
            self.driver_raw = (gm.driver.raw_function, tables)

    def bind(self, slots: list[int], addr: int) -> None:
        # element by element: numpy's fancy-index assignment costs ~0.6 us per call, and run()
        # makes four or more of them (measured: run(x=a) on a tiny model 9.0 -> 7.2 us)
        args = self.args
        for i in slots:
            args[i] = addr


class GraphModule:
    """A compiled model. ``run(**inputs) -> dict``; TVM-style ``set_input`` / ``run`` /
    ``get_output``; ``profile()`` per node; ``benchmark()``; ``save(path)``.

    Threads: ``run(**inputs)`` given every input may be called from any number of threads at
    once, in both modes, as onnxruntime's ``InferenceSession.run``. Each such call checks a
    private set of buffers (arena, argument tables) out of a pool, runs without holding any lock
    (the kernels run in parallel; the GIL is released during native calls) and returns it; the
    pool grows to the largest number of runs seen at once, one arena each. The stateful API
    (``set_input``, ``run()`` without inputs or with only some of them, ``get_output``,
    ``profile``, ``benchmark``) works on the module's own buffers and is for one thread at a
    time; after concurrent runs, ``get_output`` and ``run()`` see the run that finished last.
    """

    def __init__(self, plan: Mapping[str, Any] | _plan.ExecutionPlan,
                 kernels: Mapping[str, Module], driver: Module | None,
                 constants: Mapping[str, np.ndarray], mode: str = "graph") -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if isinstance(plan, _plan.ExecutionPlan):
            plan = plan.to_json()
        # the plan's JSON form (what plan.json holds): a private copy, and proof it is JSON-able
        self.plan = json.loads(json.dumps(plan))
        self.kernels = dict(kernels)
        self.driver = driver
        self.mode = mode
        p = self.plan
        # native code will read and write the addresses computed from the plan: a plan that
        # does not hold together, or kernels that take other arrays than the steps pass, is a
        # PlanError here, never an access out of bounds later
        _plan.check_plan(p)
        _plan.check_constants(p, constants)
        _plan.check_kernels(p, self.kernels, driver)
        if mode == "graph" and driver is None and p["steps"]:
            raise TensorlangError("mode='graph' needs the driver module")

        # constants live in one region of huge pages (see arrays.huge_page_bytes), each at an
        # aligned offset, shared by every buffer set
        names = [st["const"] for st in p["storages"] if st["kind"] == "const"]
        srcs = [np.asarray(constants[n]) for n in names]
        self._const_arrays: dict[str, np.ndarray] = dict(
            zip(names, packed([src.nbytes for src in srcs])))
        for name, src in zip(names, srcs):
            # a byte view of the constant (no copy when it is C-contiguous, as frozen
            # constants are) copied once into the aligned buffer: was two full copies
            self._const_arrays[name][:] = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        self._vars: tuple[str, ...] = tuple(p.get("vars", ()))
        kernel_names = sorted({st["kernel"] for st in p["steps"]})
        self._kernel_index = {n: i for i, n in enumerate(kernel_names)}
        # a model built for another CPU can be saved, never run here (its code would die with
        # SIGILL): its function table stays zero and every run raises this reason
        modules = [*self.kernels.values(), *([driver] if driver is not None else [])]
        self._not_runnable = next(
            (m.not_runnable_reason for m in modules if m.not_runnable_reason), None)
        self._fns = np.array([0 if self._not_runnable else self.kernels[n].function_address
                              for n in kernel_names] or [0], dtype=np.int64)
        # what the stateful API (set_input, run(), ...) works on; a model with shape variables
        # has none until its first run (then: the buffers of the latest run's shape)
        self._own = _Buffers(self) if not self._vars else None
        self._spare: list[_Buffers] = []  # for concurrent run(**inputs); list ops are atomic
        # shape variables: the buffer sets of the latest shapes, by their sizes (see _buffers)
        self._pools: dict[tuple[int, ...], list[_Buffers]] = {}
        # _pool reorders and evicts in _pools: concurrent runs at new shapes raced there (one
        # thread's eviction popped the key another had just picked: KeyError, or "dictionary
        # changed size during iteration", out of run() with more shapes than MAX_SHAPES)
        self._pools_lock = threading.Lock()
        self._latest: tuple = (None, None, None)  # (inputs' shapes, sizes, pool) last run
        self._pending: dict[str, np.ndarray] = {}  # set_input of a model with variables
        self._env_of: dict[tuple, dict[str, int]] = {}  # inputs' shapes -> sizes (_bind)
        self._shapes_ok: set[tuple] = set()  # (input, shape) whose rank and fixed dims passed
        self._axes: list | None = None  # the inputs' symbolic axes, parsed once (_bind)
        # builds specialised to some sizes of the variables (add_variant), in the order added
        self._variants: list[tuple[dict[str, int], GraphModule]] = []
        self._inputs = {i["name"]: (tuple(i["shape"]), np.dtype(i["dtype"])) for i in p["inputs"]}
        self._outputs = [o["name"] for o in p["outputs"]]
        self._input_set: set[str] = set()
        self._in_place_slots = self._input_slots(p)
        self._out_slots = self._output_slots(p)
        # outputs of the last run(**inputs), returned to its caller and shown by get_output
        self._fresh: dict[str, np.ndarray] = {}
        self._stale: dict[str, np.ndarray] = {}  # inputs of the last run(**inputs), not copied
        # whether the module's own buffers hold a run's outputs: before that, get_output would
        # hand out the zeros of a fresh arena as if the model had computed them
        self._own_ran = False

    # -- introspection --------------------------------------------------------------------

    @property
    def input_names(self) -> list[str]:
        return list(self._inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self._outputs)

    @property
    def num_kernels(self) -> int:
        return len(self.kernels)

    @property
    def num_steps(self) -> int:
        return len(self.plan["steps"])

    @property
    def shape_vars(self) -> tuple[str, ...]:
        """The model's shape variables (issue 19), sorted; () for a model of fixed shapes."""
        return self._vars

    def input_info(self) -> dict[str, tuple[tuple[int, ...], str]]:
        return {n: (s, d.name) for n, (s, d) in self._inputs.items()}

    def __reduce_ex__(self, protocol: int):
        # its kernels are loaded native code and its arena raw memory: pickle and copy would
        # fail deep in ctypes (or share the buffers of the original); say what works instead
        raise TypeError("a GraphModule cannot be pickled or copied (it holds loaded native "
                        "code and raw buffers); save it with gm.save(path) and load it with "
                        "tensorlang.runtime.load(path), in this or another process")

    def __repr__(self) -> str:
        return (f"<tensorlang.runtime.GraphModule {self.plan.get('name', '?')}: "
                f"{self.num_steps} steps, {len(self.kernels)} kernels, mode={self.mode}>")

    # -- inputs and outputs ---------------------------------------------------------------

    def set_input(self, name: str | None = None, value: Any = None, **kwargs: Any) -> None:
        """Copy an input into the model's buffer: ``set_input("x", arr)`` or ``set_input(x=arr)``.
        The array must have exactly the declared shape and dtype."""
        for k, v in input_items(name, value, kwargs, self._inputs).items():
            self._set_one(k, v)

    def _set_one(self, name: str, value: Any) -> None:
        if self._vars:  # the buffers of a shape are known when every input is
            self._pending[name] = np.array(self._checked_input(name, value))
            self._input_set.add(name)
            return
        checked = self._checked_input(name, value)  # before the view: an unknown name has none
        np.copyto(self._own.views[name], checked)
        self._stale.pop(name, None)  # superseded: no later copy of an earlier array
        self._input_set.add(name)

    def _checked_input(self, name: str, value: Any) -> np.ndarray:
        """``value`` as an array of exactly input ``name``'s shape and dtype, else InputError."""
        if name not in self._inputs:
            raise InputError(f"unknown input {name!r}; the model's inputs are "
                             f"{self._describe_inputs()}")
        shape, dtype = self._inputs[name]
        if not isinstance(value, np.ndarray):
            # a numpy scalar (np.float32(0.5)) is what indexing or reducing an array gives: take
            # it as the 0-d array it stands for, with its own dtype (as onnxruntime does)
            if isinstance(value, (list, tuple, int, float, np.generic)):
                value = np.asarray(value)
            else:
                raise InputError(f"input {name!r} must be a numpy array, got "
                                 f"{type(value).__name__}")
        if value.dtype != dtype:
            raise dtype_error(name, dtype, value.dtype)
        if self._vars:
            if (name, value.shape) not in self._shapes_ok:  # (a repeated shape: a set look-up)
                _check_rank_and_fixed(name, shape, value.shape)
                if len(self._shapes_ok) >= 64 * self.MAX_SHAPES:
                    self._shapes_ok.clear()
                self._shapes_ok.add((name, value.shape))
        elif tuple(value.shape) != shape:
            raise InputError(f"input {name!r} must have shape {shape}, got {tuple(value.shape)}")
        return value

    def _describe_inputs(self) -> str:
        # (an ONNX input with an initializer is that constant here: the model may have none)
        return ", ".join(f"{n}: {d.name}[{', '.join(map(str, s))}]"
                         for n, (s, d) in self._inputs.items()) or "none (it takes no inputs)"

    def get_output(self, index: int | str = 0, copy: bool = True) -> np.ndarray:
        """Output ``index`` (position or name); a copy unless copy=False (then, after ``run()``,
        a view of the model's buffer, overwritten by the next run; after ``run(**inputs)``, the
        array that run returned)."""
        name = output_name(self._outputs, index)
        v = self._fresh.get(name)
        if v is None:
            if self._own is None or not self._own_ran:
                raise InputError("the model has not run yet: no output to get (call run() "
                                 "first)")
            v = self._own.views[name]
        return v.copy() if copy else v

    def get_num_outputs(self) -> int:
        return len(self._outputs)

    @staticmethod
    def _input_slots(p) -> dict[str, list[int]]:
        """For each input that the graph mode may read where the caller's array lies: the
        positions in the driver's argument table that hold its storage's address. An input
        qualifies when no kernel writes its storage (no in-place output into it) and no graph
        output lives in it (a reshape of the input returned as an output)."""
        storage = {n: int(v["storage"]) for n, v in p["values"].items()}
        written = {storage[a] for st in p["steps"] for a in st["args"][-int(st["n_out"]):]}
        outputs = {storage[o["name"]] for o in p["outputs"]}
        flat = [a for st in p["steps"] for a in st["args"]]
        slots = {}
        for i in p["inputs"]:
            sid = storage[i["name"]]
            if sid not in written and sid not in outputs:
                slots[i["name"]] = [k for k, a in enumerate(flat) if storage[a] == sid]
        return slots

    @staticmethod
    def _output_slots(p) -> dict[str, list[int]]:
        """For each graph output that the graph mode may write straight into a fresh array
        (as onnxruntime allocates its outputs): the positions in the driver's argument table
        that hold its storage's address. An output qualifies when a kernel writes it and its
        storage holds no other value (no input, no alias, no in-place partner)."""
        storage = {n: int(v["storage"]) for n, v in p["values"].items()}
        sharing = Counter(storage.values())
        written = {a for st in p["steps"] for a in st["args"][-int(st["n_out"]):]}
        inputs = {i["name"] for i in p["inputs"]}
        flat = [a for st in p["steps"] for a in st["args"]]
        return {o["name"]: [k for k, a in enumerate(flat) if a == o["name"]]
                for o in p["outputs"] if o["name"] in written and o["name"] not in inputs
                and sharing[storage[o["name"]]] == 1}

    def _readable_in_place(self, name: str, value: np.ndarray) -> bool:
        """True when the graph mode's kernels may read ``value`` where it lies instead of a
        copy in the arena (as onnxruntime binds a numpy input): an input that qualifies (see
        _input_slots), and a C-contiguous, aligned array (shape and dtype already checked)."""
        return (name in self._in_place_slots and value.flags.c_contiguous and
                value.flags.aligned)

    def _flush_stale(self) -> None:
        """Copy the inputs of the last run(**inputs) into the module's buffer (before a run()
        without inputs reads it)."""
        if self._vars:  # (run() takes them from _stale and _pending: see _execute)
            return
        # only those copied are dropped: a Ctrl-C between two copies left the rest uncopied
        # and forgotten, and the next run() read the inputs before them without a word
        stale, copied = self._stale, set()
        try:
            for name, value in stale.items():
                np.copyto(self._own.views[name], value)
                copied.add(name)
        finally:
            if self._stale is stale:  # (else a concurrent run(**inputs) set newer ones)
                self._stale = {k: v for k, v in stale.items() if k not in copied}

    # -- running --------------------------------------------------------------------------

    def run(self, mode: str | None = None, **inputs: Any) -> dict[str, np.ndarray] | None:
        """Run the model. With keyword inputs, every input must be given (or set earlier with
        set_input) and a dict output name -> array (fresh arrays) is returned; ``run()`` alone
        runs on the inputs set with set_input and returns None (TVM's style; read with
        get_output).

        Given every input, a run is safe to call from many threads at once (see the class
        docstring) and leaves the module's own buffers alone. In graph mode a C-contiguous
        input array is then read where it lies, not copied (unless a kernel would write into
        its buffer), and the kernels write the outputs straight into the arrays returned. The
        inputs are copied into the module's buffer only if a later ``run()`` without inputs
        needs them, so an array changed in between is seen as it is then."""
        mode, inputs = mode_and_inputs(mode, inputs, self._inputs)
        mode = checked_mode(mode, self.mode)
        if inputs:
            unknown = [k for k in inputs if k not in self._inputs]
            if unknown:
                raise InputError(f"unknown input(s) {unknown}; the model's inputs are "
                                 f"{self._describe_inputs()}")
            if len(inputs) == len(self._inputs):
                return self._run_private(mode, inputs)
        for k, v in inputs.items():
            self._set_one(k, v)
        missing = [k for k in self._inputs if k not in self._input_set and k not in self._stale]
        if missing:
            raise InputError(f"missing input(s) {missing}; the model's inputs are "
                             f"{self._describe_inputs()}")
        self._execute(mode)
        if not inputs:
            return None
        return {n: self.get_output(n) for n in self._outputs}

    def _run_private(self, mode: str, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """One run given every input, on a buffer set checked out of the pool."""
        values = {k: self._checked_input(k, v) for k, v in inputs.items()}
        env, spare = self._sizes_and_pool(values) if self._vars else ({}, self._spare)
        if spare is None:  # a variant specialised to these sizes runs them
            outputs = self._variant_for(env)._run_private(mode, values)
            self._stale, self._input_set, self._fresh = values, set(values), outputs
            return dict(outputs)
        try:
            b = spare.pop()
        except IndexError:
            b = _Buffers(self) if not self._vars else self._new_buffers(env)
        try:
            outputs = (self._run_graph(b, values) if mode == "graph"
                       else self._run_interactive(b, values))
        finally:
            spare.append(b)
        if self._vars:
            self._own = b  # (profile and the stateful API read the latest shape's buffers)
            self._own_ran = True
        # the stateful API sees this run as the latest (plain assignments: no torn state)
        self._stale = values
        self._input_set = set(values)
        self._fresh = outputs
        return dict(outputs)

    # -- shape variables (issue 19) ------------------------------------------------------------

    MAX_SHAPES = 8  # buffer sets kept for this many distinct shapes (the latest ones)

    def _sizes_and_pool(self, values: Mapping[str, np.ndarray]) -> tuple:
        """(the shape variables' sizes, the spare buffer sets of that shape), or (sizes, None)
        when a specialised variant takes these sizes. The last run's shape is remembered
        whole: a shape that repeats costs one tuple compare (0.7 us against 1.4 us for the
        look-ups below, a loaded Zen 4)."""
        key = tuple(values[n].shape for n in self._inputs)
        latest = self._latest
        if latest[0] == key:
            return latest[1], latest[2]
        env = self._bind(key, values)
        if self._variants and self._variant_for(env) is not None:
            return env, None
        pool = self._pool(env)
        self._latest = (key, env, pool)  # (one assignment: a concurrent run reads a whole one)
        return env, pool

    def _bind(self, key: tuple, values: Mapping[str, np.ndarray]) -> dict[str, int]:
        """The shape variables' sizes from the inputs' shapes (``_solve_sizes``), remembered
        by the inputs' shapes (key): a shape that repeats costs a dict look-up."""
        env = self._env_of.get(key)
        if env is None:
            if self._axes is None:
                from ._dims import DimExpr

                self._axes = [(n, ax, DimExpr(d, self._vars))
                              for n, (shape, _) in self._inputs.items()
                              for ax, d in enumerate(shape) if not isinstance(d, int)]
            env = _solve_sizes(self._vars, self._axes, values)
            if len(self._env_of) >= 4 * self.MAX_SHAPES:
                self._env_of.clear()
            self._env_of[key] = env
        return env

    def _pool(self, env: Mapping[str, int]) -> list[_Buffers]:
        """The spare buffer sets of this shape: made at its first run (the arena placed for
        its sizes) and reused while it repeats; the oldest shape's dropped beyond MAX_SHAPES."""
        key = tuple(env[v] for v in self._vars)
        with self._pools_lock:  # (taken only when the shape differs from the last run's)
            pool = self._pools.pop(key, None)
            if pool is None:
                pool = []
                while len(self._pools) >= self.MAX_SHAPES:
                    self._pools.pop(next(iter(self._pools)))
            self._pools[key] = pool  # (re)inserted last: the dict's order is the use order
        return pool

    def _new_buffers(self, env: Mapping[str, int]) -> _Buffers:
        plan = _plan.instantiate(self.plan, env)
        _plan.check_kernels(plan, self.kernels, None, env)
        return _Buffers(self, plan, env)

    def add_variant(self, sizes: Mapping[str, int], variant: GraphModule) -> None:
        """Run the inputs whose shapes give these sizes of the shape variables on ``variant``
        (a build of the same model specialised to them: ``graph.build(g, specialize=...)``);
        the first variant added whose sizes all match is taken, else this module runs."""
        sizes = dict(sizes)
        if not sizes or set(sizes) - set(self._vars) or not all(
                _is_size(n) for n in sizes.values()):
            raise ValueError(f"a variant's sizes must give some of {list(self._vars)} as ints "
                             f">= 0, got {sizes}")
        theirs = {n: d for n, (_, d) in variant._inputs.items()}
        if theirs != {n: d for n, (_, d) in self._inputs.items()} or \
                variant._outputs != self._outputs:
            raise ValueError("a variant must have the model's inputs (names, dtypes) and "
                             "outputs")
        if variant is self or variant._variants:
            # a run would hand its inputs back and forth (RecursionError); a specialised
            # build dispatches nothing further
            raise ValueError("a variant must be another build with no variants of its own")
        self._variants.append((sizes, variant))
        self._latest = (None, None, None)  # the last run's shape may be the variant's now

    @property
    def variants(self) -> list[dict[str, int]]:
        """The sizes of the specialised variants (``add_variant``), in dispatch order."""
        return [dict(s) for s, _ in self._variants]

    def _variant_for(self, env: Mapping[str, int]) -> GraphModule | None:
        for sizes, variant in self._variants:
            if all(env[v] == n for v, n in sizes.items()):
                return variant
        return None

    def memory_at(self, **sizes: int) -> dict[str, int]:
        """The arena at the given sizes of the shape variables: its bytes, the naive sum and
        the lower bound (the most bytes live at one step). A model of fixed shapes: its one
        plan's figures."""
        missing = [v for v in self._vars if v not in sizes]
        if missing or set(sizes) - set(self._vars):
            raise InputError(f"memory_at needs a size for each of {list(self._vars)}, got "
                             f"{sorted(sizes)}")
        if not self._vars:
            return dict(self.plan.get("memory", {}))
        bad = {v: n for v, n in sizes.items() if not _is_size(n)}
        if bad:  # (else a float or a str fails deep in the plan's arithmetic)
            raise InputError(f"memory_at: sizes must be ints >= 0, got {bad}")
        return _plan.instantiate(self.plan, sizes)["memory"]

    def _run_graph(self, b: _Buffers, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        bound = {}  # inputs the kernels read where the caller's arrays lie
        for k, v in values.items():
            if self._readable_in_place(k, v):
                bound[k] = v
            else:
                np.copyto(b.views[k], v)
        fresh = {}
        for n, slots in self._out_slots.items():
            v = b.views[n]
            buf, addr = _aligned_bytes_at(v.nbytes)
            b.bind(slots, addr)
            fresh[n] = buf.view(v.dtype).reshape(v.shape)
        for k, v in bound.items():  # (``.ctypes.data`` would cost ~1 us more per input)
            b.bind(self._in_place_slots[k], v.__array_interface__["data"][0])
        try:
            self._run_buffers(b, "graph")
        finally:
            for k in bound:
                b.bind(self._in_place_slots[k], b.addr[k])
            for n in fresh:
                b.bind(self._out_slots[n], b.addr[n])
        return {n: fresh[n] if n in fresh else b.views[n].copy() for n in self._outputs}

    def _run_interactive(self, b: _Buffers, values: Mapping[str, np.ndarray],
                         ) -> dict[str, np.ndarray]:
        for k, v in values.items():
            np.copyto(b.views[k], v)
        self._run_buffers(b, "interactive")
        return {n: b.views[n].copy() for n in self._outputs}

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        """``run(**inputs)``, whose outputs it returns always (run() alone returns None: a
        model without inputs, or inputs set with set_input, gave None here)."""
        out = self.run(**inputs)
        return {n: self.get_output(n) for n in self._outputs} if out is None else out

    def _execute(self, mode: str) -> None:
        """Run on the module's own buffers (the stateful API)."""
        if self._vars:
            self._run_private(mode, {**self._stale, **self._pending})
            self._pending = {}
            return
        self._flush_stale()
        self._fresh = {}  # the module's buffer holds the latest outputs
        self._own_ran = False  # (until this run succeeds: a failed one leaves partial outputs)
        self._run_buffers(self._own, mode)
        self._own_ran = True

    def _run_buffers(self, b: _Buffers, mode: str) -> None:
        if self._not_runnable:
            raise ArtifactError(f"this model cannot run here: {self._not_runnable}")
        if mode == "graph":
            if b.driver_raw is None:
                raise TensorlangError("this module has no graph driver; use mode='interactive'")
            fn, raw = b.driver_raw
            if fn(*raw):
                self._fail(int(b.status[0]), int(b.status[1]))
        elif mode == "interactive":
            for i, (fn, raw, _st, _k) in enumerate(b.steps):
                rc = fn(*raw)
                if rc:
                    self._fail(i, rc)
        else:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")

    def _fail(self, step: int, code: int) -> None:
        st = self.plan["steps"][step]
        k = self.kernels[st["kernel"]]
        detail = k.manifest.get("error_messages", {}).get(str(code))
        raise KernelError(f"{st['kernel']} (node {st['node']!r}, {st['op']})", code, detail)


    # -- measuring ------------------------------------------------------------------------

    def profile(self, number: int = 10, repeat: int = 3) -> list[dict[str, Any]]:
        """Per-node time in the interactive mode: each kernel timed in a native loop on the
        model's own buffers (after one full run). Returns rows {node, op, kernel, time_s},
        in execution order; ``format_profile(rows)`` prints them. The plan's per-kernel times
        (``plan["kernels"][name]["time_s"]``, until then the tuning record's or the roofline
        estimate) become these measurements (``time_source`` "profile"; a kernel run by
        several nodes: the median of theirs)."""
        number, repeat = count("number", number), count("repeat", repeat)
        self._zeros_for_unset()
        self._execute("interactive")
        rows = []
        for fn, raw, st, k in self._own.steps:
            best = float("inf")
            for _ in range(repeat):
                elapsed, rc = _time_native(k.function_address, fn, list(raw), number)
                if rc:
                    raise KernelError(st["kernel"], rc)
                best = min(best, elapsed / number)
            rows.append({"node": st["node"], "op": st["op"], "kernel": st["kernel"],
                         "time_s": best})
        by_kernel: dict[str, list[float]] = {}
        for r in rows:
            by_kernel.setdefault(r["kernel"], []).append(r["time_s"])
        for name, times in by_kernel.items():
            entry = self.plan["kernels"].get(name)
            if entry is not None:
                entry["time_s"] = statistics.median(times)
                entry["time_source"] = "profile"
        return rows

    def step_times(self, runs: int = 15, kernels: Mapping[str, Module] | None = None,
                   ) -> dict[str, list[float]]:
        """Node -> seconds of its kernel in each of ``runs`` runs on the module's own buffers
        (inputs already set, else zeros): every step called once per run, in order, each call
        timed on its own, so each kernel meets the caches as the kernels before it leave them
        (``profile`` times a kernel in a loop of its own, with its weights in cache). Their sum
        is a run's time less the driver's. ``kernels``: node -> a kernel taking the same
        arguments (the same workload, another schedule) to run in that node's step instead,
        on the same buffers and weights: configs compared inside one build, wherever its
        memory lies (ValueError naming a node whose kernel takes other arguments)."""
        runs = count("runs", runs)
        if kernels is not None:
            self._check_step_kernels(kernels)
        # run first: a model with shape variables has its buffers (steps) only after a run,
        # and the steps timed must be those of the shape just set
        self._zeros_for_unset()
        self._execute("interactive")
        steps = [self._step_with(step, (kernels or {}).get(step[2]["node"]))
                 for step in self._own.steps]
        per: dict[str, list[float]] = {st["node"]: [] for _fn, _raw, st, _k in steps}
        for _ in range(runs):
            for fn, raw, st, k in steps:
                # woken: in a whole run a kernel launches right after the one before, its
                # workers spinning; here Python runs between two steps, long enough for the
                # workers to be yielding their CPUs, and the in-run figure then held their way
                # back (2 threads, a 2-conv model: its steps summed 2.9-4.7 us, woken 2.8-3.3,
                # whole runs 3.4-3.6 with the driver). calibrate_flush compares with these.
                elapsed, rc = _time_native(k.function_address, fn, list(raw), 1, woken=True)
                if rc:
                    raise KernelError(st["kernel"], rc)
                per[st["node"]].append(elapsed)
        return per

    def _check_step_kernels(self, kernels: Any) -> None:
        """step_times' ``kernels``: a mapping of this model's node names to Modules. A name
        no step has (a typo) was ignored: the step's own kernel was timed in its place."""
        if not isinstance(kernels, Mapping):
            raise TypeError(f"step_times: kernels must map node names to Modules, got "
                            f"{type(kernels).__name__}")
        bad = {n: type(k).__name__ for n, k in kernels.items() if not isinstance(k, Module)}
        if bad:
            raise TypeError(f"step_times: kernels must map node names to Modules, got {bad}")
        nodes = [st["node"] for st in self.plan["steps"]]
        unknown = sorted(set(kernels) - set(nodes), key=str)
        if unknown:
            raise ValueError(f"step_times: no step runs node(s) {unknown}; the steps' nodes "
                             f"are {nodes}")

    @staticmethod
    def _step_with(step: tuple, kernel: Module | None) -> tuple:
        """An interactive step with ``kernel`` in place of its own (see step_times)."""
        _fn, raw, st, own = step
        if kernel is None:
            return step
        if kernel.manifest["args"] != own.manifest["args"] or kernel.vars != own.vars:
            raise ValueError(f"step_times: the kernel given for node {st['node']!r} takes other "
                             f"arguments than its step's kernel {st['kernel']!r}")
        return kernel.raw_function, raw, st, kernel

    def benchmark(self, mode: str | None = None, number: int = 10, repeat: int = 3,
                  ) -> TimingResult:
        """Time whole runs (inputs already set, else zeros) in ``mode``."""
        mode = checked_mode(mode, self.mode)
        number, repeat = count("number", number), count("repeat", repeat)
        self._zeros_for_unset()
        self._execute(mode)
        results = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                self._execute(mode)
            results.append((time.perf_counter() - t0) / number)
        return TimingResult.from_results(results, number)

    def _zeros_for_unset(self) -> None:
        unset = [n for n in self._inputs if n not in self._input_set]
        if unset and self._vars:
            raise InputError(f"inputs {unset} are not set; a model with shape variables "
                             f"({', '.join(self._vars)}) needs them (set_input) to know its "
                             "shapes")
        if unset:
            self.set_input(**{n: np.zeros(self._inputs[n][0], self._inputs[n][1])
                              for n in unset})

    def dispatch_overhead(self, number: int = 200, repeat: int = 5) -> dict[str, float]:
        """Per-kernel dispatch cost of both modes, in seconds.

        Measured on the model itself: a run's time minus the sum of its kernels' times (each
        kernel timed in a native loop), divided by the number of kernel calls. For the graph
        mode the driver is also timed in a native loop, so the figure is what the generated
        driver adds per kernel; for the interactive mode it is the Python loop's cost."""
        number, repeat = count("number", number), count("repeat", repeat)
        rows = self.profile(number=number, repeat=repeat)
        kernel_sum = sum(r["time_s"] for r in rows)
        n = max(1, len(rows))
        out = {"kernels": float(len(rows)), "kernel_sum_s": kernel_sum}
        inter = self.benchmark("interactive", number=number, repeat=repeat).min
        out["interactive_run_s"] = inter
        out["interactive_per_kernel_s"] = (inter - kernel_sum) / n
        if self._own.driver_raw is not None:
            fn, raw = self._own.driver_raw
            best = float("inf")
            for _ in range(repeat):
                elapsed, rc = _time_native(self.driver.function_address, fn, list(raw), number)
                if rc:
                    self._fail(int(self._own.status[0]), int(self._own.status[1]))
                best = min(best, elapsed / number)
            out["graph_run_s"] = best
            out["graph_per_kernel_s"] = (best - kernel_sum) / n
        return out

    # -- artifacts ------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model as a folder (see the module docstring); returns its path. A model
        saved at ``path`` before is replaced; anything else there is refused (FileExistsError)."""
        return write_folder(path, self._write)

    def _write(self, tmp: Path) -> None:
        (tmp / "kernels").mkdir()
        target = self.plan.get("target", {})
        required = _cpu.required_flags(target.get("features", ""), target.get("triple", ""))
        (tmp / "plan.json").write_text(json.dumps(self.plan, indent=1, sort_keys=True))
        consts = {}
        for st in self.plan["storages"]:
            if st["kind"] == "const":
                name = st["const"]
                consts[name] = self._const_arrays[name]  # raw bytes; dtype/shape in plan
        np.savez(tmp / "weights.npz", **{f"w{i}": consts[n] for i, n in enumerate(sorted(consts))})
        (tmp / "weights_index.json").write_text(json.dumps(sorted(consts)))
        for name, k in self.kernels.items():
            k.save(tmp / "kernels" / f"{name}.tlm")
        if self.driver is not None:
            self.driver.save(tmp / "driver.tlm")
        for i, (_, variant) in enumerate(self._variants):
            variant.save(tmp / "variants" / f"v{i}")
        manifest = {
            "format": GRAPH_ARTIFACT_FORMAT,
            "kind": GRAPH_KIND,
            "version": __version__,
            "arch": _cpu.triple_arch(target.get("triple", "")) or _cpu.machine(),
            "target": target,
            "required_features": required,
            "kernels": sorted(self.kernels),
            "has_driver": self.driver is not None,
            "variants": [{"sizes": sizes, "path": f"variants/v{i}"}
                         for i, (sizes, _) in enumerate(self._variants)],
            # checked at load: a flipped byte, a truncated file or files swapped between
            # kernels are refused before anything is loaded
            "files": {f.relative_to(tmp).as_posix(): _sha256_file(f)
                      for f in sorted(tmp.rglob("*")) if f.is_file()},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))


def checked_mode(mode: Any, default: str) -> str:
    """``mode`` (None: ``default``) if it names an execution mode. An array passed as
    run(x) lands here: say that inputs go by name rather than fail on its truth value."""
    if mode is None:
        mode = default  # (the attribute may have been set to anything: checked as well)
    if not isinstance(mode, str):
        raise TypeError(f"mode must be one of {MODES}, got {type(mode).__name__}; inputs are "
                        "given by name: run(x=array)")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def mode_and_inputs(mode: Any, inputs: dict[str, Any], names: Mapping[str, Any]
                    ) -> tuple[Any, dict[str, Any]]:
    """run()'s ``mode`` and inputs, where the model has an input named "mode" (given by
    keyword, its array landed in run's mode parameter: "mode must be one of ...")."""
    if "mode" in names and mode is not None and not isinstance(mode, str):
        return None, {**inputs, "mode": mode}
    return mode, inputs


def input_items(name: Any, value: Any, kwargs: Mapping[str, Any],
                names: Mapping[str, Any]) -> dict[str, Any]:
    """set_input's ``(name, value)`` and keyword inputs as one dict. A value without a name
    was ignored (run() then used the input set before: a silently wrong result), an array
    given as the name failed as "unhashable type". A model's inputs named "name" or "value"
    (an attention block's query, key, value) are taken by keyword as any other."""
    items = dict(kwargs)
    if "name" in names and name is not None and not isinstance(name, str):
        items["name"], name = name, None
    if "value" in names and value is not None and name is None:
        items["value"], value = value, None
    if name is None:
        if value is not None:
            raise TypeError("set_input: a value without the input's name; call "
                            "set_input(name, value) or set_input(name=value)")
        return items
    if not isinstance(name, str):
        raise TypeError(f"set_input: the input's name must be a str, got "
                        f"{type(name).__name__}; call set_input(name, value) or "
                        "set_input(name=value)")
    if name in items:
        raise TypeError(f"set_input: input {name!r} is given twice")
    items[name] = value
    return items


def output_name(outputs: list[str], index: Any) -> str:
    """The output that ``index`` (a name, or a position, negative from the end) picks."""
    if isinstance(index, str):
        if index not in outputs:
            raise InputError(f"no output named {index!r}; the outputs are {outputs}")
        return index
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"an output is picked by its name or position (int), got "
                        f"{type(index).__name__}")
    if not -len(outputs) <= index < len(outputs):
        raise InputError(f"output index {index} out of range ({len(outputs)} outputs: "
                         f"{outputs})")
    return outputs[index]


def _is_size(n: Any) -> bool:
    return isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0


def dtype_error(name: str, want: np.dtype, got: np.dtype) -> InputError:
    if got.newbyteorder("=") == want:  # '>f4' is named float32 too
        return InputError(f"input {name!r} must have dtype {want.name} in native byte order, "
                          f"got {got.str} (convert with .astype('{want.name}'))")
    return InputError(f"input {name!r} must have dtype {want.name}, got {got.name} (convert "
                      f"with .astype('{want.name}'))")


def _arena(nbytes: int) -> np.ndarray:
    try:
        return huge_page_bytes(nbytes)
    except (MemoryError, OSError, OverflowError, ValueError) as e:
        raise MemoryError(f"the model's activations need {nbytes / 2**30:.3g} GiB (its plan's "
                          f"arena), which cannot be allocated here ({e})") from None


def _check_rank_and_fixed(name: str, shape: tuple, got: tuple) -> None:
    """An input of a model with shape variables: its rank and its fixed dimensions."""
    if len(got) != len(shape) or any(isinstance(d, int) and d != g for d, g in zip(shape, got)):
        raise InputError(f"input {name!r} must have shape [{', '.join(map(str, shape))}], got "
                         f"{tuple(got)}")


def _solve_sizes(names: tuple[str, ...], axes: list, values: Mapping[str, np.ndarray],
                 ) -> dict[str, int]:
    """Each shape variable's size, read from the first input axis that is the variable alone,
    else solved from an axis linear in it (``2 * n``); then every symbolic axis is checked. Two
    inputs that disagree on a variable are refused naming it and both sizes. ``axes``: (input,
    axis, its DimExpr) for every symbolic axis of the inputs."""
    env: dict[str, int] = {}
    seen: dict[str, str] = {}  # variable -> where its size was read
    exprs = [(n, ax, e, values[n].shape[ax]) for n, ax, e in axes]
    for n, ax, e, got in exprs:
        if e.text in names and e.text not in env:
            env[e.text], seen[e.text] = got, f"input {n!r} axis {ax}"
    for n, ax, e, got in exprs:
        try:
            solved = e.solve(got, env)
        except ValueError:  # no integer value gives it: a size the model cannot take
            raise InputError(f"input {n!r} axis {ax} must be {e.text} for some integer "
                             f"{' and '.join(v for v in e.vars if v not in env)}, got {got}"
                             ) from None
        if solved is not None and solved[1] < 0:
            raise InputError(f"input {n!r} axis {ax} must be {e.text}, got {got}: that needs "
                             f"{solved[0]} = {solved[1]} < 0")
        if solved is not None:
            env[solved[0]], seen[solved[0]] = solved[1], f"input {n!r} axis {ax} ({e.text})"
    for n, ax, e, got in exprs:
        _check_axis(n, ax, e, got, env, seen)
    missing = [v for v in names if v not in env]
    if missing:
        raise InputError(f"cannot tell the size of {', '.join(missing)} from the inputs' shapes")
    return env


def _check_axis(n: str, ax: int, e, got: int, env: dict, seen: dict) -> None:
    if any(v not in env for v in e.vars):
        return
    want = e.evaluate(env)
    if want == got:
        return
    if e.text in env:
        raise InputError(f"inputs disagree on {e.text}: {seen[e.text]} gives {want}, input "
                         f"{n!r} axis {ax} has {got}")
    sizes = ", ".join(f"{v} = {env[v]} (from {seen[v]})" for v in e.vars)
    raise InputError(f"input {n!r} axis {ax} must be {e.text} = {want} with {sizes}, got "
                     f"{got}")


def _time_native(address: int, fn, raw: list[int], number: int,
                 woken: bool = False) -> tuple[float, int]:
    """Time ``number`` calls in a native loop when the thread pool library is available, else
    from Python (runtime.timer.call_timer, as Module.time_evaluator); ``woken``: the pool's
    workers made to run just before, untimed."""
    return call_timer(address, fn, len(raw))(raw, number, woken=woken)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class _Artifact:
    """Reads the files of a saved model, each checked against the manifest's sha256; anything
    missing, unreadable or malformed is an ArtifactError naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        man_path = path / "manifest.json"
        if not path.is_dir() or not man_path.is_file():
            raise ArtifactError(f"{path} is not a tensorlang model artifact (no manifest.json)")
        self.manifest = self.json("manifest.json", checked=False)
        man = self.manifest
        if not isinstance(man, dict):
            raise ArtifactError(f"{man_path}: must hold a JSON object, got "
                                f"{type(man).__name__}")
        if man.get("kind") != GRAPH_KIND or man.get("format") != GRAPH_ARTIFACT_FORMAT:
            raise ArtifactError(f"{path}: artifact format {man.get('format')!r} is not "
                                f"supported (this runtime reads format {GRAPH_ARTIFACT_FORMAT})")
        self.digests = man.get("files")  # None: saved before digests were recorded
        if self.digests is not None and not (isinstance(self.digests, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.digests.items())):
            raise ArtifactError(f"{man_path}: 'files' must map file names to sha256")
        kernels = man.get("kernels")
        if not (isinstance(kernels, list) and all(
                isinstance(k, str) and _SAFE_NAME.fullmatch(k) for k in kernels)):
            raise ArtifactError(f"{man_path}: 'kernels' must be a list of kernel names")
        if not isinstance(man.get("has_driver"), bool):
            raise ArtifactError(f"{man_path}: 'has_driver' must be true or false")

    def bytes(self, rel: str, checked: bool = True) -> bytes:
        f = self.path / rel
        try:
            data = f.read_bytes()
        except OSError as e:
            raise ArtifactError(f"{f}: cannot read it ({e.strerror or e})") from None
        if checked and self.digests is not None:
            if rel not in self.digests:
                raise ArtifactError(f"{f} is not listed in the artifact's manifest")
            if hashlib.sha256(data).hexdigest() != self.digests[rel]:
                raise ArtifactError(f"{f} is corrupt or was replaced (its sha256 differs "
                                    "from the one recorded at save)")
        return data

    def json(self, rel: str, checked: bool = True) -> Any:
        try:
            return json.loads(self.bytes(rel, checked))
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
            raise ArtifactError(f"{self.path / rel}: corrupt JSON ({e})") from None
        except RecursionError:
            raise ArtifactError(f"{self.path / rel}: corrupt JSON (nested too deep)") from None

    def weights(self) -> dict[str, np.ndarray]:
        names = self.json("weights_index.json")
        rel = "weights.npz"
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)
                and len(set(names)) == len(names)):
            raise ArtifactError(f"{self.path / 'weights_index.json'}: must list distinct "
                                "weight names")
        try:
            with np.load(io.BytesIO(self.bytes(rel)), allow_pickle=False) as z:
                return {n: z[f"w{i}"] for i, n in enumerate(names)}
        except ArtifactError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure to parse the file is corruption
            raise ArtifactError(f"{self.path / rel}: unreadable ({type(e).__name__}: {e})"
                                ) from None

    def module(self, rel: str) -> Module:
        self.bytes(rel)  # the digest check: the file is the one saved under this name
        return load_module(self.path / rel)


def load(path: str | os.PathLike, mode: str = "graph") -> GraphModule:
    """Load a model saved with :meth:`GraphModule.save`: no LLVM optimizer, no tuning (the
    kernels' shared libraries are loaded as they are).

    Refuses, with an ArtifactError naming the file and what is wrong: a missing, unreadable or
    malformed file, one whose sha256 differs from the one recorded at save (a flipped byte, a
    truncated file, kernel files swapped), a plan that does not hold together or whose kernels
    take other arrays than its steps pass; and an artifact of another format or major version,
    another architecture, or one built for CPU features this machine lacks."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    from .program import is_program, load_program

    if is_program(path):  # a model with run-time control flow (graph.control_flow)
        return load_program(path, mode=mode)
    art = _Artifact(Path(path))
    man = art.manifest
    _check_build_fields(art.path, man)
    plan = art.json("plan.json")
    try:
        _plan.check_plan(plan)
    except _plan.PlanError as e:
        raise ArtifactError(f"{art.path / 'plan.json'}: {e}") from None
    raw = art.weights()
    constants = {st["const"]: raw[st["const"]] for st in plan["storages"]
                 if st["kind"] == "const" and st["const"] in raw}
    kernels = {n: art.module(f"kernels/{n}.tlm") for n in man["kernels"]}
    driver = art.module("driver.tlm") if man["has_driver"] else None
    try:
        gm = GraphModule(plan, kernels, driver, constants, mode=mode)
    except _plan.PlanError as e:
        raise ArtifactError(f"{art.path}: the plan and its kernels or weights disagree: {e}"
                            ) from None
    variants = man.get("variants", [])  # (absent in artifacts saved before variants existed)
    if not isinstance(variants, list):  # (a number here was a TypeError out of the loop)
        raise ArtifactError(f"{art.path / 'manifest.json'}: 'variants' must be a list, got "
                            f"{type(variants).__name__}")
    for v in variants:
        if not (isinstance(v, dict) and isinstance(v.get("sizes"), dict)
                and v.get("path") in (f"variants/v{i}" for i in range(len(man["variants"])))):
            raise ArtifactError(f"{art.path / 'manifest.json'}: variant entry {v!r} is malformed")
        try:
            gm.add_variant(v["sizes"], load(art.path / v["path"], mode=mode))
        except ValueError as e:
            raise ArtifactError(f"{art.path / v['path']}: {e}") from None
    return gm


def _check_build_fields(path: Path, man: dict) -> None:
    version, arch, required = man.get("version"), man.get("arch"), man.get("required_features")
    if not isinstance(version, str) or not isinstance(arch, (str, type(None))) or not (
            isinstance(required, list) and all(isinstance(f, str) for f in required)):
        raise ArtifactError(f"{path / 'manifest.json'}: version, arch or required_features has "
                            "the wrong type (expected a string, a string, a list of strings)")
    check_built_for_here(path, version, arch, required)
