"""Small float ONNX models and their int8 versions made by onnxruntime's own quantizer, shared
by tests/graph/test_quantized_models.py and benchmarks/int8_models.py (issue 22):

- ``resnet_cnn``: a ResNet-style CNN (stem conv, basic blocks with relu and residual adds, a
  strided block with a 1x1 projection, global average pool, a fully connected layer),
  quantized by ``quantize_static`` in the QDQ format with per-channel int8 weights and uint8
  activations, calibrated on random inputs;
- ``mixed_cnn``: convolutions into Sigmoid, LeakyRelu, Mul, Concat, AveragePool,
  GlobalAveragePool and Gemm: what ``quantize_static`` in the QOperator format turns into
  onnxruntime's com.microsoft QLinear* operators and QGemm;
- ``bert_encoder``: a BERT-style encoder layer stack (self-attention with heads, residual adds,
  layer norms, a GELU feed-forward), quantized by ``quantize_dynamic`` (int8 weights,
  DynamicQuantizeLinear + MatMulInteger at run time).

And the comparison the issue asks for: how many output values lie within one and two
quantization steps of onnxruntime's."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper


class _Net:
    """Nodes and initializers of a float model under construction."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.k = 0

    def name(self, base: str) -> str:
        self.k += 1
        return f"{base}{self.k}"

    def weight(self, shape, scale: float) -> str:
        n = self.name("w")
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, n))
        return n

    def const(self, arr, base="c") -> str:
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def node(self, op: str, ins: list[str], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def model(self, inp, out: str, opset: int = 17) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "net", [inp],
                              [helper.make_tensor_value_info(out, TP.FLOAT, None)],
                              initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def _conv(net: _Net, x: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
    w = net.weight((cout, cin, k, k), np.sqrt(2.0 / (cin * k * k)))
    b = net.const((net.rng.standard_normal(cout) * 0.1).astype(np.float32), "b")
    return net.node("Conv", [x, w, b], pads=[k // 2] * 4, strides=[stride, stride])


def _block(net: _Net, x: str, cin: int, cout: int, stride: int) -> str:
    y = net.node("Relu", [_conv(net, x, cin, cout, 3, stride)])
    y = _conv(net, y, cout, cout, 3)
    skip = x if stride == 1 and cin == cout else _conv(net, x, cin, cout, 1, stride)
    return net.node("Relu", [net.node("Add", [y, skip])])


def resnet_cnn(size: int = 16, widths=(16, 32), blocks: int = 1, classes: int = 10,
               batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """A ResNet-style float CNN on [batch, 3, size, size]."""
    net = _Net(seed)
    x = net.node("Relu", [_conv(net, "x", 3, widths[0], 3)])
    cin = widths[0]
    for i, w in enumerate(widths):
        for j in range(blocks):
            x = _block(net, x, cin, w, 2 if (i > 0 and j == 0) else 1)
            cin = w
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x])])
    w = net.weight((classes, cin), np.sqrt(1.0 / cin))
    b = net.const(np.zeros(classes, np.float32), "b")
    out = net.node("Gemm", [x, w, b], transB=1)
    inp = helper.make_tensor_value_info("x", TP.FLOAT, [batch, 3, size, size])
    return net.model(inp, out)


def mixed_cnn(size: int = 12, seed: int = 0) -> onnx.ModelProto:
    """Two convolutions, one through a sigmoid and one through a leaky relu, multiplied,
    concatenated with the first, average-pooled, globally pooled, then a Gemm."""
    net = _Net(seed)
    c1 = _conv(net, "x", 3, 8, 3)
    gate = net.node("Sigmoid", [c1])
    leaky = net.node("LeakyRelu", [_conv(net, "x", 3, 8, 3)], alpha=0.1)
    cat = net.node("Concat", [net.node("Mul", [gate, leaky]), c1], axis=1)
    pooled = net.node("AveragePool", [cat], kernel_shape=[2, 2], strides=[2, 2])
    flat = net.node("Flatten", [net.node("GlobalAveragePool", [pooled])])
    w, b = net.weight((16, 10), 0.3), net.const(np.zeros(10, np.float32), "b")
    y = net.node("Gemm", [flat, w, b])
    return net.model(helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, size, size]), y)


