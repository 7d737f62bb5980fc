"""Tuning callbacks: cb(tuner, inputs, results) after each batch; optional start(tuner) and
close() hooks around a tune() call."""

from __future__ import annotations

import os

from .record import append_records, make_record


class progress_bar:
    """A tqdm bar: trials done, best GFLOP/s so far, errors by kind, ETA."""

    def __init__(self, desc: str | None = None, file=None):
        self.desc = desc
        self.file = file
        self._bar = None

    def start(self, tuner) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=tuner.n_trial, initial=0, desc=self.desc or tuner.task.name,
                         unit="trial", file=self.file, dynamic_ncols=True)
        self._done = tuner.trials

    def __call__(self, tuner, inputs, results) -> None:
        if self._bar is None:
            self.start(tuner)
        self._bar.update(tuner.trials - self._done)
        self._done = tuner.trials
        post = {"best": f"{tuner.best_flops / 1e9:.1f} GFLOP/s"}
        if tuner.errors:
            post["errors"] = sum(tuner.errors.values())
        self._bar.set_postfix(post, refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class log_to_file:
    """Append each batch's records to a JSON-lines file, flushed to disk per batch."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)

    def __call__(self, tuner, inputs, results) -> None:
        append_records(self.path, [make_record(i, r) for i, r in zip(inputs, results)])
