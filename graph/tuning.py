"""Tuning fused graph kernels with ``tensorlang.autotune``, and picking tuned schedules at build.

A graph kernel (one node after fusion: a ``fused`` group or a single op) is tunable when it holds an
anchor whose op definition declares the knobs of its schedule and :data:`KNOBS` tunes some of them
(matmul family, convolutions, depthwise conv / pooling windows). The autotune template
``graph_kernel`` rebuilds the kernel's computes from its description (op, attributes, input and
output types: all JSON strings, so a tuning record names the workload and the measuring child
process can rebuild it) and schedules them with ``default_schedule(outs, knobs=...)``; the knobs'
defaults are the default schedule's, so the template's fallback config *is* the default schedule.

- :func:`extract_tasks` -> :class:`GraphTask` (an ``autotune.Task`` with a weight: how many
  nodes of the graph share the workload), ready for ``autotune.tune_tasks``;
- :class:`GraphTuning` (what ``graph.build(tuning_log=...)`` uses) answers "the tuned schedule
  for this kernel, or None" from ``autotune.apply_history_best``'s records.

This is the whole integration: nothing in ``tensorlang.autotune`` knows about graphs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from tensorlang import autotune
from tensorlang.ops.definition import (  # the package import declares every definition
    AnchorSchedule,
    all_definitions,
    anchor_schedule,
    definition_of,
    get_definition,
    lookup_tag,
)
from tensorlang.te.tensor import ComputeOp

from . import op_registry as R
from .fused_group import FUSED, group_of, kernel_attrs
from .ir import Graph, GraphError
from .symbolic import evaluate, is_static, parse, parse_shape, shape_json

TEMPLATE = "graph_kernel"
MAX_REGISTER_TILE = 48  # accumulator vectors (as autotune's conv2d_nchwc template)

# The knobs the template tunes per anchor (a library op, or an op's part, whose definition
# declares an anchor schedule), with the values each may take besides the default that the
# anchor's schedule declares: the declared default is the first candidate, so the fallback
# config is the default schedule. Every name here is checked against the definitions when this
# module loads (_tuned_knobs). Every op scheduled by matmul's anchor schedule tunes matmul's.
_OTHER_VALUES: dict[str, dict[str, list]] = {
    "matmul": {"tile_m": [4, 8, 2], "tile_n": [32, 16, 48]},
    # the direct conv's register tile (oc_vectors x 16 channels by reg_ow columns) and
    # reduction unrolling; convs off that path (groups, odd channel counts) ignore them
    "conv2d_nchw": {"oc_vectors": [1, 4], "reg_ow": [7, 8, 28, 4], "unroll_kw": [True]},
    # the blocked conv's register tile, reduction unrolling and task order (None: by weight
    # size, see schedule_conv2d_nchwc)
    "conv2d_nchwc": {"reg_n": [7, 8, 16, 28, 4], "oc_blocks": [1, 4], "unroll_kw": [False],
                     "oc_outer": [True, False]},
    "depthwise_conv2d_nchw": {"row_lanes_max": [32, 16], "rows": [8, 2, 1]},
    "depthwise_conv2d_nchwc": {"reg_ow": [7, 8, 16, 28], "rows": [1, 2, 8]},
    "max_pool2d": {"row_lanes_max": [32, 16]},
    "avg_pool2d_sum": {"row_lanes_max": [32, 16]},
}


def _tuned_knobs() -> dict[str, dict[str, list]]:
    """Anchor name -> knob -> candidates (the declared default first), from _OTHER_VALUES and
    the anchors' declared knobs; TypeError for a name that is no anchor or no declared knob, or
    a value the knob's declaration refuses."""
    tables = dict(_OTHER_VALUES)
    matmul = get_definition("matmul").anchor
    for d in all_definitions() if "matmul" in tables else ():
        if d.anchor is matmul:
            tables.setdefault(d.name, tables["matmul"])
    out: dict[str, dict[str, list]] = {}
    for name, others in tables.items():
        schedule = getattr(lookup_tag(name), "schedule", None)
        if not isinstance(schedule, AnchorSchedule):
            raise TypeError(f"graph tuning: {name!r} has no anchor schedule to tune")
        out[name] = {}
        for knob, values in others.items():
            declared = schedule.knob(knob)
            if declared is None:
                raise TypeError(f"graph tuning: {name}'s schedule declares no knob {knob!r}")
            for v in values:
                declared.check(name, v)
            out[name][knob] = [declared.default, *values]
    return out


