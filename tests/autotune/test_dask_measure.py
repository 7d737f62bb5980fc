"""autotune.DaskBuilder / DaskRunner on a LocalCluster of 2 worker processes (each with the
`measure` resource): records that apply, a worker killed mid-run, a driver killed and resumed,
workers of another CPU refused. A small matmul, few trials."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import numpy as np
import pytest
from killed_driver import kill_after_first_record

distributed = pytest.importorskip("distributed")

from tensorlang.autotune import dask_measure

import tensorlang as tl
from tensorlang import autotune

ARGS = (64, 64, 64, "float32")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                       resources={"measure": 1}, dashboard_address=None)
    with cluster, distributed.Client(cluster) as c:
        yield c


def _option(client):
    return autotune.measure_option(autotune.DaskBuilder(client, timeout=30),
                                   autotune.DaskRunner(client, number=2, repeat=2))


def _tune(client, log, n_trial, seed=0):
    task = autotune.create_task("matmul", ARGS, target="llvm")
    autotune.tune_tasks([task], n_trial=n_trial, log_file=log, tuner="random",
                        measure_option=_option(client), batch_size=4, progress=False,
                        seed=seed, remeasure_top=0)  # trials only: counted per worker
    return task


def _check_log(log, task, n_trial):
    """Every trial once, the best record deploys and computes the matmul."""
    records = [r for r in autotune.load_records(log) if not r.remeasured]
    indexes = Counter(r.config["index"] for r in records)
    assert len(records) == n_trial and set(indexes.values()) == {1}, indexes
    assert all(r.result["error"] in (None, autotune.ILLEGAL) for r in records), \
        [r.result for r in records if r.result["error"]]
    valid = [r for r in records if r.valid]
    assert valid and all(c > 0 for r in valid for c in r.result["costs"])
    with autotune.apply_history_best(log):
        s, bufs = autotune.get_template("matmul")(*ARGS)
        f = tl.build(s, bufs)
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((64, 64), dtype=np.float32) for _ in range(2))
    c = np.empty((64, 64), np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    return records


def _measured(client) -> dict:
    """address -> measurements each worker ran."""
    return client.run(dask_measure._measured_here)


def test_tuning_on_the_cluster_gives_records_that_apply(client, tmp_path):
    before = _measured(client)
    log = str(tmp_path / "mm.jsonl")
    task = _tune(client, log, 8)
    records = _check_log(log, task, 8)
    after = _measured(client)
    measured = sum(after.values()) - sum(before.get(a, 0) for a in after)
    # every candidate that built was measured once, on some worker
    assert measured == sum(r.result["error"] is None for r in records)


def test_a_worker_killed_mid_run_loses_no_trial(client, tmp_path):
    log = str(tmp_path / "killed.jsonl")
    killed: list[int] = []

    def kill_a_measuring_worker():
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for addr, keys in client.processing().items():
                if any(str(k).startswith("tl-measure-") for k in keys):
                    pid = client.run(os.getpid, workers=[addr])[addr]
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_a_measuring_worker, daemon=True)
    killer.start()
    task = _tune(client, log, 12, seed=1)
    killer.join()
    assert killed, "no measurement was seen running"
    _check_log(log, task, 12)
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it, for the next tests


@autotune.template("test_dask_kills_its_measuring_worker")
def kills_its_measuring_worker(n: int):
    """A vector copy whose task, made on a dask worker to measure it, ends that worker's
    process (as a kernel loader that crashes the worker would): every time, on every worker."""
    try:
        distributed.get_worker()
    except ValueError:
        pass  # the driver, or a build process: make the task
    else:
        os._exit(3)
    cfg = autotune.get_config()
    cfg.define_knob("k", [0, 1, 2, 3])
    A = tl.placeholder((n,), name="A")
    C = tl.compute((n,), lambda i: A[i] + 1.0, name="C")
    return tl.create_schedule(C), [A, C]


def test_a_candidate_killing_every_worker_is_recorded_once_as_a_run_error(client, tmp_path):
    """Its worker dies, dask gives it to the other one, which dies too; the workers restart at
    new addresses, where the driver sends it again up to allowed-failures times (0 here),
    then records it as a run error, once; the cluster measures on after."""
    import dask

    log = str(tmp_path / "dies.jsonl")
    task = autotune.create_task("test_dask_kills_its_measuring_worker", (64,), target="llvm")
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            pytest.raises(autotune.TuningError, match="all 1 trials .* failed .*run error 1"):
        autotune.tune_tasks([task], n_trial=1, log_file=log, tuner="random",
                            measure_option=_option(client), progress=False, seed=0,
                            remeasure_top=0)
    (record,) = autotune.load_records(log)
    assert record.result["error"] == autotune.RUN_ERROR
    assert "every measuring worker it was sent to died or left (1 sends; distributed." \
        "scheduler.allowed-failures is 0)" in record.result["error_msg"]
    client.wait_for_workers(2, timeout=60)
    matmul = _tune(client, str(tmp_path / "after.jsonl"), 2, seed=4)
    _check_log(str(tmp_path / "after.jsonl"), matmul, 2)


_DRIVER = """
import sys
from distributed import Client
from tensorlang import autotune
with Client(sys.argv[1]) as client:
    task = autotune.create_task("matmul", (64, 64, 64, "float32"), target="llvm")
    # >= 200 ms per measurement, one at a time on this machine: records come apart
    runner = autotune.DaskRunner(client, number=1, repeat=2, min_repeat_ms=100, timeout=60)
    option = autotune.measure_option(autotune.DaskBuilder(client, timeout=120), runner)
    autotune.tune_tasks([task], n_trial=8, log_file=sys.argv[2], tuner="random",
                        measure_option=option, batch_size=4, progress=False, seed=2,
                        remeasure_top=0)
