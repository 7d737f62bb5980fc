"""Models quantized by onnxruntime's own quantizer, imported and run against onnxruntime on the
same int8 model (issue 22): a ResNet-style CNN (``quantize_static``, QDQ, per-channel int8
weights, calibrated on random data; and in the QOperator format, with a CNN of the other
operators it quantizes there) and a BERT-style encoder (``quantize_dynamic``). The issue's
criterion: >= 99% of the output values within one quantization step of onnxruntime's, all
within two. (Measured: the CNN's outputs are equal, the encoder's within 3e-5 of a step: the
only differences are float rounding in the float ops between the integer products.)"""

from __future__ import annotations

import numpy as np
import pytest
from graph_testing import ort
from tensorlang.graph.passes import run_passes

from tensorlang import graph

qm = pytest.importorskip("quantized_models")
pytest.importorskip("onnxruntime.quantization")


def ops_count(model, op_type: str) -> int:
    return sum(n.op_type == op_type for n in model.graph.node)


def _ort(model, x):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


@pytest.fixture(scope="module")
def cnn():
    q = qm.quantize_static_qdq(qm.resnet_cnn(size=12, widths=(8, 16)))
    return q, graph.build(graph.from_onnx(q))


@pytest.fixture(scope="module")
def encoder():
    q = qm.quantize_dynamic_int8(qm.bert_encoder(seq=8, hidden=32, heads=2, ffn=64))
    return q, graph.build(graph.from_onnx(q))


def test_static_qdq_cnn_within_one_step(cnn):
    q, gm = cnn
    ops = {n.op_type for n in q.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv", "Add"} <= ops
    # every conv on the int8 kernel; the 16-channel ones read and write NCHW16c uint8
    convs = [n for n in run_passes(graph.from_onnx(q), 2).nodes if n.op == "qlinear_conv2d"]
    assert len(convs) == ops_count(q, "Conv")
    assert {(n.attrs.get("layout"), n.attrs.get("out_layout")) for n in convs} == {
        (None, None), (None, "NCHW16c"), ("NCHW16c", "NCHW16c")}
    step = qm.output_step(q)
    assert step is not None and step > 0
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
        got, want = next(iter(gm.run(x=x).values())), _ort(q, x)
        one, two, worst = qm.steps_within(got, want, step)
        assert one >= 0.99 and two == 1.0, (one, two, worst)


QOPERATOR_OPS = {"resnet_cnn": {"QLinearAdd", "QLinearGlobalAveragePool", "QGemm"},
                  "mixed_cnn": {"QLinearSigmoid", "QLinearLeakyRelu", "QLinearMul",
                                "QLinearConcat", "QLinearAveragePool",
                                "QLinearGlobalAveragePool", "QGemm"}}


@pytest.mark.parametrize("name", sorted(QOPERATOR_OPS))
def test_static_qoperator_within_one_step(name):
    """The QOperator format: onnxruntime's com.microsoft QLinear* operators and QGemm between
    the default domain's QLinearConv nodes (measured: equal to onnxruntime's outputs)."""
    make = qm.resnet_cnn if name == "resnet_cnn" else qm.mixed_cnn
    q = qm.quantize_static_qdq(make(size=12), qoperator=True)
    contrib = {n.op_type for n in q.graph.node if n.domain == "com.microsoft"}
    assert QOPERATOR_OPS[name] <= contrib, sorted(contrib)
    gm = graph.build(graph.from_onnx(q))
    step = qm.output_step(q)
    assert step is not None and step > 0
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
        got, want = next(iter(gm.run(x=x).values())), _ort(q, x)
        one, two, worst = qm.steps_within(got, want, step)
        assert one >= 0.99 and two == 1.0, (one, two, worst)


def test_dynamic_encoder_within_one_step(encoder):
    q, gm = encoder
    ops = {n.op_type for n in q.graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.standard_normal((8, 32)).astype(np.float32)
        got, want = next(iter(gm.run(x=x).values())), _ort(q, x)
        # a float output: the step it would have quantized over its own range
        step = float(want.max() - want.min()) / 255
        one, two, worst = qm.steps_within(got, want, step)
        assert one >= 0.99 and two == 1.0, (one, two, worst)


@pytest.mark.parametrize("stem, how", [("tiny_unet.ts", "static"), ("tiny_unet.ts", "dynamic"),
                                       ("tiny_bert.ts", "dynamic")])
def test_quantized_torch_exports_match_onnxruntime(stem, how):
    """Real exports (torch's TorchScript exporter; tests/graph/data/real_models) quantized by
    onnxruntime's tools: a U-Net (Conv, ConvTranspose, Resize, Concat) and a BERT encoder with
    an attention mask. Measured: the static U-Net equal, the dynamic ones within 3e-7 of max
    |ref| (float rounding between the exact integer products)."""
    from pathlib import Path

    import onnx

    data = Path(__file__).parent / "data" / "real_models"
    model = onnx.load(str(data / f"{stem}.onnx"))
    feeds = dict(np.load(data / f"{stem}.inputs.npz"))
    q = qm.quantize_static_qdq(model) if how == "static" else qm.quantize_dynamic_int8(model)
    sess = ort.InferenceSession(q.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    got = next(iter(graph.build(graph.from_onnx(q)).run(**feeds).values()))
    tol = 0.0 if how == "static" else 1e-5 * float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
