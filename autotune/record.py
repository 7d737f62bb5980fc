"""Tuning records (JSON lines) and deployment from them.

One line per measurement:

    {"workload": {"name": "matmul", "args": [1024, 1024, 1024, "float32"], "hash": "97761b..."},
     "target": "llvm", "config": {"index": 225, "entity": {"tile_m": 4, ...}},
     "trace": [{"kind": "cache_write", ...}, ...],
     "result": {"costs": [0.0081, ...], "error": null, "error_msg": "", "all_cost": 0.9},
     "timestamp": 1700000000.0, "version": "0.1.0"}

Tuners append and flush each candidate's line as it finishes (log_to_file streams), so a killed
job loses at most the candidates in flight (and possibly leaves a truncated last line, which
load_records skips with a warning).
"""

from __future__ import annotations

import codecs
import functools
import json
import math
import os
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..version import __version__
from .arguments import list_of
from .measure import ERROR_KINDS, MeasureInput, MeasureResult, robust_cost
from .task import DispatchContext, create_task, split_workload, workload_key


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
        """Seconds per call: the median of the repeats (robust_cost), inf when invalid."""
        return robust_cost(self.result["costs"]) if self.valid else math.inf

    @property
    def remeasured(self) -> bool:
        """Measured again at the end of tuning with the other finalists and the default."""
        return bool(self.result.get("remeasured", False))

    @property
    def chosen(self) -> bool:
        """The winner of a re-measurement (the default unless a finalist was measurably
        faster)."""
        return bool(self.result.get("chosen", False))

    @property
    def in_model(self) -> bool:
        """Timed inside runs of a model (graph.remeasure_in_model): its costs are the kernel's
        per-call times as the model runs it, not a run of the kernel alone."""
        return bool(self.result.get("in_model", False))

    @property
    def rank(self) -> tuple:
        """The best record of a workload is the first by this key: the latest choice made
        inside runs of a model, then a re-measurement's winner, then any re-measured record
        (its figure is many interleaved repeats; the others' best is the luckiest of many
        noisy measurements of near-equal configs), then the fastest."""
        model_choice = self.chosen and self.in_model
        return (not model_choice, -self.timestamp if model_choice else 0.0, not self.chosen,
                not self.remeasured, self.cost)

    def to_json(self) -> dict:
        return {"workload": self.workload, "target": self.target, "config": self.config,
                "trace": self.trace, "result": self.result, "timestamp": self.timestamp,
                "version": self.version}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))


def make_record(inp: MeasureInput, res: MeasureResult) -> Record:
    task = inp.task
    result = {"costs": list(res.costs), "error": res.error, "error_msg": res.error_msg,
              "all_cost": res.all_cost}
    if res.remeasured:  # only then: the lines of ordinary trials stay as TVM writes them
        result["remeasured"] = True
    if res.chosen:
        result["chosen"] = True
    return Record(task.workload, task.target, inp.config.to_json(),
                  json.loads(res.trace) if res.trace else None, result,
                  res.timestamp or time.time(), __version__)


_REQUIRED = ("workload", "target", "config", "result", "version")
_JSON_SCALARS = (bool, int, float, str)


def _check(ok: bool, what: str, value) -> None:
    if not ok:
        raise ValueError(f"{what}, got {json.dumps(value)[:60]}")


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_knob_value(v) -> bool:
    """A knob's JSON value: a scalar (define_knob) or a list of scalars (split, reorder,
    annotate)."""
    if isinstance(v, list):
        return all(isinstance(x, _JSON_SCALARS) for x in v)
    return isinstance(v, _JSON_SCALARS) or v is None


def _check_workload(w) -> None:
    _check(isinstance(w, dict) and {"name", "args", "hash"} <= set(w),
           "workload must be an object with name, args and hash", w)
    _check(isinstance(w["name"], str) and w["name"], "workload name must be a string",
           w["name"])
    _check(isinstance(w["hash"], str), "workload hash must be a string", w["hash"])
    _check(isinstance(w["args"], list), "workload args must be a list", w["args"])
    try:
        workload_key(w["name"], w["args"])
    except TypeError:
        _check(False, "workload args must be numbers, strings or lists of them", w["args"])


def _check_config(c) -> None:
    _check(isinstance(c, dict) and isinstance(c.get("entity"), dict),
           "config must be an object with an entity object", c)
    _check(all(isinstance(k, str) and _is_knob_value(v) for k, v in c["entity"].items()),
           "config entity must map knob names to values or lists of values", c["entity"])


def _check_result(r) -> None:
    _check(isinstance(r, dict) and "costs" in r, "result must be an object with costs", r)
    costs = r["costs"]
    _check(isinstance(costs, list) and all(_is_number(c) and c >= 0 for c in costs),
           "result costs must be a list of seconds (finite numbers >= 0)", costs)
    err = r.get("error")
    _check(err is None or err in ERROR_KINDS, f"result error must be null or one of "
           f"{list(ERROR_KINDS)}", err)
    _check(isinstance(r.get("error_msg", ""), str), "result error_msg must be a string",
           r.get("error_msg"))
    _check(_is_number(r.get("all_cost", 0.0)), "result all_cost must be a number",
           r.get("all_cost"))
    for flag in ("remeasured", "chosen", "in_model"):
        _check(isinstance(r.get(flag, False), bool), f"result {flag} must be true or false",
               r.get(flag))


