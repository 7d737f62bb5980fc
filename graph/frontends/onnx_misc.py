"""ONNX import of IsNaN, IsInf, Mod, CumSum, CumProd, TopK and Einsum (issue 18), EyeLike,
Hardmax, LpNormalization, MeanVarianceNormalization, OneHot and BitShift; registered into
:data:`onnx.CONVERTERS` when the importer module loads.

Einsum is lowered here, at import, into the graph's transpose / reshape / slice / reduce_sum /
matmul nodes (so it runs on the matmul kernels): per operand, repeated letters become a
diagonal (a strided slice of the flattened square) and letters nothing else needs are summed
out; operands are then contracted pairwise, left to right, as one batched matmul
[batch, M, K] x [batch, K, N] each, and the result is transposed into the output's order."""

from __future__ import annotations

import string

import numpy as np

from .. import symbolic as S
from .onnx_context import _conv, _np_dtype, refuse

# ---------------------------------------------------------------------------- float classes


@_conv("IsNaN")
def _isnan(c, ins, a):
    return [c.op("isnan", ins[:1])]


@_conv("IsInf")
def _isinf(c, ins, a):
    flags = {}
    for key in ("detect_negative", "detect_positive"):
        v = int(a.get(key, 1))
        if v not in (0, 1):
            raise refuse(c, f"{key} must be 0 or 1, got {v}")
        flags[key] = v
    return [c.op("isinf", ins[:1], **flags)]


@_conv("Mod")
def _mod(c, ins, a):
    fmod = int(a.get("fmod", 0))
    if fmod not in (0, 1):
        raise refuse(c, f"fmod must be 0 or 1, got {fmod}")
    x, y = ins[0], ins[1]
    if fmod == 0 and np.issubdtype(np.dtype(x.dtype), np.floating) and c.opset < 28:
        raise refuse(c, f"fmod=0 is defined for integer inputs before opset 28; {x.dtype} "
                        "inputs need fmod=1 (the ONNX specification)")
    return [c.op("mod", [x, y], fmod=fmod)]


# ---------------------------------------------------------------------------- cumsum / topk


def _scalar_int(c, v, what: str) -> int:
    arr = c.const_array(v, what)
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise refuse(c, f"{what} must be one integer, got {arr.dtype}{list(arr.shape)}")
    return int(arr.reshape(-1)[0])


@_conv("CumSum", "CumProd")
def _cumsum(c, ins, a):
    x = ins[0]
    axis = _scalar_int(c, ins[1], f"the axis input of {c.op_type}")
    if not -len(x.shape) <= axis < len(x.shape):
        raise refuse(c, f"axis {axis} is out of range for rank {len(x.shape)}")
    flags = {k: int(a.get(k, 0)) for k in ("exclusive", "reverse")}
    for k, v in flags.items():
        if v not in (0, 1):
            raise refuse(c, f"{k} must be 0 or 1, got {v}")
    op = "cumsum" if c.op_type == "CumSum" else "cumprod"
    return [c.op(op, [x], axis=axis % len(x.shape), **flags)]


@_conv("TopK")
def _topk(c, ins, a):
    x = ins[0]
    if c.opset < 10:
        if "k" not in a:
            raise refuse(c, "attribute k is missing")
        k = int(a["k"])
    else:
        k = _scalar_int(c, ins[1], "K (the number of elements TopK returns)")
    axis = int(a.get("axis", -1))
    if not -len(x.shape) <= axis < len(x.shape):
        raise refuse(c, f"axis {axis} is out of range for rank {len(x.shape)}")
    axis %= len(x.shape)
    if not 0 <= k <= x.shape[axis]:
        raise refuse(c, f"K={k} is not in [0, {x.shape[axis]}] (the extent of axis {axis})")
    largest = int(a.get("largest", 1))
    if largest not in (0, 1) or int(a.get("sorted", 1)) not in (0, 1):
        raise refuse(c, f"largest and sorted must be 0 or 1, got {largest}, "
                        f"{a.get('sorted')}")
    # sorted=0 leaves the order to the implementation: the sorted order is one
    values, indices = c.op("topk", [x], k=k, axis=axis, largest=largest)
    return [values, indices]


