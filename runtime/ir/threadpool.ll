; tensorlang thread pool (see runtime/threadpool.py for the protocol)
;
; Template parameters, each written as its name between two at signs and filled with an integer
; by runtime/_pool_ir.py (fill_template refuses a parameter left unfilled or a value for one that
; is not used here):
;   MAXW        pool slots = MAX_THREADS (the calling thread is slot 0)
;   SLOTBYTES   bytes of @tl_slots (MAXW * 64)
;   TIDBYTES    bytes of @tl_tids (MAXW * 8)
;   SPIN        initial spin budget in clock units (DEFAULT_SPIN_CYCLES)
;   PURE_SPIN   clock units of pause-only spinning before sched_yield (PURE_SPIN_CYCLES)
;   SYS_FUTEX   the architecture's futex syscall number
;   SYS_GETTID  the architecture's gettid syscall number
; The architecture's @tl_relax and @tl_clock come from pool_<machine>.ll, appended to this text;
; the native timing loop (timing.ll) is appended after them (tl_time_calls_woken, here, calls
; its tl_time_calls).
;
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

; An empty task: the job tl_time_calls_woken hands every worker.
define internal i32 @tl_noop_task(i32 %t, i32 %n, ptr %cl) nounwind {
  ret i32 0
}

; tl_time_calls (timing.ll, appended to this text) after an empty parallel region over the whole
; pool, with nothing but a return between that region's end and the loop's first clock read. For
; a measurement that evicts the caches before each timed call: through the milliseconds of the
; eviction the workers waited in sched_yield, and on a shared machine a yielding worker is off its
; CPU whenever another thread wants it; a launch waits for every worker it hands the job to, even
; one that finds no task left, so the timed call waited for the worker's next turn (a 1.5 us
; kernel timed at 1-7 ms). Once a worker has taken the empty job it has just run and spins
; without yielding for the first PURE_SPIN units of its wait: the timed launch finds it as a
; launch inside a model run finds it, right after the kernel before. One thread: the empty task
; runs once on the caller.
define i32 @tl_time_calls_woken(ptr %fn, ptr %args, i32 %nargs, i64 %number, ptr %elapsed) nounwind {
entry:
  %woke = call i32 @tl_parallel_launch(ptr @tl_noop_task, ptr null, i32 0)
  %r = call i32 @tl_time_calls(ptr %fn, ptr %args, i32 %nargs, i64 %number, ptr %elapsed)
  ret i32 %r
}

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
