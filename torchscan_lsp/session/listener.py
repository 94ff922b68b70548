"""What a :class:`~torchscan_lsp.session.controller.Session` tells its owner (the language server,
``check``, ``scan``): jobs that start and report progress, target states that changed, and notices."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from torchscan_lsp.session.state import TargetState

__all__ = ["Listener", "Silent"]

log = logging.getLogger(__name__)


class Listener(Protocol):
    """What the session tells its owner."""

    def job_started(self, state: TargetState, task: asyncio.Task, activity: str) -> None:
        """A worker job for ``state`` started running (``task`` may be cancelled to stop it);
        ``activity`` says what it does (``"analysing net"``, ``"planning the training of net"``)."""

    def job_progress(self, state: TargetState, task: asyncio.Task, record: dict) -> None:
        """The job ``task`` of ``state`` reported progress: ``{"message": str, "done": fraction}``."""

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        """``states`` changed; ``files`` are the ``(root, rel)`` pairs whose features may differ."""

    def notice(self, message: str) -> None:
        """Something the user should hear once, that no target's diagnostics can say (results are
        not kept between sessions, and why)."""


class Silent:
    """The listener of a session without an owner: a notice goes to the log, the rest nowhere."""

    def job_started(self, state: TargetState, task: asyncio.Task, activity: str) -> None:
        pass

    def job_progress(self, state: TargetState, task: asyncio.Task, record: dict) -> None:
        pass

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        pass

    def notice(self, message: str) -> None:
        log.warning("%s", message)
