"""Step 4 of lowering: checks at the kernel's entry that the shape variables have values the
static bounds proof (analysis/bounds.py) covers. The proof holds for every value >= 0 of the
shape variables, except where a read needs one >= 1 (`B[0] = A[n - 1]` reads A[-1] at n = 0);
and a tensor's extent must not be negative (`T` of shape (n - 2,) at n = 1). So, before any
loop:

- each variable a read needs is >= 1, the message naming the read;
- each other variable the proof assumed >= 0 is >= 0, unless an argument has it as a whole
  dimension (the call binds it from a numpy shape, which is never negative);
- each extent of the schedule's tensors that the variables' minimums do not make >= 0 is >= 0;
- each condition a compute declares it needs (attrs["requires"]: a conv window over a
  symbolic size, which needs one whole window) holds.

Each check is one unsigned compare, IndexCheck(x - minimum, MAX) (as the symbolic split
factors' checks): out of range, the kernel returns the check's code and the call raises
KernelError with its message. A check in the kernel costs nothing per call in the Python call
path (its fast path stays as it is) and also guards call_raw, the timer and a model's driver."""

from __future__ import annotations

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.checks import IndexCheck
from ..ir.functor import collect_vars
from ..ir.simplify import Analyzer, simplify, to_linear

# Kernel return codes of these checks (index checks use 1000 + k, the allocations 1..999, the
# split factors 2**23 and up, tl.extern calls 2**24 and up)
SHAPE_CHECK_CODE = 1 << 22


def add_entry_checks(func: S.PrimFunc, schedule, proofs) -> S.PrimFunc:
    """`func` with the checks first in its body (the same func when none is needed)."""
    kernel_vars = set(func.shape_vars)
    minimum = _minimums(proofs, kernel_vars)
    checks = [_at_least(v, m, why, code) for code, (v, (m, why)) in
              enumerate(minimum.items(), SHAPE_CHECK_CODE) if m > 0 or not _bound(v, func)]
    code = SHAPE_CHECK_CODE + len(minimum)
    ranges = Analyzer({v: (m, float("inf")) for v, (m, _) in minimum.items()})
    for tensor, axis, extent in _extents(schedule, kernel_vars):
        if ranges.bound(extent)[0] < 0:
            checks.append(_extent_check(tensor, axis, extent, code))
            code += 1
    for value, message in _requirements(schedule, kernel_vars):
        checks.append(S.Evaluate(IndexCheck(value, _top(value.dtype), code, message)))
        code += 1
    return func.replace(body=S.seq(*checks, func.body)) if checks else func


def _requirements(schedule, kernel_vars: set):
    """(value, message) for each condition `value >= 0` over the kernel's variables that a
    compute declares it needs (attrs["requires"]): what its definition does not hold for,
    though every read stays in bounds (a conv window over a symbolic size too small for one
    window, whose output extent is clamped to 1)."""
    seen = set()  # (a stage and its cache_write copy declare the same)
    for st in schedule.stages:
        for value, message in st.op.attrs.get("requires", ()) if hasattr(st.op, "attrs") else ():
            names = collect_vars(value)
            if names and names <= kernel_vars and (str(value), message) not in seen:
                seen.add((str(value), message))
                yield value, message


def _minimums(proofs, kernel_vars: set) -> dict:
    """{shape variable: (its minimum, 0 or 1, and why)} for the kernel's variables."""
    out: dict = {}
    for p in proofs:
        for v in p.shape_vars:
            if v in kernel_vars:
                out.setdefault(v, (0, f"{v.name} must be at least 0: it is a size"))
        for v, access in p.needs.items():
            if v in kernel_vars and out[v][0] < 1:
                out[v] = (1, access.needs_message(v))
    return out


def _bound(v: E.Var, func: S.PrimFunc) -> bool:
    """Whether an argument has `v` as a whole dimension (the call binds it, never negative)."""
    return any(d is v for b in func.params for d in b.shape)


def _extents(schedule, kernel_vars: set):
    """(tensor, axis, extent) of every symbolic extent of the schedule's tensors over the
    kernel's variables."""
    for st in schedule.stages:
        for i in range(st.op.num_outputs):
            t = st.op.output(i)
            for axis, d in enumerate(t.shape):
                names = collect_vars(d)
                if names and names <= kernel_vars:
                    yield t, axis, d


def _top(dtype: str) -> E.Expr:
    return E.const((1 << (dt.bits(dtype) - 1)) - 1, dtype)


def _at_least(v: E.Var, minimum: int, message: str, code: int) -> S.Stmt:
    return S.Evaluate(IndexCheck(v - minimum if minimum else v, _top(v.dtype), code, message))


def _extent_check(tensor, axis: int, extent, code: int) -> S.Stmt:
    shape = ", ".join(str(d) for d in tensor.shape) + ("," if len(tensor.shape) == 1 else "")
    least = _least_value(simplify(extent))
    what = f"{least[0].name} must be at least {least[1]}: " if least else ""
    msg = (f"{what}tensor {tensor.name} of shape ({shape}) would have a negative extent "
           f"{extent} (axis {axis})")
    return S.Evaluate(IndexCheck(extent, _top(extent.dtype), code, msg))


def _least_value(extent) -> tuple | None:
    """(v, the least value of v that makes extent >= 0) for an extent a * v + c with a > 0."""
    lin = to_linear(extent)
    if len(lin.terms) != 1:
        return None
    ((term, a),) = lin.terms.values()
    if type(term) is not E.Var or a <= 0:
        return None
    return term, -(lin.const // a)
