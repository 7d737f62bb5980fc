"""ONNX control flow: ``If``, ``Loop``, ``Scan``.

- ``If`` whose condition is known at import (a constant, or computed from static shapes) is its
  taken branch, imported in place. A condition computed at run time makes an ``if`` graph node
  holding both branches as graphs of their own (:mod:`tensorlang.graph.control_flow`); the
  build gives each branch its own kernels and memory plan and the runtime runs the one the
  condition picks. Both branches must give outputs of the same shapes and dtypes (refused
  otherwise, naming the output).
- ``Loop`` and ``Scan`` with a trip count known at import are unrolled: the body is imported
  once per iteration, so the loop-carried values and the per-iteration outputs are plain
  values and whatever is constant folds. At most :data:`MAX_UNROLL_ITERATIONS` iterations and
  :data:`MAX_UNROLL_NODES` body nodes in all; a trip count or a ``Loop`` condition that is only
  known at run time is refused, naming the node.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..builder import Builder
from ..control_flow import make_if_node
from ..ir import GraphError, Value
from .onnx_context import (
    REFUSED_VERSIONS,
    UNKNOWN,
    OnnxImportError,
    _conv,
    _Ctx,
    _sanitize,
    _Scope,
)

MAX_UNROLL_ITERATIONS = 4096
MAX_UNROLL_NODES = 50_000


def _import_body(c: _Ctx, body) -> None:
    """The importer's walk over a subgraph: its own initializers, then its nodes (onnx.py,
    which imports this module to register its converters: looked up when a subgraph is
    imported, not at import time)."""
    from .onnx import import_body

    import_body(c, body)


def _where(c: _Ctx) -> str:
    return f"node {c.node_name!r} ({c.op_type}, opset {c.opset})"


def _condition(c: _Ctx, v: Value) -> bool | None:
    """The value of a boolean condition known at import, None when it is computed at run
    time."""
    if v.size != 1:
        raise OnnxImportError(f"{_where(c)}: the condition must hold one element, got shape "
                              f"{list(v.shape)}")
    if str(v.dtype) != "bool":  # ONNX types it bool: 0.5 or 2 would pick a branch silently
        raise OnnxImportError(f"{_where(c)}: the condition must be a bool, got {v.dtype}")
    if not v.is_constant:
        return None
    return bool(np.asarray(v.data).reshape(-1)[0])


def _import_inline(c: _Ctx, body, bindings: dict[str, Value]) -> list:
    """Import subgraph ``body`` into ``c``'s builder, its inputs bound to ``bindings`` (by the
    body's input names); returns the values of its outputs (UNKNOWN where an operator inside
    is unsupported)."""
    scope = _Scope(parent=c.scope)
    for name, v in bindings.items():
        scope.set(name, v)
    sub = c.child(scope)
    _import_body(sub, body)
    return [scope.get(o.name) for o in body.output]


# ---------------------------------------------------------------------------- If


@_conv("If")
def _if(c, ins, a):
    taken = _condition(c, ins[0])
    if taken is not None:
        return _import_inline(c, a["then_branch"] if taken else a["else_branch"], {})
    return _run_time_if(c, ins[0], a["then_branch"], a["else_branch"])


class _Branch:
    """One branch imported as a graph of its own: the outer run-time values it reads become its
    inputs (``captured``: outer value -> the branch input standing for it)."""

    def __init__(self, c: _Ctx, body, label: str) -> None:
        self.label = label
        self.builder = Builder(f"{c.node_name}_{label}", fold=True)
        self.captured: dict[int, tuple[Value, Value]] = {}
        self.error: str | None = None
        scope = _Scope(parent=c.scope, capture=self._capture)
        sub = c.child(scope, self.builder)
        sub.refused = []  # the branch's own: a refusal makes it a refusing branch
        try:
            _import_body(sub, body)
        except (OnnxImportError, GraphError) as e:
            sub.refused.append(e)
        if sub.refused:
            # a branch written for other shapes than the ones given (silero-vad's 8 kHz
            # branch with a 16 kHz chunk): it cannot run for them, the other branch can
            self.error = "; ".join(str(r[-1] if isinstance(r, tuple) else r)
                                   for r in sub.refused)
            self.outputs = [None] * len(body.output)
            return
        self.outputs = [scope.get(o.name) for o in body.output]

    def _capture(self, name: str, outer: Value) -> Value:
        if id(outer) not in self.captured:
            b = self.builder
            fresh = b._fresh(_sanitize(name))
            b._names.discard(fresh)  # input() reserves the name itself
            inner = b.input(fresh, outer.shape, outer.dtype)
            self.captured[id(outer)] = (outer, inner)
        return self.captured[id(outer)][1]

    def graph(self):
        """The branch's graph (its import error's text where it cannot import). Every output is computed by a node of the branch (a copy where
        the branch returns a constant, one of its inputs, or one value twice): the runtime
        hands each branch output its own buffer."""
        if self.error is not None:
            return self.error
        b = self.builder
        b.fold = False
        inputs = {id(inner) for _, inner in self.captured.values()}
        outs, seen = [], set()
        for i, v in enumerate(self.outputs):
            if v.is_constant or id(v) in inputs or id(v) in seen:
                v = b.op("copy", [v], name=f"out{i}_copy")
            seen.add(id(v))
            outs.append(v)
        return b.build(outs)


def _run_time_if(c: _Ctx, cond: Value, then_body, else_body) -> list:
    branches = [_Branch(c, then_body, "then"), _Branch(c, else_body, "else")]
    if any(v is UNKNOWN for br in branches for v in br.outputs):
        return [UNKNOWN] * len(branches[0].outputs)
    if all(br.error is not None for br in branches):
        raise OnnxImportError(f"{_where(c)}: neither branch imports; then_branch: "
                              f"{branches[0].error}; else_branch: {branches[1].error}")
    if all(br.error is None for br in branches):
        _check_same_outputs(c, branches)
    graphs = [br.graph() for br in branches]
    captures = [[outer for outer, _ in br.captured.values()] if br.error is None else []
                for br in branches]
    return make_if_node(c.b, c.node_name, cond, graphs, captures)


def _check_same_outputs(c: _Ctx, branches: list[_Branch]) -> None:
    then_outs, else_outs = branches[0].outputs, branches[1].outputs
    if len(then_outs) != len(else_outs):
        raise OnnxImportError(f"{_where(c)}: the branches give {len(then_outs)} and "
                              f"{len(else_outs)} outputs")
    for k, (t, e) in enumerate(zip(then_outs, else_outs)):
        if t.shape != e.shape or t.dtype != e.dtype:
            raise OnnxImportError(
                f"{_where(c)}: output {k} is {t.dtype}{list(t.shape)} in then_branch and "
                f"{e.dtype}{list(e.shape)} in else_branch; a condition computed at run time "
                "needs both branches to give the same shapes and dtypes (tensorlang compiles "
                "for static shapes)")


# ---------------------------------------------------------------------------- Loop


class _Unroll:
    """Counts the iterations and nodes an unrolled loop imports, refusing past the limits."""

    def __init__(self, c: _Ctx, body) -> None:
        self.c, self.per_iteration, self.iterations = c, len(body.node), 0
        # the node count is shared with the loops nested in this one (see _Ctx.unrolled)
        self.nodes = c.unrolled  # (opened by _node_budget)

    def next(self) -> None:
        self.iterations += 1
        self.nodes[0] += self.per_iteration
        if self.iterations > MAX_UNROLL_ITERATIONS or self.nodes[0] > MAX_UNROLL_NODES:
            raise OnnxImportError(
                f"{_where(self.c)}: unrolling stops at {MAX_UNROLL_ITERATIONS} iterations and "
                f"{MAX_UNROLL_NODES} body nodes in all, nested loops' counted together (this "
                f"body has {self.per_iteration} nodes); loops with longer trip counts are not "
                "supported")


@_conv("Loop")
def _loop(c, ins, a):
    body = a["body"]
    trip = ins[0] if ins and ins[0] is not None else None
    cond_in = ins[1] if len(ins) > 1 and ins[1] is not None else None
    carried = list(ins[2:])
    n_scan = len(body.output) - 1 - len(carried)
    if len(body.input) != 2 + len(carried) or n_scan < 0:
        raise OnnxImportError(f"{_where(c)}: the body takes {len(body.input)} inputs and gives "
                              f"{len(body.output)} outputs for {len(carried)} loop-carried "
                              "values (expected 2 + N inputs, 1 + N + K outputs)")
    max_trips = _static_trip_count(c, trip)
    keep_going = True if cond_in is None else _condition(c, cond_in)
    if keep_going is None:
        raise OnnxImportError(f"{_where(c)}: the loop condition is computed at run time (a "
                              "dynamic trip count); only loops whose trip count is known at "
                              "import are supported")
    if max_trips is None and cond_in is None:
        raise OnnxImportError(f"{_where(c)}: a loop without trip count or condition never ends")
    with _node_budget(c):
        return _unroll_loop(c, body, max_trips, cond_in, keep_going, carried, n_scan)


@contextlib.contextmanager
def _node_budget(c: _Ctx):
    """The outermost Loop or Scan opens the count of unrolled nodes that the loops nested in
    it add to (see _Ctx.unrolled); it closes with it."""
    outermost = c.unrolled is None
    if outermost:
        c.unrolled = [0]
    try:
        yield
    finally:
        if outermost:
            c.unrolled = None


def _unroll_loop(c, body, max_trips, cond_in, keep_going, carried, n_scan) -> list:
    scans: list[list[Value]] = [[] for _ in range(n_scan)]
    unroll, i = _Unroll(c, body), 0
    while keep_going and (max_trips is None or i < max_trips):
        unroll.next()
        bindings = {body.input[0].name: c.b.const(np.array(i, np.int64), name="iter"),
                    body.input[1].name: c.b.const(np.array(keep_going), name="cond")}
        bindings.update({inp.name: v for inp, v in zip(body.input[2:], carried)})
        outs = _import_inline(c, body, bindings)
        if any(v is UNKNOWN for v in outs):
            return [UNKNOWN] * (len(carried) + n_scan)
        if cond_in is not None:
            keep_going = _body_condition(c, outs[0], i)
        carried = outs[1:1 + len(carried)]
        for k, v in enumerate(outs[1 + len(carried):]):
            scans[k].append(v)
        i += 1
    return carried + [_stack(c, vals, 0, k) for k, vals in enumerate(scans)]


def _static_trip_count(c: _Ctx, trip: Value | None) -> int | None:
    if trip is None:
        return None
    if not trip.is_constant:
        raise OnnxImportError(f"{_where(c)}: the trip count M is computed at run time; only "
                              "loops whose trip count is known at import are supported")
    m = np.asarray(trip.data)
    # ONNX types M int64, one element: a float was truncated, a vector read at [0] and an
    # empty one failed on an index
    if m.size != 1 or m.dtype.kind not in "iu":
        raise OnnxImportError(f"{_where(c)}: the trip count M must be one integer, got "
                              f"{m.dtype}{list(m.shape)}")
    return int(m.reshape(-1)[0])


def _body_condition(c: _Ctx, v: Value, i: int) -> bool:
    keep = _condition(c, v)
    if keep is None:
        raise OnnxImportError(f"{_where(c)}: the condition the body computes (iteration {i}) "
                              "depends on run-time values, so the trip count is dynamic; only "
                              "loops whose trip count is known at import are supported")
    return keep


def _stack(c: _Ctx, vals: list[Value], axis: int, k: int) -> Value:
    """The per-iteration values of scan output ``k`` stacked along a new ``axis``."""
    if not vals:
        raise OnnxImportError(f"{_where(c)}: scan output {k} of a loop that runs no iteration "
                              "(an empty tensor) is not supported")
    rank = len(vals[0].shape) + 1
    axis = axis % rank
    parts = []
    for v in vals:
        shape = list(v.shape)
        shape.insert(axis, 1)
        parts.append(c.op("reshape", [v], shape=shape))
    return parts[0] if len(parts) == 1 else c.op("concat", parts, axis=axis)


# ---------------------------------------------------------------------------- Scan


REFUSED_VERSIONS["Scan"] = {8: "Scan-8 (batched, with sequence_lens)"}


@_conv("Scan")
def _scan(c, ins, a):
    if c.opset < 9:
        raise OnnxImportError(f"{_where(c)}: Scan-8 (batched, with sequence_lens) is not "
                              "supported; export with opset 9 or later")
    body = a["body"]
    n_in = int(a["num_scan_inputs"])
    n_state = len(ins) - n_in
    n_out = len(body.output) - n_state
    if n_state < 0 or n_out < 0 or len(body.input) != len(ins):
        raise OnnxImportError(f"{_where(c)}: the body's {len(body.input)} inputs and "
                              f"{len(body.output)} outputs do not fit {len(ins)} inputs with "
                              f"num_scan_inputs={n_in}")
    states, seqs = list(ins[:n_state]), list(ins[n_state:])
    in_axes = [ax % len(s.shape) for ax, s in zip(a.get("scan_input_axes", [0] * n_in), seqs)]
    in_rev = a.get("scan_input_directions", [0] * n_in)
    out_axes = a.get("scan_output_axes", [0] * n_out)
    out_rev = a.get("scan_output_directions", [0] * n_out)
    lengths = {s.shape[ax] for s, ax in zip(seqs, in_axes)}
    if len(lengths) != 1:
        raise OnnxImportError(f"{_where(c)}: the scan inputs have different lengths "
                              f"{sorted(lengths)} along their scan axes")
    steps = lengths.pop()
    scans: list[list[Value]] = [[] for _ in range(n_out)]
    with _node_budget(c):
        unroll = _Unroll(c, body)
        for t in range(steps):
            unroll.next()
            slices = [_slice_step(c, s, ax, steps - 1 - t if rev else t)
                      for s, ax, rev in zip(seqs, in_axes, in_rev)]
            bindings = {inp.name: v for inp, v in zip(body.input, states + slices)}
            outs = _import_inline(c, body, bindings)
            if any(v is UNKNOWN for v in outs):
                return [UNKNOWN] * len(body.output)
            states = outs[:n_state]
            for k, v in enumerate(outs[n_state:]):
                scans[k].append(v)
    stacked = [_stack(c, vals[::-1] if rev else vals, ax, k)
               for k, (vals, ax, rev) in enumerate(zip(scans, out_axes, out_rev))]
    return states + stacked


def _slice_step(c: _Ctx, seq: Value, axis: int, t: int) -> Value:
    """Element ``t`` of ``seq`` along ``axis``, that axis removed."""
    one = c.op("slice", [seq], starts=[t], ends=[t + 1], axes=[axis], steps=[1])
    return c.op("reshape", [one], shape=[d for k, d in enumerate(seq.shape) if k != axis])
