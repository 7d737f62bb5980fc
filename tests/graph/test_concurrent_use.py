"""Concurrent use of one loaded model, found by hammering it from threads: every run from any
thread gives the serial result and no run raises from the module's own bookkeeping."""

from __future__ import annotations

import threading
import time

import numpy as np
from tensorlang.graph import symbolic as S

from tensorlang import graph


class _SlowPops(dict):
    """A dict whose pop lets other threads in first: the interleaving that a busy process hits
    now and then, made to happen every time."""

    def pop(self, *args):
        time.sleep(0.0002)
        return super().pop(*args)


def _slowed(fn):
    def slow(*args, **kwargs):
        time.sleep(0.002)
        return fn(*args, **kwargs)
    return slow


def _in_threads(body, n: int) -> None:
    """body(t) in n threads at once: none hangs, none raises (the first errors reported)."""
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            body(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads), "a run hung"
    assert not errors, errors[:3]


def test_runs_at_more_shapes_than_kept_from_several_threads():
    """Threads running a model with a shape variable at more distinct shapes than it keeps
    buffer sets for (MAX_SHAPES): each new shape evicts the oldest. Two threads evicting at
    once popped the same key (KeyError out of run(), or 'dictionary changed size during
    iteration')."""
    n = S.shape_var("n")
    b = graph.Builder("dyn")
    x = b.input("x", (n, 4))
    g = b.build([b.relu(x)])
    gm = graph.build(g)
    gm._pools = _SlowPops()
    out = g.outputs[0].name
    xs = [np.full((k, 4), -1.0, np.float32) + np.arange(4, dtype=np.float32)
          for k in range(1, 2 * gm.MAX_SHAPES + 1)]

    def runs(t: int) -> None:
        for r in range(20):
            x = xs[(t * 3 + r) % len(xs)]
            np.testing.assert_array_equal(gm.run(x=x)[out], np.maximum(x, 0))

    _in_threads(runs, 8)
    assert len(gm._pools) <= gm.MAX_SHAPES


def test_if_branch_of_constants_only_from_several_threads():
    """A model with a run-time If whose else branch returns a constant: that branch is a piece
    with no inputs. It ran on its module's own buffers through the stateful API (run() then
    get_output), so a thread reading its output while another's run was under way got
    InputError('the model has not run yet')."""
    from onnx import TensorProto, helper, numpy_helper

    F = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    k = np.array([1.0, 2.0, 3.0], np.float32)
    then_b = helper.make_graph([helper.make_node("Identity", ["x"], ["xi"])], "then", [],
                               [vi("xi", F, [3])])
    else_b = helper.make_graph([helper.make_node(
        "Constant", [], ["k"], value=numpy_helper.from_array(k, "kv"))], "else", [],
        [vi("k", F, [3])])
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)], "m",
        [vi("c", TensorProto.BOOL, []), vi("x", F, [3])], [vi("y", F, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    prog = graph.build(graph.from_onnx(m), mode="interactive")
    const_piece = next(mod for mod in prog.modules() if not mod.input_names)
    # widen the windows: a run under way on the piece, another thread reading its output
    for method in ("_run_buffers", "get_output"):
        const_piece.__dict__[method] = _slowed(getattr(const_piece, method))

    def runs(t: int) -> None:
        x = np.full(3, t, np.float32)
        for r in range(10):
            c = (r + t) % 2 == 0
            np.testing.assert_array_equal(prog.run(c=np.array(c), x=x)["y"], x if c else k)

    _in_threads(runs, 6)


def test_saves_to_one_path_from_several_threads(tmp_path):
    """Saves of a model to one path at once (threads here; processes alike): each used the
    folder name '<path>.tmp-<pid>', removed the saved folder before moving its own in, and
    refused a folder caught mid-swap as not tensorlang's: FileNotFoundError, OSError
    (ENOTEMPTY), FileExistsError, and at times no model left at the path. Each save now
    returns and the path holds a whole model."""
    from tensorlang import runtime

    rng = np.random.default_rng(1)
    b = graph.Builder("small")
    x = b.input("x", (4, 32))
    w = b.const(rng.standard_normal((32, 16)).astype(np.float32), "w")
    g = b.build([b.relu(b.matmul(x, w))])
    gm = graph.build(g)
    path = tmp_path / "m.tlpkg"

    def saves(_t: int) -> None:
        for _ in range(3):
            gm.save(path)

    _in_threads(saves, 6)
    assert [p.name for p in tmp_path.iterdir()] == ["m.tlpkg"]  # nothing left beside it
    xs = rng.standard_normal((4, 32)).astype(np.float32)
    out = g.outputs[0].name
    np.testing.assert_array_equal(runtime.load(path).run(x=xs)[out], gm.run(x=xs)[out])
