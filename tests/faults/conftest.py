"""The fault tests drive the server with the end-to-end helpers of ``tests/server``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