# ---------------------------------------------------------------------------- einsum


@_conv("Einsum")
def _einsum(c, ins, a):
    eq = str(a.get("equation", "")).replace(" ", "")
    if not eq:
        raise refuse(c, "the equation attribute is missing")
    try:
        terms, out = _parse_equation(eq, [v.shape for v in ins])
    except ValueError as e:
        raise refuse(c, f"equation {eq!r}: {e}") from None
    sizes = _letter_sizes(c, eq, terms, ins)
    ins = [_expand_ellipsis(c, v, t, sizes) for v, t in zip(ins, terms)]
    ops = []
    for k, (v, t) in enumerate(zip(ins, terms)):
        v, t = _take_diagonals(c, v, t)
        later = set(out).union(*[set(x) for j, x in enumerate(terms) if j != k])
        ops.append(_sum_out(c, v, t, later))
    acc, ta = ops[0]
    for k in range(1, len(ops)):
        later = set(out).union(*[set(t) for _, t in ops[k + 1:]])
        acc, ta = _contract(c, acc, ta, *ops[k], later)
    acc, ta = _sum_out(c, acc, ta, set(out))
    return [_permute(c, acc, ta, out)]


def _parse_equation(eq: str, shapes) -> tuple[list[str], str]:
    """The input terms and the output term, with '...' replaced by letters of their own."""
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"{len(terms)} input terms for {len(shapes)} inputs")
    used = set(eq) - set(".,->")
    for ch in used:
        if ch not in string.ascii_letters:
            raise ValueError(f"{ch!r} is not a letter")
    spare = [ch for ch in string.ascii_letters if ch not in used]
    ell_rank = 0
    for t, s in zip(terms, shapes):
        if "..." in t:
            ell_rank = max(ell_rank, len(s) - (len(t) - 3))
    ell = "".join(spare[:ell_rank])
    full = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            n = len(s) - (len(t) - 3)
            if n < 0:
                raise ValueError(f"term {t!r} has more letters than its input's rank {len(s)}")
            t = t.replace("...", ell[ell_rank - n:])
        if len(t) != len(s) or "." in t:
            raise ValueError(f"term {t!r} does not match an input of rank {len(s)}")
        full.append(t)
    if arrow:
        out = rhs.replace("...", ell)
        if "." in out or len(set(out)) != len(out):
            raise ValueError(f"output term {rhs!r} is malformed (a letter twice, or stray dots)")
        missing = set(out) - set("".join(full))
        if missing:
            raise ValueError(f"output letters {sorted(missing)} are in no input")
    else:
        counts = {ch: "".join(full).count(ch) for ch in set("".join(full)) - set(ell)}
        out = ell + "".join(sorted(ch for ch, n in counts.items() if n == 1))
    return full, out


def _letter_sizes(c, eq, terms, ins) -> dict:
    sizes: dict[str, int] = {}
    for t, v in zip(terms, ins):
        for ch, n in zip(t, v.shape):
            # (S.same: a size may be symbolic, Funnel's sequence; a 1 broadcasts)
            have = sizes.get(ch, 1)
            if S.same(n, 1) or S.same(have, n):
                sizes.setdefault(ch, n)
            elif S.same(have, 1):
                sizes[ch] = n
            else:
                raise refuse(c, f"equation {eq!r}: letter {ch!r} has sizes "
                                f"{S.dim_text(have)} and {S.dim_text(n)}")
    return sizes


def _expand_ellipsis(c, v, t, sizes):
    """Broadcast size-1 dimensions of broadcast (ellipsis) letters to the letter's size."""
    want = [sizes[ch] for ch in t]
    if all(S.same(a, b) for a, b in zip(v.shape, want)):
        return v
    return c.op("expand", [v], shape=want)


