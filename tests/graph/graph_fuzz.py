"""The differential graph fuzzer: random ONNX graphs (graph_fuzz_gen.py) imported with
graph.from_onnx, built and run, compared with onnxruntime.

    check_seed(seed)            generate, check: one outcome dict (never raises)
    check_model(model, feeds)   the check of one model: the default build (opt_level 2) run
                                twice, and per ``levels`` other builds; ``save_load``: the
                                default build saved and loaded again
    Pool(workers)               check_seed in worker subprocesses with a time limit each, so a
                                crash (signal) or a hang (timeout) is an outcome, not the end
    minimize(model, feeds)      drops nodes and outputs while the failure stays the same

Outcomes: ok; refused (an OnnxImportError, or a tensorlang error that says the model uses what
is not supported); invalid (onnxruntime refused the generated model, or its outputs are not
finite: a bug of the generator); WRONG; CRASH; HANG; ERROR (an internal error: any other
exception from a valid model). The seed replays a case exactly; ``variants(seed)`` says which
seeds also check the unoptimized build and save/load."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the fuzzers' worker pool
import fuzz_pool

OK, REFUSED, INVALID = "ok", "refused", "invalid"
WRONG, CRASH, HANG, ERROR = "WRONG", "CRASH", "HANG", "ERROR"
FAILURES = (WRONG, CRASH, HANG, ERROR)
OUTCOMES = (OK, REFUSED, INVALID, *FAILURES)
# float outputs: the largest difference relative to the output's largest magnitude. float32
# sums in another order, fused and contracted, differ by 1e-7 to 4e-6 of it (60 graphs
# measured); 1e-3 would hide an epsilon dropped from a norm (5e-4 at eps 1e-3). Outputs below
# 1 in magnitude are compared at 1e-4 absolute: a normalization of a constant row amplifies a
# rounding of its mean by 1 / sqrt(eps) (seed 40337: LayerNorm of a nearest-resized row, 1.3e-5
# where onnxruntime's mean happened to be exact and gave 0)
RTOL = 1e-4
MIN_SCALE = 1.0
REFUSAL = re.compile(r"not supported|unsupported|only supports|is refused", re.IGNORECASE)


def variants(seed: int) -> dict:
    """Which builds a seed checks beyond the default one: every third also unoptimized
    (opt_level 0), every fourth also after save/load."""
    return {"levels": (2, 0) if seed % 3 == 0 else (2,), "save_load": seed % 4 == 1}


# ----------------------------------------------------------------------------- comparing


def ort_run(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def compare(got: np.ndarray, want: np.ndarray, rtol: float = RTOL) -> str | None:
    """None when equal (floats: within rtol of the output's largest magnitude or MIN_SCALE,
    NaN where the reference is NaN), else what differs."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind != "f":
        bad = got != want
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        scale = max(float(np.abs(w[np.isfinite(w)]).max(initial=0.0)), MIN_SCALE)
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(g - w) <= rtol * scale) & ~(np.isnan(g) & np.isnan(w)) & (g != w)
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())}/{bad.size} elements differ, first at {idx}: got "
            f"{got[idx]!r}, expected {want[idx]!r}")


def _compare_all(got: dict, want: dict, where: str) -> str | None:
    if set(got) != set(want):
        return f"{where}: outputs {sorted(got)} != {sorted(want)}"
    for name, w in want.items():
        diff = compare(got[name], w)
        if diff is not None:
            return f"{where}: output {name}: {diff}"
    return None


def error_kind(e: BaseException) -> str:
    """An exception's type and first line with names and numbers taken out: what kind it is."""
    msg = str(e).split("\n")[0]
    msg = re.sub(r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\([^)]*\)", "_", msg)
    msg = re.sub(r"\b[\w.]*\d[\w.]*\b", "_", msg)
    return f"{type(e).__name__}: {msg[:90]}"


def classify(e: BaseException) -> str:
    from tensorlang.graph import OnnxImportError

    from tensorlang.errors import TensorlangError

    if isinstance(e, OnnxImportError):
        return REFUSED
    if isinstance(e, TensorlangError) and REFUSAL.search(str(e)):
        return REFUSED
    return ERROR


# ----------------------------------------------------------------------------- checking


