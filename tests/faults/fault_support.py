"""Helpers for the fault-injection tests: the server's process tree, bounded waits, diagnostics.

Processes are read from ``/proc``; zombies count as gone. A warm parent is the server's child running
``torchscan_lsp.worker.zygote``; a job is a child of a warm parent (or of the server: a cold start).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Callable

MODELS = Path(__file__).parent / "models"

LIMITS = {"timeoutSeconds": 3, "memoryLimitMb": 1024, "maxWorkers": 2}
"""Short limits, so that the whole matrix runs in a few minutes on two cores."""

WAIT_S = 120.0
"""Upper bound of every wait for the server (generous: a loaded machine is slow, never wrong)."""


def copy_models(root: Path) -> Path:
    """Copy every model of :data:`MODELS` into ``root``; returns ``root``."""
    for source in MODELS.glob("*.py"):
        shutil.copy(source, root / source.name)
    return root


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, parent pid)`` of ``pid``, or ``None`` when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def descendants(pid: int) -> list[int]:
    """Live descendants of ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[0] != "Z":
                children.setdefault(stat[1], []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def warm_parents(server_pid: int) -> list[int]:
    """The server's warm parent processes (its children running the zygote; their forked job
    children share that command line, one level further down)."""
    # each process's stat read once: one that exits between two reads has none the second time
    return [p for p in descendants(server_pid)
            if "torchscan_lsp.worker.zygote" in _cmdline(p) and (stat := _stat(p)) is not None and stat[1] == server_pid]


def job_processes(server_pid: int) -> list[int]:
    """The server's live job processes and whatever they started (descendants that are not warm
    parents)."""
    parents = set(warm_parents(server_pid))
    return [p for p in descendants(server_pid) if p not in parents]


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def jobs(server_pid: int) -> list[int]:
    """The server's running jobs: children of its warm parents that entered their workspace, and
    its own children (cold starts) that are not warm parents.

    A warm parent's other child, the probe that tries libraries to preload, stays in the parent's
    folder ``/``; a job changes to its workspace first thing (so it counts from then on).
    """
    parents = set(warm_parents(server_pid))
    found = []
    for p in descendants(server_pid):
        stat = _stat(p)
        if p in parents or stat is None:
            continue
        if stat[1] == server_pid or (stat[1] in parents and _cwd(p) not in (None, "/")):
            found.append(p)
    return found


async def until(predicate: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
    """Poll ``predicate`` until it holds (``True``) or ``timeout_s`` passed (``False``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def describe(pids: list[int]) -> list[str]:
    """``pid: command line`` of each of ``pids`` (for assertion messages)."""
    return [f"{p}: {_cmdline(p)}" for p in pids]


def diagnostics_at(client, uri: str, line: int) -> list[str]:
    """Messages of the diagnostics published for ``uri`` that start on 1-based ``line``."""
    return [d.message for d in client.diagnostics.get(uri, []) if d.range.start.line + 1 == line]
