"""The differential schedule fuzzer: random schedules of the computes in schedule_fuzz_cases.py,
each accepted one built with LLVM (O3), run, and compared with numpy.

    draw_schedule(case, seed)   the (case, seed) pair replays exactly: a seeded draw of primitives
                                on random stages and loops; a primitive refused with ScheduleError
                                (or ValueError/TypeError for an argument the draw got wrong) is
                                skipped and the draw goes on
    check_one(case, seed)       schedule, lower, build, run, compare: one outcome dict
    Pool(workers)               runs check_one in worker subprocesses with a time limit each, so
                                a crash (signal) or a hang (timeout) is an outcome, not the end

Outcomes: ok, refused (at a primitive, or at tl.lower), WRONG, CRASH, HANG, ERROR (any other
exception: a bug too). Every non-ok outcome carries the schedule's trace (JSON), which
`replay(case, trace)` applies to freshly declared computes; minimize() shortens a failing trace.
The legality check's time per schedule (every per-step check plus the whole-schedule check at
lowering) is measured by wrapping tensorlang.analysis.check_step / check_schedule."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from tensorlang.errors import ScheduleError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the fuzzers' worker pool
import fuzz_pool

OK, REFUSED, WRONG, CRASH, HANG, ERROR = "ok", "refused", "WRONG", "CRASH", "HANG", "ERROR"
FAILURES = (WRONG, CRASH, HANG, ERROR)

# primitives and their weights in a draw (compute_at / split come up most: they make the
# interesting loop nests)
PRIMITIVES = {"split": 4, "tile": 2, "reorder": 2, "fuse": 2, "parallel": 2, "vectorize": 2,
              "unroll": 1, "compute_at": 4, "compute_inline": 2, "compute_root": 1,
              "cache_read": 1, "cache_write": 1, "rfactor": 2}
FACTORS = (1, 2, 3, 4, 5, 8, 16)
MAX_UNROLL_EXTENT = 16  # an unrolled loop of a known extent above this is not drawn (compile time)
MAX_UNROLLS = 2
PLACEMENTS = ("compute_at", "compute_inline")
STEPS = (2, 14)  # how many primitives a schedule's draw tries (refused ones included)


# ----------------------------------------------------------------------------- drawing schedules


def _const_extent(iv):
    from tensorlang.ir.expr import as_int

    return as_int(iv.dom.extent)


class _Draw:
    """One schedule's draw: applies random primitives to a live schedule."""

    def __init__(self, s, rng: random.Random):
        self.s, self.rng = s, rng
        self.unrolls = 0
        self.refusals: list[str] = []

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))] if seq else None

    def step(self) -> None:
        kinds, weights = zip(*PRIMITIVES.items())
        kind = self.rng.choices(kinds, weights)[0]
        stages = self.s.stages
        if kind in PLACEMENTS and self.rng.random() < 0.9:
            # outputs stay at the root (a refusal by design): mostly place the others
            stages = [st for st in stages if not st.is_output] or stages
        stage = self.pick(stages)
        recorded = len(self.s.trace)
        try:
            getattr(self, "_" + kind)(stage)
        except (ScheduleError, ValueError, TypeError) as e:
            if len(self.s.trace) != recorded and kind != "tile":
                # a refused primitive must leave the schedule as it was (a tile is three
                # primitives: the first ones stay when a later one is refused)
                raise RuntimeError(f"{kind} raised {type(e).__name__} but its step stayed "
                                   f"recorded: {e}") from e
            self.refusals.append(f"{kind}: {refusal_kind(e, names_in(self.s))}")

    def _split(self, st):
        lv = self.pick(st.leaf_iter_vars)
        if lv is None:
            return
        f = self.pick(FACTORS)
        if self.rng.random() < 0.3:
            st.split(lv, nparts=f)
        else:
            st.split(lv, factor=f)

    def _tile(self, st):
        leaves = st.leaf_iter_vars
        if len(leaves) < 2:
            return
        a, b = sorted(self.rng.sample(range(len(leaves)), 2))
        st.tile(leaves[a], leaves[b], self.pick(FACTORS[1:]), self.pick(FACTORS[1:]))

    def _reorder(self, st):
        leaves = list(st.leaf_iter_vars)
        if len(leaves) < 2:
            return
        if self.rng.random() < 0.5:
            self.rng.shuffle(leaves)
            st.reorder(*leaves)
        else:  # two loops swap places
            a, b = self.rng.sample(leaves, 2)
            st.reorder(a, b)

    def _fuse(self, st):
        leaves = st.leaf_iter_vars
        if len(leaves) < 2:
            return
        j = self.rng.randrange(len(leaves) - 1)
        st.fuse(leaves[j], leaves[j + 1])

    def _parallel(self, st):
        lv = self.pick(st.leaf_iter_vars)
        if lv is not None:
            st.parallel(lv)

    def _vectorize(self, st):
        if st.leaf_iter_vars:
            st.vectorize(st.leaf_iter_vars[-1])

    def _unroll(self, st):
        lv = self.pick(st.leaf_iter_vars)
        if lv is None or self.unrolls >= MAX_UNROLLS:
            return
        ext = _const_extent(lv)
        if ext is not None and ext > MAX_UNROLL_EXTENT:
            return
        st.unroll(lv)
        self.unrolls += 1

    def _compute_at(self, st):
        later = self.s.stages[self.s.stage_index(st) + 1:]
        # a consumer as host most of the time: any later stage is mostly refused as misuse
        readers = [h for h in later if self.s.reads_through_inline(h, st)]
        host = self.pick(readers if readers and self.rng.random() < 0.85 else later)
        if host is None or not host.leaf_iter_vars:
            return
        st.compute_at(host, self.pick(host.leaf_iter_vars))

    def _compute_inline(self, st):
        st.compute_inline()

    def _compute_root(self, st):
        st.compute_root()

    def _cache_read(self, st):
        t = self.pick(list(st.op.input_tensors))
        if t is None:
            return
        # st and, at random, other stages that read t
        others = [o for o in self.s.stages if o is not st and t in o.op.input_tensors]
        readers = [st] + [o for o in others if self.rng.random() < 0.5]
        self.s.cache_read(t, "local", [r.op.output(0) for r in readers])

    def _cache_write(self, st):
        self.s.cache_write(st.op.output(0), "local")

    def _rfactor(self, st):
        red = [lv for lv in st.leaf_iter_vars if lv.kind == "reduce"]
        lv = self.pick(red)
        if lv is None:
            return
        self.s.rfactor(st.op.output(0), lv, self.rng.randrange(len(st.op.axis) + 1))


