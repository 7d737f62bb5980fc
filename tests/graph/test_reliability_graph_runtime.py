"""Issue 15, runtime part: GraphModule.run from many threads at once gives exactly the serial
results, in both execution modes."""

import threading

import numpy as np
import pytest
from tensorlang import graph

N_THREADS = 8
RUNS_PER_THREAD = 500


def _small_model():
    """Three kernels, two outputs (one written in place into the returned array, one read back
    from the arena), an input read where it lies: every path a run takes."""
    rng = np.random.default_rng(1)
    b = graph.Builder("small")
    x = b.input("x", (4, 32))
    w = b.const(rng.standard_normal((32, 16)).astype(np.float32), "w")
    h = b.relu(b.matmul(x, w))
    y = b.add(b.tanh(h), b.sigmoid(h))
    return b.build([y, h])


@pytest.fixture(scope="module")
def small_gm():
    return graph.build(_small_model())


@pytest.mark.parametrize("mode", ["graph", "interactive"])
def test_concurrent_runs_match_serial_runs(small_gm, mode):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 32)).astype(np.float32) for _ in range(32)]
    expected = [small_gm.run(mode=mode, x=x) for x in xs]
    y = small_gm.output_names[0]
    assert not np.array_equal(expected[0][y], expected[1][y])  # inputs tell runs apart
    start = threading.Barrier(N_THREADS)
    mismatches: list[tuple[int, int, str]] = []
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            start.wait()
            for r in range(RUNS_PER_THREAD):
                i = (t * 5 + r) % len(xs)
                out = small_gm.run(mode=mode, x=xs[i])
                for name, ref in expected[i].items():
                    if not np.array_equal(out[name], ref):
                        mismatches.append((t, r, name))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a run hung"
    assert not errors, errors[:3]
    assert not mismatches, f"{len(mismatches)} wrong outputs, first {mismatches[:5]}"


def test_stateful_api_sees_the_latest_run(small_gm):
    """After run(**inputs) (which works on a private buffer set), get_output returns its
    outputs and run() without inputs reruns on its inputs."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((4, 32)).astype(np.float32) for _ in range(2))
    y, h = small_gm.output_names
    out_a = small_gm.run(x=a)
    out_b = small_gm.run(x=b)
    np.testing.assert_array_equal(small_gm.get_output(y), out_b[y])
    small_gm.set_input(x=a)
    small_gm.run()
    np.testing.assert_array_equal(small_gm.get_output(0), out_a[y])
    small_gm.run(x=b)
    assert small_gm.run() is None
    np.testing.assert_array_equal(small_gm.get_output(1), out_b[h])
    np.testing.assert_array_equal(small_gm.run(mode="interactive", x=a)[h], out_a[h])
