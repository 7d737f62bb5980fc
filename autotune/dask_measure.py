"""Measuring candidates on a dask.distributed cluster: DaskBuilder and DaskRunner.

    client = distributed.Client("tcp://host:8786")
    option = autotune.measure_option(builder=autotune.DaskBuilder(client),
                                     runner=autotune.DaskRunner(client, number=5, repeat=3))

Each candidate is two dask tasks: a build, which any worker may run, and a measurement, which
needs the worker resource ``measure`` (``dask worker --resources measure=1``) and takes its
input, the compiled module, straight from the worker that built it. On a worker, builds run in
a pool of spawned processes and measurements in a persistent measuring process (the local
builder's and runner's code, measure.py), so a kernel that crashes or hangs costs a process,
not the dask worker, and every failure is a typed error of the candidate, as locally.

One measurement per machine at a time, and nothing else then: a measurement holds a machine-wide
file lock exclusively, builds hold it shared, and a measurement waiting for it stops new builds
from starting (writer preference), so a kernel is never timed while the compiler runs there.

A worker that dies mid-candidate: the dask scheduler gives its tasks to another worker (up to
its ``distributed.scheduler.allowed-failures``, default 3), after which the candidate is a
"run error" (or "build error") naming the worker deaths; a candidate whose measuring workers
all left (restarted workers come back at new addresses) is sent to those there are, up to
allowed-failures times (the driver's setting), then is a run error too. Every candidate yields one result,
handed to the tuner as it comes back, which appends it to the log then (log_to_file streams):
a killed driver leaves a log of every candidate that had finished, and resuming measures the
rest.

CPU checks: the task's target is resolved on the driver ("llvm" is the driver's CPU); builds
compile for exactly that CPU and those features on whatever machine they run, and only workers
whose own CPU (name and instruction-set extensions) equals the target's measure. When no
measuring worker matches, CpuMismatchError says how each one differs.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter

from tensorlang.errors import TensorlangError

from .arguments import check_seconds
from .measure import (
    BUILD_ERROR,
    FLUSH_BYTES,
    RUN_ERROR,
    BuildResult,
    LocalRunner,
    MeasureInput,
    MeasureResult,
    _build_job,
)
from .workers import CONTEXT, kill_pool

MEASURE_RESOURCE = "measure"


class CpuMismatchError(TensorlangError):
    """No worker that may measure has the target's CPU (name and instruction-set extensions),
    or a worker found it differs from the target when asked to measure."""


class DaskClusterError(TensorlangError):
    """The cluster cannot measure: no worker declares the ``measure`` resource, every such
    worker left, or a worker failed outside any candidate (e.g. tensorlang not installed)."""


# ------------------------------------------------------------------------- CPU identities
def _identity(cpu: str, features: str, triple: str) -> dict:
    """A CPU as compared here: LLVM's CPU name, the instruction-set extensions enabled (those
    that change generated code: runtime/_cpu.py's list) and the triple's architecture."""
    from tensorlang.runtime._cpu import X86_LLVM_TO_CPUINFO, triple_arch

    isa = sorted(f[1:] for f in features.split(",")
                 if f.startswith("+") and f[1:] in X86_LLVM_TO_CPUINFO)
    return {"cpu": cpu, "isa": isa, "arch": triple_arch(triple)}


def host_cpu() -> dict:
    """This machine's CPU identity."""
    from tensorlang.codegen.target import Target

    t = Target.host()
    return _identity(t.cpu, t.features, t.triple)


# what a worker reports, and checks before it measures (a test replaces it in one worker to
# play a machine of another kind)
worker_cpu = host_cpu


def target_cpu(target: str) -> tuple[dict, str]:
    """(identity, explicit target string) of `target` resolved here: "llvm" is this CPU. The
    explicit string (-mcpu, every feature, -mtriple) compiles the same code on any machine."""
    from tensorlang.codegen.target import Target

    t = Target.from_string(target)
    return (_identity(t.cpu, t.features, t.triple),
            f"llvm -mcpu={t.cpu} -mattr={t.features} -mtriple={t.triple}")


