"""The analysis engine: a pure library that measures a model and returns JSON-safe reports.

Its public names are declared once, in :data:`torchscan_lsp.contract.api.ENGINE_EXPORTS`.
"""

from torchscan_lsp.contract.api import ENGINE_EXPORTS
from torchscan_lsp.engine.measuring.benchmarks import BenchmarkComparison, compare_benchmarks
from torchscan_lsp.engine.measuring.ceilings import measure_ceilings
from torchscan_lsp.engine.reporting.compare import ReportDiff, compare_reports
from torchscan_lsp.engine.crawler import crawl_module
from torchscan_lsp.engine.reporting.html import render_report
from torchscan_lsp.engine.measuring.latency import BenchmarkReport, measure_latency
from torchscan_lsp.engine.measuring.layer_latency import measure_layer_latency
from torchscan_lsp.engine.measuring.layer_latency_report import LayerLatencyReport
from torchscan_lsp.engine.measuring.memory import MemoryReport, measure_peak_memory
from torchscan_lsp.engine.recording.operators import FlopReport, measure_flops
from torchscan_lsp.engine.report import (
    AnalysisReport,
    Diagnostic,
    IncompleteAnalysisError,
    LayerReport,
    MetricResult,
    metric_result,
)
from torchscan_lsp.engine.reporting.roofline import roofline_report
from torchscan_lsp.engine.reporting.summary import summary

__all__ = list(ENGINE_EXPORTS)

# The training tools stand on torch.distributed's trackers, whose import pulls in Dynamo and Inductor
# (about 1.4 s here): a forward analysis never needs them, so they load on first use, and the warm
# parent preloads them after its first job rather than before its first hints.
_TRAINING_EXPORTS = ("analyse_training_step", "estimate_training_memory", "measure_training_memory", "plan_training")


def __getattr__(name: str):
    """Resolve the training tools (:mod:`torchscan_lsp.engine.training`) on first use."""
    if name in _TRAINING_EXPORTS:
        from torchscan_lsp.engine import training

        return getattr(training, name)
    raise AttributeError(f"module 'torchscan_lsp.engine' has no attribute {name!r}")
