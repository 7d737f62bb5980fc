"""te.tag_scope: TVM's default tag for the computes declared inside a `with` block or a
decorated function (TOPI marks its elementwise and broadcast operators this way):

    @te.tag_scope(tag="elemwise")
    def relu(x):
        return te.compute(x.shape, lambda *i: tl.max(x(*i), tl.const(0, x.dtype)))

As in TVM, scopes do not nest, and a compute that names its own tag inside one is refused
(the two tags would conflict)."""

from __future__ import annotations

import contextvars
import functools
from typing import Self

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("tag_scope", default=None)


class TagScope:
    """The scope of one tag: a context manager, and a decorator that opens it around each call
    of the function it decorates."""

    def __init__(self, tag: str):
        if not isinstance(tag, str):
            raise TypeError(f"te.tag_scope: tag must be a str, got {type(tag).__name__}")
        self.tag = tag
        self._token = None

    def __enter__(self) -> Self:
        outer = _CURRENT.get()
        if outer is not None:
            raise ValueError(f"te.tag_scope({self.tag!r}) inside te.tag_scope({outer.tag!r}): "
                             "tag scopes do not nest (as in TVM)")
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._token)
        self._token = None

    def __call__(self, func):
        @functools.wraps(func)
        def tagged(*args, **kwargs):
            with TagScope(self.tag):
                return func(*args, **kwargs)

        return tagged


def tag_scope(tag: str) -> TagScope:
    """TVM's te.tag_scope(tag): computes declared inside it get `tag`."""
    return TagScope(tag)


def scoped_tag(tag: str, what: str) -> str:
    """The tag a compute or extern gets: its own, else the open scope's."""
    scope = _CURRENT.get()
    if scope is None:
        return tag
    if tag:
        raise ValueError(f"{what}: tag={tag!r} inside te.tag_scope({scope.tag!r}); give one of "
                         "the two (as in TVM, a tag inside a tag scope is refused)")
    return scope.tag
