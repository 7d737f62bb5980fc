"""Loop IR statements, buffers and iteration variables (frozen, slotted dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import dtype as dt
from .expr import Expr, Node, Var, as_int

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Range(Node):
    min: Expr
    extent: Expr


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IterVar(Node):
    """An iteration axis: a Var with its domain. kind is "spatial" or "reduce"."""

    var: Var
    dom: Range | None
    kind: str = "spatial"

    @property
    def name(self) -> str:
        return self.var.name

    def __hash__(self) -> int:
        return id(self)

    def as_expr(self) -> Var:
        return self.var

    def __repr__(self) -> str:
        ext = self.dom.extent if self.dom is not None else "?"
        return f"IterVar({self.name}, extent={ext}, {self.kind})"

    # IterVars take part in index arithmetic like their Var (k + 1, 2 * i, ...)
    def _e(self):
        return self.var

    def __add__(self, o):
        return self.var + o

    def __radd__(self, o):
        return o + self.var

    def __sub__(self, o):
        return self.var - o

    def __rsub__(self, o):
        return o - self.var

    def __mul__(self, o):
        return self.var * o

    def __rmul__(self, o):
        return o * self.var

    def __floordiv__(self, o):
        return self.var // o

    def __mod__(self, o):
        return self.var % o

    def __lt__(self, o):
        return self.var < o

    def __le__(self, o):
        return self.var <= o

    def __gt__(self, o):
        return self.var > o

    def __ge__(self, o):
        return self.var >= o

    def __neg__(self):
        return -self.var


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Buffer(Node):
    """A named region of memory. scope: "global" (an argument), "heap", "stack" or "local"
    (chosen by the allocation pass), shape in elements, row-major."""

    name: str
    shape: tuple
    dtype: str
    scope: str = "global"

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype}, {self.scope})"

    def num_elements(self) -> Expr | int:
        total: Expr | int = 1
        for s in self.shape:
            total = total * s
        return total

    def const_elements(self) -> int | None:
        n = 1
        for s in self.shape:
            v = as_int(s)
            if v is None:
                return None
            n *= v
        return n

    @property
    def nbytes_per_element(self) -> int:
        return dt.storage_bytes(self.dtype)


class Stmt(Node):
    __slots__ = ()

    def __repr__(self) -> str:
        from .printer import stmt_str

        return stmt_str(self)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class For(Stmt):
    loop_var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt
    annotations: tuple = field(default=())  # e.g. (("pragma_auto_unroll_max_step", 16),)

    def __post_init__(self):
        if self.kind not in LOOP_KINDS:
            raise ValueError(f"loop kind {self.kind!r} not in {LOOP_KINDS}")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple
    value: Expr
    predicate: Expr | None = None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SeqStmt(Stmt):
    stmts: tuple


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Evaluate(Stmt):
    value: Expr


def seq(*stmts) -> Stmt:
    """Flatten nested sequences and drop empty ones."""
    out: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            out.extend(s.stmts)
        elif isinstance(s, (list, tuple)):
            inner = seq(*s)
            if isinstance(inner, SeqStmt):
                out.extend(inner.stmts)
            elif inner is not None:
                out.append(inner)
        else:
            out.append(s)
    if not out:
        return None
    return out[0] if len(out) == 1 else SeqStmt(tuple(out))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class PrimFunc(Node):
    """A lowered kernel: its arguments (buffers), the symbolic shape vars, the body."""

    name: str
    params: tuple  # tuple[Buffer]
    shape_vars: tuple  # tuple[Var]
    body: Stmt
    written: tuple  # tuple[bool] per param

    def __repr__(self) -> str:
        from .printer import func_str

        return func_str(self)
