"""Hand-written LLVM IR kernels that follow the kernel ABI, and helpers to build them.

ABI: ``i32 @sym(ptr arg0, ..., i64 var0, ...)``; 0 = success. Parallel loops are outlined into
``i32 body(i32 task, i32 num_tasks, ptr closure)`` and launched through the pointer stored in
``@__tl_parallel_launch`` -- exactly what the emitter produces.
"""

from __future__ import annotations

from typing import Any

from tensorlang.runtime import Module

from tensorlang.codegen.target import Target, compile_ir

ATTRS = 'attributes #0 = { nounwind "prefer-vector-width"="512" }'
LAUNCH_GLOBAL = "@__tl_parallel_launch = global ptr null, align 8"

ADD_IR = f"""
{LAUNCH_GLOBAL}

define i32 @add(ptr noalias %a, ptr noalias %b, ptr noalias %c, i64 %n) #0 {{
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
}}
{ATTRS}
"""

# pfill(out: float32[n], tids: int64[T], sync: int32[3]): T tasks fill out[i] = 2*i in chunks,
# each recording pthread_self() in tids[task]. sync = [arrivals, rendezvous?, failing task+1]:
# with rendezvous set, the first two tasks to start wait (bounded) for each other, which can
# only end well if two threads run them at the same time; a failing task returns 7.
PFILL_IR = f"""
{LAUNCH_GLOBAL}
%closure = type {{ ptr, ptr, ptr, i64 }}

declare i64 @pthread_self()
declare i64 @llvm.readcyclecounter()
declare void @llvm.x86.sse2.pause()

define internal i32 @pfill_body(i32 %t, i32 %nt, ptr %cl) #0 {{
entry:
  %outp = getelementptr %closure, ptr %cl, i32 0, i32 0
  %tidsp = getelementptr %closure, ptr %cl, i32 0, i32 1
  %syncp = getelementptr %closure, ptr %cl, i32 0, i32 2
  %np = getelementptr %closure, ptr %cl, i32 0, i32 3
  %out = load ptr, ptr %outp
  %tids = load ptr, ptr %tidsp
  %sync = load ptr, ptr %syncp
  %n = load i64, ptr %np
  %self = call i64 @pthread_self()
  %t64 = sext i32 %t to i64
  %tp = getelementptr i64, ptr %tids, i64 %t64
  store i64 %self, ptr %tp
  %failp = getelementptr i32, ptr %sync, i64 2
  %failv = load i32, ptr %failp
  %tplus = add i32 %t, 1
  %isfail = icmp eq i32 %failv, %tplus
  br i1 %isfail, label %fail7, label %check_sync
fail7:
  ret i32 7
check_sync:
  %flagp = getelementptr i32, ptr %sync, i64 1
  %flag = load i32, ptr %flagp
  %wantsync = icmp ne i32 %flag, 0
  br i1 %wantsync, label %arrive, label %fill
arrive:
  %old = atomicrmw add ptr %sync, i32 1 seq_cst
  %first2 = icmp slt i32 %old, 2
  br i1 %first2, label %wait_start, label %fill
wait_start:
  %c0 = call i64 @llvm.readcyclecounter()
  br label %wait
wait:
  %cur = load atomic i32, ptr %sync seq_cst, align 4
  %ok = icmp sge i32 %cur, 2
  br i1 %ok, label %fill, label %wait_more
wait_more:
  call void @llvm.x86.sse2.pause()
  %c1 = call i64 @llvm.readcyclecounter()
  %el = sub i64 %c1, %c0
  %timeout = icmp ugt i64 %el, 20000000000
  br i1 %timeout, label %fail3, label %wait
fail3:
  ret i32 3
fill:
  %nt64 = sext i32 %nt to i64
  %n1 = add i64 %n, %nt64
  %n2 = sub i64 %n1, 1
  %chunk = sdiv i64 %n2, %nt64
  %lo = mul i64 %chunk, %t64
  %hi0 = add i64 %lo, %chunk
  %big = icmp sgt i64 %hi0, %n
  %hi = select i1 %big, i64 %n, i64 %hi0
  br label %loop
loop:
  %i = phi i64 [ %lo, %fill ], [ %i1, %body ]
  %more = icmp slt i64 %i, %hi
  br i1 %more, label %body, label %done
body:
  %f = sitofp i64 %i to float
  %v = fmul float %f, 2.0
  %p = getelementptr float, ptr %out, i64 %i
  store float %v, ptr %p, align 4
  %i1 = add i64 %i, 1
  br label %loop
done:
  ret i32 0
}}

define i32 @pfill(ptr %out, ptr %tids, ptr %sync, i64 %n, i64 %T) #0 {{
entry:
  %cl = alloca %closure, align 8
  %f0 = getelementptr %closure, ptr %cl, i32 0, i32 0
  store ptr %out, ptr %f0
  %f1 = getelementptr %closure, ptr %cl, i32 0, i32 1
  store ptr %tids, ptr %f1
  %f2 = getelementptr %closure, ptr %cl, i32 0, i32 2
  store ptr %sync, ptr %f2
  %f3 = getelementptr %closure, ptr %cl, i32 0, i32 3
  store i64 %n, ptr %f3
  %launch = load ptr, ptr @__tl_parallel_launch, align 8
  %T32 = trunc i64 %T to i32
  %r = call i32 %launch(ptr @pfill_body, ptr %cl, i32 %T32)
  ret i32 %r
}}
{ATTRS}
"""