def cpu_difference(target: dict, worker: dict) -> str:
    """How a worker's CPU differs from the target's ('' when it does not)."""
    parts = []
    if worker["arch"] != target["arch"]:
        parts.append(f"architecture {worker['arch']} instead of {target['arch']}")
    if worker["cpu"] != target["cpu"]:
        parts.append(f"CPU {worker['cpu']} instead of {target['cpu']}")
    missing = sorted(set(target["isa"]) - set(worker["isa"]))
    extra = sorted(set(worker["isa"]) - set(target["isa"]))
    if missing:
        parts.append(f"lacks {', '.join(missing)}")
    if extra:
        parts.append(f"also has {', '.join(extra)}")
    return "; ".join(parts)


def _report_cpu() -> dict:
    return worker_cpu()


# ------------------------------------------------------------------------- machine lock
_LOCK_DIR = tempfile.gettempdir()


@contextlib.contextmanager
def _machine_use(exclusive: bool):
    """Hold this machine for a measurement (exclusive) or a build (shared), across every
    process of this user. A measurement first takes the gate, so that builds arriving while
    it waits queue behind it instead of keeping the shared lock held forever."""
    import fcntl

    uid = os.getuid() if hasattr(os, "getuid") else 0
    with open(os.path.join(_LOCK_DIR, f"tensorlang-measure-{uid}.gate"), "a+") as gate, \
            open(os.path.join(_LOCK_DIR, f"tensorlang-measure-{uid}.lock"), "a+") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if exclusive:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(gate, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# ------------------------------------------------------------------------- worker side
_children_lock = threading.Lock()
_children_starting = [0, None]  # threads inside _children_allowed, the flag they replaced


@contextlib.contextmanager
def _children_allowed():
    """Let a dask worker start tensorlang's worker processes. Dask's nanny makes its worker a
    daemonic process, and multiprocessing refuses children to those because they would outlive
    it; tensorlang's processes die with their parent (workers.py: PR_SET_PDEATHSIG), which is
    what that rule protects. The flag is process-wide and the worker's threads build at once:
    the first thread in clears it, the last one out puts it back."""
    config = multiprocessing.current_process()._config
    with _children_lock:
        if _children_starting[0] == 0:
            _children_starting[1] = config.get("daemon")
            config["daemon"] = False
        _children_starting[0] += 1
    try:
        yield
    finally:
        with _children_lock:
            _children_starting[0] -= 1
            if _children_starting[0] == 0 and _children_starting[1] is not None:
                config["daemon"] = _children_starting[1]


class _WorkerState:
    """What a dask worker process keeps between candidates: its build processes, its
    measuring process and the reference kernels it was sent."""

    BACKSTOP_MARGIN = 5.0  # seconds past a build's own timeout before its process is killed

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tl-dask-")
        self.lock = threading.Lock()
        self.pool: cf.ProcessPoolExecutor | None = None
        self.pool_generation = 0
        self.runner: LocalRunner | None = None
        self.runner_settings: dict | None = None
        self.references: dict[str, str] = {}
        self.measured = 0  # measurements this worker ran (tests and reports read it)

    def _pool(self) -> tuple[cf.ProcessPoolExecutor, int]:
        with self.lock:
            if self.pool is None:
                self.pool = cf.ProcessPoolExecutor(_worker_threads(), mp_context=CONTEXT)
                self.pool_generation += 1
            return self.pool, self.pool_generation

    def _kill_pool(self, generation: int) -> None:
        with self.lock:
            if self.pool is not None and self.pool_generation == generation:
                kill_pool(self.pool)
                self.pool = None

    def build(self, job: dict) -> dict:
        """measure._build_job in a build process; a hang or a dead process is a build error.
        A job lost because another job's hang killed the pool is built again, once."""
        for attempt in range(2):
            pool, generation = self._pool()
            with _children_allowed():
                fut = pool.submit(_build_job, job)
            try:
                return fut.result(timeout=job["timeout"] + self.BACKSTOP_MARGIN)
            except cf.TimeoutError:
                self._kill_pool(generation)
                return {"error": BUILD_ERROR, "msg": f"build timed out after {job['timeout']} s "
                        "(builder process killed)", "time": job["timeout"]}
            except Exception as e:  # noqa: BLE001 - the build process died (LLVM crash)
                with self.lock:
                    killed_by_other = self.pool_generation != generation or self.pool is None
                self._kill_pool(generation)
                if killed_by_other and attempt == 0:
                    continue
                return {"error": BUILD_ERROR, "msg": f"builder process died: {e!r}", "time": 0.0}
        raise AssertionError("unreachable")

    def measure(self, task, path: str, settings: dict, reference: bytes | None):
        with self.lock:
            if self.runner is None or self.runner_settings != settings:
                if self.runner is not None:
                    self.runner.close()
                self.runner, self.runner_settings = LocalRunner(**settings), settings
            runner = self.runner
        if reference is not None and task.key not in self.references:
            ref_path = os.path.join(self.dir, f"reference-{uuid.uuid4().hex}.tlm")
            with open(ref_path, "wb") as f:
                f.write(reference)
            self.references[task.key] = ref_path
        if task.key in self.references:
            runner.set_reference_kernel(task.key, self.references[task.key])
        with _children_allowed():
            out = runner.run_one(task, path)
        self.measured += 1
        return out


    def close(self) -> None:
        with self.lock:
            kill_pool(self.pool)
            self.pool = None
            if self.runner is not None:
                self.runner.close()
                self.runner = None
        shutil.rmtree(self.dir, ignore_errors=True)


_STATE: _WorkerState | None = None
_STATE_LOCK = threading.Lock()


def _close_worker_state() -> None:
    """Stop this worker's build and measuring processes (when the dask worker closes: a live
    process pool would hold the worker's exit until the nanny kills it)."""
    global _STATE
    with _STATE_LOCK:
        state, _STATE = _STATE, None
    if state is not None:
        state.close()


def _worker_plugin():
    """A dask WorkerPlugin that closes tensorlang's worker state with the worker (built here,
    not at import, so that importing this module needs no dask)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class TensorlangMeasurePlugin(WorkerPlugin):
        # registered once per cluster: registering again would tear down the workers' build
        # and measuring processes, another driver's candidates in flight with them
        idempotent = True

        def teardown(self, worker) -> None:
            _close_worker_state()

    return TensorlangMeasurePlugin()


def _worker_state() -> _WorkerState:
    global _STATE
    with _STATE_LOCK:
        if _STATE is None:
            _STATE = _WorkerState()
        return _STATE


def _worker_threads() -> int:
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


def _measured_here() -> int:
    return _STATE.measured if _STATE is not None else 0


def _build_task(job: dict) -> dict:
    """A dask task: build one candidate here; the result carries the module's bytes."""
    state = _worker_state()
    job = dict(job, path=os.path.join(state.dir, f"cand-{uuid.uuid4().hex}.tlm"))
    with _machine_use(exclusive=False):
        r = state.build(job)
    if r.get("error") is None:
        with open(r["path"], "rb") as f:
            r["module"] = f.read()
        os.unlink(r.pop("path"))
    return r


def _measure_task(built: dict, job: dict) -> dict:
    """A dask task (on a worker with the measure resource): time one built candidate here."""
    if built.get("error"):
        return {"error": built["error"], "msg": built["msg"], "time": built["time"],
                "trace": built.get("trace")}
    difference = cpu_difference(job["cpu"], worker_cpu())
    if difference:
        raise CpuMismatchError(f"this worker's CPU differs from the target's: {difference}")
    from .task import create_task, load_template

    load_template(job["template"])
    task = create_task(job["name"], job["args"], job["target"])
    task.warm_args = tuple(job.get("warm", ()))  # a graph task's cache state (measure.py)
    state = _worker_state()
    path = os.path.join(state.dir, f"run-{uuid.uuid4().hex}.tlm")
    with open(path, "wb") as f:
        f.write(built["module"])
    t0 = time.perf_counter()
    try:
        with _machine_use(exclusive=True):
            err, msg, costs = state.measure(task, path, job["runner"], job["reference"])
    finally:
        os.unlink(path)
    return {"error": err, "msg": msg, "costs": costs, "trace": built["trace"],
            "time": built["time"] + time.perf_counter() - t0}


# ------------------------------------------------------------------------- driver side
def _check_client(client, who: str):
    try:
        from distributed import Client
    except ImportError:
        raise ImportError(f"{who} needs dask.distributed: pip install "
                          "'tensorlang[distributed]'") from None
    if not isinstance(client, Client):
        raise TypeError(f"{who}: client must be a distributed.Client, got "
                        f"{type(client).__name__}")
    return client


def _build_job_of(inp: MeasureInput, build_target: str, timeout: float, specs: dict) -> dict:
    t = inp.task
    spec = specs.setdefault(id(t.template), t.template.worker_spec())
    return {"template": spec, "name": t.name, "args": list(t.args), "target": build_target,
            "config": inp.config.to_json(), "timeout": timeout}


class DaskBuilder:
    """Compile candidates on any worker of a dask.distributed cluster, each (instantiating
    its config, lowering, compiling) within `timeout` seconds, for the target's CPU as
    resolved on this machine. With a DaskRunner, a candidate goes from its builder straight
    to a measuring worker; alone (or with a LocalRunner), build() brings the modules here."""

    def __init__(self, client, timeout: float = 60.0):
        self.client = _check_client(client, "DaskBuilder")
        # inf / NaN reached the time limits (OverflowError from deep inside)
        self.timeout = check_seconds("DaskBuilder", "timeout", timeout)
        self._dir = tempfile.mkdtemp(prefix="tl-tune-")  # modules fetched here, references
        self._targets: dict[str, tuple[dict, str]] = {}
        self._count = 0

    def resolve(self, target: str) -> tuple[dict, str]:
        """(CPU identity, explicit target string) of a task's target, resolved here."""
        if target not in self._targets:
            self._targets[target] = target_cpu(target)
        return self._targets[target]

    def submit(self, inputs: list[MeasureInput]) -> list:
        """One build future per input (its result: measure._build_job's dict, with the
        module's bytes under "module")."""
        specs: dict = {}
        futures = []
        for inp in inputs:
            job = _build_job_of(inp, self.resolve(inp.task.target)[1], self.timeout, specs)
            futures.append(self.client.submit(_build_task, job, pure=False,
                                              key=f"tl-build-{uuid.uuid4().hex}"))
        return futures

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        os.makedirs(self._dir, exist_ok=True)
        futures = self.submit(inputs)
        out = []
        for fut in futures:
            r = _result_or_error(fut, BUILD_ERROR)
            path = None
            if r.get("error") is None:
                self._count += 1
                path = os.path.join(self._dir, f"cand{self._count}.tlm")
                with open(path, "wb") as f:
                    f.write(r["module"])
            out.append(BuildResult(path, r.get("trace"), r.get("error"), r.get("msg", ""),
                                   r.get("time", 0.0)))
        return out

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


def _allowed_failures() -> int:
    """How many times a candidate may lose its workers (dask's allowed-failures, here)."""
    import dask

    return int(dask.config.get("distributed.scheduler.allowed-failures", 3))


def _result_or_error(fut, kind: str) -> dict:
    """A finished future's dict; a task whose workers kept dying is a typed error of `kind`;
    any other failure of the task is the cluster's, not the candidate's."""
    from distributed.scheduler import KilledWorker

    try:
        return fut.result()
    except KilledWorker as e:
        if str(e.task).startswith("tl-build-"):  # the measurement's input, its build, failed
            kind = BUILD_ERROR
        return {"error": kind, "msg": f"the workers running it died ({e})", "time": 0.0}
    except CpuMismatchError:
        raise
    except Exception as e:
        raise DaskClusterError(f"a dask task failed outside any candidate: "
                               f"{type(e).__name__}: {e}") from e


class DaskRunner:
    """Time candidates on the workers that declare the ``measure`` resource, one at a time per
    worker; only workers whose CPU equals the target's (see the module doc).

    number, repeat, min_repeat_ms, timeout, cooldown, flush_cache, flush_bytes,
    check_correctness, rtol, startup_margin: as for LocalRunner (the worker runs one);
    `wait_for_workers`: seconds to wait for a measuring worker when none is connected before
    raising DaskClusterError."""

    def __init__(self, client, number: int = 5, repeat: int = 3, min_repeat_ms: float = 0,
                 timeout: float = 10.0, cooldown: float = 0.0, flush_cache: bool = False,
                 check_correctness: bool = True, rtol: float = 1e-3,
                 startup_margin: float = 10.0, wait_for_workers: float = 60.0,
                 flush_bytes: int = FLUSH_BYTES):
        self.client = _check_client(client, "DaskRunner")
        self.settings = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                         "timeout": timeout, "cooldown": cooldown, "flush_cache": flush_cache,
                         "check_correctness": check_correctness, "rtol": rtol,
                         "startup_margin": startup_margin, "flush_bytes": flush_bytes}
        LocalRunner(**self.settings)  # the same argument checks (it starts nothing)
        self.timeout, self.check_correctness = float(timeout), check_correctness
        self.wait_for_workers = float(wait_for_workers)
        self._reference_kernels: dict[str, str] = {}
        self._reference_bytes: dict[str, bytes] = {}
        self._identities: tuple[frozenset, dict] = (frozenset(), {})
        self._owns_client = False
        self.requeued = 0  # candidates sent again after a worker refused them
        self.client.register_plugin(_worker_plugin(), name="tensorlang-measure")

    def set_reference_kernel(self, key: str, path: str) -> None:
        """The kernel whose output checks the candidates of workload `key` (sent to workers)."""
        with open(path, "rb") as f:
            self._reference_bytes[key] = f.read()
        self._reference_kernels[key] = path

    # ---------------------------------------------------------------- which workers measure
    def _worker_identities(self) -> dict[str, dict]:
        """address -> CPU identity of every connected worker with the measure resource."""
        deadline = time.monotonic() + self.wait_for_workers
        while True:
            workers = self.client.scheduler_info(n_workers=-1)["workers"]
            able = frozenset(a for a, w in workers.items()
                             if (w.get("resources") or {}).get(MEASURE_RESOURCE, 0) >= 1)
            if able or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if not able:
            raise DaskClusterError(
                f"no worker of the cluster declares the {MEASURE_RESOURCE!r} resource "
                f"(workers: {sorted(workers) or 'none'}); start measuring workers with "
                f"`dask worker <scheduler> --resources {MEASURE_RESOURCE}=1`")
        known, identities = self._identities
        if able != known:
            try:
                identities = self.client.run(_report_cpu, workers=sorted(able),
                                             on_error="return")
            except Exception as e:
                raise DaskClusterError(f"asking the workers for their CPU failed: {e}") from e
            bad = {a: r for a, r in identities.items() if isinstance(r, BaseException)}
            if bad:
                raise DaskClusterError(
                    "workers could not report their CPU (is tensorlang installed there?): " +
                    "; ".join(f"{a}: {type(r).__name__}: {r}" for a, r in bad.items()))
            self._identities = (able, identities)
        return identities

    def measuring_workers(self, cpu: dict) -> list[str]:
        """The measuring workers whose CPU is `cpu`; CpuMismatchError when there is none."""
        identities = self._worker_identities()
        matching = sorted(a for a, ident in identities.items() if not cpu_difference(cpu, ident))
        if not matching:
            raise CpuMismatchError(
                f"no measuring worker has the target's CPU ({cpu['cpu']}, "
                f"{len(cpu['isa'])} extensions); measurements there would not be what the "
                "deployed kernel runs at: " + "; ".join(
                    f"{a}: {cpu_difference(cpu, ident)}" for a, ident in
                    sorted(identities.items())))
        return matching

    # ---------------------------------------------------------------- measuring
    def measure_batch(self, builder, inputs: list[MeasureInput],
                      on_result=None) -> list[MeasureResult]:
        """Build and measure a batch: each candidate's measurement starts as soon as it is
        built, on any free measuring worker. One result per input, in order; on_result(index,
        result), when given, as each one comes back (measure.measure_batch)."""
        if not isinstance(builder, DaskBuilder):
            builder = _LocalBuilds(builder)
        cpus = [builder.resolve(inp.task.target) for inp in inputs]
        targets = {c[1]: self.measuring_workers(c[0]) for c in cpus}
        built = builder.submit(inputs)
        specs: dict = {}
        jobs = [self._job(inp, cpu, specs) for inp, cpu in zip(inputs, cpus)]
        pending = {n: (self._submit(b, job, targets[job["target"]]), targets[job["target"]])
                   for n, (b, job) in enumerate(zip(built, jobs))}
        del built  # the scheduler keeps each build until its measurement has its module
        results: list[MeasureResult | None] = [None] * len(inputs)
        requeued: set[int] = set()
        orphaned: Counter = Counter()  # how often each candidate's measuring workers all left

        def finish(n: int, result: MeasureResult) -> None:
            results[n] = result
            if on_result is not None:
                on_result(n, result)

        while pending:
            done = self._wait_some([f for f, _ in pending.values()])
            if not done:  # workers left: send what only they could measure to the others
                for n, result in self._resend_orphans(pending, builder, inputs, jobs, orphaned):
                    finish(n, result)
                continue
            for n in [n for n, (f, _) in pending.items() if f in done]:
                fut, _ = pending.pop(n)
                try:
                    r = _result_or_error(fut, RUN_ERROR)
                except CpuMismatchError:
                    if n in requeued:
                        raise
                    # that worker's CPU changed since it reported it (another machine at its
                    # address): ask again and send the candidate to a matching worker, once
                    requeued.add(n)
                    self._identities = (frozenset(), {})
                    pending[n] = self._resend(builder, inputs[n], jobs[n])
                    continue
                finish(n, MeasureResult(r.get("costs") or [], r.get("error"), r.get("msg", ""),
                                        r.get("time", 0.0), time.time(), r.get("trace")))
        return results  # type: ignore[return-value]

    def _resend(self, builder, inp: MeasureInput, job: dict) -> tuple:
        self.requeued += 1
        workers = self.measuring_workers(job["cpu"])
        return self._submit(builder.submit([inp])[0], job, workers), workers

    def _resend_orphans(self, pending: dict, builder, inputs: list, jobs: list,
                        orphaned: Counter) -> list[tuple[int, MeasureResult]]:
        """Measurements restricted to workers that have all left (a restarted worker comes
        back at another address) are cancelled and sent to the measuring workers there are.
        The scheduler's count of worker deaths starts again with each new task, so a candidate
        that kills every worker it runs on, on a cluster of allowed-failures workers or fewer,
        would go round for ever: past allowed-failures resends it is a run error (returned as
        (index, result), taken out of `pending`)."""
        connected = set(self.client.scheduler_info(n_workers=-1)["workers"])
        limit = _allowed_failures()
        given_up = []
        for n, (fut, workers) in list(pending.items()):
            if connected.intersection(workers):
                continue
            fut.cancel()
            if orphaned[n] >= limit:
                del pending[n]
                given_up.append((n, MeasureResult(
                    [], RUN_ERROR, f"every measuring worker it was sent to died or left ("
                    f"{orphaned[n] + 1} sends; distributed.scheduler.allowed-failures is "
                    f"{limit})", 0.0, time.time(), None)))
                continue
            orphaned[n] += 1
            pending[n] = self._resend(builder, inputs[n], jobs[n])
        return given_up

    def _job(self, inp: MeasureInput, cpu: tuple[dict, str], specs: dict) -> dict:
        t = inp.task
        spec = specs.setdefault(id(t.template), t.template.worker_spec())
        reference = None
        if self.check_correctness and t.template.reference is None:
            reference = self._reference_bytes.get(t.key)
        return {"template": spec, "name": t.name, "args": list(t.args), "target": cpu[1],
                "cpu": cpu[0], "runner": self.settings, "reference": reference,
                "warm": list(getattr(t, "warm_args", ()) or ())}

    def _submit(self, built, job: dict, workers: list[str]):
        return self.client.submit(_measure_task, built, job, pure=False,
                                  key=f"tl-measure-{uuid.uuid4().hex}",
                                  resources={MEASURE_RESOURCE: 1}, workers=workers,
                                  allow_other_workers=False)

    def _wait_some(self, futures: list, seconds: float = 2.0) -> set:
        """The futures done within `seconds` (empty if none)."""
        from distributed import wait

        try:
            return set(wait(futures, timeout=seconds, return_when="FIRST_COMPLETED").done)
        except TimeoutError:
            return set()

    def run_one(self, task, path: str) -> tuple[str | None, str, list]:
        """(error kind or None, message, costs) for the module saved at `path` here, measured
        on a worker (measure_batch pipelines many; this is the one-candidate form)."""
        cpu, target = target_cpu(task.target)
        with open(path, "rb") as f:
            built = {"error": None, "module": f.read(), "trace": None, "time": 0.0}
        job = self._job(MeasureInput(task, None), (cpu, target), {})
        r = _result_or_error(self._submit(built, job, self.measuring_workers(cpu)), RUN_ERROR)
        return r.get("error"), r.get("msg", ""), r.get("costs") or []

    def measured_per_worker(self) -> dict[str, int]:
        """address -> measurements each connected worker ran since it started."""
        return self.client.run(_measured_here)

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


