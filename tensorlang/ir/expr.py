"""Expression nodes: frozen, slotted dataclasses with structural equality and cached hashes.

Python operators build expressions (`a + b`, `a < b`, `a == b`, `a & b`), as in TVM's TE. Because
`==` builds an `EQ` node, structural comparison is `structural_equal(a, b)`; an `EQ`/`NE` node
converts to bool structurally so that expressions still work as dict keys. Variables compare by
identity: two loops both named "i" are different loops.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from . import dtype as dt


class Node:
    """Base of expression and statement nodes: cached structural hash, generic child access."""

    # _dtype: the cached type of an expression whose type is its operand's (see _operand_dtype)
    __slots__ = ("_dtype", "_hash")
    _field_names: tuple[str, ...] = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            try:
                # the tuple (name, *fields) built in one step, not concatenated from a
                # generator's: every new node that the simplifier keys its memo by is hashed
                # here once
                h = hash((type(self).__name__,
                          *[_hashable(getattr(self, f)) for f in self.fields()]))
            except RecursionError:
                return _hash_children_first(self)
            object.__setattr__(self, "_hash", h)
            return h

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        # a dict by class, not an attribute on it (a subclass would inherit its base's), nor a
        # look-up in cls.__dict__ (a mappingproxy per call): hashing and walking call this for
        # every node
        names = _FIELDS.get(cls)
        if names is None:
            names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
        return names

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


_FIELDS: dict = {}
_STRUCTURAL_HASH = Node.__hash__  # nodes that hash by identity (Var, Buffer) are leaves


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def _hash_children_first(root: Node) -> int:
    """The structural hash of `root`, cached with those of its unhashed descendants, children
    first, without recursion. Node.__hash__ recurses through C (hash of a tuple of nodes), ~3
    C levels a node, and CPython 3.12+ caps C recursion whatever sys.setrecursionlimit says:
    1500 levels in early 3.12 releases (3.12.1: a 500-deep expression raised RecursionError),
    4000 on Windows, where tensorlang compiles MAX_EXPR_DEPTH = 2000 levels. Only that case
    comes here (the recursion costs nothing until it is too deep)."""
    stack = [root]
    while stack:
        node = stack[-1]
        unhashed: list[Node] = []
        for f in node.fields():
            _collect_unhashed(getattr(node, f), unhashed)
        if unhashed:
            stack.extend(unhashed)
            continue
        stack.pop()
        hash(node)  # its children's hashes are cached: one level (a no-op if pushed twice)
    return root._hash


def _collect_unhashed(v, out: list) -> None:
    """The nodes in field value `v` whose structural hash is not cached yet."""
    if isinstance(v, Node):
        if type(v).__hash__ is _STRUCTURAL_HASH and not hasattr(v, "_hash"):
            out.append(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _collect_unhashed(x, out)


def structural_equal(a: Any, b: Any) -> bool:
    """Deep structural equality of IR nodes (Vars, Buffers and Tensors by identity)."""
    if a is b:
        return True
    if isinstance(a, Node):
        if type(a) is not type(b) or hash(a) != hash(b):
            return False
        if isinstance(a, (Var,)):
            return False
        for f in a.fields():  # a loop, not all() over a generator: this runs on every memo hit
            if not structural_equal(getattr(a, f), getattr(b, f)):
                return False
        return True
    if isinstance(a, tuple):
        return (isinstance(b, tuple) and len(a) == len(b)
                and all(structural_equal(x, y) for x, y in zip(a, b)))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        # 0.0 and -0.0 are different constants (x + -0.0 simplifies to x, x + 0.0 does not)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return type(a) is type(b) and a == b


# ----------------------------------------------------------------------------- conversion


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def const(value, dtype: str | None = None) -> Const:
    """A constant; the dtype defaults to int64 for ints, float32 for floats, bool for bools."""
    if type(value) is int and (dtype is None or dtype == "int64") and \
            _INT64_MIN <= value <= _INT64_MAX:
        return Const("int64", value)  # the index constants lowering makes by the thousand
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = dt.INDEX_DTYPE
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant of {type(value).__name__} {value!r}")
    dtype = dt.canonical(dtype)
    if dt.is_bool(dtype):
        value = bool(value)
    elif dt.is_float(dtype):
        value = float(value)
    else:
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"constant {value!r} is not representable in {dtype}")
        value = int(value)
        lo, hi = dt.limits(dtype)
        if not lo <= value <= hi:
            raise ValueError(f"constant {value} out of range for {dtype}")
    return Const(dtype, value)


def convert(value, like: str | None = None) -> Expr:
    """Turn a Python scalar into an expression, taking `like`'s dtype where it makes sense."""
    if isinstance(value, Expr):
        return value
    if hasattr(value, "as_expr"):
        return value.as_expr()
    if isinstance(value, (bool, int, float)) and not isinstance(value, Expr):
        if like is not None:
            if isinstance(value, bool) and not dt.is_bool(like):
                return const(int(value), dt.element(like))
            if isinstance(value, float) and not dt.is_float(like):
                return const(value, "float32")
            return const(value, dt.element(like))
        return const(value)
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return const(value.item(), value.dtype.name)
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in a tensor expression")


