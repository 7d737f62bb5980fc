"""Dead-code elimination: drop nodes none of whose outputs reach a graph output."""

from __future__ import annotations

from ..ir import Graph, Node, Value
from .rewrite import rebuild


def eliminate_dead_code(g: Graph) -> Graph:
    live: set[int] = {id(v) for v in g.outputs}
    keep: set[int] = set()
    for n in reversed(g.nodes):
        if any(id(v) in live for v in n.outputs):
            keep.add(id(n))
            live.update(id(v) for v in n.inputs)

    def visit(n: Node, ins: list[Value]):
        # A dropped node's outputs are never read by a kept node, so any placeholder will do.
        return None if id(n) in keep else list(n.outputs)

    return rebuild(g, visit)
