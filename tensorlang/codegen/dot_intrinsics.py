"""Code for the tensor intrinsics' dot-product calls (te/tensorize.py).

`tl.dot_u8s8x4_i32x16(acc: int32x16, a: uint8x4, b: int8x64)`: lane j of the result is
acc[j] + sum_k a[k] * b[4j + k] (uint8 times int8, exact in int32, wrapping as int32 adds do).
- On a target with AVX-512 VNNI: one vpdpbusd (llvm.x86.avx512.vpdpbusd.512, the form LLVM 22
  reads: <64 x i8> operands), the four bytes of `a` broadcast to every lane.
- Without it (another CPU, or `-mattr=-avx512vnni` in the target string): the bytes widened to
  int32, multiplied, and the groups of four summed with shuffles. Not vpmaddubsw: it adds the
  two int16 products of a pair with saturation, and 255 * 127 * 2 = 64770 > 32767, so it is
  wrong for full-range operands; the widening form is exact, and on AVX-512BW LLVM selects
  vpmovzxbw/vpmovsxbw + vpmaddwd for it."""

from __future__ import annotations

from llvmlite import ir

from ..te.tensorize import DOT_U8S8  # noqa: F401  (the call's name, declared there)

I8, I32 = ir.IntType(8), ir.IntType(32)
VNNI = "llvm.x86.avx512.vpdpbusd.512"


def has_vnni(features: str) -> bool:
    return "+avx512vnni" in features.split(",") and "+avx512f" in features.split(",")


def _mask(values) -> ir.Constant:
    return ir.Constant(ir.VectorType(I32, len(values)), list(values))


def emit_dot_u8s8(cg, b: ir.IRBuilder, acc, a4, b64) -> ir.Value:
    """acc + the 16 four-byte dot products of a4 (broadcast) with b64; see the module doc."""
    bcast = b.shuffle_vector(a4, ir.Constant(a4.type, ir.Undefined),
                             _mask([k % 4 for k in range(64)]))
    if has_vnni(cg.target_features):
        v64 = ir.VectorType(I8, 64)
        fn = cg.declare(VNNI, ir.VectorType(I32, 16), [ir.VectorType(I32, 16), v64, v64])
        return b.call(fn, [acc, bcast, b64])
    if "+avx512bw" in cg.target_features.split(","):
        return _dot_pmaddwd(cg, b, acc, bcast, b64)
    wide = ir.VectorType(I32, 64)
    prod = b.mul(b.zext(bcast, wide), b.sext(b64, wide))
    undef = ir.Constant(wide, ir.Undefined)
    total = acc
    for k in range(4):
        total = b.add(total, b.shuffle_vector(prod, undef, _mask(range(k, 64, 4))))
    return total


PMADDWD = "llvm.x86.avx512.pmaddw.d.512"


def _dot_pmaddwd(cg, b: ir.IRBuilder, acc, a64, b64) -> ir.Value:
    """The fallback on AVX-512BW: bytes widened to int16 (exact), vpmaddwd sums the products
    of adjacent pairs into int32 (at most 2 * 255 * 128: exact), then the two pairs of each
    output lane are added after picking the even and the odd lanes."""
    i16x32, i32x16 = ir.VectorType(ir.IntType(16), 32), ir.VectorType(I32, 16)
    fn = cg.declare(PMADDWD, i32x16, [i16x32, i16x32])
    undef = ir.Constant(a64.type, ir.Undefined)
    halves = []
    for lo in (0, 32):
        pick = _mask(range(lo, lo + 32))
        av = b.zext(b.shuffle_vector(a64, undef, pick), i16x32)
        bv = b.sext(b.shuffle_vector(b64, undef, pick), i16x32)
        halves.append(b.call(fn, [av, bv]))
    even = b.shuffle_vector(halves[0], halves[1], _mask(range(0, 32, 2)))
    odd = b.shuffle_vector(halves[0], halves[1], _mask(range(1, 32, 2)))
    return b.add(acc, b.add(even, odd))