def _cast_to(e: Expr, dtype: str) -> Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, Const):
        return const(e.value, dtype)
    return Cast(dtype, e)


def binary_operands(a, b) -> tuple[Expr, Expr]:
    """Convert and promote two operands to a common dtype (numpy-like)."""
    if not isinstance(a, Expr) and not hasattr(a, "as_expr"):
        b = convert(b)
        a = convert(a, b.dtype)
    else:
        a = convert(a)
        b = convert(b, a.dtype)
    if a.dtype != b.dtype:
        ea, eb = dt.element(a.dtype), dt.element(b.dtype)
        target = dt.promote(ea, eb) if ea != eb else ea
        la, lb = dt.lanes(a.dtype), dt.lanes(b.dtype)
        lanes = max(la, lb)
        a = _cast_to(a, dt.with_lanes(target, la))
        b = _cast_to(b, dt.with_lanes(target, lb))
        if la != lb:
            a = a if la == lanes else Broadcast(a, lanes)
            b = b if lb == lanes else Broadcast(b, lanes)
    return a, b


# ----------------------------------------------------------------------------- base


class Expr(Node):
    __slots__ = ()
    dtype: str

    # arithmetic -----------------------------------------------------------
    def __add__(self, o):
        return _folded(Add, *binary_operands(self, o))

    def __radd__(self, o):
        return _folded(Add, *binary_operands(o, self))

    def __sub__(self, o):
        return _folded(_sub, *binary_operands(self, o))

    def __rsub__(self, o):
        return _folded(_sub, *binary_operands(o, self))

    def __mul__(self, o):
        return _folded(Mul, *binary_operands(self, o))

    def __rmul__(self, o):
        return _folded(Mul, *binary_operands(o, self))

    def __truediv__(self, o):
        return _true_div(*binary_operands(self, o))

    def __rtruediv__(self, o):
        return _true_div(*binary_operands(o, self))

    def __floordiv__(self, o):
        return _folded(_floor_div, *binary_operands(self, o))

    def __rfloordiv__(self, o):
        return _folded(_floor_div, *binary_operands(o, self))

    def __mod__(self, o):
        return _folded(_floor_mod, *binary_operands(self, o))

    def __rmod__(self, o):
        return _folded(_floor_mod, *binary_operands(o, self))

    def __neg__(self):
        if dt.is_bool(self.dtype):
            raise TypeError("'-' is not defined on bool (as in numpy): use ~x, or tl.cast to an "
                            "integer first")
        if isinstance(self, Const):
            return const(-self.value, self.dtype)
        return Sub(convert(0, self.dtype), self)

    def __pos__(self):
        return self

    # comparisons ------------------------------------------------------------
    def __lt__(self, o):
        return LT(*binary_operands(self, o))

    def __le__(self, o):
        return LE(*binary_operands(self, o))

    def __gt__(self, o):
        return GT(*binary_operands(self, o))

    def __ge__(self, o):
        return GE(*binary_operands(self, o))

    def __eq__(self, o):  # type: ignore[override]
        return EQ(*binary_operands(self, o))

    def __ne__(self, o):  # type: ignore[override]
        return NE(*binary_operands(self, o))

    __hash__ = Node.__hash__

    # logic on bool, bits on integers (as TVM and numpy) ---------------------------------
    def __and__(self, o):
        return _logic_or_bits(And, "bitwise_and", self, o)

    def __rand__(self, o):
        return _logic_or_bits(And, "bitwise_and", o, self)

    def __or__(self, o):
        return _logic_or_bits(Or, "bitwise_or", self, o)

    def __ror__(self, o):
        return _logic_or_bits(Or, "bitwise_or", o, self)

    def __xor__(self, o):
        return _logic_or_bits(NE, "bitwise_xor", self, o)

    def __rxor__(self, o):
        return _logic_or_bits(NE, "bitwise_xor", o, self)

    def __lshift__(self, o):
        return bits_call("shift_left", self, o)

    def __rlshift__(self, o):
        return bits_call("shift_left", o, self)

    def __rshift__(self, o):
        return bits_call("shift_right", self, o)

    def __rrshift__(self, o):
        return bits_call("shift_right", o, self)

    def __invert__(self):
        if dt.is_bool(self.dtype):
            return Not(self)
        if dt.is_int(self.dtype):
            return Call(self.dtype, "bitwise_not", (self,))
        raise TypeError(f"~ needs a boolean or integer expression, got {self.dtype}")

    def __bool__(self):
        raise TypeError(
            "a symbolic expression has no Python truth value; use tl.if_then_else / tl.select, "
            "tl.all / tl.any, or & | ~ to combine conditions"
        )

    def astype(self, dtype) -> Expr:
        return _cast_to(self, dt.canonical(dtype))

    def __repr__(self) -> str:
        from .printer import expr_str

        return expr_str(self)


