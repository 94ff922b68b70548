"""The one place a worker job is built, for the editor, ``check`` and ``scan`` alike.

A target's options come in three layers, later ones winning: the workspace's
``[tool.torchscan-lsp]`` defaults, the ``torchscan.device`` setting (which itself defaults to the
table's ``device``) and the ``torchscan.roofline`` setting when it is set, and the target's own
pragma or decorator options. ``measure`` and ``timeout``
are lifted out of the options into the job: the measurements join the ones asked for, and the
time limit is the target's ``timeout``, else the ``torchscan.timeoutSeconds`` setting (which
defaults to the table's ``timeout``). The memory limit and the interpreter are the settings'.
The options of budgets and baselines (``budget``, ``max_increase``, ``compare_with``) are the
session's and never reach the worker, but for a budget's ``train_memory``: the training step's
memory budget, which the worker holds the estimate against (:func:`effective_options`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from torchscan_lsp.contract.messages import RENDER_ATTACHMENTS, Job, PlanJob, RenderJob, analysis_job, plan_job, render_job
from torchscan_lsp.session.findings import page_findings
from torchscan_lsp.session.settings import Settings
from torchscan_lsp.session.state import TargetState
from torchscan_lsp.targets.budgets import COMPARISON_OPTIONS
from torchscan_lsp.targets.options import merge_options

__all__ = ["JOB_ONLY_OPTIONS", "TIMING", "Limits", "build_job", "build_plan_job", "build_render_job", "effective_options",
           "page_job", "timing_asked", "wants_plan"]

JOB_ONLY_OPTIONS = ("measure", "timeout")
"""Target options that shape the job rather than the analysis."""

TIMING = frozenset({"latency", "layer_latency", "roofline"})
"""Measurements that time the model (a roofline of this machine measures its ceilings, once): jobs
asking for one run alone, never beside another job."""


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
    options = effective_options(target, defaults, settings)
    wanted = [*(options.get("measure") or []), *measure]
    lifted = JOB_ONLY_OPTIONS + COMPARISON_OPTIONS
    job = analysis_job(root, path, target.name, {k: v for k, v in options.items() if k not in lifted},
                       source_text=source_text, measure=wanted)
    limits = Limits(settings.python, float(own.get("timeout") or settings.timeoutSeconds), settings.memoryLimitMb)
    return job, limits


def effective_options(target: Any, defaults: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    """The options ``target`` runs with: the workspace ``defaults``, the ``torchscan.device`` and
    ``torchscan.roofline`` settings (the latter when set), then its own (``train``, ``plan``,
    ``budget`` and ``max_increase`` dicts merged key by key:
    :func:`~torchscan_lsp.targets.options.merge_options`). A budget's ``train_memory`` is the
    training step's memory budget when no ``train_memory`` option is given."""
    editor = {"device": settings.device, **({"roofline": settings.roofline} if settings.roofline else {})}
    options = merge_options({**defaults, **editor}, dict(getattr(target, "options", {}) or {}))
    budget = options.get("budget") or {}
    if budget.get("train_memory") is not None and options.get("train_memory") is None:
        options["train_memory"] = budget["train_memory"]
    return options


def wants_plan(options: Mapping[str, Any]) -> bool:
    """Whether merged target options ask for a training plan after each analysis: ``plan=True`` or
    a plan dict, the target's own or the workspace's ``[tool.torchscan-lsp.plan]`` (as its ``train``
    options ask for the training estimate); ``plan=False`` on a target turns it off."""
    return options.get("plan") not in (None, False)


def build_plan_job(root: str, path: str, target: Any, defaults: Mapping[str, Any], settings: Settings, *,
                   source_text: str | None = None) -> tuple[PlanJob, Limits]:
    """The plan job of ``target`` (its options as for :func:`build_job`; no ``plan`` option means
    the plan's defaults) and its limits: the time limit is ``torchscan.planTimeoutSeconds``."""
    lifted = JOB_ONLY_OPTIONS + COMPARISON_OPTIONS
    options = {k: v for k, v in effective_options(target, defaults, settings).items() if k not in lifted}
    if not options.get("plan"):
        options["plan"] = True
    job = plan_job(root, path, target.name, options, source_text=source_text)
    return job, Limits(settings.python, float(settings.planTimeoutSeconds), settings.memoryLimitMb)


def timing_asked(measure: Iterable[str], targets: Iterable[Any]) -> bool:
    """Whether the measurements asked for, or any target's own ``measure`` option, time a model."""
    if TIMING & set(measure):
        return True
    return any(TIMING & set((getattr(t, "options", {}) or {}).get("measure") or ()) for t in targets)


def build_render_job(root: str, report: Mapping[str, Any], measurements: Mapping[str, Any] | None = None,
                     title: str | None = None, *, headline: str = "operators",
                     findings: Iterable[Mapping[str, Any]] | None = None) -> RenderJob:
    """The job that renders ``report`` (an analysis report, or a comparison) as HTML with its
    latency, per-layer latency, memory and training-step measurements attached (those that did not
    fail), titled ``title`` (``None``: the report's own title), its module table headlining
    ``headline``'s counts and its diagnostics the ``findings`` given (the editor's)."""
    attached = {name: m for name, m in (measurements or {}).items()
                if name in RENDER_ATTACHMENTS and isinstance(m, dict) and "error" not in m}
    return render_job(root, report, attached, title, headline=headline, findings=findings)


def page_job(state: TargetState, settings: Settings, *, receptive_field_notes: bool | None = None) -> RenderJob:
    """The job that renders ``state``'s last good report as the editor shows it: with its
    measurements, its module table headlining the ``torchscan.headline`` method, its diagnostics
    the editor's findings (:func:`~torchscan_lsp.session.findings.page_findings`; receptive-field
    notes as ``torchscan.receptiveFieldNotes`` says, unless ``receptive_field_notes`` does: ``scan
    --receptive-field-notes``). Raises ``ValueError`` when ``state`` has no good result."""
    if state.view is None:
        raise ValueError(f"{state.key.name}: a report page needs a good result, and there is none.")
    notes = settings.receptiveFieldNotes if receptive_field_notes is None else receptive_field_notes
    findings = page_findings(state, settings.headline, receptive_field_notes=notes)
    return build_render_job(state.key.root, state.view.report, state.measurements, headline=settings.headline,
                            findings=findings)
