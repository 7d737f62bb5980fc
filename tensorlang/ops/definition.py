"""Typed operator definitions: for each library op, in one record, its compute, its pattern
kind, its internal stages, its default (anchor) schedule with the knobs that schedule declares,
its tuning template and its numpy reference with a small example (the differential test of
every op, tests/tensorlang/test_op_definitions.py).

Every compute a library op declares carries its definition (``attrs["definition"]``, set by
``_base.op_compute`` from the compute's tag and copied with the attributes by cache_write and
rfactor): ``default_schedule``, the graph op registry, the autotune templates and the tests read
the definition instead of matching tag strings. The definitions themselves are declared in
``ops/catalog.py``; docs/operators.md says how to add one."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .patterns import OPAQUE, Pattern, as_pattern

_NO_DEFAULT = inspect.Parameter.empty


@dataclass(frozen=True)
class Knob:
    """One keyword argument of a schedule that a tuner may vary: its name, the types a value
    may have (``bool`` is never accepted for an ``int`` knob) and its default."""

    name: str
    types: tuple[type, ...]
    default: Any
    doc: str = ""

    def check(self, op: str, value) -> None:
        bad_bool = isinstance(value, bool) and bool not in self.types
        if bad_bool or not isinstance(value, self.types):
            want = " or ".join("None" if t is type(None) else t.__name__ for t in self.types)
            raise TypeError(f"{op}: knob {self.name!r} must be {want}, got "
                            f"{type(value).__name__} {value!r}")


def knob(name: str, types, default, doc: str = "") -> Knob:
    return Knob(name, tuple(types) if isinstance(types, (tuple, list)) else (types,), default,
                doc)


@dataclass(frozen=True)
class AnchorSchedule:
    """The schedule of a heavy op (an *anchor*): ``function(s, anchor, out, **knobs)`` with
    ``out`` the output stage hosting the anchor's elementwise tail, or None. ``knobs`` is the
    declared signature: a knob it does not declare is a TypeError naming the op and the knob."""

    function: Callable
    knobs: tuple[Knob, ...] = ()

    def knob(self, name: str) -> Knob | None:
        return next((k for k in self.knobs if k.name == name), None)

    def bind(self, op: str, knobs: dict | None) -> dict:
        """The knobs checked against the declaration (only those given: the rest keep the
        schedule's defaults)."""
        values = dict(knobs or {})
        for name, value in values.items():
            k = self.knob(name)
            if k is None:
                raise TypeError(f"{op}: its schedule {self.function.__name__} has no knob "
                                f"{name!r}; declared knobs: "
                                f"{', '.join(x.name for x in self.knobs) or 'none'}")
            k.check(op, value)
        return values

    def apply(self, op: str, s, anchor, out, knobs: dict | None = None) -> None:
        self.function(s, anchor, out, **self.bind(op, knobs))


@dataclass(frozen=True)
class CompositeSchedule:
    """The schedule of a composite (opaque) op whose internal stages it places itself:
    ``function(s, out)``; ``keeps`` are the roles of the parts it places (left alone by the
    generic inlining)."""

    function: Callable
    keeps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Part:
    """An internal stage of a library op: a compute of its own (tag ``name``) that only the op
    declares, with the role its schedule knows it by ("pack", "max", "sum", ...); schedule:
    when the stage is the op's anchor (avg_pool2d's window sum)."""

    name: str
    owner: str
    role: str
    pattern: Pattern
    schedule: AnchorSchedule | None = None


@dataclass(frozen=True)
class Example:
    """A small instance of an op for its differential test: ``declare(*placeholders)`` builds
    the op's output(s) from placeholders of ``inputs`` ((shape, dtype) each); ``reference``
    computes the same from numpy arrays; ``low``/``high`` bound the random inputs."""

    inputs: tuple
    declare: Callable
    reference: Callable
    low: float = -2.0
    high: float = 2.0
    rtol: float = 1e-5
    atol: float = 1e-5


@dataclass(frozen=True)
class OpDefinition:
    """One library operator.

    name: the op's name, the tag of its output compute; compute: the library function;
    pattern: its pattern kind (a binary op is BROADCAST: an instance whose operands have the
    output's shape records ELEMWISE on its compute); schedule: its default schedule when it is
    an anchor or a composite (None: the generic injective/reduce schedules); parts: its internal
    stages; template: the autotune template that tunes it, if any; examples: small instances
    with their numpy references."""

    name: str
    compute: Callable
    pattern: Pattern
    examples: tuple[Example, ...]
    schedule: AnchorSchedule | CompositeSchedule | None = None
    parts: tuple[Part, ...] = ()
    template: str | None = None
    aliases: tuple[str, ...] = field(default=())

    def part(self, role: str) -> Part | None:
        return next((p for p in self.parts if p.role == role), None)

    @property
    def anchor(self) -> AnchorSchedule | None:
        return self.schedule if isinstance(self.schedule, AnchorSchedule) else None

    @property
    def composite(self) -> CompositeSchedule | None:
        return self.schedule if isinstance(self.schedule, CompositeSchedule) else None


_DEFINITIONS: dict[str, OpDefinition] = {}
_BY_TAG: dict[str, OpDefinition | Part] = {}


class DefinitionError(ValueError):
    """A definition that contradicts itself or another one (raised when it is declared)."""


def define(name: str, compute: Callable, pattern, examples, schedule=None,
           parts: dict | None = None, template: str | None = None,
           aliases: tuple[str, ...] = ()) -> OpDefinition:
    """Register the definition of library op ``name``. parts: {role: (part name, pattern)} or
    {role: (part name, pattern, anchor schedule)}."""
    if name in _BY_TAG:
        raise DefinitionError(f"operator {name!r} is defined twice")
    kind = as_pattern(pattern)
    if schedule is not None and not isinstance(schedule, (AnchorSchedule, CompositeSchedule)):
        raise DefinitionError(f"{name}: schedule must be an AnchorSchedule or a "
                              f"CompositeSchedule, got {type(schedule).__name__}")
    if isinstance(schedule, CompositeSchedule) and kind != OPAQUE:
        raise DefinitionError(f"{name}: a composite schedule is for opaque ops, not {kind}")
    ps = tuple(Part(spec[0], name, role, as_pattern(spec[1]), *spec[2:])
               for role, spec in (parts or {}).items())
    for p in ps:
        if p.name in _BY_TAG:
            raise DefinitionError(f"{name}: part {p.name!r} is already defined")
    d = OpDefinition(name, compute, kind, tuple(examples), schedule, ps, template, aliases)
    _DEFINITIONS[name] = d
    _BY_TAG[name] = d
    for p in ps:
        _BY_TAG[p.name] = p
    return d


def lookup_tag(tag: str) -> OpDefinition | Part:
    """The definition (or part) that declares computes tagged ``tag``."""
    try:
        return _BY_TAG[tag]
    except KeyError:
        raise LookupError(f"no operator definition declares computes tagged {tag!r} (every "
                          "library compute needs one: see tensorlang/ops/catalog.py)") from None


def definition_of(t) -> OpDefinition | Part | None:
    """The definition or part a compute (a tensor, an operation or a stage) carries; None for a
    compute that no library op declared."""
    op = getattr(t, "op", t)
    return getattr(op, "attrs", {}).get("definition")


def op_definition(t) -> OpDefinition | None:
    """The definition of the library op whose output compute ``t`` is (None for a part or a
    user's compute)."""
    d = definition_of(t)
    return d if isinstance(d, OpDefinition) else None


def part_role(t) -> str | None:
    """The role of an internal stage (``"pack"``, ``"max"``...), None for anything else."""
    d = definition_of(t)
    return d.role if isinstance(d, Part) else None


def is_op(t, name: str) -> bool:
    """True when ``t`` is the output compute of library op ``name``."""
    d = op_definition(t)
    return d is not None and d.name == name


def anchor_schedule(t) -> AnchorSchedule | None:
    """The anchor schedule of the op (or part) whose compute ``t`` is; None when it has none."""
    d = definition_of(t)
    return d.schedule if isinstance(getattr(d, "schedule", None), AnchorSchedule) else None


def get_definition(name: str) -> OpDefinition:
    try:
        return _DEFINITIONS[name]
    except KeyError:
        raise LookupError(f"no operator definition named {name!r}; defined: "
                          f"{', '.join(sorted(_DEFINITIONS))}") from None


def all_definitions() -> tuple[OpDefinition, ...]:
    return tuple(_DEFINITIONS.values())


def declared_knobs(function: Callable) -> tuple[Knob, ...]:
    """The knobs a schedule function's signature has after (s, anchor, out): for the check that
    a definition's declared knobs match its function (names and defaults)."""
    params = list(inspect.signature(function).parameters.values())[3:]
    return tuple(Knob(p.name, (), p.default) for p in params if p.default is not _NO_DEFAULT)