def _layer_norm(net: _Net, x: str, hidden: int) -> str:
    g = net.const(np.ones(hidden, np.float32), "gamma")
    b = net.const(np.zeros(hidden, np.float32), "beta")
    return net.node("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-5)


def _dense(net: _Net, x: str, k: int, n: int) -> str:
    y = net.node("MatMul", [x, net.weight((k, n), np.sqrt(1.0 / k))])
    return net.node("Add", [y, net.const((net.rng.standard_normal(n) * 0.02).astype(np.float32),
                                         "b")])


def _gelu(net: _Net, x: str) -> str:
    """x * 0.5 * (1 + erf(x / sqrt(2))), as exporters write it before opset 20."""
    e = net.node("Erf", [net.node("Div", [x, net.const(np.float32(np.sqrt(2.0)))])])
    h = net.node("Add", [e, net.const(np.float32(1.0))])
    return net.node("Mul", [net.node("Mul", [x, h]), net.const(np.float32(0.5))])


def _attention(net: _Net, x: str, seq: int, hidden: int, heads: int) -> str:
    d = hidden // heads
    shape = net.const(np.array([seq, heads, d], np.int64), "shape")

    def split(v, perm):
        return net.node("Transpose", [net.node("Reshape", [v, shape])], perm=perm)

    q = split(_dense(net, x, hidden, hidden), [1, 0, 2])
    k = split(_dense(net, x, hidden, hidden), [1, 2, 0])
    v = split(_dense(net, x, hidden, hidden), [1, 0, 2])
    s = net.node("Mul", [net.node("MatMul", [q, k]), net.const(np.float32(1 / np.sqrt(d)))])
    a = net.node("MatMul", [net.node("Softmax", [s], axis=-1), v])
    a = net.node("Reshape", [net.node("Transpose", [a], perm=[1, 0, 2]),
                             net.const(np.array([seq, hidden], np.int64), "shape")])
    return _dense(net, a, hidden, hidden)


def bert_encoder(seq: int = 16, hidden: int = 64, heads: int = 4, ffn: int = 128,
                 layers: int = 2, seed: int = 0) -> onnx.ModelProto:
    """A BERT-style float encoder on [seq, hidden] (batch 1, post-norm layers)."""
    net = _Net(seed)
    x = "x"
    for _ in range(layers):
        x = _layer_norm(net, net.node("Add", [x, _attention(net, x, seq, hidden, heads)]), hidden)
        f = _dense(net, _gelu(net, _dense(net, x, hidden, ffn)), ffn, hidden)
        x = _layer_norm(net, net.node("Add", [x, f]), hidden)
    inp = helper.make_tensor_value_info("x", TP.FLOAT, [seq, hidden])
    return net.model(inp, x)


# ---------------------------------------------------------------------------- quantization


class _RandomReader:
    """A CalibrationDataReader over a few random inputs (onnxruntime.quantization's protocol:
    get_next returns a feed dict, then None)."""

    def __init__(self, name: str, shape, count: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.feeds = iter([{name: rng.standard_normal(shape).astype(np.float32)}
                           for _ in range(count)])

    def get_next(self):
        return next(self.feeds, None)


def _input_shape(model: onnx.ModelProto) -> list[int]:
    return [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]


def quantize_static_qdq(model: onnx.ModelProto, calib: int = 4, seed: int = 1,
                        preprocess: bool = True, qoperator: bool = False):
    """``quantize_static`` in the QDQ format (``qoperator``: the QOperator format, onnxruntime's
    QLinear* operators), per-channel int8 weights, uint8 activations,
    after onnxruntime's recommended pre-processing (``quant_pre_process``: its graph
    optimizer folds batch norms into the convs, as a deployment does; without it every
    batch norm stays a float op between a dequantize and a quantize)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    reader = type("Reader", (_RandomReader, CalibrationDataReader), {})(
        model.graph.input[0].name, _input_shape(model), calib, seed)
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
        onnx.save(model, src)
        if preprocess:
            from onnxruntime.quantization.shape_inference import quant_pre_process

            # (its symbolic shape inference needs sympy, which the test extra does not
            # install; these models' shapes are static, which onnx's own inference covers)
            quant_pre_process(src, os.path.join(d, "p.onnx"), skip_symbolic_shape=True)
            src = os.path.join(d, "p.onnx")
        fmt = QuantFormat.QOperator if qoperator else QuantFormat.QDQ
        quantize_static(src, dst, reader, quant_format=fmt, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        return onnx.load(dst)


def quantize_dynamic_int8(model: onnx.ModelProto):
    """``quantize_dynamic``: int8 weights, activations quantized at run time."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
        onnx.save(model, src)
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
        return onnx.load(dst)


def output_step(model: onnx.ModelProto) -> float | None:
    """The quantization step of the graph output when a DequantizeLinear produces it (a QDQ
    model's output: its scale), else None."""
    out = model.graph.output[0].name
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if out in n.output and n.op_type == "DequantizeLinear":
            return float(inits[n.input[1]].reshape(-1)[0])
    return None


def steps_within(got: np.ndarray, want: np.ndarray, step: float) -> tuple[float, float, float]:
    """(fraction within one step, fraction within two, largest difference in steps)."""
    d = np.abs(got.astype(np.float64) - want.astype(np.float64)) / step
    tol = 1e-3  # a float output that is k steps apart is k * step up to rounding
    return (float(np.mean(d <= 1 + tol)), float(np.mean(d <= 2 + tol)), float(d.max()))
