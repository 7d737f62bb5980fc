"""ONNX import of LSTM, GRU (issue 18) and RNN (the vanilla recurrence: one gate,
H' = f(X W^T + H R^T + Wb + Rb), built as they are).

A layer (for an LSTM: without peepholes, or with all-zero ones, and without input_forget) is
two kernels: the input projection of every step and direction as one dense ([T*B, I] x
[I, D*G*H], with the biases that add), then ops/rnn.py's recurrence, one kernel with the time
loop inside (the directions side by side on the thread pool, or the hidden units' blocks of
each step when there is one direction; sequence_lens, constant or run-time, is its fifth
input). pt_gru_tagger (two bidirectional GRU layers, 200 steps) went from 1606 plan steps
to 10 (BENCHMARKS.md, "Recurrent models as one kernel per layer").

An LSTM with peepholes or input_forget is unrolled at import into a static sequence of graph ops over its time steps
(the sequence length is the static extent of X). Per direction, the input projection of every
step is one dense over all T*B rows (X W^T plus both biases where they add); each step then
takes its rows of it (a gather by a constant index: the same kernel for every step, where a
slice's offset would make T workloads to compile), one dense of the hidden state by R^T, and
the gates: each gate's pre-activation is a slice of that dense's output plus a slice of the
step's projection, which the fusion pass puts into the kernels of the activations and the cell
update. An LSTM step is four kernels, the same four for every step.
Outputs the model does not read are dead code (the graph's dead_code pass removes them).
``sequence_lens`` is honoured with masks (constants, or compared at run time when the lengths
are a run-time input): a batch entry past its length keeps its state and writes zeros to Y,
forward and reverse, as ONNX specifies. Weights,
biases and peepholes must be constants (initializers or foldable), as exported models have
them."""

from __future__ import annotations

import numpy as np

from tensorlang.ops.rnn import pack_recurrent_weights

from .. import symbolic as S
from .onnx_context import _conv, refuse

_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _symbolic_length(x, t) -> str:
    """Why a symbolic sequence length is refused, and which sizes to give: X's own where it
    is a graph input, else the shape variables of its length, which the inputs declare
    (ddddocr's CRNN runs its LSTM over the image width / 8)."""
    if x.producer is None:
        return (f"input {x.name!r} has a symbolic sequence length '{t}': the steps are "
                f"unrolled at import, so give its size (from_onnx(model, shapes={{{x.name!r}: "
                "...}))")
    names = ", ".join(sorted(S.variables([t])))
    return (f"X has a symbolic sequence length {t} (shape variables {names}): the steps are "
            "unrolled at import, so fix the sizes of the inputs that declare them: "
            "from_onnx(model, shapes={...})")
# activations that take alpha / beta (ONNX's defaults), consumed in order from the node's lists
_ALPHA = {"LeakyRelu": 0.01, "ThresholdedRelu": 1.0, "Elu": 1.0, "HardSigmoid": 0.2,
          "Affine": 1.0, "ScaledTanh": 1.0}
_BETA = {"HardSigmoid": 0.5, "Affine": 0.0, "ScaledTanh": 1.0}
_PLAIN = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu", "Softsign": "softsign",
          "Softplus": "softplus"}


class _Activation:
    def __init__(self, name: str, alpha: float | None, beta: float | None) -> None:
        self.name, self.alpha, self.beta = name, alpha, beta

    def __call__(self, c, v):
        n = self.name
        if n in _PLAIN:
            return c.op(_PLAIN[n], [v])
        if n == "LeakyRelu":
            return c.op("leaky_relu", [v], alpha=self.alpha)
        if n == "Elu":
            return c.op("elu", [v], alpha=self.alpha)
        if n == "HardSigmoid":
            return c.op("hard_sigmoid", [v], alpha=self.alpha, beta=self.beta)
        if n == "Affine":
            return _axpb(c, v, self.alpha, self.beta)
        if n == "ScaledTanh":
            return _scale(c, c.op("tanh", [_scale(c, v, self.beta)]), self.alpha)
        # ThresholdedRelu: x where x > alpha, else 0
        keep = c.op("greater", [v, _const(c, self.alpha, v.dtype)])
        return c.op("where", [keep, v, _const(c, 0.0, v.dtype)])


def _const(c, value, dtype):
    return c.b.const(np.asarray(value, dtype=dtype).reshape(1), name="rnn_const")


