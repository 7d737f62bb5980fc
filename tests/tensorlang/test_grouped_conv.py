"""Grouped convolution on the oc-blocked path of tensorlang.ops.conv2d_nchw (groups between 1
and the channel count, output channels per group a multiple of 16 or 8): against numpy for
several group counts, strides, paddings and dilations, with packed weights, a fused tail and
an NCHW16c output; the plain path for groups whose channels no block divides; the refusals;
and the simplifier rule the blocked kernel relies on (every oc vector of a register tile reads
its group's input channels at one address)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ops_helpers import check, ph, rand

import tensorlang as tl
from tensorlang.ir import expr as E
from tensorlang.ir.simplify import Analyzer, simplify

ops = tl.ops
TOL = {"rtol": 2e-4, "atol": 2e-4}


def grouped_ref(x, w, stride, pad, dil, groups):
    """numpy: each group a dense convolution of its own channels (float64 accumulation)."""
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = stride, pad, dil
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, _, h, wd = xp.shape
    oc, cpg, kh, kw = w.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    ocpg = oc // groups
    out = np.zeros((n, oc, oh, ow))
    for g in range(groups):
        xs = xp[:, g * cpg:(g + 1) * cpg]
        ws = w[g * ocpg:(g + 1) * ocpg].astype(np.float64)
        for y in range(kh):
            for z in range(kw):
                patch = xs[:, :, y * dh:y * dh + sh * (oh - 1) + 1:sh,
                           z * dw:z * dw + sw * (ow - 1) + 1:sw]
                out[:, g * ocpg:(g + 1) * ocpg] += np.einsum("nchw,oc->nohw", patch,
                                                             ws[:, :, y, z])
    return out.astype(np.float32)


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


def _pad4(p):
    return p if isinstance(p, tuple) else (p, p, p, p)


def _block_stage(out):
    """The conv2d_nchw_block stage `out` reads (None: the plain path)."""
    for t in out.op.input_tensors:
        if t.op.name.endswith("_block") or t.op.tag == "conv2d_nchw_block":
            return t
    return None


# (channels, out channels, groups, kernel, stride, padding, dilation, size): per group
# 16, 32, 8 (a ymm block) and 24 (8-blocks, three per group) output channels
CASES = [
    (8, 32, 2, 3, 1, 1, 1, 9),               # AlexNet-style: 2 groups of 16
    (12, 48, 3, 1, 2, 0, 1, 10),             # 1x1 at stride 2, 3 groups of 16 (at stride 1
    #                                          the pixels path: test_grouped_conv_pixels.py)
    (16, 64, 2, 5, 1, 2, 1, 11),             # 5x5, pad 2, odd width
    (32, 32, 4, 3, 2, 1, 1, 13),             # RegNet-style, stride 2, 8 per group
    (24, 96, 4, 3, (2, 1), (0, 1, 2, 1), (1, 2), 12),  # asymmetric everything, 24 per group
    (64, 32, 4, 3, 1, 1, 1, 7),              # 16 in, 8 out per group
]


@pytest.mark.parametrize("c,oc,g,k,stride,pad,dil,hw", CASES)
def test_grouped_conv_matches_numpy(c, oc, g, k, stride, pad, dil, hw):
    x, w = rand((1, c, hw, hw + 2)), rand((oc, c // g, k, k))
    X, W = ph(x, "X"), ph(w, "W")
    out = ops.conv2d_nchw(X, W, stride=stride, padding=pad, dilation=dil, groups=g)
    assert _block_stage(out) is not None, "a grouped conv with blockable groups is blocked"
    check(out, [X, W], [x, w], grouped_ref(x, w, _pair(stride), _pad4(pad), _pair(dil), g),
          **TOL, both=False)


@pytest.mark.parametrize("g,ob", [(2, 16), (4, 8)])
def test_grouped_conv_prepacked_weights_and_a_fused_tail(g, ob):
    c, oc = 16, 64
    x, w, b = rand((2, c, 8, 9)), rand((oc, c // g, 3, 3)), rand((oc,))
    wp = np.ascontiguousarray(w.reshape(oc // ob, ob, c // g, 3, 3).transpose(0, 2, 3, 4, 1))
    X, WP, B = ph(x, "X"), ph(wp, "W"), ph(b, "B")
    y = ops.relu(ops.add(ops.conv2d_nchw(X, WP, padding=1, groups=g),
                         ops.reshape(B, (oc, 1, 1))))
    ref = np.maximum(grouped_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), g)
                     + b.reshape(oc, 1, 1), 0)
    check(y, [X, WP, B], [x, wp, b], ref, **TOL, both=False)


def test_grouped_conv_writes_nchw16c():
    x, w = rand((1, 8, 10, 10)), rand((64, 4, 3, 3))
    X, W = ph(x, "X"), ph(w, "W")
    y = ops.conv2d_nchw(X, W, padding=1, groups=2, out_layout="NCHW16c")
    ref = grouped_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 2)
    ref = np.ascontiguousarray(ref.reshape(1, 4, 16, 10, 10).transpose(0, 1, 3, 4, 2))
    check(y, [X, W], [x, w], ref, **TOL, both=False)


@pytest.mark.parametrize("oc,g", [(12, 4), (20, 2)])
def test_groups_no_block_divides_take_the_plain_path(oc, g):
    x, w = rand((1, 8, 9, 9)), rand((oc, 8 // g, 3, 3))
    X, W = ph(x, "X"), ph(w, "W")
    out = ops.conv2d_nchw(X, W, padding=1, groups=g)
    assert _block_stage(out) is None
    check(out, [X, W], [x, w], grouped_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1), g), **TOL,
          both=False)


def test_grouped_conv_refusals():
    X = tl.placeholder((1, 8, 9, 9), name="X")
    # blocks of 16 would straddle the two groups of 8 output channels
    WP = tl.placeholder((1, 4, 3, 3, 16), name="W")
    with pytest.raises(ValueError, match="divide the 8 output channels of each of the 2 groups"):
        ops.conv2d_nchw(X, WP, groups=2)
    W = tl.placeholder((12, 2, 3, 3), name="W")
    with pytest.raises(ValueError, match="out_layout must be 'NCHW' or"):
        ops.conv2d_nchw(X, W, groups=4, out_layout="NCHW16c")
    with pytest.raises(ValueError, match="not divisible by groups=3"):
        ops.conv2d_nchw(X, tl.placeholder((12, 3, 3, 3), name="W"), groups=3)


def test_the_blocked_tile_shares_one_input_read_per_column():
    """Both oc vectors of a 2-vector tile read the same input address (the group's), so one
    broadcast feeds both FMAs: the index of vector v of tile t is (2t + v) // 8, which the
    simplifier reduces to t // 4 for v = 0 and 1."""
    X = tl.placeholder((1, 96, 27, 27), name="X")
    W = tl.placeholder((16, 48, 5, 5, 16), name="W")
    y = ops.conv2d_nchw(X, W, padding=2, groups=2)
    text = str(tl.lower(ops.default_schedule(y), [X, W, y]))
    reads = {line.split("broadcast(X[")[1].split("]")[0] for line in text.splitlines()
             if "broadcast(X[" in line and "+ 19200" in line}
    plain = {line.split("broadcast(X[")[1].split("]")[0] for line in text.splitlines()
             if "broadcast(X[" in line and "+ 19200" not in line}
    assert reads and reads <= plain


@pytest.mark.parametrize("coef,const,div", [(2, 1, 8), (4, 3, 8), (6, 5, 12), (3, -1, 9),
                                            (2, 0, 8), (4, -3, 8)])
def test_floordiv_by_a_multiple_of_the_coefficients_gcd(coef, const, div):
    """(g*A + r) // (g*m) == (A + r // g) // m: checked against Python's floor division for
    negative and positive values of the variables."""
    a, b = E.Var("a", "int32"), E.Var("b", "int32")
    e = E.FloorDiv(a * coef + b * (2 * coef) + const, E.const(div, "int32"))
    s = simplify(e, Analyzer())
    for va in range(-20, 21):
        for vb in (-3, 0, 2):
            got = _eval(s, {a: va, b: vb})
            assert got == (coef * va + 2 * coef * vb + const) // div, (s, va, vb)


def _eval(e, env):
    t = type(e)
    if t is E.Var:
        return env[e]
    if t is E.Const:
        return int(e.value)
    ops_ = {E.Add: lambda x, y: x + y, E.Sub: lambda x, y: x - y, E.Mul: lambda x, y: x * y,
            E.FloorDiv: lambda x, y: x // y, E.FloorMod: lambda x, y: x % y}
    return ops_[t](_eval(e.a, env), _eval(e.b, env))
