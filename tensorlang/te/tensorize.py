"""Tensor intrinsics (TVM's decl_tensor_intrin): a small compute that says what a hardware
instruction computes, plus the loop-IR statement that runs it, and the exact check that a loop
nest of a schedule computes the same thing so that `Stage.tensorize` may replace it.

    intrin = tl.decl_tensor_intrin(C, impl, name="dot16x4")   # C: the intrinsic's compute
    s[Out].tensorize(ji, intrin)      # the loops from ji inwards run as one call of impl

The match is checked twice, never assumed:
- when `tensorize` is called: the loops from `loop` inwards must be, in order, the intrinsic's
  axes then its reduce axes (same kinds, same constant extents, no tail guard, no annotation),
  the expression must equal the intrinsic's up to renaming (node by node, dtypes included) and
  every read of a tensor must move through memory as the intrinsic's does (the coefficient of
  each loop in its row-major address equals the intrinsic's: a transposed or strided access is
  refused);
- when lowering (passes/tensorize.py), on the flattened loop IR with the real buffers (a
  cache_write accumulator's shape is only known there): the same comparison of the store,
  its loads and their flat addresses.
A mismatch is a ScheduleError that prints both the loop nest and the intrinsic."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property

from ..errors import ScheduleError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import collect_vars
from ..ir.simplify import simplify
from .tensor import ComputeOp, PlaceholderOp, Reduce, Tensor, TensorRead

_REGISTRY: dict[str, TensorIntrin] = {}


@dataclass(frozen=True)
class Region:
    """Where an operand of a tensorized nest starts: its buffer and the flat element index of
    the element the intrinsic's index 0 maps to (loop IR after storage_flatten)."""

    buffer: S.Buffer
    base: E.Expr

    def __getattr__(self, name: str):
        # only for a missing attribute: TVM's Buffer methods an intrinsic's body calls there
        if name in ("access_ptr", "data", "strides", "elem_offset", "vload", "vstore"):
            raise AttributeError(
                f"'Region' object has no attribute {name!r}: TVM's Buffer.{name}; here "
                "impl(ins, outs) gets Regions and returns loop IR that loads and stores "
                "region.buffer at flat indices from region.base (tensorize.py's "
                "_dot_16x4_impl); calling a C function on pointers is not supported")
        raise AttributeError(f"'Region' object has no attribute {name!r}")


class TensorIntrin:
    """A declared intrinsic: `op` (a ComputeOp over placeholders) and `impl(ins, outs)`, which
    returns the statement computing it, given a Region per input (in the order of
    `op.input_tensors`) and per output. The implementation updates the output (a reduction is
    accumulated into what the output holds: its initialisation stays outside the region)."""

    def __init__(self, op: ComputeOp, impl: Callable, name: str):
        self.op = op
        self.impl = impl
        self.name = name
        self.loops = tuple(op.axis) + tuple(op.reduce_axis)
        self.extents = tuple(_const_extent(iv, name) for iv in self.loops)

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name})"

    @cached_property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(self.op.input_tensors)

    def describe(self) -> str:
        """The intrinsic as a loop nest, for error messages."""
        loops = "".join(f"for {iv.name} in {ext}: " for iv, ext in zip(self.loops, self.extents))
        out = self.op.output(0)
        idx = ", ".join(iv.name for iv in self.op.axis)
        return f"{loops}{out.name}[{idx}] = {self.op.body[0]!r}"


def _const_extent(iv, name: str) -> int:
    ext = E.as_int(iv.dom.extent)
    if ext is None or not E.is_const(iv.dom.min, 0):
        raise ValueError(f"intrinsic {name}: axis {iv.name} must start at 0 and have a "
                         f"constant extent, got {iv.dom}")
    return ext


