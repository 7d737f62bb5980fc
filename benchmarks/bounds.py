"""What the static bounds proof (tensorlang.analysis.bounds) costs per kernel, and which reads it
leaves to the run-time check (lower/passes/check_indices.py).

    python benchmarks/bounds.py [--seeds 10] [--size 224] [--skip-resnet]

Kernels:
  fuzzer        the schedule fuzzer's computes (tests/tensorlang/schedule_fuzz_cases.py) under
                its random schedules (cache_read / cache_write / rfactor add computes of their own)
  library       a few library ops with their default schedules (gather, reflect and edge pad,
                pooling, softmax, layer norm, depthwise and NCHWc convs, a matmul)
  ResNet-50     every distinct kernel of graph.build's lowering of model_zoo.resnet50 (fused
                conv + bn + relu, residual adds, pools, Gemm), default schedules

Rows (microseconds of CPU time per kernel, i.e. per tl.lower call; median, p99, max; CPU time,
not wall time, since the machines these run on are shared and a wall-clock figure would include
other processes' time slices):
  cold          the proof of a kernel's computes with every cache cleared (best of 3): what a
                kernel never seen before in this process costs
  in tl.lower   the proof as tl.lower runs it (memoized per compute op; isl's verdicts cached
                by text, so a compute re-declared alike costs a walk, not an isl call)
Then every access that is not proven at compile time, with the reason (each gets the run-time
check), and any refused one (a refusal of a library op would be a bug in the proof)."""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import tensorlang as tl
from tensorlang.analysis import bounds

_TIMES: list = []


def _timed_check_bounds(schedule):
    t0 = time.thread_time()
    try:
        return _ORIGINAL(schedule)
    finally:
        _TIMES.append(time.thread_time() - t0)


_ORIGINAL = bounds.check_bounds


def cold_proof(schedule, repeat: int = 3) -> tuple[float, list]:
    """(seconds, proofs) of proving a schedule's computes with every cache cleared (the best
    of `repeat`: the machine is shared, and a pause of another process is not the proof's)."""
    best, proofs = float("inf"), []
    for _ in range(repeat):
        gc.collect()
        bounds._PROOFS.clear()
        bounds._DECIDED.clear()
        t0 = time.thread_time()
        proofs = [bounds.prove_op(st.op) for st in schedule.stages
                  if isinstance(st.op, tl.te.ComputeOp)]
        best = min(best, time.thread_time() - t0)
    return best, proofs


def lowered(schedule, args) -> float | None:
    """The seconds of the proof inside tl.lower (None when it never ran: another check, such
    as the legality check before it, refused the schedule)."""
    n = len(_TIMES)
    gc.collect()  # a collection the earlier kernels' garbage triggers is not the proof's time
    try:
        tl.lower(schedule, args)
    except tl.TensorlangError as e:
        if len(_TIMES) == n or "out of bounds" in str(e) or "in bounds" in str(e):
            raise
    return sum(_TIMES[n:])


# ----------------------------------------------------------------------------- kernels


def fuzzer_kernels(seeds: int):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tensorlang"))
    try:
        from schedule_fuzz import draw_schedule
        from schedule_fuzz_cases import CASES
    except ImportError as e:
        print(f"(no schedule fuzzer here: {e})")
        return
    for name in CASES:
        for seed in range(seeds):
            case, s, _ = draw_schedule(name, seed)
            yield f"{name}#{seed}", s, [*case.inputs, *case.outputs]


def library_kernels():
    ops = tl.ops
    X = tl.placeholder((1, 16, 14, 14), name="X")
    Ix = tl.placeholder((7,), dtype="int64", name="Ix")
    M = tl.placeholder((64, 96), name="M")
    W = tl.placeholder((96, 32), name="W")
    Wd = tl.placeholder((16, 1, 3, 3), name="Wd")
    made = {
        "gather": lambda: ([X, Ix], ops.gather(X, Ix, 2)),
        "pad_reflect": lambda: ([X], ops.pad(X, [(0, 0), (0, 0), (2, 2), (1, 3)],
                                             mode="reflect")),
        "pad_edge": lambda: ([X], ops.pad(X, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="edge")),
        "max_pool_dilated": lambda: ([X], ops.max_pool2d(X, 3, 1, (1, 1, 1, 1), dilation=2)),
        "avg_pool": lambda: ([X], ops.avg_pool2d(X, 3, 2, (1, 1, 1, 1))),
        "softmax": lambda: ([M], ops.softmax(M, axis=-1)),
        "layer_norm": lambda: ([M], ops.layer_norm(M, axis=-1)),
        "depthwise": lambda: ([X, Wd], ops.depthwise_conv2d_nchw(X, Wd, 1, 1)),
        "matmul": lambda: ([M, W], ops.matmul(M, W)),
    }
    for name, make in made.items():
        try:
            ins, out = make()
        except (TypeError, ValueError) as e:  # an op whose signature differs here: say so
            print(f"(library op {name} skipped: {e})")
            continue
        yield name, tl.ops.default_schedule(out), [*ins, out]


