"""Evolutionary search on the cost model (Ansor's search, with legality proven first).

EvolutionTuner is the XGBTuner (same model, features, batches, epsilon-greedy exploration,
visited set, records, progress bar, resume) with two differences:

- every candidate is instantiated with the legality checks on (the primitives' islpy checks and
  the whole-schedule check) *before* its features are computed: an illegal fill is refused
  there, counted (`refused`), never featurized, ranked, built or measured; a fill whose
  schedule (its trace) another config already gave is dropped the same way (`duplicates`);
- the search is a genetic algorithm over the decisions: a population seeded with the best
  measured configs and random legal fills; children by crossover (each stage's decisions taken
  from one parent: the knobs ``s<k>.*`` travel together) and mutation (a tile size moved
  between two levels of one loop, the unroll depth, the attach level, the parallel
  granularity, any other decision redrawn); the model's predicted throughput is the fitness,
  the fittest survive (elitism), within a time budget per batch.

It works on template tasks too (their knobs are grouped by name prefix the same way).
"""

from __future__ import annotations

import hashlib
import logging
import time

import numpy as np

from .sketch_fill import random_point, structural_variants
from .space import SplitEntity
from .timelimit import TemplateTimeout
from .tuner import XGBTuner


class EvolutionTuner(XGBTuner):
    """population: candidates per generation; crossover_prob: share of children bred from two
    parents (the others are mutants of one); mutation_prob: chance that a crossover child is
    also mutated; search_ratio: the search's time per batch as a share of the last batch's
    measuring time (at least 0.3 s). Other arguments: XGBTuner's."""

    def __init__(self, task, batch_size: int = 16, seed: int | None = None,
                 epsilon: float = 0.05, search_ratio: float = 0.25, population: int = 64,
                 crossover_prob: float = 0.4, mutation_prob: float = 0.5, **kwargs):
        if not 0.0 <= crossover_prob <= 1.0 or not 0.0 <= mutation_prob <= 1.0:
            raise ValueError(f"EvolutionTuner: crossover_prob and mutation_prob must be in "
                             f"[0, 1], got {crossover_prob} and {mutation_prob}")
        if population < 2:
            raise ValueError(f"EvolutionTuner: population must be >= 2, got {population}")
        # features come from checked schedules, computed here (a worker process would skip
        # the checks that make them trustworthy)
        kwargs["feature_workers"] = 0
        super().__init__(task, batch_size, seed, epsilon=epsilon, search_ratio=search_ratio,
                         population=population, **kwargs)
        self.crossover_prob = crossover_prob
        self.mutation_prob = mutation_prob
        self.search_stats.update(refused=0, oversized=0, generations=0,
                                 feature_errors=0, duplicates=0)
        # trace digest -> the first config whose schedule it is: decisions a sketch ignores
        # (the level of an accumulator in a tile rule without one...) give the same schedule
        # under another index, which would be measured again as a new candidate
        self._schedules: dict[bytes, int] = {}
        self._variants: list[int] | None = None  # structural variants not yet measured
        self._groups = _knob_groups(list(self.space.knobs))
        self._split_moves: dict[tuple[str, int], list[int]] = {}
        self.stop_reason: str | None = None  # why the last tune() ran fewer trials

    @property
    def refused(self) -> int:
        """Candidates the legality checks refused (never featurized, built or measured)."""
        return self.search_stats["refused"]

    # ---------------------------------------------------------------- legal-first features
    def features(self, idx: int) -> np.ndarray | None:
        if idx not in self._feat:
            f = self._checked_features(idx)
            self._store_features(idx, f)
            if f is not None and not isinstance(f, TemplateTimeout):
                self._legal[idx] = True
        return self._feat[idx]

    def _checked_features(self, idx: int):
        from .. import ScheduleError
        from ..analysis import check_schedule
        from .features import extract_features, lower_for_features
        from .sketch import TileTooLarge

        try:
            s, args = self.task.instantiate(self.space.get(idx))
            check_schedule(s)
        except TileTooLarge:
            self.search_stats["oversized"] += 1
            return None
        except ScheduleError:
            self.search_stats["refused"] += 1
            return None
        except TemplateTimeout as e:
            return e
        if self._is_duplicate(idx, s):
            return None
        try:
            return extract_features(lower_for_features(s, args))
        except Exception:  # noqa: BLE001 - a legal schedule the lowering rejects: not ranked
            self.search_stats["feature_errors"] += 1
            return None

    def _is_duplicate(self, idx: int, s) -> bool:
        """Whether another config already gave this schedule (counted; never ranked or
        measured again: the first one stands for it)."""
        digest = hashlib.blake2b(s.trace.dumps().encode(), digest_size=16).digest()
        if self._schedules.setdefault(digest, idx) == idx:
            return False
        self.search_stats["duplicates"] += 1
        return True

    def _random_unvisited(self, n: int, exclude: set | None = None) -> list[int]:
        exclude = exclude or set()
        out: list[int] = []
        for _ in range(50 * max(n, 1)):
            if len(out) == n:
                break
            i = random_point(self.space, self.rng)
            if i not in self.visited and i not in exclude and i not in out:
                out.append(i)
        return out

    # ---------------------------------------------------------------- batches
    def next_batch(self, n: int) -> list[int]:
        """The first batches measure the fallback and the structural variants of a
        template-free task (sketch_fill.structural_variants), so that the model has seen
        every tile rule, vector axis and packing measured before it ranks; then the search."""
        if self._variants is None:
            self._variants = structural_variants(self.space) \
                if getattr(self.task, "template_free", False) else []
        batch: list[int] = []
        if self._variants and not self.trials and self.include_fallback:
            fb = self.space.fallback_index()
            if fb not in self.visited and self._is_legal(fb):
                batch.append(fb)
        while self._variants and len(batch) < n:
            i = self._variants.pop(0)
            if i not in self.visited and i not in batch and self.features(i) is not None \
                    and self._is_legal(i):
                batch.append(i)
        if len(batch) < n:
            batch += [i for i in super().next_batch(n - len(batch)) if i not in batch]
        return batch

    # ---------------------------------------------------------------- small spaces
    def tune(self, n_trial: int, measure_option, callbacks=(), early_stopping=None,
             si_prefix: str = "G", **remeasure) -> None:
        """XGBTuner.tune (`remeasure`: its remeasure_top / remeasure_rounds, which tune_tasks
        passes); when the space has no distinct schedule left to measure before
        `n_trial` trials (every config measured, refused, or a duplicate of a measured one's
        schedule), it stops there and says so (`stop_reason`, a logged warning), as
        MetaSchedule stops when its space is spent."""
        self.stop_reason = None
        trials0 = self.trials  # n_trial counts this call's trials (tune measures n_trial more)
        super().tune(n_trial, measure_option, callbacks, early_stopping, si_prefix, **remeasure)
        done = self.trials - trials0
        if done < n_trial and not self.has_next() and not self._settled:
            self.stop_reason = (
                f"{self.task.name} {list(self.task.args)}: the search space is spent after "
                f"{done} of {n_trial} trials: its {len(self.space)} configs give "
                f"{self.distinct_schedules} distinct schedules, all measured (the others "
                f"refused {self.refused}, oversized {self.search_stats['oversized']}, "
                f"duplicates {self.search_stats['duplicates']})")
            logging.getLogger(__name__).warning(self.stop_reason)

    @property
    def distinct_schedules(self) -> int:
        """Distinct schedules (traces) among the configs checked so far."""
        return len(self._schedules)

    # ---------------------------------------------------------------- search
    def _search(self, n: int) -> list[int]:
        if n <= 0:
            return []
        budget = max(0.3, self.search_ratio * self._last_measure)
        if self._rest_fits(budget):
            # a small space: every config checked and ranked (duplicates dropped), so that
            # the tuner sees when no distinct schedule is left
            return self._rank_all()
        deadline = time.perf_counter() + budget
        scores: dict[int, float] = {}
        pop = self._seed_population()
        self._score(pop, scores)
        pop = [i for i in pop if i in scores]
        while pop and time.perf_counter() < deadline:
            children = self._breed(pop, scores)
            self.featurize(children, deadline)
            self._score(children, scores)
            pool = list(dict.fromkeys(pop + [c for c in children if c in scores]))
            pool.sort(key=lambda i: -scores[i])
            pop = pool[:self.population]
            self.search_stats["generations"] += 1
        ranked = sorted((i for i in scores if i not in self.visited), key=lambda i: -scores[i])
        return ranked

    def _seed_population(self) -> list[int]:
        measured = [i for i in self.visited if self._feat.get(i) is not None]
        seeds: list[int] = []
        if measured:
            pred = self.predict([self._feat[i] for i in measured])
            seeds = [measured[j] for j in np.argsort(-pred)[: self.population // 2]]
        seeds += self._random_featurized(self.population - len(seeds), exclude=set(seeds))
        return seeds

    def _score(self, idxs: list[int], scores: dict) -> None:
        new = [i for i in dict.fromkeys(idxs)
               if i not in scores and self._feat.get(i) is not None]
        if not new:
            return
        for i, p in zip(new, self.predict([self._feat[i] for i in new])):
            scores[i] = float(p)
        self.search_stats["scored"] += len(new)

    def _breed(self, pop: list[int], scores: dict) -> list[int]:
        ranks = np.arange(len(pop), 0, -1, dtype=float)  # pop is sorted best first
        prob = ranks / ranks.sum()
        children: list[int] = []
        for _ in range(4 * self.population):
            if len(children) == self.population:
                break
            a = pop[int(self.rng.choice(len(pop), p=prob))]
            if len(pop) > 1 and self.rng.random() < self.crossover_prob:
                b = pop[int(self.rng.choice(len(pop), p=prob))]
                child = self.crossover(a, b)
                if self.rng.random() < self.mutation_prob:
                    child = self.mutate(child)
            else:
                child = self.mutate(a)
            if child not in scores and child not in self.visited and child not in children:
                children.append(child)
        return children

    def crossover(self, a: int, b: int) -> int:
        """Each stage's decisions (a knob group) from parent a or b."""
        pa, pb = self.space.point(a), self.space.point(b)
        child = list(pa)
        for group in self._groups:
            if self.rng.random() < 0.5:
                for d in group:
                    child[d] = pb[d]
        return self.space.index_from_point(child)

    def mutate(self, idx: int) -> int:
        """One decision changed: a tile size moved between two levels of a loop, or another
        knob (unroll depth, attach level, parallel granularity, rule) redrawn."""
        point = self.space.point(idx)
        dims = self.space.dims
        movable = [d for d, n in enumerate(dims) if n > 1]
        if not movable:
            return idx
        d = movable[int(self.rng.integers(len(movable)))]
        knob = list(self.space.knobs.values())[d]
        if knob.kind == "split":
            moves = self._tile_moves(knob, point[d])
            if moves:
                point[d] = moves[int(self.rng.integers(len(moves)))]
                return self.space.index_from_point(point)
        point[d] = (point[d] + 1 + int(self.rng.integers(dims[d] - 1))) % dims[d]
        return self.space.index_from_point(point)

    def _tile_moves(self, knob, pos: int) -> list[int]:
        """Candidates of a split knob that differ from candidate `pos` by a factor moved
        between two levels (the other levels unchanged)."""
        key = (knob.name, pos)
        if key not in self._split_moves:
            cur = _levels(knob.entities[pos])
            out = []
            for j, e in enumerate(knob.entities):
                if j != pos and sum(x != y for x, y in zip(_levels(e), cur)) == 2:
                    out.append(j)
            self._split_moves[key] = out
        return self._split_moves[key]


def _levels(e: SplitEntity) -> list[int]:
    """All the factors of a split, the outermost (written -1) included, as the ratio of the
    extent left: a move keeps their product."""
    import math

    inner = e.size[1:]
    return [-math.prod(inner)] + inner  # the outer factor is extent / prod(inner)


def _knob_groups(names: list[str]) -> list[list[int]]:
    """Knob positions grouped by stage (the part of the name before the first dot)."""
    groups: dict[str, list[int]] = {}
    for d, name in enumerate(names):
        groups.setdefault(name.split(".")[0], []).append(d)
    return list(groups.values())
