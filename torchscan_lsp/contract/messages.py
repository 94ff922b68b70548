"""The messages that cross a process boundary: jobs, results, failures, source maps, and the
warm parent's requests and events (docs/architecture.md, "The worker job protocol").

One table of message types read by both sides, as plain TypedDicts over JSON: the session writes
jobs and reads results; the worker reads jobs and writes results; the server side of the warm pool
writes :class:`WarmRequest` lines and reads :class:`WarmEvent` lines. :func:`failure` is the one
builder of a failed result, whoever fails (the worker's steps, its entry point, the supervisor
that stopped it). Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NotRequired, TypedDict

from torchscan_lsp.contract.report import AnalysisReport
from torchscan_lsp.contract.source_map import (AssignedName, ClassSite, LineOutput, ModuleSite, OperatorSite,
                                               ParameterSite, ShapeRange, Site, SourceMap, UncalledSite, is_library)
from torchscan_lsp.contract.tracebacks import TracebackFrame

__all__ = [
    "ERROR_KINDS",
    "MEASUREMENT_KINDS",
    "JOB_PHASES",
    "Job",
    "PlanJob",
    "RenderJob",
    "ErrorInfo",
    "Site",
    "ModuleSite",
    "OperatorSite",
    "LineOutput",
    "ShapeRange",
    "AssignedName",
    "ClassSite",
    "UncalledSite",
    "ParameterSite",
    "SourceMap",
    "is_library",
    "Result",
    "WarmRequest",
    "PreloadRequest",
    "ImportRequest",
    "LingerRequest",
    "WarmEvent",
    "analysis_job",
    "plan_job",
    "render_job",
    "render_arguments",
    "RENDER_ATTACHMENTS",
    "render_attachments",
    "failure",
]

#: What a failed result's ``error.kind`` can be: a step of the job (``import``, ``options``,
#: ``factory``, ``result``, ``forward``, ``strict``) or how the process was stopped.
ERROR_KINDS = ("import", "options", "factory", "result", "forward", "strict", "timeout", "memory", "crash",
               "cancelled")

#: Measurements a job may ask for besides the analysis.
MEASUREMENT_KINDS = ("latency", "memory", "layer_latency", "train", "roofline")

#: What a job runs (:class:`Job`'s ``phase``): ``all``, the analysis and every measurement, the
#: training estimate that a target's ``train`` options ask for included; ``forward``, the same
#: without that estimate (the editor runs it as a job of its own, so that it never delays the
#: hints); ``training``, that estimate alone.
JOB_PHASES = ("all", "forward", "training")


class Job(TypedDict):
    """One analysis: the target ``target`` of ``file`` (absolute) under ``workspace_root``
    (absolute), with its engine ``options`` (``input_shape`` as JSON lists, ``dtype`` names,
    ``device``, ``mode``, ``strict``), the buffer text to run instead of the file (``None``: the
    file on disk), the measurements to run after it (names from :data:`MEASUREMENT_KINDS`) and what
    of it runs (``phase``, one of :data:`JOB_PHASES`; ``all`` when absent)."""

    workspace_root: str
    file: str
    target: str
    options: dict[str, Any]
    source_text: str | None
    measure: list[str]
    phase: NotRequired[str]
    memory_mb: NotRequired[float]


class PlanJob(Job):
    """A training plan of the target (``kind`` ``"plan"``): no analysis, no ``measure``; its
    ``options`` also hold ``plan``, ``train`` and ``train_memory``. The client adds ``progress``,
    the file the child appends its progress lines to (:mod:`torchscan_lsp.worker.planning`)."""

    kind: Literal["plan"]
    progress: NotRequired[str]


class RenderJob(TypedDict):
    """An HTML rendering of an analysis ``report`` with the measurements to attach (by kind), the
    counting method its module table headlines (``headline``: ``"operators"`` or ``"modules"``)
    and the diagnostics it shows (``findings``: the editor's, each ``{"file", "line", "severity",
    "code", "message"}``; ``None``: the report's own)."""

    workspace_root: str
    target: None
    report: AnalysisReport | dict[str, Any]
    measurements: dict[str, Any]
    title: str | None
    headline: str
    findings: list[dict[str, Any]] | None


