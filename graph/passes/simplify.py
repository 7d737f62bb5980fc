"""Algebraic simplification: x*1, 1*x, x+0, 0+x, x-0, x/1 -> x; transpose(transpose(x)) -> one
transpose (or x when the permutations cancel); reshape(reshape(x)) -> one reshape, and a reshape
to the same shape -> x; copy (what ONNX Identity/Dropout leave when they name an output) -> x;
a cast to the type x has, an expand to the shape x has, a slice of every element in order
-> x; where(c, a, b) with a constant c all true or all false -> a or b;
x ** 2 and x ** 3 by a constant exponent -> x * x, x * x * x (GPT-2's tanh GELU cubes its input:
a run-time pow is an f64 log and exp per element, its dense's tail 0.9 against 0.6 ms).

A rewrite never changes the value a graph output names (it would rename the model's output), and
x*1 etc. only fire when the constant does not broadcast x to a bigger shape or another dtype.
Runs to a fixpoint (each round removes at least one node or stops)."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from ..op_registry import slice_params
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
        if n.op in ("cast", "expand") and _same_type(ins[0], out):
            return [ins[0]]  # (ONNX function bodies cast to the type a value has)
        if n.op == "slice" and _same_type(ins[0], out) and _whole_slice(ins[0], n.attrs):
            return [ins[0]]
        if n.op == "where":
            return _decided_where(ins, out)
        if n.op == "power" and len(ins) == 2:
            return _power_as_products(em, n, ins, out)
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


def _same_type(x: Value, out: Value) -> bool:
    return x.shape == out.shape and x.dtype == out.dtype


def _whole_slice(x: Value, attrs: dict) -> bool:
    """The slice takes every element of x in order: each axis from 0 by steps of 1 (tf2onnx
    writes x[:, :, :, 0:1] of a [N, C, L, 1] conv's output as a Slice: a copy of 0.1-0.2 ms
    behind magika's conv)."""
    starts, steps, _ = slice_params(x.shape, attrs)
    return all(_is_int(v, 0) for v in starts) and all(_is_int(v, 1) for v in steps)


def _is_int(v, want: int) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v == want


def _decided_where(ins: list[Value], out: Value):
    """where(c, a, b) with a constant c that is all true (a) or all false (b), when that
    operand already has the output's shape and type (Attention's function body guards rows
    that its constant mask leaves whole), or None."""
    cond = ins[0]
    if not (cond.is_constant and cond.size > 0):
        return None
    taken = ins[1] if np.all(cond.data) else ins[2] if not np.any(cond.data) else None
    return [taken] if taken is not None and _same_type(taken, out) else None


def _power_as_products(em: Emitter, n: Node, ins: list[Value], out: Value):
    """x ** 2 or x ** 3 (a constant exponent, no broadcast, float x) as multiplies, or None."""
    x, e = ins
    if not (e.is_constant and e.size == 1 and x.shape == out.shape and x.dtype == out.dtype
            and np.issubdtype(np.dtype(x.dtype), np.floating)):
        return None
    times = float(np.asarray(e.data).reshape(()))
    if times not in (2.0, 3.0):
        return None
    sq, = em.emit(f"{n.name}_square", "multiply", [x, x], {}, [out],
                  [f"{out.name}_square" if times == 3.0 else out.name])
    if times == 2.0:
        return [sq]
    return em.emit(f"{n.name}_cube", "multiply", [sq, x], {}, [out])


def simplify_algebra(g: Graph) -> Graph:
    for _ in range(8):
        before = len(g.nodes)
        g = _simplify_once(g)
        if len(g.nodes) >= before:
            break
    return g
