"""Pass: the subnormal (denormal) elements of conv, dense and matmul weights become zeros.

An x86 core multiplies a subnormal operand through a microcode assist, about a hundred times
the cost of an FMA. Trained weights can hold many of them: PP-OCRv6's small text detector
(rapidocr 3) ships two 768 -> 384 1x1 convs with 24% and 63% subnormal weights, which took 21
and 50 ms of a 97 ms run at 320x320 (onnxruntime, which computes them as they are: 21 and
53 ms); a 1x1 conv 768 -> 384 over 10x10 with 60% subnormal weights 109 ms, the same weights
with zeros 0.35 ms, one thread.

A subnormal weight w (|w| < 1.2e-38 in float32) adds w * x to a sum of normal terms: below
the sum's rounding unless every term is as small, so the outputs are the same to float32's
precision (not bitwise). Only the weight operands of these sums are flushed (an operand that
is a constant, before any layout pass packs it); a subnormal constant elsewhere (a divisor, an
epsilon, a scale) keeps its value, and so does every value computed at run time: the kernels
keep IEEE arithmetic (no flush-to-zero mode), so activations that underflow are what numpy
gives.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild

# op -> the positions of its inputs that are weights of its products' sums
WEIGHT_INPUTS = {"conv": (1,), "dense": (1,), "matmul": (0, 1)}


def flush_denormal_weights(g: Graph) -> Graph:
    em = Emitter()
    flushed: dict[int, Value] = {}  # a weight shared by several nodes: one flushed copy

    def flush(v: Value) -> Value:
        if id(v) not in flushed:
            data = v.data
            tiny = np.finfo(data.dtype).tiny
            sub = (np.abs(data) < tiny) & (data != 0)
            if sub.any():
                data = np.where(sub, np.zeros((), data.dtype), data)
                flushed[id(v)] = Value(f"{v.name}_flushed", v.shape, v.dtype, v.layout, data)
            else:
                flushed[id(v)] = v
        return flushed[id(v)]

    def visit(n: Node, ins: list[Value]):
        where = [i for i in WEIGHT_INPUTS.get(n.op, ()) if i < len(ins)
                 and ins[i].is_constant and ins[i].dtype in ("float32", "float64")]
        new = list(ins)
        for i in where:
            new[i] = flush(ins[i])
        if all(a is b for a, b in zip(new, ins)):
            return None
        return em.emit(n.name, n.op, new, dict(n.attrs), n.outputs)

    return rebuild(g, visit, em)