def _scale(c, v, a):
    return v if a == 1.0 else c.op("multiply", [v, _const(c, a, v.dtype)])


def _axpb(c, v, a, b):
    v = _scale(c, v, a)
    return v if b == 0.0 else c.op("add", [v, _const(c, b, v.dtype)])


def _activations(c, a, per_direction: int, defaults: list[str], dirs: int) -> list[list]:
    names = list(a.get("activations") or defaults * dirs)
    if len(names) != per_direction * dirs:
        raise refuse(c, f"activations {names} must name {per_direction} functions per "
                        f"direction ({per_direction * dirs} in all)")
    alphas = list(a.get("activation_alpha") or [])
    betas = list(a.get("activation_beta") or [])
    acts = []
    for n in names:
        if n not in _PLAIN and n not in _ALPHA:
            raise refuse(c, f"activation {n!r} is not supported (supported: "
                            f"{', '.join(sorted({*_PLAIN, *_ALPHA}))})")
        alpha = (alphas.pop(0) if alphas else _ALPHA[n]) if n in _ALPHA else None
        beta = (betas.pop(0) if betas else _BETA[n]) if n in _BETA else None
        acts.append(_Activation(n, alpha, beta))
    return [acts[d * per_direction:(d + 1) * per_direction] for d in range(dirs)]


