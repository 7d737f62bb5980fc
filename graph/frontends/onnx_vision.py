"""ONNX import of the vision operators (issue 18): Resize (opsets 10, 11, 13, 18, 19) and the
older Upsample (1 at opset 6, 7, 9). The converters register themselves in ``onnx.CONVERTERS`` when
``onnx.py`` imports this module. An attribute value the node's opset does not define, or
inputs that do not fit, is an :class:`OnnxImportError` naming the node, the op and the opset."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from tensorlang.ops.conv_transpose import output_length, transpose_geometry

from .. import symbolic as S
from .onnx_context import REFUSED_VERSIONS, _conv, refuse


def _choice(c, a: dict, name: str, default: str, allowed) -> str:
    v = a.get(name, default)
    if v not in allowed:
        raise refuse(c, f"{name}={v!r} is not one of {', '.join(allowed)}")
    return v


def _floats(c, v, what: str) -> list[float] | None:
    """A constant float input as a list; None when absent or empty."""
    if v is None:
        return None
    arr = _numbers(c, c.const_array(v, what), what)
    return None if arr.size == 0 else [float(t) for t in np.asarray(arr).reshape(-1)]


def _lengths(c, v, what: str) -> list | None:
    """Resize's sizes as ints and, computed from symbolic shapes (Shape -> Slice -> Concat:
    resize to another tensor's size, as FPN, UNet and SegFormer decoders do), expressions."""
    if v is None:
        return None
    arr = c.const_array(v, what)
    return None if arr.size == 0 else [S.dim(t) for t in np.asarray(arr).reshape(-1)]


def _numbers(c, arr: np.ndarray, what: str) -> np.ndarray:
    """``arr`` when it holds numbers; a shape tensor still holding symbolic dimensions (scales
    computed from sizes) is refused naming the node (was a TypeError from float())."""
    if arr.dtype == object and not all(isinstance(t, int) for t in arr.reshape(-1)):
        raise refuse(c, f"{what} depend on symbolic dimensions "
                        f"({', '.join(map(str, arr.reshape(-1)))}), which is not supported; "
                        "give the inputs' sizes (from_onnx(model, shapes=...))")
    return arr


# ---------------------------------------------------------------------------- Resize / Upsample


def _coordinate_modes(opset: int) -> tuple:
    modes = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
             "tf_crop_and_resize"]
    if opset == 11:
        modes.append("tf_half_pixel_for_nn")
    if opset >= 19:
        modes.append("half_pixel_symmetric")
    return tuple(modes)


