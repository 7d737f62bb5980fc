# Scan and recurrent computation, as TVM's tutorial writes it: a cumulative sum over the rows
# of a symbolic matrix, a scan whose cell has two stages, and the CPU's schedule for them
# (the state's spatial axis in parallel or vectorized; the time axis, which carries the
# recurrence, refused). Checked against numpy.
import numpy as np

import tensorlang as tl
from tensorlang import te

m = te.var("m")
n = te.var("n")
X = te.placeholder((m, n), name="X")
s_state = te.placeholder((m, n), name="s_state")
s_init = te.compute((1, n), lambda _, i: X[0, i], name="s_init")
s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
s_scan = te.scan(s_init, s_update, s_state, inputs=[X])

rng = np.random.default_rng(0)
M_, N_ = 9, 70
x = rng.random((M_, N_), dtype=np.float32)

s = te.create_schedule(s_scan.op)
print(tl.lower(s, [X, s_scan], simple_mode=True))
f = tl.build(s, [X, s_scan], name="cumsum")
out = np.zeros((M_, N_), np.float32)
f(x, out)
np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5)

# On the CPU, the GPU tutorial's thread binding becomes a split of the state's axis: vector
# lanes inside, threads outside.
s = te.create_schedule(s_scan.op)
xo, xi = s[s_update].split(s_update.op.axis[1], factor=16)
s[s_update].parallel(xo)
s[s_update].vectorize(xi)
f = tl.build(s, [X, s_scan], name="cumsum_parallel")
out[:] = 0
f(x, out)
np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5)

# The time axis carries the recurrence: running it in parallel is refused by name.
s = te.create_schedule(s_scan.op)
try:
    s[s_update].parallel(s_update.op.axis[0])
except tl.ScheduleError as err:
    print("refused:", str(err).splitlines()[0])
else:
    raise AssertionError("a parallel time loop was accepted")

# A scan cell of two stages: the first computed at the second's outer loop.
s_state = te.placeholder((m, n), name="s_state")
s_init = te.compute((1, n), lambda _, i: X[0, i], name="s_init")
s_update1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
s_update2 = te.compute((m, n), lambda t, i: s_update1[t, i] + X[t, i], name="s2")
s_scan = te.scan(s_init, s_update2, s_state, inputs=[X])
s = te.create_schedule(s_scan.op)
xo, xi = s[s_update2].split(s_update2.op.axis[1], factor=32)
s[s_update1].compute_at(s[s_update2], xo)
print(tl.lower(s, [X, s_scan], simple_mode=True))
f = tl.build(s, [X, s_scan], name="scan_two_stage")
out[:] = 0
f(x, out)
ref = np.empty_like(x)
ref[0] = x[0]
for t in range(1, M_):
    ref[t] = ref[t - 1] * 2 + x[t]
np.testing.assert_allclose(out, ref, rtol=1e-5)

print("all results match numpy")
