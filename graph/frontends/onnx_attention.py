"""ONNX import of onnxruntime's fused attention operators, ``com.microsoft::Attention`` (the
packed Q/K/V projection that its BERT optimizer writes) and ``MultiHeadAttention`` (projected
Q, K, V), as the graph's matmul / softmax / transpose ops with onnxruntime's CPU semantics:

    scores = scale * Q @ K^T + mask (+ attention_bias),  out = softmax(scores) @ V

where the mask adds ``mask_filter_value`` (-10000 by default) at the padded keys, given as a
0/1 mask of [batch, total] or [batch, sequence, total] or as key counts ([batch]: the end of
each row's keys; [2 * batch]: ends then starts), and, when ``unidirectional``, puts the
lowest float at the keys after each query (those replace the padding's value, as
onnxruntime's PrepareMask does). ``past`` keys and values come before the new ones and
``present`` holds them all.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np

from ..ir import Value, freeze
from .onnx_context import _conv_in, refuse
from .onnx_contrib import MS, _check_rank, _check_vector, _opt, _required_int, _unread


@_conv_in(MS, "Attention")
def _attention(c, ins, a):
    x, w, bias, mask, past, attn_bias = (list(ins) + [None] * 7)[:6]
    heads = _required_int(c, a, "num_heads")
    _refuse_options(c, a, _opt(ins, 6), "past_sequence_length")
    _check_rank(c, x, (3,), "input")
    _check_rank(c, w, (2,), "weights")
    if w.shape[0] != x.shape[2]:
        raise refuse(c, f"weights {list(w.shape)} must have the input's hidden size "
                        f"({x.shape[2]}) rows")
    sizes = _qkv_sizes(c, a, w.shape[1], heads)
    _check_vector(c, bias, w.shape[1], "bias")
    q, k, v = (_heads_first(c, t, heads) for t in _project(c, x, w, bias, sizes))
    if past is not None:
        k, v = _with_past(c, past, k, v, sizes)
    present = None
    if len(c.outputs_read) > 1 and c.outputs_read[1]:
        present = c.op("concat", [_lead(c, k), _lead(c, v)], axis=0)
    out = _attend(c, a, q, k, v, mask, attn_bias)
    return [out, present]


@_conv_in(MS, "MultiHeadAttention")
def _multi_head_attention(c, ins, a):
    q, k, v, bias, mask, attn_bias, past_k, past_v = (list(ins) + [None] * 10)[:8]
    heads = _required_int(c, a, "num_heads")
    _refuse_options(c, a, _opt(ins, 8), "past_sequence_length")
    if _opt(ins, 9) is not None:
        raise refuse(c, "cache_indirection (beam search) is not supported")
    _unread(c, 3, "the Q*K scores output is not supported")
    _check_rank(c, q, (3,), "query (packed Q/K/V, 5-D, is not supported)")
    if k is None or v is None or len(k.shape) == 5:
        raise refuse(c, "key and value must be given (packed K/V is not supported)")
    _check_rank(c, k, (3, 4), "key")
    _check_rank(c, v, (len(k.shape),), "value (the key's rank)")
    dq, dk, dv = q.shape[2], _width(k), _width(v)
    biases = _bias_parts(c, bias, (dq, dk, dv))
    q = _heads_first(c, _add(c, q, biases[0]), heads)
    if len(k.shape) == 3:  # projected here; 4-D: already [batch, heads, L, head size]
        k = _heads_first(c, _add(c, k, biases[1]), heads)
        v = _heads_first(c, _add(c, v, biases[2]), heads)
        if (past_k is None) != (past_v is None):
            raise refuse(c, "past_key and past_value go together")
        if past_k is not None:
            k = c.op("concat", [past_k, k], axis=2)
            v = c.op("concat", [past_v, v], axis=2)
    out = _attend(c, a, q, k, v, mask, attn_bias)
    return [out, k, v]


# ---------------------------------------------------------------------------- parts


def _refuse_options(c, a: dict, past_len: Value | None, name: str) -> None:
    for attr in ("do_rotary", "past_present_share_buffer"):
        if a.get(attr, 0):
            raise refuse(c, f"{attr}=1 is not supported")
    if past_len is not None:
        raise refuse(c, f"the {name} input (a shared past/present buffer) is not supported")


def _qkv_sizes(c, a: dict, width, heads: int) -> tuple[int, int, int]:
    sizes = a.get("qkv_hidden_sizes")
    if sizes is None:
        if width % 3:
            raise refuse(c, f"the weights' {width} columns are not Q, K and V of one size; "
                            "give qkv_hidden_sizes")
        sizes = [width // 3] * 3
    if len(sizes) != 3 or sum(sizes) != width or sizes[0] != sizes[1]:
        raise refuse(c, f"qkv_hidden_sizes {list(sizes)} must be 3 sizes, Q's equal to K's, "
                        f"summing to the weights' {width} columns")
    if any(s <= 0 or s % heads for s in sizes):
        raise refuse(c, f"qkv_hidden_sizes {list(sizes)} must be positive multiples of "
                        f"num_heads ({heads})")
    return tuple(sizes)


def _project(c, x: Value, w: Value, bias: Value | None, sizes) -> list[Value]:
    """x @ W + bias split into Q, K, V ([batch, sequence, size] each): three dense ops over
    the weight's column blocks when it is a constant (no slicing of the product)."""
    lead = list(x.shape[:2])
    rows = c.op("reshape", [x], shape=[lead[0] * lead[1], x.shape[2]])
    bounds = np.cumsum((0,) + tuple(sizes))
    out = []
    for i, (lo, hi) in enumerate(pairwise(bounds)):
        wi = c.b.const(freeze(np.ascontiguousarray(w.data[:, lo:hi])),
                       name=f"{w.name}_{'qkv'[i]}") if w.is_constant else \
            c.op("slice", [w], starts=[int(lo)], ends=[int(hi)], axes=[1])
        bi = None if bias is None else c.op("slice", [bias], starts=[int(lo)], ends=[int(hi)],
                                              axes=[0])
        y = c.op("dense", [rows, wi] + ([bi] if bi is not None else [])) if w.is_constant \
            else _add(c, c.op("matmul", [rows, wi]), bi)
        out.append(c.op("reshape", [y], shape=lead + [int(hi - lo)]))
    return out


