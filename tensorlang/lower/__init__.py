"""Schedule -> loop IR. Four construction steps (inline, bound inference, loop nest, entry
checks), then the passes in PASSES, in order."""

from __future__ import annotations

from ..errors import LoweringError
from ..ir.functor import expr_depth, fit_recursion, stmt_depth
from ..ir.stmt import PrimFunc
from .bound import infer_bounds
from .entry_checks import add_entry_checks
from .inline import inline_bodies
from .loop_nest import build_loop_nest
from .passes.check_indices import check_indices
from .passes.guard_padded_reads import guard_padded_reads
from .passes.hoist_allocations import hoist_allocations
from .passes.hoist_guards import hoist_guards
from .passes.loop_partition import partition_loops
from .passes.plan_allocation import plan_allocation
from .passes.promote_float16 import promote_float16
from .passes.simplify import simplify_stmt
from .passes.storage_flatten import storage_flatten
from .passes.tensorize import tensorize_loops
from .passes.transpose_gathers import transpose_gathers
from .passes.unroll import unroll_loops
from .passes.vectorize import vectorize_loops

# The ordered pass list. Constraints:
# - simplify first: proven guards disappear before vectorize looks for tails;
# - guard_padded_reads after it (the cost model's feature IR ends at simplify, with selects),
#   before loop_partition, which cuts loops at the guards it makes;
# - loop_partition after simplify (only the guards that can fail are left), and simplify again
#   so the partitioned pieces lose their guards; hoist_guards then moves what is left out of
#   the loops it does not depend on (out of vector loops before vectorize), and again after
#   unroll, where the unrolled copies' guards have folded;
# - check_indices before storage_flatten: an index is checked per dimension (a flat index in
#   range can hide a row index out of range), and before vectorize and unroll, which then copy
#   each check with its load;
# - storage_flatten before vectorize: vector accesses are recognised on flat indices;
# - hoist_allocations after plan_allocation (it moves heap buffers only) and before unroll,
#   which would copy an allocation into each unrolled iteration;
# - tensorize right after flattening: it checks each tensorized nest's flat addresses on the
#   real buffers and replaces it with the intrinsic's vector code, which no later pass rewrites;
# - promote_float16 after flattening (it rewrites flat loads/stores), before vectorize;
# - vectorize before unroll: the vector body is built once, then copied;
# - simplify after unroll: unrolled copies get constant indices (what lets LLVM keep tiles in
#   registers);
# - transpose_gathers last: it compares the simplified bases of the unrolled copies' gathers.
PASSES = (
    ("simplify", simplify_stmt),
    ("guard_padded_reads", guard_padded_reads),
    ("loop_partition", partition_loops),
    ("simplify_partitioned", simplify_stmt),
    ("hoist_guards", hoist_guards),
    ("check_indices", check_indices),
    ("storage_flatten", storage_flatten),
    ("plan_allocation", plan_allocation),
    ("hoist_allocations", hoist_allocations),
    ("tensorize", tensorize_loops),
    ("promote_float16", promote_float16),
    ("vectorize", vectorize_loops),
    ("unroll", unroll_loops),
    ("simplify_final", simplify_stmt),
    ("hoist_guards_final", hoist_guards),
    ("transpose_gathers", transpose_gathers),
)


PASS_NAMES = tuple(n for n, _ in PASSES)
# statement nesting below which a lowered kernel needs no more recursion room than its
# expressions (fit_recursion leaves 2000 frames of slack over theirs)
SHALLOW_STMTS = 100

# Named stages: the passes a partial lowering runs, by name, in PASSES order. A pass added to
# PASSES is in no stage until it is added here, so what a stage's IR looks like cannot change
# by accident.
#
# FEATURE_STAGE: the IR the cost model's features read (autotune/features.py), so the IR that
# trained models and transfer records saw. Loops keep their annotations (vectorized / unrolled /
# parallel: vectorize and unroll would only multiply the statements) and each store appears once.
# Left out, after simplify: loop_partition copies each tail-guarded nest into a guard-free main
# nest and a tail nest (4 of the ~11 ms of lowering a 1024^3 matmul candidate) and the simplify
# after it only cleans those copies; features read "a tail guard sits inside this loop" from the
# guard itself, which is what the partition would have split off. storage_flatten: it simplifies
# every flattened index (a third of the rest); the features flatten an access's indices
# themselves, unsimplified (the coefficients of the loop variables are the same).
# guard_padded_reads and hoist_guards: the features read a padded conv's selects, as before those
# passes existed. check_indices: a gather's run-time index check is one compare, not a feature
# of the schedule, and its walk cost 0.2 of 0.75 ms per matmul.
FEATURE_STAGE = ("simplify",)


def lower(schedule, args, name: str = "main", check: bool = True, stop_after: str | None = None,
          skip: tuple[str, ...] = (), simple_mode: bool = False,
          stage: tuple[str, ...] | None = None) -> PrimFunc:
    """Lower a schedule to a loop-IR kernel taking `args` (tensors) in that order.

    simple_mode: accepted for TVM scripts (`tvm.lower(s, args, simple_mode=True)`, which prints
    the loops without TVM's buffer declarations). The result is the same either way: its text
    is already the plain loop nest, with one header line naming the arguments.

    stop_after: the name of the last pass of PASSES to run (the IR at that point, e.g.
    "storage_flatten" for the cost model's features, which need loops still annotated and each
    store once); skip: names of passes to leave out. stage: exactly the passes to run, in
    PASSES order (a named stage such as FEATURE_STAGE; not with stop_after or skip). All three
    are for analysis: the result of a partial pipeline is not meant for codegen."""
    from ..build import check_kernel_name  # build imports this module

    check_kernel_name(name)
    if not isinstance(simple_mode, bool):
        raise TypeError(f"lower: simple_mode must be a bool, got {type(simple_mode).__name__}")
    if stage is not None and (stop_after is not None or skip):
        raise ValueError("lower: stage names every pass to run; it takes no stop_after or skip")
    unknown = [n for n in (*skip, *([stop_after] if stop_after is not None else []),
                           *(stage or ())) if n not in PASS_NAMES]
    if unknown:
        raise ValueError(f"lower: unknown pass {unknown[0]!r}; passes: {list(PASS_NAMES)}")
    if check and schedule.check_legality:
        from ..analysis import check_schedule

        check_schedule(schedule)
    # every build: an out-of-bounds read is refused whatever the schedule (check=False only
    # turns off the schedule's dependence checks)
    from ..analysis.bounds import check_bounds

    proofs = check_bounds(schedule)
    bodies = inline_bodies(schedule)
    bounds = infer_bounds(schedule, bodies)
    func = build_loop_nest(schedule, bodies, bounds, args, name)
    # the shape variables' values the proofs need (n >= 1 for a read of A[n - 1])
    func = add_entry_checks(func, schedule, proofs)
    body = func.body
    for pass_name, fn in PASSES:
        if pass_name not in skip and (stage is None or pass_name in stage):
            body = fn(body)
        if pass_name == stop_after:
            break
    # the walkers after lowering (codegen, the manifest) recurse once per level: unrolled code
    # can nest deeper than its computes (a let per transposed gather of 197 unrolled rows:
    # 1046 levels, a RecursionError in the build of a searched softmax schedule). Statements
    # nested a little are within the room the computes' expressions were given
    if stmt_depth(body) > SHALLOW_STMTS:
        fit_recursion(expr_depth(body), f"kernel {name}", LoweringError,
                      remedy="unroll less (a smaller auto_unroll_max_step) or split the loop")
    return func.replace(body=body)
