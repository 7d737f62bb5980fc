"""Configuration spaces (AutoTVM's knob vocabulary).

A template calls ``cfg.define_split / define_reorder / define_annotate / define_knob`` and then
``cfg[name].apply(...)``. The same template code runs in three modes:

- ``ConfigSpace``: collecting the knobs (``create_task`` runs the template once); ``cfg[name]``
  returns the first candidate so that the template can finish building a schedule;
- ``ConfigEntity``: one point of the space (what the tuner measures); ``define_*`` are no-ops;
- ``FallbackConfig``: the template's default point (each ``define_*`` may name a ``default``).

A point is identified by its mixed-radix ``index`` over the knobs in definition order, and
serialized as ``{"index": ..., "entity": {knob: value}}``; the entity is what replay trusts (the
index is re-derived from it, so a record stays valid if only knob *order* of values is unchanged).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..errors import ScheduleError
from ..ir.expr import as_int
from ..ir.stmt import IterVar


def _extent(axis: IterVar | int, what: str) -> int:
    if isinstance(axis, int) and not isinstance(axis, bool):
        return axis
    if isinstance(axis, IterVar):
        n = as_int(axis.dom.extent)
        if n is not None:
            return n
        raise ValueError(f"{what}: loop {axis.name} has a symbolic extent; knobs need constant "
                         "extents")
    raise TypeError(f"{what}: expected a loop (IterVar) or an int extent, got "
                    f"{type(axis).__name__}")


def _divisors(n: int) -> list[int]:
    # pairs (d, n / d) up to sqrt(n): a 2^20-element loop is split in every instantiation
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _stage(s, target):
    """s[target] for a tensor or a stage."""
    return target if hasattr(target, "leaf_iter_vars") else s[target]


# --------------------------------------------------------------------------------- entities
class SplitEntity:
    """Factors of one loop, outermost first; the outermost is -1 (whatever remains)."""

    def __init__(self, size: Sequence[int]):
        self.size = [int(x) for x in size]

    def apply(self, s, target, axis: IterVar) -> list[IterVar]:
        """Split `axis` of stage `target` into len(size) loops, outermost first."""
        st = _stage(s, target)
        inners = []
        for f in reversed(self.size[1:]):
            axis, inner = st.split(axis, factor=f)
            inners.append(inner)
        return [axis] + inners[::-1]

    def to_json(self) -> list[int]:
        return list(self.size)

    def __eq__(self, other) -> bool:
        return isinstance(other, SplitEntity) and other.size == self.size

    def __hash__(self) -> int:
        return hash(tuple(self.size))

    def __repr__(self) -> str:
        return f"sp{self.size}"


class ReorderEntity:
    """A permutation of a list of loops."""

    def __init__(self, perm: Sequence[int]):
        self.perm = [int(x) for x in perm]

    def apply(self, s, target, axes: Sequence[IterVar]) -> list[IterVar]:
        if len(axes) != len(self.perm):
            raise ValueError(f"reorder knob: expected {len(self.perm)} loops, got {len(axes)}")
        order = [axes[i] for i in self.perm]
        if self.perm != sorted(self.perm):
            _stage(s, target).reorder(*order)
        return order

    def to_json(self) -> list[int]:
        return list(self.perm)

    def __eq__(self, other) -> bool:
        return isinstance(other, ReorderEntity) and other.perm == self.perm

    def __hash__(self) -> int:
        return hash(tuple(self.perm))

    def __repr__(self) -> str:
        return f"re{self.perm}"


ANNOTATIONS = ("none", "unroll", "vec", "parallel")


class AnnotateEntity:
    """One annotation per loop: "none", "unroll", "vec" or "parallel"."""

    def __init__(self, anns: Sequence[str]):
        for a in anns:
            if a not in ANNOTATIONS:
                raise ValueError(f"unknown annotation {a!r}; expected one of {ANNOTATIONS}")
        self.anns = list(anns)

    def apply(self, s, target, axes: Sequence[IterVar], axis_lens=None, max_unroll=None,
              vec_size=None, cfg=None, source=None) -> None:
        """Annotate `axes` of stage `target`. TVM's limits: with `axis_lens` (each loop's
        extent), an unrolled loop longer than `max_unroll` or a vectorized one whose extent is
        not in `vec_size` makes the config invalid (cfg.raise_error: a ScheduleError, so the
        trial is an illegal schedule). `source` is TVM's locate_cache policy (GPU): refused."""
        if source is not None:
            raise ValueError("AnnotateEntity.apply: source= places caches for TVM's "
                             "'locate_cache' policy, a GPU schedule; use cache_read/compute_at")
        st = _stage(s, target)
        for i, (ax, a) in enumerate(zip(axes, self.anns)):
            n = _annotated_extent(axis_lens, i, ax)
            if a == "unroll":
                if max_unroll and n is not None and n > max_unroll:
                    _invalid(cfg, f"unroll of loop {ax.name}: extent {n} > max_unroll="
                                  f"{max_unroll}")
                st.unroll(ax)
            elif a == "vec":
                if vec_size and n is not None and n not in list(vec_size):
                    _invalid(cfg, f"vectorize of loop {ax.name}: extent {n} not in "
                                  f"vec_size={list(vec_size)}")
                st.vectorize(ax)
            elif a == "parallel":
                st.parallel(ax)

    def to_json(self) -> list[str]:
        return list(self.anns)

    def __eq__(self, other) -> bool:
        return isinstance(other, AnnotateEntity) and other.anns == self.anns

    def __hash__(self) -> int:
        return hash(tuple(self.anns))

    def __repr__(self) -> str:
        return f"an{self.anns}"


