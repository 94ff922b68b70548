"""The one place a worker job is built, for the editor, ``check`` and ``scan`` alike.

A target's options come in three layers, later ones winning: the workspace's
``[tool.torchscan-lsp]`` defaults, the ``torchscan.device`` setting (which itself defaults to the
table's ``device``), and the target's own pragma or decorator options. ``measure`` and ``timeout``
are lifted out of the options into the job: the measurements join the ones asked for, and the
time limit is the target's ``timeout``, else the ``torchscan.timeoutSeconds`` setting (which
defaults to the table's ``timeout``). The memory limit and the interpreter are the settings'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from torchscan_lsp.contract.messages import RENDER_ATTACHMENTS, Job, PlanJob, RenderJob, analysis_job, plan_job, render_job
from torchscan_lsp.session.settings import Settings
from torchscan_lsp.targets.options import merge_options

__all__ = ["JOB_ONLY_OPTIONS", "TIMING", "Limits", "build_job", "build_plan_job", "build_render_job", "target_options",
           "timing_asked", "wants_plan"]

JOB_ONLY_OPTIONS = ("measure", "timeout")
"""Target options that shape the job rather than the analysis."""

TIMING = frozenset({"latency", "layer_latency"})
"""Measurements that time the model: jobs asking for one run alone, never beside another job."""


@dataclass(frozen=True)
class Limits:
    """How one job runs: its interpreter (``None``: this one), wall-clock limit in seconds and
    memory limit in MiB."""

    python: str | None
    timeout_s: float
    memory_mb: float


def build_job(
    root: str,
    path: str,
    target: Any,
    defaults: Mapping[str, Any],
    settings: Settings,
    *,
    measure: Iterable[str] = (),
    source_text: str | None = None,
) -> tuple[Job, Limits]:
    """The job for ``target`` (a :class:`~torchscan_lsp.targets.Target`: ``name``, ``options``)
    of the file at ``path`` under ``root``, and its limits.

    ``source_text``, when given, is what the worker runs instead of the file on disk (an unsaved
    buffer).
    """
    own = dict(getattr(target, "options", {}) or {})
    options = target_options(target, defaults, settings)
    wanted = [*(options.get("measure") or []), *measure]
    job = analysis_job(root, path, target.name, {k: v for k, v in options.items() if k not in JOB_ONLY_OPTIONS},
                       source_text=source_text, measure=wanted)
    limits = Limits(settings.python, float(own.get("timeout") or settings.timeoutSeconds), settings.memoryLimitMb)
    return job, limits


def target_options(target: Any, defaults: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    """``target``'s options over the workspace's defaults and the ``device`` setting (``train`` and
    ``plan`` dicts merge per key: :func:`~torchscan_lsp.targets.options.merge_options`)."""
    own = dict(getattr(target, "options", {}) or {})
    return merge_options({**defaults, "device": settings.device}, own)


def wants_plan(options: Mapping[str, Any]) -> bool:
    """Whether merged target options ask for a training plan after each analysis: ``plan=True`` or
    a plan dict, the target's own or the workspace's ``[tool.torchscan-lsp.plan]`` (as its ``train``
    options ask for the training estimate); ``plan=False`` on a target turns it off."""
    return options.get("plan") not in (None, False)


def build_plan_job(root: str, path: str, target: Any, defaults: Mapping[str, Any], settings: Settings, *,
                   source_text: str | None = None) -> tuple[PlanJob, Limits]:
    """The plan job of ``target`` (its options as for :func:`build_job`; no ``plan`` option means
    the plan's defaults) and its limits: the time limit is ``torchscan.planTimeoutSeconds``."""
    options = {k: v for k, v in target_options(target, defaults, settings).items() if k not in JOB_ONLY_OPTIONS}
    if not options.get("plan"):
        options["plan"] = True
    job = plan_job(root, path, target.name, options, source_text=source_text)
    return job, Limits(settings.python, float(settings.planTimeoutSeconds), settings.memoryLimitMb)


def timing_asked(measure: Iterable[str], targets: Iterable[Any]) -> bool:
    """Whether the measurements asked for, or any target's own ``measure`` option, time a model."""
    if TIMING & set(measure):
        return True
    return any(TIMING & set((getattr(t, "options", {}) or {}).get("measure") or ()) for t in targets)


def build_render_job(root: str, report: Mapping[str, Any], measurements: Mapping[str, Any] | None = None) -> RenderJob:
    """The job that renders ``report`` as HTML with its latency, per-layer latency, memory and
    training-step measurements attached (those that did not fail)."""
    attached = {name: m for name, m in (measurements or {}).items()
                if name in RENDER_ATTACHMENTS and isinstance(m, dict) and "error" not in m}
    return render_job(root, report, attached)
