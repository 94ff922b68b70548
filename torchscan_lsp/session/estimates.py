"""The training estimate of a target, off the path of its hints, reused while its model holds.

A target whose options hold ``train`` or ``train_memory`` gets its training step estimated on fake
tensors unasked (:func:`~torchscan_lsp.contract.training.estimate_unasked`). That takes seconds
where the forward analysis takes a fraction of one, so the editor's session runs it as a job of its
own: the forward job (phase ``forward``) publishes the hints as soon as it is done, and its result
is followed here by the estimate (phase ``training``), whose report joins the target's
``measurements["train"]`` when it is ready (the hover says it runs meanwhile; a ``train_memory``
warning comes only from a finished estimate).

The estimate is reused while the model it describes is the same: :func:`training_key` digests the
forward result's model structure (the worker's ``structure``: modules, their settings, parameter
and buffer shapes), its report (every call's inputs, outputs and counts), the target's options
(``train``, ``train_memory``, ``input_shape``, ``dtype``, ``device``...), the interpreter and this
package's version. A save that leaves the key as it was (a comment, a blank line, a renamed local)
runs no estimate; one that changes it cancels the estimate running for the old key. Finished
estimates are kept in the session's result cache under their key, on disk too where results are
kept, so a reopened editor reuses them; a failed one is never kept, and the next save tries again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any, Callable, Mapping, Protocol

from torchscan_lsp.contract.training import estimate_unasked
from torchscan_lsp.session.cache import ResultCache
from torchscan_lsp.session.jobs import Limits
from torchscan_lsp.session.scheduler import Scheduler
from torchscan_lsp.session.state import TargetState
from torchscan_lsp.version import package_version

__all__ = ["ESTIMATING", "TrainingEstimates", "training_key"]

log = logging.getLogger(__name__)

ESTIMATING = "estimating the training step of"
"""What a running estimate is called in progress and status messages (then the target's name)."""


def training_key(job: Mapping[str, Any], result: Mapping[str, Any], python: str) -> str | None:
    """The key of the training estimate that goes with the forward ``result`` of ``job`` run by
    ``python``: a SHA-256 hex digest (see the module's docstring), or ``None`` when the result has
    no ``structure`` (it is not a forward phase of a target with ``train`` options)."""
    structure = result.get("structure")
    if not result.get("ok") or not isinstance(structure, str):
        return None
    report = result.get("report") or {}
    material = {
        "version": package_version(),
        "python": python,
        "target": [job.get("workspace_root"), job.get("file"), job.get("target")],
        "options": job.get("options"),
        "structure": structure,
        "inputs": report.get("inputs"),
        "layers": report.get("layers"),
        "totals": report.get("totals"),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode("utf-8")).hexdigest()


class Owner(Protocol):
    """What the estimates need of their session (:class:`~torchscan_lsp.session.controller.Session`)."""

    scheduler: Scheduler
    cache: ResultCache
    run_job: Callable[..., Any]
    listener: Any

    def notify_states(self, states: list[TargetState]) -> None:
        """Tell the listener that ``states`` changed."""


class TrainingEstimates:
    """Runs, reuses and cancels the training estimates of one session's targets.

    Args:
        owner: the session (its scheduler, cache, worker entry point and listener).
        enabled: estimates run as jobs of their own (the editor's session); when false, one job
            does the forward and the estimate, and :meth:`phase` and :meth:`follow` do nothing.
    """

    def __init__(self, owner: Owner, enabled: bool = True) -> None:
        self.owner = owner
        self.enabled = enabled

    def phase(self, job: dict) -> dict:
        """``job`` (a forward job, :func:`~.jobs.build_job`'s), of phase ``forward`` when its
        target's training estimate is to run as a job of its own: its options ask for one unasked
        and it does not measure a real step itself."""
        if self.enabled and estimate_unasked(job["options"]) and "train" not in job["measure"]:
            job["phase"] = "forward"
        return job

    def follow(self, state: TargetState, job: Mapping[str, Any], limits: Limits, result: Mapping[str, Any], *,
               python: str, force: bool = False) -> None:
        """After ``state`` took ``result`` of ``job`` (from a worker or the cache): keep the
        estimate it holds or is running when its key is unchanged (unless ``force``: the user
        asked to analyse again), take a kept one of the new key, or start one. A result that
        carries a training report itself (**Measure training step**, phase ``all``) replaces the
        estimate and stops the one running."""
        if not self.enabled or not result.get("ok"):
            return
        scheduler = self.owner.scheduler
        if "train" in (result.get("measurements") or {}):
            scheduler.cancel(_job_key(state))
            state.training_running = False
            state.training_key = training_key(job, result, python) if not _failed(result) else None
            return
        key = training_key(job, result, python)
        if key is None or job.get("phase") != "forward":
            return
        if key == state.training_key and not force and (state.training_running or "train" in state.measurements):
            return
        state.training_key = key
        kept = None if force else self.owner.cache.get(key, lambda rel: None)
        if kept is not None:
            scheduler.cancel(_job_key(state))
            state.training_running = False
            state.measurements["train"] = kept["measurements"]["train"]
            return
        state.measurements.pop("train", None)  # an estimate of another model: never shown as this one's
        state.training_running = True
        estimate = {**job, "phase": "training"}
        scheduler.submit(_job_key(state), lambda: self._run(state, estimate, limits, key))

    async def _run(self, state: TargetState, job: dict, limits: Limits, key: str) -> None:
        owner = self.owner
        task = asyncio.current_task()
        owner.listener.job_started(state, task, f"{ESTIMATING} {state.key.name}")
        try:
            result = await owner.run_job(job, python=limits.python, timeout_s=limits.timeout_s,
                                         memory_mb=limits.memory_mb)
        except asyncio.CancelledError:
            if owner.scheduler.is_current(_job_key(state), task):
                state.training_running = False
                owner.notify_states([state])
            raise
        except Exception as error:  # the client maps worker failures; this is a bug in ours
            log.exception("training estimate job failed")
            result = {"ok": False, "error": {"type": type(error).__name__, "message": str(error)}}
        if not owner.scheduler.is_current(_job_key(state), task) or state.training_key != key:
            return
        state.training_running = False
        train = (result.get("measurements") or {}).get("train") if result.get("ok") else None
        if not isinstance(train, dict):  # the job itself failed: the estimate's record says why
            error = result.get("error") or {}
            train = {"error": {key_: error.get(key_) for key_ in ("type", "message", "file", "line")},
                     "requested": False}
        state.measurements["train"] = train
        if "error" in train:
            state.training_key = None  # the next save tries again: an edit may have fixed it
        else:
            kept = {"ok": True, "phase": "training", "target": result.get("target"), "measurements": {"train": train},
                    "library_stamps": result.get("library_stamps") or {}, "imported_files": []}
            owner.cache.put(key, kept, lambda rel: None)
        owner.notify_states([state])


def _job_key(state: TargetState) -> tuple:
    """The scheduler key of ``state``'s estimate: beside its forward job's, never replacing it."""
    return (state.key, "training")


def _failed(result: Mapping[str, Any]) -> bool:
    record = (result.get("measurements") or {}).get("train")
    return isinstance(record, dict) and "error" in record
