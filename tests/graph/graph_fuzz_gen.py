"""Random valid ONNX graphs for the graph fuzzer (graph_fuzz.py).

    model, feeds = generate(seed)     the same (model, feeds) for a seed, everywhere

A graph is grown one operator at a time over the values made so far (a recent value most of
the time, so chains form; any earlier one too, so values get many readers), with new inputs
and constants (initializers or Constant nodes) where an operator needs an operand of a shape
no value has. Each node's output shape comes from onnx's shape inference of the graph so far,
so the generator never computes a shape rule itself; a node inference refuses is undone.

Values carry a magnitude bound (``mag``) and an ``exact`` flag, so that the graphs stay
numerically comparable with onnxruntime: Exp reads clipped values, Log/Sqrt/Div/Pow read
values made positive (Abs + 0.5), large values pass through Tanh before they are multiplied,
and float -> int casts and comparisons read only values every implementation computes exactly
(inputs, constants, and data movement, Neg/Abs/Relu/Max/Min of them): a cast of a value that
two correct implementations round differently would be a false alarm."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

FLOAT = "float32"
TP = {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
      "bool": TensorProto.BOOL}
FROM_TP = {v: k for k, v in TP.items()}
MAX_ELEMS = 8192  # per value: keeps a case's build and run short
MAX_RANK = 5
INT_MAX, INT_MIN = 2**63 - 1, -(2**63)


class Reject(Exception):
    """The operator drawn does not fit the values there are: undo it and draw another."""


@dataclass
class V:
    name: str
    shape: tuple
    dtype: str
    mag: float  # an upper bound of |value| (an estimate: what keeps Exp and products finite)
    exact: bool  # every correct implementation computes it bit for bit
    pos: bool = False  # >= 0.25 (what Log, Sqrt, Div and Pow read)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _bcast(a: tuple, b: tuple) -> tuple | None:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


class GraphGen:
    """The state of one graph's draw (see the module docstring)."""

    def __init__(self, seed: int):
        self.rng = random.Random(f"graph-fuzz:{seed}")  # str seeds: the same on every machine
        self.np = np.random.default_rng(self.rng.getrandbits(64))
        self.opset = self.rng.choice((17, 18))
        self.nodes: list = []
        self.inits: list = []
        self.inputs: list = []
        self.feeds: dict[str, np.ndarray] = {}
        self.vals: list[V] = []
        self.consts: set[str] = set()
        self.n = 0

    # ------------------------------------------------------------------------- bookkeeping

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def snapshot(self) -> tuple:
        return (len(self.nodes), len(self.inits), len(self.inputs), len(self.vals))

    def restore(self, snap: tuple) -> None:
        nn, ni, nin, nv = snap
        for i in self.inputs[nin:]:
            self.feeds.pop(i.name, None)
        del self.nodes[nn:], self.inits[ni:], self.inputs[nin:], self.vals[nv:]

    def model(self, outputs: list[V] | None = None) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(v.name, TP[v.dtype], v.shape)
                for v in (outputs or [])]
        g = helper.make_graph(self.nodes, "fuzz", self.inputs, outs, self.inits)
        opsets = [helper.make_opsetid("", self.opset)]
        return helper.make_model(g, opset_imports=opsets, ir_version=8)

    def infer(self, names: list[str]) -> list[tuple[tuple, str]]:
        """(shape, dtype) of the named values, by onnx's shape inference (strict)."""
        try:
            m = shape_inference.infer_shapes(self.model(), strict_mode=True, data_prop=True)
        except Exception as e:
            raise Reject(str(e)[:200]) from e
        info = {vi.name: vi.type.tensor_type for vi in m.graph.value_info}
        out = []
        for n in names:
            tt = info.get(n)
            if tt is None or not tt.HasField("shape"):
                raise Reject(f"no inferred shape for {n}")
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if any(d <= 0 for d in dims):
                raise Reject(f"{n}: shape {dims} (empty or unknown)")
            out.append((tuple(dims), FROM_TP[tt.elem_type]))
        return out

    def emit(self, op: str, ins: list, n_out: int = 1, mag: float | None = None,
             exact: bool = False, pos: bool = False, **attrs) -> list[V]:
        """Append a node; its outputs' shapes and dtypes come from shape inference."""
        names = [self.fresh(op.lower()) for _ in range(n_out)]
        ins = [i if isinstance(i, str) else i.name for i in ins]
        self.nodes.append(helper.make_node(op, ins, names, **attrs))
        outs = []
        for name, (shape, dtype) in zip(names, self.infer(names)):
            if math.prod(shape) > MAX_ELEMS or len(shape) > MAX_RANK:
                raise Reject(f"{op} output {shape} too large")
            m = mag if mag is not None else 1.0
            v = V(name, shape, dtype, m if dtype == FLOAT else max(m, 1.0), exact, pos)
            self.vals.append(v)
            outs.append(v)
        return outs

    def emit1(self, op: str, ins: list, **kw) -> V:
        return self.emit(op, ins, **kw)[0]

    # ------------------------------------------------------------------------- operands

    def shape(self, rank: int, lo: int = 1, hi: int = 6) -> tuple:
        """Small dims, 1 often; now and then one past a vector width (a loop's tail)."""
        dims = [self.rng.choice([lo, *range(lo, hi + 1)]) for _ in range(rank)]
        if rank and self.rng.random() < 0.15:
            dims[self.rng.randrange(rank)] = self.rng.choice((9, 13, 16, 17, 33))
        return tuple(dims)

    def new_input(self, shape: tuple, dtype: str = FLOAT) -> V:
        name = self.fresh("in")
        if dtype == FLOAT:
            arr, mag = self.np.uniform(-2, 2, shape).astype(np.float32), 2.0
        elif dtype == "bool":
            arr, mag = np.asarray(self.np.random(shape) < 0.5), 1.0
        else:
            arr, mag = self.np.integers(-5, 6, shape).astype(dtype), 5.0
        self.inputs.append(helper.make_tensor_value_info(name, TP[dtype], shape))
        self.feeds[name] = arr
        v = V(name, tuple(shape), dtype, mag, True)
        self.vals.append(v)
        return v

    def const(self, arr, dtype: str | None = None, keep: bool = True) -> V:
        """A constant: an initializer, or (a third of the time) a Constant node. ``keep``:
        offered as an operand to later operators too."""
        arr = np.asarray(arr, dtype=dtype)
        name = self.fresh("c")
        t = numpy_helper.from_array(arr, name)
        if self.rng.random() < 0.3:
            self.nodes.append(helper.make_node("Constant", [], [name], value=t))
        else:
            self.inits.append(t)
        dt = "bool" if arr.dtype == np.bool_ else str(arr.dtype)
        mag = float(np.abs(arr).max(initial=0)) if dt != "bool" else 1.0
        v = V(name, arr.shape, dt, mag, True, bool(dt == FLOAT and arr.size
                                                    and arr.min() >= 0.25))
        if keep:
            self.vals.append(v)
        return v

    def ints(self, values) -> V:
        """An int64 operand of an operator (axes, shape, pads): never offered as data."""
        return self.const(np.asarray(values, dtype=np.int64), keep=False)

    def weight(self, shape: tuple, lo: float = -1.0, hi: float = 1.0) -> V:
        return self.const(self.np.uniform(lo, hi, shape).astype(np.float32), keep=False)

    def pick(self, pred=lambda v: True, new=None) -> V:
        """A value for which pred holds: a recent one most of the time; ``new()`` makes one
        where none fits (and a tenth of the time anyway)."""
        cands = [v for v in self.vals if pred(v)]
        if new is not None and (not cands or self.rng.random() < 0.1):
            return new()
        if not cands:
            raise Reject("no operand fits")
        if self.rng.random() < 0.6:
            return self.rng.choice(cands[-3:])
        return self.rng.choice(cands)

    def float_val(self, min_rank: int = 0, max_rank: int = MAX_RANK, rank: int | None = None,
                  pred=lambda v: True) -> V:
        lo, hi = (rank, rank) if rank is not None else (min_rank, max_rank)

        def new():
            if lo == 0 and self.rng.random() < 0.1:
                return self.new_input(())  # a scalar input
            return self.new_input(self.shape(self.rng.randint(max(lo, 1), max(hi, 1)))
                                  if hi > 0 else ())

        v = self.pick(lambda v: v.dtype == FLOAT and lo <= len(v.shape) <= hi and pred(v), new)
        return self.tame(v)

    def tame(self, v: V, limit: float = 1e3) -> V:
        """v, through Tanh when it may be large (products of it would overflow)."""
        return self.emit1("Tanh", [v], mag=1.0) if v.mag > limit else v

    def positive(self, v: V) -> V:
        """A value >= 0.25 made from v (Abs + 0.5), or v when it already is one."""
        if v.pos:
            return v
        a = self.emit1("Abs", [v], mag=v.mag, exact=v.exact)
        return self.emit1("Add", [a, self.const(np.float32(self.rng.choice((0.5, 1.0))),
                                                keep=False)], mag=v.mag + 1, pos=True)

    def broadcast_shape(self, shape: tuple) -> tuple:
        """A shape that broadcasts with ``shape``: a suffix of it, some dims 1, at times a
        leading dimension more or a scalar."""
        r = len(shape)
        k = self.rng.choice([0, *range(r + 1), r, r]) if r else 0
        out = tuple(1 if self.rng.random() < 0.3 else d for d in shape[r - k:])
        if self.rng.random() < 0.1 and r < 4:
            out = (self.rng.choice((1, 2, 3)), *shape)
        return out

    def partner(self, v: V, dtype: str = FLOAT, pred=lambda v: True) -> V:
        """A second operand that broadcasts with v: an existing value, a new constant or a new
        input."""
        def fits(w):
            b = _bcast(w.shape, v.shape)
            return w.dtype == dtype and b is not None and math.prod(b) <= MAX_ELEMS and pred(w)

        def new():
            shape = self.broadcast_shape(v.shape)
            if self.rng.random() < 0.5:
                return self.new_input(shape, dtype)
            if dtype == FLOAT:
                return self.const(self.np.uniform(-2, 2, shape).astype(np.float32))
            return self.const(self.np.integers(-4, 5, shape).astype(dtype))

        return self.pick(fits, new)