class ErrorInfo(TypedDict):
    """Why a job failed: ``kind`` (one of :data:`ERROR_KINDS`), the exception's type name (``None``
    when no exception was involved), a message, and the workspace-relative file and 1-based line to
    blame (``None`` when unknown: the target's own line is blamed then).

    ``traceback``, when the failure happened below the line blamed (inside an installed library: an
    import that fails in the library's own modules), holds the innermost frames there, outermost
    first, PyTorch's own frames and this project's left out; ``cause``, the exception that started
    it (``"RuntimeError: operator torchvision::nms does not exist"``) when the error raised is
    another one made from it (``raise ... from error``)."""

    kind: str
    type: str | None
    message: str
    file: str | None
    line: int | None
    traceback: NotRequired[list[TracebackFrame]]
    cause: NotRequired[str]


class Result(TypedDict, total=False):
    """What a job returns. ``ok`` true: ``report``, ``source_map``, optional ``measurements`` (by
    kind: a report, or ``{"error": ...}`` for a measurement that failed alone) and ``elapsed_s``;
    for a target with ``train`` options also ``structure``, the digest of the model's structure
    that its training estimate depends on (a ``training`` phase has ``measurements`` only, no
    ``report``, and says so in ``phase`` where it is kept).
    ``ok`` false: ``error``, and for a ``strict`` failure the partial ``report`` and its
    ``source_map``. A plan job's success has ``kind`` ``"plan"`` and ``plan`` (the
    ``plan_training`` report) instead of ``report`` and ``source_map``. Always ``target`` and ``imported_files`` (workspace-relative); ``log_tail`` when
    the process printed anything; ``ok`` true also ``library_stamps``, the modification times (ns)
    of the installed module files the job imported, by absolute path (the result cache's check)."""

    ok: bool
    target: str | None
    report: AnalysisReport | dict[str, Any]
    source_map: SourceMap
    measurements: dict[str, Any]
    imported_files: list[str]
    library_stamps: dict[str, int]
    structure: str
    phase: str
    elapsed_s: float
    error: ErrorInfo
    log_tail: str
    path: str
    kind: str
    plan: dict[str, Any]


class WarmRequest(TypedDict):
    """A line the server writes to a warm parent: fork a child for the job at ``job``, which writes
    its result to ``result`` and its output to ``log``, runs in ``cwd`` under ``memory_mb``, with the
    environment ``env`` when given (a shared warm parent's relay adds its server's); ``id`` (added
    when the line is sent) names the request in the events that answer it."""

    id: NotRequired[int]
    job: str
    result: str
    log: str
    cwd: str
    memory_mb: float | None
    env: NotRequired[dict[str, str]]


class PreloadRequest(TypedDict):
    """A line the server writes to a warm parent: preload the modules ``preload`` (of the workspace
    at ``root``, which the warm parent checks they are not from; ``None``: already checked)."""

    preload: list[str]
    root: str | None


class LingerRequest(TypedDict):
    """A line the server writes to a warm parent: when it listens for several servers
    (:mod:`torchscan_lsp.worker.shared`), stay ``linger_s`` seconds after the last one left
    (``0``: leave with it); an unshared one ends with its server whatever this says."""

    linger_s: float


# "import" is a keyword, so this message type is written in the functional form.
ImportRequest = TypedDict("ImportRequest", {"import": list[str], "root": "str | None"})
ImportRequest.__doc__ = """A line the server writes to a warm parent: import, into itself and before it forks its
next job, what the import statements of the annotated files of the workspace at ``root`` name
(``import``: ``MODULE`` or ``MODULE:NAME`` entries, see
:func:`torchscan_lsp.targets.imports.imported_names`), except what resolves to a workspace file."""


