"""Constant folding: a node whose inputs are all constants is evaluated with the operator's numpy
reference and replaced by a constant (e.g. the Shape -> Gather -> Concat -> Reshape chains of
exported models, or weight transposes)."""

from __future__ import annotations

from .. import op_registry as R
from ..ir import Graph, Node, Value
from .rewrite import rebuild

# Folding a large constant into a node's output can grow the weights a lot (an Expand or Tile of
# a small constant); keep such nodes as kernels.
MAX_FOLDED_BYTES = 64 << 20


def fold_constants(g: Graph) -> Graph:
    def visit(n: Node, ins: list[Value]):
        if not ins or not all(v.is_constant for v in ins) or R.get_op(n.op).ref is None:
            return None
        if not all(v.is_static for v in n.outputs):
            return None  # (a constant broadcast to a run-time size)
        if sum(v.nbytes for v in n.outputs) > MAX_FOLDED_BYTES:
            return None
        arrays = R.evaluate(n.op, [v.data for v in ins], n.attrs)
        return [Value(v.name, v.shape, v.dtype, v.layout, data=a.astype(v.dtype))
                for v, a in zip(n.outputs, arrays)]

    return rebuild(g, visit)
