"""``crawl_module``: structure, module formulas and operator FLOPs of one forward call.

The steps, each in its own module:

1. inputs (:mod:`.inputs`): validate the call and prepare its values;
2. recording (:mod:`.recorder`): global module hooks, filtered to the model's modules
   (:mod:`.module_info`: the one leaf rule), record one layer per module call; at each metric-leaf
   call they evaluate module formulas (:mod:`.module_metrics`) while the operator counter is paused;
3. operators (:mod:`.operator_counter`): the same forward runs inside the counting dispatch mode,
   which adds each operator's FLOPs and MACs (:mod:`.operator_table`) to the innermost active call:
   every record gets inclusive ``operator_flops`` and ``operator_macs`` (:mod:`.operator_metrics`);
4. observers (:mod:`.observers`): told of every call and operator of that one pass — first the
   engine's data-flow tracker (:mod:`.dataflow_tracker`: cumulative receptive field, work done in
   containers' own ``forward``, token dependencies, fused kernels), then the caller's;
5. aggregation (:mod:`.totals`): context, totals, and the strict check.

The caller's forward runs exactly once, in evaluation mode under ``torch.no_grad()``. Training flags
are restored and hooks removed whatever happens; an exception of the forward propagates unchanged.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchscan_lsp.contract.strict import strict_rule
from torchscan_lsp.engine.dataflow.tracker import DataFlowTracker
from torchscan_lsp.engine.recording.inputs import PreparedInputs, check_mode, prepare_inputs
from torchscan_lsp.engine.recording.module_info import ModelScan
from torchscan_lsp.engine.recording.module_metrics import call_failed
from torchscan_lsp.engine.recording.operator_counter import OperatorCounter
from torchscan_lsp.engine.recording.operator_metrics import (
    add_layer_operator_metrics,
    not_requested_macs_total,
    operator_macs_total,
)
from torchscan_lsp.engine.recording.operators import counter_report, not_requested_flop_report
from torchscan_lsp.engine.recording.param_stats import add_packed_totals, initialized, mark_uninitialized
from torchscan_lsp.engine.recording.hooks import install_hooks, remove_hooks
from torchscan_lsp.engine.recording.recorder import CallRecorder
from torchscan_lsp.engine.report import SCHEMA_VERSION, AnalysisReport, LayerReport
from torchscan_lsp.engine.recording.totals import build_context, check_strict, forward_totals, model_totals

__all__ = ["crawl_module", "record_pass", "run_forward"]


def run_forward(
    module: nn.Module,
    inputs: PreparedInputs,
    recorder: CallRecorder,
    counter: OperatorCounter | None,
    modules: list[nn.Module] | None = None,
    *,
    eval_mode: bool = True,
) -> None:
    """Run ``module`` once on ``inputs`` with the recorder's hooks and, if given, the counter; then
    count the records' parameters (:meth:`CallRecorder.count_parameters`).

    With ``eval_mode`` the model is put in evaluation mode for the call (``module.eval()``, skipped
    when no module is training); every module's ``training`` flag is restored by assignment
    afterwards (so no ``train()`` override runs and BatchNorm statistics stay as they were), even
    when the forward raises. ``modules``: ``list(module.modules())`` when the caller has it already.
    """
    modules = list(module.modules()) if modules is None else modules
    training = [m.training for m in modules]
    handles: list[Any] = []
    try:
        handles = install_hooks(module, recorder)
        if eval_mode and True in training:
            module.eval()
        with torch.no_grad():
            if counter is None:
                module(*inputs.args, **inputs.kwargs)
            else:
                with counter:
                    module(*inputs.args, **inputs.kwargs)
    finally:
        recorder.close()
        remove_hooks(handles)
        for submodule, flag in zip(modules, training):
            if submodule.training is not flag:
                submodule.training = flag
    recorder.count_parameters()


def _collector_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Pause Python's cyclic garbage collector while ``fn`` runs (as ``timeit`` does).

    An analysis allocates thousands of small dicts and lists (one layer record per module call).
    With the collector on, those allocations trigger collections that traverse every object of the
    process — on a model of many small modules that costs more than the analysis itself. The
    records form no reference cycles and are freed by reference counting when the report is
    dropped. The collector's previous state is restored afterwards, even when ``fn`` raises.
    """

    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        collecting = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if collecting:
                gc.enable()

    return paused


@_collector_paused
def record_pass(
    module: nn.Module,
    args: tuple = (),
    kwargs: dict[str, Any] | None = None,
    *,
    observers: Any = (),
    eval_mode: bool = True,
) -> list[LayerReport]:
    """Run ``module(*args, **kwargs)`` once under the engine's recording hooks, in structure mode
    (no operator counter, no formulas), telling ``observers`` of every call; return the layer records.

    The values are passed unchanged (copy them first if the forward may modify them). Under
    ``torch.no_grad()``; ``eval_mode`` as in :func:`run_forward`. An exception of the forward
    propagates unchanged, after every observer was told the calls ended.
    """
    scan = ModelScan(module)
    recorder = CallRecorder(module, infos=scan.infos, observers=observers)
    inputs = PreparedInputs(tuple(args), dict(kwargs or {}), {})
    run_forward(module, inputs, recorder, None, [m for _, m in scan.named], eval_mode=eval_mode)
    return recorder.layers  # type: ignore[return-value]


