"""The decisions of a sketch (what the sketch rules leave open), declared as knobs of the task's
ConfigSpace, and the random fill of those decisions.

A sketch (sketch.py) fixes the structure of a schedule: which stages are inlined, which get
multi-level tiling with a cache_write accumulator, which reductions are factored. Its decisions
are numbers: tile sizes (factorizations of each loop's extent, one factor per tiling level;
where no vector width divides an extent, also a ragged vector in the level that is vectorized),
the depth up to which inner loops are unrolled, the level at which an accumulator is computed
inside its consumer, how many outer loops are fused into the parallel loop, the lanes of a
factored reduction. Each is a knob named ``s<stage position>.<decision>``, positions counting
the computes of the DAG in topological order (names never enter: a renamed tensor keeps its
records). A filled sketch is a point of the space; random fill is a uniformly random point,
which goes through the schedule primitives like any other, so the legality checks refuse the
illegal ones before anything is built (`random_fill` counts them).
"""

from __future__ import annotations

import functools
import itertools
import math

from ..ir.expr import as_int

# inner loop trip counts below which the loops are unrolled (pragma auto_unroll_max_step)
UNROLL_DEPTHS = (0, 16, 64, 256)
# widest vector of a tile's innermost loop (4 zmm of float32: a loop of more lanes spills)
MAX_VECTOR = 64
# widest register-tile factor of the other axes (rows of accumulators)
MAX_ROWS = 16
# elements of the accumulator tile of one attach point (the two inner levels)
MAX_TILE = 1024
# elements of a register tile (the innermost level of every spatial axis): 32 zmm of float32.
# Beyond it every FMA spills, and unrolled such a tile takes LLVM tens of seconds to compile
MAX_REGISTER_TILE = 512
# narrowest vector worth a tile's innermost loop; an extent whose divisors up to MAX_VECTOR are
# all narrower (197 columns, 2 x a prime) is also offered the RAGGED_VECTORS widths, which do
# not divide it: whole vectors and a shorter last tile that the split guards and the lowering
# peels off (ViT's 197-column softmax: 96 us with exact tiles only, the library's ragged
# default 53 us). Other extents keep exact tiles only, so their spaces do not grow
MIN_VECTOR = 8
RAGGED_VECTORS = (16, 32, 8)


def register_tile(cfg, prefix: str, n_axes: int) -> int:
    return math.prod(cfg[knob(prefix, f"S{a}")].size[-1] for a in range(n_axes))


def extent(iv) -> int:
    n = as_int(iv.dom.extent)
    if n is None:
        raise ValueError(f"template-free tuning needs constant extents; loop {iv.name} has a "
                         "symbolic one")
    return n


def divisors(n: int) -> list[int]:
    from .space import _divisors

    return _divisors(n)


def largest_divisor(n: int, most: int) -> int:
    return max(d for d in divisors(n) if d <= most)


def ragged_vectors(n: int) -> list[int]:
    """Vector widths that do not divide n, offered where n's divisors give no vector of
    MIN_VECTOR lanes or more; each leaves at least one whole vector before the tail."""
    if largest_divisor(n, MAX_VECTOR) >= MIN_VECTOR:
        return []
    return [v for v in RAGGED_VECTORS if n >= 2 * v]


def knob(prefix: str, what: str) -> str:
    return f"{prefix}.{what}"


# --------------------------------------------------------------------------------- tiles
def tile_candidates(n: int, levels: int, vector: bool, ragged: bool = False) -> list[list[int]]:
    """The factorizations of a loop of extent n into `levels` loops (outermost first, exact:
    no tail), its innermost factor a vector (an axis that may be vectorized) or a few
    register rows. ragged (a vectorized loop): after them, where n has no vector divisor,
    one tile per ragged_vectors width, its middle levels 1 (the tail is in the innermost
    level only)."""
    return [list(c) for c in _tile_candidates(n, levels, vector, ragged)]


