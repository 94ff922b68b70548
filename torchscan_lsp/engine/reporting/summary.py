"""``summary``: crawl a model and print its table."""

from __future__ import annotations

from typing import Any

from torch import nn

from torchscan_lsp.engine.crawler import crawl_module
from torchscan_lsp.engine.report import AnalysisReport
from torchscan_lsp.engine.reporting.table import aggregate_info, format_info

__all__ = ["summary"]


def summary(
    module: nn.Module,
    input_shape: Any = None,
    wrap_mode: str | None = "mid",
    max_depth: int | None = None,
    receptive_field: bool = False,
    effective_rf_stats: bool = False,
    *,
    dtype: Any = None,
    args: tuple | None = None,
    kwargs: dict[str, Any] | None = None,
    device: Any = None,
    strict: bool | str | list[str] | tuple[str, ...] = False,
    mode: str = "full",
) -> AnalysisReport:
    """Crawl ``module`` as :func:`crawl_module` does, print the summary table, return the report.

    ``max_depth`` only filters the printed rows; the returned report is the complete one. In strict
    mode (``strict`` as :func:`crawl_module` takes it) an incomplete analysis raises before
    anything is printed.
    """
    report = crawl_module(
        module, input_shape, dtype, args=args, kwargs=kwargs, device=device, strict=strict, mode=mode
    )
    shown = report if max_depth is None else aggregate_info(report, max_depth)  # type: ignore[arg-type]
    print(format_info(shown, wrap_mode, receptive_field, effective_rf_stats))  # type: ignore[arg-type]
    return report