def _reshape(c, v, shape):
    shape = [S.dim(s) for s in shape]
    same = len(shape) == len(v.shape) and all(S.same(a, b) for a, b in zip(v.shape, shape))
    return v if same else c.op("reshape", [v], shape=shape)


def _permute(c, v, t: str, order: str):
    if t == order:
        return v
    return c.op("transpose", [v], perm=[t.index(ch) for ch in order])


def _take_diagonals(c, v, t: str):
    """A letter repeated in one term reads the diagonal: move the two axes last, flatten them
    to n*n and take every (n+1)-th element."""
    while len(set(t)) != len(t):
        ch = next(x for x in t if t.count(x) > 1)
        p = t.index(ch)
        q = t.index(ch, p + 1)
        rest = [i for i in range(len(t)) if i not in (p, q)]
        v = c.op("transpose", [v], perm=rest + [p, q]) if rest + [p, q] != list(
            range(len(t))) else v
        n = v.shape[-1]
        v = _reshape(c, v, list(v.shape[:-2]) + [n * n])
        v = c.op("slice", [v], starts=[0], ends=[n * n], axes=[len(v.shape) - 1],
                 steps=[n + 1])
        t = "".join(t[i] for i in rest) + ch
    return v, t


def _sum_out(c, v, t: str, keep: set):
    axes = [i for i, ch in enumerate(t) if ch not in keep]
    if not axes:
        return v, t
    v = c.op("reduce_sum", [v], axes=axes, keepdims=0)
    return v, "".join(ch for ch in t if ch in keep)


def _contract(c, x, tx: str, y, ty: str, later: set):
    """x[tx] (*) y[ty] over the letters they share that nothing later needs, as one (batched)
    matmul; the result's term is batch + x's own + y's own letters."""
    x, tx = _sum_out(c, x, tx, later | set(ty))
    y, ty = _sum_out(c, y, ty, later | set(tx))
    shared = [ch for ch in tx if ch in ty]
    batch = [ch for ch in shared if ch in later]
    red = [ch for ch in shared if ch not in later]
    left = [ch for ch in tx if ch not in ty]
    right = [ch for ch in ty if ch not in tx]
    size = dict(zip(tx, x.shape)) | dict(zip(ty, y.shape))

    def prod(letters):
        return S.num_elements([size[ch] for ch in letters])

    xm = _permute(c, x, tx, "".join(batch + left + red))
    ym = _permute(c, y, ty, "".join(batch + red + right))
    mkn = [prod(left), prod(red), prod(right)]
    lead = [prod(batch)] if batch else []
    xm = _reshape(c, xm, lead + mkn[:2])
    ym = _reshape(c, ym, lead + mkn[1:])
    from .onnx_context import CONVERTERS

    (z,) = CONVERTERS["MatMul"](c, [xm, ym], {})  # a constant 2-D right side: dense
    tz = "".join(batch + left + right)
    return _reshape(c, z, [size[ch] for ch in tz]), tz


# ---------------------------------------------------------------------------- composed at import
# (EyeLike, Hardmax, LpNormalization, MeanVarianceNormalization: existing graph ops)


def _norm_axis(c, axis, rank: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int) or not -rank <= axis < rank:
        raise refuse(c, f"axis {axis!r} is out of range for rank {rank}")
    return axis % rank


def _static(c, x, what: str) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in x.shape):
        raise refuse(c, f"{what} needs a fixed shape, got {list(x.shape)} (a symbolic "
                        "dimension)")
    return tuple(x.shape)


