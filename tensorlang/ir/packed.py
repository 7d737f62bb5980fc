"""The call of a packed function (runtime/packed.py): the body of a tl.extern stage.

One node at both levels: in a tl.extern's body its buffer arguments are Tensors (the extern's
inputs and outputs); in loop IR they are loads of element 0 of their buffers, standing for
"the buffer from its first element". Written as loads, every pass that renames or re-scopes a
buffer (plan_allocation, storage_flatten) updates them without knowing this node; the code
generator passes their address, never the element."""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Expr, Load


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class PackedCall(Expr):
    """call_packed(name, *args): an int32 status, 0 on success. `written[i]`: whether buffer
    argument i is an output (passed writable), False for scalars and inputs."""

    name: str
    args: tuple
    written: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "int32"

    def text(self, p) -> str:
        items = [repr(self.name)]
        for a in self.args:
            if isinstance(a, Load):
                items.append(p.name(a.buffer, a.buffer.name))
            elif isinstance(a, Expr):
                items.append(p.expr(a))
            else:  # a Tensor, before lowering
                items.append(p.name(a, a.name))
        return f"call_packed({', '.join(items)})"

    def __repr__(self) -> str:
        from .printer import expr_str

        return expr_str(self)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ExternCall(Expr):
    """call_extern(dtype, symbol, *args): a direct call of the C function `symbol`
    (runtime/extern_c.py has the conventions). kinds[i]: "value" for a scalar argument (passed
    as arg_dtypes[i], the dtype it was declared with: a later rewrite of the expression does
    not change the C signature), "input" / "output" for a tensor passed as its buffer (in loop
    IR, a load of element 0, as in PackedCall). library: the file registered for the symbol
    (tl.register_func(..., library=)), or None: found when the kernel is built."""

    dtype: str
    symbol: str
    args: tuple
    kinds: tuple
    arg_dtypes: tuple
    library: str | None = None

    @property
    def name(self) -> str:  # what messages about an extern stage's call print
        return self.symbol

    @property
    def status(self) -> bool:
        """A tl.extern's body (an int32 status, tensors passed): not a per-element value."""
        return any(k != "value" for k in self.kinds)

    def text(self, p) -> str:
        items = [repr(self.dtype), repr(self.symbol)]
        for a, kind in zip(self.args, self.kinds):
            if kind == "value":
                items.append(p.expr(a))
            elif isinstance(a, Load):
                items.append(p.name(a.buffer, a.buffer.name))
            else:  # a Tensor, before lowering
                items.append(p.name(a, a.name))
        return f"call_extern({', '.join(items)})"

    def __repr__(self) -> str:
        from .printer import expr_str

        return expr_str(self)
