"""Operator fusion by pattern kind with post-dominator rules (TVM's FuseOps is the reference).

Every node has a pattern kind (:mod:`..op_registry`): elemwise < broadcast < injective < reduce <
out_elemwise_fusable < opaque. A node ``n`` is fused into its immediate post-dominator ``d`` (the
first node every path from ``n`` to the graph's outputs goes through), together with every node
on the paths between them, when the kinds allow it:

============================  ========================================  ===================
group of ``n`` is anchored by  nodes strictly between ``n`` and ``d``    ``d``
============================  ========================================  ===================
out_elemwise_fusable (conv,    elemwise / broadcast                      elemwise/broadcast
dense, matmul, pooling)
reduce                         elemwise / broadcast                      elemwise/broadcast
elemwise/broadcast/injective   elemwise / broadcast / injective          <= injective, or a
only                                                                     reduce
opaque                         never fused                                -
============================  ========================================  ===================

So conv + bias + batch norm + relu + residual add become one kernel (the conv is the anchor, the
rest its elementwise tail), chains of elementwise/broadcast/injective ops become one kernel, and
a reduction absorbs its elementwise producers (and its elementwise consumers) -- but a reduction
is never pulled into the middle of a conv's tail, and a group holds at most one heavy node
(reduce, out_elemwise_fusable).

Because ``d`` post-dominates ``n``, everything ``n`` computes is consumed inside the group: every
group has a single exit (its root, the last member), nothing is computed twice, and a value read
by two heavy consumers is never duplicated into both (it stays a kernel of its own). Groups are
checked for the single exit before every merge.

Not fused: alias ops (reshape is a free view as a kernel boundary; fused it would become index
arithmetic), multi-output nodes, argmax/argmin (a two-output reduction stage). Horizontal fusion
of siblings is not done.

The result replaces each group of two or more nodes by one ``fused`` node computing a
:class:`..fused_group.FusedGroup` (its members in order, anchor, pattern kind, input types;
stored on the node in its JSON form, see :mod:`..fused_group`). Processing is in the graph's
topological order and every choice depends only on that order: the pass is deterministic.
"""

from __future__ import annotations

import math

from .. import op_registry as R
from ..fused_group import FUSED, HEAVY, group_pattern, make_group
from ..ir import Graph, Node, Value
from .rewrite import copy_node

ELEMWISE, BROADCAST, INJECTIVE = R.ELEMWISE, R.BROADCAST, R.INJECTIVE
REDUCE, OUT_FUSABLE, OPAQUE = R.REDUCE, R.OUT_ELEMWISE_FUSABLE, R.OPAQUE
_HEAVY = HEAVY
_NOT_FUSED = ("argmax", "argmin", FUSED)
SINK = -1
# the most nodes in one group (TVM's max_fuse_depth): the group's kernel is one expression,
# and its compute graph is walked recursively (a chain of 1000 elementwise nodes raised
# RecursionError at build; 300 took 47 s to compile as one kernel)
MAX_GROUP = 256


def _kind(n: Node) -> str:
    d = R.get_op(n.op)
    if d.alias or len(n.outputs) != 1 or n.op in _NOT_FUSED:
        return OPAQUE
    return d.pattern


def _post_dominators(nodes, consumers) -> list[int]:
    """Immediate post-dominator of every node (SINK: a graph output or no consumer)."""
    n = len(nodes)
    ipdom = [SINK] * n
    depth = [0] * n

    def dep(i):
        return 0 if i == SINK else depth[i]

    def lca(a, b):
        while a != b:
            if dep(a) < dep(b):
                a, b = b, a
            a = ipdom[a] if a != SINK else SINK
        return a

    for i in reversed(range(n)):
        cs = consumers[i]
        if not cs or SINK in cs:
            ipdom[i] = SINK
        else:
            d = cs[0]
            for c in cs[1:]:
                d = lca(d, c)
            ipdom[i] = d
        depth[i] = dep(ipdom[i]) + 1
    return ipdom


class _Groups:
    """Union-find of node groups; each root knows its members and its heavy node."""

    def __init__(self, kinds):
        self.parent = list(range(len(kinds)))
        self.members = {i: [i] for i in range(len(kinds))}
        self.heavy = {i: (i if kinds[i] in _HEAVY else None) for i in range(len(kinds))}

    def find(self, i):
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union_all(self, roots):
        roots = sorted(set(roots))
        keep = roots[0]
        for r in roots[1:]:
            self.parent[r] = keep
            self.members[keep] += self.members.pop(r)
            if self.heavy[keep] is None:
                self.heavy[keep] = self.heavy[r]
            del self.heavy[r]
        self.members[keep].sort()
        return keep


def _grows(h: Node, d: Node) -> bool:
    """d's output has more elements than h's. Where a shape is symbolic: d broadcasts an axis
    of h's output of extent 1 (or one h lacks) to an extent not known to be 1, as
    squeeze-excite's gate [1, C, 1, 1] times a feature map over a symbolic plane [1, C, h, w]
    (read as no growth, the gate's conv ran once per pixel of the map: 0.09 ms against 0.005
    for the multiply alone, PP-OCR's direction classifier at 48x192 2.2x its static build)."""
    shapes = [v.shape for v in (*h.outputs[:1], *d.outputs[:1])]
    if len(shapes) < 2:
        return False
    a, b = shapes
    if all(isinstance(x, int) for s in shapes for x in s):
        return math.prod(b) > math.prod(a)
    a = (1,) * (len(b) - len(a)) + tuple(a)
    return any(isinstance(x, int) and (x == 1 and not (isinstance(y, int) and y == 1)
                                       or isinstance(y, int) and y > x)
               for x, y in zip(a[len(a) - len(b):], b))


