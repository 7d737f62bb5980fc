"""ops.rnn_recurrence (issue 18): the time loop of an LSTM / GRU layer as one kernel, against
its numpy reference (which tests/graph/test_rnn.py checks against onnxruntime through the
importer): unit blocks (hidden 48: three of 16), every activation ONNX names with its alpha
and beta, clip, several batch rows; bad arguments refused naming what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.ops import rnn


def _run(cell, direction, T=4, B=2, H=48, acts=None, clip=None, lbr=False, seed=0, lens=None):
    D, G = rnn.DIRECTIONS[direction], rnn.CELLS[cell]
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((T, B, D * G * H)).astype(np.float32),
              rnn.pack_recurrent_weights(
                  (rng.standard_normal((D, G * H, H)) * 0.2).astype(np.float32), G),
              rng.standard_normal((D, B, H)).astype(np.float32),
              rng.standard_normal((D, B, H) if cell == "lstm" else (D, H)).astype(np.float32)]
    per = 3 if cell == "lstm" else 2
    acts = acts or [("Sigmoid", 0.0, 0.0), ("Tanh", 0.0, 0.0), ("Tanh", 0.0, 0.0)][:per] * D
    ins = [tl.placeholder(a.shape, name=f"in{k}") for k, a in enumerate(arrays)]
    given = None
    if lens is not None:
        arrays.append(np.asarray(lens, np.int32))
        given = tl.placeholder((B,), dtype="int32", name="lens")
        ins.append(given)
    outs = rnn.rnn_recurrence(*ins[:4], cell, direction, acts, clip, lbr, given)
    f = tl.build(tl.ops.default_schedule(outs), ins + outs, name="rnn")
    got = [np.zeros(tuple(int(x.value) for x in o.shape), np.float32) for o in outs]
    f(*arrays, *got)
    want = rnn.reference(*arrays[:4], cell, direction, acts, clip, lbr, lens)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("cell,direction,lbr", [
    ("lstm", "forward", False), ("lstm", "bidirectional", False), ("gru", "reverse", False),
    ("gru", "forward", True), ("gru", "bidirectional", True)])
def test_matches_reference_over_unit_blocks(cell, direction, lbr):
    _run(cell, direction, lbr=lbr)


@pytest.mark.parametrize("cell,lbr", [("lstm", False), ("gru", False), ("gru", True)])
def test_sequence_lengths_keep_the_state_and_zero_y(cell, lbr):
    """Past a row's length the state is kept and Y is 0; an empty row's final state is 0;
    a length past T acts as T."""
    _run(cell, "bidirectional", B=3, lbr=lbr, lens=[4, 2, 0])
    _run(cell, "reverse", B=2, lbr=lbr, lens=[9, 1])


def test_every_activation_with_alpha_beta_and_clip():
    named = [("Relu", 0.0, 0.0), ("Softsign", 0.0, 0.0), ("Softplus", 0.0, 0.0),
             ("LeakyRelu", 0.1, 0.0), ("ThresholdedRelu", 0.3, 0.0), ("Elu", 0.7, 0.0),
             ("HardSigmoid", 0.3, 0.4), ("Affine", 0.5, 0.1), ("ScaledTanh", 0.9, 1.1)]
    for k in range(0, len(named), 3):
        _run("lstm", "forward", H=16, acts=named[k:k + 3], clip=2.0, seed=k)
    _run("gru", "reverse", H=16, acts=[("HardSigmoid", 0.2, 0.5), ("Elu", 1.0, 0.0)], clip=1.5)


def test_packed_weights_round_trip_by_unit_blocks():
    r = np.arange(2 * 4 * 48 * 48, dtype=np.float32).reshape(2, 4 * 48, 48)
    packed = rnn.pack_recurrent_weights(r, 4)
    assert packed.shape == (2, 3, 48, 4 * 16)  # blocks of 16 units
    # block 1, row k = 5, gate 2, unit 3 of the block: R^T[5, 2*48 + 16 + 3]
    assert packed[0, 1, 5, 2 * 16 + 3] == r[0, 2 * 48 + 16 + 3, 5]
    np.testing.assert_array_equal(rnn.unpack_recurrent_weights(packed, 4),
                                  r.transpose(0, 2, 1))


def test_bad_arguments_are_refused():
    xw, rt = tl.placeholder((3, 1, 12)), tl.placeholder((1, 1, 4, 12))
    h0, rbh = tl.placeholder((1, 1, 4)), tl.placeholder((1, 4))
    sig_tanh = [("Sigmoid", 0.0, 0.0), ("Tanh", 0.0, 0.0)]
    with pytest.raises(ValueError, match=r"cell must be one of \['gru', 'lstm', 'rnn'\], "
                                         r"got 'elman'"):
        rnn.rnn_recurrence(xw, rt, h0, rbh, "elman", "forward", sig_tanh)
    with pytest.raises(ValueError, match="cell 'rnn' takes no extra input"):
        rnn.rnn_recurrence(xw, tl.placeholder((1, 1, 4, 4)), h0, rbh, "rnn", "forward",
                           sig_tanh[1:])
    with pytest.raises(ValueError, match="cell 'gru' takes c0 or rbh as extra input"):
        rnn.rnn_recurrence(xw, rt, h0, None, "gru", "forward", sig_tanh)
    with pytest.raises(ValueError, match=r"direction must be one of .* got 'up'"):
        rnn.rnn_recurrence(xw, rt, h0, rbh, "gru", "up", sig_tanh)
    with pytest.raises(ValueError, match=r"rbh has shape \[1, 1, 4\], expected \[1, 4\]"):
        rnn.rnn_recurrence(xw, rt, h0, h0, "gru", "forward", sig_tanh)
    with pytest.raises(ValueError, match=r"xw has shape \[3, 1, 12\], expected \[3, 1, 24\]"):
        rnn.rnn_recurrence(xw, tl.placeholder((2, 1, 4, 12)), tl.placeholder((2, 1, 4)),
                           tl.placeholder((2, 4)), "gru", "bidirectional", sig_tanh * 2)
    with pytest.raises(ValueError, match=r"2 activations per direction \(2 in all\) expected"):
        rnn.rnn_recurrence(xw, rt, h0, rbh, "gru", "forward", sig_tanh[:1])
    with pytest.raises(ValueError, match=r"lens must be integers of shape \[1\], got float32"):
        rnn.rnn_recurrence(xw, rt, h0, rbh, "gru", "forward", sig_tanh,
                           lens=tl.placeholder((1,)))
    with pytest.raises(ValueError, match=r"activation 'Gelu' is not one of"):
        rnn.rnn_recurrence(xw, rt, h0, rbh, "gru", "forward", [("Gelu", 0.0, 0.0)] * 2)
