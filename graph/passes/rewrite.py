"""The one helper passes share: copy a graph while substituting values and dropping nodes, so
that a pass never mutates its input graph."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import Graph, Node, Value


def rebuild(
    g: Graph,
    visit: Callable[[Node, list[Value]], list[Value] | None],
) -> Graph:
    """Walk ``g``'s nodes in order. ``visit(node, new_inputs)`` returns the values that replace
    the node's outputs (the node is then dropped), or None to keep a copy of the node. Returns the
    new graph; its inputs are the old ones, its values fresh objects."""
    subst: dict[int, Value] = {id(v): v for v in g.inputs}
    nodes: list[Node] = []
    for n in g.nodes:
        ins = [subst.get(id(v), v) for v in n.inputs]
        replaced = visit(n, ins)
        if replaced is not None:
            for old, new in zip(n.outputs, replaced):
                subst[id(old)] = new
            continue
        outs = [Value(v.name, v.shape, v.dtype, v.layout) for v in n.outputs]
        node = Node(n.name, n.op, ins, outs, n.attrs)
        for old, new in zip(n.outputs, outs):
            new.producer = node
            subst[id(old)] = new
        nodes.append(node)
    outputs = [subst.get(id(v), v) for v in g.outputs]
    return Graph(nodes, g.inputs, outputs, name=g.name)