@_conv("EyeLike")
def _eye_like(c, ins, a):
    """A constant: ones on the k-th diagonal of a matrix shaped as the input."""
    x = ins[0]
    if len(x.shape) != 2:
        raise refuse(c, f"the input must be 2-D, got rank {len(x.shape)}")
    n, m = _static(c, x, "EyeLike")
    dtype = _np_dtype(a["dtype"]) if "dtype" in a else np.dtype(x.dtype)
    return [c.b.const(np.eye(n, m, int(a.get("k", 0)), dtype=dtype), name="eye")]


@_conv("Hardmax")
def _hardmax(c, ins, a):
    """1 at the first maximum along the axis, 0 elsewhere: argmax compared with the axis's
    indices. Before opset 13 the input is coerced to 2-D at ``axis`` (default 1), so the
    maximum is over all later axes together; from 13, over ``axis`` (default -1) alone."""
    x = ins[0]
    if not np.issubdtype(np.dtype(x.dtype), np.floating):
        raise refuse(c, f"{x.dtype} input: Hardmax is defined for float inputs")
    rank = len(x.shape)
    axis = _norm_axis(c, int(a.get("axis", 1 if c.opset < 13 else -1)), rank)
    if c.opset < 13 and axis < rank - 1:
        shape = _static(c, x, "Hardmax before opset 13 (the input coerced to 2-D)")
        flat = c.op("reshape", [x], shape=[int(np.prod(shape[:axis], dtype=np.int64)),
                                           int(np.prod(shape[axis:], dtype=np.int64))])
        return [c.op("reshape", [_one_hot_max(c, flat, 1)], shape=list(shape))]
    return [_one_hot_max(c, x, axis)]


def _one_hot_max(c, x, axis: int):
    n = x.shape[axis]
    if not isinstance(n, int):
        raise refuse(c, f"the axis it reduces needs a fixed size, got {n}")
    idx = c.op("argmax", [x], axis=axis, keepdims=1, select_last_index=0)
    iota = np.arange(n, dtype=np.int64).reshape([n if k == axis else 1
                                                 for k in range(len(x.shape))])
    hot = c.op("equal", [idx, c.b.const(iota, name="indices")])
    return c.op("cast", [hot], dtype=np.dtype(x.dtype).name)


@_conv("LpNormalization")
def _lp_normalization(c, ins, a):
    """x / ||x||_p along axis (p 1 or 2); a zero vector stays zero (onnxruntime's result;
    0/0 would be NaN)."""
    x = ins[0]
    if not np.issubdtype(np.dtype(x.dtype), np.floating):
        raise refuse(c, f"{x.dtype} input: LpNormalization is defined for float inputs")
    p = int(a.get("p", 2))
    if p not in (1, 2):
        raise refuse(c, f"p must be 1 or 2, got {p}")
    axis = _norm_axis(c, int(a.get("axis", -1)), len(x.shape))
    pre = c.op("abs", [x]) if p == 1 else c.op("multiply", [x, x])
    norm = c.op("reduce_sum", [pre], axes=[axis], keepdims=1)
    if p == 2:
        norm = c.op("sqrt", [norm])
    zero = c.b.const(np.zeros((), x.dtype), name="zero")
    one = c.b.const(np.ones((), x.dtype), name="one")
    safe = c.op("where", [c.op("equal", [norm, zero]), one, norm])
    return [c.op("divide", [x, safe])]


@_conv("MeanVarianceNormalization")
def _mvn(c, ins, a):
    """(x - mean) / (std + 1e-9) over ``axes`` (default [0, 2, 3]). The variance is the mean
    of the squared deviations, never negative: ONNX's function writes E[x^2] - E[x]^2, which
    cancels (on a constant slice onnxruntime's variance comes out negative, its result NaN;
    here finite)."""
    x = ins[0]
    if not np.issubdtype(np.dtype(x.dtype), np.floating):
        raise refuse(c, f"{x.dtype} input: MeanVarianceNormalization is defined for floats")
    axes = a.get("axes", [0, 2, 3])
    axes = sorted({_norm_axis(c, int(ax), len(x.shape)) for ax in axes})
    mean = c.op("reduce_mean", [x], axes=axes, keepdims=1)
    dev = c.op("subtract", [x, mean])
    var = c.op("reduce_mean", [c.op("multiply", [dev, dev])], axes=axes, keepdims=1)
    eps = c.b.const(np.asarray(1e-9, x.dtype), name="epsilon")
    return [c.op("divide", [dev, c.op("add", [c.op("sqrt", [var]), eps])])]


