from __future__ import annotations

import sys
from pathlib import Path

# the test templates live in a plain module that the builder processes import by name
sys.path.insert(0, str(Path(__file__).resolve().parent))
