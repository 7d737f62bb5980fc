"""Data movement operators (injective): transpose, reshape, flatten, squeeze, unsqueeze, concat,
split, slice (with steps), pad (constant, reflect, edge), gather, expand, and the NCHW <-> NCHW[x]c
layout transforms."""

from __future__ import annotations

import re

from .. import te
from ..ir import dtype as dt
from ..ir.expr import Expr, as_int, const
from ..ir.simplify import simplify
from ..te.tensor import Tensor
from ._base import (
    BROADCAST,
    INJECTIVE,
    broadcast_index,
    broadcast_shapes,
    check_int,
    check_tensor,
    dim_equal,
    dims_of,
    normalize_axes,
    normalize_axis,
    op_compute,
    prod_of,
    static_shape,
)


def transpose(x: Tensor, axes=None) -> Tensor:
    """numpy.transpose: axes=None reverses the dimensions; negative axes allowed."""
    check_tensor("transpose", "x", x)
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    if not isinstance(axes, (list, tuple)) or len(axes) != x.ndim:
        raise ValueError(f"transpose: axes must be a permutation of {x.ndim} axes, got {axes!r}")
    perm = tuple(normalize_axis("transpose", "axes", a, x.ndim) for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes!r} is not a permutation")
    shape = tuple(x.shape[p] for p in perm)

    def f(*i):
        idx = [None] * x.ndim
        for out_d, p in enumerate(perm):
            idx[p] = i[out_d]
        return x[tuple(idx)]

    return op_compute("transpose", shape, f, INJECTIVE, axes=list(perm))


def _unravel(flat, shape):
    idx = []
    for d in reversed(range(len(shape))):
        idx.append(flat % shape[d] if d > 0 else flat)
        flat = flat // shape[d]
    return tuple(reversed(idx))


def _extent(op: str, arg: str, s, minimum: int):
    """An int >= minimum, or a symbolic extent (an integer expression of shape variables)."""
    if isinstance(s, Expr) and as_int(s) is None:
        if not dt.is_int(s.dtype):
            raise ValueError(f"{op}: {arg} entries must be integers, got {s!r} ({s.dtype})")
        return simplify(s)
    return check_int(op, arg, s, minimum)


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(dim_equal(x, y) for x, y in zip(a, b))