class _Rnn:
    """What LSTM and GRU share: attributes, the weights as arrays, layout, steps, masks."""

    def __init__(self, c, ins, a, gates: int) -> None:
        self.c = c
        direction = a.get("direction", "forward")
        if direction not in _DIRECTIONS:
            raise refuse(c, f"direction {direction!r} is not forward, reverse or bidirectional")
        self.direction, self.dirs = direction, _DIRECTIONS[direction]
        self.layout = int(a.get("layout", 0))
        if self.layout not in (0, 1):
            raise refuse(c, f"layout must be 0 or 1, got {self.layout}")
        x = ins[0]
        if len(x.shape) != 3:
            raise refuse(c, f"X must have rank 3, got shape {list(x.shape)}")
        if self.layout == 1:  # [B, T, I] -> [T, B, I]
            x = c.op("transpose", [x], perm=[1, 0, 2])
        self.x = x
        self.T, self.B, self.I = x.shape
        if not isinstance(self.T, int):  # (issue 19) the steps are unrolled at import
            raise refuse(c, _symbolic_length(ins[0], self.T))
        if self.T < 1:
            raise refuse(c, "X has no time steps")
        self.w = self._weight(ins, 1, "W")
        self.r = self._weight(ins, 2, "R")
        H = self.r.shape[-1]
        self.H = int(a.get("hidden_size", H))
        self.G = gates
        self._check_shape(self.w, (self.dirs, gates * self.H, self.I), "W")
        self._check_shape(self.r, (self.dirs, gates * self.H, self.H), "R")
        self.bias = self._weight(ins, 3, "B", optional=True)
        if self.bias is None:
            self.bias = np.zeros((self.dirs, 2 * gates * self.H), self.w.dtype)
        self._check_shape(self.bias, (self.dirs, 2 * gates * self.H), "B")
        self.clip = a.get("clip")
        self.lens = self._lens(ins)
        self._mask_list: list | None = None

    def _weight(self, ins, k, what, optional=False):
        v = ins[k] if len(ins) > k else None
        if v is None:
            if optional:
                return None
            raise refuse(self.c, f"input {what} is missing")
        if not v.is_constant:
            raise refuse(self.c, f"input {what} ({v.name!r}) must be a constant (an "
                                 "initializer); it is computed at run time")
        return np.asarray(v.data)

    def _check_shape(self, arr, want, what):
        if tuple(arr.shape) != tuple(want):
            raise refuse(self.c, f"{what} has shape {list(arr.shape)}, expected {list(want)} "
                                 f"(directions, gates x hidden_size, ...)")

    def _lens(self, ins):
        """sequence_lens as given (a run-time value, or a constant with lengths in [0, T]), or
        None when absent or every sequence has the full length."""
        v = ins[4] if len(ins) > 4 else None
        if v is None:
            return None
        if tuple(v.shape) != (self.B,) or not np.issubdtype(np.dtype(v.dtype), np.integer):
            raise refuse(self.c, f"sequence_lens ({v.name!r}) must be integers of shape "
                                 f"[{self.B}], got {v.dtype}{list(v.shape)}")
        if not v.is_constant:
            return v
        lens = np.asarray(v.data).reshape(-1).astype(np.int64)
        if (lens < 0).any() or (lens > self.T).any():
            raise refuse(self.c, f"sequence_lens {lens.tolist()} must give a length in "
                                 f"[0, {self.T}] for each of the {self.B} batch entries")
        return None if (lens == self.T).all() else v

    @property
    def masks(self):
        """For the unrolled form: per step, a bool [B, 1] value (entries still inside their
        sequence), or None when every sequence has the full length; ``self.started``:
        entries with a non-empty sequence (None: all). Made on first use."""
        if self._mask_list is None and self.lens is not None:
            self._mask_list = self._masks(self.lens)
        return self._mask_list

    @property
    def started(self):
        _ = self.masks
        return getattr(self, "_started", None)

    def _masks(self, v):
        if not v.is_constant:
            return self._run_time_masks(v)
        lens = np.asarray(v.data).reshape(-1).astype(np.int64)
        c = self.c
        if not (lens > 0).all():
            self._started = c.b.const(np.asarray(lens > 0).reshape(self.B, 1),
                                      name=f"{c.node_name}_started")
        return [c.b.const(np.asarray(t < lens).reshape(self.B, 1), name=f"{c.node_name}_mask")
                for t in range(self.T)]

    def _run_time_masks(self, lens):
        """Masks compared at run time (lengths past T act as T, negative ones as 0)."""
        c = self.c
        col = c.op("reshape", [lens], shape=[self.B, 1])

        def more_than(t):
            return c.op("greater", [col, c.b.const(np.array([t], dtype=lens.dtype),
                                                   name=f"{c.node_name}_step")])

        self._started = more_than(0)
        return [more_than(t) for t in range(self.T)]

    def initial(self, ins, k, d):
        """Initial state k (initial_h, initial_c) of direction d as [B, H], or None (zeros)."""
        v = ins[k] if len(ins) > k else None
        if v is None:
            return None
        want = (self.B, self.dirs, self.H) if self.layout else (self.dirs, self.B, self.H)
        if tuple(v.shape) != want:
            raise refuse(self.c, f"initial state {v.name!r} has shape {list(v.shape)}, "
                                 f"expected {list(want)}")
        axis = 1 if self.layout else 0
        s = self.c.op("slice", [v], starts=[d], ends=[d + 1], axes=[axis], steps=[1])
        return self.c.op("reshape", [s], shape=[self.B, self.H])

    def initial_all(self, ins, k):
        """Initial state k of every direction as [D, B, H] (zeros when absent)."""
        v = ins[k] if len(ins) > k else None
        if v is None:
            return self.c.b.const(np.zeros((self.dirs, self.B, self.H), self.w.dtype),
                                  name=f"{self.c.node_name}_state0")
        self.initial(ins, k, 0)  # checks the shape
        return self.c.op("transpose", [v], perm=[1, 0, 2]) if self.layout else v

    def steps(self, d):
        forward = self.direction == "forward" or (self.direction == "bidirectional" and d == 0)
        return range(self.T) if forward else range(self.T - 1, -1, -1)

    def projection(self, d, bias):
        """X W^T + bias for every step of direction d: [T*B, G*H] in one dense."""
        c = self.c
        wt = c.b.const(np.ascontiguousarray(self.w[d].T), name=f"{c.node_name}_W{d}")
        rows = c.op("reshape", [self.x], shape=[self.T * self.B, self.I])
        bv = c.b.const(np.ascontiguousarray(bias), name=f"{c.node_name}_bias{d}")
        return c.op("dense", [rows, wt, bv])

    def recurrent(self, h, wt):
        """h @ wt ([B, n]); None when there is no state yet (zeros)."""
        return None if h is None else self.c.op("dense", [h, wt])

    def gate(self, v, k, n=1):
        """Gates k..k+n-1 of a [B, G*H] value."""
        return self.c.op("slice", [v], starts=[k * self.H], ends=[(k + n) * self.H], axes=[1],
                         steps=[1])

    def step_input(self, xw, t):
        """The projection of step t, [B, G*H]: a gather by a constant index, not a slice, so
        that every step's kernels are the same workload (a slice's offset is part of it).
        A symbolic batch has no constant rows: step t of the [T, B, G*H] view then."""
        c = self.c
        if not isinstance(self.B, int):
            steps = c.op("reshape", [xw], shape=[self.T, self.B, xw.shape[1]])
            return c.op("gather", [steps, c.b.const(np.array(t, np.int64), name="t")], axis=0)
        rows = c.b.const(np.arange(t * self.B, (t + 1) * self.B, dtype=np.int64),
                         name=f"{c.node_name}_t{t}")
        return c.op("gather", [xw, rows], axis=0)

    def pre(self, x_t, rec, k, n=1):
        """Gates k..k+n-1 before activation: the step's projection plus the recurrent
        product (when there is one), each sliced to the gates."""
        x = self.gate(x_t, k, n)
        return x if rec is None else _add(self.c, self.gate(rec, k, n), x)

    def clipped(self, v):
        if self.clip is None:
            return v
        lim = float(self.clip)
        return self.c.op("clip", [v], min=-lim, max=lim)

    def masked(self, t, new, old):
        """(state, output) of step t: past a sequence's end the state is kept and Y is 0."""
        if self.masks is None:
            return new, new
        c = self.c
        keep = self.masks[t]
        zero = old if old is not None else _zeros(c, new)
        return c.op("where", [keep, new, zero]), c.op("where", [keep, new, _zeros(c, new)])

    def outputs(self, ys: list[list], finals: list[list]) -> list:
        """Y [T, D, B, H] (layout 1: [B, T, D, H]) and each final state [D, B, H] ([B, D, H])."""
        c = self.c
        per_dir = []
        for d in range(self.dirs):
            steps = [c.op("reshape", [h], shape=[1, 1, self.B, self.H]) for h in ys[d]]
            per_dir.append(c.op("concat", steps, axis=0) if len(steps) > 1 else steps[0])
        y = c.op("concat", per_dir, axis=1) if self.dirs > 1 else per_dir[0]
        if self.layout:
            y = c.op("transpose", [y], perm=[2, 0, 1, 3])
        outs = [y]
        for states in finals:
            if self.started is not None:
                # onnxruntime's final state of an empty sequence is 0, not the initial state
                states = [c.op("where", [self.started, s, _zeros(c, s)]) for s in states]
            parts = [c.op("reshape", [s], shape=[1, self.B, self.H]) for s in states]
            f = c.op("concat", parts, axis=0) if len(parts) > 1 else parts[0]
            outs.append(c.op("transpose", [f], perm=[1, 0, 2]) if self.layout else f)
        return outs


