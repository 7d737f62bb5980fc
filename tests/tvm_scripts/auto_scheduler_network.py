# TVM's "Auto-scheduling a Neural Network for x86 CPU" tutorial as its readers write it, with
# `import tvm` / `from tvm import auto_scheduler` swapped for tensorlang. TVM's Relay parts have
# tensorlang's graph layer in their place: the network is an ONNX model (a small conv net built
# here with onnx.helper, where the tutorial takes ResNet-50 from relay.testing), imported with
# graph.from_onnx (relay.frontend.from_onnx), compiled with graph.build (relay.build), and
# relay.build's result is already the graph module. Few trials, so that it runs in seconds.
# The log is written to the working directory, as in TVM.
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tensorlang as tl
from tensorlang import auto_scheduler, graph

rng = np.random.default_rng(0)


def get_network(name, batch_size, layout="NCHW", dtype="float32"):
    """A conv -> relu -> global average pool -> dense -> softmax network as an ONNX model,
    with its weights (for the numpy reference below)."""
    assert layout == "NCHW" and dtype == "float32"
    input_shape = (batch_size, 3, 16, 16)
    output_shape = (batch_size, 10)
    weights = {"w": rng.standard_normal((16, 3, 3, 3)).astype(np.float32),
               "fc": rng.standard_normal((10, 16)).astype(np.float32),
               "fb": rng.standard_normal((10,)).astype(np.float32)}
    nodes = [
        helper.make_node("Conv", ["data", "w"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fb"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=1),
    ]
    body = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, list(output_shape))],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(body, opset_imports=[helper.make_opsetid("", 17)])
    return model, input_shape, output_shape, weights


def reference(x, weights):
    """The network in numpy."""
    w = weights["w"]
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    conv = np.einsum("nchwyx,ocyx->nohw", windows, w)
    pooled = np.maximum(conv, 0).mean(axis=(2, 3))
    logits = pooled @ weights["fc"].T + weights["fb"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# Define the neural network and compilation target
network = "tiny-convnet"
batch_size = 1
layout = "NCHW"
target = "llvm"
dtype = "float32"
log_file = f"{network}-{layout}-B{batch_size}-llvm.json"

# Extract search tasks
print("Get model...")
onnx_model, input_shape, output_shape, weights = get_network(network, batch_size, layout,
                                                             dtype=dtype)
mod = graph.from_onnx(onnx_model)
params = None  # the graph holds the model's weights

print("Extract tasks...")
tasks, task_weights = auto_scheduler.extract_tasks(mod, params, target)

for idx, task in enumerate(tasks):
    print(f"========== Task {idx}  (workload key: {task.workload_key}) ==========")
    print(task.compute_dag)
assert tasks and len(task_weights) == len(tasks)
assert all(t.compute_dag.has_reduction() for t in tasks)  # the simple tasks are left out


def run_tuning():
    print("Begin tuning...")
    tuner = auto_scheduler.TaskScheduler(tasks, task_weights)
    tune_option = auto_scheduler.TuningOptions(
        num_measure_trials=2 * len(tasks) + 2,  # the tutorial's 200, far fewer here
        runner=auto_scheduler.LocalRunner(repeat=10, enable_cpu_cache_flush=True),
        measure_callbacks=[auto_scheduler.RecordToFile(log_file)],
    )
    tuner.tune(tune_option)
    assert np.isfinite(tuner.best_costs).all(), tuner.best_costs


run_tuning()

# Compile with the history best
print("Compile...")
with auto_scheduler.ApplyHistoryBest(log_file):
    lib = graph.build(mod, target=target)
tuned = [k["op"] for k in lib.plan["kernels"].values() if k["tuned"]]
print("kernels built from the log:", tuned or "none (the defaults were measured no slower)")

# Create graph executor (graph.build's result is the graph module)
dev = tl.device(str(target), 0)
module = lib
data_np = np.random.uniform(size=input_shape).astype(dtype)
data_tl = tl.runtime.array(data_np, device=dev)
module.set_input("data", data_tl)
module.run()
out = module.get_output(0)
np.testing.assert_allclose(out, reference(data_np, weights), rtol=1e-4, atol=1e-6)

# Evaluate (TVM: module.benchmark(dev, repeat=3, min_repeat_ms=500))
print("Evaluate inference time cost...")
print(module.benchmark(number=10, repeat=3))
print("all results match numpy")
