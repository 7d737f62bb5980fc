"""The `tensorlang` command line. Each subcommand wraps the same public calls a user makes from
Python; subcommands register themselves in COMMANDS."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

COMMANDS: dict[str, tuple[str, Callable, Callable]] = {}

DESCRIPTION = ("tensorlang's command line: tune a template or every kernel of an ONNX model, "
               "compile a model into a deployable folder, run it, inspect a tuning log or a "
               "model. Each subcommand wraps the same public calls a user makes from Python "
               "(README.md, docs/).")


class CLIError(Exception):
    """A user error on the command line (a bad option value, a missing file, a run in which
    every trial failed): reported as one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        # one line, not the usage block: the error is what the user must read
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def _number(kind: type, low: float, strict: bool = False) -> Callable[[str], float]:
    """An argparse type: a `kind` number >= low (> low when strict)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {_KIND_NAMES[kind]}, got {text!r}") \
                from None
        if value < low or (strict and value == low):
            bound = f"greater than {low}" if strict else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    return parse


_KIND_NAMES = {int: "an integer", float: "a number"}
_positive_int = _number(int, 1)


def command(name: str, help_text: str):
    """Register a subcommand: the decorated function configures its parser and returns the
    function that runs it."""

    def deco(configure: Callable):
        COMMANDS[name] = (help_text, configure, None)
        return configure

    return deco


@command("demo", "tune a matmul for a few trials, deploy the best schedule from the log, "
                 "check it against numpy and time both")
def _demo(p: argparse.ArgumentParser):
    p.add_argument("--size", type=_positive_int, default=512, help="M = N = K (default 512)")
    p.add_argument("--trials", type=_positive_int, default=16, help="tuning trials (default 16)")
    p.add_argument("--log", default=None, help="tuning log (default: a temporary file)")

    def run(a) -> int:
        import os
        import tempfile

        import numpy as np

        import tensorlang as tl
        from tensorlang import autotune
        from tensorlang.autotune.templates import matmul

        n = a.size
        if a.log:
            check_log_path(a.log)
        log = a.log or os.path.join(tempfile.mkdtemp(prefix="tensorlang-demo-"), "mm.jsonl")
        task = autotune.create_task("matmul", args=(n, n, n, "float32"), target="llvm")
        print(f"{task}: {len(task.config_space)} configs in the space")
        option = autotune.measure_option(
            builder=autotune.LocalBuilder(n_parallel=2),
            runner=autotune.LocalRunner(number=3, repeat=3, min_repeat_ms=20, timeout=10))
        try:
            autotune.XGBTuner(task, batch_size=8, seed=0).tune(
                n_trial=a.trials, measure_option=option,
                callbacks=[autotune.progress_bar(), autotune.log_to_file(log)])
        finally:
            option.close()
        with autotune.apply_history_best(log):
            s, args = matmul(n, n, n, "float32")
        t0 = time.perf_counter()
        f = tl.build(s, args, name="matmul")
        print(f"deployed the best schedule of {log} (built in {time.perf_counter() - t0:.2f} s)")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, n), dtype=np.float32)
        y = rng.standard_normal((n, n), dtype=np.float32)
        z = np.empty((n, n), dtype=np.float32)
        f(x, y, z)
        ref = x @ y
        err = float(np.abs(z - ref).max() / np.abs(ref).max())
        t_np = min(_time(lambda: x @ y) for _ in range(5))
        # numpy's OpenBLAS threads spin for a while after a call; timed right after them, our
        # kernel ran with one core (67 GFLOP/s instead of 400+)
        time.sleep(0.2)
        r = f.time_evaluator(number=5, repeat=5)(x, y, z)
        gf = 2 * n**3 / r.median / 1e9
        print(f"matmul {n}^3 float32: {gf:.1f} GFLOP/s (numpy {2 * n**3 / t_np / 1e9:.1f}), "
              f"max relative error {err:.1e}")
        return 0 if err < 1e-4 else 1

    return run


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@command("tune", "auto-tune a template (tensorlang tune matmul --args 1024,1024,1024,float32) "
                 "or every kernel of an ONNX model (tensorlang tune model.onnx --log m.jsonl)")
def _tune(p: argparse.ArgumentParser):
    p.add_argument("template", help="template name, e.g. matmul, or an ONNX model (.onnx)")
    p.add_argument("--args", default=None, help="template arguments, comma-separated")
    p.add_argument("--trials", type=_positive_int, default=None,
                   help="trials per task (default 200); a model without --budget: each task "
                        "in turn, heaviest first, gets this many; with --budget: a cap per "
                        "task")
    p.add_argument("--budget", action="append", default=[], type=_budget,
                   help="models: one budget for the whole model, in trials (2000) or time "
                        "(90s, 30m, 2h; both may be given): the task scheduler gives each "
                        "round to the task expected to shorten the model's latency most, "
                        "stops flattened tasks, and writes <log>.curve.jsonl; then each "
                        "task's 3 fastest configs and its default are re-measured (seconds "
                        "per task, after a time budget too)")
    p.add_argument("--log", required=True, help="JSON-lines log (appended; resumed from)")
    p.add_argument("--tuner", default="xgb", help="xgb (default), random or grid")
    p.add_argument("--target", default="llvm", help="llvm [-mcpu=...] (default: this CPU)")
    p.add_argument("--n-parallel", type=_positive_int, default=None, help="builder processes")
    p.add_argument("--scheduler", default=None,
                   help="build and measure on a dask.distributed cluster: its scheduler's "
                        "address (tcp://host:8786); measuring workers are started with "
                        "--resources measure=1 (docs/distributed_tuning.md)")
    p.add_argument("--number", type=_positive_int, default=None,
                   help="calls per timed repeat (default 3; a model's kernels: 1)")
    p.add_argument("--repeat", type=_positive_int, default=None,
                   help="timed repeats (default 3; a model's kernels: 10, each from evicted "
                        "caches, as the model runs them)")
    p.add_argument("--min-repeat-ms", type=_number(float, 0), default=20)
    p.add_argument("--timeout", type=_number(float, 0, strict=True), default=10,
                   help="seconds for one candidate's measurement")
    p.add_argument("--early-stopping", type=_positive_int, default=None)
    p.add_argument("--seed", type=_number(int, 0), default=None)
    p.add_argument("--plot", default=None, help="write the best-so-far curve (PNG)")
    p.add_argument("--tasks", type=_positive_int, default=None,
                   help="models: tune only the N heaviest tasks (FLOPs x kernels sharing them)")
    p.add_argument("--blocks", default=None,
                   help="models: also tune each conv kernel in these activation blocks, e.g. "
                        "16,8; `compile --log` then gives each conv the block of its best record")
    p.add_argument("--template-free", action="store_true",
                   help="models: also tune the kernels no template covers (softmax, norms, "
                        "reductions, elementwise groups) by the sketch rules; each one's default "
                        "schedule is timed once into the log, and `compile --log` keeps it "
                        "wherever no record beats it")
    p.add_argument("--no-templates", action="store_true",
                   help="models: every kernel tuned template-free by the sketch rules, convs "
                        "and matmuls included, none by its template (as Ansor tunes a model); "
                        "`compile --log` keeps a kernel's default wherever no record beats it")
    p.add_argument("--flush-mib", type=_number(int, 0), default=None,
                   help="models: MiB written to evict the caches before each timed call "
                        "(default: calibrated here against runs of the model; with "
                        "--scheduler 64 unless given)")
    p.add_argument("--in-model-top", type=_number(int, 0), default=3,
                   help="models: at the end, each tuned kernel's N best configs and its "
                        "default are timed inside runs of the model and the fastest is "
                        "chosen (a kernel alone can rank its configs otherwise); 0: not")
    _shape_option(p)

    def run(a) -> int:
        from tensorlang.autotune.cli import run_tune  # autotune loads only when used
        from tensorlang.autotune.tune import TUNERS

        if a.tuner not in TUNERS:
            raise CLIError(f"--tuner must be one of {sorted(TUNERS)}, got {a.tuner!r}")
        check_target(a.target)
        check_log_path(a.log)
        if a.plot:
            if a.template.endswith(".onnx"):  # (it was ignored)
                raise CLIError("--plot is for a template's tuning; plot a model's log with "
                               "tensorlang inspect LOG --plot curve.png")
            check_plot_path(a.plot)
        if a.template.endswith(".onnx"):
            if a.args is not None:  # (it was ignored)
                raise CLIError("--args is for a template; a model's kernels take their "
                               "arguments from the model (fix an input's sizes with --shape)")
            return _tune_model(a)
        _refuse_model_options(a)
        a.trials = a.trials or 200
        if a.args is None:
            raise CLIError("--args is required for a template (e.g. --args "
                           "1024,1024,1024,float32); a model is named by its .onnx file")
        return run_tune(a)

    return run


# tune's options for models, each with why a template's tuning has no use for it
_MODEL_OPTIONS = (
    ("budget", "--budget", "a template is one task, tuned for --trials trials"),
    ("flush_mib", "--flush-mib", "a template's candidates are timed back to back"),
    ("template_free", "--template-free",
     "it adds a model's kernels that no template tunes; a template is tuned by its own space"),
    ("no_templates", "--no-templates",
     "it tunes a model's kernels template-free; a template is tuned by its own space"),
    # (the three below were ignored)
    ("shape", "--shape", "a template's sizes are its --args"),
    ("tasks", "--tasks", "a template is one task"),
    ("blocks", "--blocks", "it adds a model's conv kernels in activation blocks"),
)


def _refuse_model_options(a) -> None:
    """A template's tuning given an option that only a model's tuning uses."""
    for attr, option, why in _MODEL_OPTIONS:
        value = getattr(a, attr)
        if value is not None and value is not False and value != []:  # (--flush-mib 0 given)
            raise CLIError(f"{option} is for models (.onnx): {why}")


def check_target(spec: str) -> None:
    """Refuse a target the compiler would not accept, before any tuning or building."""
    from tensorlang.codegen.target import Target

    try:
        Target.from_string(spec)
    except (TypeError, ValueError) as e:
        raise CLIError(f"--target: {e}") from None


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_plot_path(path: str) -> None:
    """--plot, before any work (tune checked it after the tuning): a file in an existing
    folder, never one that is not a PNG (savefig replaced it: a model, a log), and matplotlib
    to draw it."""
    import os

    check_file_to_write(path, "--plot", ".png")
    if os.path.exists(path):
        if not os.path.isfile(path):
            raise CLIError(f"--plot {path} is not a regular file; give a file name (.png)")
        with open(path, "rb") as f:
            head = f.read(len(PNG_MAGIC))
        if head and head != PNG_MAGIC:
            raise CLIError(f"--plot {path} is a file that is not a PNG: not replaced (give a "
                           "new file name)")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CLIError("--plot needs matplotlib (pip install tensorlang[plot])") from None


def check_log_path(path: str) -> None:
    """A tuning log to append to: a file (or none yet) in an existing folder."""
    check_file_to_write(path, "--log", "JSON lines")
    from tensorlang.autotune.record import check_appendable_log

    try:
        check_appendable_log(path)
    except ValueError as e:
        raise CLIError(f"--log {e}") from None


def _budget(text: str) -> tuple[str, float]:
    """An argparse type: ("trials", n) for "2000", ("seconds", s) for "90s", "30m", "1.5h"."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "")
    try:
        value = float(number) * units[unit] if unit else int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected trials (2000) or a time (90s, 30m, 2h), "
                                         f"got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return ("seconds", float(value)) if unit else ("trials", value)


