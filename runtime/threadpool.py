"""A persistent worker pool, written in LLVM IR, that generated kernels launch parallel loops on.

Why LLVM IR rather than Python threads or OpenMP: it needs nothing but the process's libc
(``pthread_create``, ``syscall``), is compiled once per machine into a tiny shared library, and
launches an empty parallel region in well under a microsecond from native code, where Python
threads calling ctypes cost 17-60 us per launch.

C interface (the symbols of the library)::

    int32_t tl_parallel_launch(int32_t (*fn)(int32_t task_id, int32_t num_tasks, void *closure),
                               void *closure, int32_t num_tasks);
    void    tl_set_num_threads(int32_t n);     /* n <= 0: back to the default (online CPUs) */
    int32_t tl_get_num_threads(void);
    void    tl_set_spin_cycles(int64_t cycles); /* how long idle threads spin before sleeping */
    void    tl_pool_after_fork(void);          /* forget the parent's workers in a fork child */
    int64_t tl_worker_tid(int32_t i);          /* kernel tid of worker i >= 1; 0: not started */
    int32_t tl_time_calls(void *kernel, const int64_t *args, int32_t nargs, int64_t number,
                          int64_t *elapsed_ns);  /* native timing loop, see _timing_ir */

Semantics of ``tl_parallel_launch``: runs ``fn(t, num_tasks, closure)`` exactly once for every
``t`` in ``[0, num_tasks)``; ``num_tasks <= 0`` means "the pool size". Task 0 runs on the calling
thread, the other tasks are handed out dynamically (an atomic counter) to the calling thread and
``min(pool size, num_tasks) - 1`` workers, so a worker descheduled on a busy machine cannot hold
the others up for more than the task it has taken. Returns 0, or the first nonzero value a task
returned. A launch that finds the pool busy -- a nested launch from inside a task, or a launch
from a second application thread -- runs all of its tasks serially on its own thread: no
deadlock, same results.

How the workers wait: each worker owns a 64-byte slot holding a generation counter, a
"sleeping" flag and a copy of the job (function, closure, task count), so one cache-line
transfer both wakes a spinning worker and hands it the job. A worker remembers the generation it
last served and waits for a new one in three phases: ~2 us of ``pause`` spinning, then
``sched_yield`` polling (so that on an oversubscribed machine the thread it shares a CPU with
gets to run) until a budget of ``DEFAULT_SPIN_CYCLES`` TSC cycles (~100 us) is spent, then it sets
"sleeping" and sleeps on the counter with ``futex(FUTEX_WAIT_PRIVATE)``. The launcher copies the
job into each participating worker's slot, bumps its generation and issues
``futex(FUTEX_WAKE_PRIVATE)`` only for workers that are asleep (Dekker-style: both sides store,
then load, with sequentially consistent atomics, so a wake-up is never lost). Workers beyond the
participants of a launch are never touched. The launcher waits for completion in the same three
phases, on the counter of workers still busy. Nothing ever spins unboundedly: on two shared
cores that would starve everything else.

The library is compiled once per machine (per pool IR version) for the architecture's baseline
CPU, linked with ``ld -shared`` and cached next to the kernels; it ships inside artifacts so that
loading one never needs llvmlite. A fork child resets the pool (``os.register_at_fork``) and
creates fresh workers at its first launch.

A worker never shares a CPU with its launcher for long: after the process has idled, the
kernel's scheduler tends to wake a sleeping worker on the CPU of the thread that wakes it, and
the two then take turns on one vCPU while the other idles, every parallel region at half speed
for milliseconds (measured: after 0.2 s pauses, 34-37 of 40 rounds of eight 512^3 matmul calls
ran at half speed, median call 1.13 ms). The launcher records its CPU (``sched_getcpu``) with
each job; a worker that starts the job on that CPU narrows its own CPU mask to exclude it,
which migrates it at once, and restores the mask (0 of 40 rounds, median 0.61-0.64 ms; about
15 ns more per launch).

Thread binding (opt-in: ``bind_threads()`` or ``TENSORLANG_BIND_THREADS=1``) pins worker i to
the i-th allowed CPU and the launching thread to the first one (what TVM_BIND_THREADS and
OMP_PROC_BIND do). Each worker records its kernel
thread id when it starts (``tl_worker_tid``) so that ``os.sched_setaffinity`` can reach it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import threading
from pathlib import Path
from typing import Any

from ._cache import atomic_write, cache_dir
from ._link import link_shared, linker_command, store_shared_library

MAX_THREADS = 256
# Spin for about 100 us at 2-4 GHz before sleeping: long enough that back-to-back launches from
# an op-by-op executor find the workers awake, short enough not to steal a shared core for long.
DEFAULT_SPIN_CYCLES = 300_000
# The first ~2 us of a wait only execute pause hints; after that each step is a sched_yield, so
# that a thread we wait for that shares our CPU (an oversubscribed machine) gets to run.
PURE_SPIN_CYCLES = 5_000

_ARCH = {
    # machine: (futex syscall number, gettid syscall number, IR of one spin-wait hint, body of
    # @tl_clock(i64 %iter) returning a cycle count, declarations those need)
    "x86_64": (
        202,
        186,
        "call void @llvm.x86.sse2.pause()",
        "%c = call i64 @llvm.readcyclecounter()\n  ret i64 %c",
        "declare void @llvm.x86.sse2.pause()\ndeclare i64 @llvm.readcyclecounter()",
    ),
    # AArch64 user space cannot read the cycle counter, so the "clock" counts spin iterations
    # (weighted to about the cost of one yield-hinted iteration).
    "aarch64": (
        98,
        178,
        "call void @llvm.aarch64.hint(i32 1)",
        "%c = mul i64 %iter, 64\n  ret i64 %c",
        "declare void @llvm.aarch64.hint(i32)",
    ),
}


def _machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


_POOL_IR = r"""
; tensorlang thread pool (see runtime/threadpool.py for the protocol)
; Per-worker slot, one cache line: generation, sleeping, num_tasks, pad, fn, closure. The job is
; copied into every participating worker's slot so that a worker picks it up with the same
; cache-line transfer that tells it to start.
%slot = type { i32, i32, i32, i32, ptr, ptr, [32 x i8] }
; Shared completion state, one cache line: next task, pending workers, caller waiting, error.
%sync = type { i32, i32, i32, i32, [48 x i8] }

