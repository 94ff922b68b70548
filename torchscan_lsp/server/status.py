"""Progress and status: ``window/workDoneProgress`` while a job runs (cancellable: cancelling it
kills the worker; a plan job reports each step with a percentage), and the ``torchscan/status``
notification after every state change.

``torchscan/status`` params: ``{"uri": str, "state": "running|done|stale|failed|untrusted|idle",
"message": str, "preloaded": [str]}``, one per file whose targets changed; the state is the most
pressing one among the file's targets (running, failed, untrusted, stale, done, idle, in that
order); ``preloaded`` names the top-level packages the warm worker has learned from the jobs and
preloaded (``transformers``, say), so that later analyses start with them imported. A training
estimate that runs after the hints (:mod:`torchscan_lsp.session.estimates`) has a progress of its own
and adds ``; estimating the training step of NAME`` to a ``done`` or ``stale`` message; the state
stays what the hints are.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable

from lsprotocol import types

from torchscan_lsp.server import labels
from torchscan_lsp.server.features import ClientFacts
from torchscan_lsp.server.messages import STATUS_METHOD, allow_setting, error_message
from torchscan_lsp.session.estimates import ESTIMATING
from torchscan_lsp.session.state import TargetState

log = logging.getLogger(__name__)

_ORDER = ("running", "failed", "untrusted", "stale", "done", "idle")


def file_status(states: list[TargetState], client: str | None = None) -> tuple[str, str]:
    """The state word and message for one file from its targets' states (``client``: the
    editor's name, which names the setting that allows execution)."""
    if not states:
        return "idle", "no torchscan targets in this file"
    words = [s.state_word() for s in states]
    word = min(words, key=_ORDER.index)
    chosen = [s for s, w in zip(states, words) if w == word]
    planning = [s for s in states if s.planning]
    if planning and word in ("done", "stale", "idle"):  # a plan runs beside a finished analysis
        word, chosen = "running", planning
        return word, "planning the training of " + ", ".join(s.key.name for s in chosen)
    if word == "running":
        message = "analysing " + ", ".join(s.key.name for s in chosen)
    elif word == "failed":
        message = error_message(chosen[0], frames=False)
    elif word == "untrusted":
        message = f"not analysed: the workspace is not trusted ({allow_setting(client)})"
    elif word in ("done", "stale"):
        message = "; ".join(f"{s.key.name}: {labels.totals_label(s.view.totals)}" for s in chosen if s.view is not None)
    else:
        message = "waiting for analysis"
    estimating = [s.key.name for s in states if s.training_running]
    if estimating and word in ("done", "stale"):
        message += f"; {ESTIMATING} {', '.join(estimating)}"
    return word, message


class Progress:
    """Reports work-done progress for running jobs and sends status notifications.

    Args:
        progress: pygls' work-done progress manager of the connection.
        notify: sends a notification (``method``, ``params``) to the client.
        client: returns the client's capabilities (resolved at ``initialize``): progress is
            shown only to clients that show it, and the status message names the setting the
            client's user changes.
        preloaded: returns the packages the warm worker has preloaded, for the status.
    """

    def __init__(self, progress: Any, notify: Callable[[str, Any], Any], client: Callable[[], ClientFacts],
                 preloaded: Callable[[], list[str]] = list) -> None:
        self.progress = progress
        self.notify = notify
        self.client = client
        self.preloaded = preloaded
        self._tokens: dict[asyncio.Task, str] = {}

    def job_started(self, state: TargetState, task: asyncio.Task, activity: str) -> None:
        """Begin a cancellable progress for ``task`` when the client supports work-done progress;
        ``activity`` is its message (``"analysing net"``)."""
        if self.client().work_done_progress:
            asyncio.ensure_future(self._track(state, task, activity))

    def job_progress(self, state: TargetState, task: asyncio.Task, record: dict) -> None:
        """Report ``record`` (``{"message", "done"}``) on ``task``'s progress, once it has begun."""
        token = self._tokens.get(task)
        if token is None:
            return
        done = record.get("done")
        percentage = int(100 * done) if isinstance(done, (int, float)) and 0 <= done <= 1 else None
        self.progress.report(token, types.WorkDoneProgressReport(
            message=f"{state.key.name}: {record.get('message', '')}", percentage=percentage, cancellable=True))

    async def _track(self, state: TargetState, task: asyncio.Task, activity: str) -> None:
        progress = self.progress
        token = f"torchscan-{uuid.uuid4()}"
        try:
            await progress.create_async(token)
        except Exception as error:  # the client refused: no progress, the job still runs
            log.debug("no progress token: %s", error)
            return
        if task.done():
            progress.tokens.pop(token, None)
            return
        loop = asyncio.get_running_loop()
        progress.begin(token, types.WorkDoneProgressBegin(title="torchscan", message=activity, cancellable=True,
                                                          percentage=0 if activity.startswith("planning") else None))
        self._tokens[task] = token
        cancelled = progress.tokens.get(token)
        if cancelled is not None:
            cancelled.add_done_callback(lambda f: f.cancelled() and loop.call_soon_threadsafe(task.cancel))

        def finish(done: asyncio.Task) -> None:
            message = "cancelled" if done.cancelled() else "done"
            self._tokens.pop(done, None)
            progress.end(token, types.WorkDoneProgressEnd(message=f"{state.key.name}: {message}"))
            progress.tokens.pop(token, None)

        task.add_done_callback(finish)

    def send_status(self, uri: str, states: list[TargetState]) -> None:
        """Send ``torchscan/status`` for the file at ``uri``."""
        word, message = file_status(states, self.client().name)
        self.notify(STATUS_METHOD, {"uri": uri, "state": word, "message": message, "preloaded": self.preloaded()})
