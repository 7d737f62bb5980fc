"""Slice, Pad and Range whose bounds, widths or lengths depend on symbolic sizes (issue 19):
ONNX's clamping as max/min of the sizes in the output extents, so one build gives
onnxruntime's answer at every size, the empty result included; what depends on the sizes in a
way the import cannot tell is refused naming the node (import) or the node and the sizes (run
time). Every model here is checked against onnxruntime at several sizes."""

import numpy as np
import pytest
from tensorlang.graph import symbolic as S
from tensorlang.runtime._plan import PlanError

from tensorlang import graph, runtime

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

BIG = 2**63 - 1  # what exporters write for "to the end"


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, np.int64), k) for k, v in dict(inits).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _check(model, feeds_list):
    """One build of ``model`` without sizes against onnxruntime at every feed: same shapes
    (empty ones included) and values."""
    gm = graph.build(graph.from_onnx(model))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for feeds in feeds_list:
        want = sess.run(None, feeds)
        got = gm.run(**feeds)
        for (name, g), w in zip(got.items(), want):
            assert g.shape == w.shape, (name, {k: v.shape for k, v in feeds.items()})
            np.testing.assert_array_equal(g, w)
    return gm


def _x(*shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1


# -- Slice with constant bounds on a symbolic axis --------------------------------------------

CONST_SLICES = [  # start, end, step: x[:, start:end:step] with x [b, n]
    (2, BIG, 1), (-3, BIG, 1), (0, 4, 1), (0, -1, 1), (1, -1, 3), (0, BIG, 2),
    (-1, -BIG, -1), (BIG, -BIG, -1), (0, -BIG, -1), (5, 1, -2), (-2, -6, -1), (3, 1, -1)]


def test_constant_bounds_on_a_symbolic_axis_clamp_as_onnx():
    """x[:, 2:], x[:, -3:], x[:, :4], x[:, ::2], x[:, ::-1], x[:, 5:1:-2], ... of x [b, n]: the
    extents are ONNX's clamped lengths (max(n - 2, 0), min(n, 3), (n + 1) // 2, n, ...), the
    result empty where onnxruntime's is (were refused: a negative start or step, or an end
    counted from the start, on a symbolic axis)."""
    nodes, inits, outs = [], {"ax": [1]}, []
    for k, (st, en, sp) in enumerate(CONST_SLICES):
        inits.update({f"s{k}": [st], f"e{k}": [en], f"p{k}": [sp]})
        nodes.append(helper.make_node("Slice", ["x", f"s{k}", f"e{k}", "ax", f"p{k}"], [f"y{k}"]))
        outs.append(f"y{k}")
    model = _model(nodes, [("x", ["b", "n"])], outs, inits)
    g = graph.from_onnx(model)
    assert [str(v.shape[1]) for v in g.outputs[:4]] == ["max(n - 2, 0)", "min(n, 3)",
                                                        "min(n, 4)", "n - 1"]
    assert str(g.outputs[6].shape[1]) == "n"  # x[:, ::-1]: no clamp left
    _check(model, [{"x": _x(b, n)} for b, n in [(2, 1), (1, 2), (2, 3), (1, 5), (3, 8)]])


# -- Slice at symbolic positions (bounds computed from the sizes) ------------------------------


def _size_nodes():
    """s and t, the lengths of x [b, s] and y [t], as 1-element int64 tensors; and s - 1."""
    return [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
            helper.make_node("Shape", ["y"], ["t"]),
            helper.make_node("Sub", ["s", "one"], ["s1"]),
            helper.make_node("Neg", ["s"], ["ns"])]


def _slice(name, data, start, end, step):
    return helper.make_node("Slice", [data, start, end, "ax", step], [name])


def test_bounds_that_are_sizes_clamp_as_onnx():
    """x[:, :s-1], x[:, 1:s:2], x[:, s-1::-1], x[:, -s::2], x[:, t:] and x[:, t::-2] of x [b, s],
    t another input's length: gathered at run time with ONNX's clamping (x[:, t:] is empty
    once t >= s; were refused: a step other than 1, an end before the axis' end)."""
    nodes = _size_nodes() + [
        _slice("a", "x", "zero", "s1", "one"), _slice("b", "x", "one", "s", "two"),
        _slice("c", "x", "s1", "min", "mone"), _slice("d", "x", "ns", "max", "two"),
        _slice("e", "x", "t", "max", "one"), _slice("f", "x", "t", "min", "mtwo")]
    inits = {"ax": [1], "zero": [0], "one": [1], "two": [2], "mone": [-1], "mtwo": [-2],
             "max": [BIG], "min": [-BIG - 1]}
    model = _model(nodes, [("x", ["b", "s"]), ("y", ["t"])], list("abcdef"), inits)
    g = graph.from_onnx(model)
    assert [str(v.shape[1]) for v in g.outputs[:4]] == ["s - 1", "s // 2", "s", "(s + 1) // 2"]
    sizes = [(2, 1, 1), (1, 4, 2), (2, 5, 5), (1, 7, 3), (2, 2, 6), (1, 3, 9)]
    _check(model, [{"x": _x(b, s), "y": _x(t)} for b, s, t in sizes])


def test_an_end_past_the_axis_is_refused_at_run_time():
    """x[:, :t] of x [b, s], t another input's length: taken as inside the axis (models add
    such a slice to a tensor t long: BERT's position ids), so its extent is t; where t > s
    (onnxruntime clamps) the gather refuses the position past the axis, never reading it."""
    nodes = _size_nodes() + [_slice("a", "x", "zero", "t", "one"),
                             helper.make_node("Add", ["a", "y"], ["z"])]
    model = _model(nodes, [("x", ["b", "s"]), ("y", ["t"])], ["z"],
                   {"ax": [1], "zero": [0], "one": [1]})
    gm = _check(model, [{"x": _x(b, s), "y": _x(t)} for b, s, t in [(1, 4, 4), (2, 6, 3)]])
    with pytest.raises(runtime.KernelError, match="index out of bounds"):
        gm.run(x=_x(1, 3), y=_x(5))


def test_a_bound_of_either_sign_is_read_as_onnx_does():
    """x[:, 3 - s:], x[:, :3 - s], x[:, 3 - s::-1] of x [b, s] and c[:, 8 - s:] of a constant c
    [2, 8]: a bound whose sign the sizes decide counts from the end where negative, exactly (a
    0/1 step of its sign in the extent: symbolic.onnx_bound), so one build gives onnxruntime's
    answer on both sides (was refused: may be negative or not depending on the sizes)."""
    nodes = _size_nodes() + [helper.make_node("Sub", ["three", "s"], ["st"]),
                             helper.make_node("Sub", ["eight", "s"], ["st8"]),
                             _slice("a", "x", "st", "max", "one"),
                             _slice("b", "x", "zero", "st", "one"),
                             _slice("c", "x", "st", "min", "mone"),
                             _slice("d", "cst", "st8", "max", "one")]
    inits = {"ax": [1], "zero": [0], "one": [1], "mone": [-1], "three": [3], "eight": [8],
             "max": [BIG], "min": [-BIG - 1]}
    model = _model(nodes, [("x", ["b", "s"]), ("y", ["t"])], list("abcd"), inits)
    model.graph.initializer.append(numpy_helper.from_array(_x(2, 8), "cst"))
    _check(model, [{"x": _x(2, s), "y": _x(1)} for s in (1, 2, 3, 4, 6, 8, 9, 13, 17)])


def _alibi_model(start_nodes, then_add):
    """MPT's ALiBi bias: a constant c [2, 1, 8] sliced on its last axis from a start computed
    from s, the length of x [b, s] (``st``); added to x where ``then_add`` (the model then needs
    the slice s long)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2)] + start_nodes + [
        helper.make_node("Slice", ["cst", "st", "max", "ax"], ["a"], name="alibi")]
    if then_add:
        nodes.append(helper.make_node("Add", ["a", "x"], ["z"]))
    inits = {"ax": [2], "zero": [0], "eight": [8], "max": [BIG]}
    m = _model(nodes, [("x", ["b", "s"])], ["z" if then_add else "a"], inits)
    m.graph.initializer.append(numpy_helper.from_array(_x(2, 1, 8), "cst"))
    return m


TS_START = [helper.make_node("Sub", ["eight", "s"], ["st"])]  # TorchScript: 8 - s
DYNAMO_START = TS_START[:0] + [helper.make_node("Sub", ["eight", "s"], ["d"]),  # max(8 - s, 0)
                               helper.make_node("Max", ["d", "zero"], ["st"])]


@pytest.mark.parametrize("start,check", [(TS_START, "slice_start_not_negative"),
                                         (DYNAMO_START, "slice_start_max_is_its_size_operand")])
def test_alibi_slice_takes_the_evident_case_checked_at_run_time(start, check):
    """c[..., 8 - s:] (TorchScript) and c[..., max(8 - s, 0):] (dynamo: ONNX Max of sizes, was
    refused as computed at run time) added to x [b, s]: read exactly the slice is min(s, 8)
    long or, for the first, jumps at s = 8, which x's s does not broadcast with; so the import
    takes the case s <= 8 (s long), and the run time refuses a larger s naming the node, the
    check, the extent and the sizes (onnxruntime answers at s = 9 only by broadcasting the
    length 1 it slices)."""
    alone = _alibi_model(start, then_add=False)
    _check(alone, [{"x": _x(b, s)} for b, s in [(1, 1), (2, 5), (1, 8), (2, 9), (1, 13)]])
    model = _alibi_model(start, then_add=True)
    assert graph.from_onnx(model).outputs[0].type_str() == "float32[2, b, s]"
    gm = _check(model, [{"x": _x(b, s)} for b, s in [(1, 1), (2, 5), (1, 8)]])
    with pytest.raises(PlanError, match=rf"node 'alibi' \(expand\) would make '{check}'.*: its "
                                        r"axis 0 extent 0 - s \+ 8 is -1 < 0 at b = 1, s = 9"):
        gm.run(x=_x(1, 9))


@pytest.mark.parametrize("op", ["Min", "Clip"])
def test_min_and_clip_of_sizes_fold_into_an_end(op):
    """c[..., :min(s, 8)] with the end from ONNX Min or Clip(s, 0, 8) of a size (were computed
    at run time and refused): exact alone; added to x [b, s], taken as s <= 8, checked."""
    end = (helper.make_node("Min", ["s", "eight"], ["e"]) if op == "Min" else
           helper.make_node("Clip", ["s", "zero", "eight"], ["e"]))
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2), end,
             helper.make_node("Slice", ["cst", "zero", "e", "ax"], ["a"], name="alibi")]
    inits = {"ax": [2], "zero": [0], "eight": [8]}
    if op == "Clip":  # (Clip's bounds are scalars)
        inits.update({"zero": np.array(0), "eight": np.array(8), "z1": [0]})
        nodes[-1].input[1] = "z1"
    for then_add, sizes in ((False, [(1, 1), (2, 5), (1, 8), (2, 11)]),
                            (True, [(1, 1), (2, 5), (1, 8)])):
        extra = [helper.make_node("Add", ["a", "x"], ["z"])] if then_add else []
        m = _model(nodes + extra, [("x", ["b", "s"])], ["z" if then_add else "a"], inits)
        m.graph.initializer.append(numpy_helper.from_array(_x(2, 1, 8), "cst"))
        gm = _check(m, [{"x": _x(b, s)} for b, s in sizes])
    with pytest.raises(PlanError, match=r"'slice_end_min_is_its_size_operand'.* extent "
                                        r"0 - s \+ 8 is -1 < 0 at b = 2, s = 9"):
        gm.run(x=_x(2, 9))


def test_max_of_a_size_and_data_stays_refused():
    """Max(s, argmax(y)): a value of the data, not a size, so the slice's start is known only
    at run time: refused naming the node and the input it comes from."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("ArgMax", ["y"], ["i"], keepdims=1),
             helper.make_node("Max", ["s", "i"], ["st"]),
             _slice("a", "x", "st", "max", "one")]
    model = _model(nodes, [("x", ["b", "s"]), ("y", ["t"])], ["a"],
                   {"ax": [1], "one": [1], "max": [BIG]})
    with pytest.raises(graph.OnnxImportError, match=r"\(Slice, opset 18\): Slice starts must "
                       r"be known at compile time.*from the values of graph input\(s\) \['x', 'y'\]"):
        graph.from_onnx(model)


