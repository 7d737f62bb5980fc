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
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for r in range(20):
                x = xs[(t * 3 + r) % len(xs)]
                np.testing.assert_array_equal(gm.run(x=x)[out], np.maximum(x, 0))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads), "a run hung"
    assert not errors, errors[:3]
    assert len(gm._pools) <= gm.MAX_SHAPES
