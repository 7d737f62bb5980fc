"""The low-level llvmlite driver: IR text -> verified, optimized module -> object code.

The runtime only needs it for fallbacks (compiling the thread pool on a machine that has no
cached copy, JIT-loading an object where no linker exists, producing assembly text on demand);
``tensorlang.codegen.target`` builds its cached, policy-bearing ``compile_ir`` on top of it.
llvmlite is imported lazily so that a deployed artifact loads on a machine without it.

All llvmlite work is serialized by one process-wide lock: parsing uses LLVM's global context
and a target machine is not safe to share between threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

LLVM_LOCK = threading.RLock()
_initialized = False
_machines: dict[tuple[str, str, str, int], Any] = {}


class LLVMCompileError(Exception):
    """IR that LLVM refused. ``stage`` is "parse", "verify" or "optimizer output verify" (the
    optimizer made invalid IR); the message is LLVM's."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(f"LLVM {stage} error: {message.strip()}")
        self.stage = stage
        self.llvm_message = message.strip()


def binding() -> Any:
    """``llvmlite.binding``, with the native target and asm printer initialized once.

    ``llvm.initialize()`` raises in llvmlite 0.50, so only the native initializers are called.
    """
    global _initialized
    import llvmlite.binding as llvm

    if not _initialized:
        with LLVM_LOCK:
            if not _initialized:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                _initialized = True
    return llvm


@contextlib.contextmanager
def no_llvm_call_in_flight() -> Iterator[None]:
    """Held across ``os.fork`` (compile_limit): no thread of this process is inside LLVM.

    LLVM_LOCK alone does not ensure it: llvmlite objects are disposed whenever Python frees
    them (a ModuleRef at the end of compile_ir_text, after the lock is released), and the host
    queries (get_host_cpu_name, ...) run unlocked. Each such call holds llvmlite's own lock, and
    a fork made while another thread held it left the child waiting for it forever: with
    graph.build running in two threads, compile children hung until the build's time limit
    (60 s), then the kernel was refused and fell back to the naive schedule. The forking thread
    owns both locks, so the child (that thread's copy) can take them again."""
    with LLVM_LOCK:
        binding()
        from llvmlite.binding import ffi

        lock = getattr(getattr(ffi, "lib", None), "_lock", None)  # (llvmlite 0.4x-0.50)
        with lock if lock is not None else contextlib.nullcontext():
            yield


def target_machine(cpu: str, features: str, triple: str, opt_level: int) -> Any:
    """A cached target machine: position-independent code, small code model.

    PIC + small code model is what ``ld -shared`` needs and what the JIT fallback also loads.
    Never hand one of these to MCJIT, which would take ownership of it.
    """
    key = (cpu, features, triple, opt_level)
    with LLVM_LOCK:
        tm = _machines.get(key)
        if tm is None:
            llvm = binding()
            target = llvm.Target.from_triple(triple)
            tm = target.create_target_machine(
                cpu=cpu, features=features, opt=opt_level, reloc="pic", codemodel="default"
            )
            _machines[key] = tm
        return tm


def parse_and_verify(ir_text: str) -> Any:
    """Parse and verify IR text. Verification comes first because LLVM's optimizer can crash
    the process on invalid IR instead of reporting it."""
    llvm = binding()
    try:
        mod = llvm.parse_assembly(ir_text)
    except RuntimeError as e:
        raise LLVMCompileError("parse", str(e)) from None
    try:
        mod.verify()
    except RuntimeError as e:
        raise LLVMCompileError("verify", str(e)) from None
    return mod


def compile_ir_text(
    ir_text: str,
    cpu: str,
    features: str,
    triple: str,
    opt_level: int,
    want_asm: bool = False,
    loop_vectorize: bool = True,
) -> tuple[bytes, str, str | None]:
    """Compile IR text; returns (object code, optimized IR text, assembly text or None).
    loop_vectorize=False leaves LLVM's loop vectorizer out of the pipeline (the fallback for IR
    on which it runs without end: codegen/compile_limit.py)."""
    with LLVM_LOCK:
        llvm = binding()
        tm = target_machine(cpu, features, triple, opt_level)
        mod = _optimized(llvm, tm, ir_text, triple, opt_level, slp=opt_level >= 2,
                         loop_vectorize=loop_vectorize)
        error = _verify_error(mod) if opt_level > 0 else None
        if error is not None and opt_level >= 2:
            # LLVM's SLP vectorizer has been seen to emit IR that its own verifier rejects (a
            # value used before its definition, in a 2x2 sum-pool at -O3), on which the code
            # generator aborts the process: the same pipeline without it. Our vector loops are
            # explicit vector code, not left to LLVM's vectorizers.
            mod = _optimized(llvm, tm, ir_text, triple, opt_level, slp=False,
                             loop_vectorize=loop_vectorize)
            error = _verify_error(mod)
        if error is not None:
            raise LLVMCompileError("optimizer output verify", error)
        optimized = str(mod)
        obj = bytes(tm.emit_object(mod))
        asm = tm.emit_assembly(mod) if want_asm else None
        return obj, optimized, asm


def _optimized(llvm: Any, tm: Any, ir_text: str, triple: str, opt_level: int, slp: bool,
               loop_vectorize: bool = True) -> Any:
    """The verified module of `ir_text`, run through the new pass manager's default pipeline for
    the level (as clang -O<n> runs it)."""
    mod = parse_and_verify(ir_text)
    mod.triple = triple
    mod.data_layout = str(tm.target_data)
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pto.loop_vectorization = opt_level >= 2 and loop_vectorize
        pto.slp_vectorization = slp
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod


def _verify_error(mod: Any) -> str | None:
    try:
        mod.verify()
    except RuntimeError as e:
        return str(e)
    return None


def assembly_of(ir_text: str, cpu: str, features: str, triple: str, opt_level: int = 3) -> str:
    """Assembly for already-optimized IR, without running the optimizer again: code generation
    from the same IR with the same target machine reproduces the object's instructions."""
    with LLVM_LOCK:
        tm = target_machine(cpu, features, triple, opt_level)
        mod = parse_and_verify(ir_text)
        mod.triple = triple
        mod.data_layout = str(tm.target_data)
        return tm.emit_assembly(mod)


_lljit: Any = None
_jit_counter = 0


def jit_load_object(object_code: bytes, exports: list[str]) -> tuple[Any, dict[str, int]]:
    """Load an object file into the process-wide ORC JIT (the no-linker fallback).

    Returns (resource tracker, {symbol: address}). The code stays mapped as long as the tracker
    is referenced: callers must keep it alive as long as anything may run the code.
    Unresolved symbols are looked up in the current process (libc, libm).
    """
    global _lljit, _jit_counter
    with LLVM_LOCK:
        llvm = binding()
        if _lljit is None:
            _lljit = llvm.create_lljit_compiler()
        _jit_counter += 1
        builder = llvm.JITLibraryBuilder()
        builder.add_object_img(object_code)
        builder.add_current_process()
        for name in exports:
            builder.export_symbol(name)
        tracker = builder.link(_lljit, f"tl_object_{_jit_counter}")
        return tracker, {name: int(tracker[name]) for name in exports}