def _budgets(items: list[tuple[str, float]]) -> dict[str, float]:
    """{"trials": n, "seconds": s} from the --budget options (one of each kind at most)."""
    out: dict[str, float] = {}
    for kind, value in items:
        if kind in out:
            raise CLIError(f"--budget: two {kind} budgets ({out[kind]:g} and {value:g}); "
                           "give one in trials and/or one in time")
        out[kind] = value
    return out


def _tune_model(a) -> int:
    """Every tunable kernel of a model (graph.extract_tasks), resumed from the log: with
    --budget, by the task scheduler; else heaviest first, --trials each; with
    --template-free, the kernels no template covers too (graph.tuning_free). `tensorlang
    compile model.onnx --log` then builds with the best records."""
    from tensorlang import autotune, graph
    from tensorlang.autotune.cli import fail_if_no_valid_record, measure_option_of

    budgets = _budgets(a.budget)
    blocks = None
    if a.blocks:
        try:
            blocks = tuple(int(b) for b in a.blocks.split(","))
        except ValueError:
            raise CLIError(f"--blocks must be comma-separated integers, e.g. 16,8; got "
                           f"{a.blocks!r}") from None
    g = _load_model(a.template, a.shape)
    symbolic = _symbolic_inputs(g)
    if symbolic:
        raise CLIError(f"{a.template} has inputs with shape variables ({symbolic}): tune its "
                       "kernels at the sizes it will run, giving each such input's shape with "
                       "--shape NAME=d0,d1,...")
    if a.no_templates and blocks:
        raise CLIError("--blocks tunes the conv template in activation blocks; with "
                       "--no-templates no kernel is tuned by its template")
    tasks = graph.extract_tasks(g, a.target, blocks=blocks,
                                template_free="all" if a.no_templates else a.template_free)
    tasks.sort(key=lambda t: t.flop * t.weight, reverse=True)
    chosen = tasks[:a.tasks] if a.tasks is not None else tasks
    opt = measure_option_of(a, model=True, flush_bytes=_calibrated_flush(a, g, chosen))
    try:
        if budgets and chosen:  # (the scheduler refuses an empty task list)
            best = _schedule_model(a, chosen, budgets, opt, len(tasks))
        else:
            a.trials = a.trials or 200
            print(f"{a.template}: {len(tasks)} tunable workloads; tuning {len(chosen)} x "
                  f"{a.trials} trials, log {a.log}")
            best = autotune.tune_tasks(chosen, n_trial=a.trials, log_file=a.log,
                                       tuner=a.tuner, measure_option=opt,
                                       early_stopping=a.early_stopping, seed=a.seed)
    finally:
        opt.close()
    for t in chosen:
        layout = f" {t.layout}" if t.layout else ""
        found = f"best {best.get(t.key, 0.0):.1f} GFLOP/s"
        if budgets and not best.get(t.key):
            found = "no valid record (not reached within the budget)"
        print(f"  {t.op}{layout} ({', '.join(t.nodes)}; {t.flop / 1e6:.1f} MFLOP, space "
              f"{len(t.config_space)}): {found}")
    if not budgets:  # the scheduler raised for a task all of whose trials failed
        fail_if_no_valid_record(a.log, chosen)
    if a.in_model_top and chosen:
        _choose_in_model(a, g)
    import shlex

    shapes = "".join(f" --shape {shlex.quote(item)}" for item in a.shape)  # the tuned graph
    print(f"deploy with: tensorlang compile {a.template} -o model.tlpkg --log {a.log}{shapes}")
    return 0


