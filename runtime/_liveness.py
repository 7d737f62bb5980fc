"""Lifetimes of a plan's values, and the check that no two values live at once share bytes.

The kernels read and write the addresses the plan gives, so a plan in which two values that are
live at the same time overlap in the arena (a plan.json edited by hand, or by another tool,
with its digests redone) runs without complaint and returns wrong results. This check refuses
it, trusting nothing the planner computed, from the steps alone:

- A value is *written* at the step whose outputs name it; graph inputs before the first step
  (-1), weights never (no step may write into a weight's storage, nor may an input live there).
- It is live from there to the last step reading it; graph inputs and outputs to the end of
  the run (step ``len(steps)``): the caller writes the former before it and reads the latter
  after it (graph/storage.py's ``_last_reads`` and ``_lifetimes``).
- A value no step writes that lives in the arena is a *view* (a reshape: an alias op has no
  kernel): it holds the bytes of the value its storage holds when it is first read, and keeps
  that value live until the view's own last read.
- Values of one storage begin at its first byte, so two of them overlap unless one is empty;
  they may be live at once only as graph/storage.py's ``inplace_donor`` allows: at the one step
  that reads the earlier value last and writes the later one, marked ``inplace`` over an input
  of that step in this storage, with one output of the donor's shape and element size (a
  softmax or layer norm not writing a graph output). Whether the kernel is elementwise cannot
  be seen from the artifact (its op is ``"fused"`` for a group, and the runtime does not import
  the compiler's op registry): that part of the planner's rule is trusted.
- Arena storages live from their first value's write to their values' last use, inclusive (as
  runtime/_arena.py places them): two live at one step must not share a byte. A plan with
  shape variables has no offsets until it runs; its ``lifetimes``, from which the runtime places
  the arena at each shape, must cover its storages' live ranges (each placed plan is then
  checked as a plan of fixed shapes).

Cost: a few passes over the steps and values, and a sweep over the storages sorted by their
first step (O(n log n)), against the quadratic pair checks of graph/passes/plan_memory.py.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
from dataclasses import dataclass

import numpy as np

from ._plan import PlanError

_READS_ROWS_FIRST = ("softmax", "layer_norm")  # in place only when not writing a graph output


@dataclass
class _Life:
    """One value written by a step, or a graph input: where it lives, the step writing it, the
    last step needing it (and which name needs it there: itself or a view of it)."""

    name: str
    storage: int
    first: int
    last: int
    last_by: str


def check_lifetimes(plan: dict, symbolic: bool = False) -> None:
    """Refuse (PlanError) a plan in which two values live at the same time share bytes. The
    plan's structure (types, references) is checked already (``check_plan``)."""
    end = len(plan["steps"])
    kind = {st["id"]: st["kind"] for st in plan["storages"]}
    written = _written_at(plan, kind)
    first_read, last_read = _reads(plan, written)
    lives = _lives(plan, written, last_read, end, symbolic)
    _attach_views(plan, kind, written, lives, first_read, last_read, end, symbolic)
    spans = _check_storages(plan, lives, end)
    if symbolic:
        _check_declared_lifetimes(plan, spans, end)
    else:
        _check_arena(plan, spans, end)


def _written_at(plan: dict, kind: dict) -> dict[str, int]:
    """Value -> the step writing it (-1: a graph input). Each value is written once, into the
    arena."""
    written: dict[str, int] = {}
    for io in plan["inputs"]:
        name = io["name"]
        sid = plan["values"][name]["storage"]
        if kind[sid] != "arena":
            raise PlanError(f"graph input {name!r} lives in weight storage {sid}: the run would "
                            "copy it over the weight")
        written[name] = -1
    for i, st in enumerate(plan["steps"]):
        args = st["args"]
        for name in args[len(args) - st["n_out"]:]:
            if name in written:
                was = "a graph input" if written[name] < 0 else \
                    f"already written by step {written[name]}"
                raise PlanError(f"step {i} writes value {name!r}, {was}: each value is written "
                                "once")
            sid = plan["values"][name]["storage"]
            if kind[sid] != "arena":
                raise PlanError(f"step {i} writes value {name!r} into weight storage {sid}: "
                                "steps write only into the arena")
            written[name] = i
    return written


