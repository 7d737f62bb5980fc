"""``graph.extract_tasks``: the tunable kernels of a graph, deduplicated by workload.

Each task carries the graph workload key (what ``graph.build`` looks records up by), the node's
op, attributes and types, a weight (how many nodes share the workload: a tuner spends its trials
where they count) and ``instantiate()`` -> (schedule, args) with the default schedule, the
starting point a template-free tuner explores from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import op_registry as R
from .build import workload_key
from .ir import Graph
from .passes import run_passes

# Ops whose kernels are worth tuning: the heavy ones (everything else is memory bound and its
# default schedule is as good as a tuned one).
TUNABLE = ("conv", "dense", "matmul", "max_pool", "avg_pool", "softmax", "layer_norm", "lrn")


@dataclass
class GraphTask:
    op: str
    attrs: dict
    in_types: list
    out_types: list
    key: str
    target: str
    weight: int = 1
    nodes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.op}_{self.key[:12]}"

    def instantiate(self):
        """(schedule, args) with the first default schedule that the core accepts."""
        from .lowering import lower_node, schedule_candidates

        ins, outs = lower_node(self.op, self.attrs, self.in_types, self.out_types)
        last = None
        for _name, make in schedule_candidates(self.op, outs):
            try:
                return make(), [*ins, *outs]
            except Exception as e:  # noqa: BLE001 - refused schedule: next candidate
                last = e
                ins, outs = lower_node(self.op, self.attrs, self.in_types, self.out_types)
        raise RuntimeError(f"no schedule for {self.name}: {last}")

    def __repr__(self) -> str:
        shapes = ", ".join(f"{t}{list(s)}" for s, t in self.in_types)
        return f"<GraphTask {self.name} ({shapes}) weight={self.weight}>"


def extract_tasks(g: Graph, target: str = "llvm", ops=TUNABLE) -> list[GraphTask]:
    """Tunable tasks of ``g`` (after the graph passes), by workload, heaviest op kinds only
    (``ops``); ordered by first appearance."""
    g = run_passes(g)
    tasks: dict[str, GraphTask] = {}
    for n in g.nodes:
        if n.op not in ops or R.get_op(n.op).alias:
            continue
        in_types = [(v.shape, v.dtype) for v in n.inputs]
        out_types = [(v.shape, v.dtype) for v in n.outputs]
        key = workload_key(n.op, n.attrs, in_types, out_types)
        t = tasks.get(key)
        if t is None:
            tasks[key] = GraphTask(n.op, dict(n.attrs), in_types, out_types, key, target,
                                   1, [n.name])
        else:
            t.weight += 1
            t.nodes.append(n.name)
    return list(tasks.values())
