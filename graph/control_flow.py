"""Run-time control flow in graphs: the ``if`` node, and how a graph holding one is built.

An ``if`` node reads ``[cond, *captured]`` and holds its two branches as graphs of their own
(``attrs["branches"]``): each branch graph's inputs stand for the outer values it reads
(``attrs["captured"][b]``: for branch ``b``, the positions in ``node.inputs[1:]`` of the values
its inputs take, in order); both give outputs of the node's shapes and dtypes.

Building (:func:`build_program`): the graph is cut at its ``if`` nodes into segments of plain
nodes; each segment is a graph built by :func:`tensorlang.graph.build` as usual (passes,
kernels, memory plan, driver), each branch is built the same way (recursively: nested ``if``),
and a :class:`tensorlang.runtime.program.Program` runs the pieces in order, reading the
condition between them. So each branch is a sub-plan with its own kernels and memory plan, in
both execution modes (each piece runs in the mode given), and the graph passes never see an
``if`` node.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .builder import Builder
from .ir import Graph, GraphError, Node, Value
from .passes.rewrite import copy_node

IF_OP = "if"


class Branches:
    """The two branch graphs of an ``if`` node (an attribute value that prints short). A
    branch that cannot run for the graph's shapes is the text saying why (a string): taking it
    at run time raises that."""

    __slots__ = ("else_graph", "then_graph")

    def __init__(self, then_graph: Graph | str, else_graph: Graph | str) -> None:
        self.then_graph = then_graph
        self.else_graph = else_graph

    def __iter__(self):
        return iter((self.then_graph, self.else_graph))

    def __str__(self) -> str:
        def size(b):
            return f"{len(b.nodes)} nodes" if isinstance(b, Graph) else "refused"

        return f"(then: {size(self.then_graph)}, else: {size(self.else_graph)})"


def make_if_node(b: Builder, name: str, cond: Value, graphs: list[Graph],
                 captures: list[list[Value]]) -> list[Value]:
    """Add an ``if`` node to builder ``b``: ``graphs`` = [then, else], ``captures[k]`` = the
    outer values branch k's inputs stand for, in the order of its inputs. Returns the node's
    outputs (typed as the branches' outputs, which must agree)."""
    runnable = [bg for bg in graphs if isinstance(bg, Graph)]
    if not runnable:
        raise GraphError(f"if node {name!r}: neither branch can run")
    for bg in runnable[1:]:
        for k, (t, e) in enumerate(zip(runnable[0].outputs, bg.outputs)):
            if t.shape != e.shape or t.dtype != e.dtype:
                raise GraphError(f"if node {name!r}: output {k} is {t.type_str()} in one "
                                 f"branch and {e.type_str()} in the other")
    typed = runnable[0]
    if cond.dtype != "bool" or cond.size != 1:
        raise GraphError(f"if node {name!r}: the condition must be one bool, got "
                         f"{cond.type_str()}")
    inputs: list[Value] = []
    for vals in captures:
        for v in vals:
            if all(v is not u for u in inputs):
                inputs.append(v)
    positions = [[next(i for i, u in enumerate(inputs) if u is v) for v in vals]
                 for vals in captures]
    node_name = b._fresh(name)
    outs = [Value(b._fresh(f"{node_name}:{k}" if len(typed.outputs) > 1 else node_name),
                  v.shape, v.dtype) for k, v in enumerate(typed.outputs)]
    node = Node(node_name, IF_OP, [cond, *inputs], outs,
                {"branches": Branches(*graphs), "captured": positions})
    for v in outs:
        v.producer = node
    b._nodes.append(node)
    return outs


def has_control_flow(g: Graph) -> bool:
    return any(n.op == IF_OP for n in g.nodes)


# ---------------------------------------------------------------------------- segments


def split_segments(g: Graph) -> list[Graph | Node]:
    """``g`` cut at its ``if`` nodes: the plain runs of nodes between them as graphs (inputs:
    the run-time values they read from before; outputs: the values read after them), and the
    ``if`` nodes themselves, in execution order."""
    runs: list[list[Node] | Node] = []
    for n in g.nodes:
        if n.op == IF_OP:
            runs.append(n)
        elif runs and isinstance(runs[-1], list):
            runs[-1].append(n)
        else:
            runs.append([n])
    read_after = _values_read_after(runs, g.outputs)
    return [run if isinstance(run, Node) else _segment_graph(g, k, run, read_after[k])
            for k, run in enumerate(runs)]


def _values_read_after(runs: list, outputs) -> list[set[int]]:
    """For each run, the ids of the values that later runs or the graph outputs read."""
    later: set[int] = {id(v) for v in outputs}
    out: list[set[int]] = [set() for _ in runs]
    for k in range(len(runs) - 1, -1, -1):
        out[k] = set(later)
        nodes = [runs[k]] if isinstance(runs[k], Node) else runs[k]
        later |= {id(v) for n in nodes for v in n.inputs}
    return out


def _segment_graph(g: Graph, k: int, nodes: list[Node], read_after: set[int]) -> Graph:
    produced = {id(v) for n in nodes for v in n.outputs}
    subst: dict[int, Value] = {}
    inputs: list[Value] = []
    copies = []
    for n in nodes:
        for v in n.inputs:
            if not v.is_constant and id(v) not in produced and id(v) not in subst:
                subst[id(v)] = Value(v.name, v.shape, v.dtype, v.layout)
                inputs.append(subst[id(v)])
        copies.append(copy_node(n, [subst.get(id(v), v) for v in n.inputs], subst))
    outputs = [subst[id(v)] for n in nodes for v in n.outputs if id(v) in read_after]
    return Graph(copies, inputs, outputs, name=f"{g.name}_part{k}")


def plain_graphs(g: Graph) -> list[Graph]:
    """The graphs without ``if`` nodes that building ``g`` compiles: its pieces between ``if``
    nodes and, recursively, those of every branch (what tuning extracts tasks from)."""
    out: list[Graph] = []
    for seg in split_segments(g):
        if isinstance(seg, Graph):
            out += [seg] if seg.outputs else []
        else:
            out += [p for bg in seg.attrs["branches"] if isinstance(bg, Graph)
                    for p in plain_graphs(bg)]
    return out


# ---------------------------------------------------------------------------- build


def build_program(g: Graph, report=None, **build_args: Any):
    """Build a graph with ``if`` nodes into a :class:`tensorlang.runtime.program.Program`
    (see the module docstring); ``build_args`` are :func:`tensorlang.graph.build`'s.
    ``report``: a BuildReport that gets every piece's steps (named "<piece>/<step>"),
    kernels and tuning notes."""
    from tensorlang.runtime.program import GraphStage, IfStage, Program, refusing_program

    from .build import build

    stages, reports = [], []
    for seg in split_segments(g):
        if isinstance(seg, Graph):
            if not seg.outputs:
                continue  # nothing after it reads what it computes
            gm = build(seg, **build_args)
            stages.append(GraphStage(gm, [v.name for v in seg.inputs],
                                     [v.name for v in seg.outputs]))
            reports.append((seg.name, gm.build_report))
            continue
        outer = [v.name for v in seg.inputs[1:]]
        programs = [build_program(bg, **build_args) if isinstance(bg, Graph) else
                    refusing_program(f"if node {seg.name!r}, {label} branch: {bg}",
                                     len(seg.outputs))
                    for bg, label in zip(seg.attrs["branches"], ("then", "else"))]
        feeds = [[outer[i] for i in pos] for pos in seg.attrs["captured"]]
        stages.append(IfStage(seg.inputs[0].name, programs, feeds,
                              [v.name for v in seg.outputs]))
        for label, prog in zip(("then", "else"), programs):
            if prog.build_report is not None:
                reports.append((f"{seg.name}.{label}", prog.build_report))
    prog = Program(g.name, [(v.name, tuple(v.shape), v.dtype) for v in g.inputs],
                   [v.name for v in g.outputs], stages,
                   {v.name: v.data for v in g.outputs if v.is_constant},
                   mode=build_args.get("mode", "graph"))
    prog.build_report = ProgramReport(reports)
    if report is not None:
        _merge_reports(report, reports)
    return prog


def _merge_reports(into, pieces: list) -> None:
    """Every piece's BuildReport (recursively through branches) into ``into``."""
    for name, rep in pieces:
        if isinstance(rep, ProgramReport):
            _merge_reports(into, [(f"{name}/{n}", r) for n, r in rep.pieces])
            continue
        into.steps.extend(dataclasses.replace(st, name=f"{name}/{st.name}")
                          for st in rep.steps)
        into.passes.extend(rep.passes)
        into.kernels.extend(rep.kernels)
        into.untuned.extend(rep.untuned)
        into.tuned_failures.extend(rep.tuned_failures)
        into.driver_s += rep.driver_s
        into.total_s += rep.total_s


class ProgramReport:
    """The build reports of a program's pieces, each under its piece's name."""

    def __init__(self, pieces: list) -> None:
        self.pieces = pieces  # (name, BuildReport or ProgramReport)

    def __str__(self) -> str:
        return "\n".join(f"[{name}]\n{report}" for name, report in self.pieces)
