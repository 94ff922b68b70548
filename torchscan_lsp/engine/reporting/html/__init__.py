"""Offline HTML evidence for reports (docs/measurement.md, "Offline HTML").

:func:`render_report` writes **one self-contained HTML file**: inline CSS, no script, no external
style sheet, font, image or link, and a ``Content-Security-Policy`` that forbids every network
fetch (``default-src 'none'``), so opening it can never reach the network. It renders:

* an **analysis report** (``crawl_module``): totals with their statuses, the module table (each
  call's FLOPs and MACs by the headline method, ``headline=``, the dispatched operators by
  default, with a bar for its share of that method's total, then by the other method), the
  diagnostics (``findings=``: those the editor shows, folded by line and cause, instead of the
  report's own), the inputs and the execution context.
  Per-layer latency is attached with the optional ``layer_latency=`` argument (a report from
  ``measure_layer_latency``): its records are joined to the analysis layers by ``(path,
  call_index)`` and add a latency column with a bar for each call's share of the layer-latency sum.
  ``latency=`` (a ``measure_latency`` report of the whole model) and ``memory=`` (a
  ``measure_peak_memory`` report) add their totals beside the analysis totals, ``training=`` (an
  ``analyse_training_step`` report) the training step's section, ``roofline=`` (a roofline report)
  the roofline chart (:mod:`.roofline`: inline SVG, log-log, one point per layer under the device's
  ceilings), ``plan=`` (a ``plan_training`` report) the training plan's;
* a **latency report** (``measure_latency``), a **per-layer latency report**
  (``measure_layer_latency``), a **benchmark comparison** (``compare_benchmarks``), a **report
  comparison** (``compare_reports``), a **peak-memory report** (``measure_peak_memory``) or a
  **training-step report** (``analyse_training_step``: FLOPs by phase, peak memory by category from
  both methods, drawn as bars) or a **training plan** (``plan_training``: the policies' largest
  batches, and each one's memory against the batch drawn as inline SVG, stacked by category, with
  the fitted peak and the budget line).

The kind of document is detected from its keys; anything else raises ``ValueError`` (``TypeError``
for a non-dict). Every string that comes from the model or the report (names, paths, types,
messages, versions) is escaped with :func:`html.escape`. The file is written atomically (a
temporary file in the same directory, then renamed), so a failure never leaves half a file.

One module per kind of page: :mod:`.analysis`, :mod:`.measurements` (latency, per-layer latency,
peak memory), :mod:`.comparisons` (benchmarks, reports), :mod:`.training`, :mod:`.plan`; :mod:`.page`
holds what they share.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from torchscan_lsp.contract.methods import METHODS, OPERATORS
from torchscan_lsp.contract.report import SCHEMA_VERSION
from torchscan_lsp.engine.reporting.html.analysis import render_analysis
from torchscan_lsp.engine.reporting.html.comparisons import render_benchmark_comparison, render_report_comparison
from torchscan_lsp.engine.reporting.html.measurements import render_latency, render_layer_latency, render_memory
from torchscan_lsp.engine.reporting.html.page import CONTENT_SECURITY_POLICY, page
from torchscan_lsp.engine.reporting.html.roofline import roofline_section
from torchscan_lsp.engine.reporting.html.plan import plan_section, render_plan
from torchscan_lsp.engine.reporting.html.training import render_training, training_section

__all__ = ["render_report", "report_kind", "CONTENT_SECURITY_POLICY", "KINDS"]

#: Document kinds :func:`render_report` understands.
KINDS = ("analysis", "latency", "layer_latency", "benchmark_comparison", "report_comparison", "peak_memory",
         "training_step", "training_plan")

_MEMORY_METRICS = ("pytorch_tensor_bytes", "pytorch_reserved_bytes")

_RENDERERS = {
    "latency": render_latency,
    "layer_latency": render_layer_latency,
    "benchmark_comparison": render_benchmark_comparison,
    "report_comparison": render_report_comparison,
    "peak_memory": render_memory,
    "training_step": render_training,
    "training_plan": render_plan,
}


def report_kind(document: Any) -> str:
    """Which of :data:`KINDS` ``document`` is.

    Raises:
        TypeError: ``document`` is not a dict.
        ValueError: the kind cannot be recognised, or the schema version is not supported.
    """
    if not isinstance(document, dict):
        raise TypeError(f"render_report needs a report dict, got {type(document).__name__}.")
    declared = document.get("kind")
    if declared in ("latency", "layer_latency", "benchmark_comparison", "training_step", "training_plan"):
        kind = declared
    elif "metric" in document and "peak_bytes" in document and document.get("metric") in _MEMORY_METRICS:
        kind = "peak_memory"
    elif isinstance(document.get("layers"), list) and isinstance(document.get("totals"), dict) and "inputs" in document:
        kind = "analysis"
    elif (
        isinstance(document.get("layers"), dict)
        and {"added", "removed", "changed"} <= set(document["layers"])
        and isinstance(document.get("totals"), dict)
    ):
        kind = "report_comparison"
    else:
        keys = ", ".join(sorted(map(str, document)))[:300]
        raise ValueError(
            "render_report cannot tell what kind of document this is: expected an analysis report "
            "(crawl_module), a latency report (measure_latency), a per-layer latency report "
            "(measure_layer_latency), a benchmark comparison (compare_benchmarks), a report comparison "
            "(compare_reports), a peak-memory report (measure_peak_memory), a training-step report "
            f"(analyse_training_step) or a training plan (plan_training); got a dict with keys [{keys}]."
        )
    version = document.get("schema_version", SCHEMA_VERSION if kind == "peak_memory" else None)
    if version != SCHEMA_VERSION:
        raise ValueError(f"unsupported schema version: {version!r}")
    return kind


def render_report(
    document: dict[str, Any],
    path: str | os.PathLike[str],
    *,
    layer_latency: dict[str, Any] | None = None,
    latency: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    roofline: dict[str, Any] | None = None,
    plan: dict[str, Any] | None = None,
    title: str | None = None,
    headline: str = OPERATORS.name,
    findings: list[dict[str, Any]] | None = None,
) -> Path:
    """Write ``document`` as one self-contained, offline HTML file at ``path``; return the path.

    Args:
        document: an analysis report, a latency report, a per-layer latency report, a benchmark
            comparison, a report comparison or a peak-memory report (detected from its keys).
        path: where to write (parent directories must exist); replaced atomically.
        layer_latency: with an analysis report only: a ``measure_layer_latency`` report whose
            records are joined to the layers by ``(path, call_index)``.
        latency: with an analysis report only: a ``measure_latency`` report of the whole model.
        memory: with an analysis report only: a ``measure_peak_memory`` report.
        training: with an analysis report only: an ``analyse_training_step`` report.
        roofline: with an analysis report only: a roofline report of it (``roofline_report``): its
            chart and its longest rooflines.
        plan: with an analysis report only: a ``plan_training`` report.
        title: the page title (escaped); by default derived from the document.
        headline: with an analysis report: the counting method whose FLOPs and MACs the module
            table shows first, ``"operators"`` (the dispatched operators, the default) or
            ``"modules"`` (the module formulas), as the editor's ``torchscan.headline``.
        findings: with an analysis report: the diagnostics to show, each ``{"file", "line",
            "severity", "code", "message"}`` (what the editor shows: the language server and
            ``scan --html`` pass its folded findings); ``None``: the report's own diagnostics.

    Raises:
        TypeError: ``document`` is not a dict.
        ValueError: unknown document kind or schema version, an attachment of the wrong kind (or
            given with a document that is not an analysis report), or an unknown ``headline``.
        OSError: the file cannot be written (a missing folder: ``FileNotFoundError``); the error
            names ``path``.
    """
    kind = report_kind(document)
    if roofline is not None and (kind != "analysis" or not isinstance(roofline, dict) or roofline.get("kind") != "roofline"):
        raise ValueError("roofline= must be a roofline report (roofline_report) attached to an analysis report.")
    if headline not in METHODS:
        raise ValueError(f"headline must be one of {', '.join(map(repr, METHODS))}, got {headline!r}.")
    if findings is not None and kind != "analysis":
        raise ValueError(f"findings= can only be given with an analysis report, not with a {kind} document.")
    attachments = {"layer_latency": layer_latency, "latency": latency, "memory": memory, "training": training,
                   "plan": plan}
    expected = {"layer_latency": "layer_latency", "latency": "latency", "memory": "peak_memory",
                "training": "training_step", "plan": "training_plan"}
    for name, attached in attachments.items():
        if attached is None:
            continue
        if kind != "analysis":
            raise ValueError(f"{name}= can only be attached to an analysis report, not to a {kind} document.")
        if report_kind(attached) != expected[name]:
            raise ValueError(f"{name}= must be a {expected[name]} report, got a {report_kind(attached)} document.")
    if kind == "analysis":
        page_title, subtitle, body = render_analysis(document, layer_latency, latency, memory, headline, findings)
        if training is not None:
            body += training_section(training)
        if roofline is not None:
            body += roofline_section(roofline)
        if plan is not None:
            body += plan_section(plan)
    else:
        page_title, subtitle, body = _RENDERERS[kind](document)
    text = page(title if title is not None else page_title, subtitle, body)
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent if str(target.parent) else ".")
    except OSError as error:
        # The file written first is a temporary one beside the target; the caller asked for the target.
        raise type(error)(error.errno, error.strerror, str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target
