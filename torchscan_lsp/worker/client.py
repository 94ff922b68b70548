"""Server side of a worker job: start the job's process, wait for its result, enforce limits.

This module never imports torch. A job runs in a fresh child process forked from a warm parent of
the job's interpreter (:mod:`.pool`: torch already imported, so a save becomes hints quickly), or,
where that is impossible, in a cold ``python -m torchscan_lsp.worker`` process run by the
workspace's interpreter with the workspace root as its working directory and first on
``sys.path``. Either way the child writes its result JSON to a file in a private temporary
directory (never to stdout, which the model may print on); its stdout and stderr go to a log file
there, of which the last :data:`LOG_TAIL_CHARS` characters come back in the result as ``log_tail``
and are logged by the server. :mod:`.supervisor` enforces the time and memory limits.

:func:`run` is the only entry point for analyses.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

import torchscan_lsp
from torchscan_lsp.worker import pool
from torchscan_lsp.contract.messages import failure
from torchscan_lsp.worker.supervisor import LOG_TAIL_CHARS, kill_group, outcome, supervise

__all__ = ["LOG_TAIL_CHARS", "run", "render_html"]

_PACKAGE_PARENT = str(Path(torchscan_lsp.__file__).resolve().parent.parent)


def _environment(workspace_root: str) -> dict[str, str]:
    """The child's environment: the workspace first on ``PYTHONPATH``, then this package's parent
    (so an interpreter without torchscan-lsp installed can still import the worker)."""
    env = dict(os.environ)
    parts = [workspace_root, _PACKAGE_PARENT]
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def run(job: Mapping[str, Any], *, python: str | None = None, timeout_s: float = 60.0,
              memory_mb: float | None = None, on_progress: Callable[[dict], None] | None = None) -> dict:
    """Run one analysis job in a fresh worker process and return its result object.

    Args:
        job: the job object (docs/architecture.md); ``workspace_root`` must be an absolute path.
        python: interpreter for the child; ``None`` means ``sys.executable``.
        timeout_s: wall-clock limit in seconds; past it the child is killed and the result is a
            failure of kind ``timeout``.
        memory_mb: resident memory limit in MiB (``None``: none); past it the child is killed and
            the result is a failure of kind ``memory``.
        on_progress: called on the event loop with each progress line the child writes
            (``{"message", "done"}``: a plan job's, :mod:`.planning`), while it runs.

    Returns:
        The child's result object, with ``log_tail`` added when the child printed anything; or a
        failure of kind ``timeout``, ``memory`` or ``crash`` (the child exited without a readable
        result, e.g. killed by a signal, or the interpreter could not start), located at the
        innermost workspace frame of the stack the child dumped, when it dumped one.

    Raises:
        asyncio.CancelledError: when the awaiting task is cancelled; the child is killed first.
    """
    return await _spawn(job, ["--job", "{job}", "--result", "{result}"], python=python, timeout_s=timeout_s,
                        memory_mb=memory_mb, warm=True, on_progress=on_progress)


async def render_html(job: Mapping[str, Any], html_path: str, *, python: str | None = None,
                      timeout_s: float = 60.0) -> dict:
    """Render the analysis report of a rendering job (:func:`torchscan_lsp.contract.messages.render_job`:
    the report and the measurements to attach) as one offline HTML file at ``html_path``, in a
    worker process.

    Returns ``{"ok": true, "path": html_path}`` or a failure object (kinds as in :func:`run`;
    ``crash`` also when the renderer is missing or raised, with its message).
    """
    return await _spawn(job, ["--render-html", "{job}", html_path, "--result", "{result}"],
                        python=python, timeout_s=timeout_s)


class _ColdJob:
    """A job in a process of its own, started by this server."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.pid = process.pid
        self.process = process

    async def wait(self) -> int | None:
        return await self.process.wait()


async def _start_cold(root: str, python: str | None, argv: list[str], log_path: Path) -> _ColdJob:
    with log_path.open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            python or sys.executable, "-m", "torchscan_lsp.worker", *argv,
            cwd=root, env=_environment(root),
            stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True,
        )
    return _ColdJob(process)


async def _follow(path: Path, on_progress: Callable[[dict], None], poll_s: float = 0.2) -> None:
    """Call ``on_progress`` with each complete JSON line appended to ``path`` (until cancelled)."""
    offset = 0
    while True:
        await asyncio.sleep(poll_s)
        try:
            with path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
        except FileNotFoundError:
            continue
        complete = chunk[: chunk.rfind(b"\n") + 1]
        offset += len(complete)
        for line in complete.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                on_progress(record)


async def _spawn(job: Mapping[str, Any], args: list[str], *, python: str | None, timeout_s: float,
                 memory_mb: float | None = None, warm: bool = False,
                 on_progress: Callable[[dict], None] | None = None) -> dict:
    root = str(job.get("workspace_root") or os.getcwd())
    with tempfile.TemporaryDirectory(prefix="torchscan-job-") as scratch:
        folder = Path(scratch)
        job_path, result_path, log_path = folder / "job.json", folder / "result.json", folder / "log.txt"
        progress_path = folder / "progress.jsonl"
        if on_progress is not None:
            job = {**job, "progress": str(progress_path)}
        if memory_mb:  # a real training step that would not fit is not run (worker/training.py)
            job = {**job, "memory_mb": memory_mb}
        job_path.write_text(json.dumps(job), encoding="utf-8")
        process = None
        if warm:
            process = await pool.start_job(python or sys.executable, {
                "job": str(job_path), "result": str(result_path), "log": str(log_path),
                "cwd": root, "memory_mb": memory_mb})
        if process is None:
            argv = [a.format(job=job_path, result=result_path) for a in args] + ["--log", str(log_path)]
            try:
                process = await _start_cold(root, python, argv, log_path)
            except OSError as error:
                return failure(job.get("target"), "crash", f"could not start the worker interpreter {python or sys.executable!r}: {error}")
        follower = asyncio.ensure_future(_follow(progress_path, on_progress)) if on_progress is not None else None
        try:
            status, limit = await supervise(process, timeout_s=timeout_s, memory_mb=memory_mb)
        finally:
            # Whatever the model started in its process group goes too.
            kill_group(process.pid)
            if follower is not None:
                follower.cancel()
        # reading a result of megabytes: in a thread, so that the server answers requests meanwhile
        return await asyncio.to_thread(outcome, job, status, limit, result_path=result_path, log_path=log_path,
                                       timeout_s=timeout_s, memory_mb=memory_mb)
