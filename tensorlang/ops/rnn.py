"""The recurrence of an RNN, LSTM or GRU layer (ONNX's RNN / LSTM / GRU after the input
projection) as one kernel with the time loop inside: a tl.extern whose body is loop IR (as
TopK's radix sort, ops/sort_kernel.py), so a layer is one plan step, not a few per time step.

The projection of every step (X W^T plus the biases that add, for every direction) is one
dense before it: ``xw`` [T, B, D*G*H]. Per direction d (D = 1, or 2 run side by side on the
thread pool) and step (forward: t = 0..T-1, reverse: t = T-1..0), per batch row:

    acc[0:n] = xw[t, b, d*G*H + 0:n]                  (the step's projection)
    for k in 0..H-1: acc[0:n] += R^T[d, k, 0:n] * h[k]  (the recurrent product: axpy rows,
                                                        contiguous, so LLVM vectorizes them)
    gates, cell and state update, Y[t, d, b, :] = h

LSTM (gate order i, o, f, c): c' = f(i)... as ONNX: c' = sig(f) c + sig(i) g(c~),
h' = sig(o) h(c'). GRU (order z, r, h): linear_before_reset=1: h~ = g(xw_h + r (.) (h R_h^T +
Rb_h)), one product of all three gates; 0: h~ = g(xw_h + (r (.) h) R_h^T), a second product
after r. h' = (1 - z) (.) h~ + z (.) h. RNN (one gate): h' = f(xw + h R^T). Each activation
is one of ONNX's (with alpha, beta), `clip` bounds every pre-activation.

Inputs: xw [T, B, D*G*H], rt [D, H/U, H, G*U] (R^T packed by blocks of U hidden units:
pack_recurrent_weights, done once on the constant weights; U = unit_block(H)), h0 [D, B, H],
and c0 [D, B, H] (LSTM) or rbh [D, H] (GRU: the recurrent bias of the h gate); an RNN has
neither. Outputs: Y [T, D, B, H] (ONNX's
layout 0), h_n [D, B, H] and, for an LSTM, c_n [D, B, H]."""

from __future__ import annotations

from .. import te
from ..ir import expr as E
from ..ir import stmt as S
from ..te.extern import IRBody, extern
from ..te.tensor import Tensor
from ._base import OPAQUE, op_compute

CELLS = {"lstm": 4, "gru": 3, "rnn": 1}
# activations per direction
PER_DIRECTION = {"lstm": 3, "gru": 2, "rnn": 1}
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
# activations with (alpha, beta) defaults, as ONNX names them
ACTIVATIONS = ("Sigmoid", "Tanh", "Relu", "Softsign", "Softplus", "LeakyRelu",
               "ThresholdedRelu", "Elu", "HardSigmoid", "Affine", "ScaledTanh")


def _c(value, dtype: str = "int64") -> E.Const:
    return E.const(value, dtype)


def activation(name: str, alpha: float, beta: float):
    """ONNX's activation `name` as a function of an expression."""
    if name not in ACTIVATIONS:
        raise ValueError(f"rnn: activation {name!r} is not one of {', '.join(ACTIVATIONS)}")

    def f(v):
        a, b = _c(float(alpha), v.dtype), _c(float(beta), v.dtype)
        one, zero = _c(1.0, v.dtype), _c(0.0, v.dtype)
        return {
            "Sigmoid": lambda: te.sigmoid(v),
            "Tanh": lambda: te.tanh(v),
            "Relu": lambda: E.Max(v, zero),
            "Softsign": lambda: v / (one + te.abs(v)),
            # log(1 + e^v) overflows for large v, where it is v
            "Softplus": lambda: E.Select(v > _c(20.0, v.dtype), v, te.log(one + te.exp(v))),
            "LeakyRelu": lambda: E.Select(v >= zero, v, v * a),
            "ThresholdedRelu": lambda: E.Select(v > a, v, zero),
            "Elu": lambda: E.Select(v >= zero, v, a * (te.exp(v) - one)),
            "HardSigmoid": lambda: E.Max(zero, E.Min(one, a * v + b)),
            "Affine": lambda: a * v + b,
            "ScaledTanh": lambda: a * te.tanh(b * v),
        }[name]()

    return f


