"""Common-subexpression elimination: constants with equal contents become one constant, and a
node computing the same op with the same attributes on the same inputs as an earlier node is
replaced by that node's outputs (e.g. the Shape/Gather chains an exporter repeats per layer, or
two identical transposes of one value)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild


def _const_key(v: Value) -> tuple:
    # the digest of the array's own bytes, read through a byte view (tobytes() made a full
    # copy of every weight); a non-contiguous array, which frozen constants never are, is
    # made contiguous first, which gives the bytes tobytes() gave
    data = np.ascontiguousarray(v.data).reshape(-1).view(np.uint8)
    return (v.dtype, v.shape, hashlib.sha256(data).hexdigest())


def eliminate_common_subexpr(g: Graph) -> Graph:
    consts: dict[tuple, Value] = {}
    seen: dict[tuple, list[Value]] = {}
    protected = {id(v) for v in g.outputs}
    em = Emitter()

    def canon(v: Value) -> Value:
        return consts.setdefault(_const_key(v), v) if v.is_constant else v

    def visit(n: Node, ins: list[Value]):
        ins = [canon(v) for v in ins]
        key = (n.op, json.dumps(n.attrs, sort_keys=True), tuple(id(v) for v in ins))
        prev = seen.get(key)
        # a graph output keeps its own node: its value's name is the model's output name
        if prev is not None and not any(id(v) in protected for v in n.outputs):
            return prev
        outs = em.emit(n.name, n.op, ins, n.attrs, list(n.outputs))
        seen.setdefault(key, outs)
        return outs

    return rebuild(g, visit, em)
