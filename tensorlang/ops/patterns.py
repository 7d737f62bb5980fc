"""Pattern kinds of operators (TVM's OpPatternKind, by name): the one definition, read by the
operator library's default schedules, the graph op registry and fusion.

A kind is a ``str`` enum, so a kind compares equal to its name and serializes as it (fused
groups record their kind in JSON attributes)."""

from __future__ import annotations

from enum import StrEnum


class Pattern(StrEnum):
    """Ordered from the most to the least fusable (``Pattern.order``)."""

    ELEMWISE = "elemwise"  # out[i] = f(in[i]) for inputs of the output's shape
    BROADCAST = "broadcast"  # like elemwise, but some inputs are broadcast along some axes
    INJECTIVE = "injective"  # every output element reads a fixed set of input elements
    REDUCE = "reduce"  # reduces input axes (sum, max, argmax...)
    OUT_ELEMWISE_FUSABLE = "out_elemwise_fusable"  # heavy op whose output loop hosts a tail
    OPAQUE = "opaque"  # composite op with its own schedule (softmax, layer norm, ...)

    @property
    def order(self) -> int:
        return _ORDER[self]

    def __repr__(self) -> str:  # as the plain name it replaces, in messages and dumps
        return repr(self.value)


_ORDER = {p: i for i, p in enumerate(Pattern)}

ELEMWISE = Pattern.ELEMWISE
BROADCAST = Pattern.BROADCAST
INJECTIVE = Pattern.INJECTIVE
REDUCE = Pattern.REDUCE
OUT_ELEMWISE_FUSABLE = Pattern.OUT_ELEMWISE_FUSABLE
OPAQUE = Pattern.OPAQUE
PATTERNS = tuple(Pattern)


def as_pattern(kind) -> Pattern:
    """A kind given by name or member -> the member; ValueError naming the known kinds."""
    try:
        return Pattern(kind)
    except ValueError:
        raise ValueError(f"unknown pattern kind {kind!r}; known: "
                         f"{', '.join(p.value for p in Pattern)}") from None
