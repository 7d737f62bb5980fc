"""Tuning records (JSON lines) and deployment from them.

One line per measurement:

    {"workload": {"name": "matmul", "args": [1024, 1024, 1024, "float32"], "hash": "97761b..."},
     "target": "llvm", "config": {"index": 225, "entity": {"tile_m": 4, ...}},
     "trace": [{"kind": "cache_write", ...}, ...],
     "result": {"costs": [0.0081, ...], "error": null, "error_msg": "", "all_cost": 0.9},
     "timestamp": 1700000000.0, "version": "0.1.0"}

Lines are appended and flushed once per batch, so a killed job loses at most the batch in flight
(and possibly leaves a truncated last line, which load_records skips with a warning).
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from ..version import __version__
from .measure import MeasureInput, MeasureResult
from .task import DispatchContext, create_task, workload_key


@dataclass
class Record:
    workload: dict
    target: str
    config: dict
    trace: list | None
    result: dict
    timestamp: float
    version: str
    line: int = 0

    @property
    def key(self) -> str:
        return workload_key(self.workload["name"], self.workload["args"])

    @property
    def valid(self) -> bool:
        return self.result.get("error") is None and bool(self.result.get("costs"))

    @property
    def cost(self) -> float:
        c = self.result.get("costs") or []
        return sum(c) / len(c) if self.valid else math.inf

    def to_json(self) -> dict:
        return {"workload": self.workload, "target": self.target, "config": self.config,
                "trace": self.trace, "result": self.result, "timestamp": self.timestamp,
                "version": self.version}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))


def make_record(inp: MeasureInput, res: MeasureResult) -> Record:
    task = inp.task
    return Record(task.workload, task.target, inp.config.to_json(),
                  json.loads(res.trace) if res.trace else None,
                  {"costs": list(res.costs), "error": res.error, "error_msg": res.error_msg,
                   "all_cost": res.all_cost},
                  res.timestamp or time.time(), __version__)


_REQUIRED = ("workload", "target", "config", "result", "version")


def _parse(line: str, lineno: int) -> Record:
    d = json.loads(line)
    if not isinstance(d, dict) or any(k not in d for k in _REQUIRED):
        raise ValueError("not a tuning record (missing keys)")
    w = d["workload"]
    if not isinstance(w, dict) or not {"name", "args", "hash"} <= set(w):
        raise ValueError("workload needs name, args and hash")
    if not isinstance(d["result"], dict) or "costs" not in d["result"]:
        raise ValueError("result needs costs")
    if not isinstance(d["config"], dict) or "entity" not in d["config"]:
        raise ValueError("config needs an entity")
    return Record(w, d["target"], d["config"], d.get("trace"), d["result"],
                  float(d.get("timestamp", 0.0)), str(d["version"]), lineno)


def load_records(source) -> list[Record]:
    """Records from a JSON-lines file (path) or from an iterable of Records. A line that is
    truncated or not a record is skipped with a warning naming its line number."""
    if not isinstance(source, (str, os.PathLike)):
        return [r for r in source if isinstance(r, Record)]
    out = []
    with open(source, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(_parse(line, lineno))
            except (ValueError, TypeError, KeyError) as e:
                warnings.warn(f"{os.fspath(source)}:{lineno}: skipped a corrupt or truncated "
                              f"tuning record ({type(e).__name__}: {str(e)[:80]})",
                              stacklevel=2)
    other = sorted({r.version for r in out if r.version != __version__})
    if other:
        n = sum(r.version != __version__ for r in out)
        warnings.warn(f"{os.fspath(source)}: {n} record(s) made by tensorlang {other} (this is "
                      f"{__version__}): loaded, but apply_history_best will not apply them",
                      stacklevel=2)
    return out


def append_records(path, records: Iterable[Record]) -> None:
    """Append records and flush them to disk (one write per batch)."""
    text = "".join(r.dumps() + "\n" for r in records)
    if not text:
        return
    with open(path, "a", encoding="utf-8") as f:
        # a previous writer killed mid-line leaves no newline: start on a fresh line so the
        # truncated line stays the only casualty
        if f.tell() > 0:
            with open(path, "rb") as r:
                r.seek(-1, os.SEEK_END)
                if r.read(1) != b"\n":
                    text = "\n" + text
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def best_records(records: Iterable[Record]) -> dict[tuple[str, str], Record]:
    best: dict[tuple[str, str], Record] = {}
    for r in records:
        if not r.valid:
            continue
        k = (r.key, r.target)
        if k not in best or r.cost < best[k].cost:
            best[k] = r
    return best


def pick_best(in_file, out_file) -> int:
    """Write the best valid record of each workload of `in_file` to `out_file`; returns how
    many were written."""
    best = best_records(load_records(in_file))
    with open(out_file, "w", encoding="utf-8") as f:
        f.writelines(r.dumps() + "\n" for r in best.values())
    return len(best)


class ApplyHistoryBest(DispatchContext):
    """Template calls inside this context use the best valid record of their workload.

    A record is applied only when it was made by this tensorlang version and for the same
    compute definition (hash); other records are reported, never applied silently. Workloads
    that fall back to the default config are reported once, when the context exits, as a list
    (also in `.untuned`)."""

    def __init__(self, records):
        recs = load_records(records)
        self._by_key: dict[tuple[str, str], list[Record]] = {}
        for r in recs:
            if r.valid:
                self._by_key.setdefault((r.key, r.target), []).append(r)
        for lst in self._by_key.values():
            lst.sort(key=lambda r: r.cost)
        self._chosen: dict[tuple[str, str], object] = {}
        self.untuned: list[str] = []
        self.rejected: dict[str, str] = {}
        self.applied: dict[str, Record] = {}

    def query(self, target, name, args):
        from .space import FallbackConfig

        k = (workload_key(name, args), target)
        if k in self._chosen:
            return self._chosen[k]
        rec, cfg, why = self._select(k, name, args)
        if rec is not None:
            self.applied[k[0]] = rec
        elif why:
            self.rejected[k[0]] = why[0]
            warnings.warn(f"apply_history_best: {len(why)} record(s) for {k[0]} not "
                          f"applied: {why[0]}", stacklevel=3)
        if cfg is None:
            cfg = FallbackConfig()
            self.untuned.append(k[0])
        self._chosen[k] = cfg
        return cfg

    def best(self, target, name, args) -> Record | None:
        """The record :meth:`query` would apply to the workload, or None; reports nothing (to
        compare records before choosing what to build)."""
        return self._select((workload_key(name, args), target), name, args)[0]

    def _select(self, k, name, args) -> tuple[Record | None, object, list[str]]:
        """(best applicable record, its config, why each better record is not applicable)."""
        cands = self._by_key.get(k, [])
        if not cands:
            return None, None, []
        task = create_task(name, args, k[1])
        why = []
        for r in cands:
            if r.version != __version__:
                why.append(f"record made by tensorlang {r.version} (this is {__version__})")
                continue
            if r.workload.get("hash") != task.compute_hash:
                why.append("the compute definition changed since the record was made "
                           f"(hash {r.workload.get('hash')} != {task.compute_hash})")
                continue
            try:
                return r, task.config_space.from_json(r.config), why
            except ValueError as e:
                why.append(f"its config is not in the template's space any more ({e})")
        return None, None, why

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self.untuned:
            warnings.warn(f"apply_history_best: {len(self.untuned)} workload(s) had no "
                          f"applicable tuning record and used the default config: "
                          f"{', '.join(self.untuned)}", stacklevel=2)
        return False


def apply_history_best(path_or_records) -> ApplyHistoryBest:
    """Context manager: build with the best configs of a log (path or list of Records)."""
    return ApplyHistoryBest(path_or_records)
