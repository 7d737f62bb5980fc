"""Loop IR -> LLVM IR (llvmlite.ir).

The kernel ABI: `i32 @name(ptr %buf0, ..., ptr %bufN, i64 %shape_var0, ...)` returns 0, or a
nonzero error code (heap allocation failure, or a failing parallel task). Vector expressions
become `<N x T>` values; parallel loops are outlined into `i32 @name.parallelK(i32 task,
i32 num_tasks, ptr closure)` and launched through the thread pool's entry point, whose address
the loader stores in the global `@__tl_parallel_launch`."""

from __future__ import annotations

import functools
import platform

from llvmlite import ir
from llvmlite.ir import types as _ir_types

from ..errors import LoweringError
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import StmtVisitor, Visitor, contains
from ..lower.passes.hoist_allocations import leading_allocations
from ..lower.passes.plan_allocation import MAX_ALLOC_BYTES
from ..runtime import extern_c, packed
from . import dot_intrinsics, intrinsics

# LLVM 22 only reads opaque pointers: make llvmlite print every pointer (a function's address
# included) as `ptr`.
_ir_types.ir_layer_typed_pointers_enabled = False

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
FLAGS = ("contract",)
MINMAX_FLAGS = ("nsz",)  # on llvm.maximum/minimum only; see FunctionEmitter._minmax
LAUNCH_GLOBAL = "__tl_parallel_launch"
# A heap buffer that cannot be allocated makes the kernel return its own code (from 1 up; index
# checks use FIRST_INDEX_CODE and up), which the manifest maps to a message naming the buffer.
FIRST_ALLOC_CODE, LAST_ALLOC_CODE = 1, 999
LAUNCH_TYPE = ir.FunctionType(I32, [PTR, PTR, I32])
PACKED_CALL_TYPE = ir.FunctionType(I32, [PTR, I32, PTR])  # (name, nargs, descriptors)


def scalar_type(d: str) -> ir.Type:
    base = dt.element(d)
    if base == "bool":
        return I1
    if base == "float32":
        return ir.FloatType()
    if base == "float64":
        return ir.DoubleType()
    if base == "float16":
        return ir.HalfType()
    return ir.IntType(dt.bits(base))


def llvm_type(d: str) -> ir.Type:
    n = dt.lanes(d)
    t = scalar_type(d)
    return t if n == 1 else ir.VectorType(t, n)


def memory_type(d: str) -> ir.Type:
    """Type of one element in memory (bool is a byte, as in numpy)."""
    return I8 if dt.is_bool(d) else scalar_type(d)


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.HalfType):
        return "f16"
    return f"i{t.width}"


def _const_divisor(b) -> int | None:
    """The integer value of a divisor that is a constant (or a broadcast constant)."""
    return E.as_int(b.value) if isinstance(b, E.Broadcast) else E.as_int(b)


def _heap_buffers(body) -> list:
    """The heap buffers a kernel body allocates, in program order."""
    found: list = []

    class _Find(StmtVisitor):
        def visit_Allocate(self, s):
            if s.buffer.scope == "heap":
                found.append(s.buffer)
            self.visit(s.body)

    _Find().visit(body)
    return found


def allocation_codes(body) -> dict:
    """{heap buffer: the code the kernel returns when it cannot be allocated}."""
    return {b: min(FIRST_ALLOC_CODE + i, LAST_ALLOC_CODE)
            for i, b in enumerate(_heap_buffers(body))}


def allocation_error_messages(body) -> dict[str, str]:
    """{code (as text, the manifest's keys): message} for the heap buffers of a kernel body."""
    messages: dict[str, str] = {}
    for buf, code in allocation_codes(body).items():
        n = buf.const_elements()
        size = (f"{n * dt.storage_bytes(buf.dtype)}" if n is not None else
                " * ".join([str(dt.storage_bytes(buf.dtype))] + [str(d) for d in buf.shape]))
        shape = ", ".join(str(d) for d in buf.shape)
        text = (f"could not allocate {size} bytes for buffer {buf.name!r} ({buf.dtype}[{shape}], "
                f"on the heap): out of memory, or more than 2^48 bytes")
        if str(code) in messages:  # codes ran out: the last one stands for the rest
            text = "could not allocate one of the kernel's last heap buffers"
        messages[str(code)] = text
    return messages


def _opaque(alloca):
    # llvmlite types an alloca as a typed pointer, which then fails its own store/GEP type
    # checks against opaque `ptr` values; the printed IR only uses allocated_type.
    alloca.type = PTR
    return alloca


# LLVM instruction -> the IRBuilder method that emits it (_LaneSlicer re-emits them narrower)
_SLICED_BINARY = {"and": "and_", "or": "or_", "xor": "xor", "add": "add", "sub": "sub",
                  "mul": "mul"}
_RELATION = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

# integer Calls that are one LLVM instruction (IRBuilder method names)
_BITWISE = {"bitwise_and": "and_", "bitwise_or": "or_", "bitwise_xor": "xor"}

class _LaneSlicer:
    """Some lanes of a vector value, computed by re-emitting its elementwise operations at the
    narrower width down to constants and splats (a mask such as `splat(c) && lane-range`), so
    that each slice folds to `splat(c) & constant`: slicing the wide result instead (a shuffle
    of <59 x i1>) made LLVM build each mask lane by lane and stop peeling the loop."""

    def __init__(self, builder: ir.IRBuilder):
        self.b = builder
        self.memo: dict = {}

    def take(self, v: ir.Value, lanes: list) -> ir.Value:
        key = (id(v), tuple(lanes))
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._take(v, lanes)
        return got

    def _take(self, v, lanes):
        vt = ir.VectorType(v.type.element, len(lanes))
        if isinstance(v, ir.Constant) and isinstance(v.constant, list):
            return ir.Constant(vt, [v.constant[i] for i in lanes])
        scalar = _splat_scalar(v)
        if scalar is not None:
            tmp = self.b.insert_element(ir.Constant(vt, ir.Undefined), scalar,
                                        ir.Constant(I32, 0))
            return self.b.shuffle_vector(tmp, ir.Constant(vt, ir.Undefined),
                                         ir.Constant(ir.VectorType(I32, len(lanes)),
                                                     [0] * len(lanes)))
        op = getattr(v, "opname", None)
        if op in _SLICED_BINARY and len(v.operands) == 2:
            a, b = (self.take(x, lanes) for x in v.operands)
            return getattr(self.b, _SLICED_BINARY[op])(a, b)
        if op in ("icmp", "fcmp") and len(v.operands) == 2:
            a, b = (self.take(x, lanes) for x in v.operands)
            return self._compare(op, v.op, a, b)
        return self.b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, len(lanes)), lanes))

    def _compare(self, op: str, predicate: str, a, b):
        """The builder call that emits `predicate` (LLVM's name: slt, ule, olt, une, ...)."""
        if op == "icmp":
            rel = _RELATION[predicate[-2:]]
            unsigned = predicate.startswith("u")
            return (self.b.icmp_unsigned if unsigned else self.b.icmp_signed)(rel, a, b)
        if predicate in ("ord", "uno"):
            return (self.b.fcmp_ordered if predicate == "ord" else self.b.fcmp_unordered)(
                predicate, a, b)
        rel = _RELATION[predicate[1:]]
        return (self.b.fcmp_ordered if predicate[0] == "o" else self.b.fcmp_unordered)(rel, a, b)


