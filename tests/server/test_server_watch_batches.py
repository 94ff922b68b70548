"""The file watcher while many files change (a ``git checkout``): requests are answered meanwhile,
a batch analyses each affected target once, and the watched folders follow the open documents on a
bounded number of threads.

The watcher runs in this process over a real session whose worker is a stand-in: each job's
result is written by hand (``kept_results``) from the files on disk, so the tests count jobs and
watches, not analyses.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from kept_results import ok_result, totals

from torchscan_lsp.server.folder_watch import InotifyFolders
from torchscan_lsp.server.inlay_hints import build_inlay_hints
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.server.watcher import DEBOUNCE_S, Batch, WorkspaceWatcher
from torchscan_lsp.session.controller import Session
from torchscan_lsp.session.settings import InlayHintSettings
from torchscan_lsp.session.state import TargetKey

WAIT_S = 10.0


class Editor:
    """What the watcher sees of the server: the session, and the two things it asks of it."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.watcher = WorkspaceWatcher(self)

    def states_changed(self, states, files) -> None:
        self.watcher.refresh()  # as the server does

    def apply_settings(self) -> None:
        self.session.configure(None, {})


class Worker:
    """The stand-in worker: ``imports[target]`` are the workspace files a target's model imports;
    its result totals are those of ``nn.Linear(4, W)``, W being the sum of the ``WIDTH`` the
    imported files set."""

    def __init__(self, root: Path, imports: dict[str, list[str]]) -> None:
        self.root, self.imports = root, imports
        self.jobs: list[str] = []

    async def __call__(self, job: dict, **limits) -> dict:
        self.jobs.append(job["target"])
        imported = self.imports[job["target"]]
        width = sum(int(m.group(1)) for rel in imported
                    if (m := re.search(r"WIDTH = (\d+)", (self.root / rel).read_text())))
        # Linear(4, W): 4·W weights + W biases, 4·W MACs, 2·4·W FLOPs (PyTorch counts no bias)
        return ok_result(imported, target=job["target"], report_totals=totals(5 * width, 4 * width, 8 * width))


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _model(targets: list[str]) -> str:
    return "".join(f"# torchscan: input_shape=(4,)\ndef {name}():\n    pass\n\n\n" for name in targets)


async def _open(session: Session, root: Path, rel: str):
    document = session.open(str((root / rel).resolve()), str(root), (root / rel).read_text(encoding="utf-8"))
    session.analyse(document)
    await session.scheduler.wait_idle()
    return document


def _hint_labels(session: Session, document) -> dict[int, list[str]]:
    states = session.store.states_for_file(document.root, document.rel, document.path)
    hints = build_inlay_hints(document.rel, Lines(document.text), states, InlayHintSettings(), path=document.path)
    return {hint.position.line + 1: [hint.label] for hint in hints}


