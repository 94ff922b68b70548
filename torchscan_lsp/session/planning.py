"""Training plans of a session's targets: jobs of their own, off the hint path.

A plan (``plan_training`` in a worker: several estimates per policy, seconds to minutes) never
delays a target's hints: it is a separate worker job (a :class:`~torchscan_lsp.contract.messages.PlanJob`),
scheduled under its own key beside the target's analysis, so the two never cancel each other; a
newer analysis of the target cancels its plan job, and a target whose options ask for a plan
(``plan=...``, or the workspace's ``[tool.torchscan-lsp.plan]``) gets a new one once that analysis
succeeded. **Plan training** (the code lens, ``scan --plan``) asks for one whatever the options
(:meth:`Plans.request`). Results are cached like analyses (the key holds the job, hence its
options, and the target file's hash; the files the model imported are checked before reuse).

While a plan job runs, its progress lines reach the listener (``job_progress``) and the target is
``planning``; its report lands in ``state.measurements["plan"]`` (a failure as ``{"error": ...,
"requested": ...}``, an error when asked for and a warning when it ran unasked), with
``state.plan_hash``, the content hash of the text it ran on.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Iterable

from torchscan_lsp.contract.messages import failure
from torchscan_lsp.session.cache import job_key
from torchscan_lsp.session.jobs import Limits, build_plan_job, effective_options, wants_plan
from torchscan_lsp.session.state import Document, TargetState, content_hash

__all__ = ["PLAN", "Plans", "plan_report"]

log = logging.getLogger(__name__)

PLAN = "plan"
"""The kind of a plan among a target's measurements."""


def plan_report(state: TargetState) -> dict | None:
    """The target's last training plan, or ``None`` (never ran, or failed)."""
    report = state.measurements.get(PLAN)
    return report if isinstance(report, dict) and report.get("kind") == "training_plan" else None


class Plans:
    """The plan jobs of one session (see the module docstring).

    Args:
        session: the :class:`~torchscan_lsp.session.controller.Session` (its store, scheduler,
            cache, settings, listener and worker; this module cannot import it, which imports this).
        auto: plan a target whose options ask for a plan after each of its analyses (``check``
            does not: no plan changes its hints or diagnostics).

    Attributes:
        every: plan every target after its analysis, asked for (``scan --plan``).
    """

    def __init__(self, session: Any, *, auto: bool = True) -> None:
        self.session = session
        self.auto = auto
        self.every = False

    @staticmethod
    def key(state: TargetState) -> tuple[Any, str]:
        """The scheduler key of ``state``'s plan job (beside its analysis's)."""
        return (state.key, PLAN)

    def cancel(self, state: TargetState) -> None:
        """Cancel ``state``'s plan job, queued or running."""
        self.session.scheduler.cancel(self.key(state))

    def request(self, document: Document, names: Iterable[str] | None = None, *, requested: bool = True,
                unsaved: bool = False, use_cache: bool = True) -> list[TargetState]:
        """Plan the targets of ``document`` (all, or those ``names``); returns their states. An
        untrusted workspace gets no job (its targets are marked ``untrusted``)."""
        session = self.session
        wanted = set(names) if names is not None else None
        states = [s for s in session.store.states_in(document.root, document.rel) if wanted is None or s.key.name in wanted]
        changed = []
        for state in states:
            if not session.may_execute:
                state.untrusted = True
                changed.append(state)
                continue
            defaults = session.workspace_config(document.root).defaults
            job, limits = build_plan_job(document.root, document.path, state.target, defaults, session.settings_for(document.root),
                                         source_text=document.text if unsaved else None)
            text = document.text
            key = job_key(job, content_hash(text), session.settings.interpreter)
            cached = session.cache.get(key, session.file_hash(document.root)) if use_cache else None
            if cached is not None:
                self.cancel(state)
                self._apply(state, cached, text, requested)
                changed.append(state)
                continue
            session.scheduler.submit(self.key(state),
                                     lambda s=state, j=job, x=limits, k=key, t=text: self._job(s, j, x, k, t, requested))
        if changed:
            session.listener.states_changed(changed, set())
        return states

    def after_analysis(self, state: TargetState, *, unsaved: bool) -> None:
        """After ``state``'s analysis succeeded (or a kept result was taken): plan it when
        :attr:`every` asks (a requested plan), else when :attr:`auto` and its options ask for one."""
        session = self.session
        document = session.store.documents.get(str(Path(state.key.root, state.key.file)))
        if document is None or not session.may_execute:
            return
        if self.every:
            self.request(document, [state.key.name], requested=True, unsaved=unsaved)
            return
        options = effective_options(state.target, session.workspace_config(document.root).defaults, session.settings_for(document.root))
        if self.auto and wants_plan(options):
            self.request(document, [state.key.name], requested=False, unsaved=unsaved)

    async def finished(self, state: TargetState) -> None:
        """Wait for ``state``'s plan job that is queued or running, if any."""
        task = self.session.scheduler.task(self.key(state))
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def _job(self, state: TargetState, job: dict, limits: Limits, key: str, text: str, requested: bool) -> None:
        session, scheduler = self.session, self.session.scheduler
        task = asyncio.current_task()
        state.planning = True
        session.listener.job_started(state, task, f"planning the training of {state.key.name}")
        session.listener.states_changed([state], set())

        def progress(record: dict) -> None:
            session.listener.job_progress(state, task, record)

        try:
            result = await session.run_job(job, python=limits.python, timeout_s=limits.timeout_s,
                                           memory_mb=limits.memory_mb, on_progress=progress)
        except asyncio.CancelledError:
            if scheduler.is_current(self.key(state), task):
                state.planning = False
                session.listener.states_changed([state], set())
            raise
        except Exception as error:  # the client maps worker failures; this is a bug in ours
            log.exception("plan job failed")
            result = failure(job["target"], "crash", f"the worker client failed: {error}")
        if not scheduler.is_current(self.key(state), task):
            return
        state.planning = False
        if result.get("ok"):
            session.cache.put(key, result, session.file_hash(job["workspace_root"]))
        elif (result.get("error") or {}).get("kind") == "timeout":  # the analysis's advice names another setting
            result["error"] = {**result["error"], "message": (
                f"the plan stopped after {limits.timeout_s:g} s (raise torchscan.planTimeoutSeconds, or shorten the "
                "plan's lists of precisions, optimizers, checkpointing and sharding, if it needs longer)")}
        self._apply(state, result, text, requested)
        session.listener.states_changed([state], set())

    @staticmethod
    def _apply(state: TargetState, result: dict, text: str, requested: bool) -> None:
        if result.get("ok") and isinstance(result.get("plan"), dict):
            state.measurements[PLAN] = result["plan"]
            state.plan_hash = content_hash(text)
            return
        error = dict(result.get("error") or {"message": "the plan job returned no plan"})
        state.measurements[PLAN] = {"error": {"type": error.get("type"), "message": error.get("message"),
                                              "file": error.get("file"), "line": error.get("line"),
                                              "kind": error.get("kind")}, "requested": requested}
