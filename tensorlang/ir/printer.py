"""Readable, deterministic text for expressions, statements and kernels (golden-tested).

Two different variables that share a name (two stages each with a loop "i") get numeric suffixes
in order of first appearance, so the text is unambiguous and stable from run to run."""

from __future__ import annotations

from . import dtype as dt
from . import expr as E
from . import stmt as S

_BINARY = {
    E.Add: ("+", 4), E.Sub: ("-", 4), E.Mul: ("*", 5), E.Div: ("/", 5), E.FloorDiv: ("//", 5),
    E.FloorMod: ("%", 5), E.EQ: ("==", 3), E.NE: ("!=", 3), E.LT: ("<", 3), E.LE: ("<=", 3),
    E.GT: (">", 3), E.GE: (">=", 3), E.And: ("&&", 2), E.Or: ("||", 1),
}


class Printer:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.taken: dict[str, int] = {}
        self.lines: list[str] = []

    def name(self, obj, base: str) -> str:
        key = id(obj)
        got = self.names.get(key)
        if got is None:
            n = self.taken.get(base, 0)
            got = base if n == 0 else f"{base}_{n}"
            self.taken[base] = n + 1
            self.names[key] = got
        return got

    # expressions -------------------------------------------------------------------
    def expr(self, e, prec: int = 0) -> str:
        t = type(e)
        if t in _BINARY:
            op, p = _BINARY[t]
            text = f"{self.expr(e.a, p)} {op} {self.expr(e.b, p + 1)}"
            return f"({text})" if p < prec else text
        if t is E.Const:
            return _const(e)
        if t is E.Var:
            return self.name(e, e.name)
        if t is E.Min or t is E.Max:
            return f"{t.__name__.lower()}({self.expr(e.a)}, {self.expr(e.b)})"
        if t is E.Not:
            return f"!{self.expr(e.a, 9)}"
        if t is E.Select:
            return (f"select({self.expr(e.condition)}, {self.expr(e.true_value)}, "
                    f"{self.expr(e.false_value)})")
        if t is E.Cast:
            return f"{e.dtype}({self.expr(e.value)})"
        if t is E.Call:
            return f"{e.name}({', '.join(self.expr(a) for a in e.args)})"
        if t is E.Ramp:
            return f"ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})"
        if t is E.Broadcast:
            return f"broadcast({self.expr(e.value)}, {e.lanes})"
        if t is E.Shuffle:
            return (f"shuffle({self.expr(e.a)}, {self.expr(e.b)}, "
                    f"[{', '.join(map(str, e.indices))}])")
        if t is E.Load:
            return f"{self.name(e.buffer, e.buffer.name)}[{self.exprs(e.indices)}]"
        if t is E.Let:
            return (f"(let {self.name(e.var, e.var.name)} = {self.expr(e.value)} in "
                    f"{self.expr(e.body)})")
        if hasattr(e, "text"):  # TE nodes (TensorRead, Reduce) print themselves via this printer
            return e.text(self)
        return repr(e)

    def exprs(self, es) -> str:
        return ", ".join(self.expr(x) for x in es)

    # statements ----------------------------------------------------------------------
    def emit(self, line: str, depth: int) -> None:
        self.lines.append("  " * depth + line)

    def stmt(self, s, depth: int = 0) -> None:
        t = type(s)
        if s is None:
            return
        if t is S.SeqStmt:
            for x in s.stmts:
                self.stmt(x, depth)
        elif t is S.For:
            kind = "" if s.kind == "serial" else s.kind + " "
            ann = "".join(f"  # {k}={v}" for k, v in s.annotations)
            rng = (f"{self.expr(s.extent)}" if E.is_const(s.min, 0)
                   else f"{self.expr(s.min)}, {self.expr(_simplify(s.min + s.extent))}")
            self.emit(f"{kind}for {self.name(s.loop_var, s.loop_var.name)} in range({rng}):{ann}",
                      depth)
            self.stmt(s.body, depth + 1)
        elif t is S.Store:
            target = f"{self.name(s.buffer, s.buffer.name)}[{self.exprs(s.indices)}]"
            line = f"{target} = {self.expr(s.value)}"
            if s.predicate is not None:
                line += f"  if {self.expr(s.predicate)}"
            self.emit(line, depth)
        elif t is S.IfThenElse:
            self.emit(f"if {self.expr(s.condition)}:", depth)
            self.stmt(s.then_case, depth + 1)
            if s.else_case is not None:
                self.emit("else:", depth)
                self.stmt(s.else_case, depth + 1)
        elif t is S.LetStmt:
            self.emit(f"{self.name(s.var, s.var.name)} = {self.expr(s.value)}", depth)
            self.stmt(s.body, depth)
        elif t is S.Allocate:
            b = s.buffer
            self.emit(f"allocate {self.name(b, b.name)}: {b.dtype}[{self.exprs(b.shape)}] "
                      f"({b.scope})", depth)
            self.stmt(s.body, depth)
        elif t is S.Evaluate:
            self.emit(self.expr(s.value), depth)
        else:
            self.emit(repr(s), depth)

    def func(self, f: S.PrimFunc) -> str:
        params = []
        for b, w in zip(f.params, f.written):
            params.append(f"{self.name(b, b.name)}: {b.dtype}[{self.exprs(b.shape)}]"
                          + (" (out)" if w else ""))
        for v in f.shape_vars:
            name = self.name(v, v.name)
            if dt.is_float(v.dtype):  # a float scalar parameter (a shape variable shows in
                params.append(f"{name}: {v.dtype}")  # the shapes that use it)
        self.emit(f"def {f.name}({', '.join(params)}):", 0)
        self.stmt(f.body, 1)
        return "\n".join(self.lines)


def _simplify(e):
    from .simplify import simplify

    return simplify(e)


def _const(e: E.Const) -> str:
    v = e.value
    if dt.is_bool(e.dtype):
        return "True" if v else "False"
    if dt.is_float(e.dtype):
        text = repr(float(v))
        return text + "f" if e.dtype == "float32" else (text if e.dtype == "float64"
                                                        else f"{e.dtype}({text})")
    return str(v) if e.dtype == dt.INDEX_DTYPE else f"{e.dtype}({v})"


def expr_str(e) -> str:
    return Printer().expr(e)


def stmt_str(s) -> str:
    p = Printer()
    p.stmt(s)
    return "\n".join(p.lines)


def func_str(f) -> str:
    return Printer().func(f)