def _legacy_resize(c, x, a: dict, scales) -> dict:
    """Upsample (7, 9) and Resize-10: scales only, asymmetric coordinates, onnxruntime's
    'simple' nearest rounding."""
    mode = _choice(c, a, "mode", "nearest", ("nearest", "linear"))
    if scales is None or len(scales) != len(x.shape):
        raise refuse(c, f"scales must give one scale per axis of the {len(x.shape)}-D input, "
                        f"got {scales}")
    return {"mode": mode, "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "simple", "scales": scales, "sizes": _sizes_of(c, x, scales)}


def _sizes_of(c, x, scales) -> list:
    """ONNX's output lengths floor(input * scale) (the float32 scales in float64); of a
    symbolic length, an expression (_scaled_length)."""
    if any(not s > 0 for s in scales):
        raise refuse(c, f"scales {scales} must all be positive")
    sizes = [_scaled_length(c, n, s) if S.is_symbolic(n) else
             int(np.floor(n * np.float64(np.float32(s)))) for n, s in zip(x.shape, scales)]
    if min((v for v in sizes if not S.is_symbolic(v)), default=1) < 1:
        raise refuse(c, f"scales {scales} give an empty output for input {list(x.shape)}")
    return sizes


# a symbolic length times a scale p / 2**k (float32) is exact below 2**24 // p: onnxruntime's
# float32 product then floors as the integer formula (n * p) // 2**k does, for lengths
# up to 65536 when p <= 256 (2.0, 0.5, 1.5, 0.25, ... are p <= 3)
_MAX_SCALE_NUMERATOR = 256


def _scaled_length(c, n, scale):
    """floor(n * scale) of a symbolic length n as an integer expression."""
    f = Fraction(float(np.float32(scale)))
    if f.numerator > _MAX_SCALE_NUMERATOR:
        shown = np.format_float_positional(np.float32(scale))
        raise refuse(c, f"scale {shown} over the symbolic length {S.dim_text(n)}: the output "
                        "length floor(length * scale) is exact at every size only for a scale "
                        f"p / 2**k with p <= {_MAX_SCALE_NUMERATOR} (2, 0.5, 1.5, ...); give "
                        "sizes, or the inputs' sizes (from_onnx(model, shapes=...))")
    return S.dim((n * f.numerator) // f.denominator)


def _full_axes(c, a: dict, rank: int) -> list[int]:
    axes = a.get("axes")
    if axes is None:
        return list(range(rank))
    if c.opset < 18:
        raise refuse(c, "the axes attribute needs opset 18 or later")
    out = [int(v) + rank if int(v) < 0 else int(v) for v in axes]
    if any(not 0 <= v < rank for v in out) or len(set(out)) != len(out):
        raise refuse(c, f"axes {list(axes)} must be distinct axes of a rank-{rank} input")
    return out


def _spread(values, axes, rank: int, fill) -> list:
    """Per-axis values given for ``axes`` only, filled in for the other axes."""
    full = list(fill)
    for v, ax in zip(values, axes):
        full[ax] = v
    return full


def _aspect_sizes(c, x, sizes, axes, policy: str):
    """keep_aspect_ratio_policy not_larger / not_smaller: one scale for the listed axes."""
    ratios = [sizes[ax] / x.shape[ax] for ax in axes]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    scales = [scale if ax in axes else 1.0 for ax in range(len(x.shape))]
    sizes = [int(scale * n + 0.5) if ax in axes else n for ax, n in enumerate(x.shape)]
    return scales, sizes


def _scales_or_sizes(c, x, ins, a: dict, axes) -> tuple[list, list]:
    rank = len(x.shape)
    scales = _floats(c, ins[2] if len(ins) > 2 else None, "Resize scales")
    sizes = _lengths(c, ins[3] if len(ins) > 3 else None, "Resize sizes")
    if (scales is None) == (sizes is None):
        raise refuse(c, "exactly one of scales and sizes must be given (non-empty)")
    given = scales if sizes is None else sizes
    if len(given) != len(axes):
        raise refuse(c, f"{'scales' if sizes is None else 'sizes'} {given} must have one entry "
                        f"per resized axis ({len(axes)})")
    policy = _choice(c, a, "keep_aspect_ratio_policy", "stretch",
                     ("stretch", "not_larger", "not_smaller"))
    if sizes is None:
        scales = _spread(scales, axes, rank, [1.0] * rank)
        return scales, _sizes_of(c, x, scales)
    sizes = _spread(sizes, axes, rank, x.shape)
    if min((v for v in sizes if not S.is_symbolic(v)), default=1) < 1:
        raise refuse(c, f"sizes {given} must be positive")
    symbolic = any(S.is_symbolic(v) for v in list(sizes) + list(x.shape))
    if policy != "stretch" and symbolic:
        raise refuse(c, f"keep_aspect_ratio_policy={policy!r} over symbolic lengths (input "
                        f"{_text(x.shape)}, sizes {_text(sizes)}) is not supported; give the "
                        "inputs' sizes (from_onnx(model, shapes=...))")
    if policy != "stretch":
        return _aspect_sizes(c, x, sizes, axes, policy)
    # a symbolic axis's scale is output / input, computed by the kernel (None)
    return [None if S.is_symbolic(m) or S.is_symbolic(n) else m / n
            for m, n in zip(sizes, x.shape)], sizes


def _text(shape) -> str:
    return f"[{', '.join(S.dim_text(d) for d in shape)}]"


def _resize_roi(c, x, ins, axes) -> list[float]:
    roi = _floats(c, ins[1] if len(ins) > 1 else None, "Resize roi")
    if roi is None or len(roi) != 2 * len(axes):
        raise refuse(c, f"tf_crop_and_resize needs roi with {2 * len(axes)} entries (starts "
                        f"then ends of the resized axes), got {roi}")
    rank = len(x.shape)
    k = len(axes)
    return (_spread(roi[:k], axes, rank, [0.0] * rank) +
            _spread(roi[k:], axes, rank, [1.0] * rank))


def _resize_attrs(c, x, ins, a: dict) -> dict:
    """Resize 11 and later."""
    mode = _choice(c, a, "mode", "nearest", ("nearest", "linear", "cubic"))
    ctm = _choice(c, a, "coordinate_transformation_mode", "half_pixel",
                  _coordinate_modes(c.opset))
    out = {"mode": mode, "coordinate_transformation_mode": ctm,
           "nearest_mode": _choice(c, a, "nearest_mode", "round_prefer_floor",
                                   ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")),
           "cubic_coeff_a": float(a.get("cubic_coeff_a", -0.75)),
           "exclude_outside": int(a.get("exclude_outside", 0)),
           "extrapolation_value": float(a.get("extrapolation_value", 0.0)),
           "antialias": int(a.get("antialias", 0))}
    if out["exclude_outside"] not in (0, 1) or out["antialias"] not in (0, 1):
        raise refuse(c, "exclude_outside and antialias must be 0 or 1")
    if out["antialias"] and c.opset < 18:
        raise refuse(c, "antialias needs opset 18 or later")
    if out["antialias"] and mode == "nearest":
        # ONNX defines the antialiasing filter for linear and cubic only (onnxruntime and
        # onnx's reference refuse it too)
        raise refuse(c, "antialias applies to linear and cubic, not nearest")
    if c.opset < 18 and "keep_aspect_ratio_policy" in a:
        raise refuse(c, "keep_aspect_ratio_policy needs opset 18 or later")
    axes = _full_axes(c, a, len(x.shape))
    out["scales"], out["sizes"] = _scales_or_sizes(c, x, ins, a, axes)
    if ctm == "tf_crop_and_resize":
        out["roi"] = _resize_roi(c, x, ins, axes)
    return out


def _upsample_scales(c, x, ins, a: dict):
    """Upsample-1 (opset 6): height_scale/width_scale of NCHW; 7: the scales attribute;
    9 (and the deprecated 10): the scales input."""
    if c.opset < 7:
        if "height_scale" not in a or "width_scale" not in a or len(x.shape) != 4:
            raise refuse(c, "Upsample-1 needs height_scale and width_scale of a 4-D input")
        return [1.0, 1.0, float(a["height_scale"]), float(a["width_scale"])]
    if c.opset < 9:
        return None if a.get("scales") is None else [float(s) for s in a["scales"]]
    return _floats(c, ins[1] if len(ins) > 1 else None, "Upsample scales")


@_conv("Resize", "Upsample")
def _resize(c, ins, a):
    x = ins[0]
    if c.op_type == "Upsample":
        if a.get("mode") == "bilinear" and c.opset < 7:
            a = dict(a, mode="linear")
        attrs = _legacy_resize(c, x, a, _upsample_scales(c, x, ins, a))
        if min(attrs["scales"]) < 1:
            raise refuse(c, f"Upsample scales {attrs['scales']} must all be >= 1")
    elif c.opset < 11:
        attrs = _legacy_resize(c, x, a, _floats(c, ins[1], "Resize scales"))
    else:
        attrs = _resize_attrs(c, x, ins, a)
    if np.dtype(x.dtype) == np.bool_:
        raise refuse(c, "bool data cannot be resized")
    return [c.op("resize", [x], **attrs)]


# ---------------------------------------------------------------------------- ConvTranspose


def _ct_pads(c, a: dict, in_sp, ks, st, dil, outp) -> tuple[list, list]:
    """(pads begin, pads end net of output_padding) from pads, auto_pad or output_shape (ONNX's
    equations; output_shape overrides pads, and auto_pad SAME_* asks for input * stride): the
    output is stride * (n - 1) + (k - 1) * dilation + 1 - begin - end long, and both are
    constants over a symbolic n too (SAME_*'s total padding does not depend on n)."""
    nsp = len(ks)
    full = [S.dim(s * (n - 1) + p + (k - 1) * d + 1)
            for n, k, s, d, p in zip(in_sp, ks, st, dil, outp)]
    mode = a.get("auto_pad", "NOTSET")
    if mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise refuse(c, f"auto_pad={mode!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    shape = a.get("output_shape")
    if shape is not None:
        shape = list(shape)[-nsp:] if len(shape) in (nsp, nsp + 2) else None
        if shape is None:
            raise refuse(c, f"output_shape {list(a['output_shape'])} must give the {nsp} "
                            "spatial lengths")
        if not S.is_static(in_sp):
            raise refuse(c, f"output_shape {list(a['output_shape'])} over the symbolic input "
                            f"lengths {[S.dim_text(n) for n in in_sp]}: its pads would depend "
                            "on the sizes (give the inputs' sizes, shapes=)")
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        shape = [S.dim(n * s) for n, s in zip(in_sp, st)]
    if shape is None:
        pads = [0] * (2 * nsp) if mode == "VALID" else list(a.get("pads", [0] * (2 * nsp)))
        if len(pads) != 2 * nsp:
            raise refuse(c, f"pads {pads} must have {2 * nsp} entries")
        return pads[:nsp], [pads[nsp + d] - outp[d] for d in range(nsp)]
    total = [S.dim(f - o) for f, o in zip(full, shape)]  # ints, as said above
    if mode == "SAME_UPPER":
        begin = [t // 2 for t in total]
    else:
        begin = [t - t // 2 for t in total]
    return begin, [t - b - p for t, b, p in zip(total, begin, outp)]


def _ct_bias(c, b, groups: int, phases: int):
    """The bias per channel of the equivalent conv ((group, phase, channel)), when constant."""
    data = c.const_array(b, "ConvTranspose bias")
    ocg = data.shape[0] // groups
    tiled = np.broadcast_to(data.reshape(groups, 1, ocg), (groups, phases, ocg))
    return c.b.const(np.ascontiguousarray(tiled.reshape(-1)), name=f"{c.node_name}_bias")


def _ct_attrs(c, x, w, a: dict):
    nsp = len(x.shape) - 2
    if nsp < 1 or len(w.shape) != nsp + 2:
        raise refuse(c, f"input {list(x.shape)} and weight {list(w.shape)} must have the same "
                        "rank, at least 3")
    ks = list(w.shape[2:])
    if "kernel_shape" in a and list(a["kernel_shape"]) != ks:
        raise refuse(c, f"kernel_shape {list(a['kernel_shape'])} does not match the weight "
                        f"{list(w.shape)}")
    st = list(a.get("strides", [1] * nsp))
    dil = list(a.get("dilations", [1] * nsp))
    outp = list(a.get("output_padding", [0] * nsp))
    g = int(a.get("group", 1))
    if len(st) != nsp or len(dil) != nsp or len(outp) != nsp or min(st + dil) < 1 or g < 1:
        raise refuse(c, f"strides {st}, dilations {dil}, output_padding {outp} must have {nsp} "
                        "positive entries (output_padding >= 0), group >= 1")
    for p, s, d in zip(outp, st, dil):
        if p < 0 or (p >= s and p >= d):
            raise refuse(c, f"output_padding {outp} must be smaller than the stride or the "
                            f"dilation ({st}, {dil})")
    if x.shape[1] != w.shape[0] or x.shape[1] % g:
        raise refuse(c, f"input has {x.shape[1]} channels, weight {list(w.shape)} expects "
                        f"{w.shape[0]} (divisible by group={g})")
    begin, end = _ct_pads(c, a, x.shape[2:], ks, st, dil, outp)
    outs = [S.dim(output_length(n, k, s, d, b, e, 0))
            for n, k, s, d, b, e in zip(x.shape[2:], ks, st, dil, begin, end)]
    if any(not S.is_symbolic(n) and n < 1 for n in outs):
        # (over a symbolic length the runtime refuses the sizes that give one < 1)
        raise refuse(c, f"the output would be empty (lengths {outs})")
    return nsp, ks, st, dil, g, begin, end


@_conv("ConvTranspose")
def _conv_transpose(c, ins, a):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    _, ks, st, dil, g, begin, end = _ct_attrs(c, x, w, a)
    return [_transposed_conv(c, x, w, b, ks, st, dil, g, begin, end)]


def _transposed_conv(c, x, w, b, ks, st, dil, g, begin, end):
    """ConvTranspose as a conv over the input and an interleave of its stride phases."""
    nsp = len(ks)
    geo = [transpose_geometry(ks[d], st[d], dil[d], begin[d], end[d]) for d in range(nsp)]
    w2 = c.op("conv_transpose_weight", [w], strides=st, dilations=dil, groups=g)
    phases = int(np.prod(st))
    conv_in = [x, w2]
    if b is not None and b.is_constant:
        conv_in.append(_ct_bias(c, b, g, phases))
    y = c.op("conv", conv_in, strides=[1] * nsp, dilations=[1] * nsp, groups=g,
             pads=[t.conv_pad[0] for t in geo] + [t.conv_pad[1] for t in geo])
    y = c.op("conv_transpose_interleave", [y], strides=st, shifts=[t.shift for t in geo],
             ends=[t.end for t in geo], groups=g)
    if b is not None and not b.is_constant:
        vec = c.op("reshape", [b], shape=[b.shape[0]] + [1] * nsp)
        y = c.op("add", [y, vec])
    return y


@_conv("Col2Im")
def _col2im(c, ins, a):
    """Col2Im (torch's F.fold: timm's VOLO) sums each column's block back into the image: a
    ConvTranspose of the columns laid out as [N, C * block, blocks...] whose weight, grouped per
    channel, is one-hot (column entry t of a block lands on tap t)."""
    x = ins[0]
    image, block = ([int(v) for v in _numbers(c, c.const_array(v, what), what).reshape(-1)]
                    for v, what in ((ins[1], "image_shape"), (ins[2], "block_shape")))
    nsp = len(image)
    dil = list(a.get("dilations", [1] * nsp))
    st = list(a.get("strides", [1] * nsp))
    pads = list(a.get("pads", [0] * (2 * nsp)))
    if len(block) != nsp or len(dil) != nsp or len(st) != nsp or len(pads) != 2 * nsp or \
            min(block + dil + st) < 1 or min(pads) < 0:
        raise refuse(c, f"image_shape {image}, block_shape {block}, dilations {dil}, strides "
                        f"{st}, pads {pads} must agree in length ({nsp} spatial axes; pads "
                        f"{2 * nsp}), positive (pads >= 0)")
    taps = int(np.prod(block))
    counts = [(n + pads[d] + pads[nsp + d] - dil[d] * (block[d] - 1) - 1) // st[d] + 1
              for d, n in enumerate(image)]
    if len(x.shape) != 3 or not isinstance(x.shape[1], int) or x.shape[1] % taps or \
            min(counts) < 1 or x.shape[2] != int(np.prod(counts)):
        raise refuse(c, f"input {list(x.shape)} must be [N, C * {taps}, {int(np.prod(counts))}]"
                        f" (C * prod(block_shape {block}), the {counts} blocks that fit the "
                        f"padded image {image})")
    channels = x.shape[1] // taps
    cols = c.op("reshape", [x], shape=[x.shape[0], x.shape[1], *counts])
    onehot = np.zeros((channels, taps, 1, taps), x.dtype)
    onehot[:, np.arange(taps), 0, np.arange(taps)] = 1
    w = c.b.const(onehot.reshape(channels * taps, 1, *block), name=f"{c.node_name}_onehot")
    # the blocks cover the image but a remainder under one stride at each end (no block
    # reaches it): a shorter end pad gives the transposed conv the image's length
    short = [image[d] + pads[d] + pads[nsp + d] - (st[d] * (counts[d] - 1)
                                                    + dil[d] * (block[d] - 1) + 1)
             for d in range(nsp)]
    end = [pads[nsp + d] - short[d] for d in range(nsp)]
    return [_transposed_conv(c, cols, w, None, block, st, dil, channels, pads[:nsp], end)]


# ---------------------------------------------------------------------------- GatherND, ScatterND


def _int_indices(c, v):
    if not np.issubdtype(np.dtype(v.dtype), np.integer):
        raise refuse(c, f"indices must be an integer tensor, got {v.dtype}")


@_conv("GatherElements")
def _gather_elements(c, ins, a):
    data, idx = ins[0], ins[1]
    _int_indices(c, idx)
    r, ax = len(data.shape), int(a.get("axis", 0))
    if len(idx.shape) != r or not -r <= ax < r or any(
            isinstance(i, int) and isinstance(d, int) and i > d
            for j, (i, d) in enumerate(zip(idx.shape, data.shape)) if j != ax % r):
        raise refuse(c, f"indices {list(idx.shape)} do not fit data {list(data.shape)} along "
                        f"axis {ax} (the same rank, at most data's extent on every other axis)")
    return [c.op("gather_elements", [data, idx], axis=ax % r)]


@_conv("GatherND")
def _gather_nd(c, ins, a):
    data, idx = ins[0], ins[1]
    _int_indices(c, idx)
    b = int(a.get("batch_dims", 0))
    if b and c.opset < 12:
        raise refuse(c, "batch_dims needs opset 12 or later")
    k = idx.shape[-1] if idx.shape else 0
    if not idx.shape or not 0 <= b < min(len(idx.shape), len(data.shape)) or \
            not 1 <= k <= len(data.shape) - b or tuple(idx.shape[:b]) != tuple(data.shape[:b]):
        raise refuse(c, f"indices {list(idx.shape)} with batch_dims={b} do not fit data "
                        f"{list(data.shape)} (index tuples of 1 to rank - batch_dims, the "
                        "batch axes equal)")
    return [c.op("gather_nd", [data, idx], batch_dims=b)]


def _scatter_reductions(opset: int) -> tuple:
    if opset >= 18:
        return ("none", "add", "mul", "max", "min")
    return ("none", "add", "mul") if opset >= 16 else ("none",)


@_conv("ScatterND")
def _scatter_nd(c, ins, a):
    data, idx, upd = ins[0], ins[1], ins[2]
    _int_indices(c, idx)
    red = _choice(c, a, "reduction", "none", _scatter_reductions(c.opset))
    k = idx.shape[-1] if idx.shape else 0
    want = tuple(idx.shape[:-1]) + tuple(data.shape[k:])
    if not 1 <= k <= len(data.shape) or tuple(upd.shape) != want:
        raise refuse(c, f"updates {list(upd.shape)} must have shape indices.shape[:-1] + "
                        f"data.shape[k:] = {list(want)} (indices {list(idx.shape)}, data "
                        f"{list(data.shape)})")
    if np.dtype(upd.dtype) != np.dtype(data.dtype):
        raise refuse(c, f"updates are {upd.dtype}, data {data.dtype}")
    if idx.is_constant and not (data.is_constant and upd.is_constant):
        return [_scatter_nd_planned(c, data, idx, upd, red)]
    return [c.op("scatter_nd", [data, idx, upd], reduction=red)]


def _scatter_nd_planned(c, data, idx, upd, red: str):
    """Indices known at build time: a regular grid of index tuples (an exported slice
    assignment) is a select over the output; other indices have the updates of each cell
    listed now, so each output element reads its own few (O(output) instead of O(cells x
    updates)); an index out of range is refused here."""
    from tensorlang.ops.indexing import scatter_nd_box, scatter_nd_plan

    box = scatter_nd_box(idx.data, data.shape)
    if box is not None:  # a slice assignment: a select over the output, no table
        return c.op("scatter_nd_boxed", [data, upd], starts=box[0], steps=box[1],
                    reduction=red)
    try:
        plan = scatter_nd_plan(idx.data, data.shape, red)
    except IndexError as e:
        raise refuse(c, str(e)) from None
    k = idx.shape[-1]
    count = int(np.prod(idx.shape[:-1]))
    flat = c.op("reshape", [upd], shape=[count] + list(data.shape[k:]))
    return c.op("scatter_nd_planned", [data, c.b.const(plan, name=f"{c.node_name}_plan"), flat],
                reduction=red)


REFUSED_VERSIONS["Scatter"] = {11: "deprecated: ScatterElements replaces it"}


@_conv("ScatterElements", "Scatter")
def _scatter_elements(c, ins, a):
    """ScatterND of every update at its element's full index (i_0, .., indices[i], ..,
    i_r-1): the same kernels (indices known at build time planned, run-time ones checked and
    wrapped there). Scatter is ScatterElements' name at opsets 9 and 10."""
    if c.op_type == "Scatter" and c.opset >= 11:
        raise refuse(c, "Scatter is deprecated from opset 11 (ScatterElements replaces it)")
    data, idx, upd = ins[0], ins[1], ins[2]
    _int_indices(c, idx)
    red = _choice(c, a, "reduction", "none", _scatter_reductions(c.opset))
    r, ax = len(data.shape), int(a.get("axis", 0))
    if len(idx.shape) != r or not -r <= ax < r or tuple(upd.shape) != tuple(idx.shape) or any(
            isinstance(i, int) and isinstance(d, int) and i > d
            for j, (i, d) in enumerate(zip(idx.shape, data.shape)) if j != ax % r):
        raise refuse(c, f"indices {list(idx.shape)} and updates {list(upd.shape)} do not fit "
                        f"data {list(data.shape)} along axis {ax} (the same shape and rank, "
                        "at most data's extent on every other axis)")
    if not all(isinstance(d, int) for d in idx.shape):
        raise refuse(c, f"indices need a fixed shape, got {list(idx.shape)}")
    if np.dtype(upd.dtype) != np.dtype(data.dtype):
        raise refuse(c, f"updates are {upd.dtype}, data {data.dtype}")
    full = _full_indices(c, idx, ax % r)
    if idx.is_constant and not (data.is_constant and upd.is_constant):
        return [_scatter_nd_planned(c, data, full, upd, red)]
    return [c.op("scatter_nd", [data, full, upd], reduction=red)]


def _full_indices(c, idx, axis: int):
    """[*indices.shape, r]: each element's index tuple, indices[i] in place of i_axis (a
    constant when the indices are one, else a concat of the run-time indices with the other
    axes' constant positions)."""
    shape, r = tuple(idx.shape), len(idx.shape)
    grid = np.stack(np.indices(shape), axis=-1).astype(np.dtype(idx.dtype))
    if idx.is_constant:
        grid[..., axis] = np.asarray(idx.data)
        return c.b.const(grid, name=f"{c.node_name}_indices")
    col = c.op("reshape", [idx], shape=[*shape, 1])
    parts = [col if j == axis else c.b.const(np.ascontiguousarray(grid[..., j:j + 1]),
                                             name=f"{c.node_name}_axis{j}")
             for j in range(r)]
    return c.op("concat", parts, axis=r) if r > 1 else col


# ---------------------------------------------------------------------------- SpaceToDepth, Trilu,
# GroupNormalization


# GridSample's interpolation modes: opset 16's names, then 20's
_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
               "nearest": "nearest"}


@_conv("GridSample")
def _grid_sample(c, ins, a):
    x, grid = ins[0], ins[1]
    mode = _text(a.get("mode", "bilinear" if c.opset < 20 else "linear"))
    names = ("bilinear", "nearest", "bicubic") if c.opset < 20 else ("linear", "nearest", "cubic")
    if mode not in names:
        raise refuse(c, f"mode {mode!r} is not one of {', '.join(names)} (opset {c.opset})")
    padding = _text(a.get("padding_mode", "zeros"))
    if padding not in ("zeros", "border", "reflection"):
        raise refuse(c, f"padding_mode {padding!r} is not zeros, border or reflection")
    if len(x.shape) != 4:
        raise refuse(c, f"only 4-D input (N, C, H, W) is supported, got {x.type_str()}"
                        + (" (volumetric sampling is not)" if len(x.shape) == 5 else ""))
    return [c.op("grid_sample", [x, grid], mode=_GRID_MODES[mode], padding_mode=padding,
                 align_corners=int(a.get("align_corners", 0)))]


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


@_conv("SpaceToDepth")
def _space_to_depth(c, ins, a):
    x = ins[0]
    b = int(a.get("blocksize", 0))
    if b < 1 or len(x.shape) != 4 or x.shape[2] % b or x.shape[3] % b:
        raise refuse(c, f"blocksize={b} must be >= 1 and divide H and W of the 4-D input "
                        f"{list(x.shape)}")
    mode = a.get("mode", "DCR")  # an attribute from opset 28 on (DCR before)
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("DCR", "CRD"):
        raise refuse(c, f"mode must be 'DCR' or 'CRD', got {mode!r}")
    return [c.op("space_to_depth", [x], blocksize=b, mode=mode)]


@_conv("Trilu")
def _trilu(c, ins, a):
    x = ins[0]
    if len(x.shape) < 2:
        raise refuse(c, f"the input {list(x.shape)} must have rank >= 2")
    upper = int(a.get("upper", 1))
    if upper not in (0, 1):
        raise refuse(c, f"upper={upper} must be 0 or 1")
    k = 0
    if len(ins) > 1 and ins[1] is not None:
        kv = c.const_array(ins[1], "Trilu k")
        if kv.size != 1 or not np.issubdtype(kv.dtype, np.integer):
            raise refuse(c, f"k must be one integer, got {kv.dtype} of shape {list(kv.shape)}")
        k = int(kv.reshape(-1)[0])
    # a diagonal beyond the matrix keeps all or nothing: clamped, the same result
    k = max(min(k, x.shape[-1]), -x.shape[-2])
    return [c.op("trilu", [x], k=k, upper=upper)]


_STASH = {1: "float32", 11: "float64"}  # ONNX TensorProto FLOAT, DOUBLE


def _per_channel(c, v, groups: int, channels: int):
    """GroupNormalization-18's scale/bias per group -> per channel."""
    if v.is_constant:
        return c.b.const(np.repeat(v.data, channels // groups), name=f"{c.node_name}_affine")
    v = c.op("reshape", [v], shape=[groups, 1])
    v = c.op("expand", [v], shape=[groups, channels // groups])
    return c.op("reshape", [v], shape=[channels])


@_conv("GroupNormalization")
def _group_norm(c, ins, a):
    x, scale, bias = ins[0], ins[1], ins[2]
    if "num_groups" not in a:
        raise refuse(c, "the num_groups attribute is required")
    g = int(a["num_groups"])
    if len(x.shape) < 2 or g < 1 or x.shape[1] % g:
        channels = x.shape[1] if len(x.shape) > 1 else 0
        raise refuse(c, f"num_groups={g} must be >= 1 and divide the {channels} channels of "
                        f"{list(x.shape)}")
    stash = int(a.get("stash_type", 1))
    if c.opset < 21 and "stash_type" in a:
        raise refuse(c, "stash_type needs opset 21 or later")
    if stash not in _STASH:
        raise refuse(c, f"stash_type={stash} is not FLOAT (1) or DOUBLE (11)")
    want = (g,) if c.opset < 21 else (x.shape[1],)
    for name, v in (("scale", scale), ("bias", bias)):
        if tuple(v.shape) != want:
            raise refuse(c, f"{name} {list(v.shape)} must have shape {list(want)} (one per "
                            f"{'group' if c.opset < 21 else 'channel'} at opset {c.opset})")
    if c.opset < 21:
        scale, bias = (_per_channel(c, v, g, x.shape[1]) for v in (scale, bias))
    dtype = np.dtype(x.dtype).name
    compute = _STASH[stash] if c.opset >= 21 and dtype != "float64" else dtype
    if g == x.shape[1] and compute == dtype:
        # a group per channel is InstanceNormalization, whose kernel streams each row once
        # (wav2vec2's first GroupNorm, 512 channels x 3199 steps: 4.8 -> 1.1 ms, one thread)
        return [c.op("instance_norm", [x, scale, bias], epsilon=float(a.get("epsilon", 1e-5)))]
    return [c.op("group_norm", [x, scale, bias], num_groups=g,
                 epsilon=float(a.get("epsilon", 1e-5)), compute_dtype=compute)]
