"""Generic traversal of IR trees. A Mutator returns the same object when nothing changed, so
passes can tell cheaply whether they did anything and unchanged subtrees stay shared."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

from .expr import Add, BinaryOp, Call, CmpOp, Const, Div, Expr, Max, Min, Mul, Node, Sub, Var
from .stmt import Buffer, IterVar, Range, Stmt

_LEAF_TYPES = (Var, Buffer, IterVar)
# what the walkers never look inside (a third of a lowered kernel's nodes are constants)
_NO_CHILDREN = (*_LEAF_TYPES, Const)
_BINARY_TYPES = (BinaryOp, CmpOp)


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
        if isinstance(node, _BINARY_TYPES):
            # the most common node by far (index arithmetic), with two expression children:
            # without the walk over its fields
            a, b = node.a, node.b
            na, nb = self.visit(a), self.visit(b)
            return node if na is a and nb is b else type(node)(na, nb)
        if isinstance(node, _NO_CHILDREN) or not isinstance(node, Node):
            return node
        changes = None
        for name in node.fields():
            old = getattr(node, name)
            if isinstance(old, _CHILD_TYPES):  # (the test inlined: most fields are children,
                new = self.visit(old)  # dtypes or buffers, and a call per field added up)
            elif isinstance(old, tuple):
                new = self._visit_field(old)
            else:
                continue
            if new is not old:
                if changes is None:
                    changes = {}
                changes[name] = new
        if changes is None:
            return node
        cls = type(node)
        if _positional(cls):
            # the hot path of every pass: a positional call skips dataclasses.replace's
            # per-call field introspection (the same __init__ and __post_init__ checks run)
            return cls(*[changes[n] if n in changes else getattr(node, n)
                         for n in cls.fields()])
        return node.replace(**changes)

    def _visit_field(self, value):
        if isinstance(value, _CHILD_TYPES):
            return self.visit(value)
        if isinstance(value, tuple) and value and isinstance(value[0], _TUPLE_CHILD_TYPES):
            new = tuple([self._visit_field(v) for v in value])
            for a, b in zip(new, value):
                if a is not b:
                    return new
            return value
        return value


class StmtMutator(Mutator):
    """A Mutator that rewrites statements only: expressions come back as they are, unwalked
    (for passes that move loops, guards and allocations: most of a kernel's nodes are in its
    expressions)."""

    def visit(self, node):
        if isinstance(node, Expr):
            return node
        return Mutator.visit(self, node)


_CHILD_TYPES = (Expr, Stmt, Range)
_TUPLE_CHILD_TYPES = (Expr, Stmt, Range, tuple)
_POSITIONAL: dict = {}


def _positional(cls) -> bool:
    """True when cls(*values of cls.fields()) builds a copy of a node: a dataclass whose
    fields are all __init__ arguments, in field order."""
    got = _POSITIONAL.get(cls)
    if got is None:
        fs = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
        got = _POSITIONAL[cls] = bool(fs) and all(f.init for f in fs) and \
            tuple(f.name for f in fs) == cls.fields()
    return got


class Visitor:
    """Calls visit_<ClassName>(node) where defined, and always walks the children."""

    def visit(self, node) -> None:
        if node is None:
            return
        fn = _visit_method(type(self), type(node))
        if fn is None:
            self.generic(node)
        else:
            fn(self, node)

    def generic(self, node) -> None:
        if isinstance(node, _BINARY_TYPES):  # the common node: no walk over its fields
            self.visit(node.a)
            self.visit(node.b)
            return
        if isinstance(node, _NO_CHILDREN) or not isinstance(node, Node):
            return
        for name in node.fields():
            self._walk(getattr(node, name))

    def _walk(self, value) -> None:
        if isinstance(value, _CHILD_TYPES):
            self.visit(value)
        elif isinstance(value, tuple):
            for v in value:
                self._walk(v)


class StmtVisitor(Visitor):
    """A Visitor that walks statements only, never into their expressions: for walks that look
    for loops, allocations or stores (a lowered kernel's statements are a few percent of its
    nodes)."""

    def _walk(self, value) -> None:
        if isinstance(value, Stmt):
            self.visit(value)
        elif isinstance(value, tuple):
            for v in value:
                self._walk(v)


# (visitor class, node class) -> the visitor's visit_<ClassName> function, or None: looked up
# once per pair, not per node (a string concatenation and getattr per node were a third of a
# walk's time). Bounded: visitor classes defined inside functions are new on every call.
_VISIT_METHODS: dict = {}
_VISIT_METHODS_LIMIT = 4096


def _visit_method(visitor_cls: type, node_cls: type):
    key = (visitor_cls, node_cls)
    try:
        return _VISIT_METHODS[key]
    except KeyError:
        if len(_VISIT_METHODS) >= _VISIT_METHODS_LIMIT:
            _VISIT_METHODS.clear()
        fn = _VISIT_METHODS[key] = getattr(visitor_cls, "visit_" + node_cls.__name__, None)
        return fn


def substitute(node, mapping: dict):
    """Replace Vars by expressions (keys are Var objects), also in the shapes of buffers
    allocated inside `node` (a buffer sized by a loop variable, e.g. a stage computed at that
    loop, gets a new Buffer that its loads and stores then use)."""
    if not mapping:
        return node
    return _Substitute(mapping).visit(node)


# The helpers' visitors are module-level classes: a class statement per call (what they were)
# cost as much as the walk itself on the small expressions lowering passes them.
class _Substitute(Mutator):
    def __init__(self, mapping: dict):
        super().__init__()
        self.mapping = mapping
        self.buffers: dict = {}

    def visit_Var(self, v):
        return self.mapping.get(v, v)

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


# The deepest expression tensorlang compiles. Its walkers (visitors, mutators, the simplifier,
# hashing, codegen) recurse once per level, each level taking a few Python frames and ~600 bytes
# of C stack: 2000 levels fit a thread's 2 MB stack with room to spare (a 1000-term sum is
# 1001 deep; 20000 levels overflowed the main thread's 8 MB: a segfault).
MAX_EXPR_DEPTH = 2000
_FRAMES_PER_LEVEL = 8  # measured: 4 (visit, generic, _walk, ...), doubled for the deeper walkers


def expr_depth(nodes) -> int:
    """The depth of the deepest of `nodes` (an expression or a tuple of them), counted
    without recursion: it is what decides whether the recursive walkers can handle them."""
    deepest = 0
    stack = [(n, 1) for n in (nodes if isinstance(nodes, tuple) else (nodes,))]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, tuple):
            stack.extend((x, depth) for x in node)
            continue
        if not isinstance(node, Node) or isinstance(node, _LEAF_TYPES):
            continue
        deepest = max(deepest, depth)
        stack.extend((getattr(node, f), depth + 1) for f in node.fields())
    return deepest


def stmt_depth(body) -> int:
    """The nesting of the statements in `body` (not counting their expressions), without
    recursion: a walk over a few nodes of the many expr_depth visits (3 ms against 20 ms on a
    lowered 3x3 conv)."""
    deepest = 0
    stack = [(body, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, tuple):
            stack.extend((x, depth) for x in node)
        elif isinstance(node, Stmt):
            deepest = max(deepest, depth)
            stack.extend((getattr(node, f), depth + 1) for f in node.fields())
    return deepest


def fit_recursion(depth: int, what: str, error=ValueError,
                  remedy: str = "split it into several computes (e.g. partial sums of a long "
                                "chain of terms)") -> None:
    """Refuse an expression deeper than MAX_EXPR_DEPTH (with `error`, naming `what`), and make
    Python's recursion limit room for the walkers on one that is not (only ever raised)."""
    if depth > MAX_EXPR_DEPTH:
        raise error(f"{what}: the expression is nested {depth} deep, more than the "
                    f"{MAX_EXPR_DEPTH} levels tensorlang compiles; {remedy}")
    need = _FRAMES_PER_LEVEL * depth + 2000
    if sys.getrecursionlimit() < need:
        sys.setrecursionlimit(need)