def _zeros(c, like):
    return c.b.const(np.zeros(like.shape, like.dtype), name="rnn_zeros")


def _mul(c, a, b):
    return c.op("multiply", [a, b])


def _add(c, a, b):
    return c.op("add", [a, b])


# ---------------------------------------------------------------------------- one kernel


def one_kernel(rnn) -> bool:
    """Whether the layer runs as one recurrence kernel (ops/rnn.py; an LSTM's peepholes and
    input_forget are unrolled per step whatever this says). benchmarks/rnn.py and a test
    replace it to build the unrolled form."""
    return True


def _kernel_fits(rnn) -> bool:
    """Whether the recurrence kernel can take the layer: it is compiled for a static batch,
    and the unrolled steps' graph ops take a symbolic one (openwakeword's hey_mycroft model,
    a tf2onnx LSTM with a dynamic batch, failed to build)."""
    return isinstance(rnn.B, int)


def _fused(rnn, ins, cell, acts, biases, extra, lbr):
    """The layer as two kernels: the projection of every step and direction (one dense:
    [T*B, I] x [I, D*G*H]), then the recurrence over the steps (ops/rnn.py: the time loop
    inside one kernel, the directions side by side). extra: c0 (lstm), Rb_h (gru) or None
    (rnn)."""
    c, D = rnn.c, rnn.dirs
    wt = np.concatenate([rnn.w[d].T for d in range(D)], axis=1)
    rows = c.op("reshape", [rnn.x], shape=[rnn.T * rnn.B, rnn.I])
    xw = c.op("dense", [rows, c.b.const(np.ascontiguousarray(wt), name=f"{c.node_name}_W"),
                        c.b.const(np.concatenate(biases), name=f"{c.node_name}_bias")])
    xw = c.op("reshape", [xw], shape=[rnn.T, rnn.B, D * rnn.G * rnn.H])
    rt = c.b.const(pack_recurrent_weights(rnn.r, rnn.G), name=f"{c.node_name}_R")
    spec = [[f.name, float(f.alpha or 0.0), float(f.beta or 0.0)] for fs in acts for f in fs]
    lens = [] if rnn.lens is None else [rnn.lens]
    extra = [] if extra is None else [extra]
    outs = c.op("rnn_recurrence", [xw, rt, rnn.initial_all(ins, 5), *extra, *lens], cell=cell,
                direction=rnn.direction, activations=spec,
                clip=None if rnn.clip is None else float(rnn.clip), linear_before_reset=lbr)
    y, *states = outs
    if rnn.layout:  # [T, D, B, H] -> [B, T, D, H]; states [D, B, H] -> [B, D, H]
        y = c.op("transpose", [y], perm=[2, 0, 1, 3])
        states = [c.op("transpose", [s], perm=[1, 0, 2]) for s in states]
    return [y, *states]


