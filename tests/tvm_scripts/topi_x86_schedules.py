# Operators scheduled the way TVM's x86 TOPI schedules them, written as a TVM user writes them
# in a script: a conv2d in the NCHW[x]c layout (padding inlined, a cache_write accumulator at
# the output's ow-chunk, the input channels split into blocks), a dense layer on a packed
# weight with a bias add and a relu declared under te.tag_scope, a strided max/avg pooling, a
# batched matmul, and a layer norm whose statistics are computed at the row loop. Every result
# is checked against numpy.
import numpy as np

import tensorlang as tvm
import tensorlang.testing
from tensorlang import te

rng = np.random.default_rng(0)
dev = tvm.cpu(0)

# --- conv2d NCHWc: data [N, C/ic_bn, H, W, ic_bn], kernel [K/oc_bn, C/ic_bn, R, S, ic_bn, oc_bn]
N, C, H, W, K, R, S = 1, 16, 14, 14, 32, 3, 3
ic_bn, oc_bn, pad = 8, 16, 1
data = te.placeholder((N, C // ic_bn, H, W, ic_bn), name="data")
kernel = te.placeholder((K // oc_bn, C // ic_bn, R, S, ic_bn, oc_bn), name="kernel")
data_pad = te.compute(
    (N, C // ic_bn, H + 2 * pad, W + 2 * pad, ic_bn),
    lambda n, c, h, w, cb: tvm.tir.if_then_else(
        tvm.tir.all(h >= pad, h < H + pad, w >= pad, w < W + pad),
        data[n, c, h - pad, w - pad, cb], tvm.tir.const(0.0, "float32")),
    name="data_pad")
ic = te.reduce_axis((0, C), name="ic")
kh = te.reduce_axis((0, R), name="kh")
kw = te.reduce_axis((0, S), name="kw")
idxdiv, idxmod = tvm.tir.indexdiv, tvm.tir.indexmod
conv = te.compute(
    (N, K // oc_bn, H, W, oc_bn),
    lambda n, oc_chunk, oh, ow, oc_block: te.sum(
        data_pad[n, idxdiv(ic, ic_bn), oh + kh, ow + kw, idxmod(ic, ic_bn)]
        * kernel[oc_chunk, idxdiv(ic, ic_bn), kh, kw, idxmod(ic, ic_bn), oc_block],
        axis=[ic, kh, kw]),
    name="conv2d_NCHWc", tag="conv2d_NCHWc")

s = te.create_schedule(conv.op)
s[data_pad].compute_inline()
CC = s.cache_write(conv, "global")
batch, oc_chunk, oh, ow, oc_block = s[conv].op.axis
ow_chunk, ow_block = s[conv].split(ow, factor=7)
s[conv].reorder(oc_chunk, oh, ow_chunk, ow_block, oc_block)
parallel_axis = s[conv].fuse(batch, oc_chunk, oh)
s[conv].vectorize(oc_block)
s[conv].parallel(parallel_axis)
s[CC].compute_at(s[conv], ow_chunk)
_, oc_chunk, oh, ow, oc_block = s[CC].op.axis
ic, kh, kw = s[CC].op.reduce_axis
ow_chunk, ow_block = s[CC].split(ow, factor=7)
ic_chunk, ic_block = s[CC].split(ic, factor=ic_bn)
s[CC].reorder(oc_chunk, oh, ow_chunk, ic_chunk, kh, kw, ic_block, ow_block, oc_block)
s[CC].vectorize(oc_block)
s[CC].unroll(ow_block)
f = tvm.build(s, [data, kernel, conv], target="llvm", name="conv2d_NCHWc")

d = rng.random((N, C // ic_bn, H, W, ic_bn), dtype=np.float32)
k = rng.random((K // oc_bn, C // ic_bn, R, S, ic_bn, oc_bn), dtype=np.float32)
out = tvm.nd.empty((N, K // oc_bn, H, W, oc_bn), "float32", dev)
f(tvm.nd.array(d, dev), tvm.nd.array(k, dev), out)
d_nchw = d.transpose(0, 1, 4, 2, 3).reshape(N, C, H, W)
k_kcrs = k.transpose(0, 5, 1, 4, 2, 3).reshape(K, C, R, S)
d_pad = np.pad(d_nchw, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
ref = sum(np.einsum("nchw,kc->nkhw", d_pad[:, :, r:r + H, c:c + W], k_kcrs[:, :, r, c])
          for r in range(R) for c in range(S))
ref = ref.reshape(N, K // oc_bn, oc_bn, H, W).transpose(0, 1, 3, 4, 2)
tvm.testing.assert_allclose(out.numpy(), ref, rtol=1e-4)


# --- dense on a packed weight, + bias, relu (a TOPI-style elementwise op under tag_scope)
@te.tag_scope(tag="elemwise")
def relu(x):
    return te.compute(x.shape, lambda *i: tvm.tir.max(x(*i), tvm.tir.const(0, x.dtype)))


M, Nd, Kd, bn = 64, 48, 32, 16
A = te.placeholder((M, Kd), name="A")
Wt = te.placeholder((Nd, Kd), name="W")
bias = te.placeholder((Nd,), name="bias")
packed = te.compute((Nd // bn, Kd, bn), lambda z, y, x: Wt[z * bn + x, y], name="packed_weight")
k = te.reduce_axis((0, Kd), name="k")
dense = te.compute((M, Nd), lambda y, x: te.sum(
    A[y, k] * packed[idxdiv(x, bn), k, idxmod(x, bn)], axis=k), name="T_dense", tag="dense_pack")
add = te.compute((M, Nd), lambda i, j: dense[i, j] + bias[j], name="T_add", tag="broadcast")
out = relu(add)
assert out.op.tag == "elemwise"

s = te.create_schedule(out.op)
s[add].compute_inline()
y, x = s[out].op.axis
yo, yi = s[out].split(y, 8)
xo, xi = s[out].split(x, bn)
s[out].reorder(yo, xo, yi, xi)
s[out].vectorize(xi)
fused = s[out].fuse(yo, xo)
s[out].parallel(fused)
s[dense].compute_at(s[out], fused)
yc, xc = s[dense].op.axis
(kc,) = s[dense].op.reduce_axis
ko, ki = s[dense].split(kc, 4)
s[dense].reorder(ko, yc, ki, xc)
s[dense].unroll(ki)
s[dense].vectorize(xc)
z, _, zx = s[packed].op.axis
s[packed].vectorize(zx)
s[packed].parallel(z)
f = tvm.build(s, [A, Wt, bias, out], name="dense_pack_relu")
a = rng.standard_normal((M, Kd)).astype("float32")
w = rng.standard_normal((Nd, Kd)).astype("float32")
b = rng.standard_normal(Nd).astype("float32")
o = np.zeros((M, Nd), "float32")
f(a, w, b, o)
tvm.testing.assert_allclose(o, np.maximum(a @ w.T + b, 0), rtol=1e-4, atol=1e-5)

# --- max and average pooling, 3x3 stride 2, pad 1 (the max pads with the lowest value)
Np, Cp, Hp, Wp = 1, 8, 16, 16
OH, OW = (Hp + 2 - 3) // 2 + 1, (Wp + 2 - 3) // 2 + 1
x = te.placeholder((Np, Cp, Hp, Wp), name="x")


def padded(value, name):
    return te.compute((Np, Cp, Hp + 2, Wp + 2), lambda n, c, h, w: tvm.tir.if_then_else(
        tvm.tir.all(h >= 1, h < Hp + 1, w >= 1, w < Wp + 1), x[n, c, h - 1, w - 1], value),
        name=name)


pad_max, pad_zero = padded(te.min_value("float32"), "pad_max"), padded(0.0, "pad_zero")
kh, kw = te.reduce_axis((0, 3), "kh"), te.reduce_axis((0, 3), "kw")
pool_max = te.compute((Np, Cp, OH, OW), lambda n, c, h, w: te.max(
    pad_max[n, c, h * 2 + kh, w * 2 + kw], axis=[kh, kw]), name="pool_max", tag="pool_max")
sh, sw = te.reduce_axis((0, 3), "sh"), te.reduce_axis((0, 3), "sw")
sums = te.compute((Np, Cp, OH, OW), lambda n, c, h, w: te.sum(
    pad_zero[n, c, h * 2 + sh, w * 2 + sw], axis=[sh, sw]), name="pool_sum")
pool_avg = te.compute((Np, Cp, OH, OW), lambda n, c, h, w: sums[n, c, h, w] / 9.0,
                      name="pool_avg", tag="pool_avg")
s = te.create_schedule([pool_max.op, pool_avg.op])
s[pad_max].compute_inline()
s[pad_zero].compute_inline()
n, c, h, w = s[pool_max].op.axis
s[pool_max].parallel(s[pool_max].fuse(n, c, h))
s[sums].compute_at(s[pool_avg], s[pool_avg].op.axis[3])
f = tvm.build(s, [x, pool_max, pool_avg], name="pooling")
xv = rng.standard_normal((Np, Cp, Hp, Wp)).astype("float32")
pm, pa = np.zeros((Np, Cp, OH, OW), "float32"), np.zeros((Np, Cp, OH, OW), "float32")
f(xv, pm, pa)
x_inf = np.pad(xv, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
x_zero = np.pad(xv, ((0, 0), (0, 0), (1, 1), (1, 1)))
win = [(i, j) for i in range(3) for j in range(3)]
ref_max = np.max([x_inf[:, :, i:i + 2 * OH:2, j:j + 2 * OW:2] for i, j in win], axis=0)
ref_avg = np.sum([x_zero[:, :, i:i + 2 * OH:2, j:j + 2 * OW:2] for i, j in win], axis=0) / 9
tvm.testing.assert_allclose(pm, ref_max, rtol=1e-6)
tvm.testing.assert_allclose(pa, ref_avg, rtol=1e-5)

# --- batched matmul with a cache_write accumulator, the batch fused with the row blocks
B_, Mb, Nb, Kb = 3, 16, 12, 20
X = te.placeholder((B_, Mb, Kb), name="X")
Y = te.placeholder((B_, Nb, Kb), name="Y")
k = te.reduce_axis((0, Kb), "k")
Z = te.compute((B_, Mb, Nb), lambda b, i, j: te.sum(X[b, i, k] * Y[b, j, k], axis=k), name="Z")
s = te.create_schedule(Z.op)
ZZ = s.cache_write(Z, "global")
b, i, j = s[Z].op.axis
io, ii = s[Z].split(i, 4)
jo, ji = s[Z].split(j, 4)
s[Z].reorder(b, io, jo, ii, ji)
s[Z].parallel(s[Z].fuse(b, io))
s[ZZ].compute_at(s[Z], jo)
_, ci, cj = s[ZZ].op.axis
(ck,) = s[ZZ].op.reduce_axis
s[ZZ].reorder(ck, ci, cj)
s[ZZ].vectorize(cj)
s[ZZ].unroll(ci)
f = tvm.build(s, [X, Y, Z], name="batch_matmul")
xv = rng.random((B_, Mb, Kb), dtype=np.float32)
yv = rng.random((B_, Nb, Kb), dtype=np.float32)
zv = np.zeros((B_, Mb, Nb), "float32")
f(xv, yv, zv)
tvm.testing.assert_allclose(zv, np.einsum("bmk,bnk->bmn", xv, yv), rtol=1e-5)

# --- layer norm: the mean and the variance computed at the output's (parallel) row loop
n, m = te.var("n"), te.var("m")
x = te.placeholder((n, m), name="x")
k1, k2 = te.reduce_axis((0, m), "k1"), te.reduce_axis((0, m), "k2")
total = te.compute((n,), lambda i: te.sum(x[i, k1], axis=k1), name="total")
mean = te.compute((n,), lambda i: total[i] / m.astype("float32"), name="mean")
sq = te.compute((n,), lambda i: te.sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]), axis=k2),
                name="sq")
y = te.compute((n, m), lambda i, j: (x[i, j] - mean[i])
               / te.sqrt(sq[i] / m.astype("float32") + 1e-5), name="layer_norm")
s = te.create_schedule(y.op)
i, j = s[y].op.axis
s[y].parallel(i)
for stat in (total, mean, sq):
    s[stat].compute_at(s[y], i)
jo, ji = s[y].split(j, 8)
s[y].vectorize(ji)
f = tvm.build(s, [x, y], name="layer_norm")
for rows, cols in ((8, 33), (3, 64)):
    xv = rng.random((rows, cols), dtype=np.float32)
    yv = np.zeros_like(xv)
    f(xv, yv)
    mu = xv.mean(1, keepdims=True)
    tvm.testing.assert_allclose(yv, (xv - mu) / np.sqrt(xv.var(1, keepdims=True) + 1e-5),
                                rtol=1e-4, atol=1e-4)

print("all results match numpy")
