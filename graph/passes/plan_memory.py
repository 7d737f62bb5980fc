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

__all__ = ["ALIGN", "MemoryPlan", "check_no_overlap", "plan_memory", "validate_plan"]


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


def validate_plan(plan: dict) -> None:
    """Check a built execution plan (``gm.plan``) from its steps alone, trusting nothing the
    planner computed: (1) no two arena storages whose live ranges intersect share a byte;
    (2) a value written into a storage another value already lives in (in-place) is written only
    after every read of the earlier values (aliases of one storage written by no step, i.e.
    reshapes, share bytes on purpose and are not a conflict). Raises AssertionError."""
    end = len(plan["steps"])
    storage_of = {name: v["storage"] for name, v in plan["values"].items()}
    st_by_id = {st["id"]: st for st in plan["storages"]}
    written_at: dict[str, int] = {}
    read_at: dict[str, list[int]] = {}
    for i, step in enumerate(plan["steps"]):
        n_out = step.get("n_out", 1)
        for a in step["args"][:-n_out]:
            read_at.setdefault(a, []).append(i)
        for a in step["args"][-n_out:]:
            written_at[a] = i
    for o in plan["outputs"]:
        read_at.setdefault(o["name"], []).append(end)
    life: dict[int, list[int]] = {}
    for i in plan["inputs"]:
        life[storage_of[i["name"]]] = [-1, end]
    for name, sid in storage_of.items():
        if st_by_id[sid]["kind"] != "arena":
            continue
        lo = written_at.get(name)
        if lo is None:  # an alias (reshape) of a value written earlier: its reads count
            if sid in life:
                life[sid][1] = max([life[sid][1], *read_at.get(name, [])])
            continue
        hi = max(read_at.get(name, [lo]) + [lo])
        cur = life.setdefault(sid, [lo, hi])
        cur[0], cur[1] = min(cur[0], lo), max(cur[1], hi)
    arena = [st for st in plan["storages"] if st["kind"] == "arena"]
    for k, a in enumerate(arena):
        for b in arena[k + 1:]:
            (fa, la), (fb, lb) = life.get(a["id"], [0, -1]), life.get(b["id"], [0, -1])
            if fa <= lb and fb <= la and a["offset"] < b["offset"] + b["nbytes"] and \
                    b["offset"] < a["offset"] + a["nbytes"]:
                raise AssertionError(f"storages {a['id']} and {b['id']} overlap in the arena "
                                     f"while both are live (steps {fa}-{la} and {fb}-{lb})")
    # when each value comes into being: its step, -1 for inputs; an alias (values are listed in
    # definition order) when the value it views was written
    by_storage: dict[int, list[str]] = {}
    born: dict[str, int] = {}
    for name, sid in storage_of.items():
        prev = by_storage.setdefault(sid, [])
        born[name] = written_at.get(name, born[prev[-1]] if prev else -1)
        prev.append(name)
    for names in by_storage.values():
        # values of one storage written by steps: the earlier ones must be dead by then
        for nm in names:
            t = written_at.get(nm)
            if t is None:
                continue
            for other in names:
                if born[other] >= t:
                    continue
                later = [r for r in read_at.get(other, []) if r > t]
                if later:
                    raise AssertionError(f"{nm!r} is written in place over {other!r} at step {t}"
                                         f" but {other!r} is read again at step {later[0]}")