# anchor (op or part) name -> knob name -> candidate values (the first: the default schedule's)
KNOBS: dict[str, dict[str, list]] = _tuned_knobs()


def tuned_anchor(outs):
    """The definition (an op's, or a part's) of the first anchor with tuned knobs among the
    computes reaching ``outs``, or None."""
    seen, stack = set(), list(outs)
    while stack:
        t = stack.pop()
        if id(t.op) in seen or not isinstance(t.op, ComputeOp):
            continue
        seen.add(id(t.op))
        d = definition_of(t)
        if d is not None and anchor_schedule(t) is not None and d.name in KNOBS:
            return d
        stack.extend(t.op.input_tensors)
    return None


def template_args(op: str, attrs: dict, in_types, out_types) -> tuple:
    """The template arguments naming one kernel's workload (JSON strings, names stripped)."""
    # (a symbolic dimension as its text, issue 19)
    types = lambda ts: json.dumps([[shape_json(s), t] for s, t in ts])
    return (op, json.dumps(kernel_attrs(op, attrs, in_types), sort_keys=True), types(in_types),
            types(out_types))


def sizes_matching(sym_args, args) -> int | None:
    """The elements of a concrete workload's types when the one with shape variables
    (``sym_args``: template arguments, attributes and types as JSON; a fused group's member
    types are in its attributes) becomes it for some sizes of the variables, else None."""
    pairs: list = []
    if not all(_unify(json.loads(a), json.loads(b), pairs) for a, b in zip(sym_args, args)):
        return None
    try:
        env = _sizes_of(pairs)
        if env is None or any(evaluate(parse(d), env) != g for d, g in pairs):
            return None
    except GraphError:  # an expression this cannot read
        return None
    return sum(math.prod(sh) for sh, _ in json.loads(args[-2]) + json.loads(args[-1]))


def _sizes_of(pairs: list) -> dict[str, int] | None:
    """Sizes of the variables of the (dimension text, int) pairs that the caller then checks
    every pair against; None where some variable has none. A variable alone on an axis is read
    from it; one that is the only unknown of an expression is solved from it where that is
    linear in it (``batch * seq`` = 1024 once batch = 8 is read: seq = 128); variables found
    only together (a dense over ``batch * seq`` rows and nothing else) take 1, but the last,
    which is solved: any sizes at which the kernel is the record's workload will do."""
    from .symbolic import solve_equal, substitute, variables

    env = {d: g for d, g in pairs if d.isidentifier()}
    pending = [(parse(d), g) for d, g in pairs if not d.isidentifier()]
    while True:
        pending = [(e, g) for e, g in pending if variables([e]) - env.keys()]
        if not pending:
            return env
        for e, g in pending:
            (*others, v) = sorted(variables([e]) - env.keys())
            if not others:
                found = solve_equal(substitute(e, env), g, [v])
                value = found[1] if found is not None else None
                if not isinstance(value, int) or value < 1:
                    return None
                env[v] = value
                break
        else:  # every expression left has two unknowns or more
            env[min(variables([pending[0][0]]) - env.keys())] = 1


def _unify(a, b, pairs: list) -> bool:
    """``a`` (JSON with symbolic dimensions as text) equals ``b`` (JSON with ints there);
    collects the (dimension text, int) pairs."""
    if isinstance(a, str) and isinstance(b, int) and not isinstance(b, bool):
        pairs.append((a, b))
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_unify(a[k], b[k], pairs) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_unify(x, y, pairs) for x, y in zip(a, b))
    return a == b


