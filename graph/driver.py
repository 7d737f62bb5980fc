"""The graph driver: one generated native function that runs a whole plan.

``i32 @tl_graph_run(ptr fns, ptr args, ptr status)`` calls each step's kernel in order: it loads
the kernel's address from the function table ``fns`` (kernels indexed by sorted name) and the
step's argument addresses from ``args`` (all steps' arguments, one after the other), and stops at
the first kernel that returns a nonzero code, storing (step index, code) in ``status`` and
returning the step index + 1. It returns 0 when every step succeeded.

The IR is made with llvmlite's IR builder (so a malformed instruction is a Python error here,
not a parse error at run time) and compiled once per plan shape."""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

SYMBOL = "tl_graph_run"

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_PTR = ir.PointerType()


def driver_ir(steps: Sequence[tuple], n_vars: int | None = None) -> str:
    """LLVM IR text of the driver for ``steps``: (kernel index, argument count) per step, and
    with ``n_vars`` (a model with shape variables) the positions of the step's kernel's
    variables in the fourth table, ``vars`` (i64 sizes, passed after the arrays)."""
    module = ir.Module(name="tl_graph_driver")
    tables = ("fns", "args", "status") + (("vars",) if n_vars is not None else ())
    fn = ir.Function(module, ir.FunctionType(_I32, [_PTR] * len(tables)), name=SYMBOL)
    for a, name in zip(fn.args, tables):
        a.name = name
        a.add_attribute("noalias")
    fns, args, status = fn.args[:3]
    sizes = fn.args[3] if n_vars is not None else None
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    first_arg = 0
    for i, (kidx, nargs, *var_pos) in enumerate(steps):
        extra = [_load_size(b, sizes, k, f"{i}_{j}") for j, k in enumerate(var_pos[0])] \
            if var_pos else []
        rc = _call_step(b, fns, args, i, kidx, range(first_arg, first_arg + nargs), extra)
        first_arg += nargs
        _stop_on_failure(b, fn, status, i, rc)
    b.ret(ir.Constant(_I32, 0))
    return str(module)


def _load_address(b: ir.IRBuilder, table, index: int, kind: str, tag: str, as_type=_PTR):
    """table[index] (an i64 address) as a pointer, in values named {kind}p{tag} (its slot),
    {kind}i{tag} (the integer) and {kind}{tag}."""
    slot = b.gep(table, [ir.Constant(_I64, index)], source_etype=_I64, name=f"{kind}p{tag}")
    return b.inttoptr(b.load(slot, name=f"{kind}i{tag}", typ=_I64), as_type, name=kind + tag)


def _load_size(b: ir.IRBuilder, sizes, index: int, tag: str):
    """sizes[index]: a shape variable's value, an i64 argument of the kernel."""
    slot = b.gep(sizes, [ir.Constant(_I64, index)], source_etype=_I64, name=f"vp{tag}")
    return b.load(slot, name=f"v{tag}", typ=_I64)


def _call_step(b: ir.IRBuilder, fns, args, i: int, kidx: int, slots: range, sizes=()):
    """Call step i's kernel with its arguments (then its shape variables' values, ``sizes``);
    returns the call's i32 result."""
    # the kernels' type, i32 (ptr, ..., i64, ...), one ptr per argument of this step: llvmlite
    # takes an indirect call's signature from its callee's pointer type (LLVM reads it as a
    # plain ptr)
    fnty = ir.FunctionType(_I32, [_PTR] * len(slots) + [_I64] * len(sizes))
    callee = _load_address(b, fns, kidx, "f", str(i), fnty.as_pointer())
    actuals = [_load_address(b, args, slot, "a", f"{i}_{j}") for j, slot in enumerate(slots)]
    return b.call(callee, actuals + list(sizes), name=f"r{i}")


def _stop_on_failure(b: ir.IRBuilder, fn, status, i: int, rc) -> None:
    """A nonzero code: store (i, code) in status and return i + 1; else go on in a new block."""
    failed = b.icmp_unsigned("!=", rc, ir.Constant(_I32, 0), name=f"c{i}")
    fail = fn.append_basic_block(f"fail{i}")
    ok = fn.append_basic_block(f"ok{i}")
    b.cbranch(failed, fail, ok)
    b.position_at_end(fail)
    b.store(ir.Constant(_I64, i), status)
    code = b.sext(rc, _I64, name=f"rc{i}")
    b.store(code, b.gep(status, [ir.Constant(_I64, 1)], source_etype=_I64, name=f"sp{i}"))
    b.ret(ir.Constant(_I32, i + 1))
    b.position_at_end(ok)


def build_driver(steps: Sequence[tuple], n_kernels: int, n_args: int,
                 target, n_vars: int | None = None) -> object:
    """The driver as a runtime Module, its manifest recording the tables' sizes and the
    steps (the runtime checks them against the plan when it loads a model). ``n_vars``: the
    number of shape variables of a model with symbolic shapes (see :func:`driver_ir`)."""
    from tensorlang.runtime import Module

    from tensorlang.codegen.target import Target, compile_ir
    from tensorlang.version import __version__

    tgt = Target.from_string(target)
    text = driver_ir(steps, n_vars)
    # O1: the driver is straight-line calls; nothing for the O3 pipeline to win
    obj = compile_ir(text, tgt, opt_level=1)
    manifest = {
        "name": SYMBOL,
        "symbol": SYMBOL,
        "args": [
            {"name": "fns", "shape": [max(1, n_kernels)], "dtype": "int64"},
            {"name": "args", "shape": [max(1, n_args)], "dtype": "int64"},
            {"name": "status", "shape": [2], "dtype": "int64", "written": True},
        ] + ([{"name": "vars", "shape": [n_vars], "dtype": "int64"}] if n_vars is not None
             else []),
        "vars": [],
        "target": tgt.to_dict(),
        "version": __version__,
        # what the code calls, in order: the runtime checks it against the plan at load
        "steps": [[int(k), int(n), *[[int(p) for p in ps] for ps in rest]]
                  for k, n, *rest in steps],
    }
    return Module.from_object(obj.object_code, manifest, {"ll": text})