@tl_slots = internal global [@MAXW@ x %slot] zeroinitializer, align 64
@tl_lock = internal global i32 0, align 64
@tl_size = internal global i32 0, align 4
@tl_started = internal global i32 1, align 4
@tl_spin = internal global i64 @SPIN@, align 8
@tl_sync = internal global %sync zeroinitializer, align 64
; Kernel thread id of worker i (0: not started), written once by the worker itself: the only
; handle through which os.sched_setaffinity can pin it (bind_threads). Slot 0, the caller, stays 0.
@tl_tids = internal global [@MAXW@ x i64] zeroinitializer, align 64
; The CPU the last launch ran on (sched_getcpu): a worker that finds itself there moves off.
@tl_launch_cpu = internal global i32 -1, align 4
@tl_next = internal alias i32, getelementptr (%sync, ptr @tl_sync, i32 0, i32 0)
@tl_pending = internal alias i32, getelementptr (%sync, ptr @tl_sync, i32 0, i32 1)
@tl_waiting = internal alias i32, getelementptr (%sync, ptr @tl_sync, i32 0, i32 2)
@tl_error = internal alias i32, getelementptr (%sync, ptr @tl_sync, i32 0, i32 3)

declare i32 @pthread_create(ptr, ptr, ptr, ptr) nounwind
declare i32 @pthread_detach(i64) nounwind
declare i64 @syscall(i64, ...) nounwind
declare i64 @sysconf(i32) nounwind
declare i32 @sched_yield() nounwind
declare i32 @sched_getcpu() nounwind
declare i32 @sched_getaffinity(i32, i64, ptr) nounwind
declare i32 @sched_setaffinity(i32, i64, ptr) nounwind
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
@ARCH_DECLS@

define internal void @tl_relax() alwaysinline nounwind {
  @PAUSE@
  ret void
}

define internal i64 @tl_clock(i64 %iter) alwaysinline nounwind {
  @CLOCK@
}

; One step of a bounded wait, after %elapsed cycles of it: a pause hint at first, then
; sched_yield. Yielding matters when the machine is oversubscribed and the thread we wait for
; shares our CPU: pure spinning would keep it off the CPU until our budget runs out.
define internal void @tl_backoff(i64 %elapsed) nounwind {
entry:
  %long = icmp uge i64 %elapsed, @PURE_SPIN@
  br i1 %long, label %yield, label %pause
yield:
  %r = call i32 @sched_yield()
  ret void
pause:
  call void @tl_relax()
  ret void
}

define internal void @tl_futex_wait(ptr %addr, i32 %val) nounwind {
  %v = zext i32 %val to i64
  %r = call i64 (i64, ...) @syscall(i64 @SYS_FUTEX@, ptr %addr, i64 128, i64 %v, ptr null, ptr null, i64 0)
  ret void
}

define internal void @tl_futex_wake(ptr %addr, i32 %n) nounwind {
  %v = zext i32 %n to i64
  %r = call i64 (i64, ...) @syscall(i64 @SYS_FUTEX@, ptr %addr, i64 129, i64 %v, ptr null, ptr null, i64 0)
  ret void
}

define internal void @tl_record_error(i32 %r) nounwind {
entry:
  %bad = icmp ne i32 %r, 0
  br i1 %bad, label %rec, label %out
rec:
  %x = cmpxchg ptr @tl_error, i32 0, i32 %r monotonic monotonic
  br label %out
out:
  ret void
}

; Take tasks from the shared counter until none is left.
define internal void @tl_drain(ptr %fn, ptr %cl, i32 %n) nounwind {
entry:
  br label %loop
loop:
  %t = atomicrmw add ptr @tl_next, i32 1 monotonic
  %more = icmp slt i32 %t, %n
  br i1 %more, label %run, label %out
run:
  %r = call i32 %fn(i32 %t, i32 %n, ptr %cl)
  call void @tl_record_error(i32 %r)
  br label %loop
out:
  ret void
}

