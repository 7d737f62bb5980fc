"""FMA peak probe: GFLOP/s of a loop of independent <16 x float> fused multiply-adds (enough
independent chains to cover the FMA latency on both pipes), on one core and on all cores through
the thread pool. The ceiling that GFLOP/s figures in BENCHMARKS.md are compared against.

Where the CPU has AVX-512 VNNI, the int8 peak too (issue 22): the same loop of independent
vpdpbusd (64 uint8 x int8 multiply-adds into 16 int32 lanes each = 128 int8 ops), in GOPS.

    python benchmarks/peak.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from tensorlang.runtime import Module

from tensorlang.codegen.target import Target, compile_ir

CHAINS = 16  # independent accumulators: latency 4 x 2 pipes needs >= 8; 16 leaves margin
LANES = 16
ITERS = 1 << 16


VNNI = "llvm.x86.avx512.vpdpbusd.512"
_KINDS = {  # element type, add, the update of chain c, the declaration
    "fma": ("float", "fadd", ("call <16 x float> @llvm.fma.v16f32(<16 x float> %a{c}, "
            "<16 x float> %m, <16 x float> %y)"),
            "declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)"),
    "vnni": ("i32", "add", (f"call <16 x i32> @{VNNI}(<16 x i32> %a{{c}}, <64 x i8> %mb, "
             "<64 x i8> %yb)"),
             f"declare <16 x i32> @{VNNI}(<16 x i32>, <64 x i8>, <64 x i8>)"),
}
OPS_PER_UPDATE = {"fma": 2 * LANES, "vnni": 2 * 64}


def _kernel_ir(target: Target, kind: str = "fma") -> str:
    """out[task] = sum of CHAINS vectors, each updated ITERS times by acc = acc * x + y (fma) or
    acc += dot4(m, y) (vnni), run on every task of the pool (the body of a parallel region
    written by hand)."""
    elem, add, update, decl = _KINDS[kind]
    vt = f"<{LANES} x {elem}>"
    phis, updates, red, inits = [], [], [], []
    for c in range(CHAINS):
        # distinct starting values read from memory: nothing to fold or merge at compile time
        cst = f"{c}.0" if elem == "float" else str(c)
        inits.append(f"  %v{c} = {add} {vt} %x, <{', '.join([f'{elem} {cst}'] * LANES)}>")
        phis.append(f"  %a{c} = phi {vt} [%v{c}, %entry], [%n{c}, %loop]")
        updates.append(f"  %n{c} = " + update.format(c=c))
    red.append(f"  %s0 = {add} {vt} %n0, %n1")
    for c in range(2, CHAINS):
        red.append(f"  %s{c - 1} = {add} {vt} %s{c - 2}, %n{c}")
    last = f"%s{CHAINS - 2}"
    attrs = f'"target-cpu"="{target.cpu}" "target-features"="{target.features}"'
    return f"""
{decl}
@__tl_parallel_launch = global ptr null

define internal i32 @body(i32 %task, i32 %ntasks, ptr %out) nounwind {attrs} {{
entry:
  %x = load {vt}, ptr %out, align 4
  %mp = getelementptr float, ptr %out, i64 16
  %m = load {vt}, ptr %mp, align 4
  %yp = getelementptr float, ptr %out, i64 32
  %y = load {vt}, ptr %yp, align 4
  %mb = bitcast {vt} %m to <64 x i8>
  %yb = bitcast {vt} %y to <64 x i8>
{chr(10).join(inits)}
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
{chr(10).join(phis)}
{chr(10).join(updates)}
  %i1 = add i64 %i, 1
  %c = icmp slt i64 %i1, {ITERS}
  br i1 %c, label %loop, label %done
done:
{chr(10).join(red)}
  %e = extractelement {vt} {last}, i32 0
  %t = sext i32 %task to i64
  %t48 = add i64 %t, 48
  %p = getelementptr {elem}, ptr %out, i64 %t48
  store {elem} %e, ptr %p
  ret i32 0
}}

define i32 @peak(ptr %out, i64 %parallel) nounwind {attrs} {{
entry:
  %par = icmp ne i64 %parallel, 0
  br i1 %par, label %pool, label %single
pool:
  %launch = load ptr, ptr @__tl_parallel_launch
  %rc = call i32 %launch(ptr @body, ptr %out, i32 0)
  ret i32 %rc
single:
  %rc1 = call i32 @body(i32 0, i32 1, ptr %out)
  ret i32 %rc1
}}
"""


def measure_peak(repeats: int = 15, kind: str = "fma") -> dict:
    """{"1 core": (best, median), "all cores": (best, median)} in GFLOP/s (fma) or int8 GOPS
    (vnni: needs a CPU with AVX-512 VNNI), plus "cpu"."""
    target = Target.host()
    if kind == "vnni" and not target.has_feature("avx512vnni"):
        raise RuntimeError(f"measure_peak: {target.cpu} has no AVX-512 VNNI")
    obj = compile_ir(_kernel_ir(target, kind), target)
    manifest = {"name": "peak", "symbol": "peak",
                "args": [{"name": "out", "shape": [64], "dtype": "float32", "written": True}],
                "vars": [], "target": target.to_dict(), "version": "0.1.0"}
    mod = Module.from_object(obj.object_code, manifest)
    out = np.zeros(64, dtype=np.float32)
    out[16:32] = 0.999  # multiplier just below 1 and a small addend: values stay finite
    out[32:48] = 1e-3
    flop_per_task = float(OPS_PER_UPDATE[kind]) * CHAINS * ITERS
    res: dict = {"cpu": f"{target.cpu}, {target.num_cores} cores, {target.vector_bits}-bit vectors"}
    for label, parallel, tasks in (("1 core", 0, 1), ("all cores", 1, target.num_cores)):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            mod.call_raw(out.ctypes.data, parallel)
            times.append(time.perf_counter() - t0)
        flop = flop_per_task * tasks
        res[label] = (flop / min(times) / 1e9, flop / statistics.median(times) / 1e9)
    return res


def main() -> None:
    res = measure_peak()
    print(f"CPU {res['cpu']}")
    for label in ("1 core", "all cores"):
        best, med = res[label]
        print(f"{label:>9}: peak {best:7.1f} GFLOP/s (best), {med:7.1f} (median)")
    if Target.host().has_feature("avx512vnni"):
        res = measure_peak(kind="vnni")
        for label in ("1 core", "all cores"):
            best, med = res[label]
            print(f"{label:>9}: int8 VNNI peak {best:7.1f} GOPS (best), {med:7.1f} (median)")


if __name__ == "__main__":
    main()
