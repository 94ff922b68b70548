"""The public names are declared once and resolve the same from the engine and the package."""

import torchscan_lsp
from torchscan_lsp import engine
from torchscan_lsp.contract.api import ENGINE_EXPORTS


def test_the_package_and_the_engine_export_the_same_objects():
    assert engine.__all__ == list(ENGINE_EXPORTS)
    for name in ENGINE_EXPORTS:
        assert getattr(torchscan_lsp, name) is getattr(engine, name), name
    assert set(ENGINE_EXPORTS) <= set(torchscan_lsp.__all__)


def test_the_report_types_that_had_drifted_are_exported():
    # measure_peak_memory returns a MemoryReport, measure_layer_latency a LayerLatencyReport,
    # compare_benchmarks a BenchmarkComparison: each importable from the top level
    from torchscan_lsp import BenchmarkComparison, LayerLatencyReport, MemoryReport  # noqa: F401