; Called by a worker starting a job on the CPU its launcher runs on (the kernel woke it there,
; after the process idled): leave that CPU now. Narrowing the thread's CPU mask to exclude it
; migrates the thread at once; the old mask is restored right after, which does not move it
; back. Otherwise the two threads take turns on one vCPU while the other idles, until the
; scheduler's load balancing separates them milliseconds later (measured: every call of a
; 0.56 ms kernel at 1.1 ms for 8 calls in a row after a 0.2 s pause).
define internal void @tl_move_off(i32 %cpu) nounwind {
entry:
  %old = alloca [128 x i8], align 8
  %new = alloca [128 x i8], align 8
  %inrange = icmp ult i32 %cpu, 1024
  br i1 %inrange, label %get, label %out
get:
  %r0 = call i32 @sched_getaffinity(i32 0, i64 128, ptr %old)
  %ok0 = icmp eq i32 %r0, 0
  br i1 %ok0, label %narrow, label %out
narrow:
  call void @llvm.memcpy.p0.p0.i64(ptr %new, ptr %old, i64 128, i1 false)
  %byte = lshr i32 %cpu, 3
  %bit = and i32 %cpu, 7
  %bytep = getelementptr [128 x i8], ptr %new, i32 0, i32 %byte
  %b = load i8, ptr %bytep, align 1
  %bit8 = trunc i32 %bit to i8
  %m = shl i8 1, %bit8
  %nm = xor i8 %m, -1
  %b1 = and i8 %b, %nm
  store i8 %b1, ptr %bytep, align 1
  br label %scan
scan:                                    ; is any other CPU allowed?
  %i = phi i64 [ 0, %narrow ], [ %i1, %scan_next ]
  %wp = getelementptr [128 x i8], ptr %new, i64 0, i64 %i
  %wv = load i64, ptr %wp, align 8
  %any = icmp ne i64 %wv, 0
  br i1 %any, label %move, label %scan_next
scan_next:
  %i1 = add i64 %i, 8
  %done = icmp uge i64 %i1, 128
  br i1 %done, label %out, label %scan
move:
  %r1 = call i32 @sched_setaffinity(i32 0, i64 128, ptr %new)
  %r2 = call i32 @sched_setaffinity(i32 0, i64 128, ptr %old)
  br label %out
out:
  ret void
}

define internal ptr @tl_worker(ptr %arg) nounwind {
entry:
  %idx = ptrtoint ptr %arg to i64
  %genp = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %idx, i32 0
  %sleepp = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %idx, i32 1
  ; Published before the worker can serve its first job, so that once a launch it took part in
  ; has completed (acquire on tl_pending), the launcher sees the id.
  %ktid = call i64 (i64, ...) @syscall(i64 @SYS_GETTID@)
  %tidp = getelementptr [@MAXW@ x i64], ptr @tl_tids, i64 0, i64 %idx
  store atomic i64 %ktid, ptr %tidp release, align 8
  br label %idle

idle:                                   ; %seen: the generation last served (0 at creation)
  %seen = phi i32 [ 0, %entry ], [ %seen, %slept ], [ %g, %served ]
  %budget = load atomic i64, ptr @tl_spin monotonic, align 8
  %t0 = call i64 @tl_clock(i64 0)
  br label %spin

spin:
  %iter = phi i64 [ 0, %idle ], [ %iter1, %backoff ]
  %g0 = load atomic i32, ptr %genp acquire, align 4
  %new0 = icmp ne i32 %g0, %seen
  br i1 %new0, label %work, label %spin_more

spin_more:
  %iter1 = add i64 %iter, 1
  %now = call i64 @tl_clock(i64 %iter1)
  %elapsed = sub i64 %now, %t0
  %over = icmp uge i64 %elapsed, %budget
  br i1 %over, label %sleep, label %backoff

backoff:
  call void @tl_backoff(i64 %elapsed)
  br label %spin

sleep:
  store atomic i32 1, ptr %sleepp seq_cst, align 4
  %g1 = load atomic i32, ptr %genp seq_cst, align 4
  %new1 = icmp ne i32 %g1, %seen
  br i1 %new1, label %awake_now, label %wait

wait:
  call void @tl_futex_wait(ptr %genp, i32 %seen)
  store atomic i32 0, ptr %sleepp seq_cst, align 4
  br label %slept

slept:                                  ; woken, or spuriously: spin again and re-check
  br label %idle

awake_now:
  store atomic i32 0, ptr %sleepp seq_cst, align 4
  br label %work

work:
  %g = phi i32 [ %g0, %spin ], [ %g1, %awake_now ]
  %mycpu = call i32 @sched_getcpu()
  %lcpu = load atomic i32, ptr @tl_launch_cpu monotonic, align 4
  %shared = icmp eq i32 %mycpu, %lcpu
  br i1 %shared, label %move_off, label %take_job

move_off:
  call void @tl_move_off(i32 %lcpu)
  br label %take_job

take_job:
  %np = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %idx, i32 2
  %fnp = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %idx, i32 4
  %clp = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %idx, i32 5
  %fn = load ptr, ptr %fnp, align 8
  %cl = load ptr, ptr %clp, align 8
  %n = load i32, ptr %np, align 4
  call void @tl_drain(ptr %fn, ptr %cl, i32 %n)
  %left = atomicrmw sub ptr @tl_pending, i32 1 seq_cst
  %last = icmp eq i32 %left, 1
  br i1 %last, label %notify, label %served

notify:
  %w = load atomic i32, ptr @tl_waiting seq_cst, align 4
  %sleeping = icmp ne i32 %w, 0
  br i1 %sleeping, label %wake_caller, label %served

wake_caller:
  call void @tl_futex_wake(ptr @tl_pending, i32 1)
  br label %served

served:
  br label %idle
}

