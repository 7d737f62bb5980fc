"""Pass: a float16 model computes in float32 between its inputs and outputs, as onnxruntime's
CPU kernels do.

Without AVX512-FP16 arithmetic, LLVM computes each float16 operation in float32 and rounds it
back, and a float16 value stored between kernels is rounded again: a conv's or a matmul's sum
rounds every partial sum. onnxruntime has few float16 kernels on x86: it casts around the ops
to float32 and drops the casts between them, so a float16 model there computes in float32
from its (float16) inputs and weights to its outputs. MobileNetV2 exported in float16, against
the same model computed in float32: onnxruntime 2.6e-4 (of the largest output), ours 7.4e-3
before this pass; 6.7e-3 with only each op's arithmetic in float32 and its result rounded to
float16, so the rounding between ops is the larger part.

Here every float16 value an op produces becomes float32: the model's float16 inputs and
weights are cast to float32 where read (a weight's cast is folded into a float32 constant by
``fold_constants``), and float16 outputs are cast back at the end, under their names. An
explicit cast to float16 in the model still rounds (its readers read it cast back)."""

from __future__ import annotations

from .. import op_registry as R
from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild

HALF, FLOAT = "float16", "float32"


def widen_float16(g: Graph) -> Graph:
    if not any(v.dtype == HALF for n in g.nodes for v in (*n.inputs, *n.outputs)):
        return g
    em = Emitter()
    out_names = {v.name for v in g.outputs}
    widened: dict[int, Value] = {}  # a float16 value read more than once: cast once

    def visit(n: Node, ins: list[Value]):
        if n.op == "cast" or not any(v.dtype == HALF for v in (*ins, *n.outputs)):
            if all(a is b for a, b in zip(ins, n.inputs)):
                return None
            return _emit(em, n, ins, out_names)
        wide = [_widen(em, v, widened) if v.dtype == HALF else v for v in ins]
        return _emit(em, n, wide, out_names)

    new = rebuild(g, visit, em)
    outputs = [_cast(em, w, HALF, v.name) if v.dtype == HALF and w.dtype != HALF else w
               for v, w in zip(g.outputs, new.outputs)]
    return Graph([*new.nodes, *em.pending], new.inputs, outputs, name=new.name)


def _emit(em: Emitter, n: Node, ins: list[Value], out_names: set) -> list[Value]:
    """n on inputs ``ins``, its output types inferred from them (a graph output that is now
    float32 is renamed: the cast back to float16 at the end takes its name)."""
    types = R.infer_types(n.op, [(v.shape, v.dtype) for v in ins], n.attrs, n.name)
    outs = [Value(f"{v.name}.f32" if v.name in out_names and dtype != v.dtype else v.name,
                  shape, dtype, v.layout) for v, (shape, dtype) in zip(n.outputs, types)]
    return em.emit(n.name, n.op, ins, n.attrs, outs)


def _widen(em: Emitter, v: Value, widened: dict[int, Value]) -> Value:
    if id(v) not in widened:
        widened[id(v)] = _cast(em, v, FLOAT, f"{v.name}.f32")
    return widened[id(v)]


def _cast(em: Emitter, v: Value, dtype: str, name: str) -> Value:
    like = Value(name, v.shape, dtype, v.layout)
    return em.emit(f"{name}.cast", "cast", [v], {"dtype": dtype}, [like])[0]