def _annotated_extent(axis_lens, i: int, ax) -> int | None:
    """The extent TVM's annotate limits compare: axis_lens[i] (an int or a constant
    expression) when given, else the loop's own constant extent."""
    if axis_lens is not None:
        n = axis_lens[i]
        return int(n) if isinstance(n, int) else as_int(n)
    return as_int(ax.dom.extent) if isinstance(ax, IterVar) else None


def _invalid(cfg, msg: str) -> None:
    if cfg is not None:
        cfg.raise_error(msg)
    raise ScheduleError(f"invalid config: {msg}")


class OtherOptionEntity:
    """A plain choice among values (define_knob); read it with `.val`."""

    def __init__(self, val: Any):
        self.val = val

    def to_json(self) -> Any:
        return self.val

    def __eq__(self, other) -> bool:
        return isinstance(other, OtherOptionEntity) and other.val == self.val

    def __hash__(self) -> int:
        return hash(repr(self.val))

    def __repr__(self) -> str:
        return repr(self.val)


def _entity_from_json(kind: str, value) -> Any:
    return {"split": SplitEntity, "reorder": ReorderEntity, "annotate": AnnotateEntity,
            "knob": OtherOptionEntity}[kind](value)


# --------------------------------------------------------------------------------- knob spaces
class Knob:
    """The candidates of one knob."""

    def __init__(self, name: str, kind: str, entities: list):
        if not entities:
            raise ValueError(f"knob {name!r} has no candidates")
        self.name = name
        self.kind = kind
        self.entities = entities
        self._pos = {e: i for i, e in enumerate(entities)}

    def __len__(self) -> int:
        return len(self.entities)

    def index_of(self, entity) -> int:
        try:
            return self._pos[entity]
        except KeyError:
            raise ValueError(f"knob {self.name!r}: value {entity!r} is not a candidate") from None


def split_candidates(extent: int, num_outputs: int, policy: str, candidate=None,
                     max_factor: int | None = None) -> list[SplitEntity]:
    if num_outputs < 2:
        raise ValueError("define_split: num_outputs must be >= 2")
    if policy == "candidate":
        if not candidate:
            raise ValueError("define_split(policy='candidate') needs candidate=[[...], ...]")
        out = []
        for c in candidate:
            if len(c) != num_outputs:
                raise ValueError(f"define_split: candidate {c} does not have {num_outputs} "
                                 "factors")
            out.append(SplitEntity([-1] + list(c[1:])))
        return out
    powers_of_2 = [1 << p for p in range(int(math.log2(max(extent, 1))) + 1)]
    if policy == "factors":
        choices = _divisors(extent)
    elif policy == "power2":
        choices = powers_of_2
    elif policy == "verbose":  # TVM's: the divisors and the powers of two
        choices = sorted(set(_divisors(extent)) | set(powers_of_2))
    else:
        raise ValueError(f"define_split: unknown policy {policy!r} (factors, power2, verbose, "
                         "candidate)")
    if max_factor is not None:
        choices = [c for c in choices if c <= max_factor]
    out = []
    for combo in itertools.product(choices, repeat=num_outputs - 1):
        prod = math.prod(combo)
        # 'factors' keeps splits exact (no tail guards); 'power2' and 'verbose' allow tails
        # but not inner loops longer than the extent.
        if (policy == "factors" and extent % prod) or prod > extent:
            continue
        out.append(SplitEntity([-1] + list(combo)))
    return out