define i32 @tl_get_num_threads() nounwind {
entry:
  %s = load atomic i32, ptr @tl_size monotonic, align 4
  %set = icmp sgt i32 %s, 0
  br i1 %set, label %ret_set, label %default
ret_set:
  ret i32 %s
default:
  %c = call i64 @sysconf(i32 84)        ; _SC_NPROCESSORS_ONLN
  %lo = icmp slt i64 %c, 1
  %c1 = select i1 %lo, i64 1, i64 %c
  %hi = icmp sgt i64 %c1, @MAXW@
  %c2 = select i1 %hi, i64 @MAXW@, i64 %c1
  %r = trunc i64 %c2 to i32
  ret i32 %r
}

define void @tl_set_num_threads(i32 %n) nounwind {
  %neg = icmp slt i32 %n, 0
  %n1 = select i1 %neg, i32 0, i32 %n
  %hi = icmp sgt i32 %n1, @MAXW@
  %n2 = select i1 %hi, i32 @MAXW@, i32 %n1
  store atomic i32 %n2, ptr @tl_size monotonic, align 4
  ret void
}

; Kernel thread id of worker %i (1 <= %i < MAXW), or 0 if it has not started (or %i is out of range).
define i64 @tl_worker_tid(i32 %i) nounwind {
entry:
  %lo = icmp slt i32 %i, 1
  %hi = icmp sge i32 %i, @MAXW@
  %bad = or i1 %lo, %hi
  br i1 %bad, label %none, label %get
get:
  %i64 = zext i32 %i to i64
  %p = getelementptr [@MAXW@ x i64], ptr @tl_tids, i64 0, i64 %i64
  %t = load atomic i64, ptr %p acquire, align 8
  ret i64 %t
none:
  ret i64 0
}

define void @tl_set_spin_cycles(i64 %c) nounwind {
  %neg = icmp slt i64 %c, 0
  %c1 = select i1 %neg, i64 0, i64 %c
  store atomic i64 %c1, ptr @tl_spin monotonic, align 8
  ret void
}

; Called in the child of a fork(): the parent's workers do not exist there. Reset everything
; so that the next launch creates fresh workers (slot generations restart at 0).
define void @tl_pool_after_fork() nounwind {
  call void @llvm.memset.p0.i64(ptr align 64 @tl_slots, i8 0, i64 @SLOTBYTES@, i1 false)
  ; the parent's thread ids name no thread here (or worse, an unrelated one later)
  call void @llvm.memset.p0.i64(ptr align 64 @tl_tids, i8 0, i64 @TIDBYTES@, i1 false)
  store i32 1, ptr @tl_started, align 4
  store i32 0, ptr @tl_pending, align 4
  store i32 0, ptr @tl_waiting, align 4
  store atomic i32 0, ptr @tl_lock seq_cst, align 4
  ret void
}
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)

define internal i32 @tl_serial(ptr %fn, ptr %cl, i32 %n) nounwind {
entry:
  br label %loop
loop:
  %t = phi i32 [ 0, %entry ], [ %t1, %run ]
  %err = phi i32 [ 0, %entry ], [ %err1, %run ]
  %more = icmp slt i32 %t, %n
  br i1 %more, label %run, label %out
run:
  %r = call i32 %fn(i32 %t, i32 %n, ptr %cl)
  %keep = icmp ne i32 %err, 0
  %err1 = select i1 %keep, i32 %err, i32 %r
  %t1 = add i32 %t, 1
  br label %loop
out:
  ret i32 %err
}

; Make sure workers 1..want-1 exist; returns how many threads (caller included) are available.
; Runs with the launch lock held.
define internal i32 @tl_ensure_workers(i32 %want) nounwind {
entry:
  %tid = alloca i64, align 8
  %st0 = load i32, ptr @tl_started, align 4
  br label %loop
loop:
  %i = phi i32 [ %st0, %entry ], [ %i1, %created ]
  %need = icmp slt i32 %i, %want
  br i1 %need, label %create, label %done
create:
  %i64 = zext i32 %i to i64
  %arg = inttoptr i64 %i64 to ptr
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @tl_worker, ptr %arg)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %created, label %done
created:
  %t = load i64, ptr %tid, align 8
  %d = call i32 @pthread_detach(i64 %t)
  %i1 = add i32 %i, 1
  store i32 %i1, ptr @tl_started, align 4
  br label %loop
done:
  %have = phi i32 [ %i, %loop ], [ %i, %create ]
  %lt = icmp slt i32 %have, %want
  %r = select i1 %lt, i32 %have, i32 %want
  ret i32 %r
}