# nested(out: int32[T, M]): T outer tasks, each launching M inner tasks that add 1 to its row.
NESTED_IR = f"""
{LAUNCH_GLOBAL}
%outer_cl = type {{ ptr, i64 }}

define internal i32 @inner(i32 %j, i32 %nj, ptr %row) #0 {{
  %j64 = sext i32 %j to i64
  %p = getelementptr i32, ptr %row, i64 %j64
  %v = load i32, ptr %p
  %v1 = add i32 %v, 1
  store i32 %v1, ptr %p
  ret i32 0
}}

define internal i32 @outer(i32 %t, i32 %nt, ptr %cl) #0 {{
  %outp = getelementptr %outer_cl, ptr %cl, i32 0, i32 0
  %mp = getelementptr %outer_cl, ptr %cl, i32 0, i32 1
  %out = load ptr, ptr %outp
  %m = load i64, ptr %mp
  %t64 = sext i32 %t to i64
  %off = mul i64 %t64, %m
  %row = getelementptr i32, ptr %out, i64 %off
  %launch = load ptr, ptr @__tl_parallel_launch, align 8
  %m32 = trunc i64 %m to i32
  %r = call i32 %launch(ptr @inner, ptr %row, i32 %m32)
  ret i32 %r
}}

define i32 @nested(ptr %out, i64 %T, i64 %M) #0 {{
  %cl = alloca %outer_cl, align 8
  %f0 = getelementptr %outer_cl, ptr %cl, i32 0, i32 0
  store ptr %out, ptr %f0
  %f1 = getelementptr %outer_cl, ptr %cl, i32 0, i32 1
  store i64 %M, ptr %f1
  %launch = load ptr, ptr @__tl_parallel_launch, align 8
  %T32 = trunc i64 %T to i32
  %r = call i32 %launch(ptr @outer, ptr %cl, i32 %T32)
  ret i32 %r
}}
{ATTRS}
"""

# mix(x: float16[n], m: bool[n], y: float32[n]): y = m ? x : -1
MIX_IR = f"""
{LAUNCH_GLOBAL}
define i32 @mix(ptr %x, ptr %m, ptr %y, i64 %n) #0 {{
entry:
  br label %cond
cond:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %exit
body:
  %px = getelementptr half, ptr %x, i64 %i
  %vx = load half, ptr %px, align 2
  %fx = fpext half %vx to float
  %pm = getelementptr i8, ptr %m, i64 %i
  %vm = load i8, ptr %pm
  %on = icmp ne i8 %vm, 0
  %v = select i1 %on, float %fx, float -1.0
  %py = getelementptr float, ptr %y, i64 %i
  store float %v, ptr %py, align 4
  %i1 = add i64 %i, 1
  br label %cond
exit:
  ret i32 0
}}
{ATTRS}
"""

