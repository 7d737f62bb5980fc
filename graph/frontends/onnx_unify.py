"""Sizes that an ONNX model needs equal but names apart (issue 19, dynamic shapes).

Exports with dynamic axes may give one run-time size two names: OPT with a KV cache gives its
attention mask a length ``t`` that it adds to scores of length ``past + seq``; torch's dynamo
export of GPT-2 names the batch of ``input_ids`` ``s23`` and that of ``attention_mask``
``s31``. Shape inference cannot prove ``t == p + s``, yet the model only runs when it holds
(onnxruntime then fails at run time when it does not).

So when a converter needs two dimensions equal that it can neither prove equal nor unequal
(symbolic.UnprovenEqual: a broadcast, a matmul's inner or batch axes, concat's other axes, a
reshape's element count), from_onnx solves the equation for one variable of the inputs' shapes
(``t := p + s``, ``s31 := s23``) and imports the model again with that variable replaced in the
inputs' declared shapes: the whole graph then sees one size, and the input's axis is an
expression (``attention_mask: [b, p + s]``) that the runtime checks against the sizes the other
inputs give, before any kernel runs, naming both inputs, the axes and the sizes; the plan
records the inputs' shapes, so a saved model checks them too.

A size of 1 that ONNX would broadcast against the other side is then refused at run time (the
axes must be equal): never computed as another size. ``shapes=`` builds for such sizes.

An equation of one variable with no exact solution may hold at its multiples: a UNet's skip
``h == 2 * (h // 2)`` after a pooling and a ConvTranspose back (symbolic.solve_multiple). The
input's axis then becomes ``h_div2 * 2``, and the runtime refuses an odd size naming the input
(onnxruntime fails the Concat there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import symbolic as S
from ..ir import Value
from .onnx_context import OnnxImportError


class UnprovenEqualityError(OnnxImportError):
    """A node needs dimensions ``a`` and ``b`` equal that the import cannot prove equal:
    from_onnx solves the equation when it can, else raises this as the node's refusal."""

    def __init__(self, message: str, a: Any, b: Any) -> None:
        super().__init__(message)
        self.a, self.b = a, b


def elimination_order(inputs: Sequence[Value]) -> list[str]:
    """The inputs' shape variables, the one to replace first first: on the fewest input axes
    (an axis one input alone has, such as a mask's length, before a batch that every input
    has), then the one an input further down the list introduces (the mask's ``t`` before
    ``input_ids``' ``s``), so the sizes users think in stay."""
    count: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, v in enumerate(inputs):
        for d in v.shape:
            for name in S.variables([d]):
                count[name] = count.get(name, 0) + 1
                first.setdefault(name, i)
    return sorted(count, key=lambda name: (count[name], -first[name], name))


def next_substitution(refused: Sequence[tuple], inputs: Sequence[Value],
                      ) -> tuple[str, Any] | None:
    """(variable, dimension) solving the first solvable equation among the refusals of one
    import (op, node, opset, error), for a variable of the inputs' shapes; None when none is."""
    order = elimination_order(inputs)
    equations = [(e.a, e.b) for *_, e in refused if isinstance(e, UnprovenEqualityError)]
    # (an offset past the window clamps, or a multiple, only where none is exact; the offset
    # first: a patch conv's max(h, 16) // 16 == h // 16 also holds at multiples of 16)
    for solve in (S.solve_equal, S.solve_offset, S.solve_multiple):
        for a, b in equations:
            solved = solve(a, b, order)
            if solved is not None:
                return solved
    return None


def substituted(unified: Mapping[str, Any], var: str, value: Any) -> dict[str, Any]:
    """The replacements so far with ``var := value`` added (and applied to those made before,
    which may name ``var``)."""
    out = {k: S.substitute(d, {var: value}) for k, d in unified.items()}
    out[var] = value
    return out


def wild_axis_equation(xs: Sequence[Any], out: Sequence[Any], wild: int) -> None:
    """Reshape of ``xs`` into ``out`` whose ``-1`` (at ``wild``, already the quotient) is no
    whole number of elements at every size: GPT-2 reshapes its mask [s31, s64] to
    [s23, -1] (``view(batch_size, -1)``), s31 * s64 // s23. The reshape is taken to keep the
    axes that stand at the same place before (then after) the -1: the first pair of different
    symbolic sizes there is raised as the equation the model needs (s31 == s23). A stricter
    reading than ONNX's, which would also reshape 2 x 6 into 3 x 4; such a call is refused at
    run time, never computed."""
    if S.same(S.num_elements(out), S.num_elements(xs)):
        return
    before = list(range(min(wild, len(xs))))
    after = [-k for k in range(1, len(out) - wild) if k <= len(xs)]
    for i in before + after:
        a, b = S.dim(xs[i]), S.dim(out[i])
        if S.is_symbolic(a) and S.is_symbolic(b) and not S.same(a, b):
            raise S.UnprovenEqual(
                f"cannot reshape {list(xs)} into {list(out)}: its -1 is a whole number of "
                f"elements at every size only if the axes at {i} agree, {a} == {b}", a, b)