def names_in(s) -> set:
    """The stage, tensor and loop names of a schedule (what refusal_kind takes out)."""
    names = {st.name for st in s.stages} | {p.name for p in s.placeholders}
    for st in s.stages:
        names |= {iv.name for iv in st.all_iter_vars} | {t.name for t in st.op.outputs}
    return names


def refusal_kind(e: BaseException, names: Iterable[str] = ()) -> str:
    """A refusal's message with the given names (of stages and loops), bracketed or quoted text
    and numbers taken out: what kind of refusal it is."""
    msg = str(e).split("\n")[0]
    msg = re.sub(r"^[a-z_]+(\([^)]*\))? on stage \S+: ", "", msg)
    for name in sorted(names, key=len, reverse=True):
        msg = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", "_", msg)
    msg = re.sub(r"\[[^\]]*\]|'[^']*'|\"[^\"]*\"|\([^)]*\)", "_", msg)
    msg = re.sub(r"\b[\w.]*\d[\w.]*\b", "_", msg)
    return f"{type(e).__name__}: {msg[:80]}"


def schedule_rng(case: str, seed: int) -> random.Random:
    return random.Random(f"{case}:{seed}")  # str seeds hash with sha512: the same everywhere


def draw_schedule(case_name: str, seed: int, n_steps: int | None = None):
    """(case, schedule, refusals): the schedule drawn for (case, seed), replayable exactly."""
    from schedule_fuzz_cases import CASES

    import tensorlang as tl

    case = CASES[case_name]()
    s = tl.create_schedule(case.outputs)
    rng = schedule_rng(case_name, seed)
    draw = _Draw(s, rng)
    for _ in range(n_steps if n_steps is not None else rng.randint(*STEPS)):
        draw.step()
    return case, s, draw.refusals


