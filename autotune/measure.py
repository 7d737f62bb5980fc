"""Measuring candidates: build in parallel processes, run isolated in a separate process.

Every failure becomes a typed error in the MeasureResult, and tuning goes on:

    "illegal schedule"  the legality checker refused a primitive (caught before building)
    "build error"       lowering or compilation raised, or a builder process died / timed out
    "run error"         the kernel raised, returned an error code, or crashed its process
                        (SIGSEGV, SIGFPE from an integer division by zero, ...)
    "timeout"           the measurement did not finish within LocalRunner.timeout seconds
    "wrong answer"      the output differs from the reference

Builds of one batch run first (in parallel), then runs one at a time: a kernel is never timed
while the compiler competes for the two cores.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import enum
import os
import signal
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field

import numpy as np
from tensorlang.runtime.arrays import packed

from .arguments import check_int, check_number, check_seconds
from .timelimit import TemplateTimeout, time_limit
from .workers import CONTEXT, kill_pool

ILLEGAL = "illegal schedule"
BUILD_ERROR = "build error"
RUN_ERROR = "run error"
TIMEOUT = "timeout"
WRONG_ANSWER = "wrong answer"
ERROR_KINDS = (ILLEGAL, BUILD_ERROR, RUN_ERROR, TIMEOUT, WRONG_ANSWER)


class MeasureErrorNo(enum.IntEnum):
    """TVM's codes of a measurement's outcome (``res.error_no``, for callbacks written for
    AutoTVM): ours map onto them; a timeout is RUN_TIMEOUT whichever step it stopped."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1
    COMPILE_HOST = 2
    COMPILE_DEVICE = 3
    RUNTIME_DEVICE = 4
    WRONG_ANSWER = 5
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8


_ERROR_NO = {None: MeasureErrorNo.NO_ERROR, ILLEGAL: MeasureErrorNo.INSTANTIATION_ERROR,
             BUILD_ERROR: MeasureErrorNo.COMPILE_HOST, RUN_ERROR: MeasureErrorNo.RUNTIME_DEVICE,
             TIMEOUT: MeasureErrorNo.RUN_TIMEOUT, WRONG_ANSWER: MeasureErrorNo.WRONG_ANSWER}

# every worker process (builders, the measuring process, feature workers) starts from here:
# spawned, and dies with this process (workers.py)
_CTX = CONTEXT


@dataclass
class MeasureInput:
    task: object  # Task
    config: object  # ConfigEntity


@dataclass
class MeasureResult:
    costs: list = field(default_factory=list)  # seconds per call, one per repeat
    error: str | None = None  # one of ERROR_KINDS, None when valid
    error_msg: str = ""
    all_cost: float = 0.0  # seconds spent building and running this candidate
    timestamp: float = 0.0
    trace: str | None = None  # the schedule's recorded steps (JSON)
    # measured again at the end of tuning, interleaved with the other finalists and the default
    # (remeasure_batch): the figure the best record is chosen by
    remeasured: bool = False
    # the re-measurement's winner (Tuner.remeasure): the default unless a finalist is faster
    # by more than REMEASURE_MARGIN
    chosen: bool = False

    @property
    def valid(self) -> bool:
        return self.error is None and bool(self.costs)

    @property
    def error_no(self) -> MeasureErrorNo:
        """TVM's ``res.error_no``: 0 (NO_ERROR) for a valid measurement."""
        if self.error is None and not self.costs:
            return MeasureErrorNo.UNKNOWN_ERROR
        return _ERROR_NO.get(self.error, MeasureErrorNo.UNKNOWN_ERROR)

    @property
    def mean_cost(self) -> float:
        """TVM's figure (the mean of the repeats); the tuners rank by :attr:`cost`."""
        return float(np.mean(self.costs)) if self.valid else float("inf")

    @property
    def cost(self) -> float:
        """Seconds per call: the median of the repeats, inf when invalid."""
        return robust_cost(self.costs) if self.valid else float("inf")


def robust_cost(costs) -> float:
    """A measurement's figure: the median of its repeats. Not the mean: on a shared 2-core Zen 4,
    21-23% of the records had a first repeat over 10% slower than the others (a config's
    repeats 187, 237, 237 GFLOP/s averaged to 217, re-timed at 227-236)."""
    return float(np.median(costs))