def _parse(line: str, lineno: int) -> Record:
    """The record on one line; ValueError saying which field is malformed (every field is
    checked here, so that code using a loaded record never meets a malformed one)."""
    try:
        d = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg})") from None
    except RecursionError:  # a line of nested brackets deeper than the parser recurses
        raise ValueError("not a record (JSON nested too deep)") from None
    _check(isinstance(d, dict), "a record must be a JSON object", d)
    missing = [k for k in _REQUIRED if k not in d]
    _check(not missing, f"a record needs {', '.join(_REQUIRED)} (missing "
           f"{', '.join(missing)})", sorted(d))
    _check_workload(d["workload"])
    _check(isinstance(d["target"], str) and d["target"], "target must be a string",
           d["target"])
    _check_config(d["config"])
    _check_result(d["result"])
    trace = d.get("trace")
    _check(trace is None or isinstance(trace, list), "trace must be a list or null", trace)
    ts = d.get("timestamp", 0.0)
    _check(_is_number(ts), "timestamp must be a number", ts)
    _check(isinstance(d["version"], str), "version must be a string", d["version"])
    return Record(d["workload"], d["target"], d["config"], trace, d["result"], float(ts),
                  d["version"], lineno)


# a log with many bad lines: the warning lists this many of them
_LISTED_BAD_LINES = 5


def _line_list(bad: list, most: int = 20) -> str:
    nums = ", ".join(str(n) for n, _ in bad[:most])
    return nums + (", ..." if len(bad) > most else "")


def load_records(source) -> list[Record]:
    """Records from a JSON-lines file (path) or from an iterable of Records. Lines that are
    truncated, not records, or records with a malformed field are skipped (the file is left as
    it is) with one warning naming the file, their line numbers and what was wrong."""
    if not isinstance(source, (str, os.PathLike)):
        return _record_list(source)
    out, bad = [], []
    with open(source, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(_parse(line, lineno))
            except ValueError as e:
                bad.append((lineno, str(e)))
    if bad:
        listed = "; ".join(f"line {n}: {why}" for n, why in bad[:_LISTED_BAD_LINES])
        more = f"; and {len(bad) - _LISTED_BAD_LINES} more" if len(bad) > _LISTED_BAD_LINES \
            else ""
        warnings.warn(f"{os.fspath(source)}: skipped {len(bad)} corrupt, truncated or "
                      f"malformed tuning record(s) (lines {_line_list(bad)}): {listed}{more}",
                      stacklevel=2)
    other = sorted({r.version for r in out if r.version != __version__})
    if other:
        n = sum(r.version != __version__ for r in out)
        warnings.warn(f"{os.fspath(source)}: {n} record(s) made by tensorlang {other} (this is "
                      f"{__version__}): loaded, but apply_history_best will not apply them",
                      stacklevel=2)
    return out


def _record_list(source) -> list[Record]:
    """The Records of an iterable; TypeError for anything else (a bytes path was read as
    its bytes, and other entries dropped: apply_history_best applied nothing, silently)."""
    if isinstance(source, (bytes, bytearray)):
        raise TypeError("tuning records: give the log's path as a str or os.PathLike, not bytes")
    return list_of(source, lambda r: isinstance(r, Record),
                   f"tuning records: expected a log's path or a list of Records, got "
                   f"{type(source).__name__}",
                   lambda r: f"tuning records: expected Records (load_records gives them), "
                             f"got {type(r).__name__} {r!r:.80}")


# the bytes of an existing file read to tell a tuning log from another file
_LOG_SNIFF_BYTES = 1 << 16


def check_appendable_log(path) -> None:
    """Refuse (ValueError) to append records to an existing file that is not a tuning log: an
    ONNX model or a user's notes given as the log would be corrupted. A log is UTF-8 text
    whose lines are JSON objects; one whose lines read are all corrupt is refused too."""
    try:
        with open(path, "rb") as f:
            head = f.read(_LOG_SNIFF_BYTES)
    except FileNotFoundError:
        return
    refusal = f"{os.fspath(path)} is not a tuning log ({{}}): records are not appended to it; " \
        "give a new file or a JSON-lines log"
    if b"\0" in head or not _is_utf8_prefix(head):
        raise ValueError(refusal.format("it holds binary data"))
    lines = [line for line in head.decode("utf-8", errors="ignore").splitlines() if line.strip()]
    if len(head) == _LOG_SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line read may be cut off
    if lines and not any(line.lstrip().startswith("{") for line in lines):
        raise ValueError(refusal.format(f"none of its first {len(lines)} lines is a JSON record"))


def _is_utf8_prefix(data: bytes) -> bool:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data)  # a character cut off at the end
    except UnicodeDecodeError:  # is not an error: final=False
        return False
    return True


