"""The session ``check`` and ``scan`` run their analyses in: the editor's, with the command's flags.

Both commands resolve their settings as the editor does (the defaults, then the workspace's
``[tool.torchscan-lsp]``, then the flags ``--python``, ``--timeout`` and ``--memory-limit-mb``), run
every target in a worker process through :class:`~torchscan_lsp.session.Session`, and word a
stopped analysis's advice with the flag the user can change instead of the editor's setting. A
job that times a model (latency) runs alone, never beside another job.
"""

from __future__ import annotations

from typing import Any, Iterable

from torchscan_lsp.session.controller import Session
from torchscan_lsp.session.jobs import timing_asked

__all__ = ["FLAGS", "cli_messages", "command_session", "time_alone"]

FLAGS = {"timeout": "--timeout", "memory": "--memory-limit-mb"}
"""The flag that raises each limit, by the error kind of a job stopped at it."""

_SETTINGS = {"timeout": "torchscan.timeoutSeconds", "memory": "torchscan.memoryLimitMb"}


def cli_messages(result: dict[str, Any], flags: dict[str, str] = FLAGS) -> dict[str, Any]:
    """``result`` with the advice of a timeout or memory failure naming the command-line flag
    (``flags``: error kind to flag) instead of the editor setting, which a terminal user has no
    way to change."""
    error = result.get("error")
    if not isinstance(error, dict) or error.get("kind") not in flags:
        return result
    message = str(error.get("message") or "")
    for setting in _SETTINGS.values():
        message = message.replace(setting, flags[error["kind"]])
    return {**result, "error": {**error, "message": message}}


def command_session(root: str, *, python: str | None = None, timeout: float | None = None,
                    memory_mb: float | None = None, headline: str | None = None,
                    compare_with: str | None = None, roofline: str | None = None,
                    auto_plan: bool = True) -> tuple[Session, list[str]]:
    """A trusted session for a command run under ``root``, configured from the workspace and the
    flags (``None``: not given; ``compare_with`` is ``torchscan.compareWith``); returns it and one
    message per setting that was skipped. ``auto_plan``: plan the targets whose options ask for a
    plan (``scan``; ``check`` shows the editor's hints and diagnostics, which no plan changes)."""
    overrides = {key: value for key, value in (("python", python), ("timeoutSeconds", timeout),
                                               ("memoryLimitMb", memory_mb), ("headline", headline),
                                               ("compareWith", compare_with), ("roofline", roofline))
                                                if value is not None}
    session = Session(trusted=True, auto_plan=auto_plan)
    _, problems = session.configure(root, overrides)
    worker = session.run_job

    async def run_job(job: dict, **limits: Any) -> dict:
        return cli_messages(await worker(job, **limits))

    session.run_job = run_job
    return session, problems


def time_alone(session: Session, measure: Iterable[str] = ()) -> None:
    """Run one job at a time when a measurement asked for, or by a target's own ``measure``
    option, times a model: jobs beside it would slow it down. Call after opening the files."""
    if timing_asked(measure, [state.target for state in session.store.targets.values()]):
        session.scheduler.set_max_workers(1)
