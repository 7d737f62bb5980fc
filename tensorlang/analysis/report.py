"""`tl.analysis.dependences(s)`: the polyhedral model of a schedule, readable."""

from __future__ import annotations

import islpy as isl

from .dataflow import maps_of
from .legality import _SERIALS, _Context, _stage_key
from .model import Binding, Dependence
from .timemap import PlacementError


class Dependences:
    """Statements (iteration domains), accesses, dependences and the schedule's time maps.

    Attributes: `statements` (model.Statement, with `.domain`), `reads` / `writes`
    (isl.UnionMap, instance -> array element), `raw` / `war` / `waw` (isl.UnionMap, source
    instance -> sink instance), `deps` (model.Dependence, one per statement pair and kind, with
    `.reduction` set on the dependences between updates of one accumulator), `schedule`
    (isl.UnionMap instance -> time, or None when an attachment cannot be lowered)."""

    def __init__(self, schedule, binding: Binding):
        model = binding.model
        self.statements = list(model.statements)
        self.reads = model.reads_all
        self.writes = model.writes
        self.raw, self.war, self.waw = model.raw, model.war, model.waw
        self.deps: list[Dependence] = list(model.deps)
        index = {st: k for k, st in enumerate(schedule.stages)}
        skeys = tuple(_stage_key(st, index) for st in schedule.stages)
        self.schedule: isl.UnionMap | None = None
        self.placement_error: str | None = None
        try:
            ctx = _Context(schedule, binding, _SERIALS[model], skeys)
            ctx.layout.build_all()
        except PlacementError as e:
            self.placement_error = e.text
        else:
            umap = None
            for s in self.statements:
                m = isl.UnionMap.from_map(ctx.time_map(s))
                umap = m if umap is None else umap.union(m)
            self.schedule = umap

    def __str__(self) -> str:
        lines = ["statements (iteration domains):"]
        lines += [f"  {s.domain}" for s in self.statements]
        lines.append("reads:")
        lines += [f"  {m}" for m in maps_of(self.reads)]
        lines.append("writes:")
        lines += [f"  {m}" for m in maps_of(self.writes)]
        for kind, title in (("RAW", "read after write"), ("WAR", "write after read"),
                            ("WAW", "write after write")):
            lines.append(f"{kind} ({title}):")
            items = [d for d in self.deps if d.kind == kind]
            if not items:
                lines.append("  (none)")
            for d in items:
                tag = "  [reduction: any order, never concurrently]" if d.reduction else ""
                lines.append(f"  {d.map.coalesce()}{tag}")
        lines.append("schedule (instance -> time):")
        if self.schedule is None:
            lines.append(f"  cannot be built: {self.placement_error}")
        else:
            lines += [f"  {m}" for m in maps_of(self.schedule)]
        return "\n".join(lines)

    __repr__ = __str__

