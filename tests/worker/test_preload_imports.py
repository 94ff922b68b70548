"""The warm parent imports what the workspace's annotated files import, before its first job.

Fake installed packages live in a folder outside the workspace put on ``PYTHONPATH`` (as
site-packages is on ``sys.path``); each module body appends ``"<module> <pid>"`` to a log when it
runs, so where a module was imported is read from what ran in which process, never from the code
under test. ``lazylib`` imports lazily, as ``transformers`` does: its ``Model`` is defined in
``lazylib.models``, which only taking the name from the package loads. The workspace's model
records, before its own import statements run, whether ``lazylib.models`` was already loaded, and
says so in its parameter count: ``Sequential(lazylib.Model = Linear(4, 2), Linear(2, n))`` has
``(4 * 2 + 2) + (2 * n + n) = 10 + 3n`` parameters, with ``n = 3`` when it was (19), else 1 (13).
No time is measured.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import textwrap
from pathlib import Path

import pytest

from torchscan_lsp.session.controller import Session
from torchscan_lsp.worker import pool

PYTHON = sys.executable

pytestmark = pytest.mark.skipif(not pool.warm_starts_possible(), reason="warm workers need Linux with fork")

_RECORD = """
import os
with open(os.environ["TORCHSCAN_TEST_IMPORT_LOG"], "a") as _log:
    _log.write(f"{__name__} {os.getpid()}\\n")
"""
FILES = {
    "lazylib/__init__.py": _RECORD + """
def __getattr__(name):
    if name == "Model":
        from lazylib.models import Model
        return Model
    raise AttributeError(name)
""",
    "lazylib/models.py": _RECORD + """
import torch.nn as nn


class Model(nn.Linear):
    def __init__(self):
        super().__init__(4, 2)
""",
    # raises wherever the working directory is not the workspace (the warm parent runs in "/")
    "brokenlib/__init__.py": _RECORD + "if not os.path.exists('workspace-marker'):\n    raise RuntimeError('brokenlib needs its workspace')\n",
}
MODEL = """
import sys

PRELOADED = "lazylib.models" in sys.modules  # before this file's own imports run

import brokenlib
import wslib
from lazylib import Model
import torch.nn as nn


# torchscan: input_shape=(4,)
def build():
    return nn.Sequential(Model(), nn.Linear(2, 3 if PRELOADED else 1))
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    base = tmp_path_factory.mktemp("preload_imports")
    site, root, log = base / "site", base / "workspace", base / "imports.log"
    for name, text in FILES.items():
        _write(site / name, text)
    _write(root / "wslib_src" / "wslib" / "__init__.py", _RECORD)  # an editable install inside the workspace
    _write(root / "workspace-marker", "")
    _write(root / "model.py", MODEL)
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "TORCHSCAN_TEST_IMPORT_LOG", "TORCHSCAN_LSP_WARM")}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(root / "wslib_src"), saved["PYTHONPATH"]) if p)
    os.environ["TORCHSCAN_TEST_IMPORT_LOG"] = str(log)
    os.environ["TORCHSCAN_LSP_WARM"] = "1"
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("torchscan_lsp.worker.pool")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    pool.shutdown()
    loop = asyncio.new_event_loop()
    try:
        yield loop, root, log, records
    finally:
        pool.shutdown()
        loop.run_until_complete(asyncio.wait_for(asyncio.gather(*asyncio.all_tasks(loop), return_exceptions=True), 30))
        loop.close()
        logger.removeHandler(handler)
        logger.setLevel(level)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _ran_in(log: Path) -> list[tuple[str, int]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [(name, int(pid)) for name, pid in (line.split() for line in lines)]


async def _analyse(root: Path):
    session = Session(trusted=True)
    session.configure(str(root), None)
    path = root / "model.py"
    document = session.open(str(path), str(root), path.read_text(encoding="utf-8"))
    (state,) = session.analyse(document)
    await session.finished(state)
    assert state.error is None, state.error
    return state


def test_the_first_job_finds_what_the_annotated_file_imports_already_loaded(workspace):
    loop, root, log, records = workspace
    state = loop.run_until_complete(_analyse(root))
    # 10 + 3 * 3: lazylib.models was loaded before the model file's first line ran
    assert state.view.totals["parameters"]["value"] == 19
    parent = pool._parents[PYTHON]
    ran = _ran_in(log)
    # its module body ran once, in the warm parent, not in the job's child
    assert [pid for name, pid in ran if name == "lazylib.models"] == [parent.process.pid]
    assert "lazylib" in parent.packages
    # the editable install inside the workspace was never imported by the warm parent, and the
    # package that raises there was skipped: the job imported both itself
    assert parent.process.pid not in [pid for name, pid in ran if name == "wslib"]
    assert "it resolves to the workspace file" in parent.skipped["wslib"]
    assert "brokenlib needs its workspace" in parent.skipped["brokenlib"]
    assert {name for name, pid in ran if pid != parent.process.pid} >= {"wslib", "brokenlib"}


def test_a_failed_preload_is_logged_once_and_the_parent_serves_on(workspace):
    loop, root, log, records = workspace
    parent = pool._parents[PYTHON]
    state = loop.run_until_complete(_analyse(root))  # a second session sends the same imports again
    assert state.view.totals["parameters"]["value"] == 19
    assert pool._parents[PYTHON] is parent and parent.alive and parent.retired is None
    # brokenlib's body ran in the warm parent once (and raised there), never again
    assert [name for name, pid in _ran_in(log) if pid == parent.process.pid].count("brokenlib") == 1
    for name in ("brokenlib", "wslib"):
        assert len([r for r in records if f"not preloading {name}:" in r.getMessage()]) == 1