def _why_not_run_here(a, g) -> str:
    """Why runs of the model here would not be the target's ('' where they would)."""
    from tensorlang.codegen.target import Target
    from tensorlang.graph.symbolic import is_static

    if a.scheduler:
        return "measured on a cluster: run the same command without --scheduler on a " \
               "measuring machine"
    if Target.from_string(a.target).to_dict() != Target.host().to_dict():
        return f"--target {a.target} is not this CPU"
    if any(not is_static(v.shape) for v in g.inputs):
        return "the model's inputs have shape variables (fix them with --shape)"
    return ""


def _calibrated_flush(a, g, tasks) -> int | None:
    """The bytes the runner writes to evict the caches before each timed call: --flush-mib, else
    chosen so that the model's default kernels time as they run in it here
    (graph.calibrate_flush; printed); None (the runner's default) where runs here are not the
    target's."""
    from tensorlang import graph
    from tensorlang.autotune.measure import FLUSH_BYTES

    if a.flush_mib is not None:
        print(f"cache flush: {a.flush_mib} MiB (--flush-mib)")
        return a.flush_mib << 20
    why = _why_not_run_here(a, g)
    if why or not tasks:
        print(f"cache flush: {FLUSH_BYTES >> 20} MiB, not calibrated "
              f"({why or 'nothing to tune'})")
        return None
    found = graph.calibrate_flush(g, tasks)
    print(found)
    return found.flush_bytes