def _splat_scalar(v):
    """The scalar a `broadcast` value repeats (FunctionEmitter.broadcast's two instructions)."""
    if getattr(v, "opname", None) != "shufflevector":
        return None
    vec, _, mask = v.operands
    if getattr(vec, "opname", None) != "insertelement" or any(
            int(c.constant) != 0 for c in mask.constant):
        return None
    return vec.operands[1]


class _LoadedLaunchPointer(ir.instructions.LoadInstr):
    """The loaded pool entry point: an opaque `ptr` that llvmlite must call with a known
    function type (it reads `function_type` from the callee)."""

    @property
    def function_type(self):
        return LAUNCH_TYPE


class _FreeVars(Visitor):
    """Variables and buffers a statement uses but does not define (for outlining)."""

    def __init__(self):
        self.defined: set = set()
        self.vars: list = []
        self.buffers: list = []
        self.allocated: set = set()

    def visit_Var(self, v):
        if v not in self.defined and v not in self.vars:
            self.vars.append(v)

    def visit_For(self, s):
        self.visit(s.min)
        self.visit(s.extent)
        self.defined.add(s.loop_var)
        self.visit(s.body)

    def visit_LetStmt(self, s):
        self.visit(s.value)
        self.defined.add(s.var)
        self.visit(s.body)

    def visit_Let(self, e):
        self.visit(e.value)
        self.defined.add(e.var)
        self.visit(e.body)

    def visit_Allocate(self, s):
        self.allocated.add(s.buffer)
        for d in s.buffer.shape:  # a symbolic size is computed where the buffer is allocated
            if not isinstance(d, int):
                self.visit(d)
        self.visit(s.body)

    def _buf(self, b):
        if b not in self.allocated and b not in self.buffers:
            self.buffers.append(b)

    def visit_Load(self, e):
        self._buf(e.buffer)
        self.generic(e)

    def visit_Store(self, s):
        self._buf(s.buffer)
        self.generic(s)


def _streaming_buffers(s: S.For) -> frozenset:
    """Names of the buffers a loop's "nontemporal" pragma applies to."""
    return frozenset(n for k, v in s.annotations if k == "nontemporal" for n in v)


class _LoadedPackedPointer(ir.instructions.LoadInstr):
    """The loaded packed-call trampoline (see _LoadedLaunchPointer)."""

    @property
    def function_type(self):
        return PACKED_CALL_TYPE


class _LoadedExternPointer(ir.instructions.LoadInstr):
    """A C function's address loaded from its slot (see _LoadedLaunchPointer): its type is
    the call's, set per load."""

    @property
    def function_type(self):
        return self.extern_type


def extern_manifest(func: S.PrimFunc) -> list[dict]:
    """The manifest's "externs": each C function the kernel calls and the library the build
    found it in (None: the process itself). LoweringError naming a symbol no library defines."""
    libraries: dict = {}

    class _Find(Visitor):
        def visit_ExternCall(self, e):
            libraries.setdefault(e.symbol, set()).add(e.library)
            self.generic(e)

    _Find().visit(func.body)
    out = []
    for symbol in sorted(libraries):
        given = libraries[symbol] - {None}
        if len(given) > 1:
            raise LoweringError(f"kernel {func.name}: C function {symbol!r} is registered from "
                                f"several libraries: {sorted(given)}")
        try:
            path = extern_c.find(symbol, next(iter(given)) if given else None)
        except (LookupError, OSError, extern_c.LoadError) as e:
            raise LoweringError(f"kernel {func.name}: {e}") from None
        out.append({"symbol": symbol, "library": path})
    if len(out) > extern_c.MAX_EXTERNS:
        raise LoweringError(f"kernel {func.name} calls {len(out)} C functions, more than the "
                            f"{extern_c.MAX_EXTERNS} its error codes can name")
    return out


# integer index arithmetic: pure, no branches (a division's zero-divisor lanes are selects), the
# same value wherever its variables are
_REUSED_NODES = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max)
_REUSED_DTYPES = (dt.INDEX_DTYPE, "int32")


