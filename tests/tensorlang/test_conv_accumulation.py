"""Float32 accumulation error of the direct convolutions against a float64 numpy reference.

A serial float32 sum of n terms errs by about sqrt(n / 2) roundings of its result, and deep
nets amplify that (FCN-ResNet50 with random weights carried its first conv's rounding, 4.9e-7
relative, to 8e-5 at its output). The blocked conv schedules therefore sum a register tile in
chunks of at most ``chain`` terms and add the chunks (``_chunked_reduction``). Each test
measures the error of the default schedule and of one serial chain (chain=0) on the same data:
the tolerance lies between the two measured errors (seeds 0-2: chunked 1.2-3.1e-7, serial
4.2e-7-2.8e-6), so the test fails on the serial schedule.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ops
from tensorlang.ops import schedule as S

# built kernels by (test, schedule): the seeds of a test run the same kernels on other data
_BUILT: dict = {}


def _run(key, schedule, out, args, arrays):
    f = _BUILT.get(key)
    if f is None:
        s = tl.create_schedule(out)
        schedule(s, out)
        f = _BUILT[key] = tl.build(s, [*args, out])
    y = np.zeros([int(d.value) for d in out.shape], np.float32)
    f(*arrays, y)
    return y


def _rel_err(got, ref):
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def _conv_nchwc_case(seed: int, c: int = 512, oc: int = 32, hw: int = 7):
    """A 3x3 blocked conv over 512 channels (4608 terms per output) of non-negative inputs
    (as after a ReLU) and random-sign weights; the float64 reference in the same layout."""
    rng = np.random.default_rng(seed)
    x = rng.random((1, c // 16, hw, hw, 16)).astype(np.float32)
    w = rng.standard_normal((oc // 16, c // 16, 3, 3, 16, 16)).astype(np.float32)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)))
    ref = sum(np.einsum("nbhwc,obcd->nohwd", xp[:, :, i:i + hw, j:j + hw],
                        w[:, :, i, j].astype(np.float64)) for i in range(3) for j in range(3))
    X, W = tl.placeholder(x.shape, name="X"), tl.placeholder(w.shape, name="W")
    return ops.conv2d_nchwc(X, W, padding=1), [X, W], [x, w], ref


def _first_conv_case(seed: int, hw: int = 32):
    """A ResNet stem on the NCHW input: 3 channels, 7x7, stride 2 (147 terms per output)."""
    rng = np.random.default_rng(seed)
    x = rng.random((1, 3, hw, hw)).astype(np.float32)
    w = rng.standard_normal((32, 3, 7, 7)).astype(np.float32)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (3, 3), (3, 3)))
    oh = hw // 2
    ref = sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + 2 * oh - 1:2, j:j + 2 * oh - 1:2],
                        w[:, :, i, j].astype(np.float64)) for i in range(7) for j in range(7))
    X, W = tl.placeholder(x.shape, name="X"), tl.placeholder(w.shape, name="W")
    return ops.conv2d_nchw(X, W, stride=2, padding=3), [X, W], [x, w], ref


@pytest.mark.parametrize("seed", [0, 1])
def test_blocked_conv_sums_in_chunks(seed):
    out, args, arrays, ref = _conv_nchwc_case(seed)
    chunked = _rel_err(_run("nchwc", S.schedule_conv2d_nchwc, out, args, arrays), ref)
    serial = _rel_err(_run("nchwc serial", lambda s, t: S.schedule_conv2d_nchwc(s, t, chain=0),
                           out, args, arrays), ref)
    assert chunked < 8e-7 < serial, (chunked, serial)


@pytest.mark.parametrize("seed", [0, 1])
def test_first_conv_sums_kernel_rows(seed):
    out, args, arrays, ref = _first_conv_case(seed)
    chunked = _rel_err(_run("first", S.schedule_conv2d_nchw_blocked, out, args, arrays), ref)
    serial = _rel_err(_run("first serial",
                           lambda s, t: S.schedule_conv2d_nchw_blocked(s, t, chain=0), out,
                           args, arrays), ref)
    assert chunked < 2.5e-7 < serial, (chunked, serial)


def test_chunks_only_where_the_chain_is_longer():
    """A conv whose whole reduction fits one chain keeps the single accumulator stage."""
    X = tl.placeholder((1, 4, 8, 8, 16), name="X")  # 1x1 over 64 channels: 64 terms
    W = tl.placeholder((2, 4, 1, 1, 16, 16), name="W")
    out = ops.conv2d_nchwc(X, W)
    s = tl.create_schedule(out)
    S.schedule_conv2d_nchwc(s, out)
    assert not any(st.op.name.endswith(".rf") for st in s.stages)
    s = tl.create_schedule(out)
    S.schedule_conv2d_nchwc(s, out, chain=16)  # one 16-channel block per chunk
    assert any(st.op.name.endswith(".rf") for st in s.stages)


@pytest.mark.parametrize("chain", [-1, 2.5, True])
def test_bad_chain_is_refused(chain):
    out, *_ = _first_conv_case(0, hw=8)
    s = tl.create_schedule(out)
    with pytest.raises(ValueError, match="chain must be an int >= 0"):
        S.schedule_conv2d_nchw_blocked(s, out, chain=chain)