define i32 @tl_parallel_launch(ptr %fn, ptr %cl, i32 %n0) nounwind {
entry:
  %p = call i32 @tl_get_num_threads()
  %dflt = icmp sle i32 %n0, 0
  %n = select i1 %dflt, i32 %p, i32 %n0
  %one_task = icmp sle i32 %n, 1
  %one_thread = icmp sle i32 %p, 1
  %trivial = or i1 %one_task, %one_thread
  br i1 %trivial, label %serial, label %try_lock

try_lock:
  %xchg = cmpxchg ptr @tl_lock, i32 0, i32 1 acquire monotonic
  %locked = extractvalue { i32, i1 } %xchg, 1
  br i1 %locked, label %locked_bb, label %serial

locked_bb:
  %few = icmp slt i32 %n, %p
  %want = select i1 %few, i32 %n, i32 %p
  %part = call i32 @tl_ensure_workers(i32 %want)
  %alone = icmp sle i32 %part, 1
  br i1 %alone, label %unlock_serial, label %publish

unlock_serial:
  store atomic i32 0, ptr @tl_lock release, align 4
  br label %serial

publish:
  %lcpu = call i32 @sched_getcpu()
  store atomic i32 %lcpu, ptr @tl_launch_cpu monotonic, align 4
  store atomic i32 1, ptr @tl_next monotonic, align 4
  store atomic i32 0, ptr @tl_error monotonic, align 4
  %nw = sub i32 %part, 1
  store atomic i32 %nw, ptr @tl_pending monotonic, align 4
  store atomic i32 0, ptr @tl_waiting monotonic, align 4
  br label %wake_loop

wake_loop:
  %w = phi i32 [ 1, %publish ], [ %w1, %wake_next ]
  %w64 = zext i32 %w to i64
  %genp = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %w64, i32 0
  %sleepp = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %w64, i32 1
  %np = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %w64, i32 2
  %fnp = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %w64, i32 4
  %clp = getelementptr [@MAXW@ x %slot], ptr @tl_slots, i64 0, i64 %w64, i32 5
  store i32 %n, ptr %np, align 4
  store ptr %fn, ptr %fnp, align 8
  store ptr %cl, ptr %clp, align 8
  %g = load atomic i32, ptr %genp monotonic, align 4
  %g1 = add i32 %g, 1
  store atomic i32 %g1, ptr %genp seq_cst, align 4   ; publishes the job (release)
  %s = load atomic i32, ptr %sleepp seq_cst, align 4
  %asleep = icmp ne i32 %s, 0
  br i1 %asleep, label %wake_one, label %wake_next

wake_one:
  call void @tl_futex_wake(ptr %genp, i32 1)
  br label %wake_next

wake_next:
  %w1 = add i32 %w, 1
  %more_w = icmp slt i32 %w1, %part
  br i1 %more_w, label %wake_loop, label %run_own

run_own:
  %r0 = call i32 %fn(i32 0, i32 %n, ptr %cl)
  call void @tl_record_error(i32 %r0)
  call void @tl_drain(ptr %fn, ptr %cl, i32 %n)
  %budget = load atomic i64, ptr @tl_spin monotonic, align 8
  %t0 = call i64 @tl_clock(i64 0)
  br label %spin

spin:
  %iter = phi i64 [ 0, %run_own ], [ %iter1, %backoff ]
  %left = load atomic i32, ptr @tl_pending acquire, align 4
  %done0 = icmp eq i32 %left, 0
  br i1 %done0, label %finish, label %spin_more

spin_more:
  %iter1 = add i64 %iter, 1
  %now = call i64 @tl_clock(i64 %iter1)
  %elapsed = sub i64 %now, %t0
  %over = icmp uge i64 %elapsed, %budget
  br i1 %over, label %sleep, label %backoff

backoff:
  call void @tl_backoff(i64 %elapsed)
  br label %spin

sleep:
  store atomic i32 1, ptr @tl_waiting seq_cst, align 4
  br label %sleep_loop

sleep_loop:
  %left1 = load atomic i32, ptr @tl_pending seq_cst, align 4
  %done1 = icmp eq i32 %left1, 0
  br i1 %done1, label %woke, label %do_wait

do_wait:
  call void @tl_futex_wait(ptr @tl_pending, i32 %left1)
  br label %sleep_loop

woke:
  store atomic i32 0, ptr @tl_waiting monotonic, align 4
  br label %finish

finish:
  %err = load atomic i32, ptr @tl_error monotonic, align 4
  store atomic i32 0, ptr @tl_lock release, align 4
  ret i32 %err

serial:
  %rs = call i32 @tl_serial(ptr %fn, ptr %cl, i32 %n)
  ret i32 %rs
}
"""


MAX_TIMED_ARGS = 32


def _timing_ir() -> str:
    """``tl_time_calls``: call a kernel ``number`` times in a native loop and report the elapsed
    nanoseconds, so that timing small kernels does not measure Python's call overhead.

    ``int32_t tl_time_calls(void *fn, const int64_t *args, int32_t nargs, int64_t number,
    int64_t *elapsed_ns)`` returns -1 for an unsupported arity, else 0 or the first nonzero code
    a call returned. Every kernel argument (pointer or i64) is passed as an i64: both are
    INTEGER-class, 8-byte values in the x86-64 SysV and AArch64 calling conventions, so the
    call is ABI-identical to the kernel's own signature.
    """
    out = [
        "declare i32 @clock_gettime(i32, ptr) nounwind",
        "",
        "define internal i64 @tl_now_ns() nounwind {",
        "  %ts = alloca { i64, i64 }, align 8",
        "  %r = call i32 @clock_gettime(i32 1, ptr %ts)   ; CLOCK_MONOTONIC",
        "  %sp = getelementptr { i64, i64 }, ptr %ts, i32 0, i32 0",
        "  %np = getelementptr { i64, i64 }, ptr %ts, i32 0, i32 1",
        "  %s = load i64, ptr %sp",
        "  %n = load i64, ptr %np",
        "  %s9 = mul i64 %s, 1000000000",
        "  %t = add i64 %s9, %n",
        "  ret i64 %t",
        "}",
    ]
    for k in range(MAX_TIMED_ARGS + 1):
        loads = [
            f"  %p{i} = getelementptr i64, ptr %args, i64 {i}\n  %a{i} = load i64, ptr %p{i}"
            for i in range(k)
        ]
        params = ", ".join(f"i64 %a{i}" for i in range(k))
        out += [
            (
                f"define internal i32 @tl_time_calls_{k}(ptr %fn, ptr %args, i64 %number, "
                "ptr %elapsed) nounwind {"
            ),
            "entry:",
            *loads,
            "  %t0 = call i64 @tl_now_ns()",
            "  br label %loop",
            "loop:",
            "  %i = phi i64 [ 0, %entry ], [ %i1, %body ]",
            "  %err = phi i32 [ 0, %entry ], [ %err1, %body ]",
            "  %more = icmp slt i64 %i, %number",
            "  br i1 %more, label %body, label %out",
            "body:",
            f"  %r = call i32 %fn({params})",
            "  %keep = icmp ne i32 %err, 0",
            "  %err1 = select i1 %keep, i32 %err, i32 %r",
            "  %i1 = add i64 %i, 1",
            "  br label %loop",
            "out:",
            "  %t1 = call i64 @tl_now_ns()",
            "  %dt = sub i64 %t1, %t0",
            "  store i64 %dt, ptr %elapsed",
            "  ret i32 %err",
            "}",
        ]
    cases = " ".join(f"i32 {k}, label %a{k}" for k in range(MAX_TIMED_ARGS + 1))
    out += [
        (
            "define i32 @tl_time_calls(ptr %fn, ptr %args, i32 %nargs, i64 %number, "
            "ptr %elapsed) nounwind {"
        ),
        "entry:",
        f"  switch i32 %nargs, label %bad [ {cases} ]",
        "bad:",
        "  ret i32 -1",
    ]
    for k in range(MAX_TIMED_ARGS + 1):
        out += [
            f"a{k}:",
            (
                f"  %r{k} = call i32 @tl_time_calls_{k}(ptr %fn, ptr %args, i64 %number, "
                "ptr %elapsed)"
            ),
            f"  ret i32 %r{k}",
        ]
    out.append("}")
    return "\n".join(out) + "\n"


def pool_ir(machine: str | None = None) -> str:
    """The pool's LLVM IR text for ``machine`` (default: this one)."""
    machine = machine or _machine()
    if machine not in _ARCH:
        raise RuntimeError(f"the tensorlang thread pool does not support {machine!r} yet")
    futex, gettid, pause, clock, decls = _ARCH[machine]
    subst = {
        "@MAXW@": str(MAX_THREADS),
        "@SLOTBYTES@": str(MAX_THREADS * 64),
        "@TIDBYTES@": str(MAX_THREADS * 8),
        "@SPIN@": str(DEFAULT_SPIN_CYCLES),
        "@PURE_SPIN@": str(PURE_SPIN_CYCLES),
        "@SYS_FUTEX@": str(futex),
        "@SYS_GETTID@": str(gettid),
        "@PAUSE@": pause,
        "@CLOCK@": clock,
        "@ARCH_DECLS@": decls,
    }
    text = _POOL_IR
    for k, v in subst.items():
        text = text.replace(k, v)
    return text + _timing_ir()


