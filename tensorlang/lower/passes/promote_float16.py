"""Pass: float16 is a storage type. Loads of float16 buffers are widened to float32, arithmetic
runs in float32, and values are rounded to float16 once, where they are stored (or where the
program casts to float16 explicitly). This CPU has no native half arithmetic; left to LLVM,
every half operation would be rounded back to half after each step."""

from __future__ import annotations

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.functor import Mutator


def _is_half(d: str) -> bool:
    return dt.element(d) == "float16"


def _wide(d: str) -> str:
    return dt.with_lanes("float32", dt.lanes(d))


class _Promote(Mutator):
    def __init__(self):
        super().__init__()
        self.vars: dict = {}

    def visit_Load(self, e):
        e = self.generic(e)
        return E.Cast(_wide(e.dtype), e) if _is_half(e.dtype) else e

    def visit_Store(self, s):
        s = self.generic(s)
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
        return self.vars.get(v, v)

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


def promote_float16(body: S.Stmt) -> S.Stmt:
    return _Promote().visit(body)