"""


def test_a_killed_driver_resumes_from_its_log(client, tmp_path):
    """The driver SIGKILLed in the middle of its first batch of 4: the log holds the
    candidates that had come back (streamed, whole lines); rerun, it measures the rest."""
    script, log = tmp_path / "driver.py", tmp_path / "driver.jsonl"
    script.write_text(_DRIVER)
    cmd = [sys.executable, str(script), client.scheduler.address, str(log)]
    text = kill_after_first_record(cmd, log)
    assert text.endswith("\n") and 1 <= text.count("\n") < 4, text
    killed = {r.config["index"] for r in autotune.load_records(str(log))}
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    task = autotune.create_task("matmul", ARGS, target="llvm")
    records = _check_log(str(log), task, 8)
    assert killed <= {r.config["index"] for r in records}


def _play_another_cpu(client, workers, isa_removed="avx512f"):
    """Make `workers` report the host's CPU without one extension."""
    real = dask_measure.host_cpu()
    fake = functools.partial(dict, cpu=real["cpu"], arch=real["arch"],
                             isa=[f for f in real["isa"] if f != isa_removed])
    client.run(setattr, dask_measure, "worker_cpu", fake, workers=workers)


def _play_own_cpu(client):
    client.run(setattr, dask_measure, "worker_cpu", dask_measure.host_cpu)


def test_workers_of_another_cpu_are_refused(client, tmp_path):
    if "avx512f" not in dask_measure.host_cpu()["isa"]:
        pytest.skip("the simulated worker lacks avx512f, which this CPU does not have")
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    try:
        _play_another_cpu(client, workers[:1])
        before = _measured(client)
        log = str(tmp_path / "one.jsonl")
        task = _tune(client, log, 4, seed=3)
        _check_log(log, task, 4)
        after = _measured(client)
        assert after[workers[0]] == before.get(workers[0], 0)  # refused: measured nothing
        assert after[workers[1]] > before.get(workers[1], 0)
        _play_another_cpu(client, workers)
        with pytest.raises(autotune.CpuMismatchError,
                           match="no measuring worker has the target's CPU.*lacks avx512f"):
            _tune(client, str(tmp_path / "none.jsonl"), 4)
    finally:
        _play_own_cpu(client)


def test_a_worker_refusing_at_run_time_is_requeued(client):
    """A worker that reported the target's CPU but finds another one when it measures (a new
    machine at its address) refuses; the candidate goes to a matching worker, once."""
    host = dask_measure.host_cpu()
    if "avx512f" not in host["isa"]:
        pytest.skip("the simulated worker lacks avx512f, which this CPU does not have")
    w0, w1 = sorted(client.scheduler_info(n_workers=-1)["workers"])
    option = _option(client)
    runner = option.runner
    other = dict(host, isa=[f for f in host["isa"] if f != "avx512f"])
    # what the driver believed: w0 is the target's kind (so everything goes there), w1 not
    runner._identities = (frozenset((w0, w1)), {w0: host, w1: other})
    task = autotune.create_task("matmul", ARGS, target="llvm")
    inputs = [autotune.MeasureInput(task, task.config_space.get(i)) for i in range(3)]
    before = _measured(client)
    try:
        _play_another_cpu(client, [w0])
        results = autotune.measure_batch(option, inputs)
    finally:
        _play_own_cpu(client)
    after = _measured(client)
    assert len(results) == 3 and all(r.error in (None, autotune.ILLEGAL) for r in results)
    built = sum(r.error is None for r in results)
    assert runner.requeued == built
    assert after[w0] == before[w0] and after[w1] - before[w1] == built