def _parse(args):
    op, attrs, ins, outs = args
    to_types = lambda s: [(parse_shape(sh), t) for sh, t in json.loads(s)]
    return op, json.loads(attrs), to_types(ins), to_types(outs)


@autotune.template(TEMPLATE)
def graph_kernel(op: str, attrs: str, in_types: str, out_types: str):
    import tensorlang as tl

    from .lowering import lower

    ins, outs = autotune.computes_once(lambda: lower(*_parse((op, attrs, in_types, out_types))))
    cfg = autotune.get_config()
    knobs = {}
    anchor = tuned_anchor(outs)
    for name, values in (KNOBS[anchor.name] if anchor is not None else {}).items():
        cfg.define_knob(name, values, default=values[0])
        knobs[name] = cfg[name].val
    tile = max(knobs.get("oc_vectors", 1) * knobs.get("reg_ow", 1),
               knobs.get("oc_blocks", 1) * knobs.get("reg_n", 1))
    if tile > MAX_REGISTER_TILE:
        # far beyond the 32 zmm registers: every FMA spills, and unrolled it takes LLVM seconds
        # to compile; refused here, so the tuner prunes it before building
        raise tl.ScheduleError(f"graph_kernel: register tile of {tile} accumulator vectors "
                               f"(more than {MAX_REGISTER_TILE})")
    return tl.ops.default_schedule(outs, knobs=knobs or None), [*ins, *outs]


def is_tunable(op: str, attrs: dict, in_types, out_types) -> bool:
    from .lowering import lower

    if op != FUSED and R.get_op(op).pattern != R.OUT_ELEMWISE_FUSABLE:
        return False
    _ins, outs = lower(op, attrs, in_types, out_types)
    return tuned_anchor(outs) is not None


