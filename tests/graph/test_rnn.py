"""LSTM and GRU imported from one-node ONNX models against onnxruntime and the onnx package's
backend node cases (issue 18): every direction, both layouts, initial states, peepholes, clip,
input_forget, linear_before_reset, non-default activations, constant sequence_lens; bad input
refused naming the node and what is wrong. A layer is one projection and one recurrence
kernel (ops/rnn.py), sequence_lens included; an LSTM with peepholes or input_forget is
unrolled over its time steps at import."""

from __future__ import annotations

import numpy as np
import pytest
from graph_testing import assert_close, onnx, ort_run
from tensorlang.graph.frontends import onnx_rnn
from test_ops_misc import check_node_case, node_cases

from tensorlang import graph, runtime
from tensorlang.ops import rnn as rnn_ops

helper, TP = onnx.helper, onnx.TensorProto
T, B, I, H = 5, 3, 4, 6


def _arr(rng, shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def rnn_model(op, direction="forward", layout=0, with_bias=True, initial=False, peep=False,
              seq_lens=None, opset=14, seed=0, hidden=H, **attrs):
    """(model, feeds): X an input; weights, biases, initial states, lens initializers."""
    H = hidden
    rng = np.random.default_rng(seed)
    gates = 4 if op == "LSTM" else 3
    dirs = 2 if direction == "bidirectional" else 1
    x_shape = (B, T, I) if layout else (T, B, I)
    state = (B, dirs, H) if layout else (dirs, B, H)
    inits = {"W": _arr(rng, (dirs, gates * H, I)), "R": _arr(rng, (dirs, gates * H, H))}
    names = ["X", "W", "R", "", "", "", "", ""]
    if with_bias:
        inits["B"] = _arr(rng, (dirs, 2 * gates * H))
        names[3] = "B"
    if seq_lens is not None:
        inits["lens"] = np.asarray(seq_lens, np.int32)
        names[4] = "lens"
    if initial:
        inits["h0"] = _arr(rng, state)
        names[5] = "h0"
        if op == "LSTM":
            inits["c0"] = _arr(rng, state)
            names[6] = "c0"
    if peep:
        inits["P"] = _arr(rng, (dirs, 3 * H))
        names[7] = "P"
    while names and names[-1] == "":
        names.pop()
    y_shape = (B, T, dirs, H) if layout else (T, dirs, B, H)
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=H, direction=direction, **attrs,
                            **({"layout": layout} if layout else {}))
    out_vi = [helper.make_tensor_value_info("Y", TP.FLOAT, y_shape)]
    out_vi += [helper.make_tensor_value_info(o, TP.FLOAT, state) for o in outs[1:]]
    g = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("X", TP.FLOAT,
                                                                           x_shape)],
                          out_vi, initializer=[onnx.numpy_helper.from_array(v, k)
                                               for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return m, {"X": _arr(rng, x_shape, 1.0)}


def _compare(model, feeds, rtol=2e-5):
    got = graph.build(graph.from_onnx(model)).run(**feeds)
    ref = ort_run(model, feeds)
    for k, v in ref.items():
        assert_close(got[k], v, rtol)
    return got


def batchwise(model):
    """The layout=1 form of a layout=0 model (onnxruntime runs only layout 0): X [B, T, I],
    states [B, D, H], Y [B, T, D, H]."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    g.node[0].attribute.append(helper.make_attribute("layout", 1))
    for k, init in enumerate(g.initializer):
        if init.name in ("h0", "c0"):
            a = onnx.numpy_helper.to_array(init).transpose(1, 0, 2)
            g.initializer[k].CopyFrom(onnx.numpy_helper.from_array(np.ascontiguousarray(a),
                                                                   init.name))
    perms = {"X": (1, 0, 2), "Y": (2, 0, 1, 3), "Y_h": (1, 0, 2), "Y_c": (1, 0, 2)}
    for vi in [*g.input, *g.output]:
        dims = vi.type.tensor_type.shape.dim
        old = [d.dim_value for d in dims]
        for d, p in zip(dims, perms[vi.name]):
            d.dim_value = old[p]
    return m, perms


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(op, direction):
    _compare(*rnn_model(op, direction, initial=True))


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_layout_1_batchwise(op):
    model, feeds = rnn_model(op, "bidirectional", initial=True)
    ref = ort_run(model, feeds)
    m1, perms = batchwise(model)
    got = graph.build(graph.from_onnx(m1)).run(X=np.ascontiguousarray(
        feeds["X"].transpose(perms["X"])))
    for k, v in ref.items():
        assert_close(got[k], np.ascontiguousarray(v.transpose(perms[k])), 2e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_no_bias_zero_initial_state_opset7(op):
    _compare(*rnn_model(op, with_bias=False, opset=7))


def test_lstm_peepholes_clip_and_input_forget():
    _compare(*rnn_model("LSTM", "bidirectional", initial=True, peep=True, clip=0.7,
                        input_forget=1))
    _compare(*rnn_model("LSTM", peep=True))  # peepholes with a zero initial cell


@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("initial", [False, True])
def test_gru_linear_before_reset(lbr, initial):
    _compare(*rnn_model("GRU", "bidirectional", initial=initial, linear_before_reset=lbr))


def test_activations_with_alpha_beta():
    _compare(*rnn_model("GRU", "bidirectional", activations=["HardSigmoid", "Softsign",
                                                             "Sigmoid", "ScaledTanh"],
                        activation_alpha=[0.3, 0.9], activation_beta=[0.4, 1.1]))
    _compare(*rnn_model("LSTM", activations=["Sigmoid", "Tanh", "Relu"]), rtol=5e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_constant_sequence_lens(op, direction):
    got = _compare(*rnn_model(op, direction, initial=True, seq_lens=[T, 2, 0]))
    assert (got["Y"][2:, :, 1] == 0).all()  # past the second entry's length: zeros


def test_full_sequence_lens_are_dropped():
    m, feeds = rnn_model("LSTM", seq_lens=[T] * B)
    assert "where" not in {n.op for n in graph.from_onnx(m).nodes}
    _compare(m, feeds)


def test_bad_input_is_refused():
    m, _ = rnn_model("LSTM", direction="sideways")
    with pytest.raises(graph.OnnxImportError,
                       match=r"\(LSTM, opset 14\): direction 'sideways' is not forward"):
        graph.from_onnx(m)
    m, _ = rnn_model("GRU", activations=["Sigmoid", "Gelu"])
    with pytest.raises(graph.OnnxImportError, match=r"\(GRU, opset 14\): activation 'Gelu'"):
        graph.from_onnx(m)
    m, _ = rnn_model("LSTM", seq_lens=[T, 2, 9])
    with pytest.raises(graph.OnnxImportError, match=r"sequence_lens \[5, 2, 9\] must give"):
        graph.from_onnx(m)
    m, _ = run_time_lens_model("LSTM", "forward", TP.FLOAT)
    with pytest.raises(graph.OnnxImportError,
                       match=r"sequence_lens \('lens'\) must be integers of shape \[3\]"):
        graph.from_onnx(m)


def run_time_lens_model(op, direction, lens_type=TP.INT32, **kw):
    """A model whose sequence_lens is a graph input (pack_padded_sequence exports)."""
    m, feeds = rnn_model(op, direction, initial=True, **kw)
    node = m.graph.node[0]
    m.graph.input.append(helper.make_tensor_value_info("lens", lens_type, [B]))
    ins = list(node.input)
    ins[4:5] = ["lens"]
    del node.input[:]
    node.input.extend(ins)
    return m, feeds


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_run_time_sequence_lens(op, direction):
    m, feeds = run_time_lens_model(op, direction)
    gm = graph.build(graph.from_onnx(m))
    for lens in ([T, 2, 0], [1, T, 3], [T] * B):
        feeds["lens"] = np.array(lens, np.int32)
        got, ref = gm.run(**feeds), ort_run(m, feeds)
        for k, v in ref.items():
            assert_close(got[k], v, 2e-5)


def test_dynamic_sequence_length_is_refused_naming_the_input():
    m, _ = rnn_model("GRU")
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "seq"
    with pytest.raises(graph.OnnxImportError, match=r"input 'X'.*'seq'"):
        graph.from_onnx(m)
    assert graph.from_onnx(m, shapes={"X": (T, B, I)}).inputs[0].shape == (T, B, I)


@pytest.mark.parametrize("op,module", [("LSTM", "lstm"), ("GRU", "gru")])
def test_onnx_backend_node_cases(op, module):
    cases = node_cases(op, module)
    assert len(cases) >= 5
    for case in cases:
        # weights are initializers in exported models (tensorlang needs them so); the cases
        # feed them: made initializers with the case's values (states, lengths stay inputs)
        static = [n for n in case.model.graph.node[0].input[1:] if n and n not in (
            "initial_h", "initial_c", "sequence_lens")]
        try:
            check_node_case(case, static, rtol=1e-4)
        except AssertionError as e:
            raise AssertionError(f"{case.name}: {e}") from None


def test_output_names_survive_reshape_sinking():
    """An LSTM of one step ends in reshape(elementwise(reshape(...))): sink_reshape collapsed
    the chain and the output lost its name (gm.run returned 'x_flat' for 'Y_h')."""
    b = graph.Builder("t")
    x = b.input("x", (1, 2, 3))
    y = b.sigmoid(b.reshape(x, shape=[2, 3]))
    g = b.build(b.op("reshape", [y], shape=[1, 2, 3], outputs=["out"]))
    got = graph.build(g).run(x=np.zeros((1, 2, 3), np.float32))
    assert list(got) == ["out"]
    np.testing.assert_array_equal(got["out"], np.full((1, 2, 3), 0.5, np.float32))


def _ops(model):
    return [n.op for n in graph.from_onnx(model).nodes]


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_one_recurrence_kernel_per_layer_sequence_lens_included(op):
    assert _ops(rnn_model(op, "bidirectional", initial=True)[0]).count("rnn_recurrence") == 1
    cut = _ops(rnn_model(op, initial=True, seq_lens=[T, 2, 0])[0])
    assert cut.count("rnn_recurrence") == 1 and "where" not in cut
    assert "rnn_recurrence" in _ops(run_time_lens_model(op, "reverse")[0])


def test_run_time_sequence_lens_over_unit_blocks_on_two_threads():
    saved_threads = runtime.get_num_threads()
    m, feeds = run_time_lens_model("LSTM", "forward", hidden=96)
    try:
        runtime.set_num_threads(2)
        gm = graph.build(graph.from_onnx(m))
        for lens in ([T, 2, 0], [1, T, 3]):
            feeds["lens"] = np.array(lens, np.int32)
            got, ref = gm.run(**feeds), ort_run(m, feeds)
            for k, v in ref.items():
                assert_close(got[k], v, 5e-5)
    finally:
        runtime.set_num_threads(saved_threads)


def test_lstm_peepholes_and_input_forget_are_unrolled_zero_peepholes_are_not():
    assert "rnn_recurrence" not in _ops(rnn_model("LSTM", peep=True)[0])
    assert "rnn_recurrence" not in _ops(rnn_model("LSTM", input_forget=1)[0])
    m, feeds = rnn_model("LSTM", peep=True)
    m.graph.initializer[-1].CopyFrom(onnx.numpy_helper.from_array(
        np.zeros((1, 3 * H), np.float32), "P"))
    assert "rnn_recurrence" in _ops(m)
    _compare(m, feeds)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op,direction,lbr", [("LSTM", "forward", 0), ("LSTM", "reverse", 0),
                                              ("GRU", "forward", 0), ("GRU", "forward", 1),
                                              ("GRU", "bidirectional", 1)])
def test_unit_blocks_on_the_thread_pool(op, direction, lbr, threads):
    """hidden 96, batch 3: three blocks of 32 units, a parallel loop per step (its product is
    above PARALLEL_STEP_MACS; the directions' loop instead when there are two); the same
    result on one thread and two."""
    assert 3 * 96 * 96 * B >= rnn_ops.PARALLEL_STEP_MACS
    saved_threads = runtime.get_num_threads()
    try:
        attrs = {"linear_before_reset": lbr} if op == "GRU" else {}
        model, feeds = rnn_model(op, direction, initial=True, hidden=96, **attrs)
        runtime.set_num_threads(threads)
        _compare(model, feeds, rtol=5e-5)
    finally:
        runtime.set_num_threads(saved_threads)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_unrolled_form_still_matches_where_chosen(monkeypatch, op):
    """benchmarks/rnn.py times the unrolled form by replacing one_kernel: it stays right, with
    sequence lengths too."""
    monkeypatch.setattr(onnx_rnn, "one_kernel", lambda rnn: False)
    model, feeds = rnn_model(op, "bidirectional", initial=True, seq_lens=[T, 2, 0])
    assert "rnn_recurrence" not in _ops(model)
    _compare(model, feeds)
