"""Algebraic simplification: x*1, 1*x, x+0, 0+x, x-0, x/1 -> x; transpose(transpose(x)) -> one
transpose (or x when the permutations cancel); reshape(reshape(x)) -> one reshape, and a reshape
to the same shape -> x; copy (what ONNX Identity/Dropout leave when they name an output) -> x.

A rewrite never changes the value a graph output names (it would rename the model's output), and
x*1 etc. only fire when the constant does not broadcast x to a bigger shape or another dtype.
Runs to a fixpoint (each round removes at least one node or stops)."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild

_IDENTITY_OPERAND = {
    # op: (neutral constant, operand positions where the constant may stand)
    "add": (0.0, (0, 1)),
    "subtract": (0.0, (1,)),
    "multiply": (1.0, (0, 1)),
    "divide": (1.0, (1,)),
}


def _is_const(v: Value, x: float) -> bool:
    return v.is_constant and v.size > 0 and bool(np.all(v.data == x))


def _simplify_once(g: Graph) -> Graph:
    protected = {id(v) for v in g.outputs}
    em = Emitter()

    def visit(n: Node, ins: list[Value]):
        if any(id(v) in protected for v in n.outputs):
            return None
        out = n.outputs[0] if n.outputs else None
        if n.op in _IDENTITY_OPERAND and len(ins) == 2:
            neutral, where = _IDENTITY_OPERAND[n.op]
            for pos in where:
                c, x = ins[pos], ins[1 - pos]
                if _is_const(c, neutral) and x.shape == out.shape and x.dtype == out.dtype:
                    return [x]
        if n.op == "copy":
            return [ins[0]]
        if n.op == "reshape":
            x = ins[0]
            if x.shape == out.shape:
                return [x]
            p = x.producer
            if p is not None and p.op == "reshape":
                return em.emit(n.name, "reshape", [p.inputs[0]], dict(n.attrs), [out])
        if n.op == "transpose":
            p = ins[0].producer
            if p is not None and p.op == "transpose":
                inner, outer = p.attrs["perm"], n.attrs["perm"]
                perm = [inner[k] for k in outer]
                src = p.inputs[0]
                if perm == list(range(len(perm))):
                    return [src]
                return em.emit(n.name, "transpose", [src], {"perm": perm}, [out])
        return None

    return rebuild(g, visit, em)


def simplify_algebra(g: Graph) -> Graph:
    for _ in range(8):
        before = len(g.nodes)
        g = _simplify_once(g)
        if len(g.nodes) >= before:
            break
    return g
