"""`tensorlang --help` and each subcommand's: what they say, and that every flag the
documentation names is one of theirs (a renamed or removed flag fails here, not in a user's
shell)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tensorlang.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md"] + [ROOT / "docs" / f for f in (
    "distributed_tuning.md", "dynamic_shapes.md", "operators.md", "tvm_compat.md")]
NOT_OURS = {"--nthreads", "--resources"}  # `dask worker`'s, in distributed_tuning.md


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's line breaks undone


def test_help_describes_the_program_and_each_subcommand(capsys):
    top = _help([], capsys)
    # the whole sentence (the description was once the docstring's first line, cut mid-sentence)
    assert "Each subcommand wraps the same public calls a user makes from Python" in top
    for name, (help_text, _, _) in COMMANDS.items():
        assert name in top
        assert " ".join(help_text.split()) in _help([name], capsys)  # its own description


def test_every_flag_the_docs_name_exists(capsys):
    flags = set()
    for name in COMMANDS:
        flags |= set(re.findall(r"--[a-z][a-z0-9-]*", _help([name], capsys)))
    for doc in DOCS:
        text = doc.read_text()
        named = set(re.findall(r"(?:^|[\s`(\[])(--[a-z][a-z0-9-]*)", text, re.MULTILINE))
        assert named - NOT_OURS <= flags, (doc.name, sorted(named - NOT_OURS - flags))
