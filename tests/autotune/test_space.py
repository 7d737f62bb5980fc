"""Spaces and templates: indexing, fallback, and every config's kernel against numpy."""

from __future__ import annotations

import autotune_test_templates  # noqa: F401 - registers the test templates
import numpy as np
import pytest
from tensorlang.autotune.space import ConfigSpace, split_candidates

import tensorlang as tl
from tensorlang import autotune


def test_split_policies():
    assert [e.size for e in split_candidates(8, 2, "factors")] == \
        [[-1, 1], [-1, 2], [-1, 4], [-1, 8]]
    three = [e.size for e in split_candidates(12, 3, "factors")]
    assert [-1, 2, 3] in three and all(12 % (a * b) == 0 for _, a, b in three)
    assert [e.size[1] for e in split_candidates(10, 2, "power2")] == [1, 2, 4, 8]
    with pytest.raises(ValueError, match="unknown policy"):
        split_candidates(8, 2, "bogus")


def test_index_round_trip_and_json():
    space = autotune.create_task("test_vadd", (64,)).config_space
    assert isinstance(space, ConfigSpace) and len(space) == 7 * 6
    for i in range(len(space)):
        cfg = space.get(i)
        assert space.index_of(cfg.to_json()["entity"]) == i
        assert space.from_json(cfg.to_json()).index == i
    with pytest.raises(ValueError, match="not a candidate"):
        space.index_of({"split": [-1, 3], "ann": ["none", "none"]})
    with pytest.raises(IndexError):
        space.get(len(space))


def test_get_config_outside_template():
    with pytest.raises(autotune.TemplateError, match="outside a template"):
        autotune.get_config()
    with pytest.raises(autotune.TemplateError, match="no autotune template named"):
        autotune.create_task("no_such_template", (1,))


def test_a_tasks_configs_share_its_computes():
    """computes_once: within a task every config schedules the same compute tensors (declared
    once), and the kernels stay right (_check_all builds whole spaces this way); a template
    called outside a task (under a dispatch context) declares its own."""
    task = autotune.create_task("conv2d_nchwc", (1, 16, 6, 6, 16, 3, 3, 1, 1, 16, "float32"))
    space = task.config_space
    (_, t0), (_, t1) = (task.instantiate(space.get(i)) for i in (0, len(space) - 1))
    assert all(a is b for a, b in zip(t0, t1))
    _, fresh = autotune.get_template("conv2d_nchwc")(*task.args)
    assert all(a is not b for a, b in zip(t0, fresh))
    other = autotune.create_task("conv2d_nchwc", task.args)
    assert all(a is not b for a, b in zip(t0, other.instantiate(space.get(0))[1]))
    assert autotune.computes_once(lambda: "declared") == "declared"  # outside a task


_LIBRARY_OPS = {
    "matmul": lambda m, n, k: ((m, k), (k, n), tl.ops.matmul),
    "dense": lambda m, n, k: ((m, k), (n, k), tl.ops.dense),
    "batch_matmul": lambda m, n, k: ((3, m, k), (3, k, n), tl.ops.batch_matmul),
}


@pytest.mark.parametrize("name,mnk", [("matmul", (64, 64, 64)), ("matmul", (1024, 1024, 1024)),
                                      ("matmul", (100, 72, 40)), ("dense", (128, 768, 768)),
                                      ("dense", (1, 1000, 2048)), ("batch_matmul", (128, 64, 96))])
def test_matmul_family_fallback_is_the_library_default(name, mnk):
    """The untuned kernel of each matmul-family template is tl.ops.default_schedule's (the
    same lowered text), also for M that 6 rows do not divide and for dense's row-reduction
    path (a one-point space); the fallback is a point of the space."""
    a_shape, b_shape, op = _LIBRARY_OPS[name](*mnk)
    targs = (3, *mnk) if name == "batch_matmul" else mnk
    task = autotune.create_task(name, (*targs, "float32"))
    fallback = str(tl.lower(*task.instantiate(autotune.FallbackConfig())))
    names = ("X", "W") if name == "dense" else ("A", "B")
    a, b = (tl.placeholder(sh, name=nm) for sh, nm in zip((a_shape, b_shape), names))
    c = op(a, b)
    assert fallback == str(tl.lower(tl.ops.default_schedule(c), [a, b, c]))
    fb = task.config_space.get(task.config_space.fallback_index())
    assert str(tl.lower(*task.instantiate(fb))) == fallback