# ---------------------------------------------------------------------------- LSTM


@_conv("LSTM")
def _lstm(c, ins, a):
    rnn = _Rnn(c, ins, a, 4)
    acts = _activations(c, a, 3, ["Sigmoid", "Tanh", "Tanh"], rnn.dirs)
    input_forget = int(a.get("input_forget", 0))
    peep = rnn._weight(ins, 7, "P", optional=True)
    if peep is not None:
        rnn._check_shape(peep, (rnn.dirs, 3 * rnn.H), "P")
        if not peep.any():  # zero peepholes add nothing
            peep = None
    if one_kernel(rnn) and _kernel_fits(rnn) and not input_forget and peep is None:
        bias = [rnn.bias[d][:4 * rnn.H] + rnn.bias[d][4 * rnn.H:] for d in range(rnn.dirs)]
        return _fused(rnn, ins, "lstm", acts, bias, rnn.initial_all(ins, 6), 0)
    ys, hs, cs = [], [], []
    for d in range(rnn.dirs):
        wb, rb = rnn.bias[d][:4 * rnn.H], rnn.bias[d][4 * rnn.H:]
        xw = rnn.projection(d, wb + rb)
        rt = c.b.const(np.ascontiguousarray(rnn.r[d].T), name=f"{c.node_name}_R{d}")
        p = None if peep is None else [c.b.const(peep[d][k * rnn.H:(k + 1) * rnn.H].copy(),
                                                 name=f"{c.node_name}_P{d}{k}")
                                       for k in range(3)]
        h, cell = rnn.initial(ins, 5, d), rnn.initial(ins, 6, d)
        y = []
        for t in rnn.steps(d):
            rec, x_t = rnn.recurrent(h, rt), rnn.step_input(xw, t)
            pre = [rnn.pre(x_t, rec, k) for k in range(4)]
            new_h, new_c = _lstm_cell(c, rnn, acts[d], pre, cell, p, input_forget)
            h, out = rnn.masked(t, new_h, h)
            cell, _ = rnn.masked(t, new_c, cell)
            y.append(out)
        if rnn.steps(d)[0] != 0:  # reverse: Y is indexed by time, not by step
            y.reverse()
        ys.append(y)
        hs.append(h)
        cs.append(cell)
    return rnn.outputs(ys, [hs, cs])


def _lstm_cell(c, rnn, act, pre, cell, p, input_forget):
    """One step from the gates' pre-activations (order i, o, f, c), each [B, H]."""
    f, gg, hh = act
    pre = list(pre)
    if p is not None and cell is not None:  # peepholes read the previous cell (o: the new one)
        pre[0] = _add(c, pre[0], _mul(c, p[0], cell))
        pre[2] = _add(c, pre[2], _mul(c, p[2], cell))
    i = f(c, rnn.clipped(pre[0]))
    forget = None
    if cell is not None:
        if input_forget:
            forget = c.op("subtract", [_const(c, 1.0, i.dtype), i])
        else:
            forget = f(c, rnn.clipped(pre[2]))
    cand = gg(c, rnn.clipped(pre[3]))
    new_c = _mul(c, i, cand) if cell is None else _add(c, _mul(c, forget, cell),
                                                       _mul(c, i, cand))
    o_pre = pre[1] if p is None else _add(c, pre[1], _mul(c, p[1], new_c))
    o = f(c, rnn.clipped(o_pre))
    return _mul(c, o, hh(c, new_c)), new_c


# ---------------------------------------------------------------------------- GRU