def _path(i: int, d: int, consumers) -> set[int]:
    """The nodes strictly between i and its post-dominator d."""
    seen: set[int] = set()
    stack = [c for c in consumers[i] if c != d]
    while stack:
        c = stack.pop()
        if c in seen or c == d:
            continue
        seen.add(c)
        stack.extend(x for x in consumers[c] if x != d)
    return seen


def _allowed(anchor_kind: str, path_kinds, d_kind: str) -> bool:
    if anchor_kind in _HEAVY:
        ok = (ELEMWISE, BROADCAST)
        return all(k in ok for k in path_kinds) and d_kind in ok
    if anchor_kind == OPAQUE:
        return False
    # kinds are ordered from the most to the least fusable (Pattern.order)
    return all(k.order <= INJECTIVE.order for k in path_kinds) and (
        d_kind.order <= INJECTIVE.order or d_kind == REDUCE)


def _transform_with_injective(nodes, kinds, members: set[int]) -> bool:
    """A layout transform in one kernel with another injective op (a concat, a pad): inlined
    into each other they read a select chain by strided gathers, every input for every vector;
    apart, each runs on its own schedule (register transposes; contiguous copies). SegFormer's
    concat of four 1x128x64x64 maps into NCHW16c, one thread: 6.1 ms in one kernel, 0.62 +
    0.71 ms apart."""
    ops = [nodes[m].op for m in members]
    return "layout_transform" in ops and sum(
        kinds[m] == INJECTIVE for m in members) > ops.count("layout_transform")


def find_groups(g: Graph) -> list[list[int]]:
    """Node indices of each group (sorted), groups ordered by their root (last member)."""
    nodes = list(g.nodes)
    prod = {id(v): i for i, n in enumerate(nodes) for v in n.outputs}
    outs = {id(v) for v in g.outputs}
    consumers: list[list[int]] = [[] for _ in nodes]
    for j, n in enumerate(nodes):
        for v in n.inputs:
            i = prod.get(id(v))
            if i is not None and j not in consumers[i]:
                consumers[i].append(j)
    for i, n in enumerate(nodes):
        if any(id(v) in outs for v in n.outputs):
            consumers[i].append(SINK)
    kinds = [_kind(n) for n in nodes]
    ipdom = _post_dominators(nodes, consumers)
    G = _Groups(kinds)

    def group_kind(r):
        h = G.heavy[r]
        if h is not None:
            return kinds[h]
        return group_pattern([kinds[m] for m in G.members[r]])

    def single_exit(members: set[int]) -> bool:
        exits = [m for m in members if any(c == SINK or c not in members for c in consumers[m])]
        return len(exits) == 1 and exits[0] == max(members)

    for i in range(len(nodes)):
        d = ipdom[i]
        if d == SINK or kinds[i] == OPAQUE or kinds[d] == OPAQUE:
            continue
        gi, gd = G.find(i), G.find(d)
        if gi == gd:
            continue
        path = _path(i, d, consumers)
        if any(kinds[p] == OPAQUE for p in path):
            continue
        if not _allowed(group_kind(gi), [kinds[p] for p in path], kinds[d]):
            continue
        roots = {gi, gd} | {G.find(p) for p in path}
        heavies = {G.heavy[r] for r in roots} - {None}
        if len(heavies) > 1:
            continue  # two anchors never share a kernel
        if any(kinds[h] == OUT_FUSABLE and _grows(nodes[h], nodes[d]) for h in heavies):
            # d broadcasts a conv's (dense's) output to a larger shape: the ops between would
            # run once per element of d (squeeze-excite's gate: 16 kernels 0.96 ms against
            # 0.16 ms for the multiplies alone on EfficientNet-B0, one thread)
            continue
        if heavies and G.heavy[gi] is None:
            # joining a heavy group from outside: only cheap elementwise work may be inlined
            # into its tail (a reduction's own producers are the exception: d is the reduction)
            h = next(iter(heavies))
            cheap = all(kinds[m] in (ELEMWISE, BROADCAST) for m in G.members[gi])
            if not (cheap or (h == d and kinds[d] == REDUCE)):
                continue
            if kinds[h] == OUT_FUSABLE and not cheap:
                continue
        members = {m for r in roots for m in G.members[r]}
        if len(members) > MAX_GROUP or not single_exit(members) or \
                _transform_with_injective(nodes, kinds, members):
            continue
        G.union_all(roots)
    groups = [sorted(ms) for ms in G.members.values()]
    return sorted(groups, key=lambda ms: ms[-1])


def fuse_ops(g: Graph) -> Graph:
    nodes = list(g.nodes)
    out_nodes: list[Node] = []
    subst: dict[int, Value] = {}

    def cur(v: Value) -> Value:
        return subst.get(id(v), v)

    for ms in find_groups(g):
        if len(ms) == 1:
            n = nodes[ms[0]]
            out_nodes.append(copy_node(n, [cur(v) for v in n.inputs], subst))
            continue
        members = [nodes[m] for m in ms]
        external: list[Value] = []
        group = make_group(members, [_kind(n) for n in members], external)
        ro = members[-1].outputs[0]
        out = Value(ro.name, ro.shape, ro.dtype, ro.layout)
        node = Node(members[-1].name, FUSED, [cur(v) for v in external], [out],
                    group.to_attrs())
        out.producer = node
        subst[id(ro)] = out
        out_nodes.append(node)
    outputs = [cur(v) for v in g.outputs]
    return Graph(out_nodes, g.inputs, outputs, name=g.name)


def kernel_count(g: Graph) -> int:
    """Kernels a graph needs: its nodes that are not aliases."""
    return sum(1 for n in g.nodes if not R.get_op(n.op).alias)