def rnn_recurrence(xw: Tensor, rt: Tensor, h0: Tensor, extra: Tensor | None, cell: str,
                   direction: str, activations, clip: float | None = None,
                   linear_before_reset: bool = False, lens: Tensor | None = None) -> list:
    """The recurrence of an ONNX LSTM (cell "lstm"; extra = c0), GRU ("gru"; extra = Rb_h) or
    RNN ("rnn"; extra = None) over its projected inputs: [Y, h_n] (+ [c_n] for an LSTM).
    `activations`: per direction, ONNX's functions as (name, alpha, beta) (LSTM: f, g, h; GRU:
    f, g; RNN: f). `lens` (ONNX's
    sequence_lens, integers [B]): at a step t >= lens[b] row b keeps its state and writes
    zeros to Y (a length past T acts as T); the final state of an empty sequence is 0."""
    if cell not in CELLS:
        raise ValueError(f"rnn_recurrence: cell must be one of {sorted(CELLS)}, got {cell!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"rnn_recurrence: direction must be one of {sorted(DIRECTIONS)}, "
                         f"got {direction!r}")
    D, G = DIRECTIONS[direction], CELLS[cell]
    shape = _check_shapes(xw, rt, h0, extra, cell, D, G)
    T, B, H = shape
    _check_lens(lens, B)
    acts = _activation_functions(activations, D, PER_DIRECTION[cell])
    outs = [(T, D, B, H), (D, B, H)] + ([(D, B, H)] if cell == "lstm" else [])
    spec = _Spec(cell, T, B, H, D, direction == "reverse", acts, clip, bool(linear_before_reset),
                 xw.dtype, lens is not None)

    def build(ins, outs_):
        return _directions(spec, ins, outs_)

    body = IRBody(f"{cell}_recurrence", build)
    ins = [xw, rt, h0] + ([extra] if extra is not None else []) + (
        [lens] if lens is not None else [])
    raw = extern(outs, ins, lambda ins, o: body, name=f"{cell}_recurrence",
                 dtype=xw.dtype, attrs={"cell": cell, "direction": direction})
    # the library's computes over the kernel's buffers (copies: they carry the definition)
    y = op_compute("rnn_recurrence", outs[0], lambda *i: raw[0][i], OPAQUE, cell=cell)
    return [y] + [op_compute("rnn_recurrence_state", s.shape, lambda *i, s=s: s[i], OPAQUE,
                             name=f"rnn_recurrence_state{k}")
                  for k, s in enumerate(raw[1:])]


def split_inputs(ins: list, cell: str) -> tuple:
    """(xw, rt, h0, extra, lens) of the recurrence's input list (the graph node's, the
    kernel's): extra (c0, Rb_h) is absent for an RNN, lens (sequence_lens) when not given."""
    n = 3 if cell == "rnn" else 4
    return (*ins[:3], ins[3] if n == 4 else None, ins[n] if len(ins) > n else None)


def unit_block(H: int) -> int:
    """Hidden units per block: a block's gate columns are accumulated in registers across
    the product's rows, and the blocks of a step are a parallel loop (the first of
    UNIT_BLOCKS that divides H, else all H units in one block)."""
    return next((w for w in UNIT_BLOCKS if H % w == 0), H)