def _reads(plan: dict, written: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Value -> the first and the last step reading it; a value read no later than the step
    writing it would be read before it exists."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, st in enumerate(plan["steps"]):
        args = st["args"]
        for name in args[:len(args) - st["n_out"]]:
            w = written.get(name, -1)
            if w >= i:
                raise PlanError(f"step {i} reads value {name!r}, which step {w} writes: a value "
                                "is read only after the step writing it")
            first.setdefault(name, i)
            last[name] = i
    return first, last


def _nbytes(v: dict, symbolic: bool) -> int | None:
    """A value's bytes; None for a symbolic size (treated as non-empty: it may be at some
    shape)."""
    shape = v["shape"]
    if 0 in shape:
        return 0
    if symbolic and not all(isinstance(d, int) for d in shape):
        return None
    # (math.prod and a cached itemsize: np.prod and np.dtype were most of the check's time)
    return math.prod(shape) * _itemsize(v["dtype"])


@functools.lru_cache(maxsize=64)
def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def _lives(plan: dict, written: dict[str, int], last_read: dict[str, int], end: int,
           symbolic: bool) -> dict[str, _Life]:
    """The live range of every non-empty value written by a step or given as an input."""
    outputs = {o["name"] for o in plan["outputs"]}
    lives = {}
    for name, w in written.items():
        v = plan["values"][name]
        if _nbytes(v, symbolic) == 0:
            continue  # no bytes: nothing to overlap
        last = end if (w < 0 or name in outputs) else max(w, last_read.get(name, w))
        lives[name] = _Life(name, v["storage"], w, last, name)
    return lives


def _attach_views(plan: dict, kind: dict, written: dict[str, int], lives: dict[str, _Life],
                  first_read: dict[str, int], last_read: dict[str, int], end: int,
                  symbolic: bool) -> None:
    """Extend each viewed value's life to its views' last use. A view holds what its storage
    holds when it is first read (or at the end, a graph output read by no step)."""
    outputs = {o["name"] for o in plan["outputs"]}
    by_storage: dict[int, list[tuple[int, str]]] = {}
    for life in lives.values():
        by_storage.setdefault(life.storage, []).append((life.first, life.name))
    for writes in by_storage.values():
        writes.sort()
    for name, v in plan["values"].items():
        if name in written or kind[v["storage"]] != "arena":
            continue
        size = _nbytes(v, symbolic)
        if size == 0 or (name not in first_read and name not in outputs):
            continue  # empty, or never read: it holds nothing anyone sees
        when = first_read.get(name, end)
        writes = by_storage.get(v["storage"], [])
        k = bisect.bisect_left(writes, (when, "")) - 1
        if k < 0:
            raise PlanError(f"value {name!r} is read at {_step(when, end)}, but no step before "
                            f"writes its storage {v['storage']}: it would read stale bytes")
        viewed = lives[writes[k][1]]
        have = _nbytes(plan["values"][viewed.name], symbolic)
        if size is not None and have is not None and size > have:
            raise PlanError(f"value {name!r} ({size} bytes) views {viewed.name!r} in storage "
                            f"{v['storage']}, which holds only {have} bytes")
        last = end if name in outputs else last_read[name]
        if last > viewed.last:
            viewed.last, viewed.last_by = last, name


def _check_storages(plan: dict, lives: dict[str, _Life], end: int) -> dict[int, list[_Life]]:
    """Within each storage, the values written one after another: each write after the last
    use of every earlier value, or at it as an in-place step. Returns storage -> its values,
    in the order written."""
    by_storage: dict[int, list[_Life]] = {}
    for life in lives.values():
        by_storage.setdefault(life.storage, []).append(life)
    for sid, group in by_storage.items():
        group.sort(key=lambda life: life.first)
        holder = group[0]  # the value live longest among those written so far
        for life in group[1:]:
            if life.first < holder.last or (life.first == holder.last and _in_place_refusal(
                    plan, life) is not None):
                _refuse_pair(plan, sid, holder, life, end)
            if life.last > holder.last:
                holder = life
    return by_storage


def _in_place_refusal(plan: dict, out: _Life) -> str | None:
    """None when step ``out.first`` may write ``out`` over the values of its storage that it
    reads last (graph/storage.py's ``inplace_donor``, as far as a plan shows it); else why
    not."""
    i = out.first
    st = plan["steps"][i]
    donor = st.get("inplace")
    args = st["args"]
    if not isinstance(donor, str):
        return f"step {i} is not an in-place step"
    if st["n_out"] != 1 or args[-1] != out.name:
        return f"step {i} is in place but has {st['n_out']} outputs"
    if donor not in args[:-1]:
        return f"step {i} is in place over {donor!r}, which it does not read"
    d, v = plan["values"][donor], plan["values"][out.name]
    if d["storage"] != v["storage"]:
        return f"step {i} is in place over {donor!r}, which lives in storage {d['storage']}"
    if d["shape"] != v["shape"] or _itemsize(d["dtype"]) != _itemsize(v["dtype"]):
        return (f"step {i} is in place over {donor!r} of {d['dtype']}{d['shape']}, not the "
                f"output's shape and element size ({v['dtype']}{v['shape']})")
    if st.get("op") in _READS_ROWS_FIRST and out.name in {o["name"] for o in plan["outputs"]}:
        return f"step {i} ({st['op']}) is in place but writes a graph output"
    return None


def _refuse_pair(plan: dict, sid: int, a: _Life, b: _Life, end: int) -> None:
    why = ""
    if b.first == a.last:
        why = f" ({_in_place_refusal(plan, b)})"
    overlap = _overlap(a, b, end)
    raise PlanError(
        f"values {a.name!r} ({_span(a, end)}) and {b.name!r} ({_span(b, end)}) share arena "
        f"storage {sid} while both are live: their live ranges overlap {overlap}{why}; "
        "values live at the same time need bytes of their own")


def _span(life: _Life, end: int) -> str:
    start = "a graph input" if life.first < 0 else f"written at step {life.first}"
    if life.last >= end:
        stop = "live to the end of the run"
    else:
        stop = f"last read at step {life.last}"
    via = f" through its view {life.last_by!r}" if life.last_by != life.name else ""
    return f"{start}, {stop}{via}"


def _overlap(a: _Life, b: _Life, end: int) -> str:
    lo, hi = max(a.first, b.first), min(a.last, b.last)
    if lo == hi:
        return f"at {_step(lo, end)}"
    return f"at steps {lo}-{hi}" if hi < end else f"from step {lo} to the end of the run"


def _step(t: int, end: int) -> str:
    return "the end of the run (a graph output)" if t >= end else f"step {t}"


def _check_declared_lifetimes(plan: dict, spans: dict[int, list[_Life]], end: int) -> None:
    """A plan with shape variables: the arena is placed at each shape from ``lifetimes``, which
    must cover every step at which the storage's values are live."""
    for sid, group in spans.items():
        first, last = group[0].first, max(life.last for life in group)
        declared = plan["lifetimes"][str(sid)]
        if declared[0] > first or declared[1] < last:
            who = next(life for life in group if life.last == last)
            raise PlanError(f"storage {sid}: plan['lifetimes'] gives steps {declared[0]}-"
                            f"{declared[1]}, but its values are live at steps {first}-{last} "
                            f"(value {who.name!r} until {_step(last, end)}): the arena placed "
                            "at each shape would let other values overwrite them")


def _segments(spans: dict[int, list[_Life]]) -> list[tuple[int, int, int]]:
    """(first, last, storage) for each stretch of steps in which a storage holds a live value:
    its values' ranges joined where they meet (in place) or overlap (views)."""
    out = []
    for sid, group in spans.items():
        first, last = group[0].first, group[0].last
        for life in group[1:]:
            if life.first > last:
                out.append((first, last, sid))
                first = life.first
            last = max(last, life.last)
        out.append((first, last, sid))
    return sorted(out)


def _check_arena(plan: dict, spans: dict[int, list[_Life]], end: int) -> None:
    """No two arena storages live at one step share a byte: a sweep over the storages' live
    stretches by first step, the live ones kept sorted by offset (pairwise disjoint, so a new
    one need only be compared with its neighbours)."""
    placed = {st["id"]: (st["offset"], st["offset"] + st["nbytes"]) for st in plan["storages"]
              if st["kind"] == "arena"}
    live: list[tuple[int, int, int]] = []  # (offset, end, storage), sorted
    expiry: list[tuple[int, int, int, int]] = []  # (last step, offset, end, storage)
    for first, last, sid in _segments(spans):
        while expiry and expiry[0][0] < first:
            _, off, stop, old = heapq.heappop(expiry)
            del live[bisect.bisect_left(live, (off, stop, old))]
        off, stop = placed[sid]
        k = bisect.bisect_left(live, (off, stop, sid))
        for other in live[max(0, k - 1):k + 1]:
            if other[0] < stop and off < other[1]:
                _refuse_storages(plan, spans, other[2], sid, end)
        live.insert(k, (off, stop, sid))
        heapq.heappush(expiry, (last, off, stop, sid))


def _refuse_storages(plan: dict, spans: dict[int, list[_Life]], s1: int, s2: int,
                     end: int) -> None:
    """Name two values, one of each storage, live at a common step."""
    a, b = next((a, b) for a in spans[s1] for b in spans[s2]
                if a.first <= b.last and b.first <= a.last)
    where = {st["id"]: f"[{st['offset']}, {st['offset'] + st['nbytes']})"
             for st in plan["storages"] if st["id"] in (s1, s2)}
    overlap = _overlap(a, b, end)
    raise PlanError(
        f"arena storages {s1} (bytes {where[s1]}) and {s2} (bytes {where[s2]}) overlap while "
        f"both are live: value {a.name!r} ({_span(a, end)}) and value {b.name!r} "
        f"({_span(b, end)}) are live together {overlap}; values live at the same time need "
        "bytes of their own")
