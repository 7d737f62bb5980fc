"""The thread pool's IR resources (runtime/ir/*.ll): each parses and verifies with LLVM, the
template parameters are filled strictly, and the timing loop of every arity calls the kernel with
exactly its arity."""

from __future__ import annotations

import configparser
import fnmatch
import re
from pathlib import Path

import pytest
from tensorlang.runtime import _llvm, _pool_ir, threadpool
from tensorlang.runtime._pool_ir import PoolIRError

ROOT = Path(__file__).resolve().parents[2]
MACHINES = sorted(_pool_ir.SYSCALLS)


@pytest.fixture(scope="module")
def llvm():
    return _llvm.binding()


def _verified(llvm, text: str):
    mod = llvm.parse_assembly(text)
    mod.verify()
    return mod


@pytest.mark.parametrize("machine", MACHINES)
def test_pool_module_parses_and_verifies(llvm, machine):
    mod = _verified(llvm, _pool_ir.pool_ir(machine))
    exported = {f.name for f in mod.functions if not f.is_declaration and f.linkage.value == 0}
    assert exported == {
        "tl_parallel_launch",
        "tl_set_num_threads",
        "tl_get_num_threads",
        "tl_set_spin_cycles",
        "tl_pool_after_fork",
        "tl_worker_tid",
        "tl_time_calls",
        "tl_time_calls_woken",
    }


@pytest.mark.parametrize("name", [f"pool_{m}.ll" for m in MACHINES] + ["timing.ll"])
def test_standalone_resources_parse_and_verify(llvm, name):
    mod = _verified(llvm, _pool_ir.read_resource(name))
    assert not _pool_ir.template_parameters(_pool_ir.read_resource(name))
    if name.startswith("pool_"):
        assert {"tl_relax", "tl_clock"} <= {f.name for f in mod.functions}


def test_template_parameters_are_exactly_the_ones_filled():
    used = _pool_ir.template_parameters(_pool_ir.read_resource("threadpool.ll"))
    for machine in MACHINES:
        assert used == set(_pool_ir.pool_parameters(machine))
    text = _pool_ir.pool_ir("x86_64")
    assert f"[{threadpool.MAX_THREADS} x %slot]" in text
    assert f"i64 {threadpool.DEFAULT_SPIN_CYCLES}, align 8" in text


def test_fill_template_refuses_mismatches():
    text = "store i32 @N@, ptr @tl_x\nadd i64 @M@, 1"
    assert _pool_ir.fill_template(text, {"N": 4, "M": 9}) == "store i32 4, ptr @tl_x\nadd i64 9, 1"
    with pytest.raises(PoolIRError, match=r"no value for \['M'\]"):
        _pool_ir.fill_template(text, {"N": 4})
    with pytest.raises(PoolIRError, match=r"values for unknown \['K'\]"):
        _pool_ir.fill_template(text, {"N": 4, "M": 9, "K": 1})
    with pytest.raises(PoolIRError, match="parameter M must be an int, got 'call void @f"):
        _pool_ir.fill_template(text, {"N": 4, "M": "call void @f()"})
    with pytest.raises(PoolIRError, match="parameter N must be an int, got True"):
        _pool_ir.fill_template(text, {"N": True, "M": 1})


def test_missing_resource_and_unknown_machine_are_named():
    with pytest.raises(PoolIRError, match=r"nope\.ll is missing.*package data"):
        _pool_ir.read_resource("nope.ll")
    with pytest.raises(RuntimeError, match="does not support 'riscv64' yet"):
        _pool_ir.pool_ir("riscv64")


def _calls(fn):
    for block in fn.blocks:
        for ins in block.instructions:
            if ins.opcode == "call":
                yield block.name, list(ins.operands)


def test_each_timing_loop_calls_the_kernel_with_its_arity(llvm):
    mod = _verified(llvm, _pool_ir.read_resource("timing.ll"))
    for k in range(threadpool.MAX_TIMED_ARGS + 1):
        fn = mod.get_function(f"tl_time_calls_{k}")
        assert [str(a.type) for a in fn.arguments] == ["ptr", "ptr", "i64", "ptr"]
        kernel_calls = [ops for block, ops in _calls(fn) if block == "body"]
        assert len(kernel_calls) == 1, k
        *args, callee = kernel_calls[0]
        assert callee.name == "fn"
        assert [(a.name, str(a.type)) for a in args] == [(f"a{i}", "i64") for i in range(k)]
    with pytest.raises(NameError):
        mod.get_function(f"tl_time_calls_{threadpool.MAX_TIMED_ARGS + 1}")


def test_timing_dispatch_covers_every_arity(llvm):
    mod = _verified(llvm, _pool_ir.read_resource("timing.ll"))
    dispatch = mod.get_function("tl_time_calls")
    switch = next(str(i) for b in dispatch.blocks for i in b.instructions if i.opcode == "switch")
    cases = re.findall(r"i32 (\d+), label %(\w+)", switch)
    assert cases == [(str(k), f"a{k}") for k in range(threadpool.MAX_TIMED_ARGS + 1)]
    targets = {block: ops[-1].name for block, ops in _calls(dispatch)}
    assert targets == {f"a{k}": f"tl_time_calls_{k}" for k in range(threadpool.MAX_TIMED_ARGS + 1)}


def test_every_resource_is_package_data():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    globs = cfg["options.package_data"]["tensorlang.runtime"].split()
    resources = [p.relative_to(ROOT / "runtime").as_posix() for p in _pool_ir.IR_DIR.iterdir()]
    assert resources
    for rel in resources:
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} is not in package_data"


def test_woken_timing_launches_on_every_worker_then_times(llvm):
    # the empty region first (num_tasks 0: the pool size), then the timing loop, whose first
    # step is the clock read: nothing of the wake-up inside the timed interval
    mod = _verified(llvm, _pool_ir.pool_ir("x86_64"))
    calls = [(ops[-1].name, ops[:-1]) for _block, ops in _calls(mod.get_function(
        "tl_time_calls_woken"))]
    assert [name for name, _args in calls] == ["tl_parallel_launch", "tl_time_calls"]
    fn, _closure, tasks = calls[0][1]
    assert fn.name == "tl_noop_task" and str(tasks).endswith("i32 0")
    assert [a.name for a in calls[1][1]] == ["fn", "args", "nargs", "number", "elapsed"]