def _pool_key() -> str:
    return hashlib.sha256((pool_ir() + "\0" + _machine()).encode()).hexdigest()[:24]


def pool_object() -> bytes:
    """The pool compiled to a portable object file (cached on disk).

    Compiled for the architecture's baseline CPU, not the host's: the pool does no arithmetic
    worth specializing, and a baseline object can ship inside artifacts for any machine of the
    same architecture.
    """
    path = cache_dir() / "lib" / f"tl_pool-{_pool_key()}.o"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    from . import _llvm

    llvm = _llvm.binding()
    triple = llvm.get_process_triple()
    cpu = "x86-64" if _machine() == "x86_64" else "generic"
    obj, _, _ = _llvm.compile_ir_text(pool_ir(), cpu, "", triple, opt_level=2)
    atomic_write(path, obj)
    return obj


def _library_path() -> Path:
    return cache_dir() / "lib" / f"tl_pool-{_pool_key()}.so"


class _Pool:
    """The loaded pool: its C functions as ctypes callables, and what keeps the code mapped."""

    def __init__(self, addresses: dict[str, int], keepalive: Any, how: str) -> None:
        self.addresses = addresses
        self.keepalive = keepalive  # the CDLL or the JIT resource tracker: never released
        self.how = how
        self.library_path: Path | None = None  # the .so it was loaded from, if any
        proto = ctypes.CFUNCTYPE
        self.launch = proto(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)(
            addresses["tl_parallel_launch"]
        )
        self.set_num_threads = proto(None, ctypes.c_int32)(addresses["tl_set_num_threads"])
        self.get_num_threads = proto(ctypes.c_int32)(addresses["tl_get_num_threads"])
        self.set_spin_cycles = proto(None, ctypes.c_int64)(addresses["tl_set_spin_cycles"])
        self.after_fork = proto(None)(addresses["tl_pool_after_fork"])
        # Optional: a pool library shipped by an artifact of an older version lacks it, and is
        # still good for running kernels; binding is then unavailable (bind_threads: no-op).
        tid_addr = addresses.get("tl_worker_tid")
        self.worker_tid = proto(ctypes.c_int64, ctypes.c_int32)(tid_addr) if tid_addr else None
        self.time_calls = proto(
            ctypes.c_int32,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int32,
            ctypes.c_int64,
            ctypes.POINTER(ctypes.c_int64),
        )(addresses["tl_time_calls"])


