"""Generic traversal of IR trees. A Mutator returns the same object when nothing changed, so
passes can tell cheaply whether they did anything and unchanged subtrees stay shared."""

from __future__ import annotations

from collections.abc import Callable

from .expr import Expr, Node, Var
from .stmt import Buffer, IterVar, Range, Stmt

_LEAF_TYPES = (Var, Buffer, IterVar)


class Mutator:
    """Override visit_<ClassName>(node) for the nodes you rewrite; call self.generic(node) to
    rewrite the children of a node."""

    def __init__(self):
        self._dispatch: dict[type, Callable] = {}

    def visit(self, node):
        if node is None:
            return None
        fn = self._dispatch.get(type(node))
        if fn is None:
            fn = getattr(self, "visit_" + type(node).__name__, None) or self.generic
            self._dispatch[type(node)] = fn
        return fn(node)

    def generic(self, node):
        if isinstance(node, _LEAF_TYPES) or not isinstance(node, Node):
            return node
        changes = {}
        for name in node.fields():
            old = getattr(node, name)
            new = self._visit_field(old)
            if new is not old:
                changes[name] = new
        return node.replace(**changes) if changes else node

    def _visit_field(self, value):
        if isinstance(value, (Expr, Stmt, Range)):
            return self.visit(value)
        if isinstance(value, tuple) and value and isinstance(value[0], (Expr, Stmt, Range, tuple)):
            new = tuple(self._visit_field(v) for v in value)
            return value if all(a is b for a, b in zip(new, value)) else new
        return value


class Visitor:
    """Calls visit_<ClassName>(node) where defined, and always walks the children."""

    def visit(self, node) -> None:
        if node is None:
            return
        fn = getattr(self, "visit_" + type(node).__name__, None)
        if fn is not None:
            fn(node)
        else:
            self.generic(node)

    def generic(self, node) -> None:
        if isinstance(node, _LEAF_TYPES) or not isinstance(node, Node):
            return
        for name in node.fields():
            self._walk(getattr(node, name))

    def _walk(self, value) -> None:
        if isinstance(value, (Expr, Stmt, Range)):
            self.visit(value)
        elif isinstance(value, tuple):
            for v in value:
                self._walk(v)


def substitute(node, mapping: dict):
    """Replace Vars by expressions (keys are Var objects), also in the shapes of buffers
    allocated inside `node` (a buffer sized by a loop variable, e.g. a stage computed at that
    loop, gets a new Buffer that its loads and stores then use)."""
    if not mapping:
        return node

    class _Sub(Mutator):
        def __init__(self):
            super().__init__()
            self.buffers: dict = {}

        def visit_Var(self, v):
            return mapping.get(v, v)

        def visit_Allocate(self, s):
            b = s.buffer
            shape = tuple(self.visit(d) for d in b.shape)
            if any(x is not y for x, y in zip(shape, b.shape)):
                self.buffers[b] = b.replace(shape=shape)
            return s.replace(buffer=self.buffers.get(b, b), body=self.visit(s.body))

        def _rebind(self, node):
            node = self.generic(node)
            nb = self.buffers.get(node.buffer)
            return node if nb is None else node.replace(buffer=nb)

        visit_Load = _rebind
        visit_Store = _rebind

    return _Sub().visit(node)


def collect_vars(node) -> set:
    found: set = set()

    class _Collect(Visitor):
        def visit_Var(self, v):
            found.add(v)

    _Collect().visit(node)
    return found


def post_order(node, fn: Callable) -> None:
    """Call fn on every node, children first."""

    class _Walk(Visitor):
        def visit(self, n):
            if n is None:
                return
            self.generic(n)
            fn(n)

    _Walk().visit(node)
