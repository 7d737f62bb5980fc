"""Step 3 of lowering: the loop nest. Each stage becomes loops over its leaf iteration variables
(in schedule order, with their annotations) around a store of its expression; stages computed at a
loop are emitted at the top of that loop's body; reductions get their initialisation just before
the outermost reduce loop; non-dividing splits get tail guards; intermediate stages get buffers."""

from __future__ import annotations

from ..analysis.structural import attach_path
from ..errors import LoweringError
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.checks import IndexCheck
from ..ir.functor import Mutator, collect_vars
from ..ir.packed import PackedCall
from ..ir.simplify import Analyzer, simplify
from ..schedule.stage import Split
from ..te.extern import ExternOp, IRBody, as_c_call
from ..te.scan import ScanOp
from ..te.tensor import PlaceholderOp, Reduce, Tensor, TensorRead
from .bound import axis_values

_KIND = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}
# Kernel return codes of the symbolic split factors' checks (index checks use 1000 + k, the
# allocations 1..999, tl.extern calls 2**24 and up)
SPLIT_FACTOR_CODE = 1 << 23


class LoopNestBuilder:
    def __init__(self, schedule, bodies, bounds, args, name):
        self.s = schedule
        self.bodies = bodies
        self.bounds = bounds
        self.name = name
        self.buffers: dict = {}  # (op or stage, value_index) -> Buffer
        self.offsets: dict = {}  # stage -> [min per spatial axis]
        self.params: list = []
        self.written: list = []
        self.scalar_vars: list = []  # tl.var arguments (TVM's scalar parameters)
        self._bind_args(args)
        self._check_float_scalars()
        scan_allocs = self._alias_scans()
        # every buffer and offset exists before any body is converted: a consumer's body is
        # converted before the producers computed inside its loops are emitted
        self.local: dict = dict(scan_allocs)
        for st in schedule.stages:
            if st.attach_type == "inline":
                continue
            self.local.setdefault(st, self._make_local_buffers(st))
            if st.attach_type == "scope":
                self.offsets[st] = [bounds[st].root_min[iv] for iv in st.op.axis]

    # ------------------------------------------------------------------ buffers
    def _bind_args(self, args):
        if not isinstance(args, (list, tuple)):
            raise TypeError("the argument list must be a list of tensors")
        seen = set()
        for a in args:
            if isinstance(a, E.Var) and id(a) not in seen:
                # a variable the schedule uses (a symbolic split factor): the call passes it
                seen.add(id(a))
                self.scalar_vars.append(a)
                continue
            if not isinstance(a, Tensor):
                raise TypeError(f"kernel arguments must be tensors or tl.var variables, got "
                                f"{type(a).__name__} {a!r}")
            if id(a) in seen:
                raise ValueError(f"tensor {a.name} appears twice in the argument list")
            seen.add(id(a))
            key = self._key(a)
            if key is None:
                raise ValueError(f"argument {a.name} is not part of this schedule")
            st = key[0] if not isinstance(key[0], PlaceholderOp) else None
            buf = S.Buffer(a.name, tuple(a.shape), a.dtype, "global")
            self.params.append(buf)
            if st is not None and st.attach_type != "root":
                # as in TVM: a stage inlined or computed at another stage's loop has no
                # buffer of its own to write back; listed as an argument, it is an unused one
                # (its array is checked at the call and left untouched)
                self.written.append(False)
                continue
            self.buffers[key] = buf
            self.written.append(st is not None)
        for st in self.s.stages:
            if st.is_output:
                for t in st.op.outputs:
                    if (st, t.value_index) not in self.buffers:
                        raise ValueError(f"output {t.name} is missing from the argument list")

    def _check_float_scalars(self) -> None:
        """A float tl.var a compute uses is a scalar parameter: it must be listed among the
        arguments (an integer one not listed is a shape variable, bound from the shapes)."""
        listed = set(self.scalar_vars)
        for st in self.s.stages:
            for b in getattr(st.op, "body", None) or ():
                for v in sorted(collect_vars(b), key=lambda v: v.name):
                    if dt.is_float(v.dtype) and v not in listed:
                        raise ValueError(
                            f"stage {st.name} uses the float scalar {v.name}, which is not "
                            f"among the kernel's arguments: list it where the call passes "
                            f"it, e.g. tl.build(s, [..., {v.name}, ...])")

    def _alias_scans(self) -> dict:
        """A tl.scan's init and update write its buffer and its state reads it: one buffer,
        the scan's (an argument, or allocated with the scan stage). {scan stage: [that
        allocation]} for the scans that are not arguments."""
        allocs = {}
        for st in self.s.stages:
            if not isinstance(st.op, ScanOp):
                continue
            sc = st.op
            buf = self.buffers.get((st, 0))
            if buf is None:
                buf = S.Buffer(st.name, self.bounds[st].alloc_shape, sc.state.dtype, "local")
                self.buffers[(st, 0)] = buf
                allocs[st] = [buf]
            for t, role in ((sc.init, "init"), (sc.update, "update"), (sc.state, "state")):
                key = self._key(t)
                if self.buffers.get(key, buf) is not buf:
                    raise ValueError(f"argument {t.name} is the {role} of tl.scan {st.name}, "
                                     f"which is its buffer: pass the scan's result {st.name}")
                self.buffers[key] = buf
        return allocs

    def _key(self, t: Tensor):
        if isinstance(t.op, PlaceholderOp):
            if t.op not in self.s.placeholders:
                return None
            return (t.op, 0)
        st = self.s.stage_map.get(t.op)
        return None if st is None else (st, t.value_index)

    def _buffer_for_read(self, t: Tensor) -> S.Buffer:
        key = self._key(t)
        buf = self.buffers.get(key)
        if buf is None:
            if isinstance(t.op, PlaceholderOp):
                raise ValueError(f"input {t.name} is read but missing from the argument list")
            raise LoweringError(f"tensor {t.name} is read outside the region where it exists")
        return buf

    def _make_local_buffers(self, st) -> list:
        out = []
        for t in st.op.outputs:
            key = (st, t.value_index)
            if key not in self.buffers:
                # an extern's outputs have shapes of their own (it has no axes to bound)
                shape = t.shape if isinstance(st.op, ExternOp) else self.bounds[st].alloc_shape
                buf = S.Buffer(t.name if st.op.num_outputs > 1 else st.name, shape, t.dtype,
                               "local")
                self.buffers[key] = buf
                out.append(buf)
        return out

    # ------------------------------------------------------------------ expressions
    def _to_loads(self, e, values: dict):
        """e with its variables replaced by `values` (var -> expr) and its tensor reads by
        loads of their buffers (relative to the region of a stage computed at a loop)."""
        return _Loads(self, values).visit(e)

    # ------------------------------------------------------------------ statements
    def build(self) -> S.PrimFunc:
        roots = [st for st in self.s.stages if st.attach_type == "root"]
        allocs = []
        stmts = []
        for st in roots:
            allocs.extend(self.local[st])
            stmts.append(self.stage_stmt(st))
        body = S.seq(*stmts)
        for buf in reversed(allocs):
            body = S.Allocate(buf, body)
        shape_vars = []
        for b in self.params:
            for d in b.shape:
                for v in sorted(collect_vars(d), key=lambda v: v.name):
                    if v not in shape_vars:
                        shape_vars.append(v)
        shape_vars += [v for v in self.scalar_vars if v not in shape_vars]
        body = S.seq(*self._split_factor_checks(shape_vars), body)
        return S.PrimFunc(self.name, tuple(self.params), tuple(shape_vars), body,
                          tuple(self.written))

    def _split_factor_checks(self, shape_vars: list) -> list:
        """A check at the kernel's entry that each symbolic split factor is >= 1 (0 would run
        no iteration, silently; the bounds proof also assumes it). IndexCheck(f - 1, MAX):
        one unsigned compare, failing for f <= 0."""
        factors = []
        for st in self.s.stages:
            if st.attach_type == "inline":
                continue
            for rel in st.relations:
                n = rel.factor if isinstance(rel, Split) and rel.factor is not None else \
                    getattr(rel, "nparts", None)
                if isinstance(n, E.Var) and n not in factors:
                    if n not in shape_vars:
                        raise ValueError(
                            f"stage {st.name} is split by {n.name}, which is neither a shape "
                            "variable of the kernel's arguments nor one of them: list it, "
                            f"e.g. tl.lower(s, [..., {n.name}])")
                    factors.append(n)
        checks = []
        for k, v in enumerate(factors):
            top = E.const((1 << (dt.bits(v.dtype) - 1)) - 1, v.dtype)
            checks.append(S.Evaluate(IndexCheck(v - 1, top, SPLIT_FACTOR_CODE + k,
                                                f"split factor {v.name} must be >= 1")))
        return checks

    def stage_stmt(self, st) -> S.Stmt:
        if isinstance(st.op, ExternOp):
            return self.extern_stmt(st)
        if isinstance(st.op, ScanOp):
            return None  # its init and update stages write its buffer
        b = self.bounds[st]
        leaves = st.leaf_iter_vars
        root_val, split_guards = axis_values(st, b)
        guards = list(split_guards)
        vmap = {iv.var: root_val[iv] for iv in st.root_iter_vars}
        if st.attach_type == "scope":
            # the region a consumer's tile needs can stick out of the domain (the last tile of a
            # non-dividing split): compute only inside it (the simplifier drops provable guards)
            for iv in st.op.axis:
                guards.append(root_val[iv] < iv.dom.min + iv.dom.extent)
                if not E.is_const(iv.dom.min, 0) or not E.is_const(b.root_min[iv], 0):
                    guards.append(root_val[iv] >= iv.dom.min)
        # the guards that the loops' ranges already prove are left out here rather than
        # simplified away later (most of an attached stage's: the region fits in its tile)
        if guards:
            an = self._loop_ranges(st)
            guards = [g for g in guards if not _holds(an, g)]
        if st.attach_type == "scope":  # its buffer holds the region from root_min on
            out_idx = tuple(simplify(root_val[iv] - b.root_min[iv]) for iv in st.op.axis)
        else:  # the whole domain: indexed by the (simplified) axis values themselves
            out_idx = tuple(root_val[iv] for iv in st.op.axis)
        out_bufs = [self.buffers[(st, t.value_index)] for t in st.op.outputs]
        body = [self._to_loads(x, vmap) for x in self.bodies[st]]
        reduce_leaves = {lv for lv in st.all_iter_vars if lv.kind == "reduce"}
        reduce_vars = {lv.var for lv in reduce_leaves}
        sp_guards = [g for g in guards if not (collect_vars(g) & reduce_vars)]
        red_guards = [g for g in guards if collect_vars(g) & reduce_vars]

        if isinstance(body[0], Reduce):
            red = body[0]
            lhs = tuple(E.Load(buf, out_idx) for buf in out_bufs)
            new = red.combiner.combine(lhs, red.source)
            update = self._store_all(out_bufs, out_idx, new)
            if red.condition is not None:
                update = S.IfThenElse(red.condition, update)
            update = _guard(update, red_guards)
            ident = red.combiner.identity(tuple(x.dtype for x in red.source))
            init = S.seq(*[S.Store(buf, out_idx, v) for buf, v in zip(out_bufs, ident)])
            init = _guard(init, sp_guards)
            first_red = next(i for i, lv in enumerate(leaves) if lv.kind == "reduce")
        else:
            update = S.seq(*[S.Store(buf, out_idx, v) for buf, v in zip(out_bufs, body)])
            init, first_red = None, None
        innermost = _guard(update, sp_guards)

        def emit(level: int) -> S.Stmt:
            if level == len(leaves):
                return innermost
            lv = leaves[level]
            inner = emit(level + 1)
            attached = [a for a in self.s.stages
                        if a.attach_type == "scope" and a.attach_stage is st
                        and a.attach_ivar is lv]
            pre, allocs = [], []
            for a in attached:
                allocs.extend(self.local[a])
                pre.append(self.stage_stmt(a))
            loop_body = S.seq(*pre, inner)
            for buf in reversed(allocs):
                loop_body = S.Allocate(buf, loop_body)
            loop = self._loop(st, lv, b.extents[lv], loop_body)
            if level == first_red:
                nest = init
                for ilv in reversed(leaves[level + 1:]):
                    if ilv.kind != "reduce":
                        nest = self._loop(st, ilv, b.extents[ilv], nest)
                return S.seq(nest, loop)
            return loop

        return emit(0)

    def extern_stmt(self, st) -> S.Stmt:
        """The call of a tl.extern, its tensors passed as their buffers (see ir/packed.py).
        The function must be registered now, and accept the arguments: a kernel that could
        only fail at its first call is refused here."""
        call = st.op.call
        if isinstance(call, IRBody):  # loop IR of its own (ops/sort_kernel.py)
            return call.build([self._buffer_for_read(t) for t in st.op.input_tensors],
                              [self._buffer_for_read(t) for t in st.op.outputs])
        c_call = as_c_call(call, st.name)  # a C function: called directly (extern_c)
        if c_call is None:
            check_packed_call(st.name, call)
        args = tuple(E.Load(self._buffer_for_read(a), (E.const(0),) * len(a.shape))
                     if isinstance(a, Tensor) else self._to_loads(a, {})
                     for a in (call if c_call is None else c_call).args)
        if c_call is not None:
            return S.Evaluate(c_call.replace(args=args))
        return S.Evaluate(PackedCall(call.name, args, call.written))

    def _loop_ranges(self, st) -> Analyzer:
        """The ranges of the loop variables around the body of stage `st`: the loops of the
        stages it is computed at (outermost first), then its own."""
        loops = [(st, lv) for lv in st.leaf_iter_vars]
        for host, lp in attach_path(st):
            pos = host.leaf_iter_vars.index(lp)
            loops[:0] = [(host, lv) for lv in host.leaf_iter_vars[:pos + 1]]
        an = Analyzer()
        for owner, lv in loops:
            an.bind_range(lv.var, E.const(0), self.bounds[owner].extents[lv])
        return an

    def _loop(self, st, lv, extent, body) -> S.Stmt:
        kind = _KIND.get(st.iter_attrs.get(lv), "serial")
        ann = tuple((k, self._nontemporal(st) if k == "nontemporal" else v)
                    for k, v in st.pragmas.get(lv, []))
        return S.For(lv.var, E.const(0), extent, kind, body, ann)

    def _nontemporal(self, st) -> tuple:
        """The buffers a "nontemporal" pragma of stage `st` applies to: its outputs, which must
        be kernel arguments (a stack or heap intermediate is meant to stay in cache)."""
        bufs = [self.buffers.get((st, t.value_index)) for t in st.op.outputs]
        if any(b is None or b.scope != "global" for b in bufs):
            raise LoweringError(f"pragma nontemporal on stage {st.name}: only a stage whose "
                                "output is a kernel argument can bypass the caches")
        return tuple(b.name for b in bufs)

    @staticmethod
    def _store_all(bufs, idx, values) -> S.Stmt:
        if len(bufs) == 1:
            return S.Store(bufs[0], idx, values[0])
        # every new value reads every old one: compute all before storing any
        temps = [E.Var(f"{b.name}.new", v.dtype) for b, v in zip(bufs, values)]
        stmt = S.seq(*[S.Store(b, idx, t) for b, t in zip(bufs, temps)])
        for t, v in reversed(list(zip(temps, values))):
            stmt = S.LetStmt(t, v, stmt)
        return stmt


