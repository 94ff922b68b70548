"""What every test shares: the user's cache folder is never touched, and the example gallery's
totals are computed once.

Servers the tests start inherit this process's environment, so the results they keep on disk
(``torchscan.cacheResults``) and the reports they write land in a folder of this run's own, and
each server has a warm parent of its own that ends with it: a warm parent shared between servers
(``torchscan_lsp.worker.shared``) would carry one test's learned libraries into the next, and one
kept after the run would outlive the suite. ``tests/worker/test_shared_warm_parent.py`` turns
sharing on where it is the subject.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="torchscan-lsp-tests-cache-")
os.environ["TORCHSCAN_LSP_SHARE_WARM"] = "0"
os.environ["TORCHSCAN_LSP_KEEP_WARM_S"] = "0"

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def gallery_totals() -> dict[tuple[str, str], dict]:
    """Each target of ``examples/`` by (file, target): its report's totals, from one run of
    ``torchscan-lsp scan examples/ --format json`` (the exact MACs against which the gallery tests of
    ``check`` and of Neovim hold what they show). Raises AssertionError when the scan fails."""
    done = subprocess.run([sys.executable, "-m", "torchscan_lsp", "scan", "examples/", "--format", "json"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return {(entry["file"], entry["target"]): entry["report"]["totals"] for entry in json.loads(done.stdout)}
