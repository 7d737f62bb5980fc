"""``tvm.runtime.convert`` (``tl.runtime.convert``): a Python value as the compiler's value, as TVM
scripts write shapes and split factors (``n = tvm.runtime.convert(12)``): a number becomes a
constant expression (an integer one acts as an int), a list or tuple a list, a dict a dict of
converted keys and values; an expression or a string is returned as it is. The compiler is
imported at the call (this package runs without it)."""

from __future__ import annotations


def convert(value):
    """A constant for a number, converted elements for a list, tuple or dict."""
    if isinstance(value, (list, tuple)):
        return [convert(v) for v in value]
    if isinstance(value, dict):
        return {convert(k): convert(v) for k, v in value.items()}
    if isinstance(value, str):
        return value
    from tensorlang.ir.expr import convert as to_expr

    return to_expr(value)
