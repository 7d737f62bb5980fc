"""Runtime overheads: thread-pool launch latency (from native code and from Python), the cost of
a checked kernel call against a raw one, and the cost of loading a module each way.

    python benchmarks/runtime_overhead.py [--iters 200000]

Every figure is the median of 5 rounds. "launch, native" is an empty parallel region launched in
a loop by generated code (what a kernel's parallel loop pays); "launch, Python" calls
tl_parallel_launch through ctypes. "2 threads" regions need a second core: on an oversubscribed
machine they measure the scheduler instead.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from tensorlang.runtime import Module, _link, get_num_threads, load_module, threadpool

from tensorlang.codegen.target import Target, compile_ir

BENCH_IR = """
@__tl_parallel_launch = global ptr null, align 8

define i32 @empty_task(i32 %t, i32 %n, ptr %c) {
  ret i32 0
}

; launch_loop(unused: int8[1], iters, tasks): `iters` empty parallel regions of `tasks` tasks.
define i32 @launch_loop(ptr %unused, i64 %iters, i64 %tasks) {
entry:
  %launch = load ptr, ptr @__tl_parallel_launch, align 8
  %nt = trunc i64 %tasks to i32
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %r = call i32 %launch(ptr @empty_task, ptr null, i32 %nt)
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %iters
  br i1 %more, label %loop, label %out
out:
  ret i32 0
}

define i32 @add3(ptr noalias %a, ptr noalias %b, ptr noalias %c, i64 %n) {
entry:
  br label %cond
cond:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %exit
body:
  %pa = getelementptr float, ptr %a, i64 %i
  %pb = getelementptr float, ptr %b, i64 %i
  %va = load float, ptr %pa, align 4
  %vb = load float, ptr %pb, align 4
  %s = fadd float %va, %vb
  %pc = getelementptr float, ptr %c, i64 %i
  store float %s, ptr %pc, align 4
  %i1 = add i64 %i, 1
  br label %cond
exit:
  ret i32 0
}
"""


def _median_per_call(fn, iters: int, rounds: int = 5) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(iters)
        samples.append((time.perf_counter() - t0) / iters)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200_000)
    ap.add_argument("--idle-rounds", type=int, default=40)
    args = ap.parse_args()
    iters = args.iters

    target = Target.host()
    compiled = compile_ir(BENCH_IR, target)
    tmeta = target.to_dict()
    loop = Module.from_object(
        compiled.object_code,
        {
            "name": "launch_loop",
            "symbol": "launch_loop",
            "args": [{"name": "unused", "shape": [1], "dtype": "int8", "written": False}],
            "vars": ["iters", "tasks"],
            "target": tmeta,
        },
    )
    add_manifest = {
        "name": "add3",
        "symbol": "add3",
        "args": [
            {"name": "a", "shape": ["n"], "dtype": "float32", "written": False},
            {"name": "b", "shape": ["n"], "dtype": "float32", "written": False},
            {"name": "c", "shape": ["n"], "dtype": "float32", "written": True},
        ],
        "vars": ["n"],
        "target": tmeta,
    }
    add = Module.from_object(compiled.object_code, add_manifest)
    unused = np.zeros(1, np.int8)
    p_unused = unused.ctypes.data
    rows: list[tuple[str, float]] = []

    print(f"host: {target.cpu}, {get_num_threads()} pool threads\n")
    for tasks, label in ((1, "1 task (serial path)"), (0, f"{get_num_threads()} threads")):
        t = _median_per_call(lambda n, tasks=tasks: loop.call_raw(p_unused, n, tasks), iters * 5)
        rows.append((f"launch, native, {label}", t))

    launch = threadpool.pool().launch
    lib = ctypes.CDLL(loop.loaded_via[len("shared library ") :])
    empty = ctypes.cast(lib.empty_task, ctypes.c_void_p).value

    for tasks, label in ((1, "1 task (serial path)"), (0, f"{get_num_threads()} threads")):

        def py_launch(n: int, tasks: int = tasks) -> None:
            for _ in range(n):
                launch(empty, None, tasks)

        rows.append((f"launch, Python ctypes, {label}", _median_per_call(py_launch, iters)))

    a = np.ones(16, np.float32)
    b = np.ones(16, np.float32)
    c = np.zeros(16, np.float32)
    raw = add.prepare_args(a, b, c)

    def checked(n: int) -> None:
        for _ in range(n):
            add(a, b, c)

    def raw_call(n: int) -> None:
        f = add.call_raw
        for _ in range(n):
            f(*raw)

    def prepare(n: int) -> None:
        for _ in range(n):
            add.prepare_args(a, b, c)

    rows.append(("checked call add3(a, b, c), n=16", _median_per_call(checked, iters)))
    rows.append(("Module.call_raw(*ints), n=16", _median_per_call(raw_call, iters)))
    rows.append(("Module.prepare_args (general path)", _median_per_call(prepare, iters)))
    rows.append(
        ("time_evaluator: per call, native loop", add.time_evaluator(1000, 5)(a, b, c).median)
    )

    # Loading: link + dlopen (first time), dlopen of a cached library, artifact, JIT.
    with tempfile.TemporaryDirectory() as tmp:
        so = Path(tmp) / "k.so"
        t0 = time.perf_counter()
        _link.link_shared(compiled.object_code, so)
        rows.append(
            ("link object -> .so (" + _link.linker_command()[0] + ")", time.perf_counter() - t0)
        )
        t0 = time.perf_counter()
        Module(compiled.object_code, add_manifest, library=so)
        rows.append(("Module from a linked .so (dlopen)", time.perf_counter() - t0))
        art = Path(tmp) / "add3.tlm"
        add.save(art)
        t0 = time.perf_counter()
        load_module(art)
        rows.append(("load_module(.tlm)", time.perf_counter() - t0))
        t0 = time.perf_counter()
        Module.from_object(compiled.object_code, add_manifest, loader="jit")
        rows.append(("Module via ORC JIT", time.perf_counter() - t0))

    width = max(len(name) for name, _ in rows)
    for name, t in rows:
        unit, scale = ("us", 1e6) if t < 1e-3 else ("ms", 1e3)
        print(f"{name:<{width}}  {t * scale:9.3f} {unit}")
    print(after_idle(args.idle_rounds))


def after_idle(rounds: int, pause: float = 0.2, calls: int = 8) -> str:
    """A parallel kernel called in bursts after idle pauses (a server between requests): the
    pool's worker has gone to sleep and is woken by the burst's first call. Reports the median
    call against back-to-back calls, and how many bursts ran at half speed or worse."""
    import tensorlang as tl

    a_ph, b_ph = tl.placeholder((512, 512), name="A"), tl.placeholder((512, 512), name="B")
    c_ph = tl.ops.matmul(a_ph, b_ph)
    f = tl.build(tl.ops.default_schedule([c_ph]), [a_ph, b_ph, c_ph])
    a, b, c = (tl.runtime.array(np.ones((512, 512), np.float32)) for _ in range(3))
    hot = f.time_evaluator(number=20, repeat=5)(a, b, c).median
    bursts = []
    for _ in range(rounds):
        time.sleep(pause)
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            f(a, b, c)
            times.append(time.perf_counter() - t0)
        bursts.append(statistics.median(times))
    slow = sum(t > 1.8 * hot for t in bursts)
    return (f"\nmatmul 512^3 in bursts of {calls} calls after {pause} s pauses: median call "
            f"{1e3 * statistics.median(bursts):.3f} ms (back to back {1e3 * hot:.3f} ms); "
            f"{slow} of {rounds} bursts at half speed or worse")


if __name__ == "__main__":
    main()
