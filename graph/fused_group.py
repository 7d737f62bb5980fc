"""Fused groups: the small typed sub-graph that one ``fused`` graph node computes as one kernel.

The ``fuse_ops`` pass makes every group (:func:`make_group`); lowering, kernel selection
(workload keys, kernel labels), tuning (template arguments, anchors, convs) and storage
assignment read it (:func:`group_of` for a node, :meth:`FusedGroup.from_attrs` for a kernel
described by its op, attributes and types, as a tuning record names it). Nothing else reads the
``body``/``pattern`` attributes.

On the node, a group is stored in its JSON form, ``node.attrs == group.to_attrs()``::

    {"body": [{"name", "op", "attrs", "inputs": [["in", k] | ["node", j], ...],
               "type": [shape, dtype]}, ...],
     "pattern": kind}

because node attributes are JSON values: a kernel's workload key is a hash of them and a tuning
record names its kernel by them (names stripped, :meth:`FusedGroup.key_attrs`). That form is
unchanged since the groups were untyped dicts, so the workload keys and the tuning logs written
before still name the same kernels (tests/graph/test_fused_group.py builds with such a log).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensorlang.ops.patterns import OUT_ELEMWISE_FUSABLE, REDUCE, Pattern, as_pattern

from . import op_registry as R
from .ir import GraphError, Node
from .symbolic import parse_shape, shape_json

FUSED = "fused"  # the graph op of a fused group's node
HEAVY = (REDUCE, OUT_ELEMWISE_FUSABLE)  # the kinds that anchor a group (at most one a group)
_LABEL_OPS = 4  # member ops a kernel label names before "_etc"

Type = R.Type
Ref = tuple[str, int]  # ("in", k): the group's k-th input; ("node", j): the j-th member's output


@dataclass(frozen=True)
class Member:
    """One graph node of a group: its name, op and attributes as in the graph, its inputs as
    references (:data:`Ref`) and its output's (shape, dtype)."""

    name: str
    op: str
    attrs: Mapping[str, Any] = field(hash=False)
    inputs: tuple[Ref, ...]
    type: Type

    @property
    def kind(self) -> Pattern:
        """The member's pattern kind (the graph op registry's)."""
        return R.get_op(self.op).pattern

    def to_json(self, with_name: bool = True) -> dict:
        d = {"op": self.op, "attrs": self.attrs, "inputs": [[src, k] for src, k in self.inputs],
             "type": [shape_json(self.type[0]), self.type[1]]}
        return {"name": self.name, **d} if with_name else d


@dataclass(frozen=True)
class FusedGroup:
    """A fused group: ``members`` in order (each after the members it reads; the last is the
    root, whose output is the group's), ``pattern`` the group's kind (its anchor's, else its
    members' highest), ``inputs`` the types of the group's inputs (the fused node's inputs, in
    order) and ``anchor`` the index of its heavy member (reduce / out_elemwise_fusable), None
    for a group of elementwise, broadcast and injective ops."""

    members: tuple[Member, ...]
    pattern: Pattern
    inputs: tuple[Type, ...]
    anchor: int | None

    @property
    def root(self) -> Member:
        return self.members[-1]

    @property
    def output(self) -> Type:
        return self.root.type

    @property
    def anchor_member(self) -> Member | None:
        return None if self.anchor is None else self.members[self.anchor]

    @property
    def ops(self) -> list[str]:
        return [m.op for m in self.members]

    def names_of(self, op: str) -> list[str]:
        """The graph names of the members that are ``op`` nodes."""
        return [m.name for m in self.members if m.op == op]

    def label(self) -> str:
        """A readable kernel name: ``fused_`` and the first member ops joined by '_'."""
        ops = self.ops
        return "fused_" + "_".join(ops[:_LABEL_OPS]) + ("_etc" if len(ops) > _LABEL_OPS else "")

    def to_attrs(self) -> dict:
        """The fused node's attributes (the JSON form, module doc)."""
        return {"body": [m.to_json() for m in self.members], "pattern": self.pattern}

    def key_attrs(self) -> dict:
        """The attributes naming the group's workload: member names do not change the kernel,
        so identical groups share one workload key and one tuning record."""
        return {"body": [m.to_json(with_name=False) for m in self.members],
                "pattern": self.pattern}

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], in_types: Sequence[Type]) -> FusedGroup:
        """The group a fused node's attributes (or a tuning record's) describe, its inputs of
        ``in_types``; GraphError naming what is malformed."""
        body = attrs.get("body") if isinstance(attrs, Mapping) else None
        if not isinstance(body, list) or not body:
            raise GraphError(f"a fused group needs a non-empty 'body' list of members, got "
                             f"{attrs!r:.200}")
        try:
            pattern = as_pattern(attrs.get("pattern"))
        except ValueError as e:
            raise GraphError(f"fused group: {e}") from None
        ins = tuple((tuple(s), t) for s, t in in_types)
        members = tuple(_member(m, j, len(ins)) for j, m in enumerate(body))
        return cls(members, pattern, ins, _anchor_of(members))


