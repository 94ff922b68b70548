"""The names the package exports at its top level (``from torchscan_lsp import crawl_module``),
declared once: ``torchscan_lsp.engine`` exports exactly these, and ``torchscan_lsp`` re-exports
them lazily, so that importing the package (the server does) never imports torch."""

from __future__ import annotations

__all__ = ["ENGINE_EXPORTS"]

#: The analysis engine's public names (docs/report-schema.md and docs/measurement.md describe them).
ENGINE_EXPORTS = (
    "crawl_module",
    "summary",
    "measure_flops",
    "FlopReport",
    "compare_reports",
    "ReportDiff",
    "AnalysisReport",
    "LayerReport",
    "MetricResult",
    "Diagnostic",
    "IncompleteAnalysisError",
    "metric_result",
    "measure_peak_memory",
    "MemoryReport",
    "measure_latency",
    "BenchmarkReport",
    "measure_layer_latency",
    "LayerLatencyReport",
    "compare_benchmarks",
    "BenchmarkComparison",
    "render_report",
    "analyse_training_step",
    "estimate_training_memory",
    "measure_training_memory",
    "measure_ceilings",
    "roofline_report",
    "plan_training",
)
