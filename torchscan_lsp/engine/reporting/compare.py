"""``compare_reports`` as the engine exports it.

The comparison reads finished reports and needs no torch, so it lives in
:mod:`torchscan_lsp.contract.compare`, where the session compares a target's result with its
baseline (docs/architecture.md, "Deltas"); this module keeps the engine's import path and re-exports
it unchanged.
"""

from __future__ import annotations

from torchscan_lsp.contract.compare import LayerDiff, MetricDiff, ReportDiff, compare_reports, metric_diff

__all__ = ["MetricDiff", "LayerDiff", "ReportDiff", "compare_reports", "metric_diff"]