def _choose_in_model(a, g) -> None:
    """--in-model-top: each tuned kernel's finalists timed inside runs of the model, here
    (graph.remeasure_in_model); skipped, with a line saying why, where runs here would not be
    the target's."""
    import os

    from tensorlang import graph

    why = _why_not_run_here(a, g) if os.path.exists(a.log) else "nothing was tuned"
    if why:
        print(f"in-model choice skipped: {why}")
        return
    t0 = time.perf_counter()
    choices = graph.remeasure_in_model(g, a.log, top=a.in_model_top)
    changed = [c for c in choices if c.chosen]
    print(f"in-model choice: {len(choices)} kernels' finalists timed inside runs of the model "
          f"in {time.perf_counter() - t0:.0f} s; {len(changed)} changed")
    for c in changed:
        print(f"  {c.describe()}")


ROUND_TRIALS = 16  # trials per round of `tune model.onnx --budget`: one tuner batch


def _schedule_model(a, tasks, budgets: dict, opt, n_workloads: int) -> dict:
    """tune_model's --budget path: autotune.TaskScheduler over the model's tasks."""
    from tensorlang import autotune

    told = " and ".join(f"{v:g} {k}" for k, v in budgets.items())
    cap = f", at most {a.trials} per task" if a.trials else ""
    print(f"{a.template}: {len(tasks)} tunable workloads (of {n_workloads}); tuning within "
          f"{told}{cap}, log {a.log} (curve {a.log}.curve.jsonl)")
    rounds = {} if a.early_stopping is None else \
        {"flatten_rounds": -(-a.early_stopping // ROUND_TRIALS)}  # trials -> the task's rounds
    sched = autotune.TaskScheduler(tasks, log_file=a.log, measure_option=opt, tuner=a.tuner,
                                   round_trials=ROUND_TRIALS, max_trials_per_task=a.trials,
                                   seed=a.seed, **rounds)
    try:
        return sched.tune(n_trial=budgets.get("trials"), timeout=budgets.get("seconds"))
    finally:
        latency = sched.estimated_latency()
        if latency < float("inf"):
            print(f"estimated latency of the tuned kernels: {latency * 1e3:.4g} ms "
                  f"({sched.trials} trials in the log)")


def _shape_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", action="append", default=[],
                   help="fix an input's symbolic dims: name=1,3,224,224 (repeatable); without "
                        "it they stay shape variables (one build for every size)")


def _load_model(path: str, shape_items: list[str]):
    """graph.from_onnx with the --shape options (name=1,3,224,224)."""
    from tensorlang import graph

    shapes = {}
    for item in shape_items:
        name, eq, dims = item.partition("=")
        try:
            shapes[name] = tuple(int(d) for d in dims.split(","))
        except ValueError:
            eq = ""
        if not eq or not name:
            raise CLIError(f"--shape expects name=1,3,224,224, got {item!r}")
    _check_file(path, "model")
    return graph.from_onnx(path, shapes=shapes or None)


def _check_file(path: str, what: str) -> None:
    import os

    if not os.path.exists(path):
        raise CLIError(f"no such {what} file: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{path} is a directory, not a {what} file")
    if not os.path.isfile(path):  # a fifo or a device: reading it would block for ever
        raise CLIError(f"{path} is not a regular file; give a {what} file")


@command("inspect", "summarize a tuning log (best per workload, errors) or an ONNX model "
                    "(operators, support, shapes)")
def _inspect(p: argparse.ArgumentParser):
    p.add_argument("log", help="a tuning log (.jsonl) or an ONNX model (.onnx)")
    p.add_argument("--plot", default=None, help="write the best-so-far curve (PNG)")

    def run(a) -> int:
        # one subcommand for both: the issue names `tensorlang inspect model.onnx`
        _check_file(a.log, "model" if a.log.endswith(".onnx") else "tuning log")
        if a.plot:
            if a.log.endswith(".onnx"):  # (it was ignored)
                raise CLIError("--plot draws a tuning log's curve, not a model's")
            check_plot_path(a.plot)
        if a.log.endswith(".onnx"):
            return _inspect_onnx(a.log)
        from tensorlang.autotune.cli import run_inspect

        return run_inspect(a)

    return run


def _inspect_onnx(path: str) -> int:
    from tensorlang import graph

    try:
        g = graph.from_onnx(path)
    except graph.UnsupportedOperatorError as e:
        print(e)
        return 1
    print(g)
    print("operators:", ", ".join(f"{op} x{n}" for op, n in g.op_counts().items()))
    counts = f"{len(g.nodes)} nodes, {len(g.constants)} constants"
    symbolic = _symbolic_inputs(g)
    if symbolic:  # its tasks exist at given sizes only (graph.extract_tasks(g, sizes=...))
        print(f"{counts}; inputs with shape variables ({symbolic}): one build runs at every "
              "size; tune it at the sizes it will run, --shape NAME=d0,d1,...")
        return 0
    tasks = graph.extract_tasks(g)
    print(f"{counts}, {len(tasks)} tunable workloads")
    return 0


def _symbolic_inputs(g) -> str:
    """The graph's inputs with shape variables, as `x: float32[batch, 3]`; '' for none."""
    from tensorlang.graph.symbolic import is_static

    return ", ".join(f"{v.name}: {v.type_str()}" for v in g.inputs if not is_static(v.shape))


@command("compile", "compile an ONNX model into a deployable artifact folder")
def _compile(p: argparse.ArgumentParser):
    p.add_argument("model", help="model.onnx")
    p.add_argument("-o", "--output", required=True, help="artifact folder, e.g. model.tlpkg")
    p.add_argument("--log", default=None, help="tuning log (JSON lines) to take schedules from")
    p.add_argument("--target", default="llvm", help="llvm [-mcpu=...] (default: this CPU)")
    _shape_option(p)

    def run(a) -> int:
        from tensorlang import graph
        from tensorlang.runtime.saved_folder import check_replaceable

        check_target(a.target)
        if a.log is not None:
            _check_file(a.log, "tuning log")
        try:
            check_replaceable(a.output)  # before the build: fail in a second, not minutes
        except FileExistsError as e:
            raise CLIError(f"-o {e}") from None
        t0 = time.perf_counter()
        gm = graph.build(_load_model(a.model, a.shape), target=a.target, tuning_log=a.log)
        path = gm.save(a.output)
        print(gm.build_report)
        print(f"compiled {a.model} -> {path} in {time.perf_counter() - t0:.2f} s "
              f"({gm.num_steps} steps, {gm.num_kernels} kernels)")
        return 0

    return run


@command("run", "run a compiled model: tensorlang run model.tlpkg --input x=x.npy")
def _run_model(p: argparse.ArgumentParser):
    p.add_argument("artifact", help="a folder written by `tensorlang compile`")
    p.add_argument("--input", action="append", default=[], help="name=file.npy (repeatable)")
    p.add_argument("--output", default=None, help="write the outputs to this .npz")
    p.add_argument("--mode", default="graph", choices=["graph", "interactive"])
    p.add_argument("--repeat", type=_number(int, 0), default=0,
                   help="also time this many runs")

    def run(a) -> int:

        from tensorlang import runtime

        feeds = _read_inputs(a.input)  # before the (slower) load
        if a.output:
            _check_npz_to_write(a.output)  # before the run
        t0 = time.perf_counter()
        gm = runtime.load(a.artifact, mode=a.mode)
        t_load = time.perf_counter() - t0
        out = gm(**feeds)  # (gm.run() of a model without inputs returns None)
        if a.output:  # before any print: a closed stdout (| head -1) must not lose the file
            _write_npz(a.output, out)
        for k, v in out.items():
            # an empty output (a zero-size batch) has no mean or max: numpy raises on max
            stats = (f" mean={float(v.mean()):.6g} max={float(v.max()):.6g}" if v.size else
                     " (empty)")
            print(f"{k}: {v.dtype}{list(v.shape)}{stats}")
        if a.repeat:
            r = gm.benchmark(number=a.repeat, repeat=1)
            print(f"latency {r.mean * 1e3:.3f} ms ({a.mode} mode)")
        print(f"loaded in {t_load * 1e3:.1f} ms")
        return 0

    return run


def _npz_path(path: str) -> str:
    """Where --output writes: the path, with ".npz" added when it lacks it (numpy's rule)."""
    return path if path.endswith(".npz") else path + ".npz"


def _check_npz_to_write(path: str) -> None:
    """--output, before the run: a file in an existing folder, never one that is not an .npz
    (an input's .npy, a model)."""
    import os

    check_file_to_write(path, "--output", ".npz")
    target = _npz_path(path)
    if os.path.exists(target):
        if not os.path.isfile(target):
            raise CLIError(f"--output {target} is not a regular file; give a file name (.npz)")
        with open(target, "rb") as f:
            head = f.read(4)
        if head and head != b"PK\x03\x04":
            raise CLIError(f"--output {target} is a file that is not an .npz: not replaced "
                           "(give a new file name)")


def _write_npz(path: str, arrays: dict) -> None:
    """``arrays`` as an .npz under their names (np.savez(path, **arrays) took an output
    named "file" or "allow_pickle" for its own arguments: an error after the run, or the
    output silently left out)."""
    import io
    import zipfile

    import numpy as np

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", allowZip64=True) as z:
        for name, value in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)
    with open(_npz_path(path), "wb") as f:  # (built in memory: one write)
        f.write(buf.getvalue())


