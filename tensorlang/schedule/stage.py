"""A Stage is the schedule of one compute: its loops (iteration variables), how they derive from
the compute's axes (split / fuse relations), their order, their annotations and where the stage is
computed (at the root, inlined, or at a loop of another stage).

Every primitive is a recorded step: it appends to the schedule's trace, and the legality checker
(tensorlang.analysis) runs on the new state before the call returns; a refused step leaves the
stage exactly as it was."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ScheduleError
from ..ir import dtype as dt
from ..ir.expr import Const, Expr, Var, as_int, const
from ..ir.simplify import simplify
from ..ir.stmt import IterVar, Range

if TYPE_CHECKING:
    from .schedule import Schedule

ANNOTATIONS = ("parallel", "vectorize", "unroll")


@dataclass(frozen=True, slots=True, eq=False)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | Var | None  # a Var: a symbolic factor, bound when the kernel is called
    nparts: int | Var | None


def split_extent(n: int | Var) -> Expr:
    """A split's factor or nparts as a loop extent."""
    return n if isinstance(n, Var) else const(n)


@dataclass(frozen=True, slots=True, eq=False)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


def _split_count(n):
    """A split factor as a plain int where it is one in another type: a constant such as
    A.shape[0] (TVM's IntImm) or a numpy integer, as TVM takes them."""
    if isinstance(n, Const) and dt.is_int(n.dtype):
        return int(n.value)
    if isinstance(n, np.integer):
        return int(n)
    return n


