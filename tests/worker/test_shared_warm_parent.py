"""One warm parent shared by the servers of one interpreter and environment (:mod:`torchscan_lsp.worker.shared`).

Two "servers" are two :class:`~torchscan_lsp.worker.pool.WarmParent` objects of this process,
each started the way a server starts its own (a relay process, with the environment of the moment
it started); who served what is read from process ids and from what the jobs saw, never from the
code under test. Each test has a socket folder of its own (``XDG_RUNTIME_DIR``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from torchscan_lsp.worker import pool, shared

PYTHON = sys.executable

pytestmark = pytest.mark.skipif(not (pool.warm_starts_possible() and shared.sharing_enabled({})),
                                reason="shared warm parents need Linux with fork")

# A Linear whose width is the job's WIDTH variable: parameters = 4 · WIDTH + WIDTH; the job's
# parent process is written next to its result.
MODEL = """
import os, time
import torch.nn as nn

def build():
    with open(os.environ["PARENT_FILE"], "w") as out:
        out.write(str(os.getppid()))
    time.sleep(float(os.environ.get("HOLD_S", "0")))
    return nn.Linear(4, int(os.environ["WIDTH"]))
"""


@pytest.fixture
def shared_env(tmp_path, monkeypatch):
    """Sharing on, sockets under ``tmp_path``, no linger unless a test sets one."""
    monkeypatch.setenv("TORCHSCAN_LSP_SHARE_WARM", "1")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.delenv("TORCHSCAN_LSP_KEEP_WARM_S", raising=False)
    monkeypatch.setenv("PARENT_FILE", str(tmp_path / "parent"))
    (tmp_path / "run").mkdir(mode=0o700)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "model.py").write_text(textwrap.dedent(MODEL).lstrip(), encoding="utf-8")
    pool.set_linger(0)
    yield root
    pool.set_linger(0)


async def _job(parent: pool.WarmParent, root: Path, tmp: Path, name: str) -> tuple[int, dict]:
    """Run the model as a job of ``parent``: the pid of the process that forked the job, and its result."""
    folder = tmp / name
    folder.mkdir()
    job = {"workspace_root": str(root), "file": str(root / "model.py"), "target": "build",
           "options": {"input_shape": [4]}, "measure": []}
    (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
    request = {"job": str(folder / "job.json"), "result": str(folder / "result.json"), "log": str(folder / "log.txt"),
               "cwd": str(root), "memory_mb": None}
    started = await parent.fork(request)
    status = await asyncio.wait_for(started.wait(), 120)
    assert status == 0, (folder / "log.txt").read_text()
    return int((tmp / "parent").read_text()), json.loads((folder / "result.json").read_text())


def _parameters(result: dict) -> int:
    return result["report"]["totals"]["parameters"]["value"]


def _cmdline(process: Path) -> bytes:
    try:
        return (process / "cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_until(condition, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


async def test_two_servers_share_one_warm_parent_and_each_job_runs_in_its_servers_environment(
        shared_env, tmp_path, monkeypatch):
    monkeypatch.setenv("WIDTH", "3")
    first = pool.WarmParent(PYTHON)
    assert await first.ensure_started()
    monkeypatch.setenv("WIDTH", "5")  # the second server's environment differs, in a variable no library reads
    second = pool.WarmParent(PYTHON)
    assert await second.ensure_started()
    try:
        forked_a, result_a = await _job(first, shared_env, tmp_path, "a")
        forked_b, result_b = await _job(second, shared_env, tmp_path, "b")
        # one warm parent forked both jobs: neither server's relay, the same process for both
        assert forked_a == forked_b not in (first.process.pid, second.process.pid)
        assert (_parameters(result_a), _parameters(result_b)) == (4 * 3 + 3, 4 * 5 + 5)
    finally:
        first.close()
        second.close()


async def test_a_server_started_within_the_linger_finds_the_warm_parent_and_none_is_left_after_it(
        shared_env, tmp_path, monkeypatch):
    monkeypatch.setenv("WIDTH", "2")
    pool.set_linger(3.0)
    first = pool.WarmParent(PYTHON)
    assert await first.ensure_started()
    warm, _ = await _job(first, shared_env, tmp_path, "a")
    first.close()
    await asyncio.sleep(1.0)
    assert _alive(warm), "it left before its linger ended"
    pool.set_linger(0)  # the second server says: leave with me
    second = pool.WarmParent(PYTHON)
    assert await second.ensure_started()
    forked, result = await _job(second, shared_env, tmp_path, "b")
    assert forked == warm and _parameters(result) == 4 * 2 + 2
    second.close()
    assert _wait_until(lambda: not _alive(warm)), "it stayed after its last server left"
    assert list((tmp_path / "run" / "torchscan-lsp").glob("*.sock")) == []


async def test_closing_one_server_kills_its_job_but_not_the_other_servers(shared_env, tmp_path, monkeypatch):
    monkeypatch.setenv("WIDTH", "2")
    second = pool.WarmParent(PYTHON)
    assert await second.ensure_started()
    monkeypatch.setenv("HOLD_S", "60")  # the first server's jobs take a minute
    first = pool.WarmParent(PYTHON)
    assert await first.ensure_started()
    try:
        folder = tmp_path / "held"
        folder.mkdir()
        job = {"workspace_root": str(shared_env), "file": str(shared_env / "model.py"), "target": "build",
               "options": {"input_shape": [4]}, "measure": []}
        (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
        held = await first.fork({"job": str(folder / "job.json"), "result": str(folder / "result.json"),
                                 "log": str(folder / "log.txt"), "cwd": str(shared_env), "memory_mb": None})
        assert _wait_until(lambda: (tmp_path / "parent").exists())
        warm = int((tmp_path / "parent").read_text())
        first.close()
        assert _wait_until(lambda: not _alive(held.pid)), "the job of the server that left still runs"
        assert _alive(warm)
        forked, result = await _job(second, shared_env, tmp_path, "b")
        assert forked == warm and _parameters(result) == 4 * 2 + 2
    finally:
        first.close()
        second.close()


def test_servers_whose_library_environment_differs_get_warm_parents_of_their_own(tmp_path):
    base = {"XDG_RUNTIME_DIR": str(tmp_path), "PATH": "/usr/bin"}
    same = shared.socket_path(PYTHON, {**base, "WIDTH": "5", "TERM": "dumb"})
    assert same == shared.socket_path(PYTHON, base)
    same_too = shared.socket_path(PYTHON, {**base, "TORCHSCAN_LSP_KEEP_WARM_S": "0", "TORCHSCAN_LSP_SHARE_WARM": "1"})
    assert same_too == shared.socket_path(PYTHON, base)
    # read on import, or made into paths then (huggingface_hub's cache folder, tempfile's folder)
    for variable in ("OMP_NUM_THREADS", "PYTHONPATH", "HF_HOME", "CUDA_VISIBLE_DEVICES", "TORCH_LOGS",
                     "XDG_CACHE_HOME", "TMPDIR", "HOME"):
        assert shared.socket_path(PYTHON, {**base, variable: "1"}) != shared.socket_path(PYTHON, base), variable


def test_a_socket_folder_others_may_enter_is_not_used(tmp_path):
    folder = tmp_path / "torchscan-lsp"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    assert shared.socket_folder({"XDG_RUNTIME_DIR": str(tmp_path)}) is None
    os.chmod(folder, 0o700)
    assert shared.socket_folder({"XDG_RUNTIME_DIR": str(tmp_path)}) == folder


async def test_without_a_private_socket_folder_the_server_gets_a_warm_parent_of_its_own(
        shared_env, tmp_path, monkeypatch):
    monkeypatch.setenv("WIDTH", "3")
    os.chmod(tmp_path / "run", 0o700)
    (tmp_path / "run" / "torchscan-lsp").mkdir(mode=0o777)
    os.chmod(tmp_path / "run" / "torchscan-lsp", 0o777)
    parent = pool.WarmParent(PYTHON)
    assert await parent.ensure_started()
    try:
        forked, result = await _job(parent, shared_env, tmp_path, "a")
        # the relay became the warm parent itself: the server's own child forked the job
        assert forked == parent.process.pid and _parameters(result) == 4 * 3 + 3
    finally:
        parent.close()


async def test_a_workspace_file_shadowing_a_library_that_another_servers_library_imported_is_the_jobs(
        shared_env, tmp_path, monkeypatch):
    # an installed library (on PYTHONPATH, as site-packages is on sys.path) that imports another
    site = tmp_path / "site"
    (site / "fakelib").mkdir(parents=True)
    (site / "fakelib" / "__init__.py").write_text("import fakedep\n", encoding="utf-8")
    (site / "fakedep").mkdir()
    (site / "fakedep" / "__init__.py").write_text("N = 1\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("WIDTH", "2")
    first = pool.WarmParent(PYTHON)
    first.import_first(["fakelib"], str(tmp_path / "elsewhere"))  # the first server's workspace imports fakelib
    assert await first.ensure_started()
    # the second server's workspace has a fakedep.py of its own, which its model uses
    (shared_env / "fakedep.py").write_text("N = 7\n", encoding="utf-8")
    (shared_env / "model.py").write_text(textwrap.dedent(MODEL).lstrip().replace(
        'int(os.environ["WIDTH"])', "__import__('fakedep').N"), encoding="utf-8")
    second = pool.WarmParent(PYTHON)
    assert await second.ensure_started()
    try:
        _, result = await _job(second, shared_env, tmp_path, "b")
        # Linear(4, 7): 4 · 7 + 7, the workspace's N, not the library's N = 1 (which gives 5)
        assert _parameters(result) == 4 * 7 + 7
    finally:
        first.close()
        second.close()


async def test_a_server_that_stops_before_the_warm_parent_is_ready_leaves_it_its_linger(shared_env, tmp_path):
    import signal
    import socket

    pool.set_linger(30.0)
    parent = pool.WarmParent(PYTHON)
    starting = asyncio.ensure_future(parent.ensure_started())
    folder = tmp_path / "run" / "torchscan-lsp"
    assert await asyncio.to_thread(_wait_until, lambda: any(folder.glob("*.sock")))
    (path,) = folder.glob("*.sock")
    daemons = [int(p.name) for p in Path("/proc").iterdir()
               if p.name.isdigit() and str(path).encode() in _cmdline(p)]
    parent.close()  # the server stops while torch is still being imported
    assert await starting is False
    try:
        # a client of our own waits for it to be ready, then leaves too: only the linger keeps it
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(path))
        ready = await asyncio.to_thread(client.makefile().readline)
        assert json.loads(ready)["event"] == "ready"
        client.close()
        await asyncio.sleep(1.0)
        assert [pid for pid in daemons if _alive(pid)] == daemons != []
    finally:
        for pid in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_a_killed_shared_warm_parent_is_said_so_and_the_next_job_gets_a_new_one(
        shared_env, tmp_path, monkeypatch, caplog):
    import logging
    import signal

    monkeypatch.setenv("WIDTH", "2")
    parent = pool.WarmParent(PYTHON)
    assert await parent.ensure_started()
    try:
        warm, _ = await _job(parent, shared_env, tmp_path, "a")
        with caplog.at_level(logging.INFO, logger="torchscan_lsp.worker.pool"):
            os.kill(warm, signal.SIGKILL)
            assert await asyncio.to_thread(_wait_until, lambda: parent.retired is not None)
        assert parent.retired == "the shared warm worker ended"
        assert any("retires (the shared warm worker ended)" in r.getMessage() for r in caplog.records)
        successor = pool.WarmParent(PYTHON)  # what the pool makes of a retired parent
        assert await successor.ensure_started()
        (tmp_path / "parent").unlink()
        forked, result = await _job(successor, shared_env, tmp_path, "b")
        assert forked != warm and _parameters(result) == 4 * 2 + 2
        successor.close()
    finally:
        parent.close()
