import sys
from pathlib import Path

# tests in this folder import the shared helpers as `tl_testing`
sys.path.insert(0, str(Path(__file__).resolve().parent))
