"""The value-based dependences of a definition (RAW, WAR, WAW as isl union maps), as isl's
`compute_flow` gives them against the unscheduled program order, built without it where the
definition has the shape nearly all have:

* every array is written by the statements of one stage (a plain statement, or a reduction's
  init and update), and read by later stages, or by that reduction's update through the very
  access its write uses (the accumulator);
* no tl.scan (whose state arrays several stages write, and whose steps read earlier steps).

Then a write is never killed before a later stage reads it (nothing else writes the array), so
a read of another stage depends on every write of that element (init and updates alike: the
updates are may-writes, see model.py): the join of the two access relations. Inside a reduction
the pairs are those of one accumulator element: init -> every update (RAW, WAW) and update ->
every later update in the order of the reduce axes (RAW, WAR, WAW). These closed forms are what
compute_flow returns (the same relations; `TENSORLANG_CHECK_DATAFLOW=1` compares the two on
every definition, and the tests do on the operator library), at a small part of its cost:
compute_flow's lexicographic optimisation over the padded time vectors of all statements took a
third of a whole-model build. Any other shape is left to compute_flow."""

from __future__ import annotations

import os

import islpy as isl

_OUT, _IN = isl.dim_type.out, isl.dim_type.in_


def dataflow(statements, decl: str, reads, must, may, order) -> tuple:
    """(RAW, WAR, WAW) may-dependences between instances of `statements` (isl union maps)."""
    got = _by_stage(statements, decl, reads, must, may)
    if got is None:
        return compute_flows(reads, must, may, order)
    if os.environ.get("TENSORLANG_CHECK_DATAFLOW"):
        _check_against_isl(got, compute_flows(reads, must, may, order))
    return got


def compute_flows(reads, must, may, order) -> tuple:
    """isl's compute_flow: RAW with the writes as sources; WAR with the reads as may-sources
    (reads do not kill each other) and the must-writes ending a chain; WAW."""
    writes = must.union(may)

    def flow(info):
        return info.set_schedule_map(order).compute_flow().get_may_dependence()

    raw = flow(isl.UnionAccessInfo.from_sink(reads).set_must_source(must).set_may_source(may))
    war = flow(isl.UnionAccessInfo.from_sink(writes).set_may_source(reads).set_kill(must))
    waw = flow(isl.UnionAccessInfo.from_sink(writes).set_must_source(must).set_may_source(may))
    return raw, war, waw


def _by_stage(statements, decl: str, reads, must, may) -> tuple | None:
    """The closed forms (see the module's doc), or None where the definition is not of that
    shape."""
    if any(s.scan_body or s.state_of for s in statements):
        return None
    by_id = {s.id: s for s in statements}
    writer_stage: dict = {}  # array -> the stage index of its writers
    writes_of: dict = {}  # array -> [write access maps]
    own_write: dict = {}  # (statement id, array) -> its write access
    for m in maps_of(must.union(may)):
        s, array = by_id[m.get_tuple_name(_IN)], m.get_tuple_name(_OUT)
        if writer_stage.setdefault(array, s.stage_index) != s.stage_index:
            return None
        writes_of.setdefault(array, []).append(m)
        own_write[(s.id, array)] = m
    raw = isl.UnionMap.empty(reads.get_space())
    for m in maps_of(reads):
        s, array = by_id[m.get_tuple_name(_IN)], m.get_tuple_name(_OUT)
        stage = writer_stage.get(array)
        if stage is None:
            continue  # never written: no dependence
        if stage == s.stage_index:
            own = own_write.get((s.id, array))
            if not s.is_update or own is None or not m.is_equal(own):
                return None
            continue  # the accumulator: the reduction's closed form below
        if stage > s.stage_index:
            return None  # read before its writer runs (not a definition's order)
        for w in writes_of[array]:
            raw = raw.union(isl.UnionMap.from_map(w.apply_range(m.reverse())))
    war = isl.UnionMap.empty(reads.get_space())
    waw = isl.UnionMap.empty(reads.get_space())
    for init, update in _reductions(statements):
        first, later = _init_to_updates(decl, init, update), _later_updates(decl, update)
        raw = raw.union(first).union(later)
        war = war.union(later)
        waw = waw.union(first).union(later)
    return raw, war, waw


def _reductions(statements) -> list:
    """(init, update) statement pairs of the reductions."""
    inits = {s.stage_index: s for s in statements if s.kind == "init"}
    return [(inits[s.stage_index], s) for s in statements if s.is_update]


def _init_to_updates(decl: str, init, update) -> isl.UnionMap:
    """init -> every update of the same accumulator element."""
    red = [f"_r{d}" for d in range(len(update.dims) - update.n_spatial)]
    text = (f"{decl}{{ {init.id}[{', '.join(init.dims)}] -> "
            f"{update.id}[{', '.join([*init.dims, *red])}] }}")
    m = isl.Map(text).intersect_domain(init.domain).intersect_range(update.domain)
    return isl.UnionMap.from_map(m)


def _later_updates(decl: str, update) -> isl.UnionMap:
    """update -> every later update (in the order of the reduce axes) of the same element."""
    n_red = len(update.dims) - update.n_spatial  # >= 1: an update has reduce axes
    sp = list(update.dims[:update.n_spatial])
    xs = [f"_x{d}" for d in range(n_red)]
    ys = [f"_y{d}" for d in range(n_red)]
    later = " or ".join(
        "(" + " and ".join([*(f"{xs[e]} = {ys[e]}" for e in range(d)), f"{xs[d]} < {ys[d]}"])
        + ")" for d in range(n_red))
    text = (f"{decl}{{ {update.id}[{', '.join(sp + xs)}] -> {update.id}[{', '.join(sp + ys)}] "
            f": {later} }}")
    m = isl.Map(text).intersect_domain(update.domain).intersect_range(update.domain)
    return isl.UnionMap.from_map(m)


def _check_against_isl(got: tuple, want: tuple) -> None:
    for kind, a, b in zip(("RAW", "WAR", "WAW"), got, want):
        if not a.is_equal(b):
            raise AssertionError(f"closed-form {kind} differs from compute_flow's:\n  {a}\n"
                                 f"  compute_flow: {b}")


def maps_of(umap) -> list:
    """The maps of a union map, one per pair of spaces."""
    ml = umap.get_map_list()
    return [ml.get_at(k) for k in range(ml.n_map())]