def test_matmul_template_refuses_spilling_register_tiles():
    task = autotune.create_task("matmul", (64, 256, 32, "float32"))
    space = task.config_space
    refused = 0
    for i in range(len(space)):
        c = space.get(i)
        if c["tile_m"].val * -(-c["tile_n"].val // 16) > 28:
            with pytest.raises(tl.ScheduleError, match="accumulator vectors"):
                task.instantiate(c)
            refused += 1
    assert refused > 0


@pytest.mark.parametrize("args", [(1, 64, 56, 56, 64, 3, 3, 1, 1), (1, 512, 7, 7, 512, 3, 3, 1, 1),
                                  (1, 64, 56, 56, 256, 1, 1, 1, 0)])
def test_conv2d_nchwc_fallback_is_the_library_default(args):
    """The template's default config builds the loop nest of tl.ops.default_schedule (the
    same up to loop variable names): rows outside the oc blocks when the weights fit in L2
    (the first and last case), inside when they do not (the 9.4 MB of 512 -> 512 3x3)."""
    import re

    n, c, h, w, oc, kh, kw, st, pad = args
    task = autotune.create_task("conv2d_nchwc", (*args, 16, "float32"))
    fallback = str(tl.lower(*task.instantiate(autotune.FallbackConfig())))
    x = tl.placeholder((n, c // 16, h, w, 16), name="x")
    wt = tl.placeholder((oc // 16, c // 16, kh, kw, 16, 16), name="w")
    y = tl.ops.conv2d_nchwc(x, wt, stride=st, padding=pad)
    library = str(tl.lower(tl.ops.default_schedule([y]), [x, wt, y]))

    def shape(text):
        return re.sub(r"[A-Za-z_][\w.]*", "v", text)

    assert shape(fallback) == shape(library)
    tasks = re.findall(r"parallel for (b\.\S+) in", library)  # the conv's (not the pad's)
    rows_outside = tasks[-1].startswith("b.y")
    assert rows_outside == (oc * c * kh * kw * 4 <= 256 * 1024)


def _check_all(task, ref_fn, limit=None, seed=0):
    space = task.config_space
    idxs = list(range(len(space)))
    if limit is not None:
        idxs = list(np.random.default_rng(seed).choice(idxs, size=limit, replace=False))
    rng = np.random.default_rng(1)
    checked = illegal = 0
    for i in idxs:
        try:
            s, args = task.instantiate(space.get(int(i)))
        except tl.ScheduleError:
            illegal += 1
            continue
        f = tl.build(s, args, name="cand")
        ins = [rng.uniform(-1, 1, size=[int(d.value) for d in a.shape]).astype("float32")
               for a in args[:-1]]
        out = np.zeros([int(d.value) for d in args[-1].shape], dtype="float32")
        f(*ins, out)
        np.testing.assert_allclose(out, ref_fn(*ins), rtol=1e-4, atol=1e-4,
                                   err_msg=f"config {space.get(int(i))}")
        checked += 1
    return checked, illegal


def test_whole_small_space_matches_numpy():
    checked, illegal = _check_all(autotune.create_task("test_vadd", (24,)),
                                  lambda a, b: a * b + 1.0)
    assert checked == len(autotune.create_task("test_vadd", (24,)).config_space)
    assert illegal == 0


@autotune.template("test_reorder_axes")
def _reorder_by_axes(n):
    """TVM's form of a reorder candidate: the axes themselves, not their indices."""
    a = tl.placeholder((n, n), name="A")
    b = tl.compute((n, n), lambda i, j: a[j, i] * 2.0, name="B")
    s = tl.create_schedule(b.op)
    cfg = autotune.get_config()
    i, j = b.op.axis
    jo, ji = s[b].split(j, factor=4)
    cfg.define_reorder("order", [i, jo, ji], policy="candidate",
                       candidate=[[i, jo, ji], [jo, i, ji], [jo, ji, i]])
    cfg["order"].apply(s, b, [i, jo, ji])
    return s, [a, b]


def test_reorder_candidates_may_name_the_axes():
    task = autotune.create_task("test_reorder_axes", (8,))
    perms = [e.perm for e in task.config_space.knobs["order"].entities]
    assert perms == [[0, 1, 2], [1, 0, 2], [1, 2, 0]]
    checked, illegal = _check_all(task, lambda a: a.T * 2.0)
    assert (checked, illegal) == (3, 0)


def test_reorder_candidate_refuses_a_foreign_axis_or_a_non_permutation():
    a = tl.placeholder((4, 4), name="A")
    i, j = tl.compute((4, 4), lambda i, j: a[i, j], name="B").op.axis
    other = tl.reduce_axis((0, 4), "k")
    cs = ConfigSpace()
    with pytest.raises(ValueError, match="candidate axis .* is not one of the axes"):
        cs.define_reorder("r", [i, j], policy="candidate", candidate=[[i, other]])
    with pytest.raises(ValueError, match=r"candidate \[0, 0\] is not a permutation"):
        cs.define_reorder("r", [i, j], policy="candidate", candidate=[[i, i]])


def test_matmul_space_sample_matches_numpy():
    checked, _ = _check_all(autotune.create_task("matmul", (12, 16, 8, "float32")),
                            lambda a, b: a @ b, limit=24)
    assert checked > 10


@pytest.mark.slow
def test_matmul_whole_space_matches_numpy():
    task = autotune.create_task("matmul", (5, 8, 4, "float32"))
    checked, illegal = _check_all(task, lambda a, b: a @ b)
    assert checked + illegal == len(task.config_space) and checked > 0


def test_features_are_fixed_length_and_tell_configs_apart():
    task = autotune.create_task("matmul", (64, 64, 64, "float32"))
    space = task.config_space
    feats = {}
    for i in range(0, len(space), max(1, len(space) // 40)):
        f = autotune.features.config_features(task, space.get(i))
        if f is not None:
            assert f.shape == (autotune.N_FEATURES,) and np.isfinite(f).all()
            feats[i] = f
    again = autotune.features.config_features(task, space.get(next(iter(feats))))
    np.testing.assert_array_equal(again, feats[next(iter(feats))])  # a pure function
    distinct = {f.tobytes() for f in feats.values()}
    assert len(distinct) > 0.8 * len(feats)


def _conv_ref(x, w, pad):
    """numpy reference for the blocked conv (stride 1): unblock, convolve, block again."""
    n, cbn, h, wd, cb = x.shape
    obn, _, kh, kw, _, ob = w.shape
    xn = x.transpose(0, 1, 4, 2, 3).reshape(n, cbn * cb, h, wd)
    wn = w.transpose(0, 5, 1, 4, 2, 3).reshape(obn * ob, cbn * cb, kh, kw)
    xp = np.pad(xn, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, obn * ob, oh, ow), np.float32)
    for oy in range(oh):
        for ox in range(ow):
            y[:, :, oy, ox] = np.einsum("oikl,nikl->no", wn, xp[:, :, oy:oy + kh, ox:ox + kw])
    return y.reshape(n, obn, ob, oh, ow).transpose(0, 1, 3, 4, 2)


def test_dense_space_sample_matches_numpy():
    checked, _ = _check_all(autotune.create_task("dense", (6, 32, 16, "float32")),
                            lambda x, w: x @ w.T, limit=12)
    assert checked == 12


def test_batch_matmul_space_sample_matches_numpy():
    checked, _ = _check_all(autotune.create_task("batch_matmul", (3, 7, 16, 8, "float32")),
                            lambda a, b: a @ b, limit=16)
    assert checked == 16


# the whole space (384 configs, ~23 s) with `-m slow`; a sample of it in the default run (the
# seeded 12 hold every value of every knob, as the 24 it was did)
@pytest.mark.parametrize("limit", [12, pytest.param(None, marks=pytest.mark.slow)])
def test_conv2d_nchwc_wide_space_enumerates_and_matches_numpy(limit):
    # OW 2, OH 4, two output-channel blocks: every knob has at least two values
    task = autotune.create_task("conv2d_nchwc", (1, 16, 4, 2, 32, 3, 3, 1, 1, 16, "float32"))
    dims = {k: len(v) for k, v in task.config_space.knobs.items()}
    assert dims == {"reg_n": 2, "oc_vec": 2, "rows": 3, "red_order": 2, "unroll_kw": 2,
                    "parallel": 4}
    checked, illegal = _check_all(task, lambda x, w: _conv_ref(x, w, 1), limit=limit)
    assert checked == (limit or len(task.config_space)) and illegal == 0


def test_conv2d_nchwc_refuses_register_tiles_beyond_the_limit():
    task = autotune.create_task("conv2d_nchwc", (1, 16, 8, 28, 64, 3, 3, 1, 1, 16, "float32"))
    space = task.config_space
    refused = 0
    for i in range(len(space)):
        c = space.get(i)
        big = c["reg_n"].val * c["oc_vec"].val * c["rows"].val > 48
        if big:
            with pytest.raises(tl.ScheduleError, match="accumulator vectors"):
                task.instantiate(c)
            refused += 1
    assert refused > 0


@pytest.mark.parametrize("args", [(1, 32, 112, 112, 3, 3, 1, 1), (1, 64, 56, 56, 3, 3, 2, 1),
                                  (1, 256, 7, 7, 3, 3, 1, 1)])
def test_depthwise_conv2d_fallback_is_the_library_default(args):
    n, c, h, w_, kh, kw, st, pad = args
    task = autotune.create_task("depthwise_conv2d", (*args, "float32"))
    fallback = str(tl.lower(*task.instantiate(autotune.FallbackConfig())))
    x = tl.placeholder((n, c, h, w_), name="x")
    w = tl.placeholder((c, 1, kh, kw), name="w")
    y = tl.ops.depthwise_conv2d_nchw(x, w, stride=st, padding=pad)
    assert fallback == str(tl.lower(tl.ops.default_schedule(y), [x, w, y]))


# the whole spaces (20 and 24 configs) with `-m slow`; 8 of each in the default run
@pytest.mark.parametrize("limit", [8, pytest.param(None, marks=pytest.mark.slow)])
def test_depthwise_conv2d_whole_space_matches_numpy(limit):
    from tensorlang.autotune.templates import _depthwise_ref

    for args, pad in (((1, 3, 6, 7, 3, 3, 1, 1, "float32"), 1),
                      ((1, 2, 9, 40, 3, 3, 1, 0, "float32"), 0)):
        task = autotune.create_task("depthwise_conv2d", args)
        checked, illegal = _check_all(task, lambda x, w, p=pad: _depthwise_ref(x, w, 1, p),
                                      limit=limit)
        assert checked == (limit or len(task.config_space)) and illegal == 0