# --------------------------------------------------------------------------------- configs
class _ConfigBase:
    """What templates see: the define_* calls and cfg[name]."""

    is_fallback = False

    def __init__(self):
        self._collect: OrderedDict[str, Knob] | None = None
        self.flop = 0.0  # what the template declared with add_flop (0: not declared)
        self.errors: list[str] = []  # raise_error's messages

    def add_flop(self, flop: float) -> None:
        """TVM's cfg.add_flop: the template declares (part of) its FLOP count, which the task
        then uses instead of counting the compute definition's operations (calls add up)."""
        if isinstance(flop, bool) or not isinstance(flop, (int, float)) or \
                not math.isfinite(flop) or flop < 0:
            raise ValueError(f"add_flop: expected a finite number >= 0, got {flop!r}")
        self.flop += float(flop)

    def raise_error(self, msg: str) -> None:
        """TVM's cfg.raise_error: the template says this config is invalid. A config being
        measured raises ScheduleError (its trial is an illegal schedule, as TVM's
        InstantiationError); the space being collected and the fallback config only record
        it (TVM checks errors before building a measured config only)."""
        self.errors.append(str(msg))

    def valid(self) -> bool:
        """TVM's cfg.valid(): no raise_error so far."""
        return not self.errors

    # The define_* calls return the knob's entity for convenience (TVM returns None).
    def define_split(self, name: str, axis: IterVar | int, num_outputs: int = 2,
                     policy: str = "factors", candidate=None, max_factor: int | None = None,
                     default: Sequence[int] | None = None, filter=None):
        ext = _extent(axis, f"define_split({name!r})")
        ents = split_candidates(ext, num_outputs, policy, candidate, max_factor)
        if filter is not None:
            ents = [e for e in ents if filter(e)]
        d = SplitEntity([-1] + list(default[1:])) if default is not None else None
        return self._define(name, "split", ents, d)

    def define_reorder(self, name: str, axes: Sequence[IterVar], policy: str = "all",
                       candidate=None, default: Sequence[int] | None = None):
        n = len(axes)
        if policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "identity":
            perms = [tuple(range(n))]
        elif policy == "candidate":
            if not candidate:
                raise ValueError("define_reorder(policy='candidate') needs candidate=[[...]]")
            perms = [_reorder_perm(p, axes) for p in candidate]
        else:
            raise ValueError(f"define_reorder: unknown policy {policy!r} (all, identity, "
                             "candidate; TVM's interval_all and interleave are not supported: "
                             "list the orders with policy='candidate')")
        d = ReorderEntity(default) if default is not None else None
        return self._define(name, "reorder", [ReorderEntity(p) for p in perms], d)

    def define_annotate(self, name: str, axes: Sequence[IterVar], policy: str = "try_unroll",
                        candidate=None, default: Sequence[str] | None = None):
        n = len(axes)
        options = {"try_unroll": ("none", "unroll"), "try_vec": ("none", "vec"),
                   "try_unroll_vec": ("none", "unroll", "vec"),
                   "try_parallel": ("none", "parallel")}
        if policy == "candidate":
            if not candidate:
                raise ValueError("define_annotate(policy='candidate') needs candidate=[[...]]")
            ents = [AnnotateEntity(c) for c in candidate]
        elif policy in options:
            ents = []
            for combo in itertools.product(options[policy], repeat=n):
                # a vectorized loop must be innermost: only the last loop may be "vec"
                if "vec" in combo[:-1]:
                    continue
                ents.append(AnnotateEntity(combo))
        elif policy in ("bind_gpu", "locate_cache"):
            raise ValueError(f"define_annotate: TVM's policy {policy!r} is for GPU schedules; "
                             f"this CPU target has {sorted(options)} and 'candidate'")
        else:
            raise ValueError(f"define_annotate: unknown policy {policy!r} ({sorted(options)} "
                             "or 'candidate')")
        d = AnnotateEntity(default) if default is not None else None
        return self._define(name, "annotate", ents, d)

    def define_knob(self, name: str, candidates: Sequence, default=None):
        if not isinstance(candidates, (list, tuple)) or not candidates:
            raise ValueError(f"define_knob({name!r}): candidates must be a non-empty list")
        ents = [OtherOptionEntity(c) for c in candidates]
        if len(set(ents)) != len(ents):
            # a repeated candidate makes configs that differ only in which copy they took:
            # trials spent twice on one schedule, and records mapped back to the other copy
            dups = sorted({repr(e.val) for e in ents if ents.count(e) > 1})
            raise ValueError(f"define_knob({name!r}): candidates must be distinct, "
                             f"{', '.join(dups)} given more than once")
        d = OtherOptionEntity(default) if default is not None else None
        return self._define(name, "knob", ents, d)

    def _define(self, name, kind, entities, default):
        # the space records the knob; a config entity (replaying a record) returns its value
        raise NotImplementedError(f"{type(self).__name__} must implement _define()")