class _Found(Exception):
    pass


def _found(self, _node):
    raise _Found


_FINDERS: dict = {}


def contains(node, kind: type) -> bool:
    """Whether a node of class `kind` (Load, TensorRead, ...) is in the expression or
    statement `node`."""
    finder = _FINDERS.get(kind)
    if finder is None:  # one class per kind (the method look-ups are cached by class)
        finder = _FINDERS[kind] = type("_Find", (Visitor,), {"visit_" + kind.__name__: _found})
    try:
        finder().visit(node)
    except _Found:
        return True
    return False


def collect_vars(node) -> set:
    """The Vars in an expression or statement (what a Visitor reaches: through Expr, Stmt and
    Range nodes and tuples of them, not into buffers or iteration variables)."""
    found: set = set()
    if isinstance(node, Var):
        found.add(node)
    elif isinstance(node, Node) and not isinstance(node, _LEAF_TYPES):
        for name in node.fields():
            _collect_vars(getattr(node, name), found)
    return found


def _collect_vars(value, found: set) -> None:
    if isinstance(value, Var):
        found.add(value)
    elif isinstance(value, _CHILD_TYPES):
        for name in value.fields():
            _collect_vars(getattr(value, name), found)
    elif isinstance(value, tuple):
        for v in value:
            _collect_vars(v, found)


_ARITH_TYPES = (Add, Sub, Mul, Div, Min, Max, Call)


def count_arith(e, float_only: bool = True) -> int:
    """The arithmetic nodes (+ - * / min max and calls) of an expression, counting only those
    of float type with float_only: the FLOPs of evaluating it once."""
    n = 0
    if isinstance(e, _ARITH_TYPES) and (not float_only or "float" in str(e.dtype)):
        n += 1
    if isinstance(e, Node):
        for f in e.fields():
            v = getattr(e, f)
            if isinstance(v, Expr):
                n += count_arith(v, float_only)
            elif isinstance(v, tuple):
                n += sum(count_arith(x, float_only) for x in v if isinstance(x, Expr))
    return n


def post_order(node, fn: Callable) -> None:
    """Call fn on every node, children first."""
    _PostOrder(fn).visit(node)


class _PostOrder(Visitor):
    def __init__(self, fn: Callable):
        self.fn = fn

    def visit(self, n):
        if n is None:
            return
        self.generic(n)
        self.fn(n)
