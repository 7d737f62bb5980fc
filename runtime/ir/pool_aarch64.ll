; AArch64 part of the thread pool (threadpool.ll): one spin-wait hint (YIELD) and the clock of
; the spin budgets. User space cannot read the cycle counter, so the "clock" counts spin
; iterations, weighted to about the cost of one yield-hinted iteration.

declare void @llvm.aarch64.hint(i32)

define internal void @tl_relax() alwaysinline nounwind {
  call void @llvm.aarch64.hint(i32 1)
  ret void
}

define internal i64 @tl_clock(i64 %iter) alwaysinline nounwind {
  %c = mul i64 %iter, 64
  ret i64 %c
}