# check_positive(a: float32[n]) returns 42 when some a[i] < 0.
CHECK_IR = f"""
{LAUNCH_GLOBAL}
define i32 @check_positive(ptr %a, i64 %n) #0 {{
entry:
  br label %cond
cond:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %ok
body:
  %p = getelementptr float, ptr %a, i64 %i
  %v = load float, ptr %p, align 4
  %neg = fcmp olt float %v, 0.0
  %i1 = add i64 %i, 1
  br i1 %neg, label %bad, label %cond
bad:
  ret i32 42
ok:
  ret i32 0
}}
{ATTRS}
"""

# scale(a: float32[n, 4], k): a *= k, where k appears in no shape (passed as a keyword).
SCALE_IR = f"""
{LAUNCH_GLOBAL}
define i32 @scale(ptr %a, i64 %n, i64 %k) #0 {{
entry:
  %total = mul i64 %n, 4
  %kf = sitofp i64 %k to float
  br label %cond
cond:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %more = icmp slt i64 %i, %total
  br i1 %more, label %body, label %exit
body:
  %p = getelementptr float, ptr %a, i64 %i
  %v = load float, ptr %p, align 4
  %v1 = fmul float %v, %kf
  store float %v1, ptr %p, align 4
  %i1 = add i64 %i, 1
  br label %cond
exit:
  ret i32 0
}}
{ATTRS}
"""


def arg(name: str, shape: list, dtype: str, written: bool = False) -> dict[str, Any]:
    return {"name": name, "shape": shape, "dtype": dtype, "written": written}


def manifest(name: str, args: list[dict], vars_: list[str], **extra: Any) -> dict[str, Any]:
    m = {
        "name": name,
        "symbol": name,
        "args": args,
        "vars": vars_,
        "target": Target.host().to_dict(),
        "version": "0.1.0",
    }
    m.update(extra)
    return m


MANIFESTS = {
    "add": manifest(
        "add",
        [arg("a", ["n"], "float32"), arg("b", ["n"], "float32"), arg("c", ["n"], "float32", True)],
        ["n"],
    ),
    "pfill": manifest(
        "pfill",
        [
            arg("out", ["n"], "float32", True),
            arg("tids", ["T"], "int64", True),
            arg("sync", [3], "int32", True),
        ],
        ["n", "T"],
        error_messages={"7": "task asked to fail", "3": "rendezvous timed out"},
    ),
    "nested": manifest("nested", [arg("out", ["T", "M"], "int32", True)], ["T", "M"]),
    "mix": manifest(
        "mix",
        [arg("x", ["n"], "float16"), arg("m", ["n"], "bool"), arg("y", ["n"], "float32", True)],
        ["n"],
    ),
    "check_positive": manifest(
        "check_positive",
        [arg("a", ["n"], "float32")],
        ["n"],
        error_messages={"42": "negative input"},
    ),
    "scale": manifest("scale", [arg("a", ["n", 4], "float32", True)], ["n", "k"]),
}
IRS = {
    "add": ADD_IR,
    "pfill": PFILL_IR,
    "nested": NESTED_IR,
    "mix": MIX_IR,
    "check_positive": CHECK_IR,
    "scale": SCALE_IR,
}


def build(name: str, loader: str = "auto", want_asm: bool = False) -> Module:
    compiled = compile_ir(IRS[name], Target.host(), want_asm=want_asm)
    sources = {"ll": compiled.optimized_ir, "tir": f"// hand-written kernel {name}\n"}
    if compiled.asm is not None:
        sources["asm"] = compiled.asm
    return Module.from_object(compiled.object_code, MANIFESTS[name], sources, loader=loader)