_FOLD = {"Add": lambda x, y: x + y, "_sub": lambda x, y: x - y, "Mul": lambda x, y: x * y,
         "_floor_div": lambda x, y: x // y, "_floor_mod": lambda x, y: x % y}


def _folded(make, a: Expr, b: Expr) -> Expr:
    """`make(a, b)`, or the constant it equals when both are integer scalar constants: as
    TVM folds IntImm arithmetic, so that `A.shape[0] * 2` is a shape of 10 (int(...) works on
    it). Overflowing results, zero divisors and floats build the node (which reports them)."""
    if (isinstance(a, Const) and isinstance(b, Const) and dt.is_int(a.dtype)
            and dt.lanes(a.dtype) == 1 and b.value != 0):
        value = _FOLD[make.__name__](int(a.value), int(b.value))
        lo, hi = dt.limits(a.dtype)
        if lo <= value <= hi:
            return const(value, a.dtype)
    return make(a, b)


def _logic_or_bits(logical, bitwise: str, a, b) -> Expr:
    """`&`, `|`, `^`: logical on conditions, bitwise on integers."""
    x, y = convert(a), convert(b)
    if dt.is_bool(x.dtype) or dt.is_bool(y.dtype):
        return logical(_as_bool(x), _as_bool(y))
    return bits_call(bitwise, x, y)


def bits_call(name: str, a, b) -> Expr:
    """An integer bit operation (bitwise_and/or/xor, shift_left/right) on promoted operands."""
    x, y = binary_operands(a, b)
    if not dt.is_int(x.dtype):
        raise TypeError(f"{name} needs integer operands, got {x.dtype}: {x!r}, {y!r}")
    return Call(x.dtype, name, (x, y))


def _as_bool(e: Expr) -> Expr:
    if not dt.is_bool(e.dtype):
        raise TypeError(f"logical operators need boolean operands, got {e.dtype}: {e!r}")
    return e


def _true_div(a: Expr, b: Expr) -> Expr:
    if not dt.is_float(a.dtype):
        raise TypeError(
            f"'/' is true division and needs float operands (got {a.dtype}); "
            "use '//' for integer floor division or cast first")
    return Div(a, b)


def _sub(a: Expr, b: Expr) -> Expr:
    if dt.is_bool(a.dtype):
        raise TypeError("'-' is not defined on bool (as in numpy): use a & ~b, a != b (xor), "
                        "or tl.cast to an integer first")
    return Sub(a, b)


def _check_divisor(a: Expr, b: Expr, op: str) -> None:
    """Integer division by a constant zero has no value (run-time zeros give numpy's 0)."""
    if not dt.is_float(b.dtype) and as_int(b.value if isinstance(b, Broadcast) else b) == 0:
        raise ValueError(f"division by zero in {a!r} {op} 0: an integer divisor must not be the "
                         "constant 0")


def _floor_div(a: Expr, b: Expr) -> Expr:
    if dt.is_float(a.dtype):
        return Call(a.dtype, "floor", (Div(a, b),))
    _check_divisor(a, b, "//")
    return FloorDiv(a, b)


def _floor_mod(a: Expr, b: Expr) -> Expr:
    _check_divisor(a, b, "%")
    return FloorMod(a, b)


def _operand_dtype(e: Expr, operand: Expr) -> str:
    """The type of `e`, which is its operand's, cached in `e`: a chain of 1000 additions is
    1000 deep, and an uncached type would be looked up through all of it, recursively, by
    every node made on top of it (a RecursionError while declaring the expression)."""
    try:
        return e._dtype
    except AttributeError:
        d = operand.dtype
        object.__setattr__(e, "_dtype", d)
        return d


def _check_same(a: Expr, b: Expr, op: str) -> None:
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: operand dtypes differ ({a.dtype} vs {b.dtype})")


# ----------------------------------------------------------------------------- leaves


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Const(Expr):
    """A constant. An integer one is also a Python integer, as TVM's IntImm is:
    `int(A.shape[0])`, `range(A.shape[0])`, `np.zeros(A.shape)`."""

    dtype: str
    value: Any

    def __int__(self) -> int:
        return self.__index__()

    def __index__(self) -> int:
        # only exact integers: a float constant used as a size or an index would silently
        # truncate (Python's own float has no __index__ for the same reason)
        if dt.lanes(self.dtype) != 1 or not (dt.is_int(self.dtype) or dt.is_bool(self.dtype)):
            raise TypeError(f"a {self.dtype} constant is not an integer: {self.value!r}")
        return int(self.value)

    def __float__(self) -> float:
        if dt.lanes(self.dtype) != 1:
            raise TypeError(f"a {self.dtype} constant is not a scalar")
        return float(self.value)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Var(Expr):
    """A scalar variable: a loop index or a symbolic extent. Compared by identity."""

    name: str
    dtype: str = dt.INDEX_DTYPE

    def __hash__(self) -> int:
        return id(self)


# ----------------------------------------------------------------------------- operators


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BinaryOp(Expr):
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return _operand_dtype(self, self.a)

    def __post_init__(self):
        _check_same(self.a, self.b, type(self).__name__)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Add(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Sub(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Mul(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Div(BinaryOp):
    """Floating-point true division."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FloorDiv(BinaryOp):
    """Integer division rounding towards minus infinity (Python's //)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FloorMod(BinaryOp):
    """Integer remainder with the sign of the divisor (Python's %)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Min(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Max(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CmpOp(Expr):
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return dt.with_lanes("bool", dt.lanes(self.a.dtype))

    def __post_init__(self):
        _check_same(self.a, self.b, type(self).__name__)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class EQ(CmpOp):
    def __bool__(self):
        # Lets expressions serve as dict keys and in `in` tests: structural comparison.
        return structural_equal(self.a, self.b)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class NE(CmpOp):
    def __bool__(self):
        return not structural_equal(self.a, self.b)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LT(CmpOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LE(CmpOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class GT(CmpOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class GE(CmpOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class And(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Or(BinaryOp):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Not(Expr):
    a: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Select(Expr):
    """cond ? true_value : false_value (both sides may be evaluated)."""

    condition: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return _operand_dtype(self, self.true_value)

    def __post_init__(self):
        _check_same(self.true_value, self.false_value, "select")
        if not dt.is_bool(self.condition.dtype):
            raise TypeError(f"select condition must be boolean, got {self.condition.dtype}")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Call(Expr):
    """A pure math intrinsic (exp, log, sqrt, ...), evaluated elementwise."""

    dtype: str
    name: str
    args: tuple


# ----------------------------------------------------------------------------- vectors


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Ramp(Expr):
    """The vector [base, base+stride, ..., base+(lanes-1)*stride]."""

    base: Expr
    stride: Expr
    lanes: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return dt.with_lanes(self.base.dtype, self.lanes)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Broadcast(Expr):
    value: Expr
    lanes: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return dt.with_lanes(self.value.dtype, self.lanes)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Shuffle(Expr):
    """Lanes picked from two vectors of one type (LLVM's shufflevector): lane k of the result
    is lane indices[k] of the concatenation a ++ b."""

    a: Expr
    b: Expr
    indices: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return dt.with_lanes(dt.element(self.a.dtype), len(self.indices))

    def __post_init__(self):
        if self.a.dtype != self.b.dtype or dt.lanes(self.a.dtype) < 2:
            raise TypeError(f"Shuffle: operands must be vectors of one type, got "
                            f"{self.a.dtype} and {self.b.dtype}")
        n = 2 * dt.lanes(self.a.dtype)
        if not self.indices or not all(isinstance(i, int) and 0 <= i < n
                                       for i in self.indices):
            raise ValueError(f"Shuffle: indices must be lanes 0..{n - 1}, got {self.indices}")


# ----------------------------------------------------------------------------- memory


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Load(Expr):
    """Read buffer[indices] (one index per dimension before flattening, one after)."""

    buffer: Any
    indices: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        lanes = max((dt.lanes(i.dtype) for i in self.indices), default=1)
        return dt.with_lanes(self.buffer.dtype, lanes)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Let(Expr):
    var: Var
    value: Expr
    body: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.body.dtype


# ----------------------------------------------------------------------------- helpers


def is_const(e, value=None) -> bool:
    return isinstance(e, Const) and (value is None or e.value == value)


def as_int(e) -> int | None:
    """The Python int of a constant integer expression, else None."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const) and not dt.is_float(e.dtype):
        return int(e.value)
    return None


def conjuncts(cond: Expr) -> list:
    """The operands of a chain of &&: [a, b, c] for a && b && c (the loop passes look at a
    guard's conditions one by one)."""
    if isinstance(cond, And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]