@dataclass
class BuildResult:
    path: str | None
    trace: str | None
    error: str | None
    error_msg: str
    time: float


# ------------------------------------------------------------------------------------ builder
def _build_job(job: dict) -> dict:
    """Runs in a builder process: instantiate the config, lower and compile, save the module;
    all of it within the builder's timeout (a template that loops forever for this config is
    a build error, and the process serves the next candidate)."""
    t0 = time.perf_counter()
    try:
        with time_limit(job["timeout"], "building the candidate"):
            return _build(job, t0)
    except TemplateTimeout as e:
        return {"error": BUILD_ERROR, "msg": f"build timed out: {e}",
                "time": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - any failure of one candidate is its build error
        msg = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"
        return {"error": BUILD_ERROR, "msg": msg[-2000:], "time": time.perf_counter() - t0}


# CPU seconds LLVM's loop vectorizer may spend on a candidate before it is built without it
# (tl.build's own budget is 20 s): normal candidates compile in well under a second
CANDIDATE_VECTORIZER_BUDGET = 4


def _build(job: dict, t0: float) -> dict:
    import tensorlang as tl
    from tensorlang.codegen.compile_limit import vectorizer_budget

    from .task import create_task, load_template

    load_template(job["template"])
    task = create_task(job["name"], job["args"], job["target"])
    cfg = task.config_space.from_json(job["config"])
    try:
        s, args = task.instantiate(cfg)
        trace = s.trace.dumps()
        with vectorizer_budget(CANDIDATE_VECTORIZER_BUDGET):
            mod = tl.build(s, args, target=job["target"], name="cand")
    except tl.ScheduleError as e:  # refused by a primitive, or by tl.lower's whole-schedule check
        return {"error": ILLEGAL, "msg": str(e), "time": time.perf_counter() - t0}
    mod.save(job["path"])
    return {"error": None, "msg": "", "path": job["path"], "trace": trace,
            "time": time.perf_counter() - t0}


class LocalBuilder:
    """Compile candidates in `n_parallel` worker processes (default: the CPU count); each
    candidate (instantiating its config, lowering, compiling) within `timeout` seconds.

    TVM's other arguments are accepted with their meaning where it applies here: build_func
    "default" (tl.build; TVM's "ndk" and custom functions are refused), do_fork (builds always
    run in separate processes), build_kwargs and runtime only as None."""

    def __init__(self, n_parallel: int | None = None, timeout: float = 60.0,
                 build_func: str = "default", do_fork: bool = True, build_kwargs=None,
                 runtime=None):
        _refuse_tvm_options("LocalBuilder", build_func=(build_func, "default"),
                            build_kwargs=(build_kwargs, None), runtime=(runtime, None))
        del do_fork  # TVM's choice of forking per build: here every build is in a worker
        # None: one worker per CPU; 0 used to mean that too, silently
        self.n_parallel = (os.cpu_count() or 1) if n_parallel is None else \
            check_int("LocalBuilder", "n_parallel", n_parallel, 1)
        self.timeout = check_seconds("LocalBuilder", "timeout", timeout)
        self._pool: cf.ProcessPoolExecutor | None = None
        self._dir = tempfile.mkdtemp(prefix="tl-tune-")
        self._count = 0

    # seconds beyond the jobs' own timeouts before a batch's hung workers are killed
    _BACKSTOP_MARGIN = 5.0

    def _get_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(self.n_parallel, mp_context=_CTX)
        return self._pool

    def _kill_pool(self) -> None:
        kill_pool(self._pool)
        self._pool = None

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        os.makedirs(self._dir, exist_ok=True)  # close() removes it; a builder may be reused
        jobs = []
        specs: dict[int, str | bytes] = {}  # one pickle per template and batch
        for inp in inputs:
            self._count += 1
            t = inp.task
            spec = specs.setdefault(id(t.template), t.template.worker_spec())
            jobs.append({"template": spec, "name": t.name, "args": list(t.args),
                         "target": t.target, "config": inp.config.to_json(),
                         "path": os.path.join(self._dir, f"cand{self._count}.tlm"),
                         "timeout": self.timeout})
        pool = self._get_pool()
        futures = [pool.submit(_build_job, j) for j in jobs]
        out = []
        # each job stops itself at its timeout (time_limit); this deadline is for what cannot
        # be interrupted there (a hang inside LLVM): the worst case of the jobs in a row
        rounds = -(-len(jobs) // self.n_parallel)
        deadline = time.monotonic() + self.timeout * rounds + self._BACKSTOP_MARGIN
        broken = False
        for fut in futures:
            try:
                r = fut.result(timeout=max(0.0, deadline - time.monotonic()))
            except cf.TimeoutError:
                r = {"error": BUILD_ERROR, "msg": f"build timed out after {self.timeout} s",
                     "time": self.timeout}
                broken = True
            except Exception as e:  # noqa: BLE001 - a builder process died (LLVM crash)
                r = {"error": BUILD_ERROR, "msg": f"builder process died: {e!r}", "time": 0.0}
                broken = True
            out.append(BuildResult(r.get("path"), r.get("trace"), r["error"], r["msg"],
                                   r["time"]))
        if broken:  # hung or dead workers: start a fresh pool for the next batch
            self._kill_pool()
        return out

    def close(self) -> None:
        import shutil

        self._kill_pool()
        shutil.rmtree(self._dir, ignore_errors=True)


# ------------------------------------------------------------------------------------ runner
def _random_inputs(manifest: dict, seed: int = 0) -> list[np.ndarray]:
    """Every argument filled at random, in one region of huge pages as a built model holds
    its weights and activations (runtime.arrays.packed): a record times the kind of memory
    the deployed kernel reads, which can change its time by half (see huge_page_bytes)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for a in manifest["args"]:
        dt = np.dtype(a["dtype"])
        shape = tuple(a["shape"])
        if dt.kind == "f":
            arr = rng.uniform(-1, 1, size=shape).astype(dt)
        elif dt.kind in "iu":
            arr = rng.integers(0, 8, size=shape).astype(dt)
        else:
            arr = rng.integers(0, 2, size=shape).astype(dt)
        arrays.append(arr)
    placed = []
    for buf, arr in zip(packed([a.nbytes for a in arrays]), arrays):
        view = buf.view(arr.dtype).reshape(arr.shape)
        view[...] = arr
        placed.append(view)
    return placed


def _scalar_values(manifest: dict, seed: int = 0) -> dict:
    """A value for each float scalar parameter (a template's tl.var("alpha", dtype="float32")
    listed among its arguments), drawn once per workload as the arrays are: in [0.5, 1.5), so
    that a kernel that ignores or misreads it gives a wrong answer."""
    rng = np.random.default_rng(seed + 1)
    return {v: np.dtype(d).type(rng.uniform(0.5, 1.5))
            for v, d in sorted(manifest.get("var_dtypes", {}).items()) if d != "int64"}


def _reference_inputs(manifest: dict, arrays: list, scalars: dict) -> list:
    """What a template's numpy reference takes: the arrays the kernel does not write, and its
    scalar parameters where the argument list has them (manifest["call_order"])."""
    inputs = {a["name"]: arr for a, arr in zip(manifest["args"], arrays) if not a["written"]}
    order = manifest.get("call_order") or [a["name"] for a in manifest["args"]]
    return [scalars[n] if n in scalars else inputs[n] for n in order
            if n in scalars or n in inputs]


def _runner_main(conn) -> None:
    """The measuring process: serves one job at a time until the pipe closes."""
    from tensorlang.runtime import load_module

    cache: dict = {}  # workload key -> (arrays, reference outputs)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        try:
            conn.send(_run_job(job, cache, load_module))
        except Exception as e:  # noqa: BLE001 - the kernel raised: a run error, keep serving
            conn.send({"error": RUN_ERROR, "msg": f"{type(e).__name__}: {e}"})


def _reference(job: dict, arrays: list, written: list[bool], load_module, manifest: dict,
               scalars: dict):
    ref = job["reference"]
    if ref is None:
        return None
    if ref[0] == "template":
        from .task import get_template, load_template

        load_template(ref[1])
        out = get_template(ref[2]).reference(*_reference_inputs(manifest, arrays, scalars))
        return list(out) if isinstance(out, (list, tuple)) else [out]
    mod = load_module(ref[1])  # ("kernel", path): the fallback config's kernel
    bufs = [a.copy() for a in arrays]
    mod(*bufs, **scalars)
    return [b for b, w in zip(bufs, written) if w]


# The default bytes written before each cold call. Larger than Zen 4's L3: streaming only the
# bytes the rest of a model touches (31.5 MB for ResNet-50-shaped 112x112 width 32, Zen 4's L3
# is 32 MB) left part of the weights cached, and the records summed to 4.75 ms against 5.53 ms
# of the same kernels in a run; with 64 MiB, 5.71 against 5.68 ms. Not right everywhere: on an
# Intel Emerald Rapids VM (260 MiB L3) the same kernels' records were 1.33x their time in a
# run; graph.calibrate_flush measures the size that matches on the machine at hand.
FLUSH_BYTES = 64 << 20
_junk: dict = {}  # bytes -> the eviction buffer, allocated (and paged in) once per process
# How long the pool's idle workers spin while a kernel is measured: 0.1-0.2 s at 2-4 GHz,
# longer than a flush and the warm reads take (~3 ms)
_MEASURE_SPIN_CYCLES = 400_000_000


@contextlib.contextmanager
def _workers_kept_awake(wake):
    """The pool's workers kept spinning inside the block, woken first by ``wake()`` (an untimed
    call). Why: idle for ~100 us (the default budget), they sleep, and a flush takes ~3 ms, so
    every timed call would pay their wake-up, which a call inside a model run, launched right
    after the kernel before it, does not. Measured (ResNet-50-shaped 112x112 width 32, 2
    threads, Zen 4): the default kernels' records summed 6.2-6.9 ms against 3.0-3.5 ms of the
    same kernels in a run (max pool 9x); kept spinning, 3.5-4.0 ms."""
    from tensorlang.runtime import threadpool

    if threadpool.get_num_threads() == 1:
        yield
        return
    before = threadpool.get_spin_cycles()
    threadpool.set_spin_cycles(max(before, _MEASURE_SPIN_CYCLES))
    try:
        wake()
        yield
    finally:
        threadpool.set_spin_cycles(before)


def _cold_costs(mod, bufs: list, number: int, repeat: int, cooldown: float,
                warm: tuple = (), flush_bytes: int = FLUSH_BYTES,
                scalars: dict | None = None) -> list[float]:
    """Each repeat: the caches evicted, the arguments numbered in ``warm`` read back in, then
    ``number`` calls timed with no call in between. time_evaluator's warm-up call would bring
    every argument back into the caches before its timing; a model's kernel runs once per
    model run, after the other kernels have evicted its weights while its input was just
    written by the kernel before it (``warm``: a graph task's non-constant inputs). Measured,
    ResNet-50-shaped at 112x112 width 32, one thread on Zen 4: the late-stage convs and the
    dense 1.5-5x slower in a run than called back to back. ``flush_bytes``: how many bytes
    are written to evict them (LocalRunner's flush_bytes)."""
    if flush_bytes not in _junk:
        _junk.clear()  # one size at a time: a runner keeps its size
        _junk[flush_bytes] = np.zeros(max(flush_bytes, 64), dtype=np.uint8)
    junk = _junk[flush_bytes]
    timer = mod._native_timer()
    raw = mod.prepare_args(*bufs, **(scalars or {}))
    costs = []
    with _workers_kept_awake(lambda: timer(raw, 1)):
        for _ in range(repeat):
            # written, not read: a run leaves the caches full of dirty lines (the activations
            # the other kernels wrote), whose writebacks the kernel pays for as it streams its
            # weights in. Measured (ResNet-50-shaped 112x112 width 32, 1 thread, Zen 4): after
            # a read flush the records summed to 4.89 ms, after a written one 5.84, in a run 5.74
            junk[::64] += 1
            for i in warm:
                bufs[i].view(np.uint8).reshape(-1)[::64].sum()  # one read per cache line
            # woken: the pool's workers take an empty job first, untimed. Through the flush
            # they wait in sched_yield, and on a shared machine a yielding worker is off its
            # CPU whenever another process runs there; the launch waits for every worker, so
            # a tiny kernel's timed call took that process's time slice (2 threads, a 2-conv
            # model: 1-2 us calls timed at 1-7 ms in some repeats, calibrate_flush's ratios up
            # to 2000x at 32-128 MiB; a 16-channel 8x8 conv recorded at 0.5 GFLOP/s).
            elapsed, rc = timer(raw, number, woken=True)
            if rc:
                raise mod._kernel_error(rc)
            costs.append(elapsed / number)
            if cooldown:
                time.sleep(cooldown)
    return costs


def _warm_args(warm, bufs: list) -> tuple[int, ...]:
    """The argument indices a task asks to keep in cache (Task.warm_args), checked."""
    warm = tuple(warm or ())
    bad = [i for i in warm if not (isinstance(i, int) and 0 <= i < len(bufs))]
    if bad:
        raise ValueError(f"warm_args {list(warm)}: the kernel has {len(bufs)} arguments")
    return warm


def _run_job(job: dict, cache: dict, load_module) -> dict:
    mod = load_module(job["path"])
    written = [a["written"] for a in mod.manifest["args"]]
    key = job["key"]
    if key not in cache:
        manifest = mod.manifest
        arrays = _random_inputs(manifest)
        scalars = _scalar_values(manifest)  # the float scalar parameters' values
        cache.clear()  # one workload's arrays at a time (they can be large)
        cache[key] = (arrays, scalars,
                      _reference(job, arrays, written, load_module, manifest, scalars))
    # one set per workload: each candidate writes over the outputs
    bufs, scalars, ref = cache[key]
    outs = [b for b, w in zip(bufs, written) if w]
    if ref is not None:
        _poison(outs, ref)  # a kernel that skips elements must not pass on stale values
        mod(*bufs, **scalars)
        bad = _compare(outs, ref, job["rtol"])
        if bad:
            return {"error": WRONG_ANSWER, "msg": bad}
        _poison(outs, ref)  # again: the timed calls must (re)compute every element
    if job["flush_cache"]:
        costs = _cold_costs(mod, bufs, job["number"], job["repeat"], job["cooldown"],
                            _warm_args(job.get("warm"), bufs), job["flush_bytes"], scalars)
    else:
        r = mod.time_evaluator(job["number"], job["repeat"], job["min_repeat_ms"])(
            *bufs, **scalars)
        costs = list(r.results)
    if ref is not None:
        # check the output of the *timed* calls too: a kernel (or a runtime bug) that computes
        # right once and then skips work would otherwise be recorded as a fast valid config
        bad = _compare(outs, ref, job["rtol"])
        if bad:
            return {"error": WRONG_ANSWER, "msg": "after the timed calls: " + bad}
    return {"error": None, "costs": costs}


def _poison(outs: list, ref: list) -> None:
    """Fill each output with values that differ from its reference at every element: NaN, or
    the reference plus one (wrapping) for integers and its negation for bool. A fixed number
    does not fit every dtype (123456789 in an int8 output raised OverflowError: every trial of
    a uint8 requantized conv was a run error) and may be a right answer (127, saturated)."""
    for o, r in zip(outs, ref):
        r = np.asarray(r)
        if o.dtype.kind in "fc" or r.shape != o.shape:  # (a shape _compare then reports)
            o.fill(np.nan if o.dtype.kind in "fc" else 0)
        elif o.dtype.kind == "b":
            np.logical_not(r, out=o)
        else:
            o[...] = r.astype(o.dtype)
            o += np.ones((), o.dtype)  # (array arithmetic wraps at the dtype's bound)


def _compare(outs: list, ref: list, rtol: float) -> str:
    """'' when every output matches the reference, else a description of the mismatch."""
    for o, r in zip(outs, ref):
        r = np.asarray(r)
        if o.shape != r.shape:
            return f"output shape {o.shape} != {r.shape}"
        bad = _differs(o, r, rtol)
        if bad.any():
            idx = tuple(int(x[0]) for x in np.nonzero(bad))
            return (f"{int(bad.sum())} of {o.size} elements differ, e.g. at {idx}: "
                    f"{o[idx]} != {r[idx]}")
    return ""


def _differs(o: np.ndarray, r: np.ndarray, rtol: float) -> np.ndarray:
    """Where ``o`` differs from the reference ``r``: exactly for integers and bools (their
    arithmetic is exact in any order; with the float tolerance relative to the largest value,
    an int8 matmul's int32 sums of ~50000 passed off by 49, a whole missing product), within
    ``rtol`` of the largest magnitude for floats (a reordered sum rounds otherwise)."""
    if o.dtype.kind in "biu" and r.dtype.kind in "biu":
        return o != r
    tol = rtol * max(1.0, float(np.max(np.abs(r))) if r.size else 1.0)
    return ~np.isclose(o, r, rtol=rtol, atol=tol)


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


# The measuring process computes numpy references; a multithreaded BLAS keeps its threads
# spinning after each call, and they slowed the next candidate's first repeats (measured: the
# fallback config of a 1024^3 matmul, measured first, 232 and 272 against 496 GFLOP/s, so the
# tuner took it for a slow config). There, those libraries run on one thread (only references
# use them; kernels run on tensorlang's own pool).
_ONE_THREAD_LIBRARIES = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                         "MKL_NUM_THREADS": "1"}
_environ_lock = threading.Lock()


@contextlib.contextmanager
def _environ(values: dict):
    """os.environ with `values` set, for a process started inside (a spawned process copies
    the environment when it starts)."""
    with _environ_lock:
        saved = {k: os.environ.get(k) for k in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class LocalRunner:
    """Run each built candidate in a separate, persistent measuring process.

    number, repeat, min_repeat_ms: as in Module.time_evaluator; timeout: seconds for one
    candidate's check + measurement; cooldown: seconds to sleep after each candidate (and between
    repeats with flush_cache); flush_cache: evict the CPU caches before each repeat, which
    then times ``number`` calls from cold caches with no warm-up call (number=1: every timed
    call cold, as a model's kernel runs; min_repeat_ms does not apply); flush_bytes: how many
    bytes each eviction writes (default FLUSH_BYTES; graph.calibrate_flush finds the size at
    which a model's kernels time as they run in it on this machine);
    check_correctness: compare the output with the reference first (rtol). TVM's names
    cooldown_interval and enable_cpu_cache_flush are cooldown and flush_cache; its
    module_loader is refused (only local modules are loaded)."""

    def __init__(self, number: int = 5, repeat: int = 3, min_repeat_ms: float = 0,
                 timeout: float = 10.0, cooldown: float = 0.0, flush_cache: bool = False,
                 check_correctness: bool = True, rtol: float = 1e-3,
                 startup_margin: float = 10.0, *, flush_bytes: int = FLUSH_BYTES,
                 cooldown_interval: float | None = None,
                 enable_cpu_cache_flush: bool | None = None, module_loader=None):
        # TVM's names for two of ours (keyword only: TVM's positional order differs)
        _refuse_tvm_options("LocalRunner", module_loader=(module_loader, None))
        if cooldown_interval is not None:
            cooldown = cooldown_interval
        if enable_cpu_cache_flush is not None:
            flush_cache = bool(enable_cpu_cache_flush)
        number = check_int("LocalRunner", "number", number, 0)
        repeat = check_int("LocalRunner", "repeat", repeat, 0)
        if number < 1 or repeat < 1:
            raise ValueError(f"LocalRunner: number and repeat must be >= 1, got number={number}, "
                             f"repeat={repeat}")
        timeout = check_seconds("LocalRunner", "timeout", timeout)
        # negative values used to fail every trial (min_repeat_ms) or crash the tuning loop
        # after the first candidate (cooldown: time.sleep)
        min_repeat_ms = check_number("LocalRunner", "min_repeat_ms", min_repeat_ms, zero=True)
        cooldown = check_seconds("LocalRunner", "cooldown", cooldown, zero=True)
        startup_margin = check_seconds("LocalRunner", "startup_margin", startup_margin,
                                       zero=True)
        rtol = check_number("LocalRunner", "rtol", rtol, zero=True)
        if isinstance(flush_bytes, bool) or not isinstance(flush_bytes, int) or flush_bytes < 0:
            raise ValueError(f"LocalRunner: flush_bytes must be an int >= 0, got {flush_bytes!r}")
        self.flush_bytes = flush_bytes
        self.number, self.repeat, self.min_repeat_ms = int(number), int(repeat), min_repeat_ms
        self.timeout, self.cooldown, self.flush_cache = float(timeout), cooldown, flush_cache
        self.check_correctness, self.rtol = check_correctness, rtol
        # extra seconds for a fresh measuring process (interpreter start, imports, inputs and
        # reference), so that a slow start is not mistaken for a hanging kernel
        self.startup_margin = float(startup_margin)
        self._fresh = False
        self._proc = None
        self._conn = None
        self._reference_kernels: dict[str, str] = {}
        self._last_key: str | None = None
        self.restarts = 0

    def _start(self) -> None:
        parent, child = _CTX.Pipe()
        self._proc = _CTX.Process(target=_runner_main, args=(child,), daemon=True)
        with _environ(_ONE_THREAD_LIBRARIES):
            self._proc.start()
        self._fresh = True
        child.close()
        self._conn = parent

    def _stop(self) -> None:
        self._last_key = None
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(5)
            self._conn.close()
            self._proc = self._conn = None

    def close(self) -> None:
        self._stop()

    def set_reference_kernel(self, key: str, path: str) -> None:
        self._reference_kernels[key] = path

    def _reference_spec(self, task):
        if not self.check_correctness:
            return None
        if task.template.reference is not None:
            return ("template", task.template.worker_spec(), task.name)
        path = self._reference_kernels.get(task.key)
        return ("kernel", path) if path else None

    def run_one(self, task, path: str) -> tuple[str | None, str, list]:
        """(error kind or None, message, costs) for the module saved at `path`."""
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self.restarts += 1
            self._stop()
            self._start()
        job = {"path": path, "key": task.key, "reference": self._reference_spec(task),
               "number": self.number, "repeat": self.repeat, "min_repeat_ms": self.min_repeat_ms,
               "flush_cache": self.flush_cache, "flush_bytes": self.flush_bytes,
               "cooldown": self.cooldown, "rtol": self.rtol,
               "warm": list(getattr(task, "warm_args", ()) or ())}
        self._conn.send(job)
        # a fresh process, or a new workload, also pays start-up / inputs and reference
        fresh = self._fresh or task.key != self._last_key
        timeout = self.timeout + (self.startup_margin if fresh else 0.0)
        self._last_key, self._fresh = task.key, False
        if not self._conn.poll(timeout):
            self._stop()
            self.restarts += 1
            return TIMEOUT, f"no result within {self.timeout} s (process killed)", []
        try:
            r = self._conn.recv()
        except (EOFError, OSError):
            self._proc.join(5)
            code = self._proc.exitcode
            self._stop()
            self.restarts += 1
            return RUN_ERROR, f"measuring process crashed ({_signal_name(code)})", []
        if self.cooldown and not self.flush_cache:
            time.sleep(self.cooldown)
        if r["error"]:
            return r["error"], r["msg"], []
        return None, "", r["costs"]


@dataclass
class MeasureOption:
    builder: LocalBuilder
    runner: LocalRunner

    def close(self) -> None:
        self.builder.close()
        self.runner.close()


def _refuse_tvm_options(what: str, **options) -> None:
    """ValueError for a TVM option given a value other than the one supported here;
    options: name -> (value given, the supported value)."""
    for name, (value, supported) in options.items():
        if value != supported:
            raise ValueError(f"{what}: TVM's {name}={value!r} is not supported here (only "
                             f"{name}={supported!r}: candidates are built with tl.build and run "
                             "in a local measuring process)")


def measure_option(builder: LocalBuilder | str | None = None,
                   runner: LocalRunner | str | None = None) -> MeasureOption:
    """How to measure: a builder (parallel compile) and a runner (isolated timing); "local"
    (TVM's spelling) or None for the default LocalBuilder() / LocalRunner(); DaskBuilder and
    DaskRunner measure on a dask.distributed cluster (dask_measure.py)."""
    return MeasureOption(_measurer("builder", builder, LocalBuilder),
                         _measurer("runner", runner, LocalRunner))


def _measurer(what: str, given, cls):
    if given is None or given == "local":
        return cls()
    if isinstance(given, (cls, _dask_measurer(what))):
        return given
    if isinstance(given, str):  # a name, the right type for one: one this call does not know
        message = (f"measure_option: {what} must be 'local' or a {cls.__name__}, got {given!r} "
                   "(TVM's RPC measurement is not supported: tuning measures on this machine)")
        raise ValueError(message)  # noqa: TRY004
    raise TypeError(f"measure_option: {what} must be a {cls.__name__} (or 'local'), got "
                    f"{type(given).__name__}")


def _dask_measurer(what: str) -> type:
    from .dask_measure import DaskBuilder, DaskRunner  # imports dask only when one is made

    return DaskBuilder if what == "builder" else DaskRunner


def remeasure_batch(option: MeasureOption, inputs: list[MeasureInput],
                    rounds: int) -> list[MeasureResult]:
    """Measure `inputs` again, built once and run in `rounds` interleaved rounds (the order
    reversed each round), so that a drift of the machine's speed hits them all alike; each
    result holds every round's repeats and is marked ``remeasured``."""
    if rounds < 1:
        raise ValueError(f"remeasure_batch: rounds must be >= 1, got {rounds!r}")
    builds = option.builder.build(inputs) if inputs else []
    results = [MeasureResult([], b.error, b.error_msg, b.time, time.time(), b.trace, True)
               for b in builds]
    order = [n for n, b in enumerate(builds) if not b.error]
    try:
        for _ in range(rounds):
            for n in order:
                if results[n].error:
                    continue  # failed in an earlier round (a flaky kernel): not timed again
                t0 = time.perf_counter()
                err, msg, costs = option.runner.run_one(inputs[n].task, builds[n].path)
                r = results[n]
                r.all_cost += time.perf_counter() - t0
                if err:
                    r.error, r.error_msg, r.costs = err, msg, []
                else:
                    r.costs.extend(costs)
            order.reverse()
    finally:
        for n in order:
            with contextlib.suppress(OSError):
                os.unlink(builds[n].path)
    for r in results:
        r.timestamp = time.time()
    return results


def measure_batch(option: MeasureOption, inputs: list[MeasureInput],
                  on_result=None) -> list[MeasureResult]:
    """Build and run a batch of candidates; never raises for a bad candidate.

    on_result(index, result), when given, is called as each candidate's result is known, in
    the order they finish, so that a log can hold every finished candidate at once (a driver
    killed mid-batch loses only those in flight)."""
    if isinstance(option.runner, _dask_measurer("runner")):  # measures many at once
        return option.runner.measure_batch(option.builder, inputs, on_result)
    results: list[MeasureResult | None] = [None] * len(inputs)
    # configs are instantiated in the builder processes only, under the builder's timeout
    # (an illegal one comes back as such at once); never here, where a template that hangs
    # would hang the tuner
    to_build = list(range(len(inputs)))
    builds = option.builder.build(inputs) if inputs else []
    for n, b in zip(to_build, builds):
        if b.error:
            results[n] = MeasureResult([], b.error, b.error_msg, b.time, time.time(), b.trace)
        else:
            t0 = time.perf_counter()
            err, msg, costs = option.runner.run_one(inputs[n].task, b.path)
            results[n] = MeasureResult(costs, err, msg, b.time + time.perf_counter() - t0,
                                       time.time(), b.trace)
            with contextlib.suppress(OSError):
                os.unlink(b.path)
        if on_result is not None:
            on_result(n, results[n])
    return results  # type: ignore[return-value]


def __getattr__(name: str):
    # an AutoTVM name we do not have: the error says what to use (tensorlang/tvm_names.py)
    from tensorlang.tvm_names import AUTOTVM_NAMES, missing

    raise missing("module 'tensorlang.autotune.measure'", name, AUTOTVM_NAMES)
