"""Specialised variants of a graph with shape variables (issue 19):
``graph.build(g, specialize={"seq": [128, 512]})``.

A variant is the graph with some variables fixed to sizes (the others stay symbolic): every
value's shape re-inferred from the inputs' shapes with those sizes, a reshape's or expand's
target shape substituted the same way. Each variant is built as a model of its own; the
symbolic build dispatches a run to the variant whose sizes match the inputs
(``GraphModule.add_variant``), so sizes that matter run kernels compiled for them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from tensorlang.ir import expr as E

from . import symbolic as S
from .builder import Builder
from .ir import Graph, GraphError, Value

# ops whose attribute "shape" holds dimensions (symbolic ones as their text)
_SHAPE_ATTR_OPS = ("reshape", "expand")


def variants(specialize: Mapping[str, Sequence[int]], names: Sequence[str]
             ) -> list[dict[str, int]]:
    """Every combination of the given sizes, checked: known variables, sizes >= 0."""
    if not isinstance(specialize, Mapping) or not specialize:
        raise GraphError(f"specialize must map shape variables to lists of sizes, got "
                         f"{specialize!r}")
    unknown = sorted(set(specialize) - set(names))
    if unknown:
        raise GraphError(f"specialize names {unknown}, which are not shape variables of the "
                         f"graph (it has {list(names) or 'none'})")
    lists = []
    for v, sizes in specialize.items():
        sizes = [sizes] if isinstance(sizes, int) else list(sizes)
        if not sizes or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                for n in sizes):
            raise GraphError(f"specialize[{v!r}] must be sizes (ints >= 0), got {sizes!r}")
        lists.append([(v, n) for n in dict.fromkeys(sizes)])
    return [dict(combo) for combo in itertools.product(*lists)]


def substitute(d: Any, env: Mapping[str, int]) -> Any:
    """A dimension with the variables of ``env`` replaced by their sizes (canonical form)."""
    return S.dim(_subst(S.dim(d), env)) if S.is_symbolic(d) else d


def _subst(e: Any, env: Mapping[str, int]) -> Any:
    if isinstance(e, E.Var):
        return env.get(e.name, e)
    if isinstance(e, E.BinaryOp):
        a, b = _subst(e.a, env), _subst(e.b, env)
        if isinstance(a, int) and isinstance(b, int):
            return S.evaluate(type(e)(E.const(a, "int64"), E.const(b, "int64")), {})
        return type(e)(_as_expr(a), _as_expr(b))
    return e


def _as_expr(x: Any) -> Any:
    return E.const(x, "int64") if isinstance(x, int) else x


def specialise(g: Graph, env: Mapping[str, int]) -> Graph:
    """``g`` with the variables of ``env`` fixed: a new graph, types inferred again."""
    b = Builder(f"{g.name}", fold=False)
    new: dict[int, Value] = {}
    for v in g.inputs:
        new[id(v)] = b.input(v.name, [substitute(d, env) for d in v.shape], v.dtype, v.layout)
    for n in g.nodes:
        ins = [new.get(id(v), v) for v in n.inputs]
        attrs = dict(n.attrs)
        if n.op in _SHAPE_ATTR_OPS and "shape" in attrs:
            attrs["shape"] = [substitute(S.parse(d), env) for d in attrs["shape"]]
        outs = b.op(n.op, ins, name=n.name, outputs=[o.name for o in n.outputs], **attrs)
        for o, out in zip(n.outputs, outs if isinstance(outs, tuple) else (outs,)):
            new[id(o)] = out
    return b.build([new.get(id(v), v) for v in g.outputs], name=g.name)
