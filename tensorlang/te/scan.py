"""tl.scan: a recurrence over a time axis (TVM's te.scan):

    s_state = tl.placeholder((m, n))
    s_init = tl.compute((1, n), lambda _, i: X[0, i])
    s_update = tl.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    res = tl.scan(s_init, s_update, s_state, inputs=[X])       # cumulative sum over rows

res[:k] = init (k = init's first extent) and, for t = k, k+1, ..., res[t] = update[t], where the
update reads the state's earlier steps (s_state[t - c], c >= 1) from res. The update and every
compute between the state and it (the scan's body, e.g. an RNN's state x weight reduction) are
redeclared over steps k.. only (their time axis starts at k), and are one buffer with res:

* the update stage runs at the root, its first loop being the time loop; the other body stages
  are computed at that loop (as TVM attaches a scan's body), one step's rows at a time;
* the legality model orders the body by step (time outermost) and knows that a body stage
  computed at the update's time loop holds exactly that step: a `parallel` or `vectorize` on a
  loop of the time axis, or a reorder that runs a step before the state it reads, is refused
  naming the dependence through the state; the state's spatial axes stay free to parallelize.

`s[s_update]` and `s_update.op.axis` (the declared op) name the body stage and its loops."""

from __future__ import annotations

from ..ir import expr as E
from ..ir.functor import Visitor, substitute
from ..ir.simplify import simplify
from ..ir.stmt import IterVar, Range
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead, substitute_read


class ScanOp(Operation):
    """The scan's result: no statements of its own (its init and update stages write its
    buffer). `axis` spans the state's shape (the buffer's extent)."""

    def __init__(self, name: str, init: Tensor, update: Tensor, state: Tensor, body: list):
        self.name = name
        self.tag = ""
        self.attrs: dict = {}
        self.init, self.update, self.state = init, update, state
        self.body_ops = tuple(body)  # the redeclared body, producers first, update last
        self.init_len = init.shape[0]
        self.axis = tuple(IterVar(E.Var(f"ax{d}"), Range(E.const(0), s), "spatial")
                          for d, s in enumerate(state.shape))
        self.reduce_axis: tuple = ()
        self.axis_copies: dict = {}
        self.expr_depth = 1
        self.body: tuple = ()
        self.input_tensors = (init, update)
        self.outputs = (Tensor(self, 0, state.shape, state.dtype, name),)

    def role(self, op) -> str | None:
        """'init', 'update' or 'body' for an op of this scan, else None."""
        if op is self.init.op:
            return "init"
        if op is self.update.op:
            return "update"
        return "body" if op in self.body_ops else None

    def __repr__(self) -> str:
        return f"scan({self.name})"


def scan(init: Tensor, update: Tensor, state_placeholder: Tensor, inputs=None,
         name: str = "scan") -> Tensor:
    """The recurrence res[t] = update[t] (t >= init's extent), res[:k] = init, where the update
    reads res's earlier steps through `state_placeholder`. `inputs` (TVM's hint) may list the
    scan's inputs; they are checked to be tensors. As TVM, init, update and state may each be
    a one-element list (the scan of one state); several states are not supported."""
    init, update, state_placeholder = _one_state(init, update, state_placeholder, name)
    _check_args(init, update, state_placeholder, inputs, name)
    state = state_placeholder
    body = _body_ops(update, state)
    clones = _redeclare(body, state, init.shape[0], name)
    op = ScanOp(name, init, clones[update.op].output(0), state, list(clones.values()))
    for clone in clones.values():
        clone.scan_op = op
    init.op.scan_op = op
    return op.output(0)


def scan_of(op) -> ScanOp | None:
    """The scan whose init, update or body `op` is."""
    got = getattr(op, "scan_op", None)
    return got if got is not None and got.role(op) is not None else None


def _one_state(init, update, state, name: str):
    """TVM's list form: [init], [update], [state] is the scan of that one state."""
    given = [x for x in (init, update, state) if isinstance(x, (list, tuple))]
    if not given:
        return init, update, state
    if len(given) != 3:
        raise TypeError(f"scan {name}: init, update and state_placeholder must be all tensors "
                        "or all lists (one entry per state)")
    counts = {len(x) for x in given}
    if counts == {1}:
        return init[0], update[0], state[0]
    raise NotImplementedError(
        f"scan {name}: a scan of several states ({max(counts)} inits/updates/states) is not "
        "supported: tl.scan carries one state tensor; scan each state that does not read the "
        "others on its own, or stack states of one shape into one tensor with an extra axis")


