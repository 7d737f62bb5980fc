"""Placing a model's arena storages: liveness-based reuse of one arena (the algorithm of
graph/passes/plan_memory.py's module docstring). Here, in the runtime, because a model with
symbolic shapes (issue 19) is placed at the first run of each shape, where the compiler may not
be installed; the build places static models with the same function.

Placement: storages in decreasing size bucket (sizes rounded up to a 64-byte multiple, then to a
power-of-two bucket for the *order* only, so that similar sizes are placed together), each into
the best-fitting gap -- the smallest free range, among those not used by any placed storage with
an intersecting lifetime, that holds it -- else on top of the arena."""

from __future__ import annotations

ALIGN = 64


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _bucket(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def place(sizes: dict[int, int], lifetimes: dict[int, tuple[int, int]], reuse: bool = True,
          ) -> tuple[dict[int, int], int, int, int]:
    """(offsets, arena bytes, naive bytes, lower bound): ``sizes`` storage id -> bytes,
    ``lifetimes`` storage id -> (first, last) step, inclusive. The lower bound is the largest
    sum of live bytes at any one step: no placement can do better."""
    asize = {s: _align(max(1, n)) for s, n in sizes.items()}
    order = sorted(sizes, key=lambda s: (-_bucket(asize[s]), -asize[s], lifetimes[s][0], s))
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
    offsets: dict[int, int] = {}
    top = 0
    for sid in order:
        size = asize[sid]
        first, last = lifetimes[sid]
        if not reuse:
            offsets[sid] = top
            top += size
            continue
        busy = sorted((o, e) for o, e, f, la in placed if f <= last and first <= la)
        best = None  # (gap size, offset)
        cursor = 0
        for o, e in busy:
            if o - cursor >= size and (best is None or o - cursor < best[0]):
                best = (o - cursor, cursor)
            cursor = max(cursor, e)
        off = best[1] if best is not None else cursor
        offsets[sid] = off
        placed.append((off, off + size, first, last))
        top = max(top, off + size)
    naive = sum(asize.values())
    steps = sorted({t for f, la in lifetimes.values() for t in (f, la)})
    lower = 0
    for t in steps:
        live = sum(asize[s] for s, (f, la) in lifetimes.items() if f <= t <= la)
        lower = max(lower, live)
    return offsets, top, naive, lower
