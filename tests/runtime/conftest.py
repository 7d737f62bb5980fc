from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rt_bootstrap

rt_bootstrap.ensure_importable()