def decl_tensor_intrin(out: Tensor | ComputeOp, impl: Callable, name: str | None = None,
                       binds=None, scalar_params=None,
                       default_buffer_params=None) -> TensorIntrin:
    """Declare (and register under `name`, for schedule replay; the compute's name when not
    given, as TVM) the intrinsic computing `out`.

    `out` is a one-output compute over placeholders with constant extents, its body a plain
    expression or one tl.sum; `impl(ins, outs) -> Stmt` builds the code from the operands'
    Regions. Re-declaring a name replaces the earlier intrinsic. TVM's binds= and
    scalar_params= (buffer declarations, scalar operands) are refused; its
    default_buffer_params (offset_factor, alignment of the matched buffers) changes nothing:
    the match is checked on flat addresses."""
    op = out.op if isinstance(out, Tensor) else out
    name = name if name is not None else getattr(op, "name", "intrin")
    for given, what in ((binds, "binds= (TVM's tvm.tir.decl_buffer of each operand)"),
                        (scalar_params, "scalar_params=")):
        if given is not None:
            raise TypeError(f"decl_tensor_intrin {name}: {what} is not supported: impl(ins, "
                            "outs) gets each operand as a Region (its buffer and the flat index "
                            "of its first element); docs/tvm_compat.md, tensorize row")
    del default_buffer_params
    if not isinstance(op, ComputeOp) or op.num_outputs != 1:
        raise TypeError(f"decl_tensor_intrin {name}: expected a one-output compute, got {op!r}")
    for t in op.input_tensors:
        if not isinstance(t.op, PlaceholderOp):
            raise TypeError(f"decl_tensor_intrin {name}: input {t.name} must be a placeholder")
    body = op.body[0]
    if isinstance(body, Reduce) and (body.combiner.name != "sum" or body.condition is not None):
        raise ValueError(f"decl_tensor_intrin {name}: a reduction must be a tl.sum without where=")
    if not callable(impl):
        raise TypeError(f"decl_tensor_intrin {name}: impl must be callable")
    intrin = TensorIntrin(op, impl, name)
    _REGISTRY[name] = intrin
    return intrin


def get_intrin(name: str) -> TensorIntrin:
    got = _REGISTRY.get(name)
    if got is None:
        if name in _BUILTIN:
            return _BUILTIN[name]()
        raise ScheduleError(f"no tensor intrinsic named {name!r}; declared: "
                            f"{sorted(set(_REGISTRY) | set(_BUILTIN))}")
    return got


# ----------------------------------------------------------------------------- affine maps


