"""Golden text of the lowered IR for a few small schedules: the printer's output is part of the
interface (readable, deterministic: loop kinds, allocations, guards, vector operations), and these
texts also pin down what the lowering passes produce."""

import tensorlang as tl


def test_reduce_outer():
    A = tl.placeholder((8, 8), name="A")
    B = tl.placeholder((8, 8), name="B")
    k = tl.reduce_axis((0, 8), name="k")
    C = tl.compute((8, 8), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C)
    i, j = C.op.axis
    s[C].reorder(k, i, j)
    got = str(tl.lower(s, [A, B, C], name="mm"))
    assert got == """\
def mm(A: float32[8, 8], B: float32[8, 8], C: float32[8, 8] (out)):
  for i in range(8):
    for j in range(8):
      C[i * 8 + j] = 0.0f
  for k in range(8):
    for i in range(8):
      for j in range(8):
        C[i * 8 + j] = C[i * 8 + j] + A[i * 8 + k] * B[k * 8 + j]"""


def test_parallel_vector():
    A = tl.placeholder((8, 8), name="A")
    B = tl.placeholder((8, 8), name="B")
    k = tl.reduce_axis((0, 8), name="k")
    C = tl.compute((8, 8), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C)
    i, j = C.op.axis
    s[C].reorder(i, k, j)
    _jo, ji = s[C].split(j, factor=4)
    s[C].vectorize(ji)
    s[C].parallel(i)
    got = str(tl.lower(s, [A, B, C], name="mm"))
    assert got == """\
def mm(A: float32[8, 8], B: float32[8, 8], C: float32[8, 8] (out)):
  parallel for i in range(8):
    for j.outer in range(2):
      C[ramp(i * 8 + j.outer * 4, 1, 4)] = broadcast(0.0f, 4)
    for k in range(8):
      for j.outer in range(2):
        C[ramp(i * 8 + j.outer * 4, 1, 4)] = C[ramp(i * 8 + j.outer * 4, 1, 4)] + \
broadcast(A[i * 8 + k], 4) * B[ramp(k * 8 + j.outer * 4, 1, 4)]"""


def test_compute_at_unroll():
    X = tl.placeholder((8,), name="X")
    Y = tl.compute((8,), lambda i: X[i] * 2, name="Y")
    Z = tl.compute((8,), lambda i: Y[i] + 1, name="Z")
    s = tl.create_schedule(Z)
    o, ii = s[Z].split(Z.op.axis[0], factor=4)
    s[Y].compute_at(s[Z], o)
    s[Z].unroll(ii)
    got = str(tl.lower(s, [X, Z], name="f"))
    assert got == """\
def f(X: float32[8], Z: float32[8] (out)):
  for i.outer in range(2):
    allocate Y: float32[4] (stack)
    for i in range(4):
      Y[i] = X[i.outer * 4 + i] * 2.0f
    Z[i.outer * 4] = Y[0] + 1.0f
    Z[i.outer * 4 + 1] = Y[1] + 1.0f
    Z[i.outer * 4 + 2] = Y[2] + 1.0f
    Z[i.outer * 4 + 3] = Y[3] + 1.0f"""


def test_tail():
    X = tl.placeholder((10,), name="X")
    Z = tl.compute((10,), lambda i: X[i] + 1, name="Z")
    s = tl.create_schedule(Z)
    s[Z].split(Z.op.axis[0], factor=4)
    got = str(tl.lower(s, [X, Z], name="f"))
    assert got == """\
def f(X: float32[10], Z: float32[10] (out)):
  for i.outer in range(2):
    for i.inner in range(4):
      Z[i.outer * 4 + i.inner] = X[i.outer * 4 + i.inner] + 1.0f
  for i.inner in range(2):
    Z[i.inner + 8] = X[i.inner + 8] + 1.0f"""


def test_symbolic_guard():
    n = tl.var("n")
    X = tl.placeholder((n,), name="X")
    Z = tl.compute((n,), lambda i: tl.exp(X[i]), name="Z")
    s = tl.create_schedule(Z)
    s[Z].split(Z.op.axis[0], factor=4)
    got = str(tl.lower(s, [X, Z], name="f"))
    assert got == """\
def f(X: float32[n], Z: float32[n] (out)):
  for i.outer in range(max(n // 4, 0)):
    for i.inner in range(4):
      Z[i.outer * 4 + i.inner] = exp(X[i.outer * 4 + i.inner])
  for i.outer in range(max(n // 4, 0), (n + 3) // 4):
    for i.inner in range(min(4, n - i.outer * 4)):
      Z[i.outer * 4 + i.inner] = exp(X[i.outer * 4 + i.inner])"""


def test_rfactor():
    A = tl.placeholder((4, 6), name="A")
    k = tl.reduce_axis((0, 6), name="k")
    R = tl.compute((4,), lambda i: tl.max(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R)
    _ko, ki = s[R].split(k, factor=2)
    s.rfactor(R, ki)
    got = str(tl.lower(s, [A, R], name="f"))
    assert got == """\
def f(A: float32[4, 6], R: float32[4] (out)):
  allocate R.rf: float32[2, 4] (stack)
  for k.inner in range(2):
    for i in range(4):
      R.rf[k.inner * 4 + i] = -inff
      for k.outer in range(3):
        R.rf[k.inner * 4 + i] = max(R.rf[k.inner * 4 + i], A[i * 6 + k.outer * 2 + k.inner])
  for i_1 in range(4):
    R[i_1] = -inff
    for k.inner.v in range(2):
      R[i_1] = max(R[i_1], R.rf[k.inner.v * 4 + i_1])"""


def test_fuse_inline():
    A = tl.placeholder((4, 6), name="A")
    B = tl.compute((4, 6), lambda i, j: tl.sqrt(A[i, j]), name="B")
    C = tl.compute((4, 6), lambda i, j: tl.select(B[i, j] > 1.0, B[i, j], 0.0), name="C")
    s = tl.create_schedule(C)
    s[B].compute_inline()
    f = s[C].fuse(*C.op.axis)
    s[C].parallel(f)
    got = str(tl.lower(s, [A, C], name="f"))
    assert got == """\
def f(A: float32[4, 6], C: float32[4, 6] (out)):
  parallel for i.j.fused in range(24):
    C[i.j.fused] = select(sqrt(A[i.j.fused]) > 1.0f, sqrt(A[i.j.fused]), 0.0f)"""
