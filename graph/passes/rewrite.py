"""The one helper passes share: copy a graph while substituting values and dropping nodes, so
that a pass never mutates its input graph."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import Graph, Node, Value


class Emitter:
    """Lets a pass's ``visit`` add new nodes in place of the one it visits: ``emit`` returns the
    new node's outputs, which ``visit`` then returns as the visited node's replacement."""

    def __init__(self) -> None:
        self.pending: list[Node] = []

    def emit(self, name: str, op: str, ins: list[Value], attrs: dict,
             outs_like: list[Value], out_names: list[str] | None = None) -> list[Value]:
        outs = [Value(nm, v.shape, v.dtype, v.layout)
                for nm, v in zip(out_names or [v.name for v in outs_like], outs_like)]
        node = Node(name, op, ins, outs, attrs)
        for v in outs:
            v.producer = node
        self.pending.append(node)
        return outs


def copy_node(n: Node, ins: list[Value], subst: dict[int, Value]) -> Node:
    """A copy of node ``n`` reading ``ins``, with fresh output values; ``subst`` maps each old
    output (by id) to its copy."""
    outs = [Value(v.name, v.shape, v.dtype, v.layout) for v in n.outputs]
    node = Node(n.name, n.op, ins, outs, n.attrs)
    for old, new in zip(n.outputs, outs):
        new.producer = node
        subst[id(old)] = new
    return node


def rebuild(
    g: Graph,
    visit: Callable[[Node, list[Value]], list[Value] | None],
    emitter: Emitter | None = None,
) -> Graph:
    """Walk ``g``'s nodes in order. ``visit(node, new_inputs)`` returns the values that replace
    the node's outputs (the node is then dropped), or None to keep a copy of the node. Nodes
    ``visit`` adds through ``emitter`` are placed where the visited node was. Returns the new
    graph; its inputs are the old ones, its values fresh objects."""
    subst: dict[int, Value] = {id(v): v for v in g.inputs}
    nodes: list[Node] = []
    for n in g.nodes:
        ins = [subst.get(id(v), v) for v in n.inputs]
        replaced = visit(n, ins)
        if emitter is not None:
            nodes.extend(emitter.pending)
            emitter.pending.clear()
        if replaced is not None:
            for old, new in zip(n.outputs, replaced):
                subst[id(old)] = new
            continue
        nodes.append(copy_node(n, ins, subst))
    outputs = [subst.get(id(v), v) for v in g.outputs]
    return Graph(nodes, g.inputs, outputs, name=g.name)
