"""Checks that a model plan is well formed and agrees with the kernels that run it.

A GraphModule turns the plan into raw addresses that native code reads and writes, so a plan
that does not hold together (a value larger than its storage, a storage past the arena's end, a
kernel whose arguments differ from the step that calls it, a driver built for other steps)
would make the kernels read or write out of bounds. Every GraphModule checks its plan here,
before any address is computed; ``load`` reports a failure as an ArtifactError naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorlang.errors import TensorlangError


class PlanError(TensorlangError, ValueError):
    """A model plan that is malformed or disagrees with its kernels, driver or weights."""


# -- the plan, typed --------------------------------------------------------------------------
# graph.build makes an ExecutionPlan; a GraphModule and an artifact's plan.json hold its JSON
# form (to_json), the format below. from_json reads a checked plan back, the plans of artifacts
# saved before these types existed included (the JSON is the same).

PLAN_FORMAT = 1


def dims_json(shape) -> list:
    """A shape as the plan's JSON holds it: ints, and the text of symbolic dimensions
    (expressions of the plan's shape variables, issue 19: ``"batch * seq"``)."""
    return [d if isinstance(d, int) else str(d) for d in shape]


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict:
        return {"name": self.name, "shape": dims_json(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class ValueSpec:
    """A value of the graph: the storage holding it, its shape and dtype; ``needs``: extents
    that must be >= 1 at run time for the node making it to be defined (a conv or pool over a
    symbolic size: its windows, by ONNX's unclamped formula; the shape holds them clamped)."""

    storage: int
    shape: tuple[int, ...]
    dtype: str
    needs: tuple = ()

    def to_json(self) -> dict:
        out = {"storage": self.storage, "shape": dims_json(self.shape), "dtype": self.dtype}
        if self.needs:
            out["needs"] = dims_json(self.needs)
        return out


@dataclass(frozen=True)
class StorageSpec:
    """A buffer one or more values share: in the arena (at ``offset``) or a weight (``const``
    names it)."""

    id: int
    kind: str  # "arena" or "const"
    nbytes: int
    const: str | None = None
    offset: int | None = None  # arena storages, once memory is planned

    def to_json(self) -> dict:
        nbytes = self.nbytes if isinstance(self.nbytes, int) else str(self.nbytes)
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "nbytes": nbytes}
        if self.const is not None:
            out["const"] = self.const
        if self.offset is not None:
            out["offset"] = self.offset
        return out


@dataclass(frozen=True)
class StepSpec:
    """One kernel call: the node it runs, its kernel, its arguments (inputs, then the ``n_out``
    outputs); ``inplace``: the input whose storage the output is written into."""

    node: str
    op: str
    kernel: str
    args: tuple[str, ...]
    n_out: int
    inplace: str | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"node": self.node, "op": self.op, "kernel": self.kernel,
                               "args": list(self.args), "n_out": self.n_out}
        if self.inplace is not None:
            out["inplace"] = self.inplace
        return out


@dataclass(frozen=True)
class KernelEntry:
    """What the build knows about a kernel (for reports and ``gm.profile``)."""

    op: str
    workload: str
    schedule: str
    tuned: bool
    ops: tuple[str, ...]
    layout: str
    flops: float
    bytes: float
    time_s: float
    time_source: str

    def to_json(self) -> dict:
        return {"op": self.op, "workload": self.workload, "schedule": self.schedule,
                "tuned": self.tuned, "ops": list(self.ops), "layout": self.layout,
                "flops": self.flops, "bytes": self.bytes, "time_s": self.time_s,
                "time_source": self.time_source}


@dataclass(frozen=True)
class ExecutionPlan:
    """A compiled model's plan: its values and where they live, the steps in order, the arena."""

    name: str
    target: dict
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    values: dict[str, ValueSpec]
    storages: tuple[StorageSpec, ...]
    arena_bytes: int
    steps: tuple[StepSpec, ...]
    kernels: dict[str, KernelEntry]
    memory: dict[str, int] = field(default_factory=dict)  # arena, naive and lower-bound bytes
    format: int = PLAN_FORMAT
    # a model with symbolic shapes (issue 19): its shape variables, and each arena storage's
    # (first, last) step, from which the runtime places the arena at each new shape
    vars: tuple[str, ...] = ()
    lifetimes: dict[int, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict:
        out = self._static_json()
        if self.vars:
            out["vars"] = list(self.vars)
            out["lifetimes"] = {str(s): list(t) for s, t in sorted(self.lifetimes.items())}
        return out

    def _static_json(self) -> dict:
        return {
            "format": self.format,
            "name": self.name,
            "target": self.target,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "values": {n: v.to_json() for n, v in self.values.items()},
            "storages": [st.to_json() for st in self.storages],
            "arena_bytes": self.arena_bytes,
            "steps": [st.to_json() for st in self.steps],
            "kernels": {n: k.to_json() for n, k in self.kernels.items()},
            "memory": dict(self.memory),
        }

    @classmethod
    def from_json(cls, plan: Any) -> ExecutionPlan:
        """The typed form of a plan's JSON (checked first: a PlanError names what is wrong)."""
        check_plan(plan)
        fmt = plan.get("format", PLAN_FORMAT)
        _need(fmt == PLAN_FORMAT, f"plan format {fmt!r} is not {PLAN_FORMAT}, the format this "
                                  "version reads")
        return cls(
            name=plan.get("name", ""),
            target=plan.get("target", {}),
            inputs=tuple(_tensor(t) for t in plan["inputs"]),
            outputs=tuple(_tensor(t) for t in plan["outputs"]),
            values={n: ValueSpec(v["storage"], tuple(v["shape"]), v["dtype"],
                                 tuple(v.get("needs", ())))
                    for n, v in plan["values"].items()},
            storages=tuple(StorageSpec(st["id"], st["kind"], st["nbytes"], st.get("const"),
                                       st.get("offset")) for st in plan["storages"]),
            arena_bytes=plan["arena_bytes"],
            steps=tuple(StepSpec(st.get("node", ""), st.get("op", ""), st["kernel"],
                                 tuple(st["args"]), st["n_out"], st.get("inplace"))
                        for st in plan["steps"]),
            kernels={n: _kernel_entry(k) for n, k in plan.get("kernels", {}).items()},
            memory=dict(plan.get("memory", {})),
            format=fmt,
            vars=tuple(plan.get("vars", ())),
            lifetimes={int(s): tuple(t) for s, t in plan.get("lifetimes", {}).items()},
        )


def _tensor(t: dict) -> TensorSpec:
    return TensorSpec(t["name"], tuple(t["shape"]), t["dtype"])


def _kernel_entry(k: Any) -> KernelEntry:
    _need(isinstance(k, dict), f"kernel entry {k!r} must be an object")
    return KernelEntry(k.get("op", ""), k.get("workload", ""), k.get("schedule", ""),
                       bool(k.get("tuned", False)), tuple(k.get("ops", ())), k.get("layout", ""),
                       float(k.get("flops", 0.0)), float(k.get("bytes", 0.0)),
                       float(k.get("time_s", 0.0)), k.get("time_source", ""))


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise PlanError(msg)


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _dtype(name: Any, where: str) -> np.dtype:
    _need(isinstance(name, str), f"{where}: dtype {name!r} is not a dtype name")
    try:
        dt = np.dtype(name)
    except TypeError:
        dt = None
    _need(dt is not None and dt.kind in "biuf", f"{where}: unsupported dtype {name!r}")
    return dt


def _shape(shape: Any, where: str) -> tuple[int, ...]:
    _need(isinstance(shape, list) and all(_is_count(d) for d in shape),
          f"{where}: shape {shape!r} must be a list of ints >= 0")
    return tuple(shape)


def value_nbytes(v: Mapping[str, Any], name: str) -> int:
    dt = _dtype(v.get("dtype"), f"value {name!r}")
    return int(np.prod(_shape(v.get("shape"), f"value {name!r}"), dtype=np.int64)) * dt.itemsize


def check_plan(plan: Any) -> None:
    """The plan's structure: types, references between its parts, and bounds; and that no two
    values live at the same time share bytes (runtime/_liveness.py). A plan with
    shape variables is checked here for its form; its sizes and bounds are checked at each
    shape it runs at (:func:`instantiate` makes the plan of that shape, checked here too)."""
    _need(isinstance(plan, dict), f"the plan must be a JSON object, got {type(plan).__name__}")
    if plan.get("vars"):
        _check_symbolic_plan(plan)
        return
    for key, typ in (("values", dict), ("storages", list), ("steps", list), ("inputs", list),
                     ("outputs", list)):
        _need(isinstance(plan.get(key), typ), f"plan[{key!r}] must be a {typ.__name__}")
    arena = plan.get("arena_bytes")
    _need(_is_count(arena), f"arena_bytes {arena!r} must be an int >= 0")
    capacity = _check_storages(plan["storages"], arena)
    values = plan["values"]
    for name, v in values.items():
        _need(isinstance(v, dict), f"value {name!r} must be an object")
        sid = v.get("storage")
        # (_is_count first: true is == 1 in a dict look-up, and a list is unhashable)
        _need(_is_count(sid) and sid in capacity,
              f"value {name!r} refers to unknown storage {sid!r}")
        need = value_nbytes(v, name)
        if capacity[sid] is not None:
            _need(need <= capacity[sid], f"value {name!r} ({need} bytes) does not fit its "
                                         f"storage {sid} ({capacity[sid]} bytes)")
    for key in ("inputs", "outputs"):
        for io in plan[key]:
            _need(isinstance(io, dict) and isinstance(io.get("name"), str)
                  and io["name"] in values, f"{key} entry {io!r} names no value of the plan")
            v = values[io["name"]]
            _need(io.get("shape") == v["shape"] and io.get("dtype") == v["dtype"],
                  f"{key} entry {io['name']!r} disagrees with its value's shape or dtype")
    for i, st in enumerate(plan["steps"]):
        _check_step(i, st, values)
    _check_lifetimes(plan, symbolic=False)


def _check_lifetimes(plan: dict, symbolic: bool) -> None:
    # (imported here: _liveness imports PlanError from this module)
    from ._liveness import check_lifetimes

    check_lifetimes(plan, symbolic)


def _check_storages(storages: list, arena: int) -> dict[Any, int | None]:
    """Storage id -> bytes available (None for a constant: its weight's size, checked later)."""
    capacity: dict[Any, int | None] = {}
    for st in storages:
        _need(isinstance(st, dict), f"storage {st!r} must be an object")
        sid = st.get("id")
        _need(_is_count(sid) and sid not in capacity, f"storage id {sid!r} is invalid or repeated")
        if st.get("kind") == "const":
            _need(isinstance(st.get("const"), str), f"storage {sid}: const must name a weight")
            capacity[sid] = None
        else:
            _need(st.get("kind") == "arena", f"storage {sid}: kind {st.get('kind')!r} is "
                                             "neither 'arena' nor 'const'")
            off, nbytes = st.get("offset"), st.get("nbytes")
            _need(_is_count(off) and _is_count(nbytes) and off + nbytes <= arena,
                  f"storage {sid}: [{off!r}, +{nbytes!r}) is not inside the {arena}-byte arena")
            capacity[sid] = nbytes
    return capacity


def _check_step(i: int, st: Any, values: dict) -> None:
    _need(isinstance(st, dict), f"step {i} must be an object")
    _need(isinstance(st.get("kernel"), str), f"step {i}: kernel must be a name")
    args = st.get("args")
    # (if, not _need: the messages are formatted only on failure; a model of shape variables
    # checks its plan at every new shape)
    if not (isinstance(args, list) and all(isinstance(a, str) and a in values for a in args)):
        raise PlanError(f"step {i}: args {args!r} must name values of the plan")
    n_out = st.get("n_out")
    if not (_is_count(n_out) and 1 <= n_out <= len(args)):
        raise PlanError(f"step {i}: n_out {n_out!r} must be between 1 and its {len(args)} "
                        "arguments")


def check_constants(plan: dict, constants: Mapping[str, Any]) -> None:
    """Every weight present, and at least as large as each value stored in it."""
    weight_of = {st["id"]: st["const"] for st in plan["storages"] if st["kind"] == "const"}
    for name in weight_of.values():
        _need(name in constants, f"weight {name!r} is missing")
    for name, v in plan["values"].items():
        weight = weight_of.get(v["storage"])
        if weight is not None:
            have = np.asarray(constants[weight]).nbytes
            _need(value_nbytes(v, name) <= have, f"value {name!r} does not fit its weight "
                                                 f"{weight!r} ({have} bytes)")


def check_kernels(plan: dict, kernels: Mapping[str, Any], driver: Any,
                  env: Mapping[str, int] | None = None) -> None:
    """Each step's kernel takes exactly the step's values (count, dtype, number of elements;
    the last ``n_out`` written), and the driver was built for these steps. A kernel with shape
    variables runs only in a plan with those variables; its arrays' sizes are compared at the
    sizes ``env`` (a plan of one shape, :func:`instantiate`), their other properties always."""
    values = plan["values"]
    manifests: dict[str, dict] = {}  # (Module.manifest is a copy each time)
    for i, st in enumerate(plan["steps"]):
        k = kernels.get(st["kernel"])
        _need(k is not None, f"step {i} runs kernel {st['kernel']!r}, which is not loaded")
        m = manifests.get(st["kernel"])
        if m is None:
            m = manifests[st["kernel"]] = k.manifest
        known = tuple(plan.get("vars", ())) if env is None else tuple(env)
        _need(not m.get("var_dtypes"),
              f"kernel {st['kernel']!r} takes float scalar parameters {m.get('var_dtypes')}; "
              "a model's kernels take arrays and shape variables only")
        _need(set(m["vars"]) <= set(known),
              f"kernel {st['kernel']!r} takes shape variables {m['vars']}, but the plan has "
              f"{list(known) or 'none (a model of fixed shapes)'}")
        _need(len(m["args"]) == len(st["args"]),
              f"kernel {st['kernel']!r} takes {len(m['args'])} arrays, step {i} passes "
              f"{len(st['args'])}")
        first_out = len(st["args"]) - st["n_out"]
        for j, (spec, name) in enumerate(zip(m["args"], st["args"])):
            v = values[name]
            want = spec["shape"] if env is None else evaluate_shape(spec["shape"], env,
                                                                     tuple(m["vars"]))
            # the same elements, maybe in another shape (a scalar is float32[1] to a kernel)
            _need(spec["dtype"] == v["dtype"] and _same_count(want, v["shape"])
                  and spec["written"] == (j >= first_out),
                  f"kernel {st['kernel']!r} argument {j} is {spec['dtype']}{spec['shape']}"
                  f"{' (written)' if spec['written'] else ''}, but step {i} passes value "
                  f"{name!r}: {v['dtype']}{v['shape']}{' (written)' if j >= first_out else ''}")
    if driver is not None:
        _check_driver(plan, driver, kernels)


def _count(shape: list[int]) -> int:
    return math.prod(shape)


def _same_count(a: list, b: list) -> bool:
    """Equal numbers of elements; shapes with symbolic dimensions are compared at each shape
    the model runs at (:func:`instantiate`, check_kernels with ``env``), not here."""
    if not all(isinstance(d, int) for d in [*a, *b]):
        return True
    return _count(a) == _count(b)


def driver_steps(plan: dict, kernels: Mapping[str, Any] | None = None) -> list[list]:
    """[kernel index, argument count] per step: what the generated driver calls, in order
    (kernels are indexed by sorted name). In a plan with shape variables each step also lists
    the positions, in the plan's ``vars``, of its kernel's variables (passed after the
    arrays, from the driver's fourth table)."""
    index = {n: i for i, n in enumerate(sorted({st["kernel"] for st in plan["steps"]}))}
    if not plan.get("vars"):
        return [[index[st["kernel"]], len(st["args"])] for st in plan["steps"]]
    pos = {v: i for i, v in enumerate(plan["vars"])}
    return [[index[st["kernel"]], len(st["args"]),
             [pos[v] for v in kernels[st["kernel"]].manifest["vars"]]] for st in plan["steps"]]


def _check_driver(plan: dict, driver: Any, kernels: Mapping[str, Any]) -> None:
    m = driver.manifest
    steps = driver_steps(plan, kernels)
    n_kernels = len({s[0] for s in steps})
    n_args = sum(s[1] for s in steps)
    shapes = [a["shape"] for a in m["args"]]
    tables = [[max(1, n_kernels)], [max(1, n_args)], [2]]
    if plan.get("vars"):
        tables.append([len(plan["vars"])])
    _need(shapes == tables and [a["dtype"] for a in m["args"]] == ["int64"] * len(tables),
          f"the graph driver takes tables {shapes}, but the plan has {n_kernels} kernels and "
          f"{n_args} arguments")
    recorded = m.get("steps")  # absent in drivers built before it was recorded
    _need(recorded is None or recorded == steps,
          "the graph driver was built for other steps than the plan's")


# -- plans with shape variables (issue 19) -----------------------------------------------------


_PARSED: dict[tuple, Any] = {}  # (text, variables) -> DimExpr: texts repeat across shapes


def _dim(d: Any, known: tuple[str, ...], where: str):
    """An int >= 0, or the parsed text of an expression of the plan's variables."""
    from ._dims import DimError, DimExpr

    if _is_count(d):
        return d
    got = _PARSED.get((d, known)) if isinstance(d, str) else None
    if got is not None:
        return got
    try:
        got = DimExpr(d, known)
    except DimError as e:
        raise PlanError(f"{where}: {e}") from None
    if len(_PARSED) < 100_000:
        _PARSED[(d, known)] = got
    return got


def _check_symbolic_plan(plan: dict) -> None:
    names = plan["vars"]
    _need(isinstance(names, list) and all(isinstance(v, str) and v.isidentifier()
                                          for v in names) and len(set(names)) == len(names),
          f"plan vars {names!r} must be distinct identifiers")
    known = tuple(names)
    for key, typ in (("values", dict), ("storages", list), ("steps", list), ("inputs", list),
                     ("outputs", list), ("lifetimes", dict)):
        _need(isinstance(plan.get(key), typ), f"plan[{key!r}] must be a {typ.__name__}")
    ids = set()
    for st in plan["storages"]:
        _need(isinstance(st, dict) and _is_count(st.get("id")) and st["id"] not in ids,
              f"storage {st!r} must be an object with a new id")
        ids.add(st["id"])
        if st.get("kind") == "const":
            _need(isinstance(st.get("const"), str), f"storage {st['id']}: const must name a "
                                                    "weight")
            continue
        _need(st.get("kind") == "arena", f"storage {st['id']}: kind {st.get('kind')!r}")
        _dim(st.get("nbytes"), known, f"storage {st['id']} nbytes")
        life = plan["lifetimes"].get(str(st["id"]))
        _need(isinstance(life, list) and len(life) == 2 and all(isinstance(t, int) for t in life),
              f"storage {st['id']}: no lifetime [first, last] in plan['lifetimes']")
    for name, v in plan["values"].items():
        _need(isinstance(v, dict) and _is_count(v.get("storage")) and v["storage"] in ids,
              f"value {name!r} must be an object naming a storage of the plan")
        _dtype(v.get("dtype"), f"value {name!r}")
        _need(isinstance(v.get("shape"), list), f"value {name!r}: shape must be a list")
        _need(isinstance(v.get("needs", []), list), f"value {name!r}: needs must be a list")
        for d in v.get("needs", []):
            _dim(d, known, f"value {name!r} needs")
        for d in v["shape"]:
            _dim(d, known, f"value {name!r}")
    for key in ("inputs", "outputs"):
        for io in plan[key]:
            _need(isinstance(io, dict) and isinstance(io.get("name"), str)
                  and io["name"] in plan["values"], f"{key} entry {io!r} names no value of the "
                  "plan")
            v = plan["values"][io["name"]]
            _need(io.get("shape") == v["shape"] and io.get("dtype") == v["dtype"],
                  f"{key} entry {io['name']!r} disagrees with its value's shape or dtype")
    for i, st in enumerate(plan["steps"]):
        _check_step(i, st, plan["values"])
    _check_lifetimes(plan, symbolic=True)


def evaluate_shape(shape: list, env: Mapping[str, int], known: tuple[str, ...]) -> list[int]:
    return [d if isinstance(d, int) else _dim(d, known, "shape").evaluate(env) for d in shape]


def _check_extents(plan: dict, values: dict, env: Mapping[str, int]) -> None:
    """A value whose extent is negative at these sizes (a Pad cropping more than the axis
    holds; onnxruntime refuses it too), or made by a conv or pool whose input is too small for
    one window (an extent of its ``needs`` < 1): refused naming the node that makes it, the
    extent's expression and value, and the sizes."""
    known = tuple(plan["vars"])
    for name, v in values.items():
        bad = [ax for ax, d in enumerate(v["shape"]) if d < 0]
        if bad:
            text, got = plan["values"][name]["shape"][bad[0]], v["shape"][bad[0]]
            _refuse_extent(plan, env, name, v, f"its axis {bad[0]} extent {text} is {got} < 0")
        for text in v.get("needs", ()):
            got = _dim(text, known, f"value {name!r} needs").evaluate(env)
            if got < 1:
                why = f"its input is too small for one window: the output extent {text} is {got}"
                _refuse_extent(plan, env, name, v, why + " < 1")


def _refuse_extent(plan: dict, env: Mapping[str, int], name: str, v: dict, why: str) -> None:
    step = next((st for st in plan["steps"]
                 if name in st["args"][len(st["args"]) - st.get("n_out", 1):]), None)
    who = f"node {step['node']!r} ({step['op']})" if step and "node" in step else "a node"
    sizes = ", ".join(f"{k} = {env[k]}" for k in sorted(env))
    raise PlanError(f"{who} would make {name!r} of shape {v['shape']}: {why} at {sizes}")


def instantiate(plan: dict, env: Mapping[str, int]) -> dict:
    """The plan of a model with shape variables at the sizes ``env`` (variable -> int): every
    shape and size evaluated, the arena placed (runtime/_arena.py), checked as a static plan.
    Its ``memory`` reports the arena, the naive sum and the lower bound at these sizes."""
    from ._arena import place

    known = tuple(plan["vars"])
    out = {k: v for k, v in plan.items() if k not in ("vars", "lifetimes")}
    out["values"] = {n: {**v, "shape": evaluate_shape(v["shape"], env, known)}
                     for n, v in plan["values"].items()}
    _check_extents(plan, out["values"], env)
    for key in ("inputs", "outputs"):
        out[key] = [{**t, "shape": evaluate_shape(t["shape"], env, known)} for t in plan[key]]
    sizes = {st["id"]: max(1, evaluate_shape([st["nbytes"]], env, known)[0])
             for st in plan["storages"] if st["kind"] == "arena"}
    _need(all(n >= 0 for n in sizes.values()), f"a negative size at {dict(env)}")
    lifetimes = {sid: tuple(plan["lifetimes"][str(sid)]) for sid in sizes}
    offsets, top, naive, lower = place(sizes, lifetimes)
    out["storages"] = [st if st["kind"] == "const" else
                       {**st, "nbytes": sizes[st["id"]], "offset": offsets[st["id"]]}
                       for st in plan["storages"]]
    out["arena_bytes"] = max(top, 64)
    out["memory"] = {"arena_bytes": top, "naive_bytes": naive, "lower_bound_bytes": lower}
    check_plan(out)
    return out
