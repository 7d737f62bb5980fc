"""What the ONNX importer's converters share: its errors, the scope of ONNX names, the context a
converter sees and the tables of converters (graph/frontends/onnx.py walks the model; the
operator families register here from files of their own: onnx_vision, onnx_misc, onnx_rnn,
onnx_control_flow; onnxruntime's contrib operators, by domain, from onnx_contrib), kept apart
so that those files and the walk import this module, not each other."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..builder import Builder
from ..ir import GraphError, Value


class OnnxImportError(GraphError):
    """The model cannot be imported: malformed file, dynamic shapes, unsupported attributes."""


class UnsupportedOperatorError(OnnxImportError):
    """What the importer cannot do in a model, all of it: ``.unsupported`` lists (op_type, node
    name, opset) for each node of an operator it does not support; ``.refused`` (op_type, node
    name, opset, OnnxImportError) for each node of a supported operator that it refuses (an
    attribute value or mode it does not handle, a shape it needs that is only known at run
    time)."""

    def __init__(self, unsupported: list[tuple[str, str, int]],
                 refused: list[tuple[str, str, int, OnnxImportError]] = (),
                 why: dict[tuple, str] | None = None) -> None:
        self.unsupported = unsupported
        self.refused = list(refused)
        why = why or {}
        lines = []
        if unsupported:
            kinds = sorted({u[0] for u in unsupported})
            lines.append(f"{len(unsupported)} node(s) use operators tensorlang does not support "
                         f"({', '.join(kinds)}):")
            lines += [f"  {op} (node {name!r}, opset {opset})"
                      + (f": {why[(op, name, opset)]}" if (op, name, opset) in why else "")
                      for op, name, opset in unsupported]
        if self.refused:
            lines.append(f"{len(self.refused)} node(s) of supported operators are refused:")
            lines += [f"  {e}" for *_, e in self.refused]
        super().__init__("\n".join(lines))


def refuse(c, what: str) -> OnnxImportError:
    """The error for node ``c`` (a converter's context): its name, op type and opset, then
    what is wrong."""
    return OnnxImportError(f"node {c.node_name!r} ({c.op_label or c.op_type}, opset {c.opset}): "
                           f"{what}")


def _np_dtype(elem_type: int) -> np.dtype:
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        raise OnnxImportError(f"unknown ONNX element type {elem_type}") from None


class _Unknown:
    """What an ONNX name holds when its producer cannot be imported (an unsupported operator,
    or a node downstream of one): the walk goes on to list every such operator at once."""

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN = _Unknown()


class _Scope:
    """ONNX name -> Value (or UNKNOWN) for one graph. A subgraph's scope sees its parents'
    names (ONNX subgraphs read outer values by name); ``capture``, when set, turns an outer
    run-time value into an input of the subgraph's own graph (a branch built apart)."""

    def __init__(self, parent: _Scope | None = None,
                 capture: Callable[[str, Value], Value] | None = None) -> None:
        self.local: dict[str, Any] = {}
        self.parent = parent
        self.capture = capture

    def __contains__(self, name: str) -> bool:
        return name in self.local or (self.parent is not None and name in self.parent)

    def get(self, name: str):
        if name in self.local:
            return self.local[name]
        v = self.parent.get(name)
        if self.capture is not None and isinstance(v, Value) and not v.is_constant:
            v = self.capture(name, v)
            self.local[name] = v
        return v

    def set(self, name: str, v) -> None:
        self.local[name] = v


class _Ctx:
    """What a converter sees: the builder it adds nodes to, the model's opset, the node being
    imported (name, op type, outputs) and the import's shared state (the unsupported nodes
    found so far, the names reserved for the top graph's values)."""

    def __init__(self, b: Builder, opset: int, scope: _Scope, names: dict[str, str],
                 unsupported: list) -> None:
        self.b = b
        self.opset = opset
        self.scope = scope
        self.names = names
        self.unsupported = unsupported
        # nodes whose converter refused them (op, node, opset, error), listed with the
        # unsupported ones; None: raise at once
        self.refused: list | None = []
        self.bound: set[int] = set()  # ids of values bound to an ONNX name
        self.sub_named: set[int] = set()  # ... to a subgraph's name only (fresh, renamable)
        self.output_names: set[str] = set()  # the top graph's outputs (empty in subgraphs)
        self.unsupported_why: dict[tuple, str] = {}  # unsupported entry -> why not folded
        self.node = None  # the NodeProto being imported
        self.node_name = ""
        self.op_type = ""
        self.op_label = ""  # op_type, or domain::op_type outside the default domain
        self.num_outputs = 0
        self.outputs_read: list[bool] = []
        # body nodes imported by the outermost loop being unrolled and every loop inside it,
        # as a one-item list shared with the subgraphs' contexts (None: no loop being unrolled);
        # a per-loop count let nested loops multiply past the limit (an import that never ends)
        self.unrolled: list[int] | None = None
        # Slice bounds whose case the sizes decide (2048 - seq: from which end it counts;
        # max(2048 - seq, 0)): the nodes read exactly (bound_cases_found); an import whose
        # exact extents the rest of the model refuses is repeated taking the evident case,
        # checked at run time (take_bound_cases; graph/frontends/onnx.py _slice_bound)
        self.bound_cases_found: list[str] = []
        self.take_bound_cases = False

    def child(self, scope: _Scope, b: Builder | None = None) -> _Ctx:
        """The context of a subgraph: its own scope, the same builder unless given another
        (a run-time branch builds a graph of its own)."""
        sub = _Ctx(b or self.b, self.opset, scope, {}, self.unsupported)
        sub.refused = self.refused
        sub.unsupported_why = self.unsupported_why
        sub.unrolled = self.unrolled
        sub.bound_cases_found = self.bound_cases_found
        sub.take_bound_cases = self.take_bound_cases
        if b is None:  # the same graph: its values and names are shared
            sub.bound, sub.sub_named = self.bound, self.sub_named
        return sub

    def const_array(self, v: Value | None, what: str) -> np.ndarray | None:
        if v is None:
            return None
        if not v.is_constant:
            raise OnnxImportError(
                f"node {self.node_name!r} ({self.op_label or self.op_type}, opset {self.opset}): "
                f"{what} must be known at compile time (a constant or computable from static "
                f"shapes); "
                f"{v.name!r} is computed at run time{_run_time_origin(v)}")
        return v.data

    def op(self, op: str, inputs, **attrs) -> Value:
        return self.b.op(op, inputs, name=self.node_name, **attrs)


def _input_origin(v: Value) -> list[str]:
    """The graph inputs whose values a run-time value is computed from (their values, not
    their shapes: shapes are static and fold)."""
    seen, stack, found = set(), [v], []
    while stack:
        x = stack.pop()
        if id(x) in seen or x.is_constant:
            continue
        seen.add(id(x))
        if x.producer is None:
            found.append(x.name)
        else:
            stack.extend(x.producer.inputs)
    return sorted(found)


def _run_time_origin(v: Value) -> str:
    found = _input_origin(v)
    return f", from the values of graph input(s) {found}" if found else ""


Converter = Callable[[_Ctx, list, dict], list]
CONVERTERS: dict[str, Converter] = {}
# op -> {version: why it is refused}: versions a converter refuses as a whole (with an
# OnnxImportError saying so), left out of the supported list
REFUSED_VERSIONS: dict[str, dict[int, str]] = {}


def _conv(*names: str):
    def deco(fn: Converter) -> Converter:
        for n in names:
            CONVERTERS[n] = fn
        return fn

    return deco


# (domain, op_type) -> converter for the operators of other domains (onnxruntime's contrib
# operators, onnx_contrib.py) and for those onnxruntime registers in the default domain that
# ONNX does not define (SimplifiedLayerNormalization): apart from CONVERTERS, whose keys are
# ONNX's own operators, listed with the versions of their ONNX schemas
DOMAIN_CONVERTERS: dict[tuple[str, str], Converter] = {}
# domain -> why every operator of it is refused (said with each of its nodes)
REFUSED_DOMAINS: dict[str, str] = {}


def _conv_in(domain: str, *names: str):
    def deco(fn: Converter) -> Converter:
        for n in names:
            DOMAIN_CONVERTERS[(domain, n)] = fn
        return fn

    return deco


def is_default_domain(domain: str) -> bool:
    return domain in ("", "ai.onnx")


def converter_for(domain: str, op_type: str) -> Converter | None:
    """The converter of ``domain::op_type``; None when tensorlang has none."""
    if is_default_domain(domain):
        return CONVERTERS.get(op_type) or DOMAIN_CONVERTERS.get(("", op_type))
    return DOMAIN_CONVERTERS.get((domain, op_type))


def op_label(domain: str, op_type: str) -> str:
    """How errors name an operator: ``op_type`` in the default domain, else ``domain::op``."""
    return op_type if is_default_domain(domain) else f"{domain}::{op_type}"


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:\-]", "_", name) or "v"
