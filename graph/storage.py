"""Storage assignment, a step of ``graph.build``: which buffer each value lives in, the steps
that run the kernels, and each arena buffer's lifetime (what memory planning packs).

Graph inputs and each kernel output get a storage of their own in the arena, constants one
each outside it (their weight). Two kinds of value share a storage: an alias op's output (a
reshape: no kernel, the same bytes) and, with ``inplace``, the output of an elementwise or
broadcast kernel, or of a last-axis softmax or layer norm on its default schedule, written into
an input that dies at that step (:func:`inplace_donor`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tensorlang.runtime._plan import StepSpec, StorageSpec, ValueSpec

from . import op_registry as R
from .fused_group import group_of
from .ir import Graph, GraphError

_INPLACE_PATTERNS = (R.ELEMWISE, R.BROADCAST)


@dataclass(frozen=True)
class StorageAssignment:
    storages: tuple[StorageSpec, ...]  # without offsets: memory planning places them
    values: dict[str, ValueSpec]
    steps: tuple[StepSpec, ...]
    lifetimes: dict[int, tuple[int, int]]  # arena storage -> (first, last) step, inclusive
    constants: dict[str, np.ndarray]

    def describe(self) -> str:
        arena = sum(st.kind == "arena" for st in self.storages)
        inplace = sum(st.inplace is not None for st in self.steps)
        return (f"{len(self.values)} values in {arena} arena storages and "
                f"{len(self.storages) - arena} weights; {len(self.steps)} steps, "
                f"{inplace} in place")


@dataclass
class _Assigner:
    """The state of one assignment: storages made so far, where each value lives, and which
    values share each storage (what decides whether a storage may be written in place)."""

    storages: list[StorageSpec] = field(default_factory=list)
    values: dict[str, ValueSpec] = field(default_factory=dict)
    storage_of: dict[int, int] = field(default_factory=dict)  # id(Value) -> storage id
    members: dict[int, list] = field(default_factory=dict)  # storage -> its values
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    def new_storage(self, v, kind: str) -> int:
        sid = len(self.storages)
        const = v.name if kind == "const" else None
        if const is not None:
            self.constants[v.name] = v.data
        # a symbolic size (an expression of the shape variables) is evaluated per shape at run
        # time, where an empty value still gets one byte
        size = max(1, v.nbytes) if v.is_static else v.nbytes
        self.storages.append(StorageSpec(sid, kind, size, const))
        return sid

    def add_value(self, v, sid: int, needs: tuple = ()) -> None:
        if v.name in self.values:
            raise GraphError(f"two values are named {v.name!r}")
        self.storage_of[id(v)] = sid
        self.values[v.name] = ValueSpec(sid, tuple(v.shape), v.dtype, needs)
        self.members.setdefault(sid, []).append(v)


def assign_storage(g: Graph, kernel_of: dict[str, str], inplace: bool = True,
                   non_default: frozenset[str] = frozenset()) -> StorageAssignment:
    """Step "assign storage": ``kernel_of`` names each kernel node's kernel (select_kernels);
    ``non_default``: the kernels not built with their default schedule (a tuning record's, or
    the naive fallback)."""
    a = _Assigner()
    for v in g.inputs:
        a.add_value(v, a.new_storage(v, "arena"))
    for c in g.constants:
        a.add_value(c, a.new_storage(c, "const"))
    last_read = _last_reads(g)
    steps: list[StepSpec] = []
    for i, n in enumerate(g.nodes):
        if R.get_op(n.op).alias:
            a.add_value(n.outputs[0], a.storage_of[id(n.inputs[0])])
            continue
        donor = inplace_donor(n, a, last_read, i, kernel_of[n.name] not in non_default) \
            if inplace else None
        needs = _window_needs(n)
        for v in n.outputs:
            a.add_value(v, a.storage_of[id(donor)] if donor is not None
                        else a.new_storage(v, "arena"), needs)
        steps.append(StepSpec(n.name, n.op, kernel_of[n.name],
                              tuple(v.name for v in [*n.inputs, *n.outputs]), len(n.outputs),
                              donor.name if donor is not None else None))
    lifetimes = _lifetimes(g, a, steps)
    return StorageAssignment(tuple(a.storages), a.values, tuple(steps), lifetimes, a.constants)


def _window_needs(n) -> tuple:
    """The extents a node's (or fused group's) conv or pool over a symbolic size needs >= 1
    (op_registry.window_needs), recorded on its outputs for the runtime to check per shape."""
    group = group_of(n)
    if group is None:
        ws = n.inputs[1].shape if len(n.inputs) > 1 else None
        return tuple(R.window_needs(n.op, n.attrs, n.inputs[0].shape, ws)) if n.inputs else ()
    types = list(group.inputs)
    needs: list = []
    for m in group.members:
        ins = [types[k] if src == "in" else group.members[k].type for src, k in m.inputs]
        if m.op in R.WINDOW_OPS:
            needs += R.window_needs(m.op, m.attrs, ins[0][0], ins[1][0] if len(ins) > 1 else None)
    return tuple(needs)


def _last_reads(g: Graph) -> dict[int, float]:
    """id(value) -> the node index after which it is never read again (graph inputs and
    outputs never die: the caller owns them)."""
    last_read: dict[int, float] = {}
    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            last_read[id(v)] = i
    for v in [*g.inputs, *g.outputs]:
        last_read[id(v)] = float("inf")
    return last_read


def _lifetimes(g: Graph, a: _Assigner, steps: list[StepSpec]) -> dict[int, tuple[int, int]]:
    """Arena storage -> (first, last) step using it; graph inputs live from before the first
    step (-1), inputs and outputs to after the last (they are written before the run and read
    after it)."""
    first: dict[int, int] = {a.storage_of[id(v)]: -1 for v in g.inputs}
    last: dict[int, int] = {}
    for idx, st in enumerate(steps):
        for j, name in enumerate(st.args):
            sid = a.values[name].storage
            last[sid] = max(last.get(sid, idx), idx)
            if j >= len(st.args) - st.n_out:
                first.setdefault(sid, idx)
    end = len(steps)
    for v in [*g.inputs, *g.outputs]:
        sid = a.storage_of[id(v)]
        if a.storages[sid].kind == "arena":
            last[sid] = end
            first.setdefault(sid, -1)
    out = {}
    for st in a.storages:
        if st.kind == "arena":
            f = first.get(st.id, -1)
            out[st.id] = (f, last.get(st.id, f))
    return out


def inplace_donor(n, a: _Assigner, last_read: dict[int, float], i: int,
                  default_schedule: bool = True):
    """An input whose buffer node ``n`` may write its output into, or None.

    For elementwise/broadcast kernels (each output element is computed from the input
    elements at the same index, so writing out[i] never clobbers an input element a later
    iteration still reads), and a softmax or layer norm over the last axis on its default
    schedule (:func:`_reads_each_row_before_writing_it`), with an input of the output's shape
    and element size that lives in the arena, is not a graph input, and whose storage holds no
    value read after this node."""
    group = group_of(n)
    pattern = group.pattern if group is not None else R.get_op(n.op).pattern
    if len(n.outputs) != 1 or not (pattern in _INPLACE_PATTERNS or (
            default_schedule and _reads_each_row_before_writing_it(n)
            # a model's output is written straight into the array run() returns, unless it
            # shares a storage (then it is copied out of the arena)
            and last_read.get(id(n.outputs[0])) != float("inf"))):
        return None
    out = n.outputs[0]
    for v in n.inputs:
        if v.is_constant or v.shape != out.shape or v.nbytes != out.nbytes:
            continue
        sid = a.storage_of[id(v)]
        if a.storages[sid].kind != "arena":
            continue
        if all(last_read.get(id(m), -1) <= i for m in a.members.get(sid, [])):
            return v
    return None


def _reads_each_row_before_writing_it(n) -> bool:
    """A softmax or layer norm over the last axis: its default schedule (schedule_softmax,
    schedule_layer_norm) runs each row's passes (max and sum, or mean and variance, then the
    output) in order within one iteration of the parallel row loop, and the output pass reads
    the input only at the index it writes. Written over its dying input, the output saves the
    second stream to memory: whisper's [1, 6, 1500, 1500] softmax, one thread, 11.3 -> 7.5 ms
    (onnxruntime's in place in its model: 5.6). Another schedule (a tuning record's) may order
    its loops otherwise, so the caller allows this only for the default one."""
    rank = len(n.outputs[0].shape)
    if rank < 2:
        return False  # (the generic schedule)
    if n.op == "softmax":
        return list(n.attrs.get("axes", ())) in ([rank - 1], [-1])
    if n.op == "layer_norm":
        return n.attrs.get("axis") in (rank - 1, -1)
    return False