def _read_inputs(items: list[str]) -> dict:
    """The --input options as name -> array; a name given twice is refused (the last one
    silently won)."""
    feeds: dict = {}
    for item in items:
        name, value = _read_input(item)
        if name in feeds:
            raise CLIError(f"--input {name} is given twice")
        feeds[name] = value
    return feeds


def check_file_to_write(path: str, option: str, kind: str) -> None:
    """A file the command writes (given as ``option``): not a directory, in an existing one."""
    import os

    if os.path.isdir(path):
        raise CLIError(f"{option} {path} is a directory; give a file name ({kind})")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"{option} {path}: no such directory {folder}")


def _read_input(item: str):
    """(name, array) of one --input name=file.npy."""
    import numpy as np

    name, eq, file = item.partition("=")
    if not eq or not name:
        raise CLIError(f"--input expects name=file.npy, got {item!r}")
    _check_file(file, "input")
    try:
        # never unpickle: an input file is data, and a pickle can run code
        value = np.load(file, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - whatever numpy fails on, the file is not an array
        raise CLIError(f"--input {name}: {file} is not a NumPy .npy file ({_reason(e)})") \
            from None
    if not isinstance(value, np.ndarray):
        value.close()
        raise CLIError(f"--input {name}: {file} is a .npz archive; give one .npy file per "
                       f"input")
    return name, value


def _reason(e: BaseException) -> str:
    if isinstance(e, ValueError) and "pickled" in str(e):
        return "it is not an array saved by numpy.save"
    return " ".join(str(e).split())[:200] or type(e).__name__


# Errors that say what the user did wrong: their message is the whole report. Anything else is
# reported with its type (a bug in tensorlang, most likely; --debug shows where).
# MemoryError: a model too big for this machine (its message says how much it needs)
_USER_ERRORS = (CLIError, OSError, ValueError, TypeError, MemoryError)


def _error_line(e: BaseException) -> str:
    from tensorlang.errors import TensorlangError

    if isinstance(e, OSError) and e.strerror and e.filename:
        return f"{e.strerror}: {e.filename}"
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, (*_USER_ERRORS, TensorlangError)):
        return text
    return f"{type(e).__name__}: {text} (a bug? --debug shows the traceback)"


