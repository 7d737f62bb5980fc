"""Patterns of ONNX files shipped inside PyPI packages (not exported here) that did not import,
build or match onnxruntime, each as a small hand-made ONNX model checked against onnxruntime:
magika (tf2onnx from JAX: slices "to the end" written as 1e9 on a symbolic batch axis),
openwakeword 0.4's silero VAD (If branches holding their own initializers) and melspectrogram
(Clip whose min is computed at run time), ddddocr's OCR model (LSTM over a symbolic width),
nudenet's YOLOv8 detector with dynamic height and width (anchor points from a float Range
over the feature map's symbolic width), silero-vad 6's op18 "ifless" export (reflect padding
of its symbolic sequence axis), openwakeword's hey_mycroft (an LSTM over a symbolic batch),
pipecat's smart-turn v3.2 (a QDQ-quantized Whisper encoder: int8 products over a symbolic
batch).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from graph_testing import assert_close, check_against_ort, int64s, onnx, onnx_model, ort_run
from tensorlang.runtime._plan import PlanError

from tensorlang import graph

helper, TP = onnx.helper, onnx.TensorProto


def test_slice_to_end_written_as_1e9_on_a_symbolic_axis():
    """magika's tf2onnx export slices a [batch, 2048, 40] tensor with ends 1e9 (TensorFlow's
    masked strided slice) and then reshapes its per-row sums to [batch, 1] (the batch read
    from the input's shape): 1e9 past a batch axis that no tensor in memory can reach is its
    end, so the reshape's sizes agree (it was refused: min(batch, 1e9) vs batch)."""
    nodes = [
        helper.make_node("Slice", ["x", "zeros", "far", "axes"], ["s"]),
        helper.make_node("ReduceSum", ["s", "rows"], ["sums"], keepdims=0),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero", "one"], ["batch"]),
        helper.make_node("Concat", ["batch", "one"], ["to"], axis=0),
        helper.make_node("Reshape", ["sums", "to"], ["y"]),
    ]
    inits = [int64s("zeros", [0, 0]), int64s("far", [10**9] * 2), int64s("axes", [0, 2]),
             int64s("rows", [1, 2]), int64s("zero", [0]), int64s("one", [1])]
    model = onnx_model(nodes, [("x", TP.FLOAT, ["batch", 2048, 40])], [("y", TP.FLOAT, None)], 13,
                   inits)
    rng = np.random.default_rng(0)
    check_against_ort(model, [{"x": rng.standard_normal((b, 2048, 40)).astype(np.float32)}
                   for b in (1, 3)])


def _branch(name, nodes, out, inits):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, TP.FLOAT, None)],
                             initializer=inits)


def _if_with_branch_initializers(cond_nodes, inputs, cond_inits=()):
    """y = x * 2 + 1 if the condition holds, else x - 3: each branch's constants are
    initializers of the branch itself (openwakeword's silero VAD keeps 45 in each)."""
    then = _branch("then", [helper.make_node("Mul", ["x", "two"], ["t0"]),
                            helper.make_node("Add", ["t0", "one_f"], ["t1"])], "t1",
                   [helper.make_tensor("two", TP.FLOAT, [], [2.0]),
                    helper.make_tensor("one_f", TP.FLOAT, [], [1.0])])
    other = _branch("else", [helper.make_node("Sub", ["x", "three"], ["e0"])], "e0",
                    [helper.make_tensor("three", TP.FLOAT, [1], [3.0])])
    nodes = cond_nodes + [helper.make_node("If", ["c"], ["y"], then_branch=then,
                                           else_branch=other)]
    return onnx_model(nodes, inputs, [("y", TP.FLOAT, None)], 16, cond_inits)


def test_if_branches_with_their_own_initializers_condition_at_run_time():
    """silero VAD v4 (openwakeword 0.4) picks its 16 kHz or 8 kHz branch from input sr: each
    branch reads initializers of its own, which were unknown names (refused)."""
    cond = [helper.make_node("Equal", ["sr", "k16"], ["c"])]
    model = _if_with_branch_initializers(
        cond, [("x", TP.FLOAT, [2, 5]), ("sr", TP.INT64, [])],
        [helper.make_tensor("k16", TP.INT64, [], [16000])])
    x = np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)
    check_against_ort(model, [{"x": x, "sr": np.array(sr, np.int64)} for sr in (16000, 8000)])


