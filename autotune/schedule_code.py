"""A schedule's recorded steps written as the Python schedule code a user would type for them
(TVM's ``SearchTask.print_best(log, print_mode="schedule")``).

A step names its loops by their names ("i.outer", "i.outer.j.outer.fused"); code needs a
variable per loop, assigned by the call that made it. So the steps are replayed one by one on a
fresh schedule of the workload, and each loop gets the variable ``<stage>_<loop>`` (dots as
underscores, ".outer" / ".inner" / ".fused" shortened to "_o" / "_i" / "_f"); a stage's root
loops are unpacked from ``s[T].op.axis`` before its first step, and again after a step that
gives the stage a new compute (cache_write, cache_read, rfactor). The code assumes ``s`` is
``tl.create_schedule`` of the workload's outputs and each tensor is a variable named as its op.
"""

from __future__ import annotations

import re

from ..schedule.schedule import Schedule, Step, Trace

_SHORT = ((".outer", "_o"), (".inner", "_i"), (".fused", "_f"))


def identifier(name: str) -> str:
    """A Python variable name for a stage or loop name."""
    for long, short in _SHORT:
        name = name.replace(long, short)
    name = re.sub(r"\W", "_", name)
    return name if name.isidentifier() else f"_{name}"


def schedule_code(s: Schedule, trace: Trace | list) -> str:
    """The Python code of `trace`'s steps, replayed on `s` (a fresh schedule of the workload,
    which this changes: it ends as the trace leaves it)."""
    writer = _Writer(s)
    steps = trace if isinstance(trace, Trace) else Trace.loads(trace)
    for step in steps:
        writer.write(step)
    return "\n".join(writer.lines)


class _Writer:
    def __init__(self, s: Schedule):
        self.s = s
        self.lines: list[str] = []
        # stage name -> its root loops when its loop variables were unpacked: a stage given a
        # new compute has new root loops, unpacked again
        self._declared: dict[str, tuple] = {}
        # variable names in use: the tensors' first (they must be their ops' names), then
        # each loop's, made unique where two names shorten alike ("x_o" and "x.outer")
        self._taken = {identifier(op.name) for op in s.placeholders}
        self._taken |= {identifier(st.name) for st in s.stages}
        self._loops: dict[tuple[str, str], str] = {}

    def tensor(self, stage: str) -> str:
        name = identifier(stage)
        self._taken.add(name)
        return name

    def loop(self, stage: str, name: str) -> str:
        self._declare(stage)
        return self._loop_name(stage, name)

    def _loop_name(self, stage: str, name: str) -> str:
        if (stage, name) not in self._loops:
            base = candidate = identifier(f"{stage}_{name}")
            n = 1
            while candidate in self._taken:
                n += 1
                candidate = f"{base}_{n}"
            self._taken.add(candidate)
            self._loops[(stage, name)] = candidate
        return self._loops[(stage, name)]

    def _declare(self, stage: str) -> None:
        st = self.s.stage_by_name(stage)
        roots = (*st.op.axis, *st.op.reduce_axis)
        if self._declared.get(stage) == roots:
            return
        self._declared[stage] = roots
        if not roots:
            return
        names = ", ".join(self._loop_name(stage, iv.var.name) for iv in roots)
        t = self.tensor(stage)
        comma = "," if len(roots) == 1 else ""
        self.lines.append(f"{names}{comma} = tuple(s[{t}].op.axis) + "
                          f"tuple(s[{t}].op.reduce_axis)")

    def write(self, step: Step) -> None:
        code = self._before(step)
        result = self.s.apply_step(step)
        self.lines.append(self._after(step, code, result))

    def _before(self, step: Step) -> str:
        """The call of `step` (its loop variables exist before it runs)."""
        kind, t = step.kind, self.tensor(step.stage)
        if kind == "cache_write":
            return f's.cache_write({t}, {step.args["scope"]!r}{_layout(step)})'
        if kind == "cache_read":
            readers = ", ".join(self.tensor(r) for r in step.args["readers"])
            return f's.cache_read({t}, {step.args["scope"]!r}, [{readers}]{_layout(step)})'
        if kind == "compute_at":
            parent = step.args["parent"]
            return f"s[{t}].compute_at(s[{self.tensor(parent)}], " \
                   f"{self.loop(parent, step.loops[0])})"
        loops = ", ".join(self.loop(step.stage, n) for n in step.loops)
        if kind == "rfactor":
            axis = step.args.get("factor_axis", step.args.get("factor_index", 0))
            return f"s.rfactor({t}, {loops}, factor_axis={axis})"
        if kind == "split":
            return f"s[{t}].split({loops}, {_split_args(step.args)})"
        if kind == "pragma":
            return f"s[{t}].pragma({loops}, {step.args['key']!r}, {step.args['value']!r})"
        if kind == "tensorize":
            return f"s[{t}].tensorize({loops}, get_intrin({step.args['intrin']!r}))"
        return f"s[{t}].{kind}({loops})"  # fuse, reorder, annotations, inline, root

    def _after(self, step: Step, code: str, result) -> str:
        """The line of `step`: its call, assigned to the variables of what it made."""
        if step.kind == "split":
            outer, inner = result
            return f"{self.loop(step.stage, outer.var.name)}, " \
                   f"{self.loop(step.stage, inner.var.name)} = {code}"
        if step.kind == "fuse":
            return f"{self.loop(step.stage, result.var.name)} = {code}"
        if step.kind in ("cache_write", "cache_read", "rfactor"):
            if isinstance(result, (list, tuple)):  # a multi-output compute: one stage
                return f"{self.tensor(result[0].op.name)} = {code}[0]"
            return f"{self.tensor(result.op.name)} = {code}"
        return code


def _layout(step: Step) -> str:
    layout = step.args.get("layout")
    return "" if layout is None else f", layout={tuple(layout)!r}"


def _split_args(args: dict) -> str:
    for key in ("factor", "nparts"):
        value = args.get(key)
        if value is not None:
            # a symbolic factor is recorded as {"var": name}: the shape variable of that name
            return f"{key}={value['var'] if isinstance(value, dict) else value!r}"
    raise ValueError(f"a split step records a factor or nparts, got {args!r}")