_EXPORTS = [
    "tl_parallel_launch",
    "tl_set_num_threads",
    "tl_get_num_threads",
    "tl_set_spin_cycles",
    "tl_pool_after_fork",
    "tl_time_calls",
]
_OPTIONAL_EXPORTS = ["tl_worker_tid"]
_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _load_shared(path: Path) -> _Pool:
    lib = ctypes.CDLL(str(path))
    addrs = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in _EXPORTS}
    for name in _OPTIONAL_EXPORTS:
        if hasattr(lib, name):
            addrs[name] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    p = _Pool(addrs, lib, f"shared library {path}")  # type: ignore[arg-type]
    p.library_path = path
    return p


class PoolUnavailable(RuntimeError):
    """The pool cannot be built or loaded here (unsupported architecture, no cached copy and
    no llvmlite to compile one, a linker or loader failure)."""


def _load(shipped_library: bytes | None = None) -> _Pool:
    path = _library_path()
    if path.exists():
        return _load_shared(path)
    if shipped_library is not None:
        # An artifact carried a pool library: use it rather than needing llvmlite here. It is
        # stored under its own content hash, not this version's IR hash: it may come from
        # another (ABI-compatible) version of the pool.
        try:
            return _load_shared(store_shared_library(shipped_library, prefix="tl_pool-shipped"))
        except (OSError, AttributeError):
            pass  # unusable here: build our own below
    obj = pool_object()
    if linker_command() is not None:
        link_shared(obj, path)
        return _load_shared(path)
    from . import _llvm

    tracker, addrs = _llvm.jit_load_object(obj, _EXPORTS + _OPTIONAL_EXPORTS)
    return _Pool(addrs, tracker, "ORC JIT")


def _default_num_threads() -> int:
    env = os.environ.get("TENSORLANG_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"TENSORLANG_NUM_THREADS must be a positive integer, got {env!r}")
        return min(n, MAX_THREADS)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))


def _bind_from_env() -> bool:
    env = os.environ.get("TENSORLANG_BIND_THREADS", "").strip().lower()
    if env in ("", "0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"TENSORLANG_BIND_THREADS must be 0 or 1, got {env!r}")


def _after_fork_in_child() -> None:
    global _binding
    if _pool is not None:
        _pool.after_fork()
    b, _binding = _binding, None
    if b is not None and b.caller_tid in b.saved and threading.get_ident() == b.caller_ident:
        # The forking thread was the pinned launcher: left pinned, it would pin every worker
        # the child creates (threads inherit their creator's affinity) to the same CPU, i.e.
        # run the child's parallel regions serially. The other ids in the mapping are the
        # parent's threads and name nothing here.
        try:
            os.sched_setaffinity(0, b.saved[b.caller_tid])
        except OSError:
            pass


def pool(shipped_library: bytes | None = None) -> _Pool:
    """The process's pool, loaded (and on first use on this machine, compiled) on demand.

    ``shipped_library`` is a pool library carried by an artifact, used when this machine has
    no cached copy so that loading an artifact never needs llvmlite.
    """
    global _pool
    if _pool is None:
        bind = False
        with _pool_lock:
            if _pool is None:
                bind = _bind_from_env()  # checked first: a bad value must not half-load the pool
                from ._llvm import LLVMCompileError

                try:
                    p = _load(shipped_library)
                except (ImportError, OSError, RuntimeError, LLVMCompileError) as e:
                    raise PoolUnavailable(f"the tensorlang thread pool is unavailable: {e}") from e
                p.set_num_threads(_default_num_threads())
                _pool = p
                if hasattr(os, "register_at_fork"):
                    # A fork child has no workers: without this its first launch would wait
                    # forever for the parent's.
                    os.register_at_fork(after_in_child=_after_fork_in_child)
        if bind:
            # outside the lock: binding launches on the pool, which calls pool() again
            bind_threads()
    return _pool


def launch_address() -> int:
    """Address of ``tl_parallel_launch``: what a kernel's ``@__tl_parallel_launch`` must hold."""
    return pool().addresses["tl_parallel_launch"]


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (the calling one included) for later parallel launches."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads expects an int, got {type(n).__name__}")
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"set_num_threads expects 1 <= n <= {MAX_THREADS}, got {n}")
    pool().set_num_threads(n)