def _check_args(init, update, state, inputs, name: str) -> None:
    for what, t in (("init", init), ("update", update)):
        if not isinstance(t, Tensor) or not isinstance(t.op, ComputeOp):
            raise TypeError(f"scan {name}: {what} must be a tensor of tl.compute, got {t!r}")
        if t.op.num_outputs != 1:
            raise ValueError(f"scan {name}: {what} must have one output (one state)")
    if not isinstance(state, Tensor) or not isinstance(state.op, PlaceholderOp):
        raise TypeError(f"scan {name}: state_placeholder must be a tl.placeholder, got "
                        f"{state!r}")
    for t in inputs or ():
        if not isinstance(t, Tensor):
            raise TypeError(f"scan {name}: inputs must be tensors, got {type(t).__name__}")
    if len(update.shape) != len(state.shape) or len(init.shape) != len(state.shape):
        raise ValueError(f"scan {name}: init {init.shape}, update {update.shape} and state "
                         f"{state.shape} must have the same number of dimensions")
    for d in range(len(state.shape)):
        if not _same(update.shape[d], state.shape[d]) or \
                (d > 0 and not _same(init.shape[d], state.shape[d])):
            raise ValueError(f"scan {name}: dimension {d} differs: init {init.shape}, update "
                             f"{update.shape}, state {state.shape} (the update has the state's "
                             "shape; the init the state's, but for its number of steps)")
    k, m = E.as_int(init.shape[0]), E.as_int(state.shape[0])
    if k is not None and m is not None and k >= m:
        raise ValueError(f"scan {name}: init has {k} steps and the state {m}: nothing to scan")
    if update.dtype != state.dtype or init.dtype != state.dtype:
        raise TypeError(f"scan {name}: init ({init.dtype}), update ({update.dtype}) and state "
                        f"({state.dtype}) must have one dtype")
    if _depends_on(init.op, state.op):
        raise ValueError(f"scan {name}: init reads the state {state.name}; it is the state's "
                         "first steps, computed from the inputs only")
    if not _depends_on(update.op, state.op):
        raise ValueError(f"scan {name}: update does not read the state {state.name}; a scan's "
                         "update computes step t from the steps before it")


def _same(a, b) -> bool:
    return a is b or (E.as_int(a) is not None and E.as_int(a) == E.as_int(b))


def _depends_on(op, target, memo=None) -> bool:
    memo = {} if memo is None else memo
    if op is target:
        return True
    if id(op) not in memo:
        memo[id(op)] = any(_depends_on(t.op, target, memo) for t in op.input_tensors)
    return memo[id(op)]


def _body_ops(update: Tensor, state: Tensor) -> list:
    """The computes between the state and the update (update included), producers first."""
    order, seen, memo = [], set(), {}

    def visit(op):
        if id(op) in seen or not _depends_on(op, state.op, memo):
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        if op is not state.op:
            order.append(op)

    visit(update.op)
    return order


def _redeclare(body: list, state: Tensor, init_len, name: str) -> dict:
    """{declared op: the same compute over steps init_len.. only}, producers first."""
    clones: dict = {}
    for op in body:
        if not isinstance(op, ComputeOp) or not op.axis or \
                not _same(op.axis[0].dom.extent, state.shape[0]):
            raise ValueError(f"scan {name}: body stage {op.name} must be a tl.compute whose "
                             f"first axis is the time axis, of the state's extent "
                             f"{state.shape[0]}")
        t_old = op.axis[0]
        t_new = IterVar(E.Var(t_old.name), Range(init_len, simplify(state.shape[0] - init_len)),
                        "spatial")
        vmap = {t_old.var: t_new.var}
        reads = {o.output(i): c.output(i) for o, c in clones.items()
                 for i in range(o.num_outputs)}
        bodies = tuple(substitute_read(substitute(b, vmap), reads) for b in op.body)
        for b in bodies:
            _check_time_indices(b, t_new.var, state, set(reads.values()), op.name, name)
        clone = ComputeOp(op.name, (t_new, *op.axis[1:]), op.reduce_axis, bodies, op.tag,
                          op.attrs, [t.name for t in op.outputs],
                          {**op.axis_copies, t_old: t_new}, op.expr_depth)
        clone.declared_op = op
        # its tensors keep the declared shape (steps 0.. of the state's extent): it is defined
        # from step init_len on, and read at those steps only
        clone.outputs = tuple(Tensor(clone, i, t.shape, t.dtype, t.name)
                              for i, t in enumerate(op.outputs))
        clones[op] = clone
    return clones


def _check_time_indices(body, t, state: Tensor, body_tensors: set, stage: str,
                        name: str) -> None:
    """Step t reads the state at earlier steps only (t - c, c >= 1), and the body's other
    stages at step t itself (what computing them at the update's time loop provides)."""

    class _Reads(Visitor):
        def visit_TensorRead(self, r: TensorRead):
            for i in r.indices:
                self.visit(i)
            if r.tensor is not state and r.tensor not in body_tensors:
                return
            lag = E.as_int(simplify(t - r.indices[0]))
            if r.tensor is state and (lag is None or lag < 1):
                raise ValueError(f"scan {name}: stage {stage} reads the state at step "
                                 f"{r.indices[0]!r}; a step reads the state at earlier steps "
                                 f"only ({t.name} - c with a constant c >= 1)")
            if r.tensor is not state and lag != 0:
                raise ValueError(f"scan {name}: stage {stage} reads {r.tensor.name} of the "
                                 f"scan's body at step {r.indices[0]!r}; a body stage reads "
                                 f"another at the same step ({t.name})")

    _Reads().visit(body)


__all__ = ["ScanOp", "scan", "scan_of"]
