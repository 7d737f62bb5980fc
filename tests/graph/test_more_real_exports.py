"""Patterns of real exports that did not import or build (torchvision swin_v2_t and transformers
ConvNextV2 from the dynamo exporter: ReduceL2; Qwen2 with a dynamic sequence axis: Sin/Cos of
the rotary embedding computed at run time, slices of a tensor with a symbolic axis; BART with
dynamic axes: Slice of the symbolic sequence axis), each as a small hand-made ONNX model
checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from graph_testing import check_against_ort, int64s, onnx, onnx_model

from tensorlang import graph

helper, TP = onnx.helper, onnx.TensorProto
INT64_MAX = 2**63 - 1


REDUCTIONS = ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("opset,keepdims", [(13, 1), (18, 0)])
def test_norm_reductions(op, opset, keepdims):
    """torch.linalg.vector_norm (swin_v2's cosine attention, ConvNextV2's GRN) exports as
    ReduceL2; axes are an attribute before opset 18, an input from 18."""
    attrs = {"keepdims": keepdims}
    inits = []
    ins = ["x"]
    if opset >= 18:
        inits, ins = [int64s("axes", [-1, 1])], ["x", "axes"]
    else:
        attrs["axes"] = [-1, 1]
    node = helper.make_node(op, ins, ["y"], **attrs)
    model = onnx_model([node], [("x", TP.FLOAT, [2, 5, 3, 7])], [("y", TP.FLOAT, None)], opset,
                   inits)
    x = np.random.default_rng(0).uniform(0.1, 3, (2, 5, 3, 7)).astype(np.float32)
    if op != "ReduceLogSum":
        x[0] *= -1
    check_against_ort(model, [{"x": x}])


def test_norm_reduction_of_all_axes_and_int_refusal():
    node = helper.make_node("ReduceL2", ["x"], ["y"], keepdims=0)
    model = onnx_model([node], [("x", TP.FLOAT, [4, 6])], [("y", TP.FLOAT, None)], 13)
    check_against_ort(model, [{"x": np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)}])
    ints = onnx_model([node], [("x", TP.INT64, [4, 6])], [("y", TP.INT64, None)], 13)
    with pytest.raises(Exception, match="only float inputs"):
        graph.from_onnx(ints)


def test_rotary_embedding_over_a_dynamic_sequence():
    """Qwen2/Llama with a dynamic sequence axis: positions from Range(0, seq), their angles'
    Sin and Cos at run time, and rotate_half (two slices of the static last axis of a tensor
    whose sequence axis is symbolic)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        helper.make_node("Cast", ["pos"], ["posf"], to=TP.FLOAT),
        helper.make_node("Unsqueeze", ["posf", "ax1"], ["col"]),
        helper.make_node("Mul", ["col", "inv_freq"], ["angle"]),
        helper.make_node("Concat", ["angle", "angle"], ["emb"], axis=-1),
        helper.make_node("Cos", ["emb"], ["cos"]),
        helper.make_node("Sin", ["emb"], ["sin"]),
        helper.make_node("Slice", ["x", "s0", "s4", "ax2"], ["x1"]),
        helper.make_node("Slice", ["x", "s4", "smax", "ax2"], ["x2"]),
        helper.make_node("Neg", ["x2"], ["nx2"]),
        helper.make_node("Concat", ["nx2", "x1"], ["rot"], axis=-1),
        helper.make_node("Mul", ["x", "cos"], ["a"]),
        helper.make_node("Mul", ["rot", "sin"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    inits = [helper.make_tensor("zero", TP.INT64, [], [0]),
             helper.make_tensor("one", TP.INT64, [], [1]), int64s("ax1", [1]),
             int64s("ax2", [2]), int64s("s0", [0]), int64s("s4", [4]), int64s("smax", [INT64_MAX]),
             helper.make_tensor("inv_freq", TP.FLOAT, [4], [1.0, 0.3, 0.1, 0.03])]
    model = onnx_model(nodes, [("x", TP.FLOAT, [1, "seq", 8])], [("y", TP.FLOAT, None)], 17,
                   inits)
    rng = np.random.default_rng(2)
    check_against_ort(model, [{"x": rng.standard_normal((1, n, 8)).astype(np.float32)} for n in (5, 40)])


def test_slices_of_a_symbolic_axis():
    """BART's shift_tokens_right / a causal shift with dynamic axes: x[:, :-1], x[:, 1:] and
    x[:, 2:-1] of a symbolic sequence axis (bounds as written; the kernel checks the size)."""
    nodes = [helper.make_node("Slice", ["x", "s0", "m1", "ax"], ["a"]),
             helper.make_node("Slice", ["x", "s1", "smax", "ax"], ["b"]),
             helper.make_node("Slice", ["x", "s2", "m1", "ax"], ["c"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    inits = [int64s("s0", [0]), int64s("m1", [-1]), int64s("s1", [1]), int64s("smax", [INT64_MAX]),
             int64s("s2", [2]), int64s("ax", [1])]
    model = onnx_model(nodes, [("x", TP.FLOAT, ["b", "s"])],
                   [("y", TP.FLOAT, None), ("c", TP.FLOAT, None)], 13, inits)
    rng = np.random.default_rng(3)
    check_against_ort(model, [{"x": rng.standard_normal(s).astype(np.float32)} for s in ((2, 9), (3, 6))])


@pytest.mark.parametrize("start,end", [(-3, INT64_MAX), (0, 4)])
def test_a_clamped_slice_of_a_symbolic_axis(start, end):
    """numpy clamps x[:, -3:] and x[:, :4] to the axis: their length is min(s, 3 or 4) at run
    time (refused until symbolic sizes held min/max)."""
    node = helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"])
    model = onnx_model([node], [("x", TP.FLOAT, [2, "s"])], [("y", TP.FLOAT, None)], 13,
                   [int64s("st", [start]), int64s("en", [end]), int64s("ax", [1])])
    rng = np.random.default_rng(8)
    check_against_ort(model, [{"x": rng.standard_normal((2, n)).astype(np.float32)} for n in (6, 2)])


def test_roberta_positions_cumsum_over_a_dynamic_sequence():
    """RoBERTa / XLM-RoBERTa / MPNet with dynamic axes: position ids are cumsum(ids != pad) *
    (ids != pad) + pad over the symbolic sequence axis (was refused: CumSum needed a constant
    extent)."""
    nodes = [helper.make_node("Equal", ["ids", "pad"], ["is_pad"]),
             helper.make_node("Not", ["is_pad"], ["keep"]),
             helper.make_node("Cast", ["keep"], ["k32"], to=TP.INT32),
             helper.make_node("CumSum", ["k32", "ax"], ["run"]),
             helper.make_node("Mul", ["run", "k32"], ["pos32"]),
             helper.make_node("Cast", ["pos32"], ["pos64"], to=TP.INT64),
             helper.make_node("Add", ["pos64", "pad"], ["y"])]
    inits = [helper.make_tensor("pad", TP.INT64, [], [1]),
             helper.make_tensor("ax", TP.INT64, [], [1])]
    model = onnx_model(nodes, [("ids", TP.INT64, ["b", "s"])], [("y", TP.INT64, None)], 17, inits)
    rng = np.random.default_rng(4)
    check_against_ort(model, [{"ids": rng.integers(0, 4, s).astype(np.int64)}
                   for s in ((2, 9), (1, 1), (3, 0))])


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_over_a_symbolic_axis(exclusive, reverse):
    """The scan's length is the size at run time, 0 and 1 included."""
    node = helper.make_node("CumSum", ["x", "ax"], ["y"], exclusive=exclusive, reverse=reverse)
    model = onnx_model([node], [("x", TP.FLOAT, [3, "s"])], [("y", TP.FLOAT, None)], 18,
                   [helper.make_tensor("ax", TP.INT64, [], [-1])])
    rng = np.random.default_rng(5)
    check_against_ort(model, [{"x": rng.uniform(0.5, 1.5, (3, n)).astype(np.float32)} for n in (6, 1, 0)])


def test_mobilebert_trigram_pads_over_a_dynamic_sequence():
    """MobileBERT's embeddings with dynamic axes: concat(pad(e[:, 1:], after 1), e,
    pad(e[:, :-1], before 1)) pads the symbolic sequence axis by constant widths (was a
    BuildError: a padded axis had to be a constant)."""
    nodes = [helper.make_node("Slice", ["x", "s1", "smax", "ax"], ["tail"]),
             helper.make_node("Slice", ["x", "s0", "m1", "ax"], ["head"]),
             helper.make_node("Pad", ["tail", "after1"], ["nxt"]),
             helper.make_node("Pad", ["head", "before1"], ["prv"]),
             helper.make_node("Concat", ["nxt", "x", "prv"], ["y"], axis=2)]
    inits = [int64s("s0", [0]), int64s("s1", [1]), int64s("m1", [-1]), int64s("smax", [INT64_MAX]),
             int64s("ax", [1]), int64s("after1", [0, 0, 0, 0, 1, 0]),
             int64s("before1", [0, 1, 0, 0, 0, 0])]
    model = onnx_model(nodes, [("x", TP.FLOAT, ["b", "s", 4])], [("y", TP.FLOAT, None)], 17, inits)
    rng = np.random.default_rng(6)
    check_against_ort(model, [{"x": rng.standard_normal(s).astype(np.float32)}
                   for s in ((2, 7, 4), (1, 2, 4))])


@pytest.mark.parametrize("mode", ["constant", "edge"])
def test_pad_of_a_symbolic_axis(mode):
    node = helper.make_node("Pad", ["x", "pads", "cval"], ["y"], mode=mode)
    inits = [int64s("pads", [1, 0, 2, 3]), helper.make_tensor("cval", TP.FLOAT, [], [0.5])]
    model = onnx_model([node], [("x", TP.FLOAT, ["s", 3])], [("y", TP.FLOAT, None)], 18, inits)
    rng = np.random.default_rng(7)
    check_against_ort(model, [{"x": rng.standard_normal((n, 3)).astype(np.float32)} for n in (5, 1)])


def test_reflect_pad_of_a_symbolic_axis():
    """(Was refused: the pad kernel mirrors constant extents only; the importer gathers the
    mirrored rows: test_shipped_models.py.)"""
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")
    model = onnx_model([node], [("x", TP.FLOAT, ["s", 3])], [("y", TP.FLOAT, None)], 18,
                   [int64s("pads", [1, 0, 1, 0])])
    rng = np.random.default_rng(8)
    check_against_ort(model, [{"x": rng.standard_normal((n, 3)).astype(np.float32)} for n in (2, 5)])


@pytest.mark.parametrize("oc,ic,group", [(4, 16, 1), (20, 40, 2)])
def test_pointwise_conv_over_a_dynamic_batch(oc, ic, group):
    """transformers' ResNet / RegNet with a dynamic batch: a 1x1 conv off the oc-blocked path
    (4 output channels; a group of 10) needed a constant batch (a BuildError)."""
    rng = np.random.default_rng(9)
    w = rng.standard_normal((oc, ic // group, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=group),
             helper.make_node("Relu", ["c"], ["y"])]
    model = onnx_model(nodes, [("x", TP.FLOAT, ["b", ic, 6, 5])], [("y", TP.FLOAT, None)], 17,
                   [onnx.numpy_helper.from_array(w, "w")])
    check_against_ort(model, [{"x": rng.standard_normal((b, ic, 6, 5)).astype(np.float32)} for b in (1, 3)])


def test_rwkv_time_shift_crops_a_dynamic_sequence():
    """RWKV's time shift, ZeroPad2d((0, 0, 1, -1)) over a dynamic sequence: pads [0, 1, 0, 0,
    -1, 0] crop the symbolic axis (was a BuildError: the crop's end was an expression)."""
    node = helper.make_node("Pad", ["x", "pads"], ["y"])
    model = onnx_model([node], [("x", TP.FLOAT, ["b", "s", 4])], [("y", TP.FLOAT, None)], 17,
                   [int64s("pads", [0, 1, 0, 0, -1, 0])])
    rng = np.random.default_rng(10)
    check_against_ort(model, [{"x": rng.standard_normal(s).astype(np.float32)}
                   for s in ((2, 6, 4), (1, 1, 4))])


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd_over_symbolic_sizes(reduction):
    """RWKV with dynamic axes writes its state at run-time positions of a dynamic batch and
    sequence: ScatterND's data, indices and updates of symbolic shape (was a BuildError:
    data needs a constant shape); negative indices count from the end."""
    node = helper.make_node("ScatterND", ["x", "idx", "u"], ["y"], reduction=reduction)
    model = onnx_model([node], [("x", TP.FLOAT, ["b", "s", 4]), ("idx", TP.INT64, ["b", 1, 2]),
                            ("u", TP.FLOAT, ["b", 1, 4])], [("y", TP.FLOAT, None)], 18)
    rng = np.random.default_rng(11)
    feeds = []
    for b, n in ((1, 5), (3, 2)):
        idx = np.stack([np.arange(b), rng.integers(-n, n, b)], -1)[:, None, :]
        feeds.append({"x": rng.standard_normal((b, n, 4)).astype(np.float32),
                      "idx": idx.astype(np.int64),
                      "u": rng.standard_normal((b, 1, 4)).astype(np.float32)})
    check_against_ort(model, feeds)


@pytest.mark.parametrize("eq,shapes", [
    ("bind,bjnd->bnij", [["b", "s", 4, 8], ["b", "s", 4, 8]]),
    ("binh,tnh->bnit", [["b", "s", 4, 8], ["t", 4, 8]]),
    ("bnij,bjnd->bind", [["b", 4, "s", "s"], ["b", "s", 4, 8]])])
def test_einsum_over_symbolic_sizes(eq, shapes):
    """Funnel Transformer with dynamic axes: its attention's Einsums over a symbolic batch and
    sequence (was an internal TypeError: a letter's size compared with max())."""
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    model = onnx_model([node], [(n, TP.FLOAT, s) for n, s in zip(names, shapes)],
                   [("y", TP.FLOAT, None)], 17)
    rng = np.random.default_rng(12)
    feeds = [{n: rng.standard_normal([env.get(d, d) for d in s]).astype(np.float32)
              for n, s in zip(names, shapes)} for env in ({"b": 2, "s": 5, "t": 3},
                                                         {"b": 1, "s": 1, "t": 2})]
    check_against_ort(model, feeds)
