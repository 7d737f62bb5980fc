"""The int8 kernels' tuning templates (autotune/int8_templates.py): every tile of the space
builds and matches the template's reference, and the fallback is the library's default."""

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import autotune


def _check_all(task, inputs, ref, sample=None):
    """Build the space's configs (`sample`: these indices only) and compare with `ref`."""
    space = task.config_space
    for i in sample if sample is not None else range(len(space)):
        s, args = task.instantiate(space.get(i))
        f = tl.build(s, args)
        out = np.empty(ref.shape, np.int32)
        f(*inputs, out)
        np.testing.assert_array_equal(out, ref, err_msg=str(space.get(i)))
    return space


@pytest.mark.parametrize("whole", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_dense_int8_template_space(whole):
    task = autotune.create_task("dense_int8", (8, 96, 20))
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (8, 20), dtype=np.uint8)
    wp = rng.integers(-128, 128, (6, 5, 16, 4), dtype=np.int8)
    ref = autotune.get_template(task.name).reference(a, wp)
    space = _check_all(task, [a, wp], ref, None if whole else (1, 8, 15))
    assert len(space) == 18
    fallback = str(tl.lower(*task.instantiate(autotune.FallbackConfig())))
    from tensorlang.ops import quant_kernels as qk

    _, args = task.instantiate(autotune.FallbackConfig())
    s = tl.create_schedule(args[-1])
    qk.schedule_dense_int8(s, args[-1])
    assert str(tl.lower(s, args)) == fallback


@pytest.mark.slow
def test_conv2d_int8_template_space():
    task = autotune.create_task("conv2d_int8_nchwc", (1, 32, 9, 9, 32, 3, 3, 1, 1))
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (1, 2, 9, 9, 16), dtype=np.uint8)
    wp = rng.integers(-128, 128, (2, 2, 3, 3, 4, 16, 4), dtype=np.int8)
    from tensorlang.autotune.int8_templates import conv_int8_reference

    _check_all(task, [x, wp], conv_int8_reference(x, wp, 1, 1))


def test_depthwise_int8_template_space():
    """Every cols x parallel config of a 3x3 stride-2 depthwise conv matches the reference, and
    the fallback is the library's default schedule."""
    from tensorlang.autotune.int8_templates import depthwise_int8_reference

    from tensorlang.ops import quant_kernels as qk

    task = autotune.create_task("depthwise_conv2d_int8_nchwc", (1, 32, 15, 15, 3, 3, 2, 1))
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (1, 2, 15, 15, 16), dtype=np.uint8)
    wp = rng.integers(-128, 128, (2, 3, 3, 16), dtype=np.int8)
    space = _check_all(task, [x, wp], depthwise_int8_reference(x, wp, 2, 1))
    assert len(space) == 14
    _, args = task.instantiate(autotune.FallbackConfig())
    s = tl.create_schedule(args[-1])
    qk.schedule_depthwise_int8(s, args[-1])
    assert str(tl.lower(s, args)) == str(tl.lower(*task.instantiate(autotune.FallbackConfig())))
