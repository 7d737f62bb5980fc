"""The kernel pipeline as one readable list of steps: schedule -> loop IR -> LLVM IR -> machine
code -> a runtime Module callable on numpy arrays."""

from __future__ import annotations

from .ir import dtype as dt
from .ir import expr as E
from .ir import stmt as S
from .ir.checks import error_messages
from .ir.expr import Var, as_int
from .lower import lower
from .schedule import Schedule
from .version import __version__

# Seconds LLVM may spend compiling one kernel by default (codegen.compile_limit, which enforces
# it, is imported when building: a deployed model loads without any compiler module).
DEFAULT_BUILD_TIMEOUT = 60.0
MAX_NAME_LENGTH = 200
# Symbols a kernel's object file or process already gives a meaning to: a kernel named like one
# of them would take its place ("__tl_parallel_launch" crashed the loader, "fmodf" recursed).
# "__": the C implementation's and LLVM's runtime helpers (__tl_parallel_launch, __truncsfhf2);
# "tl_": the thread pool's entry points (tl_parallel_launch, tl_time_calls, ...).
RESERVED_PREFIXES = ("__", "tl_")
# C library functions the generated code calls, or LLVM may call for an operation the CPU lacks
# (frem -> fmodf; floor/fma without SSE4.1/FMA; loops -> memset/memcpy).
LIBRARY_SYMBOLS = frozenset(
    {"aligned_alloc", "calloc", "free", "malloc", "memcpy", "memmove", "memset", "bzero"}
    | {f + s for f in ("fmod", "floor", "ceil", "trunc", "round", "roundeven", "rint",
                       "nearbyint", "fma", "sqrt", "fmin", "fmax", "fabs", "copysign", "exp",
                       "exp2", "log", "log2", "log10", "pow", "sin", "cos", "tan", "atan", "tanh",
                       "erf", "ldexp", "frexp", "modf", "asin", "acos", "sinh", "cosh", "asinh",
                       "acosh", "atanh", "log1p", "atan2", "hypot")
       for s in ("", "f", "l")})


def check_kernel_name(name) -> None:
    """Refuse a kernel name that cannot be the symbol of a kernel: not an ASCII identifier,
    longer than MAX_NAME_LENGTH, or a symbol the runtime or the C library defines."""
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise ValueError(f"kernel name must be an identifier of ASCII letters, digits and '_' "
                         f"(not starting with a digit), got {name!r:.80}")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"kernel name is {len(name)} characters long, more than the "
                         f"{MAX_NAME_LENGTH} allowed: {name[:40]!r}...")
    if name.startswith(RESERVED_PREFIXES):
        raise ValueError(f"kernel name {name!r} starts with a reserved prefix "
                         f"({' or '.join(map(repr, RESERVED_PREFIXES))}: the runtime's and the "
                         "C library's symbols); choose another name")
    if name in LIBRARY_SYMBOLS:
        raise ValueError(f"kernel name {name!r} is a C library function that kernels may call; "
                         "choose another name")


# How the manifest writes an argument dimension that is an expression of shape variables
# (runtime/_dims.py parses it back): operator and precedence per node type.
_DIM_OPS = {E.Add: ("+", 1), E.Sub: ("-", 1), E.Mul: ("*", 2), E.FloorDiv: ("//", 2),
            E.FloorMod: ("%", 2)}


def _shape_entry(e, arg_name: str) -> int | str:
    """An argument dimension as the manifest records it: an int, a variable's name, or an
    expression of variables in + - * // %, max and min ('n - 2', 'max(n - 2, 0)': a clamped
    slice), which the call binds and checks."""
    v = as_int(e)
    if v is not None:
        return v
    if isinstance(e, Var):
        return e.name
    return _dim_text(e, arg_name, e)[0]


def _dim_text(e, arg_name: str, whole) -> tuple[str, int]:
    """(text, precedence) of an integer expression of shape variables."""
    v = as_int(e)
    if v is not None:
        return (str(v), 3) if v >= 0 else (f"({v})", 3)
    if isinstance(e, Var):
        return e.name, 3
    if isinstance(e, (E.Max, E.Min)):
        args = (_dim_text(x, arg_name, whole)[0] for x in (e.a, e.b))
        return f"{'max' if isinstance(e, E.Max) else 'min'}({', '.join(args)})", 3
    op = _DIM_OPS.get(type(e))
    if op is None:
        raise ValueError(f"argument {arg_name}: a dimension must be an int or an expression "
                         f"of tl.var symbols with + - * // %, max and min, got {whole!r}")
    sym, prec = op
    left, lp = _dim_text(e.a, arg_name, whole)
    right, rp = _dim_text(e.b, arg_name, whole)
    negative = as_int(e.b)
    if isinstance(e, E.Add) and negative is not None and negative < 0:
        return f"{left} - {-negative}", 1  # n + (-2) reads n - 2
    left = left if lp >= prec else f"({left})"
    right = right if rp > prec else f"({right})"
    return f"{left} {sym} {right}", prec


