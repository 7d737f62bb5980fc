"""Pass: float16 is a storage type. Loads of float16 buffers are widened to float32, arithmetic
runs in float32, and values are rounded to float16 once, where they are stored (or where the
program casts to float16 explicitly). This CPU has no native half arithmetic; left to LLVM,
every half operation would be rounded back to half after each step.

Reductions accumulate in float32 (numpy's float16 sums are float32-accurate too: 4096 ones sum to
4096, where a float16 accumulator stops at 2048): a float16 buffer the kernel allocates (an
rfactor or cache_write accumulator, an intermediate stage) is held in float32, and a float16
output that a loop accumulates into at one index is accumulated in a float32 temporary and
stored once after the loop."""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.expr import structural_equal
from ...ir.functor import Mutator, Visitor, collect_vars

_FIRST = (E.const(0, dt.INDEX_DTYPE),)  # the index of a one-element temporary


def _is_half(d: str) -> bool:
    return dt.element(d) == "float16"


def _wide(d: str) -> str:
    return dt.with_lanes("float32", dt.lanes(d))


class _Promote(Mutator):
    def __init__(self):
        super().__init__()
        self.vars: dict = {}
        self.wide: dict = {}  # float16 buffer the kernel allocates -> its float32 replacement

    def visit_Allocate(self, s):
        b = s.buffer
        if not _is_half(b.dtype):
            return self.generic(s)
        self.wide[b] = S.Buffer(b.name, b.shape, _wide(b.dtype), b.scope)
        return S.Allocate(self.wide[b], self.visit(s.body))

    def visit_Load(self, e):
        e = self.generic(e)
        if e.buffer in self.wide:
            return e.replace(buffer=self.wide[e.buffer])
        return E.Cast(_wide(e.dtype), e) if _is_half(e.dtype) else e

    def visit_Store(self, s):
        s = self.generic(s)
        if s.buffer in self.wide:
            value = s.value if not _is_half(s.value.dtype) else E.Cast(_wide(s.value.dtype),
                                                                        s.value)
            return s.replace(buffer=self.wide[s.buffer], value=value)
        if _is_half(s.buffer.dtype) and not _is_half(s.value.dtype):
            return s.replace(value=E.Cast(dt.with_lanes("float16", dt.lanes(s.value.dtype)),
                                          s.value))
        return s

    def visit_Const(self, e):
        return E.const(e.value, "float32") if _is_half(e.dtype) else e

    def visit_Cast(self, e):
        v = self.visit(e.value)
        if _is_half(e.dtype):  # an explicit rounding to half, kept: round, then widen again
            narrow = v if _is_half(v.dtype) else E.Cast(e.dtype, v)
            return E.Cast(_wide(e.dtype), narrow)
        if _is_half(v.dtype):
            v = E.Cast(_wide(v.dtype), v)
        return v if v.dtype == e.dtype else E.Cast(e.dtype, v)

    def visit_Call(self, e):
        e = self.generic(e)
        return e.replace(dtype=_wide(e.dtype)) if _is_half(e.dtype) else e

    def visit_Var(self, v):
        if v in self.vars:
            return self.vars[v]
        # a float16 scalar parameter (tl.var(dtype="float16")): widened where it is read
        return E.Cast(_wide(v.dtype), v) if _is_half(v.dtype) else v

    def _bind(self, node, body_field: str):
        value = self.visit(node.value)
        var = node.var
        if _is_half(var.dtype):
            var = E.Var(var.name, _wide(var.dtype))
            self.vars[node.var] = var
        return node.replace(var=var, value=value, **{body_field: self.visit(
            getattr(node, body_field))})

    def visit_LetStmt(self, s):
        return self._bind(s, "body")

    def visit_Let(self, e):
        return self._bind(e, "body")


class _Accesses(Visitor):
    """The float16 argument buffers a loop body reads and writes, with the indices it uses, and
    the variables the body defines."""

    def __init__(self):
        self.indices: dict = {}  # buffer -> indices of its accesses
        self.stored: list = []  # buffers stored without a predicate, in order
        self.unsafe: set = set()  # buffers stored under a predicate
        self.defined: set = set()

    def _access(self, buf, indices) -> bool:
        if not (_is_half(buf.dtype) and buf.scope == "global"):
            return False
        self.indices.setdefault(buf, []).append(indices)
        return True

    def visit_Load(self, e):
        self._access(e.buffer, e.indices)
        self.generic(e)

    def visit_Store(self, s):
        if not self._access(s.buffer, s.indices):
            pass
        elif s.predicate is not None:
            self.unsafe.add(s.buffer)
        elif s.buffer not in self.stored:
            self.stored.append(s.buffer)
        self.generic(s)

    def visit_For(self, s):
        self.defined.add(s.loop_var)
        self.generic(s)

    def visit_LetStmt(self, s):
        self.defined.add(s.var)
        self.generic(s)

    def visit_Let(self, e):
        self.defined.add(e.var)
        self.generic(e)


def _accumulators(loop: S.For) -> list:
    """(buffer, indices) of the float16 outputs `loop` accumulates into at one place: every
    access in the loop uses the same indices, which do not change while it runs."""
    acc = _Accesses()
    acc.defined.add(loop.loop_var)
    acc.visit(loop.body)
    found = []
    for buf in acc.stored:
        first, *rest = acc.indices[buf]
        if buf in acc.unsafe or not all(structural_equal(first, i) for i in rest):
            continue
        if any(v in acc.defined for i in first for v in collect_vars(i)):
            continue
        found.append((buf, first))
    return found


class _Redirect(Mutator):
    """Reads and writes of buf[indices] (widened to float32 by _Promote) go to tmp[0]."""

    def __init__(self, buf, tmp):
        super().__init__()
        self.buf, self.tmp = buf, tmp

    def visit_Cast(self, e):
        if isinstance(e.value, E.Load) and e.value.buffer is self.buf:
            return E.Load(self.tmp, _FIRST)
        return self.generic(e)

    def visit_Store(self, s):
        s = self.generic(s)
        if s.buffer is not self.buf:
            return s
        value = s.value.value if isinstance(s.value, E.Cast) and not _is_half(
            s.value.value.dtype) else E.Cast("float32", s.value)
        return S.Store(self.tmp, _FIRST, value)


class _WideAccumulators(Mutator):
    """Each serial loop that accumulates into a float16 output at one index does it in a
    float32 temporary: loaded before the loop, stored once after it (at the outermost such
    loop, so the value is rounded once)."""

    def visit_For(self, s):
        if s.kind not in ("serial", "unrolled"):
            return self.generic(s)
        found = [(buf, indices, S.Buffer(f"{buf.name}.acc", (1,), "float32", "stack"))
                 for buf, indices in _accumulators(s)]
        loop = s
        for buf, _, tmp in found:
            loop = _Redirect(buf, tmp).visit(loop)
        stmt = self.generic(loop)  # nested loops may accumulate into other outputs
        for buf, indices, tmp in found:
            stmt = S.Allocate(tmp, S.seq(
                S.Store(tmp, _FIRST, E.Cast("float32", E.Load(buf, indices))),
                stmt,
                S.Store(buf, indices, E.Cast("float16", E.Load(tmp, _FIRST)))))
        return stmt


def promote_float16(body: S.Stmt) -> S.Stmt:
    return _WideAccumulators().visit(_Promote().visit(body))