def _check_environment() -> None:
    """The thread pool's variables, checked by every subcommand: the pool reads them only
    when a parallel kernel first runs, so a bad value was ignored by one run and refused by
    the next."""
    from tensorlang.runtime._pool_env import bind_from_env, default_num_threads

    default_num_threads()
    bind_from_env()


def _forget_interrupt() -> None:
    """Keep a handled Ctrl-C from ending the process by SIGINT instead of our exit status.

    CPython (3.8 to 3.12 at least) remembers a KeyboardInterrupt that ends code run from a
    string -- exec("..."), which dataclasses and namedtuple use to build their classes, so any
    import -- even when a caller catches it; under ``python -m`` the interpreter then kills
    itself with SIGINT at exit (status -2, not 130). Running a string resets that flag."""
    exec("")  # noqa: S102 - the reset, see above


def main(argv=None) -> int:
    """Run one subcommand. A user error is one line on stderr and exit status 2, Ctrl-C one
    line and 130 (what a tuning log holds stays: it is appended per candidate); --debug shows the
    traceback instead."""
    ap = _Parser(prog="tensorlang", description=DESCRIPTION)
    ap.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = ap.add_subparsers(dest="cmd", required=True)
    runners = {}
    for name, (help_text, configure, _) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        # also after the subcommand; SUPPRESS keeps the subparser from resetting it to False
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an error")
        runners[name] = configure(p)
    a = ap.parse_args(argv)
    try:
        _check_environment()
        return runners[a.cmd](a) or 0
    except KeyboardInterrupt:
        if a.debug:
            raise
        print(f"tensorlang {a.cmd}: interrupted", file=sys.stderr)
        _forget_interrupt()
        return 130
    except Exception as e:  # every error becomes one line (--debug: the traceback)
        if isinstance(e, BrokenPipeError) and not a.debug and _stdout_is_closed():
            return 141  # the reader went away (| head): quiet, as a tool SIGPIPE ends
        if a.debug:
            raise
        print(f"tensorlang {a.cmd}: error: {_error_line(e)}", file=sys.stderr)
        return 2


def _stdout_is_closed() -> bool:
    """Whether standard output's reader has gone away (a pipe without a reader polls as an
    error); if so, later writes (the interpreter's flush at exit) go to /dev/null, without a
    second error."""
    import os
    import select

    try:
        fd = sys.stdout.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        if not any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0)):
            return False
    except (AttributeError, ValueError, OSError):  # no real stdout: not it
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return True


if __name__ == "__main__":
    # run the importable module's main, not this __main__ copy: the error classes that
    # autotune's and graph's subcommands raise are the module's (tensorlang.cli.CLIError)
    from tensorlang.cli import main as _main

    sys.exit(_main())
