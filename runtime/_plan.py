"""Checks that a model plan is well formed and agrees with the kernels that run it.

A GraphModule turns the plan into raw addresses that native code reads and writes, so a plan
that does not hold together (a value larger than its storage, a storage past the arena's end, a
kernel whose arguments differ from the step that calls it, a driver built for other steps)
would make the kernels read or write out of bounds. Every GraphModule checks its plan here,
before any address is computed; ``load`` reports a failure as an ArtifactError naming the file.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class ValueSpec:
    """A value of the graph: the storage holding it, its shape and dtype."""

    storage: int
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict:
        return {"storage": self.storage, "shape": list(self.shape), "dtype": self.dtype}


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
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "nbytes": self.nbytes}
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

    def to_json(self) -> dict:
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
            values={n: ValueSpec(v["storage"], tuple(v["shape"]), v["dtype"])
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
    """The plan's structure: types, references between its parts, and bounds."""
    _need(isinstance(plan, dict), f"the plan must be a JSON object, got {type(plan).__name__}")
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
        _need(sid in capacity, f"value {name!r} refers to unknown storage {sid!r}")
        need = value_nbytes(v, name)
        if capacity[sid] is not None:
            _need(need <= capacity[sid], f"value {name!r} ({need} bytes) does not fit its "
                                         f"storage {sid} ({capacity[sid]} bytes)")
    for key in ("inputs", "outputs"):
        for io in plan[key]:
            _need(isinstance(io, dict) and io.get("name") in values,
                  f"{key} entry {io!r} names no value of the plan")
            v = values[io["name"]]
            _need(io.get("shape") == v["shape"] and io.get("dtype") == v["dtype"],
                  f"{key} entry {io['name']!r} disagrees with its value's shape or dtype")
    for i, st in enumerate(plan["steps"]):
        _check_step(i, st, values)


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
    _need(isinstance(args, list) and all(isinstance(a, str) and a in values for a in args),
          f"step {i}: args {args!r} must name values of the plan")
    n_out = st.get("n_out")
    _need(_is_count(n_out) and 1 <= n_out <= len(args),
          f"step {i}: n_out {n_out!r} must be between 1 and its {len(args)} arguments")


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


def check_kernels(plan: dict, kernels: Mapping[str, Any], driver: Any) -> None:
    """Each step's kernel takes exactly the step's values (count, dtype, number of elements;
    the last ``n_out`` written), and the driver was built for these steps."""
    values = plan["values"]
    for i, st in enumerate(plan["steps"]):
        k = kernels.get(st["kernel"])
        _need(k is not None, f"step {i} runs kernel {st['kernel']!r}, which is not loaded")
        m = k.manifest
        _need(not m["vars"], f"kernel {st['kernel']!r} takes shape variables {m['vars']}; "
                             "a model's kernels have fixed shapes")
        _need(len(m["args"]) == len(st["args"]),
              f"kernel {st['kernel']!r} takes {len(m['args'])} arrays, step {i} passes "
              f"{len(st['args'])}")
        first_out = len(st["args"]) - st["n_out"]
        for j, (spec, name) in enumerate(zip(m["args"], st["args"])):
            v = values[name]
            # the same elements, maybe in another shape (a scalar is float32[1] to a kernel)
            _need(spec["dtype"] == v["dtype"] and _count(spec["shape"]) == _count(v["shape"])
                  and spec["written"] == (j >= first_out),
                  f"kernel {st['kernel']!r} argument {j} is {spec['dtype']}{spec['shape']}"
                  f"{' (written)' if spec['written'] else ''}, but step {i} passes value "
                  f"{name!r}: {v['dtype']}{v['shape']}{' (written)' if j >= first_out else ''}")
    if driver is not None:
        _check_driver(plan, driver)


def _count(shape: list[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def driver_steps(plan: dict) -> list[list[int]]:
    """[kernel index, argument count] per step: what the generated driver calls, in order
    (kernels are indexed by sorted name)."""
    index = {n: i for i, n in enumerate(sorted({st["kernel"] for st in plan["steps"]}))}
    return [[index[st["kernel"]], len(st["args"])] for st in plan["steps"]]


def _check_driver(plan: dict, driver: Any) -> None:
    m = driver.manifest
    steps = driver_steps(plan)
    n_kernels = len({s[0] for s in steps})
    n_args = sum(s[1] for s in steps)
    shapes = [a["shape"] for a in m["args"]]
    _need(shapes == [[max(1, n_kernels)], [max(1, n_args)], [2]]
          and [a["dtype"] for a in m["args"]] == ["int64"] * 3,
          f"the graph driver takes tables {shapes}, but the plan has {n_kernels} kernels and "
          f"{n_args} arguments")
    recorded = m.get("steps")  # absent in drivers built before it was recorded
    _need(recorded is None or recorded == steps,
          "the graph driver was built for other steps than the plan's")
