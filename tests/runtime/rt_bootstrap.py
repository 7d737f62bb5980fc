"""Make ``tensorlang.runtime`` importable from a source checkout that was not pip-installed.

setup.cfg maps the top-level ``runtime/`` folder to ``tensorlang.runtime``; an installed
tensorlang (``pip install -e .``, as CI does) already has that mapping and this is a no-op.
Used by conftest.py and by the scripts the tests run in fresh processes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ensure_importable() -> None:
    try:
        import tensorlang
    except ModuleNotFoundError:
        sys.path.insert(0, str(ROOT))
    try:
        import tensorlang.runtime
    except ModuleNotFoundError as e:
        if e.name != "tensorlang.runtime":
            raise
        spec = importlib.util.spec_from_file_location(
            "tensorlang.runtime",
            ROOT / "runtime" / "__init__.py",
            submodule_search_locations=[str(ROOT / "runtime")],
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["tensorlang.runtime"] = module
        spec.loader.exec_module(module)
        import tensorlang

        tensorlang.runtime = module
