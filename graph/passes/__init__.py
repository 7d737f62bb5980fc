"""Graph passes, run from one ordered list.

A pass is a pure function ``Graph -> Graph`` in a file of its own. ``PASSES`` is the order
:func:`tensorlang.graph.build` runs them in; ``min_level`` is the lowest ``opt_level`` that runs
each one. Ordering constraints:

- ``infer_types`` first: every later pass trusts the recorded shapes and dtypes.
- ``widen_float16`` next, at every level (it is accuracy, not speed), and before
  ``fold_constants``, which folds the casts of float16 weights it adds.
- ``fold_qdq`` right after ``infer_types`` and before ``fold_constants``: it reads the
  integer weights under their DequantizeLinear nodes, which ``fold_constants`` would fold
  into float constants (the ones it leaves are folded there).
- ``fold_constants`` before ``eliminate_dead_code``: folding orphans the producers of the folded
  values (e.g. the Shape -> Gather chain feeding a Reshape), which DCE then removes.
- ``eliminate_common_subexpr`` before ``simplify_algebra``: merged constants let more rewrites
  match; ``fold_scale_into_conv`` after both (x*1 is gone, the conv -> bn pairs are adjacent)
  and before DCE, which drops the unfolded conv/bn nodes it orphans.
- ``trim_conv_taps`` after ``fold_scale_into_conv`` (it cuts the folded weight) and before
  ``convert_layout`` / ``pack_conv_weights``, which must see the cut kernel.
- ``flush_denormal_weights`` after ``fold_scale_into_conv`` and ``trim_conv_taps`` (the
  weights they fold and cut are final) and before the layout and packing passes, which copy
  the weights it flushes into their blocked layouts.
- ``conv1d_as_conv2d`` after ``fold_scale_into_conv`` (which sees the convs as imported)
  and right before ``sink_reshape``, which moves its reshapes back to 3-D below the ops
  that follow and collapses them into the next conv's reshape to 4-D; ``conv3d_as_conv2d``
  beside it (a 3-D conv as one 2-D conv over its stacked time taps), for the same reasons.
- ``sink_reshape`` after ``fold_scale_into_conv`` (which folds a bias add through the
  importer's reshape after a dense) and before ``fuse_ops``: elementwise ops moved above the
  reshape fuse into the dense that feeds them.
- ``convert_layout`` after ``fold_scale_into_conv`` (batch norms and scales are inside the
  conv weights, so conv -> relu -> add chains are adjacent) and before ``pack_conv_weights``,
  which packs the weights of the convs that stayed NCHW; these and ``pack_dense_weights``
  before DCE (which drops the unpacked constants).
- ``pad_conv_channels`` right before ``convert_layout``, which blocks the padded conv by 16,
  and after ``fold_scale_into_conv`` and ``trim_conv_taps``: it pads the final weight and bias.
- ``fuse_ops`` last: every earlier pass sees single operators; after it a node is a kernel.
- memory planning (:mod:`.plan_memory`) runs on the execution plan after kernels are chosen,
  not on the graph.

``opt_level``: 0 -- types and DCE only (one kernel per operator); 1 -- constant folding,
algebraic simplification, convs' all-padding taps dropped, subnormal conv / dense / matmul
weights zeroed, 1-D convs as 2-D ones, fusion;
2 (the default) -- also CSE and folding batch norm and per-channel scales into conv/dense weights, conv chains in blocked
activation layouts NCHW16c / NCHW8c by channel count or, with a tuning log, per conv from its
records (``convert_layout``), and conv and dense weights packed into the library's blocked
layouts at build time; 3 -- the same as 2.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from ..ir import Graph
from .conv1d_as_conv2d import conv1d_as_conv2d
from .conv3d_as_conv2d import conv3d_as_conv2d
from .convert_layout import convert_layout
from .cse import eliminate_common_subexpr
from .dead_code import eliminate_dead_code
from .flush_denormal_weights import flush_denormal_weights
from .fold_constants import fold_constants
from .fold_qdq import fold_qdq
from .fold_scale import fold_scale_into_conv
from .fuse_ops import fuse_ops
from .infer_types import infer_types
from .pack_conv_weights import pack_conv_weights
from .pack_dense_weights import pack_dense_weights
from .pad_conv_channels import pad_conv_channels
from .simplify import simplify_algebra
from .sink_reshape import sink_reshape
from .trim_conv_taps import trim_conv_taps
from .widen_float16 import widen_float16

PASSES: list[tuple[str, Callable[[Graph], Graph], int]] = [
    ("infer_types", infer_types, 0),
    ("widen_float16", widen_float16, 0),
    ("fold_qdq", fold_qdq, 1),
    ("fold_constants", fold_constants, 1),
    ("eliminate_common_subexpr", eliminate_common_subexpr, 2),
    ("simplify_algebra", simplify_algebra, 1),
    ("fold_scale_into_conv", fold_scale_into_conv, 2),
    ("trim_conv_taps", trim_conv_taps, 1),
    ("flush_denormal_weights", flush_denormal_weights, 1),
    ("conv1d_as_conv2d", conv1d_as_conv2d, 1),
    ("conv3d_as_conv2d", conv3d_as_conv2d, 1),
    ("sink_reshape", sink_reshape, 1),
    ("pad_conv_channels", pad_conv_channels, 2),
    ("convert_layout", convert_layout, 2),
    ("pack_conv_weights", pack_conv_weights, 2),
    ("pack_dense_weights", pack_dense_weights, 2),
    ("eliminate_dead_code", eliminate_dead_code, 0),
    ("fuse_ops", fuse_ops, 1),
]


def run_passes(g: Graph, opt_level: int = 2, log: list | None = None,
               dump_dir: str | os.PathLike | None = None,
               on_pass: Callable[[str, Graph, Graph], None] | None = None,
               options: dict[str, dict] | None = None) -> Graph:
    """Run every pass of ``PASSES`` enabled at ``opt_level``; append (name, seconds, node count)
    to ``log`` when given; with ``dump_dir``, write the graph before the first pass
    (``00_input.txt``) and after each pass (``NN_<pass>.txt``); ``on_pass(name, before,
    after)`` is called after each pass. ``options``: keyword arguments per pass name (e.g.
    ``{"convert_layout": {"blocks": 8}}``)."""
    # (2.5 ran as 2 silently; "3" failed comparing with an int)
    if isinstance(opt_level, bool) or opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0 to 3, got {opt_level!r}")
    options = options or {}
    unknown = set(options) - {name for name, _, _ in PASSES}
    if unknown:
        raise ValueError(f"run_passes: options for unknown passes {sorted(unknown)}; the passes "
                         f"are {[name for name, _, _ in PASSES]}")
    if dump_dir is not None:
        os.makedirs(dump_dir, exist_ok=True)
        Path(dump_dir, "00_input.txt").write_text(str(g) + "\n")
    k = 0
    for name, fn, min_level in PASSES:
        if opt_level < min_level:
            continue
        t0 = time.perf_counter()
        before, g = g, fn(g, **options.get(name, {}))
        if log is not None:
            log.append((name, time.perf_counter() - t0, len(g.nodes)))
        if on_pass is not None:
            on_pass(name, before, g)
        k += 1
        if dump_dir is not None:
            Path(dump_dir, f"{k:02d}_{name}.txt").write_text(str(g) + "\n")
    return g


def describe() -> str:
    return "\n".join(f"{i + 1}. {name} (opt_level >= {lvl})"
                     for i, (name, _, lvl) in enumerate(PASSES))


__all__ = ["PASSES", "conv1d_as_conv2d", "conv3d_as_conv2d", "convert_layout", "describe",
           "eliminate_common_subexpr", "eliminate_dead_code", "flush_denormal_weights",
           "fold_constants", "fold_qdq", "fold_scale_into_conv", "fuse_ops", "infer_types",
           "pack_conv_weights", "pack_dense_weights", "pad_conv_channels", "run_passes",
           "simplify_algebra", "sink_reshape", "trim_conv_taps", "widen_float16"]