@_conv("OneHot")
def _one_hot(c, ins, a):
    """values[1] (on) where an index equals the position along the new axis, values[0] (off)
    elsewhere: the indices compared with a constant iota of the depth. Negative indices count
    from the end; one outside [-depth, depth) gives a row of off values. Float indices are
    truncated to integers (onnxruntime's cast)."""
    idx, values = ins[0], ins[2]
    if not np.issubdtype(np.dtype(idx.dtype), np.number):
        raise refuse(c, f"indices must be numbers, got {idx.dtype}")
    depth = _depth(c, ins[1])
    if tuple(values.shape) != (2,):
        raise refuse(c, f"values must be [off, on] (shape [2]), got {list(values.shape)}")
    rank = len(idx.shape)
    axis = int(a.get("axis", -1))
    if not -rank - 1 <= axis <= rank:
        raise refuse(c, f"axis {axis} is out of range for an output of rank {rank + 1}")
    axis %= rank + 1
    if np.dtype(idx.dtype).kind in "if" and np.dtype(idx.dtype) != np.int64:
        idx = c.op("cast", [idx], dtype="int64")  # (idx + depth must not overflow int8)
    kind = np.dtype(idx.dtype)
    if kind.kind == "i":  # (unsigned indices are never negative)
        wrapped = c.op("add", [idx, c.b.const(np.asarray(depth, kind), name="depth")])
        zero = c.b.const(np.zeros((), kind), name="zero")
        idx = c.op("where", [c.op("less", [idx, zero]), wrapped, idx])
    col = c.op("reshape", [idx], shape=[*idx.shape[:axis], 1, *idx.shape[axis:]])
    iota = np.arange(depth, dtype=kind).reshape([depth if k == axis else 1
                                                 for k in range(rank + 1)])
    hot = c.op("equal", [col, c.b.const(iota, name="positions")])
    off, on = (c.op("slice", [values], starts=[k], ends=[k + 1], axes=[0], steps=[1])
               for k in (0, 1))
    return [c.op("where", [hot, on, off])]


def _depth(c, v) -> int:
    """OneHot's depth: one positive number known at build time (it sizes the output)."""
    arr = c.const_array(v, "depth (the size of the one-hot axis)")
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.number):
        raise refuse(c, f"depth must be one number, got {arr.dtype}{list(arr.shape)}")
    depth = int(arr.reshape(-1)[0])
    if depth < 1:
        raise refuse(c, f"depth must be positive, got {arr.reshape(-1)[0]}")
    return depth


@_conv("BitShift")
def _bit_shift(c, ins, a):
    """left_shift / right_shift. Opset 11 defines unsigned integers; 28 adds signed ones (an
    arithmetic right shift). A count that is negative or not below the width gives what the
    sign extension alone gives (0, or -1 for a right shift of a negative x): the library ops'
    rule, which is numpy's."""
    x, y = ins[0], ins[1]
    direction = a.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise refuse(c, f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    kind = np.dtype(x.dtype).kind
    if kind not in "iu" or np.dtype(y.dtype) != np.dtype(x.dtype):
        raise refuse(c, f"X and Y must be integers of one type, got {x.dtype} and {y.dtype}")
    if kind == "i" and c.opset < 28:
        raise refuse(c, f"{x.dtype} input: signed integers need opset 28 (before, BitShift "
                        "is defined for unsigned ones)")
    return [c.op("left_shift" if direction == "LEFT" else "right_shift", [x, y])]