def ceildiv(a, b):
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return const(-(-ia // ib))
    return simplify((a + (b - 1)) // b)


class Stage:
    def __init__(self, op, schedule: Schedule):
        self.schedule = schedule
        self.origin_op = op
        self.name = op.name
        self.is_output = False
        # loops of the ops this stage had before cache_write / rfactor replaced its op (what
        # T.op.axis still names) -> the loop of the current op they stand for, or why none does
        self.former_loops: dict[IterVar, IterVar | str] = {}
        self._reset(op)
        self.attach_type = "root"  # "root" | "inline" | "scope"
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None

    def _reset(self, op) -> None:
        self.op = op
        self.root_iter_vars: list[IterVar] = list(op.axis) + list(op.reduce_axis)
        self.all_iter_vars: list[IterVar] = list(self.root_iter_vars)
        self.leaf_iter_vars: list[IterVar] = list(self.root_iter_vars)
        self.relations: list = []
        self.iter_attrs: dict[IterVar, str] = {}
        self.pragmas: dict[IterVar, list] = {}

    def _replace_op(self, op, reduce_reason: str) -> None:
        """Give the stage a new op (cache_write's copy-out, rfactor's final reduction) whose
        spatial axes correspond one to one, in order, to the old op's. As in TVM, T.op.axis
        (the op before the replacement) keeps naming the stage's loops; the old reduce axes
        have no counterpart (they moved to the new stage): reduce_reason says where."""
        mapping: dict[IterVar, IterVar | str] = dict(zip(self.op.axis, op.axis))
        # the rest are reduce loops (the roots and their splits: neither primitive accepts a
        # stage whose spatial loops were transformed)
        for iv in self.all_iter_vars:
            mapping.setdefault(iv, reduce_reason)
        self.former_loops = {old: mapping.get(new, new) if isinstance(new, IterVar) else new
                             for old, new in self.former_loops.items()}
        self.former_loops.update(mapping)
        self._reset(op)
        for st in self.schedule.stages:  # stages computed at a loop that has a counterpart
            if st.attach_stage is self and isinstance(mapping.get(st.attach_ivar), IterVar):
                st.attach_ivar = mapping[st.attach_ivar]

    def __repr__(self) -> str:
        return f"Stage({self.name})"

    def __getattr__(self, name: str):
        # only for a missing attribute: TVM's GPU-only and unsupported stage primitives (bind,
        # set_scope, ...) are refused naming the construct and the CPU's way (tvm_names.py)
        from ..tvm_names import STAGE_NAMES, missing

        raise missing("'Stage' object", name, STAGE_NAMES)

    # ------------------------------------------------------------------ state snapshots
    def _snapshot(self):
        return (list(self.all_iter_vars), list(self.leaf_iter_vars), list(self.relations),
                dict(self.iter_attrs), {k: list(v) for k, v in self.pragmas.items()},
                self.attach_type, self.attach_stage, self.attach_ivar)

    def _restore(self, snap) -> None:
        (self.all_iter_vars, self.leaf_iter_vars, self.relations, self.iter_attrs,
         self.pragmas, self.attach_type, self.attach_stage, self.attach_ivar) = snap

    def _record(self, kind: str, loops: list, **args):
        """Append a step, run the legality check, and undo the step if it is refused."""
        self._check_tensorized(kind, loops)
        return self.schedule._record(self, kind, loops, args)

    def _check_tensorized(self, kind: str, loops: list) -> None:
        """A tensorized region (Stage.tensorize) was matched as it stands: a later step that
        changes or annotates one of its loops is refused (it would leave the intrinsic on a
        loop nest that no longer matches, or on a loop that no longer exists)."""
        for pos, iv in enumerate(self.leaf_iter_vars):
            names = [v for k, v in self.pragmas.get(iv, ()) if k == "tensorize"]
            if names:
                region = self.leaf_iter_vars[pos:]
                hit = [lv.name for lv in loops if lv in region]
                if hit:
                    raise ScheduleError(f"{kind} on stage {self.name}: loop {hit[0]} is in the "
                                        f"region tensorized as {names[0]} (from loop "
                                        f"{iv.name} inwards), which cannot change")

    def _check_not_tensorized(self, kind: str) -> None:
        """A primitive that replaces the stage's op (rfactor) would drop a tensorized region
        matched against the old one: refused, naming the order that works."""
        for iv, pragmas in self.pragmas.items():
            names = [v for k, v in pragmas if k == "tensorize"]
            if names:
                raise ScheduleError(f"{kind} on stage {self.name}: the stage is tensorized as "
                                    f"{names[0]} (from loop {iv.name} inwards), and {kind} "
                                    f"replaces its computation; call {kind} first, then "
                                    "tensorize")

    # ------------------------------------------------------------------ lookups
    def _leaf(self, iv, primitive: str) -> IterVar:
        if not isinstance(iv, IterVar):
            raise TypeError(f"{primitive} on stage {self.name}: expected a loop (IterVar), got "
                            f"{type(iv).__name__} {iv!r}")
        # a reduce axis shared with an upstream compute: this stage loops over its own copy
        iv = self.op.axis_copies.get(iv, iv)
        if iv not in self.all_iter_vars and iv in self.former_loops:
            iv = self._former_loop(iv, primitive)
        if iv not in self.leaf_iter_vars:
            where = "was already split or fused" if iv in self.all_iter_vars else \
                "is not a loop of this stage"
            raise ScheduleError(f"{primitive} on stage {self.name}: loop {iv.name} {where}; "
                                f"its loops are {self.loop_names()}")
        return iv

    def _former_loop(self, iv: IterVar, primitive: str) -> IterVar:
        """The current loop that an axis of the stage's former op (T.op.axis after
        s.cache_write(T) or s.rfactor(T, ...)) stands for."""
        new = self.former_loops[iv]
        if isinstance(new, IterVar):
            return new
        raise ScheduleError(f"{primitive} on stage {self.name}: loop {iv.name} is not a loop of "
                            f"this stage any more: {new}; its loops are {self.loop_names()}")

    def loop_names(self) -> list[str]:
        return [iv.name for iv in self.leaf_iter_vars]

    def find_loop(self, name: str) -> IterVar:
        for iv in self.all_iter_vars:
            if iv.name == name:
                return iv
        raise ScheduleError(f"stage {self.name} has no loop named {name!r}; its loops are "
                            f"{self.loop_names()}")

    def extent_of(self, iv: IterVar):
        """The loop's extent before bound inference (root extents from the compute)."""
        return iv.dom.extent

    def _new_iv(self, name: str, extent, kind: str) -> IterVar:
        iv = IterVar(Var(name), Range(const(0), extent if isinstance(extent, Expr)
                                       else const(extent)), kind)
        self.all_iter_vars.append(iv)
        return iv

    # ------------------------------------------------------------------ primitives
    def split(self, parent: IterVar, factor: int | Var | None = None,
              nparts: int | Var | None = None, disable_predication: bool = False):
        """Split a loop in two: i -> (i.outer, i.inner) with i = i.outer * factor + i.inner.

            for i in range(100):            for i.outer in range(4):    # ceil(100 / 32)
              body(i)               ==>       for i.inner in range(32):
                                                if i.outer * 32 + i.inner < 100:   # tail guard
                                                  body(i.outer * 32 + i.inner)

        Give exactly one of factor (the inner extent) or nparts (the outer extent): an int, or
        an integer tl.var (as in TVM: a shape variable, or a variable listed among the kernel's
        arguments), whose value the call gives and checks to be >= 1. The dependence analysis
        cannot express i = i.outer * f + i.inner with f unknown: it treats both loops of a
        symbolic split as opaque functions of i, which is exact for the split itself (a split
        never reorders i) and refuses, naming the dependence, a reorder, parallel or
        compute_at it cannot prove for every f.

        TVM's disable_predication=True (no tail guard) is accepted and changes nothing: the
        guard is kept where the factor may not divide the extent (the answer is then right
        where TVM's would read and write out of bounds) and dropped where it divides."""
        del disable_predication
        parent = self._leaf(parent, "split")
        if (factor is None) == (nparts is None):
            raise ValueError(f"split on stage {self.name}: give exactly one of factor= or nparts=")
        n = _split_count(factor if factor is not None else nparts)
        factor, nparts = (n, None) if factor is not None else (None, n)
        if isinstance(n, Var) and not dt.is_int(n.dtype):
            raise TypeError(f"split on stage {self.name}: factor/nparts {n.name} is a "
                            f"{n.dtype} tl.var (a scalar parameter for compute bodies); a "
                            "symbolic factor must be an integer tl.var")
        if isinstance(n, Var):  # an integer tl.var
            return self._record("split", [parent], factor=factor, nparts=nparts)
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"split on stage {self.name}: factor/nparts must be an int, got "
                            f"{type(n).__name__} {n!r} (or a tl.var for a symbolic one)")
        if n <= 0:
            raise ValueError(f"split on stage {self.name}: factor/nparts must be positive, "
                             f"got {n}")
        return self._record("split", [parent], factor=factor, nparts=nparts)

    def _split(self, parent: IterVar, factor, nparts):
        ext = parent.dom.extent
        if factor is not None:
            outer_ext, inner_ext = ceildiv(ext, factor), split_extent(factor)
        else:
            outer_ext, inner_ext = split_extent(nparts), ceildiv(ext, nparts)
        outer = self._new_iv(parent.name + ".outer", outer_ext, parent.kind)
        inner = self._new_iv(parent.name + ".inner", inner_ext, parent.kind)
        pos = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        self.relations.append(Split(parent, outer, inner, factor, nparts))
        self._move_attr(parent, inner)
        self._move_attached(parent, inner)
        return outer, inner

    def _move_attached(self, old: IterVar, new: IterVar) -> None:
        """Stages computed at a loop that a split or fuse replaces move to the loop that runs
        them as often (TVM's LegalizeInvalidAttach): a split's inner loop, the fused loop of a
        fuse whose innermost loop it was. At the fused loop's outer operand they stay, and the
        legality check refuses the fuse (no loop runs them as often)."""
        for st in self.schedule.stages:
            if st.attach_stage is self and st.attach_ivar is old:
                st.attach_ivar = new

    def _move_attr(self, old: IterVar, new: IterVar) -> None:
        # An annotation on a loop that gets split stays with the inner part (as in TVM).
        if old in self.iter_attrs:
            self.iter_attrs[new] = self.iter_attrs.pop(old)

    def tile(self, x: IterVar, y: IterVar, x_factor: int, y_factor: int):
        """Split x and y and order the result (x.outer, y.outer, x.inner, y.inner).

            for x, y:          ==>   for x.outer, y.outer, x.inner, y.inner: body"""
        xo, xi = self.split(x, factor=x_factor)
        yo, yi = self.split(y, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *loops: IterVar) -> IterVar:
        """Fuse adjacent loops into one: (i, j) -> i.j.fused with i = f // extent(j),
        j = f % extent(j).

            for i in range(4):                 for i.j.fused in range(32):
              for j in range(8):      ==>        body(i.j.fused // 8, i.j.fused % 8)
                body(i, j)"""
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        if len(loops) == 1:
            return self._leaf(loops[0], "fuse")  # as TVM: s[T].fuse(*axes) of a 1-D stage
        if not loops:
            raise ValueError(f"fuse on stage {self.name}: no loops given (TVM's singleton loop "
                             "of a 0-d stage is not supported: such a stage runs once, with no "
                             "loop to schedule)")
        loops = tuple(self._leaf(iv, "fuse") for iv in loops)
        pos = [self.leaf_iter_vars.index(iv) for iv in loops]
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise ScheduleError(f"fuse on stage {self.name}: loops "
                                f"{[iv.name for iv in loops]} are not adjacent and in order "
                                f"in {self.loop_names()}")
        kinds = {iv.kind for iv in loops}
        if len(kinds) > 1:
            raise ScheduleError(f"fuse on stage {self.name}: cannot fuse a reduce loop with a "
                                f"spatial loop ({[iv.name for iv in loops]})")
        return self._record("fuse", list(loops))

    def _fuse(self, *loops):
        fused = loops[0]
        for nxt in loops[1:]:
            ext = simplify(fused.dom.extent * nxt.dom.extent)
            f = self._new_iv(f"{fused.name}.{nxt.name}.fused", ext, fused.kind)
            pos = self.leaf_iter_vars.index(fused)
            self.leaf_iter_vars[pos:pos + 2] = [f]
            self.relations.append(Fuse(fused, nxt, f))
            self._move_attached(nxt, f)
            fused = f
        return fused

    def reorder(self, *loops: IterVar) -> None:
        """Put the given loops in this order, in the positions they occupy now:

            for i, j, k: body   --reorder(k, i)-->   for k, j, i: body"""
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        loops = tuple(self._leaf(iv, "reorder") for iv in loops)
        names = [iv.name for iv in loops]
        if len(set(map(id, loops))) != len(loops):
            raise ScheduleError(f"reorder on stage {self.name}: loop repeated in {names}")
        self._record("reorder", list(loops))

    def _reorder(self, *loops):
        pos = sorted(self.leaf_iter_vars.index(iv) for iv in loops)
        for p, iv in zip(pos, loops):
            self.leaf_iter_vars[p] = iv

    def _annotate(self, iv: IterVar, kind: str) -> None:
        iv = self._leaf(iv, kind)
        old = self.iter_attrs.get(iv)
        if old is not None and old != kind:
            raise ScheduleError(f"{kind} on stage {self.name}: loop {iv.name} is already "
                                f"marked {old}")
        self._record(kind, [iv])

    def _set_attr(self, iv, kind):
        self.iter_attrs[iv] = kind

    def vectorize(self, iv: IterVar) -> None:
        """Run the loop as SIMD vector operations (it must be innermost and of constant extent):

            for j in range(16): C[j] = A[j] + B[j]   ==>   C[j:j+16] = A[j:j+16] + B[j:j+16]"""
        iv = self._leaf(iv, "vectorize")
        if self.leaf_iter_vars[-1] is not iv:
            raise ScheduleError(f"vectorize on stage {self.name}: loop {iv.name} is not the "
                                f"innermost loop (loops: {self.loop_names()}); reorder it last")
        self._annotate(iv, "vectorize")

    def unroll(self, iv: IterVar) -> None:
        """Replicate the loop body for each iteration (constant extent needed at lowering)."""
        self._annotate(iv, "unroll")

    def parallel(self, iv: IterVar) -> None:
        """Run the iterations of the loop on the thread pool, split evenly across workers."""
        # a loop that carries a dependence (every reduce loop of more than one iteration: its
        # iterations update the same accumulator) is refused by the legality check the step
        # runs (tensorlang.analysis), with the dependence it would break
        self._annotate(iv, "parallel")

    def pragma(self, iv: IterVar, key: str, value=None) -> None:
        """Attach a pragma; supported:
        - "auto_unroll_max_step" (int): loops inside this one whose total trip count is at most
          the value are unrolled;
        - "nontemporal" (no value): the vector stores of this stage inside this loop bypass the
          caches (non-temporal stores where the address is aligned to the vector, a fence at
          the end of each iteration). For a kernel output too big to stay cached: it saves
          reading each line before it is written (softmax of 4096x1024: 0.63 -> 0.45 ms). The
          stage must be a kernel output (checked when lowering);
        - TVM's "unroll" and "vectorize" are s[T].unroll(iv) and s[T].vectorize(iv), and its
          "unroll_explicit" (bool) changes nothing: unrolling is always done in the loop IR."""
        iv = self._leaf(iv, "pragma")
        if key in ("unroll", "vectorize"):  # TVM's pragma(x, "unroll") is s[T].unroll(x)
            getattr(self, key)(iv)
            return
        if key == "unroll_explicit":
            # TVM's choice between unrolling in its IR and leaving it to LLVM: the unrolling
            # here is always explicit, in the loop IR
            if not isinstance(value, (bool, int)):
                raise ValueError(f"pragma unroll_explicit needs a bool, got {value!r}")
            return
        if key in ("import_llvm", "import_c"):
            raise ValueError(f"pragma {key} (TVM links source code into the kernel) is not "
                             "supported: compile the C code into a shared library, "
                             "tl.load_library(path), and call its functions with "
                             "tl.call_extern")
        if key not in ("auto_unroll_max_step", "nontemporal"):
            raise ValueError(f"pragma on stage {self.name}: unknown pragma {key!r}; supported: "
                             "'auto_unroll_max_step', 'nontemporal', 'unroll_explicit', "
                             "'unroll', 'vectorize'")
        if key == "nontemporal":
            if value is not None:
                raise ValueError(f"pragma nontemporal takes no value, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"pragma auto_unroll_max_step needs a non-negative int, got {value!r}")
        self._record("pragma", [iv], key=key, value=value)

    def _pragma(self, iv, key, value):
        self.pragmas.setdefault(iv, []).append((key, value))

    def tensorize(self, loop: IterVar, intrin) -> None:
        """Run the loops from `loop` inwards as one call of a tensor intrinsic
        (tl.decl_tensor_intrin; te/tensorize.py), once the nest is proven to compute exactly
        what the intrinsic does (a ScheduleError showing both otherwise):

            for j.inner in range(16):                 # the intrinsic's axes, then its
              for k.inner in range(4):       ==>      # reduce axes, in its order
                C[i, j] += A[i, k] * B[j, k]         C[i, jo*16:+16] = vpdpbusd(...)"""
        from ..te.tensorize import TensorIntrin, match_stage

        iv = self._leaf(loop, "tensorize")
        if not isinstance(intrin, TensorIntrin):
            raise TypeError(f"tensorize on stage {self.name}: expected a tensor intrinsic "
                            f"(tl.decl_tensor_intrin), got {type(intrin).__name__}")
        match_stage(self, iv, intrin)
        self._record("tensorize", [iv], intrin=intrin.name)

    def _tensorize(self, iv, intrin):
        self.pragmas.setdefault(iv, []).append(("tensorize", intrin))

    # ------------------------------------------------------------------ placement
    def compute_at(self, parent: Stage, iv: IterVar) -> None:
        """Compute this stage inside loop `iv` of `parent`, just the region that one iteration of
        `iv` needs (bound inference sizes it):

            for i: P[i] = f(i)            for i.outer:
            for i: C[i] = P[i] + 1   ==>    for p in range(32): P[p] = f(i.outer * 32 + p)
                                            for i.inner in range(32): C[..] = P[i.inner] + 1"""
        if not isinstance(parent, Stage):
            raise TypeError(f"compute_at on stage {self.name}: parent must be a stage "
                            f"(s[T]), got {type(parent).__name__}")
        if parent is self:
            raise ScheduleError(f"compute_at on stage {self.name}: cannot compute a stage at "
                                "its own loop")
        iv = parent._leaf(iv, f"compute_at({self.name})")
        if self.is_output:
            raise ScheduleError(f"compute_at on stage {self.name}: an output stage must stay at "
                                "the root (it writes the kernel's output buffer)")
        if self.schedule.stage_index(parent) < self.schedule.stage_index(self):
            raise ScheduleError(f"compute_at on stage {self.name}: {parent.name} runs before it")
        self._record("compute_at", [iv], parent=parent.name)

    def _compute_at(self, iv, parent):
        self.attach_type, self.attach_stage, self.attach_ivar = "scope", parent, iv

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers; it gets no loops or buffer."""
        if self.is_output:
            raise ScheduleError(f"compute_inline on stage {self.name}: an output cannot be "
                                "inlined")
        if self.op.reduce_axis:
            raise ScheduleError(f"compute_inline on stage {self.name}: a reduction cannot be "
                                "inlined")
        if self.op.num_outputs > 1:
            raise ScheduleError(f"compute_inline on stage {self.name}: a multi-output compute "
                                "cannot be inlined")
        for st in self.schedule.stages:
            if st.attach_stage is self and st.attach_type == "scope":
                raise ScheduleError(f"compute_inline on stage {self.name}: stage {st.name} is "
                                    "computed at one of its loops")
        self._record("compute_inline", [])

    def _compute_inline(self):
        self.attach_type, self.attach_stage, self.attach_ivar = "inline", None, None

    def compute_root(self) -> None:
        """Undo compute_at / compute_inline: compute the whole stage at the kernel's root."""
        self._record("compute_root", [])

    def _compute_root(self):
        self.attach_type, self.attach_stage, self.attach_ivar = "root", None, None

    # ------------------------------------------------------------------ derived values
    def leaf_extents(self) -> dict:
        return {iv: iv.dom.extent for iv in self.leaf_iter_vars}

    def is_transformed(self) -> bool:
        return bool(self.relations) or self.leaf_iter_vars != self.root_iter_vars or bool(
            self.iter_attrs) or bool(self.pragmas)