def test_if_branch_with_its_own_initializers_condition_at_import():
    """The same with a condition that folds at import (the taken branch inlined)."""
    cond = [helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("ReduceProd", ["s"], ["n"], keepdims=0),
            helper.make_node("Greater", ["n", "k"], ["c"])]
    model = _if_with_branch_initializers(cond, [("x", TP.FLOAT, [2, 5])],
                                         [helper.make_tensor("k", TP.INT64, [], [4])])
    x = np.random.default_rng(2).standard_normal((2, 5)).astype(np.float32)
    check_against_ort(model, [{"x": x}])


def test_loop_body_with_its_own_initializer():
    """A Loop (unrolled at import) whose body adds a constant of its own each iteration."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "step"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("cond_in", TP.BOOL, []),
         helper.make_tensor_value_info("acc_in", TP.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", TP.BOOL, []),
         helper.make_tensor_value_info("acc_out", TP.FLOAT, [3])],
        initializer=[helper.make_tensor("step", TP.FLOAT, [3], [0.5, -1.0, 2.0])])
    node = helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)
    model = onnx_model([node], [("x", TP.FLOAT, [3])], [("y", TP.FLOAT, None)], 13,
                   [helper.make_tensor("trips", TP.INT64, [], [4])])
    check_against_ort(model, [{"x": np.array([1.0, 2.0, 3.0], np.float32)}])


@pytest.mark.parametrize("bounds", ["min", "max", "both"])
def test_clip_with_bounds_computed_at_run_time(bounds):
    """openwakeword's melspectrogram floors its log-mel power at its maximum - 80 dB:
    Clip(x, min=ReduceMax(x) - 80), a min computed at run time (was refused); a max at run
    time too, and both (where min > max onnxruntime gives max)."""
    nodes = [helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
             helper.make_node("Sub", ["top", "range"], ["floor"]),
             helper.make_node("ReduceMin", ["x"], ["low"], keepdims=0),
             helper.make_node("Add", ["low", "range"], ["ceil"])]
    lo, hi = {"min": ("floor", ""), "max": ("", "ceil"), "both": ("floor", "ceil")}[bounds]
    nodes.append(helper.make_node("Clip", ["x", lo, hi], ["y"]))
    model = onnx_model(nodes, [("x", TP.FLOAT, ["batch", 6])], [("y", TP.FLOAT, None)], 13,
                   [helper.make_tensor("range", TP.FLOAT, [], [3.0])])
    rng = np.random.default_rng(3)
    feeds = [{"x": rng.uniform(-5, 5, (b, 6)).astype(np.float32)} for b in (1, 4)]
    feeds.append({"x": np.array([[0.0, 1.0, 2.0, 10.0, 11.0, 12.0]], np.float32)})  # min > max
    check_against_ort(model, feeds)


def test_lstm_over_a_symbolic_width_names_the_shape_variable():
    """ddddocr's OCR model runs an LSTM over the image width / 8 (a CRNN): the steps are
    unrolled at import, so a symbolic width is refused; the message names the shape variable
    the inputs declare (it named an internal tensor as if it were an input)."""
    hidden, feat = 4, 3
    rng = np.random.default_rng(4)
    w = helper.make_tensor("W", TP.FLOAT, [1, 4 * hidden, feat],
                           rng.standard_normal(4 * hidden * feat).tolist())
    r = helper.make_tensor("R", TP.FLOAT, [1, 4 * hidden, hidden],
                           rng.standard_normal(4 * hidden * hidden).tolist())
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
             helper.make_node("LSTM", ["t", "W", "R"], ["y"], hidden_size=hidden)]
    model = onnx_model(nodes, [("x", TP.FLOAT, [1, "image_width", feat])], [("y", TP.FLOAT, None)],
                   13, [w, r])
    with pytest.raises(graph.OnnxImportError, match=r"symbolic sequence length image_width "
                       r"\(shape variables image_width\).*shapes=\{\.\.\.\}"):
        graph.from_onnx(model)
    x = rng.standard_normal((1, 7, feat)).astype(np.float32)
    gm = graph.build(graph.from_onnx(model, shapes={"x": (1, 7, feat)}))
    assert_close(gm.run(x=x)["y"], ort_run(model, {"x": x})["y"])


def _anchor_model(start=0.0, delta=1.0):
    """YOLOv8's anchor points (ultralytics make_anchors): Range(0.0, float(w), 1.0) + 0.5
    along each axis of a feature map, w read from its shape."""
    nodes = [helper.make_node("Shape", ["x"], ["s"])]
    for axis, name in ((2, "h"), (3, "w")):
        nodes += [helper.make_node("Gather", ["s", f"ax{axis}"], [f"{name}_i"], axis=0),
                  helper.make_node("Cast", [f"{name}_i"], [f"{name}_f"], to=TP.FLOAT),
                  helper.make_node("Range", ["start", f"{name}_f", "delta"], [f"{name}_r"]),
                  helper.make_node("Add", [f"{name}_r", "half"], [f"{name}_y"])]
    inits = [helper.make_tensor("ax2", TP.INT64, [], [2]),
             helper.make_tensor("ax3", TP.INT64, [], [3]),
             helper.make_tensor("start", TP.FLOAT, [], [start]),
             helper.make_tensor("delta", TP.FLOAT, [], [delta]),
             helper.make_tensor("half", TP.FLOAT, [], [0.5])]
    return onnx_model(nodes, [("x", TP.FLOAT, [1, 2, "height", "width"])],
                  [("h_y", TP.FLOAT, None), ("w_y", TP.FLOAT, None)], 17, inits)


def test_float_range_over_a_symbolic_feature_map_size():
    """nudenet's 320n.onnx (dynamic batch, height, width) was refused for dynamic sizes: the
    Range's limit is a float Cast of a symbolic size, which the import computed at run time.
    One build at two sizes, against onnxruntime; a start of 1 and a delta of 2 too."""
    for start, delta in ((0.0, 1.0), (1.0, 2.0)):
        model = _anchor_model(start, delta)
        check_against_ort(model, [{"x": np.zeros((1, 2, h, w), np.float32)} for h, w in ((4, 5), (3, 9))])


def test_float_range_with_a_fractional_delta_over_a_symbolic_size_is_refused():
    with pytest.raises(graph.OnnxImportError, match="needs an integer delta, got \\[0.5\\]"):
        graph.from_onnx(_anchor_model(0.0, 0.5))


def _pad_model(mode, pads):
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
    return onnx_model([node], [("x", TP.FLOAT, [2, "n"])], [("y", TP.FLOAT, None)], 18,
                  [int64s("pads", pads)])


@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize("pads", [[0, 0, 0, 4], [1, 2, 0, 3]])
def test_mirror_padding_of_a_symbolic_axis(mode, pads):
    """silero VAD's op18 'ifless' export (silero-vad 6) reflects 64 samples past the end of
    its chunk before the STFT, on its symbolic sequence axis: the build was refused (the pad
    kernel needs a constant extent to mirror). One build at several lengths, against
    onnxruntime."""
    rng = np.random.default_rng(5)
    check_against_ort(_pad_model(mode, pads),
           [{"x": rng.standard_normal((2, n)).astype(np.float32)} for n in (5, 9)])


def test_reflect_padding_past_a_symbolic_axis_is_refused_at_run_time():
    """onnxruntime refuses a reflection as long as the axis; so does the run (it would read
    before the axis)."""
    gm = graph.build(graph.from_onnx(_pad_model("reflect", [0, 0, 0, 4])))
    with pytest.raises(PlanError, match="'reflect_pad_is_shorter_than_the_axis'.* at n = 4"):
        gm.run(x=np.zeros((2, 4), np.float32))


@pytest.mark.parametrize("op,direction", [("LSTM", "bidirectional"), ("GRU", "forward"),
                                          ("RNN", "reverse")])
def test_recurrent_layer_over_a_symbolic_batch(op, direction):
    """openwakeword's hey_mycroft model (tf2onnx: a bidirectional LSTM, batch dynamic) failed
    to build: the recurrence kernel needs a static batch; the layer's steps are then unrolled
    graph ops, which take it. Initial states of the batch's size, at batch 1 and 3."""
    gates, dirs, hidden, feat, steps = {"LSTM": 4, "GRU": 3, "RNN": 1}[op], \
        2 if direction == "bidirectional" else 1, 5, 3, 4
    rng = np.random.default_rng(6)

    def weight(name, *shape):
        return onnx.numpy_helper.from_array(
            (0.5 * rng.standard_normal(shape)).astype(np.float32), name)

    inits = [weight("W", dirs, gates * hidden, feat), weight("R", dirs, gates * hidden, hidden),
             weight("B", dirs, 2 * gates * hidden)]
    ins = ["x", "W", "R", "B", "", "h0"] + (["c0"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, ["y", "h"], hidden_size=hidden, direction=direction)
    inputs = [("x", TP.FLOAT, [steps, "batch", feat]), ("h0", TP.FLOAT, [dirs, "batch", hidden])]
    if op == "LSTM":
        inputs.append(("c0", TP.FLOAT, [dirs, "batch", hidden]))
    model = onnx_model([node], inputs, [("y", TP.FLOAT, None), ("h", TP.FLOAT, None)], 14, inits)
    feeds = []
    for b in (1, 3):
        feed = {"x": rng.standard_normal((steps, b, feat)).astype(np.float32),
                "h0": rng.standard_normal((dirs, b, hidden)).astype(np.float32)}
        if op == "LSTM":
            feed["c0"] = rng.standard_normal((dirs, b, hidden)).astype(np.float32)
        feeds.append(feed)
    check_against_ort(model, feeds)


def _build_without_fallback(model):
    """graph.build of ``model``, failing where a kernel's default schedule was refused (the
    build then warns and runs the naive schedule: correct, but not what is under test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        return graph.build(graph.from_onnx(model))


def test_qdq_gemm_over_a_symbolic_batch_runs_on_the_int8_kernel():
    """pipecat's smart-turn-v3.2-cpu.onnx (quantize_static, QDQ) over its symbolic batch: the
    folded Gemm's int8 product (dense_integer) took its row count as a static int and the
    build crashed (TypeError: shape[0] must be an int, got None); then its VNNI tensorize
    was refused over rows of symbolic extent. One build, three batch sizes, bit for bit."""
    nh = onnx.numpy_helper
    rng = np.random.default_rng(6)
    sw = (rng.random(12) * 0.02 + 0.002).astype(np.float32)
    inits = [nh.from_array(np.float32(0.05), "sx"), nh.from_array(np.uint8(120), "zx"),
             nh.from_array(rng.integers(-128, 128, (12, 40)).astype(np.int8), "wq"),
             nh.from_array(sw, "sw"), nh.from_array(np.zeros(12, np.int8), "zw"),
             nh.from_array(rng.integers(-500, 500, 12).astype(np.int32), "bq"),
             nh.from_array(np.float32(0.05) * sw, "sb"),
             nh.from_array(np.float32(0.2), "sy"), nh.from_array(np.uint8(100), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "sb"], ["bf"], axis=0),
             helper.make_node("Gemm", ["xf", "wf", "bf"], ["y"], transB=1),
             helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["out"])]
    model = onnx_model(nodes, [("x", TP.FLOAT, ["batch", 40])], [("out", TP.FLOAT, None)], 13,
                       inits)
    gm = _build_without_fallback(model)
    for n in (1, 5, 13):
        x = (rng.standard_normal((n, 40)) * 3).astype(np.float32)
        np.testing.assert_array_equal(gm.run(x=x)["out"], ort_run(model, {"x": x})["out"])


@pytest.mark.parametrize("x_shape", [["n", 40], ["b", "s", 40]])
def test_matmul_integer_over_symbolic_rows(x_shape):
    """quantize_dynamic's pattern (DynamicQuantizeLinear -> MatMulInteger with a constant int8
    weight) over a symbolic batch or sequence: the import took the row count as an int and
    was refused ("int() argument must be ... not 'Var'")."""
    nh = onnx.numpy_helper
    rng = np.random.default_rng(7)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "sx", "zx"]),
             helper.make_node("MatMulInteger", ["xq", "w", "zx"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TP.FLOAT),
             helper.make_node("Mul", ["sx", "sw"], ["s"]),
             helper.make_node("Mul", ["accf", "s"], ["y"])]
    inits = [nh.from_array(rng.integers(-127, 128, (40, 20)).astype(np.int8), "w"),
             nh.from_array(np.float32(0.01), "sw")]
    model = onnx_model(nodes, [("x", TP.FLOAT, x_shape)], [("y", TP.FLOAT, None)], 13, inits)
    gm = _build_without_fallback(model)
    for n in (1, 6):
        x = rng.standard_normal((n, 40) if len(x_shape) == 2 else (2, n, 40)).astype(np.float32)
        np.testing.assert_array_equal(gm.run(x=x)["y"], ort_run(model, {"x": x})["y"])
