"""Model weights, activations and the tuner's measured arguments live in memory the kernel is
asked to back with 2 MiB pages (runtime.arrays.huge_page_bytes): the same kind of memory on
both sides, so a record times what the deployed kernel reads."""

import os
import sys

import numpy as np
import pytest
from tensorlang.autotune.measure import _random_inputs
from tensorlang.runtime.arrays import ALIGN, HUGE_PAGE, huge_page_bytes, packed

THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def _thp_mode() -> str | None:
    """The selected transparent huge page mode ("always", "madvise", "never"), or None."""
    if not sys.platform.startswith("linux") or not os.path.exists(THP):
        return None
    with open(THP) as f:
        return f.read().split("[")[1].split("]")[0]


def _eligible(addr: int) -> bool:
    """Whether the mapping holding addr may get huge pages (smaps' THPeligible)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == "THPeligible:":
                return line.split()[1] == "1"
    raise AssertionError(f"no mapping holds address {addr:#x}")


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_huge_page_bytes_is_zeroed_aligned_and_writable():
    b = huge_page_bytes(3 * HUGE_PAGE + 5)
    assert b.nbytes == 3 * HUGE_PAGE + 5 and b.dtype == np.uint8
    assert _addr(b) % HUGE_PAGE == 0
    assert not b.any()
    b[-1] = 7
    assert b[-1] == 7


def test_small_buffers_stay_on_ordinary_pages():
    b = huge_page_bytes(4096)  # a 2 MiB page for 4 KiB would waste the rest
    assert b.nbytes == 4096 and _addr(b) % ALIGN == 0 and not b.any()


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"),
                    reason="transparent huge pages are off (or not Linux) here")
def test_a_large_region_may_get_huge_pages():
    b = huge_page_bytes(4 * HUGE_PAGE)
    b[::4096] = 1
    assert _eligible(_addr(b))


def test_packed_buffers_are_aligned_disjoint_and_in_order():
    sizes = [5, 0, 64, 1000, HUGE_PAGE]
    bufs = packed(sizes)
    assert [b.nbytes for b in bufs] == sizes
    placed = [(_addr(b), b.nbytes) for b in bufs if b.nbytes]  # an empty view has no place
    assert all(s % ALIGN == 0 for s, _ in placed)
    assert all(s + n <= placed[i + 1][0] for i, (s, n) in enumerate(placed[:-1]))
    for i, b in enumerate(bufs):
        b[:] = i + 1
    assert [int(b[0]) for b in bufs if b.nbytes] == [1, 3, 4, 5]


def test_measured_arguments_are_random_and_in_one_region():
    manifest = {"args": [{"shape": [256, 1024], "dtype": "float32"},
                         {"shape": [1024, 512], "dtype": "float32"},
                         {"shape": [7], "dtype": "int32"}]}
    a, w, idx = _random_inputs(manifest)
    assert (a.shape, w.shape, idx.shape) == ((256, 1024), (1024, 512), (7,))
    assert (a.dtype, idx.dtype) == (np.float32, np.int32)
    assert -1 <= a.min() < a.max() <= 1 and 0 <= idx.min() and idx.max() < 8
    assert _addr(w) - _addr(a) == a.nbytes  # one region, one after the other
    again = _random_inputs(manifest)
    assert all(np.array_equal(x, y) for x, y in zip((a, w, idx), again))  # seeded


def _big_weights_model():
    from tensorlang import graph

    b = graph.Builder("big")
    x = b.input("x", (1024, 1024))
    w1 = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)  # 4 MiB
    w2 = np.float32(0.25) * np.ones((1024, 1024), np.float32)
    return graph.build(b.build(b.add(b.multiply(x, b.const(w1)), b.const(w2)))), w1


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"),
                    reason="transparent huge pages are off (or not Linux) here")
def test_a_models_weights_and_arena_may_get_huge_pages():
    gm, w1 = _big_weights_model()
    x = np.random.default_rng(2).standard_normal((1024, 1024)).astype(np.float32)
    (out,) = gm.run(x=x).values()
    np.testing.assert_allclose(out, x * w1 + np.float32(0.25), rtol=1e-6, atol=1e-6)  # FMA
    assert all(_eligible(_addr(a)) for a in gm._const_arrays.values())
    assert _eligible(_addr(gm._own.arena))
