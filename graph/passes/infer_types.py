"""Shape and dtype inference: recompute every node's output types from its inputs and check them
against the recorded ones (a graph edited by hand, or imported, must agree with the rules the
kernels are generated from)."""

from __future__ import annotations

from .. import op_registry as R
from ..ir import Graph, GraphError, Node, Value
from .rewrite import rebuild


def infer_types(g: Graph) -> Graph:
    def visit(n: Node, ins: list[Value]):
        types = R.infer_types(n.op, [(v.shape, v.dtype) for v in ins], n.attrs, n.name)
        if len(types) != len(n.outputs):
            raise GraphError(f"node {n.name!r} ({n.op}) has {len(n.outputs)} outputs, the "
                             f"operator produces {len(types)}")
        for v, (shape, dtype) in zip(n.outputs, types):
            if v.shape != shape or v.dtype != dtype:
                raise GraphError(
                    f"node {n.name!r} ({n.op}): output {v.name!r} is recorded as "
                    f"{v.dtype}{list(v.shape)} but the inputs give {dtype}{list(shape)}"
                )

    return rebuild(g, visit)
