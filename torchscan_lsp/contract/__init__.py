"""The typed contract every layer shares, importing no torch (and nothing else of this package).

* :mod:`.metrics`: metric objects, their statuses, units, scopes and methods; ``metric_result``,
  ``metric_value`` and ``aggregate``, the one rule for summing metrics;
* :mod:`.report`: the analysis report's types, diagnostics, ``IncompleteAnalysisError`` and the
  totals of a module's subtree;
* :mod:`.messages`: jobs, results, failures, source maps and the warm parent's messages;
* :mod:`.compare`: ``compare_reports``, two analysis reports' differences after compatibility checks;
* :mod:`.budget`: cost budgets (``budget={...}``, ``max_increase={...}``) and their amounts as text;
* :mod:`.format`: numbers, bytes, durations, shapes and the ``≥``/``?`` rule as text;
* :mod:`.training`: a training step's ``train={...}`` options and byte sizes (``"24 GiB"``).
"""

from torchscan_lsp.contract.messages import Job, Result, SourceMap, analysis_job, failure, render_job
from torchscan_lsp.contract.metrics import MetricResult, aggregate, metric_result, metric_value, not_counted
from torchscan_lsp.contract.report import (
    AnalysisReport,
    Diagnostic,
    IncompleteAnalysisError,
    LayerReport,
    make_diagnostic,
    subtree_total,
)

__all__ = [
    "AnalysisReport",
    "Diagnostic",
    "IncompleteAnalysisError",
    "Job",
    "LayerReport",
    "MetricResult",
    "Result",
    "SourceMap",
    "aggregate",
    "analysis_job",
    "failure",
    "make_diagnostic",
    "metric_result",
    "metric_value",
    "not_counted",
    "render_job",
    "subtree_total",
]