class WarmEvent(TypedDict, total=False):
    """A line a warm parent writes: ``ready`` (with its ``pid``) or ``failed`` (``message``) once,
    then per request ``started`` (``id``, the child's ``pid``) and ``exited`` (``id``, ``pid``,
    ``status`` as :func:`os.waitstatus_to_exitcode` gives it, or ``None`` with a ``message`` when
    the fork failed, and ``retired`` when it was refused because the warm parent retired);
    ``preloaded`` (``modules``: every module preloaded so far, ``packages``: their top-level
    packages, ``skipped``: ``{module: reason}`` new since the last one) after learning libraries;
    ``retire`` (``message``: why) once, when it can no longer fork fresh children."""

    event: Literal["ready", "failed", "started", "exited", "preloaded", "retire"]
    id: int
    pid: int | None
    status: int | None
    message: str
    retired: bool
    modules: list[str]
    packages: list[str]
    skipped: dict[str, str]


def analysis_job(
    workspace_root: str,
    file: str,
    target: str,
    options: Mapping[str, Any],
    *,
    source_text: str | None = None,
    measure: Iterable[str] = (),
) -> Job:
    """Build a :class:`Job`; ``measure`` keeps its first-seen order without repeats."""
    return {
        "workspace_root": workspace_root,
        "file": file,
        "target": target,
        "options": dict(options),
        "source_text": source_text,
        "measure": list(dict.fromkeys(measure)),
    }


#: Measurement kind -> the ``render_report`` keyword that attaches it to an analysis page.
RENDER_ATTACHMENTS = {"latency": "latency", "layer_latency": "layer_latency", "memory": "memory", "train": "training",
                      "roofline": "roofline", "plan": "plan"}


def render_attachments(measurements: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``render_report`` keyword arguments for the measurements (by kind) that can be attached
    and did not fail."""
    return {keyword: measurements[kind] for kind, keyword in RENDER_ATTACHMENTS.items()
            if isinstance((measurements or {}).get(kind), dict) and "error" not in measurements[kind]}


def plan_job(workspace_root: str, file: str, target: str, options: Mapping[str, Any], *,
             source_text: str | None = None) -> PlanJob:
    """Build a :class:`PlanJob` of ``target`` with its merged ``options``."""
    return {"workspace_root": workspace_root, "file": file, "target": target, "options": dict(options),
            "source_text": source_text, "measure": [], "kind": "plan"}


def render_job(workspace_root: str, report: Mapping[str, Any], measurements: Mapping[str, Any] | None = None,
               title: str | None = None, *, headline: str = "operators",
               findings: Iterable[Mapping[str, Any]] | None = None) -> RenderJob:
    """Build a :class:`RenderJob` for ``report`` (an analysis report, or a comparison of two) with
    the measurements to attach, the page's ``title`` (``None``: derived from the report), the method
    its module table headlines and the diagnostics it shows (``None``: the report's own)."""
    return {"workspace_root": workspace_root, "target": None, "report": dict(report),
            "measurements": dict(measurements or {}), "title": title, "headline": headline,
            "findings": None if findings is None else [dict(found) for found in findings]}


def render_arguments(job: Mapping[str, Any]) -> dict[str, Any]:
    """The ``render_report`` keyword arguments of a :class:`RenderJob` but its title: its
    attachments (:func:`render_attachments`), its headline and its findings."""
    return {**render_attachments(job.get("measurements")), "headline": job.get("headline") or "operators",
            "findings": job.get("findings")}


def failure(
    target: str | None,
    kind: str,
    message: str,
    *,
    type_name: str | None = None,
    file: str | None = None,
    line: int | None = None,
    imported_files: Iterable[str] = (),
    log_tail: str = "",
    traceback: list[TracebackFrame] | None = None,
    cause: str | None = None,
) -> Result:
    """A failed :class:`Result` of the job for ``target``: the one builder every side uses.

    ``kind`` is one of :data:`ERROR_KINDS`; ``file`` and ``line`` the workspace file and line to
    blame, when known; ``traceback`` and ``cause`` as :class:`ErrorInfo` has them, each added only
    when given. ``log_tail`` is added only when not empty.
    """
    error: ErrorInfo = {"kind": kind, "type": type_name, "message": message, "file": file, "line": line}
    if traceback:
        error["traceback"] = list(traceback)
    if cause:
        error["cause"] = cause
    result: Result = {
        "ok": False,
        "target": target,
        "error": error,
        "imported_files": list(imported_files),
    }
    if log_tail:
        result["log_tail"] = log_tail
    return result
