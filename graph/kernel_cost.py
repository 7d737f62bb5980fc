"""The time ``gm.plan`` shows for a kernel that nobody measured: a roofline estimate.

A kernel's work is counted on its computes (floating-point operations, and the bytes of its
arguments: what it must read and write at least); its time is estimated as
``max(flops / compute throughput, bytes / bandwidth)``, with this machine's two figures measured
with our own default schedules (a 512^3 matmul, a 64 MB copy) on all the threads kernels use
(the best of five timings each), once per machine. A rough figure: it takes every argument
byte from memory (a kernel whose arguments stay in cache runs faster) and every FLOP at the
matmul's rate (most kernels reach less). On ResNet-50 the profiled kernel times were 0.45-4.6x
their estimates, median 1.9x. A tuned kernel shows the time its tuning record measured instead,
and ``gm.profile()`` replaces both with times measured in the model.
"""

from __future__ import annotations

import json
import math
import threading

import numpy as np

from tensorlang.ir import expr as E
from tensorlang.ir.functor import count_arith
from tensorlang.te.tensor import ComputeOp, Reduce


def _extent_product(axes) -> int:
    return math.prod(E.as_int(iv.dom.extent) or 1 for iv in axes)


def kernel_work(inputs, outputs) -> tuple[float, float]:
    """(floating-point operations, bytes of the arguments) of the kernel computing ``outputs``
    from ``inputs`` (te tensors): every compute between them counted over its whole domain
    (a reduction's combine step counts once per reduced element)."""
    flops = 0.0
    seen: set[int] = set()
    stack = [t.op for t in outputs]
    while stack:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, ComputeOp):
            continue
        seen.add(id(op))
        trips = _extent_product(op.axis) * _extent_product(op.reduce_axis)
        per_point = 0
        for body in op.body:
            if isinstance(body, Reduce):
                per_point += 1 + sum(count_arith(x) for x in body.source)
            else:
                per_point += count_arith(body)
        flops += float(trips * per_point)
        stack.extend(t.op for t in op.input_tensors)
    nbytes = sum(math.prod(E.as_int(d) or 1 for d in t.shape) * np.dtype(t.dtype).itemsize
                 for t in (*inputs, *outputs))
    return flops, float(nbytes)


# ------------------------------------------------------------------------------- roofline

_lock = threading.Lock()
_ROOFLINE: dict[str, tuple[float, float]] = {}


def _measure_roofline(target) -> tuple[float, float]:
    """(FLOP/s of the default 512^3 matmul, bytes/s of the default copy of 64 MB) here."""
    import tensorlang as tl

    n = 512
    a = tl.placeholder((n, n), name="A")
    b = tl.placeholder((n, n), name="B")
    c = tl.ops.matmul(a, b)
    mm = tl.build(tl.ops.default_schedule(c), [a, b, c], target=target, name="roofline_matmul")
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    t_mm = mm.time_evaluator(number=5, repeat=5)(x, y, np.empty((n, n), np.float32)).min

    m = 8 << 20  # 32 MB read, 32 MB written: far beyond the caches
    src = tl.placeholder((m,), name="src")
    dst = tl.compute((m,), lambda i: src[i], name="copy")
    cp = tl.build(tl.ops.default_schedule(dst), [src, dst], target=target, name="roofline_copy")
    t_cp = cp.time_evaluator(number=3, repeat=5)(np.ones(m, np.float32),
                                                 np.empty(m, np.float32)).min
    return 2.0 * n ** 3 / t_mm, 2.0 * 4 * m / t_cp


def machine_roofline(target) -> tuple[float, float]:
    """(FLOP/s, bytes/s) that kernels reach on this machine with ``target``: measured on the
    first call on a machine (~0.3 s with the two kernels in the compile cache, ~1 s without),
    then read from ``roofline.json`` in the cache directory (per target, thread count and
    tensorlang version; delete the file to measure again, e.g. after a measurement taken while
    the machine was busy)."""
    from tensorlang.runtime import get_num_threads
    from tensorlang.runtime._cache import atomic_write, cache_dir

    from tensorlang.version import __version__

    key = json.dumps([target.to_dict(), get_num_threads(), __version__], sort_keys=True)
    with _lock:
        if key in _ROOFLINE:
            return _ROOFLINE[key]
        path = cache_dir() / "roofline.json"
        try:
            known = json.loads(path.read_text())
        except (OSError, ValueError):  # none yet, or unreadable: measure
            known = {}
        if not isinstance(known, dict):
            known = {}
        entry = known.get(key)
        if not (isinstance(entry, list) and len(entry) == 2
                and all(isinstance(v, (int, float)) and v > 0 for v in entry)):
            entry = known[key] = list(_measure_roofline(target))
            try:
                atomic_write(path, json.dumps(known, indent=1).encode())
            except OSError:  # the cache is a speed-up: a build never fails over it
                pass
        _ROOFLINE[key] = (float(entry[0]), float(entry[1]))
        return _ROOFLINE[key]


def estimate_seconds(flops: float, nbytes: float) -> float:
    """The roofline time, on this machine, of a kernel doing ``flops`` operations on ``nbytes``
    of arguments (measured with the host's own target: graph.build compiles for this machine's
    architecture, and a target naming another CPU may use instructions this one lacks)."""
    from tensorlang.codegen.target import Target

    peak, bandwidth = machine_roofline(Target.host())
    return max(flops / peak, nbytes / bandwidth)


def flops_per_byte() -> float:
    """This machine's FLOP/s over its memory bytes/s (the roofline's ridge point, host target):
    where a kernel doing fewer FLOPs per byte it streams from memory waits on memory."""
    from tensorlang.codegen.target import Target

    peak, bandwidth = machine_roofline(Target.host())
    return peak / bandwidth
