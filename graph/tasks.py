"""``graph.extract_tasks``: the tunable kernels of a graph as ``autotune`` tasks (see
:mod:`.tuning`; imported on first use so that importing the graph layer does not import the
tuner and its dependencies)."""

from __future__ import annotations

from .ir import Graph


def extract_tasks(g: Graph, target: str = "llvm", opt_level: int = 2,
                  blocks=None, sizes: dict | None = None,
                  template_free: bool | str = False) -> list:
    """One ``autotune`` task per distinct tunable kernel workload of ``g`` after the graph passes
    (fused groups included), with ``weight`` = how many kernels share it; tune them with
    ``autotune.tune_tasks(tasks, n_trial, log)`` and build with ``graph.build(g,
    tuning_log=log)``. ``blocks`` (e.g. ``(16, 8)``): also tune the conv kernels in each of
    these activation blocks; the build then gives each conv the block of its fastest record.

    A graph with shape variables (issue 19) is tuned at representative sizes: ``sizes`` gives
    each variable one (``{"batch": 8, "seq": 128}``) and the tasks are those of the graph
    specialised to them; ``graph.build(g, specialize={"batch": [8], "seq": [128]},
    tuning_log=log)`` then runs those sizes on the tuned kernels (the symbolic kernels keep
    their default schedules).

    ``template_free`` (issue 20): also a template-free task (autotune's sketch rules) for every
    kernel no template tunes (:mod:`.tuning_free`); the build applies their records too. Tuning
    one (any tuner, ``tune_tasks``, ``TaskScheduler``) also logs its default kernel's time, once
    per log, with the trials' measure option, and the build keeps the default wherever the
    search did not beat it (the searched softmax of a 197-token ViT was 1.8x slower than the
    default); ``tuning_free.measure_baselines`` adds it to a log tuned before.
    ``template_free="all"``: every kernel's task is template-free, convs and matmuls included
    (as Ansor tunes a model: no template tasks); the build applies a kernel's template-free
    record where the log holds no template record of it."""
    from .control_flow import has_control_flow, plain_graphs

    if not (isinstance(template_free, bool) or template_free == "all"):
        raise ValueError(f"extract_tasks: template_free must be False, True or 'all', got "
                         f"{template_free!r}")
    if template_free == "all" and blocks:
        raise ValueError("extract_tasks: blocks tune the conv template in activation blocks; "
                         "with template_free='all' no template task is made")
    g = _at_sizes(g, sizes)
    if not has_control_flow(g):
        return _plain_tasks(g, target, opt_level, blocks, template_free)
    # a run-time If: the tasks of every piece and branch the build compiles, merged by workload
    merged: dict = {}
    for part in plain_graphs(g):
        for t in _plain_tasks(part, target, opt_level, blocks, template_free):
            if t.key in merged:
                merged[t.key].nodes += [n for n in t.nodes if n not in merged[t.key].nodes]
            else:
                merged[t.key] = t
    return list(merged.values())


def _plain_tasks(g: Graph, target: str, opt_level: int, blocks, template_free) -> list:
    """extract_tasks of a graph without control flow."""
    from .tuning import extract_tasks as template_tasks

    tasks = [] if template_free == "all" else template_tasks(g, target, opt_level, blocks)
    if template_free:
        from .tuning_free import extract_free_tasks

        tasks += extract_free_tasks(g, target, opt_level, every_kernel=template_free == "all")
    return tasks


def _at_sizes(g: Graph, sizes: dict | None) -> Graph:
    from .build import graph_shape_vars
    from .ir import GraphError

    names = graph_shape_vars(g)
    if not names and not sizes:
        return g
    missing = [v for v in names if v not in (sizes or {})]
    if missing:
        raise GraphError(f"graph {g.name!r} has shape variables {list(names)}: tune it at "
                         f"representative sizes, extract_tasks(g, sizes={{...}}) giving "
                         f"{', '.join(missing)}")
    from .specialize import specialise, variants

    (env,) = variants({v: [n] for v, n in sizes.items()}, names)
    return specialise(g, env)