class OpsGen(GraphGen):
    """The operators a graph is drawn from: ``op_<name>`` methods, weighted by OPS."""

    # ------------------------------------------------------------------------- elementwise

    def op_unary(self) -> None:
        v = self.float_val()
        op = self.rng.choice(("Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log",
                              "Sqrt", "Reciprocal", "LeakyRelu", "HardSigmoid", "Softplus",
                              "Identity"))
        if op == "Exp":
            if v.mag > 8:
                v = self.emit1("Clip", [v, self.const(np.float32(-4), keep=False),
                                        self.const(np.float32(4), keep=False)], mag=4.0)
            self.emit1("Exp", [v], mag=math.exp(min(v.mag, 8)), pos=False)
        elif op in ("Log", "Sqrt", "Reciprocal"):
            p = self.positive(v)
            mag = {"Log": math.log(p.mag) + 2, "Sqrt": math.sqrt(p.mag), "Reciprocal": 4.0}[op]
            self.emit1(op, [p], mag=mag, pos=op == "Sqrt")
        elif op in ("Neg", "Abs", "Relu", "Identity"):
            self.emit1(op, [v], mag=v.mag, exact=v.exact, pos=v.pos and op != "Neg")
        elif op == "LeakyRelu":
            self.emit1(op, [v], mag=v.mag, alpha=self.rng.choice((0.01, 0.2)))
        elif op == "Softplus":
            self.emit1(op, [self.tame(v, 50)], mag=min(v.mag, 50) + 1)
        else:
            self.emit1(op, [v], mag=1.0)

    def op_gelu(self) -> None:
        """Gelu as exporters write it below opset 20: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        x = self.tame(self.float_val(min_rank=1), 50)
        d = self.emit1("Div", [x, self.const(np.float32(math.sqrt(2)), keep=False)], mag=x.mag)
        e = self.emit1("Erf", [d])
        a = self.emit1("Add", [e, self.const(np.float32(1), keep=False)], mag=2.0)
        m = self.emit1("Mul", [x, a], mag=2 * x.mag)
        self.emit1("Mul", [m, self.const(np.float32(0.5), keep=False)], mag=x.mag)

    def op_binary(self) -> None:
        a = self.float_val()
        op = self.rng.choice(("Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Add", "Mul"))
        if op == "Pow":
            p = self.positive(self.tame(a, 20))
            e = self.rng.choice((2.0, 0.5, 3.0, -1.0))
            self.emit1("Pow", [p, self.const(np.float32(e), keep=False)],
                       mag=max(p.mag ** e, 4 ** abs(e)))
            return
        b = self.tame(self.partner(a))
        if op == "Div":
            b = self.positive(b)
        mags = {"Add": a.mag + b.mag, "Sub": a.mag + b.mag, "Mul": a.mag * b.mag,
                "Div": a.mag * 4, "Max": max(a.mag, b.mag), "Min": max(a.mag, b.mag)}
        ins = [a, b] if op == "Div" or self.rng.random() < 0.7 else [b, a]
        exact = op in ("Max", "Min") and a.exact and b.exact
        self.emit1(op, ins, mag=mags[op], exact=exact)

    def op_clip(self) -> None:
        v = self.float_val()
        lo, hi = sorted(self.rng.sample((-1.5, -0.5, 0.0, 0.3, 1.0, 2.0), 2))
        ins = [v, self.const(np.float32(lo), keep=False) if self.rng.random() < 0.8 else ""]
        if self.rng.random() < 0.8:
            ins.append(self.const(np.float32(hi), keep=False))
        while ins[-1] == "":
            ins.pop()
        self.emit1("Clip", ins, mag=min(v.mag, 2.0) if len(ins) == 3 else v.mag, exact=v.exact)

    def op_int_binary(self) -> None:
        dt = self.rng.choice(("int32", "int64"))
        a = self.pick(lambda v: v.dtype == dt and v.mag < 1e4,
                      lambda: self.new_input(self.shape(self.rng.randint(1, 3)), dt))
        op = self.rng.choice(("Add", "Sub", "Mul", "Max", "Min", "Div", "Abs", "Neg"))
        if op in ("Abs", "Neg"):
            self.emit1(op, [a], mag=a.mag, exact=True)
            return
        if op == "Div":  # a positive divisor: C-style truncation of negatives is the test
            b = self.const(self.np.integers(1, 4, self.broadcast_shape(a.shape)).astype(dt),
                           keep=False)
        else:
            b = self.partner(a, dt, lambda w: w.mag < 1e4)
        mag = a.mag * b.mag if op == "Mul" else a.mag + b.mag
        self.emit1(op, [a, b], mag=mag, exact=True)

    def op_cast(self) -> None:
        v = self.pick(lambda v: v.exact and v.mag < 1e6,
                      lambda: self.new_input(self.shape(self.rng.randint(1, 3))))
        to = self.rng.choice([t for t in TP if t != v.dtype] + [v.dtype])
        self.emit1("Cast", [v], mag=v.mag, exact=True, to=TP[to])

    def op_compare_where(self) -> None:
        a = self.pick(lambda v: v.exact and v.dtype != "bool",
                      lambda: self.new_input(self.shape(self.rng.randint(1, 3))))
        b = self.partner(a, a.dtype, lambda w: w.exact)
        ops = ("Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal")
        c = self.emit1(self.rng.choice(ops), [a, b], exact=True)
        if self.rng.random() < 0.3:
            other = self.partner(c, "bool")
            c = self.emit1(self.rng.choice(("And", "Or", "Xor")), [c, other], exact=True)
        if self.rng.random() < 0.2:
            c = self.emit1("Not", [c], exact=True)
        x = self.partner(c)
        y = self.partner(x)
        self.emit1("Where", [c, x, y], mag=max(x.mag, y.mag), exact=x.exact and y.exact)

    # ------------------------------------------------------------------------- reductions

    def op_reduce(self) -> None:
        v = self.pick(lambda v: v.dtype in (FLOAT, "int32", "int64") and v.shape,
                      lambda: self.new_input(self.shape(self.rng.randint(1, 4))))
        op = self.rng.choice(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"))
        if v.dtype != FLOAT and op == "ReduceMean":
            op = "ReduceSum"
        r = len(v.shape)
        axes = None
        if self.rng.random() > 0.15:
            axes = self.rng.sample(range(r), self.rng.randint(1, r))
            axes = [a - r if self.rng.random() < 0.3 else a for a in axes]
        keep = self.rng.randint(0, 1)
        count = math.prod(v.shape) if axes is None else math.prod(v.shape[a] for a in axes)
        mag = v.mag * count if op == "ReduceSum" else v.mag
        exact = v.exact and op in ("ReduceMax", "ReduceMin") or v.dtype != FLOAT
        attrs = {"keepdims": keep}
        ins = [v]
        if self.opset >= 18 or op == "ReduceSum":
            if axes is not None:
                ins.append(self.ints(axes))
        elif axes is not None:
            attrs["axes"] = axes
        self.emit1(op, ins, mag=mag, exact=exact, **attrs)

    def op_softmax(self) -> None:
        v = self.tame(self.float_val(min_rank=1), 100)
        op = self.rng.choice(("Softmax", "LogSoftmax"))
        axis = self.rng.randrange(-len(v.shape), len(v.shape))
        mag = 1.0 if op == "Softmax" else 2 * v.mag + math.log(v.shape[axis]) + 1
        self.emit1(op, [v], mag=mag, axis=axis)

    # ------------------------------------------------------------------------- products

    def op_matmul(self) -> None:
        a = self.tame(self.float_val(min_rank=1, max_rank=4), 100)
        k = a.shape[-1]
        if len(a.shape) == 1 or self.rng.random() < 0.2:
            bshape = (k,) if self.rng.random() < 0.5 else (k, self.rng.randint(1, 8))
        else:
            batch = self.broadcast_shape(a.shape[:-2]) if len(a.shape) > 2 else ()
            if len(a.shape) == 2 and self.rng.random() < 0.3:
                batch = (self.rng.randint(1, 3),)
            bshape = (*batch, k, self.rng.randint(1, 8))

        def new():
            return self.weight(bshape) if self.rng.random() < 0.6 else self.new_input(bshape)

        b = self.tame(self.pick(lambda w: w.dtype == FLOAT and w.shape == bshape, new), 100)
        ins = [a, b]
        self.emit1("MatMul", ins, mag=a.mag * b.mag * k)

    def op_gemm(self) -> None:
        ta, tb = self.rng.randint(0, 1), self.rng.randint(0, 1)
        a = self.tame(self.float_val(rank=2), 100)
        m, k = a.shape[::-1] if ta else a.shape
        n = self.rng.randint(1, 8)
        b = self.weight((n, k) if tb else (k, n))
        ins = [a, b]
        alpha, beta = self.rng.choice((1.0, 0.5, 2.0)), self.rng.choice((1.0, 0.5))
        if self.rng.random() < 0.7:
            cshape = self.rng.choice([(), (n,), (1, n), (m, 1), (m, n)])
            ins.append(self.weight(cshape))
        self.emit1("Gemm", ins, mag=a.mag * k * alpha + beta, transA=ta, transB=tb,
                   alpha=alpha, beta=beta)

    # ------------------------------------------------------------------------- vision

    def image(self, rank: int = 4) -> V:
        def new():
            spatial = tuple(self.rng.randint(3, 10) for _ in range(rank - 2))
            c = self.rng.choice((1, 2, 3, 4, 5, 8, 16, 16, 24))
            return self.new_input((self.rng.randint(1, 2), c, *spatial))

        v = self.pick(lambda v: v.dtype == FLOAT and len(v.shape) == rank and v.shape[1] <= 32,
                      new)
        return self.tame(v, 100)

    def op_conv(self) -> None:
        x = self.image(4 if self.rng.random() < 0.8 else 3)
        c, spatial = x.shape[1], x.shape[2:]
        divisors = [g for g in range(1, c + 1) if c % g == 0]
        g = c if self.rng.random() < 0.3 else self.rng.choice(divisors)
        m = g * self.rng.choice((1, 1, 2, 3))
        if g == 1 and self.rng.random() < 0.5:  # channel counts the blocked layouts take
            m = self.rng.choice((8, 16, 16, 32))
        ks = tuple(self.rng.choice((1, 2, 3, 3, 5)) for _ in spatial)
        dil = tuple(self.rng.choice((1, 1, 2)) for _ in spatial)
        eff = [d * (k - 1) + 1 for k, d in zip(ks, dil)]
        if any(e > n for e, n in zip(eff, spatial)):
            raise Reject("conv window larger than its input (onnxruntime refuses)")
        strides = tuple(self.rng.choice((1, 1, 2, 3)) for _ in spatial)
        attrs = {"kernel_shape": ks, "dilations": dil, "strides": strides, "group": g}
        if self.rng.random() < 0.1 and set(dil) == {1}:  # onnxruntime: SAME without dilation
            attrs["auto_pad"] = self.rng.choice(("SAME_UPPER", "SAME_LOWER"))
        else:
            pads = [self.rng.randint(0, e - 1) for e in eff for _ in (0,)]
            attrs["pads"] = pads + [self.rng.randint(0, e - 1) for e in eff]
        ins = [x, self.weight((m, c // g, *ks))]
        if self.rng.random() < 0.6:
            ins.append(self.weight((m,)))
        self.emit1("Conv", ins, mag=x.mag * (c // g) * math.prod(ks) + 1, **attrs)

    def op_pool(self) -> None:
        op = self.rng.choice(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                              "MaxPool", "AveragePool"))
        x = self.image(4 if self.rng.random() < 0.8 else 3)
        if op.startswith("Global"):
            self.emit1(op, [x], mag=x.mag, exact=x.exact and op == "GlobalMaxPool")
            return
        spatial = x.shape[2:]
        ks = tuple(self.rng.choice((1, 2, 2, 3)) for _ in spatial)
        attrs = {"kernel_shape": ks,
                 "strides": tuple(self.rng.choice((1, 2, 2, 3)) for _ in spatial),
                 "pads": [self.rng.randint(0, k - 1) for k in ks * 2],
                 "ceil_mode": int(self.rng.random() < 0.3)}
        if op == "MaxPool" and self.rng.random() < 0.3:
            attrs["dilations"] = tuple(self.rng.choice((1, 2)) for _ in spatial)
        if op == "AveragePool":
            attrs["count_include_pad"] = self.rng.randint(0, 1)
        y = self.emit1(op, [x], mag=x.mag, exact=x.exact and op == "MaxPool", **attrs)
        if attrs["ceil_mode"] and y.shape[2:] != _ceil_pool_shape(spatial, attrs):
            raise Reject("onnx's shape inference and onnxruntime differ on this ceil_mode pool")

    def op_batchnorm(self) -> None:
        x = self.tame(self.float_val(min_rank=2, max_rank=4), 100)
        c = x.shape[1]
        scale, bias = self.weight((c,)), self.weight((c,))
        mean, var = self.weight((c,)), self.weight((c,), 0.5, 2.0)
        mag = (x.mag + 1) * 1.5 + 1
        self.emit1("BatchNormalization", [x, scale, bias, mean, var], mag=mag,
                   epsilon=self.rng.choice((1e-5, 1e-3)))

    def op_layernorm(self) -> None:
        x = self.tame(self.float_val(min_rank=1, max_rank=4), 100)
        r = len(x.shape)
        axis = self.rng.randrange(-r, r)
        inner = x.shape[axis:]
        ins = [x, self.weight(inner)]
        if self.rng.random() < 0.7:
            ins.append(self.weight(inner))
        self.emit1("LayerNormalization", ins, mag=math.sqrt(math.prod(inner)) + 1, axis=axis,
                   epsilon=self.rng.choice((1e-5, 1e-3)))

    def op_resize(self) -> None:
        x = self.image(4)
        mode = self.rng.choice(("nearest", "linear"))
        ctm = self.rng.choice(("half_pixel", "asymmetric", "align_corners",
                               "pytorch_half_pixel"))
        attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
        if mode == "nearest":
            attrs["nearest_mode"] = self.rng.choice(("round_prefer_floor", "round_prefer_ceil",
                                                     "floor", "ceil"))
        if self.rng.random() < 0.5:
            sc = [1.0, 1.0] + [self.rng.choice((0.5, 2.0, 1.5, 3.0, 0.75)) for _ in range(2)]
            ins = [x, "", self.const(np.asarray(sc, np.float32), keep=False)]
        else:
            sizes = [*x.shape[:2], *(self.rng.randint(1, 12) for _ in range(2))]
            ins = [x, "", "", self.ints(sizes)]
        self.emit1("Resize", ins, mag=x.mag, exact=x.exact and mode == "nearest", **attrs)

    # ------------------------------------------------------------------------- data movement

    def any_val(self, min_rank: int = 0) -> V:
        return self.pick(lambda v: len(v.shape) >= min_rank,
                         lambda: self.new_input(self.shape(max(min_rank, 1)
                                                           + self.rng.randint(0, 2))))

    def moved(self, op: str, ins: list, v: V, n_out: int = 1, **attrs) -> list[V]:
        return self.emit(op, ins, n_out, mag=v.mag, exact=v.exact, pos=v.pos, **attrs)

    def op_transpose(self) -> None:
        v = self.any_val(2)
        perm = list(range(len(v.shape)))
        self.rng.shuffle(perm)
        attrs = {} if self.rng.random() < 0.1 else {"perm": perm}
        self.moved("Transpose", [v], v, **attrs)

    def op_reshape(self) -> None:
        v = self.any_val(1)
        factors = [p for d in v.shape for p in _primes(d)]
        self.rng.shuffle(factors)
        rank = self.rng.randint(1, 4)
        dims = [1] * rank
        for p in factors:
            dims[self.rng.randrange(rank)] *= p
        for i, d in enumerate(dims):
            if i < len(v.shape) and v.shape[i] == d and self.rng.random() < 0.3:
                dims[i] = 0
        if self.rng.random() < 0.5:
            dims[self.rng.randrange(rank)] = -1
        self.moved("Reshape", [v, self.ints(dims)], v)

    def op_flatten(self) -> None:
        v = self.any_val(1)
        r = len(v.shape)
        self.moved("Flatten", [v], v, axis=self.rng.randint(-r, r))

    def op_squeeze(self) -> None:
        v = self.any_val(1)
        ones = [i for i, d in enumerate(v.shape) if d == 1]
        r = len(v.shape)
        if not ones or self.rng.random() < 0.4:
            if r >= MAX_RANK:
                raise Reject("rank")
            n = self.rng.randint(1, 2 if r < MAX_RANK - 1 else 1)
            axes = self.rng.sample(range(r + n), n)
            axes = [a - (r + n) if self.rng.random() < 0.3 else a for a in axes]
            self.moved("Unsqueeze", [v, self.ints(axes)], v)
            return
        axes = self.rng.sample(ones, self.rng.randint(1, len(ones)))
        axes = [a - r if self.rng.random() < 0.3 else a for a in axes]
        ins = [v] if self.rng.random() < 0.2 else [v, self.ints(axes)]
        self.moved("Squeeze", ins, v)

    def op_slice(self) -> None:
        v = self.any_val(1)
        r = len(v.shape)
        axes = self.rng.sample(range(r), self.rng.randint(1, r))
        starts, ends, steps = [], [], []
        for a in axes:
            s, e, st = self.slice_bounds(v.shape[a])
            starts.append(s), ends.append(e), steps.append(st)
        ins = [v, self.ints(starts), self.ints(ends)]
        named = [a - r if self.rng.random() < 0.3 else a for a in axes]
        if axes != list(range(r)) or any(st != 1 for st in steps) or self.rng.random() < 0.5:
            ins.append(self.ints(named))
            if any(st != 1 for st in steps) or self.rng.random() < 0.5:
                ins.append(self.ints(steps))
        self.moved("Slice", ins, v)

    def slice_bounds(self, d: int) -> tuple[int, int, int]:
        """(start, end, step) of a non-empty slice of an axis of d, as ONNX may write it:
        negative positions, out-of-range ends that clamp."""
        step = self.rng.choice((1, 1, 1, 2, 3, -1, -2))
        a = self.rng.randrange(d)
        if step > 0:
            b = self.rng.randint(a + 1, d)
            s = a - d if self.rng.random() < 0.3 else a
            e = (self.rng.choice((d + 3, INT_MAX)) if b == d and self.rng.random() < 0.5
                 else b - d if b < d and self.rng.random() < 0.3 else b)
        else:
            b = self.rng.randint(-1, a - 1)  # exclusive; -1: through element 0
            s = a - d if self.rng.random() < 0.3 else (d + 2 if a == d - 1 and
                                                        self.rng.random() < 0.3 else a)
            e = (self.rng.choice((-d - 1, INT_MIN)) if b == -1
                 else b - d if self.rng.random() < 0.3 else b)
        return s, e, step

    def op_concat(self) -> None:
        a = self.any_val(1)
        r = len(a.shape)
        axis = self.rng.randrange(r)

        def fits(w):
            return (w.dtype == a.dtype and len(w.shape) == r
                    and all(x == y for i, (x, y) in enumerate(zip(w.shape, a.shape))
                            if i != axis))

        def new():
            shape = tuple(self.rng.randint(1, 4) if i == axis else d
                          for i, d in enumerate(a.shape))
            if a.dtype == FLOAT and self.rng.random() < 0.5:
                return self.const(self.np.uniform(-2, 2, shape).astype(np.float32))
            return self.new_input(shape, a.dtype)

        ins = [a] + [self.pick(fits, new) for _ in range(self.rng.randint(1, 2))]
        self.rng.shuffle(ins)
        named = axis - r if self.rng.random() < 0.3 else axis
        self.emit1("Concat", ins, mag=max(w.mag for w in ins), exact=all(w.exact for w in ins),
                   axis=named)

    def op_split(self) -> None:
        v = self.pick(lambda v: any(d >= 2 for d in v.shape),
                      lambda: self.new_input((self.rng.randint(2, 6), *self.shape(1))))
        axis = self.rng.choice([i for i, d in enumerate(v.shape) if d >= 2])
        d = v.shape[axis]
        named = axis - len(v.shape) if self.rng.random() < 0.3 else axis
        if self.opset >= 18 and self.rng.random() < 0.4:
            n = self.rng.randint(2, min(d, 3))
            self.moved("Split", [v], v, n, axis=named, num_outputs=n)
            return
        cuts = sorted(self.rng.sample(range(1, d), min(d - 1, self.rng.randint(1, 2))))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, d])]
        self.moved("Split", [v, self.ints(sizes)], v, len(sizes), axis=named)

    def op_gather(self) -> None:
        v = self.any_val(1)
        r = len(v.shape)
        axis = self.rng.randrange(r)
        d = v.shape[axis]
        shape = self.shape(self.rng.randint(0, 2), 1, 4)
        idx = self.np.integers(-d, d, shape).astype(self.rng.choice((np.int64, np.int32)))
        named = axis - r if self.rng.random() < 0.3 else axis
        if self.rng.random() < 0.3:  # indices known at run time only (negative ones too)
            name = self.fresh("idx")
            self.inputs.append(helper.make_tensor_value_info(name, TP[str(idx.dtype)], shape))
            self.feeds[name] = idx
            self.moved("Gather", [v, name], v, axis=named)
            return
        self.moved("Gather", [v, self.const(idx, keep=False)], v, axis=named)

    def op_shape_chain(self) -> None:
        """Shape -> Gather/Slice -> Concat -> Reshape/Expand/ConstantOfShape, as exporters
        write shape arithmetic (folded to constants at import)."""
        v = self.any_val(1)
        r = len(v.shape)
        shp = self.emit1("Shape", [v], exact=True, mag=max(v.shape))
        if self.rng.random() < 0.5:  # the last dims, flattened to one
            k = self.rng.randint(0, r - 1)
            head = self.emit1("Slice", [shp, self.ints([0]), self.ints([k])], exact=True) \
                if k else None
            parts = [head] if head is not None else []
            target = self.emit1("Concat", [*parts, self.ints([-1])], exact=True, axis=0)
            self.moved("Reshape", [v, target], v)
            return
        i = self.rng.randrange(r)
        dim = self.emit1("Gather", [shp, self.ints([i])], exact=True)
        target = self.emit1("Concat", [self.ints([self.rng.randint(1, 2)]), dim], exact=True,
                            axis=0)
        if self.rng.random() < 0.5:
            self.emit1("ConstantOfShape", [target], exact=True, mag=1.5,
                       value=numpy_helper.from_array(np.asarray([1.5], np.float32)))
        else:
            x = self.pick(lambda w: w.shape in ((), (1,), (v.shape[i],)) and w.dtype == FLOAT,
                          lambda: self.new_input((v.shape[i],)))
            self.moved("Expand", [x, target], x)

    def op_const_chain(self) -> None:
        """An operator whose operands are all constants (folded at import)."""
        c = self.const(self.np.uniform(-2, 2, self.shape(self.rng.randint(0, 3)))
                       .astype(np.float32))
        op = self.rng.choice(("Neg", "Relu", "Transpose", "Sigmoid", "Abs"))
        self.emit1(op, [c], mag=c.mag, exact=op != "Sigmoid")

    def op_expand(self) -> None:
        v = self.any_val(0)
        shape = [self.rng.choice((1, 2, 3)) if d == 1 else self.rng.choice((d, d, 1))
                 for d in v.shape]
        if self.rng.random() < 0.3 or not shape:
            shape.insert(0, self.rng.randint(1, 3))
        self.moved("Expand", [v, self.ints(shape)], v)

    def op_pad(self) -> None:
        v = self.any_val(1)
        r = len(v.shape)
        mode = self.rng.choice(("constant", "constant", "reflect", "edge"))
        axes = list(range(r))
        if self.opset >= 18 and self.rng.random() < 0.4:
            axes = sorted(self.rng.sample(range(r), self.rng.randint(1, r)))
        pads = [self.pad_width(v.shape[a], mode) for a in axes for _ in (0,)]
        pads += [self.pad_width(v.shape[a], mode) for a in axes]
        ins = [v, self.ints(pads)]
        if mode == "constant" and v.dtype != "bool" and self.rng.random() < 0.5:
            value = np.asarray(self.rng.choice((0.0, 1.5, -2.0))).astype(v.dtype)
            ins.append(self.const(value, keep=False))
        if len(axes) < r:
            while len(ins) < 3:
                ins.append("")
            ins.append(self.ints([a - r if self.rng.random() < 0.3 else a for a in axes]))
        self.moved("Pad", ins, v, mode=mode)

    def pad_width(self, d: int, mode: str) -> int:
        if mode == "reflect":
            return self.rng.randint(0, min(2, d - 1))
        if mode == "constant" and d > 2 and self.rng.random() < 0.2:
            return -1  # a crop
        return self.rng.randint(0, 2)

    # ------------------------------------------------------------------------- pass baits

    def op_channel_affine(self) -> None:
        """x * s + b per channel after a conv-shaped value: what fold_scale_into_conv folds
        into the conv's weights and convert_layout re-lays out."""
        x = self.image(4)
        c = x.shape[1]
        shape = self.rng.choice(((c, 1, 1), (1, c, 1, 1), (c, 1, 1), (1,)))
        op = self.rng.choice(("Mul", "Add", "Sub", "Div"))
        k = self.weight(shape, 0.5, 1.5)
        y = self.emit1(op, [x, k], mag=x.mag * 2 + 1.5)
        if self.rng.random() < 0.5:
            self.emit1("Relu", [y], mag=y.mag)
        elif self.rng.random() < 0.5:
            self.emit1("Add", [y, self.weight(shape)], mag=y.mag + 1)

    def op_neutral(self) -> None:
        """x*1, x+0, x-0, x/1, x**1 ... with constants of any broadcasting shape: a constant that
        broadcasts x to a bigger shape must not be simplified away."""
        x = self.float_val()
        op, neutral = self.rng.choice((("Mul", 1), ("Add", 0), ("Sub", 0), ("Div", 1),
                                       ("Pow", 1)))
        shape = self.broadcast_shape(x.shape) if self.rng.random() < 0.7 else \
            (self.rng.randint(1, 3), *x.shape)
        c = self.const(np.full(shape, neutral, np.float32), keep=False)
        ins = [c, x] if op in ("Mul", "Add") and self.rng.random() < 0.5 else [x, c]
        if op == "Pow":
            ins = [self.positive(x), c]
        self.emit1(op, ins, mag=x.mag + 1, exact=x.exact)

    def op_pairs(self) -> None:
        """Transpose-transpose, reshape-reshape, squeeze-unsqueeze, cast/expand to what the
        value already is, Where over a constant condition: what simplify_algebra folds."""
        kind = self.rng.choice(("transpose", "reshape", "unsqueeze", "same", "where"))
        if kind == "transpose":
            self.op_transpose()
            self.op_transpose()
        elif kind == "reshape":
            self.op_reshape()
            self.op_reshape()
        elif kind == "unsqueeze":
            v = self.any_val(1)
            if len(v.shape) >= MAX_RANK:
                raise Reject("rank")
            a = self.rng.randint(-len(v.shape) - 1, len(v.shape))
            u = self.moved("Unsqueeze", [v, self.ints([a])], v)[0]
            self.moved("Squeeze", [u, self.ints([a])], u)
        elif kind == "same":
            v = self.any_val(0)
            if self.rng.random() < 0.5:
                self.moved("Cast", [v], v, to=TP[v.dtype])
            else:
                self.moved("Expand", [v, self.ints(v.shape)], v)
        else:
            x = self.float_val()
            cond = self.const(np.full(self.broadcast_shape(x.shape), self.rng.random() < 0.5))
            y = self.partner(x)
            self.emit1("Where", [cond, x, y], mag=max(x.mag, y.mag), exact=x.exact and y.exact)

    def op_identity(self) -> None:
        v = self.any_val(0)
        self.moved("Identity", [v], v)


