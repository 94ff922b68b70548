"""The warm parent learns the workspace's libraries: real warm parents and jobs, fake packages.

The fake installed packages live in a folder outside the workspace that is put on ``PYTHONPATH``,
the way site-packages is on ``sys.path``; each records in a log file the process that ran its
module body, so "imported once" and "imported fresh" are read from what ran where, never from the
code under test. One warm parent serves the whole module (starting one takes seconds).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from torchscan_lsp.worker import client, pool, preload

PYTHON = sys.executable

pytestmark = pytest.mark.skipif(not pool.warm_starts_possible(), reason="warm workers need Linux with fork")

# Each fake package appends "<name> <pid>" to IMPORT_LOG when its module body runs.
_RECORD = """
import os
with open(os.environ["TORCHSCAN_TEST_IMPORT_LOG"], "a") as _log:
    _log.write(f"{__name__} {os.getpid()}\\n")
"""
PACKAGES = {
    "fakelib": _RECORD + "VALUE = 2\n",
    # raises wherever the working directory is not a workspace holding the marker file (the warm
    # parent and its probe run in "/"), so it imports in the job but not in the warm parent
    "brokenlib": _RECORD + "if not os.path.exists('workspace-marker'):\n    raise RuntimeError('brokenlib needs its workspace')\n",
    "threadlib": _RECORD + "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n",
    # what torch.cuda.is_initialized() reads: a CPU-only torch cannot really initialise CUDA
    "cudalib": _RECORD + "import torch\ntorch.cuda._initialized = True\n",
}

MODEL = """
import os
import brokenlib, cudalib, fakelib, mylib, threadlib
import torch.nn as nn

def build():
    with open(os.environ["TORCHSCAN_TEST_IMPORT_LOG"], "a") as log:
        log.write(f"job {os.getpid()}\\n")
    return nn.Linear(4, fakelib.VALUE * mylib.VALUE)
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


class Setup:
    """One workspace, one fake site folder, one warm parent on its own event loop."""

    def __init__(self, base: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.site = base / "site"
        self.root = base / "workspace"
        self.log = base / "imports.log"
        for name, text in PACKAGES.items():
            _write(self.site / name / "__init__.py", text)
        # an editable install whose source is inside the workspace: its folder on sys.path, as
        # the .pth file of setuptools' editable install puts it there
        _write(self.root / "mylib_src" / "mylib" / "__init__.py", _RECORD + "VALUE = 1\n")
        _write(self.root / "workspace-marker", "")
        _write(self.root / "model.py", MODEL)
        self.records: list[logging.LogRecord] = []

    def run(self, awaitable):
        return self.loop.run_until_complete(awaitable)

    def job(self) -> dict:
        result = self.run(client.run({"workspace_root": str(self.root), "file": str(self.root / "model.py"),
                                      "target": "build", "options": {"input_shape": [4]}, "measure": []},
                                     python=PYTHON, timeout_s=120))
        assert result["ok"], result
        return result

    def parameters(self, result: dict) -> int:
        return result["report"]["totals"]["parameters"]["value"]

    def mylib_value(self) -> int:
        return int((self.root / "mylib_src" / "mylib" / "__init__.py").read_text().rsplit("VALUE =", 1)[1])

    def warm_parent(self) -> pool.WarmParent:
        return pool._parents[PYTHON]

    def wait_for(self, condition, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, "the warm parent did not preload in time"
            self.run(asyncio.sleep(0.2))

    def imports(self) -> list[tuple[str, int]]:
        lines = self.log.read_text().split("\n") if self.log.exists() else []
        return [(name, int(pid)) for name, pid in (line.split() for line in lines if line)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("preload")
    state = Setup(base)
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "TORCHSCAN_TEST_IMPORT_LOG", "TORCHSCAN_LSP_WARM")}
    paths = (str(state.site), str(state.root / "mylib_src"), saved["PYTHONPATH"])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    os.environ["TORCHSCAN_TEST_IMPORT_LOG"] = str(state.log)
    os.environ["TORCHSCAN_LSP_WARM"] = "1"
    handler = logging.Handler()
    handler.emit = state.records.append
    logger = logging.getLogger("torchscan_lsp.worker.pool")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    pool.shutdown()
    try:
        state.first = state.job()
        state.wait_for(lambda: "fakelib" in state.warm_parent().packages)
        yield state
    finally:
        pool.shutdown()
        tasks = asyncio.all_tasks(state.loop)  # the readers end as their warm parents' pipes close
        state.run(asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30))
        state.loop.close()
        logger.removeHandler(handler)
        logger.setLevel(level)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_an_installed_package_is_preloaded_after_the_first_job_and_imported_once(setup):
    parent_pid = setup.warm_parent().process.pid
    assert "fakelib" in setup.warm_parent().packages
    assert "fakelib" in pool.preloaded_packages(PYTHON)  # what the status notification shows
    before = len(setup.imports())
    for _ in range(2):
        setup.job()
    later = setup.imports()[before:]
    jobs = [pid for name, pid in later if name == "job"]
    # two jobs ran, in two fresh children, and neither ran fakelib's module body again: the
    # body that serves them ran once, in the warm parent itself
    assert len(jobs) == 2 and parent_pid not in jobs and len(set(jobs)) == 2
    assert [name for name, _ in later if name == "fakelib"] == []
    assert ("fakelib", parent_pid) in setup.imports()
    assert any("preloaded" in r.getMessage() and "fakelib" in r.getMessage() for r in setup.records)