def linear_coeffs(e: E.Expr, loop_vars: tuple) -> dict | None:
    """{var: int coefficient} of `e` over `loop_vars` (the rest of `e` is a constant offset),
    or None when `e` is not affine in them."""
    if isinstance(e, E.Var):
        return {e: 1} if e in loop_vars else {}
    if isinstance(e, E.Const) or not (collect_vars(e) & set(loop_vars)):
        return {}
    if isinstance(e, (E.Add, E.Sub)):
        a, b = linear_coeffs(e.a, loop_vars), linear_coeffs(e.b, loop_vars)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, E.Add) else -1
        out = dict(a)
        for v, c in b.items():
            out[v] = out.get(v, 0) + sign * c
        return out
    if isinstance(e, E.Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            k = E.as_int(simplify(y)) if not (collect_vars(y) & set(loop_vars)) else None
            if k is not None:
                inner = linear_coeffs(x, loop_vars)
                return None if inner is None else {v: c * k for v, c in inner.items()}
    return None


def flat_coeffs(indices, shape, loop_vars: tuple) -> tuple | None:
    """Coefficients of `loop_vars` in the row-major flat address of `indices` into `shape`
    (a tuple in loop order), or None when not affine or a dimension inside the first is not
    constant (the first, a dynamic batch say, scales no address)."""
    total = [0] * len(loop_vars)
    stride = 1
    for axis, (idx, dim) in enumerate(zip(reversed(indices), reversed(shape))):
        co = linear_coeffs(idx, loop_vars)
        if co is None:
            return None
        for n, v in enumerate(loop_vars):
            total[n] += co.get(v, 0) * stride
        if axis == len(indices) - 1:
            break
        d = E.as_int(dim)
        if d is None:
            return None
        stride *= d
    return tuple(total)


# ----------------------------------------------------------------------------- schedule match


class _Mismatch(Exception):
    pass


class _ExprMatcher:
    """Walks the intrinsic's expression and the nest's side by side; `leaf(ours, theirs)`
    matches an operand pair (a read or a load: its dtype, binding and address) and says
    whether it was one. Tensors (or buffers) are bound one to one."""

    def __init__(self, leaf: Callable):
        self.leaf = leaf  # (intr_node, nest_node) -> True when both are bound operands
        self.binding: dict = {}

    def bind(self, ours, theirs, what: str) -> None:
        prev = self.binding.setdefault(ours, theirs)
        if prev is not theirs:
            raise _Mismatch(f"{what} {_name(ours)} stands for both {_name(prev)} and "
                            f"{_name(theirs)}")

    def match(self, a, b) -> None:
        if self.leaf(a, b):
            return
        if type(a) is not type(b):
            raise _Mismatch(f"{a!r} is a {type(a).__name__}, the nest has {b!r}")
        if getattr(a, "dtype", None) != getattr(b, "dtype", None):
            raise _Mismatch(f"dtype of {a!r} is {a.dtype}, the nest's {b!r} is {b.dtype}")
        if isinstance(a, E.Const):
            if a.value != b.value:
                raise _Mismatch(f"constant {a!r} vs {b!r}")
            return
        if isinstance(a, (E.Add, E.Mul)):
            saved = dict(self.binding)
            try:
                self.match(a.a, b.a)
                self.match(a.b, b.b)
            except _Mismatch as first:
                self.binding = saved
                try:  # + and * commute: the simplifier may have swapped the operands
                    self.match(a.a, b.b)
                    self.match(a.b, b.a)
                except _Mismatch:
                    raise first from None
            return
        if isinstance(a, E.BinaryOp):
            self.match(a.a, b.a)
            self.match(a.b, b.b)
            return
        if isinstance(a, E.Cast):
            self.match(a.value, b.value)
            return
        raise _Mismatch(f"{a!r} cannot be matched against {b!r} (only arithmetic, casts and "
                        "reads of tensors are)")


def _name(x) -> str:
    return getattr(x, "name", repr(x))


def match_stage(stage, loop, intrin: TensorIntrin) -> None:
    """ScheduleError unless the loops of `stage` from `loop` inwards compute `intrin`."""
    from ..schedule.relations import leaf_extents, root_values

    pos = stage.leaf_iter_vars.index(loop)
    nest = stage.leaf_iter_vars[pos:]
    extents = leaf_extents(stage, {iv: iv.dom.extent for iv in stage.root_iter_vars})
    try:
        _check_loops(stage, nest, extents, intrin)
        values, guards = root_values(stage, {iv: iv.var for iv in stage.leaf_iter_vars}, extents)
        nest_vars = tuple(iv.var for iv in nest)
        if any(collect_vars(g) & set(nest_vars) for g in guards):
            raise _Mismatch("a split inside the region does not divide its loop (tail guard)")
        roots = {iv.var: values[iv] for iv in stage.root_iter_vars}
        _match_bodies(stage.op, roots, nest_vars, intrin)
    except _Mismatch as why:
        raise ScheduleError(mismatch_message(stage.name, loop.name, intrin, str(why),
                                             _describe_nest(stage, nest, extents))) from None


def _check_loops(stage, nest, extents, intrin) -> None:
    if len(nest) != len(intrin.loops):
        raise _Mismatch(f"{len(nest)} loops from here inwards, the intrinsic has "
                        f"{len(intrin.loops)}")
    for lv, iv, want in zip(nest, intrin.loops, intrin.extents):
        if lv.kind != iv.kind:
            raise _Mismatch(f"loop {lv.name} is {lv.kind}, the intrinsic's {iv.name} is "
                            f"{iv.kind}")
        got = E.as_int(simplify(extents[lv]))
        if got != want:
            raise _Mismatch(f"loop {lv.name} has extent {extents[lv]}, the intrinsic's "
                            f"{iv.name} has {want}")
        if lv in stage.iter_attrs or lv in stage.pragmas:
            raise _Mismatch(f"loop {lv.name} is annotated ({stage.iter_attrs.get(lv) or 'pragma'})")
    for st in stage.schedule.stages:
        if st.attach_stage is stage and st.attach_ivar in nest[1:]:
            raise _Mismatch(f"stage {st.name} is computed inside the region")
    _check_init_outside(stage, nest, extents)


def _check_init_outside(stage, nest, extents) -> None:
    """A reduction is initialised just outside its outermost reduce loop: with every reduce
    loop inside the region and a spatial loop first, that store would be inside it too (TVM
    splits an intrinsic into reduce_init and reduce_update; impl here only accumulates)."""
    reduce_leaves = [iv for iv in stage.leaf_iter_vars if iv.kind == "reduce"]
    if reduce_leaves and nest[0].kind == "spatial" and all(iv in nest for iv in reduce_leaves):
        k = reduce_leaves[0]
        raise _Mismatch(f"the reduction's initialisation would run inside the region, before "
                        f"loop {k.name} (the intrinsic accumulates; there is no reduce_init): "
                        f"keep a reduce loop outside it, e.g. {k.name}o, {k.name}i = "
                        f"s[{stage.name}].split({k.name}, factor={simplify(extents[k])}) and "
                        f"s[{stage.name}].reorder(..., {k.name}o, {nest[0].name}, ...)")


def _match_bodies(op, roots: dict, nest_vars: tuple, intrin: TensorIntrin) -> None:
    ours, theirs = intrin.op.body[0], op.body[0]
    if isinstance(ours, Reduce) != isinstance(theirs, Reduce):
        raise _Mismatch("one is a reduction, the other is not")
    if isinstance(ours, Reduce):
        if theirs.combiner.name != "sum" or theirs.condition is not None or \
                len(theirs.source) != 1:
            raise _Mismatch(f"the nest's reduction is {theirs!r}, not a plain tl.sum")
        ours, theirs = ours.source[0], theirs.source[0]
    intr_vars = tuple(iv.var for iv in intrin.loops)

    def address(read: TensorRead, vars_: tuple, subst: dict) -> tuple | None:
        from ..ir.functor import substitute

        idx = tuple(simplify(substitute(i, subst)) if subst else i for i in read.indices)
        return flat_coeffs(idx, read.tensor.shape, vars_)

    def leaf(a, b) -> bool:
        if not isinstance(a, TensorRead):
            return False
        if not isinstance(b, TensorRead):
            raise _Mismatch(f"{a!r} is a read, the nest has {b!r}")
        if a.dtype != b.dtype:
            raise _Mismatch(f"{a!r} is {a.dtype}, the nest's {b!r} is {b.dtype}")
        m.bind(a.tensor, b.tensor, "tensor")
        want, got = address(a, intr_vars, {}), address(b, nest_vars, roots)
        if got is None:
            raise _Mismatch(f"the address of {b!r} is not affine in the region's loops")
        if want != got:
            raise _Mismatch(f"{b!r} moves by {got} elements per step of the loops, the "
                            f"intrinsic's {a!r} by {want}")
        return True

    m = _ExprMatcher(leaf)
    m.match(ours, theirs)
    # the output too: the region's stores must walk it as the intrinsic's do
    out_idx = tuple(simplify(roots.get(iv.var, iv.var)) for iv in op.axis)
    got = flat_coeffs(out_idx, op.output(0).shape, nest_vars)
    want = flat_coeffs(tuple(iv.var for iv in intrin.op.axis), intrin.op.output(0).shape,
                       intr_vars)
    if got != want:
        raise _Mismatch(f"the output {op.name} moves by {got} per step of the loops, the "
                        f"intrinsic's by {want}")


def _describe_nest(stage, nest, extents) -> str:
    loops = "".join(f"for {lv.name} in {extents[lv]}: " for lv in nest)
    idx = ", ".join(iv.name for iv in stage.op.axis)
    return f"{loops}{stage.name}[{idx}] = {stage.op.body[0]!r}"


def mismatch_message(stage: str, loop: str, intrin: TensorIntrin, why: str, nest: str) -> str:
    return (f"tensorize on stage {stage} at loop {loop}: the loop nest does not compute "
            f"intrinsic {intrin.name}: {why}\n  loop nest: {nest}\n  intrinsic: "
            f"{intrin.describe()}")


# ----------------------------------------------------------------------------- builtins

# The name of the loop-IR call that codegen turns into one AVX-512 VNNI vpdpbusd, or into
# exact widening arithmetic on a CPU without VNNI (codegen/dot_intrinsics.py).
DOT_U8S8 = "tl.dot_u8s8x4_i32x16"


def _dot_16x4_impl(ins, outs) -> S.Stmt:
    a, b = ins
    (c,) = outs
    acc = E.Load(c.buffer, (E.Ramp(c.base, E.const(1, c.base.dtype), 16),))
    av = E.Load(a.buffer, (E.Ramp(a.base, E.const(1, a.base.dtype), 4),))
    bv = E.Load(b.buffer, (E.Ramp(b.base, E.const(1, b.base.dtype), 64),))
    return S.Store(c.buffer, (E.Ramp(c.base, E.const(1, c.base.dtype), 16),),
                   E.Call("int32x16", DOT_U8S8, (acc, av, bv)))


@cache  # one object: the lowering pass caches its template per intrinsic
def dot_u8s8_16x4(a_dtype: str = "uint8") -> TensorIntrin:
    """C[j] += sum_k int32(A[k]) * int32(B[j, k]) for j < 16, k < 4: A four bytes (uint8, one
    group of the reduction, read once and broadcast), B 16 rows of 4 int8 (64 contiguous
    bytes: the weight layout [.., 16 outputs, 4 inputs]), C 16 contiguous int32.
    One vpdpbusd on AVX-512 VNNI; without VNNI the same values by widening arithmetic."""
    from . import intrin as ti
    from .tensor import compute, placeholder, reduce_axis

    if a_dtype != "uint8":
        raise ValueError(f"dot_u8s8_16x4: vpdpbusd multiplies uint8 by int8, got {a_dtype} "
                         "(shift int8 activations by 128 into uint8 and compensate)")
    A = placeholder((4,), "uint8", name="a")
    B = placeholder((16, 4), "int8", name="b")
    k = reduce_axis((0, 4), name="k")
    C = compute((16,), lambda j: ti.sum(A[k].astype("int32") * B[j, k].astype("int32"),
                                        axis=k), name="c")
    return decl_tensor_intrin(C, _dot_16x4_impl, name="dot_u8s8_16x4")


_BUILTIN = {"dot_u8s8_16x4": dot_u8s8_16x4}

__all__ = ["DOT_U8S8", "Region", "TensorIntrin", "decl_tensor_intrin", "dot_u8s8_16x4",
           "get_intrin", "match_stage"]