def _member(m: Any, j: int, n_inputs: int) -> Member:
    """Member ``j`` of a body, checked: its keys, and references to the group's inputs or to
    earlier members only."""
    want = ("op", "attrs", "inputs", "type")
    if not isinstance(m, Mapping) or any(k not in m for k in want):
        raise GraphError(f"fused member {j} must be a dict with keys {', '.join(want)} (and "
                         f"'name'), got {m!r:.200}")
    name = m.get("name", f"member{j}")
    refs: list[Ref] = []
    for ref in m["inputs"]:
        src, k = ref if isinstance(ref, (list, tuple)) and len(ref) == 2 else (None, None)
        bound = n_inputs if src == "in" else j if src == "node" else 0
        if not isinstance(k, int) or not 0 <= k < bound:
            raise GraphError(f"fused member {name} ({m['op']}): input {ref!r} is neither "
                             f"['in', k] with k < {n_inputs} (the group's inputs) nor "
                             f"['node', j] with j < {j} (an earlier member)")
        refs.append((src, k))
    shape, dtype = m["type"]
    return Member(name, m["op"], m["attrs"], tuple(refs), (parse_shape(shape), dtype))


def _anchor_of(members: Sequence[Member]) -> int | None:
    return next((j for j, m in enumerate(members) if m.kind in HEAVY), None)


def group_pattern(kinds: Sequence[Pattern]) -> Pattern:
    """A group's kind from its members' kinds: its heavy member's, else the highest."""
    heavy = [k for k in kinds if k in HEAVY]
    return heavy[0] if heavy else max(kinds, key=lambda k: k.order)


def make_group(nodes: Sequence[Node], kinds: Sequence[Pattern], external: list) -> FusedGroup:
    """The group of graph ``nodes`` (in order; each of one output) whose pattern kinds as
    fusion saw them are ``kinds``. ``external``: filled with the values the group reads from
    outside, in order of first use (the fused node's inputs)."""
    pos = {id(n.outputs[0]): j for j, n in enumerate(nodes)}
    ext_idx: dict[int, int] = {}
    members = []
    for n in nodes:
        refs: list[Ref] = []
        for v in n.inputs:
            if id(v) in pos:
                refs.append(("node", pos[id(v)]))
                continue
            if id(v) not in ext_idx:
                ext_idx[id(v)] = len(external)
                external.append(v)
            refs.append(("in", ext_idx[id(v)]))
        o = n.outputs[0]
        members.append(Member(n.name, n.op, n.attrs, tuple(refs), (tuple(o.shape), o.dtype)))
    ins = tuple((tuple(v.shape), v.dtype) for v in external)
    anchor = next((j for j, k in enumerate(kinds) if k in HEAVY), None)
    return FusedGroup(tuple(members), group_pattern(kinds), ins, anchor)


def group_of(n: Node) -> FusedGroup | None:
    """The group a fused node computes; None for any other node."""
    if n.op != FUSED:
        return None
    return FusedGroup.from_attrs(n.attrs, [(v.shape, v.dtype) for v in n.inputs])


def kernel_attrs(op: str, attrs: Mapping[str, Any], in_types: Sequence[Type]) -> Mapping:
    """The attributes naming a kernel's workload: a fused group's without member names
    (:meth:`FusedGroup.key_attrs`), any other node's as they are."""
    if op != FUSED:
        return attrs
    return FusedGroup.from_attrs(attrs, in_types).key_attrs()


def kernel_label(op: str, attrs: Mapping[str, Any], in_types: Sequence[Type]) -> str:
    """A readable kernel name: the op, or ``fused_`` and a group's member ops."""
    return op if op != FUSED else FusedGroup.from_attrs(attrs, in_types).label()