def check_model(model: onnx.ModelProto, feeds: dict, levels=(2,), save_load: bool = False,
                inject: str | None = None) -> dict:
    """Check one model against onnxruntime (see the module docstring). Never raises. inject=
    "wrong", "segv" or "hang" makes it fail on purpose (to test the fuzzer itself)."""
    res: dict = {"outcome": ERROR, "nodes": len(model.graph.node)}
    try:
        want = ort_run(model, feeds)
    except Exception as e:  # noqa: BLE001 - the generator made a model onnxruntime refuses
        return dict(res, outcome=INVALID, why=f"onnxruntime: {str(e)[:300]}")
    if any(w.dtype.kind == "f" and not np.isfinite(w).all() for w in want.values()):
        return dict(res, outcome=INVALID, why="onnxruntime's outputs are not all finite")
    if inject == "wrong":
        want = {k: (w + 1 if w.dtype != bool else ~w) for k, w in want.items()}
    if inject == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if inject == "hang":
        time.sleep(3600)
    stage = ["import"]  # where it is, set by _runs before each step
    try:
        for got in _runs(model, feeds, levels, save_load, stage):
            diff = _compare_all(got, want, stage[0])
            if diff is not None:
                return dict(res, outcome=WRONG, why=diff)
    except Exception as e:  # noqa: BLE001 - any exception is an outcome
        outcome = classify(e)
        return dict(res, outcome=outcome, stage=stage[0], kind=error_kind(e),
                    why=f"{stage[0]}: {type(e).__name__}: {str(e)[:400]}",
                    traceback=traceback.format_exc(limit=12)[-3000:])
    return dict(res, outcome=OK)


def _runs(model, feeds: dict, levels, save_load: bool, stage: list) -> Iterator[dict]:
    """The outputs of every build checked (``stage[0]`` names the step under way); an input
    array changed by a run is reported as an output that differs."""
    from tensorlang import graph, runtime

    g = graph.from_onnx(model)
    for level in levels:
        stage[0] = f"build(opt_level={level})"
        gm = graph.build(g, opt_level=level)
        for k in ("first", "second"):  # a second run sees the arena the first one left
            stage[0] = f"opt_level={level} ({k} run)"
            yield _run_checked(gm, feeds)
        if save_load and level == levels[0]:
            stage[0] = f"opt_level={level} save/load"
            with tempfile.TemporaryDirectory() as d:
                gm.save(Path(d) / "m.tlpkg")
                loaded = runtime.load(Path(d) / "m.tlpkg")
                yield _run_checked(loaded, feeds)


def _run_checked(gm, feeds: dict) -> dict:
    copies = {k: v.copy() for k, v in feeds.items()}
    if feeds:
        out = gm.run(**copies)
    else:  # run() without inputs returns None (TVM's style): the outputs are read after
        gm.run()
        out = {name: gm.get_output(name) for name in gm.output_names}
    for k, v in feeds.items():
        if not np.array_equal(copies[k], v, equal_nan=True):
            return {**out, f"<input {k} modified by the run>": None}
    return {k: np.array(v, copy=True) for k, v in out.items()}


def check_seed(seed: int, inject: str | None = None) -> dict:
    from graph_fuzz_gen import generate

    t0 = time.perf_counter()
    try:
        model, feeds = generate(seed)
    except Exception as e:  # noqa: BLE001 - a generator bug: reported, not a tensorlang one
        return {"seed": seed, "outcome": INVALID, "why": f"generator: {type(e).__name__}: {e}"}
    res = check_model(model, feeds, inject=inject, **variants(seed))
    res.update(seed=seed, wall_s=time.perf_counter() - t0)
    return res


# ----------------------------------------------------------------------------- workers


def worker_main() -> None:
    """check_seed for the jobs of a Pool (fuzz_pool.serve)."""
    fuzz_pool.serve(lambda job: check_seed(job["seed"], job.get("inject")), _worker_imports)


def _worker_imports() -> None:
    import graph_fuzz_gen  # noqa: F401 - imported (with onnx) before the first job's clock
    import tensorlang.graph  # noqa: F401


class Pool(fuzz_pool.Pool):
    """Worker processes running check_seed (tests/fuzz_pool.py): a worker that dies is a CRASH,
    one past the time limit (``timeout``, or the job's own "timeout") a HANG, each replaced."""

    def __init__(self, workers: int = 1, timeout: float = 120.0, recycle: int = 100):
        super().__init__(HERE / "graph_fuzz.py", _lost, workers, timeout, recycle,
                         cache_prefix="graph-fuzz-kernels-")


def _lost(job: dict, outcome: str, why: str) -> dict:
    return {"seed": job["seed"], "outcome": outcome, "why": why}