@functools.lru_cache(maxsize=512)
def _tile_candidates(n: int, levels: int, vector: bool, ragged: bool) -> tuple:
    # cached: the knobs are declared again in every instantiation of a candidate
    from .space import split_candidates

    widest = MAX_VECTOR if vector else MAX_ROWS
    exact = tuple(tuple(e.size) for e in split_candidates(n, levels, "factors")
                  if e.size[-1] <= widest and math.prod(e.size[1:][-2:]) <= MAX_TILE)
    if not (ragged and vector):
        return exact
    return exact + tuple((-1, *[1] * (levels - 2), v) for v in ragged_vectors(n))


def declare_tile(cfg, name: str, n: int, levels: int, innermost: bool,
                 cap: int | None = None, vector: bool | None = None,
                 ragged: bool = False) -> None:
    """A split knob of tile_candidates; with `cap`, an evenly spaced subset of at most that
    many of them, the default always among them (keeps the space's size countable when a DAG
    has many loops). innermost: the axis vectorized by default (its default innermost factor
    a vector); vector: whether it may be vectorized (its innermost factor up to a vector's
    width; default: innermost); ragged: its innermost level is the loop vectorized, which may
    take a width that does not divide n (tile_candidates)."""
    default = default_tile(n, levels, innermost)
    cands = tile_candidates(n, levels, innermost if vector is None else vector, ragged)
    if cap is not None and len(cands) > cap:
        step = len(cands) / cap
        kept = [cands[int(k * step)] for k in range(cap)]
        cands = kept if default in kept else [default, *kept[1:]]
    cfg.define_split(name, n, num_outputs=levels, policy="candidate", candidate=cands,
                     default=default)
    widths = ragged_vectors(n) if ragged and (innermost if vector is None else vector) else []
    if widths and (-1, *[1] * (levels - 2), widths[0]) in map(tuple, cands):
        note_ragged_seed(cfg, name, [-1, *[1] * (levels - 2), widths[0]])


def note_ragged_seed(cfg, name: str, value) -> None:
    """Remember, on a space being collected, the ragged choice of one knob (its widest
    first-listed vector: 16 lanes, the library default's): structural_variants measures the
    default config with every such choice made, so that the search starts from a vectorized
    ragged schedule, while the default itself (the reference kernel) keeps exact tiles."""
    from .space import ConfigSpace

    if isinstance(cfg, ConfigSpace):
        cfg.ragged_seed = {**getattr(cfg, "ragged_seed", {}), name: value}


def default_tile(n: int, levels: int, innermost: bool) -> list[int]:
    """A reasonable start: a vector (16 lanes) or 4 rows in the innermost level, the rest
    outside (the tuner's first measured config)."""
    inner = largest_divisor(n, 16 if innermost else 4)
    return [-1] + [1] * (levels - 2) + [inner]


def declare_reduce_tile(cfg, name: str, n: int) -> None:
    cfg.define_split(name, n, num_outputs=2, policy="factors",
                     default=[-1, largest_divisor(n, 4)])


def declare_unroll(cfg, prefix: str) -> None:
    cfg.define_knob(knob(prefix, "unroll"), list(UNROLL_DEPTHS), default=64)


def declare_parallel(cfg, prefix: str, levels: list[int], default: int) -> None:
    """How many outer loops (or tiling levels) are fused into the one parallel loop."""
    cfg.define_knob(knob(prefix, "par"), levels, default=default)


def declare_attach(cfg, prefix: str, choices: list, default) -> None:
    cfg.define_knob(knob(prefix, "at"), choices, default=default)


def lane_candidates(n: int) -> list[int]:
    return [v for v in (16, 32, 64, 8) if n % v == 0 and n >= 2 * v]


def ragged_lanes(n: int) -> list[int]:
    """Lanes of a factored reduction that do not divide n (its last chunk shorter), where no
    lane_candidates width divides it."""
    return [] if lane_candidates(n) else ragged_vectors(n)


