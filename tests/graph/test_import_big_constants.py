"""Constants are not copied on import (a big model's weights would be copied once per wrap: VGG19's
550 MB took 8 s), Gemm's transposed weight is made once by a cache-friendly copy, and sharing
arrays is safe: nothing the graph layer does writes them (the user's arrays and the model's
initializers are unchanged after import and build)."""

import mmap

import numpy as np
import pytest
from graph_testing import assert_close, ort_run
from onnx import TensorProto, helper, numpy_helper
from tensorlang.graph import ir
from tensorlang.graph.frontends import onnx as onnx_frontend

from tensorlang import graph

RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _weights():
    """Conv 8->16 3x3, batch norm, Gemm 16*6*6 -> 10 (transB), a bias: what the model reads."""
    return {"w": _rand(16, 8, 3, 3), "gamma": np.abs(_rand(16)) + 0.5, "beta": _rand(16),
            "mean": _rand(16), "var": np.abs(_rand(16)) + 0.5, "fc": _rand(10, 16 * 6 * 6),
            "fc_b": _rand(10), "shift": _rand(1, 10)}


def _onnx_model(w):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"],
                              ["bn"], epsilon=1e-5),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fc_b"], ["d"], transB=1),
             helper.make_node("Add", ["d", "shift"], ["y"])]
    inits = [numpy_helper.from_array(a, n) for n, a in w.items()]
    g = helper.make_graph(nodes, "m", [_vi("x", [1, 8, 6, 6])], [_vi("y", [1, 10])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_initializers_are_wrapped_without_a_copy(monkeypatch):
    read = {}
    real = onnx_frontend._initializer_array

    def recording(init):
        read[init.name] = real(init)
        return read[init.name]

    monkeypatch.setattr(onnx_frontend, "_initializer_array", recording)
    g = graph.from_onnx(_onnx_model(_weights()))
    consts = {c.name: c.data for c in g.constants}
    assert consts["w"] is read["w"] and consts["gamma"] is read["gamma"]
    assert not consts["w"].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        consts["w"][0, 0, 0, 0] = 1.0


def test_gemm_trans_b_weight_is_the_exact_transpose():
    w = _weights()
    g = graph.from_onnx(_onnx_model(w))
    (dense,) = [n for n in g.nodes if n.op == "dense"]
    kn = dense.inputs[1].data
    assert kn.flags.c_contiguous and np.array_equal(kn, w["fc"].T)


@pytest.mark.parametrize("shape", [(37, 23), (16, 5), (1, 40), (40, 1), (0, 7), (33, 0)])
def test_strip_transpose_matches_numpy(shape):
    w = _rand(*shape)
    got = onnx_frontend._transposed(w)
    assert got.shape == shape[::-1] and got.flags.c_contiguous
    assert np.array_equal(got, w.T)


def test_user_arrays_and_initializers_are_unchanged_by_import_and_build():
    w = _weights()
    before = {n: a.copy() for n, a in w.items()}
    model = _onnx_model(w)
    x = _rand(1, 8, 6, 6)
    gm = graph.build(graph.from_onnx(model))
    assert_close(gm.run(x=x)["y"], ort_run(model, {"x": x})["y"])
    for n, a in w.items():
        assert np.array_equal(a, before[n]), n
    for init in model.graph.initializer:
        assert np.array_equal(numpy_helper.to_array(init), before[init.name]), init.name


def test_read_only_user_arrays_are_shared_and_survive_every_pass():
    """The Builder takes a read-only array as is: the build's passes (batch norm folded into
    the conv, weights packed into blocked layouts, constant folding) derive new arrays and
    leave the user's untouched; a writable array is copied, so changing it later does not
    change the graph."""
    w = _weights()
    frozen = {n: ir.freeze(a.copy()) for n, a in w.items()}
    b = graph.Builder("m")
    x = b.input("x", (1, 8, 6, 6))
    c = {n: b.const(a, name=n) for n, a in frozen.items()}
    writable_shift = w["shift"].copy()
    shift = b.const(writable_shift, name="shift_w")
    y = b.conv(x, c["w"], pads=1)
    y = b.relu(b.batch_norm(y, c["gamma"], c["beta"], c["mean"], c["var"], epsilon=1e-5))
    y = b.reshape(y, shape=[1, 16 * 6 * 6])
    fc_kn = b.const(ir.freeze(onnx_frontend._transposed(frozen["fc"])), name="fc_kn")
    y = b.add(b.dense(y, fc_kn, c["fc_b"]), shift)
    g = b.build(y)
    assert c["w"].data is frozen["w"] and shift.data is not writable_shift
    writable_shift += 100.0  # after the graph was made: no effect on it
    feeds = {"x": _rand(1, 8, 6, 6)}
    got = graph.build(g).run(**feeds)[y.name]
    ref = ort_run(_onnx_model(w), feeds)["y"]
    assert_close(got, ref)
    for n, a in frozen.items():
        assert np.array_equal(a, w[n]), n


def test_arrays_that_may_change_or_do_not_fit_are_copied():
    writable = _rand(4, 4)
    assert ir.Value("a", (4, 4), "float32", data=writable).data is not writable
    view_of_writable = writable[:2]
    view_of_writable.flags.writeable = False  # read-only, but its base is not
    v = ir.Value("b", (2, 4), "float32", data=view_of_writable)
    assert v.data is not view_of_writable and not np.shares_memory(v.data, writable)
    big_endian = ir.freeze(writable.astype(">f4"))
    v = ir.Value("c", (4, 4), "float32", data=big_endian)
    assert v.data.dtype == np.dtype("float32") and np.array_equal(v.data, writable)
    strided = ir.freeze(writable.copy())[:, ::2]
    v = ir.Value("d", (4, 2), "float32", data=strided)
    assert v.data.flags.c_contiguous and np.array_equal(v.data, writable[:, ::2])
    with pytest.raises(ir.GraphError, match=r"constant 'e': data shape \(4, 4\) != \(16,\)"):
        ir.Value("e", (16,), "float32", data=ir.freeze(writable.copy()))


def test_read_only_buffers_are_shared(tmp_path):
    """ONNX weights come as views of read-only bytes; a weight file mapped read-only is used
    where it lies, never read into memory by the import."""
    raw = _rand(64, 32)
    from_bytes = np.frombuffer(raw.tobytes(), dtype=np.float32).reshape(64, 32)
    assert ir.Value("a", (64, 32), "float32", data=from_bytes).data is from_bytes
    path = tmp_path / "w.bin"
    path.write_bytes(raw.tobytes())
    with open(path, "rb") as f:
        mapped = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ),
                               dtype=np.float32).reshape(64, 32)
    v = ir.Value("m", (64, 32), "float32", data=mapped)
    assert v.data is mapped and np.array_equal(v.data, raw)


def test_constant_nodes_as_weights():
    """Weights exported as Constant nodes (tensor, float list, scalar) import as read-only
    constants that compute what onnxruntime does; the node's tensor is unchanged."""
    w = _rand(12, 5)
    nodes = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w)),
             helper.make_node("Constant", [], ["b"], value_floats=[0.5, -1.0, 2.0, 0.0, 3.0]),
             helper.make_node("Constant", [], ["s"], value_float=1.5),
             helper.make_node("MatMul", ["x", "w"], ["mm"]),
             helper.make_node("Add", ["mm", "b"], ["ab"]),
             helper.make_node("Mul", ["ab", "s"], ["y"])]
    g = helper.make_graph(nodes, "c", [_vi("x", [3, 12])], [_vi("y", [3, 5])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    imported = graph.from_onnx(model)
    assert all(not c.data.flags.writeable for c in imported.constants)
    feeds = {"x": _rand(3, 12)}
    assert_close(graph.build(imported).run(**feeds)["y"], ort_run(model, feeds)["y"])
    assert np.array_equal(numpy_helper.to_array(model.graph.node[0].attribute[0].t), w)
