"""The cost model's IR is a named stage of the lowering (tl.lower's FEATURE_STAGE): a pass added
to the pipeline does not change what the features see unless the stage names it."""

import importlib

import numpy as np
import pytest
from tensorlang.autotune.features import extract_features, lower_for_features

import tensorlang as tl
from tensorlang.lower import FEATURE_STAGE, PASS_NAMES, PASSES

# the package, not tl.lower (the function of the same name)
lowering = importlib.import_module("tensorlang.lower")


def _padded_conv_like():
    A = tl.placeholder((30, 30), name="A")
    k = tl.reduce_axis((0, 3), name="k")
    C = tl.compute((28, 28), lambda i, j: tl.sum(A[i, j + k] * 2.0, axis=k), name="C")
    s = tl.create_schedule(C)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=8)  # a tail guard (28 = 3 * 8 + 4)
    s[C].reorder(i, jo, s[C].op.reduce_axis[0], ji)
    s[C].vectorize(ji)
    s[C].parallel(i)
    return s, [A, C]


def test_feature_stage_is_loop_nest_plus_first_simplify():
    s, args = _padded_conv_like()
    assert set(FEATURE_STAGE) <= set(PASS_NAMES)
    staged = lower_for_features(s, args)
    # the same IR the stage's passes give when named one by one (the earlier stop_after/skip)
    skip = tuple(n for n in PASS_NAMES[:PASS_NAMES.index("storage_flatten") + 1]
                 if n not in FEATURE_STAGE)
    legacy = tl.lower(s, args, name="f", check=False, stop_after="storage_flatten", skip=skip)
    assert str(staged) == str(legacy)


def test_inserted_pass_does_not_change_features(monkeypatch):
    s, args = _padded_conv_like()
    before_ir = str(lower_for_features(s, args))
    before = extract_features(lower_for_features(s, args))
    calls = []

    def inserted(body):
        calls.append(body)
        return body

    extended = (PASSES[0], ("inserted_for_test", inserted), *PASSES[1:])
    monkeypatch.setattr(lowering, "PASSES", extended)
    monkeypatch.setattr(lowering, "PASS_NAMES", tuple(n for n, _ in extended))
    tl.lower(s, args, check=False)
    assert len(calls) == 1  # the full pipeline runs the new pass ...
    # ... the feature stage does not (with stop_after="storage_flatten" and a skip list, the
    # features would have run it)
    assert str(lower_for_features(s, args)) == before_ir
    np.testing.assert_array_equal(extract_features(lower_for_features(s, args)), before)
    assert len(calls) == 1
    tl.lower(s, args, name="f", check=False, stop_after="storage_flatten",
             skip=("guard_padded_reads", "loop_partition", "simplify_partitioned",
                   "hoist_guards", "check_indices", "storage_flatten"))
    assert len(calls) == 2


def test_stage_with_stop_after_or_unknown_pass_is_refused():
    s, args = _padded_conv_like()
    with pytest.raises(ValueError, match="stage names every pass"):
        tl.lower(s, args, stage=FEATURE_STAGE, stop_after="simplify")
    with pytest.raises(ValueError, match="unknown pass 'no_such_pass'"):
        tl.lower(s, args, stage=("no_such_pass",))