def part_candidates(n: int) -> list[int]:
    return [p for p in (2, 4, 8, 16, 32) if n % p == 0 and n // p >= 16]


# --------------------------------------------------------------------------------- structures
# the decisions that choose a sketch's structure rather than its sizes
STRUCTURE = ("inline", "rule", "vec", "pack", "pack_at")


def structural_variants(space) -> list[int]:
    """The fallback config under each combination of one stage's structural decisions (whether
    it is inlined, its tile or reduction rule, vector axis, packed operand and where it is
    packed), the other decisions at their defaults; a new vector axis gets a vector's
    register tile (up to 16 lanes) and the former one 4 rows. Ansor's initial population samples every sketch; here the sketches are
    decisions, and a uniformly random fill of the other decisions (tile sizes) makes most
    fills of a good structure slow, so the model would learn the structure is."""
    base = dict(space.get(space.fallback_index()).entities)
    stages: dict[str, list[str]] = {}
    for name in space.knobs:
        stage, what = name.split(".", 1)
        if what in STRUCTURE:
            stages.setdefault(stage, []).append(name)
    out: list[int] = []
    for stage, names in stages.items():
        for combo in itertools.product(*(space.knobs[n].entities for n in names)):
            ents = {**base, **dict(zip(names, combo))}
            pack, at = knob(stage, "pack"), knob(stage, "pack_at")
            if pack in ents and ents[pack].val == -1 and ents[at] != base[at]:
                continue  # nothing packed: where is moot
            vec = knob(stage, "vec")
            if vec in ents and ents[vec] != base[vec]:
                _retile(space, ents, stage, ents[vec].val, base[vec].val)
            idx = space.index_of(ents)
            if idx not in out:
                out.append(idx)
    return _with_ragged_seeds(space, base, out)


def _with_ragged_seeds(space, base: dict, variants: list[int]) -> list[int]:
    """The variants, each followed by its ragged form (the space's ragged_seed choices made
    where the variant kept the default's structure), the default's own ragged form first:
    a ragged tile is a size, which a random fill rarely combines with a good structure."""
    seed = getattr(space, "ragged_seed", None)
    if not seed:
        return variants
    out: list[int] = []
    for idx in [space.fallback_index(), *variants]:
        ents = dict(space.get(idx).entities)
        for name, val in seed.items():
            if name.split(".", 1)[1] not in STRUCTURE or ents[name] == base[name]:
                ents[name] = val
        for i in ([idx] if idx in variants else []) + [space.index_of(ents)]:
            if i not in out:
                out.append(i)
    return out


def _retile(space, ents: dict, stage: str, new: int, old: int) -> None:
    for axis, widest in ((new, 16), (old, 4)):
        k = space.knobs.get(knob(stage, f"S{axis}"))
        if k is None:
            continue
        inner_only = [e for e in k.entities
                      if all(f == 1 for f in e.size[1:-1]) and e.size[-1] <= widest]
        if inner_only:
            ents[k.name] = max(inner_only, key=lambda e: e.size[-1])


# --------------------------------------------------------------------------------- random fill
def random_point(space, rng) -> int:
    """A uniformly random config index: each knob drawn independently (the space's size may
    exceed what one random integer draws)."""
    return space.index_from_point([int(rng.integers(d)) for d in space.dims])


def random_fill(task, n: int, rng, max_tries: int | None = None) -> tuple[list[int], int]:
    """Up to `n` distinct random legal configs of a template-free task, and how many random
    fills the legality checks refused on the way (never built; fills refused for an oversized
    register tile are skipped, not counted)."""
    from .. import ScheduleError
    from ..analysis import check_schedule
    from .sketch import TileTooLarge

    out: list[int] = []
    refused = 0
    tries = 0
    limit = max_tries if max_tries is not None else 20 * max(n, 1)
    while len(out) < n and tries < limit:
        tries += 1
        idx = random_point(task.config_space, rng)
        if idx in out:
            continue
        try:
            s, _ = task.instantiate(task.config_space.get(idx))
            check_schedule(s)
        except TileTooLarge:
            continue
        except ScheduleError:
            refused += 1
            continue
        out.append(idx)
    return out, refused