class FunctionEmitter:
    def __init__(self, cg: CodeGen, fn: ir.Function, in_parallel: bool):
        self.cg = cg
        self.fn = fn
        self.in_parallel = in_parallel
        entry = fn.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(entry)
        body = fn.append_basic_block("body")
        self.alloca_builder.branch(body)
        self.alloca_builder.position_at_start(entry)
        self.b = ir.IRBuilder(body)
        self.vars: dict = {}
        self.bufs: dict = {}
        self.heap: list = []
        self.mask = None  # while evaluating a select's branch: the lanes that take it
        self.streaming: frozenset = frozenset()  # buffer names under a "nontemporal" pragma
        # (basic block, integer index expression) -> its value there: an unrolled tile's stores
        # each computed `o.outer * 25088 + y * 28` again (a third of a conv kernel's
        # instructions, which llvmlite builds and prints one Python object at a time). Only
        # within the block that computed it (which dominates the rest of itself); cleared when
        # a variable is bound again.
        self.index_values: dict = {}
        self.index_arith: dict = {}  # expression -> whether it is such index arithmetic

    # ------------------------------------------------------------------ expressions
    def expr(self, e) -> ir.Value:
        reuse = type(e) in _REUSED_NODES and self._index_arith(e)
        if reuse:
            got = self.index_values.get((self.b.block, e))
            if got is not None:
                return got
        fn = getattr(self, "e_" + type(e).__name__, None)
        if fn is None:
            raise LoweringError(f"codegen: unsupported expression {type(e).__name__}: {e!r}")
        value = fn(e)
        if reuse:
            self.index_values[(self.b.block, e)] = value
        return value

    def _index_arith(self, e) -> bool:
        """e is integer arithmetic over variables and constants only: no load (memory a store
        in the same block may change, or a select's mask may hide) and no call."""
        got = self.index_arith.get(e)
        if got is None:
            if isinstance(e, (E.Var, E.Const)):
                got = True
            else:
                got = (type(e) in _REUSED_NODES and e.dtype in _REUSED_DTYPES and
                       self._index_arith(e.a) and self._index_arith(e.b))
            self.index_arith[e] = got
        return got

    def e_Const(self, e):
        t = scalar_type(e.dtype)
        if dt.is_bool(e.dtype):
            return ir.Constant(I1, int(bool(e.value)))
        if dt.is_float(e.dtype):
            return ir.Constant(t, float(e.value))
        return ir.Constant(t, int(e.value))

    def e_Var(self, e):
        v = self.vars.get(e)
        if v is None:
            raise LoweringError(f"codegen: variable {e.name} is used outside its scope "
                                "(or a symbolic size not given by any argument's shape)")
        return v

    def e_Let(self, e):
        self.vars[e.var] = self.expr(e.value)
        self.index_values.clear()
        return self.expr(e.body)

    def e_Ramp(self, e):
        n = e.lanes
        base = self.broadcast(self.expr(e.base), n)
        stride = self.broadcast(self.expr(e.stride), n)
        t = scalar_type(e.base.dtype)
        steps = ir.Constant(ir.VectorType(t, n), [ir.Constant(t, i) for i in range(n)])
        return self.b.add(base, self.b.mul(stride, steps))

    def e_Broadcast(self, e):
        return self.broadcast(self.expr(e.value), e.lanes)

    def broadcast(self, v: ir.Value, n: int) -> ir.Value:
        if isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, n)
        if isinstance(v, ir.Constant):
            return ir.Constant(vt, [v] * n)
        tmp = self.b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
        return self.b.shuffle_vector(tmp, ir.Constant(vt, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, n), [0] * n))

    def _arith(self, e, int_op, float_op, uint_op=None):
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.is_float(e.a.dtype):
            return getattr(self.b, float_op)(a, b, flags=FLAGS)
        if uint_op and dt.is_unsigned(e.a.dtype):
            return getattr(self.b, uint_op)(a, b)
        return getattr(self.b, int_op)(a, b)

    def e_Add(self, e):
        if dt.is_bool(e.dtype):  # numpy: True + True is True (logical or), not i1's xor
            return self.b.or_(self.expr(e.a), self.expr(e.b))
        return self._arith(e, "add", "fadd")

    def e_Sub(self, e):
        return self._arith(e, "sub", "fsub")

    def e_Mul(self, e):
        return self._arith(e, "mul", "fmul")

    def e_Div(self, e):
        if dt.is_float(e.dtype):
            return self._arith(e, "sdiv", "fdiv")
        return self._int_divmod(e)[0]

    def _int_divmod(self, e):
        """Truncating quotient and remainder of an integer division that never traps, and the
        divisor's value.

        x86's idiv raises SIGFPE for a zero divisor and for INT_MIN / -1; numpy's results are
        x // 0 == x % 0 == 0 and INT_MIN // -1 == INT_MIN (wrapped), so a divisor that may be
        0 or -1 is replaced by 1 and those lanes' results are selected afterwards (a few vector
        compares and selects; x86 has no vector integer division either way). A divisor that is
        the constant 0 is refused: the kernel would divide by zero on every run."""
        a, b = self.expr(e.a), self.expr(e.b)
        signed = not (dt.is_unsigned(e.dtype) or dt.is_bool(e.dtype))
        c = _const_divisor(e.b)
        if c == 0:
            raise LoweringError(f"division by zero in {e!r}: an integer divisor is the constant "
                                "0 (x // 0 and x % 0 are undefined); guard the expression or "
                                "use another divisor")
        if c is not None and (c != -1 or not signed):
            if signed:
                return self.b.sdiv(a, b), self.b.srem(a, b), b
            return self.b.udiv(a, b), self.b.urem(a, b), b
        zero = self._like(b, 0)
        by_zero = self.b.icmp_unsigned("==", b, zero)
        if not signed:
            d = self.b.select(by_zero, self._like(b, 1), b)
            return self.b.select(by_zero, zero, self.b.udiv(a, d)), self.b.urem(a, d), b
        by_minus_one = self.b.icmp_signed("==", b, self._like(b, -1))
        d = self.b.select(self.b.or_(by_zero, by_minus_one), self._like(b, 1), b)
        q = self.b.select(by_minus_one, self.b.sub(zero, a), self.b.sdiv(a, d))  # wraps
        return self.b.select(by_zero, zero, q), self.b.srem(a, d), b

    def _floor_fix(self, r, b):
        """Lanes whose truncated quotient must round towards minus infinity (Python semantics):
        a nonzero remainder whose sign differs from the divisor's."""
        zero = self._like(r, 0)
        return self.b.and_(self.b.icmp_signed("!=", r, zero),
                           self.b.icmp_signed("<", self.b.xor(r, b), zero))

    def _pow2(self, e):
        c = _const_divisor(e.b)
        if c is not None and c > 0 and c & (c - 1) == 0:
            return c
        return None

    def e_FloorDiv(self, e):
        c = self._pow2(e)
        if c is not None and not dt.is_unsigned(e.dtype):
            a = self.expr(e.a)
            return self.b.ashr(a, self._like(a, c.bit_length() - 1))
        q, r, b = self._int_divmod(e)
        if dt.is_unsigned(e.dtype) or dt.is_bool(e.dtype):
            return q
        return self.b.sub(q, self.b.zext(self._floor_fix(r, b), q.type))

    def e_FloorMod(self, e):
        if dt.is_float(e.dtype):
            return self._float_floor_mod(e)
        c = self._pow2(e)
        if c is not None and not dt.is_unsigned(e.dtype):
            a = self.expr(e.a)
            return self.b.and_(a, self._like(a, c - 1))
        _, r, b = self._int_divmod(e)
        if dt.is_unsigned(e.dtype) or dt.is_bool(e.dtype):
            return r
        return self.b.select(self._floor_fix(r, b), self.b.add(r, b), r)

    def _float_floor_mod(self, e):
        """numpy's float remainder: the sign of the divisor (frem's has the dividend's), a zero
        included."""
        a, b = self.expr(e.a), self.expr(e.b)
        r = self.b.frem(a, b)
        zero = self._like(r, 0)
        signs_differ = self.b.xor(self.b.fcmp_ordered("<", r, zero),
                                  self.b.fcmp_ordered("<", b, zero))
        fix = self.b.and_(self.b.fcmp_ordered("!=", r, zero), signs_differ)
        copysign = intrinsics.get_intrinsic(self.cg.module, "copysign", r.type, 2)
        return self.b.select(self.b.fcmp_ordered("==", r, zero), self.b.call(copysign, [r, b]),
                             self.b.select(fix, self.b.fadd(r, b), r))

    def _like(self, v, c: int):
        if isinstance(v.type, ir.VectorType):
            return ir.Constant(v.type, [ir.Constant(v.type.element, c)] * v.type.count)
        return ir.Constant(v.type, c)

    def _minmax(self, e, less: bool):
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.is_float(e.dtype):
            # numpy's maximum/minimum: a NaN operand gives NaN, whichever side it is on. A
            # compare-select (x86 vmaxps) returns one fixed operand on NaN, so a reduction's
            # answer would depend on where its schedule puts the NaN. llvm.maximum/minimum
            # propagate NaN on either side, so no schedule (reorder, rfactor, vectorized or
            # parallel combines) changes whether a result is NaN. nsz leaves the sign of a zero
            # result unspecified between -0 and +0 (numpy's too: np.maximum(-0., 0.) is the
            # second operand): that drops two blends per max (vmaxps + vcmpunordps + a blend is
            # left); without it max_pool ran 2.3x slower, with it 1.2x. No flag touches NaN.
            fn = intrinsics.get_intrinsic(self.cg.module, "minimum" if less else "maximum",
                                          a.type, 2)
            return self.b.call(fn, [a, b], fastmath=MINMAX_FLAGS)
        if dt.is_unsigned(e.dtype) or dt.is_bool(e.dtype):
            c = self.b.icmp_unsigned("<" if less else ">", a, b)
        else:
            c = self.b.icmp_signed("<" if less else ">", a, b)
        return self.b.select(c, a, b)

    def e_Min(self, e):
        return self._minmax(e, True)

    def e_Max(self, e):
        return self._minmax(e, False)

    def _cmp(self, e, op):
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.is_float(e.a.dtype):
            if op == "!=":
                return self.b.fcmp_unordered(op, a, b)
            return self.b.fcmp_ordered(op, a, b)
        if dt.is_unsigned(e.a.dtype) or dt.is_bool(e.a.dtype):
            return self.b.icmp_unsigned(op, a, b)
        return self.b.icmp_signed(op, a, b)

    def e_EQ(self, e):
        return self._cmp(e, "==")

    def e_NE(self, e):
        return self._cmp(e, "!=")

    def e_LT(self, e):
        return self._cmp(e, "<")

    def e_LE(self, e):
        return self._cmp(e, "<=")

    def e_GT(self, e):
        return self._cmp(e, ">")

    def e_GE(self, e):
        return self._cmp(e, ">=")

    def e_And(self, e):
        return self.b.and_(self.expr(e.a), self.expr(e.b))

    def e_Or(self, e):
        return self.b.or_(self.expr(e.a), self.expr(e.b))

    def e_Not(self, e):
        return self.b.not_(self.expr(e.a))

    def e_Select(self, e):
        if not (contains(e.true_value, E.Load) or contains(e.false_value, E.Load)):
            return self.b.select(self.expr(e.condition), self.expr(e.true_value),
                                 self.expr(e.false_value))
        if isinstance(e.condition, E.Broadcast):
            return self._select_uniform(e)
        cond = self.expr(e.condition)
        # Both sides are evaluated (branch-free, vectorizable), so a load on the side not taken
        # must not touch memory it may not own (a padding stage reads X[h - 1] at h = 0): loads
        # under a select are masked by the condition that selects them.
        outer = self.mask
        self.mask = self._and_mask(outer, cond)
        t = self.expr(e.true_value)
        self.mask = self._and_mask(outer, self.b.not_(cond))
        f = self.expr(e.false_value)
        self.mask = outer
        return self.b.select(cond, t, f)

    def _select_uniform(self, e):
        """A select whose condition is one scalar for every lane (a concat's `c < 256` along
        its outer channel axis) branches to the side it takes: one plain vector load instead
        of a masked load of every side (segformer's 4-way channel concat, 4 x [1, 256, 64, 64],
        one thread: 22 ms as masked loads against numpy's 0.9 ms)."""
        cond = self.expr(e.condition.value)
        with self.b.if_else(cond) as (then, other):
            with then:
                t = self.expr(e.true_value)
                t_block = self.b.block
            with other:
                f = self.expr(e.false_value)
                f_block = self.b.block
        phi = self.b.phi(t.type)
        phi.add_incoming(t, t_block)
        phi.add_incoming(f, f_block)
        return phi

    def _and_mask(self, outer, cond):
        if outer is None:
            return cond
        n_o = outer.type.count if isinstance(outer.type, ir.VectorType) else 1
        n_c = cond.type.count if isinstance(cond.type, ir.VectorType) else 1
        if n_o != n_c:
            n = max(n_o, n_c)
            outer, cond = self.broadcast(outer, n), self.broadcast(cond, n)
        return self.b.and_(outer, cond)

    def _any_lane(self, mask):
        if not isinstance(mask.type, ir.VectorType):
            return mask
        n = mask.type.count
        fn = self.cg.declare(f"llvm.vector.reduce.or.v{n}i1", I1, [mask.type])
        return self.b.call(fn, [mask])

    def e_IndexCheck(self, e):
        """The index, after one unsigned compare `idx <u extent` (a negative index is a huge
        unsigned one) that returns the check's code when it fails; lanes a select masks off
        are not checked (their loads read element 0 instead)."""
        idx = self.expr(e.index)
        extent = self.expr(e.extent)
        if isinstance(idx.type, ir.VectorType):
            extent = self.broadcast(extent, idx.type.count)
        bad = self.b.icmp_unsigned(">=", idx, extent)
        if self.mask is not None:  # a scalar load under a vector mask happens for any lane
            vector = isinstance(idx.type, ir.VectorType)
            bad = self.b.and_(bad, self.broadcast(self.mask, idx.type.count) if vector
                              else self._any_lane(self.mask))
        with self.b.if_then(self._any_lane(bad), likely=False):
            self._return_error(ir.Constant(I32, e.code))
        return idx

    def _f64_to_f32_round_to_odd(self, v):
        """f64 -> f32 rounded to odd (toward zero, then the last bit set when inexact): a
        following f32 -> f16 rounding is then the correctly rounded f64 -> f16 (f32 keeps
        more than two extra bits). LLVM's direct fptrunc to half calls __truncdfhf2, which
        the C libraries here lack; rounding to nearest twice would be off in rare ties."""
        b = self.b
        lanes = v.type.count if isinstance(v.type, ir.VectorType) else None
        f32 = ir.FloatType() if lanes is None else ir.VectorType(ir.FloatType(), lanes)
        i32 = ir.IntType(32) if lanes is None else ir.VectorType(ir.IntType(32), lanes)
        t = b.fptrunc(v, f32)
        back = b.fpext(t, v.type)
        inexact = b.fcmp_ordered("!=", back, v)  # false for NaN
        fabs = intrinsics.get_intrinsic(b.module, "fabs", v.type)
        away = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [v]))
        bits = b.bitcast(t, i32)
        one = ir.Constant(i32, 1) if lanes is None else ir.Constant(i32, [1] * lanes)
        toward_zero = b.select(away, b.sub(bits, one), bits)
        return b.bitcast(b.select(inexact, b.or_(toward_zero, one), bits), f32)

    def e_Cast(self, e):
        v = self.expr(e.value)
        src, dst = e.value.dtype, e.dtype
        to = llvm_type(dst)
        if dt.is_bool(dst):
            if dt.is_float(src):
                return self.b.fcmp_unordered("!=", v, ir.Constant(v.type, None)
                                             if not isinstance(v.type, ir.VectorType)
                                             else self._zero(v.type))
            return self.b.icmp_unsigned("!=", v, self._zero(v.type))
        if dt.is_float(src) and dt.is_float(dst):
            sb, db = dt.bits(src), dt.bits(dst)
            if (sb, db) == (64, 16):
                return self.b.fptrunc(self._f64_to_f32_round_to_odd(v), to)
            return v if sb == db else (self.b.fpext(v, to) if db > sb else self.b.fptrunc(v, to))
        if dt.is_float(dst):
            if dt.is_unsigned(src) or dt.is_bool(src):
                return self.b.uitofp(v, to)
            return self.b.sitofp(v, to)
        if dt.is_float(src):
            return self.b.fptoui(v, to) if dt.is_unsigned(dst) else self.b.fptosi(v, to)
        sb, db = dt.bits(src), dt.bits(dst)
        if sb == db:
            return v
        if db < sb:
            return self.b.trunc(v, to)
        if dt.is_unsigned(src) or dt.is_bool(src):
            return self.b.zext(v, to)
        return self.b.sext(v, to)

    def _zero(self, t):
        if isinstance(t, ir.VectorType):
            return ir.Constant(t, [ir.Constant(t.element, 0)] * t.count)
        return ir.Constant(t, 0)

    def e_Call(self, e):
        args = [self.expr(a) for a in e.args]
        if e.name == dot_intrinsics.DOT_U8S8:
            return dot_intrinsics.emit_dot_u8s8(self.cg, self.b, *args)
        if e.name == "reinterpret":  # the same bits as a type of the same width (a sort key)
            return self.b.bitcast(args[0], llvm_type(e.dtype))
        if e.name == "isnan":  # unordered with itself
            return self.b.fcmp_unordered("uno", args[0], args[0])
        if e.name == "fmod":  # C's fmod, np.fmod: the sign of the dividend
            return self.b.frem(*args)
        if not dt.is_float(e.dtype):
            return self._int_call(e, args)
        return intrinsics.emit_math(self.b, e.name, args, scalef=self.cg.avx512)

    def _int_call(self, e, args):
        if e.name == "abs":
            v = args[0]
            if dt.is_unsigned(e.dtype):
                return v
            neg = self.b.sub(self._zero(v.type), v)
            return self.b.select(self.b.icmp_signed("<", v, self._zero(v.type)), neg, v)
        if e.name == "popcount":
            return self.b.call(intrinsics.get_intrinsic(self.cg.module, "ctpop", args[0].type),
                               args)
        if e.name in _BITWISE:
            return getattr(self.b, _BITWISE[e.name])(*args)
        if e.name == "bitwise_not":
            return self.b.not_(args[0])
        if e.name in ("shift_left", "shift_right"):
            return self._shift(e, *args)
        raise LoweringError(f"codegen: {e.name} is not defined for {e.dtype}")

    def _shift(self, e, a, n):
        """numpy's shifts: a count outside 0..bits-1 (negative ones included) shifts every bit
        out (LLVM's shl/ashr would give poison): 0, or the sign for a signed right shift."""
        bits = dt.bits(e.dtype)
        too_far = self.b.icmp_unsigned(">=", n, self._like(n, bits))
        if e.name == "shift_left":
            return self.b.select(too_far, self._zero(a.type), self.b.shl(a, n))
        if dt.is_unsigned(e.dtype):
            return self.b.select(too_far, self._zero(a.type), self.b.lshr(a, n))
        return self.b.ashr(a, self.b.select(too_far, self._like(n, bits - 1), n))

    def e_PackedCall(self, e):
        """Fill one descriptor per argument (runtime/packed.py's layout), call the trampoline
        through @__tl_packed_call and return from the kernel with the code of a failed call."""
        if self.in_parallel:
            # pool workers must never run Python (the stage model keeps externs at the root)
            raise LoweringError(f"codegen: call_packed({e.name!r}) inside a parallel loop")
        n = len(e.args)
        descs = _opaque(self.alloca_builder.alloca(ir.ArrayType(I64, max(1, packed.DESC_SLOTS
                                                                            * n))))
        for k, (a, written) in enumerate(zip(e.args, e.written)):
            slots = self._packed_arg(a, written)
            for j, v in enumerate(slots):
                self.b.store(v, self.b.gep(descs, [ir.Constant(I64, packed.DESC_SLOTS * k + j)],
                                           source_etype=I64))
        fn = self.b.load(self.cg.packed_slot(), typ=PTR)
        fn.__class__ = _LoadedPackedPointer
        unbound = self.b.icmp_unsigned("==", fn, ir.Constant(PTR, None))
        with self.b.if_then(unbound, likely=False):
            self._return_error(ir.Constant(I32, packed.UNBOUND_CODE))
        rc = self.b.call(fn, [self.cg.cstring(e.name), ir.Constant(I32, n), descs])
        with self.b.if_then(self.b.icmp_signed("!=", rc, ir.Constant(I32, 0)), likely=False):
            self._return_error(rc)
        return rc

    def _packed_arg(self, a, written: bool) -> list:
        """The five descriptor slots of one argument: kind, dtype, value, ndim, dims."""
        zero = ir.Constant(I64, 0)
        if not isinstance(a, E.Load):
            v = self.expr(a)
            if dt.is_float(a.dtype):
                v = self.b.bitcast(self.b.fpext(v, ir.DoubleType()) if a.dtype != "float64"
                                   else v, I64)
                return [ir.Constant(I64, packed.KIND_FLOAT), zero, v, zero, zero]
            v = v if a.dtype == "int64" else (self.b.zext(v, I64) if dt.is_unsigned(a.dtype)
                                              else self.b.sext(v, I64))
            return [ir.Constant(I64, packed.KIND_INT), zero, v, zero, zero]
        buf = a.buffer
        if buf not in self.bufs:
            raise LoweringError(f"codegen: buffer {buf.name} is used outside its allocation")
        ndim = len(buf.shape)
        dims = _opaque(self.alloca_builder.alloca(ir.ArrayType(I64, max(1, ndim))))
        for d, extent in enumerate(buf.shape):
            v = self.expr(E.const(extent) if isinstance(extent, int) else extent)
            self.b.store(v, self.b.gep(dims, [ir.Constant(I64, d)], source_etype=I64))
        kind = packed.KIND_OUTPUT if written else packed.KIND_INPUT
        return [ir.Constant(I64, kind), ir.Constant(I64, packed.DTYPES.index(buf.dtype)),
                self.b.ptrtoint(self.bufs[buf], I64), ir.Constant(I64, ndim),
                self.b.ptrtoint(dims, I64)]

    def e_ExternCall(self, e):
        """A direct call of a C function through its slot (runtime/extern_c.py): per lane in
        a vector; a tl.extern's status call returns from the kernel with the encoded code of
        a failure. A slot no loader filled returns a code, never jumps to 0."""
        index = self.cg.extern_index(e.symbol)
        fn = self.b.load(self.cg.extern_slot(e.symbol), typ=PTR)
        fn.__class__ = _LoadedExternPointer
        fn.extern_type = self._extern_type(e)
        with self.b.if_then(self.b.icmp_unsigned("==", fn, ir.Constant(PTR, None)),
                            likely=False):
            self._return_error(self._extern_code(index, ir.Constant(I32, extern_c.UNBOUND)))
        if e.status:
            args = [v for a, kind in zip(e.args, e.kinds) for v in self._extern_arg(a, kind)]
            rc = self.b.call(fn, args)
            with self.b.if_then(self.b.icmp_signed("!=", rc, ir.Constant(I32, 0)),
                                likely=False):
                self._return_error(self._extern_code(index, rc))
            return rc
        lanes = dt.lanes(e.dtype)
        vals = [self.expr(a if dt.element(a.dtype) == d else
                          E.Cast(dt.with_lanes(d, dt.lanes(a.dtype)), a))
                for a, d in zip(e.args, e.arg_dtypes)]
        if lanes == 1:
            return self.b.call(fn, vals)
        out = ir.Constant(llvm_type(e.dtype), ir.Undefined)
        for i in range(lanes):
            lane = ir.Constant(I32, i)
            args = [self.b.extract_element(v, lane) if isinstance(v.type, ir.VectorType)
                    else v for v in vals]
            out = self.b.insert_element(out, self.b.call(fn, args), lane)
        return out

    @staticmethod
    def _extern_type(e) -> ir.FunctionType:
        params = []
        for kind, d in zip(e.kinds, e.arg_dtypes):
            params += [PTR, PTR] if kind != "value" else [scalar_type(d)]
        return ir.FunctionType(scalar_type(dt.element(e.dtype)), params)

    def _extern_arg(self, a, kind: str) -> list:
        """A status call's argument: a scalar's value, a buffer's data and shape pointers."""
        if kind == "value":
            return [self.expr(a)]
        buf = a.buffer
        if buf not in self.bufs:
            raise LoweringError(f"codegen: buffer {buf.name} is used outside its allocation")
        dims = _opaque(self.alloca_builder.alloca(ir.ArrayType(I64, max(1, len(buf.shape)))))
        for d, extent in enumerate(buf.shape):
            v = self.expr(E.const(extent) if isinstance(extent, int) else extent)
            self.b.store(v, self.b.gep(dims, [ir.Constant(I64, d)], source_etype=I64))
        return [self.bufs[buf], dims]

    def _extern_code(self, index: int, rc) -> ir.Value:
        """ERROR_BASE + (index << 16) + 16 bits of rc (-32768 for a code out of int16)."""
        fits = self.b.and_(self.b.icmp_signed(">=", rc, ir.Constant(I32, -32767)),
                           self.b.icmp_signed("<=", rc, ir.Constant(I32, 32767)))
        enc = self.b.select(fits, rc, ir.Constant(I32, extern_c.OUT_OF_RANGE))
        low = self.b.and_(enc, ir.Constant(I32, 0xFFFF))
        return self.b.add(low, ir.Constant(I32, extern_c.ERROR_BASE + (index << 16)))

    def e_Shuffle(self, e):
        mask = ir.Constant(ir.VectorType(I32, len(e.indices)), list(e.indices))
        return self.b.shuffle_vector(self.expr(e.a), self.expr(e.b), mask)

    # ------------------------------------------------------------------ memory
    def _address(self, buf, idx: ir.Value) -> ir.Value:
        return self.b.gep(self.bufs[buf], [idx], inbounds=True,
                          source_etype=memory_type(buf.dtype))

    def e_Load(self, e):
        buf = e.buffer
        if buf not in self.bufs:
            raise LoweringError(f"codegen: buffer {buf.name} is used outside its allocation")
        idx_e = e.indices[0]
        mt = memory_type(buf.dtype)
        align = dt.storage_bytes(buf.dtype)
        mask = self.mask
        if isinstance(idx_e, E.Ramp) and E.as_int(idx_e.stride) == 1:
            ptr = self._address(buf, self.expr(idx_e.base))
            n = idx_e.lanes
            vt = ir.VectorType(mt, n)
            if mask is None:
                v = self.b.load(ptr, typ=vt, align=align)
            else:  # lanes outside the mask are not read at all
                v = self._masked_load(ptr, mt, self.broadcast(mask, n), align)
            return self.b.trunc(v, ir.VectorType(I1, n)) if dt.is_bool(buf.dtype) else v
        idx = self.expr(idx_e)
        if isinstance(idx.type, ir.VectorType):  # gather, lane by lane
            n = idx.type.count
            lane_mask = None if mask is None else self.broadcast(mask, n)
            out = ir.Constant(ir.VectorType(mt, n), ir.Undefined)
            for lane in range(n):
                li = self.b.extract_element(idx, ir.Constant(I32, lane))
                if lane_mask is not None:  # a masked-off lane reads element 0, always valid
                    on = self.b.extract_element(lane_mask, ir.Constant(I32, lane))
                    li = self.b.select(on, li, ir.Constant(li.type, 0))
                x = self.b.load(self._address(buf, li), typ=mt, align=align)
                out = self.b.insert_element(out, x, ir.Constant(I32, lane))
            return self.b.trunc(out, ir.VectorType(I1, n)) if dt.is_bool(buf.dtype) else out
        if mask is not None:
            idx = self.b.select(self._any_lane(mask), idx, ir.Constant(idx.type, 0))
        v = self.b.load(self._address(buf, idx), typ=mt, align=align)
        return self.b.trunc(v, I1) if dt.is_bool(buf.dtype) else v

    def _masked_load(self, ptr, mt: ir.Type, mask: ir.Value, align: int) -> ir.Value:
        """`mask.count` elements from `ptr`; lanes outside `mask` are not read (they are zero).

        Without AVX-512, emitted as masked loads of one power-of-two width no wider than a
        register (vmaskmov), the last one padded with masked-off lanes, then joined: LLVM's x86
        backend legalizes other widths wrongly there (a <9 x float> on AVX2 whose mask ends in
        a constant false read its ninth lane unmasked). AVX-512's k-masked moves take any width
        (LLVM pads the mask with zeros), and it folds the select into the load: one load."""
        n = mask.type.count
        reg_lanes = max(1, self.cg.vector_bits // (8 * align))
        width = min(reg_lanes, 1 << (n - 1).bit_length())
        if self.cg.avx512:
            width = n
        vt = ir.VectorType(mt, width)
        fn = self.cg.declare(f"llvm.masked.load.v{width}{_suffix(mt)}.p0", vt,
                             [PTR, I32, ir.VectorType(I1, width), vt])
        parts = []
        for lo in range(0, n, width):
            part_mask = self._mask_lanes(mask, lo, width)
            part_ptr = ptr if lo == 0 else self.b.gep(ptr, [ir.Constant(I64, lo)],
                                                      inbounds=True, source_etype=mt)
            parts.append(self.b.call(fn, [part_ptr, ir.Constant(I32, align), part_mask,
                                          ir.Constant(vt, None)]))
        return self._concat_lanes(parts, n)

    def _masked_store(self, s) -> None:
        """A contiguous vector store of the lanes in its (vector) predicate only: the masked
        tail of a vector loop over a symbolic extent (lower/passes/vectorize.py). Split into
        register-wide parts without AVX-512, as _masked_load is."""
        buf, idx_e = s.buffer, s.indices[0]
        if not (isinstance(idx_e, E.Ramp) and E.as_int(idx_e.stride) == 1) or \
                dt.is_bool(buf.dtype):
            raise LoweringError(f"codegen: a masked store to {buf.name} must be a contiguous "
                                "vector of a numeric type")
        mt, align = memory_type(buf.dtype), dt.storage_bytes(buf.dtype)
        val, mask = self.expr(s.value), self.expr(s.predicate)
        n = mask.type.count
        ptr = self._address(buf, self.expr(idx_e.base))
        reg_lanes = max(1, self.cg.vector_bits // (8 * align))
        width = n if self.cg.avx512 else min(reg_lanes, 1 << (n - 1).bit_length())
        vt = ir.VectorType(mt, width)
        fn = self.cg.declare(f"llvm.masked.store.v{width}{_suffix(mt)}.p0", ir.VoidType(),
                             [vt, PTR, I32, ir.VectorType(I1, width)])
        for lo in range(0, n, width):
            part = _LaneSlicer(self.b).take(val, [min(lo + i, n - 1) for i in range(width)]) \
                if (lo, width) != (0, n) else val
            part_ptr = ptr if lo == 0 else self.b.gep(ptr, [ir.Constant(I64, lo)],
                                                      inbounds=True, source_etype=mt)
            self.b.call(fn, [part, part_ptr, ir.Constant(I32, align),
                             self._mask_lanes(mask, lo, width)])

    def _mask_lanes(self, mask: ir.Value, lo: int, width: int) -> ir.Value:
        """Lanes lo, lo + 1, ... of `mask` as a `width`-lane mask, false past its end."""
        n = mask.type.count
        if lo == 0 and width == n:
            return mask
        part = _LaneSlicer(self.b).take(mask, [min(lo + i, n - 1) for i in range(width)])
        if lo + width <= n:
            return part
        inside = [ir.Constant(I1, int(lo + i < n)) for i in range(width)]
        return self.b.and_(part, ir.Constant(ir.VectorType(I1, width), inside))

    def _concat_lanes(self, parts: list, n: int) -> ir.Value:
        """The first `n` lanes of equally wide vectors laid end to end."""
        while len(parts) > 1:
            if len(parts) % 2:
                parts.append(ir.Constant(parts[0].type, ir.Undefined))
            w = parts[0].type.count
            both = ir.Constant(ir.VectorType(I32, 2 * w), list(range(2 * w)))
            parts = [self.b.shuffle_vector(a, b, both) for a, b in zip(parts[::2], parts[1::2])]
        v = parts[0]
        if v.type.count == n:
            return v
        return self.b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, n), list(range(n))))

    # ------------------------------------------------------------------ statements
    def stmt(self, s) -> None:
        if s is None:
            return
        getattr(self, "s_" + type(s).__name__)(s)

    def s_SeqStmt(self, s):
        for x in s.stmts:
            self.stmt(x)

    def s_Evaluate(self, s):
        self.expr(s.value)

    def s_LetStmt(self, s):
        self.vars[s.var] = self.expr(s.value)
        self.index_values.clear()
        self.stmt(s.body)

    def s_Store(self, s):
        if s.predicate is not None and dt.lanes(s.predicate.dtype) > 1:
            self._masked_store(s)
            return
        if s.predicate is not None:
            self.s_IfThenElse(S.IfThenElse(s.predicate, s.replace(predicate=None)))
            return
        buf = s.buffer
        if buf not in self.bufs:
            raise LoweringError(f"codegen: buffer {buf.name} is used outside its allocation")
        val = self.expr(s.value)
        if dt.is_bool(buf.dtype):
            t = I8 if not isinstance(val.type, ir.VectorType) else ir.VectorType(
                I8, val.type.count)
            val = self.b.zext(val, t)
        idx_e = s.indices[0]
        align = dt.storage_bytes(buf.dtype)
        base = idx_e.base if isinstance(idx_e, E.Ramp) else idx_e
        addr = self._address(buf, self.expr(base))
        width = align * val.type.count if isinstance(val.type, ir.VectorType) else 0
        if buf.name in self.streaming and width in (16, 32, 64):
            self._store_nontemporal(val, addr, align, width)
            return
        self.b.store(val, addr, align=align)

    def _store_nontemporal(self, val, addr, align: int, width: int) -> None:
        """A non-temporal (cache-bypassing) vector store where `addr` is aligned to the vector,
        as the instruction requires; an ordinary store otherwise (a misaligned output)."""
        low = self.b.and_(self.b.ptrtoint(addr, I64), ir.Constant(I64, width - 1))
        aligned = self.b.icmp_unsigned("==", low, ir.Constant(I64, 0))
        with self.b.if_else(aligned, likely=True) as (then, other):
            with then:
                st = self.b.store(val, addr, align=width)
                st.set_metadata("nontemporal", self.cg.module.add_metadata(
                    [ir.Constant(I32, 1)]))
            with other:
                self.b.store(val, addr, align=align)

    def _fence_streaming_stores(self) -> None:
        """Non-temporal stores are weakly ordered: drain them once the loop is done (for a
        parallel loop, at the end of each task: the pool's completion counter must not
        overtake them). Measured: a fence per iteration instead costs 0.44 -> 0.51 ms on the
        4096x1024 softmax."""
        if self.cg.x86:
            self.b.call(self.cg.declare("llvm.x86.sse.sfence", ir.VoidType(), []), [])
        else:
            self.b.fence("seq_cst")

    def s_IfThenElse(self, s):
        cond = self.expr(s.condition)
        if s.else_case is None:
            with self.b.if_then(cond):
                self.stmt(s.then_case)
        else:
            with self.b.if_else(cond) as (then, other):
                with then:
                    self.stmt(s.then_case)
                with other:
                    self.stmt(s.else_case)

    def s_Allocate(self, s):
        buf = s.buffer
        mt = memory_type(buf.dtype)
        n = buf.const_elements()
        if buf.scope == "stack":
            arr = self.alloca_builder.alloca(ir.ArrayType(mt, n), name=buf.name)
            arr.align = 64
            self.bufs[buf] = _opaque(arr)
            self.stmt(s.body)
            return
        self._in_heap_buffer(buf, lambda: self.stmt(s.body))

    def _in_heap_buffer(self, buf, emit_body) -> None:
        """Allocate heap buffer `buf`, emit its scope (emit_body()), free it."""
        nbytes, too_big = self._heap_bytes(buf)
        # aligned_alloc needs a multiple of the alignment; a size refused anyway asks for none
        nbytes = self.b.and_(self.b.add(nbytes, ir.Constant(I64, 63)), ir.Constant(I64, ~63))
        nbytes = self.b.select(too_big, ir.Constant(I64, 0), nbytes)
        p = self.b.call(self.cg.declare("aligned_alloc", PTR, [I64, I64]),
                        [ir.Constant(I64, 64), nbytes])
        failed = self.b.or_(too_big, self.b.icmp_unsigned("==", p, ir.Constant(PTR, None)))
        with self.b.if_then(failed, likely=False):
            self.b.call(self.cg.declare("free", ir.VoidType(), [PTR]), [p])  # free(NULL): no-op
            self._return_error(ir.Constant(I32, self.cg.alloc_codes[buf]))
        self.bufs[buf] = p
        self.heap.append(p)
        emit_body()
        self.heap.pop()
        self.b.call(self.cg.declare("free", ir.VoidType(), [PTR]), [p])

    def _heap_bytes(self, buf):
        """A heap buffer's size in bytes, and whether it exceeds MAX_ALLOC_BYTES (a product of
        symbolic extents that overflows 64 bits included: it must not wrap to a small size)."""
        mul = self.cg.declare("llvm.umul.with.overflow.i64", ir.LiteralStructType([I64, I1]),
                              [I64, I64])
        nbytes, overflow = ir.Constant(I64, dt.storage_bytes(buf.dtype)), ir.Constant(I1, 0)
        for extent in buf.shape:
            r = self.b.call(mul, [nbytes, self.expr(E.const(extent) if isinstance(extent, int)
                                                    else extent)])
            nbytes = self.b.extract_value(r, 0)
            overflow = self.b.or_(overflow, self.b.extract_value(r, 1))
        too_big = self.b.icmp_unsigned(">", nbytes, ir.Constant(I64, MAX_ALLOC_BYTES))
        return nbytes, self.b.or_(overflow, too_big)

    def _return_error(self, code: ir.Value) -> None:
        """Return `code` from the kernel (or task), freeing the heap buffers live here."""
        for p in reversed(self.heap):
            self.b.call(self.cg.declare("free", ir.VoidType(), [PTR]), [p])
        self.b.ret(code)

    def s_For(self, s):
        outer = self.streaming
        self.streaming = outer | _streaming_buffers(s)
        try:
            if s.kind == "parallel" and not self.in_parallel:
                self._parallel(s)
                return
            start = self.expr(s.min)
            end = self.b.add(start, self.expr(s.extent))
            self._loop(s.loop_var, start, end, s.body)
            if _streaming_buffers(s):
                self._fence_streaming_stores()
        finally:
            self.streaming = outer

    def _loop(self, var, start, end, body) -> None:
        pre = self.b.block
        header = self.fn.append_basic_block(f"{var.name}.header")
        loop = self.fn.append_basic_block(f"{var.name}.body")
        done = self.fn.append_basic_block(f"{var.name}.done")
        self.b.branch(header)
        self.b.position_at_end(header)
        phi = self.b.phi(I64, name=var.name)
        phi.add_incoming(start, pre)
        self.b.cbranch(self.b.icmp_signed("<", phi, end), loop, done)
        self.b.position_at_end(loop)
        self.vars[var] = phi
        self.stmt(body)
        nxt = self.b.add(phi, ir.Constant(I64, 1))
        phi.add_incoming(nxt, self.b.block)
        self.b.branch(header)
        self.b.position_at_end(done)

    def _parallel(self, s: S.For) -> None:
        fv = _FreeVars()
        fv.visit(s)
        vars_ = [v for v in fv.vars if v is not s.loop_var]
        bufs = fv.buffers
        vals = [self.e_Var(v) for v in vars_] + [self.bufs[b] for b in bufs]
        struct = ir.LiteralStructType([v.type for v in vals]) if vals else \
            ir.LiteralStructType([I8])
        closure = _opaque(self.alloca_builder.alloca(struct, name="closure"))
        for i, v in enumerate(vals):
            self.b.store(v, self.b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, i)],
                                        source_etype=struct))
        body_fn = self.cg.outline(s, vars_, bufs, struct, self.streaming)
        launch = self.b.load(self.cg.launch_global(), typ=PTR)
        launch.__class__ = _LoadedLaunchPointer
        rc = self.b.call(launch, [body_fn, closure, ir.Constant(I32, 0)])
        failed = self.b.icmp_signed("!=", rc, ir.Constant(I32, 0))
        with self.b.if_then(failed, likely=False):
            self._return_error(rc)


