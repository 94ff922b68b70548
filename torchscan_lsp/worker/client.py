"""Server side of a worker job: start the child process, wait for its result, enforce limits.

This module never imports torch. One job is one fresh process, ``python -m torchscan_lsp.worker``,
run by the workspace's interpreter with the workspace root as its working directory and first on
``sys.path``. The child writes its result JSON to a file in a private temporary directory (never to
stdout, which the model may print on); its stdout and stderr go to a log file there, of which the
last :data:`LOG_TAIL_CHARS` characters come back in the result as ``log_tail``.

:func:`run` is the only entry point; a warm pool can replace its internals without changing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

import torchscan_lsp

LOG_TAIL_CHARS = 4000
"""How much of the end of the child's combined stdout/stderr a result carries."""

_PACKAGE_PARENT = str(Path(torchscan_lsp.__file__).resolve().parent.parent)


def failure(job: Mapping[str, Any], kind: str, message: str, *, log_tail: str = "") -> dict:
    """A failed result for ``job`` (schema in docs/architecture.md) with no source location.

    ``kind`` is one of ``timeout``, ``crash``, ``cancelled``, ... ; the server places such an error
    on the target's own line.
    """
    result = {
        "ok": False,
        "target": job.get("target"),
        "error": {"kind": kind, "type": None, "message": message, "file": None, "line": None},
        "imported_files": [],
    }
    if log_tail:
        result["log_tail"] = log_tail
    return result


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


def _tail(path: Path) -> str:
    """The last :data:`LOG_TAIL_CHARS` characters of a log file ('' when it is missing)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_CHARS * 4))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text[-LOG_TAIL_CHARS:]


async def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill the child's whole process group (the model may have started processes of its own) and
    reap the child; a child that already exited is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with contextlib.suppress(Exception):
        await process.wait()


async def run(job: Mapping[str, Any], *, python: str | None = None, timeout_s: float = 60.0) -> dict:
    """Run one analysis job in a fresh worker process and return its result object.

    Args:
        job: the job object (docs/architecture.md); ``workspace_root`` must be an absolute path.
        python: interpreter for the child; ``None`` means ``sys.executable``.
        timeout_s: wall-clock limit in seconds; past it the child is killed and the result is a
            failure of kind ``timeout``.

    Returns:
        The child's result object, with ``log_tail`` added when the child printed anything; or a
        failure of kind ``timeout`` or ``crash`` (the child exited without a readable result, e.g.
        killed by a signal, or the interpreter could not start).

    Raises:
        asyncio.CancelledError: when the awaiting task is cancelled; the child is killed first.
    """
    return await _spawn(job, ["--job", "{job}", "--result", "{result}"], python=python, timeout_s=timeout_s)


async def render_html(report: Mapping[str, Any], html_path: str, workspace_root: str, *,
                      measurements: Mapping[str, Any] | None = None, python: str | None = None,
                      timeout_s: float = 60.0) -> dict:
    """Render an analysis report (with its latency, per-layer latency and memory measurements,
    when given) as one offline HTML file at ``html_path``, in a worker process.

    Returns ``{"ok": true, "path": html_path}`` or a failure object (kinds as in :func:`run`;
    ``crash`` also when the renderer is missing or raised, with its message).
    """
    job = {"workspace_root": workspace_root, "target": None, "report": report,
           "measurements": dict(measurements or {})}
    return await _spawn(job, ["--render-html", "{job}", html_path, "--result", "{result}"],
                        python=python, timeout_s=timeout_s)


async def _spawn(job: Mapping[str, Any], args: list[str], *, python: str | None, timeout_s: float) -> dict:
    root = str(job.get("workspace_root") or os.getcwd())
    with tempfile.TemporaryDirectory(prefix="torchscan-job-") as scratch:
        folder = Path(scratch)
        job_path, result_path, log_path = folder / "job.json", folder / "result.json", folder / "log.txt"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        argv = [a.format(job=job_path, result=result_path) for a in args] + ["--log", str(log_path)]
        with log_path.open("ab") as log:
            try:
                process = await asyncio.create_subprocess_exec(
                    python or sys.executable, "-m", "torchscan_lsp.worker", *argv,
                    cwd=root, env=_environment(root),
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True,
                )
            except OSError as error:
                return failure(job, "crash", f"could not start the worker interpreter {python or sys.executable!r}: {error}")
        try:
            returncode = await asyncio.wait_for(process.wait(), timeout_s)
        except asyncio.TimeoutError:
            await _kill(process)
            return failure(job, "timeout", f"the analysis took longer than {timeout_s:g} s and was stopped "
                           "(raise torchscan.timeoutSeconds if the model needs longer)", log_tail=_tail(log_path))
        except asyncio.CancelledError:
            await _kill(process)
            raise
        log_tail = _tail(log_path)
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            reason = f"killed by signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
            return failure(job, "crash", f"the worker process ended without a result ({reason})", log_tail=log_tail)
        if log_tail:
            result["log_tail"] = log_tail
        return result