def replay(case_name: str, trace):
    """The case's computes, freshly declared, with a recorded trace (JSON text or list)."""
    from schedule_fuzz_cases import CASES

    import tensorlang as tl

    case = CASES[case_name]()
    s = tl.create_schedule(case.outputs)
    s.apply_trace(trace)
    return case, s


# ----------------------------------------------------------------------------- checking one


class _LegalityTimer:
    """Wraps the legality entry points (per-step check_step, whole-schedule check_schedule) and
    records the time of each call."""

    def __init__(self):
        import tensorlang.analysis as an

        self.calls: list[float] = []
        for name in ("check_step", "check_schedule"):
            setattr(an, name, self._timed(getattr(an, name)))

    def _timed(self, fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.calls.append(time.perf_counter() - t)

        wrapper.__wrapped__ = fn
        return wrapper

    def take(self) -> list[float]:
        calls, self.calls = self.calls, []
        return calls


_TIMER: _LegalityTimer | None = None


def _out_array(expected: np.ndarray, dtype: str) -> np.ndarray:
    # a sentinel, so that an element the kernel forgets to write is noticed
    d = np.dtype(dtype)
    fill = np.nan if d.kind == "f" else np.iinfo(d).min + 7 if d.kind in "iu" else False
    return np.full(expected.shape, fill, dtype=d)


def compare(got: np.ndarray, want: np.ndarray, tol: tuple) -> str | None:
    """None when equal within tolerance, else a short description of the worst element."""
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    g, w = got.astype(np.float64), np.asarray(want, dtype=np.float64)
    rtol, atol = tol
    bad = ~np.isclose(g, w, rtol=rtol, atol=atol) | (np.isnan(g) != np.isnan(w))
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())}/{bad.size} elements differ, first at {idx}: got {g[idx]!r}, " \
           f"expected {w[idx]!r}"


