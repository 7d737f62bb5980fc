; x86-64 part of the thread pool (threadpool.ll): one spin-wait hint and the clock of the spin
; budgets, the time-stamp counter.

declare void @llvm.x86.sse2.pause()
declare i64 @llvm.readcyclecounter()

define internal void @tl_relax() alwaysinline nounwind {
  call void @llvm.x86.sse2.pause()
  ret void
}

define internal i64 @tl_clock(i64 %iter) alwaysinline nounwind {
  %c = call i64 @llvm.readcyclecounter()
  ret i64 %c
}