def _reorder_perm(order, axes: Sequence) -> tuple:
    """A reorder candidate as positions in `axes`: TVM lists the axes themselves
    (`candidate=[[ko, ki, mi]]`), tensorlang also takes their indices (`[[1, 0, 2]]`)."""
    perm = tuple(_axis_position(x, axes) for x in order)
    if sorted(perm) != list(range(len(axes))):
        raise ValueError(f"define_reorder: candidate {list(perm)} is not a permutation of "
                         f"range({len(axes)}): name each axis once")
    return perm


def _axis_position(x, axes: Sequence) -> int:
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    # by identity: `==` on a loop variable builds an expression, it does not compare
    for i, a in enumerate(axes):
        if x is a:
            return i
    raise ValueError(f"define_reorder: candidate axis {x!r} is not one of the axes being "
                     f"reordered ({', '.join(repr(a) for a in axes)})")


class ConfigSpace(_ConfigBase):
    """The knobs of a template (collected by running it once)."""

    def __init__(self):
        super().__init__()
        self.knobs: OrderedDict[str, Knob] = OrderedDict()
        self.defaults: dict[str, Any] = {}

    def _define(self, name, kind, entities, default):
        if name in self.knobs:
            raise ValueError(f"knob {name!r} defined twice in one template")
        self.knobs[name] = Knob(name, kind, entities)
        if default is not None:
            self.knobs[name].index_of(default)  # a default must be a candidate
            self.defaults[name] = default
        return self[name]

    def __getitem__(self, name: str):
        return self.knobs[name].entities[0]

    def __len__(self) -> int:
        return math.prod(len(k) for k in self.knobs.values())

    @property
    def dims(self) -> list[int]:
        return [len(k) for k in self.knobs.values()]

    def get(self, index: int) -> ConfigEntity:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            # a float or a string used to fail inside the index arithmetic
            raise TypeError(f"config index must be an int, got {type(index).__name__} "
                            f"{index!r}")
        index = int(index)
        if not 0 <= index < len(self):
            raise IndexError(f"config index {index} out of range [0, {len(self)})")
        ents, rest = OrderedDict(), index
        for name, knob in self.knobs.items():
            rest, i = divmod(rest, len(knob))
            ents[name] = knob.entities[i]
        return ConfigEntity(self, index, ents)

    def index_of(self, entity: dict) -> int:
        """Index of a point given as {knob: entity or JSON value}; ValueError when a knob or
        value is not in this space (the template changed)."""
        if set(entity) != set(self.knobs):
            raise ValueError(f"config knobs {sorted(entity)} do not match the template's "
                             f"{sorted(self.knobs)}")
        index, mult = 0, 1
        for name, knob in self.knobs.items():
            e = entity[name]
            if not isinstance(e, (SplitEntity, ReorderEntity, AnnotateEntity,
                                  OtherOptionEntity)):
                try:
                    e = _entity_from_json(knob.kind, e)
                except (TypeError, ValueError) as err:  # a malformed value (a record's)
                    raise ValueError(f"knob {name!r}: {e!r} is not a {knob.kind} value "
                                     f"({err})") from None
            index += knob.index_of(e) * mult
            mult *= len(knob)
        return index

    def from_json(self, d: dict) -> ConfigEntity:
        return self.get(self.index_of(d["entity"]))

    def fallback_index(self) -> int:
        ents = {n: self.defaults.get(n, k.entities[0]) for n, k in self.knobs.items()}
        return self.index_of(ents)

    def point(self, index: int) -> list[int]:
        """Per-knob positions of an index (mixed radix)."""
        out, rest = [], index
        for knob in self.knobs.values():
            rest, i = divmod(rest, len(knob))
            out.append(i)
        return out

    def index_from_point(self, point: Sequence[int]) -> int:
        index, mult = 0, 1
        for i, knob in zip(point, self.knobs.values()):
            index += i * mult
            mult *= len(knob)
        return index

    def __repr__(self) -> str:
        lines = [f"ConfigSpace (len={len(self)}):"]
        for name, k in self.knobs.items():
            lines.append(f"  {name}: {k.kind}, {len(k)} candidates, e.g. {k.entities[:4]}")
        return "\n".join(lines)


