"""TVM names that tensorlang spells differently or does not have, and what to use instead.

A script written for TVM runs here after `te.X` / `tvm.X` becomes `tl.X` wherever the two agree
(docs/tvm_compat.md has the whole table). Where they do not, the AttributeError that a missing
name raises says the TVM construct and ours: the lookups below are consulted by the
module-level `__getattr__` of tensorlang and tensorlang.te, and by Stage and Schedule, only for a
name that does not exist (so they cost nothing on the normal paths)."""

from __future__ import annotations

GPU_ONLY = ("is a GPU construct; the target here is the host CPU (llvm), which has no "
            "equivalent")
USE_PARALLEL = ("on the CPU, split the loop and use s[T].parallel(outer) for threads and "
                "s[T].vectorize(inner) for SIMD lanes")

MODULE_NAMES = {
    "thread_axis": f"te.thread_axis {GPU_ONLY}: {USE_PARALLEL}",
    "cuda": f"tvm.cuda() {GPU_ONLY}: use tl.cpu(0)",
    "gpu": f"tvm.gpu() {GPU_ONLY}: use tl.cpu(0)",
    "rocm": f"tvm.rocm() {GPU_ONLY}: use tl.cpu(0)",
    "opencl": f"tvm.opencl() {GPU_ONLY}: use tl.cpu(0)",
    "vulkan": f"tvm.vulkan() {GPU_ONLY}: use tl.cpu(0)",
    "metal": f"tvm.metal() {GPU_ONLY}: use tl.cpu(0)",
    "create_prim_func": "te.create_prim_func builds TensorIR for tvm.tir.Schedule, which "
                        "tensorlang does not have: schedule with tl.create_schedule, and "
                        "tl.lower(s, args) gives the loop IR",
    "IRModule": "tvm.IRModule: tl.lower(s, args) returns one kernel (a PrimFunc) and "
                "tl.build(s, args) a runtime Module; there are no multi-function IR modules",
    "autotvm": "tvm.autotvm: `from tensorlang import autotune` (autotvm.template -> "
               "autotune.template, autotvm.task.create -> autotune.create_task, "
               "autotvm.tuner.XGBTuner -> autotune.XGBTuner, autotvm.apply_history_best -> "
               "autotune.apply_history_best); see docs/tvm_compat.md",
    "relay": "tvm.relay (Relay graphs) is not in tensorlang: the graph layer is "
             "tensorlang.graph: graph.from_onnx(path) (relay.frontend.from_onnx) or "
             "graph.Builder for a hand-made graph, graph.build(g, target='llvm') (relay.build), "
             "gm.run(x=...) (graph_executor)",
    "relax": "tvm.relax is not in tensorlang: the graph layer is tensorlang.graph "
             "(graph.from_onnx, graph.Builder, graph.build)",
    "topi": "tvm.topi is not in tensorlang: the operator library is tensorlang.ops (its own "
            "names and signatures: tl.ops.matmul, tl.ops.conv2d_nchw, ...; docs/operators.md), or "
            "write the compute with tl.compute",
    "call_llvm_intrin": "tvm.tir.call_llvm_intrin / call_llvm_pure_intrin (an LLVM intrinsic "
                        "by name) are not supported: the math functions (tl.exp, tl.sqrt, "
                        "tl.fma, ...) lower to LLVM's intrinsics; a C function is called per "
                        "element with tl.call_pure_extern(dtype, 'symbol', x)",
    "create_schedule_state": "not in tensorlang: schedules are tl.create_schedule(outputs)",
    "hybrid": "te.hybrid (Python-like loop scripts) is not supported: declare the computation "
              "with tl.compute (tl.if_then_else for conditions, tl.scan for recurrences), or "
              "tl.extern for an opaque body",
    "gradient": "te.gradient (automatic differentiation) is not supported: declare the "
                "gradient's computation with tl.compute",
    "transform": "tvm.transform (PassContext, passes by name) is not in tensorlang: the lowering "
                 "passes are a fixed ordered list; options are keyword arguments of tl.build "
                 "(tl.build(s, args, opt_level=3))",
    "schedule": "tvm.te.schedule (InferBound, ScheduleOps, AutoInlineInjective, ...): the "
                "schedule's internals are not exposed: tl.lower(s, args) prints the loop IR "
                "with the inferred bounds; inline a stage with s[T].compute_inline(); the "
                "classes are tl.Schedule and tl.Stage",
    "arith": "tvm.arith (the integer analyzer) is not exposed: shapes and indices are "
             "simplified by tl.lower",
    "context": "tvm.context(dev_type, index) (before TVM 0.8): tl.device('cpu', 0) or tl.cpu(0)",
    "save_json": "tvm.ir.save_json / load_json: a schedule is saved as its trace "
                 "(s.trace.dumps(), replayed with s.apply_trace(tl.Trace.loads(text))) and a "
                 "kernel with f.export_library(path); computes are Python code",
}
MODULE_NAMES["load_json"] = MODULE_NAMES["save_json"]
# TVM's API before 0.7 (tvm.var, tvm.compute, ... are tl's names already)
MODULE_NAMES.update({
    "module": "tvm.module (before TVM 0.7): tvm.module.enabled is tl.runtime.enabled, "
              "tvm.module.load is tl.runtime.load_module",
    "make": "tvm.make (before TVM 0.7): tvm.make.Select is tl.select (tl.tir.Select)",
    "ndarray": "tvm.ndarray (before TVM 0.7): tl.nd.array / tl.nd.empty",
    "ir_pass": "tvm.ir_pass (before TVM 0.7): the lowering passes are a fixed ordered list; "
               "tl.lower(s, args) runs them",
    "decl_buffer": "tvm.decl_buffer: buffers are not declared here (no binds); a tensor "
                   "intrinsic's operands are Regions (docs/tvm_compat.md, tensorize row)",
})