def manifest_of(func: S.PrimFunc, target) -> dict:
    from .codegen.llvm_ir import allocation_error_messages, extern_manifest

    externs = extern_manifest(func)  # the C functions it calls, and their libraries
    return {
        "name": func.name,
        "symbol": func.name,
        "args": [{"name": b.name, "shape": [_shape_entry(d, b.name) for d in b.shape],
                  "dtype": b.dtype, "written": w} for b, w in zip(func.params, func.written)],
        "vars": [v.name for v in func.shape_vars],
        # a float scalar parameter's dtype (the other vars are int64, as in older manifests)
        **_var_dtypes(func),
        "error_messages": {**error_messages(func.body), **allocation_error_messages(func.body)},
        "target": target.to_dict(),
        "version": __version__,
        **({"externs": externs} if externs else {}),
    }


def _var_dtypes(func: S.PrimFunc) -> dict:
    floats = {v.name: v.dtype for v in func.shape_vars if v.dtype != dt.INDEX_DTYPE}
    return {"var_dtypes": floats} if floats else {}


def _call_order(args, func: S.PrimFunc) -> dict:
    """{"call_order": [names]} when tl.var scalars are listed among the arguments (TVM's
    scalar parameters, which its scripts pass positionally: g(a, b, 4)): the arrays' and the
    scalars' names in the order listed. Empty without scalars (the call takes the arrays)."""
    params = iter(b.name for b in func.params)
    order: list[str] = []
    for a in args:
        if not isinstance(a, Var):
            order.append(next(params, None))
        elif a.name not in order:
            order.append(a.name)
    if len(order) == len(func.params) or None in order or next(params, None) is not None:
        return {}
    return {"call_order": order}


def build(schedule, args=None, target=None, name: str = "main", opt_level: int = 3,
          timeout: float | None = DEFAULT_BUILD_TIMEOUT, *, target_host=None):
    """Compile a schedule (or an already lowered kernel) into a runtime.Module.

    target: "llvm" (the host CPU) or "llvm -mcpu=... -mattr=..."; None (the default): the
    innermost ``with tl.target.Target(...)`` scope's, else "llvm".

    target_host: TVM's host target, accepted as None or an "llvm ..." string: the kernel runs on
    the host, so the host code is the kernel's own (built for `target`).

    timeout: the seconds of CPU LLVM may spend compiling (60 by default; None: no limit),
    else BuildTimeoutError. CPU time, so that a busy machine does not end a compile early. A
    compile under a limit runs in a forked child process.

    args: the kernel's tensors, in call order, and any tl.var the schedule uses that no
    argument shape has (a symbolic split factor: the call passes it in its place, g(a, b, 4),
    or by keyword, g(a, b, f=4)). A stage that
    is inlined or computed at another stage may be listed: as in TVM it is an unused argument
    (never written; its array is still checked at the call). Argument shapes may be
    expressions of shape variables ('n - 2'): the call binds and checks them.

    1. lower: schedule -> loop IR (tl.lower; legality is checked there)
    2. emit: loop IR -> LLVM IR text with explicit vector code and an outlined parallel body
    3. compile: LLVM's O3 pipeline for the host CPU -> PIC object code (cached on disk)
    4. load: the object linked into a shared library and wrapped in a checked call
    """
    # imported here: `import tensorlang` (and so tensorlang.runtime, for deployed kernels) must
    # work without llvmlite
    from .codegen.compile_limit import check_timeout
    from .codegen.llvm_ir import emit_llvm_ir
    from .codegen.target import Target, compile_ir
    from .runtime import Module

    timeout = check_timeout(timeout)  # before the work, not after a lowering
    if target_host is not None and (not isinstance(target_host, str)
                                    or target_host.split(" ", 1)[0] != "llvm"):
        raise ValueError(f"build: target_host={target_host!r}: the kernel runs on the host "
                         "CPU, built for target ('llvm ...'); a separate host target is not "
                         "supported")
    if target is None:  # TVM's `with tvm.target.Target(...):` scope, else the host CPU
        from .target import Target as TargetScope

        target = TargetScope.current() or "llvm"
    if isinstance(schedule, Schedule):
        if args is None:
            raise TypeError("build: give the kernel's argument tensors, e.g. "
                            "tl.build(s, [A, B, C])")
        func = lower(schedule, args, name=name)
    elif isinstance(schedule, S.PrimFunc):
        check_kernel_name(schedule.name)
        func = schedule
    else:
        raise TypeError(f"build: expected a Schedule or a lowered kernel, got "
                        f"{type(schedule).__name__}")
    tgt = Target.from_string(target)
    manifest = manifest_of(func, tgt)  # before compiling: it finds the C functions called
    if isinstance(schedule, Schedule):
        manifest.update(_call_order(args, func))
    llvm_ir = emit_llvm_ir(func, tgt)
    obj = compile_ir(llvm_ir, tgt, opt_level=opt_level, timeout=timeout)
    sources = {"tir": str(func), "ll": obj.optimized_ir, "ll_unoptimized": llvm_ir}
    if obj.asm:
        sources["asm"] = obj.asm
    return Module.from_object(obj.object_code, manifest, sources)
