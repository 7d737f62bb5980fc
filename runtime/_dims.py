"""Argument dimensions that are expressions of shape variables, as a kernel manifest writes them
('n - 2', '8 * m', 'n // 2 + 1', 'max(n - 2, 0)': ONNX's clamped slice lengths): parsed once when a module is made, evaluated at each checked
call, and solved for a variable where the expression is linear in the one variable not yet known.

The text is never handed to ``eval``: it is parsed with ``ast`` and only integer constants, the
manifest's variable names, unary minus, ``+ - * // %`` and calls of ``max``/``min`` with two
arguments are accepted (a manifest may come
from an artifact file). ``//`` and ``%`` round towards minus infinity, as in the kernels."""

from __future__ import annotations

import ast
from collections.abc import Mapping

MAX_TEXT = 2048  # longer texts are refused (deeply nested ones would exhaust the parser;
# a ViT's attention over h_over16 // 16 * (w_over16 // 16) tokens, squared, takes ~300)

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


class DimError(ValueError):
    """A dimension expression that is not in the accepted form."""


class DimExpr:
    """One dimension: its text, the variables it uses, and its linear form when it has one
    ({var: coefficient}, constant)."""

    __slots__ = ("_tree", "linear", "text", "vars")

    def __init__(self, text: str, known_vars) -> None:
        if not isinstance(text, str) or not text or len(text) > MAX_TEXT:
            raise DimError(f"dimension {text!r:.60} must be a non-empty string of at most "
                           f"{MAX_TEXT} characters")
        try:
            tree = ast.parse(text, mode="eval").body
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            raise DimError(f"dimension {text!r} is not an expression") from None
        names: set[str] = set()
        _validate(tree, text, names)
        unknown = sorted(names - set(known_vars))
        if unknown:
            raise DimError(f"dimension {text!r} uses {', '.join(unknown)}, not in vars")
        self.text = text
        self.vars = tuple(sorted(names))
        self._tree = tree
        self.linear = _linear(tree)

    def __str__(self) -> str:
        return self.text

    def python_source(self, names: Mapping[str, str]) -> str:
        """The expression as fully parenthesized Python source over `names` (variable ->
        identifier of the generated code): Python's ``//`` and ``%`` are the kernels'. Only
        the validated tree's ints and the given identifiers enter the text."""
        return _source(self._tree, names)

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value with every variable bound (ValueError for a division by zero)."""
        try:
            return _eval(self._tree, env)
        except ZeroDivisionError:
            values = ", ".join(f"{v}={env[v]}" for v in self.vars)
            raise ValueError(f"{self.text} divides by zero with {values}") from None

    def solve(self, got: int, env: Mapping[str, int]) -> tuple[str, int] | None:
        """(var, value) making the expression equal `got`, when it is linear and exactly one of
        its variables is unbound in `env`; None when it cannot say; ValueError when no integer
        value does it."""
        if self.linear is None:
            return None
        coefs, const = self.linear
        free = [v for v, c in coefs.items() if c and v not in env]
        if len(free) != 1:
            return None
        (var,) = free
        rest = got - const - sum(c * env[v] for v, c in coefs.items() if v != var and c)
        coef = coefs[var]
        if rest % coef:
            raise ValueError(f"{self.text} for an integer {var} (none gives {got})")
        return var, rest // coef


def _validate(node: ast.AST, text: str, names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise DimError(f"dimension {text!r}: constant {node.value!r} is not an int")
    elif isinstance(node, ast.Name):
        names.add(node.id)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _validate(node.operand, text, names)
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _validate(node.left, text, names)
        _validate(node.right, text, names)
    elif _is_extremum(node):
        for arg in node.args:
            _validate(arg, text, names)
    else:
        raise DimError(f"dimension {text!r}: only ints, variable names, unary minus, "
                       "+ - * // % and max/min of two arguments are allowed")


_EXTREMA = {"max": max, "min": min}


def _is_extremum(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
            node.func.id in _EXTREMA and len(node.args) == 2 and not node.keywords)


def _eval(node: ast.AST, env: Mapping[str, int]) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp):
        return -_eval(node.operand, env)
    if isinstance(node, ast.Call):
        return _EXTREMA[node.func.id](*(_eval(arg, env) for arg in node.args))
    return _BINARY[type(node.op)](_eval(node.left, env), _eval(node.right, env))


_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


def _source(node: ast.AST, names: Mapping[str, str]) -> str:
    if isinstance(node, ast.Constant):
        return f"({int(node.value)})"
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.UnaryOp):
        return f"(-{_source(node.operand, names)})"
    if isinstance(node, ast.Call):  # (Python's builtins: the generated code does not shadow them)
        return f"{node.func.id}({', '.join(_source(arg, names) for arg in node.args)})"
    op = _SYMBOLS[type(node.op)]
    return f"({_source(node.left, names)} {op} {_source(node.right, names)})"


def _linear(node: ast.AST) -> tuple[dict[str, int], int] | None:
    """({var: coefficient}, constant) for an expression affine in its variables, else None."""
    if isinstance(node, ast.Constant):
        return {}, node.value
    if isinstance(node, ast.Name):
        return {node.id: 1}, 0
    if isinstance(node, ast.UnaryOp):
        inner = _linear(node.operand)
        return None if inner is None else _scale(inner, -1)
    if isinstance(node, ast.Call):
        return None  # (max and min are not linear: the variables come from other axes)
    left, right = _linear(node.left), _linear(node.right)
    if left is None or right is None:
        return None
    if isinstance(node.op, (ast.Add, ast.Sub)):
        sign = 1 if isinstance(node.op, ast.Add) else -1
        coefs = dict(left[0])
        for v, c in right[0].items():
            coefs[v] = coefs.get(v, 0) + sign * c
        return coefs, left[1] + sign * right[1]
    if isinstance(node.op, ast.Mult) and not (left[0] and right[0]):
        return _scale(right, left[1]) if not left[0] else _scale(left, right[1])
    if not left[0] and not right[0] and right[1]:
        return {}, _BINARY[type(node.op)](left[1], right[1])  # constant // or % constant
    return None


def _scale(form: tuple[dict[str, int], int], k: int) -> tuple[dict[str, int], int]:
    return {v: c * k for v, c in form[0].items()}, form[1] * k