_EXTERN_BUFFERS = ("in TVM, an extern's fcompute(ins, outs) gets Buffers; here it gets the "
                   "tensors themselves: pass them whole, tl.call_packed('f', ins[0], outs[0]) "
                   "(a Python function receives NDArrays) or tl.call_extern('int32', 'f', "
                   "ins[0], outs[0]) (a C function receives T *data, const int64_t *shape)")
TENSOR_NAMES = {name: f"Buffer.{name}: {_EXTERN_BUFFERS}"
                for name in ("data", "access_ptr", "elem_offset", "strides", "vload", "vstore",
                             "offset_factor")}

STAGE_NAMES = {
    "bind": f"Stage.bind(loop, te.thread_axis(...)) {GPU_ONLY}: {USE_PARALLEL}",
    "env_threads": f"Stage.env_threads {GPU_ONLY}: {USE_PARALLEL}",
    "set_scope": f"Stage.set_scope {GPU_ONLY} (shared/local memory of a thread block); on the "
                 "CPU, s.cache_write(T, 'local') / s.cache_read(T, 'local', readers) make a "
                 "staged copy that compute_at places in a loop",
    "set_store_predicate": f"Stage.set_store_predicate {GPU_ONLY} (stores guarded by thread "
                           "index); a CPU stage stores every element it computes",
    "double_buffer": f"Stage.double_buffer {GPU_ONLY} (shared-memory prefetch)",
    "storage_align": "Stage.storage_align is not supported: buffers are 64-byte aligned and "
                     "rows are not padded; pad the shape in the compute instead",
    "prefetch": "Stage.prefetch is not supported: pack the operand into a compute "
                "(opt_gemm's array packing) or cache_read it at a loop with compute_at",
    "transform_layout": "Stage.transform_layout is not supported: declare the packed layout as "
                        "a compute (tl.compute) and read it, as opt_gemm's array packing does",
    "rolling_buffer": "Stage.rolling_buffer is not supported",
}

SCHEDULE_NAMES = {
    "create_group": "Schedule.create_group is not supported: attach each stage with "
                    "s[T].compute_at(s[consumer], loop)",
}


MODULE_NAMES["call_llvm_pure_intrin"] = MODULE_NAMES["call_llvm_intrin"]

# tvm.ir's way to add an intrinsic (the "Intrinsics and Math Functions" tutorial): importable,
# so that the script's `from tvm.ir import ...` line runs, and refused where it is called
NEW_INTRINSIC = ("adding an intrinsic (an op name with attributes and per-target lowering "
                 "rules) is not supported: the math functions are tl.exp, tl.log, ... "
                 "(tl.call_intrin(dtype, 'tir.exp', x) names them by string), and a C function "
                 "is called per element with tl.call_pure_extern(dtype, 'symbol', x) (load its "
                 "library with tl.load_library)")