@_conv("GRU")
def _gru(c, ins, a):
    rnn = _Rnn(c, ins, a, 3)
    acts = _activations(c, a, 2, ["Sigmoid", "Tanh"], rnn.dirs)
    lbr = int(a.get("linear_before_reset", 0))
    H = rnn.H
    if one_kernel(rnn) and _kernel_fits(rnn):
        bias = [_gru_projection_bias(rnn, d, lbr) for d in range(rnn.dirs)]
        rbh = np.stack([rnn.bias[d][5 * H:] * (1 if lbr else 0) for d in range(rnn.dirs)])
        return _fused(rnn, ins, "gru", acts, bias, c.b.const(
            np.ascontiguousarray(rbh), name=f"{c.node_name}_Rbh"), lbr)
    ys, hs = [], []
    for d in range(rnn.dirs):
        rb = rnn.bias[d][3 * H:]
        xw = rnn.projection(d, _gru_projection_bias(rnn, d, lbr))
        r_zr = c.b.const(np.ascontiguousarray(rnn.r[d][:2 * H].T), name=f"{c.node_name}_Rzr{d}")
        r_h = c.b.const(np.ascontiguousarray(rnn.r[d][2 * H:].T), name=f"{c.node_name}_Rh{d}")
        rbh = c.b.const(rb[2 * H:].copy(), name=f"{c.node_name}_Rbh{d}")
        h = rnn.initial(ins, 5, d)
        y = []
        for t in rnn.steps(d):
            new_h = _gru_cell(c, rnn, acts[d], xw, t, h, (r_zr, r_h, rbh), lbr)
            h, out = rnn.masked(t, new_h, h)
            y.append(out)
        if rnn.steps(d)[0] != 0:
            y.reverse()
        ys.append(y)
        hs.append(h)
    return rnn.outputs(ys, [hs])


def _gru_projection_bias(rnn, d, lbr):
    """z and r add both biases to the projection; h adds Wbh (and Rbh where it adds)."""
    H = rnn.H
    wb, rb = rnn.bias[d][:3 * H], rnn.bias[d][3 * H:]
    return wb + np.concatenate([rb[:2 * H], rb[2 * H:] if not lbr else 0 * rb[2 * H:]])


def _gru_cell(c, rnn, act, xw, t, h, weights, lbr):
    f, g = act
    r_zr, r_h, rbh = weights
    zr, x_t = rnn.recurrent(h, r_zr), rnn.step_input(xw, t)
    z = f(c, rnn.clipped(rnn.pre(x_t, zr, 0)))
    r = f(c, rnn.clipped(rnn.pre(x_t, zr, 1)))
    x_h = rnn.pre(x_t, None, 2)
    if h is None:  # a zero state: r (.) 0 and 0 @ Rh are zero; lbr adds r (.) Rbh
        pre = x_h if not lbr else _add(c, x_h, _mul(c, r, rbh))
    elif lbr:
        pre = _add(c, x_h, _mul(c, r, c.op("dense", [h, r_h, rbh])))
    else:
        pre = _add(c, c.op("dense", [_mul(c, r, h), r_h]), x_h)
    cand = g(c, rnn.clipped(pre))
    # H = (1 - z) (.) cand + z (.) H_prev = cand + z (.) (H_prev - cand)
    if h is None:
        return c.op("subtract", [cand, _mul(c, z, cand)])
    return _add(c, cand, _mul(c, z, c.op("subtract", [h, cand])))


# ---------------------------------------------------------------------------- RNN


@_conv("RNN")
def _vanilla_rnn(c, ins, a):
    rnn = _Rnn(c, ins, a, 1)
    acts = _activations(c, a, 1, ["Tanh"], rnn.dirs)
    H = rnn.H
    biases = [rnn.bias[d][:H] + rnn.bias[d][H:] for d in range(rnn.dirs)]  # both add
    if one_kernel(rnn) and _kernel_fits(rnn):
        return _fused(rnn, ins, "rnn", acts, biases, None, 0)
    ys, hs = [], []
    for d in range(rnn.dirs):
        xw = rnn.projection(d, biases[d])
        rt = c.b.const(np.ascontiguousarray(rnn.r[d].T), name=f"{c.node_name}_R{d}")
        h = rnn.initial(ins, 5, d)
        y = []
        for t in rnn.steps(d):
            pre = rnn.pre(rnn.step_input(xw, t), rnn.recurrent(h, rt), 0)
            h, out = rnn.masked(t, acts[d][0](c, rnn.clipped(pre)), h)
            y.append(out)
        if rnn.steps(d)[0] != 0:  # reverse: Y is indexed by time, not by step
            y.reverse()
        ys.append(y)
        hs.append(h)
    return rnn.outputs(ys, [hs])
