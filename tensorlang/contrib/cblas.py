"""``tvm.contrib.cblas``: a BLAS matrix product as an extern op, and its packed function,
registered under TVM's name ``tvm.contrib.cblas.matmul`` beside ours (``tl.cblas.matmul``)."""

from __future__ import annotations

from ..te.extern import call_packed, extern

__all__ = ["matmul"]


def matmul(lhs, rhs, transa=False, transb=False, **kwargs):
    """TVM's ``cblas.matmul(lhs, rhs, transa, transb)``: ``op(lhs) @ op(rhs)`` (2-D, float32 or
    float64) computed by the BLAS that numpy links, as an extern tensor named ``C``."""
    if kwargs:
        raise TypeError(f"cblas.matmul: {sorted(kwargs)} are not supported")
    if len(lhs.shape) != 2 or len(rhs.shape) != 2:
        raise ValueError("cblas.matmul takes two 2-D tensors (batch_matmul is not provided)")
    n = lhs.shape[1] if transa else lhs.shape[0]
    m = rhs.shape[0] if transb else rhs.shape[1]
    return extern((n, m), [lhs, rhs],
                  lambda ins, outs: call_packed("tl.cblas.matmul", ins[0], ins[1], outs[0],
                                                bool(transa), bool(transb)),
                  name="C", dtype=lhs.dtype)