# AutoTVM names (`from tensorlang import autotune as autotvm`) with no equivalent here: the
# module-level __getattr__ of tensorlang.autotune, of its task and of its measure module
_NO_AUTOTVM_RPC = ("there is no RPC measurement: candidates are built and timed on this "
                   "machine, each in a process of its own (autotune.LocalRunner); measuring "
                   "machines of a dask.distributed cluster are autotune.DaskRunner "
                   "(docs/distributed_tuning.md)")
_TOPI_TEMPLATES = ("the operator library (tl.ops) registers its own templates; tune a compute "
                   "of your own with @autotune.template(name)")
AUTOTVM_NAMES = {
    "RPCRunner": f"autotvm.RPCRunner: {_NO_AUTOTVM_RPC}",
    "request_remote": f"autotvm.measure.request_remote: {_NO_AUTOTVM_RPC}",
    "register_topi_compute": f"autotvm.register_topi_compute: {_TOPI_TEMPLATES}",
    "register_topi_schedule": f"autotvm.register_topi_schedule: {_TOPI_TEMPLATES}",
    "extract_from_program": "autotvm.task.extract_from_program: a model is a graph.Graph "
                            "(graph.from_onnx(path)), and graph.extract_tasks(g, target) gives "
                            "its tasks",
    "GLOBAL_SCOPE": "autotvm.GLOBAL_SCOPE.in_tuning (TOPI templates skip packing constants "
                    "while tuning) is not available: a template is instantiated the same way "
                    "when tuned and when applied",
    "DropletTuner": "autotvm.tuner.DropletTuner is not available: XGBTuner, GATuner, "
                    "RandomTuner or GridSearchTuner",
}
AUTOTVM_NAMES["env"] = AUTOTVM_NAMES["GLOBAL_SCOPE"]


def register_op_attr(op_name, attr_key, value=None, level=10):
    """TVM's tvm.ir.register_op_attr: refused (NEW_INTRINSIC)."""
    raise NotImplementedError(f"tvm.ir.register_op_attr({op_name!r}, {attr_key!r}): "
                              f"{NEW_INTRINSIC}")


def register_intrin_lowering(op_name, target="default", *, f=None, level=10):
    """TVM's tvm.ir.register_intrin_lowering: refused (NEW_INTRINSIC)."""
    raise NotImplementedError(f"tvm.ir.register_intrin_lowering({op_name!r}, "
                              f"target={target!r}): {NEW_INTRINSIC}")


MODULE_NAMES.update({
    "rpc": "tvm.rpc (remote devices) is not in tensorlang: kernels run on this machine; tuning "
           "measures candidates here, each in a process of its own (autotune.LocalRunner)",
    "script": "tvm.script (TVMScript, @T.prim_func) is not in tensorlang: there is no TensorIR; "
              "declare computations with tl.compute and schedule them with tl.create_schedule",
    "meta_schedule": "tvm.meta_schedule is not in tensorlang: tune template-free with "
                     "tensorlang.auto_scheduler (Ansor's API) or autotune.workload, templates "
                     "with `from tensorlang import autotune`",
})
# TVM modules that scripts import (`from tvm import relay`, `from tvm.contrib import
# graph_executor`) and that tensorlang does not have: the stub module of that name raises this
# at import, so the script stops at its import line with what to use (Python's `from X import
# name` would otherwise replace the message with "cannot import name")
REFUSED_IMPORTS = {
    "tensorlang.autotvm": MODULE_NAMES["autotvm"],
    "tensorlang.te.hybrid": MODULE_NAMES["hybrid"],
    "tensorlang.rpc": MODULE_NAMES["rpc"],
    "tensorlang.script": MODULE_NAMES["script"],
    "tensorlang.meta_schedule": MODULE_NAMES["meta_schedule"],
    "tensorlang.relay": MODULE_NAMES["relay"],
    "tensorlang.relax": MODULE_NAMES["relax"],
    "tensorlang.topi": MODULE_NAMES["topi"],
    "tensorlang.contrib.graph_executor": (
        "tvm.contrib.graph_executor is not in tensorlang: graph.build(g) returns the graph "
        "module itself (runtime.GraphModule: set_input / run / get_output, or gm.run(x=...))"),
    "tensorlang.contrib.clang": (
        "tvm.contrib.clang (C to LLVM IR for pragma 'import_llvm') is not supported: compile "
        "the C code into a shared library, tl.load_library(path), and call its functions "
        "with tl.call_extern"),
    "tensorlang.contrib.tedd": (
        "tvm.contrib.tedd (schedule diagrams with graphviz) is not supported: print(tl.lower(s, "
        "args)) shows the loop nest, print(s.trace) the primitives applied"),
    "tensorlang.contrib.dlpack": (
        "tvm.contrib.dlpack (to_pytorch_func) is not supported: kernels take numpy arrays; "
        "pass tensor.numpy() (or numpy.from_dlpack(t)) and copy the output back"),
    "tensorlang.contrib.cc": (
        "tvm.contrib.cc (linking a saved object into a .so) is not needed: "
        "f.export_library(path) writes the compiled, linked module and "
        "tl.runtime.load_module(path) loads it"),
}


