"""Fold per-channel affine ops into the preceding conv or dense: their weights and bias absorb
them at build time, so the kernel does no extra work at run time.

- batch_norm(conv(x, w, b)) -> conv(x, w * s, (b - mean) * s + beta), s = gamma / sqrt(var + eps)
  (per output channel); the same for dense (channels are its last axis);
- multiply(conv(x, w, b), c) with c a per-channel (or scalar) constant -> conv(x, w * c, b * c);
- add(conv(x, w, b), c) / add(c, conv(...)) with c per-channel -> conv(x, w, b + c);
- dense likewise, also through the rank-restoring reshape the ONNX importer puts around a
  3-D MatMul by a weight (reshape -> dense -> reshape [.., N] -> add bias[N]).

Only when the conv/dense (and that reshape) feed nothing else: a second reader would see the
folded values. Weights must be constants."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from .rewrite import Emitter, rebuild


def _channel_vector(c: Value, nchan: int, axis: int, rank: int) -> np.ndarray | None:
    """The constant c as a vector over the channel axis when it broadcasts only along that axis
    (a scalar counts: it is the same for every channel); None otherwise."""
    if not c.is_constant or len(c.shape) > rank:
        return None
    shape = (1,) * (rank - len(c.shape)) + tuple(c.shape)
    if any(s != 1 for d, s in enumerate(shape) if d != axis) or shape[axis] not in (1, nchan):
        return None
    return np.broadcast_to(c.data.reshape(shape[axis]), (nchan,)).astype(c.dtype)


def fold_scale_into_conv(g: Graph) -> Graph:
    cons = g.consumers()
    outs = {id(v) for v in g.outputs}
    em = Emitter()
    old_of: dict[int, Value] = {}  # new value id -> the old value it copies

    def only_reader(v_old: Value) -> bool:
        return len(cons.get(id(v_old), [])) == 1 and id(v_old) not in outs

    def source(v_new: Value):
        """(conv/dense node, reshape node or None) that produces v_new with no other reader."""
        p = v_new.producer
        if p is None:
            return None, None
        if p.op == "reshape":
            q = p.inputs[0].producer
            if q is None or q.op != "dense":
                return None, None
            return q, p
        if p.op in ("conv", "dense"):
            return p, None
        return None, None

    def _fold(n: Node, ins: list[Value]):
        if n.op not in ("batch_norm", "multiply", "add") or n.outputs[0].dtype not in (
                "float32", "float64"):
            return None
        # which input is the conv/dense result
        for pos in ((0,) if n.op == "batch_norm" else (0, 1)):
            x_new, x_old = ins[pos], n.inputs[pos]
            node, reshape = source(x_new)
            if node is None or not only_reader(x_old):
                continue
            if reshape is not None:
                inner_old = old_of.get(id(reshape.inputs[0]))
                if inner_old is None or not only_reader(inner_old):
                    continue
            w, rest = node.inputs[1], node.inputs[2:]
            if not w.is_constant or any(not b.is_constant for b in rest):
                continue
            out = node.outputs[0]
            nchan = w.shape[0] if node.op == "conv" else w.shape[1]
            if node.op == "conv" and len(w.shape) < 3:
                continue
            rank = len(x_new.shape)
            axis = 1 if node.op == "conv" else rank - 1
            if reshape is not None and (reshape.outputs[0].shape[-1] != nchan):
                continue
            bias = rest[0].data.astype(w.dtype) if rest else np.zeros(nchan, w.dtype)
            if node.op == "dense" and rest and rest[0].shape not in ((nchan,), (1, nchan)):
                continue
            bias = np.broadcast_to(bias.reshape(-1), (nchan,)).copy() if rest else bias
            if n.op == "batch_norm":
                if node.op == "dense" and reshape is not None:
                    continue
                gamma, beta, mean, var = (v.data for v in ins[1:])
                if not all(v.is_constant for v in ins[1:]):
                    continue
                s = (gamma / np.sqrt(var + n.attrs["epsilon"])).astype(w.dtype)
                scale, shift = s, (beta - mean * s).astype(w.dtype)
            else:
                other = ins[1 - pos]
                vec = _channel_vector(other, nchan, axis, rank)
                if vec is None or other.dtype != w.dtype:
                    continue
                if n.op == "multiply":
                    scale, shift = vec, np.zeros(nchan, w.dtype)
                else:
                    scale, shift = np.ones(nchan, w.dtype), vec
            if node.op == "conv":
                w2 = w.data * scale.reshape((-1,) + (1,) * (len(w.shape) - 1))
            else:
                w2 = w.data * scale.reshape(1, -1)
            b2 = bias * scale + shift
            tag = f"{n.name}_folded"
            wv = Value(f"{w.name}_{tag}", w.shape, w.dtype, data=w2.astype(w.dtype))
            bv = Value(f"{tag}_bias", (nchan,), w.dtype, data=b2.astype(w.dtype))
            if reshape is None:
                return em.emit(f"{node.name}_{tag}", node.op, [node.inputs[0], wv, bv],
                               dict(node.attrs), [n.outputs[0]])
            d_out = em.emit(f"{node.name}_{tag}", "dense", [node.inputs[0], wv, bv], {},
                            [out], [f"{out.name}_{tag}"])
            return em.emit(f"{reshape.name}_{tag}", "reshape", d_out, dict(reshape.attrs),
                           [n.outputs[0]])
        return None

    return rebuild(g, _track(old_of, _fold), em)


def _track(old_of: dict, fold):
    """Wrap ``fold`` so that ``old_of`` maps each new value id to the old value it copies (the
    single-reader test needs the original graph's consumers)."""
    def visit(n: Node, ins: list[Value]):
        for new, old in zip(ins, n.inputs):
            old_of.setdefault(id(new), old)
        return fold(n, ins)

    return visit