def _ceil_pool_shape(spatial: tuple, attrs: dict) -> tuple:
    """onnxruntime's output size of a ceil_mode pool: a last window that would start in the
    end padding is dropped (onnx's shape inference keeps it)."""
    out = []
    r = len(spatial)
    for i, n in enumerate(spatial):
        k, s = attrs["kernel_shape"][i], attrs["strides"][i]
        d = attrs.get("dilations", (1,) * r)[i]
        lo, hi = attrs["pads"][i], attrs["pads"][i + r]
        o = -(-(n + lo + hi - d * (k - 1) - 1) // s) + 1
        if (o - 1) * s >= n + lo:
            o -= 1
        out.append(o)
    return tuple(out)


def _primes(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


# operator -> weight in a draw
OPS = {"unary": 10, "gelu": 1, "binary": 10, "clip": 2, "int_binary": 2, "cast": 3,
       "compare_where": 3, "reduce": 4, "softmax": 2, "matmul": 3, "gemm": 2, "conv": 4,
       "pool": 3, "batchnorm": 2, "layernorm": 2, "resize": 2, "transpose": 3, "reshape": 3,
       "flatten": 1, "squeeze": 2, "slice": 3, "concat": 3, "split": 2, "gather": 2,
       "expand": 2, "pad": 2, "identity": 1, "channel_affine": 3, "neutral": 2, "pairs": 3,
       "shape_chain": 2, "const_chain": 1}
NODES = (3, 25)
MAX_OUTPUTS = 5


def _outputs(gen: OpsGen) -> list[V]:
    """The graph's outputs: the values nobody reads (some of them, at most MAX_OUTPUTS: the
    others are dead code), and at random a few that other nodes read too."""
    read = {i for n in gen.nodes for i in n.input}
    made = [v for v in gen.vals if v.name not in gen.feeds and v.name not in gen.consts
            and any(v.name in n.output and n.op_type != "Constant" for n in gen.nodes)]
    sinks = [v for v in made if v.name not in read]
    gen.rng.shuffle(sinks)
    outs = sinks[:MAX_OUTPUTS] or made[-1:]
    inner = [v for v in made if v.name in read and v not in outs]
    outs += [v for v in inner if gen.rng.random() < 0.15][:MAX_OUTPUTS - len(outs) + 1]
    if gen.rng.random() < 0.1:  # an output that is an input, or another output, copied
        src = gen.rng.choice([v for v in gen.vals if v.name in gen.feeds] + outs)
        outs.append(gen.emit1("Identity", [src], mag=src.mag, exact=src.exact))
    return outs


def generate(seed: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The random graph of a seed and its inputs' values; checked by onnx.checker and strict
    shape inference (onnxruntime's run is checked by the caller)."""
    gen = OpsGen(seed)
    target = gen.rng.randint(*NODES)
    kinds, weights = zip(*OPS.items())
    tries = 0
    while len(gen.nodes) < target and tries < 200:
        tries += 1
        kind = gen.rng.choices(kinds, weights)[0]
        snap = gen.snapshot()
        try:
            getattr(gen, "op_" + kind)()
        except Reject:
            gen.restore(snap)
    model = gen.model(_outputs(gen))
    onnx.checker.check_model(model, full_check=True)
    return model, dict(gen.feeds)
