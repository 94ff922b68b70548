"""Watch one running job process under its limits, and turn how it ended into a result.

Works the same for a cold process (started by the server) and a warm one (forked by a warm
parent): both are a :class:`JobProcess`, a pid that leads its own process group plus a way to learn
its exit status. Never imports torch.

* :func:`supervise` waits for the process, polling its resident memory every
  :data:`POLL_S` seconds; past the time or memory limit it asks the process for its Python stack
  (``SIGUSR1``), then kills its process group. Cancelling the awaiting task kills it at once.
* :func:`outcome` reads the result the process wrote (in pieces, :mod:`.result_text`), or explains
  why there is none (a limit, a signal, an exit status), locating the diagnostic from the last
  stack dump when there is one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from pathlib import Path
from typing import Any, Mapping, Protocol

from torchscan_lsp.contract.messages import failure
from torchscan_lsp.contract.tracebacks import traceback_text
from torchscan_lsp.worker.limits import job_rss_bytes, memory_message, timeout_message
from torchscan_lsp.worker import result_text
from torchscan_lsp.worker.postmortem import last_stack_location, last_traceback_location, read_end

log = logging.getLogger(__name__)

POLL_S = 0.1
"""How often a running job's memory is checked, seconds."""

DUMP_GRACE_S = 0.5
"""How long a job stopped at a limit gets to write its Python stack before it is killed."""

REAP_LIMIT_S = 10.0
"""How long a cancelled job waits for its killed process to be reaped, seconds."""

LOG_TAIL_CHARS = 4000
"""How much of the end of a job's output a result carries (``log_tail``) and the server logs."""

_PROFILER_CHATTER = re.compile(r"^(?:USDT|STAGE):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \w+\.cpp:\d+\] .*\n?", re.MULTILINE)
"""Lines PyTorch's profiler library (kineto) writes to stderr at every start and stop, whatever its
log level (``USDT:... profiler_start``, ``STAGE:... Completed Stage``): what our own memory
measurement makes it say, not what the model printed."""


class JobProcess(Protocol):
    """A running job: ``pid`` leads its own process group; :meth:`wait` returns its exit status
    (negative for a signal; ``None`` when unknown)."""

    pid: int

    async def wait(self) -> int | None:
        """Wait for the process to end; its exit status."""


def kill_group(pid: int) -> None:
    """``SIGKILL`` the process group led by ``pid`` and ``pid`` itself; gone already is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


async def supervise(process: JobProcess, *, timeout_s: float, memory_mb: float | None) -> tuple[int | None, str | None]:
    """Wait for ``process`` within ``timeout_s`` seconds and ``memory_mb`` MiB of resident memory.

    Returns ``(exit status, limit)``: ``limit`` is ``None`` when the process ended by itself, else
    ``"timeout"`` or ``"memory"`` (the process was stopped, its stack dumped into its log first).

    Raises:
        asyncio.CancelledError: the awaiting task was cancelled; the process group is killed at
            once, before the error propagates.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    limit_bytes = int(memory_mb * 1024 * 1024) if memory_mb else None
    waiter = asyncio.ensure_future(process.wait())
    reason = None
    try:
        while reason is None:
            remaining = deadline - loop.time()
            await asyncio.wait({waiter}, timeout=max(0.0, min(POLL_S, remaining)))
            if waiter.done():
                return waiter.result(), None
            if loop.time() >= deadline:
                reason = "timeout"
            elif limit_bytes is not None and (job_rss_bytes(process.pid) or 0) > limit_bytes:
                reason = "memory"
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGUSR1)
        await asyncio.wait({waiter}, timeout=DUMP_GRACE_S)
        kill_group(process.pid)
        return await waiter, reason
    except asyncio.CancelledError:
        kill_group(process.pid)
        # Reaped before letting go, so that a newer job of the same target never overlaps this one.
        await settle(waiter)
        raise


async def settle(future: asyncio.Future, limit_s: float = REAP_LIMIT_S) -> None:
    """Wait until ``future`` is done (a killed process was reaped), at most ``limit_s`` seconds,
    even if the awaiting task is cancelled again meanwhile: cleanup must not be cut short."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not future.done() and loop.time() < deadline:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({future}, timeout=deadline - loop.time())


def _ended(status: int | None) -> str:
    if status is None:
        return "its warm parent process died"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"killed by signal {-status} ({name})"
    return f"exit status {status}"


def outcome(job: Mapping[str, Any], status: int | None, limit: str | None, *, result_path: Path, log_path: Path,
            timeout_s: float, memory_mb: float | None) -> dict:
    """The result of a finished job process: what it wrote, or a failure saying why it wrote
    nothing (``limit`` from :func:`supervise`, else the exit ``status``). The end of its output
    comes back as ``log_tail`` and goes to the server's log."""
    text = _PROFILER_CHATTER.sub("", read_end(log_path))
    log_tail = text[-LOG_TAIL_CHARS:]
    if log_tail:
        log.info("output of the analysis of %s (last %d characters):\n%s", job.get("target"), len(log_tail), log_tail)
    file, line = last_stack_location(text, str(job.get("workspace_root") or "/")) or (None, None)
    located = {"file": file, "line": line, "log_tail": log_tail}
    if limit == "timeout":
        return failure(job.get("target"), "timeout", timeout_message(timeout_s), **located)
    if limit == "memory":
        return failure(job.get("target"), "memory", memory_message(memory_mb or 0), **located)
    try:
        # in pieces: one call of the C decoder would hold the interpreter lock from the event loop
        result = result_text.loads(result_path.read_text(encoding="utf-8"), result_text.RESULT_LEVELS)
    except (OSError, ValueError):
        message = f"the worker process ended without a result ({_ended(status)})"
        return failure(job.get("target"), "crash", message, **located)
    error = result.get("error") if isinstance(result, dict) else None
    if isinstance(error, dict) and not error.get("file"):
        # An exception that escaped the runner (a KeyboardInterrupt, say) has no location of its
        # own; the traceback the worker printed has.
        found = last_traceback_location(text, str(job.get("workspace_root") or "/"))
        if found:
            error["file"], error["line"] = found
    if log_tail:
        result["log_tail"] = log_tail
    if isinstance(error, dict):
        _log_failure(job, error)
    return result


def _log_failure(job: Mapping[str, Any], error: Mapping[str, Any]) -> None:
    """Say in the server's log why a job that wrote its result failed, with where below the line
    blamed (the innermost frames in a library), so that a failure is never only a squiggle."""
    where = f"{error.get('file')}:{error.get('line')}" if error.get("file") else "the target"
    exception = f"{error.get('type')}: {error.get('message')}" if error.get("type") else error.get("message")
    below = traceback_text(error)
    log.info("analysis of %s failed (%s) at %s: %s%s", job.get("target"), error.get("kind"), where, exception,
             f" ({below})" if below else "")