# ----------------------------------------------------------------------------- minimizing


def all_values(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    """Every node output's value, by onnxruntime: what a dropped node's readers are fed."""
    inferred = onnx.shape_inference.infer_shapes(model)
    infos = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.extend(infos[o] for n in model.graph.node for o in n.output if o in infos)
    return ort_run(m, feeds)


def drop(model: onnx.ModelProto, feeds: dict, values: dict, node: int | None = None,
         output: int | None = None) -> tuple[onnx.ModelProto, dict] | None:
    """The model without one node (its outputs that others read become inputs fed with their
    values) or one output, dead nodes and unused inputs removed; None when nothing is left."""
    g = model.graph
    nodes = list(g.node)
    outputs = list(g.output)
    cut: set[str] = set()
    if node is not None:
        cut = set(nodes.pop(node).output)
        outputs = [o for o in outputs if o.name not in cut]
    if output is not None:
        outputs.pop(output)
    if not outputs:
        return None
    nodes = _live(nodes, {o.name for o in outputs})
    read = {i for n in nodes for i in n.input} | {o.name for o in outputs}
    new_feeds = {k: v for k, v in feeds.items() if k in read}
    new_inputs = [i for i in g.input if i.name in read]
    for name in sorted(cut & read):
        v = values[name]
        new_inputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
        new_feeds[name] = v
    inits = [t for t in g.initializer if t.name in read]
    graph = helper.make_graph(nodes, g.name, new_inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=model.opset_import,
                             ir_version=model.ir_version), new_feeds


def _live(nodes: list, wanted: set[str]) -> list:
    keep, need = [], set(wanted)
    for n in reversed(nodes):
        if need & set(n.output):
            keep.append(n)
            need |= set(n.input)
    return keep[::-1]


def outcome_in_subprocess(model: onnx.ModelProto, feeds: dict, timeout: float = 300.0,
                          levels=(2,), save_load: bool = False) -> str:
    """The outcome of check_model in a fresh process (it may crash or hang); an ERROR comes
    with its kind, so that a reduction keeps the same error."""
    with tempfile.TemporaryDirectory() as d:
        onnx.save(model, f"{d}/m.onnx")
        np.savez(f"{d}/feeds.npz", **feeds)
        code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import graph_fuzz as F;"
                f" print(json.dumps(F.check_files({d!r}, {list(levels)!r}, {save_load!r})))")
        try:
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return HANG
    if p.returncode < 0:
        return CRASH
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return f"{ERROR} (no answer, exit code {p.returncode})"
    return f"{ERROR} {res['kind']}" if res["outcome"] == ERROR else res["outcome"]


def check_files(d: str, levels, save_load: bool) -> dict:
    model = onnx.load(f"{d}/m.onnx")
    with np.load(f"{d}/feeds.npz") as z:
        feeds = {k: z[k] for k in z.files}
    return check_model(model, feeds, tuple(levels), save_load)


def minimize(model: onnx.ModelProto, feeds: dict,
             outcome_of: Callable[[onnx.ModelProto, dict], str] | None = None
             ) -> tuple[onnx.ModelProto, dict]:
    """Greedy: drop a node or an output while the outcome stays what it is (a model
    onnxruntime refuses does not count)."""
    outcome_of = outcome_of or outcome_in_subprocess
    values = all_values(model, feeds)
    target = outcome_of(model, feeds)
    changed = True
    while changed:
        changed = False
        tries = [("node", i) for i in reversed(range(len(model.graph.node)))]
        tries += [("output", i) for i in range(len(model.graph.output))]
        for what, i in tries:
            smaller = drop(model, feeds, values, **{what: i})
            if smaller is not None and outcome_of(*smaller) == target:
                model, feeds = smaller
                changed = True
                break
    return model, feeds


# ----------------------------------------------------------------------------- reporting


def describe(model: onnx.ModelProto, feeds: dict) -> str:
    """The graph as text, with the inputs' shapes and dtypes."""
    ins = ", ".join(f"{k}{list(v.shape)}:{v.dtype}" for k, v in feeds.items())
    return f"inputs {ins}\n{helper.printable_graph(model.graph)}"


def repro_command(seed: int) -> str:
    return f"python benchmarks/fuzz_graphs.py --seed {seed} --n 1 --verbose"


def model_of(seed: int) -> tuple[onnx.ModelProto, dict]:
    from graph_fuzz_gen import generate

    return generate(seed)
