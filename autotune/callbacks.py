"""Tuning callbacks: cb(tuner, inputs, results) after each batch; optional start(tuner) and
close() hooks around a tune() call, and stream(tuner, input, result) as each candidate of a
batch finishes."""

from __future__ import annotations

import os
import sys

from .record import append_records, check_appendable_log, make_record

_SI_PREFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class progress_bar:
    """A tqdm bar: trials done, best throughput so far, failed trials, ETA.

    TVM's signature (``autotvm.callback.progress_bar(total, prefix="", si_prefix="G")``):
    `total` the bar's length (default: the tune() call's n_trial), `prefix` its label (default:
    the task's name; `desc` is the same), `si_prefix` the unit of the best throughput
    (G: GFLOP/s). When most trials failed the bar says so, and on closing it writes a line with
    how they failed and the first error message."""

    def __init__(self, total: int | None = None, prefix: str = "", si_prefix: str = "G",
                 desc: str | None = None, file=None):
        if si_prefix not in _SI_PREFIXES:
            raise ValueError(f"progress_bar: si_prefix must be one of {sorted(_SI_PREFIXES)}, "
                             f"got {si_prefix!r}")
        if total is not None and (isinstance(total, bool) or not isinstance(total, int)
                                  or total < 1):
            raise ValueError(f"progress_bar: total must be a positive number of trials, got "
                             f"{total!r} (the label is prefix= or desc=)")
        self.total = total
        self.desc = desc or prefix.strip() or None
        self.si_prefix = si_prefix
        self.file = file
        self._bar = None

    def start(self, tuner) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=self.total or tuner.n_trial, initial=0,
                         desc=self.desc or tuner.task.name, unit="trial", file=self.file,
                         dynamic_ncols=True)
        self._done = self._trials0 = tuner.trials
        self._errors0 = dict(tuner.errors)
        self._tuner = tuner

    def __call__(self, tuner, inputs, results) -> None:
        if self._bar is None:
            self.start(tuner)
        self._bar.update(tuner.trials - self._done)
        self._done = tuner.trials
        unit = _SI_PREFIXES[self.si_prefix]
        post = {"best": f"{tuner.best_flops / unit:.1f} {self.si_prefix}FLOP/s"}
        measured, failed = self._counts(tuner)
        if failed:
            post["failed"] = f"{failed}/{measured}"
            if failed * 2 > measured:
                post["failed"] += " - most trials failed"
        self._bar.set_postfix(post, refresh=True)

    def _errors(self, tuner) -> dict[str, int]:
        """Failed trials of this tune() run, by kind."""
        return {k: n - self._errors0.get(k, 0) for k, n in tuner.errors.items()
                if n > self._errors0.get(k, 0)}

    def _counts(self, tuner) -> tuple[int, int]:
        """(trials, failed trials) of this tune() run."""
        return tuner.trials - self._trials0, sum(self._errors(tuner).values())

    def close(self) -> None:
        if self._bar is None:
            return
        measured, failed = self._counts(self._tuner)
        if failed * 2 > measured:
            summary = self._tuner.failure_summary(self._errors(self._tuner))
            self._bar.write(f"{self._bar.desc}: {failed} of {measured} trials failed "
                            f"({summary})", file=self.file or sys.stderr)
        self._bar.close()
        self._bar = None


class log_to_file:
    """Append each candidate's record to a JSON-lines file as soon as it is measured, flushed
    to disk (a tuner streams results to it: a driver killed mid-batch loses only the
    candidates in flight); records that were not streamed are appended after the batch.

    protocol: TVM's argument; "json" (the only protocol: one JSON record per line, tensorlang's
    own record format, which TVM's logs are not)."""

    def __init__(self, path: str | os.PathLike, protocol: str = "json"):
        if protocol != "json":
            raise ValueError(f"log_to_file: protocol must be 'json' (TVM's 'pickle' protocol "
                             f"is not supported: records are JSON lines), got {protocol!r}")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"log_to_file: expected a file path, got {type(path).__name__} "
                            "(TVM also takes an open file; here, give its path)")
        check_appendable_log(path)
        self.path = os.fspath(path)
        self._streamed: set[int] = set()  # ids of this batch's results already written

    def stream(self, tuner, inp, result) -> None:
        """Write one candidate's record now (called as the candidate finishes)."""
        append_records(self.path, [make_record(inp, result)])
        self._streamed.add(id(result))

    def __call__(self, tuner, inputs, results) -> None:
        streamed, self._streamed = self._streamed, set()
        append_records(self.path, [make_record(i, r) for i, r in zip(inputs, results)
                                   if id(r) not in streamed])


def streamer(tuner, inputs, callbacks):
    """measure_batch's on_result for a batch: each callback's stream(tuner, input, result) as
    the candidate finishes (None when no callback streams)."""
    streams = [cb.stream for cb in callbacks if hasattr(cb, "stream")]
    if not streams:
        return None

    def on_result(n, result):
        for stream in streams:
            stream(tuner, inputs[n], result)

    return on_result