def append_records(path, records: Iterable[Record]) -> None:
    """Append records and flush them to disk (one write per call)."""
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
        if k not in best or r.rank < best[k].rank:
            best[k] = r
    return best


def pick_best(in_file, out_file) -> int:
    """Write the best valid record of each workload of `in_file` to `out_file`; returns how
    many were written."""
    if _same_file(in_file, out_file):
        # writing the best over the log itself would drop every other record
        raise ValueError(f"pick_best: out_file {os.fspath(out_file)} is in_file; give another "
                         "path (the log keeps all the records)")
    best = best_records(load_records(in_file))
    with open(out_file, "w", encoding="utf-8") as f:
        f.writelines(r.dumps() + "\n" for r in best.values())
    return len(best)


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # out_file not there yet
        return False


def load_from_file(path) -> Iterator[tuple[MeasureInput, MeasureResult]]:
    """TVM's autotvm.record.load_from_file: the records of a log as (MeasureInput,
    MeasureResult) pairs, `inp.config` the config measured and `res.costs` its seconds. Each
    record's template must be registered (defined or imported by the script), as TVM needs it
    to replay one; load_records gives the records themselves, with no template."""
    tasks: dict[tuple[str, str], object] = {}  # one Task per workload, not one per line
    for r in load_records(path):
        k = (r.key, r.target)
        if k not in tasks:
            tasks[k] = create_task(r.workload["name"], r.workload["args"], r.target)
        task = tasks[k]
        res = r.result
        yield (MeasureInput(task, task.config_space.from_json(r.config)),
               MeasureResult(list(res.get("costs") or []), res.get("error"),
                             res.get("error_msg", ""), res.get("all_cost", 0.0), r.timestamp,
                             json.dumps(r.trace) if r.trace is not None else None,
                             r.remeasured, r.chosen))


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
        # each workload's (target, records): a query matches targets by kind (_candidates)
        self._by_workload: dict[str, list[tuple[str, list[Record]]]] = {}
        for (key, target), lst in self._by_key.items():
            lst.sort(key=lambda r: r.rank)
            self._by_workload.setdefault(key, []).append((target, lst))
        self._chosen: dict[tuple[str, str], object] = {}
        self.untuned: list[str] = []
        self.rejected: dict[str, str] = {}
        self.applied: dict[str, Record] = {}

    def query(self, target, name, args=None):
        from .space import FallbackConfig

        name, args = split_workload(name, args)  # TVM's query(target, task.workload) too

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

    def records_of(self, target, name) -> list[list[Record]]:
        """The valid records of template ``name`` for ``target``, one list per workload, best
        first (the graph layer looks for a kernel tuned at other sizes, issue 19)."""
        return [recs for (_, t), recs in self._by_key.items()
                if t == target and recs[0].workload.get("name") == name]

    def records_for(self, key: str, target) -> list[Record]:
        """The valid records of one workload (its key, as Record.key), best first."""
        return list(self._by_key.get((key, target), []))

    def best(self, target, name, args) -> Record | None:
        """The record :meth:`query` would apply to the workload, or None; reports nothing (to
        compare records before choosing what to build)."""
        return self._select((workload_key(name, args), target), name, args)[0]

    def _select(self, k, name, args) -> tuple[Record | None, object, list[str]]:
        """(best applicable record, its config, why each better record is not applicable)."""
        cands = self._candidates(k)
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

    def _candidates(self, k) -> list[Record]:
        """The workload's records for targets of the query's kind, as TVM matches records by
        target keys: a template asks for "llvm", and a log tuned with "llvm -mcpu=<cpu>"
        applies. Records whose target compiles the same code as the query's (this host's CPU)
        come first, then those tuned for another CPU; each group best first."""
        key, target = k
        same, other = [], []
        for rt, recs in self._by_workload.get(key, []):
            if _target_kind(rt) == _target_kind(target):
                (same if _same_code(rt, target) else other).extend(recs)
        return sorted(same, key=lambda r: r.rank) + sorted(other, key=lambda r: r.rank)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self.untuned:
            warnings.warn(f"apply_history_best: {len(self.untuned)} workload(s) had no "
                          f"applicable tuning record and used the default config: "
                          f"{', '.join(self.untuned)}", stacklevel=2)
        return False


def _target_kind(target: str) -> str:
    return target.split()[0] if target.split() else target


def _same_code(a: str, b: str) -> bool:
    """Whether two target strings compile the same code ("llvm" and "llvm -mcpu=<this host's
    CPU>" do); a target this LLVM cannot parse matches only itself."""
    if a == b:
        return True
    da, db = _target_dict(a), _target_dict(b)
    return da is not None and da == db


@functools.lru_cache(maxsize=64)
def _target_dict(target: str) -> dict | None:
    """The target string parsed (cached: every query of every workload compares targets), or
    None where this LLVM cannot parse it."""
    from ..codegen.target import Target

    try:
        return Target.from_string(target).to_dict()
    except (TypeError, ValueError):
        return None


def apply_history_best(path_or_records) -> ApplyHistoryBest:
    """Context manager: build with the best configs of a log (path or list of Records)."""
    return ApplyHistoryBest(path_or_records)