def refuse_import(module: str) -> ImportError:
    """The ImportError that the stub module ``module`` raises (REFUSED_IMPORTS)."""
    return ImportError(f"No module {module!r}: {REFUSED_IMPORTS[module]}", name=module)


def missing(owner: str, name: str, table: dict) -> AttributeError:
    """The AttributeError for `owner.name`: the TVM construct and ours when `name` is a TVM
    name, Python's usual message otherwise."""
    text = f"{owner!s} has no attribute {name!r}"
    hint = table.get(name)
    return AttributeError(f"{text}: {hint}" if hint else text)


# tvm.auto_scheduler (tensorlang.auto_scheduler, graph/auto_scheduler.py): names with no
# equivalent here
_NO_RPC = ("there is no RPC measurement: candidates are built and timed on this machine, each "
           "in a process of its own: TuningOptions(runner=auto_scheduler.LocalRunner(...)) (the "
           "default, runner='local')")
_RECORDS = ("the records are tensorlang's JSON lines, not TVM's: autotune.load_records(log) "
            "reads them, autotune.pick_best(log, best_log) keeps each workload's best, "
            "task.print_best(log) shows the best schedule, task.apply_best(log) applies it")
AUTO_SCHEDULER_NAMES = {
    "RPCRunner": f"auto_scheduler.RPCRunner: {_NO_RPC}",
    "LocalRPCMeasureContext": f"auto_scheduler.LocalRPCMeasureContext (TVM's GPU tutorials' "
                              f"measurer) {GPU_ONLY}; {_NO_RPC}",
    "measure_record": f"auto_scheduler.measure_record: {_RECORDS}",
    "load_records": f"auto_scheduler.load_records: {_RECORDS}",
    "save_records": f"auto_scheduler.save_records: {_RECORDS}; RecordToFile(path) writes them",
    "load_best_record": f"auto_scheduler.load_best_record: {_RECORDS}",
    "RecordReader": f"auto_scheduler.RecordReader: {_RECORDS}",
    "HardwareParams": "auto_scheduler.HardwareParams: the cores, vector width and caches are "
                      "this machine's CPU's; a target string 'llvm -mcpu=...' names another CPU",
    "PreloadCustomSketchRule": "auto_scheduler.PreloadCustomSketchRule: custom sketch rules "
                               "are not supported (the rules are tensorlang's, "
                               "autotune/sketch.py); for a hand-written search space use an "
                               "AutoTVM-style template (autotune.template)",
    "auto_schedule": "auto_scheduler.auto_schedule(task, search_policy, tuning_options) is "
                     "TVM's older spelling: task.tune(tuning_options, search_policy) then "
                     "task.apply_best(log)",
    "ApplyHistoryBestOrSample": "auto_scheduler.ApplyHistoryBestOrSample is not supported: "
                                "ApplyHistoryBest(log) applies the best records, and a "
                                "workload without one gets its default schedule",
    "LayoutRewriteOption": "auto_scheduler.LayoutRewriteOption: there is no layout rewrite "
                           "(packing an operand is a decision of the sketch rules)",
    "CostModel": "auto_scheduler.CostModel: the cost models are XGBModel and RandomModel",
    "EmptyPolicy": "auto_scheduler.EmptyPolicy is not supported: the search policy is "
                   "SketchPolicy",
    "is_auto_scheduler_enabled": "not needed: graph.build(g) inside "
                                 "auto_scheduler.ApplyHistoryBest(log) compiles with the log",
    "relay_integration": "auto_scheduler.relay_integration: the graph layer is tensorlang.graph: "
                         "auto_scheduler.extract_tasks(g, None, target) on graph.from_onnx(...), "
                         "and graph.build(g) inside ApplyHistoryBest(log)",
}