async def _until(condition, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"waited {WAIT_S} s for {what}"
        await asyncio.sleep(0.01)


async def test_hints_are_answered_while_a_batch_is_hashed(tmp_path, monkeypatch):
    root = tmp_path.resolve()
    _write(root, "widths.py", "WIDTH = 2\n")
    _write(root, "model.py", _model(["build"]))
    session = Session(trusted=True, run_job=Worker(root, {"build": ["model.py", "widths.py"]}))
    watcher = Editor(session).watcher
    document = await _open(session, root, "model.py")
    # Linear(4, 2): 8 + 2 = 10 parameters, 8 MACs, 16 FLOPs
    assert _hint_labels(session, document)[2] == ["10 params · 8 MACs · 16 FLOPs"]

    # the cache look-up hashes every file the model imported; hold it until the hints were asked for
    gate, hashing, hashed = threading.Event(), threading.Event(), threading.Event()
    real = session.file_hash

    def held(root_path: str):
        digest = real(root_path)

        def hash_when_let(rel: str):
            hashing.set()
            gate.wait(WAIT_S)
            hashed.set()
            return digest(rel)

        return hash_when_let

    monkeypatch.setattr(session, "file_hash", held)
    _write(root, "widths.py", "WIDTH = 3\n")                       # a checkout rewrites the import
    handling = asyncio.ensure_future(watcher.handle(Batch(files={str(root / "widths.py")})))
    await _until(hashing.is_set, "the batch's hashing to start")
    answered = _hint_labels(session, document)                      # on the event loop, meanwhile
    assert not hashed.is_set(), "the hashing ran on the event loop: nothing could be answered meanwhile"
    assert answered[2] == ["10 params · 8 MACs · 16 FLOPs"]
    gate.set()
    await handling
    await session.scheduler.wait_idle()
    # Linear(4, 3): 12 + 3 = 15 parameters, 12 MACs, 24 FLOPs
    assert _hint_labels(session, document)[2] == ["15 params · 12 MACs · 24 FLOPs"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")
async def test_a_checkout_of_100_files_analyses_each_target_once(tmp_path):
    root = tmp_path.resolve()
    blocks = [f"blocks/b{i:03d}.py" for i in range(100)]
    for rel in blocks:
        _write(root, rel, "WIDTH = 1\n")
    _write(root, "model.py", _model(["build_all", "build_half"]))
    worker = Worker(root, {"build_all": ["model.py", *blocks], "build_half": ["model.py", *blocks[:50]]})
    session = Session(trusted=True, run_job=worker)
    editor = Editor(session)
    await _open(session, root, "model.py")
    editor.watcher.start()
    try:
        assert editor.watcher.folders.folders == {str(root), str(root / "blocks")}
        submitted: Counter = Counter()
        submit = session.scheduler.submit

        def counted(key, job, **options):
            submitted[key.name] += 1
            return submit(key, job, **options)

        session.scheduler.submit = counted
        worker.jobs.clear()
        for rel in blocks:                                          # a checkout rewrites all 100
            _write(root, rel, "WIDTH = 2\n")
        await _until(lambda: len(worker.jobs) == 2, "both targets to run")
        await asyncio.sleep(3 * DEBOUNCE_S)                         # time for any later batch to show
        await session.scheduler.wait_idle()
        assert submitted == {"build_all": 1, "build_half": 1} and sorted(worker.jobs) == ["build_all", "build_half"]
        state = session.store.targets[TargetKey(str(root), "model.py", "build_all")]
        assert state.view.totals["parameters"]["value"] == 5 * 200  # Linear(4, 200): 800 + 200

        submitted.clear()
        _write(root, blocks[-1], "WIDTH = 3\n")                     # imported by build_all alone
        await _until(lambda: len(worker.jobs) == 3, "build_all to run again")
        await asyncio.sleep(3 * DEBOUNCE_S)
        assert submitted == {"build_all": 1}
    finally:
        editor.watcher.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the one-thread watch needs inotify")
async def test_a_model_importing_from_100_folders_adds_no_thread_per_folder(tmp_path):
    root = tmp_path.resolve()
    modules = [f"pkgs/p{i:02d}/mod.py" for i in range(100)]
    for rel in modules:
        _write(root, rel, "WIDTH = 1\n")
    _write(root, "model.py", _model(["build"]))
    session = Session(trusted=True, run_job=Worker(root, {"build": ["model.py", *modules]}))
    editor = Editor(session)
    model = await _open(session, root, "model.py")
    threads = threading.active_count()                              # the session's own included
    editor.watcher.start()
    try:
        assert isinstance(editor.watcher.folders, InotifyFolders)
        folders = {str(root)} | {str((root / rel).parent) for rel in modules}
        assert editor.watcher.folders.folders == folders            # 101 folders watched
        # watchdog's shared inotify reader, if this process had none yet; none per folder
        assert threading.active_count() - threads <= 1

        # a module open in the editor shows the target's results: the target still needs them all
        module = await _open(session, root, modules[7])
        session.close(model.path)
        editor.watcher.refresh()
        assert editor.watcher.folders.folders == folders
        session.close(module.path)                                  # no open document needs any
        editor.watcher.refresh()
        assert editor.watcher.folders.folders == set()
        assert threading.active_count() - threads <= 1
    finally:
        editor.watcher.stop()
