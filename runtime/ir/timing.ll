; tensorlang native timing loop: int32_t tl_time_calls(void *fn, const int64_t *args,
; int32_t nargs, int64_t number, int64_t *elapsed_ns) calls the kernel fn `number` times with
; args[0..nargs) and stores the elapsed CLOCK_MONOTONIC nanoseconds, so that timing a small
; kernel does not measure Python's call overhead. Returns -1 for an unsupported arity, else 0 or
; the first nonzero code a call returned.
;
; A call needs a static signature, so there is one loop per arity, @tl_time_calls_0 ..
; @tl_time_calls_32 (MAX_TIMED_ARGS in runtime/threadpool.py), identical but for the loads of
; the arguments and the call; tl_time_calls dispatches on nargs. Every kernel argument (pointer
; or i64) is passed as an i64: both are INTEGER-class, 8-byte values in the x86-64 SysV and
; AArch64 calling conventions, so the call is ABI-identical to the kernel's own signature.
; tests/runtime/test_pool_ir.py checks each arity's loop against this description.
;
declare i32 @clock_gettime(i32, ptr) nounwind

define internal i64 @tl_now_ns() nounwind {
  %ts = alloca { i64, i64 }, align 8
  %r = call i32 @clock_gettime(i32 1, ptr %ts)   ; CLOCK_MONOTONIC
  %sp = getelementptr { i64, i64 }, ptr %ts, i32 0, i32 0
  %np = getelementptr { i64, i64 }, ptr %ts, i32 0, i32 1
  %s = load i64, ptr %sp
  %n = load i64, ptr %np
  %s9 = mul i64 %s, 1000000000
  %t = add i64 %s9, %n
  ret i64 %t
}
define internal i32 @tl_time_calls_0(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn()
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_1(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_2(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_3(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_4(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_5(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_6(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_7(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_8(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_9(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_10(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_11(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_12(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_13(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_14(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_15(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_16(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_17(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_18(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_19(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_20(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_21(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_22(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_23(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_24(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_25(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %p24 = getelementptr i64, ptr %args, i64 24
  %a24 = load i64, ptr %p24
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23, i64 %a24)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_26(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %p24 = getelementptr i64, ptr %args, i64 24
  %a24 = load i64, ptr %p24
  %p25 = getelementptr i64, ptr %args, i64 25
  %a25 = load i64, ptr %p25
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23, i64 %a24, i64 %a25)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_27(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %p24 = getelementptr i64, ptr %args, i64 24
  %a24 = load i64, ptr %p24
  %p25 = getelementptr i64, ptr %args, i64 25
  %a25 = load i64, ptr %p25
  %p26 = getelementptr i64, ptr %args, i64 26
  %a26 = load i64, ptr %p26
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23, i64 %a24, i64 %a25, i64 %a26)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_28(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %p24 = getelementptr i64, ptr %args, i64 24
  %a24 = load i64, ptr %p24
  %p25 = getelementptr i64, ptr %args, i64 25
  %a25 = load i64, ptr %p25
  %p26 = getelementptr i64, ptr %args, i64 26
  %a26 = load i64, ptr %p26
  %p27 = getelementptr i64, ptr %args, i64 27
  %a27 = load i64, ptr %p27
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23, i64 %a24, i64 %a25, i64 %a26, i64 %a27)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_29(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %p24 = getelementptr i64, ptr %args, i64 24
  %a24 = load i64, ptr %p24
  %p25 = getelementptr i64, ptr %args, i64 25
  %a25 = load i64, ptr %p25
  %p26 = getelementptr i64, ptr %args, i64 26
  %a26 = load i64, ptr %p26
  %p27 = getelementptr i64, ptr %args, i64 27
  %a27 = load i64, ptr %p27
  %p28 = getelementptr i64, ptr %args, i64 28
  %a28 = load i64, ptr %p28
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23, i64 %a24, i64 %a25, i64 %a26, i64 %a27, i64 %a28)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_30(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %p24 = getelementptr i64, ptr %args, i64 24
  %a24 = load i64, ptr %p24
  %p25 = getelementptr i64, ptr %args, i64 25
  %a25 = load i64, ptr %p25
  %p26 = getelementptr i64, ptr %args, i64 26
  %a26 = load i64, ptr %p26
  %p27 = getelementptr i64, ptr %args, i64 27
  %a27 = load i64, ptr %p27
  %p28 = getelementptr i64, ptr %args, i64 28
  %a28 = load i64, ptr %p28
  %p29 = getelementptr i64, ptr %args, i64 29
  %a29 = load i64, ptr %p29
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23, i64 %a24, i64 %a25, i64 %a26, i64 %a27, i64 %a28, i64 %a29)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_31(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %p24 = getelementptr i64, ptr %args, i64 24
  %a24 = load i64, ptr %p24
  %p25 = getelementptr i64, ptr %args, i64 25
  %a25 = load i64, ptr %p25
  %p26 = getelementptr i64, ptr %args, i64 26
  %a26 = load i64, ptr %p26
  %p27 = getelementptr i64, ptr %args, i64 27
  %a27 = load i64, ptr %p27
  %p28 = getelementptr i64, ptr %args, i64 28
  %a28 = load i64, ptr %p28
  %p29 = getelementptr i64, ptr %args, i64 29
  %a29 = load i64, ptr %p29
  %p30 = getelementptr i64, ptr %args, i64 30
  %a30 = load i64, ptr %p30
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23, i64 %a24, i64 %a25, i64 %a26, i64 %a27, i64 %a28, i64 %a29, i64 %a30)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define internal i32 @tl_time_calls_32(ptr %fn, ptr %args, i64 %number, ptr %elapsed) nounwind {
entry:
  %p0 = getelementptr i64, ptr %args, i64 0
  %a0 = load i64, ptr %p0
  %p1 = getelementptr i64, ptr %args, i64 1
  %a1 = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %args, i64 2
  %a2 = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %args, i64 3
  %a3 = load i64, ptr %p3
  %p4 = getelementptr i64, ptr %args, i64 4
  %a4 = load i64, ptr %p4
  %p5 = getelementptr i64, ptr %args, i64 5
  %a5 = load i64, ptr %p5
  %p6 = getelementptr i64, ptr %args, i64 6
  %a6 = load i64, ptr %p6
  %p7 = getelementptr i64, ptr %args, i64 7
  %a7 = load i64, ptr %p7
  %p8 = getelementptr i64, ptr %args, i64 8
  %a8 = load i64, ptr %p8
  %p9 = getelementptr i64, ptr %args, i64 9
  %a9 = load i64, ptr %p9
  %p10 = getelementptr i64, ptr %args, i64 10
  %a10 = load i64, ptr %p10
  %p11 = getelementptr i64, ptr %args, i64 11
  %a11 = load i64, ptr %p11
  %p12 = getelementptr i64, ptr %args, i64 12
  %a12 = load i64, ptr %p12
  %p13 = getelementptr i64, ptr %args, i64 13
  %a13 = load i64, ptr %p13
  %p14 = getelementptr i64, ptr %args, i64 14
  %a14 = load i64, ptr %p14
  %p15 = getelementptr i64, ptr %args, i64 15
  %a15 = load i64, ptr %p15
  %p16 = getelementptr i64, ptr %args, i64 16
  %a16 = load i64, ptr %p16
  %p17 = getelementptr i64, ptr %args, i64 17
  %a17 = load i64, ptr %p17
  %p18 = getelementptr i64, ptr %args, i64 18
  %a18 = load i64, ptr %p18
  %p19 = getelementptr i64, ptr %args, i64 19
  %a19 = load i64, ptr %p19
  %p20 = getelementptr i64, ptr %args, i64 20
  %a20 = load i64, ptr %p20
  %p21 = getelementptr i64, ptr %args, i64 21
  %a21 = load i64, ptr %p21
  %p22 = getelementptr i64, ptr %args, i64 22
  %a22 = load i64, ptr %p22
  %p23 = getelementptr i64, ptr %args, i64 23
  %a23 = load i64, ptr %p23
  %p24 = getelementptr i64, ptr %args, i64 24
  %a24 = load i64, ptr %p24
  %p25 = getelementptr i64, ptr %args, i64 25
  %a25 = load i64, ptr %p25
  %p26 = getelementptr i64, ptr %args, i64 26
  %a26 = load i64, ptr %p26
  %p27 = getelementptr i64, ptr %args, i64 27
  %a27 = load i64, ptr %p27
  %p28 = getelementptr i64, ptr %args, i64 28
  %a28 = load i64, ptr %p28
  %p29 = getelementptr i64, ptr %args, i64 29
  %a29 = load i64, ptr %p29
  %p30 = getelementptr i64, ptr %args, i64 30
  %a30 = load i64, ptr %p30
  %p31 = getelementptr i64, ptr %args, i64 31
  %a31 = load i64, ptr %p31
  %t0 = call i64 @tl_now_ns()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %err = phi i32 [ 0, %entry ], [ %err1, %body ]
  %more = icmp slt i64 %i, %number
  br i1 %more, label %body, label %out
body:
  %r = call i32 %fn(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6, i64 %a7, i64 %a8, i64 %a9, i64 %a10, i64 %a11, i64 %a12, i64 %a13, i64 %a14, i64 %a15, i64 %a16, i64 %a17, i64 %a18, i64 %a19, i64 %a20, i64 %a21, i64 %a22, i64 %a23, i64 %a24, i64 %a25, i64 %a26, i64 %a27, i64 %a28, i64 %a29, i64 %a30, i64 %a31)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %i1 = add i64 %i, 1
  br label %loop
out:
  %t1 = call i64 @tl_now_ns()
  %dt = sub i64 %t1, %t0
  store i64 %dt, ptr %elapsed
  ret i32 %err
}
define i32 @tl_time_calls(ptr %fn, ptr %args, i32 %nargs, i64 %number, ptr %elapsed) nounwind {
entry:
  switch i32 %nargs, label %bad [ i32 0, label %a0 i32 1, label %a1 i32 2, label %a2 i32 3, label %a3 i32 4, label %a4 i32 5, label %a5 i32 6, label %a6 i32 7, label %a7 i32 8, label %a8 i32 9, label %a9 i32 10, label %a10 i32 11, label %a11 i32 12, label %a12 i32 13, label %a13 i32 14, label %a14 i32 15, label %a15 i32 16, label %a16 i32 17, label %a17 i32 18, label %a18 i32 19, label %a19 i32 20, label %a20 i32 21, label %a21 i32 22, label %a22 i32 23, label %a23 i32 24, label %a24 i32 25, label %a25 i32 26, label %a26 i32 27, label %a27 i32 28, label %a28 i32 29, label %a29 i32 30, label %a30 i32 31, label %a31 i32 32, label %a32 ]
bad:
  ret i32 -1
a0:
  %r0 = call i32 @tl_time_calls_0(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r0
a1:
  %r1 = call i32 @tl_time_calls_1(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r1
a2:
  %r2 = call i32 @tl_time_calls_2(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r2
a3:
  %r3 = call i32 @tl_time_calls_3(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r3
a4:
  %r4 = call i32 @tl_time_calls_4(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r4
a5:
  %r5 = call i32 @tl_time_calls_5(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r5
a6:
  %r6 = call i32 @tl_time_calls_6(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r6
a7:
  %r7 = call i32 @tl_time_calls_7(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r7
a8:
  %r8 = call i32 @tl_time_calls_8(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r8
a9:
  %r9 = call i32 @tl_time_calls_9(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r9
a10:
  %r10 = call i32 @tl_time_calls_10(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r10
a11:
  %r11 = call i32 @tl_time_calls_11(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r11
a12:
  %r12 = call i32 @tl_time_calls_12(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r12
a13:
  %r13 = call i32 @tl_time_calls_13(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r13
a14:
  %r14 = call i32 @tl_time_calls_14(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r14
a15:
  %r15 = call i32 @tl_time_calls_15(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r15
a16:
  %r16 = call i32 @tl_time_calls_16(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r16
a17:
  %r17 = call i32 @tl_time_calls_17(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r17
a18:
  %r18 = call i32 @tl_time_calls_18(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r18
a19:
  %r19 = call i32 @tl_time_calls_19(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r19
a20:
  %r20 = call i32 @tl_time_calls_20(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r20
a21:
  %r21 = call i32 @tl_time_calls_21(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r21
a22:
  %r22 = call i32 @tl_time_calls_22(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r22
a23:
  %r23 = call i32 @tl_time_calls_23(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r23
a24:
  %r24 = call i32 @tl_time_calls_24(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r24
a25:
  %r25 = call i32 @tl_time_calls_25(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r25
a26:
  %r26 = call i32 @tl_time_calls_26(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r26
a27:
  %r27 = call i32 @tl_time_calls_27(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r27
a28:
  %r28 = call i32 @tl_time_calls_28(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r28
a29:
  %r29 = call i32 @tl_time_calls_29(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r29
a30:
  %r30 = call i32 @tl_time_calls_30(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r30
a31:
  %r31 = call i32 @tl_time_calls_31(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r31
a32:
  %r32 = call i32 @tl_time_calls_32(ptr %fn, ptr %args, i64 %number, ptr %elapsed)
  ret i32 %r32
}