def test_abs_clip_and_max_of_shape_values_fold():
    s = S.shape_var("s")
    obj = np.array([S.dim(3 - s), s], dtype=object)
    assert [str(d) for d in S.fold_symbolic("abs", [obj], {}, "n")[0]] == [
        "max(0 - s + 3, s - 3)", "s"]
    assert [str(d) for d in S.fold_symbolic("clip", [obj], {"min": 0.0, "max": 8.0}, "n")[0]] \
        == ["min(max(0 - s + 3, 0), 8)", "min(s, 8)"]
    assert [str(d) for d in S.fold_symbolic("max_n", [obj, np.array(2), obj], {}, "n")[0]] \
        == ["2", "max(s, 2)"]
    with pytest.raises(S.GraphError, match="bound 0.5 of integer shape values"):
        S.fold_symbolic("clip", [obj], {"min": 0.5}, "n")


# -- Pad by widths of symbolic size -------------------------------------------------------------


def _pad_model(mode="constant"):
    """T5's mask: x [b, t] padded to p + s (p, s the lengths of a [b, p] and c [b, s]) by the
    width p + s - t after, and by p - 2 before (negative at p = 1: a crop)."""
    nodes = [helper.make_node("Shape", ["a"], ["p"], start=1, end=2),
             helper.make_node("Shape", ["c"], ["s"], start=1, end=2),
             helper.make_node("Shape", ["x"], ["t"], start=1, end=2),
             helper.make_node("Add", ["p", "s"], ["ps"]),
             helper.make_node("Sub", ["ps", "t"], ["after"]),
             helper.make_node("Sub", ["p", "two"], ["before"]),
             helper.make_node("Concat", ["zero", "before", "zero", "after"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads", "val"], ["y"], mode=mode, name="pad")]
    inits = {"zero": [0], "two": [2]}
    m = _model(nodes, [("x", ["b", "t"]), ("a", ["b", "p"]), ("c", ["b", "s"])], ["y"], inits)
    m.graph.initializer.append(numpy_helper.from_array(np.array(-7, np.float32), "val"))
    return m


def test_pad_by_widths_of_symbolic_size_vs_onnxruntime():
    """Positive, zero and negative (cropping) widths on either side, from one build (was
    refused: a width depending on symbolic dimensions)."""
    model = _pad_model()
    assert str(graph.from_onnx(model).outputs[0].shape[1]) == "p * 2 + s - 2"
    sizes = [(2, 3, 4, 2), (1, 6, 1, 5), (2, 1, 3, 1), (1, 9, 2, 4), (3, 2, 5, 3)]  # b t p s
    _check(model, [{"x": _x(b, t), "a": _x(b, p), "c": _x(b, s)} for b, t, p, s in sizes])


def test_a_crop_past_the_axis_is_refused_at_run_time():
    """x [b, t] cropped by p at its end: t - p long, which onnxruntime refuses once negative;
    refused at run time naming the node, the extent and the sizes."""
    nodes = [helper.make_node("Shape", ["a"], ["p"], start=1, end=2),
             helper.make_node("Neg", ["p"], ["np"]),
             helper.make_node("Concat", ["zeros", "np"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="crop")]
    model = _model(nodes, [("x", ["b", "t"]), ("a", ["b", "p"])], ["y"], {"zeros": [0, 0, 0]})
    feeds = [{"x": _x(b, t), "a": _x(b, p)} for b, t, p in [(2, 5, 2), (1, 3, 3)]]
    gm = _check(model, feeds)
    with pytest.raises(PlanError, match=r"node 'crop' \(pad\) would make 'y' of shape \[2, -1\]: "
                                        r"its axis 1 extent 0 - p \+ t is -1 < 0 at b = 2, "
                                        r"p = 3, t = 2"):
        gm.run(x=_x(2, 2), a=_x(2, 3))


def test_pad_by_widths_of_symbolic_size_needs_constant_mode():
    with pytest.raises(graph.OnnxImportError, match=r"node 'pad' \(Pad\): Pad's pads depends "
                                                    r"on symbolic dimensions"):
        graph.from_onnx(_pad_model(mode="edge"))


# -- Range to an empty length -------------------------------------------------------------------


@pytest.mark.parametrize("start,limit,delta", [("n", 4, 1), ("n", 4, 2), (9, "n", -2),
                                               ("n", 0, -1)])
def test_range_is_empty_where_onnxruntime_s_is(start, limit, delta):
    """Range(n, 4) with n > 4 (was a PlanError) and Range(9, n, -2) with n >= 9 (a negative
    delta was refused) give onnxruntime's empty tensor: the length max(0, ...) of the sizes,
    and an empty extent at run time."""
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0)]
    inits = {"zero": np.array(0), "delta": np.array(delta)}
    names = []
    for name, v in (("st", start), ("lim", limit)):
        if v != "n":
            inits[name] = np.array(v)
        names.append("n" if v == "n" else name)
    nodes.append(helper.make_node("Range", names + ["delta"], ["y"]))
    model = _model(nodes, [("x", ["n"])], ["y"], inits)
    _check(model, [{"x": _x(n)} for n in (1, 3, 4, 5, 9, 12)])


def test_clamped_extents_are_simplified_where_the_sizes_decide():
    n = S.shape_var("n")
    assert S.clamped_slice(n, 0, S.dim(n - 1), 1) == (0, S.dim(n - 1))
    assert S.clamped_slice(n, S.dim(n - 1), -1, -1) == (S.dim(n - 1), n)
    assert str(S.clamped_slice(n, 2, n, 1)[1]) == "max(n - 2, 0)"
    assert S.evaluate(S.parse("max(n - 2, 0) + min(n, 3)"), {"n": 1}) == 1
    assert S.lower_bound(S.smin(n, 4)) == 1 and S.lower_bound(S.smax(n - 3, 0)) == 0


def test_tile_by_repeats_that_are_sizes():
    """Whisper's decoder repeats its position embeddings per batch: Tile(x, [b, 2]) with b
    another input's batch (was refused: repeats depending on symbolic dimensions)."""
    nodes = [helper.make_node("Shape", ["y"], ["b"], start=0, end=1),
             helper.make_node("Concat", ["b", "two"], ["reps"], axis=0),
             helper.make_node("Tile", ["x", "reps"], ["z"])]
    model = _model(nodes, [("x", ["a", 3]), ("y", ["b"])], ["z"], {"two": [2]})
    assert graph.from_onnx(model).outputs[0].type_str() == "float32[a * b, 6]"
    _check(model, [{"x": _x(a, 3), "y": _x(b)} for a, b in [(1, 1), (2, 3), (3, 1), (1, 4)]])
