"""``graph.extract_tasks``: the tunable kernels of a graph as ``autotune`` tasks (see
:mod:`.tuning`; imported on first use so that importing the graph layer does not import the
tuner and its dependencies)."""

from __future__ import annotations

from .ir import Graph


def extract_tasks(g: Graph, target: str = "llvm", opt_level: int = 2,
                  blocks=None) -> list:
    """One ``autotune`` task per distinct tunable kernel workload of ``g`` after the graph passes
    (fused groups included), with ``weight`` = how many kernels share it; tune them with
    ``autotune.tune_tasks(tasks, n_trial, log)`` and build with ``graph.build(g,
    tuning_log=log)``. ``blocks`` (e.g. ``(16, 8)``): also tune the conv kernels in each of
    these activation blocks; the build then gives each conv the block of its fastest record."""
    from .tuning import extract_tasks as _extract

    return _extract(g, target, opt_level, blocks)