def get_num_threads() -> int:
    """Number of threads (the calling one included) a parallel launch uses."""
    return int(pool().get_num_threads())


def set_spin_cycles(cycles: int) -> None:
    """How long (TSC cycles) idle threads spin before sleeping; 0 sleeps at once."""
    if cycles < 0:
        raise ValueError(f"spin cycles must be >= 0, got {cycles}")
    pool().set_spin_cycles(int(cycles))


def shared_library_bytes() -> bytes | None:
    """The pool's linked library, for shipping inside an artifact (None if it was JIT-loaded)."""
    # the library actually loaded, not the cache path of now: the cache directory may have
    # changed since (TENSORLANG_CACHE_DIR), and the loaded copy is what runs here
    path = pool().library_path
    return path.read_bytes() if path is not None and path.exists() else None


def time_calls(fn_address: int, args: list[int], number: int) -> tuple[float, int]:
    """Call the kernel at ``fn_address`` ``number`` times with ``args`` (pointers and i64s, as
    ints) in a native loop. Returns (elapsed seconds, first nonzero return code or 0)."""
    if len(args) > MAX_TIMED_ARGS:
        raise ValueError(f"native timing supports at most {MAX_TIMED_ARGS} kernel arguments")
    arr = (ctypes.c_int64 * max(1, len(args)))(*[ctypes.c_int64(a).value for a in args])
    elapsed = ctypes.c_int64(0)
    rc = pool().time_calls(fn_address, arr, len(args), number, ctypes.byref(elapsed))
    if rc == -1:
        raise RuntimeError("tl_time_calls refused the argument count")
    return elapsed.value * 1e-9, int(rc)


# Task-function type for launching from Python (tests, benchmarks).
TASK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)


def parallel_launch(fn_address: int, closure: int, num_tasks: int) -> int:
    """Call ``tl_parallel_launch`` from Python; returns its result code."""
    return int(pool().launch(fn_address, closure, num_tasks))


class _Binding:
    """What bind_threads changed, so that unbind_threads (or a fork child) can undo it."""

    def __init__(self, caller_tid: int, caller_ident: int) -> None:
        self.caller_tid = caller_tid
        self.caller_ident = caller_ident  # pthread_self: the same in a fork child, unlike the tid
        self.saved: dict[int, set[int]] = {}  # kernel tid -> affinity before binding
        self.mapping: dict[int, int] = {}  # kernel tid -> CPU


_binding: _Binding | None = None
_bind_lock = threading.Lock()


@TASK_FN
def _noop_task(task: int, num_tasks: int, closure: int) -> int:
    return 0


def worker_tids() -> list[int]:
    """Kernel thread ids of the started workers (pool slots 1.., the caller excluded)."""
    p = pool()
    if p.worker_tid is None:
        return []
    tids = (p.worker_tid(i) for i in range(1, MAX_THREADS))
    return [t for t in tids if t != 0]


def _unbind_locked() -> None:
    global _binding
    b, _binding = _binding, None
    if b is None:
        return
    for tid, cpus in b.saved.items():
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass  # the thread has exited: nothing to restore


def bind_threads(cpus: list[int] | None = None) -> dict[int, int]:
    """Pin the calling thread to the first CPU of ``cpus`` and pool worker i (i = 1..n-1) to the
    i-th (0-based, wrapping if there are more workers than CPUs); ``cpus`` defaults to the
    calling thread's allowed set, in ascending order. Returns {kernel thread id: CPU}.

    Undo with unbind_threads(); a second call first undoes the first. Launch parallel regions
    from the thread that called this: another thread is not pinned and may share a worker's
    CPU. Workers created later (a larger set_num_threads) inherit the caller's CPU: call this
    again after growing the pool. A no-op returning {} where there is nothing to spread (one
    CPU, a one-thread pool) or no way to (no sched_setaffinity, a pool library without
    tl_worker_tid).
    """
    global _binding
    if not hasattr(os, "sched_setaffinity"):
        return {}
    p = pool()
    with _bind_lock:
        _unbind_locked()  # so that the default CPU set is the one from before any binding
        try:
            allowed = sorted(os.sched_getaffinity(0)) if cpus is None else [int(c) for c in cpus]
        except OSError:
            return {}
        if len(allowed) < 2 or p.get_num_threads() < 2 or p.worker_tid is None:
            return {}
        # One launch over the whole pool creates every worker and, by the time it returns, each
        # has published its id (it takes part in the launch only after doing so).
        p.launch(ctypes.cast(_noop_task, ctypes.c_void_p).value, None, 0)
        caller = threading.get_native_id()
        b = _Binding(caller, threading.get_ident())
        targets = [(caller, allowed[0])]
        for i in range(1, p.get_num_threads()):
            tid = int(p.worker_tid(i))
            if tid:
                targets.append((tid, allowed[i % len(allowed)]))
        for tid, cpu in targets:
            try:
                before = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, {cpu})
            except OSError:
                continue  # a CPU outside our cgroup/cpuset: leave that thread as it was
            b.saved[tid] = before
            b.mapping[tid] = cpu
        _binding = b
        return dict(b.mapping)


def unbind_threads() -> None:
    """Give every thread bind_threads pinned the affinity it had before; no-op if none."""
    with _bind_lock:
        _unbind_locked()
