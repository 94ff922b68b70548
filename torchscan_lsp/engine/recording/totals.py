"""Aggregation: the report's context, its model and forward totals, and the strict-mode check."""

from __future__ import annotations

import platform
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from torchscan_lsp.contract.metrics import aggregate
from torchscan_lsp.contract.strict import strict_failures, strict_rule
from torchscan_lsp.engine.report import (
    EXECUTION_MODE,
    METHOD_MODULE_FORMULA,
    METHOD_NOT_REQUESTED,
    METHOD_PYTORCH,
    PACKAGE,
    IncompleteAnalysisError,
    MetricResult,
    metric_result,
)
from torchscan_lsp.version import package_version

__all__ = ["build_context", "model_totals", "aggregate_metric", "forward_totals", "check_strict"]


def build_context(
    module: nn.Module, mode: str, tensors: list[torch.Tensor] | None = None
) -> dict[str, Any]:
    """Where and how the analysis ran; taken before the forward (``training_before``).

    ``tensors``: the model's parameters and buffers, when the caller has them already.
    """
    if tensors is None:
        tensors = [*module.parameters(), *module.buffers()]
    cls = type(module)
    context: dict[str, Any] = {
        "torchscan_version": package_version(),
        "package": PACKAGE,
        "torch_version": str(torch.__version__),
        "python_version": platform.python_version(),
        "model_type": f"{cls.__module__}.{cls.__qualname__}",
        "execution_mode": EXECUTION_MODE,
        "training_before": bool(module.training),
        "devices": sorted({str(device) for device in {t.device for t in tensors}}),
        "dtypes": sorted({str(dtype) for dtype in {t.dtype for t in tensors}}),
    }
    if mode == "structure":
        context["analysis_mode"] = "structure"
    return context


def _model_metric(value: int, unit: str) -> MetricResult:
    return metric_result(status="complete", value=int(value), unit=unit, scope="model", method=METHOD_PYTORCH)


def model_totals(
    module: nn.Module,
    parameters: list[torch.Tensor] | None = None,
    buffers: list[torch.Tensor] | None = None,
) -> dict[str, MetricResult]:
    """Parameter and buffer totals; PyTorch's iterators de-duplicate shared tensors."""
    if parameters is None:
        parameters = list(module.parameters())
    if buffers is None:
        buffers = list(module.buffers())
    trainable = frozen = parameter_bytes = 0
    for param in parameters:
        numel = param.numel()
        parameter_bytes += numel * param.element_size()
        if param.requires_grad:
            trainable += numel
        else:
            frozen += numel
    buffer_elements = buffer_bytes = 0
    for buffer in buffers:
        numel = buffer.numel()
        buffer_elements += numel
        buffer_bytes += numel * buffer.element_size()
    return {
        "parameters": _model_metric(trainable + frozen, "elements"),
        "trainable_parameters": _model_metric(trainable, "elements"),
        "frozen_parameters": _model_metric(frozen, "elements"),
        "parameter_bytes": _model_metric(parameter_bytes, "bytes"),
        "buffer_elements": _model_metric(buffer_elements, "elements"),
        "buffer_bytes": _model_metric(buffer_bytes, "bytes"),
    }


def aggregate_metric(metrics: Iterable[MetricResult | dict[str, Any]], unit: str) -> MetricResult:
    """Sum layer metrics into a ``forward`` module-formula total with the contract's one rule
    (:func:`torchscan_lsp.contract.metrics.aggregate`): all complete, a complete sum; something
    known, a partial lower bound; nothing, unavailable."""
    return aggregate(metrics, unit=unit, scope="forward", method=METHOD_MODULE_FORMULA)


def forward_totals(
    layers: list[dict[str, Any]], operator_total: MetricResult, mode: str
) -> dict[str, MetricResult]:
    """``module_flops``, ``operator_flops``, ``macs``, ``dmas`` totals, in the contract's order."""
    if mode == "structure":
        def not_requested(unit: str) -> MetricResult:
            return metric_result(status="unavailable", unit=unit, scope="forward", method=METHOD_NOT_REQUESTED)

        return {
            "module_flops": not_requested("FLOPs"),
            "operator_flops": operator_total,
            "macs": not_requested("MACs"),
            "dmas": not_requested("DMAs"),
        }

    def total(name: str, unit: str) -> MetricResult:
        return aggregate_metric((layer["metrics"][name] for layer in layers if name in layer["metrics"]), unit)

    return {
        "module_flops": total("module_flops", "FLOPs"),
        "operator_flops": operator_total,
        "macs": total("macs", "MACs"),
        "dmas": total("dmas", "DMAs"),
    }


def check_strict(report: dict[str, Any], strict: Any = True) -> None:
    """Raise :class:`IncompleteAnalysisError` when a count ``strict`` checks is not complete
    (:mod:`torchscan_lsp.contract.strict`; docs/report-schema.md, strict mode).

    ``strict=True`` is the reference's rule: every total and the receptive field complete, by every
    method. ``strict="headline"`` checks FLOPs, MACs and parameters, each complete when one of its
    methods is (``module_flops`` or ``operator_flops``); a list names the counts checked by that
    rule. Totals that were not requested (structure mode) and ``metric_not_applicable``
    diagnostics never fail it.
    """
    failures = strict_failures(report, strict_rule(strict))
    if failures:
        raise IncompleteAnalysisError(report, failures)