class ConfigEntity(_ConfigBase):
    """One point of a space: define_* calls do nothing, cfg[name] is the chosen entity."""

    def __init__(self, space: ConfigSpace | None, index: int, entities: dict):
        super().__init__()
        self.space = space
        self.index = index
        self.entities = entities

    def _define(self, name, kind, entities, default):
        if name not in self.entities:
            raise ValueError(f"config has no value for knob {name!r} (template changed?)")
        return self.entities[name]

    def __getitem__(self, name: str):
        return self.entities[name]

    def raise_error(self, msg: str) -> None:
        super().raise_error(msg)
        if not self.is_fallback:  # a measured or applied config: its trial fails here
            raise ScheduleError(f"invalid config: {msg}")

    def to_json(self) -> dict:
        return {"index": self.index,
                "entity": {n: e.to_json() for n, e in self.entities.items()}}

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={e!r}" for n, e in self.entities.items())
        return f"Config#{self.index}({inner})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ConfigEntity) and other.to_json() == self.to_json()

    def __hash__(self) -> int:
        return hash(self.index)


class FallbackConfig(ConfigEntity):
    """The template's default point: each knob takes its `default=` (else its first candidate).
    Used when no tuning record applies."""

    is_fallback = True

    def __init__(self):
        super().__init__(None, -1, OrderedDict())
        self._extents: dict[str, tuple[int, int]] = {}  # define_split's, by knob

    def _define(self, name, kind, entities, default):
        if name not in self.entities:  # a value the template set (cfg[name] = ...) stays
            self.entities[name] = default if default is not None else entities[0]
        return self.entities[name]

    def define_split(self, name: str, axis: IterVar | int, num_outputs: int = 2, **kwargs):
        self._extents[name] = (_extent(axis, f"define_split({name!r})"), num_outputs)
        return super().define_split(name, axis, num_outputs, **kwargs)

    def __setitem__(self, name: str, entity) -> None:
        """TVM's fallback idiom, ``cfg["tile_x"] = SplitEntity([-1, 8])``: the value of a knob
        when no record applies (define it first or after: either way this value is kept)."""
        if not isinstance(entity, (SplitEntity, ReorderEntity, AnnotateEntity,
                                   OtherOptionEntity)):
            raise TypeError(f"cfg[{name!r}] = ...: expected a SplitEntity, ReorderEntity, "
                            f"AnnotateEntity or OtherOptionEntity, got {type(entity).__name__}")
        self.entities[name] = entity

    def fallback_split(self, name: str, constraints: Sequence[int]) -> None:
        """TVM's cfg.fallback_split(name, [-1, 8]): from the innermost factor outwards, the
        largest divisor of what is left that is at most its constraint (-1: none)."""
        if name not in self._extents:
            raise ValueError(f"fallback_split({name!r}): define_split({name!r}, ...) first")
        left, n = self._extents[name]
        if len(constraints) != n:
            raise ValueError(f"fallback_split({name!r}): {len(constraints)} constraints for a "
                             f"split into {n}")
        size = [0] * n
        for i in reversed(range(n)):
            cap = constraints[i] if constraints[i] != -1 else left
            size[i] = max(d for d in _divisors(left) if d <= max(cap, 1))
            left //= size[i]
        self.entities[name] = SplitEntity([-1] + size[1:])
