"""Features of a candidate kernel: a pure function of its lowered loop IR.

The IR is taken after the first simplify pass and before vectorize/unroll expansion, so that
loops still carry their annotations (vectorized / unrolled / parallel) and each store appears
once; each access's indices are flattened row-major here (unsimplified).

Per store (the `TOP_STORES` stores with the most work, heaviest first):
  - log2 of its trip count, float ops per iteration, total float ops;
  - for each of the innermost `LEVELS` loops around it: extent, kind (one-hot), whether a tail
    guard sits inside it;
  - for each of the first `BUFS` buffers it touches (the store target, then the loads): at each
    of those loop levels the stride of the loop variable in the flat index (in elements), the
    bytes and 64-byte cache lines touched by one iteration of that loop, and the reuse (product of
    extents of the loops inside it that do not move the index);
  - arithmetic intensity at each level (float ops / bytes touched).
Kernel-wide: number of stores, parallel extent, bytes of local (stack) buffers.
Everything is scaled by log2(x + 1). The vector has a fixed length (zero-padded).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.expr import as_int
from ..ir.functor import collect_vars, count_arith
from ..lower.passes.storage_flatten import flat_index
from .timelimit import TemplateTimeout
from .workers import kill_pool

LEVELS = 6
BUFS = 4
TOP_STORES = 3
KINDS = ("serial", "parallel", "vectorized", "unrolled")
_PER_BUF = 4 * LEVELS  # stride, bytes, lines, reuse per level
_PER_STORE = 3 + LEVELS * (1 + len(KINDS) + 1) + BUFS * _PER_BUF + LEVELS
_GLOBAL = 3
N_FEATURES = TOP_STORES * _PER_STORE + _GLOBAL


def lower_for_features(schedule, args):
    """The loop IR the features read: tl.lower's FEATURE_STAGE (the loop nest and the first
    simplify; the stage says why the other passes are left out), without the legality check
    (the search checks the configs it measures)."""
    from ..lower import FEATURE_STAGE, lower

    return lower(schedule, args, name="f", check=False, stage=FEATURE_STAGE)


def _coefs(e) -> dict:
    """The coefficient of each variable in index e: {var: coefficient, or None where e is not
    affine in it}; a variable that is not a key has coefficient 0. One walk for all the loop
    variables of a store (a store reads its accesses' coefficients at every loop level)."""
    if isinstance(e, E.Var):
        return {e: 1.0}
    if isinstance(e, E.Const):
        return {}
    if isinstance(e, (E.Add, E.Sub)):
        return _combine(_coefs(e.a), _coefs(e.b), isinstance(e, E.Sub))
    if isinstance(e, E.Mul):
        ca, cb = as_int(e.a), as_int(e.b)
        if cb is not None:
            return _scale(_coefs(e.a), cb)
        if ca is not None:
            return _scale(_coefs(e.b), ca)
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        d = as_int(e.b)
        div = isinstance(e, E.FloorDiv)
        # i // d moves by a/d on average; i % d moves by a (until it wraps)
        return {v: (a / d if div else a) if a is not None and d else None
                for v, a in _coefs(e.a).items() if a != 0.0}
    if isinstance(e, E.Ramp):
        return _coefs(e.base)
    if isinstance(e, E.Broadcast):
        return _coefs(e.value)
    if isinstance(e, E.Cast):
        return _coefs(e.value)
    # anything else (min/max/select...): moves with every variable it mentions
    return dict.fromkeys(collect_vars(e), 1.0)


def _combine(a: dict, b: dict, sub: bool) -> dict:
    """The coefficients of a + b (of a - b with sub); None (not affine) absorbs."""
    out = dict(a)
    for v, cb in b.items():
        ca = out.get(v, 0.0)
        out[v] = None if ca is None or cb is None else ca - cb if sub else ca + cb
    return out


def _scale(a: dict, c: int) -> dict:
    return {v: None if x is None else x * c for v, x in a.items()}


def _flat_coefs(buf: S.Buffer, indices: tuple) -> dict:
    """_coefs of the row-major flat index of an access (storage_flatten's flat_index), without
    building it: ((i0 * s1 + i1) * s2 + i2 ...) term by term, the same arithmetic."""
    strides = [as_int(d) for d in buf.shape[1:]]
    if len(indices) <= 1 or None in strides:
        return _coefs(flat_index(buf, indices))
    out = _coefs(indices[0])
    for s, i in zip(strides, indices[1:]):
        out = _combine(_scale(out, s), _coefs(i), False)
    return out


def _loads(e, found: list) -> list:
    """The loads of expression e, outer ones first (the order of the features' buffers)."""
    if isinstance(e, E.Load):
        found.append(e)
    if isinstance(e, E.Node):
        for f in e.fields():
            x = getattr(e, f)
            if isinstance(x, E.Expr):
                _loads(x, found)
            elif isinstance(x, tuple):
                for y in x:
                    if isinstance(y, E.Expr):
                        _loads(y, found)
    return found


class _Collector:
    def __init__(self):
        self.stores = []  # (loops, guarded levels, store)
        self.parallel_extent = 1
        self.local_bytes = 0

    def walk(self, st, loops: tuple, guards: tuple):
        if st is None:
            return
        if isinstance(st, S.For):
            if st.kind == "parallel":
                self.parallel_extent *= as_int(st.extent) or 1
            self.walk(st.body, loops + (st,), guards)
        elif isinstance(st, S.SeqStmt):
            for x in st.stmts:
                self.walk(x, loops, guards)
        elif isinstance(st, S.IfThenElse):
            g = guards + (len(loops),)
            self.walk(st.then_case, loops, g)
            self.walk(st.else_case, loops, g)
        elif isinstance(st, S.Allocate):
            if st.buffer.scope in ("local", "stack"):
                self.local_bytes += (st.buffer.const_elements() or 0) * \
                    st.buffer.nbytes_per_element
            self.walk(st.body, loops, guards)
        elif isinstance(st, S.LetStmt):
            self.walk(st.body, loops, guards)
        elif isinstance(st, S.Store):
            self.stores.append((loops, guards, st))


def _store_features(loops, guards, st) -> tuple[float, list]:
    # a list, not an array: a few hundred element writes per store, each a Python call on an
    # array (extract_features copies the lists into one array)
    f = [0.0] * _PER_STORE
    extents = [float(as_int(lp.extent) or 1) for lp in loops]
    trips = math.prod(extents) if extents else 1.0
    loads = _loads(st.value, [])
    flops = count_arith(st.value)
    lanes = max((getattr(x, "lanes", 1) for x in st.indices if isinstance(x, E.Ramp)),
                default=1)
    flops *= lanes
    f[0], f[1], f[2] = trips, flops, trips * flops
    pos = 3
    inner = list(range(len(loops)))[::-1][:LEVELS]  # innermost first
    for lvl in range(LEVELS):
        if lvl < len(inner):
            lp = loops[inner[lvl]]
            f[pos] = extents[inner[lvl]]
            f[pos + 1 + KINDS.index(lp.kind)] = 1.0
            f[pos + 1 + len(KINDS)] = float(any(g > inner[lvl] for g in guards))
        pos += 2 + len(KINDS)
    accesses = [(st.buffer, st.indices)] + [(ld.buffer, ld.indices) for ld in loads]
    touched_total = [0.0] * LEVELS
    for b in range(BUFS):
        if b < len(accesses):
            buf, idx = accesses[b]
            esize = buf.nbytes_per_element
            # the coefficient of each loop read in the index, once (the levels below reuse
            # them: inner loops are read again at every outer level)
            coefs = _flat_coefs(buf, idx)
            coef = {j: coefs.get(loops[j].loop_var, 0.0) for j in inner}
            for lvl in range(len(inner)):
                # the loops from this level inward: which move the index, and by how much
                touched, reuse = 1.0, 1.0
                span_lines = 1.0
                for j in inner[:lvl + 1]:
                    c = coef[j]
                    if c is None:
                        c = 1.0
                    if c == 0.0:
                        reuse *= extents[j]
                    else:
                        touched *= extents[j]
                        span_lines *= max(1.0, min(extents[j], extents[j] * abs(c) * esize / 64))
                c_here = coef[inner[lvl]]
                base = pos + lvl * 4
                f[base] = abs(c_here) if c_here is not None else 1e6
                f[base + 1] = touched * esize
                f[base + 2] = span_lines
                f[base + 3] = reuse
                touched_total[lvl] += touched * esize
        pos += _PER_BUF
    for lvl in range(len(inner)):
        sub_trips = math.prod(extents[j] for j in inner[:lvl + 1])
        f[pos + lvl] = flops * sub_trips / max(touched_total[lvl], 1.0)
    return trips * max(flops, 1), f


def extract_features(func: S.PrimFunc) -> np.ndarray:
    """The feature vector (length N_FEATURES) of a lowered kernel (see the module doc)."""
    c = _Collector()
    c.walk(func.body, (), ())
    per_store = sorted((_store_features(*x) for x in c.stores), key=lambda t: -t[0])
    out = np.zeros(N_FEATURES)
    for i, (_, f) in enumerate(per_store[:TOP_STORES]):
        out[i * _PER_STORE:(i + 1) * _PER_STORE] = f
    out[-3:] = (len(c.stores), c.parallel_extent, c.local_bytes)
    return np.log2(np.abs(out) + 1.0)


def config_features(task, config) -> np.ndarray | None:
    """Features of one config of a task; None when the template refuses it. The schedule is
    built without the per-step legality checks (a third of the cost): a config that breaks a
    dependence gets features like any other, and the search checks the configs it picks before
    they are measured (XGBTuner.next_batch)."""
    from .. import ScheduleError

    try:
        s, args = task.instantiate(config, check=False)
        return extract_features(lower_for_features(s, args))
    except ScheduleError:
        return None
    except TemplateTimeout:
        raise  # not a refusal: the caller records it (trying it checked would wait again)
    except Exception:
        # an unchecked schedule that breaks a dependence may also fail to lower (e.g. a stage
        # computed at a loop that none of its readers run in): the checked instantiation
        # tells such a config from a real error
        if not task.is_legal(config):
            return None
        raise


# ------------------------------------------------------------------------- parallel featurizing
# A candidate costs ~2 ms to featurize, almost all of it in Python (template without the legality
# checks ~0.3 ms, lowering to the feature IR ~1.5 ms, extraction ~0.2 ms for a 1024^3 matmul):
# the GIL rules out threads, so the search's new candidates are featurized in worker processes,
# a chunk each.

_WORKER_TASKS: dict = {}


def _features_job(job: dict) -> list:
    """Runs in a feature worker: the features of configs `indices` of one task (None: the
    template refuses the config; a TemplateTimeout: instantiating it took too long)."""
    from .task import create_task, instantiate_time_limit, load_template

    key = (job["name"], tuple(job["args"]), job["target"])
    task = _WORKER_TASKS.get(key)
    if task is None:
        load_template(job["template"])
        task = _WORKER_TASKS[key] = create_task(job["name"], job["args"], job["target"])
    out = []
    with instantiate_time_limit(job["timeout"]):
        for i in job["indices"]:
            try:
                out.append(config_features(task, task.config_space.get(i)))
            except TemplateTimeout as e:
                out.append(e)
    return out


class FeaturePool:
    """`workers` spawned processes featurizing the configs of one task (the task is re-created
    in each worker from its template name and arguments: config indices mean the same there)."""

    def __init__(self, task, workers: int, time_limit: float | None = None):
        if workers < 1:
            raise ValueError("FeaturePool: workers must be >= 1")
        self.task = task
        self.workers = int(workers)
        self.time_limit = time_limit  # seconds to instantiate one config
        self._pool = None
        self._warm_up: list = []

    def _job(self, indices: list[int]) -> dict:
        t = self.task
        return {"template": t.template.worker_spec(), "name": t.name, "args": list(t.args),
                "target": t.target, "indices": indices, "timeout": self.time_limit}

    def _get(self):
        import concurrent.futures as cf

        from .measure import _CTX

        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=_CTX)
        return self._pool

    def start(self) -> None:
        """Start the workers without waiting for them: each spawns, imports tensorlang and
        re-creates the task (~0.4 s), which the tuner overlaps with its first measurements."""
        if not self._warm_up:
            pool = self._get()
            self._warm_up = [pool.submit(_features_job, self._job([]))
                             for _ in range(self.workers)]

    def ready(self) -> bool:
        """Whether the workers started by :meth:`start` are up (a dead one counts as up: map
        then falls back to featurizing serially)."""
        return bool(self._warm_up) and all(f.done() for f in self._warm_up)

    def wait_ready(self, timeout: float) -> None:
        """Wait, at most `timeout` seconds, for the workers started by :meth:`start`."""
        import concurrent.futures as cf

        if self._warm_up:
            cf.wait(self._warm_up, timeout)

    def map(self, indices: list[int]) -> list:
        """Features of configs `indices` (None for an illegal one, a TemplateTimeout for one
        that took too long), in order. A worker that dies, or hangs where its time limit
        cannot stop it, takes the pool down; the configs are then featurized here, serially."""
        if not indices:
            return []
        # a few chunks per worker when there are many configs (balanced when some lower slower
        # than others), one each for the search's rounds of a few dozen (a chunk's round trip
        # costs about as much as featurizing a config)
        n_chunks = min(len(indices), max(self.workers, min(3 * self.workers,
                                                           len(indices) // 16)))
        chunks = [list(map(int, c)) for c in np.array_split(np.asarray(indices), n_chunks)]
        try:
            pool = self._get()
            futs = [pool.submit(_features_job, self._job(c)) for c in chunks]
            # each config stops itself at the time limit; this deadline is the backstop
            deadline = None if self.time_limit is None else \
                time.monotonic() + self.time_limit * max(map(len, chunks)) + _BACKSTOP_MARGIN
            return [f for fut in futs for f in fut.result(
                None if deadline is None else max(0.0, deadline - time.monotonic()))]
        except Exception:  # noqa: BLE001 - broken or hung pool: fall back to serial
            self.close(kill=True)
            t = self.task
            return [_features_or_timeout(t, i) for i in indices]

    def close(self, kill: bool = False) -> None:
        if kill:
            kill_pool(self._pool)
        elif self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None
        self._warm_up = []


class SharedFeaturePool(FeaturePool):
    """One task's view of feature workers that serve many tasks (a TaskScheduler's, or
    tune_tasks's). A worker re-creates the task of each job (and keeps it), so one set of
    processes serves every task: a task's tuning starts none. Closing the view leaves them
    running; killing it (a broken pool) kills them, and the next use starts new ones."""

    def __init__(self, task, owner: FeaturePool):
        super().__init__(task, owner.workers, owner.time_limit)
        self._owner = owner

    def _get(self):
        return self._owner._get()

    def start(self) -> None:
        self._owner.start()

    def ready(self) -> bool:
        self._owner.start()  # again after a kill
        return self._owner.ready()

    def wait_ready(self, timeout: float) -> None:
        self._owner.start()
        self._owner.wait_ready(timeout)

    def close(self, kill: bool = False) -> None:
        if kill:
            self._owner.close(kill=True)


_BACKSTOP_MARGIN = 10.0  # seconds beyond the configs' own time limits


def _features_or_timeout(task, index: int):
    try:
        return config_features(task, task.config_space.get(index))
    except TemplateTimeout as e:
        return e
