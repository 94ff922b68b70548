"""torchscan-lsp: what a PyTorch model costs, shown in the code.

The analysis engine (``torchscan_lsp.engine``) is re-exported here, so that
``from torchscan_lsp import crawl_module`` works as ``from torchscan import crawl_module`` does.

The re-export is lazy (PEP 562): importing ``torchscan_lsp.server`` or ``torchscan_lsp.targets``
must never import torch, because the language server process stays torch-free by design.
"""

from importlib import import_module

from torchscan_lsp.targets.decorator import target

_ENGINE_NAMES = (
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
    "measure_latency",
    "measure_layer_latency",
    "BenchmarkReport",
    "compare_benchmarks",
    "render_report",
    "analyse_training_step",
)

__all__ = [*_ENGINE_NAMES, "target", "__version__"]


def __getattr__(name: str):
    """Resolve engine names and ``__version__`` on first use (never cached, see spec A.9)."""
    if name == "__version__":
        from torchscan_lsp.version import package_version

        return package_version()
    if name in _ENGINE_NAMES:
        return getattr(import_module("torchscan_lsp.engine"), name)
    raise AttributeError(f"module 'torchscan_lsp' has no attribute {name!r}")
