"""Memory planning over the execution plan: liveness-based reuse of one arena.

Each storage (a buffer that one or more values share: a reshape's output is its input's storage,
an in-place elementwise kernel writes into its dying input's storage) lives from the step that
writes it first to the step that reads it last. Graph inputs live from before the first step,
graph outputs to after the last (the caller reads them after the run). Constants are not in the
arena and are never reused.

Placement: storages in decreasing size bucket (sizes rounded up to a 64-byte multiple, then to a
power-of-two bucket for the *order* only, so that similar sizes are placed together), each into
the best-fitting gap -- the smallest free range, among those not used by any placed storage with
an intersecting lifetime, that holds it -- else on top of the arena.

Reported: the arena size, the naive sum (every storage separately) and the lower bound (the
largest sum of live bytes at any one step: no placement can do better).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorlang.runtime._arena import ALIGN, place

__all__ = ["ALIGN", "MemoryPlan", "check_no_overlap", "plan_memory"]


@dataclass
class MemoryPlan:
    offsets: dict[int, int]  # storage id -> arena offset
    arena_bytes: int
    naive_bytes: int  # every storage separately
    lower_bound: int  # the largest sum of live bytes at any one step
    per_shape: bool = False  # symbolic sizes: placed by the runtime at each new shape

    def describe(self) -> str:
        if self.per_shape:
            return "symbolic sizes: the arena is placed at the first run of each shape"
        return (f"arena {self.arena_bytes / 1e6:.2f} MB (naive {self.naive_bytes / 1e6:.2f} MB, "
                f"lower bound {self.lower_bound / 1e6:.2f} MB)")


def plan_memory(sizes: dict[int, int], lifetimes: dict[int, tuple[int, int]],
                reuse: bool = True) -> MemoryPlan:
    """``sizes``: storage id -> bytes; ``lifetimes``: storage id -> (first, last) step, inclusive.
    With ``reuse=False`` every storage gets its own range (for debugging a suspected overlap).
    The placement is the runtime's (runtime/_arena.py), which also places the storages of a
    model with symbolic shapes at the first run of each shape."""
    return MemoryPlan(*place(sizes, lifetimes, reuse))


def check_no_overlap(plan: MemoryPlan, sizes: dict[int, int],
                     lifetimes: dict[int, tuple[int, int]]) -> None:
    """Raise AssertionError if two storages that are live at the same time share bytes."""
    items = list(sizes)
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            fa, la = lifetimes[a]
            fb, lb = lifetimes[b]
            if fa <= lb and fb <= la:
                oa, ob = plan.offsets[a], plan.offsets[b]
                if oa < ob + sizes[b] and ob < oa + sizes[a] and sizes[a] and sizes[b]:
                    raise AssertionError(f"storages {a} and {b} overlap while both are live")