def test_the_command_line_tunes_on_the_cluster(client, tmp_path):
    log = tmp_path / "cli.jsonl"
    cmd = [sys.executable, "-m", "tensorlang.cli", "tune", "matmul", "--args",
           "64,64,64,float32", "--trials", "4", "--tuner", "random", "--log", str(log),
           "--number", "2", "--repeat", "2", "--min-repeat-ms", "0",
           "--scheduler", client.scheduler.address]
    before = sum(_measured(client).values())
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    task = autotune.create_task("matmul", ARGS, target="llvm")
    records = _check_log(str(log), task, 4)
    # the CLI (tune_tasks) then re-measures the top 3 and the default on the cluster too
    remeasured = [r for r in autotune.load_records(str(log)) if r.remeasured]
    assert 3 <= len(remeasured) <= 4 and all(r.valid for r in remeasured)
    assert sum(_measured(client).values()) - before == \
        sum(r.valid for r in records) + autotune.tuner.REMEASURE_ROUNDS * len(remeasured)
    refused = subprocess.run(cmd + ["--n-parallel", "2"], check=False, capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and "--n-parallel sets local builder" in refused.stderr


def test_the_task_scheduler_tunes_and_remeasures_on_the_cluster(client, tmp_path):
    """TaskScheduler over two tasks with the dask measure option: its trials and its final
    re-measurement (top configs and default of each task, interleaved) all run on the
    cluster's measuring workers, and the chosen records deploy."""
    log = str(tmp_path / "sched.jsonl")
    tasks = [autotune.create_task("matmul", ARGS, target="llvm"),
             autotune.create_task("matmul", (32, 64, 64, "float32"), target="llvm")]
    before = sum(_measured(client).values())
    autotune.TaskScheduler(tasks, log_file=log, measure_option=_option(client), tuner="random",
                           round_trials=2, seed=0, progress=False, remeasure_top=1,
                           remeasure_rounds=2).tune(n_trial=8)
    records = autotune.load_records(log)
    trials = [r for r in records if not r.remeasured]
    remeasured = [r for r in records if r.remeasured]
    assert len(trials) == 8 and {r.key for r in remeasured} == {t.key for t in tasks}
    assert all(r.valid for r in remeasured)
    assert sum(r.chosen for r in remeasured) == 2  # one winner per task
    assert sum(_measured(client).values()) - before == \
        sum(r.valid for r in trials) + 2 * len(remeasured)
    own = tmp_path / "own.jsonl"  # _check_log reads one workload's log
    own.write_text("".join(r.dumps() + "\n" for r in records if r.key == tasks[0].key))
    _check_log(str(own), tasks[0], sum(r.key == tasks[0].key for r in trials))


def test_arguments_are_checked(client):
    with pytest.raises(TypeError, match="distributed.Client"):
        autotune.DaskBuilder("tcp://localhost:8786")
    with pytest.raises(ValueError, match="timeout must be > 0"):
        autotune.DaskBuilder(client, timeout=0)
    with pytest.raises(ValueError, match="number and repeat must be >= 1"):
        autotune.DaskRunner(client, number=0)


def test_cpu_difference_names_what_differs():
    host = dask_measure.host_cpu()
    assert dask_measure.cpu_difference(host, host) == ""
    other = dict(host, cpu="other", isa=host["isa"][1:] + ["amx-tile"])
    said = dask_measure.cpu_difference(host, other)
    assert f"CPU other instead of {host['cpu']}" in said
    assert f"lacks {host['isa'][0]}" in said and "also has amx-tile" in said


def _listener(on_accept):
    """A tcp:// address whose listener hands each accepted socket to on_accept (in a thread)."""
    import socket

    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        with server:
            conn, _ = server.accept()
            on_accept(conn)

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{server.getsockname()[1]}"


def _silent(conn):
    time.sleep(5)  # past the test's greeting timeout
    conn.close()


def _http(conn):
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    time.sleep(1)
    conn.close()


def _reset(conn):
    import socket
    import struct

    time.sleep(0.2)  # the client waits for a greeting by then (a reset during its connect is
    # a failed connect, which the Client retries)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()  # a linger of 0: the peer gets a reset, not an end of stream


def _hang_up(conn):
    conn.shutdown(2)
    time.sleep(1)
    conn.close()


@pytest.mark.parametrize("listener, message", [
    (_silent, r"accepted the connection but sent nothing in 0.5 s, where a dask scheduler greets"),
    (_http, r"does not speak dask's protocol \(its first bytes: b'HTTP/1.1'\)"),
    (_reset, r"dropped the connection before greeting as a dask scheduler does"),
    (_hang_up, r"closed the connection before greeting as a dask scheduler does"),
])
def test_an_address_that_is_not_a_dask_scheduler_is_refused_at_once(listener, message,
                                                                    monkeypatch):
    # distributed's Client would wait forever on the silent listener (its connect timeout does
    # not cover the handshake) and read the HTTP reply as a frame length of exabytes
    monkeypatch.setattr(dask_measure, "CONNECT_TIMEOUT_S", 0.5)
    address = _listener(listener)
    t0 = time.monotonic()
    with pytest.raises(dask_measure.DaskClusterError, match=message):
        dask_measure.dask_measure_option(address)
    assert time.monotonic() - t0 < 20