@_collector_paused
def crawl_module(
    module: nn.Module,
    input_shape: Any = None,
    dtype: Any = None,
    *,
    args: tuple | None = None,
    kwargs: dict[str, Any] | None = None,
    device: Any = None,
    strict: bool | str | list[str] | tuple[str, ...] = False,
    mode: str = "full",
    observers: Any = (),
) -> AnalysisReport:
    """Analyse one forward call of ``module``.

    Args:
        module: the model.
        input_shape: shape of one generated input without the batch dimension, e.g. ``(3, 224, 224)``,
            or a non-empty list of such tuples for several positional inputs.
        dtype: a ``torch.dtype`` for every generated input, or one per shape (default: the dtype of
            the model's first parameter or buffer, else ``torch.float32``).
        args: the call's positional values, forwarded unchanged (exclusive with ``input_shape``).
        kwargs: the call's keyword values (str keys), forwarded unchanged.
        device: where generated inputs are created (default: the model's first parameter's device).
        strict: raise :class:`IncompleteAnalysisError` when a count is not complete: ``True``
            is the reference's rule, any total (module FLOPs, MACs, DMAs, operator FLOPs and MACs,
            parameters) or the receptive field partial or unavailable, except a metric that does
            not apply (``metric_not_applicable``); ``"headline"`` checks FLOPs, MACs and parameters,
            each complete when one of its methods is; a list names the counts checked by that rule,
            from ``"flops"``, ``"macs"``, ``"parameters"``, ``"dmas"`` and ``"receptive_field"``
            (:mod:`torchscan_lsp.contract.strict`). Any other value is a ``TypeError``/``ValueError``
            before the model runs.
        mode: ``"full"`` (structure, module formulas and operator FLOPs) or ``"structure"``.
        observers: :class:`~torchscan_lsp.engine.recording.observers.PassObserver` objects told of every module
            call and (full mode) every operator of the one forward pass, after the engine's own
            bookkeeping; they see the same layer indices as the report.

    Returns:
        A JSON-safe :class:`AnalysisReport` (schema version 1).
    """
    check_mode(mode)
    strict_rule(strict)  # refuse a bad value before the model runs
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}.")
    inputs = prepare_inputs(module, input_shape, dtype, args=args, kwargs=kwargs, device=device)
    scan = ModelScan(module)
    parameters, buffers = scan.parameters, scan.buffers
    context = build_context(module, mode, [*parameters, *buffers])
    full = mode == "full"
    # follows the data flow: cumulative receptive field, container work, token dependencies
    tracker = DataFlowTracker((inputs.args, inputs.kwargs), [*parameters, *buffers]) if full else None
    observers = (tracker, *observers) if tracker is not None else tuple(observers)
    _check_observers(observers)
    recorder = CallRecorder(
        module,
        evaluate=tracker.evaluate if tracker is not None else None,
        on_failure=call_failed if full else None,
        infos=scan.infos,
        observers=observers,
        counting=full,
    )
    counter = OperatorCounter(recorder=recorder, observers=observers) if full else None
    recorder.counter = counter
    if tracker is not None:
        tracker.attach(recorder, counter)
    run_forward(module, inputs, recorder, counter, [m for _, m in scan.named])

    layers = recorder.layers
    if counter is not None:
        operator_flops = counter_report(counter)
        add_layer_operator_metrics(recorder)
        macs_total = operator_macs_total(recorder)
    else:
        operator_flops, macs_total = not_requested_flop_report(), not_requested_macs_total()
    ready = initialized(parameters), initialized(buffers)
    totals = {**model_totals(module, *ready), **forward_totals(layers, operator_flops["total"], mode)}
    totals["operator_macs"] = macs_total
    report: AnalysisReport = {
        "schema_version": SCHEMA_VERSION,
        "context": context,
        "inputs": inputs.meta,
        "layers": layers,
        "operator_flops": operator_flops,  # type: ignore[typeddict-item]
        "totals": totals,
        "diagnostics": [*recorder.diagnostics, *operator_flops["diagnostics"]],
    }
    add_packed_totals(report, recorder.infos)  # type: ignore[arg-type]
    if ready[0] is not parameters or ready[1] is not buffers:
        mark_uninitialized(report, scan.named)  # type: ignore[arg-type]
    if tracker is not None:
        tracker.finish(report)  # type: ignore[arg-type]
    if strict:
        check_strict(report, strict)  # type: ignore[arg-type]
    return report


def _check_observers(observers: tuple) -> None:
    """Refuse an observer that has none of :class:`~torchscan_lsp.engine.recording.observers.PassObserver`'s methods."""
    for observer in observers:
        if not any(callable(getattr(observer, name, None)) for name in _OBSERVER_METHODS):
            raise TypeError(
                f"observers must be PassObserver instances (or have one of its methods), got {type(observer).__name__}."
            )


_OBSERVER_METHODS = ("call_started", "call_ended", "operator_ran")