def check_packed_call(stage: str, call: PackedCall) -> None:
    """LoweringError unless `call` names a registered function that takes its arguments."""
    from ..runtime import packed

    fn = packed.get_global_func(call.name, allow_missing=True)
    if fn is None:
        raise LoweringError(f"extern stage {stage}: no packed function named {call.name!r} is "
                            f"registered (tl.register_func); registered: "
                            f"{packed.list_global_func_names()}")
    why = fn.accepts(len(call.args))
    if why is not None:
        raise LoweringError(f"extern stage {stage}: {why}")
    bufs = [a for a in call.args if isinstance(a, Tensor)]
    for b in bufs:
        if b.dtype not in packed.DTYPES:
            raise LoweringError(f"extern stage {stage}: tensor {b.name} of dtype {b.dtype} "
                                f"cannot be passed to a packed function ({packed.DTYPES})")
    if fn.check is not None:
        scalars = [E.as_int(a) for a in call.args if not isinstance(a, Tensor)]
        shapes = [tuple(E.as_int(d) if E.as_int(d) is not None else d for d in b.shape)
                  for b in bufs]
        try:
            fn.check(shapes, [b.dtype for b in bufs], scalars)
        except ValueError as e:
            raise LoweringError(f"extern stage {stage}: {e}") from None