def pack_recurrent_weights(r, gates: int):
    """ONNX's R [D, G*H, H] as the kernel reads it: [D, H/U, H, G*U], block u's row k holding
    R^T[k, g*H + u*U + j] at g*U + j: each block's product reads one contiguous stream."""
    import numpy as np

    D, _, H = r.shape
    U = unit_block(H)
    rt = np.asarray(r).transpose(0, 2, 1).reshape(D, H, gates, H // U, U)
    return np.ascontiguousarray(rt.transpose(0, 3, 1, 2, 4).reshape(D, H // U, H, gates * U))


def unpack_recurrent_weights(rt, gates: int):
    """R^T [D, H, G*H] from pack_recurrent_weights' layout."""
    D, nb, H, GU = rt.shape
    U = GU // gates
    return rt.reshape(D, nb, H, gates, U).transpose(0, 2, 3, 1, 4).reshape(D, H, gates * H)


def _check_shapes(xw, rt, h0, extra, cell, D, G) -> tuple:
    if len(xw.shape) != 3 or len(rt.shape) != 4:
        raise ValueError(f"rnn_recurrence: xw must be [T, B, D*G*H] and rt [D, H/U, H, G*U], "
                         f"got {list(xw.shape)} and {list(rt.shape)}")
    T, B, n = (E.as_int(d) for d in xw.shape)
    H = E.as_int(rt.shape[2])
    if None in (T, B, n, H):
        raise ValueError("rnn_recurrence: the shapes must be static")
    if (extra is None) != (cell == "rnn"):
        raise ValueError(f"rnn_recurrence: cell {cell!r} takes " + (
            "no extra input" if cell == "rnn" else "c0 or rbh as extra input"))
    U = unit_block(H)
    want = {"xw": (xw, (T, B, D * G * H)), "rt": (rt, (D, H // U, H, G * U)),
            "h0": (h0, (D, B, H))}
    if extra is not None:
        want["c0" if cell == "lstm" else "rbh"] = (extra, (D, B, H) if cell == "lstm" else
                                                   (D, H))
    for what, (t, shape) in want.items():
        got = tuple(E.as_int(d) for d in t.shape)
        if got != shape:
            raise ValueError(f"rnn_recurrence ({cell}, {D} direction(s), hidden {H}): {what} "
                             f"has shape {list(got)}, expected {list(shape)}")
        if t.dtype != xw.dtype:
            raise ValueError(f"rnn_recurrence: {what} is {t.dtype}, xw is {xw.dtype}")
    return T, B, H


def _check_lens(lens, B: int) -> None:
    if lens is None:
        return
    got = tuple(E.as_int(d) for d in lens.shape)
    if got != (B,) or not lens.dtype.startswith(("int", "uint")):
        raise ValueError(f"rnn_recurrence: lens must be integers of shape [{B}], got "
                         f"{lens.dtype}{list(got)}")


def _activation_functions(activations, D: int, per: int) -> list:
    acts = [tuple(a) for a in activations]
    if len(acts) != D * per:
        raise ValueError(f"rnn_recurrence: {per} activations per direction ({D * per} in "
                         f"all) expected, got {len(acts)}")
    fns = [activation(n, a, b) for n, a, b in acts]
    return [fns[d * per:(d + 1) * per] for d in range(D)]


class _Spec:
    def __init__(self, cell, T, B, H, D, reverse, acts, clip, lbr, dtype, has_lens):
        self.dtype, self.has_lens = dtype, has_lens
        self.cell, self.T, self.B, self.H, self.D = cell, T, B, H, D
        self.G = CELLS[cell]
        self.reverse, self.acts, self.clip, self.lbr = reverse, acts, clip, lbr

    def clipped(self, v):
        if self.clip is None:
            return v
        lim = float(self.clip)
        return E.Max(E.Min(v, _c(lim, v.dtype)), _c(-lim, v.dtype))


def _for(name: str, extent, body_fn, kind: str = "serial") -> S.Stmt:
    v = E.Var(name, "int64")
    extent = _c(extent) if isinstance(extent, int) else extent
    return S.For(v, _c(0), extent, kind, body_fn(v))


def _local(name: str, n: int, dtype: str) -> S.Buffer:
    return S.Buffer(name, (_c(n),), dtype, "local")


def _directions(sp: _Spec, ins, outs) -> S.Stmt:
    """Each direction's recurrence; two directions run on the thread pool side by side (the
    unit blocks inside them then run serially: a parallel loop in a parallel loop does)."""
    if sp.D == 1:
        return _direction(sp, ins, outs, _c(0), sp.reverse)
    return _for("rnn_dir", 2, lambda d: S.IfThenElse(
        d == _c(0), _direction(sp, ins, outs, _c(0), False),
        _direction(sp, ins, outs, _c(1), True)), "parallel")


# hidden units per block (unit_block)
UNIT_BLOCKS = (32, 16)
# a step's product (G*H*H*B multiply-adds) from which its unit blocks are a parallel loop:
# below, the pool's fork and join each step cost more than half the step
PARALLEL_STEP_MACS = 1 << 16


class _State:
    """One direction's state, shared by the unit blocks: h of every batch row twice (step s
    reads copy s % 2 and writes the other: a block never overwrites what another block is
    still reading), c (LSTM: each unit's own), and for a GRU without linear_before_reset
    z and r (.) h (its h gate's product reads r (.) h of every unit: a second parallel loop)."""

    def __init__(self, sp: _Spec, dtype: str):
        n = sp.B * sp.H
        self.h = _local("rnn_h", 2 * n, dtype)
        self.c = _local("rnn_c", n, dtype) if sp.cell == "lstm" else None
        two_phase = sp.cell == "gru" and not sp.lbr
        self.z = _local("rnn_z", n, dtype) if two_phase else None
        self.rh = _local("rnn_rh", n, dtype) if two_phase else None
        self.n = n

    def allocate(self, body: S.Stmt) -> S.Stmt:
        for b in (self.h, self.c, self.z, self.rh):
            if b is not None:
                body = S.Allocate(b, body)
        return body


class _Step:
    """Where step s of one direction reads and writes: time t, the copies of h, row b."""

    def __init__(self, sp: _Spec, st: _State, d, s, reverse: bool):
        self.sp, self.st, self.d = sp, st, d
        self.t = _c(sp.T - 1) - s if reverse else s
        self.old = (s % _c(2)) * _c(st.n)
        self.new = _c(st.n) - self.old

    def h_old(self, b, j):
        return E.Load(self.st.h, (self.old + b * _c(self.sp.H) + j,))

    def active(self, lens, b):
        """Whether row b is inside its sequence at this step (None: always)."""
        return None if lens is None else self.t < E.Load(lens, (b,)).astype("int64")

    def keep(self, lens, b, new, old):
        """The state after this step: `new`, or `old` past row b's length."""
        on = self.active(lens, b)
        return new if on is None else E.Select(on, new, old)

    def y(self, lens, b, new):
        on = self.active(lens, b)
        return new if on is None else E.Select(on, new, _c(0.0, new.dtype))


def _direction(sp: _Spec, ins, outs, d: E.Expr, reverse: bool) -> S.Stmt:
    xw, _, h0, extra, lens = split_inputs(ins, sp.cell)
    st = _State(sp, xw.dtype)
    H = sp.H

    def init(b):
        def one(j):
            at = b * _c(H) + j
            s = [S.Store(st.h, (at,), E.Load(h0, (d, b, j)))]
            if st.c is not None:
                s.append(S.Store(st.c, (at,), E.Load(extra, (d, b, j))))
            return S.seq(*s)
        return _for("rnn_i", H, one)

    def step(s):
        steps = {"lstm": _lstm_step, "gru": _gru_step, "rnn": _rnn_step}
        return steps[sp.cell](sp, _Step(sp, st, d, s, reverse), ins, outs)

    def final(b):
        def started(v):  # onnxruntime's final state of an empty sequence is 0
            if lens is None:
                return v
            return E.Select(E.Load(lens, (b,)).astype("int64") > _c(0), v, _c(0.0, v.dtype))

        def one(j):
            at = b * _c(H) + j
            s = [S.Store(outs[1], (d, b, j),
                         started(E.Load(st.h, (_c(sp.T % 2 * st.n) + at,))))]
            if st.c is not None:
                s.append(S.Store(outs[2], (d, b, j), started(E.Load(st.c, (at,)))))
            return S.seq(*s)
        return _for("rnn_o", H, one)

    return st.allocate(S.seq(_for("rnn_b0", sp.B, init), _for("rnn_t", sp.T, step),
                             _for("rnn_bn", sp.B, final)))


def _unit_blocks(sp: _Spec, gates: int, body) -> S.Stmt:
    """body(acc, u, b, U) for every block u of U units (units u*U..) and batch row b, on the
    thread pool; acc: the block's own accumulator of `gates` x U columns."""
    U = unit_block(sp.H)

    def block(u):
        acc = _local("rnn_acc", gates * U, sp.dtype)
        return S.Allocate(acc, _for("rnn_b", sp.B, lambda b: body(acc, u, b, U)))

    kind = "parallel" if sp.G * sp.H * sp.H * sp.B >= PARALLEL_STEP_MACS else "serial"
    return _for("rnn_u", sp.H // U, block, kind)


def _product(sp: _Spec, acc, rt, d, u, U: int, gates, vec) -> S.Stmt:
    """acc[i*U + j] += sum_k vec(k) R^T[d, k, g*H + u*U + j] for each gate g = gates[i] (rt
    packed: block u's row k at rt[d, u, k]): axpy rows (no reduction in the inner loop: it
    vectorizes as it is; the block's columns stay in registers across the rows)."""
    def row(k):
        hk = E.Var("rnn_hk", rt.dtype)
        return S.LetStmt(hk, vec(k), S.seq(*[_for("rnn_j", U, lambda j, i=i, g=g: S.Store(
            acc, (_c(i * U) + j,), E.Load(acc, (_c(i * U) + j,))
            + E.Load(rt, (d, u, k, _c(g * U) + j)) * hk)) for i, g in enumerate(gates)]))
    return _for("rnn_k", sp.H, row)


def _start(acc, U: int, gates, value, first: int = 0) -> S.Stmt:
    """acc[(first + i)*U + j] = value(g, j) for each gate g = gates[i]."""
    return S.seq(*[_for("rnn_a", U, lambda j, i=i, g=g: S.Store(
        acc, (_c((first + i) * U) + j,), value(g, j))) for i, g in enumerate(gates)])


def _rnn_step(sp: _Spec, at: _Step, ins, outs) -> S.Stmt:
    xw, rt, _, _, lens = split_inputs(ins, sp.cell)
    H, st, d, t = sp.H, at.st, at.d, at.t
    (f,) = sp.acts[E.as_int(d)]  # d: a constant in each branch of _directions

    def block(acc, u, b, U):
        u0 = u * _c(U)

        def update(j):
            h_new = E.Var("rnn_hn", xw.dtype)
            return S.LetStmt(h_new, f(sp.clipped(E.Load(acc, (j,)))), S.seq(
                S.Store(st.h, (at.new + b * _c(H) + u0 + j,),
                        at.keep(lens, b, h_new, at.h_old(b, u0 + j))),
                S.Store(outs[0], (t, d, b, u0 + j), at.y(lens, b, h_new))))

        return S.seq(
            _start(acc, U, (0,), lambda k, j: E.Load(xw, (t, b, d * _c(H) + u0 + j))),
            _product(sp, acc, rt, d, u, U, (0,), lambda k: at.h_old(b, k)),
            _for("rnn_e", U, update))

    return _unit_blocks(sp, 1, block)


def _lstm_step(sp: _Spec, at: _Step, ins, outs) -> S.Stmt:
    xw, rt, _, _, lens = split_inputs(ins, sp.cell)
    H, GH, st, d, t = sp.H, sp.G * sp.H, at.st, at.d, at.t
    f, g, hh = sp.acts[E.as_int(d)]  # d: a constant in each branch of _directions

    def block(acc, u, b, U):
        u0 = u * _c(U)

        def update(j):
            def gate(k):
                return sp.clipped(E.Load(acc, (_c(k * U) + j,)))
            unit = b * _c(H) + u0 + j
            c_new, h_new = E.Var("rnn_cn", xw.dtype), E.Var("rnn_hn", xw.dtype)
            c_old = E.Load(st.c, (unit,))
            c_val = f(gate(2)) * c_old + f(gate(0)) * g(gate(3))
            return S.LetStmt(c_new, c_val, S.LetStmt(h_new, f(gate(1)) * hh(c_new), S.seq(
                S.Store(st.c, (unit,), at.keep(lens, b, c_new, c_old)),
                S.Store(st.h, (at.new + unit,), at.keep(lens, b, h_new, at.h_old(b, u0 + j))),
                S.Store(outs[0], (t, d, b, u0 + j), at.y(lens, b, h_new)))))

        gates = range(4)
        return S.seq(
            _start(acc, U, gates, lambda k, j: E.Load(xw, (t, b, d * _c(GH) + _c(k * H) + u0
                                                               + j))),
            _product(sp, acc, rt, d, u, U, gates, lambda k: at.h_old(b, k)),
            _for("rnn_e", U, update))

    return _unit_blocks(sp, 4, block)


def _gru_step(sp: _Spec, at: _Step, ins, outs) -> S.Stmt:
    xw, rt, _, rbh, lens = split_inputs(ins, sp.cell)
    H, GH, st, d, t = sp.H, sp.G * sp.H, at.st, at.d, at.t
    f, g = sp.acts[E.as_int(d)]

    def x(b, k, j):
        return E.Load(xw, (t, b, d * _c(GH) + _c(k * H) + j))

    def new_h(b, j, z, cand_pre):
        """h' = h~ + z (.) (h - h~) into both copies' new one and Y."""
        cand, h_new = E.Var("rnn_cand", xw.dtype), E.Var("rnn_hn", xw.dtype)
        return S.LetStmt(cand, g(sp.clipped(cand_pre)), S.LetStmt(
            h_new, cand + z * (at.h_old(b, j) - cand), S.seq(
                S.Store(st.h, (at.new + b * _c(H) + j,),
                        at.keep(lens, b, h_new, at.h_old(b, j))),
                S.Store(outs[0], (t, d, b, j), at.y(lens, b, h_new)))))

    if sp.lbr:  # h~ = g(xw_h + r (.) (h R_h^T + Rb_h)): one product of the three gates
        def block(acc, u, b, U):
            u0 = u * _c(U)

            def update(j):
                z = f(sp.clipped(E.Load(acc, (j,))))
                r = f(sp.clipped(E.Load(acc, (_c(U) + j,))))
                return new_h(b, u0 + j, z, x(b, 2, u0 + j) + r * E.Load(acc, (_c(2 * U) + j,)))
            return S.seq(
                _start(acc, U, (0, 1), lambda k, j: x(b, k, u0 + j)),
                _start(acc, U, (2,), lambda k, j: E.Load(rbh, (d, u0 + j)), first=2),
                _product(sp, acc, rt, d, u, U, (0, 1, 2), lambda k: at.h_old(b, k)),
                _for("rnn_e", U, update))
        return _unit_blocks(sp, 3, block)

    def gates_zr(acc, u, b, U):  # z, and r (.) h for the h gate's product
        u0 = u * _c(U)

        def keep(j):
            unit = b * _c(H) + u0 + j
            r = f(sp.clipped(E.Load(acc, (_c(U) + j,))))
            return S.seq(S.Store(st.z, (unit,), f(sp.clipped(E.Load(acc, (j,))))),
                         S.Store(st.rh, (unit,), r * at.h_old(b, u0 + j)))
        return S.seq(_start(acc, U, (0, 1), lambda k, j: x(b, k, u0 + j)),
                     _product(sp, acc, rt, d, u, U, (0, 1), lambda k: at.h_old(b, k)),
                     _for("rnn_e", U, keep))

    def gate_h(acc, u, b, U):  # h~ = g(xw_h + (r (.) h) R_h^T)
        u0 = u * _c(U)

        def update(j):
            return new_h(b, u0 + j, E.Load(st.z, (b * _c(H) + u0 + j,)), E.Load(acc, (j,)))
        return S.seq(_start(acc, U, (2,), lambda k, j: x(b, k, u0 + j)),
                     _product(sp, acc, rt, d, u, U, (2,),
                              lambda k: E.Load(st.rh, (b * _c(H) + k,))),
                     _for("rnn_e", U, update))

    return S.seq(_unit_blocks(sp, 2, gates_zr), _unit_blocks(sp, 1, gate_h))


def reference(xw, rt, h0, extra, cell: str, direction: str, activations, clip=None,
              linear_before_reset=False, lens=None) -> list:
    """numpy: what rnn_recurrence computes (float64 inside)."""
    import numpy as np

    D, G = DIRECTIONS[direction], CELLS[cell]
    T, B, _ = xw.shape
    rt = unpack_recurrent_weights(rt, G)
    H = rt.shape[1]
    per = PER_DIRECTION[cell]
    fns = [_np_activation(*a) for a in activations]
    y = np.zeros((T, D, B, H))
    hn, cn = np.zeros((D, B, H)), np.zeros((D, B, H))

    def cl(v):
        return v if clip is None else np.clip(v, -clip, clip)

    n = np.full(B, T) if lens is None else np.asarray(lens).reshape(B, 1)
    n = n.reshape(B, 1)

    for d in range(D):
        f, *rest = fns[d * per:(d + 1) * per]
        g = rest.pop(0) if rest else None
        h = h0[d].astype(np.float64)
        c = extra[d].astype(np.float64) if cell == "lstm" else None
        rev = direction == "reverse" or d == 1
        for t in (range(T - 1, -1, -1) if rev else range(T)):
            x = xw[t, :, d * G * H:(d + 1) * G * H].astype(np.float64)
            r_t = rt[d].astype(np.float64)
            on = t < n
            if cell == "lstm":
                a = x + h @ r_t
                c_new = f(cl(a[:, 2 * H:3 * H])) * c + f(cl(a[:, :H])) * g(cl(a[:, 3 * H:]))
                h_new = f(cl(a[:, H:2 * H])) * rest[0](c_new)
                c = np.where(on, c_new, c)
            elif cell == "rnn":
                h_new = f(cl(x + h @ r_t))
            else:
                zr = x[:, :2 * H] + h @ r_t[:, :2 * H]
                z, r = f(cl(zr[:, :H])), f(cl(zr[:, H:]))
                if linear_before_reset:
                    pre = x[:, 2 * H:] + r * (h @ r_t[:, 2 * H:] + extra[d])
                else:
                    pre = x[:, 2 * H:] + (r * h) @ r_t[:, 2 * H:]
                cand = g(cl(pre))
                h_new = cand + z * (h - cand)
            h = np.where(on, h_new, h)
            y[t, d] = np.where(on, h_new, 0.0)
        hn[d] = np.where(n > 0, h, 0.0)
        if c is not None:
            cn[d] = np.where(n > 0, c, 0.0)
    dt = xw.dtype
    out = [y.astype(dt), hn.astype(dt)]
    return out + [cn.astype(dt)] if cell == "lstm" else out


def _np_activation(name, alpha, beta):
    import numpy as np

    return {
        "Sigmoid": lambda v: 1 / (1 + np.exp(-v)), "Tanh": np.tanh,
        "Relu": lambda v: np.maximum(v, 0), "Softsign": lambda v: v / (1 + np.abs(v)),
        "Softplus": lambda v: np.log1p(np.exp(v)),
        "LeakyRelu": lambda v: np.where(v >= 0, v, alpha * v),
        "ThresholdedRelu": lambda v: np.where(v > alpha, v, 0),
        "Elu": lambda v: np.where(v >= 0, v, alpha * (np.exp(v) - 1)),
        "HardSigmoid": lambda v: np.clip(alpha * v + beta, 0, 1),
        "Affine": lambda v: alpha * v + beta, "ScaledTanh": lambda v: alpha * np.tanh(beta * v),
    }[name]


__all__ = ["ACTIVATIONS", "activation", "pack_recurrent_weights", "reference", "rnn_recurrence",
           "split_inputs", "unit_block", "unpack_recurrent_weights"]