def _infer_minus_one(ns: list, total, newshape) -> list:
    """numpy's -1 entry: total / the product of the others, which must divide it (for a
    symbolic total: provably, e.g. (batch * seq * 768) / 768)."""
    known = prod_of([s for s in ns if not (isinstance(s, int) and s == -1)])
    if as_int(known) == 0:
        raise ValueError(f"reshape: cannot infer -1 in {newshape!r} for {total} elements")
    rest = simplify(const(total) % known if isinstance(total, int) else total % known)
    if as_int(rest) != 0:
        raise ValueError(f"reshape: cannot infer -1 in {newshape!r} for {total} elements"
                         + ("" if as_int(total) is not None else
                            f" (the other entries must divide the symbolic size {total!r})"))
    q = simplify(const(total) // known if isinstance(total, int) else total // known)
    ns[ns.index(-1)] = as_int(q) if as_int(q) is not None else q
    return ns


def reshape(x: Tensor, newshape) -> Tensor:
    """numpy.reshape (row-major); one entry may be -1 (inferred). Extents may be symbolic
    (the new shape then says them as expressions of the same variables: (n, 64) ->
    (n * 4, 16) or (-1, 16)); the element counts must be provably equal."""
    check_tensor("reshape", "x", x)
    src = dims_of("reshape", "x", x)
    newshape = tuple(newshape) if isinstance(newshape, (list, tuple)) else (newshape,)
    total = prod_of(src)
    ns = [_extent("reshape", "newshape", s, -1) for s in newshape]
    if sum(1 for s in ns if isinstance(s, int) and s == -1) > 1:
        raise ValueError(f"reshape: newshape {newshape!r} has more than one -1")
    if any(isinstance(s, int) and s == -1 for s in ns):
        ns = _infer_minus_one(ns, total, newshape)
    if not dim_equal(prod_of(ns), total) or any(as_int(s) == 0 for s in ns):
        raise ValueError(f"reshape: cannot reshape {src} ({total} elements) into {tuple(ns)}")
    if _same_shape(ns, src):
        return op_compute("reshape", ns, lambda *i: x[i], INJECTIVE, newshape=list(ns))

    def f(*i):
        flat = const(0)
        for d, s in enumerate(ns):
            flat = flat * s + i[d] if d else i[d]
        return x[_unravel(flat, src)]

    return op_compute("reshape", ns, f, INJECTIVE, newshape=list(ns))


def flatten(x: Tensor, axis: int = 1) -> Tensor:
    """ONNX Flatten: 2-D result (prod(shape[:axis]), prod(shape[axis:])); axis in [-r, r]."""
    check_tensor("flatten", "x", x)
    a = check_int("flatten", "axis", axis)
    if not -x.ndim <= a <= x.ndim:
        raise ValueError(f"flatten: axis={axis} is out of range for rank {x.ndim}")
    a = a + x.ndim if a < 0 else a
    src = dims_of("flatten", "x", x)
    return reshape(x, tuple(s if isinstance(s, int) else simplify(s)
                            for s in (prod_of(src[:a]), prod_of(src[a:]))))


def squeeze(x: Tensor, axis=None) -> Tensor:
    """numpy.squeeze: axis=None drops every extent-1 dimension; a named axis must have extent 1."""
    check_tensor("squeeze", "x", x)
    shape = x.shape
    if axis is None:
        axes = tuple(d for d, s in enumerate(shape) if as_int(s) == 1)
    else:
        axes = normalize_axes("squeeze", "axis", axis, x.ndim)
        for d in axes:
            if as_int(shape[d]) != 1:
                raise ValueError(f"squeeze: axis {d} has extent {shape[d]!r}, not 1")
    keep = [d for d in range(x.ndim) if d not in axes]

    def f(*i):
        idx = [const(0)] * x.ndim
        for o, d in enumerate(keep):
            idx[d] = i[o]
        return x[tuple(idx)]

    return op_compute("squeeze", [shape[d] for d in keep], f, INJECTIVE, axis=list(axes))


def unsqueeze(x: Tensor, axis) -> Tensor:
    """numpy.expand_dims / ONNX Unsqueeze: insert extent-1 axes at the given output positions."""
    check_tensor("unsqueeze", "x", x)
    axes_in = axis if isinstance(axis, (list, tuple)) else (axis,)
    axes = normalize_axes("unsqueeze", "axis", axes_in, x.ndim + len(axes_in))
    nd = x.ndim + len(axes)
    shape, src = [], iter(x.shape)
    for d in range(nd):
        shape.append(1 if d in axes else next(src))

    def f(*i):
        return x[tuple(i[d] for d in range(nd) if d not in axes)]

    return op_compute("unsqueeze", shape, f, INJECTIVE, axis=list(axes))


expand_dims = unsqueeze


def concat(tensors, axis: int = 0) -> Tensor:
    """numpy.concatenate along `axis`."""
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("concat: tensors must be a non-empty list of tensors")
    for k, t in enumerate(tensors):
        check_tensor("concat", f"tensors[{k}]", t)
    t0 = tensors[0]
    ax = normalize_axis("concat", "axis", axis, t0.ndim)
    for k, t in enumerate(tensors[1:], 1):
        if t.ndim != t0.ndim or t.dtype != t0.dtype:
            raise ValueError(f"concat: tensors[{k}] is {t.ndim}-d {t.dtype}, tensors[0] is "
                             f"{t0.ndim}-d {t0.dtype}")
        for d in range(t0.ndim):
            if d != ax and not dim_equal(t.shape[d], t0.shape[d]):
                raise ValueError(f"concat: tensors[{k}] has shape {dims_of('concat', 'x', t)}"
                                 f", incompatible with {dims_of('concat', 'x', t0)} off "
                                 f"axis {ax}")
    # symbolic extents along the axis too (a growing sequence): offsets are expressions
    sizes = [dims_of("concat", "tensors", t)[ax] for t in tensors]
    offsets = [_total(sizes[:k]) for k in range(len(sizes))]
    shape = list(t0.shape)
    shape[ax] = _total(sizes)

    def f(*i):
        # a select chain from the last input back: the first input whose range holds i[ax]
        def read(k):
            idx = list(i)
            idx[ax] = i[ax] - offsets[k]
            return tensors[k][tuple(idx)]

        v = read(len(tensors) - 1)
        for k in reversed(range(len(tensors) - 1)):
            v = te.select(i[ax] < offsets[k] + sizes[k], read(k), v)
        return v

    return op_compute("concat", shape, f, INJECTIVE, axis=ax)


def _total(sizes):
    out = 0
    for s in sizes:
        out = out + s
    return out if isinstance(out, int) else simplify(out)


def strided_slice(x: Tensor, begin, end, steps=None, axes=None) -> Tensor:
    """ONNX Slice / numpy basic slicing: per listed axis `x[begin:end:step]` with numpy's
    clamping of out-of-range bounds and negative indices, and negative steps."""
    check_tensor("slice", "x", x)
    begin, end = list(begin), list(end)
    if len(begin) != len(end):
        raise ValueError(f"slice: begin and end have different lengths ({begin}, {end})")
    steps = [1] * len(begin) if steps is None else list(steps)
    axes = list(range(len(begin))) if axes is None else list(axes)
    if len(steps) != len(begin) or len(axes) != len(begin):
        raise ValueError("slice: begin, end, steps and axes must have the same length")
    axes = [normalize_axis("slice", "axes", a, x.ndim) for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"slice: axes {axes} repeats an axis")
    src = dims_of("slice", "x", x)
    start = [0] * x.ndim
    step = [1] * x.ndim
    shape = list(src)
    for b, e, st, a in zip(begin, end, steps, axes):
        st = check_int("slice", "steps", st)
        if st == 0:
            raise ValueError("slice: steps must be nonzero")
        b, e = check_int("slice", "begin", b), check_int("slice", "end", e)
        if as_int(src[a]) is None:
            start[a], step[a], shape[a] = _symbolic_slice(a, b, e, st, src[a])
            continue
        lo, hi, stp = slice(b, e, st).indices(src[a])
        n = len(range(lo, hi, stp))
        if n == 0:
            raise ValueError(f"slice: the slice {b}:{e}:{st} of axis {a} (extent {src[a]}) is "
                             "empty; empty tensors are not supported")
        start[a], step[a], shape[a] = lo, stp, n

    def f(*i):
        return x[tuple(start[d] + step[d] * i[d] for d in range(x.ndim))]

    return op_compute("slice", shape, f, INJECTIVE, begin=start, steps=step)


slice_ = strided_slice
SLICE_TO_END = 1 << 31  # an end at least this large means "to the end" (ONNX writes INT64_MAX)


def _symbolic_slice(a: int, b: int, e: int, st: int, n):
    """(start, step, extent) of begin:end:step on an axis of symbolic extent n. numpy clamps
    the bounds to the axis, which needs its extent; here each bound is taken as written (a
    negative end counts from the end, an end >= SLICE_TO_END is the end) and the kernel's entry
    check refuses an axis too short for the reads. Steps and begin must be non-negative: a
    begin counted from the end reads before the axis when it is shorter, which numpy clamps
    (an extent min(n, -begin) that no kernel signature can say)."""
    for what, v in (("step", st), ("begin", b)):
        if v < 0:
            raise ValueError(f"slice: a negative {what} on axis {a} needs a constant extent, got "
                             f"the symbolic extent {n!r}")
    lo = b
    hi = n if e >= SLICE_TO_END else (e if e >= 0 else n + e)
    count = (hi - lo + (st - 1)) // st
    count = simplify(count) if isinstance(count, Expr) else count
    if as_int(count) is not None and as_int(count) <= 0:
        raise ValueError(f"slice: the slice {b}:{e}:{st} of axis {a} (extent {n!r}) is "
                         "empty; empty tensors are not supported")
    return lo, st, (as_int(count) if as_int(count) is not None else count)


def split(x: Tensor, indices_or_sections, axis: int = 0) -> tuple:
    """numpy.split: an int number of equal sections, or a list of split indices."""
    check_tensor("split", "x", x)
    ax = normalize_axis("split", "axis", axis, x.ndim)
    n = static_shape("split", "x", x)[ax]
    if isinstance(indices_or_sections, int) and not isinstance(indices_or_sections, bool):
        k = check_int("split", "indices_or_sections", indices_or_sections, 1)
        if n % k:
            raise ValueError(f"split: axis {ax} of extent {n} does not divide into {k} sections")
        cuts = [n // k * j for j in range(1, k)]
    else:
        cuts = [check_int("split", "indices_or_sections", c) for c in indices_or_sections]
    bounds = [0] + [min(max(c, 0), n) for c in cuts] + [n]
    outs = []
    for j in range(len(bounds) - 1):
        lo, hi = bounds[j], max(bounds[j], bounds[j + 1])
        if hi == lo:
            raise ValueError(f"split: section {j} ({lo}:{hi}) is empty; empty tensors are not "
                             "supported")
        shape = list(x.shape)
        shape[ax] = hi - lo

        def f(*i, lo=lo):
            idx = list(i)
            idx[ax] = i[ax] + lo
            return x[tuple(idx)]

        outs.append(op_compute("split", shape, f, INJECTIVE, name=f"split{j}", axis=ax))
    return tuple(outs)


def pad(x: Tensor, pad_width, mode: str = "constant", constant_value=0) -> Tensor:
    """numpy.pad with pad_width as an int, (before, after), or one (before, after) per axis;
    modes 'constant', 'reflect' (mirror without repeating the edge) and 'edge'."""
    check_tensor("pad", "x", x)
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect' or 'edge', got {mode!r}")
    pw = pad_width
    if isinstance(pw, int):
        pw = [(pw, pw)] * x.ndim
    elif len(pw) == 2 and all(isinstance(v, int) for v in pw):
        pw = [tuple(pw)] * x.ndim
    if len(pw) != x.ndim or any(len(p) != 2 for p in pw):
        raise ValueError(f"pad: pad_width must give (before, after) for each of {x.ndim} axes, "
                         f"got {pad_width!r}")
    pw = [(check_int("pad", "pad_width", b, 0), check_int("pad", "pad_width", a, 0))
          for b, a in pw]
    # an unpadded axis may be symbolic (the batch), and so may one padded with a constant or
    # its edge (MobileBERT's shifted trigram embeddings over a dynamic sequence: the bounds
    # are expressions); reflect needs the extent (its period and the n >= 2 check)
    src = dims_of("pad", "x", x, why="a reflected axis",
                  constant=[d for d, p in enumerate(pw) if p != (0, 0) and mode == "reflect"])
    if mode == "reflect":
        for d, (b, a) in enumerate(pw):
            if (b or a) and src[d] < 2:
                raise ValueError(f"pad: reflect needs extent >= 2 on padded axis {d}")
    shape = [s + b + a if b or a else s for s, (b, a) in zip(src, pw)]
    cval = const(constant_value, x.dtype) if mode == "constant" else None

    def reflect(i, n):
        # numpy reflects repeatedly for pads wider than the axis; the period is 2 (n - 1)
        period = 2 * (n - 1)
        m = i % period if n > 1 else i * 0
        return te.select(m < n, m, period - m)

    def f(*i):
        idx, inside = [], []
        for d, (b, _) in enumerate(pw):
            j = i[d] - b if b else i[d]
            n = src[d]
            if not b and not pw[d][1]:
                idx.append(i[d])
            elif mode == "constant":
                # no clamp: the read sits under the select below, and the code generator masks
                # loads by the condition that selects them, so j outside [0, n) is never read.
                # A clamped index made a row of the pad a gather instead of one contiguous
                # (masked) vector load. (A stage computed at a loop of this one would be asked
                # for the unclamped region: the library's schedules inline or root producers.)
                idx.append(j)
                inside.append(te.all(j >= 0, j < n))
            elif mode == "edge":
                last = const(n - 1) if isinstance(n, int) else n - 1
                idx.append(te.max(te.min(j, last), const(0)))
            else:
                idx.append(reflect(j, n))
        v = x[tuple(idx)]
        if inside:
            v = te.select(te.all(*inside), v, cval)
        return v

    return op_compute("pad", shape, f, INJECTIVE, pad_width=[list(p) for p in pw], mode=mode)


def gather(x: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
    """numpy.take / ONNX Gather: out[a.., j.., b..] = x[a.., indices[j..], b..]. Negative
    indices count from the end; an index out of [-n, n) makes the kernel fail with a
    KernelError naming the read (numpy raises IndexError; a clamped read would be a silently
    wrong answer), from the run-time check that lowering puts on every data-dependent index."""
    check_tensor("gather", "x", x)
    check_tensor("gather", "indices", indices)
    if not dt.is_int(indices.dtype):
        raise ValueError(f"gather: indices must be an integer tensor, got {indices.dtype}")
    ax = normalize_axis("gather", "axis", axis, x.ndim)
    n = x.shape[ax]
    shape = list(x.shape[:ax]) + list(indices.shape) + list(x.shape[ax + 1:])

    def f(*i):
        j = i[ax:ax + indices.ndim]
        k = te.cast(indices[tuple(j)], "int64")
        k = te.select(k < 0, k + n, k)
        return x[tuple(i[:ax]) + (k,) + tuple(i[ax + indices.ndim:])]

    return op_compute("gather", shape, f, INJECTIVE, axis=ax)


take = gather


def expand(x: Tensor, shape) -> Tensor:
    """ONNX Expand: broadcast x against `shape` (numpy rules in both directions)."""
    check_tensor("expand", "x", x)
    shape = tuple(_extent("expand", "shape", s, 1) for s in shape)
    out = broadcast_shapes("expand", x.shape, shape)
    return op_compute("expand", out, lambda *i: x[broadcast_index(x, i)], BROADCAST,
                      target_shape=[as_int(s) if as_int(s) is not None else str(s)
                                    for s in out])


broadcast_to = expand


def arange_like(x: Tensor, start: int = 0, delta: int = 1) -> Tensor:
    """start + delta * i along the 1-D x (ONNX Range whose length is x's: a symbolic one, the
    sequence's); x gives only the length (its values are read under a false condition, so
    that it stays the op's argument)."""
    check_tensor("arange_like", "x", x)
    if x.ndim != 1:
        raise ValueError(f"arange_like: x must be 1-D, got {x.ndim}-D")
    if not dt.is_int(x.dtype):
        raise ValueError(f"arange_like: x must have an integer dtype, got {x.dtype}")
    for arg, v in (("start", start), ("delta", delta)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"arange_like: {arg} must be an int, got {v!r}")
    d = x.dtype
    return op_compute("arange_like", x.shape, lambda i: te.select(
        i < 0, x[i], const(start, d) + const(delta, d) * i.astype(d)), INJECTIVE,
        start=start, delta=delta)

def shape_values(carriers: list[Tensor], values: list, dtype: str = "int64") -> Tensor:
    """A 1-D tensor of integer expressions of shape variables, computed by the kernel from
    the sizes it is called with: the values an exported model computes from its inputs'
    symbolic shapes and then uses as data (GPT-2's position ids, past_len + arange(seq)).
    Every variable must be a dimension of a tensor of ``carriers``, whose sizes the kernel
    receives (their elements are read under a false condition only, so that they stay its
    arguments, as arange_like's)."""
    op = "shape_values"
    if not carriers or not all(isinstance(t, Tensor) for t in carriers):
        raise ValueError(f"{op}: carriers must be a non-empty list of tensors")
    if not values:
        raise ValueError(f"{op}: values must not be empty")
    if not dt.is_int(dtype):
        raise ValueError(f"{op}: dtype must be an integer type, got {dtype}")
    from ..ir.functor import collect_vars

    known = {v for t in carriers for d in t.shape for v in collect_vars(const(0) + d)}
    exprs = [const(v) if isinstance(v, int) else v for v in values]
    missing = sorted({v.name for e in exprs for v in collect_vars(e)} -
                     {v.name for v in known})
    if missing:
        raise ValueError(f"{op}: {', '.join(missing)} is no dimension of the carriers")

    def f(i):
        out = exprs[-1].astype(dtype)
        for k in range(len(exprs) - 2, -1, -1):
            out = te.select(i == k, exprs[k].astype(dtype), out)
        kept = sum((t[(0,) * t.ndim].astype(dtype) for t in carriers[1:]),
                   carriers[0][(0,) * carriers[0].ndim].astype(dtype))
        return te.select(i < 0, kept, out)

    return op_compute(op, (len(exprs),), f, INJECTIVE)


BLOCKED_LAYOUT = re.compile(r"^NCHW(\d+)c$")  # NCHW<x>c


def layout_transform(x: Tensor, src_layout: str, dst_layout: str) -> Tensor:
    """NCHW <-> NCHW[x]c (e.g. "NCHW16c": [N, C/16, H, W, 16]), also NCHW[x]c -> NCHW[y]c.
    Blocking a channel count that the block does not divide pads the last block with zeros;
    unblocking drops the padding."""
    check_tensor("layout_transform", "x", x)

    def parse(layout, arg):
        if layout == "NCHW":
            return None
        m = BLOCKED_LAYOUT.match(layout or "")
        if not m or int(m.group(1)) < 1:
            raise ValueError(f"layout_transform: {arg}={layout!r} is not NCHW or NCHW<x>c")
        return int(m.group(1))

    sb, db = parse(src_layout, "src_layout"), parse(dst_layout, "dst_layout")
    want = 4 if sb is None else 5
    shp = dims_of("layout_transform", "x", x, constant=(1,) if len(x.shape) != 5 else (1, 4),
                  why="the channels and their block")
    if len(shp) != want or (sb is not None and shp[4] != sb):
        raise ValueError(f"layout_transform: x of shape {shp} is not in layout {src_layout}")
    if sb is None:
        n, c, h, w = shp
    else:
        n, c, h, w = shp[0], shp[1] * sb, shp[2], shp[3]

    def read(nn, ch, hh, ww):
        if sb is None:
            return x[nn, ch, hh, ww]
        return x[nn, ch // sb, hh, ww, ch % sb]

    attrs = {"src_layout": src_layout, "dst_layout": dst_layout}
    if db is None:
        return op_compute("layout_transform", (n, c, h, w), lambda a, b, y, z: read(a, b, y, z),
                          INJECTIVE, **attrs)
    nb = -(-c // db)

    def f(a, co, y, z, ci):
        ch = co * db + ci
        v = read(a, te.min(ch, const(c - 1)), y, z)
        return v if nb * db == c else te.select(ch < c, v, const(0, x.dtype))

    return op_compute("layout_transform", (n, nb, h, w, db), f, INJECTIVE, **attrs)


def kernel_layout_transform(w: Tensor, ic_block: int, oc_block: int) -> Tensor:
    """OIHW -> OIHW[i]i[o]o: [O/ob, I/ib, KH, KW, ib, ob], the weight layout conv2d_nchwc reads
    (for each input channel of a block, `ob` consecutive output channels: one vector)."""
    check_tensor("kernel_layout_transform", "w", w)
    o, i, kh, kw = static_shape("kernel_layout_transform", "w", w)
    ib = check_int("kernel_layout_transform", "ic_block", ic_block, 1)
    ob = check_int("kernel_layout_transform", "oc_block", oc_block, 1)
    if i % ib or o % ob:
        raise ValueError(f"kernel_layout_transform: ic_block {ib} / oc_block {ob} must divide "
                         f"the input / output channels ({i}, {o})")
    return op_compute("kernel_layout_transform", (o // ob, i // ib, kh, kw, ib, ob),
                      lambda a, b, y, z, c, d: w[a * ob + d, b * ib + c, y, z], INJECTIVE,
                      ic_block=ib, oc_block=ob)


__all__ = [
    "arange_like",
    "broadcast_to",
    "concat",
    "expand",
    "expand_dims",
    "flatten",
    "gather",
    "kernel_layout_transform",
    "layout_transform",
    "pad",
    "reshape",
    "shape_values",
    "slice_",
    "split",
    "squeeze",
    "strided_slice",
    "take",
    "transpose",
    "unsqueeze",
]