def _holds(an: Analyzer, cond) -> bool:
    """Whether the ranges in `an` prove the comparison `cond` (a < b or a >= b) true."""
    t = type(cond)
    if t is not E.LT and t is not E.GE:
        return False
    a, b = an.bound(cond.a), an.bound(cond.b)
    return a[1] < b[0] if t is E.LT else a[0] >= b[1]


# module level, not a class statement per call: one walk per stage of every tuning candidate
class _Loads(Mutator):
    """substitute(e, values), then reads to loads: in one walk."""

    def __init__(self, builder: LoopNestBuilder, values: dict):
        super().__init__()
        self.builder = builder
        self.values = values

    def visit_Var(self, v):
        return self.values.get(v, v)

    def visit_TensorRead(self, r):
        b = self.builder
        idx = tuple(self.visit(i) for i in r.indices)
        buf = b._buffer_for_read(r.tensor)
        offs = b.offsets.get(b.s.stage_map.get(r.tensor.op))
        if offs is not None:
            idx = tuple(simplify(i - o) for i, o in zip(idx, offs))
        return E.Load(buf, idx)


def _guard(stmt, conds) -> S.Stmt:
    if not conds:
        return stmt
    c = conds[0]
    for x in conds[1:]:
        c = c & x
    return S.IfThenElse(c, stmt)


def build_loop_nest(schedule, bodies, bounds, args, name: str) -> S.PrimFunc:
    return LoopNestBuilder(schedule, bodies, bounds, args, name).build()


__all__ = ["TensorRead", "build_loop_nest"]