class CodeGen:
    def __init__(self, target_cpu: str = "", target_features: str = "",
                 vector_bits: int = 512):
        self.module = ir.Module(name="tensorlang")
        self.target_cpu = target_cpu
        self.target_features = target_features
        # exp scales with AVX-512's vscalefps where the target has it (intrinsics.exp_f32)
        self.avx512 = "+avx512f" in target_features.split(",")
        # code is generated for this host (target.py): sfence orders non-temporal stores there
        self.x86 = platform.machine().lower() in ("x86_64", "amd64")
        self.vector_bits = vector_bits
        self._launch = None
        self._n_parallel = 0
        self.alloc_codes: dict = {}
        self.externs: list = []  # the kernel's C functions, sorted (extern_manifest)
        self.extern_slot_names: dict = {}  # symbol -> its slot, named after its library
        self.func_name = ""

    def declare(self, name, ret, args):
        """An external function (libc, or an LLVM intrinsic: declared by hand, since llvmlite's
        declare_intrinsic gets vector signatures wrong), declared once per module."""
        g = self.module.globals.get(name)
        if g is None:
            g = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return g

    def launch_global(self):
        if self._launch is None:
            g = ir.GlobalVariable(self.module, PTR, LAUNCH_GLOBAL)
            g.initializer = ir.Constant(PTR, None)
            g.align = 8
            self._launch = g
        return self._launch

    def packed_slot(self):
        """@__tl_packed_call: the trampoline's address, stored there by the loader."""
        g = self.module.globals.get(packed.CALL_SLOT)
        if g is None:
            g = ir.GlobalVariable(self.module, PTR, packed.CALL_SLOT)
            g.initializer = ir.Constant(PTR, None)
            g.align = 8
        return g

    def extern_slot(self, symbol: str):
        """@__tl_extern.<symbol>.<library hash>: the C function's address, stored there by the
        loader (runtime/extern_c.py)."""
        name = self.extern_slot_names[symbol]
        g = self.module.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.module, PTR, name)
            g.initializer = ir.Constant(PTR, None)
            g.align = 8
        return g

    def extern_index(self, symbol: str) -> int:
        return self.externs.index(symbol)

    def cstring(self, text: str):
        """A private NUL-terminated constant holding `text` (the packed function's name)."""
        data = text.encode("utf-8") + b"\0"
        name = f".str.{len(self.module.globals)}"
        g = ir.GlobalVariable(self.module, ir.ArrayType(I8, len(data)), name)
        g.initializer = ir.Constant(ir.ArrayType(I8, len(data)), bytearray(data))
        g.global_constant = True
        g.linkage = "private"
        return g

    def outline(self, s: S.For, vars_, bufs, struct, streaming=frozenset()) -> ir.Function:
        """The task function of a parallel loop: it unpacks the closure and calls the task's
        body, an always-inlined function whose buffer pointers are noalias parameters. The
        buffers are distinct, as in the kernel's own function; pointers loaded from the
        closure would not say so, and LLVM's loop vectorizer then recursed without end on a
        max-reduction inside a parallel loop (softmax's max computed at the exp loop)."""
        self._n_parallel += 1
        name = f"{self.func_name}.parallel{self._n_parallel}"
        fields = list(struct.elements[:len(vars_)]) + [PTR] * len(bufs)
        body_fn = self._task_body(name + ".body", s, vars_, bufs, fields, streaming)
        fn = ir.Function(self.module, ir.FunctionType(I32, [I32, I32, PTR]), name=name)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        task, ntasks, clo = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        values = [b.load(b.gep(clo, [ir.Constant(I32, 0), ir.Constant(I32, i)],
                               source_etype=struct), typ=t)
                  for i, t in enumerate(fields)]
        b.ret(b.call(body_fn, [task, ntasks, *values]))
        return fn

    def _task_body(self, name, s: S.For, vars_, bufs, fields, streaming) -> ir.Function:
        fn = ir.Function(self.module, ir.FunctionType(I32, [I32, I32, *fields]), name=name)
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        em = FunctionEmitter(self, fn, in_parallel=True)
        em.streaming = streaming
        task, ntasks, *values = fn.args
        b = em.b
        for v, a in zip(vars_, values):
            em.vars[v] = a
        for buf, a in zip(bufs, values[len(vars_):]):
            a.add_attribute("noalias")
            em.bufs[buf] = a
        # static schedule: task t runs iterations [t * chunk, min((t + 1) * chunk, extent))
        start = em.expr(s.min)
        extent = em.expr(s.extent)
        t64, n64 = b.sext(task, I64), b.sext(ntasks, I64)
        chunk = b.sdiv(b.add(extent, b.sub(n64, ir.Constant(I64, 1))), n64)
        lo = b.mul(t64, chunk)
        hi = b.add(lo, chunk)
        hi = b.select(b.icmp_signed("<", hi, extent), hi, extent)
        # heap buffers of the iterations' bodies: one per task, not one per iteration
        heap_bufs, body = leading_allocations(s.body, s.loop_var)

        emit = functools.partial(em._loop, s.loop_var, b.add(start, lo), b.add(start, hi), body)
        for buf in reversed(heap_bufs):
            emit = functools.partial(em._in_heap_buffer, buf, emit)
        emit()
        if streaming:
            em._fence_streaming_stores()  # before the task reports completion to the pool
        em.b.ret(ir.Constant(I32, 0))
        return fn

    def add_function(self, f: S.PrimFunc) -> ir.Function:
        self.func_name = f.name
        self.alloc_codes = allocation_codes(f.body)
        externs = extern_manifest(f)  # sorted: a symbol's index is its index in error codes
        self.externs = [e["symbol"] for e in externs]
        self.extern_slot_names = extern_c.slot_names(externs)
        params = [PTR] * len(f.params) + [I64] * len(f.shape_vars)
        fn = ir.Function(self.module, ir.FunctionType(I32, params), name=f.name)
        fn.attributes.add("nounwind")
        for a, buf in zip(fn.args, f.params):
            a.add_attribute("noalias")
            a.attributes.align = dt.storage_bytes(buf.dtype)
            a.name = buf.name
        em = FunctionEmitter(self, fn, in_parallel=False)
        for buf, a in zip(f.params, fn.args):
            em.bufs[buf] = a
        for v, a in zip(f.shape_vars, fn.args[len(f.params):]):
            a.name = v.name
            em.vars[v] = a if not dt.is_float(v.dtype) else _scalar_from_bits(em.b, a, v)
        em.stmt(f.body)
        em.b.ret(ir.Constant(I32, 0))
        return fn

    def text(self) -> str:
        src = str(self.module)
        attrs = f'"prefer-vector-width"="{self.vector_bits}"'
        if self.target_cpu:
            attrs += f' "target-cpu"="{self.target_cpu}"'
        if self.target_features:
            attrs += f' "target-features"="{self.target_features}"'
        return src.replace(") nounwind\n", f") nounwind {attrs}\n")


def _scalar_from_bits(b: ir.IRBuilder, a, v):
    """A float scalar parameter's value: the ABI passes every scalar as an int64, a float one
    as its IEEE-754 bit pattern in the low bits (runtime.module.scalar_bits)."""
    t = scalar_type(v.dtype)
    bits = a if dt.bits(v.dtype) == 64 else b.trunc(a, ir.IntType(dt.bits(v.dtype)))
    return b.bitcast(bits, t, name=v.name)


def emit_llvm_ir(func: S.PrimFunc, target=None) -> str:
    """LLVM IR text of a lowered kernel."""
    cpu = getattr(target, "cpu", "") if target is not None else ""
    feats = getattr(target, "features", "") if target is not None else ""
    bits = getattr(target, "vector_bits", 512) if target is not None else 512
    cg = CodeGen(cpu, feats, bits)
    cg.add_function(func)
    return cg.text()