class _LocalBuilds:
    """A local builder's results as already-finished build inputs for DaskRunner."""

    def __init__(self, builder):
        self.builder = builder

    def resolve(self, target: str) -> tuple[dict, str]:
        cpu, _ = target_cpu(target)
        return cpu, target  # built here, for the target as given

    def submit(self, inputs: list[MeasureInput]) -> list[dict]:
        out = []
        for b in self.builder.build(inputs):
            r = {"error": b.error, "msg": b.error_msg, "time": b.time, "trace": b.trace}
            if b.error is None:
                with open(b.path, "rb") as f:
                    r["module"] = f.read()
                os.unlink(b.path)
            out.append(r)
        return out


CONNECT_TIMEOUT_S = 30
# a dask handshake is a few hundred bytes: a first frame length above this is another protocol
_MAX_GREETING_BYTES = 1 << 24


def _check_greeting(scheduler: str, timeout: float) -> None:
    """Refuse a tcp:// address whose listener is not a dask scheduler. Why: distributed's
    connect timeout does not cover the handshake (dask/distributed#7698), so a Client pointed at
    a listener that never answers waits forever, and one pointed at another protocol (an HTTP
    server) reads its reply as a frame length and fails allocating exabytes. A dask scheduler
    sends its handshake as soon as it accepts, framed by an 8-byte little-endian length.
    Addresses that do not parse, other schemes and failed connects are left to the Client (its
    errors say what is wrong; it retries a scheduler that is still starting)."""
    import socket

    from distributed.comm import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(scheduler)
        if scheme != "tcp":
            return
        sock = socket.create_connection(parse_host_port(loc), timeout=timeout)
    except (ValueError, OSError):
        return
    head = b""
    with sock:
        try:
            while len(head) < 8:
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
        except TimeoutError:
            raise DaskClusterError(
                f"{scheduler} accepted the connection but sent nothing in {timeout:g} s, where "
                f"a dask scheduler greets a client at once: is it a dask scheduler's "
                f"address (`dask scheduler --port`)?") from None
        except OSError as e:  # reset: a proxy or a service that refuses silent clients
            raise DaskClusterError(f"{scheduler} dropped the connection before greeting as a "
                                   f"dask scheduler does ({e}): is it a dask scheduler's "
                                   f"address?") from None
    if len(head) < 8:
        raise DaskClusterError(f"{scheduler} closed the connection before greeting as a dask "
                               f"scheduler does: is it a dask scheduler's address?")
    if int.from_bytes(head, "little") > _MAX_GREETING_BYTES:
        raise DaskClusterError(f"{scheduler} does not speak dask's protocol (its first bytes: "
                               f"{head!r}): is it a dask scheduler's address?")


def dask_measure_option(scheduler: str, builder_timeout: float = 60.0, **runner_options):
    """measure_option(DaskBuilder, DaskRunner) on a new Client connected to `scheduler`
    (e.g. "tcp://host:8786"); closing the option closes the client."""
    from .measure import measure_option

    try:
        from distributed import Client
    except ImportError:
        raise ImportError("--scheduler needs dask.distributed: pip install "
                          "'tensorlang[distributed]'") from None
    _check_greeting(scheduler, CONNECT_TIMEOUT_S)
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except OSError as e:
        raise DaskClusterError(f"cannot connect to the dask scheduler at {scheduler}: "
                               f"{e}") from None
    runner = DaskRunner(client, **runner_options)
    runner._owns_client = True
    return measure_option(DaskBuilder(client, timeout=builder_timeout), runner)
