"""``Program``: a model with run-time control flow, run as compiled pieces.

A model whose graph holds a run-time ``If`` is built (``tensorlang.graph.control_flow``) into
stages run in order on a table of named arrays:

- :class:`GraphStage`: a :class:`GraphModule` (its own kernels, memory plan and driver) fed
  from the table, its outputs put back in it;
- :class:`IfStage`: reads the condition from the table and runs one of two branch
  :class:`Program` s (each a sub-plan of its own, nested ``If`` included), fed with the outer
  values its branch reads.

Every GraphModule runs in the program's mode: "graph" (one native driver call per piece) or
"interactive" (kernels called from Python). ``run(**inputs)`` may be called from several
threads at once as :meth:`GraphModule.run` (each piece's run(**inputs) is, a piece that
reads only constants included; the table is the call's own). Saved as a folder:
``manifest.json`` (the stages, and which sub-folder holds each piece) and one GraphModule
artifact per piece, each checked at load as any saved model.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .graph_module import (
    MODES,
    GraphModule,
    InputError,
    checked_mode,
    count,
    dtype_error,
    input_items,
    mode_and_inputs,
    output_name,
)
from .module import ArtifactError
from .saved_folder import PROGRAM_KIND, saved_kind, write_folder
from .timer import TimingResult

PROGRAM_FORMAT = 1


class GraphStage:
    """One compiled graph piece: ``inputs``/``outputs`` are its value names (= the table's)."""

    def __init__(self, module: GraphModule, inputs: Sequence[str], outputs: Sequence[str]
                 ) -> None:
        self.module = module
        self.inputs = list(inputs)
        self.outputs = list(outputs)

    def run(self, table: dict[str, np.ndarray], mode: str) -> None:
        if self.inputs:
            table.update(self.module.run(mode=mode, **{n: table[n] for n in self.inputs}))
        else:
            # a piece reading constants only (an If branch returning a constant): run() without
            # inputs is the stateful API, whose buffers and get_output are the module's own, so
            # concurrent runs raced there ("the model has not run yet" from get_output while
            # another thread's run was under way); a run given all of its (no) inputs runs on
            # buffers of its own, as any other piece
            table.update(self.module._run_private(mode, {}))

    def modules(self) -> list[GraphModule]:
        return [self.module]


class IfStage:
    """``outputs = programs[0](...) if cond else programs[1](...)``; ``feeds[k]`` names the
    table values that branch k's inputs take, in the order of its inputs."""

    def __init__(self, cond: str, programs: Sequence[Program], feeds: Sequence[Sequence[str]],
                 outputs: Sequence[str]) -> None:
        self.cond = cond
        self.programs = list(programs)
        self.feeds = [list(f) for f in feeds]
        self.outputs = list(outputs)
        for prog, feed in zip(self.programs, self.feeds):
            if len(prog.input_names) != len(feed) or len(prog.output_names) != len(outputs):
                raise ArtifactError(f"if stage on {cond!r}: a branch takes "
                                    f"{len(prog.input_names)} inputs and gives "
                                    f"{len(prog.output_names)} outputs, the stage feeds "
                                    f"{len(feed)} and reads {len(outputs)}")

    def run(self, table: dict[str, np.ndarray], mode: str) -> None:
        k = 0 if bool(np.asarray(table[self.cond]).reshape(-1)[0]) else 1
        prog = self.programs[k]
        out = prog.outputs_for(dict(zip(prog.input_names, (table[n] for n in self.feeds[k]))),
                               mode)
        table.update(zip(self.outputs, (out[n] for n in prog.output_names)))

    def modules(self) -> list[GraphModule]:
        return [m for p in self.programs for m in p.modules()]


class RefuseStage:
    """A branch that cannot run for the shapes the model was built for: taking it raises."""

    def __init__(self, message: str) -> None:
        self.message = message

    def run(self, table: dict[str, np.ndarray], mode: str) -> None:
        raise InputError(f"this model cannot take this branch for the shapes it was built "
                         f"for: {self.message}")

    def modules(self) -> list[GraphModule]:
        return []


def refusing_program(message: str, n_outputs: int) -> Program:
    """A branch Program that raises ``message`` when run (see :class:`RefuseStage`)."""
    return Program("refused", [], [f"out{k}" for k in range(n_outputs)],
                   [RefuseStage(message)])


class Program:
    """A model with run-time control flow (see the module docstring): ``run(**inputs) ->
    dict`` output name -> array, as :meth:`GraphModule.run`."""

    def __init__(self, name: str, inputs: Sequence[tuple[str, tuple, str]],
                 outputs: Sequence[str], stages: Sequence[GraphStage | IfStage | RefuseStage],
                 constants: Mapping[str, np.ndarray] | None = None, mode: str = "graph"
                 ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.name = name
        self._inputs = {n: (tuple(s), np.dtype(d)) for n, s, d in inputs}
        self._outputs = list(outputs)
        self.stages = list(stages)
        self.constants = {k: np.asarray(v) for k, v in (constants or {}).items()}
        self.mode = mode
        self.build_report = None
        self._given: dict[str, np.ndarray] = {}  # set_input's, for run() without inputs
        self._last: dict[str, np.ndarray] = {}  # the outputs of the last run

    @property
    def input_names(self) -> list[str]:
        return list(self._inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self._outputs)

    def input_info(self) -> dict[str, tuple[tuple[int, ...], str]]:
        return {n: (s, d.name) for n, (s, d) in self._inputs.items()}

    def modules(self) -> list[GraphModule]:
        """Every compiled piece, branches included."""
        return [m for st in self.stages for m in st.modules()]

    @property
    def num_kernels(self) -> int:
        return sum(m.num_kernels for m in self.modules())

    @property
    def num_steps(self) -> int:
        return sum(m.num_steps for m in self.modules())

    def __reduce_ex__(self, protocol: int):
        # as GraphModule's: its pieces hold loaded native code and raw buffers
        raise TypeError("a Program cannot be pickled or copied (its pieces hold loaded native "
                        "code and raw buffers); save it with save(path) and load it with "
                        "tensorlang.runtime.load(path)")

    def __repr__(self) -> str:
        ifs = sum(isinstance(st, IfStage) for st in self.stages)
        return (f"<tensorlang.runtime.Program {self.name}: {len(self.stages)} stages "
                f"({ifs} if), {len(self.modules())} graph modules, mode={self.mode}>")

    def _checked(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        unknown = [k for k in inputs if k not in self._inputs]
        if unknown:
            raise InputError(f"unknown input(s) {unknown}; the model's inputs are "
                             f"{list(self._inputs)}")
        missing = [k for k in self._inputs if k not in inputs]
        if missing:
            raise InputError(f"missing input(s) {missing}")
        table = {}
        for k, v in inputs.items():
            shape, dtype = self._inputs[k]
            arr = np.asarray(v)
            if arr.dtype != dtype:
                raise dtype_error(k, dtype, arr.dtype)
            if all(isinstance(d, int) for d in shape):
                if arr.shape != shape:
                    raise InputError(f"input {k!r} must have shape {shape}, got {arr.shape}")
            elif len(arr.shape) != len(shape) or any(
                    isinstance(d, int) and d != n for d, n in zip(shape, arr.shape)):
                # shape variables (issue 19): the pieces read their sizes and check them
                raise InputError(f"input {k!r} must have shape [{', '.join(map(str, shape))}], "
                                 f"got {arr.shape}")
            table[k] = arr
        return table

    def run(self, mode: str | None = None, **inputs: Any) -> dict[str, np.ndarray] | None:
        """As :meth:`GraphModule.run`: with inputs, a dict output name -> array; ``run()``
        alone runs on the inputs given to :meth:`set_input` and returns None (read the
        outputs with :meth:`get_output`)."""
        mode, inputs = mode_and_inputs(mode, inputs, self._inputs)
        mode = checked_mode(mode, self.mode)
        self._last = self.outputs_for(inputs if inputs else self._given, mode)
        return dict(self._last) if inputs else None

    def outputs_for(self, inputs: Mapping[str, Any], mode: str) -> dict[str, np.ndarray]:
        """The outputs for ``inputs`` (all of them; none for a program without inputs)."""
        table = self._checked(inputs)
        table.update(self.constants)
        for st in self.stages:
            st.run(table, mode)
        return {n: np.array(table[n]) for n in self._outputs}

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        """``run(**inputs)``, whose outputs it returns always (run() alone returns None)."""
        self.run(**inputs)
        return {n: np.array(v) for n, v in self._last.items()}

    def set_input(self, name: str | None = None, value: Any = None, **kwargs: Any) -> None:
        """Keep inputs for ``run()`` without arguments (checked when it runs)."""
        for k, v in input_items(name, value, kwargs, self._inputs).items():
            if k not in self._inputs:
                raise InputError(f"unknown input {k!r}; the model's inputs are "
                                 f"{list(self._inputs)}")
            self._given[k] = np.array(v)

    def get_output(self, index: int | str = 0, copy: bool = True) -> np.ndarray:
        """Output ``index`` (position or name) of the last run."""
        name = output_name(self._outputs, index)
        if name not in self._last:
            raise InputError(f"no output {index!r} yet (outputs: {self._outputs}; run first)")
        return self._last[name].copy() if copy else self._last[name]

    def get_num_outputs(self) -> int:
        return len(self._outputs)

    def benchmark(self, mode: str | None = None, number: int = 10, repeat: int = 3
                  ) -> TimingResult:
        """Time whole runs on the inputs given to set_input (zeros for those not given)."""
        mode = checked_mode(mode, self.mode)
        number, repeat = count("number", number), count("repeat", repeat)
        feeds = {n: self._given.get(n, np.zeros(s, d)) for n, (s, d) in self._inputs.items()}
        self.run(mode=mode, **feeds)
        results = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                self.run(mode=mode, **feeds)
            results.append((time.perf_counter() - t0) / number)
        return TimingResult.from_results(results, number)

    # -- artifacts ------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> Path:
        """Write the program as a folder (see the module docstring); returns its path. As
        GraphModule.save, it replaces only a model saved there before."""
        return write_folder(path, self._write)

    def _write(self, tmp: Path) -> None:
        counter = iter(range(1 << 30))
        desc = self._describe(tmp, counter)
        if self.constants:
            np.savez(tmp / "constants.npz", **{f"c{i}": v for i, v in
                                               enumerate(self.constants.values())})
        (tmp / "manifest.json").write_text(json.dumps(
            {"kind": PROGRAM_KIND, "format": PROGRAM_FORMAT, "program": desc,
             "constants": list(self.constants)}, indent=1, sort_keys=True))

    def _describe(self, root: Path, counter) -> dict:
        stages = []
        for st in self.stages:
            if isinstance(st, GraphStage):
                folder = f"m{next(counter)}"
                st.module.save(root / folder)
                stages.append({"kind": "graph", "module": folder, "inputs": st.inputs,
                               "outputs": st.outputs})
            elif isinstance(st, RefuseStage):
                stages.append({"kind": "refuse", "message": st.message})
            else:
                stages.append({"kind": "if", "cond": st.cond, "feeds": st.feeds,
                               "outputs": st.outputs,
                               "branches": [p._describe(root, counter) for p in st.programs]})
        return {"name": self.name, "outputs": self._outputs, "stages": stages,
                "inputs": [[n, list(s), d.name] for n, (s, d) in self._inputs.items()]}


_FOLDER = re.compile(r"m[0-9]+")


def is_program(path: str | os.PathLike) -> bool:
    """True when ``path`` holds a saved Program (not a single GraphModule)."""
    return saved_kind(path) == PROGRAM_KIND


def load_program(path: str | os.PathLike, mode: str = "graph") -> Program:
    """Load a Program saved with :meth:`Program.save`; each piece is loaded and checked as
    :func:`tensorlang.runtime.load` checks a model. Anything malformed is an ArtifactError."""
    from .graph_module import load

    path = Path(path)
    try:
        man = json.loads((path / "manifest.json").read_text())
        if man.get("kind") != PROGRAM_KIND or man.get("format") != PROGRAM_FORMAT:
            raise ArtifactError(f"{path}: not a program artifact of format {PROGRAM_FORMAT}")
        constants = {}
        if man["constants"]:
            with np.load(path / "constants.npz", allow_pickle=False) as z:
                constants = {n: z[f"c{i}"] for i, n in enumerate(man["constants"])}
        return _program_from(path, man["program"], constants, mode, load)
    except ArtifactError:
        raise
    except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError) as e:
        raise ArtifactError(f"{path}: malformed program artifact ({type(e).__name__}: {e})"
                            ) from None


def _program_from(root: Path, d: dict, constants: dict, mode: str, load) -> Program:
    stages: list[GraphStage | IfStage | RefuseStage] = []
    for st in d["stages"]:
        if st["kind"] == "graph":
            if not isinstance(st["module"], str) or not _FOLDER.fullmatch(st["module"]):
                raise ArtifactError(f"{root}: bad module folder {st['module']!r}")
            stages.append(GraphStage(load(root / st["module"], mode=mode), _names(st["inputs"]),
                                     _names(st["outputs"])))
        elif st["kind"] == "if":
            programs = [_program_from(root, b, {}, mode, load) for b in st["branches"]]
            if len(programs) != 2:
                raise ArtifactError(f"{root}: an if stage needs two branches")
            stages.append(IfStage(str(st["cond"]), programs,
                                  [_names(f) for f in st["feeds"]], _names(st["outputs"])))
        elif st["kind"] == "refuse":
            stages.append(RefuseStage(str(st["message"])))
        else:
            raise ArtifactError(f"{root}: unknown stage kind {st['kind']!r}")
    inputs = [(str(n), tuple(int(x) for x in s), str(dt)) for n, s, dt in d["inputs"]]
    return Program(str(d["name"]), inputs, _names(d["outputs"]), stages, constants, mode=mode)


def _names(v) -> list[str]:
    if not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        raise ArtifactError(f"expected a list of names, got {v!r}")
    return v