def _width(t: Value):
    """The hidden size of a key / value: [B, L, D], or [B, N, L, H] already split."""
    return t.shape[2] if len(t.shape) == 3 else t.shape[1] * t.shape[3]


def _bias_parts(c, bias: Value | None, sizes) -> list[Value | None]:
    if bias is None:
        return [None, None, None]
    _check_vector(c, bias, sum(sizes), "bias (Q, K and V's biases)")
    bounds = np.cumsum((0,) + tuple(sizes))
    return [c.op("slice", [bias], starts=[int(lo)], ends=[int(hi)], axes=[0])
            for lo, hi in pairwise(bounds)]


def _add(c, x: Value, b: Value | None) -> Value:
    return x if b is None else c.op("add", [x, b])


def _heads_first(c, t: Value, heads: int) -> Value:
    """[batch, sequence, heads * size] -> [batch, heads, sequence, size]."""
    b, s, d = t.shape
    if d % heads:
        raise refuse(c, f"hidden size {d} is not a multiple of num_heads ({heads})")
    split = c.op("reshape", [t], shape=[b, s, heads, d // heads])
    return c.op("transpose", [split], perm=[0, 2, 1, 3])


def _with_past(c, past: Value, k: Value, v: Value, sizes) -> tuple[Value, Value]:
    """The past keys and values ([2, batch, heads, past, size]) before the new ones."""
    if sizes[0] != sizes[2]:
        raise refuse(c, f"with past state Q, K and V must have one hidden size, got {sizes}")
    want = [2, k.shape[0], k.shape[1], None, k.shape[3]]
    if len(past.shape) != 5 or any(w is not None and p != w for p, w in zip(past.shape, want)):
        raise refuse(c, f"past {list(past.shape)} must be [2, batch, heads, past length, "
                        f"head size] = {['P' if w is None else w for w in want]}")
    parts = []
    for i, new in enumerate((k, v)):
        one = c.op("slice", [past], starts=[i], ends=[i + 1], axes=[0])
        parts.append(c.op("concat", [c.op("reshape", [one], shape=list(past.shape[1:])), new],
                          axis=2))
    return parts[0], parts[1]


def _lead(c, t: Value) -> Value:
    return c.op("reshape", [t], shape=[1] + list(t.shape))


def _attend(c, a: dict, q: Value, k: Value, v: Value, mask: Value | None,
            attn_bias: Value | None) -> Value:
    """softmax(scale * q @ k^T + mask + attention_bias) @ v, heads merged back:
    q [B, N, S, H], k [B, N, T, H], v [B, N, T, Hv] -> [B, S, N * Hv]."""
    b, n, s, h = q.shape
    scale = float(a.get("scale", 0.0)) or 1.0 / math.sqrt(h)
    kt = c.op("transpose", [k], perm=[0, 1, 3, 2])
    scores = c.op("multiply", [c.op("matmul", [q, kt]),
                               c.b.const(np.asarray(scale, q.dtype), name=f"{c.node_name}_scale")])
    bias = _mask_bias(c, a, mask, k, s)
    for extra in (bias, attn_bias):
        if extra is not None:
            scores = c.op("add", [scores, extra])
    ctx = c.op("matmul", [c.op("softmax", [scores], axes=[3]), v])
    merged = c.op("transpose", [ctx], perm=[0, 2, 1, 3])
    return c.op("reshape", [merged], shape=[b, s, n * v.shape[3]])


def _mask_bias(c, a: dict, mask: Value | None, k: Value, seq) -> Value | None:
    """What the mask adds to the scores, broadcast to [B, N, S, T]: mask_filter_value at the
    padded keys, the lowest float at the future ones (unidirectional)."""
    dtype = k.dtype
    pad = None if mask is None else _padding_bias(c, a, mask, k, seq)
    if not a.get("unidirectional", 0) or seq == 1:
        return pad
    total = k.shape[2]
    if not (isinstance(seq, int) and isinstance(total, int)):
        raise refuse(c, "unidirectional attention needs fixed sequence lengths; give the "
                        "inputs' sizes: from_onnx(model, shapes={...})")
    past = total - seq
    future = np.arange(total)[None, :] > past + np.arange(seq)[:, None]
    low = np.finfo(np.dtype(dtype)).min
    if pad is None:
        return c.b.const(np.where(future, low, 0).astype(dtype)[None, None],
                         name=f"{c.node_name}_causal")
    cond = c.b.const(future[None, None], name=f"{c.node_name}_future")
    return c.op("where", [cond, c.b.const(np.asarray(low, dtype), name="lowest"), pad])


def _padding_bias(c, a: dict, mask: Value, k: Value, seq) -> Value:
    batch, total = k.shape[0], k.shape[2]
    fill = c.b.const(np.asarray(float(a.get("mask_filter_value", -10000.0)), k.dtype),
                     name=f"{c.node_name}_mask_filter")
    zero = c.b.const(np.asarray(0.0, k.dtype), name=f"{c.node_name}_zero")
    shape = list(mask.shape)
    if shape == [batch, total] or shape == [batch, seq, total]:  # 0/1 (or any > 0 keeps)
        masked = c.op("less_equal", [mask, c.b.const(np.asarray(0, mask.dtype), name="zero")])
        lead = [batch, 1, 1, total] if len(shape) == 2 else [batch, 1, seq, total]
        return c.op("reshape", [c.op("where", [masked, fill, zero])], shape=lead)
    if len(shape) == 1 and shape[0] in (batch, 2 * batch):
        masked = _outside_counts(c, mask, k, batch)
        bias = c.op("where", [masked, fill, zero])
        return c.op("reshape", [bias], shape=[batch, 1, 1, total])
    raise refuse(c, f"mask {list(mask.shape)} is not supported (supported: [batch], "
                    f"[2 * batch], [batch, total length], [batch, sequence, total length] with "
                    f"batch {batch}, sequence {seq}, total length {total})")


def _outside_counts(c, mask: Value, k: Value, batch) -> Value:
    """[B, T] true at the keys a 1-D mask index leaves out: from each row's end on, and
    before its start when the index holds starts too ([2 * batch])."""
    pos = _key_positions(c, k, mask.dtype)
    two = mask.shape[0] != batch

    def part(i: int) -> Value:
        if not two:
            return c.op("reshape", [mask], shape=[batch, 1])
        one = c.op("slice", [mask], starts=[i * batch], ends=[(i + 1) * batch], axes=[0])
        return c.op("reshape", [one], shape=[batch, 1])

    out = c.op("greater_equal", [pos, part(0)])
    if two:
        out = c.op("logical_or", [out, c.op("less", [pos, part(1)])])
    return out


def _key_positions(c, k: Value, dtype) -> Value:
    """0 .. T-1 of the keys' axis (a constant when T is fixed, else counted at run time)."""
    total = k.shape[2]
    if isinstance(total, int):
        return c.b.const(np.arange(total, dtype=dtype)[None], name=f"{c.node_name}_positions")
    row = c.op("slice", [k], starts=[0, 0, 0], ends=[1, 1, 1], axes=[0, 1, 3])
    # (arange_like counts in its input's type, an integer one)
    like = c.op("cast", [c.op("reshape", [row], shape=[total])], dtype=np.dtype(dtype).name)
    line = c.op("arange_like", [like], start=0, delta=1)
    return c.op("reshape", [line], shape=[1, total])