def check_one(case_name: str, seed: int, inject: str | None = None,
              trace: str | None = None) -> dict:
    """Draw, lower, build, run and compare one schedule (or, given a trace, replay that one;
    seed then only picks the inputs). Never raises: the outcome says. inject= "wrong", "segv"
    or "hang" makes the check fail on purpose (to test the fuzzer itself)."""
    global _TIMER
    import tensorlang as tl

    if _TIMER is None:
        _TIMER = _LegalityTimer()
    _TIMER.take()
    res = {"case": case_name, "seed": seed, "outcome": ERROR, "trace": None}
    try:
        t0 = time.perf_counter()
        if trace is None:
            case, s, refusals = draw_schedule(case_name, seed)
        else:
            (case, s), refusals = replay(case_name, trace), []
        res.update(trace=s.trace.dumps(), refusals=refusals, steps=len(s.trace))
        try:
            t1 = time.perf_counter()
            func = tl.lower(s, case.inputs + case.outputs, name="fuzz")
        except (tl.ScheduleError, tl.LoweringError) as e:
            calls = _TIMER.take()
            res.update(outcome=REFUSED, refused_at="lower", why=refusal_kind(e, names_in(s)),
                       legality_s=sum(calls), legality_calls=calls)
            return res
        calls = _TIMER.take()
        res.update(legality_s=sum(calls), legality_calls=calls)
        res["lower_s"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        f = tl.build(func)
        res["build_s"] = time.perf_counter() - t2
        rng = np.random.default_rng(seed)
        ins = case.gen(rng)
        want = case.ref(*ins)
        if inject == "wrong":
            want = [w + 1 for w in want]
        outs = [_out_array(w, t.dtype) for w, t in zip(want, case.outputs)]
        if inject == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if inject == "hang":
            time.sleep(3600)
        t3 = time.perf_counter()
        f(*ins, *outs)
        res["run_s"] = time.perf_counter() - t3
        for k, (got, w) in enumerate(zip(outs, want)):
            diff = compare(got, w, case.tol)
            if diff is not None:
                res.update(outcome=WRONG, why=f"output {k} ({case.outputs[k].name}): {diff}")
                return res
        res["outcome"] = OK
        res["total_s"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - any other exception is an outcome (a bug)
        res.update(outcome=ERROR, why=f"{type(e).__name__}: {str(e)[:300]}",
                   traceback=traceback.format_exc(limit=8)[-2000:])
    return res


# ----------------------------------------------------------------------------- workers


def worker_main() -> None:
    """check_one for the jobs of a Pool (fuzz_pool.serve)."""
    fuzz_pool.serve(lambda job: check_one(job["case"], job["seed"], job.get("inject")),
                    _worker_imports)


def _worker_imports() -> None:
    import schedule_fuzz_cases  # noqa: F401 - imported (with tensorlang) before the first job

    import tensorlang.analysis  # noqa: F401


class Pool(fuzz_pool.Pool):
    """Worker processes running check_one (tests/fuzz_pool.py): a worker that dies is a CRASH,
    one past the time limit (``timeout``, or the job's own "timeout") a HANG, each replaced."""

    def __init__(self, workers: int = 2, timeout: float = 60.0, recycle: int = 300):
        super().__init__(HERE / "schedule_fuzz.py", _lost, workers, timeout, recycle,
                         cache_prefix="fuzz-kernels-")


def _lost(job: dict, outcome: str, why: str) -> dict:
    return {"case": job["case"], "seed": job["seed"], "outcome": outcome, "why": why,
            "trace": None}


def jobs_for(cases: list[str], n: int, seed: int = 0) -> list[dict]:
    """n jobs spread round-robin over the cases, seeds seed, seed + 1, ..."""
    return [{"case": cases[i % len(cases)], "seed": seed + i} for i in range(n)]


# ----------------------------------------------------------------------------- failures


def trace_of(case_name: str, seed: int) -> str:
    """The trace drawn for (case, seed), drawn in this process (no build: safe for a crash)."""
    _, s, _ = draw_schedule(case_name, seed)
    return s.trace.dumps()


def outcome_of_trace(case_name: str, seed: int, steps: list, timeout: float = 60.0) -> str:
    """The outcome of one trace, checked in a fresh subprocess (it may crash or hang); an ERROR
    comes with its exception type ("ERROR AttributeError")."""
    code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import schedule_fuzz "
            f"as F; print(json.dumps(F.check_one({case_name!r}, {seed}, "
            f"trace={json.dumps(steps)!r})))")
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return HANG
    if p.returncode < 0:
        return CRASH
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return f"{ERROR} (no answer, exit code {p.returncode})"
    if res["outcome"] == ERROR:
        return f"{ERROR} {res['why'].split(':')[0]}"
    return res["outcome"]


def minimize(case_name: str, seed: int, timeout: float = 60.0, outcome_of=None) -> list:
    """The shortest trace found by greedy one-step deletion that still gives the outcome the
    drawn trace gives (for an ERROR, the same exception type). outcome_of(steps) -> str decides
    (default: outcome_of_trace, a subprocess per try)."""
    import tensorlang as tl

    if outcome_of is None:
        def outcome_of(steps):
            return outcome_of_trace(case_name, seed, steps, timeout)

    steps = json.loads(trace_of(case_name, seed))
    target = outcome_of(steps)
    changed = True
    while changed:
        changed = False
        for i in range(len(steps)):
            trial = steps[:i] + steps[i + 1:]
            try:
                replay(case_name, json.dumps(trial))  # the shorter trace must still apply
            except (tl.ScheduleError, ValueError, TypeError):
                continue
            if outcome_of(trial) == target:
                steps, changed = trial, True
                break
    return steps


def repro_command(case_name: str, seed: int) -> str:
    return (f"python benchmarks/fuzz_schedules.py --cases {case_name} --seed {seed} --n 1 "
            "--workers 1 --verbose")


def format_steps(steps: list) -> str:
    from tensorlang.schedule.schedule import Trace

    return "\n".join(f"    {s}" for s in Trace.loads(steps))


def format_trace(res: dict) -> str:
    """A result's trace, one primitive a line (drawn again here when the worker died first)."""
    trace = res.get("trace")
    if trace is None:
        trace = trace_of(res["case"], res["seed"])
    return format_steps(json.loads(trace))
