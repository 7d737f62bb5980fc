"""Constants travel by their bytes, never through extra copies: GraphModule's constructor copies
each one once into its aligned buffer (a byte view of the array), and CSE hashes a constant's
own bytes. Both must see exactly the bytes ``tobytes()`` gives, whatever the array's layout."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from tensorlang.graph.passes import eliminate_common_subexpr, eliminate_dead_code
from tensorlang.graph.passes.cse import _const_key
from tensorlang.runtime.graph_module import GraphModule

from tensorlang import graph


def _model():
    b = graph.Builder("consts")
    x = b.input("x", (3, 5))
    weights = np.arange(15, dtype=np.float32).reshape(3, 5) * np.float32(0.37) - 2
    y = b.add(b.multiply(x, b.const(weights)), b.const(np.float32(0.5)))
    return graph.build(b.build(y)), weights


def _layouts(data: np.ndarray):
    """The same bytes as a C-contiguous array, a strided view, a Fortran-order 2-D array and
    a read-only one."""
    yield data
    spread = np.zeros(2 * data.size, np.uint8)
    spread[::2] = data
    yield spread[::2]
    if data.size % 2 == 0:
        yield np.asfortranarray(data.reshape(2, -1))  # same elements, column-major memory
    frozen = data.copy()
    frozen.flags.writeable = False
    yield frozen


def test_constants_are_copied_bit_identically_from_any_layout():
    mod, weights = _model()
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    (want,) = mod.run(x=x).values()
    np.testing.assert_allclose(want, x * weights + np.float32(0.5), rtol=1e-6)
    originals = {k: v.copy() for k, v in mod._const_arrays.items()}
    for name, data in originals.items():
        for layout in _layouts(data):
            constants = {**originals, name: layout}
            again = GraphModule(mod.plan, mod.kernels, mod.driver, constants, mode=mod.mode)
            assert again._const_arrays[name].tobytes() == data.tobytes()
            assert again._const_arrays[name].ctypes.data % 64 == 0
            (out,) = again.run(x=x).values()
            np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("array", [
    np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2],  # strided
    np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
    np.array([True, False, True]),
    np.zeros((0, 3), np.float16),
    np.float32(1.5),
    np.arange(6, dtype=">i4"),
])
def test_cse_key_digest_is_the_digest_of_the_bytes(array):
    b = graph.Builder("k")
    v = b.const(array)
    dtype, shape, digest = _const_key(v)
    assert digest == hashlib.sha256(np.ascontiguousarray(v.data).tobytes()).hexdigest()
    assert (dtype, shape) == (v.dtype, v.shape)


def test_cse_merges_equal_constants_only():
    b = graph.Builder("m")
    x = b.input("x", (4,))
    same_a, same_b = np.ones(4, np.float32), np.ones(4, np.float32)
    other = np.ones(4, np.float32)
    other[3] = np.nextafter(np.float32(1), np.float32(2))  # one bit apart
    y = b.add(b.add(b.multiply(x, b.const(same_a)), b.multiply(x, b.const(same_b))),
              b.multiply(x, b.const(other)))
    after = eliminate_dead_code(eliminate_common_subexpr(b.build(y)))
    assert [n.op for n in after.nodes] == ["multiply", "add", "multiply", "add"]
