"""Small ONNX models built with ``onnx.helper`` (random weights) for tests, tutorials and
benchmarks: an MLP, a small CNN, a depthwise-separable block, a transformer encoder block and a
ResNet-50-shaped network. Each function returns an ``onnx.ModelProto``."""

from __future__ import annotations

import itertools

import numpy as np


class _M:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self, seed: int = 0) -> None:
        self.nodes: list = []
        self.inits: list = []
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def w(self, shape, scale: float | None = None, base: str = "w") -> str:
        from onnx import numpy_helper

        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        arr = (self.rng.standard_normal(shape) * s).astype(np.float32)
        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(arr, nm))
        return nm

    def const(self, arr, base: str = "c") -> str:
        from onnx import numpy_helper

        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    def op(self, op_type: str, inputs, n_out: int = 1, **attrs):
        from onnx import helper

        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs,
                                           name=self.name(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, name, inputs, outputs, opset: int = 17):
        from onnx import TensorProto, helper

        g = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
            self.inits,
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = min(m.ir_version, 9)  # what the installed onnxruntime reads
        return m

    def conv_bn(self, x, cin, cout, k, stride=1, groups=1, relu=True):
        w = self.w((cout, cin // groups, k, k))
        y = self.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride],
                    pads=[k // 2] * 4, group=groups)
        g = self.const((1 + 0.1 * self.rng.standard_normal(cout)).astype(np.float32))
        b = self.const((0.1 * self.rng.standard_normal(cout)).astype(np.float32))
        mu = self.const((0.1 * self.rng.standard_normal(cout)).astype(np.float32))
        var = self.const((1 + 0.1 * self.rng.random(cout)).astype(np.float32))
        y = self.op("BatchNormalization", [y, g, b, mu, var], epsilon=1e-5)
        return self.op("Relu", [y]) if relu else y


def mlp(batch: int = 4, sizes=(64, 128, 64, 10)):
    m = _M(1)
    x = "x"
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        x = m.op("Gemm", [x, m.w((b, a)), m.w((b,), 0.1)], transB=1)
        if i < len(sizes) - 2:
            x = m.op("Relu", [x])
    y = m.op("Softmax", [x], axis=-1)
    return m.model("mlp", [("x", [batch, sizes[0]])], [y])


def small_cnn(batch: int = 1, size: int = 16, classes: int = 10):
    """conv/bn/relu, max pool, a residual block (add), avg pool, global pool, gemm, softmax."""
    m = _M(2)
    x = m.conv_bn("x", 3, 16, 3)
    x = m.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    r = m.conv_bn(x, 16, 16, 3)
    r = m.conv_bn(r, 16, 16, 3, relu=False)
    x = m.op("Relu", [m.op("Add", [x, r])])
    x = m.conv_bn(x, 16, 32, 3, stride=2)
    x = m.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    x = m.op("GlobalAveragePool", [x])
    x = m.op("Flatten", [x], axis=1)
    x = m.op("Gemm", [x, m.w((classes, 32)), m.w((classes,), 0.1)], transB=1)
    y = m.op("Softmax", [x], axis=1)
    return m.model("small_cnn", [("x", [batch, 3, size, size])], [y])


def depthwise_separable(batch: int = 1, size: int = 16, cin: int = 16, cout: int = 32):
    """MobileNet's block: 3x3 depthwise conv + bn + relu6 (Clip), 1x1 pointwise + bn + relu."""
    m = _M(3)
    x = m.conv_bn("x", cin, cin, 3, groups=cin, relu=False)
    x = m.op("Clip", [x, m.const(np.float32(0)), m.const(np.float32(6))])
    x = m.conv_bn(x, cin, cout, 1)
    x = m.conv_bn(x, cout, cout, 3, stride=2, groups=cout)
    return m.model("dw_block", [("x", [batch, cin, size, size])], [x])


def inverted_residual(batch: int = 1, size: int = 10, channels: int = 24, expand: int = 6):
    """MobileNetV2's block: 1x1 expansion + bn + relu, 3x3 depthwise + bn + relu, 1x1
    projection + bn, residual add. 24 channels (the default) are a multiple of 8, not 16."""
    m = _M(7)
    wide = channels * expand
    x = m.conv_bn("x", channels, wide, 1)
    x = m.conv_bn(x, wide, wide, 3, groups=wide)
    x = m.conv_bn(x, wide, channels, 1, relu=False)
    return m.model("inverted_residual", [("x", [batch, channels, size, size])],
                   [m.op("Add", [x, "x"])])


def transformer_block(seq: int = 16, hidden: int = 64, heads: int = 4, ffn: int = 128):
    """Self-attention (MatMul, Reshape, Transpose, Softmax), residual Add, LayerNormalization,
    a GELU feed-forward (Gelu written as x * 0.5 * (1 + Erf(x / sqrt 2)), as exporters do)."""
    m = _M(4)
    dh = hidden // heads
    x = "x"  # [1, seq, hidden]

    def proj(v, n_in, n_out):
        return m.op("Add", [m.op("MatMul", [v, m.w((n_in, n_out))]), m.w((n_out,), 0.1)])

    def heads_of(v):
        v = m.op("Reshape", [v, m.const(np.array([1, seq, heads, dh], np.int64))])
        return m.op("Transpose", [v], perm=[0, 2, 1, 3])  # [1, h, seq, dh]

    q, k, v = (heads_of(proj(x, hidden, hidden)) for _ in range(3))
    kt = m.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = m.op("Mul", [m.op("MatMul", [q, kt]), m.const(np.float32(1 / np.sqrt(dh)))])
    p = m.op("Softmax", [s], axis=-1)
    o = m.op("Transpose", [m.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    o = m.op("Reshape", [o, m.const(np.array([1, seq, hidden], np.int64))])
    o = proj(o, hidden, hidden)
    h = m.op("LayerNormalization", [m.op("Add", [x, o]), m.w((hidden,), 0.1), m.w((hidden,), 0.1)],
             axis=-1, epsilon=1e-5)
    f = proj(h, hidden, ffn)
    g = m.op("Mul", [m.op("Mul", [f, m.const(np.float32(0.5))]),
                     m.op("Add", [m.op("Erf", [m.op("Div", [f, m.const(np.float32(np.sqrt(2)))])]),
                                  m.const(np.float32(1.0))])])
    f = proj(g, ffn, hidden)
    y = m.op("LayerNormalization", [m.op("Add", [h, f]), m.w((hidden,), 0.1), m.w((hidden,), 0.1)],
             axis=-1, epsilon=1e-5)
    return m.model("transformer_block", [("x", [1, seq, hidden])], [y])


def bert_encoder(batch="batch", seq="seq", hidden: int = 64, heads: int = 4, ffn: int = 128,
                 layers: int = 2, fused_layer_norm: bool = False):
    """A BERT-style encoder as exporters write it with dynamic axes (issue 19): inputs
    ``x`` [batch, seq, hidden] (dims may be names: dim_param) and an additive attention mask
    [batch, 1, 1, seq]; per layer self-attention whose head split/merge are Reshapes with 0
    (copy) and -1, a residual, layer norm (written out as ReduceMean/Sub/Pow/Sqrt/Div as
    opset < 17 exports do, or LayerNormalization), a GELU feed-forward."""
    m = _M(8)
    dh = hidden // heads

    def proj(v, n_in, n_out):
        return m.op("Add", [m.op("MatMul", [v, m.w((n_in, n_out))]), m.w((n_out,), 0.1)])

    def heads_of(v):
        v = m.op("Reshape", [v, m.const(np.array([0, 0, heads, dh], np.int64))])
        return m.op("Transpose", [v], perm=[0, 2, 1, 3])  # [b, h, seq, dh]

    def norm(v):
        gamma, beta = m.w((hidden,), 0.1), m.w((hidden,), 0.1)
        if fused_layer_norm:
            return m.op("LayerNormalization", [v, gamma, beta], axis=-1, epsilon=1e-5)
        d = m.op("Sub", [v, m.op("ReduceMean", [v], axes=[-1])])
        var = m.op("ReduceMean", [m.op("Pow", [d, m.const(np.float32(2))])], axes=[-1])
        sd = m.op("Sqrt", [m.op("Add", [var, m.const(np.float32(1e-5))])])
        return m.op("Add", [m.op("Mul", [m.op("Div", [d, sd]), gamma]), beta])

    x = "x"
    for _ in range(layers):
        q, k, v = (heads_of(proj(x, hidden, hidden)) for _ in range(3))
        kt = m.op("Transpose", [k], perm=[0, 1, 3, 2])
        s = m.op("Mul", [m.op("MatMul", [q, kt]), m.const(np.float32(1 / np.sqrt(dh)))])
        p = m.op("Softmax", [m.op("Add", [s, "mask"])], axis=-1)
        o = m.op("Transpose", [m.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        o = m.op("Reshape", [o, m.const(np.array([0, 0, -1], np.int64))])
        h = norm(m.op("Add", [x, proj(o, hidden, hidden)]))
        f = proj(h, hidden, ffn)
        g = m.op("Mul", [m.op("Mul", [f, m.const(np.float32(0.5))]),
                         m.op("Add", [m.op("Erf", [m.op("Div", [f, m.const(
                             np.float32(np.sqrt(2)))])]), m.const(np.float32(1.0))])])
        x = norm(m.op("Add", [h, proj(g, ffn, hidden)]))
    return m.model("bert_encoder", [("x", [batch, seq, hidden]), ("mask", [batch, 1, 1, seq])],
                   [x], opset=13 if not fused_layer_norm else 17)


def resnet50(batch: int = 1, size: int | tuple = 224, classes: int = 1000, width: int = 64):
    """ResNet-50's layer structure (bottlenecks [3, 4, 6, 3], conv+bn+relu, strided 3x3, 1x1
    projections, residual adds, max pool, global average pool, Gemm) with random weights; the
    weights are scaled so that activations stay O(1) through the 50 layers. size: the side,
    or (height, width); a str is a dim_param (a symbolic size)."""
    m = _M(5)
    x = m.conv_bn("x", 3, width, 7, stride=2)
    x = m.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, (blocks, mid) in enumerate(zip([3, 4, 6, 3], [width, width * 2, width * 4,
                                                             width * 8])):
        for b in range(blocks):
            stride = 2 if b == 0 and stage > 0 else 1
            cout = mid * 4
            y = m.conv_bn(x, cin, mid, 1)
            y = m.conv_bn(y, mid, mid, 3, stride=stride)
            y = m.conv_bn(y, mid, cout, 1, relu=False)
            sc = m.conv_bn(x, cin, cout, 1, stride=stride, relu=False) if b == 0 else x
            x = m.op("Relu", [m.op("Add", [y, sc])])
            cin = cout
    x = m.op("Flatten", [m.op("GlobalAveragePool", [x])], axis=1)
    y = m.op("Gemm", [x, m.w((classes, cin)), m.w((classes,), 0.1)], transB=1)
    plane = list(size) if isinstance(size, tuple) else [size, size]
    return m.model("resnet50", [("x", [batch, 3, *plane])], [y])


def shufflenet_v1(batch: int = 1, size: int = 224, groups: int = 3, units=(4, 8, 4),
                  classes: int = 1000):
    """ShuffleNet v1's structure (Zhang et al. 2017, groups 3: stages of 240, 480 and 960
    channels; groups 8: 384, 768, 1536): units of a grouped 1x1 conv to a quarter of the
    channels, a channel shuffle (Reshape, Transpose, Reshape), a 3x3 depthwise conv and a
    grouped 1x1 conv back, with a residual add, or at each stage's first (stride-2) unit a
    3x3 average pool of the input concatenated on the channels. The stem's 24 channels are too
    few to group: the first unit's first conv has groups=1, as in the paper."""
    widths = {1: 144, 2: 200, 3: 240, 4: 272, 8: 384}
    if groups not in widths:
        raise ValueError(f"shufflenet_v1: groups must be one of {sorted(widths)}, got {groups}")
    m = _M(11)
    x = m.conv_bn("x", 3, 24, 3, stride=2)
    x = m.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, hw = 24, (size // 2 + 1) // 2
    for stage, n_units in enumerate(units):
        cout = widths[groups] * 2 ** stage
        for u in range(n_units):
            x, hw = _shuffle_unit(m, x, cin, cout, hw, groups, first=u == 0,
                                  group_in=not (stage == 0 and u == 0))
            cin = cout
    x = m.op("Flatten", [m.op("GlobalAveragePool", [x])], axis=1)
    y = m.op("Gemm", [x, m.w((classes, cin)), m.w((classes,), 0.1)], transB=1)
    return m.model("shufflenet_v1", [("x", [batch, 3, size, size])], [y])


def _shuffle_unit(m: _M, x: str, cin: int, cout: int, hw: int, groups: int, first: bool,
                  group_in: bool) -> tuple[str, int]:
    """One ShuffleNet v1 unit (see shufflenet_v1); returns its output and its side."""
    branch = cout - cin if first else cout
    mid = cout // 4
    y = m.conv_bn(x, cin, mid, 1, groups=groups if group_in else 1)
    y = m.op("Reshape", [y, m.const(np.array([0, groups, mid // groups, hw, hw], np.int64))])
    y = m.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
    y = m.op("Reshape", [y, m.const(np.array([0, mid, hw, hw], np.int64))])
    y = m.conv_bn(y, mid, mid, 3, stride=2 if first else 1, groups=mid, relu=False)
    y = m.conv_bn(y, mid, branch, 1, groups=groups, relu=False)
    if not first:
        return m.op("Relu", [m.op("Add", [y, x])]), hw
    sc = m.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    return m.op("Relu", [m.op("Concat", [sc, y], axis=1)]), (hw + 1) // 2


ZOO = {"mlp": mlp, "small_cnn": small_cnn, "depthwise_separable": depthwise_separable,
       "inverted_residual": inverted_residual, "transformer_block": transformer_block,
       "resnet50": resnet50}  # (bert_encoder has symbolic dims by default: not listed, as
# tests and benchmarks iterate this table to build each model at its fixed shape)
