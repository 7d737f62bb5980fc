"""Pass: a loop marked by `Stage.tensorize` (annotation ("tensorize", intrinsic name)) and the
loops inside it become the intrinsic's implementation.

Runs on flat indices (after storage_flatten), where every operand's real buffer is known: the
match made at the primitive's call is made again here, on the store and loads themselves, with
the flat address of each access against the intrinsic's own lowered loop nest (a cache_write
accumulator's layout exists only now). The operands' bases are their flat indices with the
region's loops at 0."""

from __future__ import annotations

from functools import cache

from ...errors import ScheduleError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator, StmtMutator, substitute
from ...ir.simplify import simplify
from ...te.tensor import Reduce
from ...te.tensorize import (
    Region,
    TensorIntrin,
    _ExprMatcher,
    _Mismatch,
    get_intrin,
    linear_coeffs,
    mismatch_message,
)
from .storage_flatten import flat_index

KEY = "tensorize"


def _nest(loop: S.For) -> tuple[list, S.Stmt]:
    """The perfectly nested loops from `loop` inwards and the statement inside them."""
    loops, body = [loop], loop.body
    while isinstance(body, S.For):
        loops.append(body)
        body = body.body
    return loops, body


@cache
def _template(intrin: TensorIntrin) -> tuple[list, S.Store, dict]:
    """The intrinsic's update as this pipeline has it at this point: (loops, store, {buffer
    name: buffer}): flat indices, simplified, a reduction as out = out + source."""
    op, out = intrin.op, intrin.op.output(0)
    bufs = {t: S.Buffer(t.name, tuple(t.shape), t.dtype) for t in (*intrin.inputs, out)}

    class _Reads(Mutator):
        def visit_TensorRead(self, r):
            return E.Load(bufs[r.tensor], (simplify(flat_index(bufs[r.tensor], r.indices)),))

    out_idx = (simplify(flat_index(bufs[out], tuple(iv.var for iv in op.axis))),)
    body = op.body[0]
    if isinstance(body, Reduce):
        value = body.combiner.combine((E.Load(bufs[out], out_idx),), body.source)[0]
    else:
        value = body
    store = S.Store(bufs[out], out_idx, simplify(_Reads().visit(value)))
    loops = [S.For(iv.var, E.const(0), iv.dom.extent, "serial", store) for iv in intrin.loops]
    return loops, store, {b.name: b for b in bufs.values()}


def _match(loop: S.For, intrin: TensorIntrin) -> tuple[list, list]:
    t_loops, t_store, t_bufs = _template(intrin)
    loops, store = _nest(loop)
    exts = [E.as_int(lp.extent) for lp in loops]
    want = [E.as_int(lp.extent) for lp in t_loops]
    if exts != want:
        raise _Mismatch(f"loop extents {exts}, the intrinsic's {want}")
    if not isinstance(store, S.Store) or store.predicate is not None:
        raise _Mismatch("the region holds more than one unguarded store")
    ours_v, theirs_v = tuple(lp.loop_var for lp in t_loops), tuple(lp.loop_var for lp in loops)
    where: dict = {}

    def access(a, b, a_buf, b_buf, a_idx, b_idx) -> None:
        if a_buf.dtype != b_buf.dtype:
            raise _Mismatch(f"{b_buf.name} is {b_buf.dtype}, the intrinsic's {a_buf.name} "
                            f"is {a_buf.dtype}")
        m.bind(a_buf, b_buf, "buffer")
        ca, cb = linear_coeffs(a_idx, ours_v), linear_coeffs(b_idx, theirs_v)
        if cb is None:
            raise _Mismatch(f"the address of {b!r} is not affine in the region's loops")
        ga = tuple(ca.get(v, 0) for v in ours_v)
        gb = tuple(cb.get(v, 0) for v in theirs_v)
        if ga != gb:
            raise _Mismatch(f"{b!r} moves by {gb} elements per step of the loops, the "
                            f"intrinsic's {a!r} by {ga}")
        where.setdefault(a_buf.name, (b_buf, b_idx))

    def leaf(a, b) -> bool:
        if not isinstance(a, E.Load):
            return False
        if not isinstance(b, E.Load):
            raise _Mismatch(f"{a!r} is a load, the nest has {b!r}")
        access(a, b, a.buffer, b.buffer, a.indices[0], b.indices[0])
        return True

    m = _ExprMatcher(leaf)
    access(t_store, store, t_store.buffer, store.buffer, t_store.indices[0], store.indices[0])
    m.match(t_store.value, store.value)
    zero = {v: E.const(0, v.dtype) for v in theirs_v}

    def region(t) -> Region:
        buf, idx = where[t_bufs[t.name].name]
        return Region(buf, simplify(substitute(idx, zero)))

    out = intrin.op.output(0)
    return [region(t) for t in intrin.inputs], [region(out)]


def _is_init(loop: S.For, intrin: TensorIntrin) -> bool:
    """Whether `loop` is the initialisation of a tensorized reduction: the loop nest builder
    emits it over the region's spatial loops, with their annotations, just before the
    outermost reduce loop. It stays ordinary loops (the intrinsic only accumulates)."""
    loops, store = _nest(loop)
    return (isinstance(intrin.op.body[0], Reduce) and len(loops) == len(intrin.op.axis)
            and isinstance(store, S.Store) and isinstance(store.value, E.Const))


class _Tensorize(StmtMutator):
    def visit_For(self, s: S.For):
        names = [v for k, v in s.annotations if k == KEY]
        if not names:
            return self.generic(s)
        intrin = get_intrin(names[0])
        if _is_init(s, intrin):
            return self.generic(s.replace(annotations=tuple(
                a for a in s.annotations if a[0] != KEY)))
        try:
            ins, outs = _match(s, intrin)
        except _Mismatch as why:
            raise ScheduleError(mismatch_message("(lowered)", s.loop_var.name, intrin,
                                                 str(why), repr(s).strip())) from None
        return intrin.impl(ins, outs)


def tensorize_loops(body: S.Stmt) -> S.Stmt:
    return _Tensorize().visit(body)