def resnet50_kernels(size: int):
    from tensorlang.graph import model_zoo
    from tensorlang.graph import op_registry as R
    from tensorlang.graph.build import schedule_candidates, workload_key
    from tensorlang.graph.fused_group import group_of
    from tensorlang.graph.lowering import lower
    from tensorlang.graph.passes import run_passes

    from tensorlang import graph

    g = run_passes(graph.from_onnx(model_zoo.resnet50(size=size)), 2)
    seen = set()
    for n in g.nodes:
        if R.get_op(n.op).alias:
            continue
        in_types = [(v.shape, v.dtype) for v in n.inputs]
        out_types = [(v.shape, v.dtype) for v in n.outputs]
        key = workload_key(n.op, n.attrs, in_types, out_types)
        if key in seen:
            continue
        seen.add(key)
        group = group_of(n)
        label = n.op if group is None else "+".join(group.ops)
        for candidate in ("default", "naive"):  # as graph.build tries them
            ins, outs = lower(n.op, n.attrs, in_types, out_types)
            try:
                s = dict(schedule_candidates(outs))[candidate]()
            except tl.ScheduleError:
                continue
            yield label, s, [*ins, *outs]
            break


# ----------------------------------------------------------------------------- report


def _row(label: str, timed: list) -> str:
    """timed: (seconds, kernel label) pairs."""
    if not timed:
        return f"  {label:<24} (none)"
    us = sorted(x * 1e6 for x, _ in timed)
    p99 = us[min(len(us) - 1, round(0.99 * (len(us) - 1)))]
    slowest = max(timed)[1]
    return (f"  {label:<24} median {statistics.median(us):8.0f}  p99 {p99:8.0f}  "
            f"max {us[-1]:8.0f} ({slowest})  ({len(us)} kernels)")


def measure(title: str, kernels, unproven: dict) -> None:
    cold, warm, isl_used, refused, other = [], [], 0, 0, 0
    for label, s, args in kernels:
        try:
            warm.append((lowered(s, args), label))  # first: fresh computes, as in a build
        except tl.TensorlangError as e:
            if "bounds" in str(e):
                refused += 1
                print(f"  {label}: {type(e).__name__}: {e}")
            else:  # refused before the proof ran (the fuzzer draws illegal schedules)
                other += 1
        seconds, proofs = cold_proof(s)
        cold.append((seconds, label))
        for p in proofs:
            if any(a.how == "isl" for a in p.accesses):
                isl_used += 1
            for a in p.accesses:
                if a.status != bounds.PROVEN:
                    kind = label.split("#")[0]
                    unproven.setdefault((kind, a.compute, a.read, a.dim, a.status, a.how), 0)
                    unproven[(kind, a.compute, a.read, a.dim, a.status, a.how)] += 1
    print(f"{title}: bounds proof per kernel, microseconds")
    print(_row("cold", cold))
    print(_row("in tl.lower", warm))
    print(f"  computes that needed isl: {isl_used}; kernels refused by the proof: {refused}; "
          f"schedules refused by other checks first: {other}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="random schedules per fuzzer compute")
    ap.add_argument("--size", type=int, default=224, help="ResNet-50 input size")
    ap.add_argument("--skip-resnet", action="store_true")
    a = ap.parse_args()
    bounds.check_bounds = _timed_check_bounds  # tl.lower looks it up at each call
    unproven: dict = {}
    measure(f"fuzzer computes, {a.seeds} random schedules each", fuzzer_kernels(a.seeds),
            unproven)
    measure("library ops, default schedules", library_kernels(), unproven)
    if not a.skip_resnet:
        measure(f"ResNet-50 ({a.size}x{a.size}) kernels, default schedules",
                resnet50_kernels(a.size), unproven)
    print("accesses not proven at compile time (kernel set, compute, read, dimension: verdict):")
    if not unproven:
        print("  none")
    for (kind, compute, read, dim, status, how), count in sorted(unproven.items()):
        print(f"  {kind}: {compute} reads {read}, dimension {dim}: {status}: {how}"
              + (f" (x{count})" if count > 1 else ""))


if __name__ == "__main__":
    main()
