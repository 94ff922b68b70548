"""Locations read from a stopped job's output name workspace files only, by the rule every other
location follows: never ``<frozen runpy>``, a virtual environment, an installed library or this
package, even when the workspace root is the current folder (where a pseudo-file's name, resolved
as a path, would lie) or holds this package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchscan_lsp.worker.postmortem import last_stack_location, last_traceback_location
from torchscan_lsp.worker.supervisor import outcome
from torchscan_lsp.worker.workspace import PACKAGE_DIR


def dump(root: Path, *frames: str) -> str:
    lines = [f'  File "{frame}", line {number} in f' for number, frame in enumerate(frames, start=10)]
    return "Current thread 0x01 (most recent call first):\n" + "\n".join(lines) + "\n"


def traceback_text(*frames: str) -> str:
    lines = [f'  File "{frame}", line {number}, in f\n    x()' for number, frame in enumerate(frames, start=10)]
    return "Traceback (most recent call last):\n" + "\n".join(lines) + "\nRuntimeError: boom\n"


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the root is the current folder, as for `scan` run at a project's top
    return tmp_path


def test_pseudo_files_and_environments_are_never_named(root):
    never = [
        "<frozen runpy>",
        "<string>",
        str(root / ".venv/lib/python3.11/site-packages/torch/nn/modules/conv.py"),
        str(root / "venv/lib/python3.11/site-packages/torch/nn/modules/conv.py"),
        str(root / "models/__pycache__/net.py"),
        str(root / "data.txt"),
    ]
    # innermost first in a faulthandler dump: none of these is the workspace's, the model file is
    assert last_stack_location(dump(root, *never, str(root / "models/net.py")), str(root)) == ("models/net.py", 16)
    assert last_stack_location(dump(root, *never), str(root)) is None
    # most recent call last in a traceback
    assert last_traceback_location(traceback_text(str(root / "models/net.py"), *never), str(root)) == ("models/net.py", 10)
    assert last_traceback_location(traceback_text(*never), str(root)) is None


def test_this_package_is_never_named_even_inside_the_root():
    checkout = str(Path(PACKAGE_DIR).parent)  # scanning this repository's examples/: the root holds the package
    frames = [f"{PACKAGE_DIR}/engine/crawler.py", f"{PACKAGE_DIR}/worker/runner.py", f"{checkout}/examples/cnn.py"]
    assert last_stack_location(dump(Path(checkout), *frames), checkout) == ("examples/cnn.py", 12)


def test_a_stop_at_the_memory_limit_without_a_workspace_frame_names_no_file(root):
    # the user's case: the stack of a convolution's forward, called by the engine, under `python -m`
    log = root / "log.txt"
    log.write_text(dump(root, "/usr/lib/python3/site-packages/torch/nn/modules/conv.py", f"{PACKAGE_DIR}/engine/crawler.py",
                        "<frozen runpy>"), encoding="utf-8")
    job = {"workspace_root": str(root), "target": "convs"}
    result = outcome(job, -9, "memory", result_path=root / "none.json", log_path=log, timeout_s=60, memory_mb=300)
    assert (result["error"]["kind"], result["error"]["file"], result["error"]["line"]) == ("memory", None, None)
    json.dumps(result)
