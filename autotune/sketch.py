"""Sketches: schedule structures generated from the compute DAG by rules (Ansor's idea), their
decisions left to the search (sketch_fill.py).

Each compute of the DAG gets one role from what it computes and how it is read:

    inline   no reduction, not an output, cheap (no math intrinsic) and read elementwise by
             every consumer: always inlined into its consumers
    choose   no reduction, not an output, but expensive or read at shifted / strided indices
             (a padding, a stencil step, an exp feeding a reduction): a decision, inline or
             computed (at the root or inside its consumer)
    tile     a reduction with data reuse (some input is read without some spatial index:
             matmul, convolutions): multi-level tiling "SSRSRS": spatial levels S0 S1, the
             reduction's outer level R0, spatial S2, reduction R1, spatial S3 (the register
             tile, its innermost loop vectorized). If it is an output, its sketches are a
             cache_write accumulator computed inside the output's S0 or S1 tile, or in place;
             if its only consumer is an elementwise output (bias, activation), that consumer is
             tiled and the reduction computed inside it (the consumer fused into the tile).
             A reused placeholder operand may be packed (a decision): copied by a cache_read
             whose layout stores innermost the dimensions the vector axis indexes (B of a
             matmul into [K, nb] panels, a conv's weights into [IC, KH, KW, ob]), at the
             parallel outer loop, at the accumulator's tile, or once per panel (the outer
             loops of the axes that index it parallel, the others inside: tl.ops.matmul's
             order); the accumulator is stored with the vector axis innermost
    reduce   a reduction without reuse (row sums, norms, softmax's max): spatial loops parallel,
             and either the reduction inside (plain), the innermost spatial loop vectorized
             around the reduction (vec_spatial), the reduction factored into a vector of
             partial results (rfactor "rf_lanes"), or, when there is little spatial
             parallelism, factored into parts computed in parallel (rfactor "rf_par")
    spatial  everything else that is scheduled (outputs without reduction, computed "choose"
             stages): tiled in two levels, outer loops fused and parallel, the last axis'
             innermost loop vectorized

Where no vector width of at least 8 lanes divides an extent (197 tokens, a prime), the loop
levels that are vectorized (spatial tiles' innermost, vec_spatial's, rf_lanes' partial lanes,
a tiled reduction's register tile) are also offered 16, 32 or 8 lanes with a shorter last
tile: the split's guard keeps the tail right (the lowering peels the last tile off the whole
vectors, or, in a fused loop, branches on the guard per tile).

A non-output stage that is computed (reduce, spatial) and has a single consumer stage may be
computed at the root or inside its consumer's outer loop (a decision). Every decision is a knob:
a filled sketch is a point of the task's ConfigSpace, and applying it calls the schedule
primitives, whose legality checks refuse an illegal fill before it is featurized or built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import ScheduleError
from ..ir.expr import Call, Var
from ..ir.functor import Visitor
from . import sketch_fill as F


class TileTooLarge(ScheduleError):
    """A fill whose register tile exceeds sketch_fill.MAX_REGISTER_TILE elements: refused
    before any primitive runs (not a legality refusal; the tuners count it apart)."""


INLINE, CHOOSE, TILE, REDUCE, SPATIAL, SINK = "inline", "choose", "tile", "reduce", "spatial", \
    "sink"


@dataclass
class Node:
    """One compute of the DAG and what the rules made of it."""

    op: object
    pos: int  # position among the computes, topological: knob names use it
    role: str = ""
    is_output: bool = False
    consumers: list = field(default_factory=list)  # ops reading it
    fused_into: object = None  # TILE: the elementwise output tiled around it
    sink_of: object = None  # SINK: the TILE op it hosts

    @property
    def prefix(self) -> str:
        return f"s{self.pos}"


@dataclass
class Dag:
    outputs: list
    nodes: list  # Node, topological (producers first)
    by_op: dict

    def node(self, op) -> Node:
        return self.by_op[id(op)]


# --------------------------------------------------------------------------------- analysis
def analyze(tensors) -> Dag:
    from ..te.tensor import ComputeOp, PlaceholderOp

    outputs = [t for t in tensors if not isinstance(t.op, PlaceholderOp)]
    order, seen = [], set()
    stack = [(t.op, False) for t in reversed(outputs)]
    while stack:
        op, done = stack.pop()
        if id(op) in seen or isinstance(op, PlaceholderOp):
            continue
        if done:
            seen.add(id(op))
            order.append(op)
            continue
        if not isinstance(op, ComputeOp):
            raise TypeError(f"template-free tuning: op {op.name} ({type(op).__name__}) is not "
                             "a compute; only placeholders and tl.compute are supported")
        stack.append((op, True))
        stack.extend((t.op, False) for t in reversed(op.input_tensors))
    out_ops = {id(t.op) for t in outputs}
    nodes = [Node(op, n, is_output=id(op) in out_ops) for n, op in enumerate(order)]
    by_op = {id(nd.op): nd for nd in nodes}
    for nd in nodes:
        for t in nd.op.input_tensors:
            if id(t.op) in by_op and nd.op not in by_op[id(t.op)].consumers:
                by_op[id(t.op)].consumers.append(nd.op)
    dag = Dag(outputs, nodes, by_op)
    for nd in nodes:
        nd.role = _role(nd, dag)
    for nd in nodes:
        if nd.role == TILE:
            _fuse_consumer(nd, dag)
    return dag


def _role(nd: Node, dag: Dag) -> str:
    op = nd.op
    if op.reduce_axis:
        return TILE if _has_reuse(op) else REDUCE
    if nd.is_output:
        return SPATIAL
    cheap = not _has_call(op.body)
    if cheap and all(_reads_elementwise(dag.node(c).op, op) for c in nd.consumers):
        return INLINE
    return CHOOSE


def _has_reuse(op) -> bool:
    """Whether some input is read without one of the spatial indices: each of its elements
    serves several outputs, which tiling keeps in registers and caches. An axis of extent 1
    (a kept dimension) serves one output only."""
    spatial = {id(iv.var) for iv in op.axis if F.extent(iv) > 1}
    for idx in _reads(op.body, None):
        used = {id(v) for v in _vars(idx)}
        if spatial - used:
            return True
    return False


def _reads_elementwise(consumer, producer) -> bool:
    return all(all(isinstance(i, Var) for i in idx) for idx in _reads(consumer.body, producer))


def _reads(body, producer) -> list[tuple]:
    """Index tuples of the reads in `body` (of `producer`'s tensors, or of any tensor)."""
    found = []

    class _R(Visitor):
        def visit_TensorRead(self, r):
            if producer is None or r.tensor.op is producer:
                found.append(r.indices)
            for i in r.indices:
                self.visit(i)

    v = _R()
    for b in body:
        v.visit(b)
    return found


def _vars(indices: tuple) -> list:
    from ..ir.functor import collect_vars

    return [v for i in indices for v in collect_vars(i)]


def _has_call(body) -> bool:
    found = []

    class _C(Visitor):
        def visit_Call(self, c: Call):
            found.append(c)

    v = _C()
    for b in body:
        v.visit(b)
    return bool(found)


def _fuse_consumer(nd: Node, dag: Dag) -> None:
    """A tiled reduction whose only consumer is an elementwise output of its shape: that
    output is tiled and hosts the reduction (the consumer is fused into the tile)."""
    if nd.is_output or len(nd.consumers) != 1:
        return
    c = dag.node(nd.consumers[0])
    if c.role != SPATIAL or c.sink_of is not None or len(c.op.axis) != len(nd.op.axis):
        return
    if [F.extent(a) for a in c.op.axis] != [F.extent(a) for a in nd.op.axis]:
        return
    axis_vars = tuple(iv.var for iv in c.op.axis)
    if any(tuple(idx) != axis_vars for idx in _reads(c.op.body, nd.op)):
        return
    nd.fused_into = c.op
    c.role, c.sink_of = SINK, nd.op


def effective_consumers(nd: Node, dag: Dag) -> list:
    """Consumer ops of a node, looking through those that are always inlined."""
    out = []
    for c in nd.consumers:
        cn = dag.node(c)
        more = effective_consumers(cn, dag) if cn.role == INLINE else [c]
        out.extend(x for x in more if x not in out)
    return out


# --------------------------------------------------------------------------------- knobs
# a space's size must stay a countable index (Python's len() and numpy's random integers)
_MAX_SPACE = 1 << 60
# id(first output op) -> (op, cap of the split knobs, whether ragged vectors are offered)
_CAPS: dict[int, tuple] = {}


def declare_knobs(cfg, dag: Dag) -> None:
    """Every decision of every sketch of the DAG (the same knobs whichever sketch a config
    picks: a ConfigSpace is collected from one run). A DAG with many loops gets each tile
    knob thinned to an evenly spaced subset, so that the space stays countable."""
    cap, ragged = _split_cap(dag)
    _declare_all(cfg, dag, cap, ragged)


def _split_cap(dag: Dag) -> tuple[int | None, bool]:
    """(the cap of the split knobs or None, whether ragged vector tiles are offered). Ragged
    tiles are offered only where the whole space stays countable with them and no knob
    thinned: otherwise the space is exactly the one without them (its cap, and the records
    made in it, unchanged)."""
    op = dag.outputs[0].op
    hit = _CAPS.get(id(op))
    if hit is not None and hit[0] is op:
        return hit[1], hit[2]
    cap, ragged = None, True
    if _space_size(dag, True) > _MAX_SPACE:
        ragged = False
        cap = _thinning_cap(dag)
    if len(_CAPS) > 256:
        _CAPS.clear()
    _CAPS[id(op)] = (op, cap, ragged)
    return cap, ragged


def _probe(dag: Dag, ragged: bool):
    from .space import ConfigSpace

    probe = ConfigSpace()
    _declare_all(probe, dag, None, ragged)
    return probe


def _space_size(dag: Dag, ragged: bool) -> int:
    return math.prod(_probe(dag, ragged).dims)


def _thinning_cap(dag: Dag) -> int | None:
    probe = _probe(dag, False)
    if math.prod(probe.dims) <= _MAX_SPACE:
        return None
    split_dims = [len(k) for k in probe.knobs.values() if k.kind == "split"]
    other = math.prod(len(k) for k in probe.knobs.values() if k.kind != "split")
    budget = math.log2(_MAX_SPACE / other) / max(1, len(split_dims))
    return max(2, int(2 ** budget))


def _declare_all(cfg, dag: Dag, cap: int | None, ragged: bool) -> None:
    for nd in dag.nodes:
        p = nd.prefix
        if nd.role == CHOOSE:
            cfg.define_knob(F.knob(p, "inline"), [True, False],
                            default=not inlining_recomputes(nd, dag))
            _declare_spatial(cfg, nd, cap, ragged)
        elif nd.role == SPATIAL:
            _declare_spatial(cfg, nd, cap, ragged)
        elif nd.role == TILE:
            _declare_tile(cfg, nd, cap, ragged)
        elif nd.role == REDUCE:
            _declare_reduce(cfg, nd, cap, ragged)
        if nd.role in (CHOOSE, REDUCE, TILE) and not nd.is_output and nd.fused_into is None \
                and len(effective_consumers(nd, dag)) == 1:
            F.declare_attach(cfg, p, ["root", "consumer"], "root")


def inlining_recomputes(nd: Node, dag: Dag) -> bool:
    """Whether inlining an expensive stage (a math intrinsic: softmax's exp) would compute
    each of its values several times: some consumer, or a consumer of an always-inlined one,
    runs a loop that its read of the value does not index (attention's exp, inlined through
    the normalization into P V, would be computed again for every output column). Cheap
    stages (paddings, stencil steps) stay inlined by default whatever their reuse."""
    return _has_call(nd.op.body) and _recomputed(nd, dag)


def _recomputed(nd: Node, dag: Dag) -> bool:
    for c in nd.consumers:
        cn = dag.node(c)
        loops = {id(iv.var) for iv in (*c.axis, *c.reduce_axis) if F.extent(iv) > 1}
        if any(loops - {id(v) for v in _vars(idx)} for idx in _reads(c.body, nd.op)):
            return True
        if cn.role == INLINE and _recomputed(cn, dag):
            return True
    return False


def _declare_spatial(cfg, nd: Node, cap: int | None, ragged: bool) -> None:
    axes = nd.op.axis
    for a, iv in enumerate(axes):
        last = a == len(axes) - 1
        F.declare_tile(cfg, F.knob(nd.prefix, f"S{a}"), F.extent(iv), 3 if last else 2, last,
                       cap, ragged=ragged and last)
    F.declare_parallel(cfg, nd.prefix, list(range(len(axes), -1, -1)), len(axes))
    F.declare_unroll(cfg, nd.prefix)


def _declare_tile(cfg, nd: Node, cap: int | None, ragged: bool) -> None:
    p = nd.prefix
    rules = ["cache", "plain"] if nd.is_output else (["fuse", "plain"] if nd.fused_into
                                                     is not None else ["plain"])
    cfg.define_knob(F.knob(p, "rule"), rules, default=rules[0])
    axes = nd.op.axis
    # the axis whose register-tile loop is innermost and vectorized: the last by default, but
    # where the last is read strided or padded (NCHW convs), another (the channels) may win
    wide = [a for a, iv in reversed(list(enumerate(axes))) if F.extent(iv) > 1]
    for a, iv in enumerate(axes):
        # any axis that may be the vector may have a vector's width (2 zmm of channels)
        F.declare_tile(cfg, F.knob(p, f"S{a}"), F.extent(iv), 4, a == len(axes) - 1, cap,
                       vector=a == len(axes) - 1 or a in wide, ragged=ragged)
    for r, iv in enumerate(nd.op.reduce_axis):
        F.declare_reduce_tile(cfg, F.knob(p, f"R{r}"), F.extent(iv))
    F.declare_parallel(cfg, p, [1, 2], 1)  # tiling levels S0 or S0+S1 in the parallel loop
    cfg.define_knob(F.knob(p, "level"), [1, 0], default=1)  # accumulator inside S1 or S0
    F.declare_unroll(cfg, p)
    cfg.define_knob(F.knob(p, "vec"), wide or [len(axes) - 1], default=(wide or [-1])[0])
    _declare_pack(cfg, nd)


def _declare_pack(cfg, nd: Node) -> None:
    """Operand packing: which reused input (by position among the op's inputs; -1: none) is
    copied, inside the tile loops, into a buffer whose innermost dimension is the one the
    vector axis indexes (B of a matmul into [K, nb] panels, a conv's weights into [IC, KH,
    KW, ob]), and where: at the parallel outer tile loop, at the accumulator's tile, or once
    per panel (the outer tile loops of the axes indexing the operand parallel, the others
    inside them)."""
    if nd.fused_into is None and not nd.is_output:
        return  # a non-output reduction tiled on its own (attention's scores): not packed
    cands = [-1] + packable_inputs(nd.op)
    cfg.define_knob(F.knob(nd.prefix, "pack"), cands, default=-1)
    cfg.define_knob(F.knob(nd.prefix, "pack_at"), ["outer", "tile", "panel"], default="outer")


def packable_inputs(op) -> list[int]:
    """Positions (in op.input_tensors) of the placeholders the op reads with reuse: read
    without one of its spatial indices, each element serving several outputs."""
    from ..te.tensor import PlaceholderOp

    spatial = {id(iv.var) for iv in op.axis if F.extent(iv) > 1}
    out = []
    for n, t in enumerate(op.input_tensors):
        if not isinstance(t.op, PlaceholderOp):
            continue
        reads = _reads(op.body, t.op)
        if reads and any(spatial - {id(v) for v in _vars(idx)} for idx in reads):
            out.append(n)
    return out


def _declare_reduce(cfg, nd: Node, cap: int | None, ragged: bool) -> None:
    p = nd.prefix
    op = nd.op
    red = F.extent(op.reduce_axis[-1])
    spatial = 1
    for iv in op.axis:
        spatial *= F.extent(iv)
    rules = ["plain"]
    if op.axis and F.extent(op.axis[-1]) > 1:
        rules.append("vec_spatial")
    single = op.num_outputs == 1
    if single and F.lane_candidates(red):
        rules.insert(0, "rf_lanes")
    elif single and ragged and F.ragged_lanes(red):
        # lanes that do not divide the row: offered, but the default stays a rule without a
        # tail (the fallback config is the reference kernel of every measurement)
        rules.append("rf_lanes")
    if single and spatial < 64 and F.part_candidates(red):
        rules.append("rf_par")
    # The rules leave legality to the dependence analysis: rfactor is offered to every
    # single-output reduction, and refused by the check where the reducer is declared not
    # commutative. Only the default (the fallback config, the runner's reference kernel)
    # avoids a rule the reducer's declaration already rules out.
    commutative = op.body[0].combiner.commutative
    default = rules[0] if commutative else "plain"
    cfg.define_knob(F.knob(p, "rule"), rules, default=default)
    lanes = F.lane_candidates(red) or [1, *(F.ragged_lanes(red) if ragged else [])]
    cfg.define_knob(F.knob(p, "lanes"), lanes, default=lanes[1] if lanes[0] == 1 and
                    len(lanes) > 1 else None)
    if "rf_lanes" in rules[1:] and commutative and lanes[0] == 1:
        F.note_ragged_seed(cfg, F.knob(p, "rule"), "rf_lanes")
        F.note_ragged_seed(cfg, F.knob(p, "lanes"), lanes[1])
    cfg.define_knob(F.knob(p, "parts"), F.part_candidates(red) or [1])
    if op.axis:
        last = F.extent(op.axis[-1])
        F.declare_tile(cfg, F.knob(p, "V"), last, 2, True, cap, ragged=ragged)
        cfg.define_knob(F.knob(p, "rows"), [r for r in (1, 2, 4, 8) if spatial % r == 0],
                        default=1)
    F.declare_parallel(cfg, p, [1, 0], 1)
    F.declare_unroll(cfg, p)


# --------------------------------------------------------------------------------- apply
def apply(cfg, dag: Dag):
    """The schedule of one filled sketch (primitives checked as they are called)."""
    import tensorlang as tl

    for nd in dag.nodes:
        if nd.role == TILE:
            _check_register_tile(cfg, nd)
    s = tl.create_schedule(dag.outputs)
    anchors: dict[int, tuple] = {}  # id(op) -> (stage, loop) its producers may attach at
    for nd in reversed(dag.nodes):  # consumers first: their loops exist when producers attach
        _apply_node(cfg, s, dag, nd, anchors)
    return s


def _apply_node(cfg, s, dag: Dag, nd: Node, anchors: dict) -> None:
    p = nd.prefix
    if nd.role == INLINE or (nd.role == CHOOSE and cfg[F.knob(p, "inline")].val):
        s[nd.op].compute_inline()
        return
    host = _host(cfg, s, dag, nd, anchors)
    if nd.role in (SPATIAL, CHOOSE):
        anchors[id(nd.op)] = _spatial(cfg, s[nd.op], p, host is None)
    elif nd.role == REDUCE:
        anchors[id(nd.op)] = _reduce(cfg, s, nd, host is None)
    elif nd.role == SINK:
        anchors[id(nd.op)], anchors[id(nd.sink_of)] = _tile_fused(
            cfg, s, dag.node(nd.sink_of), s[nd.op])
    elif nd.role == TILE and nd.fused_into is None:
        anchors[id(nd.op)] = _tile(cfg, s, nd, host is None)
    elif nd.role == TILE and cfg[F.knob(p, "rule")].val == "plain":
        # declined to fuse: the reduction runs at the root; its consumer was tiled already
        anchors[id(nd.op)] = _tile_loops(cfg, s, nd, True)
    if host is not None:
        s[nd.op].compute_at(*host)


def _check_register_tile(cfg, nd: Node) -> None:
    n = F.register_tile(cfg, nd.prefix, len(nd.op.axis))
    if n > F.MAX_REGISTER_TILE:
        raise TileTooLarge(f"sketch of {nd.op.name}: register tile of {n} elements (more than "
                           f"{F.MAX_REGISTER_TILE}: every FMA would spill)")


def _host(cfg, s, dag: Dag, nd: Node, anchors: dict):
    """(stage, loop) to compute this node at, or None for the root."""
    name = F.knob(nd.prefix, "at")
    try:
        choice = cfg[name].val
    except KeyError:
        return None
    if choice != "consumer":
        return None
    anchor = anchors.get(id(effective_consumers(nd, dag)[0]))
    return anchor if anchor is not None and anchor[1] is not None else None


def _split(cfg, st, name: str, iv) -> list:
    return cfg[name].apply(None, st, iv)


def _fuse_parallel(st, loops: list, parallel: bool):
    if not loops:
        return None
    loop = st.fuse(*loops) if len(loops) > 1 else loops[0]
    if parallel:
        st.parallel(loop)
    return loop


def _unroll(cfg, st, p: str, loop) -> None:
    depth = cfg[F.knob(p, "unroll")].val
    if depth and loop is not None:
        st.pragma(loop, "auto_unroll_max_step", depth)


def _vectorize(st, loop, n: int) -> None:
    if n > 1:
        st.vectorize(loop)


def _vector_axis(cfg, p: str, n_axes: int) -> int:
    return cfg[F.knob(p, "vec")].val % n_axes


def _vector_last(cfg, p: str, loops: list) -> list:
    """A tile's innermost loops (one per spatial axis), the vector axis' last."""
    v = _vector_axis(cfg, p, len(loops))
    return [x for a, x in enumerate(loops) if a != v] + [loops[v]]


def _vectorize_tile(cfg, st, p: str, loops: list) -> None:
    v = _vector_axis(cfg, p, len(loops))
    _vectorize(st, loops[v], cfg[F.knob(p, f"S{v}")].size[-1])


def _spatial(cfg, st, p: str, parallel: bool) -> tuple:
    outer, inner = [], []
    axes = list(st.op.axis)
    for a, iv in enumerate(axes):
        loops = _split(cfg, st, F.knob(p, f"S{a}"), iv)
        outer.append(loops[0])
        inner.extend(loops[1:])
    st.reorder(*outer, *inner)
    k = cfg[F.knob(p, "par")].val
    fused = _fuse_parallel(st, outer[:k], parallel)
    vec = cfg[F.knob(p, f"S{len(axes) - 1}")].size[-1]
    _vectorize(st, inner[-1], vec)
    _unroll(cfg, st, p, inner[0] if len(inner) > 1 else None)
    return st, fused if fused is not None else outer[0]


def _tile_loops(cfg, s, nd: Node, parallel: bool) -> tuple:
    """SSRSRS on the stage itself (its operand packed if so decided); returns (stage, the
    loop producers attach at)."""
    p = nd.prefix
    st = s[nd.op]
    pack, panel = _cache_operand(cfg, s, nd, st)
    by_panel = pack is not None and panel and cfg[F.knob(p, "pack_at")].val == "panel"
    levels = [[], [], [], []]
    for a, iv in enumerate(st.op.axis):
        for lvl, loop in enumerate(_split(cfg, st, F.knob(p, f"S{a}"), iv)):
            levels[lvl].append(loop)
    r0, r1 = [], []
    for r, iv in enumerate(st.op.reduce_axis):
        lo, li = _split(cfg, st, F.knob(p, f"R{r}"), iv)
        r0.append(lo)
        r1.append(li)
    first = [levels[0][a] for a in panel] if by_panel else []
    outer = first + [x for x in levels[0] if x not in first]
    st.reorder(*outer, *levels[1], *r0, *levels[2], *r1, *_vector_last(cfg, p, levels[3]))
    k = cfg[F.knob(p, "par")].val
    fused = _fuse_parallel(st, first or levels[0] + (levels[1] if k == 2 else []), parallel)
    _vectorize_tile(cfg, st, p, levels[3])
    _unroll(cfg, st, p, r0[0] if r0 else None)
    if pack is not None:
        tile = cfg[F.knob(p, "pack_at")].val == "tile" and k == 1
        pack.compute_at(st, levels[1][-1] if tile else fused)
        _vectorize(pack, pack.op.axis[-1], 2)
    return st, fused


def _tile(cfg, s, nd: Node, parallel: bool) -> tuple:
    p = nd.prefix
    if cfg[F.knob(p, "rule")].val == "cache":
        t = nd.op.output(0)
        # the vector axis' storage innermost: the accumulator's vectors are contiguous
        v = _vector_axis(cfg, p, len(nd.op.axis))
        order = [a for a in range(len(nd.op.axis)) if a != v] + [v]
        acc = s.cache_write(t, "local", layout=order if order[-1] != len(order) - 1 else None)
        return _tile_fused(cfg, s, nd, s[t], s[acc])[1]
    return _tile_loops(cfg, s, nd, parallel)


def _tile_fused(cfg, s, nd: Node, out_st, acc_st=None) -> tuple:
    """The output stage tiled by the reduction's spatial factors, the reduction (or its
    cache_write accumulator) computed inside its S0 or S1 tile and tiled R0 S2 R1 S3 there.
    Returns the anchors (stage, loop) of the output's producers and of the reduction's."""
    p = nd.prefix
    if acc_st is None:
        if cfg[F.knob(p, "rule")].val == "plain":
            return _spatial_sink(cfg, out_st, p), None
        acc_st = s[nd.op]
    pack, panel = _cache_operand(cfg, s, nd, acc_st)
    pack_at = cfg[F.knob(p, "pack_at")].val if pack is not None else None
    levels = [[], [], [], []]
    for a, iv in enumerate(out_st.op.axis):
        for lvl, loop in enumerate(_split(cfg, out_st, F.knob(p, f"S{a}"), iv)):
            levels[lvl].append(loop)
    if pack_at == "panel" and panel:
        fused, at = _panel_loops(cfg, p, out_st, levels, panel)
    else:
        out_st.reorder(*levels[0], *levels[1], *levels[2], *_vector_last(cfg, p, levels[3]))
        both = cfg[F.knob(p, "par")].val == 2
        fused = _fuse_parallel(out_st, levels[0] + (levels[1] if both else []), True)
        at = fused if both or cfg[F.knob(p, "level")].val == 0 else levels[1][-1]
    _vectorize_tile(cfg, out_st, p, levels[3])
    acc_st.compute_at(out_st, at)
    if pack is not None:
        pack.compute_at(out_st, at if pack_at == "tile" else fused)
        _vectorize(pack, pack.op.axis[-1], 2)
    outer, inner = [], []
    for a, iv in enumerate(_axes_in_order(acc_st, nd.op)):
        f3 = cfg[F.knob(p, f"S{a}")].size[-1]
        lo, li = acc_st.split(iv, factor=f3)
        outer.append(lo)
        inner.append(li)
    r0, r1 = [], []
    for r, iv in enumerate(acc_st.op.reduce_axis):
        lo, li = _split(cfg, acc_st, F.knob(p, f"R{r}"), iv)
        r0.append(lo)
        r1.append(li)
    acc_st.reorder(*r0, *outer, *r1, *_vector_last(cfg, p, inner))
    _vectorize_tile(cfg, acc_st, p, inner)
    first = (r0 or outer)[0]
    _unroll(cfg, acc_st, p, first)
    return (out_st, fused), (acc_st, first)


def _panel_loops(cfg, p: str, out_st, levels: list, panel: list) -> tuple:
    """The outer tile loops of the axes that index the packed operand (a matmul's column
    panels, a conv's output-channel blocks) fused and parallel, the other outer tile loops
    inside them: the operand is packed once per panel, whatever the tiles of the other axes
    (tl.ops.matmul's loop order). Returns (the panel loop, the accumulator's host loop)."""
    rest = [x for a, x in enumerate(levels[0]) if a not in panel]
    out_st.reorder(*(levels[0][a] for a in panel), *rest, *levels[1], *levels[2],
                   *_vector_last(cfg, p, levels[3]))
    fused = _fuse_parallel(out_st, [levels[0][a] for a in panel], True)
    if cfg[F.knob(p, "level")].val == 0:
        return fused, (rest or [fused])[-1]
    return fused, levels[1][-1]


def _axes_in_order(st, op) -> list:
    """The stage's spatial axes in the order of `op`'s (an accumulator stored in another
    layout keeps op's axis objects, permuted)."""
    pos = {id(iv): n for n, iv in enumerate(op.axis)}
    return sorted(st.op.axis, key=lambda iv: pos[id(iv)])


def _cache_operand(cfg, s, nd: Node, acc_st):
    """The pack decision applied: the chosen reused input copied (cache_read) for the
    accumulator, the dimensions its vector axis indexes stored innermost. Returns the copy's
    stage (attached by the caller) or None, and the positions of the spatial axes that index
    the operand (its panels: packed once each under pack_at "panel")."""
    try:
        which = cfg[F.knob(nd.prefix, "pack")].val
    except KeyError:  # a reduction tiled inside its consumer: no packing decision
        return None, []
    if which < 0:
        return None, []
    src = nd.op.input_tensors[which]
    vec = nd.op.axis[_vector_axis(cfg, nd.prefix, len(nd.op.axis))].var
    idx = _reads(nd.op.body, src.op)[0]
    inner = [d for d, e in enumerate(idx) if any(v is vec for v in _vars((e,)))]
    order = [d for d in range(len(idx)) if d not in inner] + inner
    layout = order if order != list(range(len(idx))) else None
    used = {id(v) for v in _vars(idx)}
    panel = [a for a, iv in enumerate(nd.op.axis) if id(iv.var) in used and F.extent(iv) > 1]
    copy = s.cache_read(src, "local", [acc_st.op.output(0)], layout=layout)
    return s[copy], panel


def _spatial_sink(cfg, out_st, p: str) -> tuple:
    """A fusable consumer whose reduction declined to fuse: tiled by the reduction's S0/S1
    factors (its own loops), parallel outer."""
    levels = [[], [], [], []]
    for a, iv in enumerate(out_st.op.axis):
        for lvl, loop in enumerate(_split(cfg, out_st, F.knob(p, f"S{a}"), iv)):
            levels[lvl].append(loop)
    out_st.reorder(*levels[0], *levels[1], *levels[2], *_vector_last(cfg, p, levels[3]))
    fused = _fuse_parallel(out_st, levels[0], True)
    _vectorize_tile(cfg, out_st, p, levels[3])
    return out_st, fused


def _reduce(cfg, s, nd: Node, parallel: bool) -> tuple:
    p = nd.prefix
    rule = cfg[F.knob(p, "rule")].val
    t = nd.op.output(0)
    rf_stages = []
    if rule == "rf_lanes":
        st = s[t]
        _, ki = st.split(st.op.reduce_axis[-1], factor=cfg[F.knob(p, "lanes")].val)
        rf = s[s.rfactor(t, ki, factor_axis=len(st.op.axis))]
        rf.reorder(*rf.op.reduce_axis, rf.op.axis[-1])
        rf.vectorize(rf.op.axis[-1])
        rf_stages.append(rf)
    elif rule == "rf_par":
        st = s[t]
        ko, _ = st.split(st.op.reduce_axis[-1], nparts=cfg[F.knob(p, "parts")].val)
        rf = s[s.rfactor(t, ko, factor_axis=0)]
        return rf, _fuse_parallel(rf, list(rf.op.axis), True)
    st = s[t]
    axes = list(st.op.axis)
    if not axes:
        for rf in rf_stages:
            rf.compute_at(st, st.op.reduce_axis[0])
        return (rf_stages or [st])[0], None
    if rule == "vec_spatial":
        vo, vi = _split(cfg, st, F.knob(p, "V"), axes[-1])
        st.reorder(*axes[:-1], vo, *st.op.reduce_axis, vi)
        axes = axes[:-1] + [vo]
        _vectorize(st, vi, cfg[F.knob(p, "V")].size[-1])
    row = st.fuse(*axes) if len(axes) > 1 else axes[0]
    rows = cfg[F.knob(p, "rows")].val
    if rows > 1:
        row, _ = st.split(row, factor=rows)
    if parallel and cfg[F.knob(p, "par")].val:
        st.parallel(row)
    for rf in rf_stages:
        rf.compute_at(st, row)
    _unroll(cfg, st, p, row)
    if rf_stages:  # the producers are read by the factored stage
        return rf_stages[0], rf_stages[0].leaf_iter_vars[0]
    return st, row