class GraphKernelTask:
    """What a task for a graph kernel adds to its autotune task kind: ``weight`` nodes of the
    graph share it, ``nodes`` names them, ``op`` is the anchor's graph op (conv, dense, ...),
    ``layout`` its output's ("" for plain layouts, "NCHW16c" ...). ``warm_args``: the
    kernel's arguments that are in cache when the graph calls it (its non-constant inputs, just
    written by the kernels before it); a runner with ``flush_cache`` evicts the others (the
    weights, which the rest of the model has evicted since its last call) before each timed
    call, so that the record times the kernel as the graph runs it."""

    def __init__(self, workload, args, target: str, op: str, nodes: list[str],
                 layout: str = "", warm_args: Sequence[int] = ()):
        super().__init__(workload, args, target)
        self.op = op
        self.nodes = list(nodes)
        self.layout = layout
        self.warm_args = tuple(warm_args)

    @property
    def weight(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        layout = f" {self.layout}" if self.layout else ""
        return (f"<{type(self).__name__} {self.op}{layout} weight={self.weight} "
                f"space={len(self.config_space)}>")


class GraphTask(GraphKernelTask, autotune.Task):
    """An autotune task for one graph kernel workload, tuned by the ``graph_kernel`` template
    (see GraphKernelTask)."""

    def __init__(self, args, target: str, op: str, nodes: list[str], layout: str = "",
                 warm_args: Sequence[int] = ()):
        super().__init__(TEMPLATE, args, target, op, nodes, layout, warm_args)


def _anchor_op(n) -> str:
    """The graph op a task is named by: a fused group's conv/dense/pooling anchor, else the
    node's op ("fused" for a group without one)."""
    group = group_of(n)
    if group is None:
        return n.op
    anchor = group.anchor_member
    return anchor.op if anchor is not None and anchor.kind == R.OUT_ELEMWISE_FUSABLE else FUSED


def _layout_options(block: int | None) -> dict:
    """``run_passes`` options laying out every conv in ``block`` where it divides the channels."""
    return {} if block is None else {"convert_layout": {"blocks": block}}


def _types(n) -> tuple[list, list]:
    return [(v.shape, v.dtype) for v in n.inputs], [(v.shape, v.dtype) for v in n.outputs]


def extract_tasks(g: Graph, target: str = "llvm", opt_level: int = 2,
                  blocks: Sequence[int] | None = None) -> list[GraphTask]:
    """The tunable kernels of ``g`` after the graph passes (fusion included: a task is a fused
    group, tuned with its tail), deduplicated by workload, in first-appearance order.

    ``blocks`` (e.g. ``(16, 8)``): also the conv kernels as laid out with every conv preferring
    each of these activation blocks, so that ``graph.build(tuning_log=...)`` can choose each
    conv's block from its records (:func:`choose_blocks`); None: the blocks by channel count."""
    from .passes import run_passes

    found: dict[tuple, tuple[str, list[str], str, tuple[int, ...]]] = {}
    for block in blocks or [None]:
        for n in run_passes(g, opt_level, options=_layout_options(block)).nodes:
            if R.get_op(n.op).alias:
                continue
            in_types, out_types = _types(n)
            args = template_args(n.op, n.attrs, in_types, out_types)
            if args in found:
                if n.name not in found[args][1]:
                    found[args][1].append(n.name)
            elif is_tunable(n.op, n.attrs, in_types, out_types):
                found[args] = (_anchor_op(n), [n.name], n.outputs[0].layout, _warm_args(n))
    return [GraphTask(args, target, *found[args]) for args in found]


def _warm_args(n) -> tuple[int, ...]:
    """The kernel arguments (its inputs, then outputs) in cache when the graph calls ``n``: the
    inputs that are not constants."""
    return tuple(i for i, v in enumerate(n.inputs) if not v.is_constant)


def _convs_in(n) -> list[str]:
    """The names of the graph's conv nodes a kernel holds."""
    if n.op == "conv":
        return [n.name]
    group = group_of(n)
    return group.names_of("conv") if group is not None else []


def choose_blocks(g: Graph, tuning: GraphTuning, opt_level: int = 2,
                  laid_out: dict[int, Graph] | None = None) -> dict[str, int]:
    """Each conv's activation block from the tuning log (TVM's AlterOpLayout reading the tuned
    channel tiles): ``g`` is laid out once per block of ``convert_layout.BLOCKS`` with every
    conv preferring it, and each conv whose kernel has a record under some block gets the block
    of its fastest record (the first block on a tie). Convs without records are not named: they
    keep the block of their channel count. Blocks are compared by the kernels timed alone
    (GraphTuning.cost_alone). The layout transforms that mixing blocks adds
    between convs are not counted (as in TVM). ``laid_out``: block -> ``g`` after the passes
    with that block, where the caller has it already."""
    from .passes import run_passes
    from .passes.convert_layout import BLOCKS

    if opt_level < 2:
        return {}
    best: dict[str, tuple[float, int]] = {}
    for block in BLOCKS:
        gb = (laid_out or {}).get(block) or run_passes(g, opt_level,
                                                        options=_layout_options(block))
        for n in gb.nodes:
            convs = _convs_in(n)
            rec = tuning.best_record(n.op, n.attrs, *_types(n)) if convs else None
            cost = tuning.cost_alone(rec) if rec is not None else math.inf
            for c in convs if rec is not None else ():
                if c not in best or cost < best[c][0]:
                    best[c] = (cost, block)
    return {c: block for c, (_cost, block) in best.items()}


class GraphTuning:
    """Kernel selection from a tuning log: the best applicable record of a kernel's workload,
    else None (the default schedule). ``untuned`` lists tunable kernels without a record."""

    def __init__(self, log, target: str = "llvm"):
        self.history = autotune.apply_history_best(log)
        self.target = target
        self.untuned: list[str] = []
        self.last_untuned = False  # whether the last lookup was tunable but unrecorded
        self._tunable: dict[tuple, bool] = {}  # template args -> is_tunable (declares computes)

    def config_for(self, op: str, attrs: dict, in_types, out_types):
        """(template args, config, config json) of the kernel's tuned record, or None.

        Cheap (no scheduling): the build checks its kernel cache with the config json before
        paying for :meth:`schedule_for`."""
        self.last_untuned = False
        args = template_args(op, attrs, in_types, out_types)
        if not self._is_tunable(args, op, attrs, in_types, out_types):
            from .tuning_free import free_config  # a template-free record (issue 20), or None

            return free_config(self.history, self.target, args)
        if not all(is_static(sh) for sh, _ in [*in_types, *out_types]):
            found = self._tuned_at_a_size(args)
            if found is not None:
                return found
        cfg = self.history.query(self.target, TEMPLATE, args)
        key = autotune.task.workload_key(TEMPLATE, args)
        if key not in self.history.applied:
            from .tuning_free import free_config, searched_loses  # template_free="all"

            if searched_loses(self.history, self.target, args):
                return None  # tuned template-free, and its default measured no slower
            found = free_config(self.history, self.target, args)
            if found is not None:
                return found
            self.untuned.append(key)
            self.last_untuned = True
            return None
        return args, cfg, json.dumps(cfg.to_json(), sort_keys=True)

    def _tuned_at_a_size(self, args):
        """A kernel with shape variables (issue 19): the record of the same kernel tuned at
        some sizes of them (op and attributes equal, types equal once the variables are given
        those sizes), its config replayed on the symbolic compute; the record tuned at the most
        elements when there are several. None when there is none, or its config is not in the
        symbolic kernel's space."""
        from tensorlang.version import __version__

        best, most = None, -1
        for recs in self.history.records_of(self.target, TEMPLATE):
            r = recs[0]
            rec_args = r.workload.get("args") or []
            if r.version != __version__ or len(rec_args) != 4 or rec_args[0] != args[0]:
                continue
            size = sizes_matching(args[1:], rec_args[1:])
            if size is not None and size > most:
                best, most = r, size
        if best is None:
            return None
        task = autotune.create_task(TEMPLATE, args, self.target)
        try:
            cfg = task.config_space.from_json(best.config)
        except ValueError:
            return None
        return args, cfg, json.dumps(cfg.to_json(), sort_keys=True)

    def best_record(self, op: str, attrs: dict, in_types, out_types):
        """The record :meth:`config_for` would use for the kernel, or None; reports nothing."""
        args = template_args(op, attrs, in_types, out_types)
        if not self._is_tunable(args, op, attrs, in_types, out_types):
            from .tuning_free import free_record  # issue 20

            return free_record(self.history, self.target, args)
        rec = self.history.best(self.target, TEMPLATE, args)
        if rec is None:
            from .tuning_free import free_record

            return free_record(self.history, self.target, args)
        return rec

    def cost_alone(self, rec) -> float:
        """The tuner's figure for ``rec``'s workload: its best record timed alone. A choice made
        inside runs of the model (graph.remeasure_in_model) times one layout only, so layouts
        are compared by these."""
        alone = [r for r in self.history.records_for(rec.key, rec.target) if not r.in_model]
        return alone[0].cost if alone else rec.cost

    def _is_tunable(self, args, op, attrs, in_types, out_types) -> bool:
        if args not in self._tunable:
            self._tunable[args] = is_tunable(op, attrs, in_types, out_types)
        return self._tunable[args]

    @staticmethod
    def schedule_of(found) -> tuple:
        """(schedule, args) for what :meth:`config_for` found: the record replayed (by the
        template-free workload when found names it)."""
        args, cfg, _config, *workload = found
        return autotune.get_template(workload[0] if workload else TEMPLATE).run_with(cfg, args)

    def schedule_for(self, op: str, attrs: dict, in_types, out_types):
        """((schedule, args), config json) for a tuned kernel, or None."""
        found = self.config_for(op, attrs, in_types, out_types)
        if found is None:
            return None
        return self.schedule_of(found), found[2]