def test_an_editable_package_inside_the_workspace_is_reimported_after_an_edit(setup):
    assert "mylib" not in setup.warm_parent().packages
    # Linear(4, fakelib.VALUE * mylib.VALUE): 4*n weights + n biases = 5n
    assert setup.parameters(setup.job()) == 5 * (2 * 1)
    _write(setup.root / "mylib_src" / "mylib" / "__init__.py", _RECORD + "VALUE = 3\n")
    assert setup.parameters(setup.job()) == 5 * (2 * 3)
    assert "mylib" not in setup.warm_parent().packages


def test_a_package_that_raises_on_import_is_skipped_with_a_log_line(setup):
    skipped = setup.warm_parent().skipped
    assert "brokenlib" in skipped and "brokenlib needs its workspace" in skipped["brokenlib"]
    assert "brokenlib" not in setup.warm_parent().packages
    assert any("not preloading brokenlib" in r.getMessage() and "RuntimeError" in r.getMessage()
               for r in setup.records)
    setup.job()  # the jobs themselves still import it


@pytest.mark.parametrize("name, reason", [("threadlib", "started a thread"), ("cudalib", "initialised CUDA")])
def test_preloading_a_package_that_starts_a_thread_or_touches_cuda_is_refused(setup, name, reason):
    parent = setup.warm_parent()
    assert reason in parent.skipped.get(name, ""), parent.skipped
    assert name not in parent.packages
    # the module body ran in the first job's child and in the probe, never in the warm parent
    assert parent.process.pid not in [pid for module, pid in setup.imports() if module == name]
    # the warm parent still holds one thread: the kernel's count of its tasks
    assert len(os.listdir(f"/proc/{parent.process.pid}/task")) == 1


def test_a_workspace_file_that_shadows_a_preloaded_package_wins(setup):
    shadow = setup.root / "fakelib.py"
    _write(shadow, "VALUE = 7\n")
    try:
        assert setup.parameters(setup.job()) == 5 * (7 * setup.mylib_value())
    finally:
        shadow.unlink()


def test_an_installed_package_edited_on_disk_is_never_served_stale(setup):
    old = setup.warm_parent()
    path = setup.site / "fakelib" / "__init__.py"
    _write(path, _RECORD + "VALUE = 4\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # whatever the clock's grain
    mylib = setup.mylib_value()
    assert setup.parameters(setup.job()) == 5 * (4 * mylib)
    assert old.retired is not None and "fakelib" in old.retired
    successor = setup.warm_parent()
    assert successor is not old
    setup.wait_for(lambda: "fakelib" in successor.packages)  # it preloads what its predecessor had
    assert setup.parameters(setup.job()) == 5 * (4 * mylib)


def test_probe_stops_at_the_first_module_that_starts_a_thread(tmp_path, monkeypatch):
    for name in ("fakelib", "threadlib"):
        _write(tmp_path / name / "__init__.py", PACKAGES[name])
    monkeypatch.setenv("TORCHSCAN_TEST_IMPORT_LOG", str(tmp_path / "log"))
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from torchscan_lsp.worker import preload; "
            "print(json.dumps(preload.probe([(n, None) for n in ['json', 'threadlib', 'fakelib', 'nosuchmodule_x']])))")
    out = subprocess.run([PYTHON, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True).stdout
    answer = json.loads(out)
    assert answer["accepted"] == ["json"]
    assert list(answer["refused"]) == ["threadlib"]
    assert answer["rest"] == [["fakelib", None], ["nosuchmodule_x", None]]


def test_library_files_are_those_outside_the_workspace_or_in_its_site_packages(tmp_path):
    root = tmp_path / "ws"
    assert preload.is_library_file(str(tmp_path / "elsewhere" / "m.py"), str(root))
    assert preload.is_library_file(str(root / ".venv" / "lib" / "python3.11" / "site-packages" / "m.py"), str(root))
    assert not preload.is_library_file(str(root / "src" / "pkg" / "m.py"), str(root))
    assert not preload.is_library_file(str(root / "m.py"), str(root))


def test_a_name_that_is_a_file_at_the_workspace_root_is_the_workspaces_though_the_warm_parent_runs_elsewhere(tmp_path):
    # the warm parent runs in "/", without the root on its path: the file is found by where the job looks first
    (tmp_path / "layers.py").write_text("N = 1\n", encoding="utf-8")
    (tmp_path / "blocks").mkdir()
    assert preload.workspace_origin("layers:Block", str(tmp_path)) == str(tmp_path / "layers.py")
    assert preload.workspace_origin("blocks.conv", str(tmp_path)) == str(tmp_path / "blocks")
    assert preload.workspace_origin("json", str(tmp_path)) is None
