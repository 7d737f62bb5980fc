"""Memory planning over the execution plan: liveness-based reuse of one arena.

Each storage (a buffer that one or more aliasing values share: a reshape's output is its input's
storage) lives from the step that writes it first to the step that reads it last. Graph inputs
live from before the first step, graph outputs to after the last (the caller reads them after
the run). Offsets are assigned greedily, largest storage first, at the lowest 64-byte-aligned
offset that overlaps no already-placed storage whose lifetime intersects. Constants are not in
the arena and are never reused.
"""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


@dataclass
class MemoryPlan:
    offsets: dict[int, int]  # storage id -> arena offset
    arena_bytes: int
    naive_bytes: int  # every storage separately
    lower_bound: int  # the largest sum of live bytes at any one step

    def describe(self) -> str:
        return (f"arena {self.arena_bytes / 1e6:.2f} MB (naive {self.naive_bytes / 1e6:.2f} MB, "
                f"lower bound {self.lower_bound / 1e6:.2f} MB)")


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_memory(sizes: dict[int, int], lifetimes: dict[int, tuple[int, int]],
                reuse: bool = True) -> MemoryPlan:
    """``sizes``: storage id -> bytes; ``lifetimes``: storage id -> (first, last) step, inclusive.
    With ``reuse=False`` every storage gets its own range (for debugging a suspected overlap)."""
    order = sorted(sizes, key=lambda s: (-sizes[s], lifetimes[s][0], s))
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
    offsets: dict[int, int] = {}
    top = 0
    for sid in order:
        size = _align(max(1, sizes[sid]))
        first, last = lifetimes[sid]
        if not reuse:
            offsets[sid] = top
            top += size
            continue
        conflicts = sorted((o, e) for o, e, f, la in placed if f <= last and first <= la)
        off = 0
        for o, e in conflicts:
            if off + size <= o:
                break
            off = max(off, e)
        offsets[sid] = off
        placed.append((off, off + size, first, last))
        top = max(top, off + size)
    naive = sum(_align(max(1, s)) for s in sizes.values())
    steps = sorted({t for f, la in lifetimes.values() for t in (f, la)})
    lower = 0
    for t in steps:
        live = sum(_align(max(1, sizes[s])) for s, (f, la) in lifetimes.items() if f <= t <= la)
        lower = max(lower, live)
    return MemoryPlan(offsets, top, naive, lower)


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
